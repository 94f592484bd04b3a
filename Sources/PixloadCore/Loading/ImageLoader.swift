#if canImport(Glibc)
import Glibc
#endif

/// Settings of one loader. Defaults match `pxl_config_init`.
public struct LoaderConfiguration: Sendable {
  public var memoryCacheBytes = 64 << 20
  public var memoryCacheCount = 1000
  /// 0: one per core.
  public var decodeThreads = 0
  public var maxPixels: UInt64 = 100_000_000
  /// The network engine's settings (limits, timeouts, retries, TLS, headers). The C API
  /// sets the user agent "pixload/<version>" from the header's version.
  public var network = EngineConfiguration()
  /// Disk cache of encoded bytes; 0 bytes: none.
  public var diskCacheBytes = 0
  /// nil: `DiskCache.defaultDirectory`.
  public var diskCacheDirectory: String?
  /// Disk entries unused for this long are dropped; 0: no age limit. Default: 7 days.
  public var diskCacheMaxAgeSeconds = 7 * 24 * 3600
  /// Treat stored entries as fresh until evicted, whatever Cache-Control and Expires said
  /// (what most image loaders do); false: stale entries are revalidated.
  public var ignoresHTTPFreshness = false
  /// Where diagnostics go (an unusable cache directory, a dropped corrupt entry); nil:
  /// nowhere. A library never writes to stderr. Called on library threads.
  public var log: (@Sendable (LogLevel, String) -> Void)?
  /// The most verbose level passed to `log`.
  public var logLevel = LogLevel.warning

  public init() {}
}

/// Levels of the log callback. Raw values are the C API's PXL_LOG_*.
public enum LogLevel: Int32, Sendable, Comparable {
  case error = 0
  case warning = 1
  case info = 2

  public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

/// What a loader did so far (a snapshot).
public struct LoaderStatistics: Sendable, Equatable {
  /// Requests accepted (prefetches included).
  public var requests = 0
  public var memoryHits = 0
  public var diskHits = 0
  /// Transfers that brought a body (retries not counted twice).
  public var networkFetches = 0
  /// Stale disk entries the server confirmed (HTTP 304).
  public var revalidated = 0
  /// Requests that joined work already under way instead of starting their own.
  public var coalesced = 0
  public var cancelled = 0
  /// Requests that ended with an error other than CANCELLED.
  public var failed = 0
  public var bytesDownloaded = 0
}

/// The coordinator: accepts requests, merges duplicates into shared download and decode
/// tasks, ranks them, cancels them when their last requester leaves, and hands each
/// result to its request's completion queue.
///
/// All bookkeeping happens under one lock and is cheap; downloading happens on the
/// `DataLoading` engine's thread and decoding on a `PriorityWorkPool`, never under the
/// lock. Lock order: loader, then queue, memory cache, pool or engine; never the reverse.
public final class ImageLoader: DeliveryOwner, @unchecked Sendable {
  public let configuration: LoaderConfiguration
  public let memoryCache: MemoryCache
  private let dataLoader: DataLoading
  private let decoder: ImageDecoding
  private let decodePool: PriorityWorkPool
  /// Where prefetches "deliver": it drops their results.
  private let prefetchSink: CompletionQueue
  /// Disk lookups and writes: threads of their own, so a disk hit never waits behind
  /// decoding or the network, and the host's thread never touches the disk.
  private let diskPool: PriorityWorkPool?
  /// Opened on the first disk job (on a disk thread).
  private let lazyDiskCache: LazyDiskCache
  private let freshness: HTTPFreshness

  private let lock = Lock()
  private var nextToken: UInt64 = 0
  private var closed = false
  /// Every accepted request whose handler has not started yet.
  private var requests: [UInt64: PendingRequest] = [:]
  /// Work is merged only between requests that want the same bytes the same way: same
  /// cache key (which covers per-request credentials) and same cache policy.
  private var downloads: [DownloadKey: DownloadTask] = [:]
  private var decodes: [DecodeKey: DecodeTask] = [:]
  /// Decodes held back because every requester's queue was full of undrained images
  /// (`CompletionQueue.isFull`), with their bytes; restarted by `queueDrained`.
  private var heldDecodes: [ObjectIdentifier: (DecodeTask, DownloadedData, ImageSource)] = [:]
  private var counters = LoaderStatistics()

