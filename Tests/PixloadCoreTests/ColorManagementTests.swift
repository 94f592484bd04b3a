import CCodecs
import Foundation
import XCTest
@testable import PixloadCore

/// Colour management through ImageDecoder and the loader (the conversions themselves are
/// checked against Pillow's ImageCms by Tests/codecs/color_test.c).
final class ColorManagementTests: XCTestCase {
  static let formats: [PixelFormat] = [.rgba8, .rgba8Premultiplied, .bgra8Premultiplied, .rgb8, .gray8]
  /// Full size, a FILL thumbnail, a FIT thumbnail.
  static let sizes: [(Int, Int, ScaleMode)] = [(0, 0, .fit), (16, 12, .fill), (10, 0, .fit)]

  /// `jpeg` with `profile` in one APP2 "ICC_PROFILE" segment right after SOI.
  static func tagged(_ jpeg: [UInt8], profile: [UInt8]) -> [UInt8] {
    let payload = Array("ICC_PROFILE".utf8) + [0, 1, 1] + profile
    let length = payload.count + 2
    return [0xFF, 0xD8, 0xFF, 0xE2, UInt8(length >> 8), UInt8(length & 0xFF)] + payload + jpeg[2...]
  }

  func decode(_ bytes: [UInt8], _ format: PixelFormat, _ size: (Int, Int, ScaleMode), managed: Bool,
              file: StaticString = #filePath, line: UInt = #line) -> [UInt8] {
    var request = ImageRequest(url: "x", targetWidth: size.0, targetHeight: size.1, mode: size.2, format: format)
    request.managesColor = managed
    guard case .success(let image) = ImageDecoder().decode(bytes, variant: request.variant, maxPixels: 1 << 24) else {
      XCTFail("decode failed", file: file, line: line)
      return []
    }
    return Array(UnsafeBufferPointer(start: image.pixels.assumingMemoryBound(to: UInt8.self), count: image.byteCount))
  }

  /// A Display P3 JPEG is converted in every format and size; with the flag off its pixels
  /// are exactly those of the same JPEG without the profile.
  func testTaggedFilesAreConvertedAndTheFlagKeepsTheDecodedValues() {
    let p3 = Self.tagged(Fixtures.untaggedJPEG, profile: Fixtures.displayP3Profile)
    for format in Self.formats {
      for size in Self.sizes {
        let kept = decode(p3, format, size, managed: false)
        let untagged = decode(Fixtures.untaggedJPEG, format, size, managed: true)
        XCTAssertEqual(kept, untagged, "\(format) \(size): the flag must keep the decoded values")
        let converted = decode(p3, format, size, managed: true)
        XCTAssertEqual(converted.count, kept.count)
        XCTAssertNotEqual(converted, kept, "\(format) \(size): a P3 image was not converted")
        // Display P3 has sRGB's white and curve: greys stay where they were.
        let channels = format.bytesPerPixel
        guard channels >= 3 else { continue }
        var greys = 0
        for i in stride(from: 0, to: kept.count, by: channels) where kept[i] == kept[i + 1] && kept[i] == kept[i + 2] {
          greys += 1
          for c in 0..<3 { XCTAssertLessThanOrEqual(abs(Int(converted[i + c]) - Int(kept[i + c])), 1, "\(format) grey") }
        }
        XCTAssertGreaterThan(greys, 0)
      }
    }
  }

  /// The full-size RGBA result is the shim's decode converted by the shared transform.
  func testFullSizeResultIsTheDecodeConverted() {
    let p3 = Self.tagged(Fixtures.untaggedJPEG, profile: Fixtures.displayP3Profile)
    var output = pxl_codec_output()
    XCTAssertEqual(pxl_jpeg_decode(p3, p3.count, Int32(PXL_CODEC_RGBA.rawValue), 1, 1 << 24, &output), PXL_CODEC_OK)
    defer { free(output.pixels) }
    var color = pxl_codec_color()
    XCTAssertEqual(pxl_jpeg_color(p3, p3.count, &color), PXL_CODEC_OK)
    defer { pxl_codec_color_free(&color) }
    XCTAssertEqual(color.icc_size, Fixtures.displayP3Profile.count)
    let transform = pxl_color_transform_get(&color, nil, 0)
    XCTAssertNotNil(transform)
    defer { pxl_color_transform_release(transform) }
    XCTAssertEqual(pxl_color_transform_apply(transform, output.pixels, output.width, output.height, output.stride,
                                             Int32(PXL_CODEC_RGBA.rawValue), 0, nil, 0), 1)
    let expected = Array(UnsafeBufferPointer(start: output.pixels, count: Int(output.stride * output.height)))
    XCTAssertEqual(decode(p3, .rgba8, (0, 0, .fit), managed: true), expected)
  }

