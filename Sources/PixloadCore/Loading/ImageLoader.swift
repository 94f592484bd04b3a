#if canImport(Glibc)
import Glibc
#endif

/// The coordinator: accepts requests, merges duplicates into shared download and decode
/// tasks (`LoaderTasks.swift`), ranks them, cancels them when their last requester leaves,
/// and hands each result to its request's completion queue. It decides when, for whom and
/// at which priority; the stages decide how: the disk tier (`DiskTier`: what the disk holds
/// and whether it is fresh), fetching (`DataLoading`), decoding (`ImageDecoding`) and
/// delivery (`CompletionQueue`), with processing (`ImageProcessing`) after decoding.
///
/// This file is intake and the host's calls; the merge graph is `ImageLoader+Merging`,
/// handing work to the stages and taking their answers `ImageLoader+Stages`, processor
/// chains `ImageLoader+Processing`, progressive downloads `ImageLoader+Progressive`.
///
/// All bookkeeping happens under one lock and is cheap; downloading happens on the
/// engine's thread, disk work on the tier's and decoding on a `PriorityWorkPool`, never
/// under the lock. Lock order: loader, then queue, memory cache, pool, tier or engine;
/// never the reverse.
public final class ImageLoader: DeliveryOwner, @unchecked Sendable {
  public let configuration: LoaderConfiguration
  public let memoryCache: MemoryCache
  /// nil: no disk cache.
  public let diskTier: DiskTier?
  /// The fetch stage: host fetchers and `data:` URIs, the network for the rest.
  let fetchRouter: FetchRouter
  var dataLoader: DataLoading { fetchRouter }
  let decoder: ImageDecoding
  /// The codecs registered with this loader (pxl_loader_add_codec), which the default
  /// decoder tries after the built-in formats.
  public let codecs = CodecTable()
  let decodePool: PriorityWorkPool
  /// Where prefetches "deliver": it drops their results.
  let prefetchSink: CompletionQueue

  let lock = Lock()
  var nextToken: UInt64 = 0
  var closed = false
  /// Every accepted request whose handler has not started yet.
  var requests: [UInt64: PendingRequest] = [:]
  var downloads: [DownloadKey: DownloadTask] = [:]
  var decodes: [DecodeKey: DecodeTask] = [:]
  /// The custom processors requests may name (pxl_loader_add_processor).
  public let customProcessors = ProcessorRegistry()
  var counters = LoaderStatistics()

  /// A snapshot of what this loader did so far.
  public var statistics: LoaderStatistics { lock.withLock { counters } }

  /// Uses `dataLoader` for the network (a `CurlEngine` by default; URLs of a fetcher's
  /// scheme and `data:` URIs never reach it), `diskTier` for the disk
  /// (a `LocalDiskTier` when `configuration.diskCacheBytes` > 0 by default) and `decoder`
  /// for the pixels; tests pass doubles to drive the pipeline deterministically.
  public init(configuration: LoaderConfiguration = LoaderConfiguration(),
              dataLoader: DataLoading? = nil, diskTier: DiskTier? = nil,
              decoder: ImageDecoding? = nil) throws(LoadError) {
    self.configuration = configuration
    self.memoryCache = MemoryCache(capacityBytes: configuration.memoryCacheBytes,
                                   capacityCount: configuration.memoryCacheCount)
    // A part whose threads run must be stopped before this throws: an engine or pool
    // released without shutdown() is torn down under its threads (they hold it
    // unowned). So the eventfd first (out of descriptors, it is what fails), then the
    // pools, each of which cleans up after itself, then the engine, whose thread starts
    // last in its init; if a later part fails, the earlier ones are shut down here.
    self.prefetchSink = try CompletionQueue(discardingResults: ())
    self.decoder = decoder ?? ImageDecoder(codecs: codecs)
    let threads = configuration.decodeThreads > 0 ? configuration.decodeThreads : availableCoreCount()
    let decodePool = try PriorityWorkPool(threadCount: threads, name: "pxl-decode")
    var tier = diskTier
    let router: FetchRouter
    do throws(LoadError) {
      if tier == nil, configuration.diskCacheBytes > 0 {
        tier = try LocalDiskTier(directory: configuration.diskCacheDirectory,
                                 capacityBytes: configuration.diskCacheBytes,
                                 maxAgeSeconds: configuration.diskCacheMaxAgeSeconds,
                                 ignoresHTTPFreshness: configuration.ignoresHTTPFreshness,
                                 variantMaxSide: configuration.diskVariantMaxSide,
                                 log: { [configuration] in ImageLoader.log(configuration, .warning, $0) })
      }
      // The router shuts the engine down if it cannot start its own thread.
      let network: DataLoading
      if let dataLoader { network = dataLoader } else { network = try CurlEngine(configuration: configuration.network) }
      router = try FetchRouter(network: network, configuration: configuration.network)
    } catch {
      decodePool.shutdown()
      tier?.shutdown()
      throw error
    }
    self.fetchRouter = router
    self.decodePool = decodePool
    self.diskTier = tier
  }

  /// The variant `request` asks for from this loader: its registered codecs are part of
  /// the key, so pixels another decoder made are never served for it.
  func variant(of request: ImageRequest) -> ImageVariant {
    var variant = request.variant
    variant.codecs = codecs.signature
    return variant
  }

