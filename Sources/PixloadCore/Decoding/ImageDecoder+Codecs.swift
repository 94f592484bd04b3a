import CCodecs
#if canImport(Glibc)
import Glibc
#endif

/// Registered codecs (`CodecTable`, pixload.h "Codecs") in the decode stage. A codec
/// draws RGBA8 into a buffer this file allocates, at the header's size or the size its
/// choose_size picked; from there its pixels take the path of an animation's canvas
/// (`FrameCollector`): layout, resample over the plan's crop, colour, premultiplication,
/// orientation. The declared size meets max_pixels, and the frame count the animation
/// bound, before any buffer exists.
extension ImageDecoder {
  /// The first codec that takes the body decodes it (a built-in format's before a
  /// registered one's): through its native capabilities when it has them, else through
  /// pxl_codec's shape; when none takes it, a format we know by sight but whose module is
  /// not loaded is PXL_E_UNSUPPORTED_IMAGE, and anything else is not an image.
  /// `cancel` (the decode task's, raised when nobody waits for it any more; nil: one of
  /// its own) is what a registered codec polls. `partial`: a prefix of a download, for a
  /// codec that decodes prefixes (PXL_CODEC_PROGRESSIVE).
  func decodeWithCodec(_ data: [UInt8], variant: ImageVariant, maxPixels: UInt64, cancel: CancelFlag? = nil,
                       partial: Bool = false) -> Result<Image, LoadError> {
    data.withUnsafeBufferPointer { bytes in
      guard let entry = codecs.acquire(for: bytes) else {
        if let missing = Self.unloadedFormat(bytes) {
          return .failure(LoadError(.unsupportedImage, "\(missing.name) image, and no \(missing.name) codec is loaded "
                                      + "(install \(missing.package))"))
        }
        return .failure(LoadError(.notAnImage, Self.describeNonImage(data, codecs: codecs.ids)))
      }
      defer { codecs.release(entry) }
      // A prefix only for a codec that draws one (PXL_CODEC_PARTIAL is PROGRESSIVE's; a
      // progressive JPEG's scans are previewed by previewPrefix).
      if partial && !entry.codec.isProgressive {
        return .failure(LoadError(.notFound, "\(entry.codec.id) does not decode a prefix"))
      }
      // One image, one session: an isolated codec's calls below are one worker conversation.
      if let native = entry.native {
        return WorkerSession.run(bytes) { Self.decode(bytes, native: native, variant: variant, maxPixels: maxPixels) }
      }
      let flag = cancel ?? CancelFlag()
      codecs.register(flag)
      defer { codecs.unregister(flag) }
      let result = WorkerSession.run(bytes) {
        Self.decode(bytes, codec: entry.codec, variant: variant, maxPixels: maxPixels,
                    cancel: UnsafePointer(flag.pointer), partial: partial)
      }
      if case .success(let image) = result { image.decoderStamp = entry.stamp }
      return result
    }
  }

  /// Whether the codec that takes `data` decodes prefixes (previews).
  public func decodesPrefixes(_ data: [UInt8]) -> Bool {
    data.withUnsafeBufferPointer { bytes in
      guard let entry = codecs.acquire(for: bytes) else { return false }
      defer { codecs.release(entry) }
      return entry.codec.isProgressive
    }
  }

  public func decodePrefix(_ data: [UInt8], variant: ImageVariant, maxPixels: UInt64) -> Result<Image, LoadError> {
    decodeWithCodec(data, variant: variant, maxPixels: maxPixels, partial: true)
  }

  static func error(_ failure: CodecFailure, codec: ExternalCodec) -> LoadError {
    // A codec passes its library's text on (libheif's ends in a newline): one line, trimmed.
    var text = Substring(failure.message)
    while let last = text.last, last.isWhitespace { text.removeLast() }
    let line = text.split(whereSeparator: \.isNewline).joined(separator: " ")
    let message = "\(codec.id): " + (line.isEmpty ? failure.status.description : line)
    // .io too: the C API's name for a status the library does not know (pixload.h,
    // "Extensions"), the same for every kind of extension.
    switch failure.status {
    case .unsupportedImage, .noMemory, .cancelled, .tooManyPixels, .notFound, .io, .decoderFailed: return LoadError(failure.status, message)
    default: return LoadError(.corruptImage, message)
    }
  }

