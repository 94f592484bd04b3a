import CCurl

/// libcurl's global state must be initialised once, before any handle exists, and
/// `curl_global_init` itself is not thread safe: a Swift global is initialised exactly once.
private let curlGlobalInit: Void = {
  _ = curl_global_init(Int(CURL_GLOBAL_ALL))
}()

/// Now in nanoseconds, from a monotonic clock (`CurlEngine.monotonicClock`); tests pass
/// one they move by hand.
public typealias EngineClock = @Sendable () -> UInt64

/// The network engine: one thread drives a libcurl multi handle (`curl_multi_poll`, woken by
/// `curl_multi_wakeup`), which reuses keep-alive connections and multiplexes HTTP/2.
///
/// Transfers wait in a list until a slot is free, overall and per host, foreground
/// (visible rows, plain loads) before background (prefetches), in the order
/// `WaitingTransfers` gives; a foreground transfer that waits while background ones hold
/// its slots stops one of them (`preemptForForeground`).
/// The multi handle and easy handles are touched only on the engine's thread; other threads
/// post starts, cancels and priority changes under the lock and wake it.
/// With a request hook (`RequestHook`), an http(s) attempt first waits for the hook's
/// answer outside the waiting list (`hooked`, like a backoff: no slot), then joins it.
public final class CurlEngine: DataLoading, @unchecked Sendable {
  private let configuration: EngineConfiguration
  private let multi: UnsafeMutableRawPointer
  /// TLS sessions, for every easy handle: a reconnection resumes.
  private let sessions: TLSSessionShare
  private let protocols: String

  private let lock = Lock()
  private var nextID: TransferID = 0
  /// Keyed by id, so that cancelling thousands (under the loader's lock) stays linear.
  private var waiting = WaitingTransfers<CurlTransfer>(starvationNanoseconds: CurlEngine.starvationNanoseconds)
  /// Transfers waiting out a start delay or a retry backoff.
  private var backingOff = DelayedTransfers<CurlTransfer>()
  /// Transfers waiting for the request hook's answer, due when the hook times out: like
  /// a backoff, they hold no slot. The calls not made yet (the engine thread makes them),
  /// and the requests the hook failed, for the engine thread to complete.
  private var hooked = DelayedTransfers<CurlTransfer>()
  private var hookCallsDue: [HookCall] = []
  private var hookFailures: [(CurlTransfer, LoadError)] = []
  private var hookSerial: UInt64 = 0
  private var cancelledWhileActive: Set<TransferID> = []
  /// Transfers started on the engine thread and not finished yet; their priority is
  /// kept up to date (a running background transfer may be preempted by a waiting
  /// foreground one).
  private var running: [TransferID: CurlTransfer] = [:]
  private var stopping = false
  private var preempted = 0
  private var meter = ThroughputMeter()
  private var thread: WorkerThread?

  // Engine thread only.
  private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
  private var activeByID: [TransferID: CurlTransfer] = [:]
  private var activePerHost: [String: Int] = [:]
  /// Sum of new connections opened, for tests and benchmarks that check reuse.
  private var connectionsOpened = 0
  /// TLS handshakes of those connections (lock).
  private var handshakes = TLSHandshakeCounts()
  /// Busy time (some transfer running) for the throughput meter: since when the current
  /// busy stretch runs, and busy time not yet recorded.
  private var busySince: UInt64?
  private var busyUnrecorded: UInt64 = 0
  /// Start budget during cancel storms: each running transfer cancelled spends one token;
  /// tokens refill at `cancelStormLimit` per second up to that many; below one token no
  /// transfer starts. Plain loading never cancels, so it is never held back.
  private var stormTokens: Double
  private var stormRefilledAt: UInt64
  /// Now, in nanoseconds: every time rule (start delays, backoffs, stalls, the storm budget,
  /// busy time) reads this, never the system clock itself.
  private let clock: EngineClock

