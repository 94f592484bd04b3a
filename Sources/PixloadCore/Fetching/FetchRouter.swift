/// The fetch stage: the loader's `DataLoading`. A transfer whose URL's scheme has a fetcher
/// (a host's, or the built-in one for `data:`) is that fetcher's; any other goes to the
/// network engine. For fetchers it does what the engine does for http: a concurrency
/// limit per fetcher (waiting fetches start highest priority first, then oldest), start
/// delays, progress, the body-size limit and the whole-transfer timeout.
///
/// Every call into a fetcher (`start`, `cancel`, `destroy`) and every progress and
/// completion runs on the stage's one thread, in the order they were queued: so `cancel`
/// comes after its `start` returned, `destroy` after the fetcher's last call, and a
/// completion never runs on the thread that called `start` or on a host's thread. The
/// thread exists once a fetcher is registered or `data:` is allowed.
final class FetchRouter: DataLoading, @unchecked Sendable {
  /// Fetch transfers are numbered with the top bit set; the engine's never reach it.
  private static let fetchBit: TransferID = 1 << 63

  let network: DataLoading
  private let timeoutNanoseconds: UInt64
  private let maxBodyBytes: Int
  private let dataRegistration: Registration?
  /// The schemes the loader's configuration lets in (http and https by default).
  private let allowedSchemes: Set<String>

  private let lock = Lock()
  private var thread: WorkerThread?
  private var events: [() -> Void] = []
  private var stopping = false
  private var registrations: [String: Registration] = [:]
  private var jobs: [TransferID: FetchJob] = [:]
  private var nextSequence: UInt64 = 0

  /// `network` is shut down by `shutdown`, also when this throws (no thread for `data:`).
  init(network: DataLoading, configuration: EngineConfiguration) throws(LoadError) {
    self.network = network
    timeoutNanoseconds = UInt64(max(0, configuration.timeoutMilliseconds)) * 1_000_000
    maxBodyBytes = configuration.maxBodyBytes
    allowedSchemes = Set(configuration.allowedSchemes)
    if configuration.allowedSchemes.contains("data") {
      dataRegistration = Registration(scheme: "data", fetcher: DataURIFetcher(maxBytes: configuration.maxBodyBytes),
                                      settings: FetcherSettings(maxConcurrent: Int.max), source: .data)
      do throws(LoadError) {
        try startThread()
      } catch {
        network.shutdown()
        throw error
      }
    } else {
      dataRegistration = nil
    }
  }

  // MARK: - Fetchers

  // MARK: - Scheme rules

  /// Lets a request for `url` in when the allow-list has its scheme or a host's fetcher
  /// serves it; throws `.schemeNotAllowed` otherwise.
  func admit(_ url: RequestURL) throws(LoadError) {
    if !allowedSchemes.contains(url.scheme) && !hasFetcher(for: url.scheme) {
      throw LoadError(.schemeNotAllowed, "scheme '\(url.scheme)' is not allowed by this loader")
    }
  }

  /// Serves URLs of `scheme` (any case; not one libcurl or the loader itself serves:
  /// http, https, file, data...) with `fetcher`; the scheme allow-list lets them in.
  /// Throws `.invalidArgument` for such a scheme, a malformed one, one that has a fetcher
  /// already or a limit below 1; `.loaderClosed` after shutdown, `.noMemory` when the
  /// thread cannot start.
  func register(_ fetcher: Fetcher, for scheme: String, settings: FetcherSettings) throws(LoadError) {
    guard let name = RequestURL.leadingScheme(scheme + ":"), name.utf8.count == scheme.utf8.count else {
      throw LoadError(.invalidArgument, "'\(scheme.prefix(64))' is not a URL scheme")
    }
    guard !Self.reservedSchemes.contains(name), !Self.curlServes(name) else {
      throw LoadError(.invalidArgument, "scheme '\(name)' is served by the loader itself")
    }
    guard settings.maxConcurrent > 0, (settings.diskMaxAgeSeconds ?? 0) >= 0 else {
      throw LoadError(.invalidArgument, "a fetcher's limit must be at least 1 and its disk lifetime not negative")
    }
    try register(fetcher, named: name, settings: settings)
  }

  private static let reservedSchemes: Set<String> = ["http", "https", "file", "data"]

