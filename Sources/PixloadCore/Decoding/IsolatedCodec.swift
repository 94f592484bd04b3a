import CCodecs
import CSupport
import CWorker
#if canImport(Glibc)
import Glibc
#endif

/// A codec module's codec decoding in confined worker processes (pixload.h, "Isolation";
/// worker/README.md): pixload-decode-worker, started with posix_spawn, locked before it
/// reads a byte, talked to through worker/worker_client.c (the CWorker target). The module
/// stays loaded in the host for `sniff` alone; every other call goes to a worker.
///
/// In the decode stage's session (`WorkerSession`: one image on one thread) the calls are
/// steps of one worker conversation: `readHeader` opens it (the data memfd, the worker's
/// HEADER), `chooseSize` asks the size for a target (SIZE), and `decode` (the pixels
/// copied once into the decode stage's canvas), `decodeCanvas` (the decode stage's still:
/// the sealed memfd mapped privately as the canvas, which the image can keep as its pixels,
/// no copy on the host's side: `PixelMemory`) or `decodeResampled` (a thumbnail: the
/// worker resamples what it drew, so that only the thumbnail crosses) ends it (DRAW, the
/// size checked against max_pixels before the host sizes the sealed pixel memfd). Outside
/// a session each call is a conversation of its own. Both keep the ICC profile the
/// worker wrote after the pixels for this thread's `readICC`, which the decode stage calls
/// after the draw.
///
/// Its workers: a `WorkerPool` of the module's (warm, replaced after a number of decodes and
/// after any failure, ended by `destroy`: pxl_loader_free).
public final class IsolatedCodec: ExternalCodec, @unchecked Sendable {
  public typealias Settings = WorkerPool.Settings

  /// The worker executable shipped beside the library: PIXLOAD_DECODE_WORKER (read with
  /// secure_getenv), else pixload/pixload-decode-worker in the library's directory.
  public static var defaultExecutable: String? {
    if let value = pxl_secure_getenv("PIXLOAD_DECODE_WORKER") { return String(cString: value) }
    var buffer = [CChar](repeating: 0, count: 4096)
    guard pxl_own_directory(&buffer, UInt(buffer.count)) == 0 else { return nil }
    return String(cString: buffer) + "/pixload/pixload-decode-worker"
  }

  let inner: ExternalCodec
  let pool: WorkerPool
  public var id: String { inner.id }
  public var version: String { inner.version }
  public var writesPremultiplied: Bool { inner.writesPremultiplied }
  /// A prefix's preview (PXL_CODEC_PARTIAL) is drawn in the worker (PXL_WORKER_PARTIAL).
  public var isProgressive: Bool { inner.isProgressive }
  /// Animations cross too (`IsolatedFrames`): a module's codec with open_frames is read
  /// frame by frame in the worker, one with decode_frames only is decoded once there and its
  /// frames served one by one, so the host holds one canvas either way.
  public var decodesFrames: Bool { true }
  public var readsFrames: Bool { !inner.isScalable }
  public var isScalable: Bool { inner.isScalable }
  public var choosesSize: Bool { inner.choosesSize }

  private let lock = Lock()
  /// The ICC profile of each thread's last decode, for `readICC`, with the bytes it came
  /// from (a copy: the pixels are unmapped once drawn).
  private var current: [UInt: (base: UnsafeRawPointer?, count: Int, icc: [UInt8])] = [:]
  /// `checkVersion` has run (once per codec).
  private var versionChecked = false

  /// One worker decode's result: the sealed pixels, mapped read-only, until deinit.
  final class Output {
    let result: UnsafeMutableRawPointer
    let header: pxlw_header
    let base: UnsafeRawPointer?
    let count: Int
    let keepOrientation: Bool
    init(result: UnsafeMutableRawPointer, header: pxlw_header, bytes: UnsafeBufferPointer<UInt8>, keepOrientation: Bool) {
      self.result = result
      self.header = header
      base = UnsafeRawPointer(bytes.baseAddress)
      count = bytes.count
      self.keepOrientation = keepOrientation
    }
    deinit { pxlw_result_free(result) }
    func matches(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
      base == UnsafeRawPointer(bytes.baseAddress) && count == bytes.count
    }
  }

  public init(wrapping inner: ExternalCodec, settings: Settings) {
    self.inner = inner
    pool = WorkerPool(settings: settings)
  }