  /// The disk cache's size as last seen, without touching the disk (0 before it opened).
  public var diskCacheBytesSeen: Int { diskTier?.bytesSeen ?? 0 }

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
    try load(request, queue: queue, progress: progress, preview: preview) { token, outcome, _ in handler(token, outcome) }
  }

  /// As `load(_:queue:progress:preview:handler:)`, the handler also getting what the
  /// request cost (`RequestMetrics`).
  public func load(_ request: ImageRequest, queue: CompletionQueue,
                   progress: ((UInt64, UInt64, UInt64) -> Void)? = nil,
                   preview: ((UInt64, Image) -> Void)? = nil,
                   completion handler: @escaping (UInt64, Outcome, RequestMetrics) -> Void) throws(LoadError) -> UInt64 {
    let url = try validate(request)
    let variant = self.variant(of: request)
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
                            completion: handler)
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
    attach(pending, to: DecodeKey(variant: variant, policy: request.cachePolicy),
           source: DownloadSource(url: url, headers: request.headers,
                                  startDelayMilliseconds: request.startDelayMilliseconds))
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
      guard let transfer = requests[token]?.decode.flatMap(download(under:))?.transfer else { return }
      dataLoader.startNow(transfer)
    }
  }

  /// Pushes back the end of the start delay of the request's transfer (a table whose row
  /// is still being flung past); no effect once the transfer runs.
  public func postpone(_ token: UInt64, milliseconds: Int) {
    lock.withLock {
      guard let transfer = requests[token]?.decode.flatMap(download(under:))?.transfer else { return }
      dataLoader.postpone(transfer, nanoseconds: UInt64(max(0, milliseconds)) * 1_000_000)
    }
  }

  /// What the network has delivered lately (nil until measured): tables size their
  /// prefetch window by it.
  public var networkThroughput: Throughput? { dataLoader.throughput }

  /// TLS handshakes of the network's connections so far, and how many resumed a session.
  public var tlsHandshakes: TLSHandshakeCounts { dataLoader.tlsHandshakes }

  /// The memory-cached image `request` would produce, if any. Never blocks on work.
  public func cachedImage(for request: ImageRequest) -> Image? {
    guard request.usesMemoryCache else { return nil }
    return memoryCache.image(for: variant(of: request))
  }

  /// Forgets one cache key: every decoded variant in memory and the disk entry (deleted on
  /// a disk thread).
  public func removeCached(cacheKey: String) {
    memoryCache.removeAll(cacheKey: cacheKey)
    diskTier?.remove(cacheKey)
  }

  /// Cancels every request (each still gets its one CANCELLED result through its queue),
  /// stops and joins the library's threads and empties the memory cache. Idempotent.
  public func close() {
    let abandoned: [(PendingRequest, RequestMetrics)] = lock.withLock {
      if closed { return [] }
      closed = true
      let all = Array(requests.values)
      // As a cancel does: what each had measured, read before the graph goes.
      let measured = all.map { ($0, measuredSoFar($0)) }
      // Break the task graph's back references so nothing outlives the loader.
      for download in downloads.values { download.decodes.removeAll() }
      for decode in decodes.values {
        decode.phase = .idle
        decode.requests.removeAll()
        decode.children.removeAll()
        // A custom processor under way sees its flag and returns before the join below.
        if let flag = decode.cancel { ImageProcessing.raise(flag) }
      }
      for pending in all { pending.decode = nil }
      requests.removeAll()
      downloads.removeAll()
      decodes.removeAll()
      return measured.sorted { $0.0.token < $1.0.token }
    }
    dataLoader.shutdown()
    codecs.cancelAll()
    decodePool.shutdown()
    // No decode runs any more: every codec's destroy, before the host's free returns.
    codecs.close()
    diskTier?.shutdown()
    // Every processor call has returned (the pool is joined): the registrations go, and
    // with the last reference to each, its destroy callback.
    customProcessors.removeAll()
    for (pending, measured) in abandoned { pending.queue.cancel(pending.delivery, measured: measured) }
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
      for decode in decodes.values {
        guard case .held(let input) = decode.phase, decode.requests.values.contains(where: { $0.queue === queue })
        else { continue }
        scheduleDecode(decode, input)
      }
    }
  }

  func validate(_ request: ImageRequest) throws(LoadError) -> RequestURL {
    if request.targetWidth < 0 || request.targetHeight < 0 {
      throw LoadError(.invalidArgument, "target size must not be negative")
    }
    if let error = ImageProcessor.validate(request.processors) { throw error }
    let url = try RequestURL(parsing: request.url)
    try fetchRouter.admit(url)
    return url
  }

  // MARK: - Fetchers

  /// Serves URLs of `scheme` with `fetcher`: such requests go through the loader as any
  /// other (merging, priorities, caches, progress, previews). The fetch stage states which
  /// schemes may have one (`FetchRouter.register`); `.loaderClosed` once closed.
  public func addFetcher(_ fetcher: Fetcher, for scheme: String, settings: FetcherSettings = FetcherSettings()) throws(LoadError) {
    try fetchRouter.register(fetcher, for: scheme, settings: settings)
  }

  /// Removes the fetcher of `scheme`: requests it has not answered end CANCELLED, the
  /// fetches it started are cancelled, then it is destroyed (on the fetch thread, soon).
  /// False when the scheme had none.
  @discardableResult
  public func removeFetcher(for scheme: String) -> Bool { fetchRouter.unregister(scheme: scheme) }
}
