import XCTest
import CCodecs
import FuzzDriver
@testable import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

/// WebP through ImageDecoder: the sniff, full decodes equal to the shim's, thumbnails equal
/// to the resampled full decode, EXIF orientation from a VP8X EXIF chunk, clear errors.
/// Pixel conformance against dwebp is Tests/codecs/conformance.c's job (make test-codecs).
final class WebPDecoderTests: XCTestCase {
  static let suite: String = {
    var path = #filePath
    for _ in 0..<2 { path = String(path[..<path.lastIndex(of: "/")!]) }  // Tests/
    return path + "/fixtures/webp-suite"
  }()

  func fixture(_ name: String) throws -> [UInt8] {
    try XCTUnwrap(readWholeFile(Self.suite + "/" + name), "cannot read \(name)")
  }

  func decode(_ bytes: [UInt8], width: Int = 0, height: Int = 0, mode: ScaleMode = .fit, format: PixelFormat = .rgba8,
              orientation: Bool = true) -> Result<Image, LoadError> {
    let variant = ImageRequest(url: "x", targetWidth: width, targetHeight: height, mode: mode, format: format,
                               appliesOrientation: orientation).variant
    return ImageDecoder().decode(bytes, variant: variant, maxPixels: 1 << 30)
  }

  func testSniff() {
    let riff = Array("RIFF".utf8) + [4, 0, 0, 0]
    XCTAssertEqual(ImageDecoder.sniff(riff + Array("WEBPVP8 ".utf8)), "webp")
    XCTAssertNil(ImageDecoder.sniff(riff + Array("WAVEfmt ".utf8)))
    XCTAssertNil(ImageDecoder.sniff(riff + Array("WEB".utf8)))
    XCTAssertTrue(ImageDecoder.describeNonImage(Array("<html>".utf8)).contains("WebP"))
  }

  func testFullDecodeIsTheShimsPixels() throws {
    for name in ["lossless1.webp", "lossy_alpha1.webp", "test.webp", "small_31x13.webp", "lossless_vec_2_6.webp"] {
      let bytes = try fixture(name)
      guard case .success(let image) = decode(bytes) else { return XCTFail("\(name) failed") }
      var out = pxl_codec_output()
      XCTAssertEqual(pxl_webp_decode(bytes, bytes.count, Int32(PXL_CODEC_RGBA.rawValue), 1 << 30, &out), PXL_CODEC_OK)
      defer { free(out.pixels) }
      XCTAssertEqual(image.width, Int(out.width), name)
      XCTAssertEqual(image.height, Int(out.height), name)
      XCTAssertEqual(memcmp(image.pixels, out.pixels, image.byteCount), 0, name)
    }
  }

  /// A thumbnail streams the decoded rows through the area resampler: it must equal the
  /// resampler run on the whole full-size decode (premultiplied where there is alpha).
  func testThumbnailIsTheResampledFullDecode() throws {
    for name in ["lossy_alpha1.webp", "test.webp", "lossless2.webp"] {
      let bytes = try fixture(name)
      guard case .success(let full) = decode(bytes), case .success(let thumb) = decode(bytes, width: 24, height: 20, mode: .fill)
      else { return XCTFail("\(name) failed") }
      XCTAssertEqual(thumb.width, 24)
      XCTAssertEqual(thumb.height, 20)
      let source = full.pixels.assumingMemoryBound(to: UInt8.self)
      PixelOps.premultiply(source, count: full.width * full.height)  // a no-op where alpha is 255
      let plan = SizePlan(sourceWidth: full.width, sourceHeight: full.height, orientation: .up, targetWidth: 24,
                          targetHeight: 20, mode: .fill)
      let expected = try XCTUnwrap(AreaResampler.resample(source: source, width: full.width, height: full.height,
                                                          channels: 4, crop: plan.storedCrop,
                                                          outputWidth: plan.outputWidth, outputHeight: plan.outputHeight))
      defer { free(expected) }
      PixelOps.unpremultiply(expected, count: 24 * 20)
      XCTAssertEqual(memcmp(thumb.pixels, expected, thumb.byteCount), 0, name)
    }
  }