  /// Decodes through pxl_codec's shape (`ExternalCodec`).
  static func decode(_ bytes: UnsafeBufferPointer<UInt8>, codec: ExternalCodec, variant: ImageVariant,
                             maxPixels: UInt64, cancel: UnsafePointer<Int32>,
                             partial: Bool) -> Result<Image, LoadError> {
    let keepOrientation = !variant.appliesOrientation
    var header: CodecHeader
    switch codec.readHeader(bytes, keepOrientation: keepOrientation) {
    case .failure(let failure): return .failure(error(failure, codec: codec))
    case .success(let read): header = read
    }
    guard header.width > 0, header.height > 0, header.frameCount >= 1, (1...8).contains(header.orientation) else {
      return .failure(LoadError(.corruptImage, "\(codec.id): the header says \(header.width)x\(header.height), "
                                  + "\(header.frameCount) frames, orientation \(header.orientation)"))
    }
    if UInt64(header.width) * UInt64(header.height) > maxPixels {
      return .failure(LoadError(.tooManyPixels,
                                "\(codec.id): \(header.width)x\(header.height) exceeds the limit of \(maxPixels) pixels"))
    }
    let orientation = variant.appliesOrientation ? Orientation(exif: header.orientation) : .up
    if codec.isScalable, let enlarged = Self.enlarged(header, orientation: orientation, to: variant, maxPixels: maxPixels) {
      // A vector drawn at the size asked: the plan starts from there, as if it were the
      // image's own size (the codec is never asked for less and scaled up).
      (header.width, header.height) = enlarged
    }
    let plan = SizePlan(sourceWidth: header.width, sourceHeight: header.height, orientation: orientation,
                        targetWidth: variant.width, targetHeight: variant.height, mode: variant.mode)
    // The profile read when it is needed: for a still, after the draw (an isolated codec
    // has it from the worker's decode, IsolatedCodec).
    let colorStep = { () -> ColorStep in
      let (conversion, colorWarning) = variant.managesColor ? colorConversion(bytes, codec: codec, header: header)
                                                            : (nil, nil)
      return ColorStep(conversion: conversion, warning: colorWarning, format: variant.format)
    }
    let target = Target(cancel: cancel, keepOrientation: keepOrientation, partial: partial)

    if variant.animates && header.frameCount > 1 && codec.decodesFrames && !partial {
      let frameBytes = plan.outputWidth * plan.outputHeight * variant.format.bytesPerPixel
      // Over the bound by the declared count: the first frame, as a still, without a frame built.
      if header.frameCount <= Animation.maxBytes / max(1, frameBytes) {
        // An isolated codec's frames open in its worker first: the ICC profile the colour
        // step reads comes with the open (IsolatedCodec.openFrames).
        var opened: UnsafeMutableRawPointer? = nil
        if let isolated = codec as? IsolatedCodec {
          switch isolated.openFrames(bytes, keepOrientation: keepOrientation, maxPixels: maxPixels) {
          case .failure(let failure): return .failure(error(failure, codec: codec))
          case .success(let (state, _)): opened = state
          }
        }
        defer { if let opened { codec.closeFrames(opened) } }
        if let animated = decodeFrames(bytes, codec: codec, header: header, plan: plan, color: colorStep(),
                                       format: variant.format, orientation: orientation, frameBytes: frameBytes,
                                       target: target, opened: opened) {
          return animated
        }
      }
    }

    // The size to draw: the whole image at the scale that takes the plan's crop to the
    // output size, if the codec draws at other sizes and that is smaller; never less than
    // asked (the resampler only shrinks), never more than the header's size.
    let crop = plan.storedCrop
    var width = header.width, height = header.height
    let wantWidth = min(width, max(1, Int((Double(width) * Double(plan.storedOutputWidth) / crop.width).rounded(.up))))
    let wantHeight = min(height,
                         max(1, Int((Double(height) * Double(plan.storedOutputHeight) / crop.height).rounded(.up))))
    if wantWidth < width || wantHeight < height,
       let chosen = codec.chooseSize(bytes, keepOrientation: keepOrientation, width: wantWidth, height: wantHeight),
       chosen.width >= wantWidth, chosen.height >= wantHeight, chosen.width <= width, chosen.height <= height {
      (width, height) = chosen
    }
    let canvasCrop = crop.scaled(x: Double(width) / Double(header.width), y: Double(height) / Double(header.height))
    if let isolated = codec as? IsolatedCodec, let resampled = decodeResampled(
         bytes, codec: isolated, variant: variant, header: header, plan: plan, orientation: orientation,
         width: width, height: height, crop: canvasCrop, keepOrientation: keepOrientation, partial: partial,
         colorStep: colorStep) {
      return resampled
    }
    let canvas: UnsafeMutablePointer<UInt8>
    switch target.draw(bytes, codec: codec, width: width, height: height, hasAlpha: header.hasAlpha) {
    case .failure(let failure): return .failure(failure)
    case .success(let drawn): canvas = drawn
    }
    let color = colorStep()
    let collector = FrameCollector(plan: plan, color: color, format: variant.format, orientation: orientation,
                                   canvasWidth: width, canvasHeight: height, sourceHasAlpha: header.hasAlpha,
                                   frameBytes: 0, crop: canvasCrop)
    guard let pixels = collector.render(taking: canvas, width: width, height: height) else {
      return .failure(LoadError(.noMemory, "out of memory rendering a \(codec.id) image"))
    }
    return .success(still(pixels, plan: plan, variant: variant, header: header, warning: collector.warning))
  }

