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

  public func previewPrefix(_ data: [UInt8]) -> (length: Int, scans: Int)? {
    var scans: Int32 = 0
    let length = data.withUnsafeBufferPointer { pxl_jpeg_progressive_prefix($0.baseAddress, $0.count, &scans) }
    return length > 0 ? (length, Int(scans)) : nil
  }

  public func firstScansEnd(_ data: [UInt8], variants: [ImageVariant]) -> Int? {
    guard !variants.isEmpty, !variants.contains(where: { $0.width == 0 && $0.height == 0 }) else { return nil }
    return data.withUnsafeBufferPointer { bytes -> Int? in
      var width: Int32 = 0, height: Int32 = 0
      let end = pxl_jpeg_first_scans_end(bytes.baseAddress, bytes.count, &width, &height)
      guard end > 0 else { return nil }
      // The orientation (EXIF, in APP1 before the frame) decides how FILL crops.
      var info = pxl_codec_info()
      var message = [CChar](repeating: 0, count: 64)
      guard pxl_jpeg_read_info(bytes.baseAddress, end, &info, &message, message.count) == PXL_CODEC_OK else { return nil }
      for variant in variants {
        let orientation = variant.appliesOrientation ? Orientation(exif: Int(info.orientation)) : .up
        let plan = SizePlan(sourceWidth: Int(width), sourceHeight: Int(height), orientation: orientation,
                            targetWidth: variant.width, targetHeight: variant.height, mode: variant.mode)
        if plan.dctScaleDenominator != 8 { return nil }
      }
      return end
    }
  }

  /// The first `length` bytes of a progressive JPEG (a `previewPrefix` or `firstScansEnd`)
  /// as a file of their own: with an EOI, libjpeg then shows the coefficients it has,
  /// without a warning.
  public func scansPrefix(_ data: [UInt8], length: Int) -> [UInt8] {
    Array(data[0..<length]) + [0xFF, 0xD9]
  }
}

/// The real decoder: JPEG through libjpeg-turbo, PNG through libpng, WebP through libwebp
/// (all behind the CCodecs shims), chosen by magic bytes, never by URL or Content-Type.
///
/// A thumbnail of a JPEG is decoded at the smallest DCT scale (1/2, 1/4, 1/8) that still
/// covers the target, so the full-size bitmap is never built; then an area-averaging
/// resample brings it to the exact size, and EXIF orientation is applied last, on the
/// small image.
public struct ImageDecoder: ImageDecoding {
  /// The codecs registered with the loader, tried after the built-in formats
  /// (ImageDecoder+Codecs.swift); nil: none.
  let codecs: CodecTable?

  public init(codecs: CodecTable? = nil) { self.codecs = codecs }

  public enum Kind: CaseIterable { case jpeg, png, webp, avif, gif }

  /// The short names of the built-in formats, in pxl_loader_formats' order.
  public static let builtInFormats = ["jpeg", "png", "webp", "gif", "avif"]

  /// The format by magic bytes, or nil.
  public static func sniff(_ data: [UInt8]) -> Kind? {
    if data.count >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF { return .jpeg }
    let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    if data.count >= 8 && data[0..<8].elementsEqual(png) { return .png }
    if isAVIF(data) { return .avif }
    if data.count >= 6 && (data[0..<6].elementsEqual("GIF87a".utf8) || data[0..<6].elementsEqual("GIF89a".utf8)) {
      return .gif
    }
    // RIFF container, any size, form type WEBP.
    if data.count >= 12 && data[0..<4].elementsEqual("RIFF".utf8) && data[8..<12].elementsEqual("WEBP".utf8) {
      return .webp
    }
    return nil
  }

  /// ISO-BMFF whose leading "ftyp" box names the brand "avif" (still) or "avis"
  /// (sequence), as its major brand or a compatible one: the test libavif applies
  /// (avifPeekCompatibleFileType), done here on the bytes.
  static func isAVIF(_ data: [UInt8]) -> Bool {
    guard data.count >= 16, data[4..<8].elementsEqual("ftyp".utf8) else { return false }
    let boxSize = Int(data[0]) << 24 | Int(data[1]) << 16 | Int(data[2]) << 8 | Int(data[3])
    guard boxSize >= 16 else { return false }
    let end = min(boxSize, data.count)
    func isBrand(at i: Int) -> Bool { data[i..<i + 4].elementsEqual("avif".utf8) || data[i..<i + 4].elementsEqual("avis".utf8) }
    if isBrand(at: 8) { return true }  // major brand; 12..<16 is the minor version
    var i = 16
    while i + 4 <= end {
      if isBrand(at: i) { return true }
      i += 4
    }
    return false
  }

