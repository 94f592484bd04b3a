import CCodecs
#if canImport(Glibc)
import Glibc
#endif

/// Animated images (`ImageVariant.animates`): every frame a format's `decodeFrames` gives
/// (composited on the canvas, straight RGBA) is brought to the variant's size, format and
/// orientation the way a still is: converted to the decode layout, area-resampled over the
/// same crop (averaged premultiplied when the source has alpha), colour-managed by the
/// same ColorStep, oriented last. So frame 0 of an animated result has the same pixels as
/// the still result of the same request.
extension ImageDecoder {
  /// Stamps the source's frame count, and whether its data ended early, on a decoded
  /// image (before anyone else sees it).
  static func counted(_ result: Result<Image, LoadError>, _ info: pxl_codec_info,
                      incomplete: Bool = false) -> Result<Image, LoadError> {
    if case .success(let image) = result {
      image.sourceFrameCount = Int(max(1, info.frame_count))
      image.sourceLoopCount = Int(max(0, info.loop_count))
      image.isIncomplete = incomplete
    }
    return result
  }

  /// The animation for the plan, or nil to deliver the first frame as a still: the format
  /// has no frames entry, or the frames would take more than `Animation.maxBytes`.
  static func decodeAnimation(_ bytes: UnsafeBufferPointer<UInt8>, codec: NativeCodec, info: pxl_codec_info,
                              plan: SizePlan, color: ColorStep, format: PixelFormat, orientation: Orientation,
                              maxPixels: UInt64) -> Result<Image, LoadError>? {
    guard let decodeFrames = codec.decodeFrames else { return nil }
    let frameBytes = plan.outputWidth * plan.outputHeight * format.bytesPerPixel
    // Refused before any frame is built when the count read_info gives is over the bound;
    // the collector stops too, should the file hold more frames than it said.
    if Int(info.frame_count) > Animation.maxBytes / max(1, frameBytes) { return nil }
    let collector = FrameCollector(plan: plan, color: color, format: format, orientation: orientation,
                                   canvasWidth: Int(info.width), canvasHeight: Int(info.height),
                                   sourceHasAlpha: info.has_alpha != 0, frameBytes: frameBytes)
    var output = pxl_codec_output()
    let status = withExtendedLifetime(collector) {
      decodeFrames(bytes.baseAddress!, bytes.count, maxPixels, FrameCollector.frameFunction,
                   Unmanaged.passUnretained(collector).toOpaque(), &output)
    }
    if status != PXL_CODEC_OK {
      let text = withUnsafeBytes(of: &output.message) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
      return .failure(error(status, codec: codec, message: text))
    }
    let result = collector.animation(loopCount: Int(info.loop_count), sourceFrameCount: Int(info.frame_count),
                                     noFrame: error(PXL_CODEC_CORRUPT, codec: codec, message: "no frame"))
    if case .success(let image)? = result { image.isIncomplete = output.incomplete != 0 }
    return result
  }
}

/// Receives the composited frames of one decode and renders each for the plan (also a
/// registered codec's still, which arrives as a canvas too).
final class FrameCollector {
  let plan: SizePlan
  /// The plan's crop in the canvas's pixels (a codec may draw at another size).
  let crop: PixelRect
  let color: ColorStep
  let format: PixelFormat
  let orientation: Orientation
  let layout: pxl_codec_layout
  /// Averaging in premultiplied space, as decodeResampled does for a still with alpha.
  let premultipliedAveraging: Bool
  let frameBytes: Int
  let canvasWidth: Int, canvasHeight: Int
  var frames: [UnsafeMutableRawPointer] = []
  var durations: [Int] = []
  var bytes = 0
  var overBound = false
  var failure: LoadError?
  /// The colour step's warning for the first frame (a profile that could not be applied).
  var warning: String?
  private var row: [UInt8] = []

  init(plan: SizePlan, color: ColorStep, format: PixelFormat, orientation: Orientation, canvasWidth: Int,
       canvasHeight: Int, sourceHasAlpha: Bool, frameBytes: Int, crop: PixelRect? = nil) {
    self.crop = crop ?? plan.storedCrop
    self.color = color
    self.canvasWidth = canvasWidth
    self.canvasHeight = canvasHeight
    self.plan = plan
    self.format = format
    self.orientation = orientation
    self.layout = color.decodeLayout
    self.premultipliedAveraging = sourceHasAlpha && color.decodeChannels == 4
    self.frameBytes = frameBytes
  }