  private static func still(_ pixels: UnsafeMutablePointer<UInt8>, plan: SizePlan, variant: ImageVariant,
                            header: CodecHeader, warning: String?) -> Image {
    let image = Image(width: plan.outputWidth, height: plan.outputHeight,
                      stride: plan.outputWidth * variant.format.bytesPerPixel, format: variant.format,
                      originalWidth: plan.displayWidth, originalHeight: plan.displayHeight, takingPixels: pixels,
                      warning: warning)
    image.sourceFrameCount = header.frameCount
    return image
  }

  /// An isolated codec's thumbnail resampled in its worker, so that only the thumbnail
  /// crosses: the same resampler with the parameters `FrameCollector.render` would use
  /// (whose layout, for any format but GRAY8, does not depend on the colour step; the
  /// colour step, premultiplication and orientation follow here, as they do there). Nil
  /// when the canvas would not be resampled, or for GRAY8 (its layout follows the profile,
  /// which comes with the pixels): the canvas crosses.
  private static func decodeResampled(_ bytes: UnsafeBufferPointer<UInt8>, codec: IsolatedCodec, variant: ImageVariant,
                                      header: CodecHeader, plan: SizePlan, orientation: Orientation, width: Int,
                                      height: Int, crop: PixelRect, keepOrientation: Bool, partial: Bool,
                                      colorStep: () -> ColorStep) -> Result<Image, LoadError>? {
    guard variant.format != .gray8 else { return nil }
    let layoutOnly = ColorStep(conversion: nil, warning: nil, format: variant.format)
    let planned = FrameCollector(plan: plan, color: layoutOnly, format: variant.format, orientation: orientation,
                                 canvasWidth: width, canvasHeight: height, sourceHasAlpha: header.hasAlpha,
                                 frameBytes: 0, crop: crop)
    guard let resample = planned.resampling(width: width, height: height) else { return nil }
    let small: UnsafeMutablePointer<UInt8>
    switch codec.decodeResampled(bytes, width: width, height: height, keepOrientation: keepOrientation,
                                 partial: partial, resample: resample) {
    case .failure(let failure): return .failure(error(failure, codec: codec))
    case .success(let output): small = output
    }
    let collector = FrameCollector(plan: plan, color: colorStep(), format: variant.format, orientation: orientation,
                                   canvasWidth: width, canvasHeight: height, sourceHasAlpha: header.hasAlpha,
                                   frameBytes: 0, crop: crop)
    guard collector.resampling(width: width, height: height) == resample,
          let pixels = collector.render(resampled: small) else {
      free(small)
      return .failure(LoadError(.noMemory, "out of memory rendering a \(codec.id) image"))
    }
    return .success(still(pixels, plan: plan, variant: variant, header: header, warning: collector.warning))
  }

