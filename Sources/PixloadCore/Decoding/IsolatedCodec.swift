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
/// Each call is a worker conversation: `readHeader` and `chooseSize` stop at the worker's
/// HEADER (no pixel buffer); `decode` has the worker draw at the size asked (its header
/// checked against max_pixels before the host sizes the sealed pixel memfd), copies the
/// pixels once into the decode stage's canvas, and keeps the ICC profile the worker wrote
/// after them for this thread's `readICC`, which the decode stage calls after the draw.
///
/// Its workers: a pool sized to the decode threads (`poolSize`), each replaced after
/// `maxDecodes` and after any failure, all ended by `destroy` (the table calls it once no
/// decode runs: pxl_loader_free). Nothing starts before the codec's first image (a loader
/// whose host never decodes an isolated format starts no process and no thread); from then
/// a warming thread keeps as many workers as the most decodes seen at once, plus a spare,
/// up to `poolSize`, started ahead of need: a retired or failed worker is replaced (and
/// ended) there, not on a decode thread.
public final class IsolatedCodec: ExternalCodec, @unchecked Sendable {
  /// Where and how its workers run.
  public struct Settings: Sendable {
    public var executable: String
    public var moduleDirectory: String
    public var moduleName: String
    public var maxPixels: UInt64
    public var maxInputBytes: UInt64
    /// 0: no limit.
    public var timeoutMilliseconds: Int
    public var poolSize: Int
    /// PXL_ISOLATION_REQUIRED: a worker without every layer decodes nothing.
    public var required: Bool
    public var log: (@Sendable (LogLevel, String) -> Void)?

    public init(executable: String, moduleDirectory: String, moduleName: String, maxPixels: UInt64,
                maxInputBytes: UInt64, timeoutMilliseconds: Int, poolSize: Int, required: Bool,
                log: (@Sendable (LogLevel, String) -> Void)?) {
      self.executable = executable
      self.moduleDirectory = moduleDirectory
      self.moduleName = moduleName
      self.maxPixels = maxPixels
      self.maxInputBytes = maxInputBytes
      self.timeoutMilliseconds = timeoutMilliseconds
      self.poolSize = poolSize
      self.required = required
      self.log = log
    }
  }

  /// Decodes a worker serves before it is replaced: a hijacked worker stays hijacked only
  /// for so many strangers' images.
  public static let maxDecodes = 200

  /// Every layer pixload-decode-worker has (PXL_WORKER_LAYER_*: no_new_privs, namespaces,
  /// landlock, seccomp, rlimits, fds_closed).
  static let allLayers: UInt32 = 0x3F

  /// The worker executable shipped beside the library: PIXLOAD_DECODE_WORKER (read with
  /// secure_getenv), else pixload/pixload-decode-worker in the library's directory.
  public static var defaultExecutable: String? {
    if let value = pxl_secure_getenv("PIXLOAD_DECODE_WORKER") { return String(cString: value) }
    var buffer = [CChar](repeating: 0, count: 4096)
    guard pxl_own_directory(&buffer, UInt(buffer.count)) == 0 else { return nil }
    return String(cString: buffer) + "/pixload/pixload-decode-worker"
  }

  let inner: ExternalCodec
  let settings: Settings
  public var id: String { inner.id }
  public var version: String { inner.version }
  public var writesPremultiplied: Bool { inner.writesPremultiplied }
  /// Previews and animations do not cross the protocol yet (pixload.h, "Isolation").
  public var isProgressive: Bool { false }
  public var decodesFrames: Bool { false }
  public var isScalable: Bool { inner.isScalable }
  public var choosesSize: Bool { inner.choosesSize }

  private struct Idle {
    let worker: UnsafeMutableRawPointer
    var decodes: Int
  }

