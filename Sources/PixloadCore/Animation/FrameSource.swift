import CCodecs
#if canImport(Glibc)
import Glibc
#endif

/// The frames of one encoded animation, one at a time, each rendered for a variant exactly
/// as ImageDecoder renders a still (size, crop, format, colour, orientation through
/// `FrameCollector`, then the variant's processor chain). Used by one thread at a time
/// (an animation player's decode job). Holds the bytes (shared, an Array), the decoder's
/// state and one canvas, never more than the frame it is on.
final class FrameSource {
  /// What `advance` found: the next frame's index and duration (as the file says it), or
  /// the end of the animation.
  enum Step { case frame(index: Int, durationMs: Int), end }

  private enum Kind {
    /// A built-in format's frame reader (pxl_codecs.h, "Frame readers").
    case reader(FrameReading, OpaquePointer, NativeCodec)
    /// A registered codec's frames one at a time (pxl_codec.open_frames): the codec in
    /// use until this is gone, its state, and the canvas it draws on (plus a straight
    /// copy for a premultiplying codec).
    case codec(CodecTable, CodecTable.Entry, UnsafeMutableRawPointer?, Canvas)
    /// Every frame decoded at once (a format or codec without a reader): the animated
    /// image of the variant, within `Animation.maxBytes`.
    case decoded(Image)
  }

  private let bytes: [UInt8]
  private var kind: Kind
  private let collector: FrameCollector?
  private let steps: [ImageProcessing.Step]
  private let maxPixels: UInt64
  /// PXL_CODEC_KEEP_ORIENTATION for a registered codec's frames.
  private let keepOrientation: Bool
  private let cancel = CancelFlag()
  private var index = -1
  private var frame = pxl_codec_frame()

  final class Canvas {
    let pixels: UnsafeMutablePointer<UInt8>
    let straight: UnsafeMutablePointer<UInt8>?
    let width: Int, height: Int
    init?(width: Int, height: Int, premultiplied: Bool) {
      guard let pixels = calloc(max(1, width * height), 4)?.assumingMemoryBound(to: UInt8.self) else { return nil }
      self.pixels = pixels
      self.width = width
      self.height = height
      straight = premultiplied ? malloc(max(1, width * height * 4))?.assumingMemoryBound(to: UInt8.self) : nil
      if premultiplied && straight == nil {
        free(pixels)
        return nil
      }
    }
    deinit {
      free(pixels)
      free(straight)
    }
  }

  /// The frames of `bytes` for `variant` (its chain included); a failure when the bytes do
  /// not decode. `decoder` decodes everything at once for formats without a reader.
  init(bytes: [UInt8], variant: ImageVariant, decoder: ImageDecoding, codecs: CodecTable?,
       maxPixels: UInt64) throws(LoadError) {
    self.bytes = bytes
    self.maxPixels = maxPixels
    keepOrientation = !variant.appliesOrientation
    let (root, steps) = ImageProcessing.lineage(of: variant)
    self.steps = steps
    var rootVariant = root
    rootVariant.keepsSource = false
    // The table's built-in format: under PXL_ISOLATION_ALL its reader runs in a worker
    // (IsolatedBuiltIns: the host's own readers never touch the bytes).
    if let native = (codecs?.builtIn(for: bytes) ?? CodecTable.builtIn(for: bytes))?.native,
       let reading = native.frames {
      var setup: (FrameCollector, OpaquePointer)? = nil
      var failure: LoadError? = nil
      bytes.withUnsafeBufferPointer { buffer in
        var info = pxl_codec_info()
        var message = [CChar](repeating: 0, count: 256)
        let status = native.readInfo(buffer.baseAddress, buffer.count, &info, &message, message.count)
        guard status == PXL_CODEC_OK else {
          failure = ImageDecoder.error(status, codec: native, message: String(cString: message))
          return
        }
        let orientation = rootVariant.appliesOrientation ? Orientation(exif: Int(info.orientation)) : .up
        let plan = SizePlan(sourceWidth: Int(info.width), sourceHeight: Int(info.height), orientation: orientation,
                            targetWidth: rootVariant.width, targetHeight: rootVariant.height, mode: rootVariant.mode)
        let (conversion, warning) = rootVariant.managesColor
          ? ColorConversion.forFile(buffer, codec: native) : (nil, nil)
        let color = ColorStep(conversion: conversion, warning: warning, format: rootVariant.format)
        let collector = FrameCollector(plan: plan, color: color, format: rootVariant.format, orientation: orientation,
                                       canvasWidth: Int(info.width), canvasHeight: Int(info.height),
                                       sourceHasAlpha: info.has_alpha != 0,
                                       frameBytes: plan.outputWidth * plan.outputHeight * rootVariant.format.bytesPerPixel)
        var openStatus = PXL_CODEC_OK
        guard let state = reading.open(buffer.baseAddress, buffer.count, maxPixels, &openStatus, &message,
                                       message.count) else {
          failure = ImageDecoder.error(openStatus, codec: native, message: String(cString: message))
          return
        }
        setup = (collector, state)
      }
      if let failure { throw failure }
      collector = setup!.0
      kind = .reader(reading, setup!.1, native)
    } else if let codecs, let (entry, state, canvas, made) = try Self.openCodec(bytes, codecs: codecs,
                                                                                 variant: rootVariant,
                                                                                 maxPixels: maxPixels) {
      collector = made
      kind = .codec(codecs, entry, state, canvas)
    } else {
      var animated = rootVariant
      animated.animates = true
      var image: Image
      switch decoder.decode(bytes, variant: animated, maxPixels: maxPixels) {
      case .failure(let error): throw error
      case .success(let decoded): image = decoded
      }
      for step in steps {
        switch ImageProcessing.apply(step, to: image, cancel: cancel, maxPixels: maxPixels) {
        case .failure(let error): throw error
        case .success(let processed): image = processed
        }
      }
      collector = nil
      kind = .decoded(image)
    }
  }