  /// A snapshot of what this loader did so far.
  public var statistics: LoaderStatistics { lock.withLock { counters } }

  /// Uses `dataLoader` for the network (a `CurlEngine` by default) and `decoder` for the
  /// pixels; tests pass doubles to drive the pipeline deterministically.
  public init(configuration: LoaderConfiguration = LoaderConfiguration(),
              dataLoader: DataLoading? = nil,
              decoder: ImageDecoding = ImageDecoder()) throws(LoadError) {
    self.configuration = configuration
    self.memoryCache = MemoryCache(capacityBytes: configuration.memoryCacheBytes,
                                   capacityCount: configuration.memoryCacheCount)
    // A part whose threads run must be stopped before this throws: an engine or pool
    // released without shutdown() is torn down under its threads (they hold it
    // unowned). So the eventfd first (out of descriptors, it is what fails), then the
    // pools, each of which cleans up after itself, then the engine, whose thread starts
    // last in its init; if a later part fails, the earlier ones are shut down here.
    self.prefetchSink = try CompletionQueue(discardingResults: ())
    self.decoder = decoder
    self.freshness = HTTPFreshness(ignoresServer: configuration.ignoresHTTPFreshness)
    self.lazyDiskCache = LazyDiskCache(directory: configuration.diskCacheDirectory ?? DiskCache.defaultDirectory,
                                       capacityBytes: configuration.diskCacheBytes,
                                       maxAgeSeconds: configuration.diskCacheMaxAgeSeconds,
                                       log: { [configuration] in ImageLoader.log(configuration, .warning, $0) })
    let threads = configuration.decodeThreads > 0 ? configuration.decodeThreads : availableCoreCount()
    let decodePool = try PriorityWorkPool(threadCount: threads, name: "pxl-decode")
    var diskPool: PriorityWorkPool?
    do throws(LoadError) {
      if configuration.diskCacheBytes > 0 { diskPool = try PriorityWorkPool(threadCount: 2, name: "pxl-disk") }
      if let dataLoader {
        self.dataLoader = dataLoader
      } else {
        self.dataLoader = try CurlEngine(configuration: configuration.network)
      }
    } catch {
      decodePool.shutdown()
      diskPool?.shutdown()
      throw error
    }
    self.decodePool = decodePool
    self.diskPool = diskPool
    // Read the directory once, in the background: a large cache must not delay a first load.
    _ = diskPool?.submit(priority: Int32.min) { [weak self] in self?.diskCache()?.rescan() }
  }

  /// The disk cache, opened on first use on a disk thread; nil when unusable.
  private func diskCache() -> DiskCache? { lazyDiskCache.cache() }

  /// The disk cache for management calls (nil when disabled or unusable). Blocks on disk.
  public var disk: DiskCache? { diskPool == nil ? nil : diskCache() }

  /// The disk cache's size as last seen, without touching the disk (0 before it opened).
  public var diskCacheBytesSeen: Int { lazyDiskCache.bytesSeen }

  deinit { close() }

  // MARK: - Requests

  /// Accepts a request. On success `handler` runs exactly once, when `queue` is drained;
  /// on a thrown error it never runs.
  /// `progress` (token, bytes received, bytes expected or 0) runs on the queue's thread
  /// while the download is under way, never after `handler`.
  public func load(_ request: ImageRequest, queue: CompletionQueue,
                   progress: ((UInt64, UInt64, UInt64) -> Void)? = nil,
                   handler: @escaping (UInt64, Outcome) -> Void) throws(LoadError) -> UInt64 {
    try validate(request)
    let variant = request.variant
    lock.lock()
    if closed {
      lock.unlock()
      throw LoadError(.loaderClosed, "the loader is closed")
    }
    nextToken += 1
    let token = nextToken
    let delivery = Delivery(token: token, owner: self, progressHandler: progress,
                            progressIntervalMilliseconds: request.progressIntervalMilliseconds, handler: handler)
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
      queue.complete(delivery, with: .success(image, .memory, httpStatus: 0))
      return token
    }
    if request.cachePolicy == .cacheOnly && diskPool == nil {
      // Offline and no disk cache: the memory miss above was the whole answer.
      counters.failed += 1
      lock.unlock()
      queue.complete(delivery, with: .failure(LoadError(.notCached, "not in the memory cache (cache-only request, no disk cache)")))
      return token
    }
    attach(pending, to: variant, request: request)
    lock.unlock()
    return token
  }