  /// small_31x13.webp wrapped in a VP8X container with an EXIF chunk saying orientation 6
  /// (rotate 90 degrees clockwise): upright it is 13 x 31.
  func testExifOrientationIsApplied() throws {
    let simple = try fixture("small_31x13.webp")
    let image = Array(simple[12...])  // the VP8 chunk, header included
    func le32(_ v: Int) -> [UInt8] { [UInt8(v & 255), UInt8(v >> 8 & 255), UInt8(v >> 16 & 255), UInt8(v >> 24 & 255)] }
    func le24(_ v: Int) -> [UInt8] { Array(le32(v)[0..<3]) }
    let tiff: [UInt8] = Array("MM".utf8) + [0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0]
    let vp8x = Array("VP8X".utf8) + le32(10) + [0x08, 0, 0, 0] + le24(30) + le24(12)
    let exif = Array("EXIF".utf8) + le32(tiff.count) + tiff
    let body = Array("WEBP".utf8) + vp8x + image + exif
    let file = Array("RIFF".utf8) + le32(body.count) + body

    guard case .success(let upright) = decode(file) else { return XCTFail("VP8X + EXIF failed") }
    XCTAssertEqual([upright.width, upright.height, upright.originalWidth, upright.originalHeight], [13, 31, 13, 31])
    guard case .success(let stored) = decode(file, orientation: false) else { return XCTFail("without orientation") }
    XCTAssertEqual([stored.width, stored.height], [31, 13])
    guard case .success(let plain) = decode(simple) else { return XCTFail("plain") }
    XCTAssertEqual(memcmp(plain.pixels, stored.pixels, plain.byteCount), 0, "the EXIF chunk changed the pixels")
    guard case .success(let thumb) = decode(file, width: 6, height: 12, mode: .fill) else { return XCTFail("thumb") }
    XCTAssertEqual([thumb.width, thumb.height], [6, 12])
  }

  func testCorruptAndTruncatedFilesFailClearly() throws {
    let bytes = try fixture("lossless1.webp")
    for cut in [13, 30, bytes.count / 2, bytes.count - 1] {
      guard case .failure(let error) = decode(Array(bytes[0..<cut])) else { return XCTFail("cut at \(cut) decoded") }
      XCTAssertEqual(error.status, .corruptImage)
      XCTAssertTrue(error.message.contains("WebP") && error.message.contains("truncated"), error.message)
    }
    var broken = bytes
    broken[20] ^= 0xFF  // the VP8L signature
    guard case .failure(let error) = decode(broken) else { return XCTFail("broken signature decoded") }
    XCTAssertEqual(error.status, .corruptImage)
    guard case .failure(let limit) = ImageDecoder().decode(bytes, variant: ImageRequest(url: "x").variant, maxPixels: 100)
    else { return XCTFail("limit ignored") }
    XCTAssertEqual(limit.status, .tooManyPixels)
  }

  func testCodecEntryHasFrames() throws {
    let bytes = try fixture("test.webp")
    let codec = BuiltInCodecs.webp.native
    XCTAssertEqual(codec.name, "WebP")
    let frames = try XCTUnwrap(codec.decodeFrames)
    final class Count { var frames = 0 }
    let count = Count()
    var out = pxl_codec_output()
    let status = withExtendedLifetime(count) {
      frames(bytes, bytes.count, 1 << 30, { user, _, _, _, _ in
        Unmanaged<Count>.fromOpaque(user!).takeUnretainedValue().frames += 1
        return 0
      }, Unmanaged.passUnretained(count).toOpaque(), &out)
    }
    XCTAssertEqual(status, PXL_CODEC_OK)
    XCTAssertEqual(count.frames, 1)
  }
}
