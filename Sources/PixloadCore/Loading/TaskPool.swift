/// The coordinator's pool of stage tasks (Nuke's `TaskPool`): every accepted request, the
/// one variant task of each variant that requests share (`VariantTask.swift`), the one
/// original-data task of each cache key that variant tasks share (`OriginalDataTask.swift`),
/// with the decode (`DecodeTask.swift`), the process task of each chain prefix
/// (`ProcessTask.swift`) and the previews of a transfer (`PreviewTask.swift`). The task of
/// a decoded variant is the decode task (its key is what a decode merges on: source, size,
/// mode, format), the task of a processed variant the process task of its chain's prefix
/// (Nuke's TaskLoadImage per prefix); both are `VariantTask`s. A task subscribes to the one
/// below it, is cancelled when its last subscriber leaves, and runs at the highest priority
/// among them. Each task's phase is one enum value, so a task is in exactly one state and
/// leaving it drops what that state held.
///
/// One lock discipline: `lock` guards every table, every task and every request's link to
/// its task, and is held only for bookkeeping, never while a stage works. The stages answer
/// on their own threads (the disk tier's, the engine's, the fetch thread, the decode pool)
/// and take the lock to hand their answer on; what a finished task gives out (results,
/// stored variants, previews, progress, `DiskTier.received`) is posted after unlocking.
/// Lock order: this lock, then a completion queue's, the memory cache's, a work pool's,
/// the disk tier's or the engine's; never the reverse (so no stage calls back into the
/// pool inside a call the pool makes under its lock: lookups and transfers answer on their
/// own threads). A task's functions say "lock held" when their caller holds it.
final class TaskPool: DeliveryOwner, @unchecked Sendable {
  let configuration: LoaderConfiguration
  let memoryCache: MemoryCache
  let diskTier: DiskTier?
  let dataLoader: DataLoading
  let decoder: ImageDecoding
  let decodePool: PriorityWorkPool

  let lock = Lock()
  var nextToken: UInt64 = 0
  var closed = false
  /// Every accepted request whose handler has not started yet.
  var requests: [UInt64: PendingRequest] = [:]
  var downloads: [OriginalDataKey: OriginalDataTask] = [:]
  var decodes: [VariantTaskKey: VariantTask] = [:]
  var counters = LoaderStatistics()

  init(configuration: LoaderConfiguration, memoryCache: MemoryCache, diskTier: DiskTier?, dataLoader: DataLoading,
       decoder: ImageDecoding, decodePool: PriorityWorkPool) {
    self.configuration = configuration
    self.memoryCache = memoryCache
    self.diskTier = diskTier
    self.dataLoader = dataLoader
    self.decoder = decoder
    self.decodePool = decodePool
  }

  // MARK: - Intake's calls

  /// Registers a request for `variant` with `queue` and answers it from the memory cache or
  /// attaches it to the task of its variant. Throws when closed or the queue is.
  /// `intakeAt`: when the load call began (where its `total_us` starts).
  func accept(_ request: ImageRequest, url: RequestURL, variant: ImageVariant, queue: CompletionQueue,
              intakeAt: UInt64, delivery makeDelivery: (UInt64) -> Delivery) throws(LoadError) -> UInt64 {
    lock.lock()
    if closed {
      lock.unlock()
      throw LoadError(.loaderClosed, "the loader is closed")
    }
    nextToken += 1
    let token = nextToken
    let delivery = makeDelivery(token)
    guard queue.register(delivery) else {
      lock.unlock()
      throw LoadError(.invalidArgument, "the completion queue is closed")
    }
    let pending = PendingRequest(token: token, delivery: delivery, queue: queue,
                                 priority: request.priority, usesMemoryCache: request.usesMemoryCache)
    requests[token] = pending
    counters.requests += 1
    if request.usesMemoryCache, request.cachePolicy != .reload, let image = memoryCache.image(for: variant) {
      counters.memoryHits += 1
      lock.unlock()
      var metrics = RequestMetrics()
      metrics.tier = .memory
      queue.complete(delivery, with: .success(image, .memory, httpStatus: 0), metrics: metrics)
      return token
    }
    if request.cachePolicy == .cacheOnly && diskTier == nil {
      // Offline and no disk cache: the memory miss above was the whole answer.
      counters.failed += 1
      lock.unlock()
      queue.complete(delivery, with: .failure(LoadError(.notCached, "not in the memory cache (cache-only request, no disk cache)")))
      return token
    }
    attach(pending, to: VariantTaskKey(variant: variant, policy: request.cachePolicy),
           source: DownloadSource(url: url, headers: request.headers,
                                  startDelayMilliseconds: request.startDelayMilliseconds), intakeAt: intakeAt)
    lock.unlock()
    return token
  }

