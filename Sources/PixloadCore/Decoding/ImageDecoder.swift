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
  /// For previews: the length of the longest prefix of a progressive JPEG still
  /// downloading that ends after a complete scan, and its scan count; nil for anything
  /// else (baseline JPEG, PNG, no complete scan yet).
  func previewPrefix(_ data: [UInt8]) -> (length: Int, scans: Int)?
  /// For ending a thumbnail's transfer early: the length of a prefix of a progressive
  /// JPEG still downloading that decodes every one of `variants` to the same pixels as
  /// the whole file would (each is decoded at 1/8 scale from its first scans); nil while
  /// more is needed, or when a variant needs the rest.
  func firstScansEnd(_ data: [UInt8], variants: [ImageVariant]) -> Int?
}

extension ImageDecoding {
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
}

/// The real decoder: JPEG through libjpeg-turbo, PNG through libpng (both behind the
/// CCodecs shim), chosen by magic bytes, never by URL or Content-Type.
///
/// A thumbnail of a JPEG is decoded at the smallest DCT scale (1/2, 1/4, 1/8) that still
/// covers the target, so the full-size bitmap is never built; then an area-averaging
/// resample brings it to the exact size, and EXIF orientation is applied last, on the
/// small image.
public struct ImageDecoder: ImageDecoding {
  public init() {}

  public enum Kind { case jpeg, png }

  /// The format by magic bytes, or nil.
  public static func sniff(_ data: [UInt8]) -> Kind? {
    if data.count >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF { return .jpeg }
    let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    if data.count >= 8 && data[0..<8].elementsEqual(png) { return .png }
    return nil
  }