  /// The monotonic clock, the engine's unless a test passes its own.
  public static let monotonicClock: EngineClock = { monotonicNanoseconds() }

  public init(configuration: EngineConfiguration, clock: @escaping EngineClock = CurlEngine.monotonicClock) throws(LoadError) {
    _ = curlGlobalInit
    try Self.probeSafetyOptions(configuration)
    sessions = try TLSSessionShare()
    guard let multi = curl_multi_init() else { throw LoadError(.noMemory, "curl_multi_init failed") }
    self.multi = multi
    self.configuration = configuration
    self.clock = clock
    stormTokens = Double(configuration.cancelStormLimit)
    stormRefilledAt = clock()
    protocols = Self.allowedProtocols(configuration)
    // Keep as many idle connections as can be busy at once, so scrolling back and forth
    // reuses them instead of reconnecting.
    _ = pxl_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, max(4, configuration.maxConcurrentDownloads))
    _ = pxl_curl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
    // Last: nothing may throw once the thread runs. If it cannot start, deinit cleans up
    // the multi handle (there is no thread to stop).
    thread = try WorkerThread(name: "pxl-network") { [unowned self] in self.run() }
  }

  deinit {
    shutdown()
    curl_multi_cleanup(multi)
  }

  public func start(url: RequestURL, headers: [String], revalidating: (etag: String, lastModified: String)?,
                    delay: UInt64, priority: Int32, progress: TransferProgress?,
                    completion: @escaping @Sendable (Result<DownloadedData, LoadError>) -> Void) -> TransferID {
    var request = TransferRequest(loaderHeaders: configuration.headers, requestHeaders: headers)
    if let revalidating {
      if !revalidating.etag.isEmpty { request.validatorHeaders.append("If-None-Match: \(revalidating.etag)") }
      if !revalidating.lastModified.isEmpty {
        request.validatorHeaders.append("If-Modified-Since: \(revalidating.lastModified)")
      }
    }
    let id: TransferID = lock.withLock {
      nextID += 1
      let transfer = CurlTransfer(id: nextID, url: url, request: request,
                                  priority: priority, maxBodyBytes: configuration.maxBodyBytes, clock: clock,
                                  engineLock: lock, progress: progress, completion: completion)
      transfer.conditional = revalidating != nil
      if delay > 0 {
        // Held like a retry backoff: cancellable without ever opening a connection.
        backingOff.add(transfer, id: transfer.id, due: clock() + delay)
      } else {
        enqueue(transfer, at: clock())
      }
      return nextID
    }
    curl_multi_wakeup(multi)
    return id
  }

  public func cancel(_ id: TransferID) {
    let engineMustStop: Bool = lock.withLock {
      if waiting.remove(id) != nil { return false }
      // Waiting out a backoff: it ends now, no further attempt is made.
      if backingOff.remove(id) != nil { return false }
      // Waiting for the hook: its answer will find nothing to do.
      if hooked.remove(id) != nil { return false }
      // Remember only transfers still running: a cancel racing a finished transfer must
      // not leave its id behind forever.
      guard running[id] != nil else { return false }
      cancelledWhileActive.insert(id)
      return true
    }
    // The engine thread removes a running transfer (and so frees its slot) at once.
    if engineMustStop { curl_multi_wakeup(multi) }
  }

  /// Lock held: the transfer `id` names while it is not finished (waiting, backing off,
  /// waiting for the hook, or running).
  private func transfer(_ id: TransferID) -> CurlTransfer? {
    waiting.item(id) ?? backingOff.item(id) ?? hooked.item(id) ?? running[id]
  }

  public func measuredSoFar(_ id: TransferID) -> TransferTiming? {
    lock.withLock { transfer(id)?.measuredSoFar }
  }

  /// Back-pressure from the loader that made the engine (`PriorityWorkPool.isBacklogged`):
  /// true while so many downloaded bodies wait for a decode thread that a new transfer
  /// would only add one more body to keep in fresh memory. No new transfer starts then;
  /// running ones go on. The one who answered true calls `resumeStarts` once it would
  /// answer false. Engine lock (set before the first transfer; read in `takeStartable`).
  private var startsHeld: (@Sendable () -> Bool)?

  func holdStarts(while held: @escaping @Sendable () -> Bool) {
    lock.withLock { startsHeld = held }
  }

  /// Starts what `startsHeld` held back (any thread).
  func resumeStarts() { curl_multi_wakeup(multi) }

  public func startNow(_ id: TransferID) {
    let moved: Bool = lock.withLock {
      guard let transfer = backingOff.item(id), transfer.attempts == 0 else { return false }
      backingOff.remove(id)
      enqueue(transfer, at: clock())
      return true
    }
    if moved { curl_multi_wakeup(multi) }
  }

  public func postpone(_ id: TransferID, nanoseconds: UInt64) {
    lock.withLock {
      guard let transfer = backingOff.item(id), transfer.attempts == 0 else { return }
      backingOff.postpone(id, until: clock() + nanoseconds)
    }
  }

  public func setPriority(_ id: TransferID, _ priority: Int32) {
    lock.withLock {
      // Waiting ones are re-ranked; a running one keeps its slot, unless it is (now)
      // background and a foreground transfer waits for the slot (see preemptForForeground).
      transfer(id)?.priority = priority
      waiting.setPriority(id, priority)
    }
  }

  public func shutdown() {
    let running: WorkerThread? = lock.withLock {
      stopping = true
      waiting.removeAll()
      backingOff.removeAll()
      hooked.removeAll()
      hookCallsDue.removeAll()
      hookFailures.removeAll()
      defer { thread = nil }
      return thread
    }
    guard let running else { return }
    curl_multi_wakeup(multi)
    running.join()
  }

  /// `CURLOPT_PROTOCOLS_STR` for the configuration's allowed schemes.
  private static func allowedProtocols(_ configuration: EngineConfiguration) -> String {
    ["http", "https", "file"].filter(configuration.allowedSchemes.contains).joined(separator: ",")
  }

  /// Sets the safety options on a throwaway handle: a libcurl that lacks one fails the
  /// loader's creation instead of running transfers without the guard.
  private static func probeSafetyOptions(_ configuration: EngineConfiguration) throws(LoadError) {
    guard let easy = curl_easy_init() else { throw LoadError(.noMemory, "curl_easy_init failed") }
    defer { curl_easy_cleanup(easy) }
    // No scheme allowed: no transfer ever starts, but the option must still exist.
    let protocols = allowedProtocols(configuration)
    // The error's message names the option and libcurl's version; pxl_loader_new passes
    // it to the host's log callback.
    let options = CurlOption.safety(configuration, protocols: protocols.isEmpty ? "http" : protocols)
    try CurlOption.require(options, libcurlVersion: CurlOption.libcurlVersion) { $0.apply(to: easy) }
  }

  /// New connections opened so far (each transfer that could not reuse one adds one).
  public var connectionCount: Int { lock.withLock { connectionsOpened } }

  /// TLS handshakes of the connections opened so far, and how many resumed a session.
  public var tlsHandshakes: TLSHandshakeCounts { lock.withLock { handshakes } }

  /// Background transfers stopped so far to free a slot for a foreground one.
  public var preemptionCount: Int { lock.withLock { preempted } }

  public var throughput: Throughput? { lock.withLock { meter.estimate } }

  /// Engine thread: the busy time since the last record, for the meter.
  private func takeBusyTime() -> UInt64 {
    let now = clock()
    var busy = busyUnrecorded
    if let since = busySince {
      busy += now &- since
      busySince = now
    }
    busyUnrecorded = 0
    return busy
  }

  // MARK: - Engine thread

  private func run() {
    while true {
      let (cancels, stop): ([TransferID], Bool) = lock.withLock {
        if stopping { return ([], true) }
        // At the top of the loop every live transfer that is not waiting is running.
        let running = Array(cancelledWhileActive)
        cancelledWhileActive.removeAll()
        return (running, false)
      }
      if stop { break }
      for id in cancels {
        if let transfer = activeByID[id] {
          finish(transfer, dropped: true, code: CURLE_OK)
          // Floored, so a burst of cancels holds starts back for at most about a second.
          stormTokens = max(-Double(configuration.cancelStormLimit), stormTokens - 1)
        }
      }
      let stormWait = refillStormTokens()
      // Cancels first, so the slots they free are filled in this same round.
      let now = clock()
      let (starts, calls, hookEnded): ([CurlTransfer], [HookCall], [(CurlTransfer, LoadError)]) = lock.withLock {
        // Backoffs that are over go back to the waiting list, keeping their rank.
        for transfer in backingOff.takeDue(now: now) { enqueue(transfer, at: now) }
        // During a cancel storm (a fling through thousands of rows) new transfers wait:
        // most of them would be cancelled before their first byte.
        let starts = stormWait > 0 ? [] : takeStartable()
        for transfer in starts { self.running[transfer.id] = transfer }
        let timeout = LoadError(.timeout, "the request hook did not answer within \(hookTimeoutNanoseconds / 1_000_000) ms")
        let ended = hookFailures + hooked.takeDue(now: now).map { ($0, timeout) }
        hookFailures.removeAll()
        // A call whose transfer was cancelled meanwhile is not made.
        let calls = hookCallsDue.filter { hooked.item($0.transferID)?.hookSerial == $0.serial }
        hookCallsDue.removeAll()
        return (starts, calls, ended)
      }
      for (transfer, error) in hookEnded { transfer.completion(.failure(error)) }
      for transfer in starts { begin(transfer) }
      if let hook = configuration.requestHook {
        for call in calls { hook.call(call) }
      }
      if stormWait == 0 { preemptForForeground(now: now) }
      let nextStallCheck = endStalledTransfers()

      var running: Int32 = 0
      _ = curl_multi_perform(multi, &running)
      var remaining: Int32 = 0
      var finishedAny = false
      while let message = curl_multi_info_read(multi, &remaining) {
        guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle,
              let transfer = active[easy] else { continue }
        finish(transfer, dropped: false, code: message.pointee.data.result)
        finishedAny = true
      }
      // A finished transfer freed a slot: start the next one now. Waiting in poll instead
      // would sleep until some other socket stirs, or a full second when none is busy.
      if finishedAny { continue }
      let nextReport = reportHeldProgress()
      // Wait for socket activity, a wakeup (new work), a timer libcurl asks for, or the end
      // of the next backoff.
      let (nextRetry, hookWork): (UInt64?, Bool) = lock.withLock {
        let dues = [backingOff.nextDue(), hooked.nextDue()].compactMap { $0 }
        return (dues.min(), !hookCallsDue.isEmpty || !hookFailures.isEmpty)
      }
      var timeout: Int32 = stormWait > 0 ? Int32(min(1000, stormWait / 1_000_000 + 1)) : 1000
      timeout = min(timeout, nextStallCheck, nextReport)
      if hookWork { timeout = 0 }
      if let nextRetry {
        let now = clock()
        timeout = min(timeout, nextRetry <= now ? 0 : Int32(min(1000, (nextRetry - now + 999_999) / 1_000_000)))
      }
      _ = curl_multi_poll(multi, nil, 0, timeout, nil)
    }
    for transfer in Array(active.values) { finish(transfer, dropped: true, code: CURLE_OK) }
  }

  /// Makes the progress reports the throttle held back once they are due (a listener may
  /// end its transfer there, as from the write callback). Returns milliseconds until the
  /// next one is (0 when a transfer ended: its slot is free for the next start).
  private func reportHeldProgress() -> Int32 {
    let now = clock()
    var next: UInt64 = 1_000_000_000
    for transfer in Array(active.values) {
      guard let due = transfer.heldProgressDue(now: now) else { continue }
      if due > 0 {
        next = min(next, due)
      } else if transfer.reportProgress() {
        finish(transfer, dropped: false, code: CURLE_WRITE_ERROR)
        next = 0
      }
    }
    return Int32((next + 999_999) / 1_000_000)
  }

  /// Fails running transfers that received nothing for the stall timeout (libcurl's own
  /// low-speed check averages over seconds and let a stall after a burst run for 6 s).
  /// Returns milliseconds until the next transfer could stall.
  private func endStalledTransfers() -> Int32 {
    let limit = UInt64(configuration.stallTimeoutMilliseconds) * 1_000_000
    guard limit > 0, !active.isEmpty else { return 1000 }
    let now = clock()
    var next: UInt64 = 1_000_000_000
    for transfer in Array(active.values) {
      let quiet = now - transfer.lastActivity
      if quiet >= limit {
        transfer.abortReason = LoadError(.timeout, "no data received for \(configuration.stallTimeoutMilliseconds) ms (stalled transfer)")
        finish(transfer, dropped: false, code: CURLE_OPERATION_TIMEDOUT)
      } else {
        next = min(next, limit - quiet)
      }
    }
    return Int32(next / 1_000_000 + 1)
  }

  /// Refills the storm budget; returns 0 when starts may proceed, else nanoseconds until
  /// one token is back.
  private func refillStormTokens() -> UInt64 {
    let rate = Double(configuration.cancelStormLimit)
    guard rate > 0 else { return 0 }
    let now = clock()
    stormTokens = min(rate, stormTokens + rate * Double(now - stormRefilledAt) / 1e9)
    stormRefilledAt = now
    return stormTokens >= 1 ? 0 : UInt64((1 - stormTokens) / rate * 1e9)
  }

  /// Lock held: puts a transfer on the waiting list. Its age (see takeStartable) counts
  /// from the first time it waited: a retry keeps its place among the starved. With a
  /// request hook, an http(s) attempt the hook has not answered for waits for it instead
  /// (`askHook`), holding no slot.
  private func enqueue(_ transfer: CurlTransfer, at now: UInt64) {
    if configuration.requestHook != nil, !transfer.hookAnswered, transfer.url.isHTTP {
      askHook(transfer, at: now)
      return
    }
    let since = transfer.firstQueued ?? now
    transfer.firstQueued = since
    transfer.lastQueued = now
    waiting.append(transfer, id: transfer.id, host: transfer.host, priority: transfer.priority, since: since)
  }

  /// How long a hook call may wait: the hook timeout, or the request timeout when that
  /// is shorter (0 is no limit for either; both 0: an hour, as good as none).
  private var hookTimeoutNanoseconds: UInt64 {
    let limits = [configuration.hookTimeoutMilliseconds, configuration.timeoutMilliseconds].filter { $0 > 0 }
    return UInt64(limits.min() ?? 3_600_000) * 1_000_000
  }

  /// Lock held: parks a transfer until the hook answers (or times out) and queues the
  /// call for the engine thread, which makes it outside the lock.
  private func askHook(_ transfer: CurlTransfer, at now: UInt64) {
    hookSerial += 1
    transfer.hookSerial = hookSerial
    hookCallsDue.append(HookCall(url: transfer.url.text, headers: transfer.hopHeaders, status: transfer.hookStatus,
                                 transferID: transfer.id, serial: hookSerial, engine: self))
    transfer.hookStatus = 0
    hooked.add(transfer, id: transfer.id, due: now + hookTimeoutNanoseconds)
  }

  /// Any thread: the hook's answer to `call`. Headers send the transfer on to wait for a
  /// slot; an error ends it on the engine thread. False when the call no longer waits
  /// (answered, cancelled, timed out, shut down).
  func hookAnswered(_ call: HookCall, _ answer: Result<[String], LoadError>) -> Bool {
    let taken: Bool = lock.withLock {
      guard !stopping, let transfer = hooked.item(call.transferID), transfer.hookSerial == call.serial else {
        return false
      }
      hooked.remove(call.transferID)
      switch answer {
      case .success(let headers):
        transfer.hookHeaders = headers
        transfer.hookAnswered = true
        enqueue(transfer, at: clock())
      case .failure(let error):
        hookFailures.append((transfer, error))
      }
      return true
    }
    if taken { curl_multi_wakeup(multi) }
    return taken
  }

  /// A transfer that has waited this long starts before any that has not, oldest first.
  static let starvationNanoseconds: UInt64 = 5_000_000_000

  /// Lock held: removes and returns the waiting transfers that fit in free slots: highest
  /// priority first, and among equals the newest (the row that just became visible), except
  /// that transfers waiting `starvationNanoseconds` or more go first, oldest first. Without
  /// that, newest-first starves the oldest requests for as long as new ones keep coming.
  private func takeStartable() -> [CurlTransfer] {
    var started: [CurlTransfer] = []
    if let startsHeld, startsHeld() { return [] }
    var slots = configuration.maxConcurrentDownloads - active.count
    var perHost = activePerHost
    let now = clock()
    let perHostLimit = configuration.maxDownloadsPerHost
    while slots > 0, let transfer = waiting.takeNext(now: now, hasRoom: { perHost[$0, default: 0] < perHostLimit }) {
      perHost[transfer.host, default: 0] += 1
      started.append(transfer)
      slots -= 1
    }
    return started
  }

  private func begin(_ transfer: CurlTransfer) {
    guard let easy = curl_easy_init() else {
      lock.withLock { _ = running.removeValue(forKey: transfer.id) }
      transfer.completion(.failure(LoadError(.noMemory, "curl_easy_init failed")))
      return
    }
    transfer.easy = easy
    transfer.prepareAttempt()
    transfer.slotWaitNanoseconds += clock() &- transfer.lastQueued
    // The attempt's figures start with its slot wait (a cancel before the response has it).
    transfer.publishMeasured()
    let isHTTPS = transfer.url.isHTTPS
    do throws(LoadError) {
      // Every option is checked: a transfer that lacks one of the safety rules (scheme
      // allow-lists, limits, TLS verification) fails instead of running without it.
      try CurlOption.require(CurlOption.safety(configuration, protocols: protocols),
                             libcurlVersion: CurlOption.libcurlVersion) { $0.apply(to: easy) }
      try transfer.setRequestOptions(on: easy, userAgent: configuration.userAgent)
      let shared = pxl_curl_easy_setopt_ptr(easy, CURLOPT_SHARE, sessions.handle)
      if shared != CURLE_OK {
        throw LoadError(.network, "libcurl refused CURLOPT_SHARE: \(String(cString: curl_easy_strerror(shared)))")
      }
    } catch {
      failBeforeStart(transfer, easy, error)
      return
    }
    // Hints only: without them transfers are still correct, so their results do not matter.
    _ = pxl_curl_easy_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1)
    // Over TLS, wait for a connection being set up to learn (ALPN) whether it multiplexes
    // HTTP/2, instead of opening one connection per transfer. Never over plain HTTP: there it
    // made every new transfer to a host wait for the busy connection to finish.
    if isHTTPS { _ = pxl_curl_easy_setopt_long(easy, CURLOPT_PIPEWAIT, 1) }
    let added = curl_multi_add_handle(multi, easy)
    if added != CURLM_OK {
      // Never registered with the multi handle: it would never finish, so it fails now.
      failBeforeStart(transfer, easy, LoadError(.network,
        "libcurl could not start the transfer: \(String(cString: curl_multi_strerror(added)))"))
      return
    }
    active[easy] = transfer
    activeByID[transfer.id] = transfer
    activePerHost[transfer.host, default: 0] += 1
    if busySince == nil { busySince = clock() }
  }

  /// A transfer that could not be handed to libcurl ends with `error`, forgetting any
  /// cancel that raced its start.
  private func failBeforeStart(_ transfer: CurlTransfer, _ easy: UnsafeMutableRawPointer, _ error: LoadError) {
    curl_easy_cleanup(easy)
    transfer.easy = nil
    lock.withLock {
      _ = running.removeValue(forKey: transfer.id)
      _ = cancelledWhileActive.remove(transfer.id)
    }
    transfer.completion(.failure(error))
  }

  /// Engine thread: takes a transfer out of libcurl and frees its slot.
  private func detach(_ transfer: CurlTransfer, _ easy: UnsafeMutableRawPointer) {
    _ = curl_multi_remove_handle(multi, easy)
    curl_easy_cleanup(easy)
    transfer.easy = nil
    active.removeValue(forKey: easy)
    activeByID.removeValue(forKey: transfer.id)
    activePerHost[transfer.host, default: 1] -= 1
    if activePerHost[transfer.host] == 0 { activePerHost.removeValue(forKey: transfer.host) }
    if active.isEmpty, let since = busySince {
      busyUnrecorded += clock() &- since
      busySince = nil
    }
  }

  /// Engine thread: while a foreground transfer waits because background ones hold the
  /// slots it could use (its host's, or the engine's), stops the background transfer that
  /// has received least (least lost), puts it back on the waiting list with its age, and
  /// fills the freed slot, foreground first. Each round stops one background transfer and
  /// starts a foreground one, so it ends.
  private func preemptForForeground(now: UInt64) {
    for _ in 0...configuration.maxConcurrentDownloads {
      let victim: CurlTransfer? = lock.withLock {
        // Starts held (`startsHeld`): the freed slot would stay empty.
        if let startsHeld, startsHeld() { return nil }
        guard let host = waiting.nextForegroundHost(now: now) else { return nil }
        let hostFull = activePerHost[host, default: 0] >= configuration.maxDownloadsPerHost
        let engineFull = active.count >= configuration.maxConcurrentDownloads
        let candidates = active.values.compactMap { transfer -> PreemptionCandidate? in
          guard running[transfer.id] != nil else { return nil }
          return PreemptionCandidate(id: transfer.id, host: transfer.host, priority: transfer.priority,
                                     received: transfer.body.count, expected: Int(transfer.expectedLength),
                                     waitedLong: now &- (transfer.firstQueued ?? now) >= Self.starvationNanoseconds)
        }
        guard let id = PreemptionCandidate.victim(for: host, hostFull: hostFull, engineFull: engineFull,
                                                  running: candidates) else { return nil }
        return activeByID[id]
      }
      guard let victim, let easy = victim.easy else { return }
      let received = victim.body.count
      detach(victim, easy)
      let busy = takeBusyTime()
      let starts: [CurlTransfer] = lock.withLock {
        meter.record(bytes: received, complete: false, busyNanoseconds: busy)
        handshakes.add(victim.handshake)
        running.removeValue(forKey: victim.id)
        // Cancelled meanwhile: it ends here, reporting nothing, as a cancelled one does.
        if cancelledWhileActive.remove(victim.id) == nil && !stopping {
          victim.attempts -= 1  // not a failed attempt: no retry is spent on it
          preempted += 1
          enqueue(victim, at: now)
        }
        let starts = takeStartable()
        for transfer in starts { running[transfer.id] = transfer }
        return starts
      }
      for transfer in starts { begin(transfer) }
    }
  }

  /// Removes a transfer from libcurl and reports its outcome (`HTTPOutcome`), or schedules
  /// its retry. `dropped`: cancelled or shutting down, report nothing. A cancel can race
  /// this from another thread, so whether it was cancelled is decided under the lock, with
  /// the retry.
  private func finish(_ transfer: CurlTransfer, dropped: Bool, code: CURLcode) {
    guard let easy = transfer.easy else { return }
    let httpStatus = pxl_curl_response_code(easy)
    let attempt = transfer.finishedAttempt(code: code, httpStatus: httpStatus,
                                           retryAfterSeconds: Int(pxl_curl_retry_after(easy)))
    let connects = pxl_curl_num_connects(easy)
    let timing = dropped ? TransferTiming() : transfer.timing(easy, httpStatus: httpStatus, connects: connects)
    // Kept while a retry waits: a cancel then reports this attempt.
    if !dropped { transfer.publish(timing) }
    detach(transfer, easy)

    let outcome = dropped ? nil : HTTPOutcome(attempt, attemptsMade: transfer.attempts, chain: transfer.chain,
                                              configuration: configuration)
    var complete = false
    if case .success? = outcome { complete = true }
    let busy = takeBusyTime()
    let report: Bool = lock.withLock {
      meter.record(bytes: attempt.body.count, complete: complete, busyNanoseconds: busy)
      connectionsOpened += connects
      handshakes.add(transfer.handshake)
      running.removeValue(forKey: transfer.id)
      let cancelled = cancelledWhileActive.remove(transfer.id) != nil
      if dropped || cancelled || stopping { return false }
      switch outcome {
      case .retry(_, let delay)?:
        // Each attempt asks the hook again (a token may have expired meanwhile).
        transfer.hookAnswered = false
        backingOff.add(transfer, id: transfer.id, due: clock() + delay)
        return false
      case .failure(let error)? where configuration.requestHook != nil && !transfer.authRetried
                                      && transfer.url.isHTTP && error.status == .http
                                      && (error.httpStatus == 401 || error.httpStatus == 403):
        // The token may have expired: the hook is asked once more, told why, and the
        // request retried once with its answer (not a spent retry).
        transfer.authRetried = true
        transfer.hookStatus = error.httpStatus
        transfer.hookAnswered = false
        transfer.attempts -= 1
        enqueue(transfer, at: clock())
        return false
      case .follow(let target)?:
        // The next hop waits for a slot on its host like any transfer, keeping its age.
        transfer.follow(target)
        enqueue(transfer, at: clock())
        return false
      default:
        return true
      }
    }
    guard report else { return }
    switch outcome {
    case .success(var data)?:
      data.timing = timing
      // libcurl reads file:// URLs too: the result says no server was involved.
      if transfer.url.isFile { data.source = .file }
      transfer.completion(.success(data))
    case .failure(var error)?:
      error.timing = timing
      transfer.completion(.failure(error))
    case .retry?, .follow?, nil: break
    }
  }
}

