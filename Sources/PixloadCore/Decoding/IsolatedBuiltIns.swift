import CCodecs
import CWorker
#if canImport(Glibc)
import Glibc
#endif

/// The built-in formats under PXL_ISOLATION_ALL (pixload.h, "Isolation"): the same codecs
/// as `BuiltInCodecs`, whose `NativeCodec` functions run the library's own shims in a
/// decode worker (worker/native.c, linked into pixload-decode-builtins.so) with the
/// arguments the decode stage passes them, so the stage (layouts, DCT scaling, rows into the
/// resampler, colour, "ended early", orientation) is unchanged and the pixels are the same
/// as in-process.
///
/// One conversation an image (in the decode stage's `WorkerSession`): INFO (read_info and
/// the colour information, the profile included; kept for this thread's `color` call that
/// follows), then DECODE (the first frame, whole, in the layout at 1/scale: its pixels come
/// back in a sealed memfd, mapped privately as the output: `PixelMemory`) over the bytes
/// the worker kept. A thumbnail's
/// rows go into the stage's own resampler made again in the worker with the same parameters
/// (RESAMPLE): only the thumbnail crosses, and the stage finds it finished. Sniffing stays here (a comparison of magic
/// bytes), and so does the progressive JPEG's marker scan for previews (the library's own
/// scanner, no decoder). A JPEG's crop region (FILL) is decoded there too, and only its rows
/// cross. Animations (GIF, WebP, AVIF): the formats' frame readers run in a worker held for
/// the animation (`IsolatedFrames`: FRAMES_OPEN, then a FRAME_NEXT per frame), both for
/// an animation player (`frames`) and for PXL_FLAG_ANIMATE (`decodeFrames`); the host
/// copies each composited canvas out of the worker's memfd and renders it as in-process.
public enum IsolatedBuiltIns {
  /// pixload-decode-builtins.so beside the worker executable.
  public static func library(beside executable: String) -> String {
    String(executable[..<(executable.lastIndex(of: "/") ?? executable.startIndex)]) + "/pixload-decode-builtins.so"
  }

  static func codecs(_ pool: WorkerPool) -> [BuiltInCodec] {
    BuiltInCodecs.all.map { builtIn in
      let remote = Remote(format: builtIn.id, pool: pool)
      let native = builtIn.native
      return BuiltInCodec(id: builtIn.id,
                          native: NativeCodec(name: native.name, readInfo: remote.readInfo, decode: remote.decode,
                                              decodeRows: remote.decodeRows,
                                              decodeRegion: native.decodeRegion == nil ? nil : remote.decodeRegion,
                                              decodeFrames: native.decodeFrames == nil ? nil : remote.decodeFrames,
                                              color: native.color == nil ? nil : remote.color,
                                              frames: native.frames == nil ? nil : remote.frames,
                                              scalesByDCT: native.scalesByDCT, scans: native.scans),
                          sniff: builtIn.sniffer)
    }
  }

  /// One format's shim calls, each a conversation with a worker of the pool.
  final class Remote: @unchecked Sendable {
    let format: String
    let pool: WorkerPool
    private let lock = Lock()
    /// INFO's answer for the bytes this thread asked last, for the `color` call after it.
    private var kept: [UInt: (base: UnsafeRawPointer?, count: Int, answer: pxlw_native, icc: [UInt8])] = [:]
    /// The sealed memfd of the bytes this thread's INFO sent, for the decode that follows
    /// (the bytes copied once an image).
    private var dataFDs: [UInt: (base: UnsafeRawPointer?, count: Int, fd: Int32)] = [:]

    deinit { for entry in dataFDs.values { pxlw_close(entry.fd) } }

    /// INFO keeps the memfd it made (`keep`); the decode after it takes it and closes it.
    private func dataFD(_ data: UnsafePointer<UInt8>?, _ size: Int, keep: Bool) -> Int32 {
      let key = threadKey
      let kept = lock.withLock { dataFDs.removeValue(forKey: key) }
      guard let kept else { return -1 }
      if keep || kept.base != UnsafeRawPointer(data) || kept.count != size {
        pxlw_close(kept.fd)
        return -1
      }
      return kept.fd
    }

