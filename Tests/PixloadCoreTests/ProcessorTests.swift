import XCTest
@testable import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

/// Processors (ImageProcessing) against independent references: coverage by 64x64
/// supersampling, blur by a direct Gaussian convolution in doubles; and the coordinator's
/// merging of chains per prefix, proven by counting decodes and processor runs.
final class ProcessorTests: XCTestCase {
  /// A premultiplied RGBA8 image whose pixels `fill` gives (x, y) -> (r, g, b, a).
  func image(_ width: Int, _ height: Int, frames: Int = 1,
             _ fill: (Int, Int, Int) -> (UInt8, UInt8, UInt8, UInt8)) -> Image {
    func buffer(_ frame: Int) -> UnsafeMutablePointer<UInt8> {
      let p = malloc(width * height * 4)!.assumingMemoryBound(to: UInt8.self)
      for y in 0..<height {
        for x in 0..<width {
          let (r, g, b, a) = fill(x, y, frame)
          let i = (y * width + x) * 4
          p[i] = r; p[i + 1] = g; p[i + 2] = b; p[i + 3] = a
        }
      }
      return p
    }
    return Image(width: width, height: height, stride: width * 4, format: .rgba8Premultiplied,
                 originalWidth: width, originalHeight: height, takingPixels: buffer(0),
                 laterFrames: (1..<frames).map { UnsafeMutableRawPointer(buffer($0)) }, frameDurations: Array(repeating: 50, count: frames))
  }

  func apply(_ processor: ImageProcessor, _ image: Image, format: PixelFormat? = nil) throws -> Image {
    let step: ImageProcessing.Step = format.map { .convert($0) } ?? .process(processor)
    return try ImageProcessing.apply(step, to: image, cancel: CancelFlag(), maxPixels: 1 << 30).get()
  }

  func pixel(_ image: Image, _ x: Int, _ y: Int, frame: Int = 0) -> [UInt8] {
    let p = image.framePixels(frame)!.assumingMemoryBound(to: UInt8.self) + y * image.stride + x * 4
    return [p[0], p[1], p[2], p[3]]
  }

  /// The fraction of pixel (x, y) inside the rounded rectangle, by 64x64 point samples.
  func supersampled(_ x: Int, _ y: Int, left: Double, top: Double, right: Double, bottom: Double,
                    radii: [Double]) -> Double {
    var inside = 0
    for sy in 0..<64 {
      for sx in 0..<64 {
        let px = Double(x) + (Double(sx) + 0.5) / 64, py = Double(y) + (Double(sy) + 0.5) / 64
        guard px >= left, px <= right, py >= top, py <= bottom else { continue }
        // In a corner's square and outside its arc: outside the shape.
        func cut(_ cx: Double, _ cy: Double, _ r: Double, _ inSquare: Bool) -> Bool {
          let dx: Double = px - cx, dy: Double = py - cy
          return inSquare && dx * dx + dy * dy > r * r
        }
        let r0 = radii[0], r1 = radii[1], r2 = radii[2], r3 = radii[3]
        if cut(left + r0, top + r0, r0, px < left + r0 && py < top + r0) { continue }
        if cut(right - r1, top + r1, r1, px > right - r1 && py < top + r1) { continue }
        if cut(right - r2, bottom - r2, r2, px > right - r2 && py > bottom - r2) { continue }
        if cut(left + r3, bottom - r3, r3, px < left + r3 && py > bottom - r3) { continue }
        inside += 1
      }
    }
    return Double(inside) / 4096
  }

  func testCircleAlphaIsEachPixelsCoverageAndInsideKeepsItsValues() throws {
    let source = image(41, 30) { x, y, _ in (UInt8(x * 6), UInt8(y * 8), 100, 255) }
    let circle = try apply(.circle(border: nil), source)
    XCTAssertEqual([circle.width, circle.height], [30, 30], "the centred min(w, h) square")
    var worst = 0.0
    for y in 0..<30 {
      for x in 0..<30 {
        let expected = supersampled(x, y, left: 0, top: 0, right: 30, bottom: 30, radii: [15, 15, 15, 15])
        let p = pixel(circle, x, y)
        worst = max(worst, abs(Double(p[3]) / 255 - expected))
        if expected == 1 {
          // Wholly inside: the source's pixel (column x + 5 of the 41-wide image).
          XCTAssertEqual(p, [UInt8((x + 5) * 6), UInt8(y * 8), 100, 255], "pixel \(x),\(y)")
        }
      }
    }
    XCTAssertLessThanOrEqual(worst, 1.0 / 32, "coverage within 1/32")
  }

