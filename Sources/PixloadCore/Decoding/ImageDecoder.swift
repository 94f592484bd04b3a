import CCodecs
#if canImport(Glibc)
import Glibc
#endif

/// Turns encoded bytes into the pixels one `ImageVariant` asks for.
///
/// - important: Implementations must be thread safe: decodes of different images run in
///   parallel on the decode pool's threads.
public protocol ImageDecoding: Sendable {
  func decode(_ data: [UInt8], variant: ImageVariant, maxPixels: UInt64) -> Result<Image, LoadError>
  /// The same, with the flag the coordinator raises once nobody waits for this decode
  /// (every requester cancelled, or the loader closing): a decoder that can stop early
  /// polls it (a registered codec does, through pxl_codec_target.cancel).
  func decode(_ data: [UInt8], variant: ImageVariant, maxPixels: UInt64,
              cancel: CancelFlag) -> Result<Image, LoadError>
  /// For previews: the length of the longest prefix of a progressive JPEG still
  /// downloading that ends after a complete scan, and its scan count; nil for anything
  /// else (baseline JPEG, PNG, no complete scan yet).
  func previewPrefix(_ data: [UInt8]) -> (length: Int, scans: Int)?
  /// For ending a thumbnail's transfer early: the length of a prefix of a progressive
  /// JPEG still downloading that decodes every one of `variants` to the same pixels as
  /// the whole file would (each is decoded at 1/8 scale from its first scans); nil while
  /// more is needed, or when a variant needs the rest.
  func firstScansEnd(_ data: [UInt8], variants: [ImageVariant]) -> Int?
  /// For previews of a format whose registered codec decodes prefixes
  /// (PXL_CODEC_PROGRESSIVE, JPEG XL's module): whether `data`, a prefix of a download,
  /// is one. Such a prefix has no scan boundaries to find: `decodePrefix` takes it whole.
  func decodesPrefixes(_ data: [UInt8]) -> Bool
  /// What such a codec draws from the prefix (PXL_CODEC_PARTIAL), in the variant's size;
  /// `.notFound` while it holds nothing to show yet.
  func decodePrefix(_ data: [UInt8], variant: ImageVariant, maxPixels: UInt64) -> Result<Image, LoadError>
}

extension ImageDecoding {
  public func decode(_ data: [UInt8], variant: ImageVariant, maxPixels: UInt64,
                     cancel: CancelFlag) -> Result<Image, LoadError> {
    decode(data, variant: variant, maxPixels: maxPixels)
  }

  public func decodesPrefixes(_ data: [UInt8]) -> Bool { false }

  public func decodePrefix(_ data: [UInt8], variant: ImageVariant, maxPixels: UInt64) -> Result<Image, LoadError> {
    .failure(LoadError(.notFound, "no codec decodes prefixes"))
  }

  /// Asks the built-in format that takes `data` for its scan previews (JPEG's).
  public func previewPrefix(_ data: [UInt8]) -> (length: Int, scans: Int)? {
    CodecTable.builtIn(for: data)?.native?.scans?.previewPrefix(data)
  }

  public func firstScansEnd(_ data: [UInt8], variants: [ImageVariant]) -> Int? {
    guard let native = CodecTable.builtIn(for: data)?.native, let scans = native.scans else { return nil }
    return scans.firstScansEnd(data, variants: variants, readInfo: native.readInfo)
  }

  /// The first `length` bytes of a progressive JPEG (a `previewPrefix` or `firstScansEnd`)
  /// as a file of their own: with an EOI, libjpeg then shows the coefficients it has,
  /// without a warning.
  public func scansPrefix(_ data: [UInt8], length: Int) -> [UInt8] {
    Array(data[0..<length]) + [0xFF, 0xD9]
  }
}

/// The real decoder: the decode stage of the codec table. The first codec whose sniff
/// takes the bytes decodes them, chosen by magic bytes, never by URL or Content-Type: the
/// built-in formats' (`BuiltInCodecs`: JPEG, PNG, WebP, GIF, AVIF) before those registered
/// with the loader (ImageDecoder+Codecs.swift).
///
/// A codec with `NativeCodec` capabilities (the built-in formats) decodes through them
/// (`decode(_:native:...)` below): straight into the layout asked, a thumbnail row by row
/// into an area-averaging resampler so the full-size bitmap is never built, a JPEG at the
/// smallest DCT scale (1/2, 1/4, 1/8) that still covers the target and only over the
/// crop's region; EXIF orientation is applied last, on the small image. Any other codec
/// decodes through pxl_codec's shape.
public struct ImageDecoder: ImageDecoding {
  /// The codecs: the built-in formats, then those registered with the loader.
  let codecs: CodecTable