  /// The tokens of the requests whose results go to `queue` (every one when nil).
  func tokens(of queue: CompletionQueue?) -> [UInt64] {
    lock.withLock { requests.values.filter { queue == nil || $0.queue === queue }.map(\.token) }
  }

  /// Cancels a request whose handler has not started (see `ImageLoader.cancel`).
  func cancel(_ token: UInt64) -> Bool {
    let found: (PendingRequest, RequestMetrics)? = lock.withLock {
      guard let pending = requests.removeValue(forKey: token) else { return nil }
      let measured = measuredSoFar(pending)
      detach(pending)
      return (pending, measured)
    }
    guard let (pending, measured) = found else { return false }
    let cancelled = pending.queue.cancel(pending.delivery, measured: measured)
    if cancelled { lock.withLock { counters.cancelled += 1 } }
    return cancelled
  }

  func setPriority(_ token: UInt64, _ priority: Int32) -> Bool {
    lock.withLock {
      guard let pending = requests[token] else { return false }
      pending.priority = priority
      if let decode = pending.decode { rerank(decode) }
      return true
    }
  }

  /// The transfer a request waits on (directly or through the tasks it is processed from),
  /// handed to `body` under the lock.
  func withTransfer(of token: UInt64, _ body: (TransferID) -> Void) {
    lock.withLock {
      guard let transfer = requests[token]?.decode.flatMap(download(under:))?.transfer else { return }
      body(transfer)
    }
  }

  /// Closes the pool: no request is accepted any more, the task graph's back references go
  /// (nothing outlives the loader), a custom processor under way sees its flag. Returns
  /// every request still waiting with what it had measured, for the caller to cancel once
  /// the stages stopped; empty when already closed.
  func close() -> [(PendingRequest, RequestMetrics)] {
    lock.withLock {
      if closed { return [] }
      closed = true
      let all = Array(requests.values)
      // As a cancel does: what each had measured, read before the graph goes.
      let measured = all.map { ($0, measuredSoFar($0)) }
      for download in downloads.values { download.decodes.removeAll() }
      for decode in decodes.values {
        decode.phase = .idle
        decode.requests.removeAll()
        decode.children.removeAll()
        if let flag = decode.cancel { ImageProcessing.raise(flag) }
      }
      for pending in all { pending.decode = nil }
      requests.removeAll()
      downloads.removeAll()
      decodes.removeAll()
      return measured.sorted { $0.0.token < $1.0.token }
    }
  }

  // MARK: - DeliveryOwner

  func deliveryFinished(_ delivery: Delivery) {
    lock.withLock {
      if let pending = requests.removeValue(forKey: delivery.token) { detach(pending) }
    }
  }

  /// A queue the host drained again: decodes held back for it run (in priority order, as
  /// the pool ranks them) unless all their other requesters' queues are still full.
  func queueDrained(_ queue: CompletionQueue) {
    lock.withLock {
      for decode in decodes.values {
        guard case .held(let input) = decode.phase, decode.requests.values.contains(where: { $0.queue === queue })
        else { continue }
        scheduleDecode(decode, input)
      }
    }
  }
}

/// A request waiting for its result, subscribed to the task of its variant.
final class PendingRequest {
  let token: UInt64
  let delivery: Delivery
  let queue: CompletionQueue
  let usesMemoryCache: Bool
  var priority: Int32
  /// The decode task this request waits on; nil once it has a result or was detached.
  var decode: VariantTask?
  /// It joined a decode or download another request started (request metrics).
  var joined = false

  init(token: UInt64, delivery: Delivery, queue: CompletionQueue, priority: Int32, usesMemoryCache: Bool) {
    self.token = token
    self.delivery = delivery
    self.queue = queue
    self.priority = priority
    self.usesMemoryCache = usesMemoryCache
  }
}