  func testRoundedCornersFourRadiiMatchSupersampledCoverage() throws {
    let source = image(50, 37) { _, _, _ in (255, 255, 255, 255) }
    let radii = ImageProcessor.Radii(topLeft: 3.3, topRight: 12, bottomRight: 0, bottomLeft: 40)  // 40: clamped to 18.5
    let rounded = try apply(.roundedCorners(radii: radii, border: nil), source)
    var worst = 0.0
    for y in 0..<37 {
      for x in 0..<50 {
        let expected = supersampled(x, y, left: 0, top: 0, right: 50, bottom: 37, radii: [3.3, 12, 0, 18.5])
        worst = max(worst, abs(Double(pixel(rounded, x, y)[3]) / 255 - expected))
      }
    }
    XCTAssertLessThanOrEqual(worst, 1.0 / 32)
    XCTAssertEqual(pixel(rounded, 49, 36), [255, 255, 255, 255], "a radius of 0 leaves its corner square")
  }

  /// Odd sides put a row and a column across all four corners' squares (the arcs' spans
  /// meet and their cuts add up); equal radii share one coverage table, unequal ones not.
  func testOddTinyAndMixedShapesMatchSupersampledCoverage() throws {
    let shapes: [(width: Int, height: Int, processor: ImageProcessor, radii: [Double])] = [
      (31, 31, .circle(border: nil), [15.5, 15.5, 15.5, 15.5]),
      (3, 3, .circle(border: nil), [1.5, 1.5, 1.5, 1.5]),
      (1, 1, .circle(border: nil), [0.5, 0.5, 0.5, 0.5]),
      (2, 5, .roundedCorners(radii: .init(topLeft: 9, topRight: 9, bottomRight: 9, bottomLeft: 9), border: nil),
       [1, 1, 1, 1]),
      (23, 17, .roundedCorners(radii: .init(topLeft: 8.5, topRight: 2.25, bottomRight: 8.5, bottomLeft: 7), border: nil),
       [8.5, 2.25, 8.5, 7]),
    ]
    for shape in shapes {
      let source = image(shape.width, shape.height) { x, y, _ in (UInt8(x * 7 % 256), UInt8(y * 5 % 256), 90, 255) }
      let out = try apply(shape.processor, source)
      var worst = 0.0
      for y in 0..<out.height {
        for x in 0..<out.width {
          let expected = supersampled(x, y, left: 0, top: 0, right: Double(out.width), bottom: Double(out.height),
                                      radii: shape.radii)
          let p = pixel(out, x, y)
          worst = max(worst, abs(Double(p[3]) / 255 - expected))
          if expected == 1 {
            XCTAssertEqual(p, [UInt8(x * 7 % 256), UInt8(y * 5 % 256), 90, 255], "\(shape) pixel \(x),\(y)")
          }
        }
      }
      XCTAssertLessThanOrEqual(worst, 1.0 / 32, "\(shape.width)x\(shape.height) \(shape.radii)")
    }
  }

  func testBorderIsDrawnInsideTheShape() throws {
    let source = image(40, 40) { _, _, _ in (0, 0, 255, 255) }
    let red = ImageProcessor.Color(r: 255, g: 0, b: 0, a: 255)
    let out = try apply(.circle(border: .init(width: 3, color: red)), source)
    XCTAssertEqual(pixel(out, 20, 1), [255, 0, 0, 255], "border ring at the top")
    XCTAssertEqual(pixel(out, 20, 5), [0, 0, 255, 255], "image inside the ring")
    XCTAssertEqual(pixel(out, 0, 0), [0, 0, 0, 0], "outside the disc")
  }

