import CSupport
import CWorker
#if canImport(Glibc)
import Glibc
#endif

/// The decode workers of one module (`IsolatedCodec`), or of the built-in formats under
/// PXL_ISOLATION_ALL (`IsolatedBuiltIns`): pixload-decode-worker processes started with
/// posix_spawn (worker/worker_client.c, through the CWorker target), locked before they
/// read a byte (pixload.h, "Isolation"; worker/README.md).
///
/// A pool sized to the decode threads (`poolSize`), each worker replaced after
/// `maxDecodes` and after any failure, all ended by `destroy` (pxl_loader_free). Nothing
/// starts before the pool's first decode (a loader whose host never decodes an isolated
/// format starts no process and no thread); from then a warming thread keeps as many
/// workers as the most decodes seen at once, plus a spare, up to `poolSize`, started ahead
/// of need: a retired or failed worker is replaced (and ended) there, not on a decode
/// thread.
public final class WorkerPool: @unchecked Sendable {
  /// Where and how its workers run.
  public struct Settings: Sendable {
    public var executable: String
    public var moduleDirectory: String
    /// The module the workers load ("heif"); "": none (the built-in formats' pool).
    public var moduleName: String
    /// pixload-decode-builtins.so for the built-in formats' pool (PXL_ISOLATION_ALL), or nil.
    public var builtIns: String?
    public var maxPixels: UInt64
    public var maxInputBytes: UInt64
    /// 0: no limit.
    public var timeoutMilliseconds: Int
    public var poolSize: Int
    /// PXL_ISOLATION_REQUIRED: a worker without every layer decodes nothing.
    public var required: Bool
    public var log: (@Sendable (LogLevel, String) -> Void)?

    public init(executable: String, moduleDirectory: String, moduleName: String, builtIns: String? = nil,
                maxPixels: UInt64, maxInputBytes: UInt64, timeoutMilliseconds: Int, poolSize: Int, required: Bool,
                log: (@Sendable (LogLevel, String) -> Void)?) {
      self.executable = executable
      self.moduleDirectory = moduleDirectory
      self.moduleName = moduleName
      self.builtIns = builtIns
      self.maxPixels = maxPixels
      self.maxInputBytes = maxInputBytes
      self.timeoutMilliseconds = timeoutMilliseconds
      self.poolSize = poolSize
      self.required = required
      self.log = log
    }

    /// What the name of its workers' threads and log lines call it.
    var name: String { moduleName.isEmpty ? "builtins" : moduleName }
  }

  /// Decodes a worker serves before it is replaced: a hijacked worker stays hijacked only
  /// for so many strangers' images.
  public static let maxDecodes = 200

  /// Every layer pixload-decode-worker has (PXL_WORKER_LAYER_*: no_new_privs, namespaces,
  /// landlock, seccomp, rlimits, fds_closed).
  static let allLayers: UInt32 = 0x3F

  let settings: Settings

  public init(settings: Settings) { self.settings = settings }

  struct Idle {
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

  /// The timeout a conversation is given (Int32.max ms: none).
  var timeout: Int32 { Int32(clamping: settings.timeoutMilliseconds > 0 ? settings.timeoutMilliseconds : Int(Int32.max)) }

  /// One conversation with a worker from the pool: `body` gets the worker and says whether
  /// the worker can serve again (alive, and not failed: a worker that failed, even alive,
  /// is not trusted again). Its time, worker start included, counts as this thread's
  /// worker time (`takeWorkerTime`).
  func with<T>(_ body: (UnsafeMutableRawPointer) -> (T, usable: Bool)) -> Result<T, CodecFailure> {
    let started = monotonicNanoseconds()
    defer { Self.count(since: started) }
    var worker: Idle
    switch take() {
    case .failure(let failure): return .failure(failure)
    case .success(let taken): worker = taken
    }
    let (value, usable) = body(worker.worker)
    worker.decodes += 1
    give(back: worker, usable: usable)
    return .success(value)
  }

  /// `with` in `session` (this thread's image, `WorkerSession`), when there is one: the
  /// worker the session holds for this pool, taken by its first call and given back when the
  /// session ends (one decode), so that the image's calls are one conversation; `body` also
  /// gets whether that conversation is open, and says whether it is open after.
  func with<T>(in session: WorkerSession?,
               _ body: (UnsafeMutableRawPointer, _ open: Bool) -> (T, usable: Bool, open: Bool)) -> Result<T, CodecFailure> {
    guard let session else { return with { worker in let (value, usable, _) = body(worker, false); return (value, usable) } }
    let started = monotonicNanoseconds()
    defer { Self.count(since: started) }
    let held: WorkerSession.Held
    if let found = session.held(by: self) {
      held = found
    } else {
      switch take() {
      case .failure(let failure): return .failure(failure)
      case .success(let taken): held = session.hold(taken, from: self)
      }
    }
    let (value, usable, open) = body(held.worker.worker, held.open)
    held.open = open
    // A worker that failed is not trusted again, even alive: given back (to be ended) now.
    if !usable { session.release(self, usable: false) }
    return .success(value)
  }

  /// A conversation's time counts as this thread's worker time.
  private static func count(since started: UInt64) {
    let spent = monotonicNanoseconds() &- started
    let key = UInt(pthread_self())
    timeLock.withLock { workerTime[key, default: 0] &+= spent }
  }

