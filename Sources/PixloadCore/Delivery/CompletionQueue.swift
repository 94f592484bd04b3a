import CSupport
#if canImport(Glibc)
import Glibc
#endif

/// One accepted request as its completion queue sees it: it is delivered exactly once.
///
/// The delivery state is guarded by the owning queue's lock, which is what makes "cancel
/// wins over a queued result" and "exactly once" hold when the pipeline, `cancel` and
/// `dispatch` race on different threads.
final class Delivery: @unchecked Sendable {
  enum State { case waiting, queued, delivered }

  let token: UInt64
  /// The final callback: the outcome and what the request cost (`RequestMetrics`).
  let handler: (UInt64, Outcome, RequestMetrics) -> Void
  /// Download progress (token, received, expected), rate-limited to `progressInterval`.
  let progressHandler: ((UInt64, UInt64, UInt64) -> Void)?
  let progressInterval: UInt64
  var wantsProgress: Bool { progressHandler != nil }
  /// Previews (token, image) of a progressive JPEG still downloading, each from more scans
  /// than the last, at most one per `previewInterval`.
  let previewHandler: ((UInt64, Image) -> Void)?
  let previewInterval: UInt64
  var wantsPreview: Bool { previewHandler != nil }
  /// The loader that still may hold pipeline state for this request; told on delivery so
  /// it can forget the token, and on queue close so it can detach the request.
  weak var owner: (any DeliveryOwner)?

  // Guarded by the queue's lock.
  var state = State.waiting
  var outcome: Outcome?
  /// What the stages measured, and when the result was posted (0: not yet). Until then
  /// `metrics.workStartedAt` is the intake (where `total_us` starts).
  var metrics = RequestMetrics()
  var postedAt: UInt64 = 0
  var progressValue: (received: UInt64, expected: UInt64) = (0, 0)
  var progressQueued = false
  var lastProgressAt: UInt64 = 0
  /// The preview waiting to run (replaced by a sharper one until it does), and the scan
  /// count of the last one queued.
  var previewImage: Image?
  var previewScans = 0
  var lastPreviewAt: UInt64 = 0

  init(token: UInt64, owner: (any DeliveryOwner)?,
       progressHandler: ((UInt64, UInt64, UInt64) -> Void)? = nil, progressIntervalMilliseconds: Int = 100,
       previewHandler: ((UInt64, Image) -> Void)? = nil, previewIntervalMilliseconds: Int = 250,
       intakeAt: UInt64 = monotonicNanoseconds(),
       completion: @escaping (UInt64, Outcome, RequestMetrics) -> Void) {
    self.token = token
    metrics.workStartedAt = intakeAt
    self.owner = owner
    self.handler = completion
    self.progressHandler = progressHandler
    self.progressInterval = UInt64(max(0, progressIntervalMilliseconds)) * 1_000_000
    self.previewHandler = previewHandler
    self.previewInterval = UInt64(max(0, previewIntervalMilliseconds)) * 1_000_000
  }

  /// A delivery whose handler does not look at the metrics.
  convenience init(token: UInt64, owner: (any DeliveryOwner)?,
                   progressHandler: ((UInt64, UInt64, UInt64) -> Void)? = nil, progressIntervalMilliseconds: Int = 100,
                   previewHandler: ((UInt64, Image) -> Void)? = nil, previewIntervalMilliseconds: Int = 250,
                   handler: @escaping (UInt64, Outcome) -> Void) {
    self.init(token: token, owner: owner, progressHandler: progressHandler,
              progressIntervalMilliseconds: progressIntervalMilliseconds, previewHandler: previewHandler,
              previewIntervalMilliseconds: previewIntervalMilliseconds) { token, outcome, _ in handler(token, outcome) }
  }
}