  /// pixload.h, "Shapes": any radius or border width from 0 up is clamped to half the
  /// shorter side, infinity and values far past any image included; NaN and negatives are
  /// refused.
  func testHugeRadiiAndBordersAreClampedAndOnlyNaNOrNegativeAreRefused() throws {
    let source = image(40, 20) { _, _, _ in (0, 0, 255, 255) }
    let red = ImageProcessor.Color(r: 255, g: 0, b: 0, a: 255)
    let halfSide = try apply(.roundedCorners(radii: .init(10), border: nil), source)
    for radius in [2_000_000.0, .infinity] {
      let step = ImageProcessor.roundedCorners(radii: .init(radius), border: .init(width: radius, color: red))
      XCTAssertNil(ImageProcessor.validate([step]), "radius \(radius)")
      let clamped = try apply(.roundedCorners(radii: .init(radius), border: nil), source)
      for (x, y) in [(0, 0), (2, 3), (20, 0), (39, 19), (5, 10)] {
        XCTAssertEqual(pixel(clamped, x, y), pixel(halfSide, x, y), "radius \(radius) at \(x),\(y)")
      }
      let filled = try apply(.circle(border: .init(width: radius, color: red)), source)
      XCTAssertEqual(pixel(filled, 10, 10), [255, 0, 0, 255], "a border of \(radius) fills the disc")
    }
    for bad in [-1.0, .nan, -.infinity] {
      XCTAssertNotNil(ImageProcessor.validate([.roundedCorners(radii: .init(topLeft: 0, topRight: bad, bottomRight: 0,
                                                                             bottomLeft: 0), border: nil)]), "\(bad)")
      XCTAssertNotNil(ImageProcessor.validate([.circle(border: .init(width: bad, color: red))]), "border \(bad)")
    }
  }

  /// The exact Gaussian: a direct separable convolution in doubles, edges extended.
  func referenceBlur(_ source: Image, sigma: Double) -> [Double] {
    let w = source.width, h = source.height
    let pixels = source.pixels.assumingMemoryBound(to: UInt8.self)
    let radius = Int((4 * sigma).rounded(.up))
    var kernel = (-radius...radius).map { exp(-Double($0 * $0) / (2 * sigma * sigma)) }
    let total = kernel.reduce(0, +)
    kernel = kernel.map { $0 / total }
    var rows = [Double](repeating: 0, count: w * h * 4)
    for y in 0..<h {
      for x in 0..<w {
        for c in 0..<4 {
          var acc = 0.0
          for k in -radius...radius {
            let index: Int = (y * w + min(max(x + k, 0), w - 1)) * 4 + c
            acc += kernel[k + radius] * Double(pixels[index])
          }
          rows[(y * w + x) * 4 + c] = acc
        }
      }
    }
    var out = rows
    for y in 0..<h {
      for x in 0..<w {
        for c in 0..<4 {
          var acc = 0.0
          for k in -radius...radius {
            let index: Int = (min(max(y + k, 0), h - 1) * w + x) * 4 + c
            acc += kernel[k + radius] * rows[index]
          }
          out[(y * w + x) * 4 + c] = acc
        }
      }
    }
    return out
  }

  func testBlurMatchesAnExactGaussianAwayFromTheEdges() throws {
    var seed: UInt64 = 12345
    func random() -> UInt8 {
      seed = seed &* 6364136223846793005 &+ 1442695040888963407
      return UInt8(truncatingIfNeeded: seed >> 56)
    }
    // Blocks of random colour (a photo's edges and flats), opaque.
    var blocks = [[UInt8]]()
    for _ in 0..<(16 * 12) { blocks.append([random(), random(), random()]) }
    let source = image(96, 72) { x, y, _ in
      let b = blocks[(y / 6) * 16 + x / 6]
      return (b[0], b[1], b[2], 255)
    }
    for sigma in [0.8, 1.5, 2.0, 4.0, 7.5] {
      let blurred = try apply(.blur(sigma: sigma), source)
      let reference = referenceBlur(source, sigma: sigma)
      let margin = Int((3 * sigma).rounded(.up))
      var sum = 0.0, count = 0, worst = 0.0
      for y in margin..<(72 - margin) {
        for x in margin..<(96 - margin) {
          for c in 0..<3 {
            let index: Int = (y * 96 + x) * 4 + c
            let d: Double = abs(Double(blurred.pixels.load(fromByteOffset: index, as: UInt8.self)) - reference[index])
            sum += d
            count += 1
            worst = max(worst, d)
          }
        }
      }
      print("blur sigma \(sigma): mean abs diff \(sum / Double(count)), max \(worst) (vs direct Gaussian)")
      XCTAssertLessThanOrEqual(sum / Double(count), 1.5, "sigma \(sigma)")
      XCTAssertLessThanOrEqual(worst, 6, "sigma \(sigma)")
    }
    let same = try apply(.blur(sigma: 0), source)
    XCTAssertEqual(memcmp(same.pixels, source.pixels, source.byteCount), 0, "sigma 0 is the identity")
  }