  /// Whether libcurl parses `scheme` as one of its own (ftp, ...): such URLs never reach
  /// a fetcher (RequestURL hands them to libcurl's parser).
  private static func curlServes(_ scheme: String) -> Bool {
    (try? RequestURL(parsing: scheme + "://example.invalid/"))?.isVerbatim == false
  }

  /// Registers `fetcher` for `scheme` (lower case). Throws `.invalidArgument` when the
  /// scheme has one, `.loaderClosed` after shutdown, `.noMemory` when the thread cannot start.
  private func register(_ fetcher: Fetcher, named scheme: String, settings: FetcherSettings) throws(LoadError) {
    lock.lock()
    defer { lock.unlock() }
    guard !stopping else { throw LoadError(.loaderClosed, "the loader is closed") }
    guard registrations[scheme] == nil else {
      throw LoadError(.invalidArgument, "scheme '\(scheme)' already has a fetcher")
    }
    if thread == nil { try startThread() }
    registrations[scheme] = Registration(scheme: scheme, fetcher: fetcher, settings: settings, source: .fetcher)
  }

  /// Removes the fetcher of `scheme` (any case): its fetches end (their requests
  /// CANCELLED), the started ones are cancelled, then it is destroyed, all on the stage's
  /// thread. False when the scheme has none.
  @discardableResult
  func unregister(scheme: String) -> Bool {
    let scheme = scheme.lowercased()
    return lock.withLock {
      guard let registration = registrations.removeValue(forKey: scheme) else { return false }
      registration.removed = true
      let error = LoadError(.cancelled, "the fetcher of scheme '\(scheme)' was removed")
      for job in jobs.values where job.registration === registration {
        end(job, .failure(error), hostFinished: false)
      }
      events.append { registration.fetcher.destroy() }
      lock.signal()
      return true
    }
  }

  /// Whether a fetcher of the host's serves `scheme` (the scheme allow-list lets it in).
  func hasFetcher(for scheme: String) -> Bool {
    lock.withLock { registrations[scheme] != nil }
  }

  private func registration(for scheme: String) -> Registration? {
    registrations[scheme] ?? (scheme == "data" ? dataRegistration : nil)
  }

  // MARK: - DataLoading

  func start(url: RequestURL, headers: [String], revalidating: (etag: String, lastModified: String)?,
             delay: UInt64, priority: Int32, progress: TransferProgress?,
             completion: @escaping @Sendable (Result<DownloadedData, LoadError>) -> Void) -> TransferID {
    lock.lock()
    // A fetcher's bytes have no validators: a stale stored copy is simply fetched again.
    guard !stopping, let registration = registration(for: url.scheme) else {
      lock.unlock()
      return network.start(url: url, headers: headers, revalidating: revalidating, delay: delay,
                           priority: priority, progress: progress, completion: completion)
    }
    nextSequence += 1
    let job = FetchJob(id: Self.fetchBit | nextSequence, sequence: nextSequence, url: url,
                       registration: registration, priority: priority, progress: progress, completion: completion)
    if delay > 0 { job.notBefore = monotonicNanoseconds() + delay }
    jobs[job.id] = job
    registration.waiting.append(job)
    pump(registration)
    lock.unlock()
    return job.id
  }

  func cancel(_ id: TransferID) {
    guard id & Self.fetchBit != 0 else { return network.cancel(id) }
    lock.withLock {
      if let job = jobs[id] { end(job, nil, hostFinished: false) }
    }
  }

  func setPriority(_ id: TransferID, _ priority: Int32) {
    guard id & Self.fetchBit != 0 else { return network.setPriority(id, priority) }
    lock.withLock { jobs[id]?.priority = priority }
  }

  func startNow(_ id: TransferID) {
    guard id & Self.fetchBit != 0 else { return network.startNow(id) }
    lock.withLock {
      guard let job = jobs[id], job.phase == .waiting else { return }
      job.notBefore = 0
      pump(job.registration)
    }
  }

  func postpone(_ id: TransferID, nanoseconds: UInt64) {
    guard id & Self.fetchBit != 0 else { return network.postpone(id, nanoseconds: nanoseconds) }
    lock.withLock {
      guard let job = jobs[id], job.phase == .waiting, job.notBefore > 0 else { return }
      job.notBefore = max(job.notBefore, monotonicNanoseconds() + nanoseconds)
    }
  }

