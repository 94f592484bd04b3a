# pixload: build, install, test, demo and benchmark.
#
#   make            build the shipped library and the pixload client into build/; installs
#                   nothing: a missing build dependency stops it with one line naming the
#                   Debian package (scripts/check-build-deps.sh)
#   make deps       install the Debian and PyPI packages of the build, demo and benchmarks
#   make demo       the main demo: a simulated scrolling table over a local nginx
#   make test       every test (Swift, C, Python, Rust, GTK under Xvfb, the short
#                   sanitizer, soak and exhaustion runs)
#   demo, test, bench*, fuzz, soak, check-* and gtk-demo install what they need first
#   (scripts/deps.sh), as a step of their own
#   make bench      the performance table of README (bench-table: pixload against the bare
#                   decode from memory, its Python package against aiohttp + Pillow, web-size
#                   and camera photos, a warm start), then pixload against a bare libcurl +
#                   libjpeg-turbo loop and Python, the scroll benchmark (bench-scroll), then
#                   bench-network (1,000 tiny images: CPU per image in the network path,
#                   connections at the server) and bench-decode (decode CPU against
#                   libjpeg-turbo/libpng called directly)
#   make bench-scroll  bench/scroll.sh: three scrolling strategies (no cancel, per-row
#                   cancel, the table) over five network conditions (loopback, throttled,
#                   bandwidth, latency, mobile), SCROLL_RUNS each (3); fails on a missed target
#   make bench-heldout issue 41's CPU ratio per kind of web photo (ICC, EXIF, 4:4:4, CMYK,
#                   tiny and 4000 px, 16-bit PNG ...), made at test time (bench/heldout_set.py)
#   make bench-cancel  pxl_cancel_all over 5,000 / 20,000 / 50,000 waiting requests
#   make bench-warm    the warm start: the first screen (8 camera photos, 150x150) from
#                   the disk cache with a fresh loader, thumbnails kept on disk or not
#   make fuzz       the mutation smoke test, then the libFuzzer targets (FUZZ_SECONDS each)
#   make soak       the stress and soak run for SOAK_SECONDS (default 1800), SOAK_ISOLATION (modules)
#   make check-asan, check-tsan, check-valgrind   the long sanitizer and leak checks
#   make gtk-demo   the GTK 4 example on your display
#   make test-qt, bench-qt   the PySide6 gallery (examples/qt) offscreen: its scripted
#                   session checked cell by cell; the UI thread's time inside pixload per frame
#   make modules, test-modules   the HEIC, JPEG XL and SVG codec modules (codecs/) and
#                   their conformance against heif-convert, djxl and rsvg-convert, all
#                   eight orientations of HEIC (irot/imir) and JPEG XL (Tests/modules/orientation.py),
#                   and public suites (Tests/fixtures/{jxl,svg,heif}-suite, Tests/modules/suites.py)
#   make bench-processors, bench-placeholder   processor and BlurHash/ThumbHash costs
#   make bench-animation  bench/animation.sh: an animation player against PXL_FLAG_ANIMATE
#                   and the still first frame on a 150-frame GIF (bench/animation.c); a
#                   2,000-frame 1280x720 WebP played at its durations by `pixload play`
#                   (late frames at 640x360, frame memory flat at full size); 1,000
#                   animated rows scrolled by the scroll session (bench/animation_table.c)
#   make docs       build/docs/index.html: the C reference rendered from pixload.h (an
#                   undocumented declaration fails it), the Python API (pdoc, from PyPI in
#                   build/docs-venv), a guide per host and a cookbook (docs/guide/); every
#                   internal link checked
#   make install    PREFIX=/usr/local DESTDIR= MANDIR=PREFIX/share/man (zstd's lib/Makefile
#                   is the model): library, header, pixload.pc, the CMake package
#                   (LIBDIR/cmake/pixload), the client, its man page
#   make uninstall  removes exactly what install wrote
#   make wheel      dist/pixload-VERSION-py3-none-manylinux_*.whl: the Python bindings with
#                   libpixload.so.0, libpixload-jxl and, grafted by auditwheel, libcurl (and
#                   what it pulls in), libjpeg, libpng, libjxl... inside, with their licences
#   make deb        dist/libpixload0, libpixload-dev and pixload-tools .debs, and one per
#                   codec module (libpixload-heif, -jxl, -svg), dependencies from
#                   dpkg-shlibdeps, lintian's tags printed
#   wheel and deb only build: their tools (auditwheel, dpkg-dev, lintian) come from
#   `make deps-test` (scripts/deps.sh test), as `make test` runs it first

# The version has one source, the header's PXL_VERSION_STRING; the bindings' package
# versions are checked against it (scripts/check-dist.sh).
VERSION     := $(shell sed -n 's/^\#define PXL_VERSION_STRING "\(.*\)"$$/\1/p' include/pixload.h)
SOVERSION   := 0
PREFIX      ?= /usr/local
LIBDIR      ?= $(PREFIX)/lib
INCLUDEDIR  ?= $(PREFIX)/include
BINDIR      ?= $(PREFIX)/bin
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
# find_package(pixload CONFIG) looks in LIBDIR/cmake/pixload, among other places.
CMAKEDIR    ?= $(LIBDIR)/cmake/pixload
MANDIR      ?= $(PREFIX)/share/man
DESTDIR     ?=
# The installed client finds the library in LIBDIR, which the dynamic loader may not
# search (/usr/local/lib before ldconfig); a package installing to the system's libdir
# passes CLI_RPATH= (Debian forbids an RPATH to it).
CLI_RPATH   ?= -Wl,-rpath,$(LIBDIR)

CC          ?= cc
CFLAGS      ?= -O2 -g
WARN        := -Wall -Wextra -std=c11
# The system libraries behind Sources/CCodecs (Package.swift's codecLibraries says the same).
CODEC_LIBS  := -ljpeg -lpng -ldeflate -lz -lwebp -lwebpdemux -lgif -lavif -llcms2
# Swift 6.3 from PATH, else where the toolchain lives on our machines.
SWIFT       ?= $(or $(shell command -v swift 2>/dev/null),/opt/swift/usr/bin/swift)
# The toolchain's clang (libFuzzer, and the GIF replay's sanitizers), beside its swift.
CLANG       ?= $(or $(shell command -v clang 2>/dev/null),$(dir $(SWIFT))clang)
STAGE       := build
# Deferred (=): evaluated only by a Swift build, after check-build-deps has said whether
# there is a swift at all.
SWIFT_ROOT   = $(shell dirname $$(dirname $$(readlink -f $$(command -v $(SWIFT)))))

# The shipped library: Swift runtime linked statically (no libswift* in NEEDED), a SONAME,
# and a version script exporting only the header's functions (lld: gold leaves the core's protected
# symbols in .dynsym as LOCAL entries). Its own scratch folder, so `swift test`
# (dynamic runtime) never shares build products with it.
RELEASE_SCRATCH := .build-release
RELEASE_FLAGS = -c release --scratch-path $(RELEASE_SCRATCH) --product pixload \
  --static-swift-stdlib -Xswiftc -static-stdlib \
  -Xlinker -L$(SWIFT_ROOT)/lib/swift_static/linux \
  -Xlinker -soname=libpixload.so.$(SOVERSION) \
  -Xlinker --version-script=$(CURDIR)/$(STAGE)/pixload.map \
  -Xswiftc -use-ld=lld

LIB_REAL    := libpixload.so.$(VERSION)
LIB_SONAME  := libpixload.so.$(SOVERSION)

.PHONY: all deps deps-test check-build-deps lib cli modules worker test-worker bench-worker test-isolation-all bench-isolation test-modules demo gtk-demo test test-swift test-tsan test-c test-abi test-codecs test-stream-decode \
  test-cli-conformance test-disk-cache check-dist test-python test-rust test-gtk test-sanitizers \
  test-soak test-exhaustion check-asan check-tsan check-valgrind soak bench bench-scroll bench-network \
  bench-decode bench-progressive bench-resample bench-stream bench-color bench-cancel bench-placeholder bench-animation bench-animation-isolated bench-warm bench-table bench-heldout fuzz fuzz-smoke fuzz-decode fuzz-gif fuzz-diskentry fuzz-headers \
  fuzz-avif fuzz-webp fuzz-heif fuzz-jxl fuzz-svg fuzz-qoi module-fuzz-seeds install uninstall clean \
  wheel deb test-wheel test-deb