  /// A scalable codec's size (stored orientation) enlarged so that the displayed image meets
  /// the variant's target as its mode does (FIT: inside it, one side equal; FILL: covering
  /// it), capped at maxPixels; nil when the target asks for no more than the header's size.
  static func enlarged(_ header: CodecHeader, orientation: Orientation, to variant: ImageVariant,
                       maxPixels: UInt64) -> (width: Int, height: Int)? {
    let (shownWidth, shownHeight) = orientation.swapsAxes ? (header.height, header.width) : (header.width, header.height)
    let byWidth = variant.width > 0 ? Double(variant.width) / Double(shownWidth) : nil
    let byHeight = variant.height > 0 ? Double(variant.height) / Double(shownHeight) : nil
    var scale: Double
    switch (byWidth, byHeight) {
    case let (w?, h?): scale = variant.mode == .fill ? max(w, h) : min(w, h)
    case let (w?, nil): scale = w
    case let (nil, h?): scale = h
    case (nil, nil): return nil
    }
    let pixels = Double(header.width) * Double(header.height)
    scale = min(scale, (Double(maxPixels) / pixels).squareRoot())
    guard scale > 1 else { return nil }
    var width = max(1, Int((Double(header.width) * scale).rounded()))
    var height = max(1, Int((Double(header.height) * scale).rounded()))
    // Rounding may tip the product over the cap: step down a pixel until it fits.
    while UInt64(width) * UInt64(height) > maxPixels && width > 1 && height > 1 {
      if width >= height { width -= 1 } else { height -= 1 }
    }
    return (width, height)
  }

  /// Every frame through the collector, or nil to deliver the first as a still (over the
  /// bound while decoding).
  private static func decodeFrames(_ bytes: UnsafeBufferPointer<UInt8>, codec: ExternalCodec, header: CodecHeader,
                                   plan: SizePlan, color: ColorStep, format: PixelFormat, orientation: Orientation,
                                   frameBytes: Int, target: Target,
                                   opened: UnsafeMutableRawPointer? = nil) -> Result<Image, LoadError>? {
    let width = header.width, height = header.height
    guard let canvas = calloc(width * height, 4)?.assumingMemoryBound(to: UInt8.self) else {
      return .failure(LoadError(.noMemory, "out of memory for a \(codec.id) canvas"))
    }
    defer { free(canvas) }
    // A premultiplying codec keeps compositing on its canvas: each frame is made straight
    // in a copy.
    let straight = codec.writesPremultiplied && header.hasAlpha
      ? calloc(width * height, 4)?.assumingMemoryBound(to: UInt8.self) : nil
    defer { free(straight) }
    if codec.writesPremultiplied && header.hasAlpha && straight == nil {
      return .failure(LoadError(.noMemory, "out of memory for a \(codec.id) canvas"))
    }
    let collector = FrameCollector(plan: plan, color: color, format: format, orientation: orientation,
                                   canvasWidth: width, canvasHeight: height, sourceHasAlpha: header.hasAlpha,
                                   frameBytes: frameBytes)
    let codecTarget = CodecTarget(pixels: canvas, width: width, height: height, stride: width * 4,
                                  keepOrientation: target.keepOrientation, partial: false, cancel: target.cancel)
    let frameDone = { (duration: Int) -> Bool in
      var frame = UnsafePointer(canvas)
      if let straight {
        straight.update(from: canvas, count: width * height * 4)
        PixelOps.unpremultiply(straight, count: width * height)
        frame = UnsafePointer(straight)
      }
      return collector.add(frame, stride: width * 4, width: width, height: height, duration: duration)
    }
    let failure = opened != nil && codec is IsolatedCodec
      ? (codec as! IsolatedCodec).drawFrames(opened, into: codecTarget, frameDone: frameDone)
      : codec.decodeFrames(bytes, into: codecTarget, frameDone: frameDone)
    if let failure, !collector.overBound { return .failure(error(failure, codec: codec)) }
    return collector.animation(loopCount: header.loopCount, sourceFrameCount: header.frameCount,
                               noFrame: LoadError(.corruptImage, "\(codec.id): no frame"))
  }