  /// `codecs`: a loader's table; nil: the built-in formats alone.
  public init(codecs: CodecTable? = nil) { self.codecs = codecs ?? .builtInOnly }

  /// The short names of the built-in formats, in pxl_loader_formats' order.
  public static let builtInFormats = CodecTable.builtIns.map(\.codec.id)

  /// The built-in format (its codec's id: "jpeg", "png", "webp", "gif", "avif") whose
  /// sniff takes `data`, or nil.
  public static func sniff(_ data: [UInt8]) -> String? { CodecTable.builtIn(for: data)?.codec.id }

  public func decode(_ data: [UInt8], variant: ImageVariant, maxPixels: UInt64) -> Result<Image, LoadError> {
    decode(data, variant: variant, maxPixels: maxPixels, cancel: nil)
  }

  /// The table's built-in formats' (under PXL_ISOLATION_ALL their headers are read in a
  /// worker; the scan boundaries are found here, by the library's own marker scanner).
  public func previewPrefix(_ data: [UInt8]) -> (length: Int, scans: Int)? {
    codecs.builtIn(for: data)?.native?.scans?.previewPrefix(data)
  }

  public func firstScansEnd(_ data: [UInt8], variants: [ImageVariant]) -> Int? {
    guard let native = codecs.builtIn(for: data)?.native, let scans = native.scans else { return nil }
    return scans.firstScansEnd(data, variants: variants, readInfo: native.readInfo)
  }

  public func decode(_ data: [UInt8], variant: ImageVariant, maxPixels: UInt64,
                     cancel: CancelFlag) -> Result<Image, LoadError> {
    decode(data, variant: variant, maxPixels: maxPixels, cancel: Optional(cancel))
  }

  /// The codec that takes `data` decodes it. The built-in formats do not poll `cancel`
  /// (their decodes are short); a registered codec does.
  private func decode(_ data: [UInt8], variant: ImageVariant, maxPixels: UInt64,
                      cancel: CancelFlag?) -> Result<Image, LoadError> {
    decodeWithCodec(data, variant: variant, maxPixels: maxPixels, cancel: cancel)
  }

  /// What a native decode of a file does, decided from its header (`nativePlan`): the
  /// orientation, size plan and colour step, and the (DCT-scaled) size the codec produces
  /// with the crop of it the plan keeps.
  struct NativePlan {
    let info: pxl_codec_info
    let orientation: Orientation
    let plan: SizePlan
    let color: ColorStep
    let scale: Int
    let decodedWidth: Int
    let decodedHeight: Int
    /// Crop rectangle in the decoded pixels.
    let crop: PixelRect
    let format: PixelFormat

    /// A thumbnail of a luma-only JPEG in a colour format: decoded, resampled and
    /// colour-managed as one channel, turned into the format's pixels at the end
    /// (`finishResampled`). What a colour decode gives (libjpeg's gray to RGB copies the
    /// luma into each channel, the resampler averages each channel alike), a quarter of
    /// the bytes written and averaged; the decode-only loop's libjpeg converts to RGBA.
    var resamplesGray: Bool {
      info.gray != 0 && (format.bytesPerPixel == 3 || format.bytesPerPixel == 4)
        && (color.conversion == nil || color.conversion?.needsColourPixels == false)
    }
    /// The layout and channels a thumbnail's rows are decoded and resampled in.
    var resampleLayout: pxl_codec_layout { resamplesGray ? PXL_CODEC_GRAY : color.decodeLayout }
    var resampleChannels: Int { resamplesGray ? 1 : color.decodeChannels }

    /// A thumbnail: rows stream from the decoder into the resampler, so neither the
    /// full-size nor the DCT-scaled bitmap is ever built.
    var resamples: Bool {
      plan.storedOutputWidth != decodedWidth || plan.storedOutputHeight != decodedHeight
        || !crop.isWhole(width: decodedWidth, height: decodedHeight)
    }
  }