/// A running transfer as preemption sees it.
struct PreemptionCandidate: Equatable {
  let id: TransferID
  let host: String
  let priority: Int32
  /// Body bytes received so far: what stopping it throws away; and the declared length
  /// (0: unknown).
  let received: Int
  var expected = 0
  /// It had waited the starvation time before it started (maybe on the background's share
  /// of starts): stopping it would send it back to wait again, for ever in a backlog.
  var waitedLong = false

  /// Stopping a transfer that has half its body or more throws away more than waiting
  /// for it costs: it runs on.
  var isWorthStopping: Bool { !waitedLong && (expected <= 0 || received * 2 < expected) }

  /// The running transfer to stop so that a foreground transfer waiting for `host` can
  /// start, nil if none should be: only a background transfer is stopped, on that host
  /// when the host is full, on any host when only the engine is full (the freed slot then
  /// goes to a foreground transfer, as its host has room), and only one that has less than
  /// half its body and had not waited long (`isWorthStopping`); the one that has received
  /// least, then the lowest priority, then the newest.
  static func victim(for host: String, hostFull: Bool, engineFull: Bool,
                     running: [PreemptionCandidate]) -> TransferID? {
    guard hostFull || engineFull else { return nil }
    let eligible = running.filter {
      !WaitingTransfers<Void>.isForeground($0.priority) && (!hostFull || $0.host == host) && $0.isWorthStopping
    }
    return eligible.min { a, b in
      if a.received != b.received { return a.received < b.received }
      if a.priority != b.priority { return a.priority < b.priority }
      return a.id > b.id
    }?.id
  }
}