  /// How one decode calls its codec's decode.
  private struct Target {
    let cancel: UnsafePointer<Int32>
    let keepOrientation: Bool
    let partial: Bool

    /// The codec's first frame at width x height, straight RGBA8, tightly packed (the
    /// caller releases it: `PixelMemory.release`). An isolated codec's is its worker's
    /// pixels mapped, not copied (`IsolatedCodec.decodeCanvas`).
    func draw(_ bytes: UnsafeBufferPointer<UInt8>, codec: ExternalCodec, width: Int, height: Int,
              hasAlpha: Bool) -> Result<UnsafeMutablePointer<UInt8>, LoadError> {
      var canvas: UnsafeMutablePointer<UInt8>
      if let isolated = codec as? IsolatedCodec {
        switch isolated.decodeCanvas(bytes, width: width, height: height, keepOrientation: keepOrientation,
                                           partial: partial) {
        case .failure(let failure): return .failure(ImageDecoder.error(failure, codec: codec))
        case .success(let drawn): canvas = drawn
        }
      } else {
        guard let fresh = calloc(width * height, 4)?.assumingMemoryBound(to: UInt8.self) else {
          return .failure(LoadError(.noMemory, "out of memory for a \(width)x\(height) \(codec.id) image"))
        }
        canvas = fresh
        let target = CodecTarget(pixels: canvas, width: width, height: height, stride: width * 4,
                                 keepOrientation: keepOrientation, partial: partial, cancel: cancel)
        if let failure = codec.decode(bytes, into: target) {
          free(canvas)
          return .failure(ImageDecoder.error(failure, codec: codec))
        }
      }
      if codec.writesPremultiplied && hasAlpha {
        // Every pixel written: on a buffer of its own, not a mapping's pages (PixelMemory).
        guard let owned = PixelMemory.owned(canvas, count: width * height * 4) else {
          PixelMemory.release(canvas)
          return .failure(LoadError(.noMemory, "out of memory for a \(width)x\(height) \(codec.id) image"))
        }
        canvas = owned
        PixelOps.unpremultiply(canvas, count: width * height)
      }
      return .success(canvas)
    }
  }

  /// The colour conversion for what the codec's header reports: its ICC profile, else its
  /// nclx code points.
  static func colorConversion(_ bytes: UnsafeBufferPointer<UInt8>, codec: ExternalCodec,
                                      header: CodecHeader) -> (ColorConversion?, warning: String?) {
    var color = pxl_codec_color()
    defer { pxl_codec_color_free(&color) }
    if header.iccSize > 0, header.iccSize <= Int(PXL_ICC_MAX_BYTES),
       let icc = codec.readICC(bytes, size: header.iccSize), icc.count == header.iccSize {
      color.setICC(icc)
    }
    color.cicp_primaries = header.cicpPrimaries
    color.cicp_transfer = header.cicpTransfer
    color.cicp_matrix = header.cicpMatrix
    if color.icc == nil && header.cicpPrimaries == 0 && header.cicpTransfer == 0 { return (nil, nil) }
    return ColorConversion.forColor(&color)
  }