    init(format: String, pool: WorkerPool) {
      self.format = format
      self.pool = pool
    }

    /// One conversation: the answer (its bytes valid until `done` is called), or the
    /// conversation's failure as a shim status and message.
    private func call(_ data: UnsafePointer<UInt8>?, _ size: Int, op: UInt32, layout: Int32 = 0, scale: Int32 = 1,
                      maxPixels: UInt64 = 0, region: [Int32]? = nil, resampler: Resampling? = nil,
                      _ body: (pxlw_native) -> pxl_codec_status) -> (pxl_codec_status, String) {
      let timeout = pool.timeout
      let info = op == UInt32(PXLW_NATIVE_INFO)
      // In the decode stage's session for these bytes: INFO opens the image's conversation
      // and the decode continues it (no data memfd of its own; a thumbnail's output crosses
      // with the request). Else the data memfd INFO made is kept for the decode after it.
      let session = WorkerSession.current(for: UnsafeRawPointer(data), count: size)
      var fd: Int32 = session == nil ? dataFD(data, size, keep: info) : -1
      defer {
        if session == nil && info && fd >= 0 {
          let key = threadKey
          lock.withLock { dataFDs[key] = (UnsafeRawPointer(data), size, fd) }
        } else {
          pxlw_close(fd)
        }
      }
      let ran = pool.with(in: session) { worker, open -> ((pxl_codec_status, String), usable: Bool, open: Bool) in
        var answer = pxlw_native()
        let flags = session == nil ? 0 : info ? PXLW_NATIVE_STAY : open ? PXLW_NATIVE_CONTINUE : 0
        let handle = (region ?? []).withUnsafeBufferPointer { region in
          (resampler?.params ?? []).withUnsafeBufferPointer { params in
            (resampler?.crop ?? []).withUnsafeBufferPointer { crop in
              pxlw_native_call(worker, data, size, format, op, UInt32(flags), layout, scale, maxPixels,
                               region.isEmpty ? nil : region.baseAddress, params.isEmpty ? nil : params.baseAddress,
                               crop.isEmpty ? nil : crop.baseAddress, &fd, timeout, &answer)
            }
          }
        }
        defer { pxlw_native_free(handle) }
        let usable = answer.worker_ended == 0 && answer.status != Status.decoderFailed.rawValue
        // (The worker keeps an INFO's conversation open when the shim succeeded.)
        let stillOpen = info && session != nil && handle != nil && answer.status == 0 && answer.codec_status == 0
        let message = withUnsafeBytes(of: answer.message) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
        guard handle != nil, answer.status == 0 else {
          let status: pxl_codec_status
          switch Status(rawValue: answer.status) {
          case .noMemory?: status = PXL_CODEC_NO_MEMORY
          case .notAnImage?, .corruptImage?: status = PXL_CODEC_CORRUPT
          case .tooManyPixels?: status = PXL_CODEC_TOO_MANY_PIXELS
          default: status = PXL_CODEC_DECODER_FAILED
          }
          return ((status, message), usable, false)
        }
        return ((body(answer), message), usable, stillOpen)
      }
      switch ran {
      case .success(let result): return result
      case .failure(let failure): return (PXL_CODEC_DECODER_FAILED, failure.message)
      }
    }

    private var threadKey: UInt { UInt(pthread_self()) }

    var readInfo: NativeCodec.ReadInfo {
      { [self] data, size, info, message, capacity in
        let key = threadKey
        let (status, text) = call(data, size, op: UInt32(PXLW_NATIVE_INFO)) { answer in
          let icc = answer.icc_size > 0 && answer.bytes != nil
            ? Array(UnsafeBufferPointer(start: answer.bytes, count: Int(answer.icc_size))) : []
          lock.withLock { kept[key] = (UnsafeRawPointer(data), size, answer, icc) }
          return pxl_codec_status(rawValue: UInt32(bitPattern: answer.codec_status))
        }
        if status == PXL_CODEC_OK, let info, let answer = lock.withLock({ kept[key]?.answer }) {
          info.pointee = pxl_codec_info(width: answer.width, height: answer.height, has_alpha: answer.has_alpha,
                                        orientation: answer.orientation, frame_count: answer.frame_count,
                                        loop_count: answer.loop_count, gray: 0)
        }
        if let message, capacity > 0 { Remote.copy(text, into: message, capacity: capacity) }
        return status
      }
    }

