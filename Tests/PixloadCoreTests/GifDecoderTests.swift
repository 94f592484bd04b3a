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
    XCTAssertEqual(ImageDecoder.sniff(Array("GIF87a".utf8) + [0, 0]), "gif")
    XCTAssertEqual(ImageDecoder.sniff(Array("GIF89a".utf8)), "gif")
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

/// A GIF tagged Display P3 (the ICCRGBG1012 application extension): animated frames are
/// colour-managed like the still, so frame 0 equals the still result with management on,
/// and both differ from the unmanaged values.
final class AnimationColourTests: XCTestCase {
  /// A minimal GIF writer: 16-colour global table, LZW with a Clear code before the table
  /// would grow (every code a 5-bit literal), one GCE per frame.
  static func gif(width: Int, height: Int, palette: [(UInt8, UInt8, UInt8)], icc: [UInt8],
                  frames: [[UInt8]]) -> [UInt8] {
    func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xff), UInt8(v >> 8)] }
    func blocks(_ data: [UInt8]) -> [UInt8] {
      var out: [UInt8] = []
      var i = 0
      while i < data.count {
        let n = min(255, data.count - i)
        out.append(UInt8(n))
        out += data[i..<i + n]
        i += n
      }
      return out + [0]
    }
    var out = Array("GIF89a".utf8) + le16(width) + le16(height) + [0xf3, 0, 0]
    for i in 0..<16 { let c = i < palette.count ? palette[i] : (0, 0, 0); out += [c.0, c.1, c.2] }
    out += [0x21, 0xff, 11] + Array("ICCRGBG1012".utf8) + blocks(icc)
    out += [0x21, 0xff, 11] + Array("NETSCAPE2.0".utf8) + [3, 1, 0, 0, 0]
    for indices in frames {
      out += [0x21, 0xf9, 4, 1 << 2, 10, 0, 0, 0]
      out += [0x2c] + le16(0) + le16(0) + le16(width) + le16(height) + [0]
      var bytes: [UInt8] = [], acc: UInt32 = 0, bits = 0
      func put(_ code: UInt32) {
        acc |= code << UInt32(bits); bits += 5
        while bits >= 8 { bytes.append(UInt8(acc & 0xff)); acc >>= 8; bits -= 8 }
      }
      for (i, index) in indices.enumerated() {
        if i % 13 == 0 { put(16) }
        put(UInt32(index))
      }
      put(17)
      if bits > 0 { bytes.append(UInt8(acc & 0xff)) }
      out += [4] + blocks(bytes)
    }
    return out + [0x3b]
  }

  func testFramesAreColourManagedLikeTheStill() throws {
    let iccPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .appendingPathComponent("codecs/display-p3.icc").path
    guard let icc = FileManager.default.contents(atPath: iccPath) else { throw XCTSkip("no \(iccPath)") }
    let palette: [(UInt8, UInt8, UInt8)] = [(200, 60, 40), (40, 180, 90), (70, 90, 210), (230, 200, 30)]
    let w = 12, h = 9
    let frames = (0..<3).map { k in (0..<(w * h)).map { UInt8(($0 / 3 + $0 / w + k) % 4) } }
    let data = Self.gif(width: w, height: h, palette: palette, icc: [UInt8](icc), frames: frames)
    func decode(size: Int, format: PixelFormat, animates: Bool, managed: Bool = true) throws -> Image {
      var request = ImageRequest(url: "x", targetWidth: size, targetHeight: size, mode: .fill, format: format)
      request.animates = animates
      var variant = request.variant
      variant.managesColor = managed
      switch ImageDecoder().decode(data, variant: variant, maxPixels: 1_000_000) {
      case .success(let image): return image
      case .failure(let error): XCTFail(error.message); throw error
      }
    }
    for format in PixelFormat.allCases {
      for size in [0, 5] {
        let still = try decode(size: size, format: format, animates: false)
        let animated = try decode(size: size, format: format, animates: true)
        let raw = try decode(size: size, format: format, animates: true, managed: false)
        XCTAssertEqual(animated.frameCount, 3)
        XCTAssertEqual(memcmp(still.pixels, animated.pixels, still.byteCount), 0, "\(format) size \(size)")
        XCTAssertNotEqual(memcmp(raw.pixels, animated.pixels, still.byteCount), 0, "\(format) size \(size): not converted")
        XCTAssertNotEqual(memcmp(raw.framePixels(2)!, animated.framePixels(2)!, still.byteCount), 0,
                          "\(format) size \(size): frame 2 not converted")
      }
    }
  }
}