/// The side of a loader that a queue calls back into. Called without the queue's lock.
protocol DeliveryOwner: AnyObject {
  /// The delivery is about to run its handler: forget its token and detach it from any
  /// work it still shares (it is cancelled when its queue closes early).
  func deliveryFinished(_ delivery: Delivery)
  /// The queue's undrained images fell below its resume mark after work for it was held
  /// back (see `CompletionQueue.isFull`): start that work again.
  func queueDrained(_ queue: CompletionQueue)
}

/// A weak reference to a loader waiting for a queue to drain.
private struct DrainListener {
  weak var owner: (any DeliveryOwner)?
}

/// A host-owned completion queue: results wait here until the host drains them on its own
/// thread, so no host callback ever runs on a library thread.
///
/// An eventfd is readable exactly while results are pending or a `wakeup()` is unconsumed,
/// so any event loop, level-triggered ones included, can wait on it: `dispatch` and `wait`
/// consume a wakeup. `wait` blocks on the lock's condition, not on the eventfd, so a
/// `dispatch` on another thread that reads the eventfd cannot take a wakeup from it. Lock order: a loader's lock may be held while taking a queue's lock, never the
/// reverse; handlers run with no lock held.
public final class CompletionQueue: @unchecked Sendable {
  private let lock = Lock()
  public let fileDescriptor: Int32
  /// A final result, or a progress report or preview that runs before it.
  private enum Entry {
    case result(Delivery)
    case progress(Delivery)
    case preview(Delivery)
    /// Something else to run on the host's thread (`post`).
    case call(() -> Void)
  }

  /// What `dispatch` runs for an entry, taken under the lock and run without it.
  private enum Action {
    case result(Delivery, Outcome, RequestMetrics)
    case progress(Delivery, UInt64, UInt64)
    case preview(Delivery, Image?)
    case call(() -> Void)
  }

  private var ready: [Entry] = []
  private var readyHead = 0
  /// Every accepted request that has not been delivered, for `close()`.
  private var outstanding: [ObjectIdentifier: Delivery] = [:]
  private var closed = false
  /// Whether the eventfd counter is non-zero (so it is written once, not per result).
  private var signalled = false
  /// A `wakeup()` that no `dispatch` or `wait` has consumed yet.
  private var wakeupPending = false
  /// Counts `wakeup()` calls: a `wait` returns when it moved, even if a `dispatch` consumed
  /// the wakeup before the waiting thread ran again.
  private var wakeupGeneration: UInt64 = 0

  /// Pixel bytes of the images held by results waiting to be dispatched. A host that stops
  /// draining a queue must not make it grow without limit: once this reaches
  /// `undrainedImageLimit`, loaders hold back decodes whose every requester's queue is
  /// full (the encoded bytes wait, the result is never dropped), and start them again
  /// when dispatching brings it below `undrainedImageResume`.
  private var undrainedImageBytes = 0
  private var drainListeners: [ObjectIdentifier: DrainListener] = [:]
  /// 64 MiB: several screens of full-size photos, hundreds of thumbnails.
  public static let undrainedImageLimit = 64 << 20
  public static let undrainedImageResume = undrainedImageLimit / 2

  /// Whether undrained results hold `undrainedImageLimit` or more (never for a
  /// discarding queue). When full, `owner` is told once the queue has drained.
  func isFull(notifying owner: any DeliveryOwner) -> Bool {
    lock.withLock {
      guard !closed, !discardsResults, undrainedImageBytes >= Self.undrainedImageLimit else { return false }
      drainListeners[ObjectIdentifier(owner)] = DrainListener(owner: owner)
      return true
    }
  }

  /// Undrained image bytes now (for tests).
  public var undrainedBytes: Int { lock.withLock { undrainedImageBytes } }

  private static func imageBytes(_ outcome: Outcome?) -> Int {
    if case .success(let image, _, _)? = outcome { return image.totalByteCount }
    return 0
  }

  /// Results of a discarding queue are dropped as they arrive: it serves prefetches, which
  /// warm the caches and call nobody.
  let discardsResults: Bool

