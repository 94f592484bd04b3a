// swift-tools-version:6.2
// pixload: one dynamic library product, no Swift package dependencies; only system
// libraries (libcurl and the codec libraries below). The shipped build's link flags (static
// Swift runtime, SONAME, version script) live in the Makefile, which builds it in its
// own scratch folder so that `swift test` never shares a build folder with it.
import PackageDescription

// The system libraries behind the CCodecs shims (the Makefile's CODEC_LIBS says the same).
let codecLibraries = ["jpeg", "png16", "deflate", "z", "webp", "webpdemux", "gif", "avif", "lcms2"]

let package = Package(
  name: "pixload",
  products: [
    .library(name: "pixload", type: .dynamic, targets: ["Pixload"]),
  ],
  targets: [
    // The public header as a C module: the API target imports it, so `@c @implementation`
    // makes the compiler reject any exported function whose signature drifts from it.
    .target(name: "CPixload", path: "include", publicHeadersPath: "."),
    // libcurl, plus non-variadic wrappers (Swift cannot call curl_easy_setopt's `...`).
    .target(name: "CCurl", linkerSettings: [.linkedLibrary("curl")]),
    // libjpeg-turbo, libpng, libwebp, giflib, libavif and lcms2 behind C functions that
    // return a status, so no library's error path (libjpeg's and libpng's longjmp) ever
    // crosses a Swift frame.
    .target(name: "CCodecs", linkerSettings: codecLibraries.map { .linkedLibrary($0) }),
    // The idiomatic Swift core: loading pipeline, network, decoding, caches. No C-API types.
    // Linux calls Swift's Glibc module does not expose (they need _GNU_SOURCE).
    .target(name: "CSupport"),
    // The built-in image processors (circle, rounded corners, blur...) on premultiplied
    // RGBA8, in C for speed; only libm.
    .target(name: "CProcessing"),
    // The library's side of the decode worker (worker/worker_client.c, included by
    // worker_glue.c): spawn, decode under a time limit, how a worker ended (issue 39).
    .target(name: "CWorker", cSettings: [.headerSearchPath("../../include"), .headerSearchPath("../../worker")]),
    // Each folder's README.md says what it owns and may import (not a resource).
    .target(name: "PixloadCore", dependencies: ["CCurl", "CCodecs", "CSupport", "CProcessing", "CWorker"],
            exclude: ["Caching/README.md", "Decoding/README.md", "Internal/README.md", "Loading/README.md",
                      "Model/README.md", "Network/README.md", "Processing/README.md", "Fetching/README.md",
                      "Delivery/README.md", "Tables/README.md", "Animation/README.md"]),
    // The C API: thin @c @implementation functions over PixloadCore. Every build of
    // libpixload.so carries the Swift runtime (no libswift* in NEEDED), the debug one that
    // `swift build` and `swift test` leave in .build too; the sanitizer builds
    // (scripts/check-sanitizer.sh) link it dynamically, to share the toolchain's
    // instrumented runtime with the test program (PXL_SWIFT_RUNTIME=dynamic).
    .target(name: "Pixload", dependencies: ["PixloadCore", "CPixload"], exclude: ["README.md"],
            linkerSettings: Context.environment["PXL_SWIFT_RUNTIME"] == "dynamic" ? [] : [.unsafeFlags(["-static-stdlib"])]),
    .testTarget(name: "PixloadCoreTests", dependencies: ["PixloadCore", "FuzzDriver"]),
    // libFuzzer target on ImageDecoder (`make fuzz-decode` builds it with
    // -sanitize=fuzzer,address); a plain build replays files given as arguments.
    .executableTarget(name: "pixload-fuzz-decode", dependencies: ["PixloadCore", "FuzzDriver"], path: "Tests/fuzz/decode"),
    // libFuzzer targets on the disk-cache entry reader and on response-header handling
    // (`make fuzz-diskentry`, `make fuzz-headers`: also -enable-testing, they reach
    // internal parsers through @testable import); plain builds replay files.
    .executableTarget(name: "pixload-fuzz-diskentry", dependencies: ["PixloadCore", "FuzzDriver"], path: "Tests/fuzz/diskentry"),
    .executableTarget(name: "pixload-fuzz-headers", dependencies: ["PixloadCore", "FuzzDriver"], path: "Tests/fuzz/headers"),
    // libFuzzer target on the AVIF shim through ImageDecoder, its frames and its colour
    // (`make fuzz-avif`); a plain build replays files.
    .executableTarget(name: "pixload-fuzz-avif", dependencies: ["PixloadCore", "CCodecs", "FuzzDriver"],
                      path: "Tests/fuzz/avif"),
    // libFuzzer target on WebP (`make fuzz-webp`): read_info, ImageDecoder, frames, colour.
    .executableTarget(name: "pixload-fuzz-webp", dependencies: ["PixloadCore", "CCodecs", "FuzzDriver"], path: "Tests/fuzz/webp"),
    // libFuzzer target on the QOI test codec registered through the C API
    // (`make fuzz-qoi-loader`): the codec as a module (Tests/fuzz/qoi/module, C), added by
    // pxl_loader_add_codec to a real loader, decoded by that loader's decoder.
    .target(name: "QOIModule", dependencies: ["CPixload"], path: "Tests/fuzz/qoi/module"),
    .executableTarget(name: "pixload-fuzz-qoi", dependencies: ["Pixload", "PixloadCore", "FuzzDriver", "QOIModule"],
                      path: "Tests/fuzz/qoi/driver"),
    // What the three fuzz targets share: libFuzzer's entry points and the replay mode.
    .target(name: "FuzzDriver", dependencies: ["PixloadCore"], path: "Tests/fuzz/driver"),
    // `make bench-decode`: ImageDecoder against libjpeg-turbo/libpng called directly from C.
    .target(name: "BenchDirect", path: "bench/direct",
            linkerSettings: codecLibraries.map { .linkedLibrary($0) }),
    .executableTarget(name: "pixload-bench-decode", dependencies: ["PixloadCore", "BenchDirect"],
                      path: "bench/decode"),
  ],
  swiftLanguageModes: [.v5]
)
