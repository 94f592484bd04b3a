/// Decoding while downloading: the decode of a download's one variant fed as its bytes
/// arrive (`StreamingDecode`), so that what is left after the last byte is the decode of
/// the last chunk, not of the whole body (request metrics: after_last_byte_us). The network
/// thread only appends the new bytes to the feed's inbox and, when no job of the feed is
/// queued or running, queues one on the decode pool; that job feeds the decoder until the
/// inbox is empty. When the body is in, the decode's result goes out as a whole decode's
/// would (`finishLocked`); a file the stream does not take is decoded whole then.
///
/// Only where it is simple and pays: a transfer (not a revalidation) that lasted past its
/// first progress report, of one variant, that the real decoder decodes in this process
/// (a JPEG, PNG or still WebP: `ImageDecoder.streamingDecode`). Everything else is unchanged. Lock held in
/// every function here unless it says otherwise (TaskPool.swift).
final class StreamFeed {
  let decoder: StreamingDecode
  let decode: VariantTask
  /// Body bytes taken into `inbox` so far.
  var received = 0
  /// Bytes the decoder has not been given yet.
  var inbox: [UInt8] = []
  /// The body is in: `input` is what a whole decode would have had.
  var input: DecodeInput?
  /// A pool job of this feed is queued or running (one at a time), and whether it is in
  /// the decoder now (then it frees the decoder itself if the decode is dropped meanwhile).
  var jobPending = false
  var running = false
  var result: Result<Image, LoadError>?
  var declined = false
  /// The decoder's time after the body was in (request metrics: decode_us). Its time
  /// before ran during the transfer and is inside transfer_us: counting it again would
  /// make the stages add up to more than the request took (pxl_metrics.total_us).
  var decodeNanoseconds: UInt64 = 0
  /// When the body was in (monotonic ns; 0 before).
  var bodyInAt: UInt64 = 0

  init(decoder: StreamingDecode, decode: VariantTask) {
    self.decoder = decoder
    self.decode = decode
  }
}

extension TaskPool {
  /// Not holding the lock, on the network thread (a progress report): starts the feed of
  /// a download that qualifies and hands it the new bytes of `body`.
  func streamProgress(_ download: OriginalDataTask, body: [UInt8]) {
    var fresh: StreamingDecode?
    // The second report: the transfer has lasted a progress interval (a fast one is done
    // before, and is decoded whole as before).
    let variant: ImageVariant? = lock.withLock {
      download.countProgressReport() ? streamable(download)?.variant : nil
    }
    if let variant, let decoder = decoder as? ImageDecoder {
      fresh = decoder.streamingDecode(body, variant: variant, maxPixels: configuration.maxPixels, cancel: CancelFlag())
    }
    let submit: StreamFeed? = lock.withLock {
      if let fresh, let decode = streamable(download), decode.variant == fresh.variant {
        let feed = StreamFeed(decoder: fresh, decode: decode)
        download.stream = feed
        // Raised by `release` when the last requester leaves: libjpeg stops between strips.
        decode.cancel = fresh.cancel
      }
      guard let feed = download.stream, body.count > feed.received else { return nil }
      feed.inbox.append(contentsOf: body[feed.received...])
      feed.received = body.count
      if feed.jobPending { return nil }
      feed.jobPending = true
      return feed
    }
    if let submit { submitStream(submit) }
  }

  /// The download's one decode, when a feed may start for it: registered, not a
  /// revalidation, one variant waiting for these bytes.
  private func streamable(_ download: OriginalDataTask) -> VariantTask? {
    guard downloads[download.key] === download, download.revalidating == nil, download.stream == nil,
          download.preview.endedEarly == 0, download.decodes.count == 1, let decode = download.decodes.values.first,
          decodes[decode.key] === decode, decode.download === download, !decode.isUnused else { return nil }
    return decode
  }

