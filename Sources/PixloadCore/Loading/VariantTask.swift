/// The task of one variant (memory and disk variant): shared by every request for it; it
/// looks the variant up on disk (with the variants it is made from, in one job), then waits
/// for its input (the original's bytes, or the image of the variant it is processed from),
/// is decoded or processed, and hands its image to its requests and to the tasks processed
/// from it. Lock held in every function here unless it says otherwise (TaskPool.swift).
final class VariantTask {
  enum Phase {
    /// Not started, or over (finished, abandoned, or its last requester left).
    case idle
    /// Looking for the decoded variant on disk first; `source` starts the download on a miss.
    case lookingUpVariant(DiskJob, source: DownloadSource)
    /// Waiting for the download of its bytes.
    case waitingForBytes(OriginalDataTask)
    /// On the decode pool (queued or running).
    case queued(PriorityWorkPool.Job)
    /// Held back with its bytes: every requester's queue is full of undrained images
    /// (`CompletionQueue.isFull`); scheduled again when one drains.
    case held(DecodeInput)
    /// A processed variant waiting for the image of the variant it is made from
    /// (`ImageProcessing.parent`): the task of that variant lists it in `children`.
    case waitingForParent(VariantTask)
    /// A processed variant whose step runs next on the pool thread that just made its
    /// parent's image, in the same job (`TaskPool.Continuation`).
    case continuing
  }

  let key: VariantTaskKey
  var variant: ImageVariant { key.variant }
  var requests: [UInt64: PendingRequest] = [:]
  var priority: Int32 = 0
  var phase = Phase.idle
  /// The tasks of the variants processed from this one's image (one step each): a task
  /// lives while it has requests or children.
  var children: [VariantTaskKey: VariantTask] = [:]
  /// Raised when the decode or processing step under way is no longer wanted (the last
  /// requester left, or the loader is closing).
  var cancel: CancelFlag?
  /// Its own stages' figures (the variant lookup); the download's come with its input.
  var metrics = RequestMetrics()
  /// Those of its input (the download's, a parent's decode and steps) once it has it: a
  /// request cancelled before its result reports them. Boxed: a task waiting for its bytes
  /// (thousands may) pays a pointer, not the figures (Tests/e2e/exhaust.c's budget).
  var inputMetrics: RequestMetrics? {
    get { inputMetricsBox?.metrics }
    set { inputMetricsBox = newValue.map(MetricsBox.init) }
  }
  private var inputMetricsBox: MetricsBox?
  private final class MetricsBox {
    let metrics: RequestMetrics
    init(_ metrics: RequestMetrics) { self.metrics = metrics }
  }
  /// When the stage under way began (monotonic nanoseconds; request metrics).
  var stageStartedAt: UInt64 = 0

  init(key: VariantTaskKey) { self.key = key }

  var isUnused: Bool { requests.isEmpty && children.isEmpty }

  var download: OriginalDataTask? {
    if case .waitingForBytes(let download) = phase { return download }
    return nil
  }
}

/// What the one disk job of a task's variant lookup said of the variants it is made from
/// (its chain's prefixes): those it missed are not looked up again, the one it found is
/// processed from at once. Handed down the tasks the lookup's task creates.
struct PrefixLookup {
  /// The task that asked (its own metrics have the job's time already).
  let asker: VariantTaskKey
  /// Looked up and not servable.
  let missed: Set<ImageVariant>
  /// The longest prefix found, with its image.
  let found: (variant: ImageVariant, image: Image)?
  let diskReadMicroseconds: UInt64
}

extension TaskPool {
  /// A requester that wants its bytes now joined `decode`: the start delay of the first
  /// one no longer holds (up to the download, through the variants it is processed from).
  func hurry(_ decode: VariantTask, _ source: DownloadSource) {
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
  func start(_ decode: VariantTask, _ source: DownloadSource, after lookup: PrefixLookup? = nil) {
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
  func attachInput(_ decode: VariantTask, _ source: DownloadSource, after lookup: PrefixLookup? = nil) {
    if let (parent, _) = ImageProcessing.parent(of: decode.variant) {
      attachParent(decode, parent, source, after: lookup)
    } else {
      // The decoded variant's lookup was the job of a task processed from it: the time
      // on disk counts for the decode as its own lookup's would.
      if let lookup, lookup.asker != decode.key { decode.metrics.diskReadMicroseconds += lookup.diskReadMicroseconds }
      attachDownload(decode, source)
    }
  }

  /// The variant lookup answered: a servable variant is the result of every requester,
  /// with no download and no decode; one of a prefix of its chain is processed from;
  /// otherwise the task waits for its input as usual, the variants looked up not looked up
  /// again.
  func variantLookupFinished(_ decode: VariantTask, _ variants: [ImageVariant], _ found: VariantFound?) {
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

  /// Lock held: ends a task and the tasks processed from it; returns their requests.
  func abandon(_ decode: VariantTask) -> [PendingRequest] {
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
  func finish(_ decode: VariantTask) -> [PendingRequest] {
    if decodes[decode.key] === decode { decodes.removeValue(forKey: decode.key) }
    decode.phase = .idle
    let all = Array(decode.requests.values)
    for pending in all { pending.decode = nil }
    return all
  }

  /// Lock held: stops a task nobody needs any more (no request, no child), and what it
  /// waits on when it was the last to.
  func release(_ decode: VariantTask) {
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
      // Its decode fed as the bytes arrive stops and frees its state now.
      if download.stream?.decode === decode { dropStream(download) }
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
  func rerank(_ decode: VariantTask) {
    let priority = max(decode.requests.values.lazy.map(\.priority).max() ?? Int32.min,
                       decode.children.values.lazy.map(\.priority).max() ?? Int32.min)
    guard priority != decode.priority else { return }
    rank(decode, at: priority)
  }

  func rank(_ decode: VariantTask, at priority: Int32) {
    decode.priority = priority
    switch decode.phase {
    case .waitingForParent(let parent): if priority > parent.priority { rank(parent, at: priority) } else { rerank(parent) }
    case .queued(let job): decodePool.setPriority(job, priority)
    case .lookingUpVariant(let job, _): diskTier?.setPriority(job, priority)
    case .waitingForBytes(let download): rerank(download)
    case .idle, .held, .continuing: break
    }
  }
}