  func testGeometryAndColourSteps() throws {
    // 3x2: pixel value = index.
    let source = image(3, 2) { x, y, _ in (UInt8(y * 3 + x), 0, 0, 255) }
    let turned = try apply(.rotate(quarterTurns: 1), source)
    XCTAssertEqual([turned.width, turned.height], [2, 3])
    // Clockwise: the bottom-left pixel (index 3) goes to the top-left.
    XCTAssertEqual((0..<2).map { pixel(turned, $0, 0)[0] }, [3, 0])
    XCTAssertEqual(pixel(try apply(.rotate(quarterTurns: 2), source), 0, 0)[0], 5)
    XCTAssertEqual(pixel(try apply(.rotate(quarterTurns: 3), source), 0, 0)[0], 2)
    XCTAssertEqual(pixel(try apply(.flip(vertical: false), source), 0, 0)[0], 2)
    XCTAssertEqual(pixel(try apply(.flip(vertical: true), source), 0, 0)[0], 3)
    let cropped = try apply(.crop(x: 1, y: 1, width: 2, height: 1), source)
    XCTAssertEqual([cropped.width, cropped.height, Int(pixel(cropped, 0, 0)[0])], [2, 1, 4])
    XCTAssertThrowsError(try apply(.crop(x: 2, y: 0, width: 2, height: 1), source)) { error in
      XCTAssertEqual((error as? LoadError)?.status, .invalidArgument)
    }
    // Grayscale: GRAY8's weights (libjpeg's BT.601 integers); tint keeps alpha.
    let colour = image(1, 1) { _, _, _ in (200, 100, 50, 255) }
    let weighted: Int = 19595 * 200 + 38470 * 100 + 7471 * 50 + 32768
    let y = UInt8(weighted >> 16)
    XCTAssertEqual(pixel(try apply(.grayscale, colour), 0, 0), [y, y, y, 255])
    let half = image(1, 1) { _, _, _ in (50, 50, 50, 128) }
    let tinted = try apply(.tint(.init(r: 255, g: 0, b: 0, a: 255)), half)
    XCTAssertEqual(pixel(tinted, 0, 0), [128, 0, 0, 128], "source-atop: the colour, the pixel's alpha")
    // The final conversion: premultiplied to straight.
    let straight = try apply(.grayscale, half, format: .rgba8)
    XCTAssertEqual(pixel(straight, 0, 0), [100, 100, 100, 128])
  }

  func testAnimatedImagesAreProcessedFrameByFrame() throws {
    let animated = image(20, 10, frames: 3) { _, _, frame in (UInt8(frame * 80), 0, 0, 255) }
    let out = try apply(.circle(border: nil), animated)
    XCTAssertEqual([out.frameCount, out.width, out.height], [3, 10, 10])
    for frame in 0..<3 {
      XCTAssertEqual(pixel(out, 5, 5, frame: frame), [UInt8(frame * 80), 0, 0, 255])
      XCTAssertEqual(pixel(out, 0, 0, frame: frame)[3], 0)
    }
    XCTAssertEqual(out.frameDurations, [50, 50, 50])
  }

