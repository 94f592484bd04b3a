import CCodecs
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

  func bytes(_ name: String) throws -> [UInt8] { try Self.bytes(name) }

  static func bytes(_ name: String) throws -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: "\(suite)/\(name)") else {
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

  /// pxl_gif_color: the ICCRGBG1012 application extension's profile, joined from its
  /// sub-blocks; nothing for a file without one.
  func testColourProfileFromTheApplicationExtension() throws {
    func profile(_ name: String) throws -> [UInt8]? {
      let data = try bytes(name)
      var color = pxl_codec_color()
      defer { pxl_codec_color_free(&color) }
      XCTAssertEqual(data.withUnsafeBufferPointer { pxl_gif_color($0.baseAddress, $0.count, &color) }, PXL_CODEC_OK)
      guard let icc = color.icc else { return nil }
      return Array(UnsafeBufferPointer(start: icc, count: color.icc_size))
    }
    let icc = try XCTUnwrap(profile("icc-color-profile.gif"))
    XCTAssertGreaterThan(icc.count, 128)
    XCTAssertEqual(Array(icc[36..<40]), Array("acsp".utf8))  // an ICC header
    let declared = Int(icc[0]) << 24 | Int(icc[1]) << 16 | Int(icc[2]) << 8 | Int(icc[3])
    XCTAssertEqual(declared, icc.count)
    XCTAssertNil(try profile("four-colors.gif"))
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

/// Animated results (ImageVariant.animates) through ImageDecoder: every frame in the
/// requested size and format, frame 0 equal to the still result of the same request.
final class AnimationDecodeTests: XCTestCase {
  func decode(_ name: String, width: Int = 0, height: Int = 0, mode: ScaleMode = .fit, format: PixelFormat = .rgba8,
              animates: Bool) throws -> Image {
    let data = try GifDecoderTests.bytes(name)
    var request = ImageRequest(url: "x", targetWidth: width, targetHeight: height, mode: mode, format: format)
    request.animates = animates
    switch ImageDecoder().decode(data, variant: request.variant, maxPixels: 10_000_000) {
    case .success(let image): return image
    case .failure(let error): XCTFail("\(name): \(error.message)"); throw error
    }
  }

  func testFramesDurationsAndLoopCount() throws {
    let image = try decode("dispose-restore-background.gif", animates: true)
    XCTAssertEqual(image.frameCount, 4)
    XCTAssertEqual(image.sourceFrameCount, 4)
    XCTAssertEqual(image.frameDurations, [500, 500, 500, 500])
    XCTAssertEqual(image.loopCount, 0)
    XCTAssertEqual(image.totalByteCount, 4 * image.byteCount)
    XCTAssertNil(image.framePixels(4))
    // "Restore to background" clears to transparent between frames: frames differ.
    let f0 = image.framePixels(0)!, f1 = image.framePixels(1)!
    XCTAssertNotEqual(memcmp(f0, f1, image.byteCount), 0)
  }

  func testFrameZeroIsTheStillInEveryFormatAndSize() throws {
    for format in PixelFormat.allCases {
      for (w, h, mode) in [(0, 0, ScaleMode.fit), (1, 1, .fill), (2, 1, .fit)] {
        let still = try decode("dispose-keep.gif", width: w, height: h, mode: mode, format: format, animates: false)
        let animated = try decode("dispose-keep.gif", width: w, height: h, mode: mode, format: format, animates: true)
        XCTAssertEqual(still.frameCount, 1)
        XCTAssertEqual(still.sourceFrameCount, 4)
        XCTAssertEqual(animated.frameCount, 4, "\(format) \(w)x\(h)")
        XCTAssertEqual([animated.width, animated.height, animated.stride], [still.width, still.height, still.stride])
        XCTAssertEqual(memcmp(still.pixels, animated.pixels, still.byteCount), 0, "\(format) \(w)x\(h) \(mode)")
      }
    }
  }

  func testAnimatedAndStillAreDifferentVariants() {
    var animated = ImageRequest(url: "https://example.com/a.gif")
    animated.animates = true
    let still = ImageRequest(url: "https://example.com/a.gif")
    XCTAssertNotEqual(animated.variant, still.variant)
    XCTAssertEqual(animated.cacheKey, still.cacheKey)  // one download, two decodes
  }
}