  public init() throws(LoadError) {
    let fd = pxl_eventfd_new()
    if fd < 0 { throw LoadError(.io, "eventfd failed: errno \(errno)") }
    fileDescriptor = fd
    discardsResults = false
  }

  init(discardingResults: Void) throws(LoadError) {
    let fd = pxl_eventfd_new()
    if fd < 0 { throw LoadError(.io, "eventfd failed: errno \(errno)") }
    fileDescriptor = fd
    discardsResults = true
  }

  /// A discarding queue's side of complete and cancel: the request is finished at once.
  private func discard(_ delivery: Delivery) -> Bool {
    let finished: Bool = lock.withLock {
      guard delivery.state != .delivered else { return false }
      delivery.state = .delivered
      outstanding.removeValue(forKey: ObjectIdentifier(delivery))
      return true
    }
    if finished { delivery.owner?.deliveryFinished(delivery) }
    return finished
  }

  deinit { Glibc.close(fileDescriptor) }

  public var pendingCount: Int { lock.withLock { ready.count - readyHead } }

  /// Adds a request that will be delivered through this queue. False once closed.
  func register(_ delivery: Delivery) -> Bool {
    lock.withLock {
      if closed { return false }
      outstanding[ObjectIdentifier(delivery)] = delivery
      return true
    }
  }

  /// Queues the request's result unless it already has one (a cancel came first), with
  /// what the stages measured of it.
  func complete(_ delivery: Delivery, with outcome: Outcome, metrics: RequestMetrics = RequestMetrics()) {
    if discardsResults {
      _ = discard(delivery)
      return
    }
    let now = monotonicNanoseconds()
    lock.withLock {
      guard delivery.state == .waiting, !closed else { return }
      delivery.outcome = outcome
      delivery.metrics = Self.measured(metrics, since: delivery.metrics.workStartedAt)
      delivery.postedAt = now
      undrainedImageBytes += Self.imageBytes(outcome)
      delivery.state = .queued
      appendReady(.result(delivery))
    }
  }

  /// Queues a progress report unless one is already waiting (it is updated instead), the
  /// request's interval has not passed since the last one ran, or the result is in.
  func progress(_ delivery: Delivery, received: UInt64, expected: UInt64) {
    lock.withLock {
      guard delivery.state == .waiting, !closed, delivery.progressHandler != nil else { return }
      delivery.progressValue = (received, expected)
      if delivery.progressQueued { return }
      if delivery.lastProgressAt != 0
        && monotonicNanoseconds() - delivery.lastProgressAt < delivery.progressInterval { return }
      delivery.progressQueued = true
      appendReady(.progress(delivery))
    }
  }

  /// Queues a preview made from `scans` scans unless the result is in, the request has
  /// had one from as many scans, or its interval has not passed since the last one ran. A
  /// preview still waiting is replaced by this sharper one.
  func preview(_ delivery: Delivery, image: Image, scans: Int) {
    lock.withLock {
      guard delivery.state == .waiting, !closed, delivery.previewHandler != nil, scans > delivery.previewScans else {
        return
      }
      if delivery.previewImage == nil && delivery.lastPreviewAt != 0
        && monotonicNanoseconds() - delivery.lastPreviewAt < delivery.previewInterval { return }
      let wasQueued = delivery.previewImage != nil
      delivery.previewImage = image
      delivery.previewScans = scans
      if !wasQueued { appendReady(.preview(delivery)) }
    }
  }