  func testAnOwnedImageGivesTheSameResultsInPlace() throws {
    // Every final format and a step of each kind, on an image of distinct channels with
    // transparent, translucent and opaque pixels: taking the buffers changes nothing.
    func source() -> Image {
      image(7, 5, frames: 2) { x, y, f in
        let a = [0, 90, 255][(x + y + f) % 3]
        return (UInt8(x * 30 % (a + 1)), UInt8(y * 40 % (a + 1)), UInt8((f * 50 + 3) % (a + 1)), UInt8(a))
      }
    }
    let steps: [ImageProcessing.Step] = PixelFormat.allCases.map { .convert($0) }
      + [.process(.circle(border: nil)), .process(.roundedCorners(radii: .init(2), border: nil)),
         .process(.blur(sigma: 1)), .process(.flip(vertical: true)), .process(.grayscale),
         .process(.rotate(quarterTurns: 1)), .process(.crop(x: 1, y: 1, width: 3, height: 2))]
    for step in steps {
      let copied = try ImageProcessing.apply(step, to: source(), cancel: CancelFlag(), maxPixels: 1 << 30).get()
      let taken = try ImageProcessing.apply(step, to: source(), owned: true, cancel: CancelFlag(), maxPixels: 1 << 30).get()
      XCTAssertEqual([taken.width, taken.height, taken.stride, taken.frameCount],
                     [copied.width, copied.height, copied.stride, copied.frameCount], "\(step)")
      for frame in 0..<2 {
        XCTAssertEqual(memcmp(taken.framePixels(frame)!, copied.framePixels(frame)!, copied.byteCount), 0, "\(step)")
      }
    }
    // A failing step frees what it took (ASan's leak check) and reports the error.
    let outside = ImageProcessing.apply(.process(.crop(x: 6, y: 0, width: 3, height: 1)), to: source(), owned: true,
                                        cancel: CancelFlag(), maxPixels: 1 << 30)
    guard case .failure(let error) = outside else { return XCTFail("a crop outside the image succeeded") }
    XCTAssertEqual(error.status, .invalidArgument)
  }

  func testTheChainIsPartOfTheVariantAndItsDiskDescriptor() {
    var request = ImageRequest(url: "http://h/a.jpg", targetWidth: 96, targetHeight: 96)
    let plain = request.variant
    request.processors = [.roundedCorners(radii: .init(12), border: nil)]
    let round12 = request.variant
    request.processors = [.roundedCorners(radii: .init(12.5), border: nil)]
    XCTAssertNotEqual(plain, round12)
    XCTAssertNotEqual(round12, request.variant)
    let descriptor = CacheKey.variantDescriptor(round12, rendition: 1)
    XCTAssertTrue(descriptor.hasSuffix(" process=[round(12.0:12.0:12.0:12.0)]"), descriptor)
    // A custom id cannot forge another step or a line of the key.
    let evil = CustomProcessor(id: "x:1);blur(2\n", version: 3) { _ in nil }
    XCTAssertEqual(ImageProcessor.custom(evil).canonical, "custom(x%3A1%29%3Bblur%282%0A:3)")
    let v2 = CustomProcessor(id: "x:1);blur(2\n", version: 4) { _ in nil }
    XCTAssertNotEqual(ImageProcessor.custom(evil), ImageProcessor.custom(v2), "a new version is a new entry")
  }

  func testTheChainsIdentityIsItsCanonicalFormInTheMemoryAndTheDiskKey() {
    var request = ImageRequest(url: "http://h/a.jpg", targetWidth: 96, targetHeight: 96)
    request.processors = [.blur(sigma: -0.0), .custom(CustomProcessor(id: "p", version: 1) { _ in nil })]
    let a = request.variant
    // Another registration of the same id and version, a blur of +0: the same chain.
    request.processors = [.blur(sigma: 0), .custom(CustomProcessor(id: "p", version: 1) { _ in nil })]
    let b = request.variant
    XCTAssertEqual(a, b)
    XCTAssertEqual(a.hashValue, b.hashValue)
    XCTAssertEqual(a.chain.canonical, ImageProcessor.canonical(b.processors))
    XCTAssertEqual(VariantKey(a, rendition: 2), VariantKey(b, rendition: 2))
    XCTAssertEqual(VariantKey(a, rendition: 2).text, CacheKey.variantDescriptor(a, rendition: 2) + "\nhttp://h/a.jpg")
    request.processors = [.blur(sigma: 0), .custom(CustomProcessor(id: "p", version: 2) { _ in nil })]
    XCTAssertNotEqual(a, request.variant, "a new version is another chain")
    XCTAssertNotEqual(VariantKey(a, rendition: 2), VariantKey(request.variant, rendition: 2))
  }