  var throughput: Throughput? { network.throughput }
  var tlsHandshakes: TLSHandshakeCounts { network.tlsHandshakes }

  /// The network's transfers only: a fetcher's job is the host's, measured by nobody.
  func measuredSoFar(_ id: TransferID) -> TransferTiming? {
    id & Self.fetchBit == 0 ? network.measuredSoFar(id) : nil
  }

  /// Stops the network engine, ends every fetch without its completion (the loader ends
  /// the requests), cancels the started ones, destroys every fetcher and joins the
  /// thread: no fetcher is called after this returns.
  func shutdown() {
    network.shutdown()
    let thread: WorkerThread? = lock.withLock {
      if stopping { return nil }
      stopping = true
      for job in jobs.values { end(job, nil, hostFinished: false) }
      for registration in registrations.values {
        registration.removed = true
        events.append { registration.fetcher.destroy() }
      }
      registrations.removeAll()
      lock.signal()
      return self.thread
    }
    thread?.join()
  }

  // MARK: - The host's answers (any thread)

  func write(_ job: FetchJob, _ bytes: UnsafeRawBufferPointer) -> Status {
    lock.withLock {
      guard job.phase == .started else { return .cancelled }
      guard job.body.count + bytes.count <= maxBodyBytes else {
        end(job, .failure(LoadError(.bodyTooLarge, "the fetcher's body is larger than the limit (\(maxBodyBytes) bytes)")),
            hostFinished: false)
        return .bodyTooLarge
      }
      job.body.append(contentsOf: bytes)
      if job.progress != nil, !job.progressQueued {
        job.progressQueued = true
        events.append { [self] in reportProgress(job) }
        lock.signal()
      }
      return .ok
    }
  }

  func finish(_ job: FetchJob, _ error: LoadError?) -> Bool {
    lock.withLock {
      guard job.phase == .started else { return false }
      end(job, error.map { .failure($0) } ?? .success(response(job, endedEarly: false)), hostFinished: true)
      return true
    }
  }

  // MARK: - Lock held

  /// The body as a response: its source, and whether the disk tier may keep it.
  private func response(_ job: FetchJob, endedEarly: Bool) -> DownloadedData {
    var data = DownloadedData(bytes: job.body, httpStatus: 0)
    data.source = job.registration.source
    data.endedEarly = endedEarly
    if let seconds = job.registration.settings.diskMaxAgeSeconds {
      data.diskStorage = .allowed
      data.caching.maxAge = seconds > 0 ? seconds : nil
    } else {
      data.diskStorage = .never
    }
    return data
  }

  /// Ends a fetch once: frees its slot, queues the host's `cancel` when it was started and
  /// the host did not end it, and the completion when `result` is given (nil: the loader
  /// cancelled it, or shutdown).
  private func end(_ job: FetchJob, _ result: Result<DownloadedData, LoadError>?, hostFinished: Bool) {
    let phase = job.phase
    guard phase != .ended else { return }
    job.phase = .ended
    jobs.removeValue(forKey: job.id)
    let registration = job.registration
    switch phase {
    case .waiting: registration.waiting.removeAll { $0 === job }
    case .startQueued, .started: registration.running -= 1
    case .ended: break
    }
    if phase == .started, !hostFinished, let handle = job.handle {
      events.append { registration.fetcher.cancel(handle) }
    }
    job.handle = nil
    job.body = []
    if let result {
      // Dropped once the stage stops: the loader ends the requests itself.
      let completion = job.completion
      events.append { [self] in if !lock.withLock({ stopping }) { completion(result) } }
    }
    pump(registration)
    lock.signal()
  }

  /// Starts waiting fetches while the fetcher has free slots: highest priority first, then
  /// oldest, among those whose start delay is over.
  private func pump(_ registration: Registration) {
    guard !stopping, !registration.removed else { return }
    let now = monotonicNanoseconds()
    while registration.running < registration.settings.maxConcurrent {
      var best: Int?
      for (index, job) in registration.waiting.enumerated() where job.notBefore <= now {
        if let current = best {
          let other = registration.waiting[current]
          if job.priority > other.priority || (job.priority == other.priority && job.sequence < other.sequence) {
            best = index
          }
        } else {
          best = index
        }
      }
      guard let best else { return }
      let job = registration.waiting.remove(at: best)
      job.phase = .startQueued
      registration.running += 1
      events.append { [self] in runStart(job) }
      lock.signal()
    }
  }

