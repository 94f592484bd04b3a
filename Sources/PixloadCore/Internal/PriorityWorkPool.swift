/// A fixed set of threads running jobs highest priority first. Among equal priorities the
/// cheapest goes first (the caller's estimate: for a decode, its encoded bytes), so a
/// screen of small thumbnails is not held up behind one large PNG; among equal costs the
/// newest (the row the user scrolled to last is the one they are looking at). A job that
/// has waited `agingNanoseconds` goes before the others of its priority, oldest first, on
/// up to half the threads, so that a steady stream of cheaper or newer jobs cannot starve
/// it, and a backlog (a host that never cancels, after a fling) cannot make the newest
/// wait behind all of it.
///
/// Jobs that have not started can be cancelled or re-ranked. Picking scans the waiting
/// jobs: there are tens of them, not thousands, and a scan keeps re-ranking O(1).
final class PriorityWorkPool: @unchecked Sendable {
  final class Job {
    fileprivate(set) var priority: Int32
    fileprivate let cost: Int
    fileprivate let sequence: UInt64
    fileprivate let submittedAt: UInt64
    fileprivate let work: () -> Void
    fileprivate init(priority: Int32, cost: Int, sequence: UInt64, work: @escaping () -> Void) {
      self.priority = priority
      self.cost = cost
      self.sequence = sequence
      self.submittedAt = monotonicNanoseconds()
      self.work = work
    }
  }

  /// How long a job may wait before it goes ahead of cheaper and newer ones of its priority:
  /// ten times a large image's decode, far longer than a screen of thumbnails takes.
  static let agingNanoseconds: UInt64 = 250_000_000

  private let lock = Lock()
  private var waiting: [Job] = []
  private var nextSequence: UInt64 = 0
  private var stopping = false
  private var draining = false
  private var threads: [WorkerThread] = []
  /// Jobs running because they had waited long, and how many may (half the threads).
  private var runningAged = 0
  private let agedLimit: Int

  /// Throws `.noMemory` when a thread cannot be started, after stopping and joining the
  /// ones that did (they hold the pool unowned: none may outlive it).
  init(threadCount: Int, name: String) throws(LoadError) {
    agedLimit = max(1, threadCount / 2)
    for index in 0..<max(1, threadCount) {
      do {
        threads.append(try WorkerThread(name: "\(name)-\(index)") { [unowned self] in self.runWorker() })
      } catch {
        shutdown()
        throw error
      }
    }
  }

  func submit(priority: Int32, cost: Int = 0, work: @escaping () -> Void) -> Job {
    lock.withLock {
      nextSequence += 1
      let job = Job(priority: priority, cost: cost, sequence: nextSequence, work: work)
      waiting.append(job)
      lock.signal()
      return job
    }
  }

  /// Removes a job that has not started. False if it already started (or finished).
  @discardableResult
  func cancel(_ job: Job) -> Bool {
    lock.withLock {
      guard let index = waiting.firstIndex(where: { $0 === job }) else { return false }
      waiting.remove(at: index)
      return true
    }
  }

  func setPriority(_ job: Job, _ priority: Int32) {
    lock.withLock { job.priority = priority }
  }

  /// Drops waiting jobs, lets running ones finish, and joins the threads.
  func shutdown() {
    let toJoin: [WorkerThread] = lock.withLock {
      stopping = true
      waiting.removeAll()
      lock.broadcast()
      defer { threads.removeAll() }
      return threads
    }
    for thread in toJoin { thread.join() }
  }

  /// Runs every waiting job, then joins the threads: for tests, and for the disk pool, so
  /// that closing a loader still writes the entries it was about to write.
  func shutdownAfterDraining() {
    let toJoin: [WorkerThread] = lock.withLock {
      draining = true
      lock.broadcast()
      defer { threads.removeAll() }
      return threads
    }
    for thread in toJoin { thread.join() }
  }

  /// The order of the class comment; `agedBefore`: jobs submitted before it have waited long.
  private static func runsBefore(_ a: Job, _ b: Job, agedBefore: UInt64) -> Bool {
    if a.priority != b.priority { return a.priority > b.priority }
    let aAged = a.submittedAt < agedBefore, bAged = b.submittedAt < agedBefore
    if aAged || bAged { return aAged && (!bAged || a.sequence < b.sequence) }
    if a.cost != b.cost { return a.cost < b.cost }
    return a.sequence > b.sequence
  }

  private func runWorker() {
    while true {
      let picked: (job: Job, aged: Bool)? = lock.withLock {
        while waiting.isEmpty && !stopping && !draining { lock.wait() }
        if stopping || waiting.isEmpty { return nil }
        let now = monotonicNanoseconds()
        // With half the threads on aged jobs, no job counts as aged (none was submitted at 0).
        let agedBefore = runningAged < agedLimit && now > Self.agingNanoseconds ? now - Self.agingNanoseconds : 0
        var best = 0
        for index in 1..<waiting.count where Self.runsBefore(waiting[index], waiting[best], agedBefore: agedBefore) {
          best = index
        }
        let job = waiting.remove(at: best)
        let aged = job.submittedAt < agedBefore
        if aged { runningAged += 1 }
        return (job, aged)
      }
      guard let picked else { return }
      picked.job.work()
      if picked.aged { lock.withLock { runningAged -= 1 } }
    }
  }
}
