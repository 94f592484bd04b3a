#!/usr/bin/env bash
# scripts/check-sanitizer.sh asan|tsan [--short]
#
# The library and its tests under a sanitizer:
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer for the C API)
#   tsan  ThreadSanitizer
# Each mode:
#   1. the Swift tests (PixloadCoreTests) built with the sanitizer (asan: `swift test
#      --sanitize=address`, the C targets also -fsanitize=undefined; tsan: `swift test
#      --sanitize=thread`, the same as `make test-tsan`);
#   2. libpixload.so built with it (debug, Swift runtime linked dynamically: its RUNPATH
#      already names the toolchain's lib/swift/linux), in the same scratch folder;
#   3. two checks that the sanitizer is really there: the library carries the
#      instrumentation, and a small program against it gets a report where it must;
#   4. the C API tests (Tests/capi/run.sh) compiled with the toolchain's clang and the same
#      sanitizer, against that library.
# Any sanitizer report fails the run. With --short only a subset of the C API tests runs
# (the threaded, cancelling, freeing and TLS ones) and, for tsan, no Swift tests (`make
# test-tsan` runs them): the form `make test` uses.
#
# Why these choices:
# - swiftc has no -sanitize=undefined on Linux (SwiftPM passes it through and swiftc
#   rejects it), so UBSan covers the C targets (shims for libcurl/libjpeg/libpng,
#   CSupport) via -Xcc; Swift code traps on overflow and out-of-range access by itself.
# - The test program is compiled by the toolchain's clang so that it links the same
#   sanitizer runtime the library was instrumented for (the executable carries the static
#   runtime; the library's __asan_*/__tsan_* references resolve to it; no LD_PRELOAD).
#   The toolchain's static TSan runtime also intercepts libdispatch, so that program links
#   the toolchain's libdispatch and libBlocksRuntime.
# - The Swift tests run with detect_leaks=0: swift-corelibs-xctest never frees its
#   XCTestCase instances (XCTestCase.invokeTest -> awaitUsingExpectation leaves a weak
#   reference side table and the case pointing only at each other), so LeakSanitizer
#   reports every test case and all its stored properties even for PixelTests alone. The
#   leak check of the library is the C API run here (every handle is freed there) and
#   `make check-valgrind`.
#
# Environment: SWIFT (the swift driver), PXL_TEST_PORT / PXL_TEST_TLS_PORT (run.sh's
# nginx ports), PXL_TEST_SLOW_FACTOR (default 3: deadlines under the sanitizer).
# Ends with "check-sanitizer MODE: clean" or a failure.
set -euo pipefail

mode="${1:-}"
short=0
[ "${2:-}" = "--short" ] && short=1
case "$mode" in asan|tsan) ;; *) echo "usage: $0 asan|tsan [--short]" >&2; exit 2 ;; esac

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
SWIFT="${SWIFT:-$(command -v swift 2>/dev/null || echo /opt/swift/usr/bin/swift)}"
toolchain_bin=$(dirname "$(readlink -f "$SWIFT")")
clang="$toolchain_bin/clang"
swift_libs="$(dirname "$toolchain_bin")/lib/swift/linux"
[ -x "$clang" ] || { echo "check-sanitizer: no clang next to $SWIFT" >&2; exit 1; }

export PXL_TEST_SLOW_FACTOR="${PXL_TEST_SLOW_FACTOR:-3}"
# The instrumented library links the Swift runtime dynamically (Package.swift reads this):
# the test program and the library then share the toolchain's runtime and its sanitizer.
export PXL_SWIFT_RUNTIME=dynamic

# The C API tests the short form runs: races between threads, cancelling, freeing in
# every order with work in flight, the table, TLS + HTTP/2, the fault server's broken
# bodies and coalescing, processors (custom ones failing, cancelled through their flag and
# outliving their loader; chains working in place on animations, table rows and previews),
# host fetchers answering from their own threads, cancelled, timed out and freed with
# handles out, and the request hook refreshing a token on its own thread for 50 requests,
# timing out and outliving its loader; hook calls and fetches answered twice, stale, and
# answered by two threads while their request is cancelled or their loader freed (about
# 25 s under either sanitizer here).
short_tests=(test_exactly_once_under_races test_cancel_from_other_thread test_cancel_inside_callback
  test_cancel_wins_over_queued test_free_orders test_free_loader_in_flight test_queue_wait_and_wakeup
  test_load_and_memory_cache test_pixel_formats test_exif_orientation test_no_head_of_line_blocking
  test_waiting_transfers_start_at_once test_table_row_errors test_table_cached_rows_sync
  test_tls_http2_nginx test_fault_tls test_fault_broken_bodies test_fault_coalesced_50
  test_fetcher_sqlite test_fetcher_cancel_and_limit test_fetcher_misbehaving test_fetcher_loader_freed
  test_processors_builtin test_processors_invalid test_processors_custom test_processors_table
  test_processors_animated test_processors_preview test_hook_token_refresh test_hook_misbehaving
  test_hook_loader_freed test_fetcher_finished_twice test_fetcher_finish_races test_hook_answered_twice
  test_hook_answer_races)
capi_args=()
[ "$short" = 1 ] && capi_args=("${short_tests[@]}")

