/// The coordinator and its stages: handing work to the disk tier, the network and the
/// decode pool, and what it does with each stage's answer (library threads): whom a result
/// goes to, what the memory cache and the disk tier keep, which work starts next.
extension ImageLoader {
  func startTransfer(_ download: DownloadTask, revalidating stored: StoredOriginal?) {
    let id = dataLoader.start(
      url: download.url, headers: download.headers, revalidating: stored?.validators,
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

  /// Hands the bytes to one decode job per variant of the download.
  func decodeAll(_ download: DownloadTask, _ input: DecodeInput) {
    var input = input
    input.metrics = download.metrics
    download.phase = .idle
    for decode in download.decodes.values { scheduleDecode(decode, input) }
    download.decodes.removeAll()
  }

  /// Queues the decode on the pool. Cheapest first among equal priorities: the encoded
  /// size stands for the decode's cost (entropy decoding and inflating dominate a
  /// thumbnail's decode).
  func scheduleDecode(_ decode: DecodeTask, _ input: DecodeInput) {
    decode.inputMetrics = input.metrics
    decode.phase = .queued(decodePool.submit(priority: decode.priority, cost: input.data.bytes.count) {
      [weak self, decode] in
      self?.runDecode(decode, input)
    })
  }



  /// The variant lookup answered: a servable variant is the result of every requester,
  /// with no download and no decode; one of a prefix of its chain is processed from;
  /// otherwise the task waits for its input as usual, the variants looked up not looked up
  /// again.
  func variantLookupFinished(_ decode: DecodeTask, _ variants: [ImageVariant], _ found: VariantFound?) {
    var input = DecodeInput(data: DownloadedData(bytes: [], httpStatus: 0), source: .disk, origin: nil)
    let done: TaskResults? = lock.withLock {
      guard decodes[decode.key] === decode, case .lookingUpVariant(_, let source) = decode.phase else { return nil }
      let spent = microseconds(from: decode.stageStartedAt, to: monotonicNanoseconds())
      decode.metrics.diskReadMicroseconds += spent
      guard let found, variants[found.index] == decode.variant else {
        let missed = variants[..<(found?.index ?? variants.count)]
        attachInput(decode, source, after: PrefixLookup(asker: decode.key, missed: Set(missed),
                                                        found: found.map { (variants[$0.index], $0.image) },
                                                        diskReadMicroseconds: spent))
        return nil
      }
      counters.diskHits += 1
      counters.variantHits += 1
      input.metrics = decode.metrics
      input.metrics.tier = .diskVariant
      return finishLocked(decode, .success(found.image), input, onPool: false)
    }
    if let done { report(done, decode, input) }
  }

  /// The disk answered: decode its bytes, revalidate them, or go to the network.
  func diskLookupFinished(_ download: DownloadTask, _ answer: DiskAnswer) {
    var failed: [PendingRequest] = []
    lock.withLock {
      guard downloads[download.key] === download else { return }
      download.metrics.diskReadMicroseconds += microseconds(from: download.stageStartedAt, to: monotonicNanoseconds())
      switch answer {
      case .fresh(let bytes, let origin):
        counters.diskHits += 1
        downloads.removeValue(forKey: download.key)
        download.metrics.tier = .disk
        decodeAll(download, DecodeInput(data: DownloadedData(bytes: bytes, httpStatus: 0), source: .disk, origin: origin))
      case .revalidate(let stored): startTransfer(download, revalidating: stored)
      case .miss: startTransfer(download, revalidating: nil)
      case .notCached: failed = abandon(download)
      }
    }
    complete(failed, with: .failure(LoadError(.notCached, "not in the cache (cache-only request)")),
             metrics: download.metrics)
  }

  /// A transfer ended. Its bytes go to the disk tier (`DiskTier.received`: what to keep,
  /// a 304's stored bytes) without the loader's lock, between the two sections that take
  /// the download off the table and hand the bytes to its decodes.
  func downloadFinished(_ download: DownloadTask, _ result: Result<DownloadedData, LoadError>) {
    var failed: [PendingRequest] = []
    var failure: LoadError?
    let taken: (stored: StoredOriginal?, endedEarly: Int)? = lock.withLock {
      // A download cancelled while finishing is no longer registered: drop its result.
      // One that ended early left the table on purpose.
      guard downloads[download.key] === download || download.endedEarly > 0 else { return nil }
      let stored = download.revalidating
      switch result {
      case .failure(let error):
        failure = error
        download.metrics.take(error.timing)
        failed = abandon(download)
        return nil
      case .success(let response):
        if downloads[download.key] === download { downloads.removeValue(forKey: download.key) }
        // Over: a decode that leaves meanwhile cancels nothing below it.
        download.phase = .idle
        download.metrics.take(response.timing)
        return (stored, download.endedEarly)
      }
    }
    if let failure { complete(failed, with: .failure(failure), metrics: download.metrics) }
    guard let taken, case .success(var response) = result else { return }
    if response.endedEarly, taken.endedEarly > 0, taken.endedEarly <= response.bytes.count {
      // The first scans, as a file: what the thumbnails decode from.
      response.bytes = decoder.scansPrefix(response.bytes, length: taken.endedEarly)
    }
    let received = diskTier?.received(response, for: download.key.cacheKey, url: download.url,
                                      revalidating: taken.stored)
      ?? ReceivedBytes(data: response, source: response.source, origin: nil)
    lock.withLock {
      guard !closed else { return }
      switch received.source {
      case .revalidated: download.metrics.tier = .revalidated
      case .fetcher: download.metrics.tier = .fetcher
      case .data: download.metrics.tier = .data
      default: download.metrics.tier = download.url.isFile ? .file : .network
      }
      // One rule for bytes_received, network_fetches and bytes_downloaded (pixload.h):
      // they count what PXL_SOURCE_NETWORK names, libcurl's transfers: http(s), and
      // file: URLs as 0.1.0 counted them. A data: URL's and a fetcher's bytes are not.
      switch download.metrics.tier {
      case .network, .file:
        counters.networkFetches += 1
        counters.bytesDownloaded += response.bytes.count
      case .revalidated:
        counters.revalidated += 1
        counters.bytesDownloaded += response.bytes.count
      default: download.metrics.bytesReceived = 0
      }
      decodeAll(download, DecodeInput(data: received.data, source: received.source, origin: received.origin))
    }
  }

  func runDecode(_ decode: DecodeTask, _ input: DecodeInput) {
    // A host that stopped draining: when every requester's queue is full of undrained
    // images, the decode (which would add another) waits with its bytes until one drains.
    enum Start { case run, held, abandoned }
    // Raised by `release` when the last requester leaves, or by `close`: a codec polls it.
    let flag = CancelFlag()
    let start: Start = lock.withLock {
      // Every requester left while the job waited: nothing to decode for.
      guard decodes[decode.key] === decode, !decode.isUnused else { return .abandoned }
      var queues: [ObjectIdentifier: CompletionQueue] = [:]
      for pending in decode.requests.values { queues[ObjectIdentifier(pending.queue)] = pending.queue }
      // Every queue is asked (each registers this loader to hear when it drains). A decode
      // only processed variants wait for is not held (their requesters' queues decide).
      let full = queues.values.map { $0.isFull(notifying: self) }
      guard !queues.isEmpty, !full.contains(false) else {
        decode.cancel = flag
        return .run
      }
      decode.phase = .held(input)
      return .held
    }
    if start != .run { return }
    let decodeStart = monotonicNanoseconds()
    let result = decoder.decode(input.data.bytes, variant: decode.variant, maxPixels: configuration.maxPixels,
                                cancel: flag)
    var metrics = input.metrics
    metrics.decodeMicroseconds = microseconds(from: decodeStart, to: monotonicNanoseconds())
    metrics.diskReadMicroseconds += decode.metrics.diskReadMicroseconds
    if case .success(let image) = result { metrics.decodedBytes = UInt64(image.totalByteCount) }
    if case .success(let image) = result, let warning = image.warning {
      Self.log(configuration, .warning, "\(decode.variant.cacheKey): \(warning)")
    }
    var measured = input
    measured.metrics = metrics
    let done: TaskResults? = lock.withLock {
      if decode.cancel === flag { decode.cancel = nil }
      counters.decodes += 1
      return finishLocked(decode, result, measured, onPool: true)
    }
    if let done { proceed(done, decode, measured) }
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
    complete(done.finished, with: outcome, metrics: input.metrics)
    if case .failure = outcome { complete(done.failedBelow, with: outcome, metrics: input.metrics) }
  }

  /// Offers a decoded image to the disk tier as a variant of its original (not holding the
  /// lock: a tier may report the write at once).
  func storeVariant(_ image: Image, _ variant: ImageVariant, _ origin: OriginalRecord) {
    diskTier?.storeVariant(image, of: variant, origin: origin) { [weak self] written in
      guard let self else { return }
      self.lock.withLock {
        self.counters.variantsStored += 1
        self.counters.variantBytesStored += written
      }
    }
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
