import CCodecs
#if canImport(Glibc)
import Glibc
#endif

/// A JPEG, PNG or still WebP decode fed as its download's bytes arrive
/// (`ImageDecoder.streamingDecode`), so that little is left to decode once the last byte
/// is in. Its bytes up to the first scan (JPEG), IDAT (PNG) or the image bitstream's header
/// (WebP) make the same plan as the whole file's decode (`ImageDecoder.nativePlan`: the
/// header's size, orientation and colour); from there each chunk goes to libjpeg's
/// suspending source (pxl_jpeg_stream), libpng's progressive reader (pxl_png_stream) or
/// libwebp's incremental decoder (pxl_webp_stream), straight into the bitmap or the
/// thumbnail's resampler. Its image, or its error, is what the whole body's decode gives; a
/// file it does not take (`Step.declined`: for JPEG before any row; for PNG and WebP
/// anything but a clean file, up to its end, and for WebP a file whose info or colour from
/// all its bytes are not those its header planned with, e.g. an EXIF orientation after the
/// image data) is decoded whole as before. Not thread safe: one caller at a time (the
/// loader's pool job for the download).
final class StreamingDecode {
  enum Step {
    /// It needs more bytes.
    case more
    /// Over: what the whole body's decode gives.
    case done(Result<Image, LoadError>)
    /// It does not take this file (a header it does not follow or cannot plan from, a
    /// progressive file at 1/8): decode the whole body instead.
    case declined
  }

  enum Format { case jpeg, png, webp }

  private let codec: NativeCodec
  private let format: Format
  let variant: ImageVariant
  private let maxPixels: UInt64
  /// Raised when nobody waits for the decode any more: libjpeg stops between strips.
  let cancel: CancelFlag
  /// The bytes so far, until the header is complete.
  private var header: [UInt8] = []
  private var native: ImageDecoder.NativePlan?
  private var resampler: AreaResampler?
  private var stream: OpaquePointer?
  private var over = false

  init(codec: NativeCodec, format: Format, variant: ImageVariant, maxPixels: UInt64, cancel: CancelFlag) {
    self.codec = codec
    self.format = format
    self.variant = variant
    self.maxPixels = maxPixels
    self.cancel = cancel
  }

  deinit { free() }

  /// Takes the next bytes of the body (`atEnd`: the last) and decodes as far as they go.
  func feed(_ bytes: UnsafeBufferPointer<UInt8>, atEnd: Bool) -> Step {
    guard !over else { return .declined }
    guard stream != nil else { return start(bytes, atEnd: atEnd) }
    return run(bytes, atEnd: atEnd)
  }

  /// Before the first scan: collects the header, then plans and starts the stream with
  /// every byte so far.
  private func start(_ bytes: UnsafeBufferPointer<UInt8>, atEnd: Bool) -> Step {
    header.append(contentsOf: bytes)
    let end = header.withUnsafeBufferPointer { bytes -> Int64 in
      switch format {
      case .jpeg: return pxl_jpeg_header_end(bytes.baseAddress, bytes.count)
      case .png: return pxl_png_header_end(bytes.baseAddress, bytes.count)
      case .webp: return pxl_webp_header_end(bytes.baseAddress, bytes.count)
      }
    }
    if end == 0 && !atEnd { return .more }
    guard end > 0 else { return decline() }
    // WebP's info and colour from bytes that end inside the image data (the stream checks
    // at the end that all the bytes say the same).
    let planner = format != .webp ? codec
      : NativeCodec(name: codec.name, readInfo: pxl_webp_header_info, decode: codec.decode,
                    decodeRows: codec.decodeRows, color: codec.color == nil ? nil : pxl_webp_header_color)
    let planned = header.withUnsafeBufferPointer {
      ImageDecoder.nativePlan(UnsafeBufferPointer(rebasing: $0[0..<Int(end)]), native: planner, variant: variant,
                              maxPixels: maxPixels)
    }
    // A header the plan fails on: the whole decode reports it, with its own message.
    guard case .success(let native) = planned, !(variant.animates && native.info.frame_count > 1) else {
      return decline()
    }
    let layout = Int32((native.resamples ? native.resampleLayout : native.color.decodeLayout).rawValue)
    let scale = Int32(native.scale)
    let flag = UnsafePointer(cancel.pointer)
    if native.resamples {
      guard let resampler = ImageDecoder.resampler(for: native) else {
        over = true
        return .done(.failure(LoadError(.noMemory, "out of memory resampling")))
      }
      self.resampler = resampler
    }
    // Rows go to the thumbnail's resampler (JPEG: only its region's), or without one into
    // the decoder's own full-size bitmap.
    let rows: pxl_codec_row_fn? = resampler == nil ? nil : AreaResampler.rowFunction
    let regionRows: pxl_codec_region_row_fn? = resampler == nil ? nil : AreaResampler.regionRowFunction
    let region = resampler?.sourceRegion ?? (x: 0, y: 0, width: 0, height: 0)
    switch format {
    case .jpeg:
      stream = pxl_jpeg_stream_new(layout, scale, maxPixels, nil, regionRows, resampler?.context, region.x, region.y,
                                   region.width, region.height, flag)
    case .png: stream = pxl_png_stream_new(layout, maxPixels, rows, resampler?.context, flag)
    case .webp: stream = pxl_webp_stream_new(layout, maxPixels, Int(end), rows, resampler?.context, flag)
    }
    guard stream != nil else { return decline() }
    self.native = native
    let collected = header
    header = []
    return collected.withUnsafeBufferPointer { run($0, atEnd: atEnd) }
  }

