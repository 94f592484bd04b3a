#!/usr/bin/env bash
# scripts/free-port.sh [N]
#
# Prints N (default 1) distinct TCP ports of 127.0.0.1 that are free now, one a line:
# the kernel's choice for a bind to port 0. Every test runner that starts a server takes
# its ports from here unless its own variable (PXL_TEST_PORT, PXL_SOAK_PORT, ...) names
# one, so runs side by side on one machine never share a port by default.
#
# All N sockets stay bound until all are chosen, so the N ports differ. A port can still
# be taken by someone else between this script's exit and the server's bind; the kernel
# hands out ephemeral ports in turn, so that window is small, and a runner that must not
# fail on it retries with a fresh port.
set -euo pipefail
count="${1:-1}"
[[ "$count" =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [N]" >&2; exit 2; }
exec python3 - "$count" <<'PY'
import socket, sys
sockets = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    sockets.append(s)
print("\n".join(str(s.getsockname()[1]) for s in sockets))
PY
