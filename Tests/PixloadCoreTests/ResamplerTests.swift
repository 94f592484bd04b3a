import CCodecs
import FuzzDriver
import XCTest
@testable import PixloadCore

/// The C area resampler (streamed, fixed point, SIMD) against the float Swift one it
/// replaced (ReferenceAreaResampler): every byte within 1 level, the fixed-point
/// arithmetic's allowance (Tests/codecs/resample_test.c checks it against the exact
/// average on each code path).
final class ResamplerTests: XCTestCase {
  /// The bytes of `ours` that differ from `reference` by more than 1 level of the
  /// resampled (premultiplied) value. Straight alpha (`straightAlpha`, 4 channels, alpha
  /// last): a colour was divided by its alpha after resampling, which magnifies that level
  /// to about 255 / alpha (and the alpha itself may differ by 1), so that is allowed there.
  static func beyondOneLevel(_ ours: UnsafeBufferPointer<UInt8>, _ reference: UnsafeBufferPointer<UInt8>,
                             channels: Int, straightAlpha: Bool) -> Int {
    var count = 0
    for i in 0..<min(ours.count, reference.count) {
      var allowed = 1
      if straightAlpha && channels == 4 && i % 4 != 3 {
        let alpha = Int(min(ours[i - i % 4 + 3], reference[i - i % 4 + 3]))
        if alpha < 255 { allowed = alpha == 0 ? 255 : 1 + 2 * 255 / alpha }
      }
      if abs(Int(ours[i]) - Int(reference[i])) > allowed { count += 1 }
    }
    return count + abs(ours.count - reference.count)
  }

  /// SplitMix64: the same cases on every run.
  struct Random {
    var state: UInt64
    mutating func next() -> UInt64 {
      state &+= 0x9E37_79B9_7F4A_7C15
      var z = state
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      return z ^ (z >> 31)
    }
    mutating func int(_ range: ClosedRange<Int>) -> Int {
      range.lowerBound + Int(next() % UInt64(range.upperBound - range.lowerBound + 1))
    }
    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
  }

  func testMatchesTheReferenceOnRandomCropsAndSizes() {
    var random = Random(state: 18)
    for round in 0..<400 {
      let channels = [1, 3, 4][round % 3]
      let width = random.int(1...260), height = random.int(1...260)
      // Smooth gradients and noise: both kinds of content real images have.
      var source = [UInt8](repeating: 0, count: width * height * channels)
      let noisy = round % 2 == 0
      for i in source.indices { source[i] = noisy ? UInt8(truncatingIfNeeded: random.next()) : UInt8((i * 7 / channels) % 256) }
      let cropWidth = max(0.5, Double(width) * (0.3 + 0.7 * random.unit()))
      let cropHeight = max(0.5, Double(height) * (0.3 + 0.7 * random.unit()))
      let crop = PixelRect(x: (Double(width) - cropWidth) * random.unit(), y: (Double(height) - cropHeight) * random.unit(),
                           width: cropWidth, height: cropHeight)
      // Mostly shrinking (all pixload does), sometimes the same size or larger.
      let outWidth = round % 10 == 0 ? random.int(1...300) : random.int(1...max(1, Int(cropWidth)))
      let outHeight = round % 10 == 0 ? random.int(1...300) : random.int(1...max(1, Int(cropHeight)))
      let premultiply = channels == 4 && round % 4 == 3
      if premultiply { for p in stride(from: 3, to: source.count, by: 8) { source[p] = UInt8(p % 251) } }

      let ours: [UInt8] = source.withUnsafeBufferPointer { src in
        let resampler = AreaResampler(sourceWidth: width, sourceHeight: height, channels: channels, crop: crop,
                                      outputWidth: outWidth, outputHeight: outHeight, premultiply: premultiply)!
        for y in 0..<height { resampler.addRow(y, src.baseAddress! + y * width * channels) }
        let out = resampler.finish()!
        defer { free(out) }
        return Array(UnsafeBufferPointer(start: out, count: outWidth * outHeight * channels))
      }
      var premultiplied = source
      if premultiply { premultiplied.withUnsafeMutableBufferPointer { PixelOps.premultiply($0.baseAddress!, count: width * height) } }
      let reference: [UInt8] = premultiplied.withUnsafeMutableBufferPointer { src in
        let out = ReferenceAreaResampler.resample(source: src.baseAddress!, width: width, height: height,
                                                  channels: channels, crop: crop, outputWidth: outWidth,
                                                  outputHeight: outHeight)!
        defer { free(out) }
        return Array(UnsafeBufferPointer(start: out, count: outWidth * outHeight * channels))
      }
      let differing = ours.withUnsafeBufferPointer { a in
        reference.withUnsafeBufferPointer { Self.beyondOneLevel(a, $0, channels: channels, straightAlpha: false) }
      }
      if differing > 0 {
        return XCTFail("case \(round): \(width)x\(height)x\(channels) crop \(crop) -> \(outWidth)x\(outHeight) "
                       + "premultiply \(premultiply): \(differing) of \(ours.count) bytes more than 1 level off the reference")
      }
    }
  }

  func testAllRowsAreNeededBeforeFinish() {
    // A source that stops early must not hand over a half-written image.
    let row = [UInt8](repeating: 9, count: 16)
    let resampler = AreaResampler(sourceWidth: 16, sourceHeight: 8, channels: 1,
                                  crop: PixelRect(x: 0, y: 0, width: 16, height: 8), outputWidth: 4, outputHeight: 2)!
    for y in 0..<7 { row.withUnsafeBufferPointer { resampler.addRow(y, $0.baseAddress!) } }
    XCTAssertNil(resampler.finish())
    row.withUnsafeBufferPointer { resampler.addRow(7, $0.baseAddress!) }
    let out = resampler.finish()
    XCTAssertNotNil(out)
    XCTAssertEqual(out.map { Array(UnsafeBufferPointer(start: $0, count: 8)) }, [UInt8](repeating: 9, count: 8))
    free(out)
  }

