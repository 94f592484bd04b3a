import CCodecs
#if canImport(Glibc)
import Glibc
#endif

/// The conversion to sRGB one decode applies (pxl_codecs.h, "Colour management"): the
/// shared lcms2 transform for the colour information the file carries. Untagged and sRGB
/// files have none, and pay the reading of their header chunks only.
final class ColorConversion {
  private let transform: OpaquePointer

  private init(_ transform: OpaquePointer) { self.transform = transform }

  deinit { pxl_color_transform_release(transform) }

  /// The conversion for a file of `codec`, or nil (nothing to do, or the profile cannot be
  /// used: then `warning` says why and the decoded values are kept).
  static func forFile(_ bytes: UnsafeBufferPointer<UInt8>, codec: NativeCodec) -> (ColorConversion?, warning: String?) {
    guard let read = codec.color else { return (nil, nil) }
    var color = pxl_codec_color()
    defer { pxl_codec_color_free(&color) }
    let status = read(bytes.baseAddress, bytes.count, &color)
    // A file whose colour chunks cannot be read still decodes (or fails) on its own terms.
    guard status == PXL_CODEC_OK else { return (nil, nil) }
    return forColor(&color)
  }

  /// The conversion for the colour information `color` describes (a registered codec's
  /// ICC profile or nclx), or nil as `forFile`.
  static func forColor(_ color: inout pxl_codec_color) -> (ColorConversion?, warning: String?) {
    var message = [CChar](repeating: 0, count: 256)
    guard let transform = pxl_color_transform_get(&color, &message, message.count) else {
      let text = String(cString: message)
      return (nil, text.isEmpty ? nil : text)
    }
    return (ColorConversion(transform), nil)
  }

  /// An RGB profile cannot convert luma: a GRAY result is decoded as RGB, converted, and
  /// reduced to luma afterwards (`convert` does that).
  var needsColourPixels: Bool { pxl_color_transform_is_gray(transform) == 0 }

  /// Converts `pixels` (tightly packed, `layout`) in place; `toGray` with RGB pixels
  /// returns a new luma buffer instead and frees `pixels`. On failure the decoded values
  /// are kept (reduced to luma all the same) and the message is returned as a warning.
  func convert(_ pixels: UnsafeMutablePointer<UInt8>, width: Int, height: Int, layout: pxl_codec_layout,
               premultiplied: Bool, toGray: Bool) -> (UnsafeMutablePointer<UInt8>, warning: String?) {
    var message = [CChar](repeating: 0, count: 256)
    if toGray && layout == PXL_CODEC_RGB {
      guard let gray = malloc(max(width * height, 1))?.assumingMemoryBound(to: UInt8.self) else {
        return (pixels, "colour profile not applied: out of memory")
      }
      // Writes the luma even when the conversion fails (of the unconverted pixels then).
      let ok = pxl_color_transform_apply_gray(transform, pixels, Int32(width), Int32(height), gray, &message,
                                              message.count) != 0
      PixelMemory.release(pixels)
      return (gray, ok ? nil : String(cString: message))
    }
    let channels = layout == PXL_CODEC_RGB ? 3 : layout == PXL_CODEC_GRAY ? 1 : 4
    if pxl_color_transform_apply(transform, pixels, Int32(width), Int32(height), Int32(width * channels),
                                 Int32(layout.rawValue), premultiplied ? 1 : 0, &message, message.count) == 0 {
      return (pixels, String(cString: message))
    }
    return (pixels, nil)
  }
}

extension ColorConversion {
  /// For tests: lcms2 transforms built so far in this process.
  static var transformsBuilt: UInt64 { pxl_color_transforms_built() }
}

/// What one decode does about colour: the layout it decodes into (RGB for a GRAY result of
/// an RGB-tagged file), and the conversion of the decoded pixels into the requested format.
struct ColorStep {
  let conversion: ColorConversion?
  /// Set when the file's colour information could not be used.
  let warning: String?
  let format: PixelFormat

  private var grayThroughRGB: Bool { format == .gray8 && conversion?.needsColourPixels == true }

  var decodeLayout: pxl_codec_layout { grayThroughRGB ? PXL_CODEC_RGB : ImageDecoder.layout(for: format) }
  var decodeChannels: Int { grayThroughRGB ? 3 : format.bytesPerPixel }

  /// The decoded pixels (decodeLayout, tightly packed, straight alpha unless
  /// `premultiplied`) converted into `format`'s layout; takes `pixels`.
  func apply(_ pixels: UnsafeMutablePointer<UInt8>, width: Int, height: Int,
             premultiplied: Bool) -> (UnsafeMutablePointer<UInt8>, warning: String?) {
    guard let conversion else { return (pixels, warning) }
    return conversion.convert(pixels, width: width, height: height, layout: decodeLayout, premultiplied: premultiplied,
                              toGray: grayThroughRGB)
  }
}

extension pxl_codec_color {
  /// A malloc'd copy of `icc` as the profile (pxl_codec_color_free frees it); none when
  /// empty or out of memory.
  mutating func setICC(_ icc: [UInt8]) {
    guard !icc.isEmpty, let copy = malloc(icc.count)?.assumingMemoryBound(to: UInt8.self) else { return }
    copy.update(from: icc, count: icc.count)
    self.icc = copy
    icc_size = icc.count
  }
}
