import FuzzDriver
import XCTest
@testable import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

/// The built-in formats as codecs of the codec table (BuiltInCodecs.swift): first in every
/// table, stamp 0, outside the signature, and codecs of pxl_codec's shape that draw what
/// their native path draws, so anything that calls codecs through that interface (a
/// worker process) can call these too.
final class BuiltInCodecTests: XCTestCase {
  static let tests: String = {
    var path = #filePath
    for _ in 0..<2 { path = String(path[..<path.lastIndex(of: "/")!]) }  // Tests/
    return path
  }()

  /// One file of each built-in format: (codec id, path).
  func samples() throws -> [(id: String, path: String)] {
    guard let corpus = EngineTests.corpus else { throw XCTSkip("../shared/corpus is absent") }
    return [("jpeg", corpus + "/realworld/exif-orientation/Landscape_6.jpg"),
            ("png", corpus + "/pngsuite/basi6a08.png"),
            ("webp", Self.tests + "/fixtures/webp-suite/alpha_filter_1.webp"),
            ("gif", Self.tests + "/fixtures/gif-suite/animation.gif"),
            ("avif", Self.tests + "/fixtures/avif-suite/kimono.rotate90.avif")]
  }

  func testTheTableHoldsTheBuiltInFormatsFirst() throws {
    XCTAssertEqual(CodecTable.builtIns.map(\.codec.id), ["jpeg", "png", "webp", "gif", "avif"])
    XCTAssertEqual(ImageDecoder.builtInFormats, ["jpeg", "png", "webp", "gif", "avif"])
    let table = CodecTable()
    XCTAssertEqual(table.ids, [], "ids lists the registered codecs")
    XCTAssertEqual(table.signature, .none, "the built-in formats are not part of the signature")
    for sample in try samples() {
      let bytes = try XCTUnwrap(readWholeFile(sample.path), sample.path)
      let entry = try XCTUnwrap(bytes.withUnsafeBufferPointer { table.acquire(for: $0) }, sample.id)
      XCTAssertEqual(entry.codec.id, sample.id)
      XCTAssertEqual(entry.stamp, 0, "pixels of a built-in format are the library's own")
      XCTAssertNotNil(entry.native)
      table.release(entry)
      XCTAssertEqual(ImageDecoder.sniff(bytes), sample.id)
    }
  }

  /// Through pxl_codec's shape (header, choose_size, decode, decode_frames), a built-in
  /// format's codec gives the pixels its native path gives: the same at full size; up to
  /// rounding for a thumbnail (JPEG: drawn at the same DCT scale, then resampled whole
  /// rather than over the crop's region). Colour too, for what pxl_codec_header carries.
  func testEachBuiltInCodecDrawsThroughTheCodecInterface() throws {
    for sample in try samples() {
      let bytes = try XCTUnwrap(readWholeFile(sample.path), sample.path)
      let codec = try XCTUnwrap(BuiltInCodecs.all.first { $0.id == sample.id })
      for (size, animates) in [(0, false), (0, true), (40, false)] {
        var variant = ImageRequest(url: "x", targetWidth: size, targetHeight: size, mode: .fill).variant
        variant.animates = animates
        // PngSuite's gAMA is not in pxl_codec_header (an ICC profile or CICP code points
        // only): the native path's `color` carries it, the codec interface does not.
        variant.managesColor = sample.id != "png"
        let native = bytes.withUnsafeBufferPointer {
          ImageDecoder.decode($0, native: codec.native, variant: variant, maxPixels: 1 << 28)
        }
        var cancel: Int32 = 0
        let shaped = bytes.withUnsafeBufferPointer {
          ImageDecoder.decode($0, codec: codec, variant: variant, maxPixels: 1 << 28, cancel: &cancel, partial: false)
        }
        let what = "\(sample.id) size \(size) animates \(animates)"
        guard case .success(let a) = native, case .success(let b) = shaped else {
          return XCTFail("\(what): \(native) \(shaped)")
        }
        XCTAssertEqual([b.width, b.height, b.originalWidth, b.originalHeight, b.frameCount, b.sourceFrameCount],
                       [a.width, a.height, a.originalWidth, a.originalHeight, a.frameCount, a.sourceFrameCount], what)
        guard a.byteCount == b.byteCount else { continue }
        let pa = a.pixels.assumingMemoryBound(to: UInt8.self), pb = b.pixels.assumingMemoryBound(to: UInt8.self)
        var total = 0, most = 0
        for i in 0..<a.byteCount {
          let difference = abs(Int(pa[i]) - Int(pb[i]))
          total += difference
          most = max(most, difference)
        }
        if size == 0 {
          XCTAssertEqual(most, 0, what)
        } else {
          XCTAssertLessThan(Double(total) / Double(a.byteCount), 2, what)
        }
      }
    }
  }

  func testChooseSizeIsJPEGsDCTScale() throws {
    guard let corpus = EngineTests.corpus else { throw XCTSkip("../shared/corpus is absent") }
    let bytes = try XCTUnwrap(readWholeFile(corpus + "/realworld/exif-orientation/Landscape_1.jpg"))
    try bytes.withUnsafeBufferPointer { buffer in
      let header = try BuiltInCodecs.jpeg.readHeader(buffer, keepOrientation: false).get()
      let eighth = ((header.width + 7) / 8, (header.height + 7) / 8)
      let chosen = try XCTUnwrap(BuiltInCodecs.jpeg.chooseSize(buffer, keepOrientation: false, width: 10, height: 10))
      XCTAssertTrue(chosen == eighth, "\(chosen) \(eighth)")
      XCTAssertNil(BuiltInCodecs.png.chooseSize(buffer, keepOrientation: false, width: 10, height: 10))
    }
  }
}