all: lib cli modules worker

# A target a user runs for a result installs its packages first, then runs the rest in a
# sub-make, so the packages are there before anything builds, also under make -j.
SUBMAKE     := $(MAKE) --no-print-directory

deps:
	@scripts/deps.sh

# What only the tests need on top: GTK 4 and Xvfb, a venv for the Python suite, cargo.
deps-test:
	@scripts/deps.sh test

# What building needs, checked, never installed: one line naming the Debian package.
check-build-deps:
	@CC='$(CC)' scripts/check-build-deps.sh '$(SWIFT)'

# --- the library ---------------------------------------------------------------------

# The version script exports exactly the functions the header declares (PXL_API lines):
# the C shims' own pxl_* helpers stay private.
$(STAGE)/pixload.map: include/pixload.h
	@mkdir -p $(STAGE)
	{ echo '{ global:'; sed -nE 's/^PXL_API[^(]*[^a-z0-9_](pxl_[a-z0-9_]+)\(.*/    \1;/p' include/pixload.h; \
	  echo '  local: *; };'; } > $@

lib: check-build-deps $(STAGE)/pixload.map
	$(SWIFT) build $(RELEASE_FLAGS)
	@mkdir -p $(STAGE)/lib $(STAGE)/include $(STAGE)/bin
	@# Copy, then rename: a program running the old library keeps its mapping intact.
	cp -f $(RELEASE_SCRATCH)/release/libpixload.so $(STAGE)/lib/.$(LIB_REAL).new
	mv -f $(STAGE)/lib/.$(LIB_REAL).new $(STAGE)/lib/$(LIB_REAL)
	ln -sf $(LIB_REAL) $(STAGE)/lib/$(LIB_SONAME)
	ln -sf $(LIB_SONAME) $(STAGE)/lib/libpixload.so
	cp -f include/pixload.h $(STAGE)/include/

# The client is a C program against the public header only: also the proof that C works.
# Its files, one concern each, are listed in tools/README.md.
CLI_SOURCES := $(sort $(wildcard tools/tool_*.c))

cli: lib
	$(CC) $(CFLAGS) $(WARN) -Iinclude $(CLI_SOURCES) -o $(STAGE)/bin/pixload \
	  -L$(STAGE)/lib -Wl,-rpath,'$$ORIGIN/../lib' -lpixload -lpng

# The codec modules (codecs/*.c, pixload.h "Codec modules"): shared objects of their own
# on the public interface, beside the library in lib/pixload/codecs, where a loader finds
# them. libpixload.so.0's dependencies do not change; each module brings its library.
MODULE_DIR  := $(STAGE)/lib/pixload/codecs
MODULE_PKGS := heif:libheif jxl:libjxl svg:librsvg-2.0
MODULES     := $(foreach m,$(MODULE_PKGS),$(MODULE_DIR)/libpixload-$(firstword $(subst :, ,$(m))).so)

modules: $(MODULES)

$(MODULE_DIR)/libpixload-%.so: codecs/%.c codecs/common.h codecs/iso_bmff.h include/pixload.h | lib
	@mkdir -p $(MODULE_DIR)
	$(CC) $(CFLAGS) $(WARN) -fPIC -shared -fvisibility=hidden -Iinclude \
	  $$(pkg-config --cflags $(word 2,$(subst :, ,$(filter $*:%,$(MODULE_PKGS))))) $< -o $@ \
	  -L$(STAGE)/lib -lpixload $$(pkg-config --libs $(word 2,$(subst :, ,$(filter $*:%,$(MODULE_PKGS))))) \
	  -Wl,-z,defs

# The decode worker (worker/README.md): a C executable beside the codec modules, without the
# Swift runtime, that loads them and decodes locked (no_new_privs, namespaces, landlock,
# seccomp, RLIMIT_AS). It exports the two functions a module imports from libpixload, and
# its soname is libpixload.so.0, so a module's NEEDED libpixload.so.0 is the worker itself
# (glibc matches a NEEDED against the sonames of what is loaded, the program's included):
# libpixload.so.0, and the Swift runtime in it, are never loaded into a worker.
WORKER_EXE  := $(STAGE)/lib/pixload/pixload-decode-worker
WORKER_SOURCES := worker/worker_main.c worker/codecs.c worker/sandbox.c worker/landlock.c worker/seccomp.c
# The built-in formats' shims, for PXL_ISOLATION_ALL (worker/native.c): the same files the
# library compiles (Package.swift's CCodecs target), against the same libraries, in a
# shared object beside the worker that only a worker started with --builtins loads (libavif
# alone pulls in four AV1 codecs: a HEIC or SVG worker would start 3-5 ms slower).
WORKER_BUILTINS := $(STAGE)/lib/pixload/pixload-decode-builtins.so
WORKER_SHIMS := $(addprefix Sources/CCodecs/,jpeg_shim.c jpeg_scans.c jpeg_progressive.c png_shim.c png_fast.c webp_shim.c gif_shim.c \
  avif_shim.c exif.c color.c resample.c)

worker: $(WORKER_EXE) $(WORKER_BUILTINS)