  private func run(_ bytes: UnsafeBufferPointer<UInt8>, atEnd: Bool) -> Step {
    var state: Int32 = 0
    var output = pxl_codec_output()
    let last: Int32 = atEnd ? 1 : 0
    let status: pxl_codec_status
    switch format {
    case .jpeg: status = pxl_jpeg_stream_feed(stream, bytes.baseAddress, bytes.count, last, &state, &output)
    case .png: status = pxl_png_stream_feed(stream, bytes.baseAddress, bytes.count, last, &state, &output)
    case .webp: status = pxl_webp_stream_feed(stream, bytes.baseAddress, bytes.count, last, &state, &output)
    }
    if status == PXL_CODEC_OK && state == Int32(PXL_STREAM_MORE) { return .more }
    if status == PXL_CODEC_OK && state == Int32(PXL_STREAM_DECLINED) { return decline() }
    over = true
    if cancel.isRaised {
      free()
      Glibc.free(output.pixels)
      return .done(.failure(LoadError(.cancelled, "cancelled")))
    }
    guard let native else { return decline() }
    // The decoder's state is left to the caller's `free` once the result is out: WebP's
    // holds a full-size bitmap even for a thumbnail, whose unmapping (about 4 ms for 12 MP)
    // would otherwise come between the last byte and the callback.
    if let resampler {
      return .done(ImageDecoder.finishResampled(status, &output, resampler, codec: codec, native: native))
    }
    return .done(ImageDecoder.finishWhole(status, &output, codec: codec, native: native))
  }

  private func decline() -> Step {
    over = true
    free()
    return .declined
  }

  /// Frees the decoder's state and the resampler at once (not when the last reference goes);
  /// after `.done`, the caller's to call once the result is out.
  func free() {
    switch format {
    case .jpeg: pxl_jpeg_stream_free(stream)
    case .png: pxl_png_stream_free(stream)
    case .webp: pxl_webp_stream_free(stream)
    }
    stream = nil
    resampler = nil
    header = []
  }
}

extension ImageDecoder {
  /// A decode of `variant` fed as the bytes arrive, for a body whose first bytes are
  /// `prefix`: a JPEG, PNG or WebP that a built-in codec decodes in this process; nil for
  /// anything else (decoded whole when the body is in).
  func streamingDecode(_ prefix: [UInt8], variant: ImageVariant, maxPixels: UInt64,
                       cancel: CancelFlag) -> StreamingDecode? {
    // Under PXL_ISOLATION_ALL every built-in format decodes in a worker: the streamed
    // decode is the host's own libjpeg/libpng, so it must not run (the body is decoded
    // whole, in a worker). The same for libwebp's.
    if codecs.builtInWorkers != nil { return nil }
    return prefix.withUnsafeBufferPointer { bytes in
      guard let entry = codecs.acquire(for: bytes) else { return nil }
      defer { codecs.release(entry) }
      let id = entry.codec.id
      let format: StreamingDecode.Format
      switch id {
      case BuiltInCodecs.jpeg.id: format = .jpeg
      case BuiltInCodecs.png.id: format = .png
      case BuiltInCodecs.webp.id: format = .webp
      default: return nil
      }
      guard let native = entry.native else { return nil }
      return StreamingDecode(codec: native, format: format, variant: variant, maxPixels: maxPixels, cancel: cancel)
    }
  }
}