  deinit {
    switch kind {
    case .reader(let reading, let state, _): reading.close(state)
    case .codec(let codecs, let entry, let state, _):
      entry.codec.closeFrames(state)
      codecs.release(entry)
    case .decoded: break
    }
  }

  /// A registered codec that reads frames one at a time, opened on `bytes`; nil when the
  /// codec that takes them does not (or draws at any size: its frames would not be drawn
  /// as its still is).
  private static func openCodec(_ bytes: [UInt8], codecs: CodecTable, variant: ImageVariant, maxPixels: UInt64)
    throws(LoadError) -> (CodecTable.Entry, UnsafeMutableRawPointer?, Canvas, FrameCollector)? {
    let opened: Result<(CodecTable.Entry, UnsafeMutableRawPointer?, Canvas, FrameCollector)?, LoadError> =
      bytes.withUnsafeBufferPointer { buffer in
        guard let entry = codecs.acquire(for: buffer) else { return .success(nil) }
        let codec = entry.codec
        guard entry.native == nil, codec.readsFrames, !codec.isScalable else {
          codecs.release(entry)
          return .success(nil)
        }
        func fail(_ failure: CodecFailure) -> Result<(CodecTable.Entry, UnsafeMutableRawPointer?, Canvas, FrameCollector)?, LoadError> {
          codecs.release(entry)
          return .failure(ImageDecoder.error(failure, codec: codec))
        }
        let header: CodecHeader
        // An isolated codec's frames open in a worker now: its answer is the header, and the
        // ICC profile the colour step reads next comes with it (IsolatedCodec).
        var isolatedState: UnsafeMutableRawPointer? = nil
        if let isolated = codec as? IsolatedCodec {
          switch isolated.openFrames(buffer, keepOrientation: !variant.appliesOrientation, maxPixels: maxPixels) {
          case .failure(let failure): return fail(failure)
          case .success(let (state, read)):
            isolatedState = state
            header = read
          }
        } else {
          switch codec.readHeader(buffer, keepOrientation: !variant.appliesOrientation) {
          case .failure(let failure): return fail(failure)
          case .success(let read): header = read
          }
        }
        func failOpen(_ failure: CodecFailure) -> Result<(CodecTable.Entry, UnsafeMutableRawPointer?, Canvas, FrameCollector)?, LoadError> {
          if let isolatedState { codec.closeFrames(isolatedState) }
          codecs.release(entry)
          return .failure(ImageDecoder.error(failure, codec: codec))
        }
        guard header.width > 0, header.height > 0, UInt64(header.width) * UInt64(header.height) <= maxPixels else {
          return failOpen(CodecFailure(.tooManyPixels, "\(header.width)x\(header.height) is not drawable within \(maxPixels) pixels"))
        }
        let orientation = variant.appliesOrientation ? Orientation(exif: header.orientation) : .up
        let plan = SizePlan(sourceWidth: header.width, sourceHeight: header.height, orientation: orientation,
                            targetWidth: variant.width, targetHeight: variant.height, mode: variant.mode)
        let (conversion, warning) = variant.managesColor
          ? ImageDecoder.colorConversion(buffer, codec: codec, header: header) : (nil, nil)
        let color = ColorStep(conversion: conversion, warning: warning, format: variant.format)
        let collector = FrameCollector(plan: plan, color: color, format: variant.format, orientation: orientation,
                                       canvasWidth: header.width, canvasHeight: header.height,
                                       sourceHasAlpha: header.hasAlpha,
                                       frameBytes: plan.outputWidth * plan.outputHeight * variant.format.bytesPerPixel)
        guard let canvas = Canvas(width: header.width, height: header.height,
                                  premultiplied: codec.writesPremultiplied && header.hasAlpha) else {
          return failOpen(CodecFailure(.noMemory, "out of memory for a \(codec.id) canvas"))
        }
        if let isolatedState { return .success((entry, isolatedState, canvas, collector)) }
        switch codec.openFrames(buffer) {
        case .failure(let failure): return fail(failure)
        case .success(let state): return .success((entry, state, canvas, collector))
        }
      }
    return try opened.get()
  }