  /// The plan of a native decode from the file's header (for a JPEG, its bytes up to the
  /// first scan are enough).
  static func nativePlan(_ bytes: UnsafeBufferPointer<UInt8>, native codec: NativeCodec, variant: ImageVariant,
                         maxPixels: UInt64) -> Result<NativePlan, LoadError> {
    let base = bytes.baseAddress!
    var info = pxl_codec_info()
    var message = [CChar](repeating: 0, count: 256)
    let infoStatus = codec.readInfo(base, bytes.count, &info, &message, message.count)
    if infoStatus != PXL_CODEC_OK {
      return .failure(Self.error(infoStatus, codec: codec, message: String(cString: message)))
    }
    let storedWidth = Int(info.width), storedHeight = Int(info.height)
    if UInt64(storedWidth) * UInt64(storedHeight) > maxPixels {
      return .failure(LoadError(.tooManyPixels,
        "\(storedWidth)x\(storedHeight) exceeds the limit of \(maxPixels) pixels"))
    }
    let orientation = variant.appliesOrientation ? Orientation(exif: Int(info.orientation)) : .up
    let plan = SizePlan(sourceWidth: storedWidth, sourceHeight: storedHeight, orientation: orientation,
                        targetWidth: variant.width, targetHeight: variant.height, mode: variant.mode)

    // Colour management on the decoded (for a thumbnail: resampled) pixels, before any
    // premultiplication. A GRAY result of an RGB-tagged file is decoded as RGB, converted,
    // then reduced to luma.
    let (conversion, colorWarning) = variant.managesColor ? ColorConversion.forFile(bytes, codec: codec) : (nil, nil)
    let color = ColorStep(conversion: conversion, warning: colorWarning, format: variant.format)
    // The size the decoder produces: the DCT-scaled size (ceil(stored / denominator)), or
    // the stored size.
    let scale = codec.scalesByDCT ? plan.dctScaleDenominator : 1
    let decodedWidth = (storedWidth + scale - 1) / scale, decodedHeight = (storedHeight + scale - 1) / scale
    let decodedCrop = plan.storedCrop.scaled(x: Double(decodedWidth) / Double(storedWidth),
                                             y: Double(decodedHeight) / Double(storedHeight))
    return .success(NativePlan(info: info, orientation: orientation, plan: plan, color: color, scale: scale,
                               decodedWidth: decodedWidth, decodedHeight: decodedHeight, crop: decodedCrop,
                               format: variant.format))
  }

  /// Decodes with a codec's native capabilities (a built-in format's).
  static func decode(_ bytes: UnsafeBufferPointer<UInt8>, native codec: NativeCodec, variant: ImageVariant,
                     maxPixels: UInt64) -> Result<Image, LoadError> {
    let native: NativePlan
    switch nativePlan(bytes, native: codec, variant: variant, maxPixels: maxPixels) {
    case .failure(let error): return .failure(error)
    case .success(let planned): native = planned
    }
    let info = native.info
    if variant.animates && info.frame_count > 1,
       let animated = Self.decodeAnimation(bytes, codec: codec, info: info, plan: native.plan, color: native.color,
                                           format: variant.format, orientation: native.orientation,
                                           maxPixels: maxPixels) {
      return animated
    }
    if native.resamples {
      return decodeResampled(bytes, codec: codec, native: native, maxPixels: maxPixels)
    }
    var output = pxl_codec_output()
    let decodeStatus = codec.decode(bytes.baseAddress!, bytes.count, Int32(native.color.decodeLayout.rawValue),
                                    Int32(native.scale), maxPixels, &output)
    return finishWhole(decodeStatus, &output, codec: codec, native: native)
  }

