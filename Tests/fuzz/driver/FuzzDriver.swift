// The part every fuzz target shares: the entry points libFuzzer calls, and a replay mode.
//
// SwiftPM gives every executable its own `main`, so a fuzz build (which passes
// `-DPIXLOAD_LIBFUZZER`, see `make fuzz-decode`) hands control to libFuzzer through
// `LLVMFuzzerRunDriver`. A plain build (`swift build`, `swift test`) has no libFuzzer: there
// the target replays each file given as an argument through the same function and prints
// what it returned, which is how a crash input is reproduced without the sanitizer build.
#if canImport(Glibc)
import Glibc
#endif

/// The target's function: runs one input, checks its promises (trapping when one breaks),
/// and says in a line what happened. Set once, by `runFuzzTarget`, before any input.
nonisolated(unsafe) private var fuzzOne: ([UInt8]) -> String = { _ in "" }

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEntry(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
  _ = fuzzOne(size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size)) : [])
  return 0
}

#if PIXLOAD_LIBFUZZER
/// libFuzzer's driver, for programs that own `main`.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
  _ argc: UnsafeMutablePointer<Int32>,
  _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
  _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32
#endif

/// The `main` of a fuzz target named `name` (`pixload-fuzz-NAME`, `make fuzz-NAME`).
public func runFuzzTarget(name: String, _ body: @escaping ([UInt8]) -> String) -> Never {
  fuzzOne = body
#if PIXLOAD_LIBFUZZER
  var argc = CommandLine.argc
  var argv = CommandLine.unsafeArgv
  exit(LLVMFuzzerRunDriver(&argc, &argv, { data, size in fuzzEntry(data, size) }))
#else
  let paths = CommandLine.arguments.dropFirst()
  if paths.isEmpty {
    fputs("usage: pixload-fuzz-\(name) FILE...  (replays inputs; the fuzzer is `make fuzz-\(name)`)\n", stderr)
    exit(2)
  }
  for path in paths {
    guard let data = readWholeFile(path) else { fputs("cannot open \(path)\n", stderr); exit(1) }
    print("\(path): \(body(data))")
  }
  exit(0)
#endif
}

/// The bytes of the file at `path`, or nil when it cannot be opened. Also what
/// FuzzRegressionTests reads the kept inputs with.
public func readWholeFile(_ path: String) -> [UInt8]? {
  guard let file = fopen(path, "rb") else { return nil }
  defer { fclose(file) }
  var data: [UInt8] = []
  var chunk = [UInt8](repeating: 0, count: 1 << 16)
  while true {
    let n = fread(&chunk, 1, chunk.count, file)
    if n <= 0 { break }
    data += chunk[0..<n]
  }
  return data
}

/// Choices a fuzz target derives from its input (size, mode, format, ...): an FNV-1a
/// hash of the input's length and its last 8 bytes, taken apart digit by digit. Not a
/// prefix, so every seed file is valid as it stands, and the fuzzer can still steer the
/// choice: bytes after a JPEG's EOI, a PNG's IEND or a WebP's RIFF chunk are ignored by the
/// decoders, so mutating them changes only the choice.
public struct FuzzChoices {
  private var bits: UInt64

  public init(_ data: [UInt8]) {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    func mix(_ byte: UInt8) { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
    withUnsafeBytes(of: UInt64(data.count).littleEndian) { $0.forEach(mix) }
    data.suffix(8).forEach(mix)
    bits = hash
  }

  /// A number in 0..<n, the next digit of the hash in base n.
  public mutating func take(_ n: UInt64) -> Int {
    defer { bits /= n }
    return Int(bits % n)
  }
}
