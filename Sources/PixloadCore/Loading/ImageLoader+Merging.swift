/// The coordinator's merge graph (lock held): a request joins the task of its variant, a
/// task joins the download of its bytes or the task of the variant it is processed from;
/// the last requester leaving releases the work below it; merged work runs at the highest
/// priority among those left (Nuke's TaskPool). The tasks and their phases are in
/// `LoaderTasks.swift`.
extension ImageLoader {
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
  private func measuredBelow(_ decode: DecodeTask) -> RequestMetrics {
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
  func attach(_ pending: PendingRequest, to key: DecodeKey, source: DownloadSource) {
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
  /// `lookup`: what the disk job of a task processed from this one said (a task it missed
  /// goes straight to its input).
  func start(_ decode: DecodeTask, _ source: DownloadSource, after lookup: PrefixLookup? = nil) {
    let key = decode.key
    if let lookup, lookup.missed.contains(key.variant) {
      attachInput(decode, source, after: lookup)
      return
    }
    if let diskTier, key.policy != .reload {
      // A decoded variant on disk needs neither the encoded bytes nor a decode, and one of a
      // prefix of its chain saves the decode and those steps: look for them all first, in
      // one job (longest first); the download joins in only on a miss.
      let variants = ([key.variant] + ImageProcessing.ancestors(of: key.variant)).filter(diskTier.keepsVariant)
      if !variants.isEmpty {
        decode.stageStartedAt = monotonicNanoseconds()
        let job = diskTier.lookUpVariants(variants, policy: key.policy, priority: decode.priority) {
          [weak self, weak decode] found in
          guard let self, let decode else { return }
          self.variantLookupFinished(decode, variants, found)
        }
        decode.phase = .lookingUpVariant(job, source: source)
        return
      }
    }
    attachInput(decode, source, after: lookup)
  }

  /// Joins a task to what it is made from: the image of its parent variant when it is a
  /// processed one (`attachParent`), else the download of its bytes.
  func attachInput(_ decode: DecodeTask, _ source: DownloadSource, after lookup: PrefixLookup? = nil) {
    if let (parent, _) = ImageProcessing.parent(of: decode.variant) {
      attachParent(decode, parent, source, after: lookup)
    } else {
      // The decoded variant's lookup was the job of a task processed from it: the time
      // on disk counts for the decode as its own lookup's would.
      if let lookup, lookup.asker != decode.key { decode.metrics.diskReadMicroseconds += lookup.diskReadMicroseconds }
      attachDownload(decode, source)
    }
  }

  /// Joins a decode task to the download of its bytes, starting the download (disk lookup,
  /// then network) when it is the first.
  func attachDownload(_ decode: DecodeTask, _ source: DownloadSource) {
    let downloadKey = DownloadKey(cacheKey: decode.variant.cacheKey, policy: decode.key.policy)
    if let download = downloads[downloadKey] {
      download.decodes[decode.variant] = decode
      decode.phase = .waitingForBytes(download)
      for pending in decode.requests.values { pending.joined = true }
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
  func startSooner(_ download: DownloadTask, startDelayMilliseconds: Int) {
    guard startDelayMilliseconds == 0, download.startDelayMilliseconds > 0 else { return }
    download.startDelayMilliseconds = 0
    if let transfer = download.transfer { dataLoader.startNow(transfer) }
  }

  /// Lock held: ends a download and every request waiting on it; returns those requests,
  /// whose results the caller posts after unlocking.
  func abandon(_ download: DownloadTask) -> [PendingRequest] {
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

  func rerank(_ download: DownloadTask) {
    let priority = download.decodes.values.lazy.map(\.priority).max() ?? Int32.min
    guard priority != download.priority else { return }
    download.priority = priority
    switch download.phase {
    case .transferring(let transfer, _): dataLoader.setPriority(transfer, priority)
    case .lookingUp(let job): diskTier?.setPriority(job, priority)
    case .idle: break
    }
  }
}