  func testInvalidParametersAreRejectedBeforeAnyWorkNamingTheProcessor() throws {
    let loader = try ImageLoader(dataLoader: ManualDataLoader(), decoder: FakeDecoder())
    defer { loader.close() }
    let queue = try CompletionQueue()
    defer { queue.close() }
    for (chain, words) in [([ImageProcessor.blur(sigma: 1000)], "processor 0 (blur)"),
                           ([.grayscale, .roundedCorners(radii: .init(-1), border: nil)], "processor 1 (round)"),
                           ([.crop(x: 0, y: 0, width: 0, height: 5)], "processor 0 (crop)"),
                           (Array(repeating: .grayscale, count: 17), "exceeds the limit of 16")] {
      var request = ImageRequest(url: "http://h/a.jpg")
      request.processors = chain
      XCTAssertThrowsError(try loader.load(request, queue: queue) { _, _ in }) { error in
        XCTAssertEqual((error as? LoadError)?.status, .invalidArgument)
        XCTAssertTrue((error as? LoadError)?.message.contains(words) == true, "\(error)")
      }
    }
  }
}

/// The coordinator with processors: merging per chain prefix, failures, cancellation.
final class ProcessorLoaderTests: XCTestCase {
  var network: ManualDataLoader!
  var decoder: FakeDecoder!
  var loader: ImageLoader!
  var queue: CompletionQueue!
  var recorder: Recorder!

  override func setUpWithError() throws {
    network = ManualDataLoader()
    decoder = FakeDecoder()
    var configuration = LoaderConfiguration()
    configuration.decodeThreads = 2
    loader = try ImageLoader(configuration: configuration, dataLoader: network, decoder: decoder)
    queue = try CompletionQueue()
    recorder = Recorder()
  }

  override func tearDown() {
    loader.close()
    queue.close()
  }

  func load(_ chain: [ImageProcessor], format: PixelFormat = .rgba8) throws -> UInt64 {
    var request = ImageRequest(url: "http://h/a.jpg", targetWidth: 40, targetHeight: 30, format: format)
    request.processors = chain
    return try loader.load(request, queue: queue, handler: recorder.handler)
  }

  let round12 = ImageProcessor.roundedCorners(radii: .init(12), border: nil)

  func testChainsSharingAPrefixDecodeOnceAndRunTheSharedStepOnce() throws {
    let rounded = try load([round12])
    let roundedBlurred = try load([round12, .blur(sigma: 4)])
    let plain = try load([])
    let premultiplied = try load([round12, .blur(sigma: 4)], format: .rgba8Premultiplied)
    XCTAssertEqual(network.started.count, 1)
    network.finish(0, bytes: [UInt8](repeating: 1, count: 255))
    XCTAssertTrue(queue.drain(until: recorder, reaches: 4))
    for token in [rounded, roundedBlurred, plain, premultiplied] { XCTAssertEqual(recorder.status(token), .ok) }
    // The plain request's RGBA8 decode, and one premultiplied decode for every chain.
    XCTAssertEqual(decoder.count, 2)
    XCTAssertEqual(loader.statistics.decodes, 2)
    XCTAssertEqual(loader.statistics.processorRuns, 2, "round once, blur once")
    if case .success(let image, let source, _)? = recorder.outcome(rounded) {
      XCTAssertEqual([image.width, image.height], [40, 30])
      XCTAssertEqual(image.format, .rgba8)
      XCTAssertEqual(image.pixels.load(fromByteOffset: 3, as: UInt8.self), 0, "the rounded corner is transparent")
      XCTAssertEqual(source, .network)
    } else { XCTFail("no image") }
    // Only what was asked for is in the memory cache: 4 results, 3 variants (no intermediates).
    XCTAssertEqual(loader.memoryCache.count, 4)
    var again = ImageRequest(url: "http://h/a.jpg", targetWidth: 40, targetHeight: 30)
    again.processors = [round12]
    XCTAssertNotNil(loader.cachedImage(for: again), "found by the same request, chain included")
    again.processors = [round12, .grayscale]
    XCTAssertNil(loader.cachedImage(for: again))
  }