  private static let timeLock = Lock()
  private nonisolated(unsafe) static var workerTime: [UInt: UInt64] = [:]

  /// The worker time (ns) of the isolated conversations on this thread since the last call,
  /// nil for none: the decode task's metrics (`RequestMetrics.isolated`).
  public static func takeWorkerTime() -> UInt64? {
    let key = UInt(pthread_self())
    return timeLock.withLock { workerTime.removeValue(forKey: key) }
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
      defer { idle.removeAll(); retired.removeAll() }
      return idle.map(\.worker) + retired
    }
    for worker in workers { pxlw_free(worker) }
  }

  /// A worker for one decode: an idle one, else one the warming thread is starting, else
  /// one started here. Starts the warming thread with the first decode.
  func take(warm: Bool = true) -> Result<Idle, CodecFailure> {
    let reused: Idle? = lock.withLock {
      if warm, warmer == nil, !closed, !warmingFailed {
        do { warmer = try WorkerThread(name: "pxl-warm-\(settings.name)") { [self] in warmLoop() } }
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
    // The warming thread wakes only when it has work: not on every conversation.
    if wanted > 0 { lock.broadcast() }
  }

  private func unclaim() {
    busy -= 1
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
                                  settings.builtIns, settings.maxPixels, settings.maxInputBytes, 5000, &message, message.count) else {
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
        settings.log?(.warning, "pixload: the \(settings.name) decode worker runs without: \(list) "
                        + "(the kernel or the container does not offer them)")
      }
    }
    return .success(Idle(worker: worker, decodes: 0))
  }

  /// A worker back from a decode: kept if it can serve more, else ended (on the warming
  /// thread when there is one, which also starts its replacement).
  func give(back worker: Idle, usable: Bool, warm: Bool = true) {
    let keep = usable && worker.decodes < Self.maxDecodes
    let handled = lock.withLock { () -> Bool in
      if warm { unclaim() }
      if keep, !closed, idle.count < max(1, settings.poolSize) {
        idle.append(worker)
        if waiting > 0 { lock.broadcast() }
        return true
      }
      guard warmer != nil, !closed else { return false }
      retired.append(worker.worker)
      lock.broadcast()
      return true
    }
    if !handled { pxlw_free(worker.worker) }
  }

  /// The confining layers a worker of this pool has, as words ("namespaces landlock
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

/// One image's conversations with the workers on one decode thread (protocol 4,
/// worker/README.md): the decode stage runs a decode in `run`, and the first call of an
/// isolated codec about these bytes takes a worker from its pool that stays with the image
/// until `run` returns. Its calls (a module's header, choose_size and pixels; a built-in
/// format's INFO and decode) are then steps of one conversation: one data memfd, the bytes
/// parsed once in the worker, a round trip a step. The worker counts one decode
/// (`WorkerPool.maxDecodes`) an image.
public final class WorkerSession {
  final class Held {
    let pool: WorkerPool
    var worker: WorkerPool.Idle
    /// A conversation is open in the worker (its next step may follow).
    var open = false
    init(pool: WorkerPool, worker: WorkerPool.Idle) {
      self.pool = pool
      self.worker = worker
    }
  }

  let base: UnsafeRawPointer?
  let count: Int
  private var held: [Held] = []

  private init(_ bytes: UnsafeBufferPointer<UInt8>) {
    base = UnsafeRawPointer(bytes.baseAddress)
    count = bytes.count
  }

  private static let lock = Lock()
  private nonisolated(unsafe) static var byThread: [UInt: WorkerSession] = [:]

  /// `body` (one image's decode of `bytes`) as a session of this thread; nested: the outer one.
  public static func run<T>(_ bytes: UnsafeBufferPointer<UInt8>, _ body: () -> T) -> T {
    let key = UInt(pthread_self())
    let session = WorkerSession(bytes)
    let outer = lock.withLock { () -> Bool in
      if byThread[key] != nil { return true }
      byThread[key] = session
      return false
    }
    if outer { return body() }
    defer {
      lock.withLock { byThread[key] = nil }
      session.end()
    }
    return body()
  }

  /// This thread's session, when it is about these bytes.
  static func current(for base: UnsafeRawPointer?, count: Int) -> WorkerSession? {
    let key = UInt(pthread_self())
    guard let session = lock.withLock({ byThread[key] }), session.base == base, session.count == count else { return nil }
    return session
  }

  static func current(for bytes: UnsafeBufferPointer<UInt8>) -> WorkerSession? {
    current(for: UnsafeRawPointer(bytes.baseAddress), count: bytes.count)
  }

  // (Only this session's thread uses `held`.)
  func held(by pool: WorkerPool) -> Held? { held.first { $0.pool === pool } }

  func hold(_ worker: WorkerPool.Idle, from pool: WorkerPool) -> Held {
    let entry = Held(pool: pool, worker: worker)
    held.append(entry)
    return entry
  }

  /// Gives the pool's worker back: its conversation ended, one decode counted.
  func release(_ pool: WorkerPool, usable: Bool) {
    guard let index = held.firstIndex(where: { $0.pool === pool }) else { return }
    let entry = held.remove(at: index)
    if entry.open { pxlw_end(entry.worker.worker) }
    entry.worker.decodes += 1
    pool.give(back: entry.worker, usable: usable && pxlw_alive(entry.worker.worker) != 0)
  }

  private func end() {
    while let entry = held.first { release(entry.pool, usable: true) }
  }
}

