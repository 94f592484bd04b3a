import FuzzDriver
import XCTest
@testable import PixloadCore

/// EXIF orientation on the corpus's Landscape_N / Portrait_N: each stored differently,
/// each must come out upright and equal to orientation 1 up to JPEG noise.
final class OrientationTests: XCTestCase {
  func decode(_ path: String, orientation: Bool = true, size: Int = 0) throws -> Image {
    guard let bytes = readWholeFile(path) else { throw XCTSkip("cannot read \(path)") }
    let variant = ImageRequest(url: "file://" + path, targetWidth: size, targetHeight: size,
                               format: .rgb8, appliesOrientation: orientation).variant
    switch ImageDecoder().decode(bytes, variant: variant, maxPixels: 100_000_000) {
    case .success(let image): return image
    case .failure(let error): XCTFail("\(path): \(error.message)"); throw error
    }
  }

  /// Mean absolute difference per channel value.
  func meanDifference(_ a: Image, _ b: Image) -> Double {
    precondition(a.byteCount == b.byteCount)
    let pa = a.pixels.assumingMemoryBound(to: UInt8.self), pb = b.pixels.assumingMemoryBound(to: UInt8.self)
    var total = 0
    for i in 0..<a.byteCount { total += abs(Int(pa[i]) - Int(pb[i])) }
    return Double(total) / Double(a.byteCount)
  }

  func testAllEightOrientationsComeOutUpright() throws {
    guard let corpus = EngineTests.corpus else { throw XCTSkip("../shared/corpus is absent: orientation tests skipped") }
    for shape in ["Landscape", "Portrait"] {
      let dir = "\(corpus)/realworld/exif-orientation/\(shape)_"
      for size in [0, 120] {
        let reference = try decode(dir + "1.jpg", size: size)
        for n in 2...8 {
          let turned = try decode(dir + "\(n).jpg", size: size)
          XCTAssertEqual([turned.width, turned.height], [reference.width, reference.height], "\(shape)_\(n) size \(size)")
          guard turned.width == reference.width && turned.height == reference.height else { continue }
          let difference = meanDifference(turned, reference)
          // Measured: under 4 at full size (the quarter-turned files were re-encoded with
          // their chroma subsampling transposed) and under 1 as thumbnails; a wrong turn
          // gives 40 to 90.
          XCTAssertLessThan(difference, size == 0 ? 6 : 2, "\(shape)_\(n) at size \(size) is not upright")
          // Without orientation the stored pixels differ a lot from upright (sanity check
          // that the comparison can fail).
          if size == 0 && n != 1 {
            let stored = try decode(dir + "\(n).jpg", orientation: false, size: 0)
            if stored.width == reference.width && stored.height == reference.height {
              XCTAssertGreaterThan(meanDifference(stored, reference), 10, "\(shape)_\(n) stored")
            }
          }
        }
      }
    }
  }
}

/// PNG thumbnails stream rows from libpng into the resampler; the result must be exactly
/// what resampling the whole decoded bitmap gives.
final class PNGStreamingTests: XCTestCase {
  func testStreamedThumbnailEqualsWholeBitmapResample() throws {
    guard let corpus = EngineTests.corpus else { throw XCTSkip("../shared/corpus is absent: PNG streaming test skipped") }
    for file in ["realworld/png/" + largestPNG(in: corpus + "/realworld/png"), "pngsuite/basn6a08.png", "pngsuite/basi6a08.png"] {
      guard let bytes = readWholeFile("\(corpus)/\(file)") else { throw XCTSkip("cannot read \(file)") }
      for format in [PixelFormat.rgba8, .bgra8Premultiplied, .rgb8, .gray8] {
        // Colour management off: PngSuite's gAMA converts the thumbnail after resampling,
        // the whole bitmap before it, which are not the same pixels.
        var thumbVariant = ImageRequest(url: "x", targetWidth: 24, targetHeight: 20, mode: .fill, format: format,
                                        appliesOrientation: false).variant
        thumbVariant.managesColor = false
        guard case .success(let streamed) = ImageDecoder().decode(bytes, variant: thumbVariant, maxPixels: 1 << 30)
        else { return XCTFail("\(file) thumbnail") }
        var fullVariant = ImageRequest(url: "x", format: format == .bgra8Premultiplied ? .bgra8Premultiplied : format,
                                       appliesOrientation: false).variant
        fullVariant.managesColor = false
        guard case .success(let full) = ImageDecoder().decode(bytes, variant: fullVariant, maxPixels: 1 << 30)
        else { return XCTFail("\(file) full") }
        let channels = format.bytesPerPixel
        // The whole-bitmap path: premultiplied source (for alpha), resample, then back.
        let source = full.pixels.assumingMemoryBound(to: UInt8.self)
        if channels == 4 && format == .rgba8 { PixelOps.premultiply(source, count: full.width * full.height) }
        let plan = SizePlan(sourceWidth: full.width, sourceHeight: full.height, orientation: .up,
                            targetWidth: 24, targetHeight: 20, mode: .fill)
        let expected = AreaResampler.resample(source: source, width: full.width, height: full.height,
                                              channels: channels, crop: plan.storedCrop,
                                              outputWidth: plan.outputWidth, outputHeight: plan.outputHeight)!
        defer { free(expected) }
        if channels == 4 && format == .rgba8 { PixelOps.unpremultiply(expected, count: 24 * 20) }
        XCTAssertEqual([streamed.width, streamed.height], [24, 20], file)
        let got = UnsafeBufferPointer(start: streamed.pixels.assumingMemoryBound(to: UInt8.self), count: streamed.byteCount)
        XCTAssertTrue(got.elementsEqual(UnsafeBufferPointer(start: expected, count: 24 * 20 * channels)),
                      "\(file) \(format): streamed thumbnail differs from the whole-bitmap resample")
      }
    }
  }

  private func largestPNG(in directory: String) -> String {
    guard let dir = opendir(directory) else { return "" }
    defer { closedir(dir) }
    var best = ("", 0)
    while let entry = readdir(dir) {
      let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
      guard name.hasSuffix(".png") else { continue }
      var info = stat()
      if stat("\(directory)/\(name)", &info) == 0 && Int(info.st_size) > best.1 { best = (name, Int(info.st_size)) }
    }
    return best.0
  }
}