    var color: NativeCodec.ReadColor {
      { [self] data, size, color in
        let key = threadKey
        var found = lock.withLock { () -> (answer: pxlw_native, icc: [UInt8])? in
          guard let entry = kept.removeValue(forKey: key), entry.base == UnsafeRawPointer(data), entry.count == size
          else { return nil }
          return (entry.answer, entry.icc)
        }
        if found == nil {
          var info = pxl_codec_info()
          guard readInfo(data, size, &info, nil, 0) == PXL_CODEC_OK,
                let entry = lock.withLock({ kept.removeValue(forKey: key) }) else { return PXL_CODEC_CORRUPT }
          found = (entry.answer, entry.icc)
        }
        guard let (answer, icc) = found, answer.color_status == 0, let color else {
          return found.map { pxl_codec_status(rawValue: UInt32(bitPattern: $0.answer.color_status)) } ?? PXL_CODEC_CORRUPT
        }
        var out = pxl_codec_color()
        out.setICC(icc)
        out.srgb = answer.srgb
        out.has_chrm = answer.has_chrm
        out.chrm = answer.chrm
        out.gamma = answer.gamma
        out.cicp_primaries = answer.cicp_primaries
        out.cicp_transfer = answer.cicp_transfer
        out.cicp_matrix = answer.cicp_matrix
        color.pointee = out
        return PXL_CODEC_OK
      }
    }

    /// DECODE: `deliver` gets the sealed pixels (stride, rows) while they are mapped.
    private func decode(_ data: UnsafePointer<UInt8>?, _ size: Int, _ layout: Int32, _ scale: Int32,
                        _ maxPixels: UInt64, _ out: UnsafeMutablePointer<pxl_codec_output>?, region: [Int32]? = nil,
                        resampler: Resampling? = nil,
                        deliver: (UnsafePointer<UInt8>, pxlw_native) -> pxl_codec_status) -> pxl_codec_status {
      var fields = pxl_codec_output()
      let op = UInt32(resampler != nil ? PXLW_NATIVE_RESAMPLE : region == nil ? PXLW_NATIVE_DECODE : PXLW_NATIVE_REGION)
      let (status, text) = call(data, size, op: op, layout: layout, scale: scale, maxPixels: maxPixels,
                                region: region, resampler: resampler) { answer in
        let shim = pxl_codec_status(rawValue: UInt32(bitPattern: answer.codec_status))
        guard shim == PXL_CODEC_OK else { return shim }
        // (RESAMPLE without bytes: a row never came; the stage's own finish says so.)
        guard let pixels = answer.bytes else { return resampler != nil ? PXL_CODEC_OK : PXL_CODEC_CORRUPT }
        fields.width = answer.out_width
        fields.height = answer.out_height
        fields.stride = answer.out_stride
        fields.channels = answer.out_channels
        fields.has_alpha = answer.out_has_alpha
        fields.warnings = answer.out_warnings
        fields.incomplete = answer.out_incomplete
        return deliver(pixels, answer)
      }
      Remote.copy(text, into: &fields.message)
      if status != PXL_CODEC_OK { PixelMemory.release(fields.pixels); fields.pixels = nil }
      out?.pointee = fields
      return status
    }

    var decode: NativeCodec.Decode {
      { [self] data, size, layout, scale, maxPixels, out in
        var copied: UnsafeMutablePointer<UInt8>?
        let status = decode(data, size, layout, scale, maxPixels, out) { pixels, answer in
          let count = Int(answer.out_stride) * Int(answer.out_height)
          // The sealed memfd mapped as the output (the decode stage's pixels, or the image's:
          // no copy on the host's side), else copied.
          if let mapped = IsolatedCodec.mapPixels(fd: answer.memfd, size: Int(answer.map_size), count: count) {
            copied = mapped
            return PXL_CODEC_OK
          }
          guard let buffer = malloc(max(count, 1))?.assumingMemoryBound(to: UInt8.self) else { return PXL_CODEC_NO_MEMORY }
          buffer.update(from: pixels, count: count)
          copied = buffer
          return PXL_CODEC_OK
        }
        if status == PXL_CODEC_OK { out?.pointee.pixels = copied } else { PixelMemory.release(copied) }
        return status
      }
    }

