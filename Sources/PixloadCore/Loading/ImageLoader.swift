#if canImport(Glibc)
import Glibc
#endif

/// The coordinator: accepts requests, merges duplicates into shared download and decode
/// tasks (`LoaderTasks.swift`), ranks them, cancels them when their last requester leaves,
/// and hands each result to its request's completion queue. It decides when, for whom and
/// at which priority; the stages decide how: the disk tier (`DiskTier`: what the disk holds
/// and whether it is fresh), fetching (`DataLoading`), decoding (`ImageDecoding`) and
/// delivery (`CompletionQueue`).
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
  let dataLoader: DataLoading
  let decoder: ImageDecoding
  /// The codecs registered with this loader (pxl_loader_add_codec), which the default
  /// decoder tries after the built-in formats.
  public let codecs = CodecTable()
  let decodePool: PriorityWorkPool
  /// Where prefetches "deliver": it drops their results.
  private let prefetchSink: CompletionQueue

  let lock = Lock()
  private var nextToken: UInt64 = 0
  private var closed = false
  /// Every accepted request whose handler has not started yet.
  private var requests: [UInt64: PendingRequest] = [:]
  var downloads: [DownloadKey: DownloadTask] = [:]
  var decodes: [DecodeKey: DecodeTask] = [:]
  /// The custom processors requests may name (pxl_loader_add_processor).
  public let customProcessors = ProcessorRegistry()
  var counters = LoaderStatistics()

  /// A snapshot of what this loader did so far.
  public var statistics: LoaderStatistics { lock.withLock { counters } }

  /// Uses `dataLoader` for the network (a `CurlEngine` by default), `diskTier` for the disk
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
    do throws(LoadError) {
      if tier == nil, configuration.diskCacheBytes > 0 {
        tier = try LocalDiskTier(directory: configuration.diskCacheDirectory,
                                 capacityBytes: configuration.diskCacheBytes,
                                 maxAgeSeconds: configuration.diskCacheMaxAgeSeconds,
                                 ignoresHTTPFreshness: configuration.ignoresHTTPFreshness,
                                 variantMaxSide: configuration.diskVariantMaxSide,
                                 log: { [configuration] in ImageLoader.log(configuration, .warning, $0) })
      }
      if let dataLoader {
        self.dataLoader = dataLoader
      } else {
        self.dataLoader = try CurlEngine(configuration: configuration.network)
      }
    } catch {
      decodePool.shutdown()
      tier?.shutdown()
      throw error
    }
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
    let abandoned: [PendingRequest] = lock.withLock {
      if closed { return [] }
      closed = true
      let all = Array(requests.values)
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
      return all.sorted { $0.token < $1.token }
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
      for decode in decodes.values {
        guard case .held(let input) = decode.phase, decode.requests.values.contains(where: { $0.queue === queue })
        else { continue }
        scheduleDecode(decode, input)
      }
    }
  }

  private func validate(_ request: ImageRequest) throws(LoadError) -> RequestURL {
    if request.targetWidth < 0 || request.targetHeight < 0 {
      throw LoadError(.invalidArgument, "target size must not be negative")
    }
    if let error = ImageProcessor.validate(request.processors) { throw error }
    let url = try RequestURL(parsing: request.url)
    if !configuration.network.allowedSchemes.contains(url.scheme) {
      throw LoadError(.schemeNotAllowed, "scheme '\(url.scheme)' is not allowed by this loader")
    }
    return url
  }

  // MARK: - The merge graph (lock held)

  /// Joins the request to the decode task for its variant, creating the decode task (and
  /// the download task it waits on) when it is the first requester.
  private func attach(_ pending: PendingRequest, to key: DecodeKey, source: DownloadSource) {
    if let decode = decodes[key] {
      decode.requests[pending.token] = pending
      pending.decode = decode
      counters.coalesced += 1
      // A joiner can only raise the highest priority: no need to look at every requester
      // (k requests for one image would cost k^2).
      if pending.priority > decode.priority { rank(decode, at: pending.priority) }
      hurry(decode, source)
      return
    }
    let decode = DecodeTask(key: key)
    decode.requests[pending.token] = pending
    decode.priority = pending.priority
    pending.decode = decode
    decodes[key] = decode
    start(decode, source)
  }

  /// A requester that wants its bytes now joined `decode`: the start delay of the first
  /// one no longer holds (up to the download, through the variants it is processed from).
  func hurry(_ decode: DecodeTask, _ source: DownloadSource) {
    switch decode.phase {
    case .waitingForBytes(let download):
      startSooner(download, startDelayMilliseconds: source.startDelayMilliseconds)
    case .lookingUpVariant(let job, var waiting) where source.startDelayMilliseconds == 0:
      waiting.startDelayMilliseconds = 0
      decode.phase = .lookingUpVariant(job, source: waiting)
    case .waitingForParent(let parent): hurry(parent, source)
    default: break
    }
  }

  /// Starts a new task: the decoded variant on disk, else its input (`attachInput`).
  func start(_ decode: DecodeTask, _ source: DownloadSource) {
    let key = decode.key
    if let diskTier, key.policy != .reload, diskTier.keepsVariant(key.variant) {
      // A decoded variant on disk needs neither the encoded bytes nor a decode: look for
      // it first; the download joins in only on a miss.
      let job = diskTier.lookUpVariant(key.variant, policy: key.policy, priority: decode.priority) {
        [weak self, weak decode] image in
        guard let self, let decode else { return }
        self.variantLookupFinished(decode, image)
      }
      decode.phase = .lookingUpVariant(job, source: source)
      return
    }
    attachInput(decode, source)
  }

  /// Joins a task to what it is made from: the image of its parent variant when it is a
  /// processed one (`attachParent`), else the download of its bytes.
  private func attachInput(_ decode: DecodeTask, _ source: DownloadSource) {
    if let (parent, _) = ImageProcessing.parent(of: decode.variant) {
      attachParent(decode, parent, source)
    } else {
      attachDownload(decode, source)
    }
  }

  /// Joins a decode task to the download of its bytes, starting the download (disk lookup,
  /// then network) when it is the first.
  private func attachDownload(_ decode: DecodeTask, _ source: DownloadSource) {
    let downloadKey = DownloadKey(cacheKey: decode.variant.cacheKey, policy: decode.key.policy)
    if let download = downloads[downloadKey] {
      download.decodes[decode.variant] = decode
      decode.phase = .waitingForBytes(download)
      counters.coalesced += 1
      rerank(download)
      startSooner(download, startDelayMilliseconds: source.startDelayMilliseconds)
      return
    }
    let download = DownloadTask(key: downloadKey, url: source.url, headers: source.headers)
    download.startDelayMilliseconds = source.startDelayMilliseconds
    download.decodes[decode.variant] = decode
    download.priority = decode.priority
    decode.phase = .waitingForBytes(download)
    downloads[downloadKey] = download
    if let diskTier, downloadKey.policy != .reload {
      download.phase = .lookingUp(diskTier.lookUpOriginal(downloadKey.cacheKey, policy: downloadKey.policy,
                                                          priority: download.priority) {
        [weak self, weak download] answer in
        guard let self, let download else { return }
        self.diskLookupFinished(download, answer)
      })
    } else {
      startTransfer(download, revalidating: nil)
    }
  }

  /// A request that wants its bytes now joined a download whose start is held (a table's
  /// prefetch or fling row): the hold belonged to the first requester, so the transfer
  /// starts now instead of making the joiner wait it out.
  private func startSooner(_ download: DownloadTask, startDelayMilliseconds: Int) {
    guard startDelayMilliseconds == 0, download.startDelayMilliseconds > 0 else { return }
    download.startDelayMilliseconds = 0
    if let transfer = download.transfer { dataLoader.startNow(transfer) }
  }

  private func startTransfer(_ download: DownloadTask, revalidating stored: StoredOriginal?) {
    let id = dataLoader.start(
      url: download.url, headers: download.headers, revalidating: stored.map { ($0.etag, $0.lastModified) },
      delay: UInt64(download.startDelayMilliseconds) * 1_000_000, priority: download.priority,
      progress: { [weak self, weak download] received, expected, body in
        guard let self, let download else { return false }
        return self.downloadProgressed(download, received: received, expected: expected, body: body)
      },
      completion: { [weak self, weak download] result in
        guard let self, let download else { return }
        self.downloadFinished(download, result)
      })
    download.phase = .transferring(id, revalidating: stored)
  }

  /// Lock held: ends a download and every request waiting on it; returns those requests,
  /// whose results the caller posts after unlocking.
  private func abandon(_ download: DownloadTask) -> [PendingRequest] {
    if downloads[download.key] === download { downloads.removeValue(forKey: download.key) }
    download.phase = .idle
    let failed = download.decodes.values.flatMap { abandon($0) }
    download.decodes.removeAll()
    return failed
  }

  /// Lock held: ends a task and the tasks processed from it; returns their requests.
  func abandon(_ decode: DecodeTask) -> [PendingRequest] {
    if decodes[decode.key] === decode { decodes.removeValue(forKey: decode.key) }
    decode.phase = .idle
    var failed: [PendingRequest] = []
    for pending in decode.requests.values {
      pending.decode = nil
      failed.append(pending)
    }
    decode.requests.removeAll()
    let children = decode.children.values
    decode.children.removeAll()
    for child in children where decodes[child.key] === child { failed += abandon(child) }
    return failed
  }

  /// Lock held: ends a decode task; returns its requests, whose results the caller posts
  /// after unlocking.
  func finish(_ decode: DecodeTask) -> [PendingRequest] {
    if decodes[decode.key] === decode { decodes.removeValue(forKey: decode.key) }
    decode.phase = .idle
    let all = Array(decode.requests.values)
    for pending in all { pending.decode = nil }
    return all
  }

  /// Hands the bytes to one decode job per variant of the download.
  private func decodeAll(_ download: DownloadTask, _ input: DecodeInput) {
    download.phase = .idle
    for decode in download.decodes.values { scheduleDecode(decode, input) }
    download.decodes.removeAll()
  }

  /// Queues the decode on the pool. Cheapest first among equal priorities: the encoded
  /// size stands for the decode's cost (entropy decoding and inflating dominate a
  /// thumbnail's decode).
  private func scheduleDecode(_ decode: DecodeTask, _ input: DecodeInput) {
    decode.phase = .queued(decodePool.submit(priority: decode.priority, cost: input.data.bytes.count) {
      [weak self, decode] in
      self?.runDecode(decode, input)
    })
  }

  /// Removes a request from its decode task; the last requester leaving cancels the
  /// decode, and the last decode leaving a download cancels the download.
  private func detach(_ pending: PendingRequest) {
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

  /// Lock held: stops a task nobody needs any more (no request, no child), and what it
  /// waits on when it was the last to.
  func release(_ decode: DecodeTask) {
    if decodes[decode.key] === decode { decodes.removeValue(forKey: decode.key) }
    let phase = decode.phase
    decode.phase = .idle
    if let flag = decode.cancel { ImageProcessing.raise(flag) }
    switch phase {
    case .waitingForParent(let parent):
      parent.children.removeValue(forKey: decode.key)
      if parent.isUnused { release(parent) } else { rerank(parent) }
    case .queued(let job): decodePool.cancel(job)
    case .lookingUpVariant(let job, _): diskTier?.cancel(job)
    case .waitingForBytes(let download):
      download.decodes.removeValue(forKey: decode.variant)
      if !download.decodes.isEmpty {
        rerank(download)
        return
      }
      if downloads[download.key] === download { downloads.removeValue(forKey: download.key) }
      switch download.phase {
      case .transferring(let transfer, _): dataLoader.cancel(transfer)
      case .lookingUp(let job): diskTier?.cancel(job)
      case .idle: break
      }
      download.phase = .idle
    case .idle, .held, .continuing: break
    }
  }

  /// Merged work runs at the highest priority among its requesters.
  func rerank(_ decode: DecodeTask) {
    let priority = max(decode.requests.values.lazy.map(\.priority).max() ?? Int32.min,
                       decode.children.values.lazy.map(\.priority).max() ?? Int32.min)
    guard priority != decode.priority else { return }
    rank(decode, at: priority)
  }

  func rank(_ decode: DecodeTask, at priority: Int32) {
    decode.priority = priority
    switch decode.phase {
    case .waitingForParent(let parent): if priority > parent.priority { rank(parent, at: priority) } else { rerank(parent) }
    case .queued(let job): decodePool.setPriority(job, priority)
    case .lookingUpVariant(let job, _): diskTier?.setPriority(job, priority)
    case .waitingForBytes(let download): rerank(download)
    case .idle, .held, .continuing: break
    }
  }

  private func rerank(_ download: DownloadTask) {
    let priority = download.decodes.values.lazy.map(\.priority).max() ?? Int32.min
    guard priority != download.priority else { return }
    download.priority = priority
    switch download.phase {
    case .transferring(let transfer, _): dataLoader.setPriority(transfer, priority)
    case .lookingUp(let job): diskTier?.setPriority(job, priority)
    case .idle: break
    }
  }

  // MARK: - Stage answers (library threads)

  /// The variant lookup answered: a servable variant is the result of every requester,
  /// with no download and no decode; otherwise the decode waits for the bytes as usual.
  private func variantLookupFinished(_ decode: DecodeTask, _ image: Image?) {
    let input = DecodeInput(data: DownloadedData(bytes: [], httpStatus: 0), source: .disk, origin: nil)
    let done: TaskResults? = lock.withLock {
      guard decodes[decode.key] === decode, case .lookingUpVariant(_, let source) = decode.phase else { return nil }
      guard let image else {
        attachInput(decode, source)
        return nil
      }
      counters.diskHits += 1
      counters.variantHits += 1
      return finishLocked(decode, .success(image), input, onPool: false)
    }
    if let done { report(done, decode, input) }
  }

  /// The disk answered: decode its bytes, revalidate them, or go to the network.
  private func diskLookupFinished(_ download: DownloadTask, _ answer: DiskAnswer) {
    var failed: [PendingRequest] = []
    lock.withLock {
      guard downloads[download.key] === download else { return }
      switch answer {
      case .fresh(let bytes, let origin):
        counters.diskHits += 1
        downloads.removeValue(forKey: download.key)
        decodeAll(download, DecodeInput(data: DownloadedData(bytes: bytes, httpStatus: 0), source: .disk, origin: origin))
      case .revalidate(let stored): startTransfer(download, revalidating: stored)
      case .miss: startTransfer(download, revalidating: nil)
      case .notCached: failed = abandon(download)
      }
    }
    complete(failed, with: .failure(LoadError(.notCached, "not in the cache (cache-only request)")))
  }

  private func downloadFinished(_ download: DownloadTask, _ result: Result<DownloadedData, LoadError>) {
    var failed: [PendingRequest] = []
    var failure: LoadError?
    lock.withLock {
      // A download cancelled while finishing is no longer registered: drop its result.
      // One that ended early left the table on purpose.
      guard downloads[download.key] === download || download.endedEarly > 0 else { return }
      let stored = download.revalidating
      switch result {
      case .failure(let error):
        failure = error
        failed = abandon(download)
      case .success(var response):
        if downloads[download.key] === download { downloads.removeValue(forKey: download.key) }
        if response.endedEarly, download.endedEarly > 0, download.endedEarly <= response.bytes.count {
          // The first scans, as a file: what the thumbnails decode from.
          response.bytes = decoder.scansPrefix(response.bytes, length: download.endedEarly)
        }
        counters.bytesDownloaded += response.bytes.count
        if response.httpStatus == 304 { counters.revalidated += 1 } else { counters.networkFetches += 1 }
        let received = diskTier?.received(response, for: download.key.cacheKey, url: download.url,
                                          revalidating: stored)
          ?? ReceivedBytes(data: response, source: .network, origin: nil)
        decodeAll(download, DecodeInput(data: received.data, source: received.source, origin: received.origin))
      }
    }
    if let failure { complete(failed, with: .failure(failure)) }
  }

  private func runDecode(_ decode: DecodeTask, _ input: DecodeInput) {
    // A host that stopped draining: when every requester's queue is full of undrained
    // images, the decode (which would add another) waits with its bytes until one drains.
    enum Start { case run, held, abandoned }
    let start: Start = lock.withLock {
      // Every requester left while the job waited: nothing to decode for.
      guard decodes[decode.key] === decode, !decode.isUnused else { return .abandoned }
      var queues: [ObjectIdentifier: CompletionQueue] = [:]
      for pending in decode.requests.values { queues[ObjectIdentifier(pending.queue)] = pending.queue }
      // Every queue is asked (each registers this loader to hear when it drains). A decode
      // only processed variants wait for is not held (their requesters' queues decide).
      let full = queues.values.map { $0.isFull(notifying: self) }
      guard !queues.isEmpty, !full.contains(false) else { return .run }
      decode.phase = .held(input)
      return .held
    }
    if start != .run { return }
    let result = decoder.decode(input.data.bytes, variant: decode.variant, maxPixels: configuration.maxPixels)
    if case .success(let image) = result, let warning = image.warning {
      Self.log(configuration, .warning, "\(decode.variant.cacheKey): \(warning)")
    }
    let done: TaskResults? = lock.withLock {
      counters.decodes += 1
      return finishLocked(decode, result, input, onPool: true)
    }
    if let done { proceed(done, decode, input) }
  }

  /// What a finished task hands out once the lock is released: its result to its own
  /// requests, and the failure of the tasks below it to theirs.
  struct TaskResults {
    let result: Result<Image, LoadError>
    let finished: [PendingRequest]
    let failedBelow: [PendingRequest]
    /// The task processed from this one whose step runs next in the same pool job.
    let next: Continuation?
  }

  /// Lock held: ends a task with its image or error: its requests (returned), the memory
  /// cache, and the tasks processed from it (queued, or failed with it; on a pool thread,
  /// `onPool`, one of them continues in the same job). nil when the task was dropped
  /// meanwhile.
  func finishLocked(_ decode: DecodeTask, _ result: Result<Image, LoadError>, _ input: DecodeInput,
                    onPool: Bool) -> TaskResults? {
    guard decodes[decode.key] === decode else { return nil }
    let finished = finish(decode)
    if case .success(let image) = result, finished.contains(where: \.usesMemoryCache) {
      memoryCache.insert(image, for: decode.variant)
    }
    let (failedBelow, next) = handOn(decode, result, input, continuing: onPool, shared: !finished.isEmpty)
    return TaskResults(result: result, finished: finished, failedBelow: failedBelow, next: next)
  }

  /// Not holding the lock: stores a finished task's image as a disk variant and posts the
  /// results `finishLocked` collected.
  func report(_ done: TaskResults, _ decode: DecodeTask, _ input: DecodeInput) {
    // An incomplete image (its data ended early) stays out of the disk tier: a variant
    // hit would hand it on without the flag's cause ever being looked at again.
    if case .success(let image) = done.result, !image.isIncomplete, !done.finished.isEmpty, let origin = input.origin {
      storeVariant(image, decode.variant, origin)
    }
    let outcome: Outcome
    switch done.result {
    case .success(let image): outcome = .success(image, input.source, httpStatus: input.data.httpStatus)
    case .failure(var error):
      if error.httpStatus == 0 { error.httpStatus = input.data.httpStatus }
      outcome = .failure(error)
    }
    complete(done.finished, with: outcome)
    if case .failure = outcome { complete(done.failedBelow, with: outcome) }
  }

  /// Offers a decoded image to the disk tier as a variant of its original (not holding the
  /// lock: a tier may report the write at once).
  private func storeVariant(_ image: Image, _ variant: ImageVariant, _ origin: OriginalRecord) {
    diskTier?.storeVariant(image, of: variant, origin: origin) { [weak self] written in
      guard let self else { return }
      self.lock.withLock {
        self.counters.variantsStored += 1
        self.counters.variantBytesStored += written
      }
    }
  }

  func complete(_ requests: [PendingRequest], with outcome: Outcome) {
    if case .failure(let error) = outcome, error.status != .cancelled, !requests.isEmpty {
      lock.withLock { counters.failed += requests.count }
    }
    for pending in requests { pending.queue.complete(pending.delivery, with: outcome) }
  }
}