  deinit { frames.forEach { PixelMemory.release($0) } }

  /// The frames collected as one animated image (taking them); nil when over the bound
  /// (deliver the first frame as a still instead).
  func animation(loopCount: Int, sourceFrameCount: Int, noFrame: LoadError) -> Result<Image, LoadError>? {
    if overBound { return nil }
    if let failure { return .failure(failure) }
    guard !frames.isEmpty else { return .failure(noFrame) }
    let pixels = frames.removeFirst()
    let image = Image(width: plan.outputWidth, height: plan.outputHeight,
                      stride: plan.outputWidth * format.bytesPerPixel, format: format,
                      originalWidth: plan.displayWidth, originalHeight: plan.displayHeight, takingPixels: pixels,
                      warning: warning, laterFrames: frames, frameDurations: durations, loopCount: loopCount)
    frames = []
    image.sourceFrameCount = sourceFrameCount
    return .success(image)
  }

  static let frameFunction: pxl_codec_frame_fn = { user, _, rgba, stride, duration in
    let collector = Unmanaged<FrameCollector>.fromOpaque(user!).takeUnretainedValue()
    return collector.add(rgba!, stride: Int(stride), width: collector.canvasWidth, height: collector.canvasHeight,
                         duration: Int(duration)) ? 0 : 1
  }

  /// Renders one canvas; false stops the decode (over the bound, or out of memory).
  func add(_ rgba: UnsafePointer<UInt8>, stride: Int, width: Int, height: Int, duration: Int) -> Bool {
    if bytes + frameBytes > Animation.maxBytes {
      overBound = true
      return false
    }
    guard let pixels = render(rgba, stride: stride, width: width, height: height) else {
      failure = LoadError(.noMemory, "out of memory rendering frame \(frames.count)")
      return false
    }
    frames.append(UnsafeMutableRawPointer(pixels))
    durations.append(duration)
    bytes += frameBytes
    return true
  }

  /// One canvas row in the layout (the conversions the shims make for a still).
  private func convert(_ source: UnsafePointer<UInt8>, width: Int, into destination: UnsafeMutablePointer<UInt8>) {
    switch layout {
    case PXL_CODEC_BGRA:
      for x in 0..<width {
        destination[4 * x] = source[4 * x + 2]; destination[4 * x + 1] = source[4 * x + 1]
        destination[4 * x + 2] = source[4 * x]; destination[4 * x + 3] = source[4 * x + 3]
      }
    case PXL_CODEC_RGB:
      for x in 0..<width {
        destination[3 * x] = source[4 * x]; destination[3 * x + 1] = source[4 * x + 1]
        destination[3 * x + 2] = source[4 * x + 2]
      }
    case PXL_CODEC_GRAY:
      for x in 0..<width {
        let y = (19595 * UInt32(source[4 * x]) + 38470 * UInt32(source[4 * x + 1]) + 7471 * UInt32(source[4 * x + 2])
                 + 32768) >> 16
        destination[x] = UInt8(y)
      }
    default:
      destination.update(from: source, count: width * 4)
    }
  }

  /// As ImageDecoder.decode does a still: decoded in the colour step's layout (RGB for a
  /// GRAY result of an RGB-tagged file), converted, then premultiplied; a thumbnail
  /// resampled first and converted on its own pixels.
  func render(_ rgba: UnsafePointer<UInt8>, stride: Int, width: Int, height: Int) -> UnsafeMutablePointer<UInt8>? {
    let channels = color.decodeChannels
    if isWhole(width: width, height: height) {
      guard let whole = malloc(max(1, width * height * channels))?.assumingMemoryBound(to: UInt8.self) else {
        return nil
      }
      for y in 0..<height { convert(rgba + y * stride, width: width, into: whole + y * width * channels) }
      return finish(whole: whole, width: width, height: height)
    }
    let outWidth = plan.storedOutputWidth, outHeight = plan.storedOutputHeight
    guard let resampler = AreaResampler(sourceWidth: width, sourceHeight: height, channels: channels,
                                        crop: crop, outputWidth: outWidth, outputHeight: outHeight,
                                        premultiply: premultipliedAveraging) else { return nil }
    if row.count < width * channels { row = [UInt8](repeating: 0, count: width * channels) }
    row.withUnsafeMutableBufferPointer { buffer in
      for y in 0..<height {
        convert(rgba + y * stride, width: width, into: buffer.baseAddress!)
        resampler.addRow(y, buffer.baseAddress!)
      }
    }
    guard let small = resampler.finish() else { return nil }
    return render(resampled: small)
  }

