import CCodecs
#if canImport(Glibc)
import Glibc
#endif

/// A JPEG or PNG decode fed as its download's bytes arrive (`ImageDecoder.streamingDecode`),
/// so that little is left to decode once the last byte is in. Its bytes up to the first
/// scan (JPEG) or IDAT (PNG) make the same plan as the whole file's decode
/// (`ImageDecoder.nativePlan`: the header's size, orientation and colour); from there each
/// chunk goes to libjpeg's suspending source (pxl_jpeg_stream) or libpng's progressive
/// reader (pxl_png_stream), straight into the bitmap or the thumbnail's resampler. Its
/// image, or its error, is what the whole body's decode gives; a file it does not take
/// (`Step.declined`: for JPEG before any row, for PNG anything but a clean file, up to its
/// end) is decoded whole as before. Not thread safe: one caller at a time (the loader's pool
/// job for the download).
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

  private let codec: NativeCodec
  private let isPNG: Bool
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

  init(codec: NativeCodec, isPNG: Bool, variant: ImageVariant, maxPixels: UInt64, cancel: CancelFlag) {
    self.codec = codec
    self.isPNG = isPNG
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
    let end = header.withUnsafeBufferPointer {
      isPNG ? pxl_png_header_end($0.baseAddress, $0.count) : pxl_jpeg_header_end($0.baseAddress, $0.count)
    }
    if end == 0 && !atEnd { return .more }
    guard end > 0 else { return decline() }
    let planned = header.withUnsafeBufferPointer {
      ImageDecoder.nativePlan(UnsafeBufferPointer(rebasing: $0[0..<Int(end)]), native: codec, variant: variant,
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
      let region = resampler.sourceRegion
      stream = isPNG
        ? pxl_png_stream_new(layout, maxPixels, AreaResampler.rowFunction, resampler.context, flag)
        : pxl_jpeg_stream_new(layout, scale, maxPixels, nil, AreaResampler.regionRowFunction, resampler.context,
                              region.x, region.y, region.width, region.height, flag)
    } else {
      stream = isPNG ? pxl_png_stream_new(layout, maxPixels, nil, nil, flag)
                     : pxl_jpeg_stream_new(layout, scale, maxPixels, nil, nil, nil, 0, 0, 0, 0, flag)
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
    let status = isPNG ? pxl_png_stream_feed(stream, bytes.baseAddress, bytes.count, atEnd ? 1 : 0, &state, &output)
                       : pxl_jpeg_stream_feed(stream, bytes.baseAddress, bytes.count, atEnd ? 1 : 0, &state, &output)
    if status == PXL_CODEC_OK && state == Int32(PXL_STREAM_MORE) { return .more }
    if status == PXL_CODEC_OK && state == Int32(PXL_STREAM_DECLINED) { return decline() }
    over = true
    defer { free() }
    if cancel.isRaised {
      Glibc.free(output.pixels)
      return .done(.failure(LoadError(.cancelled, "cancelled")))
    }
    guard let native else { return decline() }
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

  /// Frees libjpeg's state and the resampler at once (not when the last reference goes).
  func free() {
    if isPNG { pxl_png_stream_free(stream) } else { pxl_jpeg_stream_free(stream) }
    stream = nil
    resampler = nil
    header = []
  }
}

extension ImageDecoder {
  /// A decode of `variant` fed as the bytes arrive, for a body whose first bytes are
  /// `prefix`: a JPEG or PNG that a built-in codec decodes in this process; nil for
  /// anything else (decoded whole when the body is in).
  func streamingDecode(_ prefix: [UInt8], variant: ImageVariant, maxPixels: UInt64,
                       cancel: CancelFlag) -> StreamingDecode? {
    // Under PXL_ISOLATION_ALL every built-in format decodes in a worker: the streamed
    // decode is the host's own libjpeg/libpng, so it must not run (the body is decoded
    // whole, in a worker).
    if codecs.builtInWorkers != nil { return nil }
    return prefix.withUnsafeBufferPointer { bytes in
      guard let entry = codecs.acquire(for: bytes) else { return nil }
      defer { codecs.release(entry) }
      let id = entry.codec.id
      guard id == BuiltInCodecs.jpeg.id || id == BuiltInCodecs.png.id, let native = entry.native else { return nil }
      return StreamingDecode(codec: native, isPNG: id == BuiltInCodecs.png.id, variant: variant, maxPixels: maxPixels,
                             cancel: cancel)
    }
  }
}