work=$(mktemp -d "${TMPDIR:-/tmp}/pxl-sanitizer.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ "$mode" = asan ]; then
  scratch=.build-asan
  swift_flags=(--sanitize=address -Xcc -fsanitize=undefined --scratch-path "$scratch")
  # lld: gold prints a warning for each of the runtime's ~280 local __asan_* symbols.
  c_flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -fuse-ld=lld"
  # halt_on_error: a UBSan report in the library (built recoverable) stops the run too.
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
  swift_test_env=(env ASAN_OPTIONS=detect_leaks=0:detect_stack_use_after_return=1)
  c_env=(env ASAN_OPTIONS=detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1)
  instrumented='__asan_report_load'
else
  scratch=.build-tsan
  swift_flags=(--sanitize=thread --scratch-path "$scratch")
  c_flags="-fsanitize=thread -fuse-ld=lld -L$swift_libs -ldispatch -lBlocksRuntime -Wl,-rpath,$swift_libs"
  # Reports do not stop the run (every race is shown); TSan then exits with 66.
  swift_test_env=(env TSAN_OPTIONS="second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}")
  c_env=("${swift_test_env[@]}")
  instrumented='__tsan_func_entry'
fi

step() { echo "== check-sanitizer $mode: $*"; }
# swift build, its output shown only on failure (the sanitized link prints hundreds of
# gold warnings about the runtime's local symbols).
build() {
  "$SWIFT" build "$@" >"$work/build.log" 2>&1 || { cat "$work/build.log"; echo "check-sanitizer $mode: build failed"; exit 1; }
  tail -1 "$work/build.log"
}

if [ "$short" = 0 ] || [ "$mode" = asan ]; then
  step "Swift tests"
  build --build-tests "${swift_flags[@]}"
  set +e
  "${swift_test_env[@]}" "$SWIFT" test --skip-build "${swift_flags[@]}" >"$work/swift-test.log" 2>&1
  status=$?
  set -e
  grep -E "error:|Sanitizer|WARNING:" "$work/swift-test.log" || true
  grep -E "Executed [0-9]+ tests?, with" "$work/swift-test.log" | tail -1 || true
  if grep -q -E "ERROR: AddressSanitizer|runtime error:|WARNING: ThreadSanitizer" "$work/swift-test.log"; then
    grep -n -B2 -A60 -E "ERROR: AddressSanitizer|runtime error:|WARNING: ThreadSanitizer" "$work/swift-test.log" | head -300
    echo "check-sanitizer $mode: sanitizer report in the Swift tests"; exit 1
  fi
  [ "$status" = 0 ] || { tail -40 "$work/swift-test.log"; echo "check-sanitizer $mode: the Swift tests failed (exit $status)"; exit 1; }
fi

step "libpixload.so"
build --product pixload "${swift_flags[@]}"
libdir="$root/$scratch/debug"
symbols=$(nm -D "$libdir/libpixload.so")
grep -q "$instrumented" <<<"$symbols" ||
  { echo "check-sanitizer $mode: $libdir/libpixload.so has no $instrumented: not instrumented"; exit 1; }
if [ "$mode" = asan ]; then
  grep -q '__ubsan_handle_' <<<"$symbols" ||
    { echo "check-sanitizer asan: the library's C shims carry no UBSan checks"; exit 1; }
fi

# The canary: a program that must be reported. asan: it leaks a queue the library
# allocated (LeakSanitizer must see the library's allocations); tsan: two threads
# write one int unsynchronised while the library is loaded.
step "canary"
if [ "$mode" = asan ]; then
  cat > "$work/canary.c" <<'EOF'
#include <stdio.h>
#include "pixload.h"
static pxl_queue *leaked;
int main(void) {
  if (pxl_queue_new(&leaked) != PXL_OK) return 2;
  leaked = NULL; /* the only reference is gone: a leak LeakSanitizer must report */
  printf("%s\n", pxl_version());
  return 0;
}
EOF
  expect='pxl_queue_new'
else
  cat > "$work/canary.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include "pixload.h"
static int shared;
static void *bump(void *arg) { shared++; return arg; }
int main(void) {
  pthread_t thread;
  pthread_create(&thread, NULL, bump, NULL);
  shared++; /* unsynchronised with the thread's write: a race ThreadSanitizer must report */
  pthread_join(thread, NULL);
  printf("%s %d\n", pxl_version(), shared);
  return 0;
}
EOF
  expect='WARNING: ThreadSanitizer: data race'
fi
# shellcheck disable=SC2086 # c_flags is a list of flags
"$clang" -g -Iinclude $c_flags "$work/canary.c" -L"$libdir" -Wl,-rpath,"$libdir" -lpixload -lpthread \
  -o "$work/canary"
if "${c_env[@]}" "$work/canary" >"$work/canary.log" 2>&1; then
  cat "$work/canary.log"; echo "check-sanitizer $mode: the canary was not reported: the sanitizer is not working"; exit 1
fi
grep -q "$expect" "$work/canary.log" ||
  { cat "$work/canary.log"; echo "check-sanitizer $mode: the canary failed without the expected report"; exit 1; }
echo "canary reported as expected ($expect)"

if [ "$short" = 1 ]; then step "C API tests (short: ${#short_tests[@]} tests)"; else step "C API tests"; fi
set +e
"${c_env[@]}" PXL_LIBDIR="$libdir" PXL_CC="$clang" PXL_CFLAGS="$c_flags" \
  Tests/capi/run.sh "${capi_args[@]}" >"$work/capi.log" 2>&1
status=$?
set -e
# The harness's lines for failed checks and its closing "N passed, N failed".
grep -v -E '^  |^test_.* ok \(' "$work/capi.log" || true
if grep -q -E "ERROR: (Address|Leak)Sanitizer|runtime error:|WARNING: ThreadSanitizer" "$work/capi.log"; then
  grep -n -B2 -A60 -E "ERROR: (Address|Leak)Sanitizer|runtime error:|WARNING: ThreadSanitizer" "$work/capi.log" | head -300
  echo "check-sanitizer $mode: sanitizer report in the C API tests"; exit 1
fi
[ "$status" = 0 ] || { echo "check-sanitizer $mode: the C API tests failed (exit $status)"; exit 1; }
echo "check-sanitizer $mode: clean"