  /// The image of a whole (not resampled) native decode's output (taking its pixels).
  static func finishWhole(_ status: pxl_codec_status, _ output: inout pxl_codec_output, codec: NativeCodec,
                          native: NativePlan) -> Result<Image, LoadError> {
    if status != PXL_CODEC_OK {
      let text = withUnsafeBytes(of: &output.message) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
      PixelMemory.release(output.pixels)
      return .failure(Self.error(status, codec: codec, message: text))
    }
    let width = Int(output.width), height = Int(output.height)
    let channels = native.format.bytesPerPixel
    let premultiplies = channels == 4 && output.has_alpha != 0 && native.format.isPremultiplied
    var decoded = output.pixels!
    // Steps that write every pixel work on a buffer of their own, not on an isolated
    // decode's mapped pixels (PixelMemory); the rest keep the mapping as the image's.
    if native.color.conversion != nil || premultiplies {
      guard let owned = PixelMemory.owned(decoded, count: Int(output.stride) * height) else {
        PixelMemory.release(decoded)
        return .failure(LoadError(.noMemory, "out of memory for a \(width)x\(height) image"))
      }
      decoded = owned
    }
    let (pixels, warning) = native.color.apply(decoded, width: width, height: height, premultiplied: false)
    if premultiplies { PixelOps.premultiply(pixels, count: width * height) }
    return Self.counted(Self.finish(pixels, width: width, height: height, channels: channels,
                                    orientation: native.orientation, format: native.format, plan: native.plan,
                                    warning: warning),
                        native.info, incomplete: output.incomplete != 0)
  }

  /// Turns the stored-orientation output upright and wraps it (taking `pixels`).
  static func finish(_ pixels: UnsafeMutablePointer<UInt8>, width: Int, height: Int, channels: Int,
                             orientation: Orientation, format: PixelFormat, plan: SizePlan,
                             warning: String? = nil) -> Result<Image, LoadError> {
    var pixels = pixels, width = width, height = height
    if orientation != .up {
      guard let turned = orientation.apply(pixels, width: width, height: height, channels: channels) else {
        PixelMemory.release(pixels)
        return .failure(LoadError(.noMemory, "out of memory rotating"))
      }
      PixelMemory.release(pixels)
      pixels = turned
      if orientation.swapsAxes { swap(&width, &height) }
    }
    return .success(Image(width: width, height: height, stride: width * channels, format: format,
                          originalWidth: plan.displayWidth, originalHeight: plan.displayHeight,
                          takingPixels: pixels, warning: warning))
  }

  /// The area resampler a thumbnail's rows go into, or nil when memory runs out.
  static func resampler(for native: NativePlan) -> AreaResampler? {
    // Averaged in premultiplied space so transparent pixels do not darken their neighbours.
    AreaResampler(sourceWidth: native.decodedWidth, sourceHeight: native.decodedHeight,
                  channels: native.resampleChannels, crop: native.crop,
                  outputWidth: native.plan.storedOutputWidth, outputHeight: native.plan.storedOutputHeight,
                  premultiply: hasAlpha(native))
  }

  private static func hasAlpha(_ native: NativePlan) -> Bool {
    native.resampleChannels == 4 && native.info.has_alpha != 0
  }

  /// Decodes rows straight into an area resampler: the crop of the (DCT-scaled) image at
  /// the plan's stored output size.
  private static func decodeResampled(_ bytes: UnsafeBufferPointer<UInt8>, codec: NativeCodec, native: NativePlan,
                                      maxPixels: UInt64) -> Result<Image, LoadError> {
    let layout = native.resampleLayout
    guard let resampler = resampler(for: native) else {
      return .failure(LoadError(.noMemory, "out of memory resampling"))
    }
    var output = pxl_codec_output()
    let status = withExtendedLifetime(resampler) { () -> pxl_codec_status in
      if let decodeRegion = codec.decodeRegion {
        // Only the crop's pixels are built (a FILL thumbnail drops a quarter to a half of a
        // photo of another aspect ratio); the rest is entropy-decoded and checked, no more.
        let region = resampler.sourceRegion
        return decodeRegion(bytes.baseAddress!, bytes.count, Int32(layout.rawValue), Int32(native.scale), maxPixels,
                            region.x, region.y, region.width, region.height,
                            AreaResampler.regionRowFunction, resampler.context, &output)
      }
      return codec.decodeRows(bytes.baseAddress!, bytes.count, Int32(layout.rawValue), Int32(native.scale), maxPixels,
                              AreaResampler.rowFunction, resampler.context, &output)
    }
    return finishResampled(status, &output, resampler, codec: codec, native: native)
  }