  private let lock = Lock()
  private var idle: [Idle] = []
  private var closed = false
  /// Workers handed out to decodes, the most at once, and those the warming thread is
  /// starting; decodes waiting for one of those.
  private var busy = 0
  private var peakBusy = 0
  private var starting = 0
  private var waiting = 0
  /// Workers to end, on the warming thread.
  private var retired: [UnsafeMutableRawPointer] = []
  private var warmer: WorkerThread?
  /// The warming thread could not start, or a worker failed to start there: the decodes
  /// start their own (and report why).
  private var warmingFailed = false
  private var loggedLayers = false
  /// The ICC profile of each thread's last decode, for `readICC`, with the bytes it came
  /// from (a copy: the pixels are unmapped once drawn).
  private var current: [UInt: (base: UnsafeRawPointer?, count: Int, icc: [UInt8])] = [:]

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
    self.settings = settings
  }

  public func sniff(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool { inner.sniff(bytes) }

  private var threadKey: UInt { UInt(pthread_self()) }

  public func readHeader(_ bytes: UnsafeBufferPointer<UInt8>, keepOrientation: Bool) -> Result<CodecHeader, CodecFailure> {
    switch run(bytes, width: 0, height: 0, keepOrientation: keepOrientation, headerOnly: true) {
    case .failure(let failure): return .failure(failure)
    case .success(let output):
      let h = output.header
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
      return .success(header)
    }
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
    guard case .success(let output) = run(bytes, width: width, height: height, keepOrientation: keepOrientation,
                                          headerOnly: true) else { return nil }
    return (Int(output.header.width), Int(output.header.height))
  }

  public func decode(_ bytes: UnsafeBufferPointer<UInt8>, into target: CodecTarget) -> CodecFailure? {
    let key = threadKey
    lock.withLock { current[key] = nil }
    let output: Output
    switch run(bytes, width: target.width, height: target.height, keepOrientation: target.keepOrientation,
               headerOnly: false) {
    case .failure(let failure): return failure
    case .success(let fresh): output = fresh
    }
    guard Int(output.header.width) == target.width, Int(output.header.height) == target.height,
          let pixels = pxlw_result_pixels(output.result) else {
      return CodecFailure(.corruptImage, "the decoder drew \(output.header.width)x\(output.header.height), "
                            + "not the \(target.width)x\(target.height) asked")
    }
    let stride = pxlw_result_stride(output.result)
    for row in 0..<target.height {
      (target.pixels + row * target.stride).update(from: pixels + row * stride, count: target.width * 4)
    }
    // The profile kept for readICC (the colour step follows the draw); the pixels go now.
    if output.header.icc_size > 0, let icc = pxlw_result_icc(output.result) {
      let profile = Array(UnsafeBufferPointer(start: icc, count: Int(output.header.icc_size)))
      lock.withLock { current[key] = (UnsafeRawPointer(bytes.baseAddress), bytes.count, profile) }
    }
    return nil
  }

  public func decodeFrames(_ bytes: UnsafeBufferPointer<UInt8>, into target: CodecTarget,
                           frameDone: (Int) -> Bool) -> CodecFailure? {
    if let failure = decode(bytes, into: target) { return failure }
    _ = frameDone(0)
    return nil
  }

  /// After the last decode: stops the warming thread, ends every idle worker (the busy
  /// ones end when they come back).
  public func destroy() {
    let thread: WorkerThread? = lock.withLock {
      closed = true
      lock.broadcast()
      defer { warmer = nil }
      return warmer
    }
    thread?.join()
    let workers: [UnsafeMutableRawPointer] = lock.withLock {
      current.removeAll()
      defer { idle.removeAll(); retired.removeAll() }
      return idle.map(\.worker) + retired
    }
    for worker in workers { pxlw_free(worker) }
    inner.destroy()
  }

  // MARK: - Workers

  private static let timeLock = Lock()
  private nonisolated(unsafe) static var workerTime: [UInt: UInt64] = [:]

  /// The worker time (ns) of the isolated conversations on this thread since the last call,
  /// nil for none: the decode task's metrics (`RequestMetrics.isolated`).
  public static func takeWorkerTime() -> UInt64? {
    let key = UInt(pthread_self())
    return timeLock.withLock { workerTime.removeValue(forKey: key) }
  }

  /// One decode in a worker from the pool (a fresh one if none is idle).
  private func run(_ bytes: UnsafeBufferPointer<UInt8>, width: Int, height: Int,
                   keepOrientation: Bool, headerOnly: Bool) -> Result<Output, CodecFailure> {
    // The worker's time includes starting one (the request's metrics: worker_us).
    let started = monotonicNanoseconds()
    defer {
      let spent = monotonicNanoseconds() &- started
      let key = threadKey
      Self.timeLock.withLock { Self.workerTime[key, default: 0] &+= spent }
    }
    var worker: Idle
    switch take() {
    case .failure(let failure): return .failure(failure)
    case .success(let taken): worker = taken
    }
    var status: Int32 = 0
    var ended: Int32 = 0
    var header = pxlw_header()
    var message = [CChar](repeating: 0, count: 512)
    let timeout = settings.timeoutMilliseconds > 0 ? settings.timeoutMilliseconds : Int(Int32.max)
    let result = pxlw_decode(worker.worker, bytes.baseAddress, bytes.count, id, Int32(width), Int32(height),
                             keepOrientation ? 1 : 0, headerOnly ? 1 : 0, Int32(clamping: timeout), &status, &message, message.count,
                             &ended, &header)
    worker.decodes += 1
    let failed = status == Status.decoderFailed.rawValue
    // A worker that failed, even alive (out of its memory), is not trusted again.
    give(back: worker, usable: ended == 0 && !failed)
    guard let result else { return .failure(CodecFailure(.noMemory, "out of memory")) }
    guard status == 0 else {
      pxlw_result_free(result)
      let text = String(cString: message)
      let known = Status(rawValue: status) ?? .corruptImage
      return .failure(CodecFailure(known, text.isEmpty ? known.description : text))
    }
    return .success(Output(result: result, header: header, bytes: bytes, keepOrientation: keepOrientation))
  }

  /// A worker for one decode: an idle one, else one the warming thread is starting, else
  /// one started here. Starts the warming thread with the first decode.
  private func take(warm: Bool = true) -> Result<Idle, CodecFailure> {
    let reused: Idle? = lock.withLock {
      if warm, warmer == nil, !closed, !warmingFailed {
        do { warmer = try WorkerThread(name: "pxl-warm-\(settings.moduleName)") { [self] in warmLoop() } }
        catch { warmingFailed = true }
      }
      while idle.isEmpty, starting > waiting, !closed {
        waiting += 1
        lock.wait()
        waiting -= 1
      }
      guard let taken = idle.popLast() else {
        if warm { claim() }
        return nil
      }
      if warm { claim() }
      return taken
    }
    if let reused { return .success(reused) }
    let started = spawn()
    if warm {
      lock.withLock {
        switch started {
        case .failure: unclaim()
        case .success: warmingFailed = false  // (a worker starts again: warm again)
        }
      }
    }
    return started
  }

  /// One more worker in use (the lock held): the warming thread tops the pool up.
  private func claim() {
    busy += 1
    peakBusy = max(peakBusy, busy)
    lock.broadcast()
  }

  private func unclaim() {
    busy -= 1
    lock.broadcast()
  }

  /// Workers the warming thread should start now (the lock held): up to the most decodes
  /// seen at once plus a spare, at most poolSize.
  private var wanted: Int {
    guard peakBusy > 0, !warmingFailed else { return 0 }
    let target = min(max(1, settings.poolSize), peakBusy + 1)
    return target - (busy + idle.count + starting)
  }

  /// The warming thread: ends retired workers and starts new ones ahead of need, until
  /// `destroy`.
  private func warmLoop() {
    lock.lock()
    while !closed {
      if !retired.isEmpty {
        let ending = retired
        retired.removeAll()
        lock.unlock()
        for worker in ending { pxlw_free(worker) }
        lock.lock()
        continue
      }
      guard wanted > 0 else {
        lock.wait()
        continue
      }
      starting += 1
      lock.unlock()
      let started = spawn()
      lock.lock()
      starting -= 1
      switch started {
      case .success(let worker) where !closed: idle.append(worker)
      case .success(let worker): retired.append(worker.worker)
      case .failure: warmingFailed = true  // the decodes start their own and say why
      }
      lock.broadcast()
    }
    lock.unlock()
  }

  /// Starts a worker and checks its layers (PXL_ISOLATION_REQUIRED; the log names those
  /// missing once).
  private func spawn() -> Result<Idle, CodecFailure> {
    var message = [CChar](repeating: 0, count: 512)
    guard let worker = pxlw_spawn(settings.executable, settings.moduleDirectory, settings.moduleName,
                                  settings.maxPixels, settings.maxInputBytes, 5000, &message, message.count) else {
      return .failure(CodecFailure(.decoderFailed, "cannot start the decode worker: " + String(cString: message)))
    }
    let layers = pxlw_layers(worker)
    let missing = Self.allLayers & ~layers
    let first = lock.withLock { () -> Bool in
      defer { loggedLayers = true }
      return !loggedLayers
    }
    if missing != 0 {
      var names = [CChar](repeating: 0, count: 256)
      pxlw_layers_string(missing, &names, names.count)
      let list = String(cString: names)
      if settings.required {
        pxlw_free(worker)
        return .failure(CodecFailure(.decoderFailed, "the decode worker runs without \(list) (PXL_ISOLATION_REQUIRED)"))
      }
      if first {
        settings.log?(.warning, "pixload: the \(settings.moduleName) decode worker runs without: \(list) "
                        + "(the kernel or the container does not offer them)")
      }
    }
    return .success(Idle(worker: worker, decodes: 0))
  }

  /// A worker back from a decode: kept if it can serve more, else ended (on the warming
  /// thread when there is one, which also starts its replacement).
  private func give(back worker: Idle, usable: Bool, warm: Bool = true) {
    let keep = usable && worker.decodes < Self.maxDecodes
    let handled = lock.withLock { () -> Bool in
      if warm { unclaim() }
      if keep, !closed, idle.count < max(1, settings.poolSize) {
        idle.append(worker)
        return true
      }
      guard warmer != nil, !closed else { return false }
      retired.append(worker.worker)
      return true
    }
    if !handled { pxlw_free(worker.worker) }
  }

  /// The confining layers a worker of this codec has, as words ("namespaces landlock
  /// seccomp rlimits"; no_new_privs and closed descriptors, which every worker has, left
  /// out), starting one if none is idle; nil when none starts.
  public func layers() -> String? {
    guard case .success(let worker) = take(warm: false) else { return nil }
    var names = [CChar](repeating: 0, count: 256)
    pxlw_layers_string(pxlw_layers(worker.worker) & 0x1E, &names, names.count)
    give(back: worker, usable: true, warm: false)
    return String(cString: names)
  }
}