/// The key of an original-data task: requests for the same bytes under the same cache
/// policy share it (a request never fails, or skips the network, because of another
/// requester's policy).
struct OriginalDataKey: Hashable {
  let cacheKey: CacheKey
  let policy: ImageRequest.CachePolicy
}

/// The key of a variant task: requests for the same variant (its chain's identity its
/// canonical form, `ProcessorChain`) under the same cache policy share it. Its disk key,
/// when the tier keeps such variants, is the tier's `VariantKey`.
struct VariantTaskKey: Hashable {
  let variant: ImageVariant
  let policy: ImageRequest.CachePolicy
}

/// Where the bytes of a decode come from: what starts its download.
struct DownloadSource {
  let url: RequestURL
  let headers: [String]
  var startDelayMilliseconds: Int
}


/// The pool's bookkeeping of requests (lock held): what a waiting request measured, joining
/// the task of its variant, leaving it.
extension TaskPool {
  /// What the stages measured of a request still waiting (a cancel's metrics; no tier
  /// answered it).
  func measuredSoFar(_ pending: PendingRequest) -> RequestMetrics {
    var metrics = RequestMetrics()
    if let decode = pending.decode {
      metrics = measuredBelow(decode)
      metrics.diskReadMicroseconds += decode.metrics.diskReadMicroseconds
    }
    metrics.tier = .none
    metrics.joined = pending.joined
    return metrics
  }

  /// What the work `decode` waits on has measured: its input's figures once it has its
  /// input, else the download under way (through the tasks it is processed from) with what
  /// its transfer has so far.
  private func measuredBelow(_ decode: VariantTask) -> RequestMetrics {
    switch decode.phase {
    case .waitingForBytes(let download):
      var metrics = download.metrics
      if let transfer = download.transfer, let timing = dataLoader.measuredSoFar(transfer) { metrics.take(timing) }
      return metrics
    case .waitingForParent(let parent): return measuredBelow(parent)
    default: return decode.inputMetrics ?? RequestMetrics()
    }
  }

  /// Joins the request to the decode task for its variant, creating the decode task (and
  /// the download task it waits on) when it is the first requester.
  func attach(_ pending: PendingRequest, to key: VariantTaskKey, source: DownloadSource, intakeAt: UInt64) {
    if let decode = decodes[key] {
      decode.requests[pending.token] = pending
      pending.decode = decode
      pending.joined = true
      counters.coalesced += 1
      // A joiner can only raise the highest priority: no need to look at every requester
      // (k requests for one image would cost k^2).
      if pending.priority > decode.priority { rank(decode, at: pending.priority) }
      hurry(decode, source)
      return
    }
    let decode = VariantTask(key: key)
    decode.metrics.workStartedAt = intakeAt
    decode.requests[pending.token] = pending
    decode.priority = pending.priority
    pending.decode = decode
    decodes[key] = decode
    start(decode, source)
  }

  /// Removes a request from its decode task; the last requester leaving cancels the
  /// decode, and the last decode leaving a download cancels the download.
  func detach(_ pending: PendingRequest) {
    guard let decode = pending.decode else { return }
    pending.decode = nil
    decode.requests.removeValue(forKey: pending.token)
    if !decode.isUnused {
      // The shared priority falls only if no one left is at it. Re-ranking scans every
      // requester, so doing it on each leave made cancelling n sharers quadratic; this
      // check stops at the first requester at the top, usually the first one looked at.
      let priority = decode.priority
      if pending.priority >= priority && !decode.requests.values.contains(where: { $0.priority >= priority })
          && !decode.children.values.contains(where: { $0.priority >= priority }) {
        rerank(decode)
      }
      return
    }
    release(decode)
  }

  /// Posts `outcome` to each request, with the shared work's `metrics` (and its own
  /// `joined`).
  func complete(_ requests: [PendingRequest], with outcome: Outcome, metrics: RequestMetrics = RequestMetrics()) {
    if case .failure(let error) = outcome, error.status != .cancelled, !requests.isEmpty {
      lock.withLock { counters.failed += requests.count }
    }
    for pending in requests {
      var own = metrics
      own.joined = pending.joined
      pending.queue.complete(pending.delivery, with: outcome, metrics: own)
    }
  }
}