  public func sniff(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool { inner.sniff(bytes) }

  private var threadKey: UInt { UInt(pthread_self()) }

  public func readHeader(_ bytes: UnsafeBufferPointer<UInt8>, keepOrientation: Bool) -> Result<CodecHeader, CodecFailure> {
    switch run(bytes, step: .open, width: 0, height: 0, keepOrientation: keepOrientation) {
    case .failure(let failure): return .failure(failure)
    case .success(let output): return .success(Self.header(output.header))
    }
  }

  /// The worker's HEADER as the codec's header.
  static func header(_ h: pxlw_header) -> CodecHeader {
    var header = CodecHeader()
    header.width = Int(h.image_width)
    header.height = Int(h.image_height)
    header.frameCount = Int(h.frame_count)
    header.loopCount = Int(h.loop_count)
    header.orientation = Int(h.orientation)
    header.hasAlpha = h.has_alpha != 0
    header.iccSize = Int(h.icc_size)
    header.cicpPrimaries = h.cicp_primaries
    header.cicpTransfer = h.cicp_transfer
    header.cicpMatrix = h.cicp_matrix
    return header
  }

  /// The profile the worker wrote after the pixels of this thread's last decode.
  public func readICC(_ bytes: UnsafeBufferPointer<UInt8>, size: Int) -> [UInt8]? {
    let key = threadKey
    guard let kept = lock.withLock({ current.removeValue(forKey: key) }),
          kept.base == UnsafeRawPointer(bytes.baseAddress), kept.count == bytes.count, kept.icc.count == size
    else { return nil }
    return kept.icc
  }

  /// The codec's choose_size, asked in the worker (its HEADER answers the size it would
  /// draw for the target).
  public func chooseSize(_ bytes: UnsafeBufferPointer<UInt8>, keepOrientation: Bool, width: Int,
                         height: Int) -> (width: Int, height: Int)? {
    guard inner.choosesSize else { return nil }  // (no conversation for a codec without one)
    guard case .success(let output) = run(bytes, step: .size, width: width, height: height,
                                          keepOrientation: keepOrientation) else { return nil }
    return (Int(output.header.width), Int(output.header.height))
  }

  public func decode(_ bytes: UnsafeBufferPointer<UInt8>, into target: CodecTarget) -> CodecFailure? {
    let drawn = draw(bytes, width: target.width, height: target.height, keepOrientation: target.keepOrientation,
                     partial: target.partial, resample: nil) { pixels, stride, _ in
      for row in 0..<target.height {
        (target.pixels + row * target.stride).update(from: pixels + row * stride, count: target.width * 4)
      }
    }
    if case .failure(let failure) = drawn { return failure }
    return nil
  }

  /// `decode` at width x height into a canvas of its own, tightly packed RGBA: the worker's
  /// sealed memfd mapped privately (`mapPixels`), not copied, when its rows are packed and it
  /// is worth a mapping; else a malloc'd copy. The caller releases it (`PixelMemory.release`).
  func decodeCanvas(_ bytes: UnsafeBufferPointer<UInt8>, width: Int, height: Int,
                    keepOrientation: Bool, partial: Bool) -> Result<UnsafeMutablePointer<UInt8>, CodecFailure> {
    let rowBytes = width * 4
    let drawn = draw(bytes, width: width, height: height, keepOrientation: keepOrientation, partial: partial,
                     resample: nil) { pixels, stride, result -> UnsafeMutablePointer<UInt8>? in
      if stride == rowBytes, let mapped = Self.mapPixels(fd: pxlw_result_memfd(result),
                                                         size: pxlw_result_map_size(result), count: rowBytes * height) {
        return mapped
      }
      guard let canvas = malloc(max(1, rowBytes * height))?.assumingMemoryBound(to: UInt8.self) else { return nil }
      for row in 0..<height { (canvas + row * rowBytes).update(from: pixels + row * stride, count: rowBytes) }
      return canvas
    }
    switch drawn {
    case .failure(let failure): return .failure(failure)
    case .success(let canvas?): return .success(canvas)
    case .success(nil): return .failure(CodecFailure(.noMemory, "out of memory for a \(width)x\(height) image"))
    }
  }

  /// A worker's sealed pixel memfd (`size` bytes: `count` of pixels, then the ICC profile)
  /// mapped privately, copy-on-write, as pixels an image can own (`PixelMemory`); nil when
  /// under `PixelMemory.minimumMapped` or the mapping fails (then the caller copies).
  static func mapPixels(fd: Int32, size: Int, count: Int) -> UnsafeMutablePointer<UInt8>? {
    guard fd >= 0, count >= PixelMemory.minimumMapped, size >= count, let base = pxlw_map_private(fd, size) else {
      return nil
    }
    PixelMemory.adopt(base, length: size)
    return base.assumingMemoryBound(to: UInt8.self)
  }

  /// What the decode stage would do to the canvas before its colour step
  /// (`FrameCollector.render`): rows in `layout` (RGBA, BGRA or RGB), area-resampled over
  /// `crop` (the canvas's pixels) to outWidth x outHeight, premultiplied while averaging.
  struct Resample: Equatable {
    var outWidth: Int, outHeight: Int
    var layout: pxl_codec_layout
    var premultiply: Bool
    var crop: PixelRect
    var channels: Int { layout == PXL_CODEC_RGB ? 3 : 4 }
  }

  /// `decode` at width x height, resampled in the worker (the library's resampler, the
  /// decode stage's parameters: the same bytes), so that only the thumbnail crosses: the
  /// resampler's output, malloc'd, tightly packed (the caller frees it).
  func decodeResampled(_ bytes: UnsafeBufferPointer<UInt8>, width: Int, height: Int, keepOrientation: Bool,
                       partial: Bool = false, resample: Resample) -> Result<UnsafeMutablePointer<UInt8>, CodecFailure> {
    let rowBytes = resample.outWidth * resample.channels
    let drawn = draw(bytes, width: width, height: height, keepOrientation: keepOrientation, partial: partial,
                     resample: resample) { pixels, stride, _ -> UnsafeMutablePointer<UInt8>? in
      guard stride == rowBytes,
            let small = malloc(max(1, rowBytes * resample.outHeight))?.assumingMemoryBound(to: UInt8.self) else {
        return nil
      }
      small.update(from: pixels, count: rowBytes * resample.outHeight)
      return small
    }
    switch drawn {
    case .failure(let failure): return .failure(failure)
    case .success(let small?): return .success(small)
    case .success(nil):
      return .failure(CodecFailure(.noMemory, "out of memory for a \(resample.outWidth)x\(resample.outHeight) image"))
    }
  }

  /// One worker decode at width x height: `use` gets its pixels (the canvas, or the
  /// resampler's output), their stride and the worker's result (pxlw_result_*) while they
  /// are mapped; the ICC profile is kept for readICC (the colour step follows the draw).
  private func draw<T>(_ bytes: UnsafeBufferPointer<UInt8>, width: Int, height: Int, keepOrientation: Bool,
                       partial: Bool, resample: Resample?,
                       use: (UnsafePointer<UInt8>, Int, UnsafeMutableRawPointer) -> T) -> Result<T, CodecFailure> {
    let key = threadKey
    lock.withLock { current[key] = nil }
    let output: Output
    switch run(bytes, step: .draw, width: width, height: height, keepOrientation: keepOrientation, partial: partial,
               resample: resample) {
    case .failure(let failure): return .failure(failure)
    case .success(let fresh): output = fresh
    }
    guard Int(output.header.width) == width, Int(output.header.height) == height,
          let pixels = pxlw_result_pixels(output.result) else {
      return .failure(CodecFailure(.corruptImage, "the decoder drew \(output.header.width)x\(output.header.height), "
                                     + "not the \(width)x\(height) asked"))
    }
    let answer = use(pixels, pxlw_result_stride(output.result), output.result)
    if output.header.icc_size > 0, let icc = pxlw_result_icc(output.result) {
      let profile = Array(UnsafeBufferPointer(start: icc, count: Int(output.header.icc_size)))
      lock.withLock { current[key] = (UnsafeRawPointer(bytes.baseAddress), bytes.count, profile) }
    }
    return .success(answer)
  }

  /// The state of `openFrames`: the worker's frames (opened by the first `nextFrame` when
  /// `openFrames(_:keepOrientation:maxPixels:)` did not open them).
  final class FramesState {
    var frames: IsolatedFrames?
    let bytes: UnsafeBufferPointer<UInt8>
    init(frames: IsolatedFrames?, bytes: UnsafeBufferPointer<UInt8>) {
      self.frames = frames
      self.bytes = bytes
    }
  }

  /// Opens the frames of `bytes` in a worker held for them: the state (for `nextFrame` and
  /// `closeFrames`) and the header the worker read; the ICC profile, if any, is kept for this
  /// thread's `readICC` (the colour step follows).
  func openFrames(_ bytes: UnsafeBufferPointer<UInt8>, keepOrientation: Bool,
                  maxPixels: UInt64) -> Result<(UnsafeMutableRawPointer, CodecHeader), CodecFailure> {
    let key = threadKey
    lock.withLock { current[key] = nil }
    switch IsolatedFrames.open(bytes, pool: pool, codec: id, format: nil, keepOrientation: keepOrientation,
                               maxPixels: maxPixels) {
    case .failure(let failure): return .failure(failure)
    case .success(let frames):
      let header = Self.header(frames.header)
      if let icc = frames.icc {
        lock.withLock { current[key] = (UnsafeRawPointer(bytes.baseAddress), bytes.count, icc) }
      }
      let state = FramesState(frames: frames, bytes: bytes)
      return .success((Unmanaged.passRetained(state).toOpaque(), header))
    }
  }

  public func openFrames(_ bytes: UnsafeBufferPointer<UInt8>) -> Result<UnsafeMutableRawPointer?, CodecFailure> {
    .success(Unmanaged.passRetained(FramesState(frames: nil, bytes: bytes)).toOpaque())
  }

  public func nextFrame(_ state: UnsafeMutableRawPointer?, into target: CodecTarget) -> Result<Int?, CodecFailure> {
    guard let state else { return .failure(CodecFailure(.invalidArgument, "no frames state")) }
    let held = Unmanaged<FramesState>.fromOpaque(state).takeUnretainedValue()
    if held.frames == nil {
      switch IsolatedFrames.open(held.bytes, pool: pool, codec: id, format: nil, keepOrientation: target.keepOrientation,
                                 maxPixels: pool.settings.maxPixels) {
      case .failure(let failure): return .failure(failure)
      case .success(let frames): held.frames = frames
      }
    }
    let frames = held.frames!
    guard frames.width == target.width, frames.height == target.height else {
      return .failure(CodecFailure(.corruptImage, "the decoder's canvas is \(frames.width)x\(frames.height), "
                                     + "not the \(target.width)x\(target.height) asked"))
    }
    switch frames.next() {
    case .failure(let failure): return .failure(failure)
    case .success(nil): return .success(nil)
    case .success(let (_, duration)?):
      for row in 0..<target.height {
        (target.pixels + row * target.stride).update(from: frames.canvas + row * target.width * 4,
                                                     count: target.width * 4)
      }
      return .success(duration)
    }
  }

  /// Ends the worker's animation; the worker goes back to the pool.
  public func closeFrames(_ state: UnsafeMutableRawPointer?) {
    guard let state else { return }
    let held = Unmanaged<FramesState>.fromOpaque(state).takeRetainedValue()
    held.frames?.close()
    held.frames = nil
  }

  /// Every frame through the worker's frames (PXL_FLAG_ANIMATE), each drawn into `target`.
  public func decodeFrames(_ bytes: UnsafeBufferPointer<UInt8>, into target: CodecTarget,
                           frameDone: (Int) -> Bool) -> CodecFailure? {
    guard case .success(let state) = openFrames(bytes) else { return nil }
    defer { closeFrames(state) }
    return drawFrames(state, into: target, frameDone: frameDone)
  }

  /// The frames of a state from `openFrames`, each drawn into `target` and handed to
  /// `frameDone` (false: stop).
  func drawFrames(_ state: UnsafeMutableRawPointer?, into target: CodecTarget,
                  frameDone: (Int) -> Bool) -> CodecFailure? {
    while true {
      switch nextFrame(state, into: target) {
      case .failure(let failure): return failure
      case .success(nil): return nil
      case .success(let duration?): if !frameDone(duration) { return nil }
      }
    }
  }

  /// After the last decode: ends the workers (the busy ones end when they come back).
  public func destroy() {
    pool.destroy()
    lock.withLock { current.removeAll() }
    inner.destroy()
  }

  /// The worker time (ns) of this thread's isolated conversations: `WorkerPool.takeWorkerTime`.
  public static func takeWorkerTime() -> UInt64? { WorkerPool.takeWorkerTime() }

  /// The steps of an image's conversation (`WorkerSession`; pxlw_decode's PXLW_*).
  enum Step {
    /// The header (the image's size; the conversation left open).
    case open
    /// The size the codec draws for a target.
    case size
    /// The pixels at exactly the size asked (the conversation's end).
    case draw
  }

  /// One step with a worker: in this thread's session for these bytes, a step of the
  /// image's conversation (opened by the first, in the worker the session holds); else a
  /// conversation of its own, as the step asks (`open` and `size`: the header alone).
  private func run(_ bytes: UnsafeBufferPointer<UInt8>, step: Step, width: Int, height: Int,
                   keepOrientation: Bool, partial: Bool = false, resample: Resample? = nil) -> Result<Output, CodecFailure> {
    let timeout = pool.timeout
    let ran = pool.with(in: WorkerSession.current(for: bytes)) { worker, open -> (Result<Output, CodecFailure>, usable: Bool, open: Bool) in
      var status: Int32 = 0
      var ended: Int32 = 0
      var header = pxlw_header()
      var message = [CChar](repeating: 0, count: 512)
      var params: [Int32] = resample.map { [Int32($0.outWidth), Int32($0.outHeight), Int32($0.layout.rawValue),
                                             $0.premultiply ? 1 : 0] } ?? []
      var crop: [Double] = resample.map { [$0.crop.x, $0.crop.y, $0.crop.width, $0.crop.height] } ?? []
      // A step of the open conversation, else the session's first (open), else one of its own.
      let code: Int32
      switch step {
      case .open: code = WorkerSession.current(for: bytes) == nil ? PXLW_ONCE : PXLW_OPEN
      case .size: code = open ? PXLW_SIZE : PXLW_ONCE
      case .draw: code = open ? PXLW_DRAW : PXLW_ONCE
      }
      let flags = (keepOrientation ? PXLW_KEEP_ORIENTATION : 0) | (partial ? PXLW_PARTIAL : 0)
        | (step != .draw && code == PXLW_ONCE ? PXLW_HEADER_ONLY : 0)
      let result = params.withUnsafeMutableBufferPointer { params in
        crop.withUnsafeMutableBufferPointer { crop in
          pxlw_decode(worker, code, bytes.baseAddress, bytes.count, id, Int32(width), Int32(height), UInt32(flags),
                      resample == nil ? nil : UnsafePointer(params.baseAddress),
                      resample == nil ? nil : UnsafePointer(crop.baseAddress), timeout, &status, &message,
                      message.count, &ended, &header)
        }
      }
      let usable = ended == 0 && status != Status.decoderFailed.rawValue
      // Open after: the session's header or a size answered; a draw or a failure ends it.
      let stillOpen = status == 0 && (code == PXLW_OPEN || code == PXLW_SIZE)
      guard let result else { return (.failure(CodecFailure(.noMemory, "out of memory")), usable, false) }
      guard status == 0 else {
        pxlw_result_free(result)
        let text = String(cString: message)
        let known = Status(rawValue: status) ?? .corruptImage
        return (.failure(CodecFailure(known, text.isEmpty ? known.description : text)), usable, false)
      }
      checkVersion(result)
      return (.success(Output(result: result, header: header, bytes: bytes, keepOrientation: keepOrientation)),
              usable, stillOpen)
    }
    switch ran {
    case .failure(let failure): return .failure(failure)
    case .success(let result): return result
    }
  }

  /// The version the worker's codec reports (its HEADER) against the one this codec has
  /// here, the module's manifest's: the version it was built with, which the loader's
  /// cache keys use (`CodecSignature`, made at registration, before any worker ran). A
  /// decoding library upgraded under a module without a rebuild makes them differ (libheif's
  /// `LIBHEIF_VERSION` against `heif_get_version()`): logged once per codec, on its first
  /// decode, so that a host whose thumbnails look stale learns why.
  private func checkVersion(_ result: UnsafeMutableRawPointer) {
    guard lock.withLock({ () -> Bool in
      defer { versionChecked = true }
      return !versionChecked
    }) else { return }
    let running = String(cString: pxlw_result_codec_version(result))
    guard !running.isEmpty, running != inner.version else { return }
    pool.settings.log?(.warning, "pixload: codec \(id)'s module was built with version \"\(inner.version)\" and its "
                       + "decode worker runs \"\(running)\": cache keys keep the built version until the module is rebuilt")
  }

  /// The confining layers a worker of this codec has (`WorkerPool.layers`).
  public func layers() -> String? { pool.layers() }
}
