/// The process task of a chain prefix: a processed variant's task waits on the
/// task of the variant it is made from (`ImageProcessing.parent`: one step shorter, or the
/// same chain before the conversion into the requested format), so requests whose chains
/// share a prefix share the decode and every step of that prefix (Nuke's
/// TaskLoadImage). Intermediate images go to the tasks below, never into the memory cache
/// (which holds what requests asked for); the steps run on the decode pool, a chain nobody
/// else shares in the job of its decode, in place.
extension TaskPool {
  /// Lock held: joins `decode` to the task of `parentVariant`, creating and starting it
  /// when it is the first; a parent in the memory cache (an earlier request's result) is
  /// processed at once.
  func attachParent(_ decode: VariantTask, _ parentVariant: ImageVariant, _ source: DownloadSource,
                    after lookup: PrefixLookup? = nil) {
    let key = VariantTaskKey(variant: parentVariant, policy: decode.key.policy)
    if key.policy != .reload, let image = memoryCache.image(for: parentVariant) {
      var input = DecodeInput(data: DownloadedData(bytes: [], httpStatus: 0), source: .memory, origin: nil)
      input.metrics.tier = .memory
      input.metrics.workStartedAt = decode.metrics.workStartedAt
      scheduleProcessing(decode, image, input)
      return
    }
    if decodes[key] == nil, let lookup, let found = lookup.found, found.variant == parentVariant {
      // Found on disk by the lookup of a task processed from it: processed at once, as a
      // task of its own would hand on its variant hit.
      counters.diskHits += 1
      counters.variantHits += 1
      var input = DecodeInput(data: DownloadedData(bytes: [], httpStatus: 0), source: .disk, origin: nil)
      input.metrics.diskReadMicroseconds = lookup.diskReadMicroseconds
      input.metrics.tier = .diskVariant
      input.metrics.workStartedAt = decode.metrics.workStartedAt
      scheduleProcessing(decode, found.image, input)
      return
    }
    decode.phase = .waitingForParent(decodes[key] ?? VariantTask(key: key))
    guard case .waitingForParent(let parent) = decode.phase else { return }
    parent.children[decode.key] = decode
    if decodes[key] === parent {
      if decode.priority > parent.priority { rank(parent, at: decode.priority) }
      hurry(parent, source)
      return
    }
    parent.priority = decode.priority
    parent.metrics.workStartedAt = decode.metrics.workStartedAt
    decodes[key] = parent
    start(parent, source, after: lookup)
  }

  /// A processed task whose step runs in the pool job that made its parent's image, once
  /// that job reported: no job of its own, no wait behind the queue, the image still hot.
  /// `owned`: the image reached no request, cache or other task, so the step takes its
  /// buffers and works in place instead of on a copy.
  struct Continuation {
    let decode: VariantTask
    let image: Image
    let owned: Bool
    let flag: CancelFlag
  }

  /// Lock held: hands a finished task's image to the tasks processed from it, or its
  /// failure (returns their requests, and those of the tasks below them, for the caller to
  /// fail). On a pool thread (`continuing`) the most urgent of them continues in the same
  /// job (`next`), the others are queued; `shared`: the image went to requests of its own.
  func handOn(_ decode: VariantTask, _ result: Result<Image, LoadError>, _ input: DecodeInput,
              continuing: Bool, shared: Bool) -> (failed: [PendingRequest], next: Continuation?) {
    let children = decode.children.values.filter { decodes[$0.key] === $0 }
    decode.children.removeAll()
    guard case .success(let image) = result else { return (children.flatMap { abandon($0) }, nil) }
    let first = continuing ? children.max { $0.priority < $1.priority } : nil
    var next: Continuation?
    for child in children {
      guard child === first else {
        scheduleProcessing(child, image, input)
        continue
      }
      let flag = CancelFlag()
      child.cancel = flag
      child.phase = .continuing
      child.inputMetrics = input.metrics
      next = Continuation(decode: child, image: image, owned: !shared && children.count == 1, flag: flag)
    }
    return ([], next)
  }

  /// Lock held: queues the step that makes `decode`'s image from its parent's `image`.
  private func scheduleProcessing(_ decode: VariantTask, _ image: Image, _ input: DecodeInput) {
    let flag = CancelFlag()
    decode.cancel = flag
    let job = Continuation(decode: decode, image: image, owned: false, flag: flag)
    decode.inputMetrics = input.metrics
    decode.phase = .queued(decodePool.submit(priority: decode.priority, cost: image.totalByteCount,
                                                     wakingAfter: lock) {
      [weak self] in
      var measured = input
      guard let self, let done = self.runProcessing(job, &measured) else { return }
      self.proceed(done, decode, measured)
    })
  }

  /// Runs one task's step (its time added to `input`'s metrics); nil when the task was
  /// dropped meanwhile.
  private func runProcessing(_ job: Continuation, _ input: inout DecodeInput) -> TaskResults? {
    let decode = job.decode
    let wanted = lock.withLock { decodes[decode.key] === decode && !decode.isUnused }
    guard wanted, let (_, step) = ImageProcessing.parent(of: decode.variant) else { return nil }
    let started = monotonicNanoseconds()
    let result = ImageProcessing.apply(step, to: job.image, owned: job.owned, cancel: job.flag,
                                       maxPixels: configuration.maxPixels)
    input.metrics.processMicroseconds += microseconds(from: started, to: monotonicNanoseconds())
    let measured = input
    return lock.withLock {
      if case .process = step { counters.processorRuns += 1 }
      if decode.cancel === job.flag { decode.cancel = nil }
      return finishLocked(decode, result, measured, onPool: true)
    }
  }

  /// Not holding the lock, on a pool thread: reports a finished task, then runs the steps
  /// handed on to this job down the chain, reporting each.
  func proceed(_ done: TaskResults, _ decode: VariantTask, _ input: DecodeInput) {
    report(done, decode, input)
    var input = input
    var next = done.next
    while let job = next {
      next = nil
      guard let done = runProcessing(job, &input) else { return }
      report(done, job.decode, input)
      next = done.next
    }
  }

  /// Lock held: the download `decode` waits on, directly or through the tasks it is
  /// processed from (a table's startNow and postpone reach a processed row's transfer).
  func download(under decode: VariantTask) -> OriginalDataTask? {
    switch decode.phase {
    case .waitingForBytes(let download): return download
    case .waitingForParent(let parent): return download(under: parent)
    default: return nil
    }
  }

  /// Every request waiting on `decode`, directly or through the tasks processed from it.
  func requestsBelow(_ decode: VariantTask) -> [PendingRequest] {
    Array(decode.requests.values) + decode.children.values.flatMap { requestsBelow($0) }
  }

  /// Every task in `decode`'s subtree (itself included) with the requests of each that
  /// pass `filter`, for previews.
  func tasksBelow(_ decode: VariantTask, _ filter: (PendingRequest) -> Bool) -> [(ImageVariant, [PendingRequest])] {
    let own = decode.requests.values.filter(filter)
    return (own.isEmpty ? [] : [(decode.variant, Array(own))])
      + decode.children.values.flatMap { tasksBelow($0, filter) }
  }
}