  /// Untagged and sRGB-tagged files come out byte-identical with and without colour
  /// management, and no transform is built for them.
  func testUntaggedAndSRGBFilesPassThroughWithoutATransform() {
    let srgb = Self.tagged(Fixtures.untaggedJPEG, profile: Fixtures.sRGBProfile)
    let before = ColorConversion.transformsBuilt
    for file in [Fixtures.untaggedJPEG, srgb] {
      for format in Self.formats {
        for size in Self.sizes {
          XCTAssertEqual(decode(file, format, size, managed: true), decode(file, format, size, managed: false),
                         "\(format) \(size)")
        }
      }
    }
    XCTAssertEqual(ColorConversion.transformsBuilt, before, "a transform was built for an untagged or sRGB file")
  }

  /// Premultiplied results are converted before premultiplying: full size, exactly the
  /// straight conversion premultiplied; a thumbnail, within a level or two of it.
  func testPremultipliedFormatsAreConvertedBeforePremultiplying() {
    let png = Fixtures.displayP3AlphaPNG
    for size in [(0, 0, ScaleMode.fit), (16, 12, .fill)] {
      var straight = decode(png, .rgba8, size, managed: true)
      XCTAssertNotEqual(straight, decode(png, .rgba8, size, managed: false))
      straight.withUnsafeMutableBufferPointer { PixelOps.premultiply($0.baseAddress!, count: $0.count / 4) }
      let premultiplied = decode(png, .rgba8Premultiplied, size, managed: true)
      let bgra = decode(png, .bgra8Premultiplied, size, managed: true)
      XCTAssertEqual(premultiplied.count, straight.count)
      let worst = zip(premultiplied, straight).map { abs(Int($0) - Int($1)) }.max() ?? 0
      XCTAssertLessThanOrEqual(worst, size.0 == 0 ? 0 : 2, "\(size)")
      for i in stride(from: 0, to: bgra.count, by: 4) {
        XCTAssertEqual([bgra[i + 2], bgra[i + 1], bgra[i], bgra[i + 3]], Array(premultiplied[i..<i + 4]))
      }
    }
  }

  /// GRAY of an RGB-tagged file is the luma of its converted colours.
  func testGrayIsTheLumaOfTheConvertedColours() {
    let p3 = Self.tagged(Fixtures.untaggedJPEG, profile: Fixtures.displayP3Profile)
    for size in Self.sizes {
      let rgb = decode(p3, .rgb8, size, managed: true)
      let gray = decode(p3, .gray8, size, managed: true)
      XCTAssertEqual(gray.count * 3, rgb.count)
      for i in 0..<gray.count {
        let luma = (19595 * UInt32(rgb[3 * i]) + 38470 * UInt32(rgb[3 * i + 1]) + 7471 * UInt32(rgb[3 * i + 2]) + 32768) >> 16
        XCTAssertEqual(UInt32(gray[i]), luma, "\(size) pixel \(i)")
      }
    }
  }

