#!/usr/bin/env python3
"""Tests/faultserver/faultserver.py: an HTTP(S) server that misbehaves on purpose.

    faultserver.py [--port N] [--tls-port N --cert PEM --key PEM] [--www DIR]
                   [--lifetime SECONDS] [--log FILE]

Python 3 standard library only. Raw sockets, one thread per connection, so that it can
do what a well-behaved server library will not: stop mid-body, lie about the length,
reset the connection, never answer. Listens on 127.0.0.1 only. Port 0 (the default)
lets the kernel choose; once every listener is up it prints one line,

    faultserver ready http=PORT https=PORT pid=PID

(https=0 without --tls-port) and serves until SIGTERM / SIGINT, or until --lifetime
seconds (default 600) have passed, so that an aborted test run leaves nothing behind.

Routes. The first path segment names the behaviour; the segments after it are
key=value parameters (a file name may follow). The query string never changes the
behaviour: tests put a unique one on every URL so that each test counts its own
requests, and redirects carry it along.

  /image[/file=NAME][/ct=KIND]     200 with a real image from --www (default gradient.jpg;
                                   a generated PNG when absent). ct=jpeg|png|html|text|
                                   octet|none overrides the Content-Type (none: no header).
  /echo                            the same as /image; named so that a test that only
                                   wants the request headers (see /__stats) says so
  /slow/delay=MS[/file=NAME]       waits MS before the status line, then the image
  /drip/rate=BPS[/piece=B][/file=NAME][/chunked=1]
                                   the image at BPS bytes/s, B bytes at a time (default
                                   BPS/10), with Content-Length unless chunked=1
  /stall/after=B[/hold=MS][/split=S]
                                   Content-Length of the whole image, B bytes of it, then
                                   nothing until the client closes or MS pass (default
                                   60000), then a close. split=S: the B bytes go as S of
                                   them, a 5 ms pause, then the rest
  /gate/at=B1,B2,...[/file=NAME]   Content-Length of the whole image, its first B1 bytes,
                                   then up to B2 once the test has released this request
                                   (GET /__release), and so on; the rest after the last
                                   release. Held until the client closes or the lifetime
                                   ends: the test, not a clock, decides when bytes come
  /short/send=B                    Content-Length of the whole image, B bytes, then a clean
                                   close (FIN): a truncated body
  /reset/send=B                    the same, then a reset (RST): connection reset mid-body
  /status/code=N[/retry_after=S | /retry_after_date=S]
                                   status N with a small HTML page; Retry-After as S
                                   seconds, or as the HTTP date S seconds from now
  /fail/n=N[/code=C][/retry_after=S][/file=NAME]
                                   the first N requests for this exact URI get status C
                                   (default 503), every later one the image
  /redirect/hops=N[/code=C][/file=NAME]
                                   a chain: C (default 302) to the same URL with hops=N-1,
                                   the image at hops=0
  /loop/a, /loop/b                 redirect to each other, forever
  /to-file                         302 to file://WWW/gradient.jpg (a real file)
  /to-http                         302 to http://127.0.0.1:HTTP_PORT/image (a downgrade
                                   when asked over https)
  /to-https                        302 to https://127.0.0.1:TLS_PORT/image
  /go/to=LOCATION[/code=C]         C (default 302) to LOCATION (percent-encoded in the path:
                                   any URL, absolute or relative), with this request's
                                   query appended; chains of any shape (http -> https ->
                                   http, another host name) are made of these
  /grow[/total=B]                  chunked, no Content-Length: the image's first bytes, then
                                   filler, as fast as the client takes it, until B bytes
                                   (default 64 MiB) or the client goes away
  /length/declared=B               Content-Length B, then filler until B bytes or the client
                                   goes away
  /html                            200 text/html: an HTML error page instead of an image
  /never                           reads the request and never answers (until the client
                                   closes)
  /auth[/realm=R][/code=C][/file=NAME]
                                   the image when the request's Authorization is "Bearer T"
                                   with T the realm's current token (GET /__token), else C
                                   (default 401) with WWW-Authenticate: Bearer; a realm
                                   without a token refuses everything

Control (not counted):
  GET /__stats[?uri=U | ?prefix=P | ?query=Q]
        plain text about the matching requests (all without a selector): U is an exact
        request target (path and query), P a prefix of it, Q an exact query string (what
        follows '?'); percent-encode them. Lines:
          requests N
          connections C          (distinct connections that carried those requests)
          accepted A             (connections accepted since the last reset, http and
                                  https, control ones and failed TLS handshakes included)
          tls_accepted T         (of those, on the https port)
          tls_handshake_failures F
          request I conn=K tls=0|1 at_ms=T status=S bytes=B complete=0|1 closed=0|1 path=PATH
          header I Name: value   (every request header of request I, in order)
        at_ms is the arrival time (ms since the server started), bytes the body bytes handed
        to the kernel, complete whether the response was sent in full, closed whether the
        client went away first (a send failed, or EOF while the server held back).
  GET /__stats.json     everything, as JSON
  GET /__reset          forgets every request and counter
  GET /__release?uri=U  lets the /gate request whose target is U send its next piece
        (releases count: one given before the request arrives is kept for it)
  GET /__token?realm=R&token=T  makes T the current token of /auth's realm R (default
        "default"): the old one is refused from then on (a rotation)
"""
import argparse
import email.utils
import json
import os
import select
import signal
import socket
import ssl
import struct
import sys
import threading
import time
import urllib.parse
import zlib

