import CProcessing
#if canImport(Glibc)
import Glibc
#endif

/// Runs processor chains. A processed variant is made from its parent variant by one step
/// (`parent(of:)`): a variant with a chain in a format other than premultiplied RGBA8 is
/// the conversion of the same chain in premultiplied RGBA8; that one is its last processor
/// applied to the chain one step shorter; the empty chain in premultiplied RGBA8 is a
/// decode. So `[round 12]` and `[round 12, blur 4]` of one source share the decode and the
/// rounding, whatever formats they are delivered in.
public enum ImageProcessing {
  /// What turns a parent variant's image into its child's.
  public enum Step: Sendable {
    case process(ImageProcessor)
    case convert(PixelFormat)
  }

  /// The variant `variant` is made from and how, or nil when it is decoded from bytes.
  public static func parent(of variant: ImageVariant) -> (variant: ImageVariant, step: Step)? {
    guard let last = variant.processors.last else { return nil }
    var parent = variant
    if variant.format != .rgba8Premultiplied {
      parent.format = .rgba8Premultiplied
      return (parent, .convert(variant.format))
    }
    parent.processors.removeLast()
    return (parent, .process(last))
  }

  /// The variants `variant` is made from, its parent first, down to the decoded one.
  public static func ancestors(of variant: ImageVariant) -> [ImageVariant] {
    var ancestors: [ImageVariant] = []
    var current = variant
    while let (parent, _) = parent(of: current) {
      ancestors.append(parent)
      current = parent
    }
    return ancestors
  }

  /// Every variant down to the decoded one, with their steps, decode first (for previews).
  public static func lineage(of variant: ImageVariant) -> (root: ImageVariant, steps: [Step]) {
    var steps: [Step] = []
    var current = variant
    while let (parent, step) = parent(of: current) {
      steps.append(step)
      current = parent
    }
    return (current, steps.reversed())
  }

  /// Applies one step to every frame of `image` (premultiplied RGBA8), into a new image.
  /// `image` is never changed (the memory cache and other requests may hold it) unless
  /// `owned`: the caller guarantees nothing else reads it (an intermediate image no request,
  /// cache or other step shares); then its buffers are taken and the step works in place
  /// where it can, and `image` must not be read afterwards.
  public static func apply(_ step: Step, to image: Image, owned: Bool = false, cancel: CancelFlag,
                           maxPixels: UInt64) -> Result<Image, LoadError> {
    guard image.format == .rgba8Premultiplied else {
      return .failure(LoadError(.invalidArgument, "processing needs premultiplied RGBA8"))
    }
    // Buffers of frames not yet handed to `applyFrame` (which owns what it is given).
    var taken: [UnsafeMutableRawPointer?] = owned && image.stride == image.width * 4
      ? image.surrenderPixels() : []
    var frames: [UnsafeMutablePointer<UInt8>] = []
    func fail(_ error: LoadError) -> Result<Image, LoadError> {
      frames.forEach { free($0) }
      taken.forEach { free($0) }
      return .failure(error)
    }
    var size: (width: Int, height: Int)? = nil
    let format: PixelFormat
    if case .convert(let target) = step { format = target } else { format = .rgba8Premultiplied }
    for index in 0..<image.frameCount {
      if pxl_process_flag_get(cancel.pointer) != 0 { return fail(.cancelled) }
      var input: UnsafeMutablePointer<UInt8>? = nil
      if !taken.isEmpty {
        input = taken[index]?.assumingMemoryBound(to: UInt8.self)
        taken[index] = nil
      }
      switch applyFrame(step, image: image, frame: index, input: input, cancel: cancel, maxPixels: maxPixels) {
      case .failure(let error): return fail(error)
      case .success(let out):
        if let size, size != (out.width, out.height) {
          free(out.pixels)
          return fail(LoadError(.invalidArgument, "\(stepName(step)) gave frames of different sizes"))
        }
        size = (out.width, out.height)
        frames.append(out.pixels)
      }
    }
    let (width, height) = size!
    let processed = Image(width: width, height: height, stride: width * format.bytesPerPixel, format: format,
                          originalWidth: image.originalWidth, originalHeight: image.originalHeight,
                          takingPixels: frames[0], warning: image.warning, laterFrames: frames.dropFirst().map { UnsafeMutableRawPointer($0) },
                          frameDurations: image.frameDurations, loopCount: image.loopCount)
    processed.sourceFrameCount = image.sourceFrameCount
    processed.decoderStamp = image.decoderStamp
    processed.isIncomplete = image.isIncomplete
    processed.sourceLoopCount = image.sourceLoopCount
    processed.encodedSource = image.encodedSource
    return .success(processed)
  }

  static func stepName(_ step: Step) -> String {
    switch step {
    case .process(let processor): return processor.name
    case .convert: return "conversion"
    }
  }

  /// Raises a cancel flag (a custom processor polling it stops early).
  public static func raise(_ flag: CancelFlag) { flag.raise() }

  /// The frame's pixels copied into a tightly packed buffer of its own.
  private static func copy(_ image: Image, frame: Int) -> UnsafeMutablePointer<UInt8>? {
    let rowBytes = image.width * 4
    guard let source = image.framePixels(frame),
          let buffer = malloc(max(rowBytes * image.height, 1))?.assumingMemoryBound(to: UInt8.self) else { return nil }
    if image.stride == rowBytes {
      memcpy(buffer, source, rowBytes * image.height)
    } else {
      for row in 0..<image.height { memcpy(buffer + row * rowBytes, source + row * image.stride, rowBytes) }
    }
    return buffer
  }

  private static let outOfMemory = LoadError(.noMemory, "out of memory processing")