# The library's area resampler in the worker itself (a module's thumbnail resampled before it
# crosses: worker/README.md), built as the library's is (WORKER_BUILTINS_CC, below).
WORKER_RESAMPLE_O := $(STAGE)/worker/resample.o
$(WORKER_RESAMPLE_O): Sources/CCodecs/resample.c $(wildcard Sources/CCodecs/include/*.h)
	@mkdir -p $(dir $@)
	$(WORKER_BUILTINS_CC) $(CFLAGS) $(WARN) -ISources/CCodecs/include -c $< -o $@

$(WORKER_EXE): $(WORKER_SOURCES) $(WORKER_RESAMPLE_O) $(wildcard worker/*.h) codecs/iso_bmff.h include/pixload.h | $(WORKER_BUILTINS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(WARN) -Iinclude -ISources/CCodecs/include $(WORKER_SOURCES) $(WORKER_RESAMPLE_O) -o $@ $$(pkg-config --libs libseccomp) -ldl \
	  -Wl,--export-dynamic-symbol=pxl_codec_init_size,--export-dynamic-symbol=pxl_loader_add_codec \
	  -Wl,-soname,libpixload.so.$(SOVERSION)

# With the compiler the library's shims are built with (SwiftPM's clang, -O2): gcc -O2
# vectorises the resampler less, and the worker should cost what the host would.
WORKER_BUILTINS_CC := $(or $(wildcard $(SWIFT_ROOT)/bin/clang),$(CC))
$(WORKER_BUILTINS): worker/native.c $(WORKER_SHIMS) $(wildcard worker/*.h) $(wildcard Sources/CCodecs/include/*.h)
	@mkdir -p $(dir $@)
	$(WORKER_BUILTINS_CC) $(CFLAGS) $(WARN) -fPIC -shared -fvisibility=hidden -Iinclude -ISources/CCodecs/include -ISources/CCodecs \
	  worker/native.c $(WORKER_SHIMS) -o $@ $(CODEC_LIBS) -lm -pthread -Wl,-z,defs

# --- install -------------------------------------------------------------------------

install: all
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(PKGCONFIGDIR) \
	  $(DESTDIR)$(MANDIR)/man1
	install -m 755 $(STAGE)/lib/$(LIB_REAL) $(DESTDIR)$(LIBDIR)/$(LIB_REAL)
	install -d $(DESTDIR)$(LIBDIR)/pixload/codecs
	install -m 644 $(MODULES) $(DESTDIR)$(LIBDIR)/pixload/codecs/
	@# The decode worker the library starts for the modules (pixload.h, "Isolation").
	install -m 755 $(WORKER_EXE) $(DESTDIR)$(LIBDIR)/pixload/pixload-decode-worker
	install -m 644 $(WORKER_BUILTINS) $(DESTDIR)$(LIBDIR)/pixload/pixload-decode-builtins.so
	ln -sf $(LIB_REAL) $(DESTDIR)$(LIBDIR)/$(LIB_SONAME)
	ln -sf $(LIB_SONAME) $(DESTDIR)$(LIBDIR)/libpixload.so
	install -m 644 include/pixload.h $(DESTDIR)$(INCLUDEDIR)/pixload.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	  -e 's|@VERSION@|$(VERSION)|' build-aux/pixload.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/pixload.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/pixload.pc
	install -d $(DESTDIR)$(CMAKEDIR)
	sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@SOVERSION@|$(SOVERSION)|g' -e 's|@CMAKEDIR@|$(CMAKEDIR)|g' \
	  -e "s|@REL_LIBDIR@|$$(realpath -m -s --relative-to='$(CMAKEDIR)' '$(LIBDIR)')|" \
	  -e "s|@REL_INCLUDEDIR@|$$(realpath -m -s --relative-to='$(CMAKEDIR)' '$(INCLUDEDIR)')|" \
	  build-aux/pixloadConfig.cmake.in > $(DESTDIR)$(CMAKEDIR)/pixloadConfig.cmake
	sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@VERSION_MAJOR@|$(word 1,$(subst ., ,$(VERSION)))|g' \
	  -e 's|@VERSION_MINOR@|$(word 2,$(subst ., ,$(VERSION)))|g' \
	  -e "s|@SIZEOF_VOID_P@|$$(echo __SIZEOF_POINTER__ | $(CC) -E -P -)|g" \
	  build-aux/pixloadConfigVersion.cmake.in > $(DESTDIR)$(CMAKEDIR)/pixloadConfigVersion.cmake
	chmod 644 $(DESTDIR)$(CMAKEDIR)/pixloadConfig.cmake $(DESTDIR)$(CMAKEDIR)/pixloadConfigVersion.cmake
	sed -e 's|@VERSION@|$(VERSION)|' docs/pixload.1.in > $(DESTDIR)$(MANDIR)/man1/pixload.1
	chmod 644 $(DESTDIR)$(MANDIR)/man1/pixload.1
	$(CC) $(CFLAGS) $(WARN) -I$(DESTDIR)$(INCLUDEDIR) $(CLI_SOURCES) -o $(DESTDIR)$(BINDIR)/pixload \
	  -L$(DESTDIR)$(LIBDIR) $(CLI_RPATH) -lpixload -lpng

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(LIB_REAL) $(DESTDIR)$(LIBDIR)/$(LIB_SONAME) $(DESTDIR)$(LIBDIR)/libpixload.so
	rm -f $(DESTDIR)$(INCLUDEDIR)/pixload.h $(DESTDIR)$(PKGCONFIGDIR)/pixload.pc $(DESTDIR)$(BINDIR)/pixload
	rm -f $(DESTDIR)$(MANDIR)/man1/pixload.1
	rm -f $(patsubst $(MODULE_DIR)/%,$(DESTDIR)$(LIBDIR)/pixload/codecs/%,$(MODULES))
	rm -f $(DESTDIR)$(LIBDIR)/pixload/pixload-decode-worker $(DESTDIR)$(LIBDIR)/pixload/pixload-decode-builtins.so
	-@rmdir $(DESTDIR)$(LIBDIR)/pixload/codecs $(DESTDIR)$(LIBDIR)/pixload 2>/dev/null || true
	rm -f $(DESTDIR)$(CMAKEDIR)/pixloadConfig.cmake $(DESTDIR)$(CMAKEDIR)/pixloadConfigVersion.cmake
	@# The package's own folder goes when empty; the cmake/ above it may be another's.
	-@rmdir $(DESTDIR)$(CMAKEDIR) 2>/dev/null || true

# --- packages ------------------------------------------------------------------------

DIST        := dist

# The bindings with the library, the JPEG XL module and what they need that manylinux does
# not promise.
wheel: lib $(MODULE_DIR)/libpixload-jxl.so
	@scripts/build-wheel.sh $(STAGE) $(DIST)

# Debian packages: the library, its -dev and the client, from `make install` into a
# DESTDIR (scripts/build-deb.sh).
DEB_MAINTAINER ?= The pixload authors <pixload@example.org>
deb: all
	@DEB_MAINTAINER='$(DEB_MAINTAINER)' scripts/build-deb.sh $(STAGE) $(DIST)

# --- documentation -------------------------------------------------------------------

# scripts/build-docs.sh; pdoc imports the Python package, which loads build/lib's library.
.PHONY: docs
docs: lib
	@scripts/build-docs.sh $(STAGE)

# --- demo ----------------------------------------------------------------------------

DEMO_DATA   := $(STAGE)/demo-data
DEMO_PORT   ?= 18080

demo:
	@scripts/deps.sh
	@$(SUBMAKE) all
	@scripts/demo.sh $(STAGE) $(DEMO_DATA) $(DEMO_PORT)

# The GTK 4 example (examples/gtk) on your display, over the same photos and server.
gtk-demo:
	@scripts/deps.sh test
	@$(SUBMAKE) all
	@examples/gtk/demo.sh $(STAGE) $(DEMO_DATA) $(DEMO_PORT)

# --- tests ---------------------------------------------------------------------------

test:
	@scripts/deps.sh test
	@$(SUBMAKE) test-swift test-tsan test-codecs test-modules test-worker test-c test-abi test-cli-conformance test-disk-cache \
	  check-dist test-python test-rust test-gtk test-qt test-sanitizers test-soak test-exhaustion test-wheel test-deb \
	  docs

test-swift:
	$(SWIFT) test

# The decode worker's cost (bench/worker_cost.c): the shipped modules on a 1600x1200 HEIC,
# JPEG XL and SVG made now (bench/worker_files.py), in-process against a warm worker,
# wall and CPU (the worker's included), medians of 9. Uses test-worker's build of them.
bench-worker: test-worker
	@python3 bench/worker_files.py $(STAGE)/bench-worker
	$(CC) $(CFLAGS) $(WARN) -Iinclude bench/worker_cost.c worker/worker_client.c worker/codecs.c \
	  -o $(STAGE)/bench-worker/worker-cost -ldl -Wl,-soname,libpixload.so.$(SOVERSION) \
	  -Wl,--export-dynamic-symbol=pxl_codec_init_size,--export-dynamic-symbol=pxl_loader_add_codec
	$(STAGE)/bench-worker/worker-cost $(WORKER_EXE) $(WORKER_TEST_MODULES) $(STAGE)/bench-worker/*.heic \
	  $(STAGE)/bench-worker/*.jxl $(STAGE)/bench-worker/*.svg $(MODULE_FUZZ_SEEDS)/heif/lossy-alpha.heic \
	  $(MODULE_FUZZ_SEEDS)/jxl/lossy.jxl Tests/fuzz/seeds/svg/shapes.svg

# PXL_ISOLATION_ALL against PXL_ISOLATION_NONE (Tests/worker/isolation_all.py): the
# conformance corpus and the WebP, GIF and AVIF suites through `pixload fetch` in five
# variants (full size, FILL and FIT thumbnails, the other formats, no orientation, no
# colour management), every written PNG compared byte for byte, every status and size.
# About 3.5 minutes on 2 shared cores: not part of `make test`.
test-isolation-all: all
	python3 Tests/worker/isolation_all.py $(STAGE)/bin/pixload $(CORPUS)

# What isolation costs (bench/isolation_cost.py): HEIC, JPEG XL and SVG thumbnails with
# --isolation none against modules, the web set's JPEGs and PNGs with none against all,
# whole-process CPU (the workers included) and wall, interleaved, medians; the host's peak
# memory with 8 decode threads.
bench-isolation:
	@scripts/deps.sh
	@$(SUBMAKE) all
	@scripts/photos.sh $(DEMO_DATA) 300
	python3 bench/isolation_cost.py $(STAGE)/bin/pixload $(DEMO_DATA) $(STAGE)/bench-isolation $(BENCH_ISOLATION_RUNS)

# The decode worker against a hostile codec module (Tests/worker/test_worker.c): segfault,
# endless loop, 16 GB, writing past its buffer, reading a secret, connecting, /bin/sh,
# fork, killing its parent, writing a file: each a decoder failure or a refusal, then a QOI
# file decoded by a fresh worker (the QOI test codec as a module). A lying worker
# (Tests/worker/lying_worker.c) breaks the protocol each way it can: every lie refused. Then
# the shipped modules (heif, jxl, svg) on the module fuzz seeds, their fuzz regressions and
# an SVG with text: the same status and pixels in the worker as in-process. Needs no Swift
# build: the modules are linked against a stub with libpixload's soname
# (Tests/worker/libpixload_stub.c), as they ship they are linked against the library, and
# the worker answers that NEEDED itself.
WORKER_TEST := $(STAGE)/tests/worker
WORKER_TEST_MODULES := $(WORKER_TEST)/codecs
test-worker: $(WORKER_EXE)
	@$(SUBMAKE) module-fuzz-seeds >/dev/null
	@mkdir -p $(WORKER_TEST_MODULES) $(WORKER_TEST)/stub
	$(CC) $(CFLAGS) $(WARN) -fPIC -shared -Iinclude Tests/worker/libpixload_stub.c -o $(WORKER_TEST)/stub/libpixload.so \
	  -Wl,-soname,libpixload.so.$(SOVERSION)
	$(foreach m,$(MODULE_PKGS),$(CC) $(CFLAGS) $(WARN) -fPIC -shared -fvisibility=hidden -Iinclude \
	  $$(pkg-config --cflags $(word 2,$(subst :, ,$(m)))) codecs/$(firstword $(subst :, ,$(m))).c \
	  -o $(WORKER_TEST_MODULES)/libpixload-$(firstword $(subst :, ,$(m))).so -L$(WORKER_TEST)/stub -lpixload \
	  $$(pkg-config --libs $(word 2,$(subst :, ,$(m)))) -Wl,-z,defs && ) true
	$(CC) $(CFLAGS) $(WARN) -fPIC -shared -fvisibility=hidden -Iinclude Tests/worker/hostile_module.c \
	  -o $(WORKER_TEST_MODULES)/libpixload-hostile.so -pthread
	$(CC) $(CFLAGS) -fPIC -shared -Iinclude $(fuzz_source_qoi) -o $(WORKER_TEST_MODULES)/libpixload-qoi.so
	$(CC) $(CFLAGS) $(WARN) -Iinclude Tests/worker/lying_worker.c -o $(WORKER_TEST)/lying-worker
	@# The test loads the shipped modules too (the in-process reference): the same soname trick.
	$(CC) $(CFLAGS) $(WARN) -Iinclude Tests/worker/test_worker.c worker/worker_client.c worker/codecs.c worker/manifest.c \
	  -o $(WORKER_TEST)/test_worker -ldl $$(pkg-config --libs libseccomp) -Wl,-soname,libpixload.so.$(SOVERSION) \
	  -Wl,--export-dynamic-symbol=pxl_codec_init_size,--export-dynamic-symbol=pxl_loader_add_codec
	$(WORKER_TEST)/test_worker $(WORKER_EXE) $(WORKER_TEST_MODULES) $(WORKER_TEST)/lying-worker $(MODULE_FUZZ_SEEDS)/heif/* \
	  $(MODULE_FUZZ_SEEDS)/jxl/* Tests/fuzz/seeds/svg/* \
	  $(filter-out %/README.md,$(wildcard $(addprefix Tests/fuzz-regressions/,$(addsuffix /*,$(MODULE_FUZZ)))))

# The codec modules against heif-convert, djxl and rsvg-convert on files made at run time,
# their limits, and each module hidden in turn (Tests/modules/conformance.py).
test-modules: all
	python3 Tests/modules/conformance.py $(STAGE)
	python3 Tests/modules/orientation.py $(STAGE)
	python3 Tests/modules/suites.py $(STAGE)
	@# The module fuzz targets' replay builds under ASan + UBSan (Tests/fuzz/codecs/module_fuzz.c,
	@# see fuzz-heif) on their kept regressions and their seeds: "N passed, N failed" per
	@# module, every file's line (and the sanitizer's report) when one fails.
	@$(SUBMAKE) module-fuzz-seeds >/dev/null
	$(foreach m,$(MODULE_FUZZ) qoi,$(CLANG) $(MODULE_FUZZ_SAN) -DMODULE_FUZZ_MAIN $(call module_fuzz_cflags,$(m)) \
	  Tests/fuzz/codecs/module_fuzz.c $(call module_fuzz_source,$(m)) -o $(FUZZ_DIR)/$(m)-replay \
	  $(call module_fuzz_libs,$(m)) && \
	  { LSAN_OPTIONS=suppressions=$(CURDIR)/Tests/fuzz/codecs/lsan.supp $(FUZZ_DIR)/$(m)-replay $(replay_inputs_$(m)) \
	      $(filter-out %/README.md,$(wildcard Tests/fuzz-regressions/$(m)/*)) >$(FUZZ_DIR)/$(m)-replay.log 2>&1 \
	    || { cat $(FUZZ_DIR)/$(m)-replay.log; exit 1; }; } && \
	  echo "$(m) module fuzz replay: $$(tail -1 $(FUZZ_DIR)/$(m)-replay.log)" && ) true
	@# The same files (QOI's aside: not a shipped module) through the decode worker, as the
	@# library decodes them (PXL_ISOLATION_MODULES): the same status, size and pixels as
	@# in-process, full size and 150x150 FILL (Tests/worker/replay_isolated.py).
	python3 Tests/worker/replay_isolated.py $(STAGE)/bin/pixload $(foreach m,$(MODULE_FUZZ),$(replay_inputs_$(m)) \
	  $(filter-out %/README.md,$(wildcard Tests/fuzz-regressions/$(m)/*)))

# The core's threads under ThreadSanitizer (its own scratch folder: other flags; shared
# with scripts/check-sanitizer.sh tsan, so the same dynamically linked Swift runtime).
test-tsan:
	PXL_SWIFT_RUNTIME=dynamic $(SWIFT) test --sanitize=thread --scratch-path .build-tsan

# Decoder conformance: fixtures generated now by cjpeg and our PNG writer, expected pixels
# from djpeg and Pillow (scripts/gen-conformance.py), so a fresh clone has a conformance
# set; then ../shared/corpus where present (skipped, saying so, where absent). Then colour
# management (Tests/codecs/color_test.c) against Pillow ImageCms on P3 / Adobe RGB / gray /
# cHRM- and gAMA-tagged files made now (scripts/gen-color-fixtures.py), and on PngSuite's
# gAMA/cHRM files where ../shared/corpus is present.
GEN_CONFORMANCE := $(STAGE)/conformance-gen
# The JPEG, PNG and WebP decodes fed as their bytes arrive against the whole-buffer decode:
# the corpus's JPEGs, PNGs and WebPs, generated JPEGs and WebPs made by cwebp (Debian's webp
# package) in random chunks, cut short and damaged (Tests/codecs/stream_decode_test.c).
test-stream-decode:
	@mkdir -p $(STAGE)/tests
	$(CC) -O2 $(WARN) -ISources/CCodecs/include Tests/codecs/stream_decode_test.c Sources/CCodecs/*.c \
	  -o $(STAGE)/tests/stream-decode $(CODEC_LIBS)
	$(STAGE)/tests/stream-decode $(CORPUS)

test-codecs: deps
	@mkdir -p $(STAGE)/tests
	for gen in scripts/gen-conformance*.py; do python3 $$gen $(GEN_CONFORMANCE) || exit 1; done
	$(CC) -O2 $(WARN) -ISources/CCodecs/include Tests/codecs/conformance.c Sources/CCodecs/*.c \
	  -o $(STAGE)/tests/conformance $(CODEC_LIBS)
	$(CC) -O2 $(WARN) -pthread -ISources/CCodecs/include -ISources/CCodecs Tests/codecs/api_edges.c \
	  Sources/CCodecs/*.c -o $(STAGE)/tests/codec-edges $(CODEC_LIBS)
	$(STAGE)/tests/conformance -g $(GEN_CONFORMANCE) -f Tests/fixtures $(CORPUS)
	$(STAGE)/tests/codec-edges
	@# The fixed-point area resampler against a double-precision reference, on each code path.
	$(CC) -O2 $(WARN) -ISources/CCodecs/include Tests/codecs/resample_test.c Sources/CCodecs/resample.c \
	  -o $(STAGE)/tests/resample -lm
	$(STAGE)/tests/resample
	@# png_fast.c's SIMD unfiltering (the Paeth row runs, SSE2 and AVX2) against the spec's filters.
	$(CC) -O2 $(WARN) -ISources/CCodecs/include -ISources/CCodecs Tests/codecs/png_unfilter_test.c \
	  -o $(STAGE)/tests/png-unfilter -ldeflate -lz
	$(STAGE)/tests/png-unfilter
	@# jpeg_progressive.c's progressive decoder against libjpeg's own: made and corpus files,
	@# whole, damaged and streamed, pixels and warnings to the bit (its kept masks checked too).
	$(CC) -O2 $(WARN) -DPXL_JPEG_PROGRESSIVE_CHECK -ISources/CCodecs/include -ISources/CCodecs \
	  Tests/codecs/jpeg_progressive_test.c Sources/CCodecs/*.c -o $(STAGE)/tests/jpeg-progressive $(CODEC_LIBS)
	$(STAGE)/tests/jpeg-progressive $(CORPUS)
	@$(SUBMAKE) test-stream-decode
	@# The GIF fuzz target's replay build under ASan + UBSan (clang: gcc misses null + offset): its
	@# regressions, the suite and the generated set.
	$(CLANG) -fuse-ld=lld -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -DGIF_FUZZ_MAIN \
	  -ISources/CCodecs/include Tests/fuzz/gif/gif_fuzz.c Sources/CCodecs/*.c -o $(STAGE)/tests/gif-replay $(CODEC_LIBS)
	$(STAGE)/tests/gif-replay Tests/fuzz-regressions/gif/*.gif Tests/fixtures/gif-suite/*.gif \
	  $(GEN_CONFORMANCE)/generated-gif/*.gif >/dev/null
	CORPUS=$(CORPUS) python3 scripts/gen-color-fixtures.py $(STAGE)/color-fixtures
	$(CC) -O2 $(WARN) -pthread -ISources/CCodecs/include Tests/codecs/color_test.c Sources/CCodecs/*.c \
	  -o $(STAGE)/tests/color $(CODEC_LIBS)
	$(STAGE)/tests/color $(STAGE)/color-fixtures
	$(CC) -O2 $(WARN) -ISources/CCodecs/include -ITests/codecs Tests/codecs/avif_test.c Sources/CCodecs/*.c \
	  -o $(STAGE)/tests/avif-test $(CODEC_LIBS)
	$(STAGE)/tests/avif-test $(GEN_CONFORMANCE)/generated-avif Tests/fixtures/avif-suite
	$(CC) -O2 $(WARN) -ISources/CCodecs/include Tests/codecs/webp_api.c Sources/CCodecs/*.c \
	  -o $(STAGE)/tests/webp-api $(CODEC_LIBS)
	$(STAGE)/tests/webp-api $(GEN_CONFORMANCE)/webp-api

# The whole library and client on the corpus: pixels written by `pixload fetch --out`
# equal the manifests' for every row of pngsuite and jpeg-conformance, of the sets kept
# under Tests/fixtures (WebP, GIF, AVIF suites) and of the generated AVIF set; then the
# client's memory cache default (none over distinct URLs, Tests/e2e/cli_memory_cache.py).
test-cli-conformance: all
	python3 scripts/gen-conformance-avif.py $(GEN_CONFORMANCE)
	python3 Tests/e2e/cli_conformance.py $(STAGE)/bin/pixload $(CORPUS) Tests/fixtures/avif-suite \
	  $(GEN_CONFORMANCE)/generated-avif
	python3 Tests/e2e/cli_memory_cache.py $(STAGE)/bin/pixload

# The disk cache between processes, counted at nginx: a second process makes no request,
# damaged entries are refetched, the size limit holds.
test-disk-cache: all
	Tests/e2e/disk_cache.sh $(STAGE)/bin/pixload

# The C API tests, compiled against an installed copy (header, .so, pkg-config).
TEST_PREFIX := $(CURDIR)/$(STAGE)/test-prefix
test-c: all
	rm -rf $(TEST_PREFIX)
	$(MAKE) --no-print-directory install PREFIX=$(TEST_PREFIX)
	PXL_LIBDIR=$(TEST_PREFIX)/lib PXL_INCLUDEDIR=$(TEST_PREFIX)/include Tests/capi/run.sh

# A program built against the 0.1.0 header (kept in Tests/abi) runs against this library.
test-abi: all
	Tests/abi/run.sh $(STAGE)/lib

# The Python bindings (pip-installed into build/python-venv) and the Rust crate (cargo
# test --offline), each against build/lib and a private nginx.
test-python: all
	bindings/python/run_tests.sh $(STAGE)/lib

test-rust: all
	bindings/rust/run_tests.sh $(STAGE)/lib

# The GTK 4 example under Xvfb: a scripted scroll, a screenshot, every visible cell checked
# from its pixels (artefacts in build/artifacts/).
test-gtk: all
	examples/gtk/test_xvfb.sh $(STAGE)

# The Qt for Python gallery (examples/qt) under Qt's offscreen platform: the same scripted
# scroll, its window saved and checked cell by cell against each row's own image (artefacts
# in build/artifacts/); PySide6 from PyPI into build/qt-venv.
.PHONY: test-qt bench-qt
test-qt:
	@scripts/deps.sh test
	@$(SUBMAKE) all
	examples/qt/test_offscreen.sh $(STAGE)

# The short forms of the long checks: the C API tests that thread, cancel, free and use
# TLS under ASan+UBSan and under TSan (the Swift tests run under TSan in test-tsan), a
# one-minute soak, and the resource-exhaustion cases.
test-sanitizers:
	scripts/check-sanitizer.sh asan --short
	scripts/check-sanitizer.sh tsan --short

# The soak runs with the default isolation (modules), then 30 s with every decode in a
# worker (PXL_ISOLATION_ALL: workers started, retired and ended with the recycled loaders).
test-soak: all
	Tests/soak/run.sh 60
	PXL_SOAK_ISOLATION=all Tests/soak/run.sh 30

test-exhaustion: all
	Tests/e2e/exhaustion.sh

# The long forms: every Swift and C API test under each sanitizer, and valgrind memcheck
# over the client and the C API tests (zero bytes definitely or indirectly lost).
check-asan:
	@scripts/deps.sh
	scripts/check-sanitizer.sh asan

check-tsan:
	@scripts/deps.sh
	scripts/check-sanitizer.sh tsan

check-valgrind:
	@scripts/deps.sh
	@$(SUBMAKE) all
	scripts/check-valgrind.sh $(STAGE) $(CORPUS)

# What ships: self-contained .so with a SONAME and only pxl_* exported; install and
# uninstall to a DESTDIR are exact; a program outside the tree builds with pkg-config, and
# examples/c with CMake (find_package, also from a moved prefix) and with Meson.
check-dist: all
	@scripts/check-dist.sh $(STAGE)

# The wheel installed offline into a fresh venv, no PIXLOAD_LIBRARY: it loads http and
# file:// images with its own libraries only; ldd outside it shows only the manylinux
# allow-list.
test-wheel: wheel
	@Tests/packaging/wheel.sh $(DIST)

# The .debs installed with apt-get on this system (root or sudo): the core three first
# (hello.c builds with pkg-config, CMake and Meson and runs, the client runs, a HEIC names
# libpixload-heif), then the module packages (HEIC, JPEG XL and SVG load); purge leaves
# nothing behind and /usr/local as it was.
test-deb: deb
	@Tests/packaging/deb.sh $(DIST)

# --- benchmark -----------------------------------------------------------------------

bench:
	@scripts/deps.sh python
	@$(SUBMAKE) all
	@scripts/bench-table.sh $(STAGE) $(DEMO_DATA) $(CAMERA_DATA)
	@scripts/bench.sh $(STAGE) $(DEMO_DATA)
	@$(SUBMAKE) bench-network
	@$(SUBMAKE) bench-decode
	@$(SUBMAKE) bench-progressive
	@$(SUBMAKE) bench-processors
	@$(SUBMAKE) bench-color
	@$(SUBMAKE) bench-cancel
	@$(SUBMAKE) bench-warm
	@$(SUBMAKE) bench-qt

# The Qt gallery's frame times (examples/qt): the time the Qt thread spends inside pixload
# calls per frame of the list over its scripted session (median, p99, max), three runs.
bench-qt:
	@scripts/deps.sh test
	@$(SUBMAKE) all
	@examples/qt/test_offscreen.sh --bench $(STAGE)

# README's performance table alone: pixload against the bare decode from memory and its
# Python package against aiohttp + Pillow, web-size and 8-16 MP photos, BENCH_TABLE_RUNS
# (3) interleaved runs, medians (scripts/bench-table.sh, bench/table.py), with the isolation
# rows: --isolation none against all (web) and modules (HEIC, JPEG XL, SVG) from nginx.
CAMERA_DATA := $(STAGE)/camera-photos
bench-table:
	@scripts/deps.sh python
	@$(SUBMAKE) all
	@scripts/bench-table.sh $(STAGE) $(DEMO_DATA) $(CAMERA_DATA)

# Issue 41's CPU ratio per kind of web photo the demo set lacks (progressive 4:4:4, ICC,
# EXIF orientation, CMYK, tiny and 4000 px JPEGs, 16-bit PNGs ...), made at test time
# (bench/heldout_set.py), BENCH_HELDOUT_RUNS (3) interleaved runs, medians
# (scripts/bench-heldout.sh, bench/heldout.py; BENCH_BEFORE=DIR adds a column).
bench-heldout:
	@scripts/deps.sh python
	@$(SUBMAKE) all
	@scripts/bench-heldout.sh $(STAGE)

# The scroll benchmark on its own (make bench runs it too, after bench/compare.py);
# SCROLL_ISOLATION=modules,all plays each run under both (bench/scroll.sh).
bench-scroll:
	@scripts/deps.sh
	@$(SUBMAKE) all
	@bench/scroll.sh $(STAGE) $(DEMO_DATA)

# The network path: 1,000 64x64 JPEGs from nginx on loopback, pixload against a bare
# libcurl loop with and without decoding; connections counted at the server.
bench-network:
	@scripts/deps.sh
	@$(SUBMAKE) all
	@bench/network.sh $(STAGE)

# Decoding while downloading: a 12 MP baseline JPEG (bench/make_photo.py) served at 1 MB/s
# from a thread of the bench (bench/stream_decode.c): the last byte to the callback for its
# 150x150 thumbnail and full size, against the full-size decode from memory (the JPEG, then
# the same photo as a WebP), medians of
# BENCH_STREAM_REPS (5). BEFORE_LIB=DIR runs the same first against the libpixload in DIR
# (an older build: "before").
BENCH_STREAM_REPS ?= 5
bench-stream:
	@$(SUBMAKE) all
	@mkdir -p $(STAGE)/bench-stream
	@test -f $(STAGE)/bench-stream/photo-12mp.jpg || python3 bench/make_photo.py $(STAGE)/bench-stream/photo-12mp.jpg
	$(CC) -O2 $(WARN) -pthread -Iinclude bench/stream_decode.c -o $(STAGE)/bench-stream/stream_decode \
	  -L$(STAGE)/lib -lpixload -Wl,--enable-new-dtags,-rpath,$(CURDIR)/$(STAGE)/lib
	@if [ -n "$(BEFORE_LIB)" ]; then echo "== before ($(BEFORE_LIB))"; \
	  LD_LIBRARY_PATH=$(BEFORE_LIB) $(STAGE)/bench-stream/stream_decode $(STAGE)/bench-stream/photo-12mp.jpg \
	    1000000 $(BENCH_STREAM_REPS) || exit 1; echo "== after"; fi
	$(STAGE)/bench-stream/stream_decode $(STAGE)/bench-stream/photo-12mp.jpg 1000000 $(BENCH_STREAM_REPS)
	@# The same photo as a lossy WebP (cwebp, Debian's webp package): libwebp's incremental decoder.
	@test -f $(STAGE)/bench-stream/photo-12mp.webp || cwebp -quiet -q 80 $(STAGE)/bench-stream/photo-12mp.jpg \
	  -o $(STAGE)/bench-stream/photo-12mp.webp
	$(STAGE)/bench-stream/stream_decode $(STAGE)/bench-stream/photo-12mp.webp 1000000 $(BENCH_STREAM_REPS)

# pxl_placeholder_decode's time on the caller's thread (BlurHash and ThumbHash, 32x32 and
# 256x256) and pxl_placeholder_encode's on 100x100: medians (bench/placeholder.c).
# An animation player against PXL_FLAG_ANIMATE and the still first frame (bench/animation.c)
# on a 150-frame 480x270 GIF that bench/animation_gif.py writes (Pillow).
bench-animation:
	@$(SUBMAKE) all
	$(CC) $(CFLAGS) $(WARN) -Iinclude bench/animation.c -o $(STAGE)/bench-animation \
	  -L$(STAGE)/lib -lpixload -Wl,-rpath,$(CURDIR)/$(STAGE)/lib
	$(CC) $(CFLAGS) $(WARN) -Iinclude bench/animation_table.c -o $(STAGE)/bench-animation-table \
	  -L$(STAGE)/lib -lpixload -lm -Wl,-rpath,$(CURDIR)/$(STAGE)/lib
	bench/animation.sh $(STAGE)

# An animation's frames through a decode worker against in-process (worker/README.md):
# PXL_FLAG_ANIMATE of FILE, wall and CPU (workers included) per frame.
bench-animation-isolated:
	@$(SUBMAKE) all
	$(CC) $(CFLAGS) $(WARN) -Iinclude bench/animation_isolated.c -o $(STAGE)/bench-animation-isolated \
	  -L$(STAGE)/lib -lpixload -Wl,-rpath,$(CURDIR)/$(STAGE)/lib
	$(STAGE)/bench-animation-isolated $(FILE) $(or $(ISOLATION),all) $(or $(ROUNDS),31)

bench-placeholder:
	@$(SUBMAKE) all
	$(CC) $(CFLAGS) $(WARN) -Iinclude bench/placeholder.c -o $(STAGE)/bench-placeholder \
	  -L$(STAGE)/lib -lpixload -Wl,-rpath,$(CURDIR)/$(STAGE)/lib
	$(STAGE)/bench-placeholder

# pxl_cancel_all over N requests waiting for a connection (distinct URLs, then all one
# shared URL): wall and CPU ms, min of BENCH_CANCEL_RUNS rounds (cancelling must stay
# linear in N).
BENCH_CANCEL_COUNTS ?= 5000 20000 50000
BENCH_CANCEL_RUNS ?= 3
bench-cancel:
	@scripts/deps.sh
	@$(SUBMAKE) all
	$(CC) $(CFLAGS) $(WARN) -Iinclude bench/cancel_all.c -o $(STAGE)/bench-cancel-all \
	  -L$(STAGE)/lib -lpixload -Wl,-rpath,$(CURDIR)/$(STAGE)/lib
	$(STAGE)/bench-cancel-all $(BENCH_CANCEL_RUNS) $(BENCH_CANCEL_COUNTS)
	$(STAGE)/bench-cancel-all $(BENCH_CANCEL_RUNS) --shared $(BENCH_CANCEL_COUNTS)

# The warm start (scripts/bench-warm.sh, bench/warm_start.c): 8 photographs of 8-16 MP from
# the wallpaper packages, 150x150 FILL, from the disk cache with a fresh loader, first
# pxl_load to 8th callback, in-process; medians of BENCH_WARM_RUNS.
CAMERA_DATA := $(STAGE)/camera-photos
BENCH_WARM_RUNS ?= 3
bench-warm:
	@scripts/deps.sh python
	@$(SUBMAKE) all
	@scripts/bench-warm.sh $(STAGE) $(CAMERA_DATA) $(BENCH_WARM_RUNS)

# Decode CPU per image: ImageDecoder against libjpeg-turbo/libpng/libavif called directly, by
# kind of file, full size and 150x150 fill (release build in its own scratch folder); then
# the codec modules against libheif/libjxl/librsvg (scripts/bench-modules.sh); then each
# kind's thumbnails in-process against isolated (modules, all) and peak memory with 8 decode
# threads (bench/isolation_cost.py --kinds). BENCH_DECODE_ONLY=isolation: those rows alone.
BENCH_DECODE_REPS ?= 5
bench-decode:
	@scripts/deps.sh
	@$(SUBMAKE) all
	@CODEC_LIBS="$(CODEC_LIBS)" scripts/bench-decode.sh $(STAGE) $(DEMO_DATA) $(BENCH_DECODE_REPS)

# Progressive JPEGs' entropy decoding (bench/progressive_decode.c): CPU per decode at the
# DCT scale of a 150x150 thumbnail, libjpeg-turbo's own progressive decoder against
# Sources/CCodecs/jpeg_progressive.c, on the demo set's progressive JPEGs (web size) and
# on the camera-size ones of scripts/progressive-photos.sh. Interleaved rounds, medians.
BENCH_PROGRESSIVE_ROUNDS ?= 7
bench-progressive:
	@scripts/deps.sh
	@scripts/photos.sh $(DEMO_DATA) 300
	@scripts/progressive-photos.sh $(STAGE)/bench-decode/progressive-photos
	@mkdir -p $(STAGE)/bench-progressive
	$(CC) -O2 $(WARN) -ISources/CCodecs/include -ISources/CCodecs bench/progressive_decode.c Sources/CCodecs/*.c \
	  -o $(STAGE)/bench-progressive/progressive-decode $(CODEC_LIBS)
	$(STAGE)/bench-progressive/progressive-decode 150 $(BENCH_PROGRESSIVE_ROUNDS) $(DEMO_DATA)/img/*.jpg
	$(STAGE)/bench-progressive/progressive-decode 150 $(BENCH_PROGRESSIVE_ROUNDS) \
	  $(STAGE)/bench-decode/progressive-photos/*.jpg

# The area resampler alone (scripts/bench-resample.sh, bench/resample.c): CPU per 150x150
# FILL thumbnail of the demo JPEGs at their DCT scale, each code path against the float one.
bench-resample:
	@CODEC_LIBS="$(CODEC_LIBS)" scripts/bench-resample.sh $(STAGE) $(DEMO_DATA)

# The cost of colour management (scripts/bench-color.sh): ImageDecoder's CPU per image on
# the corpus photographs tagged Display P3 / Adobe RGB against the same files untagged, and
# a thumbnail converted after resampling against converted row by row before it.
BENCH_COLOR_REPS ?= 5
bench-color:
	@scripts/deps.sh
	@CODEC_LIBS="$(CODEC_LIBS)" scripts/bench-color.sh $(STAGE) $(BENCH_COLOR_REPS)

clean:
	rm -rf $(STAGE) $(DIST) $(RELEASE_SCRATCH) .build .build-tsan .build-asan .build-fuzz .build-bench \
	  bindings/rust/target examples/rust/target

# --- long runs -----------------------------------------------------------------------

# Several host threads loading, cancelling, scrolling and freeing against nginx and the
# fault server at once, with tiny caches; invariants checked throughout (Tests/soak/soak.c).
# SOAK_ISOLATION: modules (the default), all (every decode in a worker) or none.
SOAK_SECONDS ?= 1800
SOAK_ISOLATION ?= modules
soak:
	@scripts/deps.sh
	@$(SUBMAKE) all
	PXL_SOAK_ISOLATION=$(SOAK_ISOLATION) Tests/soak/run.sh $(SOAK_SECONDS)

# `make fuzz`: the mutation smoke test, then each libFuzzer target for FUZZ_SECONDS.
fuzz:
	@scripts/deps.sh
	@$(SUBMAKE) fuzz-smoke fuzz-decode fuzz-diskentry fuzz-headers fuzz-webp fuzz-gif fuzz-avif \
	  fuzz-heif fuzz-jxl fuzz-svg fuzz-qoi

# Hostile input against the decoders under AddressSanitizer + UBSan: every corpus file
# mutated FUZZ_MUTATIONS times (deterministic). Not coverage-guided; a cheap check that no
# mutant crashes, reads out of bounds or leaks.
FUZZ_MUTATIONS ?= 20
CORPUS ?= ../shared/corpus
fuzz-smoke:
	@mkdir -p $(STAGE)/tests
	$(CC) -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -ISources/CCodecs/include \
	  Tests/codecs/mutation_smoke.c Sources/CCodecs/*.c -o $(STAGE)/tests/mutation-smoke $(CODEC_LIBS)
	find $(CORPUS) -name '*.png' -o -name '*.jp*g' | $(STAGE)/tests/mutation-smoke $(FUZZ_MUTATIONS)

# Coverage-guided fuzzing with libFuzzer + AddressSanitizer, FUZZ_SECONDS per target on one
# core. Swift code and the C shims are instrumented; libjpeg, libpng and libcurl (system
# builds) are not.
#   decode     ImageDecoder (shims, DCT scaling, resampler, orientation, animation); seeds:
#              the corpus and the WebP, GIF and AVIF suites under Tests/fixtures
#   diskentry  the disk-cache entry reader on arbitrary file contents
#   webp       WebP: read_info, ImageDecoder, every composited frame, the ICCP chunk, checked
#              against each other; seeds: Tests/fixtures/webp-suite and the generated WebP set
#   headers    response-header handling (status lines, Cache-Control, Expires, ETag,
#              Retry-After, Location) as the engine's header callback does it
#   qoi        the QOI codec of the C API tests (Tests/capi/qoi_codec.h) through the
#              registration path: registered by its module function (Tests/fuzz/qoi/module)
#              with the real pxl_loader_add_codec on a pxl_loader_new loader, decoded by that
#              loader's decoder (Tests/fuzz/qoi/driver); seeds written by its encoder
#   heif, jxl, svg  the codec modules (codecs/NAME.c), C only, ASan + UBSan: fuzz-heif below
# What a target learns accumulates in $(FUZZ_DIR)/NAME-corpus. A crash stops the run and
# leaves crash-* (or timeout-*, oom-*) in $(FUZZ_DIR)/NAME-artifacts: reproduce it with the
# plain build (`swift build --product pixload-fuzz-NAME`, then `pixload-fuzz-NAME FILE`),
# fix it, and keep the input in Tests/fuzz-regressions/NAME, which `swift test` replays.
# -enable-testing: diskentry and headers reach internal parsers through @testable import.
FUZZ_SECONDS ?= 600
FUZZ_DIR    := $(STAGE)/fuzz
FUZZ_SCRATCH := .build-fuzz
FUZZ_TARGETS := decode diskentry headers webp avif qoi
fuzz_seeds_decode := $(CORPUS) Tests/fixtures/webp-suite Tests/fixtures/gif-suite Tests/fixtures/avif-suite
#   avif       the AVIF shim through ImageDecoder, decode_frames and color; seeds: the AVIF
#              sets (generated ones made first by scripts/gen-conformance-avif.py)
fuzz_seeds_avif := Tests/fixtures/avif-suite $(GEN_CONFORMANCE)/generated-avif
fuzz_seeds_diskentry := Tests/fuzz/seeds/diskentry
fuzz_seeds_headers := Tests/fuzz/seeds/headers
fuzz-avif: $(GEN_CONFORMANCE)/generated-avif/manifest.tsv
$(GEN_CONFORMANCE)/generated-avif/manifest.tsv:
	python3 scripts/gen-conformance-avif.py $(GEN_CONFORMANCE)
# fuzz-gif: libFuzzer on gif_shim.c alone (Tests/fuzz/gif/gif_fuzz.c: read_info, decode in
# every layout, decode_rows, decode_frames, color), C only, ASan + UBSan; seeds: the GIF
# suite, the generated GIF set (test-codecs makes it) and Tests/fuzz-regressions/gif.
# Replay an input: `cc -g -ISources/CCodecs/include -DGIF_FUZZ_MAIN Tests/fuzz/gif/gif_fuzz.c
# Sources/CCodecs/*.c $(CODEC_LIBS)` and run it on the file.
fuzz-gif:
	@mkdir -p $(FUZZ_DIR)/gif-corpus $(FUZZ_DIR)/gif-artifacts $(GEN_CONFORMANCE)/generated-gif
	$(CLANG) -fuse-ld=lld -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -ISources/CCodecs/include \
	  Tests/fuzz/gif/gif_fuzz.c Sources/CCodecs/*.c -o $(FUZZ_DIR)/gif-fuzz $(CODEC_LIBS)
	$(FUZZ_DIR)/gif-fuzz -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 \
	  -dict=Tests/fuzz/gif.dict -artifact_prefix=$(FUZZ_DIR)/gif-artifacts/ $(FUZZ_DIR)/gif-corpus \
	  Tests/fixtures/gif-suite $(GEN_CONFORMANCE)/generated-gif Tests/fuzz-regressions/gif

# fuzz-heif, fuzz-jxl, fuzz-svg: libFuzzer on each codec module (codecs/NAME.c) alone, C
# only, ASan + UBSan. One harness, Tests/fuzz/codecs/module_fuzz.c: a module imports only
# pxl_codec_init_size and pxl_loader_add_codec from libpixload (nm -D), so the harness
# defines those two, the module's own pxl_codec_module_register hands it the codec, and it
# calls the codec exactly as the decode stage does (ImageDecoder+Codecs.swift, CCodec in
# API+Codecs.swift): sniff, read_header, size against max_pixels and frames against the
# animation bound before any buffer, read_icc, decode_frames with frame_done (and, for a
# codec with open_frames, the frames again one at a time into one canvas as a player reads
# them, each checked against decode_frames'), choose_size +
# decode into a buffer of the drawn size, and a PXL_CODEC_PARTIAL decode of a prefix for a
# PXL_CODEC_PROGRESSIVE codec (jxl). Chosen over a Swift target for the modules: the
# module's code is what is instrumented, the build takes seconds, the same file replays.
# libheif, libjxl and librsvg are not instrumented (a fault in them still stops the run).
# (fuzz-qoi, above, is a Swift target instead: the issue asks for the library's own
# registration path there, and its codec has no system library behind it.) Seeds: heif-enc,
# cjxl and QOI files made now (module-fuzz-seeds), Tests/fuzz/seeds/svg, the public suites
# (Tests/fixtures/{heif,jxl,svg}-suite) and Tests/fuzz-regressions/NAME, which
# `make test-modules` replays through the harness's plain build under ASan + UBSan, QOI's
# too (reproduce an input: build/fuzz/NAME-replay FILE), then (but QOI) through the decode
# worker against in-process (Tests/worker/replay_isolated.py). jxl runs with stderr closed
# (libjxl prints each decode error there: 100 MB a run; sanitizer reports still show).
# fontconfig's once-per-process configuration is not a leak (Tests/fuzz/codecs/lsan.supp).
MODULE_FUZZ := heif jxl svg
MODULE_FUZZ_SEEDS := $(FUZZ_DIR)/seeds
MODULE_FUZZ_SAN := -fuse-ld=lld -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -Iinclude
module_pkg = $(word 2,$(subst :, ,$(filter $(1):%,$(MODULE_PKGS))))
module_fuzz_source = $(or $(fuzz_source_$(1)),codecs/$(1).c)
module_fuzz_cflags = $(if $(call module_pkg,$(1)),$$(pkg-config --cflags $(call module_pkg,$(1))))
module_fuzz_libs = $(if $(call module_pkg,$(1)),$$(pkg-config --libs $(call module_pkg,$(1))))
fuzz_source_qoi := Tests/fuzz/qoi/module/qoi_module.c
fuzz_seeds_heif := $(MODULE_FUZZ_SEEDS)/heif Tests/fixtures/heif-suite
fuzz_seeds_jxl := $(MODULE_FUZZ_SEEDS)/jxl Tests/fixtures/jxl-suite
fuzz_seeds_svg := Tests/fuzz/seeds/svg Tests/fixtures/svg-suite
fuzz_seeds_qoi := $(MODULE_FUZZ_SEEDS)/qoi
# What test-modules replays besides the regressions (shell globs: the seeds are made first).
replay_inputs_heif := $(MODULE_FUZZ_SEEDS)/heif/* Tests/fixtures/heif-suite/*.hei[cf]
replay_inputs_jxl := $(MODULE_FUZZ_SEEDS)/jxl/* Tests/fixtures/jxl-suite/*.jxl
replay_inputs_svg := Tests/fuzz/seeds/svg/* Tests/fixtures/svg-suite/*.svg
replay_inputs_qoi := $(MODULE_FUZZ_SEEDS)/qoi/*
fuzz_flags_jxl := -close_fd_mask=2
# heif: ASan's default quarantine took the run to 1.4 GB in 60 s (to the RSS limit in
# minutes); 54 MB without one, and the replay over the corpus stays flat: not a leak.
fuzz_env_heif := ASAN_OPTIONS=quarantine_size_mb=32
module-fuzz-seeds:
	python3 scripts/gen-module-fuzz-seeds.py $(MODULE_FUZZ_SEEDS)
	@mkdir -p $(MODULE_FUZZ_SEEDS)/qoi
	$(CC) -O1 -DQOI_WRITE_SEEDS -Iinclude $(fuzz_source_qoi) -o $(FUZZ_DIR)/qoi-seeds
	$(FUZZ_DIR)/qoi-seeds $(MODULE_FUZZ_SEEDS)/qoi
$(addprefix fuzz-,$(MODULE_FUZZ)) fuzz-qoi: module-fuzz-seeds
$(addprefix fuzz-,$(MODULE_FUZZ)): fuzz-%:
	@mkdir -p $(FUZZ_DIR)/$*-corpus $(FUZZ_DIR)/$*-artifacts
	$(CLANG) $(MODULE_FUZZ_SAN) -fsanitize=fuzzer $(call module_fuzz_cflags,$*) Tests/fuzz/codecs/module_fuzz.c \
	  $(call module_fuzz_source,$*) -o $(FUZZ_DIR)/$*-fuzz $(call module_fuzz_libs,$*)
	$(fuzz_env_$*) LSAN_OPTIONS=suppressions=$(CURDIR)/Tests/fuzz/codecs/lsan.supp $(FUZZ_DIR)/$*-fuzz \
	  -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 $(fuzz_flags_$*) \
	  $(if $(wildcard Tests/fuzz/$*.dict),-dict=Tests/fuzz/$*.dict) -artifact_prefix=$(FUZZ_DIR)/$*-artifacts/ \
	  $(FUZZ_DIR)/$*-corpus $(fuzz_seeds_$*) Tests/fuzz-regressions/$*

# webp: libwebp's test data and the generated set (make test-codecs writes it; absent is fine).
fuzz_seeds_webp := Tests/fixtures/webp-suite $(wildcard $(GEN_CONFORMANCE)/generated-webp)
$(addprefix fuzz-,$(FUZZ_TARGETS)): fuzz-%:
	$(SWIFT) build -c release --scratch-path $(FUZZ_SCRATCH) --product pixload-fuzz-$* \
	  -Xswiftc -sanitize=fuzzer,address -Xswiftc -DPIXLOAD_LIBFUZZER -Xswiftc -enable-testing \
	  -Xcc -fsanitize=fuzzer-no-link,address
	@mkdir -p $(FUZZ_DIR)/$*-corpus $(FUZZ_DIR)/$*-artifacts
	$(FUZZ_SCRATCH)/release/pixload-fuzz-$* -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 \
	  -timeout=10 -print_final_stats=1 -dict=Tests/fuzz/$*.dict -artifact_prefix=$(FUZZ_DIR)/$*-artifacts/ \
	  $(FUZZ_DIR)/$*-corpus $(fuzz_seeds_$*) Tests/fuzz-regressions/$*

# Processors: a 150x150 thumbnail's CPU plain, with round:12 and with circle; a 1024x768
# blur at sigma 2 and 40 against Pillow's GaussianBlur (bench/processors.py).
bench-processors:
	@scripts/deps.sh python
	@$(SUBMAKE) all
	@bindings/python/run_tests.sh $(STAGE)/lib --collect-only -q >/dev/null
	PIXLOAD_LIBRARY=$(CURDIR)/$(STAGE)/lib/libpixload.so.0 build/python-venv/bin/python bench/processors.py
