import FuzzDriver
import XCTest
@testable import PixloadCore

/// AVIF through ImageDecoder (the shim's pixels themselves are checked by the conformance
/// runner and Tests/codecs/avif_test.c): the sniff, irot/imir turned upright, thumbnails,
/// premultiplied alpha, the pixel limit, and clean failures on every truncation.
final class AvifDecoderTests: XCTestCase {
  static let suite: String = {
    var path = #filePath
    for _ in 0..<2 { path = String(path[..<path.lastIndex(of: "/")!]) }  // Tests/
    return path + "/fixtures/avif-suite/"
  }()

  func bytes(_ name: String) throws -> [UInt8] {
    try XCTUnwrap(readWholeFile(Self.suite + name), "\(Self.suite)\(name) is missing")
  }

  func decode(_ data: [UInt8], size: Int = 0, format: PixelFormat = .rgb8, orientation: Bool = true,
              maxPixels: UInt64 = 100_000_000) -> Result<Image, LoadError> {
    let variant = ImageRequest(url: "test:", targetWidth: size, targetHeight: size, format: format,
                               appliesOrientation: orientation).variant
    return ImageDecoder().decode(data, variant: variant, maxPixels: maxPixels)
  }

  func image(_ name: String, size: Int = 0, format: PixelFormat = .rgb8) throws -> Image {
    switch decode(try bytes(name), size: size, format: format) {
    case .success(let image): return image
    case .failure(let error): XCTFail("\(name): \(error.message)"); throw error
    }
  }

  func ftyp(_ major: String, _ compatible: [String], declaredSize: Int? = nil) -> [UInt8] {
    let size = declaredSize ?? 16 + 4 * compatible.count
    var box: [UInt8] = [UInt8(size >> 24 & 0xff), UInt8(size >> 16 & 0xff), UInt8(size >> 8 & 0xff), UInt8(size & 0xff)]
    box += Array("ftyp".utf8) + Array(major.utf8) + [0, 0, 0, 0]
    for brand in compatible { box += Array(brand.utf8) }
    return box + [0, 0, 0, 8] + Array("free".utf8)
  }

  func testSniffReadsTheBrandsOfTheFtypBox() {
    XCTAssertEqual(ImageDecoder.sniff(ftyp("avif", ["mif1", "miaf"])), "avif")
    XCTAssertEqual(ImageDecoder.sniff(ftyp("avis", ["msf1"])), "avif")
    XCTAssertEqual(ImageDecoder.sniff(ftyp("mif1", ["miaf", "avif"])), "avif", "a compatible brand is enough")
    XCTAssertNil(ImageDecoder.sniff(ftyp("heic", ["mif1", "heix"])), "HEIC is not AVIF")
    XCTAssertNil(ImageDecoder.sniff(ftyp("mif1", ["miaf", "avif"], declaredSize: 20)),
                 "a brand past the box's declared end does not count")
    XCTAssertNil(ImageDecoder.sniff(Array(ftyp("avif", []).prefix(15))))
    XCTAssertNil(ImageDecoder.sniff(ftyp("avif", [], declaredSize: 8)), "a box too small for its own header")
    for name in ["fox.profile0.8bpc.yuv420.avif", "star-8bpc.avifs", "fruits_2layer_thumbsize.avif"] {
      XCTAssertEqual(ImageDecoder.sniff((try? bytes(name)) ?? []), "avif", name)
    }
    if case .failure(let error) = decode(Array("<html>".utf8)) {
      XCTAssertTrue(error.message.contains("AVIF"), "the not-an-image message names AVIF: \(error.message)")
    } else {
      XCTFail("HTML decoded")
    }
  }

  /// kimono.crop.avif is the upright picture (its clap is not applied); the other three
  /// store it turned or mirrored and say so with irot/imir.
  func testIrotAndImirComeOutUpright() throws {
    for size in [0, 120] {
      let upright = try image("kimono.crop.avif", size: size)
      for name in ["kimono.rotate90.avif", "kimono.mirror-horizontal.avif", "kimono.mirror-vertical.rotate270.avif"] {
        let turned = try image(name, size: size)
        XCTAssertEqual([turned.width, turned.height], [upright.width, upright.height], "\(name) at \(size)")
        XCTAssertEqual([turned.originalWidth, turned.originalHeight], [722, 1024], name)
        guard turned.byteCount == upright.byteCount else { continue }
        // The same AV1 encoder settings on turned copies: a right turn differs by a few
        // levels, a wrong one by tens.
        XCTAssertLessThan(meanDifference(turned, upright), 3, "\(name) at \(size)")
      }
      let stored = decode(try bytes("kimono.rotate90.avif"), size: size, orientation: false)
      if case .success(let image) = stored { XCTAssertGreaterThan(image.width, image.height, "not turned when asked not to") }
    }
  }

  func meanDifference(_ a: Image, _ b: Image) -> Double {
    let pa = a.pixels.assumingMemoryBound(to: UInt8.self), pb = b.pixels.assumingMemoryBound(to: UInt8.self)
    var total = 0
    for i in 0..<a.byteCount { total += abs(Int(pa[i]) - Int(pb[i])) }
    return Double(total) / Double(a.byteCount)
  }

  func testThumbnailsAndPremultipliedAlpha() throws {
    let thumb = try image("fox.profile0.10bpc.yuv420.odd-width.odd-height.avif", size: 150)
    XCTAssertEqual([thumb.width, thumb.height], [150, 100], "fit keeps 1203x799's aspect ratio")
    let straight = try image("star-8bpc-with-alpha.avifs", format: .rgba8)
    let premultiplied = try image("star-8bpc-with-alpha.avifs", format: .rgba8Premultiplied)
    let s = straight.pixels.assumingMemoryBound(to: UInt8.self), p = premultiplied.pixels.assumingMemoryBound(to: UInt8.self)
    var transparent = 0
    for i in stride(from: 0, to: straight.byteCount, by: 4) {
      let alpha = Int(s[i + 3])
      if alpha < 255 { transparent += 1 }
      XCTAssertEqual(Int(p[i + 3]), alpha)
      for c in 0..<3 { XCTAssertEqual(Int(p[i + c]), (Int(s[i + c]) * alpha + 127) / 255, "pixel \(i / 4)") }
      if transparent > 2000 { break }
    }
    XCTAssertGreaterThan(transparent, 0, "the star has transparent pixels")
  }

  func testPixelLimitAndTruncationsFailCleanly() throws {
    let data = try bytes("fox.profile0.8bpc.yuv420.avif")
    if case .failure(let error) = decode(data, maxPixels: 1204 * 800 - 1) {
      XCTAssertEqual(error.status, .tooManyPixels, error.message)
    } else {
      XCTFail("decoded over the pixel limit")
    }
    for size in [0, 150] {
      for length in stride(from: 12, to: data.count, by: max(1, data.count / 97)) {
        switch decode(Array(data.prefix(length)), size: size) {
        case .success: XCTFail("the first \(length) of \(data.count) bytes decoded")
        case .failure(let error):
          XCTAssertFalse(error.message.isEmpty)
          XCTAssertTrue([.corruptImage, .notAnImage].contains(error.status), "\(length): \(error.status) \(error.message)")
        }
      }
    }
  }
}
