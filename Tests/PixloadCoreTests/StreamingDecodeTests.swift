@testable import PixloadCore
import CCodecs
import Dispatch
import Foundation
import XCTest

/// Decoding while downloading (StreamingDecode, StreamTask.swift): the image (JPEG, PNG) fed in chunks
/// is the whole body's, to the byte, through the plan, resampler, colour and orientation;
/// the loader streams a slow transfer's JPEG and delivers the same image; a request
/// cancelled mid-transfer frees its decoder at once.
final class StreamingDecodeTests: XCTestCase {
  static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .appendingPathComponent("../../../shared/corpus").standardized

  /// Every JPEG of the corpus's real-world, conformance and corrupt sets (skipped when
  /// absent), with its PNGs (`png`: and PngSuite's).
  private func corpusFiles(png: Bool = false) throws -> [(String, [UInt8])] {
    var files: [(String, [UInt8])] = []
    let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    for set in ["realworld", "jpeg-conformance", "corrupt"] + (png ? ["pngsuite"] : []) {
      let dir = Self.corpus.appendingPathComponent(set)
      guard let walker = FileManager.default.enumerator(atPath: dir.path) else { continue }
      for case let path as String in walker {
        guard let data = FileManager.default.contents(atPath: dir.appendingPathComponent(path).path),
              data.count >= 3, data.count < 12_000_000 else { continue }
        let bytes = [UInt8](data)
        if (bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) || (png && bytes.starts(with: signature)) {
          files.append((set + "/" + path, bytes))
        }
      }
    }
    if files.isEmpty { throw XCTSkip("corpus not found at \(Self.corpus.path)") }
    return files
  }

  private struct Outcome: Equatable {
    var width = 0, height = 0, incomplete = false
    var pixels: [UInt8] = []
    var status: Status?
  }

  private func outcome(_ result: Result<Image, LoadError>) -> Outcome {
    switch result {
    case .success(let image):
      let bytes = UnsafeRawBufferPointer(start: image.pixels, count: image.byteCount)
      return Outcome(width: image.width, height: image.height, incomplete: image.isIncomplete, pixels: Array(bytes))
    case .failure(let error): return Outcome(status: error.status)
    }
  }

  /// What the loader does with a body fed in chunks: the stream's result, or the whole
  /// decode when it declines; nil when no stream applies.
  private func streamed(_ bytes: [UInt8], _ variant: ImageVariant, random: inout SystemRandomNumberGenerator,
                        declined: inout Int) -> Result<Image, LoadError>? {
    let decoder = ImageDecoder()
    guard let stream = decoder.streamingDecode(Array(bytes.prefix(16)), variant: variant, maxPixels: 1 << 28,
                                               cancel: CancelFlag()) else { return nil }
    var at = 0
    while true {
      let limit = [4, 64, 1024, 65536][Int.random(in: 0..<4, using: &random)]
      let n = min(bytes.count - at, Int.random(in: 1...limit, using: &random))
      let step = bytes[at..<at + n].withUnsafeBufferPointer { stream.feed($0, atEnd: at + n == bytes.count) }
      at += n
      switch step {
      case .more:
        if at == bytes.count { return .failure(LoadError(.corruptImage, "more wanted after the last byte")) }
      case .done(let result): return result
      case .declined:
        declined += 1
        return decoder.decode(bytes, variant: variant, maxPixels: 1 << 28)
      }
    }
  }

  /// The file, cut short, damaged.
  private func cutAndDamaged(_ whole: [UInt8], random: inout SystemRandomNumberGenerator) -> [(String, [UInt8])] {
    var damaged = whole
    for _ in 0..<4 where whole.count > 64 { damaged[Int.random(in: whole.count / 3..<whole.count, using: &random)] ^= 0x10 }
    let cut = Array(whole.prefix(max(3, whole.count * 2 / 3)))
    return [("whole", whole), ("cut short", cut), ("damaged", damaged)]
  }

