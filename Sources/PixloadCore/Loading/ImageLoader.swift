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
  /// Decoded variants whose width and height are both at most this are also kept in the
  /// disk cache (requests whose non-zero target sides are at most this, and not 0x0, look
  /// for one first), so that a warm start delivers thumbnails without decoding; 0: off.
  public var diskVariantMaxSide = 256
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
  /// Bytes not downloaded because a thumbnail's first scans were enough (the declared
  /// length minus what arrived; transfers without a length count nothing).
  public var bytesSaved = 0
  /// Of `diskHits`: requests answered by a decoded variant from disk, with no decode.
  public var variantHits = 0
  /// Decoded variants this loader wrote to the disk cache, and their bytes.
  public var variantsStored = 0
  public var variantBytesStored = 0
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
  /// while the download is under way, never after `handler`. `preview` (token, image)
  /// likewise, with the request's variant decoded from the scans of a progressive JPEG
  /// received so far, each from more scans than the last (see `previewDownload`).
  public func load(_ request: ImageRequest, queue: CompletionQueue,
                   progress: ((UInt64, UInt64, UInt64) -> Void)? = nil,
                   preview: ((UInt64, Image) -> Void)? = nil,
                   handler: @escaping (UInt64, Outcome) -> Void) throws(LoadError) -> UInt64 {
    let url = try validate(request)
    let variant = request.variant
    lock.lock()
    if closed {
      lock.unlock()
      throw LoadError(.loaderClosed, "the loader is closed")
    }
    nextToken += 1
    let token = nextToken
    let delivery = Delivery(token: token, owner: self, progressHandler: progress,
                            progressIntervalMilliseconds: request.progressIntervalMilliseconds,
                            previewHandler: preview, previewIntervalMilliseconds: request.previewIntervalMilliseconds,
                            handler: handler)
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
    attach(pending, to: variant, request: request, url: url)
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

  private func validate(_ request: ImageRequest) throws(LoadError) -> RequestURL {
    if request.targetWidth < 0 || request.targetHeight < 0 {
      throw LoadError(.invalidArgument, "target size must not be negative")
    }
    let url = try RequestURL(parsing: request.url)
    if !configuration.network.allowedSchemes.contains(url.scheme) {
      throw LoadError(.schemeNotAllowed, "scheme '\(url.scheme)' is not allowed by this loader")
    }
    return url
  }

  // MARK: - Pipeline (lock held)

  /// Joins the request to the decode task for its variant, creating the decode task (and
  /// the download task it waits on) when it is the first requester.
  private func attach(_ pending: PendingRequest, to variant: ImageVariant, request: ImageRequest, url: RequestURL) {
    let decodeKey = DecodeKey(variant: variant, policy: request.cachePolicy)
    if let decode = decodes[decodeKey] {
      decode.requests[pending.token] = pending
      pending.decode = decode
      counters.coalesced += 1
      // A joiner can only raise the highest priority: no need to look at every requester
      // (k requests for one image would cost k^2).
      if pending.priority > decode.priority { rank(decode, at: pending.priority) }
      if let download = decode.download {
        startSooner(download, startDelayMilliseconds: request.startDelayMilliseconds)
      } else if request.startDelayMilliseconds == 0 {
        decode.waitingSource?.startDelayMilliseconds = 0
      }
      return
    }
    let decode = DecodeTask(key: decodeKey)
    decode.requests[pending.token] = pending
    decode.priority = pending.priority
    pending.decode = decode
    decodes[decodeKey] = decode
    let source = DownloadSource(url: url, headers: request.headers,
                                startDelayMilliseconds: request.startDelayMilliseconds)
    if let diskPool, request.cachePolicy != .reload, let descriptor = diskVariantDescriptor(variant) {
      // A decoded variant on disk needs neither the encoded bytes nor a decode: look for
      // it first; the download joins in only on a miss.
      decode.waitingSource = source
      decode.variantJob = diskPool.submit(priority: decode.priority) { [weak self, weak decode] in
        guard let self, let decode else { return }
        self.variantLookupFinished(decode, self.diskCache()?.variant(descriptor: descriptor, cacheKey: variant.cacheKey))
      }
      return
    }
    attachDownload(decode, source)
  }

  /// Lock held: joins a decode task to the download of its bytes, starting the download
  /// (disk lookup, then network) when it is the first.
  private func attachDownload(_ decode: DecodeTask, _ source: DownloadSource) {
    let variant = decode.variant
    let downloadKey = DownloadKey(cacheKey: variant.cacheKey, policy: decode.key.policy)
    if let download = downloads[downloadKey] {
      download.decodes[variant] = decode
      decode.download = download
      counters.coalesced += 1
      rerank(download)
      startSooner(download, startDelayMilliseconds: source.startDelayMilliseconds)
      return
    }
    let download = DownloadTask(key: downloadKey, url: source.url, headers: source.headers)
    download.startDelayMilliseconds = source.startDelayMilliseconds
    download.decodes[variant] = decode
    download.priority = decode.priority
    decode.download = download
    downloads[downloadKey] = download
    if let diskPool, decode.key.policy != .reload {
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
  private func startSooner(_ download: DownloadTask, startDelayMilliseconds: Int) {
    guard startDelayMilliseconds == 0, download.startDelayMilliseconds > 0 else { return }
    download.startDelayMilliseconds = 0
    if let transfer = download.transfer { dataLoader.startNow(transfer) }
  }

  /// Lock held. With `download.stored` set, the request is conditional on its validators.
  private func startTransfer(_ download: DownloadTask) {
    let validators = download.stored.map { ($0.metadata.etag, $0.metadata.lastModified) }
    download.transfer = dataLoader.start(
      url: download.url, headers: download.headers, revalidating: validators,
      delay: UInt64(download.startDelayMilliseconds) * 1_000_000, priority: download.priority,
      progress: { [weak self, weak download] received, expected, body in
        guard let self, let download else { return false }
        return self.downloadProgressed(download, received: received, expected: expected, body: body)
      },
      completion: { [weak self, weak download] result in
        guard let self, let download else { return }
        self.downloadFinished(download, result)
      })
  }

  /// The name of `variant` among the decoded variants on disk, nil when it is not one the
  /// loader keeps there (variants off, no target size, a side over the limit).
  private func diskVariantDescriptor(_ variant: ImageVariant) -> String? {
    let limit = configuration.diskVariantMaxSide
    // Animations are not kept: a variant file holds one frame.
    guard limit > 0, !variant.animates, variant.width > 0 || variant.height > 0, variant.width <= limit,
          variant.height <= limit else {
      return nil
    }
    return "v\(Self.variantRendition) \(variant.width)x\(variant.height) mode=\(variant.mode.rawValue) format=\(variant.format.rawValue) "
      + "orient=\(variant.appliesOrientation ? 1 : 0)" + (variant.managesColor ? "" : " nocolor")
  }

  /// The rendition of decoded variants kept on disk: raise it whenever decoding gives other
  /// pixels for the same request (another resampler, a colour fix), so that thumbnails an
  /// older library kept are not served by a newer one (they are never looked up again and
  /// age out, least recently used).
  /// 2: colour management (an ICC-tagged file's thumbnail is now converted to sRGB).
  static let variantRendition = 2

  /// The variant lookup answered: a fresh variant (or any, offline) is the result of every
  /// requester, with no download and no decode; otherwise the decode waits for the bytes
  /// as usual (a stale variant is made anew from its revalidated or refetched original).
  private func variantLookupFinished(_ decode: DecodeTask, _ entry: VariantEntry?) {
    var finished: [PendingRequest] = []
    lock.withLock {
      guard decodes[decode.key] === decode, decode.variantJob != nil, let source = decode.waitingSource else { return }
      decode.variantJob = nil
      decode.waitingSource = nil
      if let entry, freshness.isFresh(entry.metadata) || decode.key.policy == .cacheOnly {
        decodes.removeValue(forKey: decode.key)
        counters.diskHits += 1
        counters.variantHits += 1
        finished = Array(decode.requests.values)
        for pending in finished { pending.decode = nil }
        if finished.contains(where: \.usesMemoryCache) { memoryCache.insert(entry.image, for: decode.variant) }
      } else {
        attachDownload(decode, source)
      }
    }
    if let entry, !finished.isEmpty { complete(finished, with: .success(entry.image, .disk, httpStatus: 0)) }
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
        decodeAll(download, DownloadedData(bytes: entry.bytes, httpStatus: 0), source: .disk,
                  keep: VariantKeeping(metadata: entry.metadata, origin: OriginDigest(entry)))
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
  /// `keep`: what decoded variants stored on disk record of these bytes; nil: none is
  /// stored (no-store, file://).
  private func decodeAll(_ download: DownloadTask, _ data: DownloadedData, source: ImageSource,
                         keep: VariantKeeping? = nil) {
    for decode in download.decodes.values {
      decode.download = nil
      decode.keep = keep
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

  /// Lock held: writes a decoded thumbnail to disk beside its original, on a disk thread,
  /// when the loader keeps variants of its size.
  private func storeVariant(_ image: Image, _ decode: DecodeTask, _ keep: VariantKeeping) {
    let limit = configuration.diskVariantMaxSide
    guard let diskPool, let descriptor = diskVariantDescriptor(decode.variant), image.width <= limit,
          image.height <= limit else { return }
    let cacheKey = decode.variant.cacheKey
    _ = diskPool.submit(priority: Int32.min + 1) { [weak self] in
      guard let self, let disk = self.diskCache() else { return }
      let written = disk.storeVariant(image, descriptor: descriptor, cacheKey: cacheKey, metadata: keep.metadata,
                                      origin: keep.origin.origin)
      guard written > 0 else { return }
      self.lock.withLock {
        self.counters.variantsStored += 1
        self.counters.variantBytesStored += written
      }
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
    if let job = decode.variantJob { diskPool?.cancel(job) }
    decode.variantJob = nil
    decode.waitingSource = nil
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
    if let job = decode.variantJob { diskPool?.setPriority(job, priority) }
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

  /// Returns true when the body so far is all the download's requesters need (see
  /// `endsEarly`): the engine then ends the transfer with it.
  private func downloadProgressed(_ download: DownloadTask, received: UInt64, expected: UInt64,
                                  body: [UInt8]) -> Bool {
    if endsEarly(download, received: received, expected: expected, body: body) { return true }
    var previewNow = false
    let listeners: [PendingRequest] = lock.withLock {
      guard downloads[download.key] === download else { return [] }
      let requesters = download.decodes.values.flatMap(\.requests.values)
      // One preview decode at a time per download, and none sooner than the shortest
      // interval its requesters asked for: the queue drops what comes too soon anyway.
      let previewers = requesters.filter(\.delivery.wantsPreview)
      if !previewers.isEmpty, !download.previewing, download.previewScans < Self.previewScanLimit {
        let interval = previewers.map(\.delivery.previewInterval).min() ?? 0
        let now = monotonicNanoseconds()
        // The interval counts from the last preview made, not the last attempt: an attempt
        // before the first scan was complete must not hold the first preview back.
        if download.lastPreviewAt == 0 || now - download.lastPreviewAt >= interval {
          download.previewing = true
          previewNow = true
        }
      }
      return requesters.filter(\.delivery.wantsProgress)
    }
    for pending in listeners {
      pending.queue.progress(pending.delivery, received: received, expected: expected)
    }
    if previewNow {
      _ = decodePool.submit(priority: download.priority) { [weak self, weak download] in
        guard let self, let download else { return }
        self.previewDownload(download, body)
      }
    }
    return false
  }

  /// The early end of a thumbnail's transfer (pixload.h states the rule): when every
  /// requester wants a thumbnail that a progressive JPEG's first scans decode exactly (1/8
  /// scale), no disk cache would store the file and it is not a revalidation, the transfer
  /// ends once those scans have arrived. Previews do not keep it going: the final image is
  /// then ready as soon as a preview would be. The download leaves the table first, so a
  /// request that comes later starts its own transfer.
  private func endsEarly(_ download: DownloadTask, received: UInt64, expected: UInt64, body: [UInt8]) -> Bool {
    guard diskPool == nil else { return false }
    let variants: [ImageVariant]? = lock.withLock {
      guard downloads[download.key] === download, download.stored == nil, !download.decodes.isEmpty
      else { return nil }
      return Array(download.decodes.keys)
    }
    guard let variants, let end = decoder.firstScansEnd(body, variants: variants) else { return false }
    return lock.withLock {
      // Unchanged meanwhile: still registered, no other variant joined.
      guard downloads[download.key] === download, Set(download.decodes.keys) == Set(variants) else { return false }
      downloads.removeValue(forKey: download.key)
      download.endedEarly = end
      if expected > received { counters.bytesSaved += Int(expected - received) }
      return true
    }
  }

  /// A preview decode never runs for more scans than this (libjpeg's own scan limit).
  static let previewScanLimit = 500

  /// Decodes the complete scans of a progressive JPEG received so far (`body`, a prefix of
  /// the download) into each variant whose requesters want previews, and queues the
  /// images to them. Baseline JPEGs and other formats get no preview: their rows arrive
  /// top to bottom, and a half-drawn image is not what a list row should show.
  private func previewDownload(_ download: DownloadTask, _ body: [UInt8]) {
    defer { lock.withLock { download.previewing = false } }
    guard let prefix = decoder.previewPrefix(body) else { return }
    let targets: [(ImageVariant, [PendingRequest])] = lock.withLock {
      guard downloads[download.key] === download, prefix.scans > download.previewScans else { return [] }
      download.previewScans = prefix.scans
      download.lastPreviewAt = monotonicNanoseconds()
      return download.decodes.values.compactMap { decode in
        let previewers = decode.requests.values.filter(\.delivery.wantsPreview)
        return previewers.isEmpty ? nil : (decode.variant, Array(previewers))
      }
    }
    guard !targets.isEmpty else { return }
    var bytes = Array(body[0..<prefix.length])
    bytes += [0xFF, 0xD9]  // EOI: libjpeg then shows the coefficients it has, without a warning
    for (variant, previewers) in targets {
      guard case .success(let image) = decoder.decode(bytes, variant: variant, maxPixels: configuration.maxPixels) else {
        continue
      }
      for pending in previewers { pending.queue.preview(pending.delivery, image: image, scans: prefix.scans) }
    }
  }

  private func downloadFinished(_ download: DownloadTask, _ result: Result<DownloadedData, LoadError>) {
    var failed: [PendingRequest] = []
    var failure: LoadError?
    lock.withLock {
      // A download cancelled while finishing is no longer registered: drop its result.
      // One that ended early left the table on purpose.
      guard downloads[download.key] === download || download.endedEarly > 0 else { return }
      download.transfer = nil
      switch result {
      case .failure(let error):
        failure = error
        failed = abandon(download)
      case .success(let response):
        if downloads[download.key] === download { downloads.removeValue(forKey: download.key) }
        var data = response
        if response.endedEarly, download.endedEarly > 0, download.endedEarly <= response.bytes.count {
          // The first scans, and an EOI: what the thumbnails decode from.
          data.bytes = Array(response.bytes[0..<download.endedEarly]) + [0xFF, 0xD9]
        }
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
        // Keep the bytes on disk for next time, without delaying the decode; never what
        // the server marked no-store.
        if let diskPool, download.url.isHTTP, !response.caching.noStore, !response.endedEarly {
          let key = download.key.cacheKey, bytes = data.bytes
          let digest = response.httpStatus == 304 ? download.stored.map(OriginDigest.init) ?? OriginDigest(bytes)
                                                  : OriginDigest(bytes)
          decodeAll(download, data, source: source, keep: VariantKeeping(metadata: metadata, origin: digest))
          _ = diskPool.submit(priority: Int32.min + 1) { [weak self] in
            self?.diskCache()?.store(bytes, metadata: metadata, for: key, checksum: digest.origin.checksum)
          }
        } else {
          decodeAll(download, data, source: source)
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
    if case .success(let image) = result, let warning = image.warning {
      Self.log(configuration, .warning, "\(decode.variant.cacheKey): \(warning)")
    }
    let finished: [PendingRequest] = lock.withLock {
      guard decodes[decode.key] === decode else { return [] }
      decodes.removeValue(forKey: decode.key)
      decode.job = nil
      let all = Array(decode.requests.values)
      for pending in all { pending.decode = nil }
      if case .success(let image) = result, all.contains(where: \.usesMemoryCache) {
        memoryCache.insert(image, for: decode.variant)
      }
      if case .success(let image) = result, !all.isEmpty, let keep = decode.keep { storeVariant(image, decode, keep) }
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
  /// The lookup of this variant on disk, before any download; `waitingSource` is what
  /// starts the download if it misses.
  var variantJob: PriorityWorkPool.Job?
  var waitingSource: DownloadSource?
  /// Set with the bytes: what a decoded variant stored on disk records of them.
  var keep: VariantKeeping?

  init(key: DecodeKey) { self.key = key }
}

/// Where the bytes of a decode come from, kept while the decode looks for its variant on disk.
private struct DownloadSource {
  let url: RequestURL
  let headers: [String]
  var startDelayMilliseconds: Int
}

/// What a decoded variant written to disk carries of its original: the response's metadata
/// (its freshness follows the original's) and the bytes' identity.
private struct VariantKeeping {
  let metadata: DiskCache.Metadata
  let origin: OriginDigest
}

/// The length and checksum of an original's bytes, the checksum computed once, on the
/// first disk thread that needs it (the original's write or a variant's), never on the
/// decode path.
private final class OriginDigest: @unchecked Sendable {
  private let bytes: [UInt8]
  private let lock = Lock()
  private var known: VariantOrigin?

  init(_ bytes: [UInt8]) { self.bytes = bytes }
  init(_ entry: DiskCache.Entry) {
    bytes = []
    known = VariantOrigin(length: UInt64(entry.bytes.count), checksum: entry.checksum)
  }

  var origin: VariantOrigin {
    lock.withLock {
      if let known { return known }
      let computed = VariantOrigin(length: UInt64(bytes.count), checksum: DiskCache.checksum(bytes))
      known = computed
      return computed
    }
  }
}

/// The bytes of one cache key (from disk or the network), shared by every decode that
/// needs them. The request that starts it decides URL and headers (requests merged into
/// it have the same cache key, so the same headers unless the caller gave one key).
private final class DownloadTask {
  let key: DownloadKey
  let url: RequestURL
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
  /// The length of the prefix its transfer ended with (see `endsEarly`); 0: none.
  var endedEarly = 0
  /// Previews: a decode under way, when the last began, the scan count of the last made.
  var previewing = false
  var lastPreviewAt: UInt64 = 0
  var previewScans = 0

  init(key: DownloadKey, url: RequestURL, headers: [String]) {
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