  public func decode(_ data: [UInt8], variant: ImageVariant, maxPixels: UInt64) -> Result<Image, LoadError> {
    guard let kind = Self.sniff(data) else {
      return .failure(LoadError(.notAnImage, Self.describeNonImage(data)))
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
    let infoStatus = kind == .jpeg
      ? pxl_jpeg_read_info(base, bytes.count, &info, &message, message.count)
      : pxl_png_read_info(base, bytes.count, &info, &message, message.count)
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

    let layout = Self.layout(for: variant.format)
    let wholeSource = plan.storedOutputWidth == storedWidth && plan.storedOutputHeight == storedHeight
      && plan.storedCrop.isWhole(width: storedWidth, height: storedHeight)
    if kind == .png && !wholeSource {
      // A PNG thumbnail: rows stream from libpng into the resampler, so the full-size
      // bitmap never exists.
      return decodePNGThumbnail(bytes, info: info, plan: plan, layout: layout, format: variant.format,
                                orientation: orientation, maxPixels: maxPixels)
    }
    var output = pxl_codec_output()
    let decodeStatus: pxl_codec_status
    if kind == .jpeg {
      decodeStatus = pxl_jpeg_decode(base, bytes.count, Int32(layout.rawValue), Int32(plan.dctScaleDenominator),
                                     maxPixels, &output)
    } else {
      decodeStatus = pxl_png_decode(base, bytes.count, Int32(layout.rawValue), maxPixels, &output)
    }
    if decodeStatus != PXL_CODEC_OK {
      let text = withUnsafeBytes(of: &output.message) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
      free(output.pixels)
      return .failure(Self.error(decodeStatus, kind: kind, message: text))
    }

    var pixels = output.pixels!
    var width = Int(output.width), height = Int(output.height)
    let channels = Int(output.channels)
    let hasAlpha = channels == 4 && output.has_alpha != 0
    let premultiply = hasAlpha && variant.format.isPremultiplied

    // Crop rectangle in the decoded buffer's pixels (it may be DCT-scaled).
    let crop = plan.storedCrop.scaled(x: Double(width) / Double(storedWidth),
                                      y: Double(height) / Double(storedHeight))
    let needsResample = plan.storedOutputWidth != width || plan.storedOutputHeight != height
      || !crop.isWhole(width: width, height: height)
    if needsResample {
      // Average in premultiplied space so transparent pixels do not darken their
      // neighbours' edges.
      if hasAlpha { PixelOps.premultiply(pixels, count: width * height) }
      guard let resampled = AreaResampler.resample(
        source: pixels, width: width, height: height, channels: channels, crop: crop,
        outputWidth: plan.storedOutputWidth, outputHeight: plan.storedOutputHeight) else {
        free(pixels)
        return .failure(LoadError(.noMemory, "out of memory resampling"))
      }
      free(pixels)
      pixels = resampled
      width = plan.storedOutputWidth
      height = plan.storedOutputHeight
      if hasAlpha && !premultiply { PixelOps.unpremultiply(pixels, count: width * height) }
    } else if premultiply {
      PixelOps.premultiply(pixels, count: width * height)
    }

    return Self.finish(pixels, width: width, height: height, channels: channels, orientation: orientation,
                       format: variant.format, plan: plan)
  }

  /// Turns the stored-orientation output upright and wraps it (taking `pixels`).
  private static func finish(_ pixels: UnsafeMutablePointer<UInt8>, width: Int, height: Int, channels: Int,
                             orientation: Orientation, format: PixelFormat, plan: SizePlan) -> Result<Image, LoadError> {
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
                          takingPixels: pixels))
  }

  /// What the row callback needs: the resampler, and a scratch row to premultiply into
  /// (libpng's row is read-only to us).
  private final class RowSink {
    let resampler: AreaResampler
    let premultiplies: Bool
    let scratch: UnsafeMutablePointer<UInt8>
    let rowBytes: Int
    init(resampler: AreaResampler, premultiplies: Bool, rowBytes: Int) {
      self.resampler = resampler
      self.premultiplies = premultiplies
      self.rowBytes = rowBytes
      scratch = .allocate(capacity: max(1, rowBytes))
    }
    deinit { scratch.deallocate() }
  }

  private func decodePNGThumbnail(_ bytes: UnsafeBufferPointer<UInt8>, info: pxl_codec_info, plan: SizePlan,
                                  layout: pxl_codec_layout, format: PixelFormat, orientation: Orientation,
                                  maxPixels: UInt64) -> Result<Image, LoadError> {
    let width = Int(info.width), height = Int(info.height)
    let channels = format.bytesPerPixel
    let hasAlpha = channels == 4 && info.has_alpha != 0
    guard let resampler = AreaResampler(sourceWidth: width, sourceHeight: height, channels: channels,
                                        crop: plan.storedCrop, outputWidth: plan.storedOutputWidth,
                                        outputHeight: plan.storedOutputHeight) else {
      return .failure(LoadError(.noMemory, "out of memory resampling"))
    }
    let sink = RowSink(resampler: resampler, premultiplies: hasAlpha, rowBytes: width * channels)
    var output = pxl_codec_output()
    let status = withExtendedLifetime(sink) {
      pxl_png_decode_rows(bytes.baseAddress!, bytes.count, Int32(layout.rawValue), maxPixels, { user, y, row in
        let sink = Unmanaged<RowSink>.fromOpaque(user!).takeUnretainedValue()
        if sink.premultiplies {
          // Averaged in premultiplied space so transparent pixels do not darken edges.
          sink.scratch.update(from: row!, count: sink.rowBytes)
          PixelOps.premultiply(sink.scratch, count: sink.rowBytes / 4)
          sink.resampler.addRow(Int(y), sink.scratch)
        } else {
          sink.resampler.addRow(Int(y), row!)
        }
        return 0
      }, Unmanaged.passUnretained(sink).toOpaque(), &output)
    }
    if status != PXL_CODEC_OK {
      let text = withUnsafeBytes(of: &output.message) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
      return .failure(Self.error(status, kind: .png, message: text))
    }
    guard let pixels = resampler.finish() else { return .failure(LoadError(.noMemory, "out of memory resampling")) }
    let count = plan.storedOutputWidth * plan.storedOutputHeight
    if hasAlpha && !format.isPremultiplied { PixelOps.unpremultiply(pixels, count: count) }
    return Self.finish(pixels, width: plan.storedOutputWidth, height: plan.storedOutputHeight, channels: channels,
                       orientation: orientation, format: format, plan: plan)
  }

  private static func layout(for format: PixelFormat) -> pxl_codec_layout {
    switch format {
    case .rgba8, .rgba8Premultiplied: return PXL_CODEC_RGBA
    case .bgra8Premultiplied: return PXL_CODEC_BGRA
    case .rgb8: return PXL_CODEC_RGB
    case .gray8: return PXL_CODEC_GRAY
    }
  }

  private static func error(_ status: pxl_codec_status, kind: Kind, message: String) -> LoadError {
    let name = kind == .jpeg ? "JPEG" : "PNG"
    let detail = message.isEmpty ? "" : ": \(message)"
    switch status {
    case PXL_CODEC_TOO_MANY_PIXELS: return LoadError(.tooManyPixels, "\(name) too large\(detail)")
    case PXL_CODEC_UNSUPPORTED: return LoadError(.unsupportedImage, "unsupported \(name)\(detail)")
    case PXL_CODEC_NO_MEMORY: return LoadError(.noMemory, "out of memory decoding \(name)\(detail)")
    default: return LoadError(.corruptImage, "corrupt \(name)\(detail)")
    }
  }

  /// A short, useful description of a body that is not an image (often an HTML error page).
  static func describeNonImage(_ data: [UInt8]) -> String {
    if data.isEmpty { return "empty body is not an image" }
    let head = data.prefix(32).map { (0x20..<0x7F).contains($0) ? Character(UnicodeScalar($0)) : "." }
    return "body is neither JPEG nor PNG (\(data.count) bytes, starts with \"\(String(head))\")"
  }
}