  // MARK: - Formats known by sight

  /// A format pixload ships a codec module for, told by its first bytes, when no codec
  /// took it: its name and the package that brings the module.
  static func unloadedFormat(_ bytes: UnsafeBufferPointer<UInt8>) -> (name: String, package: String)? {
    if hasBrand(bytes, ["heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1"]) {
      return ("HEIC", "libpixload-heif")
    }
    if isJXL(bytes) { return ("JPEG XL", "libpixload-jxl") }
    if isSVG(bytes) { return ("SVG", "libpixload-svg") }
    return nil
  }

  /// ISO-BMFF whose leading ftyp box names one of `brands` (major or compatible).
  static func hasBrand(_ bytes: UnsafeBufferPointer<UInt8>, _ brands: [String]) -> Bool {
    guard bytes.count >= 16, bytes[4..<8].elementsEqual("ftyp".utf8) else { return false }
    let boxSize = Int(bytes[0]) << 24 | Int(bytes[1]) << 16 | Int(bytes[2]) << 8 | Int(bytes[3])
    guard boxSize >= 16 else { return false }
    let end = min(boxSize, bytes.count)
    func isBrand(at i: Int) -> Bool { brands.contains { bytes[i..<i + 4].elementsEqual($0.utf8) } }
    if isBrand(at: 8) { return true }
    var i = 16
    while i + 4 <= end {
      if isBrand(at: i) { return true }
      i += 4
    }
    return false
  }

  /// A JPEG XL codestream (FF 0A) or container (the 12-byte JXL signature box).
  static func isJXL(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    if bytes.count >= 2 && bytes[0] == 0xFF && bytes[1] == 0x0A { return true }
    let box: [UInt8] = [0, 0, 0, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A]
    return bytes.count >= 12 && bytes[0..<12].elementsEqual(box)
  }

  /// Text that starts, after an optional BOM, XML declaration, comments and doctype, with
  /// an `<svg` element, within the first 4096 bytes (gzip-compressed SVG is not taken).
  /// The same rule as libpixload-svg's sniff (codecs/svg.c).
  static func isSVG(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    let text = bytes[0..<min(bytes.count, 4096)]
    var i = text.startIndex
    if text.count >= 3 && text[0] == 0xEF && text[1] == 0xBB && text[2] == 0xBF { i = 3 }
    func starts(_ prefix: String) -> Bool {
      let p = Array(prefix.utf8)
      return i + p.count <= text.endIndex && text[i..<i + p.count].elementsEqual(p)
    }
    func skip(past terminator: String) -> Bool {
      let t = Array(terminator.utf8)
      while i + t.count <= text.endIndex {
        if text[i..<i + t.count].elementsEqual(t) { i += t.count; return true }
        i += 1
      }
      return false
    }
    while i < text.endIndex {
      let byte = text[i]
      if byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { i += 1; continue }
      if starts("<?xml") { guard skip(past: "?>") else { return false }; continue }
      if starts("<!--") { guard skip(past: "-->") else { return false }; continue }
      if starts("<!DOCTYPE") {
        // An internal subset ([...]) may hold '>' of its own.
        var j = i
        while j < text.endIndex && text[j] != 0x5B && text[j] != 0x3E { j += 1 }
        if j < text.endIndex && text[j] == 0x5B { guard skip(past: "]") else { return false } }
        guard skip(past: ">") else { return false }
        continue
      }
      guard starts("<svg"), i + 4 < text.endIndex else { return false }
      let next = text[i + 4]
      return next == 0x20 || next == 0x09 || next == 0x0A || next == 0x0D || next == 0x3E || next == 0x2F
    }
    return false
  }
}