  /// Turns the request's result into a cancellation if its handler has not started.
  /// Returns false when it already ran (or is running).
  /// `measured`: what the stages had measured of it (a result already queued keeps its own).
  @discardableResult
  func cancel(_ delivery: Delivery, measured: RequestMetrics? = nil) -> Bool {
    if discardsResults { return discard(delivery) }
    let now = monotonicNanoseconds()
    return lock.withLock {
      switch delivery.state {
      case .delivered:
        return false
      case .queued:
        undrainedImageBytes -= Self.imageBytes(delivery.outcome)
        delivery.outcome = .failure(.cancelled)  // releases a queued image at once
        delivery.previewImage = nil
        return true
      case .waiting:
        if closed { return false }
        delivery.outcome = .failure(.cancelled)
        if let measured { delivery.metrics = Self.measured(measured, since: delivery.metrics.workStartedAt) }
        delivery.postedAt = now
        delivery.previewImage = nil  // a queued preview no longer runs
        delivery.state = .queued
        appendReady(.result(delivery))
        return true
      }
    }
  }

  /// Runs `body` on the thread that drains the queue, after what is pending now (an
  /// animation player's events). False once closed: it never runs.
  @discardableResult
  func post(_ body: @escaping () -> Void) -> Bool {
    lock.withLock {
      guard !closed, !discardsResults else { return false }
      appendReady(.call(body))
      return true
    }
  }

  /// Runs up to `max` pending handlers (all when `max <= 0`) on the calling thread.
  public func dispatch(max: Int) -> Int {
    // "All" means all pending now: results that handlers add while we run wait for the
    // next call, so a handler that keeps loading cached images cannot starve the host.
    let limit: Int = lock.withLock {
      // The host's loop came here because the fd was readable: a wakeup has done its job.
      // Consumed before any handler runs, so a wakeup issued during them stays readable.
      consumeWakeup()
      return max > 0 ? max : ready.count - readyHead
    }
    var count = 0
    while count < limit {
      // What to run, taken under the lock: a final outcome, or progress figures; and the
      // loaders to wake when this result brought the queue below its resume mark.
      var drained: [DrainListener] = []
      let next: Action? = lock.withLock {
        guard readyHead < ready.count else { return nil }
        let entry = ready[readyHead]
        readyHead += 1
        if readyHead == ready.count { resetReady() }
        updateSignal()
        switch entry {
        case .result(let delivery):
          delivery.state = .delivered
          outstanding.removeValue(forKey: ObjectIdentifier(delivery))
          undrainedImageBytes -= Self.imageBytes(delivery.outcome)
          if !drainListeners.isEmpty && undrainedImageBytes < Self.undrainedImageResume {
            drained = Array(drainListeners.values)
            drainListeners.removeAll()
          }
          defer { delivery.outcome = nil }
          let outcome = delivery.outcome!
          var metrics = delivery.metrics
          let now = monotonicNanoseconds()
          metrics.queueWaitMicroseconds = microseconds(from: delivery.postedAt, to: now)
          metrics.callbackStarts(at: now)
          if case .success(let image, _, _) = outcome { metrics.deliveredBytes = UInt64(image.totalByteCount) }
          metrics.settle(now: now)
          return .result(delivery, outcome, metrics)
        case .progress(let delivery):
          delivery.progressQueued = false
          delivery.lastProgressAt = monotonicNanoseconds()
          return .progress(delivery, delivery.progressValue.received, delivery.progressValue.expected)
        case .call(let body):
          return .call(body)
        case .preview(let delivery):
          // nil when a cancel or the result came after it was queued.
          let image = delivery.state == .waiting ? delivery.previewImage : nil
          delivery.previewImage = nil
          delivery.lastPreviewAt = monotonicNanoseconds()
          return .preview(delivery, image)
        }
      }
      for listener in drained { listener.owner?.queueDrained(self) }
      guard let next else { break }
      // A result is queued behind the reports and previews that came before it, so none
      // of them runs after the final callback.
      switch next {
      case .result(let delivery, let outcome, let metrics):
        delivery.owner?.deliveryFinished(delivery)
        delivery.handler(delivery.token, outcome, metrics)
      case .progress(let delivery, let received, let expected):
        delivery.progressHandler?(delivery.token, received, expected)
      case .preview(let delivery, let image):
        if let image { delivery.previewHandler?(delivery.token, image) }
      case .call(let body):
        body()
      }
      count += 1
    }
    return count
  }

