#!/usr/bin/env python3
"""bench/network.py: the network path, 1,000 tiny images from nginx on loopback.

    python3 bench/network.py --pixload build/bin/pixload --baseline build/bench/baseline \
        --base-url http://127.0.0.1:PORT --names NAMES --access-log LOG [--runs 5]

NAMES lists the image files (one a line) that nginx serves at BASE_URL/NAME; LOG is its
access log ("$request_uri $status $body_bytes_sent $connection", scripts/nginx.sh).

With images this small (64x64 JPEGs of a kilobyte or two) decoding costs little, so the
CPU per image is mostly the network path: libcurl, the scheduler, the hand-offs between
threads. pixload cannot skip decoding, so three programs run, interleaved, RUNS times:

  pixload fetch --quiet           download + decode + deliver through the queue
  baseline --no-decode            a bare libcurl multi loop that only downloads
  baseline                        the same loop plus libjpeg-turbo decoding (2 threads)

and the report sets pixload against both. Every run gets its own query string on every
URL, so the access log tells per run how many requests and how many distinct connections
the server saw: pixload must open no more connections than max_concurrent_downloads
(checked with the default 8, and with --concurrency 4 --per-host 4). Medians, and ratios
of medians measured side by side in this one run (the machine is shared and noisy).
Exit status 1 if a load failed or a connection limit was exceeded.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

LINE = re.compile(r"([\d.]+) images/s, ([\d.]+) ms CPU/image")


def log_summary(path, tag):
    """(requests, distinct connections) in the access log for URLs tagged with tag."""
    needle = "?b=" + tag
    requests, connections = 0, set()
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 4 and parts[0].endswith(needle):
                requests += 1
                connections.add(parts[3])
    return requests, len(connections)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pixload", required=True)
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--names", required=True)
    parser.add_argument("--access-log", required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    names = [n.strip() for n in open(args.names) if n.strip()]
    count = len(names)
    n = str(args.concurrency)
    tools = {
        "pixload fetch (download + decode)": [args.pixload, "fetch", "--quiet", "--no-disk-cache", "--concurrency", n],
        "bare libcurl, download only": [args.baseline, "--no-decode", "--concurrency", n],
        "bare libcurl + libjpeg-turbo decode": [args.baseline, "--concurrency", n],
    }
    limit_check = ("pixload fetch --concurrency 4 --per-host 4",
                   [args.pixload, "fetch", "--quiet", "--no-disk-cache", "--concurrency", "4", "--per-host", "4"], 4)
    failed = False
    work = tempfile.mkdtemp(prefix="pxl-bench-net-")

    def run(label, command, key):
        tag = f"{key}-{os.getpid()}"
        urls = os.path.join(work, tag + ".txt")
        with open(urls, "w") as f:
            f.writelines(f"{args.base_url}/{name}?b={tag}\n" for name in names)
        # pixload takes --urls FILE, the baseline the file as its argument.
        full = command + (["--urls", urls] if "fetch" in command else [urls])
        out = subprocess.run(full, capture_output=True, text=True)
        match = LINE.search(out.stdout)
        if out.returncode != 0 or not match:
            sys.exit(f"bench: {' '.join(full)} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
        time.sleep(0.2)  # nginx logs a request once its response is out
        requests, connections = log_summary(args.access_log, tag)
        os.unlink(urls)
        return float(match.group(1)), float(match.group(2)), requests, connections

    results = {name: [] for name in tools}
    for r in range(args.runs):
        for i, (name, command) in enumerate(tools.items()):
            results[name].append(run(name, command, f"r{r}t{i}"))
    label, command, limit = limit_check
    limited = run(label, command, "limit")

    print(f"\nnetwork path: {count} images of 64x64 from nginx on 127.0.0.1, concurrency {n}, "
          f"{args.runs} runs each, medians")
    print(f"  {'':38} {'images/s':>9} {'CPU ms/image':>13} {'requests':>9} {'connections':>12}")
    medians = {}
    for name, samples in results.items():
        rate = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        requests = max(s[2] for s in samples)
        connections = max(s[3] for s in samples)
        medians[name] = (rate, cpu)
        print(f"  {name:38} {rate:9.1f} {cpu:13.3f} {requests:9d} {connections:8d} max")
        if any(s[2] != count for s in samples):
            print(f"  FAIL {name}: the server saw {[s[2] for s in samples]} requests, expected {count}")
            failed = True
    ours = medians["pixload fetch (download + decode)"][1]
    download = medians["bare libcurl, download only"][1]
    decode = medians["bare libcurl + libjpeg-turbo decode"][1]
    print(f"  pixload / bare download + decode: CPU per image {ours / decode:.2f}x")
    print(f"  pixload's network path, estimated as its total less the baseline's decode cost "
          f"({ours:.3f} - ({decode:.3f} - {download:.3f})): {ours - (decode - download):.3f} ms CPU/image "
          f"(target < 0.1; bare libcurl alone: {download:.3f})")

    pix = [s[3] for s in results["pixload fetch (download + decode)"]]
    ok = max(pix) <= args.concurrency
    print(f"  connections at the server, pixload with max_concurrent_downloads {n}: {pix} "
          f"-> {'ok' if ok else 'FAIL'} (<= {n})")
    failed |= not ok
    ok = limited[3] <= limit and limited[2] == count
    print(f"  connections at the server, {label}: {limited[3]} for {limited[2]} requests, "
          f"{limited[1]:.3f} ms CPU/image -> {'ok' if ok else 'FAIL'} (<= {limit})")
    failed |= not ok
    os.rmdir(work)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
