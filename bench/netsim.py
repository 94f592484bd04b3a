#!/usr/bin/env python3
"""bench/netsim.py: a TCP proxy on loopback that behaves like a slower network.

    netsim.py LISTEN_PORT UPSTREAM_PORT --rtt-ms 100 [--rate BYTES_PER_S] [--ready FILE]
    netsim.py --probe URL [URL ...]     time_starttransfer of each URL over one connection

The scroll benchmark needs conditions with latency, and this container has no netem
(`tc qdisc add ... netem`: "Specified qdisc kind is unknown"), so the delay is ours:

  - every byte crosses the proxy half the round trip later in each direction, so a
    request on a kept-alive connection gets its first response byte one round trip after
    it was sent;
  - a new connection's first bytes wait one more round trip: the TCP (and in real life
    TLS-less HTTP) handshake a real network would make the client wait for;
  - with --rate, everything sent towards the clients shares one link of that many bytes
    per second, first come first served in chunks of CHUNK bytes (a phone on a busy
    network: the table's requests compete with each other, not each with its own pipe).

With --rate only about what the link can send in WIRE_BYTES / rate is buffered ahead of
it, and the upstream socket reads into a small buffer (nginx sends into a small one too,
bench/scroll.sh's listen ... sndbuf), so that nginx's
body_bytes_sent (what the benchmark counts as bytes spent) stays close to what crossed the
link when a client cuts a transfer, as it would over a real bottleneck.
"""
import argparse
import asyncio
import socket
import sys
import time

CHUNK = 16384
WIRE_BYTES = 32768
UPSTREAM_RCVBUF = 16384


class Link:
    """The shared bottleneck towards the clients: when the next chunk may leave."""

    def __init__(self, rate):
        self.rate = rate
        self.free_at = 0.0

    def departure(self, now, size):
        if not self.rate:
            return now
        self.free_at = max(now, self.free_at) + size / self.rate
        return self.free_at


async def pump(reader, writer, one_way, first_extra, link):
    """Copies reader to writer, each chunk delivered one_way seconds after it left (its
    departure, shaped by link), the first one first_extra later still."""
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def deliver():
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if data is None:
                return
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(deliver())
    extra = first_extra
    try:
        while True:
            data = await reader.read(CHUNK if link.rate else 65536)
            now = loop.time()
            if not data:
                queue.put_nowait((now + one_way + extra, None))
                break
            departure = link.departure(now, len(data))
            queue.put_nowait((departure + one_way + extra, data))
            extra = 0.0
            # Read on only when the link has at most WIRE_BYTES to send before this
            # connection's next chunk: the rest stays at the server, not in our buffers.
            if link.rate:
                backlog = departure - now - WIRE_BYTES / link.rate
                if backlog > 0:
                    await asyncio.sleep(backlog)
        await sender
    except (ConnectionError, OSError):
        pass
    finally:
        sender.cancel()


async def handle(client_reader, client_writer, args, link):
    upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    upstream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UPSTREAM_RCVBUF)
    upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    upstream.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(upstream, ("127.0.0.1", args.upstream))
        server_reader, server_writer = await asyncio.open_connection(sock=upstream)
    except OSError:
        upstream.close()
        client_writer.close()
        return
    one_way = args.rtt_ms / 2000.0
    up = pump(client_reader, server_writer, one_way, 2 * one_way, Link(0))
    down = pump(server_reader, client_writer, one_way, 0.0, link)
    # The first side to end (a client cutting its transfer, nginx closing an idle
    # connection) ends both: HTTP clients do not half-close.
    tasks = [asyncio.ensure_future(up), asyncio.ensure_future(down)]
    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in tasks:
        task.cancel()
    for w in (client_writer, server_writer):
        w.transport.abort()


async def serve(args):
    link = Link(args.rate)
    server = await asyncio.start_server(lambda r, w: handle(r, w, args, link), "127.0.0.1", args.port,
                                        reuse_address=True)
    for sock in server.sockets:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if args.ready:
        with open(args.ready, "w") as f:
            f.write("ready\n")
    async with server:
        await server.serve_forever()


def probe(urls):
    """Times each URL over one kept-alive connection: seconds to the first byte and the
    whole response, for the script to check that the proxy delays what it should."""
    import http.client
    import urllib.parse
    conn = None
    for url in urls:
        parts = urllib.parse.urlsplit(url)
        if conn is None:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        start = time.monotonic()
        conn.request("GET", parts.path + ("?" + parts.query if parts.query else ""))
        response = conn.getresponse()
        first_byte = time.monotonic() - start
        body = response.read()
        print(f"{first_byte * 1000:.0f} {(time.monotonic() - start) * 1000:.0f} {len(body)}")
    conn.close()


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--probe":
        probe(sys.argv[2:])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("upstream", type=int)
    parser.add_argument("--rtt-ms", type=float, default=100)
    parser.add_argument("--rate", type=float, default=0, help="bytes per second towards the clients, shared")
    parser.add_argument("--ready", help="written once listening")
    args = parser.parse_args()
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