  /// Blocks until results are pending, a `wakeup()` is unconsumed or comes, or the timeout
  /// passes (negative: forever). Consumes the wakeup. Returns the pending count.
  public func wait(timeoutMilliseconds: Int32) -> Int {
    let deadline = timeoutMilliseconds < 0 ? nil : monotonicNanoseconds() + UInt64(timeoutMilliseconds) * 1_000_000
    return lock.withLock {
      let generation = wakeupGeneration
      while ready.count == readyHead && !wakeupPending && wakeupGeneration == generation {
        if let deadline {
          if monotonicNanoseconds() >= deadline { break }
          lock.wait(untilNanoseconds: deadline)
        } else {
          lock.wait()
        }
      }
      consumeWakeup()
      return ready.count - readyHead
    }
  }

  /// Makes a `wait` in progress (or the next one) return, and the fd readable until a
  /// `dispatch` or `wait` consumes it.
  public func wakeup() {
    lock.withLock {
      wakeupPending = true
      wakeupGeneration &+= 1
      signalArrival()
      lock.broadcast()
    }
  }

  /// Closes the queue: every request not yet delivered is detached from its loader and
  /// its handler runs with CANCELLED on the calling thread before this returns.
  public func close() {
    let abandoned: [Delivery] = lock.withLock {
      closed = true
      let all = Array(outstanding.values)
      outstanding.removeAll()
      for delivery in all {
        delivery.state = .delivered
        delivery.outcome = nil
      }
      ready.removeAll()
      readyHead = 0
      undrainedImageBytes = 0
      drainListeners.removeAll()
      wakeupPending = false
      updateSignal()
      return all.sorted { $0.token < $1.token }
    }
    for delivery in abandoned {
      delivery.owner?.deliveryFinished(delivery)
      var metrics = RequestMetrics()
      metrics.workStartedAt = delivery.metrics.workStartedAt
      metrics.settle(now: monotonicNanoseconds())
      delivery.handler(delivery.token, .failure(.cancelled), metrics)
    }
  }

  /// A request's stage figures, counted from `intake` or the start of the work they are
  /// of, whichever came first (a joined request's work began before it).
  private static func measured(_ metrics: RequestMetrics, since intake: UInt64) -> RequestMetrics {
    var metrics = metrics
    metrics.startNoLaterThan(intake)
    return metrics
  }

  // MARK: - Lock held

  private func appendReady(_ entry: Entry) {
    ready.append(entry)
    signalArrival()
    lock.broadcastOnUnlock()
  }

  /// Something new is pending: the fd becomes readable, and if it already was, it is
  /// written again, so that an edge-triggered loop (EPOLLET) sees a new edge for every
  /// arrival, also one that came while it was dispatching.
  private func signalArrival() {
    if signalled {
      var one: UInt64 = 1
      _ = write(fileDescriptor, &one, 8)
    } else {
      updateSignal()
    }
  }

  private func resetReady() {
    ready.removeAll(keepingCapacity: ready.capacity <= 1024)
    readyHead = 0
  }

  private func consumeWakeup() {
    wakeupPending = false
    updateSignal()
  }

  /// Makes the eventfd readable exactly while results are pending or a wakeup is
  /// unconsumed: written once when it should be readable and is not, read (which zeroes
  /// the counter) when it should not be and is.
  private func updateSignal() {
    let shouldSignal = readyHead < ready.count || wakeupPending
    if shouldSignal == signalled { return }
    if shouldSignal {
      var one: UInt64 = 1
      _ = write(fileDescriptor, &one, 8)
    } else {
      var value: UInt64 = 0
      _ = read(fileDescriptor, &value, 8)
    }
    signalled = shouldSignal
  }
}