  /// The thumbnail of a resampled native decode (`resampler` has its rows).
  static func finishResampled(_ status: pxl_codec_status, _ output: inout pxl_codec_output, _ resampler: AreaResampler,
                              codec: NativeCodec, native: NativePlan) -> Result<Image, LoadError> {
    if status != PXL_CODEC_OK {
      let text = withUnsafeBytes(of: &output.message) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
      return .failure(Self.error(status, codec: codec, message: text))
    }
    let plan = native.plan, format = native.format, hasAlpha = hasAlpha(native)
    guard Int(output.width) == native.decodedWidth && Int(output.height) == native.decodedHeight,
          let pixels = resampler.finish() else {
      return .failure(Self.error(PXL_CODEC_CORRUPT, codec: codec,
                                 message: "decoded \(output.width)x\(output.height), "
                                   + "expected \(native.decodedWidth)x\(native.decodedHeight)"))
    }
    let count = plan.storedOutputWidth * plan.storedOutputHeight
    if hasAlpha && !format.isPremultiplied { PixelOps.unpremultiply(pixels, count: count) }
    // Converted here, on the thumbnail, not row by row before the resampler: as many
    // conversions as output pixels instead of decoded ones (bench/color.c measures both).
    if native.resamplesGray {
      var (gray, warning) = (pixels, native.color.warning)
      if let conversion = native.color.conversion {
        (gray, warning) = conversion.convert(pixels, width: plan.storedOutputWidth, height: plan.storedOutputHeight,
                                             layout: PXL_CODEC_GRAY, premultiplied: false, toGray: false)
      }
      let expanded = pxl_gray_expand(gray, Int32(count), Int32(format.bytesPerPixel))
      PixelMemory.release(gray)
      guard let expanded else { return .failure(LoadError(.noMemory, "out of memory expanding gray")) }
      return Self.counted(Self.finish(expanded, width: plan.storedOutputWidth, height: plan.storedOutputHeight,
                                      channels: format.bytesPerPixel, orientation: native.orientation,
                                      format: format, plan: plan, warning: warning),
                          native.info, incomplete: output.incomplete != 0)
    }
    let (converted, warning) = native.color.apply(pixels, width: plan.storedOutputWidth,
                                                  height: plan.storedOutputHeight,
                                                  premultiplied: hasAlpha && format.isPremultiplied)
    return Self.counted(Self.finish(converted, width: plan.storedOutputWidth, height: plan.storedOutputHeight,
                                    channels: format.bytesPerPixel, orientation: native.orientation, format: format,
                                    plan: plan, warning: warning),
                        native.info, incomplete: output.incomplete != 0)
  }

  static func layout(for format: PixelFormat) -> pxl_codec_layout {
    switch format {
    case .rgba8, .rgba8Premultiplied: return PXL_CODEC_RGBA
    case .bgra8Premultiplied: return PXL_CODEC_BGRA
    case .rgb8: return PXL_CODEC_RGB
    case .gray8: return PXL_CODEC_GRAY
    }
  }

  static func error(_ status: pxl_codec_status, codec: NativeCodec, message: String) -> LoadError {
    let name = codec.name
    let detail = message.isEmpty ? "" : ": \(message)"
    switch status {
    case PXL_CODEC_TOO_MANY_PIXELS: return LoadError(.tooManyPixels, "\(name) too large\(detail)")
    case PXL_CODEC_UNSUPPORTED: return LoadError(.unsupportedImage, "unsupported \(name)\(detail)")
    case PXL_CODEC_NO_MEMORY: return LoadError(.noMemory, "out of memory decoding \(name)\(detail)")
    case PXL_CODEC_DECODER_FAILED: return LoadError(.decoderFailed, "\(name)\(detail)")
    default: return LoadError(.corruptImage, "corrupt \(name)\(detail)")
    }
  }

  /// A short, useful description of a body that is not an image (often an HTML error page).
  static func describeNonImage(_ data: [UInt8], codecs: [String] = []) -> String {
    if data.isEmpty { return "empty body is not an image" }
    let head = data.prefix(32).map { (0x20..<0x7F).contains($0) ? Character(UnicodeScalar($0)) : "." }
    let formats = (CodecTable.builtIns.compactMap { $0.native?.name } + codecs).joined(separator: ", ")
    return "body is none of \(formats) (\(data.count) bytes, starts with \"\(String(head))\")"
  }
}