  /// Warms the memory cache with `request`: the same pipeline as `load`, merged with
  /// other requests, but nobody is called. Cancellable with `cancel`.
  public func prefetch(_ request: ImageRequest) throws(LoadError) -> UInt64 {
    try load(request, queue: prefetchSink) { _, _ in }
  }

  /// Cancels every request whose results go to `queue` (every request of the loader when
  /// nil, prefetches included). Returns how many were cancelled.
  @discardableResult
  public func cancelAll(queue: CompletionQueue? = nil) -> Int {
    let tokens: [UInt64] = lock.withLock {
      requests.values.filter { queue == nil || $0.queue === queue }.map(\.token)
    }
    return tokens.reduce(0) { $0 + (cancel($1) ? 1 : 0) }
  }

  /// Cancels a request whose handler has not started: it will report CANCELLED. Shared
  /// work continues for the other requesters. False for unknown or finished tokens.
  @discardableResult
  public func cancel(_ token: UInt64) -> Bool {
    let pending: PendingRequest? = lock.withLock {
      guard let pending = requests.removeValue(forKey: token) else { return nil }
      detach(pending)
      return pending
    }
    guard let pending else { return false }
    let cancelled = pending.queue.cancel(pending.delivery)
    if cancelled { lock.withLock { counters.cancelled += 1 } }
    return cancelled
  }

  /// Re-ranks a request and the shared work it belongs to. False for unknown tokens.
  @discardableResult
  public func setPriority(_ token: UInt64, _ priority: Int32) -> Bool {
    lock.withLock {
      guard let pending = requests[token] else { return false }
      pending.priority = priority
      if let decode = pending.decode { rerank(decode) }
      return true
    }
  }

  /// Ends the start delay of the request's transfer (a table confirming a row that is
  /// still on screen one frame after a fling brought it there).
  public func startNow(_ token: UInt64) {
    lock.withLock {
      guard let transfer = requests[token]?.decode?.download?.transfer else { return }
      dataLoader.startNow(transfer)
    }
  }

  /// Pushes back the end of the start delay of the request's transfer (a table whose row
  /// is still being flung past); no effect once the transfer runs.
  public func postpone(_ token: UInt64, milliseconds: Int) {
    lock.withLock {
      guard let transfer = requests[token]?.decode?.download?.transfer else { return }
      dataLoader.postpone(transfer, nanoseconds: UInt64(max(0, milliseconds)) * 1_000_000)
    }
  }

  /// What the network has delivered lately (nil until measured): tables size their
  /// prefetch window by it.
  public var networkThroughput: Throughput? { dataLoader.throughput }

  /// The memory-cached image `request` would produce, if any. Never blocks on work.
  public func cachedImage(for request: ImageRequest) -> Image? {
    guard request.usesMemoryCache else { return nil }
    return memoryCache.image(for: request.variant)
  }