  func testFedInRandomChunksGivesTheWholeDecodesImage() throws {
    let files = try corpusFiles(png: true)
    var random = SystemRandomNumberGenerator()
    let variants: [ImageRequest] = [
      ImageRequest(url: "x"),
      ImageRequest(url: "x", targetWidth: 150, targetHeight: 150, mode: .fill),
      ImageRequest(url: "x", targetWidth: 400, targetHeight: 300, mode: .fit, format: .bgra8Premultiplied),
      ImageRequest(url: "x", targetWidth: 64, targetHeight: 0, format: .gray8, appliesOrientation: false),
    ]
    var compared = 0, declined = 0
    for (name, whole) in files {
      for (kind, bytes) in cutAndDamaged(whole, random: &random) {
        for request in variants {
          let variant = request.variant
          guard let result = streamed(bytes, variant, random: &random, declined: &declined) else { continue }
          let expected = ImageDecoder().decode(bytes, variant: variant, maxPixels: 1 << 28)
          compared += 1
          XCTAssertEqual(outcome(result), outcome(expected),
                         "\(name) (\(kind)) at \(variant.width)x\(variant.height) \(variant.mode)")
        }
      }
    }
    XCTAssertGreaterThan(compared, 100)
    print("streamed \(compared) decodes of \(files.count) corpus JPEGs and PNGs, \(declined) declined")
    XCTAssertEqual(pxl_jpeg_streams_live(), 0, "every stream's state was freed")
  }

