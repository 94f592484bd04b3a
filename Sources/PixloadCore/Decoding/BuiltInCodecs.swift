import CCodecs
#if canImport(Glibc)
import Glibc
#endif

/// The built-in formats (JPEG through libjpeg-turbo, PNG through libpng, WebP through
/// libwebp, GIF through giflib, AVIF through libavif, all behind the CCodecs shims) as
/// codecs of the codec table: the one file that names a format's shim.
///
/// Each is a codec of pxl_codec's shape (`ExternalCodec`: sniff, header, ICC profile,
/// choose_size, decode, decode_frames), so whatever calls codecs through that interface
/// calls these too. The table holds them before any registered codec (`CodecTable.builtIns`),
/// with the stamp 0 and outside the signature: their pixels never depend on the modules
/// loaded. Each also carries a `NativeCodec`, the capabilities pxl_codec's shape lacks,
/// which the decode stage uses when a codec has them.
enum BuiltInCodecs {
  static let jpeg = BuiltInCodec(
    id: "jpeg",
    native: NativeCodec(name: "JPEG", readInfo: pxl_jpeg_read_info,
                        decode: { pxl_jpeg_decode($0, $1, $2, $3, $4, $5) },
                        decodeRows: { pxl_jpeg_decode_rows($0, $1, $2, $3, $4, $5, $6, $7) },
                        decodeRegion: pxl_jpeg_decode_region, color: pxl_jpeg_color, scalesByDCT: true,
                        scans: ScanPreviews(progressivePrefix: pxl_jpeg_progressive_prefix,
                                            firstScansEnd: pxl_jpeg_first_scans_end)),
    sniff: { $0.count >= 3 && $0[0] == 0xFF && $0[1] == 0xD8 && $0[2] == 0xFF })

