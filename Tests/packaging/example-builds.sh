# Tests/packaging/example-builds.sh: sourced by scripts/check-dist.sh and
# Tests/packaging/deb.sh (bash). examples/c/hello.c built as a CMake or Meson user builds
# it, against an installed pixload: a PREFIX (make install PREFIX=...), or the system's
# (the .debs) when PREFIX is empty. Each function returns non-zero on failure, printing
# the tool's log.
#
#   build_hello_cmake BUILD_DIR [PREFIX]   find_package(pixload CONFIG REQUIRED)
#   build_hello_meson BUILD_DIR [PREFIX]   dependency('pixload'), through pkg-config
#   hello_runs BIN URL LIBDIR              hello loads URL, linked to LIBDIR/libpixload.so.0
#                                          with no LD_LIBRARY_PATH (the build's RPATH, or
#                                          the system's libdir)
#   cmake_version_rule WORK PREFIX VERSION find_package(pixload REQUEST) accepts exactly the
#                                          requests pixload.h's versioning rule allows
examples_c="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../examples/c" && pwd)"

_show_log() { sed 's/^/     | /' "$1" | tail -20; }

build_hello_cmake() {
  local build="$1" prefix="${2:-}"
  rm -rf "$build"
  if ! { cmake -S "$examples_c" -B "$build" ${prefix:+-DCMAKE_PREFIX_PATH="$prefix"} &&
         cmake --build "$build"; } >"$build.log" 2>&1; then
    _show_log "$build.log"; return 1
  fi
}

build_hello_meson() {
  local build="$1" prefix="${2:-}"
  rm -rf "$build"
  # Found through pkg-config, as meson's log says: dependency() falls back to CMake's
  # config when pkg-config finds nothing, which would hide a broken pixload.pc.
  if ! { env ${prefix:+PKG_CONFIG_PATH="$prefix/lib/pkgconfig"} meson setup "$build" "$examples_c" &&
         grep -q "^Called \`.*pkg-config --libs pixload\` -> 0" "$build/meson-logs/meson-log.txt" &&
         meson compile -C "$build"; } >"$build.log" 2>&1; then
    _show_log "$build.log"; return 1
  fi
}

hello_runs() {
  local bin="$1" url="$2" libdir="$3" out linked
  out=$(env -u LD_LIBRARY_PATH "$bin" "$url" 2>&1) || { echo "     $out"; return 1; }
  linked=$(env -u LD_LIBRARY_PATH ldd "$bin" | awk '$1 == "libpixload.so.0" {print $3}')
  echo "     $out (libpixload.so.0 => $linked)"
  [[ "$out" == loaded* ]] && [ "$(readlink -f "$linked")" = "$(readlink -f "$libdir/libpixload.so.0")" ]
}

cmake_version_rule() {
  local work="$1" prefix="$2" version="$3" major minor patch
  IFS=. read -r major minor patch <<<"$version"
  mkdir -p "$work/src"
  cat >"$work/src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.19)
project(pixload_version_rule NONE)
find_package(pixload ${REQUEST} CONFIG QUIET)
if(pixload_FOUND)
  message(STATUS "pixload-rule: found ${pixload_VERSION}")
else()
  message(STATUS "pixload-rule: not found")
endif()
CMAKE
  # request (a CMake list), whether it must be accepted; before 1.0 a minor release may
  # break, from 1.0 on only a major one.
  local cases=(
    "|yes" "$major.$minor|yes" "$version|yes" "$version;EXACT|yes"
    "$major.$minor.$((patch + 1))|no" "$major.$((minor + 1))|no" "$((major + 1))|no"
    "$major.$minor...$((major + 1))|yes" "$major.$((minor + 1))...$((major + 2))|no"
  )
  if [ "$major" -eq 0 ]; then
    [ "$minor" -gt 0 ] && cases+=("0.$((minor - 1))|no")
  else
    cases+=("$major.0|yes")
    [ "$major" -gt 1 ] && cases+=("$((major - 1))|no")
  fi
  local case request expected got bad=0
  for case in "${cases[@]}"; do
    request="${case%|*}" expected="${case#*|}"
    rm -rf "$work/build"
    got=$(cmake -S "$work/src" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" -DREQUEST="$request" 2>&1 |
          sed -n 's/^-- pixload-rule: //p')
    if { [ "$expected" = yes ] && [ "$got" = "found $version" ]; } ||
       { [ "$expected" = no ] && [ "$got" = "not found" ]; }; then
      echo "     find_package(pixload${request:+ }${request//;/ }): $got"
    else
      echo "     find_package(pixload${request:+ }${request//;/ }): $got, expected $([ "$expected" = yes ] && echo found || echo 'not found')"
      bad=1
    fi
  done
  # A 32-bit project never takes the 64-bit library (nor the other way round).
  local other=4
  [ "$(echo __SIZEOF_POINTER__ | cc -E -P -)" = 4 ] && other=8
  rm -rf "$work/build"
  got=$(cmake -S "$work/src" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_SIZEOF_VOID_P=$other 2>&1 |
        sed -n 's/^-- pixload-rule: //p')
  echo "     find_package(pixload) with CMAKE_SIZEOF_VOID_P=$other: $got"
  [ "$got" = "not found" ] || bad=1
  return "$bad"
}