  /// Decodes on many threads at once, starting from an empty cache: one transform is built
  /// and shared, every thread gets the same pixels (run under TSan: swift test
  /// --sanitize=thread --filter ColorManagementTests).
  func testTransformsAreBuiltOnceAndSharedAcrossThreads() {
    let p3 = Self.tagged(Fixtures.untaggedJPEG, profile: Fixtures.displayP3Profile)
    pxl_color_cache_clear()
    let before = ColorConversion.transformsBuilt
    let results = Lock()
    var seen: [[UInt8]] = []
    DispatchQueue.concurrentPerform(iterations: 8) { _ in
      for _ in 0..<10 {
        let pixels = self.decode(p3, .rgba8, (0, 0, .fit), managed: true)
        results.withLock { seen.append(pixels) }
      }
    }
    XCTAssertEqual(ColorConversion.transformsBuilt - before, 1, "one profile, one layout: one transform")
    XCTAssertEqual(Set(seen).count, 1, "threads got different pixels")
  }

  /// A request with and one without colour management are two variants: one download, two
  /// decodes, two memory-cache entries with their own pixels; a repeat of either is a hit.
  func testTheTwoVariantsAreDifferentMemoryCacheEntries() throws {
    let network = ManualDataLoader()
    let loader = try ImageLoader(configuration: LoaderConfiguration(), dataLoader: network)
    let queue = try CompletionQueue()
    defer { loader.close(); queue.close() }
    let recorder = Recorder()
    let managed = ImageRequest(url: "http://h/p3.jpg", targetWidth: 16, targetHeight: 12, mode: .fill)
    var kept = managed
    kept.managesColor = false
    XCTAssertNotEqual(managed.variant, kept.variant)
    let a = try loader.load(managed, queue: queue, handler: recorder.handler)
    let b = try loader.load(kept, queue: queue, handler: recorder.handler)
    XCTAssertEqual(network.started.count, 1, "one download for both")
    network.finish(0, bytes: Self.tagged(Fixtures.untaggedJPEG, profile: Fixtures.displayP3Profile))
    XCTAssertTrue(queue.drain(until: recorder, reaches: 2))
    XCTAssertEqual(loader.memoryCache.count, 2)
    func pixels(_ image: Image?) -> [UInt8] {
      guard let image else { return [] }
      return Array(UnsafeBufferPointer(start: image.pixels.assumingMemoryBound(to: UInt8.self), count: image.byteCount))
    }
    guard case .success(let first, _, _)? = recorder.outcome(a), case .success(let second, _, _)? = recorder.outcome(b)
    else { return XCTFail("both should load") }
    XCTAssertNotEqual(pixels(first), pixels(second))
    XCTAssertEqual(pixels(loader.cachedImage(for: managed)), pixels(first))
    XCTAssertEqual(pixels(loader.cachedImage(for: kept)), pixels(second))
    let again = try loader.load(kept, queue: queue, handler: recorder.handler)
    XCTAssertTrue(queue.drain(until: recorder, reaches: 3))
    guard case .success(let hit, let source, _)? = recorder.outcome(again) else { return XCTFail("repeat") }
    XCTAssertEqual(source, .memory)
    XCTAssertEqual(pixels(hit), pixels(second))
  }

  /// A broken profile: the decode succeeds with the decoded values and says why.
  func testABrokenProfileKeepsTheDecodedValuesWithAWarning() {
    var broken = Fixtures.displayP3Profile
    broken[36] = UInt8(ascii: "X")  // the "acsp" signature
    let file = Self.tagged(Fixtures.untaggedJPEG, profile: broken)
    let request = ImageRequest(url: "x", format: .rgb8)
    guard case .success(let image) = ImageDecoder().decode(file, variant: request.variant, maxPixels: 1 << 24) else {
      return XCTFail("a broken profile must not fail the decode")
    }
    XCTAssertTrue(image.warning?.contains("colour profile not applied") == true, image.warning ?? "no warning")
    XCTAssertEqual(decode(file, .rgb8, (0, 0, .fit), managed: true), decode(Fixtures.untaggedJPEG, .rgb8, (0, 0, .fit),
                                                                          managed: true))
  }
}

private func decode64(_ text: String) -> [UInt8] {
  Array(Data(base64Encoded: text.replacingOccurrences(of: "\n", with: ""))!)
}