START = time.monotonic()
FILLER = bytes(range(256)) * 256  # 64 KiB of not-an-image


def now_ms():
    return (time.monotonic() - START) * 1000.0


def tiny_png():
    """A 16x16 RGB PNG, for when no --www directory gives real images."""
    width = height = 16
    raw = b"".join(b"\x00" + b"".join(bytes((x * 16, y * 16, 128)) for x in range(width))
                   for y in range(height))

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


CONTENT_TYPES = {
    "jpeg": "image/jpeg", "png": "image/png", "html": "text/html; charset=utf-8",
    "text": "text/plain", "octet": "application/octet-stream",
}

ERROR_PAGE = (b"<!DOCTYPE html>\n<html><head><title>Oops</title></head>\n"
              b"<body><h1>Something went wrong</h1><p>Please try again later.</p></body></html>\n")


class Stats:
    """Every request and connection, under one lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.requests = []
            self.connections = 0
            self.tls_connections = 0
            self.tls_failures = 0
            self.fail_counters = {}
            self.releases = {}
            self.tokens = {}

    def connection(self, tls):
        with self.lock:
            self.connections += 1
            if tls:
                self.tls_connections += 1
            return self.connections

    def tls_failure(self):
        with self.lock:
            self.tls_failures += 1

    def add(self, record):
        with self.lock:
            self.requests.append(record)

    def release(self, uri):
        """One more piece for the /gate request with target uri; returns the count."""
        with self.lock:
            self.releases[uri] = self.releases.get(uri, 0) + 1
            return self.releases[uri]

    def set_token(self, realm, token):
        with self.lock:
            self.tokens[realm] = token

    def token(self, realm):
        with self.lock:
            return self.tokens.get(realm)

    def released(self, uri):
        with self.lock:
            return self.releases.get(uri, 0)

    def next_failure(self, uri):
        """How many requests for uri came before this one (per-URI counter)."""
        with self.lock:
            seen = self.fail_counters.get(uri, 0)
            self.fail_counters[uri] = seen + 1
            return seen

    def select(self, params):
        with self.lock:
            records = list(self.requests)
            counts = (self.connections, self.tls_connections, self.tls_failures)
        if "uri" in params:
            records = [r for r in records if r["uri"] == params["uri"]]
        elif "prefix" in params:
            records = [r for r in records if r["uri"].startswith(params["prefix"])]
        elif "query" in params:
            records = [r for r in records if r["query"] == params["query"]]
        return records, counts


class Server:
    def __init__(self, args):
        self.args = args
        self.stats = Stats()
        self.images = {}
        self.www = os.path.abspath(args.www) if args.www else None
        self.http_port = 0
        self.tls_port = 0
        self.tls_context = None
        self.log = open(args.log, "a", buffering=1) if args.log else None
        if args.cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(args.cert, args.key)
            ctx.set_alpn_protocols(["http/1.1"])  # HTTP/2 is nginx's part of the tests
            self.tls_context = ctx

    # ---- images ----

    def image(self, name):
        name = name or "gradient.jpg"
        if name not in self.images:
            data = None
            if self.www and "/" not in name and not name.startswith("."):
                try:
                    with open(os.path.join(self.www, name), "rb") as f:
                        data = f.read()
                except OSError:
                    data = None
            if data is None and name == "gradient.jpg":
                data = tiny_png()
            self.images[name] = data
        return self.images[name]

    # ---- listening ----

    def listen(self, port):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
        return sock

    def serve(self):
        plain = self.listen(self.args.port)
        self.http_port = plain.getsockname()[1]
        listeners = [(plain, False)]
        if self.tls_context:
            tls = self.listen(self.args.tls_port)
            self.tls_port = tls.getsockname()[1]
            listeners.append((tls, True))
        for sock, is_tls in listeners:
            threading.Thread(target=self.accept_loop, args=(sock, is_tls), daemon=True).start()
        print(f"faultserver ready http={self.http_port} https={self.tls_port} pid={os.getpid()}",
              flush=True)

    def accept_loop(self, sock, is_tls):
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self.connection, args=(conn, is_tls), daemon=True).start()

    def connection(self, conn, is_tls):
        conn_id = self.stats.connection(is_tls)
        try:
            if is_tls:
                conn.settimeout(10)
                try:
                    conn = self.tls_context.wrap_socket(conn, server_side=True)
                except (ssl.SSLError, OSError):
                    self.stats.tls_failure()
                    return
                conn.settimeout(None)
            buffered = b""
            while True:
                request, buffered = read_request(conn, buffered)
                if request is None:
                    return
                if not self.handle(conn, conn_id, is_tls, request):
                    return
        except OSError:
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass

    # ---- one request ----

    def handle(self, conn, conn_id, is_tls, request):
        """Answers one request; returns whether the connection may serve another."""
        method, target, headers = request
        split = urllib.parse.urlsplit(target)
        path, query = split.path, split.query
        if path in ("/__stats", "/__stats.json", "/__reset", "/__release", "/__token"):
            return self.control(conn, path, query)
        record = {"uri": target, "path": path, "query": query, "conn": conn_id, "tls": is_tls,
                  "at_ms": round(now_ms(), 3), "status": 0, "bytes": 0, "complete": False,
                  "closed": False, "headers": headers, "method": method}
        self.stats.add(record)
        if self.log:
            self.log.write(f"{record['at_ms']:.0f} conn={conn_id} tls={int(is_tls)} {method} {target}\n")
        segments = [s for s in path.split("/") if s]
        route = segments[0] if segments else ""
        params = {}
        for s in segments[1:]:
            if "=" in s:
                k, v = s.split("=", 1)
                params[k] = urllib.parse.unquote(v)
            else:  # a bare segment: which end of /loop, else a file name
                params.setdefault("which" if route == "loop" else "file", s)
        wants_close = any(k.lower() == "connection" and v.lower() == "close" for k, v in headers)
        reply = Reply(conn, record, keep_alive=not wants_close)
        try:
            handler = getattr(self, "route_" + route.replace("-", "_"), None)
            if handler is None:
                reply.simple(404, ERROR_PAGE, "text/html")
            else:
                handler(reply, params, query)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            record["closed"] = True
            return False
        return reply.keep_alive and record["complete"]

    def control(self, conn, path, query):
        if path == "/__reset":
            self.stats.reset()
            body, kind = b"reset\n", "text/plain"
        elif path == "/__release":
            params = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
            body, kind = f"released {self.stats.release(params.get('uri', ''))}\n".encode(), "text/plain"
        elif path == "/__token":
            params = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
            self.stats.set_token(params.get("realm", "default"), params.get("token", ""))
            body, kind = b"token set\n", "text/plain"
        else:
            params = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
            records, (connections, tls_connections, tls_failures) = self.stats.select(params)
            if path == "/__stats.json":
                body = json.dumps({"accepted": connections, "tls_accepted": tls_connections,
                                   "tls_handshake_failures": tls_failures, "requests": records},
                                  indent=1).encode()
                kind = "application/json"
            else:
                lines = [f"requests {len(records)}",
                         f"connections {len(set(r['conn'] for r in records))}",
                         f"accepted {connections}", f"tls_accepted {tls_connections}",
                         f"tls_handshake_failures {tls_failures}"]
                for i, r in enumerate(records):
                    lines.append(f"request {i} conn={r['conn']} tls={int(r['tls'])} at_ms={r['at_ms']:.3f} "
                                 f"status={r['status']} bytes={r['bytes']} complete={int(r['complete'])} "
                                 f"closed={int(r['closed'])} path={r['path']}")
                    for k, v in r["headers"]:
                        lines.append(f"header {i} {k}: {v}")
                body, kind = ("\n".join(lines) + "\n").encode(), "text/plain"
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: " + kind.encode() + b"\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\nCache-Control: no-store\r\n\r\n" + body)
        return True

    # ---- routes ----

    def image_reply(self, reply, params, content_type=None):
        name = params.get("file")
        data = self.image(name)
        if data is None:
            reply.simple(404, ERROR_PAGE, "text/html")
            return
        kind = params.get("ct")
        if kind == "none":
            content_type = None
        elif kind:
            content_type = CONTENT_TYPES.get(kind, kind)
        else:
            content_type = "image/png" if data.startswith(b"\x89PNG") else "image/jpeg"
        reply.simple(200, data, content_type)

    def route_image(self, reply, params, query):
        self.image_reply(reply, params)

    route_echo = route_image

    def route_slow(self, reply, params, query):
        if reply.hold(int(params.get("delay", "1000"))):
            return
        self.image_reply(reply, params)

    def route_drip(self, reply, params, query):
        data = self.image(params.get("file"))
        rate = max(1, int(params.get("rate", "20000")))
        piece = max(1, int(params.get("piece", str(max(1, rate // 10)))))
        chunked = params.get("chunked") == "1"
        kind = "image/png" if data.startswith(b"\x89PNG") else "image/jpeg"
        reply.head(200, [("Content-Type", kind)] +
                   ([("Transfer-Encoding", "chunked")] if chunked else [("Content-Length", str(len(data)))]))
        for offset in range(0, len(data), piece):
            part = data[offset:offset + piece]
            reply.body(part, chunked)
            if offset + piece < len(data) and reply.hold(piece * 1000.0 / rate):
                return
        if chunked:
            reply.send(b"0\r\n\r\n")
        reply.record["complete"] = True

    def route_stall(self, reply, params, query):
        data = self.image(params.get("file"))
        after = min(len(data) - 1, int(params.get("after", "1000")))
        split = min(after, int(params.get("split", str(after))))
        reply.head(200, [("Content-Type", "image/jpeg"), ("Content-Length", str(len(data)))])
        reply.body(data[:split])
        if split < after:
            time.sleep(0.005)
            reply.body(data[split:after])
        reply.hold(int(params.get("hold", "60000")))
        reply.keep_alive = False

    def route_gate(self, reply, params, query):
        data = self.image(params.get("file"))
        cuts = sorted(min(len(data), int(b)) for b in params.get("at", "").split(",") if b)
        reply.head(200, [("Content-Type", "image/jpeg"), ("Content-Length", str(len(data)))])
        sent = 0
        for piece, cut in enumerate(cuts + [len(data)]):
            # Piece n waits for the n-th release; the client going away ends the wait.
            while piece > 0 and self.stats.released(reply.record["uri"]) < piece:
                if reply.hold(20):
                    return
            reply.body(data[sent:cut])
            sent = cut
        reply.record["complete"] = True

    def partial(self, reply, params, reset):
        data = self.image(params.get("file"))
        send = min(len(data) - 1, int(params.get("send", "1000")))
        reply.head(200, [("Content-Type", "image/jpeg"), ("Content-Length", str(len(data)))])
        reply.body(data[:send])
        reply.keep_alive = False
        if reset:  # SO_LINGER with a zero timeout: close() sends RST instead of FIN
            reply.conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def route_short(self, reply, params, query):
        self.partial(reply, params, reset=False)

    def route_reset(self, reply, params, query):
        self.partial(reply, params, reset=True)

    def retry_after_headers(self, params):
        if "retry_after" in params:
            return [("Retry-After", params["retry_after"])]
        if "retry_after_date" in params:
            return [("Retry-After", email.utils.formatdate(time.time() + float(params["retry_after_date"]),
                                                           usegmt=True))]
        return []

    def route_status(self, reply, params, query):
        reply.simple(int(params.get("code", "500")), ERROR_PAGE, "text/html",
                     self.retry_after_headers(params))

    def route_fail(self, reply, params, query):
        seen = self.stats.next_failure(reply.record["uri"])
        if seen < int(params.get("n", "1")):
            reply.simple(int(params.get("code", "503")), ERROR_PAGE, "text/html",
                         self.retry_after_headers(params))
        else:
            self.image_reply(reply, params)

    def redirect(self, reply, location, code=302):
        reply.simple(code, b"", "text/plain", [("Location", location)])

    def route_redirect(self, reply, params, query):
        hops = int(params.get("hops", "1"))
        if hops <= 0:
            self.image_reply(reply, params)
            return
        rest = "".join(f"/{k}={urllib.parse.quote(v, safe='')}" for k, v in params.items() if k != "hops")
        location = f"/redirect/hops={hops - 1}{rest}" + (f"?{query}" if query else "")
        self.redirect(reply, location, int(params.get("code", "302")))

    def route_loop(self, reply, params, query):
        other = "b" if params.get("which") == "a" else "a"
        self.redirect(reply, f"/loop/{other}" + (f"?{query}" if query else ""))

    def route_to_file(self, reply, params, query):
        target = os.path.join(self.www, "gradient.jpg") if self.www else "/etc/hostname"
        self.redirect(reply, "file://" + target)

    def route_to_http(self, reply, params, query):
        self.redirect(reply, f"http://127.0.0.1:{self.http_port}/image" + (f"?{query}" if query else ""))

    def route_to_https(self, reply, params, query):
        self.redirect(reply, f"https://127.0.0.1:{self.tls_port}/image" + (f"?{query}" if query else ""))

    def route_go(self, reply, params, query):
        location = params.get("to", "/image")
        if query:
            location += ("&" if "?" in location else "?") + query
        self.redirect(reply, location, int(params.get("code", "302")))

    def route_auth(self, reply, params, query):
        token = self.stats.token(params.get("realm", "default"))
        sent = [v for k, v in reply.record["headers"] if k.lower() == "authorization"]
        if token is not None and sent == [f"Bearer {token}"]:
            self.image_reply(reply, params)
        else:
            reply.simple(int(params.get("code", "401")), ERROR_PAGE, "text/html",
                         [("WWW-Authenticate", 'Bearer realm="pixload"')])

    def route_grow(self, reply, params, query):
        total = int(params.get("total", str(64 << 20)))
        head = self.image("gradient.jpg")[:4096]
        reply.head(200, [("Content-Type", "image/jpeg"), ("Transfer-Encoding", "chunked")])
        sent = 0
        while sent < total:
            part = head if sent == 0 else FILLER[:min(len(FILLER), total - sent)]
            reply.body(part, chunked=True)
            sent += len(part)
        reply.send(b"0\r\n\r\n")
        reply.record["complete"] = True

    def route_length(self, reply, params, query):
        declared = int(params.get("declared", str(1 << 30)))
        head = self.image("gradient.jpg")[:4096]
        reply.head(200, [("Content-Type", "image/jpeg"), ("Content-Length", str(declared))])
        sent = 0
        while sent < declared:
            part = (head if sent == 0 else FILLER)[:declared - sent]
            reply.body(part)
            sent += len(part)
        reply.record["complete"] = True

    def route_html(self, reply, params, query):
        reply.simple(200, ERROR_PAGE, "text/html; charset=utf-8")

    def route_never(self, reply, params, query):
        reply.hold(self.args.lifetime * 1000.0)
        reply.keep_alive = False


class Reply:
    """Writes one response and keeps its record up to date."""

    def __init__(self, conn, record, keep_alive):
        self.conn = conn
        self.record = record
        self.keep_alive = keep_alive

    def send(self, data):
        try:
            self.conn.sendall(data)
        except OSError:
            self.record["closed"] = True
            raise

    def head(self, status, headers):
        self.record["status"] = status
        lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
        lines += [f"{k}: {v}" for k, v in headers]
        lines.append("Connection: keep-alive" if self.keep_alive else "Connection: close")
        self.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    def body(self, data, chunked=False):
        self.send(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        self.record["bytes"] += len(data)

    def simple(self, status, body, content_type, extra=()):
        headers = ([("Content-Type", content_type)] if content_type else []) + list(extra)
        headers.append(("Content-Length", str(len(body))))
        self.head(status, headers)
        if body:
            self.body(body)
        self.record["complete"] = True

    def hold(self, ms):
        """Sends nothing for ms milliseconds; returns True (and records it) if the client
        closed the connection meanwhile."""
        deadline = time.monotonic() + ms / 1000.0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                readable, _, _ = select.select([self.conn], [], [], min(left, 0.5))
                if readable:
                    peek = self.conn.recv(4096, socket.MSG_PEEK) if not isinstance(self.conn, ssl.SSLSocket) \
                        else self.conn.recv(4096)
                    if not peek:
                        self.record["closed"] = True
                        self.keep_alive = False
                        return True
                    if not isinstance(self.conn, ssl.SSLSocket):
                        # Pipelined bytes: leave them, but don't spin on them.
                        time.sleep(min(left, 0.05))
            except (OSError, ValueError):
                self.record["closed"] = True
                self.keep_alive = False
                return True


REASONS = {200: "OK", 301: "Moved Permanently", 302: "Found", 303: "See Other", 307: "Temporary Redirect",
           308: "Permanent Redirect", 404: "Not Found", 410: "Gone", 429: "Too Many Requests",
           500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}


def read_request(conn, buffered):
    """(method, target, [(name, value)]) and what was read past it, or (None, b"") when
    the client closed or sent garbage."""
    while b"\r\n\r\n" not in buffered:
        if len(buffered) > 65536:
            return None, b""
        try:
            data = conn.recv(65536)
        except OSError:
            return None, b""
        if not data:
            return None, b""
        buffered += data
    head, rest = buffered.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        return None, b""
    headers = []
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers.append((k.strip(), v.strip()))
    length = next((int(v) for k, v in headers if k.lower() == "content-length" and v.isdigit()), 0)
    while len(rest) < length:  # a body (we never get one from pixload): read and drop it
        data = conn.recv(65536)
        if not data:
            return None, b""
        rest += data
    return (parts[0], parts[1], headers), rest[length:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tls-port", type=int, default=0)
    parser.add_argument("--cert", help="PEM certificate chain for the https listener")
    parser.add_argument("--key", help="PEM private key for the https listener")
    parser.add_argument("--www", help="directory with the images to serve (mkfixtures' output)")
    parser.add_argument("--lifetime", type=float, default=600.0, help="seconds before it exits by itself")
    parser.add_argument("--log", help="append one line per request to this file")
    args = parser.parse_args()
    if bool(args.cert) != bool(args.key):
        parser.error("--cert and --key go together")
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, lambda *_: os._exit(0))
    server = Server(args)
    server.serve()
    time.sleep(args.lifetime)
    print(f"faultserver: lifetime of {args.lifetime:.0f} s over, exiting", file=sys.stderr, flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
