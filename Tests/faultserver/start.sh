# Tests/faultserver/start.sh: sourced by the test runners (Tests/capi/run.sh,
# Tests/soak/run.sh), not run.
#
#   start_faultserver WORKDIR [faultserver.py options...]
#
# Starts the fault server in the background and waits until it listens. It prints
# "faultserver ready http=PORT https=PORT pid=PID" then; its stdout and stderr go to
# WORKDIR/faultserver.out and .err. Sets fault_pid (the caller stops it) and fault_port,
# fault_tls_port; exits the calling script with a message if the server does not start.
start_faultserver() {
  local dir="$1"; shift
  python3 "$(dirname "${BASH_SOURCE[0]}")/faultserver.py" "$@" >"$dir/faultserver.out" 2>"$dir/faultserver.err" &
  fault_pid=$!
  for _ in $(seq 100); do
    grep -q '^faultserver ready' "$dir/faultserver.out" 2>/dev/null && break
    kill -0 "$fault_pid" 2>/dev/null || break
    sleep 0.1
  done
  local ready
  ready=$(grep '^faultserver ready' "$dir/faultserver.out" || true)
  [ -n "$ready" ] || { cat "$dir/faultserver.err" >&2; echo "$0: the fault server did not start" >&2; exit 1; }
  fault_port=$(sed -E 's/.* http=([0-9]+).*/\1/' <<<"$ready")
  fault_tls_port=$(sed -E 's/.* https=([0-9]+).*/\1/' <<<"$ready")
}