  /// How one format's shim is called. JPEG has DCT scaling and region decodes of its own
  /// (`decode(_:kind:...)` below); every other format decodes whole into a layout, or row
  /// by row into the resampler for a thumbnail (pxl_codecs.h: the per-format functions).
  struct Codec {
    typealias ReadInfo = (UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<pxl_codec_info>?,
                          UnsafeMutablePointer<CChar>?, Int) -> pxl_codec_status
    typealias Decode = (UnsafePointer<UInt8>?, Int, Int32, UInt64, UnsafeMutablePointer<pxl_codec_output>?)
      -> pxl_codec_status
    typealias DecodeRows = (UnsafePointer<UInt8>?, Int, Int32, UInt64, pxl_codec_row_fn?, UnsafeMutableRawPointer?,
                            UnsafeMutablePointer<pxl_codec_output>?) -> pxl_codec_status
    typealias DecodeFrames = (UnsafePointer<UInt8>?, Int, UInt64, pxl_codec_frame_fn?, UnsafeMutableRawPointer?,
                              UnsafeMutablePointer<pxl_codec_output>?) -> pxl_codec_status
    typealias ReadColor = (UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<pxl_codec_color>?) -> pxl_codec_status
    let name: String
    let readInfo: ReadInfo
    let decode: Decode
    let decodeRows: DecodeRows
    /// Every composited frame of an animation; nil for formats that have none.
    var decodeFrames: DecodeFrames? = nil
    /// The colour information the file carries (pxl_X_color); nil: never colour-managed.
    var color: ReadColor? = nil
  }

  static func codec(_ kind: Kind) -> Codec {
    switch kind {
    case .jpeg:
      return Codec(name: "JPEG", readInfo: pxl_jpeg_read_info,
                   decode: { pxl_jpeg_decode($0, $1, $2, 1, $3, $4) },
                   decodeRows: { pxl_jpeg_decode_rows($0, $1, $2, 1, $3, $4, $5, $6) }, color: pxl_jpeg_color)
    case .png:
      return Codec(name: "PNG", readInfo: pxl_png_read_info, decode: pxl_png_decode, decodeRows: pxl_png_decode_rows,
                   color: pxl_png_color)
    case .avif:
      return Codec(name: "AVIF", readInfo: pxl_avif_read_info, decode: pxl_avif_decode,
                   decodeRows: pxl_avif_decode_rows, decodeFrames: pxl_avif_decode_frames, color: pxl_avif_color)
    case .gif:
      return Codec(name: "GIF", readInfo: pxl_gif_read_info, decode: pxl_gif_decode, decodeRows: pxl_gif_decode_rows,
                   decodeFrames: pxl_gif_decode_frames, color: pxl_gif_color)
    case .webp:
      return Codec(name: "WebP", readInfo: pxl_webp_read_info, decode: pxl_webp_decode,
                   decodeRows: pxl_webp_decode_rows, decodeFrames: pxl_webp_decode_frames, color: pxl_webp_color)
    }
  }

  public func decode(_ data: [UInt8], variant: ImageVariant, maxPixels: UInt64) -> Result<Image, LoadError> {
    decode(data, variant: variant, maxPixels: maxPixels, cancel: nil)
  }

  public func decode(_ data: [UInt8], variant: ImageVariant, maxPixels: UInt64,
                     cancel: CancelFlag) -> Result<Image, LoadError> {
    decode(data, variant: variant, maxPixels: maxPixels, cancel: Optional(cancel))
  }

  /// The built-in formats do not poll `cancel` (their decodes are short); a codec does.
  private func decode(_ data: [UInt8], variant: ImageVariant, maxPixels: UInt64,
                      cancel: CancelFlag?) -> Result<Image, LoadError> {
    guard let kind = Self.sniff(data) else {
      return decodeWithCodec(data, variant: variant, maxPixels: maxPixels, cancel: cancel)
    }
    return data.withUnsafeBufferPointer { bytes in
      decode(bytes, kind: kind, variant: variant, maxPixels: maxPixels)
    }
  }