  /// Cancels every request (each still gets its one CANCELLED result through its queue),
  /// stops and joins the library's threads and empties the memory cache. Idempotent.
  public func close() {
    let abandoned: [PendingRequest] = lock.withLock {
      if closed { return [] }
      closed = true
      let all = Array(requests.values)
      // Break the task graph's back references so nothing outlives the loader.
      for download in downloads.values { download.decodes.removeAll() }
      for decode in decodes.values {
        decode.download = nil
        decode.requests.removeAll()
      }
      for pending in all { pending.decode = nil }
      requests.removeAll()
      downloads.removeAll()
      decodes.removeAll()
      heldDecodes.removeAll()
      return all.sorted { $0.token < $1.token }
    }
    dataLoader.shutdown()
    decodePool.shutdown()
    diskPool?.shutdownAfterDraining()
    for pending in abandoned { pending.queue.cancel(pending.delivery) }
    memoryCache.removeAll()
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
      for (key, (decode, data, source)) in heldDecodes
      where decode.requests.values.contains(where: { $0.queue === queue }) {
        heldDecodes.removeValue(forKey: key)
        guard decodes[decode.key] === decode else { continue }
        scheduleDecode(decode, data, source: source)
      }
    }
  }

  // MARK: - Validation

  private func validate(_ request: ImageRequest) throws(LoadError) {
    if request.targetWidth < 0 || request.targetHeight < 0 {
      throw LoadError(.invalidArgument, "target size must not be negative")
    }
    let scheme = try URLScheme.parse(request.url)
    if !configuration.network.allowedSchemes.contains(scheme) {
      throw LoadError(.schemeNotAllowed, "scheme '\(scheme)' is not allowed by this loader")
    }
  }

  // MARK: - Pipeline (lock held)

  /// Joins the request to the decode task for its variant, creating the decode task (and
  /// the download task it waits on) when it is the first requester.
  private func attach(_ pending: PendingRequest, to variant: ImageVariant, request: ImageRequest) {
    let decodeKey = DecodeKey(variant: variant, policy: request.cachePolicy)
    if let decode = decodes[decodeKey] {
      decode.requests[pending.token] = pending
      pending.decode = decode
      counters.coalesced += 1
      // A joiner can only raise the highest priority: no need to look at every requester
      // (k requests for one image would cost k^2).
      if pending.priority > decode.priority { rank(decode, at: pending.priority) }
      if let download = decode.download { startSooner(download, for: request) }
      return
    }
    let decode = DecodeTask(key: decodeKey)
    decode.requests[pending.token] = pending
    decode.priority = pending.priority
    pending.decode = decode
    decodes[decodeKey] = decode

    let downloadKey = DownloadKey(cacheKey: variant.cacheKey, policy: request.cachePolicy)
    if let download = downloads[downloadKey] {
      download.decodes[variant] = decode
      decode.download = download
      counters.coalesced += 1
      rerank(download)
      startSooner(download, for: request)
      return
    }
    let download = DownloadTask(key: downloadKey, url: request.url, headers: request.headers)
    download.startDelayMilliseconds = request.startDelayMilliseconds
    download.decodes[variant] = decode
    download.priority = decode.priority
    decode.download = download
    downloads[downloadKey] = download
    if let diskPool, request.cachePolicy != .reload {
      download.diskJob = diskPool.submit(priority: download.priority) { [weak self, weak download] in
        guard let self, let download else { return }
        self.diskLookupFinished(download, self.diskCache()?.entry(for: download.key.cacheKey))
      }
    } else {
      startTransfer(download)
    }
  }

  /// Lock held: a request that wants its bytes now joined a download whose start is held
  /// (a table's prefetch or fling row): the hold belonged to the first requester, so the
  /// transfer starts now instead of making the joiner wait it out.
  private func startSooner(_ download: DownloadTask, for request: ImageRequest) {
    guard request.startDelayMilliseconds == 0, download.startDelayMilliseconds > 0 else { return }
    download.startDelayMilliseconds = 0
    if let transfer = download.transfer { dataLoader.startNow(transfer) }
  }

  /// Lock held. With `download.stored` set, the request is conditional on its validators.
  private func startTransfer(_ download: DownloadTask) {
    let validators = download.stored.map { ($0.metadata.etag, $0.metadata.lastModified) }
    download.transfer = dataLoader.start(
      url: download.url, headers: download.headers, revalidating: validators,
      delay: UInt64(download.startDelayMilliseconds) * 1_000_000, priority: download.priority,
      progress: { [weak self, weak download] received, expected in
        guard let self, let download else { return }
        self.downloadProgressed(download, received: received, expected: expected)
      },
      completion: { [weak self, weak download] result in
        guard let self, let download else { return }
        self.downloadFinished(download, result)
      })
  }

  /// The disk answered: decode its bytes, or go to the network (unless cache-only).
  private func diskLookupFinished(_ download: DownloadTask, _ entry: DiskCache.Entry?) {
    var failed: [PendingRequest] = []
    lock.withLock {
      guard downloads[download.key] === download else { return }
      download.diskJob = nil
      // Offline, a stale copy beats none.
      if let entry, freshness.isFresh(entry) || download.key.policy == .cacheOnly {
        counters.diskHits += 1
        downloads.removeValue(forKey: download.key)
        decodeAll(download, DownloadedData(bytes: entry.bytes, httpStatus: 0), source: .disk)
      } else if let entry, !entry.metadata.etag.isEmpty || !entry.metadata.lastModified.isEmpty {
        // Stale with validators: ask the server whether it changed (a 304 reuses the bytes).
        download.stored = entry
        startTransfer(download)
      } else if download.key.policy == .cacheOnly {
        failed = abandon(download)
      } else {
        startTransfer(download)
      }
    }
    complete(failed, with: .failure(LoadError(.notCached, "not in the cache (cache-only request)")))
  }

  /// Lock held: ends a download and every request waiting on it; returns those requests,
  /// whose results the caller posts after unlocking.
  private func abandon(_ download: DownloadTask) -> [PendingRequest] {
    if downloads[download.key] === download { downloads.removeValue(forKey: download.key) }
    var failed: [PendingRequest] = []
    for decode in download.decodes.values {
      if decodes[decode.key] === decode { decodes.removeValue(forKey: decode.key) }
      for pending in decode.requests.values {
        pending.decode = nil
        failed.append(pending)
      }
    }
    download.decodes.removeAll()
    return failed
  }

  /// Lock held: hands the bytes to one decode job per variant.
  private func decodeAll(_ download: DownloadTask, _ data: DownloadedData, source: ImageSource) {
    for decode in download.decodes.values {
      decode.download = nil
      scheduleDecode(decode, data, source: source)
    }
    download.decodes.removeAll()
  }

  /// Lock held: queues the decode on the pool. Cheapest first among equal priorities: the
  /// encoded size stands for the decode's cost (entropy decoding and inflating dominate a
  /// thumbnail's decode).
  private func scheduleDecode(_ decode: DecodeTask, _ data: DownloadedData, source: ImageSource) {
    decode.job = decodePool.submit(priority: decode.priority, cost: data.bytes.count) { [weak self, decode] in
      self?.runDecode(decode, data, source: source)
    }
  }

  private func complete(_ requests: [PendingRequest], with outcome: Outcome) {
    if case .failure(let error) = outcome, error.status != .cancelled, !requests.isEmpty {
      lock.withLock { counters.failed += requests.count }
    }
    for pending in requests { pending.queue.complete(pending.delivery, with: outcome) }
  }

  /// Forgets one cache key: every decoded variant in memory and the disk entry (deleted on
  /// a disk thread).
  public func removeCached(cacheKey: String) {
    memoryCache.removeAll(cacheKey: cacheKey)
    _ = diskPool?.submit(priority: Int32.max) { [weak self] in self?.diskCache()?.remove(cacheKey) }
  }

  /// Removes a request from its decode task; the last requester leaving cancels the
  /// decode, and the last decode leaving a download cancels the download.
  private func detach(_ pending: PendingRequest) {
    guard let decode = pending.decode else { return }
    pending.decode = nil
    decode.requests.removeValue(forKey: pending.token)
    if !decode.requests.isEmpty {
      // The shared priority falls only if no one left is at it. Re-ranking scans every
      // requester, so doing it on each leave made cancelling n sharers quadratic; this
      // check stops at the first requester at the top, usually the first one looked at.
      let priority = decode.priority
      if pending.priority >= priority && !decode.requests.values.contains(where: { $0.priority >= priority }) {
        rerank(decode)
      }
      return
    }
    if decodes[decode.key] === decode { decodes.removeValue(forKey: decode.key) }
    if let job = decode.job { decodePool.cancel(job) }
    decode.job = nil
    heldDecodes.removeValue(forKey: ObjectIdentifier(decode))
    guard let download = decode.download else { return }
    decode.download = nil
    download.decodes.removeValue(forKey: decode.variant)
    if !download.decodes.isEmpty {
      rerank(download)
      return
    }
    if downloads[download.key] === download { downloads.removeValue(forKey: download.key) }
    if let transfer = download.transfer { dataLoader.cancel(transfer) }
    if let job = download.diskJob { diskPool?.cancel(job) }
    download.transfer = nil
    download.diskJob = nil
  }

  /// Merged work runs at the highest priority among its requesters.
  private func rerank(_ decode: DecodeTask) {
    let priority = decode.requests.values.lazy.map(\.priority).max() ?? Int32.min
    guard priority != decode.priority else { return }
    rank(decode, at: priority)
  }

  private func rank(_ decode: DecodeTask, at priority: Int32) {
    decode.priority = priority
    if let job = decode.job { decodePool.setPriority(job, priority) }
    if let download = decode.download { rerank(download) }
  }

  private func rerank(_ download: DownloadTask) {
    let priority = download.decodes.values.lazy.map(\.priority).max() ?? Int32.min
    guard priority != download.priority else { return }
    download.priority = priority
    if let transfer = download.transfer { dataLoader.setPriority(transfer, priority) }
    if let job = download.diskJob { diskPool?.setPriority(job, priority) }
  }

  // MARK: - Completions (library threads)

  private func downloadProgressed(_ download: DownloadTask, received: UInt64, expected: UInt64) {
    let listeners: [PendingRequest] = lock.withLock {
      guard downloads[download.key] === download else { return [] }
      return download.decodes.values.flatMap { $0.requests.values.filter(\.delivery.wantsProgress) }
    }
    for pending in listeners {
      pending.queue.progress(pending.delivery, received: received, expected: expected)
    }
  }

  private func downloadFinished(_ download: DownloadTask, _ result: Result<DownloadedData, LoadError>) {
    var failed: [PendingRequest] = []
    var failure: LoadError?
    lock.withLock {
      // A download cancelled while finishing is no longer registered: drop its result.
      guard downloads[download.key] === download else { return }
      download.transfer = nil
      switch result {
      case .failure(let error):
        failure = error
        failed = abandon(download)
      case .success(let response):
        downloads.removeValue(forKey: download.key)
        var data = response
        var source = ImageSource.network
        var metadata = HTTPFreshness.metadata(for: response.caching)
        counters.bytesDownloaded += response.bytes.count
        if response.httpStatus == 304 { counters.revalidated += 1 } else { counters.networkFetches += 1 }
        if response.httpStatus == 304, let stored = download.stored {
          // Not modified: the stored bytes are current again. Validators the 304 did not
          // repeat are kept.
          data.bytes = stored.bytes
          source = .revalidated
          if metadata.etag.isEmpty { metadata.etag = stored.metadata.etag }
          if metadata.lastModified.isEmpty { metadata.lastModified = stored.metadata.lastModified }
        }
        decodeAll(download, data, source: source)
        // Keep the bytes on disk for next time, without delaying the decode; never what
        // the server marked no-store.
        if let diskPool, download.url.prefix(4).lowercased() == "http", !response.caching.noStore {
          let key = download.key.cacheKey, bytes = data.bytes
          _ = diskPool.submit(priority: Int32.min + 1) { [weak self] in
            self?.diskCache()?.store(bytes, metadata: metadata, for: key)
          }
        }
      }
    }
    if let failure { complete(failed, with: .failure(failure)) }
  }

  private func runDecode(_ decode: DecodeTask, _ data: DownloadedData, source: ImageSource) {
    // A host that stopped draining: when every requester's queue is full of undrained
    // images, the decode (which would add another) waits with its bytes until one drains.
    enum Start { case run, held, abandoned }
    let start: Start = lock.withLock {
      // Every requester left while the job waited: nothing to decode for.
      guard decodes[decode.key] === decode, !decode.requests.isEmpty else { return .abandoned }
      var queues: [ObjectIdentifier: CompletionQueue] = [:]
      for pending in decode.requests.values { queues[ObjectIdentifier(pending.queue)] = pending.queue }
      // Every queue is asked (each registers this loader to hear when it drains).
      let full = queues.values.map { $0.isFull(notifying: self) }
      guard !full.contains(false) else { return .run }
      decode.job = nil
      heldDecodes[ObjectIdentifier(decode)] = (decode, data, source)
      return .held
    }
    if start != .run { return }
    let result = decoder.decode(data.bytes, variant: decode.variant, maxPixels: configuration.maxPixels)
    let finished: [PendingRequest] = lock.withLock {
      guard decodes[decode.key] === decode else { return [] }
      decodes.removeValue(forKey: decode.key)
      decode.job = nil
      let all = Array(decode.requests.values)
      for pending in all { pending.decode = nil }
      if case .success(let image) = result, all.contains(where: \.usesMemoryCache) {
        memoryCache.insert(image, for: decode.variant)
      }
      return all
    }
    let outcome: Outcome
    switch result {
    case .success(let image): outcome = .success(image, source, httpStatus: data.httpStatus)
    case .failure(var error):
      if error.httpStatus == 0 { error.httpStatus = data.httpStatus }
      outcome = .failure(error)
    }
    complete(finished, with: outcome)
  }
}