  static let png = BuiltInCodec(
    id: "png",
    native: NativeCodec(name: "PNG", readInfo: pxl_png_read_info,
                        decode: { pxl_png_decode($0, $1, $2, $4, $5) },
                        decodeRows: { pxl_png_decode_rows($0, $1, $2, $4, $5, $6, $7) }, color: pxl_png_color),
    sniff: { $0.count >= 8 && $0[0..<8].elementsEqual([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) })

  static let webp = BuiltInCodec(
    id: "webp",
    native: NativeCodec(name: "WebP", readInfo: pxl_webp_read_info,
                        decode: { pxl_webp_decode($0, $1, $2, $4, $5) },
                        decodeRows: { pxl_webp_decode_rows($0, $1, $2, $4, $5, $6, $7) },
                        decodeFrames: pxl_webp_decode_frames, color: pxl_webp_color,
                        frames: FrameReading(open: pxl_webp_frames_open, next: pxl_webp_frames_next,
                                             close: pxl_webp_frames_close,
                                             firstDuration: pxl_webp_first_duration)),
    // RIFF container, any size, form type WEBP.
    sniff: { $0.count >= 12 && $0[0..<4].elementsEqual("RIFF".utf8) && $0[8..<12].elementsEqual("WEBP".utf8) })

  static let gif = BuiltInCodec(
    id: "gif",
    native: NativeCodec(name: "GIF", readInfo: pxl_gif_read_info,
                        decode: { pxl_gif_decode($0, $1, $2, $4, $5) },
                        decodeRows: { pxl_gif_decode_rows($0, $1, $2, $4, $5, $6, $7) },
                        decodeFrames: pxl_gif_decode_frames, color: pxl_gif_color,
                        frames: FrameReading(open: pxl_gif_frames_open, next: pxl_gif_frames_next,
                                             close: pxl_gif_frames_close,
                                             firstDuration: pxl_gif_first_duration)),
    sniff: { $0.count >= 6 && ($0[0..<6].elementsEqual("GIF87a".utf8) || $0[0..<6].elementsEqual("GIF89a".utf8)) })

  static let avif = BuiltInCodec(
    id: "avif",
    native: NativeCodec(name: "AVIF", readInfo: pxl_avif_read_info,
                        decode: { pxl_avif_decode($0, $1, $2, $4, $5) },
                        decodeRows: { pxl_avif_decode_rows($0, $1, $2, $4, $5, $6, $7) },
                        decodeFrames: pxl_avif_decode_frames, color: pxl_avif_color,
                        frames: FrameReading(open: pxl_avif_frames_open, next: pxl_avif_frames_next,
                                             close: pxl_avif_frames_close,
                                             firstDuration: pxl_avif_first_duration)),
    sniff: { isAVIF($0) })

  /// In pxl_loader_formats' order. Their sniffs never take the same bytes.
  static let all: [BuiltInCodec] = [jpeg, png, webp, gif, avif]

  /// ISO-BMFF whose leading "ftyp" box names the brand "avif" (still) or "avis"
  /// (sequence), as its major brand or a compatible one: the test libavif applies
  /// (avifPeekCompatibleFileType), done here on the bytes.
  static func isAVIF(_ data: UnsafeBufferPointer<UInt8>) -> Bool {
    guard data.count >= 16, data[4..<8].elementsEqual("ftyp".utf8) else { return false }
    let boxSize = Int(data[0]) << 24 | Int(data[1]) << 16 | Int(data[2]) << 8 | Int(data[3])
    guard boxSize >= 16 else { return false }
    let end = min(boxSize, data.count)
    func isBrand(at i: Int) -> Bool {
      data[i..<i + 4].elementsEqual("avif".utf8) || data[i..<i + 4].elementsEqual("avis".utf8)
    }
    if isBrand(at: 8) { return true }  // major brand; 12..<16 is the minor version
    var i = 16
    while i + 4 <= end {
      if isBrand(at: i) { return true }
      i += 4
    }
    return false
  }
}

/// What a built-in format's codec does beyond pxl_codec's shape, through its shim's own
/// entry points (pxl_codecs.h); the decode stage (`ImageDecoder.decode(_:native:...)`)
/// uses it whenever a codec has one:
/// - decode straight into the requested layout (RGBA, BGRA, RGB, GRAY), not RGBA only;
/// - decode row by row into the area resampler (`decodeRows`), so a thumbnail never builds
///   the full-size bitmap;
/// - JPEG: decode at 1/2, 1/4, 1/8 by DCT scaling (`scalesByDCT`; choose_size says as much),
///   and build only the rows and columns of a crop (`decodeRegion`), which pxl_codec's
///   decode cannot express;
/// - JPEG: previews and thumbnails from the first scans of a progressive file still
///   downloading (`scans`), which is not PXL_CODEC_PROGRESSIVE's "decode a prefix";
/// - the colour information in full (`color`: also PNG's sRGB, gAMA and cHRM, which
///   pxl_codec_header's ICC size and CICP code points do not carry);
/// - whether the file's data ended early (`pxl_codec_output.incomplete`).
struct NativeCodec: @unchecked Sendable {
  typealias Data = UnsafePointer<UInt8>?
  typealias Output = UnsafeMutablePointer<pxl_codec_output>?
  // Closures, not C function pointers: the shims' own functions in-process, or their
  // calls into a decode worker under PXL_ISOLATION_ALL (IsolatedBuiltIns.swift). Each is
  // callable from any thread (hence @unchecked Sendable).
  typealias ReadInfo = (Data, Int, UnsafeMutablePointer<pxl_codec_info>?, UnsafeMutablePointer<CChar>?,
                                  Int) -> pxl_codec_status
  /// (data, size, layout, scale denominator, max_pixels, out)
  typealias Decode = (Data, Int, Int32, Int32, UInt64, Output) -> pxl_codec_status
  /// (data, size, layout, scale denominator, max_pixels, row_fn, user, out)
  typealias DecodeRows = (Data, Int, Int32, Int32, UInt64, pxl_codec_row_fn?, UnsafeMutableRawPointer?,
                                    Output) -> pxl_codec_status
  /// (data, size, layout, scale denominator, max_pixels, x, y, width, height, row_fn, user, out)
  typealias DecodeRegion = (Data, Int, Int32, Int32, UInt64, Int32, Int32, Int32, Int32,
                                      pxl_codec_region_row_fn?, UnsafeMutableRawPointer?,
                                      Output) -> pxl_codec_status
  /// (data, size, max_pixels, frame_fn, user, out)
  typealias DecodeFrames = (Data, Int, UInt64, pxl_codec_frame_fn?, UnsafeMutableRawPointer?,
                                      Output) -> pxl_codec_status
  typealias ReadColor = (Data, Int, UnsafeMutablePointer<pxl_codec_color>?) -> pxl_codec_status

