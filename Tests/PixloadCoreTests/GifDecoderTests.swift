import XCTest
@testable import PixloadCore

/// GIF through ImageDecoder: sniffing, the first frame composited, thumbnails through the
/// area resampler, and clear errors. The pixels themselves are checked by the conformance
/// sets (Tests/fixtures/gif-suite, generated-gif); here, the Swift path around the shim.
final class GifDecoderTests: XCTestCase {
  static var suite: String {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .appendingPathComponent("fixtures/gif-suite").path
  }

  func bytes(_ name: String) throws -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: "\(Self.suite)/\(name)") else {
      throw XCTSkip("cannot read \(name)")
    }
    return [UInt8](data)
  }

  func testSniffsBothVersions() throws {
    XCTAssertEqual(ImageDecoder.sniff(Array("GIF87a".utf8) + [0, 0]), .gif)
    XCTAssertEqual(ImageDecoder.sniff(Array("GIF89a".utf8)), .gif)
    XCTAssertNil(ImageDecoder.sniff(Array("GIF88a".utf8)))
  }

  func testFirstFrameFullSizeAndThumbnail() throws {
    let data = try bytes("dispose-restore-background.gif")  // 2x2, 4 frames
    let full = ImageRequest(url: "x", format: .rgba8).variant
    guard case .success(let image) = ImageDecoder().decode(data, variant: full, maxPixels: 1_000_000) else {
      return XCTFail("decode failed")
    }
    XCTAssertEqual([image.width, image.height], [2, 2])
    let thumb = ImageRequest(url: "x", targetWidth: 1, targetHeight: 1, mode: .fill, format: .bgra8Premultiplied).variant
    guard case .success(let small) = ImageDecoder().decode(data, variant: thumb, maxPixels: 1_000_000) else {
      return XCTFail("thumbnail failed")
    }
    XCTAssertEqual([small.width, small.height], [1, 1])
  }

  func testCorruptAndOversizedFailClearly() throws {
    let variant = ImageRequest(url: "x").variant
    guard case .failure(let corrupt) = ImageDecoder().decode(try bytes("invalid-code.gif"), variant: variant,
                                                             maxPixels: 1_000_000) else {
      return XCTFail("invalid LZW code decoded")
    }
    XCTAssertEqual(corrupt.status, .corruptImage)
    XCTAssertTrue(corrupt.message.contains("GIF"), corrupt.message)
    guard case .failure(let big) = ImageDecoder().decode(try bytes("max-width.gif"), variant: variant,
                                                         maxPixels: 1000) else {
      return XCTFail("65535x1 decoded under a 1000-pixel limit")
    }
    XCTAssertEqual(big.status, .tooManyPixels)
  }
}