  /// Real photographs (JPEG: rows streamed from libjpeg at the DCT scale; EXIF-rotated
  /// ones too) and PNGs with alpha, in every format and a few sizes and modes: the
  /// decoder's thumbnail is within 1 level of what the previous pipeline made (a whole
  /// DCT-scaled bitmap, then the float reference resampler, then orientation).
  func testThumbnailsKeepTheirPixels() throws {
    guard let corpus = EngineTests.corpus else { throw XCTSkip("../shared/corpus is absent: thumbnail pixel test skipped") }
    let files = ["realworld/photos/mate-Blinds.jpg", "realworld/photos/mate-Elephants_3840x2160.jpg",
                 "realworld/exif-orientation/Landscape_6.jpg", "realworld/exif-orientation/Portrait_5.jpg",
                 "pngsuite/basn6a08.png", "pngsuite/basi6a08.png", "pngsuite/basn2c16.png", "pngsuite/tbbn3p08.png"]
    let targets: [(Int, Int, ScaleMode)] = [(150, 150, .fill), (100, 0, .fit), (37, 53, .fill), (640, 480, .fit)]
    for file in files {
      guard let bytes = readWholeFile("\(corpus)/\(file)") else { throw XCTSkip("cannot read \(file)") }
      for format in [PixelFormat.rgba8, .rgba8Premultiplied, .bgra8Premultiplied, .rgb8, .gray8] {
        for (width, height, mode) in targets {
          var variant = ImageRequest(url: "x", targetWidth: width, targetHeight: height, mode: mode, format: format).variant
          variant.managesColor = false // PngSuite's gAMA would be applied; the previous pipeline has no colour
          guard case .success(let image) = ImageDecoder().decode(bytes, variant: variant, maxPixels: 1 << 30) else {
            return XCTFail("\(file) \(format) \(width)x\(height)")
          }
          let expected = try previousPipeline(bytes, variant: variant)
          defer { free(expected.pixels) }
          XCTAssertEqual([image.width, image.height], [expected.width, expected.height], "\(file) \(format)")
          let got = UnsafeBufferPointer(start: image.pixels.assumingMemoryBound(to: UInt8.self), count: image.byteCount)
          let want = UnsafeBufferPointer(start: expected.pixels, count: image.byteCount)
          let off = Self.beyondOneLevel(got, want, channels: format.bytesPerPixel,
                                        straightAlpha: format == .rgba8)
          XCTAssertEqual(off, 0, "\(file) \(format) \(width)x\(height) \(mode): thumbnail pixels more than 1 level off")
        }
      }
    }
  }

  /// ImageDecoder's thumbnail path as it was before the streamed C resampler.
  private func previousPipeline(_ bytes: [UInt8], variant: ImageVariant) throws
    -> (pixels: UnsafeMutablePointer<UInt8>, width: Int, height: Int) {
    let isJPEG = bytes[0] == 0xFF
    var info = pxl_codec_info()
    _ = isJPEG ? pxl_jpeg_read_info(bytes, bytes.count, &info, nil, 0) : pxl_png_read_info(bytes, bytes.count, &info, nil, 0)
    let orientation = variant.appliesOrientation ? Orientation(exif: Int(info.orientation)) : .up
    let plan = SizePlan(sourceWidth: Int(info.width), sourceHeight: Int(info.height), orientation: orientation,
                        targetWidth: variant.width, targetHeight: variant.height, mode: variant.mode)
    let layout: pxl_codec_layout
    switch variant.format {
    case .rgba8, .rgba8Premultiplied: layout = PXL_CODEC_RGBA
    case .bgra8Premultiplied: layout = PXL_CODEC_BGRA
    case .rgb8: layout = PXL_CODEC_RGB
    case .gray8: layout = PXL_CODEC_GRAY
    }
    var output = pxl_codec_output()
    let status = isJPEG
      ? pxl_jpeg_decode(bytes, bytes.count, Int32(layout.rawValue), Int32(plan.dctScaleDenominator), 1 << 30, &output)
      : pxl_png_decode(bytes, bytes.count, Int32(layout.rawValue), 1 << 30, &output)
    guard status == PXL_CODEC_OK else { throw XCTSkip("reference decode failed") }
    var pixels = output.pixels!, width = Int(output.width), height = Int(output.height)
    let channels = Int(output.channels)
    let hasAlpha = channels == 4 && output.has_alpha != 0
    let crop = plan.storedCrop.scaled(x: Double(width) / Double(info.width), y: Double(height) / Double(info.height))
    if plan.storedOutputWidth != width || plan.storedOutputHeight != height || !crop.isWhole(width: width, height: height) {
      if hasAlpha { PixelOps.premultiply(pixels, count: width * height) }
      let resampled = ReferenceAreaResampler.resample(source: pixels, width: width, height: height, channels: channels,
                                                      crop: crop, outputWidth: plan.storedOutputWidth,
                                                      outputHeight: plan.storedOutputHeight)!
      free(pixels)
      pixels = resampled
      width = plan.storedOutputWidth
      height = plan.storedOutputHeight
      if hasAlpha && !variant.format.isPremultiplied { PixelOps.unpremultiply(pixels, count: width * height) }
    } else if hasAlpha && variant.format.isPremultiplied {
      PixelOps.premultiply(pixels, count: width * height)
    }
    if orientation != .up {
      let turned = orientation.apply(pixels, width: width, height: height, channels: channels)!
      free(pixels)
      pixels = turned
      if orientation.swapsAxes { swap(&width, &height) }
    }
    return (pixels, width, height)
  }
}