  /// WebPs made now by Debian's cwebp (webpmux adds an ICC profile or an EXIF orientation),
  /// lossy and lossless, with alpha, odd sizes; nil when the tools are missing.
  private func madeWebPs() throws -> [(String, [UInt8])] {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pxl-webp-\(getpid())")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    func run(_ arguments: [String]) -> Bool {
      let process = Process()
      process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
      process.arguments = arguments
      process.standardOutput = FileHandle.nullDevice
      process.standardError = FileHandle.nullDevice
      guard (try? process.run()) != nil else { return false }
      process.waitUntilExit()
      return process.terminationStatus == 0
    }
    let exif: [UInt8] = [0x49, 0x49, 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 1, 3, 0, 1, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0]
    let exifPath = dir.appendingPathComponent("o6.exif").path
    _ = FileManager.default.createFile(atPath: exifPath, contents: Data(exif))
    let icc = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .appendingPathComponent("../codecs/display-p3.icc").standardized.path
    let made: [(w: Int, h: Int, alpha: Bool, options: [String], mux: [String])] = [
      (333, 211, false, ["-q", "80"], []), (333, 211, true, ["-q", "75"], []),
      (257, 129, true, ["-lossless"], []), (641, 479, false, ["-lossless"], []),
      (17, 9, true, ["-q", "90"], []), (1, 1, false, ["-q", "50"], []),
      (400, 300, true, ["-q", "80"], ["-set", "icc", icc]), (400, 300, false, ["-q", "80"], ["-set", "exif", exifPath]),
    ]
    var files: [(String, [UInt8])] = []
    for (i, m) in made.enumerated() {
      var pam = Array("P7\nWIDTH \(m.w)\nHEIGHT \(m.h)\nDEPTH \(m.alpha ? 4 : 3)\nMAXVAL 255\nTUPLTYPE \(m.alpha ? "RGB_ALPHA" : "RGB")\nENDHDR\n".utf8)
      for y in 0..<m.h {
        for x in 0..<m.w {
          pam += [UInt8((x * 3 + y + ((x ^ y) & 31) * 4) & 0xFF), UInt8((y * 5 + x * y / 7) & 0xFF), UInt8((x + y) * 2 & 0xFF)]
          if m.alpha { pam.append(UInt8(x * 255 / max(1, m.w - 1))) }
        }
      }
      let input = dir.appendingPathComponent("\(i).pam").path, output = dir.appendingPathComponent("\(i).webp").path
      _ = FileManager.default.createFile(atPath: input, contents: Data(pam))
      guard run(["cwebp", "-quiet"] + m.options + [input, "-o", output]) else { throw XCTSkip("cwebp not found") }
      var final = output
      if !m.mux.isEmpty {
        final = dir.appendingPathComponent("\(i)-mux.webp").path
        guard run(["webpmux"] + m.mux + [output, "-o", final]) else { throw XCTSkip("webpmux not found") }
      }
      let name = "made \(m.w)x\(m.h)\(m.alpha ? " alpha" : "") \(m.options.joined(separator: " ")) \(m.mux.first ?? "")"
      files.append((name + (m.mux.count > 1 ? m.mux[1] : ""), [UInt8](try Data(contentsOf: URL(fileURLWithPath: final)))))
    }
    return files
  }

  /// WebP (pxl_webp_stream) through the plan, resampler, colour and orientation: the whole
  /// body's image, to the byte; the EXIF-oriented file (its orientation comes after the image
  /// data) declines and is decoded whole; the rest stream.
  func testWebPFedInRandomChunksGivesTheWholeDecodesImage() throws {
    let files = try madeWebPs()
    var random = SystemRandomNumberGenerator()
    let variants: [ImageRequest] = [
      ImageRequest(url: "x"),
      ImageRequest(url: "x", targetWidth: 150, targetHeight: 150, mode: .fill),
      ImageRequest(url: "x", targetWidth: 40, targetHeight: 90, mode: .fill, format: .rgba8Premultiplied),
      ImageRequest(url: "x", targetWidth: 400, targetHeight: 300, mode: .fit, format: .bgra8Premultiplied),
      ImageRequest(url: "x", targetWidth: 64, targetHeight: 0, format: .gray8, appliesOrientation: false),
    ]
    var compared = 0, declined = 0, orientedDeclines = 0
    for (name, whole) in files {
      for (kind, bytes) in cutAndDamaged(whole, random: &random) {
        for request in variants {
          let variant = request.variant
          let before = declined
          guard let result = streamed(bytes, variant, random: &random, declined: &declined) else { continue }
          let expected = ImageDecoder().decode(bytes, variant: variant, maxPixels: 1 << 28)
          compared += 1
          XCTAssertEqual(outcome(result), outcome(expected),
                         "\(name) (\(kind)) at \(variant.width)x\(variant.height) \(variant.mode)")
          if kind == "whole" && name.hasSuffix("exif") { orientedDeclines += declined - before }
          if kind == "whole" && !name.hasSuffix("exif") {
            XCTAssertEqual(declined, before, "\(name) at \(variant.width)x\(variant.height): a clean file declined")
          }
        }
      }
    }
    XCTAssertEqual(orientedDeclines, variants.count, "the EXIF-oriented file declines")
    XCTAssertGreaterThan(compared, 100)
    print("streamed \(compared) decodes of \(files.count) WebPs, \(declined) declined")
    XCTAssertEqual(pxl_webp_streams_live(), 0, "every stream's state was freed")
  }

  /// The largest baseline real-world JPEG of the corpus (a progressive one is decoded from
  /// its first scans at 1/8), or skip.
  private func photo() throws -> [UInt8] {
    func isBaseline(_ bytes: [UInt8]) -> Bool {
      guard pxl_jpeg_header_end(bytes, bytes.count) > 0 else { return false }
      var at = 2
      while bytes[at + 1] != 0xDA {
        if bytes[at + 1] == 0xC0 || bytes[at + 1] == 0xC1 { return true }
        at += 2 + (Int(bytes[at + 2]) << 8 | Int(bytes[at + 3]))
      }
      return false
    }
    let files = try corpusFiles().filter { $0.0.hasPrefix("realworld/") && isBaseline($0.1) }
    guard let largest = files.max(by: { $0.1.count < $1.1.count }) else { throw XCTSkip("no real-world JPEG") }
    return largest.1
  }

  /// A load of `request` through a loader with the real decoder and a manual network:
  /// its progress listener feeds the transfer's bytes.
  private struct Load {
    let network = ManualDataLoader()
    let loader: ImageLoader
    let queue: CompletionQueue
    let recorder = Recorder()
    var token: UInt64 = 0
    let progress: TransferProgress

    init(_ request: ImageRequest, metrics: @escaping (RequestMetrics) -> Void = { _ in }) throws {
      var configuration = LoaderConfiguration()
      configuration.decodeThreads = 1
      loader = try ImageLoader(configuration: configuration, dataLoader: network, decoder: ImageDecoder())
      queue = try CompletionQueue()
      let recorder = recorder
      token = try loader.load(request, queue: queue, completion: { token, outcome, measured in
        metrics(measured)
        recorder.handler(token, outcome)
      })
      progress = try XCTUnwrap(network.started.first?.progress)
    }
  }

  /// Polls `condition` (set by pool threads) for up to 5 s.
  private func eventually(_ condition: () -> Bool) -> Bool {
    for _ in 0..<500 {
      if condition() { return true }
      usleep(10_000)
    }
    return condition()
  }

  func testTheLoaderStreamsASlowTransferAndDeliversTheWholeDecodesImage() throws {
    let bytes = try photo()
    let request = ImageRequest(url: "http://h/photo.jpg", targetWidth: 150, targetHeight: 150, mode: .fill)
    var metrics: RequestMetrics?
    let load = try Load(request) { metrics = $0 }
    defer { load.loader.close() }
    let progress = load.progress
    // Two reports (a transfer that lasted a progress interval): the stream starts.
    let half = bytes.count / 2
    XCTAssertFalse(progress(UInt64(half / 2), UInt64(bytes.count), Array(bytes.prefix(half / 2))))
    XCTAssertFalse(progress(UInt64(half), UInt64(bytes.count), Array(bytes.prefix(half))))
    XCTAssertTrue(eventually { pxl_jpeg_streams_live() == 1 }, "a stream decodes the first half")
    load.network.finish(0, bytes: bytes)
    XCTAssertTrue(load.queue.drain(until: load.recorder, reaches: 1))
    guard case .success(let image, _, _) = try XCTUnwrap(load.recorder.outcome(load.token)) else {
      return XCTFail("no image")
    }
    let expected = try ImageDecoder().decode(bytes, variant: request.variant, maxPixels: 1 << 28).get()
    XCTAssertEqual(Array(UnsafeRawBufferPointer(start: image.pixels, count: image.byteCount)),
                   Array(UnsafeRawBufferPointer(start: expected.pixels, count: expected.byteCount)))
    // Freed by the pool job right after it handed the result on (not before: see StreamTask).
    XCTAssertTrue(eventually { pxl_jpeg_streams_live() == 0 }, "the stream's state is freed")
    let measured = try XCTUnwrap(metrics)
    XCTAssertGreaterThan(measured.decodeMicroseconds, 0)
    XCTAssertGreaterThan(measured.afterLastByteMicroseconds, 0)
    // Only the decoding after the last byte counts as decode_us: what ran during the
    // transfer is the transfer's time, or the stages would add up to more than total_us.
    XCTAssertLessThanOrEqual(measured.decodeMicroseconds, measured.afterLastByteMicroseconds)
    XCTAssertEqual(measured.totalMicroseconds, measured.stagesMicroseconds + measured.otherMicroseconds)
  }

  func testACancelMidTransferFreesTheDecoderAtOnce() throws {
    let bytes = try photo()
    let load = try Load(ImageRequest(url: "http://h/photo.jpg"))
    defer { load.loader.close() }
    let progress = load.progress
    let third = bytes.count / 3
    XCTAssertFalse(progress(UInt64(third), UInt64(bytes.count), Array(bytes.prefix(third))))
    XCTAssertFalse(progress(UInt64(2 * third), UInt64(bytes.count), Array(bytes.prefix(2 * third))))
    XCTAssertTrue(eventually { pxl_jpeg_streams_live() == 1 }, "a stream decodes the first two thirds")
    XCTAssertTrue(load.loader.cancel(load.token))
    XCTAssertTrue(eventually { pxl_jpeg_streams_live() == 0 }, "the cancelled decode's state is freed")
    XCTAssertEqual(load.network.cancelled.count, 1, "the transfer is cancelled")
    // More bytes from a server that has not noticed yet: no decode starts again.
    _ = progress(UInt64(bytes.count - 1), UInt64(bytes.count), Array(bytes.prefix(bytes.count - 1)))
    usleep(50_000)
    XCTAssertEqual(pxl_jpeg_streams_live(), 0)
  }

  func testACancelMidTransferFreesTheWebPDecoderAtOnce() throws {
    let bytes = try XCTUnwrap(madeWebPs().first { $0.0.contains("641x479") }?.1)
    let load = try Load(ImageRequest(url: "http://h/photo.webp", targetWidth: 150, targetHeight: 150, mode: .fill))
    defer { load.loader.close() }
    let third = bytes.count / 3
    XCTAssertFalse(load.progress(UInt64(third), UInt64(bytes.count), Array(bytes.prefix(third))))
    XCTAssertFalse(load.progress(UInt64(2 * third), UInt64(bytes.count), Array(bytes.prefix(2 * third))))
    XCTAssertTrue(eventually { pxl_webp_streams_live() == 1 }, "a stream decodes the first two thirds")
    XCTAssertTrue(load.loader.cancel(load.token))
    XCTAssertTrue(eventually { pxl_webp_streams_live() == 0 }, "the cancelled decode's state is freed")
    _ = load.progress(UInt64(bytes.count - 1), UInt64(bytes.count), Array(bytes.prefix(bytes.count - 1)))
    usleep(50_000)
    XCTAssertEqual(pxl_webp_streams_live(), 0)
  }
}