  // MARK: - The stage's thread

  private func startThread() throws(LoadError) {
    thread = try WorkerThread(name: "pxl-fetch") { [unowned self] in run() }
  }

  private func run() {
    lock.lock()
    while true {
      if !events.isEmpty {
        let batch = events
        events.removeAll()
        lock.unlock()
        for event in batch { event() }
        lock.lock()
        continue
      }
      if stopping { break }
      // Timeouts, and start delays that are over; then sleep until the next of either.
      let now = monotonicNanoseconds()
      var wake = UInt64.max
      var expired: [FetchJob] = []
      for job in jobs.values {
        switch job.phase {
        case .started where job.deadline > 0:
          if job.deadline <= now { expired.append(job) } else { wake = min(wake, job.deadline) }
        case .waiting where job.notBefore > now:
          wake = min(wake, job.notBefore)
        default: break
        }
      }
      let timeout = LoadError(.timeout, "the fetcher did not answer within the timeout (\(timeoutNanoseconds / 1_000_000) ms)")
      for job in expired { end(job, .failure(timeout), hostFinished: false) }
      for registration in registrations.values where !registration.waiting.isEmpty { pump(registration) }
      if let dataRegistration, !dataRegistration.waiting.isEmpty { pump(dataRegistration) }
      if !events.isEmpty { continue }
      if wake == .max { lock.wait() } else { lock.wait(untilNanoseconds: wake) }
    }
    lock.unlock()
  }

  private func runStart(_ job: FetchJob) {
    let handle: FetchHandle? = lock.withLock {
      guard job.phase == .startQueued else { return nil }
      job.phase = .started
      if timeoutNanoseconds > 0 { job.deadline = monotonicNanoseconds() + timeoutNanoseconds }
      let handle = FetchHandle(router: self, job: job)
      job.handle = handle
      return handle
    }
    guard let handle else { return }
    job.registration.fetcher.start(url: job.url.text, fetch: handle)
  }

  /// Tells the loader how much arrived; it may answer that the body so far is enough (a
  /// thumbnail's first scans): the fetch then ends with it, and the host is cancelled.
  private func reportProgress(_ job: FetchJob) {
    let snapshot: (TransferProgress, [UInt8])? = lock.withLock {
      job.progressQueued = false
      guard job.phase == .started, let progress = job.progress else { return nil }
      return (progress, job.body)
    }
    guard let (progress, body) = snapshot else { return }
    guard progress(UInt64(body.count), 0, body) else { return }
    lock.withLock {
      guard job.phase == .started else { return }
      end(job, .success(response(job, endedEarly: true)), hostFinished: false)
    }
  }
}

/// One fetcher as registered, with its slots and the fetches waiting for one.
final class Registration {
  let scheme: String
  let fetcher: Fetcher
  let settings: FetcherSettings
  let source: ImageSource
  var running = 0
  var waiting: [FetchJob] = []
  var removed = false

  init(scheme: String, fetcher: Fetcher, settings: FetcherSettings, source: ImageSource) {
    self.scheme = scheme
    self.fetcher = fetcher
    self.settings = settings
    self.source = source
  }
}

/// One fetch, from the loader's `start` to its end. Guarded by the router's lock.
final class FetchJob {
  enum Phase { case waiting, startQueued, started, ended }

  let id: TransferID
  let sequence: UInt64
  let url: RequestURL
  let registration: Registration
  let progress: TransferProgress?
  let completion: @Sendable (Result<DownloadedData, LoadError>) -> Void
  var priority: Int32
  var phase = Phase.waiting
  /// When its start delay ends (0: none); when it times out once started (0: never).
  var notBefore: UInt64 = 0
  var deadline: UInt64 = 0
  var body: [UInt8] = []
  var progressQueued = false
  /// The host's handle, from `start` until the fetch ends.
  var handle: FetchHandle?

  init(id: TransferID, sequence: UInt64, url: RequestURL, registration: Registration, priority: Int32,
       progress: TransferProgress?, completion: @escaping @Sendable (Result<DownloadedData, LoadError>) -> Void) {
    self.id = id
    self.sequence = sequence
    self.url = url
    self.registration = registration
    self.priority = priority
    self.progress = progress
    self.completion = completion
  }
}