  /// Back to frame 0 for the next loop, when the frames are all decoded already; false:
  /// a reader starts over by being made again.
  func rewind() -> Bool {
    guard case .decoded = kind else { return false }
    index = -1
    return true
  }

  /// Moves to the next frame (decoding it, not rendering it).
  func advance() -> Result<Step, LoadError> {
    switch kind {
    case .reader(let reading, let state, let native):
      let status = reading.next(state, &frame)
      if status != PXL_CODEC_OK {
        let text = withUnsafeBytes(of: &frame.message) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
        return .failure(ImageDecoder.error(status, codec: native, message: text))
      }
      guard frame.rgba != nil else { return .success(.end) }
      index += 1
      return .success(.frame(index: index, durationMs: Int(frame.duration_ms)))
    case .codec(_, let entry, let state, let canvas):
      let target = CodecTarget(pixels: canvas.pixels, width: canvas.width, height: canvas.height,
                               stride: canvas.width * 4, keepOrientation: keepOrientation, partial: false,
                               cancel: UnsafePointer(cancel.pointer))
      switch entry.codec.nextFrame(state, into: target) {
      case .failure(let failure): return .failure(ImageDecoder.error(failure, codec: entry.codec))
      case .success(nil): return .success(.end)
      case .success(let duration?):
        index += 1
        return .success(.frame(index: index, durationMs: duration))
      }
    case .decoded(let image):
      guard index + 1 < image.frameCount else { return .success(.end) }
      index += 1
      return .success(.frame(index: index, durationMs: image.frameDurations[index]))
    }
  }

  /// The frame `advance` moved to, rendered for the variant.
  func render() -> Result<Image, LoadError> {
    switch kind {
    case .reader, .codec:
      var rgba = frame.rgba, stride = Int(frame.stride)
      if case .codec(_, _, _, let canvas) = kind {
        rgba = UnsafePointer(canvas.pixels)
        stride = canvas.width * 4
        if let straight = canvas.straight {  // a premultiplying codec's canvas, made straight
          straight.update(from: canvas.pixels, count: canvas.width * canvas.height * 4)
          PixelOps.unpremultiply(straight, count: canvas.width * canvas.height)
          rgba = UnsafePointer(straight)
        }
      }
      guard let collector, let rgba,
            let pixels = collector.render(rgba, stride: stride, width: collector.canvasWidth,
                                          height: collector.canvasHeight) else {
        return .failure(LoadError(.noMemory, "out of memory rendering frame \(index)"))
      }
      let plan = collector.plan, format = collector.format
      var image = Image(width: plan.outputWidth, height: plan.outputHeight,
                        stride: plan.outputWidth * format.bytesPerPixel, format: format,
                        originalWidth: plan.displayWidth, originalHeight: plan.displayHeight,
                        takingPixels: UnsafeMutableRawPointer(pixels))
      for step in steps {
        switch ImageProcessing.apply(step, to: image, owned: true, cancel: cancel, maxPixels: maxPixels) {
        case .failure(let error): return .failure(error)
        case .success(let processed): image = processed
        }
      }
      return .success(image)
    case .decoded(let image):
      guard let source = image.framePixels(index), let copy = malloc(max(1, image.byteCount)) else {
        return .failure(LoadError(.noMemory, "out of memory copying frame \(index)"))
      }
      memcpy(copy, source, image.byteCount)
      return .success(Image(width: image.width, height: image.height, stride: image.stride, format: image.format,
                            originalWidth: image.originalWidth, originalHeight: image.originalHeight,
                            takingPixels: copy))
    }
  }
}