    /// The decode stage's resampler (`AreaResampler`) as the row function's user: made again
    /// in the worker with the same parameters, the rows go into it there, and its output is
    /// handed to this one (pxl_resampler_adopt), so only the thumbnail crosses.
    struct Resampling {
      let handle: OpaquePointer
      var params = [Int32](repeating: 0, count: 6)
      var crop = [Double](repeating: 0, count: 4)

      init?(_ function: UnsafeRawPointer?, _ user: UnsafeMutableRawPointer?, region: Bool) {
        let resamplers = region ? unsafeBitCast(AreaResampler.regionRowFunction, to: UnsafeRawPointer.self)
                                : unsafeBitCast(AreaResampler.rowFunction, to: UnsafeRawPointer.self)
        guard let function, function == resamplers, let user else { return nil }
        handle = OpaquePointer(user)
        pxl_resampler_params(handle, &params, &crop)
      }

      /// The worker's output as the resampler's result.
      func adopt(_ pixels: UnsafePointer<UInt8>) -> pxl_codec_status {
        let count = Int(params[3]) * Int(params[4]) * Int(params[2])
        guard let copy = malloc(max(count, 1))?.assumingMemoryBound(to: UInt8.self) else { return PXL_CODEC_NO_MEMORY }
        copy.update(from: pixels, count: count)
        guard pxl_resampler_adopt(handle, copy) == 0 else {
          free(copy)
          return PXL_CODEC_CORRUPT
        }
        return PXL_CODEC_OK
      }
    }

    var decodeRows: NativeCodec.DecodeRows {
      { [self] data, size, layout, scale, maxPixels, rowFunction, user, out in
        if let resampler = Resampling(rowFunction.map { unsafeBitCast($0, to: UnsafeRawPointer.self) }, user,
                                      region: false) {
          return decode(data, size, layout, scale, maxPixels, out, resampler: resampler) { pixels, _ in
            resampler.adopt(pixels)
          }
        }
        return decode(data, size, layout, scale, maxPixels, out) { pixels, answer in
          guard let rowFunction else { return PXL_CODEC_UNSUPPORTED }
          for y in 0..<Int(answer.out_height) where rowFunction(user, Int32(y), pixels + y * Int(answer.out_stride)) != 0 {
            return PXL_CODEC_CORRUPT  // stopped by the caller, as the shims answer it
          }
          return PXL_CODEC_OK
        }
      }
    }

    /// JPEG's crop-region decode: the worker sends the region's rows alone.
    var decodeRegion: NativeCodec.DecodeRegion {
      { [self] data, size, layout, scale, maxPixels, x, y, width, height, regionFunction, user, out in
        if let resampler = Resampling(regionFunction.map { unsafeBitCast($0, to: UnsafeRawPointer.self) }, user,
                                      region: true) {
          return decode(data, size, layout, scale, maxPixels, out, region: [x, y, width, height],
                        resampler: resampler) { pixels, _ in resampler.adopt(pixels) }
        }
        return decode(data, size, layout, scale, maxPixels, out, region: [x, y, width, height]) { pixels, answer in
          guard let regionFunction else { return PXL_CODEC_UNSUPPORTED }
          let stride = Int(answer.out_stride)
          for row in 0..<Int(height) where regionFunction(user, y + Int32(row), x, pixels + row * stride) != 0 {
            return PXL_CODEC_CORRUPT  // stopped by the caller
          }
          return PXL_CODEC_OK
        }
      }
    }

    /// A conversation's failure as the shim status the decode stage expects.
    static func codecStatus(_ status: Status) -> pxl_codec_status {
      switch status {
      case .noMemory: return PXL_CODEC_NO_MEMORY
      case .tooManyPixels: return PXL_CODEC_TOO_MANY_PIXELS
      case .unsupportedImage: return PXL_CODEC_UNSUPPORTED
      case .decoderFailed: return PXL_CODEC_DECODER_FAILED
      default: return PXL_CODEC_CORRUPT
      }
    }