  /// What follows the resampler in `render`, for its output (taken: outWidth x outHeight in
  /// the layout, premultiplied when premultipliedAveraging), made elsewhere: an isolated
  /// codec's worker resamples with `resampling`'s parameters (IsolatedCodec.decodeResampled).
  func render(resampled small: UnsafeMutablePointer<UInt8>) -> UnsafeMutablePointer<UInt8>? {
    let outWidth = plan.storedOutputWidth, outHeight = plan.storedOutputHeight
    if premultipliedAveraging && !format.isPremultiplied { PixelOps.unpremultiply(small, count: outWidth * outHeight) }
    let (pixels, frameWarning) = color.apply(small, width: outWidth, height: outHeight,
                                             premultiplied: premultipliedAveraging && format.isPremultiplied)
    return oriented(pixels, frameWarning: frameWarning)
  }

  /// The resampler `render` would put a width x height canvas through, or nil when it
  /// delivers the canvas whole.
  func resampling(width: Int, height: Int) -> IsolatedCodec.Resample? {
    guard !isWhole(width: width, height: height) else { return nil }
    return IsolatedCodec.Resample(outWidth: plan.storedOutputWidth, outHeight: plan.storedOutputHeight, layout: layout,
                                  premultiply: premultipliedAveraging, crop: crop)
  }

  /// As `render`, for a tightly packed RGBA canvas the caller hands over (a codec's still):
  /// when the image is delivered whole and its layout is the canvas's, the canvas itself
  /// becomes the image's pixels instead of being copied (a 12 MP HEIC at full size: 48 MB
  /// neither allocated nor copied again). Takes the canvas either way.
  func render(taking canvas: UnsafeMutablePointer<UInt8>, width: Int, height: Int) -> UnsafeMutablePointer<UInt8>? {
    guard layout == PXL_CODEC_RGBA, isWhole(width: width, height: height) else {
      defer { PixelMemory.release(canvas) }
      return render(canvas, stride: width * 4, width: width, height: height)
    }
    return finish(whole: canvas, width: width, height: height)
  }

  /// The image is delivered at the canvas's size, uncropped: no resampling.
  private func isWhole(width: Int, height: Int) -> Bool {
    plan.storedOutputWidth == width && plan.storedOutputHeight == height && crop.isWhole(width: width, height: height)
  }

  /// The whole image in the decode layout, tightly packed (taken): converted, premultiplied,
  /// oriented.
  private func finish(whole: UnsafeMutablePointer<UInt8>, width: Int, height: Int) -> UnsafeMutablePointer<UInt8>? {
    let premultiplies = format.bytesPerPixel == 4 && format.isPremultiplied
    var whole = whole
    // Steps that write every pixel (the colour conversion; premultiplying pixels with alpha)
    // work on a buffer of their own, not on an isolated codec's mapped canvas (PixelMemory).
    if color.conversion != nil || (premultiplies && premultipliedAveraging) {
      guard let owned = PixelMemory.owned(whole, count: width * height * color.decodeChannels) else {
        PixelMemory.release(whole)
        return nil
      }
      whole = owned
    }
    let (pixels, frameWarning) = color.apply(whole, width: width, height: height, premultiplied: false)
    if premultiplies { PixelOps.premultiply(pixels, count: width * height) }
    return oriented(pixels, frameWarning: frameWarning)
  }

  /// `pixels` (taken) turned to the orientation; the first frame's colour warning kept.
  private func oriented(_ pixels: UnsafeMutablePointer<UInt8>, frameWarning: String?) -> UnsafeMutablePointer<UInt8>? {
    if frames.isEmpty { warning = frameWarning }
    guard orientation != .up else { return pixels }
    defer { PixelMemory.release(pixels) }
    return orientation.apply(pixels, width: plan.storedOutputWidth, height: plan.storedOutputHeight,
                             channels: format.bytesPerPixel)
  }
}