  /// The format's name in messages ("JPEG").
  let name: String
  let readInfo: ReadInfo
  /// The first frame, whole, into a layout, at 1/scale (scale 1 unless `scalesByDCT`).
  let decode: Decode
  /// The same, row by row to a row function.
  let decodeRows: DecodeRows
  /// Only the rows and columns of a region of the 1/scale image; nil: `decodeRows`.
  var decodeRegion: DecodeRegion? = nil
  /// Every composited frame of an animation; nil for formats that have none.
  var decodeFrames: DecodeFrames? = nil
  /// The colour information the file carries; nil: never colour-managed.
  var color: ReadColor? = nil
  /// A frame reader (pxl_codecs.h, "Frame readers") for animation players; nil: a player
  /// decodes every frame at once through `decodeFrames`.
  var frames: FrameReading? = nil
  /// Decodes at 1/2, 1/4 and 1/8 of the stored size (libjpeg's DCT scaling).
  var scalesByDCT = false
  /// Previews from the complete scans of a progressive file still downloading.
  var scans: ScanPreviews? = nil
}

/// Previews and early thumbnails from the first scans of a progressive JPEG still
/// downloading (`ImageDecoding.previewPrefix`, `firstScansEnd`).
struct FrameReading: @unchecked Sendable {
  // Closures, as NativeCodec's: the shims' readers in-process, or a decode worker's under
  // PXL_ISOLATION_ALL (IsolatedBuiltIns.swift). Callable from any thread.
  /// (data, size, max_pixels, &status, message, cap): the reader, or nil.
  let open: (NativeCodec.Data, Int, UInt64, UnsafeMutablePointer<pxl_codec_status>?,
             UnsafeMutablePointer<CChar>?, Int) -> OpaquePointer?
  let next: (OpaquePointer?, UnsafeMutablePointer<pxl_codec_frame>?) -> pxl_codec_status
  let close: (OpaquePointer?) -> Void
  /// (data, size): frame 0's duration without decoding it; -1 when unreadable.
  let firstDuration: (NativeCodec.Data, Int) -> Int32
}

struct ScanPreviews: Sendable {
  /// (data, size, &scans): the length of the longest prefix that ends after a complete scan.
  let progressivePrefix: @convention(c) (NativeCodec.Data, Int, UnsafeMutablePointer<Int32>?) -> Int
  /// (data, size, &width, &height): where the scans a 1/8 decode needs end, or 0.
  let firstScansEnd: @convention(c) (NativeCodec.Data, Int, UnsafeMutablePointer<Int32>?,
                                     UnsafeMutablePointer<Int32>?) -> Int

  func previewPrefix(_ data: [UInt8]) -> (length: Int, scans: Int)? {
    var scans: Int32 = 0
    let length = data.withUnsafeBufferPointer { progressivePrefix($0.baseAddress, $0.count, &scans) }
    return length > 0 ? (length, Int(scans)) : nil
  }

