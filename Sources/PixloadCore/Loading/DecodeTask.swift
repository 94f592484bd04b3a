/// The decode of a variant task's bytes on the decode pool, one job per variant decoded
/// from an original: cheapest first among equal priorities, held back while every
/// requester's queue is full of undrained images, cancelled through its flag when its last
/// requester leaves. Lock held where a function says so (TaskPool.swift).
/// The bytes a decode runs on, where they came from, and what a decoded variant stored on
/// disk records of them (nil: none is stored).
struct DecodeInput {
  let data: DownloadedData
  let source: ImageSource
  let origin: OriginalRecord?
  /// What fetching the bytes cost (the download's request metrics).
  var metrics = RequestMetrics()
}


extension TaskPool {
  /// Queues the decode on the pool. Cheapest first among equal priorities: the encoded
  /// size stands for the decode's cost (entropy decoding and inflating dominate a
  /// thumbnail's decode).
  func scheduleDecode(_ decode: VariantTask, _ input: DecodeInput) {
    decode.inputMetrics = input.metrics
    decode.phase = .queued(decodePool.submit(priority: decode.priority, cost: input.data.bytes.count,
                                                     wakingAfter: lock) {
      [weak self, decode] in
      self?.runDecode(decode, input)
    })
  }

  func runDecode(_ decode: VariantTask, _ input: DecodeInput) {
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
    _ = IsolatedCodec.takeWorkerTime()
    let result = decoder.decode(input.data.bytes, variant: decode.variant, maxPixels: configuration.maxPixels,
                                cancel: flag)
    var metrics = input.metrics
    metrics.decodeMicroseconds = microseconds(from: decodeStart, to: monotonicNanoseconds())
    if let workerNanoseconds = IsolatedCodec.takeWorkerTime() {
      metrics.isolated = true
      metrics.workerMicroseconds = workerNanoseconds / 1000
    }
    if case .success(let image) = result { metrics.decodedBytes = UInt64(image.totalByteCount) }
    finishDecode(decode, result, input, metrics: metrics, flag: flag)
  }

  /// Not holding the lock, on a pool thread: a decode's result (its figures in `metrics`)
  /// to its requests and the tasks processed from it.
  func finishDecode(_ decode: VariantTask, _ result: Result<Image, LoadError>, _ input: DecodeInput,
                    metrics: RequestMetrics, flag: CancelFlag) {
    var metrics = metrics
    metrics.diskReadMicroseconds += decode.metrics.diskReadMicroseconds
    // An animation player's first frame: it decodes the later ones from these bytes.
    if case .success(let image) = result, decode.variant.keepsSource { image.encodedSource = input.data.bytes }
    if case .success(let image) = result, let warning = image.warning {
      ImageLoader.log(configuration, .warning, "\(decode.variant.cacheKey): \(warning)")
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
}

/// A variant task finished (a decode, a step, a variant found on disk): its image or
/// error to its requests, the memory cache, the disk tier and the tasks processed from it.
extension TaskPool {
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
  func finishLocked(_ decode: VariantTask, _ result: Result<Image, LoadError>, _ input: DecodeInput,
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
  func report(_ done: TaskResults, _ decode: VariantTask, _ input: DecodeInput) {
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
}