// MARK: - Bookkeeping types (guarded by the loader's lock)

private final class PendingRequest {
  let token: UInt64
  let delivery: Delivery
  let queue: CompletionQueue
  let usesMemoryCache: Bool
  var priority: Int32
  /// The decode task this request waits on; nil once it has a result or was detached.
  var decode: DecodeTask?

  init(token: UInt64, delivery: Delivery, queue: CompletionQueue, priority: Int32, usesMemoryCache: Bool) {
    self.token = token
    self.delivery = delivery
    self.queue = queue
    self.priority = priority
    self.usesMemoryCache = usesMemoryCache
  }
}

/// What a download is shared by: requests for the same bytes under the same cache policy.
private struct DownloadKey: Hashable {
  let cacheKey: String
  let policy: ImageRequest.CachePolicy
}

/// What a decode is shared by: requests for the same variant under the same cache policy.
private struct DecodeKey: Hashable {
  let variant: ImageVariant
  let policy: ImageRequest.CachePolicy
}

/// One decode of one variant, shared by every request for that variant.
private final class DecodeTask {
  let key: DecodeKey
  var variant: ImageVariant { key.variant }
  var requests: [UInt64: PendingRequest] = [:]
  var priority: Int32 = 0
  /// The download this decode waits on; nil once the bytes arrived.
  var download: DownloadTask?
  /// The queued decode job; nil before the bytes arrive and after it ran.
  var job: PriorityWorkPool.Job?

  init(key: DecodeKey) { self.key = key }
}

/// The bytes of one cache key (from disk or the network), shared by every decode that
/// needs them. The request that starts it decides URL and headers (requests merged into
/// it have the same cache key, so the same headers unless the caller gave one key).
private final class DownloadTask {
  let key: DownloadKey
  let url: String
  let headers: [String]
  var decodes: [ImageVariant: DecodeTask] = [:]
  var priority: Int32 = 0
  var transfer: TransferID?
  /// The disk lookup under way, before any transfer.
  var diskJob: PriorityWorkPool.Job?
  /// A stale stored copy being revalidated by the transfer.
  var stored: DiskCache.Entry?
  /// Set by the request that started it (a table during a fling).
  var startDelayMilliseconds = 0

  init(key: DownloadKey, url: String, headers: [String]) {
    self.key = key
    self.url = url
    self.headers = headers
  }
}

extension ImageLoader {
  /// Library diagnostics (an unusable cache directory, a dropped corrupt entry): one line
  /// to the host's log callback if it wants that level, never a failed load.
  static func log(_ configuration: LoaderConfiguration, _ level: LogLevel, _ line: String) {
    guard let sink = configuration.log, level <= configuration.logLevel else { return }
    sink(level, line)
  }
}