  /// The prefix of `data` that decodes every one of `variants` (each at 1/8) to the pixels
  /// the whole file would, or nil.
  func firstScansEnd(_ data: [UInt8], variants: [ImageVariant], readInfo: NativeCodec.ReadInfo) -> Int? {
    guard !variants.isEmpty, !variants.contains(where: { $0.width == 0 && $0.height == 0 }) else { return nil }
    return data.withUnsafeBufferPointer { bytes -> Int? in
      var width: Int32 = 0, height: Int32 = 0
      let end = firstScansEnd(bytes.baseAddress, bytes.count, &width, &height)
      guard end > 0 else { return nil }
      // The orientation (EXIF, in APP1 before the frame) decides how FILL crops.
      var info = pxl_codec_info()
      var message = [CChar](repeating: 0, count: 64)
      guard readInfo(bytes.baseAddress, end, &info, &message, message.count) == PXL_CODEC_OK else { return nil }
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

/// A built-in format's codec: pxl_codec's shape over its shim, and its `native` capabilities.
/// Built once per process; never destroyed.
final class BuiltInCodec: ExternalCodec, @unchecked Sendable {
  let id: String
  /// Not part of any key: a built-in format's pixels are the library's own (stamp 0).
  let version = "built-in"
  let native: NativeCodec
  let sniffer: @Sendable (UnsafeBufferPointer<UInt8>) -> Bool

  init(id: String, native: NativeCodec, sniff: @escaping @Sendable (UnsafeBufferPointer<UInt8>) -> Bool) {
    self.id = id
    self.native = native
    self.sniffer = sniff
  }

  var writesPremultiplied: Bool { false }
  /// JPEG's scan previews are `native.scans`, not a decode of any prefix.
  var isProgressive: Bool { false }
  var decodesFrames: Bool { native.decodeFrames != nil }
  var isScalable: Bool { false }

  func sniff(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool { sniffer(bytes) }

  /// The shim's status as a codec function's (what pxl_codec's functions return).
  static func failure(_ status: pxl_codec_status, _ message: String) -> CodecFailure {
    switch status {
    case PXL_CODEC_TOO_MANY_PIXELS: return CodecFailure(.tooManyPixels, message)
    case PXL_CODEC_UNSUPPORTED: return CodecFailure(.unsupportedImage, message)
    case PXL_CODEC_NO_MEMORY: return CodecFailure(.noMemory, message)
    default: return CodecFailure(.corruptImage, message)
    }
  }

  private func info(_ bytes: UnsafeBufferPointer<UInt8>) -> Result<pxl_codec_info, CodecFailure> {
    var info = pxl_codec_info()
    var message = [CChar](repeating: 0, count: 256)
    let status = native.readInfo(bytes.baseAddress, bytes.count, &info, &message, message.count)
    return status == PXL_CODEC_OK ? .success(info) : .failure(Self.failure(status, String(cString: message)))
  }

  /// What the shim's colour reader gives (`pxl_codec_color`, freed after `body`); nil
  /// when the format has none or the file's colour chunks cannot be read.
  private func withColor<T>(_ bytes: UnsafeBufferPointer<UInt8>, _ body: (pxl_codec_color) -> T?) -> T? {
    guard let read = native.color else { return nil }
    var color = pxl_codec_color()
    defer { pxl_codec_color_free(&color) }
    guard read(bytes.baseAddress, bytes.count, &color) == PXL_CODEC_OK else { return nil }
    return body(color)
  }

  /// The header from read_info; the ICC size and CICP code points from the colour reader
  /// (PNG's sRGB, gAMA and cHRM have no place here: `native.color` keeps them).
  func readHeader(_ bytes: UnsafeBufferPointer<UInt8>, keepOrientation: Bool) -> Result<CodecHeader, CodecFailure> {
    info(bytes).map { info in
      var header = withColor(bytes) { color in
        var header = CodecHeader()
        header.iccSize = color.icc == nil ? 0 : color.icc_size
        header.cicpPrimaries = color.cicp_primaries
        header.cicpTransfer = color.cicp_transfer
        header.cicpMatrix = color.cicp_matrix
        return header
      } ?? CodecHeader()
      header.width = Int(info.width)
      header.height = Int(info.height)
      header.frameCount = Int(max(1, info.frame_count))
      header.loopCount = Int(info.loop_count)
      header.orientation = Int(info.orientation)
      header.hasAlpha = info.has_alpha != 0
      return header
    }
  }

  func readICC(_ bytes: UnsafeBufferPointer<UInt8>, size: Int) -> [UInt8]? {
    withColor(bytes) { color in
      guard let icc = color.icc, color.icc_size == size else { return nil }
      return Array(UnsafeBufferPointer(start: icc, count: size))
    }
  }

  /// JPEG: the smallest DCT-scaled size that still covers the request.
  func chooseSize(_ bytes: UnsafeBufferPointer<UInt8>, keepOrientation: Bool, width: Int,
                  height: Int) -> (width: Int, height: Int)? {
    guard native.scalesByDCT, case .success(let info) = info(bytes) else { return nil }
    for scale in [8, 4, 2] {
      let scaled = Self.scaled(info, scale)
      if scaled.width >= width && scaled.height >= height { return scaled }
    }
    return nil
  }

  private static func scaled(_ info: pxl_codec_info, _ scale: Int) -> (width: Int, height: Int) {
    ((Int(info.width) + scale - 1) / scale, (Int(info.height) + scale - 1) / scale)
  }

  func decode(_ bytes: UnsafeBufferPointer<UInt8>, into target: CodecTarget) -> CodecFailure? {
    let info: pxl_codec_info
    switch self.info(bytes) {
    case .failure(let failure): return failure
    case .success(let read): info = read
    }
    guard let scale = (native.scalesByDCT ? [1, 2, 4, 8] : [1]).first(where: {
      Self.scaled(info, $0) == (target.width, target.height)
    }) else {
      return CodecFailure(.unsupportedImage, "\(native.name) does not draw at \(target.width)x\(target.height)")
    }
    var output = pxl_codec_output()
    let status = native.decode(bytes.baseAddress, bytes.count, Int32(PXL_CODEC_RGBA.rawValue), Int32(scale),
                               UInt64(info.width) * UInt64(info.height), &output)
    defer { PixelMemory.release(output.pixels) }
    guard status == PXL_CODEC_OK, let pixels = output.pixels else {
      let text = withUnsafeBytes(of: &output.message) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
      return Self.failure(status == PXL_CODEC_OK ? PXL_CODEC_CORRUPT : status, text)
    }
    guard Int(output.width) == target.width, Int(output.height) == target.height else {
      return CodecFailure(.corruptImage,
                          "decoded \(output.width)x\(output.height), expected \(target.width)x\(target.height)")
    }
    for y in 0..<target.height {
      (target.pixels + y * target.stride).update(from: pixels + y * Int(output.stride), count: target.width * 4)
    }
    return nil
  }

  func decodeFrames(_ bytes: UnsafeBufferPointer<UInt8>, into target: CodecTarget,
                    frameDone: (Int) -> Bool) -> CodecFailure? {
    guard let frames = native.decodeFrames else {
      return CodecFailure(.unsupportedImage, "\(native.name) has no frames")
    }
    return withoutActuallyEscaping(frameDone) { frameDone in
      let sink = Sink(target, frameDone)
      var output = pxl_codec_output()
      let status = withExtendedLifetime(sink) {
        frames(bytes.baseAddress, bytes.count, UInt64(target.width) * UInt64(target.height), Self.frameFunction,
               Unmanaged.passUnretained(sink).toOpaque(), &output)
      }
      if status == PXL_CODEC_OK { return nil }
      let text = withUnsafeBytes(of: &output.message) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
      return Self.failure(status, text)
    }
  }

  /// Where `decodeFrames` puts each composited frame, and whom it tells.
  private final class Sink {
    let target: CodecTarget
    let frameDone: (Int) -> Bool
    init(_ target: CodecTarget, _ frameDone: @escaping (Int) -> Bool) {
      self.target = target
      self.frameDone = frameDone
    }
  }

  /// Copies a frame into the target's buffer and calls frame_done (non-zero: stop).
  private static let frameFunction: pxl_codec_frame_fn = { user, _, rgba, stride, duration in
    let sink = Unmanaged<Sink>.fromOpaque(user!).takeUnretainedValue()
    let target = sink.target
    for y in 0..<target.height {
      (target.pixels + y * target.stride).update(from: rgba! + y * Int(stride), count: target.width * 4)
    }
    return sink.frameDone(Int(duration)) ? 0 : 1
  }

  func destroy() {}
}