/// Made by scripts/gen-color-fixtures.py's profiles and test_image (32x24, saturated
/// patches, ramps and greys): an untagged JPEG, lcms2's Display P3 and sRGB profiles, and
/// a Display P3 PNG with alpha.
private enum Fixtures {
  static let untaggedJPEG = decode64("""
    /9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAMCAgMCAgMDAwMEAwMEBQgFBQQEBQoHBwYIDAoMDAsKCwsNDhIQDQ4RDgsLEBYQERMU
    FRUVDA8XGBYUGBIUFRT/2wBDAQMEBAUEBQkFBQkUDQsNFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQU
    FBQUFBQUFBT/wAARCAAYACADASIAAhEBAxEB/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcICQoL/8QAtRAAAgEDAwIEAwUF
    BAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFDKBkaEII0KxwRVS0fAkM2JyggkKFhcYGRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVW
    V1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKTlJWWl5iZmqKjpKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi
    4+Tl5ufo6erx8vP09fb3+Pn6/8QAHwEAAwEBAQEBAQEBAQAAAAAAAAECAwQFBgcICQoL/8QAtREAAgECBAQDBAcFBAQAAQJ3AAEC
    AxEEBSExBhJBUQdhcRMiMoEIFEKRobHBCSMzUvAVYnLRChYkNOEl8RcYGRomJygpKjU2Nzg5OkNERUZHSElKU1RVVldYWVpjZGVm
    Z2hpanN0dXZ3eHl6goOEhYaHiImKkpOUlZaXmJmaoqOkpaanqKmqsrO0tba3uLm6wsPExcbHyMnK0tPU1dbX2Nna4uPk5ebn6Onq
    8vP09fb3+Pn6/9oADAMBAAIRAxEAPwD89Ph/bf6vj0r1PRPh/wDd/d/pXquifD/7v7v9K9A0T4f/AHf3f6Vjh8Ym7o8jIeLaTnz0
    /dv5nlWifD/7v7v9K/X2v58q/WXRPh/9393+lev46eB31v8AsyMsztb23/Lm+/sv+np+tZbnn+tNqOI/d+z2fxX5v/AbW5fPc5XR
    Ph/9391+lWKKK/l7jWTlHDX/AL//ALaf5ZYrE1cRQpe0d7X/AEPeNE+H33f3X6V1vw/tv9Xx6UUV/QuGk5R1P7e4exNTEUJe0d7W
    /U//2Q==
    """)
  static let displayP3Profile = decode64("""
    AAACSGxjbXMEQAAAbW50clJHQiBYWVogB+oACwAYABYAEQA0YWNzcEFQUEwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAPbWAAEA
    AAAA0y1sY21zAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAALZGVzYwAAAQgAAAA0Y3BydAAA
    ATwAAABMd3RwdAAAAYgAAAAUY2hhZAAAAZwAAAAsclhZWgAAAcgAAAAUYlhZWgAAAdwAAAAUZ1hZWgAAAfAAAAAUclRSQwAAAgQA
    AAAgZ1RSQwAAAgQAAAAgYlRSQwAAAgQAAAAgY2hybQAAAiQAAAAkbWx1YwAAAAAAAAABAAAADGVuVVMAAAAYAAAAHABSAEcAQgAg
    AGIAdQBpAGwAdAAtAGkAbm1sdWMAAAAAAAAAAQAAAAxlblVTAAAAMAAAABwATgBvACAAYwBvAHAAeQByAGkAZwBoAHQALAAgAHUA
    cwBlACAAZgByAGUAZQBsAHlYWVogAAAAAAAA9tYAAQAAAADTLXNmMzIAAAAAAAEMQgAABd7///MlAAAHkwAA/ZD///uh///9ogAA
    A9wAAMBuWFlaIAAAAAAAAIPfAAA9v////7tYWVogAAAAAAAAKDgAABELAADIuVhZWiAAAAAAAABKvwAAsTcAAAq5cGFyYQAAAAAA
    AwAAAAJmZgAA8qcAAA1ZAAAT0AAACltjaHJtAAAAAAADAAAAAK4UAABR7AAAQ9cAALCkAAAmZgAAD1w=
    """)
  static let sRGBProfile = decode64("""
    AAACTGxjbXMEQAAAbW50clJHQiBYWVogB+oACwAYABYAEQA0YWNzcEFQUEwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAPbWAAEA
    AAAA0y1sY21zAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAALZGVzYwAAAQgAAAA2Y3BydAAA
    AUAAAABMd3RwdAAAAYwAAAAUY2hhZAAAAaAAAAAsclhZWgAAAcwAAAAUYlhZWgAAAeAAAAAUZ1hZWgAAAfQAAAAUclRSQwAAAggA
    AAAgZ1RSQwAAAggAAAAgYlRSQwAAAggAAAAgY2hybQAAAigAAAAkbWx1YwAAAAAAAAABAAAADGVuVVMAAAAaAAAAHABzAFIARwBC
    ACAAYgB1AGkAbAB0AC0AaQBuAABtbHVjAAAAAAAAAAEAAAAMZW5VUwAAADAAAAAcAE4AbwAgAGMAbwBwAHkAcgBpAGcAaAB0ACwA
    IAB1AHMAZQAgAGYAcgBlAGUAbAB5WFlaIAAAAAAAAPbWAAEAAAAA0y1zZjMyAAAAAAABDEIAAAXe///zJQAAB5MAAP2Q///7of//
    /aIAAAPcAADAblhZWiAAAAAAAABvoAAAOPUAAAOQWFlaIAAAAAAAACSfAAAPhAAAtsNYWVogAAAAAAAAYpcAALeHAAAY2XBhcmEA
    AAAAAAMAAAACZmYAAPKnAAANWQAAE9AAAApbY2hybQAAAAAAAwAAAACj1wAAVHsAAEzNAACZmgAAJmYAAA9c
    """)
  static let displayP3AlphaPNG = decode64("""
    iVBORw0KGgoAAAANSUhEUgAAACAAAAAYCAYAAACbU/80AAABcmlDQ1BJQ0MgUHJvZmlsZQAAeJx1kEEoRFEUhr8ZIzIjySQLi1kg
    i1FiigXFWJAkBmWwmXnzZkbNG6/33iRrG0tla0PKTiwni7GcpVJsxF4Womyk6zxPjWTu7d7z9d/zn8494J8paIYdmACj6FiJ6Xhk
    NbkWaXoiSBedtBNLabY5ubAwR931fovPjTcDbq36ef+uYEa3NfA1C8c003KEx4Tnth3T5T3hsJZPZYQPhaOWNChcdfW0x/cu5zx+
    cdlaTkyBPyAcyf3i9C/W8pYh3CPcYxRK2k8/7k9CenFlSWKXnG4STBMnQpoSmxRwGJBYrOMZ/PbMsyUOTW6THSzJz5EXZ1TUEja6
    xKzouuwCO+7M/87Szg4PedVDcWh8UOqtF5oO4HNfqY8jpT6PoUH+flWs+XcfYbyilLqsaf2j0B6EarmmzVbgYgRaymbKSn1LDXL8
    2Sy8nkJrEjqu5X3dm9PPO2dhWHyGqTs4P4E+yW/b+ALJG2liJ/BdxgAAAShJREFUeJy9lMFNAzEQRf8nf2QvyYEKKIYCkDimGE6U
    QIqgC06cKSY5kEghHLLSkmi9Y9Y2lka215L/ePa/IQCEEJSKu8+dOpgiTBHqZ+u/pfcRUgfTw2kjAMkQnYGlETAC6uec/e81JiMz
    gbniVRIoEVftBP4qXu0XzBX/Fw94Z009kHPmJLB/uidhvIFxAVEwnvpLmCHw/PY6KfCxvmWEGGHsYIywi71ac+5VUK05Hx44fo9a
    cz5e4WEtrErEMyqwmr4n0wPzOfcaWYYHyjj3Huh4oJxz74HyXPr+uJkUeFmeOR8Yv+R8G8BDWHAfjF8hMFxFwgP1OOfxONlpRzxQ
    l3Nuv70E2nLO3SGnAgWcOxX0RgaGZZxnJNCWcz+BZCue22qvPOCMH+40Ja91AOTrAAAAAElFTkSuQmCC
    """)
}