  private func decode(_ bytes: UnsafeBufferPointer<UInt8>, kind: Kind, variant: ImageVariant,
                      maxPixels: UInt64) -> Result<Image, LoadError> {
    let base = bytes.baseAddress!
    var info = pxl_codec_info()
    var message = [CChar](repeating: 0, count: 256)
    let codec = Self.codec(kind)
    let infoStatus = codec.readInfo(base, bytes.count, &info, &message, message.count)
    if infoStatus != PXL_CODEC_OK {
      return .failure(Self.error(infoStatus, kind: kind, message: String(cString: message)))
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
    if variant.animates && info.frame_count > 1,
       let animated = Self.decodeAnimation(bytes, kind: kind, info: info, plan: plan, color: color,
                                           format: variant.format, orientation: orientation, maxPixels: maxPixels) {
      return animated
    }
    let layout = color.decodeLayout
    // The size the decoder produces: libjpeg's DCT-scaled size (ceil(stored / denominator)),
    // or the stored size.
    let scale = kind == .jpeg ? plan.dctScaleDenominator : 1
    let decodedWidth = (storedWidth + scale - 1) / scale, decodedHeight = (storedHeight + scale - 1) / scale
    // Crop rectangle in the decoded pixels.
    let decodedCrop = plan.storedCrop.scaled(x: Double(decodedWidth) / Double(storedWidth),
                                             y: Double(decodedHeight) / Double(storedHeight))
    if plan.storedOutputWidth != decodedWidth || plan.storedOutputHeight != decodedHeight
        || !decodedCrop.isWhole(width: decodedWidth, height: decodedHeight) {
      // A thumbnail: rows stream from the decoder into the resampler, so neither the
      // full-size nor the DCT-scaled bitmap is ever built.
      return decodeResampled(bytes, kind: kind, info: info, scale: scale, decodedWidth: decodedWidth,
                             decodedHeight: decodedHeight, crop: decodedCrop, plan: plan, color: color,
                             format: variant.format, orientation: orientation, maxPixels: maxPixels)
    }
    var output = pxl_codec_output()
    let decodeStatus: pxl_codec_status
    if kind == .jpeg {
      decodeStatus = pxl_jpeg_decode(base, bytes.count, Int32(layout.rawValue), Int32(plan.dctScaleDenominator),
                                     maxPixels, &output)
    } else {
      decodeStatus = codec.decode(base, bytes.count, Int32(layout.rawValue), maxPixels, &output)
    }
    if decodeStatus != PXL_CODEC_OK {
      let text = withUnsafeBytes(of: &output.message) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
      free(output.pixels)
      return .failure(Self.error(decodeStatus, kind: kind, message: text))
    }

    let width = Int(output.width), height = Int(output.height)
    let (pixels, warning) = color.apply(output.pixels!, width: width, height: height, premultiplied: false)
    let channels = variant.format.bytesPerPixel
    if channels == 4 && output.has_alpha != 0 && variant.format.isPremultiplied {
      PixelOps.premultiply(pixels, count: width * height)
    }
    return Self.counted(Self.finish(pixels, width: width, height: height, channels: channels,
                                    orientation: orientation, format: variant.format, plan: plan, warning: warning),
                        info, incomplete: output.incomplete != 0)
  }

  /// Turns the stored-orientation output upright and wraps it (taking `pixels`).
  private static func finish(_ pixels: UnsafeMutablePointer<UInt8>, width: Int, height: Int, channels: Int,
                             orientation: Orientation, format: PixelFormat, plan: SizePlan,
                             warning: String? = nil) -> Result<Image, LoadError> {
    var pixels = pixels, width = width, height = height
    if orientation != .up {
      guard let turned = orientation.apply(pixels, width: width, height: height, channels: channels) else {
        free(pixels)
        return .failure(LoadError(.noMemory, "out of memory rotating"))
      }
      free(pixels)
      pixels = turned
      if orientation.swapsAxes { swap(&width, &height) }
    }
    return .success(Image(width: width, height: height, stride: width * channels, format: format,
                          originalWidth: plan.displayWidth, originalHeight: plan.displayHeight,
                          takingPixels: pixels, warning: warning))
  }

  /// Decodes rows straight into an area resampler: the crop of the (DCT-scaled, for JPEG)
  /// image at the plan's stored output size.
  private func decodeResampled(_ bytes: UnsafeBufferPointer<UInt8>, kind: Kind, info: pxl_codec_info, scale: Int,
                               decodedWidth: Int, decodedHeight: Int, crop: PixelRect, plan: SizePlan,
                               color: ColorStep, format: PixelFormat, orientation: Orientation,
                               maxPixels: UInt64) -> Result<Image, LoadError> {
    let layout = color.decodeLayout
    let channels = color.decodeChannels
    // Averaged in premultiplied space so transparent pixels do not darken their neighbours.
    let hasAlpha = kind != .jpeg && channels == 4 && info.has_alpha != 0
    guard let resampler = AreaResampler(sourceWidth: decodedWidth, sourceHeight: decodedHeight, channels: channels,
                                        crop: crop, outputWidth: plan.storedOutputWidth,
                                        outputHeight: plan.storedOutputHeight, premultiply: hasAlpha) else {
      return .failure(LoadError(.noMemory, "out of memory resampling"))
    }
    var output = pxl_codec_output()
    let status = withExtendedLifetime(resampler) { () -> pxl_codec_status in
      if kind == .jpeg {
        // Only the crop's pixels are built (a FILL thumbnail drops a quarter to a half of a
        // photo of another aspect ratio); the rest is entropy-decoded and checked, no more.
        let region = resampler.sourceRegion
        return pxl_jpeg_decode_region(bytes.baseAddress!, bytes.count, Int32(layout.rawValue), Int32(scale), maxPixels,
                                      region.x, region.y, region.width, region.height,
                                      AreaResampler.regionRowFunction, resampler.context, &output)
      }
      return Self.codec(kind).decodeRows(bytes.baseAddress!, bytes.count, Int32(layout.rawValue), maxPixels,
                                         AreaResampler.rowFunction, resampler.context, &output)
    }
    if status != PXL_CODEC_OK {
      let text = withUnsafeBytes(of: &output.message) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
      return .failure(Self.error(status, kind: kind, message: text))
    }
    guard Int(output.width) == decodedWidth && Int(output.height) == decodedHeight,
          let pixels = resampler.finish() else {
      return .failure(Self.error(PXL_CODEC_CORRUPT, kind: kind,
                                 message: "decoded \(output.width)x\(output.height), expected \(decodedWidth)x\(decodedHeight)"))
    }
    let count = plan.storedOutputWidth * plan.storedOutputHeight
    if hasAlpha && !format.isPremultiplied { PixelOps.unpremultiply(pixels, count: count) }
    // Converted here, on the thumbnail, not row by row before the resampler: as many
    // conversions as output pixels instead of decoded ones (bench/color.c measures both).
    let (converted, warning) = color.apply(pixels, width: plan.storedOutputWidth, height: plan.storedOutputHeight,
                                           premultiplied: hasAlpha && format.isPremultiplied)
    return Self.counted(Self.finish(converted, width: plan.storedOutputWidth, height: plan.storedOutputHeight,
                                    channels: format.bytesPerPixel, orientation: orientation, format: format,
                                    plan: plan, warning: warning),
                        info, incomplete: output.incomplete != 0)
  }

  static func layout(for format: PixelFormat) -> pxl_codec_layout {
    switch format {
    case .rgba8, .rgba8Premultiplied: return PXL_CODEC_RGBA
    case .bgra8Premultiplied: return PXL_CODEC_BGRA
    case .rgb8: return PXL_CODEC_RGB
    case .gray8: return PXL_CODEC_GRAY
    }
  }

  static func error(_ status: pxl_codec_status, kind: Kind, message: String) -> LoadError {
    let name = codec(kind).name
    let detail = message.isEmpty ? "" : ": \(message)"
    switch status {
    case PXL_CODEC_TOO_MANY_PIXELS: return LoadError(.tooManyPixels, "\(name) too large\(detail)")
    case PXL_CODEC_UNSUPPORTED: return LoadError(.unsupportedImage, "unsupported \(name)\(detail)")
    case PXL_CODEC_NO_MEMORY: return LoadError(.noMemory, "out of memory decoding \(name)\(detail)")
    default: return LoadError(.corruptImage, "corrupt \(name)\(detail)")
    }
  }

  /// A short, useful description of a body that is not an image (often an HTML error page).
  static func describeNonImage(_ data: [UInt8], codecs: [String] = []) -> String {
    if data.isEmpty { return "empty body is not an image" }
    let head = data.prefix(32).map { (0x20..<0x7F).contains($0) ? Character(UnicodeScalar($0)) : "." }
    let formats = (Kind.allCases.map { codec($0).name } + codecs).joined(separator: ", ")
    return "body is none of \(formats) (\(data.count) bytes, starts with \"\(String(head))\")"
  }
}