    private func openFrames(_ data: UnsafePointer<UInt8>?, _ size: Int,
                            _ maxPixels: UInt64) -> Result<IsolatedFrames, CodecFailure> {
      IsolatedFrames.open(UnsafeBufferPointer(start: data, count: size), pool: pool, codec: nil, format: format,
                          keepOrientation: false, maxPixels: maxPixels)
    }

    /// The format's frame reader in a worker: the state is a retained `IsolatedFrames`, each
    /// frame its copy of the worker's canvas.
    var frames: FrameReading {
      FrameReading(open: { [self] data, size, maxPixels, status, message, capacity in
        switch openFrames(data, size, maxPixels) {
        case .failure(let failure):
          status?.pointee = Remote.codecStatus(failure.status)
          if let message, capacity > 0 { Remote.copy(failure.message, into: message, capacity: capacity) }
          return nil
        case .success(let frames):
          status?.pointee = PXL_CODEC_OK
          return OpaquePointer(Unmanaged.passRetained(frames).toOpaque())
        }
      }, next: { state, frame in
        guard let state else { return PXL_CODEC_CORRUPT }
        let frames = Unmanaged<IsolatedFrames>.fromOpaque(UnsafeRawPointer(state)).takeUnretainedValue()
        var out = pxl_codec_frame()
        var status = PXL_CODEC_OK
        switch frames.next() {
        case .failure(let failure):
          status = Remote.codecStatus(failure.status)
          Remote.copy(failure.message, into: &out.message)
        case .success(nil): break
        case .success(let (index, duration)?):
          out.rgba = UnsafePointer(frames.canvas)
          out.stride = Int32(frames.width * 4)
          out.index = Int32(index)
          out.duration_ms = Int32(duration)
          out.incomplete = frames.lastIncomplete ? 1 : 0
        }
        frame?.pointee = out
        return status
      }, close: { state in
        if let state { Unmanaged<IsolatedFrames>.fromOpaque(UnsafeRawPointer(state)).release() }
      }, firstDuration: { _, _ in -1 })  // (the host reads no more of the bytes than their sniff)
    }

    /// PXL_FLAG_ANIMATE: every frame through the worker's frame reader, each handed to
    /// `frameFunction` as the shim's decode_frames would.
    var decodeFrames: NativeCodec.DecodeFrames {
      { [self] data, size, maxPixels, frameFunction, user, out in
        var fields = pxl_codec_output()
        defer { out?.pointee = fields }
        let frames: IsolatedFrames
        switch openFrames(data, size, maxPixels) {
        case .failure(let failure):
          Remote.copy(failure.message, into: &fields.message)
          return Remote.codecStatus(failure.status)
        case .success(let opened): frames = opened
        }
        defer { frames.close() }
        fields.width = frames.header.width
        fields.height = frames.header.height
        fields.channels = 4
        fields.stride = frames.header.width * 4
        while true {
          switch frames.next() {
          case .failure(let failure):
            Remote.copy(failure.message, into: &fields.message)
            return Remote.codecStatus(failure.status)
          case .success(nil): return PXL_CODEC_OK
          case .success(let (index, duration)?):
            if frames.lastIncomplete { fields.incomplete = 1 }
            guard let frameFunction else { return PXL_CODEC_OK }
            if frameFunction(user, Int32(index), frames.canvas, Int32(frames.width * 4), Int32(duration)) != 0 {
              return PXL_CODEC_OK
            }
          }
        }
      }
    }

    static func copy(_ text: String, into buffer: UnsafeMutablePointer<CChar>, capacity: Int) {
      let bytes = Array(text.utf8.prefix(capacity - 1))
      for (i, byte) in bytes.enumerated() { buffer[i] = CChar(bitPattern: byte) }
      buffer[bytes.count] = 0
    }

    static func copy<T>(_ text: String, into tuple: inout T) {
      withUnsafeMutableBytes(of: &tuple) { raw in
        copy(text, into: raw.bindMemory(to: CChar.self).baseAddress!, capacity: raw.count)
      }
    }
  }
}
