/// The task of one original's bytes (keyed by `CacheKey` and policy): the stored original
/// on disk, else a fetch (a revalidation when the stored copy is stale), shared by every
/// variant task that decodes them. Lock held in every function here unless it says
/// otherwise (TaskPool.swift).
/// The bytes of one cache key (from disk or the network), shared by every decode that
/// needs them. The request that starts it decides URL and headers (requests merged into
/// it have the same cache key, so the same headers unless the caller gave one key).
final class OriginalDataTask {
  enum Phase {
    /// Not started, or over.
    case idle
    /// Asking the disk tier, before any transfer.
    case lookingUp(DiskJob)
    /// On the network; conditional on `revalidating` when set (a stale stored copy).
    case transferring(TransferID, revalidating: StoredOriginal?)
  }

  let key: OriginalDataKey
  let url: RequestURL
  let headers: [String]
  var decodes: [ImageVariant: VariantTask] = [:]
  var priority: Int32 = 0
  var phase = Phase.idle
  /// Set by the request that started it (a table during a fling).
  var startDelayMilliseconds = 0
  /// Its transfer's previews and early end (PreviewTask.swift).
  let preview = PreviewTask()
  /// What its stages measured so far, and when the disk lookup under way began.
  var metrics = RequestMetrics()
  var stageStartedAt: UInt64 = 0
  /// Its decode fed as the bytes arrive (StreamTask.swift): the progress reports counted
  /// until one may start, then its feed. One field: thousands of downloads may wait
  /// (Tests/e2e/exhaust.c's budget).
  private var streamState = StreamState.counting(0)
  private enum StreamState {
    case counting(UInt8)
    case feeding(StreamFeed)
  }

  /// The feed of its decode, if one is under way; once it is over, none starts again.
  var stream: StreamFeed? {
    get {
      if case .feeding(let feed) = streamState { return feed }
      return nil
    }
    set { streamState = newValue.map(StreamState.feeding) ?? .counting(2) }
  }

  /// Counts a progress report; true at the second (the transfer lasted a progress
  /// interval: a feed may start).
  func countProgressReport() -> Bool {
    guard case .counting(let reports) = streamState, reports < 2 else { return false }
    streamState = .counting(reports + 1)
    return reports + 1 == 2
  }

  init(key: OriginalDataKey, url: RequestURL, headers: [String]) {
    self.key = key
    self.url = url
    self.headers = headers
  }

  var transfer: TransferID? {
    if case .transferring(let id, _) = phase { return id }
    return nil
  }

  var revalidating: StoredOriginal? {
    if case .transferring(_, let stored) = phase { return stored }
    return nil
  }
}

extension TaskPool {
  /// Joins a decode task to the download of its bytes, starting the download (disk lookup,
  /// then network) when it is the first.
  func attachDownload(_ decode: VariantTask, _ source: DownloadSource) {
    let downloadKey = OriginalDataKey(cacheKey: decode.variant.cacheKey, policy: decode.key.policy)
    if let download = downloads[downloadKey] {
      download.decodes[decode.variant] = decode
      decode.phase = .waitingForBytes(download)
      for pending in decode.requests.values { pending.joined = true }
      counters.coalesced += 1
      rerank(download)
      startSooner(download, startDelayMilliseconds: source.startDelayMilliseconds)
      return
    }
    let download = OriginalDataTask(key: downloadKey, url: source.url, headers: source.headers)
    download.metrics.workStartedAt = decode.metrics.workStartedAt
    download.startDelayMilliseconds = source.startDelayMilliseconds
    download.decodes[decode.variant] = decode
    download.priority = decode.priority
    decode.phase = .waitingForBytes(download)
    downloads[downloadKey] = download
    if let diskTier, downloadKey.policy != .reload {
      download.stageStartedAt = monotonicNanoseconds()
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
  func startSooner(_ download: OriginalDataTask, startDelayMilliseconds: Int) {
    guard startDelayMilliseconds == 0, download.startDelayMilliseconds > 0 else { return }
    download.startDelayMilliseconds = 0
    if let transfer = download.transfer { dataLoader.startNow(transfer) }
  }

  /// Lock held: ends a download and every request waiting on it; returns those requests,
  /// whose results the caller posts after unlocking.
  func abandon(_ download: OriginalDataTask) -> [PendingRequest] {
    if downloads[download.key] === download { downloads.removeValue(forKey: download.key) }
    download.phase = .idle
    dropStream(download)
    let failed = download.decodes.values.flatMap { abandon($0) }
    download.decodes.removeAll()
    return failed
  }

  func rerank(_ download: OriginalDataTask) {
    let priority = download.decodes.values.lazy.map(\.priority).max() ?? Int32.min
    guard priority != download.priority else { return }
    download.priority = priority
    switch download.phase {
    case .transferring(let transfer, _): dataLoader.setPriority(transfer, priority)
    case .lookingUp(let job): diskTier?.setPriority(job, priority)
    case .idle: break
    }
  }

  func startTransfer(_ download: OriginalDataTask, revalidating stored: StoredOriginal?) {
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

  /// The disk answered: decode its bytes, revalidate them, or go to the network.
  func diskLookupFinished(_ download: OriginalDataTask, _ answer: DiskAnswer) {
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
  func downloadFinished(_ download: OriginalDataTask, _ result: Result<DownloadedData, LoadError>) {
    let lastByteAt = monotonicNanoseconds()
    var failed: [PendingRequest] = []
    var failure: LoadError?
    let taken: (stored: StoredOriginal?, endedEarly: Int)? = lock.withLock {
      // A download cancelled while finishing is no longer registered: drop its result.
      // One that ended early left the table on purpose.
      guard downloads[download.key] === download || download.preview.endedEarly > 0 else { return nil }
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
        download.metrics.lastByteCame(at: lastByteAt)
        // A transfer ended early carries the first scans only: decoded whole, as before.
        if response.endedEarly { dropStream(download) }
        return (stored, download.preview.endedEarly)
      }
    }
    if let failure { complete(failed, with: .failure(failure), metrics: download.metrics) }
    guard let taken, case .success(var response) = result else { return }
    if response.endedEarly {
      response.bytes = PreviewTask.bytesToDecode(response.bytes, endedEarly: taken.endedEarly, decoder: decoder)
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
      default:
        download.metrics.bytesReceived = 0
        download.metrics.lastByteCame(at: 0)
      }
      decodeAll(download, DecodeInput(data: received.data, source: received.source, origin: received.origin))
    }
  }

  /// Hands the bytes to one decode job per variant of the download.
  func decodeAll(_ download: OriginalDataTask, _ input: DecodeInput) {
    var input = input
    input.metrics = download.metrics
    download.phase = .idle
    let streamed = streamBodyArrived(download, input)
    for decode in download.decodes.values where decode !== streamed { scheduleDecode(decode, input) }
    download.decodes.removeAll()
  }
}
