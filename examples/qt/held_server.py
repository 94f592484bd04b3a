#!/usr/bin/env python3
"""examples/qt/held_server.py DATA_DIR PORT_FILE --hold-row R [--hold-row R ...]

A file server for test_offscreen.sh's held-back run: serves DATA_DIR over HTTP on a free
loopback port (written to PORT_FILE once it listens), except that a request whose query
says row=R for a held row R gets no answer until the server stops (SIGTERM): that row's
image never arrives, so its placeholder stays on screen while every other row loads.
Logs one line per request on stderr: "held /img/0002.jpg?row=2" or "sent ...".
"""
import argparse
import functools
import http.server
import os
import signal
import sys
import threading
from urllib.parse import parse_qs, urlsplit


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive, as nginx
    held_rows = frozenset()
    released = threading.Event()

    def do_GET(self):
        rows = parse_qs(urlsplit(self.path).query).get("row", [])
        if any(r.isdigit() and int(r) in self.held_rows for r in rows):
            sys.stderr.write("held %s\n" % self.path)
            self.released.wait()
            self.close_connection = True
            return
        sys.stderr.write("sent %s\n" % self.path)
        super().do_GET()

    def log_message(self, *args):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data_dir")
    ap.add_argument("port_file")
    ap.add_argument("--hold-row", type=int, action="append", default=[])
    args = ap.parse_args()
    Handler.held_rows = frozenset(args.hold_row)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(Handler, directory=args.data_dir))
    server.daemon_threads = True

    def stop(*_):
        Handler.released.set()
        threading.Thread(target=server.shutdown).start()
    signal.signal(signal.SIGTERM, stop)
    with open(args.port_file + ".tmp", "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.replace(args.port_file + ".tmp", args.port_file)
    server.serve_forever()
    server.server_close()


if __name__ == "__main__":
    main()
