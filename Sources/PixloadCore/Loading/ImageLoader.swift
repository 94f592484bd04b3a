import CCodecs
#if canImport(Glibc)
import Glibc
#endif

/// The coordinator: intake and the pool of stage tasks. It accepts requests (checks them,
/// answers from the memory cache), and hands them to its `TaskPool`, which merges them into
/// shared stage tasks, ranks them and cancels them when their last requester leaves; each
/// result goes to its request's completion queue (Delivery). It decides when, for whom and
/// at which priority; the stages decide how: the disk tier (`DiskTier`: what the disk holds
/// and whether it is fresh), fetching (`FetchRouter`: fetchers, `data:`, the network and the
/// scheme rules), decoding (`ImageDecoding`) and processing (`ImageProcessing`).
///
/// Bookkeeping happens under the pool's one lock (its rules are in TaskPool.swift);
/// downloading happens on the engine's thread, disk work on the tier's and decoding on a
/// `PriorityWorkPool`, never under the lock.
public final class ImageLoader: @unchecked Sendable {
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
  /// The codec module whose pxl_codec_module_register runs now (pxl_loader_new, on its
  /// thread, before the handle is anyone else's): the codecs it adds are isolated
  /// (pixload.h, "Isolation"). nil otherwise: a host's codec stays in-process.
  public nonisolated(unsafe) var registeringModule: CodecModules.Module?
  /// The decode threads (pool size of an isolated codec's workers).
  public var decodeThreadCount: Int {
    configuration.decodeThreads > 0 ? configuration.decodeThreads : availableCoreCount()
  }
  let decodePool: PriorityWorkPool
  /// Where prefetches "deliver": it drops their results.
  let prefetchSink: CompletionQueue

  /// The requests and the stage tasks they share, under one lock.
  let pool: TaskPool
  /// The custom processors requests may name (pxl_loader_add_processor).
  public let customProcessors = ProcessorRegistry()

  /// A snapshot of what this loader did so far.
  public var statistics: LoaderStatistics { pool.lock.withLock { pool.counters } }

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
      if let dataLoader {
        network = dataLoader
      } else {
        let engine = try CurlEngine(configuration: configuration.network)
        Self.holdTransfers(of: engine, whileBacklogged: decodePool, threads: threads)
        network = engine
      }
      router = try FetchRouter(network: network, configuration: configuration.network)
    } catch {
      decodePool.shutdown()
      tier?.shutdown()
      throw error
    }
    self.fetchRouter = router
    self.decodePool = decodePool
    self.diskTier = tier
    pool = TaskPool(configuration: configuration, memoryCache: memoryCache, diskTier: tier, dataLoader: router,
                    decoder: self.decoder, decodePool: decodePool)
  }

  /// Back-pressure: once more downloaded bodies wait for a decode thread than a few per
  /// thread, the engine starts no new transfer (running ones go on) until half as many
  /// wait. On a fast network the downloads outrun the decodes, and without it every body of
  /// a long list waits at once, each written into fresh pages (a page fault per 4 KiB);
  /// held to a few, the memory of the decoded ones is reused. The queue is not empty when
  /// starts resume, so the decode threads do not wait for it. Waiting jobs: decodes,
  /// previews, stream feeds, processing.
  static func holdTransfers(of engine: CurlEngine, whileBacklogged pool: PriorityWorkPool, threads: Int) {
    pool.watchBacklog(limit: 2 * max(1, threads) + 2) { [weak engine] in engine?.resumeStarts() }
    engine.holdStarts { [weak pool] in pool?.isBacklogged() ?? false }
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
    let intakeAt = monotonicNanoseconds()
    let url = try validate(request)
    return try pool.accept(request, url: url, variant: variant(of: request), queue: queue, intakeAt: intakeAt) {
      [pool] token in
      Delivery(token: token, owner: pool, progressHandler: progress,
               progressIntervalMilliseconds: request.progressIntervalMilliseconds,
               previewHandler: preview, previewIntervalMilliseconds: request.previewIntervalMilliseconds,
               intakeAt: intakeAt, completion: handler)
    }
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
    let tokens = pool.tokens(of: queue)
    return tokens.reduce(0) { $0 + (cancel($1) ? 1 : 0) }
  }

  /// Cancels a request whose handler has not started: it will report CANCELLED. Shared
  /// work continues for the other requesters. False for unknown or finished tokens.
  @discardableResult
  public func cancel(_ token: UInt64) -> Bool {
    pool.cancel(token)
  }

  /// Re-ranks a request and the shared work it belongs to. False for unknown tokens.
  @discardableResult
  public func setPriority(_ token: UInt64, _ priority: Int32) -> Bool {
    pool.setPriority(token, priority)
  }

  /// Ends the start delay of the request's transfer (a table confirming a row that is
  /// still on screen one frame after a fling brought it there).
  public func startNow(_ token: UInt64) {
    pool.withTransfer(of: token) { dataLoader.startNow($0) }
  }

  /// Pushes back the end of the start delay of the request's transfer (a table whose row
  /// is still being flung past); no effect once the transfer runs.
  public func postpone(_ token: UInt64, milliseconds: Int) {
    pool.withTransfer(of: token) { dataLoader.postpone($0, nanoseconds: UInt64(max(0, milliseconds)) * 1_000_000) }
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
    diskTier?.remove(CacheKey(cacheKey))
  }

  /// Cancels every request (each still gets its one CANCELLED result through its queue),
  /// stops and joins the library's threads and empties the memory cache. Idempotent.
  public func close() {
    let abandoned = pool.close()
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
    // The progressive-JPEG thumbnail's kept working memory (pxl_jpeg_dc_baseline): a cache
    // of this process's, which a loader being freed should not leave behind.
    pxl_jpeg_dc_baseline_release()
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

  /// Library diagnostics (an unusable cache directory, a dropped corrupt entry): one line
  /// to the host's log callback if it wants that level, never a failed load.
  public static func log(_ configuration: LoaderConfiguration, _ level: LogLevel, _ line: String) {
    guard let sink = configuration.log, level <= configuration.logLevel else { return }
    sink(level, line)
  }
}