  func testAChainNobodySharesWorksInPlaceAndASharedImageIsNeverWritten() throws {
    let lock = Lock()
    var seen: [UnsafeMutableRawPointer] = []
    let record = CustomProcessor(id: "record", version: 1) { frame in
      lock.withLock { seen.append(UnsafeMutableRawPointer(frame.pixels)) }
      return nil
    }
    // The decoded image goes to a request of its own too: the chain works on a copy, and
    // the plain result keeps its opaque corner.
    var plain = ImageRequest(url: "http://h/shared.jpg", targetWidth: 40, targetHeight: 30, format: .rgba8Premultiplied)
    let shared = try loader.load(plain, queue: queue, handler: recorder.handler)
    plain.processors = [.custom(record), round12]
    let rounded = try loader.load(plain, queue: queue, handler: recorder.handler)
    network.finish(0, bytes: [UInt8](repeating: 1, count: 255))
    XCTAssertTrue(queue.drain(until: recorder, reaches: 2))
    XCTAssertEqual(decoder.count, 1)
    XCTAssertNotEqual(lock.withLock { seen }, [decoder.buffers[0]], "worked on a copy")
    guard case .success(let image, _, _)? = recorder.outcome(shared),
          case .success(let processed, _, _)? = recorder.outcome(rounded) else { return XCTFail("no images") }
    XCTAssertEqual(image.pixels.load(fromByteOffset: 3, as: UInt8.self), 255, "the shared image was not rounded")
    XCTAssertEqual(processed.pixels.load(fromByteOffset: 3, as: UInt8.self), 0)
    // Nobody else wants the decoded image: the processor gets its very buffer, and the
    // rounding and the final conversion follow on it.
    var alone = ImageRequest(url: "http://h/alone.jpg", targetWidth: 40, targetHeight: 30, format: .rgba8)
    alone.processors = [.custom(record), round12]
    let token = try loader.load(alone, queue: queue, handler: recorder.handler)
    network.finish(1, bytes: [UInt8](repeating: 1, count: 255))
    XCTAssertTrue(queue.drain(until: recorder, reaches: 3))
    XCTAssertEqual(lock.withLock { seen.last }, decoder.buffers[1], "no copy")
    guard case .success(let result, _, _)? = recorder.outcome(token) else { return XCTFail("no image") }
    XCTAssertEqual(result.pixels, decoder.buffers[1], "rounded and converted in place")
    XCTAssertEqual([result.pixels.load(fromByteOffset: 3, as: UInt8.self),
                    result.pixels.load(fromByteOffset: (15 * 40 + 20) * 4 + 3, as: UInt8.self)], [0, 255])
    XCTAssertEqual(loader.statistics.processorRuns, 4)
  }

  func testATablesStartNowAndPostponeReachAProcessedRequestsTransfer() throws {
    var request = ImageRequest(url: "http://h/delayed.jpg", targetWidth: 40, targetHeight: 30)
    request.processors = [round12, .grayscale]
    request.startDelayMilliseconds = 500
    let token = try loader.load(request, queue: queue, handler: recorder.handler)
    let transfer = try XCTUnwrap(network.started.first?.id)
    loader.postpone(token, milliseconds: 100)
    XCTAssertEqual(network.postponed[transfer], 1)
    loader.startNow(token)
    XCTAssertEqual(network.startedNow, [transfer])
  }

  func testALaterChainStartsFromACachedPrefix() throws {
    let first = try load([round12], format: .rgba8Premultiplied)
    network.finish(0, bytes: [UInt8](repeating: 1, count: 255))
    XCTAssertTrue(queue.drain(until: recorder, reaches: 1))
    XCTAssertEqual(recorder.status(first), .ok)
    let second = try load([round12, .grayscale])
    XCTAssertTrue(queue.drain(until: recorder, reaches: 2))
    XCTAssertEqual(recorder.status(second), .ok)
    XCTAssertEqual(network.started.count, 1, "no second download")
    XCTAssertEqual(loader.statistics.decodes, 1)
    XCTAssertEqual(loader.statistics.processorRuns, 2, "round, then gray on the cached rounded image")
  }