  /// The body is in (`decodeAll`): the feed takes the rest of it and finishes in a job of
  /// its own; returns the decode it takes off the download's list.
  func streamBodyArrived(_ download: OriginalDataTask, _ input: DecodeInput) -> VariantTask? {
    guard let feed = download.stream else { return nil }
    download.stream = nil
    guard !feed.declined, input.data.bytes.count >= feed.received else {
      dropStream(feed)
      return nil
    }
    if feed.result == nil && !feed.declined {
      feed.inbox.append(contentsOf: input.data.bytes[feed.received...])
      feed.received = input.data.bytes.count
    }
    feed.input = input
    feed.bodyInAt = monotonicNanoseconds()
    feed.decode.inputMetrics = input.metrics
    if !feed.jobPending {
      feed.jobPending = true
      submitStream(feed, lockHeld: true)
    }
    return feed.decode
  }

  /// A download that failed or ended early: its feed's decoder stops and is freed (now,
  /// unless a job is in it: then when that job returns).
  func dropStream(_ download: OriginalDataTask) {
    guard let feed = download.stream else { return }
    download.stream = nil
    dropStream(feed)
  }

  private func dropStream(_ feed: StreamFeed) {
    feed.declined = true
    feed.input = nil
    feed.inbox = []
    if feed.decode.cancel === feed.decoder.cancel { feed.decode.cancel = nil }
    feed.decoder.cancel.raise()
    if !feed.running { feed.decoder.free() }
  }

  /// Not holding the lock unless `lockHeld` (then its thread is woken once it is released).
  private func submitStream(_ feed: StreamFeed, lockHeld: Bool = false) {
    _ = decodePool.submit(priority: feed.decode.priority, wakingAfter: lockHeld ? lock : nil) {
      [weak self] in self?.runStream(feed)
    }
  }

  /// Whether anyone still waits for the feed's decode.
  private func streamWanted(_ feed: StreamFeed) -> Bool {
    decodes[feed.decode.key] === feed.decode && !feed.decode.isUnused && !feed.decoder.cancel.isRaised
  }

  /// The feed's pool job: gives the decoder what the inbox holds until it is empty, then,
  /// once the body is in, delivers the result (or decodes the body whole when the stream
  /// declined it).
  private func runStream(_ feed: StreamFeed) {
    while true {
      let taken: (chunk: [UInt8], atEnd: Bool)? = lock.withLock {
        guard streamWanted(feed), feed.result == nil, !feed.declined,
              !feed.inbox.isEmpty || feed.input != nil else { return nil }
        let chunk = feed.inbox
        feed.inbox = []
        feed.running = true
        return (chunk, feed.input != nil)
      }
      guard let taken else { break }
      let started = monotonicNanoseconds()
      let step = taken.chunk.withUnsafeBufferPointer { feed.decoder.feed($0, atEnd: taken.atEnd) }
      let ended = monotonicNanoseconds()
      let again: Bool = lock.withLock {
        feed.running = false
        if feed.input != nil { feed.decodeNanoseconds += ended - max(started, min(ended, feed.bodyInAt)) }
        switch step {
        case .more: break
        case .done(let result): feed.result = result
        case .declined: feed.declined = true
        }
        if !streamWanted(feed) {
          feed.decoder.free()
          return false
        }
        return feed.result == nil && !feed.declined
      }
      if !again { break }
    }
    finishStream(feed)
  }

  /// Once the body is in and the decoder is over: the result to the decode's requests, or
  /// the whole decode of the body; nothing when nobody waits any more.
  private func finishStream(_ feed: StreamFeed) {
    let decode = feed.decode
    enum Next { case none, deliver(Result<Image, LoadError>, DecodeInput), whole(DecodeInput) }
    let next: Next = lock.withLock {
      defer { feed.jobPending = false }
      guard let input = feed.input, streamWanted(feed) else { return .none }
      if feed.declined {
        feed.input = nil
        if decode.cancel === feed.decoder.cancel { decode.cancel = nil }
        scheduleDecode(decode, input)
        return .none
      }
      guard let result = feed.result else { return .none }
      feed.input = nil
      feed.result = nil
      return .deliver(result, input)
    }
    guard case .deliver(let result, let input) = next else { return }
    var metrics = input.metrics
    metrics.decodeMicroseconds = feed.decodeNanoseconds / 1000
    if case .success(let image) = result { metrics.decodedBytes = UInt64(image.totalByteCount) }
    finishDecode(decode, result, input, metrics: metrics, flag: feed.decoder.cancel)
    // Only now: nothing else touches an over decoder (its body is in, so no drop reaches it).
    feed.decoder.free()
  }
}
