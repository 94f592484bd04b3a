/// The merge graph the coordinator keeps under its lock: every accepted request, the one
/// decode of each variant that requests share, and the one download of each cache key that
/// decodes share (Nuke's task pool). Each task's phase is one enum value, so a task is in
/// exactly one state and leaving it drops what that state held.

final class PendingRequest {
  let token: UInt64
  let delivery: Delivery
  let queue: CompletionQueue
  let usesMemoryCache: Bool
  var priority: Int32
  /// The decode task this request waits on; nil once it has a result or was detached.
  var decode: DecodeTask?
  /// It joined a decode or download another request started (request metrics).
  var joined = false

  init(token: UInt64, delivery: Delivery, queue: CompletionQueue, priority: Int32, usesMemoryCache: Bool) {
    self.token = token
    self.delivery = delivery
    self.queue = queue
    self.priority = priority
    self.usesMemoryCache = usesMemoryCache
  }
}

/// What a download is shared by: requests for the same bytes under the same cache policy
/// (a request never fails, or skips the network, because of another requester's policy).
struct DownloadKey: Hashable {
  let cacheKey: CacheKey
  let policy: ImageRequest.CachePolicy
}

/// What a decode is shared by: requests for the same variant under the same cache policy.
struct DecodeKey: Hashable {
  let variant: ImageVariant
  let policy: ImageRequest.CachePolicy
}

/// Where the bytes of a decode come from: what starts its download.
struct DownloadSource {
  let url: RequestURL
  let headers: [String]
  var startDelayMilliseconds: Int
}

/// What the one disk job of a task's variant lookup said of the variants it is made from
/// (its chain's prefixes): those it missed are not looked up again, the one it found is
/// processed from at once. Handed down the tasks the lookup's task creates.
struct PrefixLookup {
  /// The task that asked (its own metrics have the job's time already).
  let asker: DecodeKey
  /// Looked up and not servable.
  let missed: Set<ImageVariant>
  /// The longest prefix found, with its image.
  let found: (variant: ImageVariant, image: Image)?
  let diskReadMicroseconds: UInt64
}

/// The bytes a decode runs on, where they came from, and what a decoded variant stored on
/// disk records of them (nil: none is stored).
struct DecodeInput {
  let data: DownloadedData
  let source: ImageSource
  let origin: OriginalRecord?
  /// What fetching the bytes cost (the download's request metrics).
  var metrics = RequestMetrics()
}

/// One decode of one variant, shared by every request for that variant.
final class DecodeTask {
  enum Phase {
    /// Not started, or over (finished, abandoned, or its last requester left).
    case idle
    /// Looking for the decoded variant on disk first; `source` starts the download on a miss.
    case lookingUpVariant(DiskJob, source: DownloadSource)
    /// Waiting for the download of its bytes.
    case waitingForBytes(DownloadTask)
    /// On the decode pool (queued or running).
    case queued(PriorityWorkPool.Job)
    /// Held back with its bytes: every requester's queue is full of undrained images
    /// (`CompletionQueue.isFull`); scheduled again when one drains.
    case held(DecodeInput)
    /// A processed variant waiting for the image of the variant it is made from
    /// (`ImageProcessing.parent`): the task of that variant lists it in `children`.
    case waitingForParent(DecodeTask)
    /// A processed variant whose step runs next on the pool thread that just made its
    /// parent's image, in the same job (`ImageLoader.Continuation`).
    case continuing
  }

  let key: DecodeKey
  var variant: ImageVariant { key.variant }
  var requests: [UInt64: PendingRequest] = [:]
  var priority: Int32 = 0
  var phase = Phase.idle
  /// The tasks of the variants processed from this one's image (one step each): a task
  /// lives while it has requests or children.
  var children: [DecodeKey: DecodeTask] = [:]
  /// Raised when the decode or processing step under way is no longer wanted (the last
  /// requester left, or the loader is closing).
  var cancel: CancelFlag?
  /// Its own stages' figures (the variant lookup); the download's come with its input.
  var metrics = RequestMetrics()
  /// Those of its input (the download's, a parent's decode and steps) once it has it: a
  /// request cancelled before its result reports them.
  var inputMetrics: RequestMetrics?
  /// When the stage under way began (monotonic nanoseconds; request metrics).
  var stageStartedAt: UInt64 = 0

  init(key: DecodeKey) { self.key = key }

  var isUnused: Bool { requests.isEmpty && children.isEmpty }

  var download: DownloadTask? {
    if case .waitingForBytes(let download) = phase { return download }
    return nil
  }
}

/// The bytes of one cache key (from disk or the network), shared by every decode that
/// needs them. The request that starts it decides URL and headers (requests merged into
/// it have the same cache key, so the same headers unless the caller gave one key).
final class DownloadTask {
  enum Phase {
    /// Not started, or over.
    case idle
    /// Asking the disk tier, before any transfer.
    case lookingUp(DiskJob)
    /// On the network; conditional on `revalidating` when set (a stale stored copy).
    case transferring(TransferID, revalidating: StoredOriginal?)
  }

  let key: DownloadKey
  let url: RequestURL
  let headers: [String]
  var decodes: [ImageVariant: DecodeTask] = [:]
  var priority: Int32 = 0
  var phase = Phase.idle
  /// Set by the request that started it (a table during a fling).
  var startDelayMilliseconds = 0
  /// The length of the prefix its transfer ended with (see `ImageLoader.endsEarly`); 0: none.
  var endedEarly = 0
  /// Previews: a decode under way, the newest body that came during it, when the last
  /// began, the scan count of the last made.
  var previewing = false
  var previewPending: [UInt8]?
  var lastPreviewAt: UInt64 = 0
  var previewScans = 0
  /// What its stages measured so far, and when the disk lookup under way began.
  var metrics = RequestMetrics()
  var stageStartedAt: UInt64 = 0

  init(key: DownloadKey, url: RequestURL, headers: [String]) {
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