  /// One frame through `step`. `owned`: the frame's own buffer (tightly packed), which
  /// this takes over (returned as the result, or freed); nil: the frame is copied first
  /// when the step writes.
  private static func applyFrame(_ step: Step, image: Image, frame: Int, input owned: UnsafeMutablePointer<UInt8>?,
                                 cancel: CancelFlag, maxPixels: UInt64)
    -> Result<(pixels: UnsafeMutablePointer<UInt8>, width: Int, height: Int), LoadError> {
    let width = image.width, height = image.height
    if case .convert(let format) = step, format != .rgba8Premultiplied {
      let bytes = max(width * height * format.bytesPerPixel, 1)
      if let owned {
        // In place: each pixel is read before its (never larger) output is written.
        pxl_process_convert(owned, width * height, format.rawValue, owned)
        let out = bytes < width * height * 4 ? realloc(owned, bytes)?.assumingMemoryBound(to: UInt8.self) : owned
        return .success((out ?? owned, width, height))
      }
      if image.stride == width * 4, let source = image.framePixels(frame) {
        // Read straight from the shared image: no copy of its pixels.
        guard let out = malloc(bytes)?.assumingMemoryBound(to: UInt8.self) else { return .failure(outOfMemory) }
        pxl_process_convert(source.assumingMemoryBound(to: UInt8.self), width * height, format.rawValue, out)
        return .success((out, width, height))
      }
    }
    guard let input = owned ?? copy(image, frame: frame) else { return .failure(outOfMemory) }
    let w32 = Int32(width), h32 = Int32(height)
    func region(_ x: Int, _ y: Int, _ w: Int, _ h: Int) -> UnsafeMutablePointer<UInt8>? {
      guard let out = malloc(max(w * h * 4, 1))?.assumingMemoryBound(to: UInt8.self) else { return nil }
      pxl_process_crop(input, w32, Int32(x), Int32(y), Int32(w), Int32(h), out)
      return out
    }
    /// False when out of memory (the pixels unchanged).
    func rounded(_ pixels: UnsafeMutablePointer<UInt8>, _ w: Int, _ h: Int, _ radii: [Double],
                 _ border: ImageProcessor.Border?) -> Bool {
      let limit = Double(min(w, h)) / 2
      let clamped = radii.map { min($0, limit) }
      let width = min(border?.width ?? 0, limit)
      var color: [UInt8] = [0, 0, 0, 0]
      if let c = border?.color {
        let a = UInt32(c.a)
        color = [c.r, c.g, c.b].map { UInt8((UInt32($0) * a + 127) / 255) } + [c.a]
      }
      return pxl_process_round(pixels, Int32(w), Int32(h), clamped, width, color) == 0
    }
    switch step {
    case .convert(let format):
      if format == .rgba8Premultiplied { return .success((input, width, height)) }
      defer { free(input) }
      guard let out = malloc(max(width * height * format.bytesPerPixel, 1))?.assumingMemoryBound(to: UInt8.self)
      else { return .failure(outOfMemory) }
      pxl_process_convert(input, width * height, format.rawValue, out)
      return .success((out, width, height))
    case .process(let processor):
      switch processor {
      case .circle(let border):
        let side = min(width, height)
        let square: UnsafeMutablePointer<UInt8>
        if side == width && side == height {
          square = input
        } else {
          defer { free(input) }
          guard let cropped = region((width - side) / 2, (height - side) / 2, side, side) else {
            return .failure(outOfMemory)
          }
          square = cropped
        }
        guard rounded(square, side, side, [Double](repeating: Double(side) / 2, count: 4), border) else {
          free(square)
          return .failure(outOfMemory)
        }
        return .success((square, side, side))
      case .roundedCorners(let radii, let border):
        guard rounded(input, width, height, radii.all, border) else {
          free(input)
          return .failure(outOfMemory)
        }
        return .success((input, width, height))
      case .blur(let sigma):
        if pxl_process_blur(input, w32, h32, sigma) != 0 {
          free(input)
          return .failure(outOfMemory)
        }
        return .success((input, width, height))
      case .crop(let x, let y, let w, let h):
        guard x + w <= width, y + h <= height else {
          free(input)
          return .failure(LoadError(.invalidArgument,
                                    "crop \(x),\(y) \(w)x\(h) falls outside the \(width)x\(height) image"))
        }
        defer { free(input) }
        guard let out = region(x, y, w, h) else { return .failure(outOfMemory) }
        return .success((out, w, h))
      case .rotate(let turns):
        defer { free(input) }
        guard let out = malloc(max(width * height * 4, 1))?.assumingMemoryBound(to: UInt8.self) else {
          return .failure(outOfMemory)
        }
        pxl_process_rotate(input, w32, h32, Int32(turns), out)
        return .success(turns == 2 ? (out, width, height) : (out, height, width))
      case .flip(let vertical):
        pxl_process_flip(input, w32, h32, vertical ? 1 : 0)
        return .success((input, width, height))
      case .grayscale:
        pxl_process_gray(input, width * height)
        return .success((input, width, height))
      case .tint(let color):
        pxl_process_tint(input, width * height, [color.r, color.g, color.b, color.a])
        return .success((input, width, height))
      case .custom(let custom):
        let frameBuffer = ProcessingFrame(pixels: input, width: width, height: height, frameIndex: frame,
                                          frameCount: image.frameCount, cancel: cancel, maxPixels: maxPixels)
        if let error = custom.run(frameBuffer) {
          frameBuffer.discard()
          return .failure(error)
        }
        if pxl_process_flag_get(cancel.pointer) != 0 {
          frameBuffer.discard()
          return .failure(.cancelled)
        }
        let w = frameBuffer.width, h = frameBuffer.height
        return .success((frameBuffer.takeResult(), w, h))
      }
    }
  }
}
