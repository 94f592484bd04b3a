import XCTest
import FuzzDriver
@testable import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

/// Every input the decode fuzzer (`make fuzz-decode`) ever crashed on, kept in
/// Tests/fuzz-regressions/decode, replayed two ways: in process through `ImageDecoder`
/// with a matrix of variants (sizes the fuzzer picks, every format, orientation on and
/// off), and through the plain build of the fuzz target itself, which decodes each file
/// with exactly the variant the fuzzer chose for it and checks the same promises.
final class FuzzRegressionTests: XCTestCase {
  static let regressions: String = {
    var path = #filePath
    for _ in 0..<2 { path = String(path[..<path.lastIndex(of: "/")!]) }  // Tests/
    return path + "/fuzz-regressions"
  }()
  static let folder = regressions + "/decode"

  /// The regression inputs (README.md explains the folder and is not one). An empty folder
  /// skips the test, which would otherwise pass having checked nothing.
  static func inputs(in folder: String = folder) throws -> [String] {
    guard let dir = opendir(folder) else { throw XCTSkip("\(folder) is absent") }
    defer { closedir(dir) }
    var names: [String] = []
    while let entry = readdir(dir) {
      let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
      if name.hasPrefix(".") || name == "README.md" { continue }
      names.append(folder + "/" + name)
    }
    if names.isEmpty { throw XCTSkip("\(folder) holds no inputs: nothing replayed") }
    return names.sorted()
  }


  /// Inputs the AVIF fuzzer (`make fuzz-avif`) crashed on: the same matrix through
  /// ImageDecoder, and the AVIF target itself (frames and colour too).
  func testEveryKeptAvifInputDecodesOrFailsCleanly() throws {
    let inputs = try Self.inputs(in: Self.regressions + "/avif")
    try checkDecodesOrFailsCleanly(inputs)
    try replayThroughFuzzTarget("pixload-fuzz-avif", inputs: inputs)
  }

  func testEveryKeptInputDecodesOrFailsCleanly() throws {
    try checkDecodesOrFailsCleanly(try Self.inputs())
  }

  private func checkDecodesOrFailsCleanly(_ inputs: [String]) throws {
    let sizes: [(Int, Int, ScaleMode)] = [
      (0, 0, .fit), (150, 150, .fill), (150, 150, .fit), (1, 1, .fill), (1, 0, .fit), (0, 1, .fit),
      (64, 0, .fit), (0, 64, .fit), (7, 300, .fill), (300, 7, .fill), (300, 1, .fit), (1, 300, .fit),
    ]
    for path in inputs {
      let data = try XCTUnwrap(readWholeFile(path), path)
      for (width, height, mode) in sizes {
        for format in PixelFormat.allCases {
          for orientation in [true, false] {
            let variant = ImageRequest(url: "fuzz:", targetWidth: width, targetHeight: height, mode: mode,
                                       format: format, appliesOrientation: orientation).variant
            switch ImageDecoder().decode(data, variant: variant, maxPixels: 16_000_000) {
            case .failure(let error):
              XCTAssertFalse(error.message.isEmpty, "\(path) \(variant)")
            case .success(let image):
              XCTAssertGreaterThan(image.width, 0, path)
              XCTAssertGreaterThan(image.height, 0, path)
              XCTAssertEqual(image.stride, image.width * format.bytesPerPixel, path)
              if width > 0 { XCTAssertLessThanOrEqual(image.width, width, "\(path) \(variant)") }
              if height > 0 { XCTAssertLessThanOrEqual(image.height, height, "\(path) \(variant)") }
            }
          }
        }
      }
    }
  }

  func testEveryKeptInputPassesTheFuzzTargetItself() throws {
    try replayThroughFuzzTarget("pixload-fuzz-decode", inputs: Self.inputs())
  }

  /// Inputs the WebP fuzzer (`make fuzz-webp`) crashed on, through that target.
  func testEveryKeptWebPInputPassesTheFuzzTargetItself() throws {
    try replayThroughFuzzTarget("pixload-fuzz-webp", inputs: Self.inputs(in: Self.regressions + "/webp"))
  }

  /// Disk-cache entries the entry fuzzer (`make fuzz-diskentry`) crashed on: read in
  /// process as the entry of their key (a miss, never a trap), and through the target.
  func testEveryKeptDiskEntryInputIsReadSafely() throws {
    let inputs = try Self.inputs(in: Self.regressions + "/diskentry")
    var template = Array("/tmp/pxl-fuzz-regressions.XXXXXX".utf8CString)
    let directory = String(cString: try XCTUnwrap(mkdtemp(&template)))
    defer {
      if let dir = opendir(directory) {
        while let item = readdir(dir) {
          let name = withUnsafeBytes(of: item.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
          if name != "." && name != ".." { unlink(directory + "/" + name) }
        }
        closedir(dir)
      }
      rmdir(directory)
    }
    let cache = try DiskCache(directory: directory, capacityBytes: 1 << 30, log: { _ in })
    for path in inputs {
      let data = try XCTUnwrap(readWholeFile(path), path)
      let file = directory + "/" + DiskCache.fileName(for: "regression")
      let fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
      XCTAssertGreaterThanOrEqual(fd, 0)
      _ = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
      close(fd)
      XCTAssertNil(cache.entry(for: "regression"), path)
    }
    try replayThroughFuzzTarget("pixload-fuzz-diskentry", inputs: inputs)
  }

  /// Response heads the header fuzzer (`make fuzz-headers`) crashed on.
  func testEveryKeptHeaderInputIsParsedSafely() throws {
    let inputs = try Self.inputs(in: Self.regressions + "/headers")
    for path in inputs {
      let data = try XCTUnwrap(readWholeFile(path), path)
      var caching = ResponseCaching()
      for line in data.split(separator: 0x0A, omittingEmptySubsequences: false) {
        caching.take(headerLine: String(decoding: line, as: UTF8.self))
      }
      _ = caching.expiry(now: Int(time(nil)))
      _ = caching.expiry(now: Int.max)
    }
    try replayThroughFuzzTarget("pixload-fuzz-headers", inputs: inputs)
  }

  /// Runs the plain build of a fuzz target on each input; each must exit 0.
  private func replayThroughFuzzTarget(_ target: String, inputs: [String]) throws {
    // Next to this test bundle: `swift test` builds every target of the package.
    var exe = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let n = readlink("/proc/self/exe", &exe, exe.count - 1)
    guard n > 0 else { throw XCTSkip("cannot find the test executable") }
    let path = String(cString: exe)
    let replay = String(path[..<path.lastIndex(of: "/")!]) + "/" + target
    guard access(replay, X_OK) == 0 else { throw XCTSkip("\(replay) is not built") }
    for input in inputs {
      var pid = pid_t()
      var devnull = posix_spawn_file_actions_t()
      posix_spawn_file_actions_init(&devnull)
      defer { posix_spawn_file_actions_destroy(&devnull) }
      posix_spawn_file_actions_addopen(&devnull, 1, "/dev/null", O_WRONLY, 0)
      let argv: [UnsafeMutablePointer<CChar>?] = [strdup(replay), strdup(input), nil]
      defer { argv.forEach { free($0) } }
      XCTAssertEqual(posix_spawn(&pid, replay, &devnull, nil, argv, environ), 0, input)
      var status: Int32 = 0
      XCTAssertEqual(waitpid(pid, &status, 0), pid, input)
      XCTAssertEqual(status, 0, "\(target) \(input) exited with wait status \(status)")
    }
  }
}