  func testAFailingCustomProcessorFailsOnlyTheRequestsBelowIt() throws {
    let failing = CustomProcessor(id: "fails", version: 1) { _ in LoadError(.unsupportedImage, "no faces found") }
    let a = try load([.custom(failing)])
    let b = try load([.custom(failing), .grayscale])
    let c = try load([.grayscale])
    network.finish(0, bytes: [UInt8](repeating: 1, count: 255))
    XCTAssertTrue(queue.drain(until: recorder, reaches: 3))
    for token in [a, b] {
      guard case .failure(let error)? = recorder.outcome(token) else { return XCTFail("expected a failure") }
      XCTAssertEqual(error.status, .unsupportedImage)
      XCTAssertEqual(error.message, "no faces found")
    }
    XCTAssertEqual(recorder.status(c), .ok)
    XCTAssertEqual(recorder.totalCalls, 3, "one callback each")
  }

  func testCancellingRaisesTheFlagARunningProcessorPolls() throws {
    let entered = DispatchSemaphore(value: 0)
    let sawFlag = DispatchSemaphore(value: 0)
    let slow = CustomProcessor(id: "slow", version: 1) { frame in
      entered.signal()
      while !frame.cancel.isRaised { usleep(200) }  // an atomic read, as C code polls it
      sawFlag.signal()
      return .cancelled
    }
    let token = try load([.custom(slow)])
    network.finish(0, bytes: [UInt8](repeating: 1, count: 255))
    XCTAssertEqual(entered.wait(timeout: .now() + 5), .success)
    XCTAssertTrue(loader.cancel(token))
    XCTAssertEqual(sawFlag.wait(timeout: .now() + 5), .success, "the processor saw its flag")
    XCTAssertTrue(queue.drain(until: recorder, reaches: 1))
    XCTAssertEqual(recorder.status(token), .cancelled)
  }

  func testUnregisteringRetiresAfterTheRunningCallAndFailsWhatHasNotRunYet() throws {
    var retired = 0
    let entered = DispatchSemaphore(value: 0)
    let slow = CustomProcessor(id: "slow", version: 1, process: { frame in
      entered.signal()
      while !frame.cancel.isRaised { usleep(200) }
      return .cancelled
    }, onRetired: { retired += 1 })
    loader.customProcessors.add(slow)
    let running = try load([.custom(slow)])
    network.finish(0, bytes: [UInt8](repeating: 1, count: 255))
    XCTAssertEqual(entered.wait(timeout: .now() + 5), .success)
    XCTAssertTrue(loader.customProcessors.remove("slow"), "raises the running call's flag")
    XCTAssertTrue(queue.drain(until: recorder, reaches: 1))
    XCTAssertEqual(recorder.status(running), .cancelled)
    XCTAssertEqual(retired, 1, "retired once the call returned")
    XCTAssertFalse(loader.customProcessors.remove("slow"))
    // A request holding the retired processor fails without calling it.
    let late = try load([.custom(slow), .grayscale])
    network.finish(1, bytes: [UInt8](repeating: 1, count: 255))
    XCTAssertTrue(queue.drain(until: recorder, reaches: 2))
    XCTAssertEqual(recorder.status(late), .cancelled)
    XCTAssertEqual(retired, 1)
  }

  func testClosingTheLoaderRetiresItsProcessors() throws {
    var retired = 0
    loader.customProcessors.add(CustomProcessor(id: "a", version: 1, process: { _ in nil }, onRetired: { retired += 1 }))
    loader.customProcessors.add(CustomProcessor(id: "a", version: 2, process: { _ in nil }, onRetired: { retired += 10 }))
    XCTAssertEqual(retired, 1, "replacing retires the old version")
    loader.close()
    XCTAssertEqual(retired, 11)
    // Refused by the closed loader: abandoned, its onRetired never runs (the C API's
    // pxl_loader_add_processor leaves user_data to the host on failure, as 0.5.0 did).
    XCTAssertFalse(loader.customProcessors.add(CustomProcessor(id: "b", version: 1, process: { _ in nil },
                                                               onRetired: { retired += 100 })))
    XCTAssertEqual(retired, 11)
  }
}
