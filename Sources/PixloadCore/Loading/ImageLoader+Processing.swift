/// The coordinator's part in processor chains: a processed variant's task waits on the
/// task of the variant it is made from (`ImageProcessing.parent`: one step shorter, or the
/// same chain before the conversion into the requested format), so requests whose chains
/// share a prefix share the decode and every step of that prefix (Nuke's
/// TaskLoadImage). Intermediate images go to the tasks below, never into the memory cache
/// (which holds what requests asked for); the steps run on the decode pool.
extension ImageLoader {
  /// Lock held: joins `decode` to the task of `parentVariant`, creating and starting it
  /// when it is the first; a parent in the memory cache (an earlier request's result) is
  /// processed at once.
  func attachParent(_ decode: DecodeTask, _ parentVariant: ImageVariant, _ source: DownloadSource) {
    let key = DecodeKey(variant: parentVariant, policy: decode.key.policy)
    if key.policy != .reload, let image = memoryCache.image(for: parentVariant) {
      var input = DecodeInput(data: DownloadedData(bytes: [], httpStatus: 0), source: .memory, origin: nil)
      input.metrics.tier = .memory
      scheduleProcessing(decode, image, input)
      return
    }
    decode.phase = .waitingForParent(decodes[key] ?? DecodeTask(key: key))
    guard case .waitingForParent(let parent) = decode.phase else { return }
    parent.children[decode.key] = decode
    if decodes[key] === parent {
      if decode.priority > parent.priority { rank(parent, at: decode.priority) }
      hurry(parent, source)
      return
    }
    parent.priority = decode.priority
    decodes[key] = parent
    start(parent, source)
  }

  /// Lock held: hands a finished task's image to the tasks processed from it (each
  /// queued on the pool), or its failure (returns their requests, and those of the tasks
  /// below them, for the caller to fail).
  func handOn(_ decode: DecodeTask, _ result: Result<Image, LoadError>, _ input: DecodeInput) -> [PendingRequest] {
    let children = decode.children.values
    decode.children.removeAll()
    var failed: [PendingRequest] = []
    for child in children where decodes[child.key] === child {
      switch result {
      case .success(let image): scheduleProcessing(child, image, input)
      case .failure: failed += abandon(child)
      }
    }
    return failed
  }

  /// Lock held: queues the step that makes `decode`'s image from its parent's `image`.
  private func scheduleProcessing(_ decode: DecodeTask, _ image: Image, _ input: DecodeInput) {
    let flag = CancelFlag()
    decode.cancel = flag
    decode.phase = .queued(decodePool.submit(priority: decode.priority, cost: image.totalByteCount) {
      [weak self, decode] in
      self?.runProcessing(decode, image, input, flag)
    })
  }

  private func runProcessing(_ decode: DecodeTask, _ image: Image, _ input: DecodeInput, _ flag: CancelFlag) {
    let wanted = lock.withLock { decodes[decode.key] === decode && !decode.isUnused }
    guard wanted, let (_, step) = ImageProcessing.parent(of: decode.variant) else { return }
    let started = monotonicNanoseconds()
    let result = ImageProcessing.apply(step, to: image, cancel: flag, maxPixels: configuration.maxPixels)
    var measured = input
    measured.metrics.processMicroseconds += microseconds(from: started, to: monotonicNanoseconds())
    let done: TaskResults? = lock.withLock {
      if case .process = step { counters.processorRuns += 1 }
      if decode.cancel === flag { decode.cancel = nil }
      return finishLocked(decode, result, measured)
    }
    if let done { report(done, decode, measured) }
  }

  /// Every request waiting on `decode`, directly or through the tasks processed from it.
  func requestsBelow(_ decode: DecodeTask) -> [PendingRequest] {
    Array(decode.requests.values) + decode.children.values.flatMap { requestsBelow($0) }
  }

  /// Every task in `decode`'s subtree (itself included) with the requests of each that
  /// pass `filter`, for previews.
  func tasksBelow(_ decode: DecodeTask, _ filter: (PendingRequest) -> Bool) -> [(ImageVariant, [PendingRequest])] {
    let own = decode.requests.values.filter(filter)
    return (own.isEmpty ? [] : [(decode.variant, Array(own))])
      + decode.children.values.flatMap { tasksBelow($0, filter) }
  }
}
