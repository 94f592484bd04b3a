/// A fixed set of threads running jobs highest priority first. Among equal priorities the
/// cheapest goes first (the caller's estimate: for a decode, its encoded bytes), so a
/// screen of small thumbnails is not held up behind one large PNG; among equal costs the
/// newest (the row the user scrolled to last is the one they are looking at). A job that
/// has waited `agingNanoseconds` goes before the others of its priority, oldest first, on
/// up to half the threads, so that a steady stream of cheaper or newer jobs cannot starve
/// it, and a backlog (a host that never cancels, after a fling) cannot make the newest
/// wait behind all of it.
///
/// Jobs that have not started can be cancelled or re-ranked. A host that cancels a
/// backlog of thousands must not pay for it quadratically, under the loader's lock: a
/// cancel is O(1), a re-rank and a pick O(log n) amortized (two heaps, one per order of
/// the class comment, whose cancelled and re-ranked entries are dropped lazily).
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

  /// A job in the heaps at the priority it had when pushed; it no longer counts once the
  /// job left `waiting` or changed priority (a newer entry then stands for it).
  private struct Entry {
    let job: Job
    let priority: Int32
  }

  private let lock = Lock()
  /// The waiting jobs by sequence number: what is live in the heaps.
  private var waiting: [UInt64: Job] = [:]
  /// By the class comment's order for jobs that have not waited long.
  private var byRank = BinaryHeap<Entry>(comesFirst: PriorityWorkPool.ranksBefore)
  /// By priority, then oldest first: the aged job that goes first, if any has aged.
  private var byAge = BinaryHeap<Entry>(comesFirst: PriorityWorkPool.isOlder)
  /// Tombstones dropped and entries moved by rebuilds, with the heaps' comparisons: the
  /// work queueing and cancelling cost, for tests that check it stays near linear.
  private var entriesVisited = 0
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

  /// Queues `work`. `wakingAfter`: a lock the caller holds and the job takes first (the
  /// loader's): the idle thread that runs it is woken once the caller releases that lock,
  /// not before, so that it does not wake only to block on it. The job is queued (ranked,
  /// cancellable) at once either way; a thread already awake may take it sooner.
  func submit(priority: Int32, cost: Int = 0, wakingAfter outer: Lock? = nil, work: @escaping () -> Void) -> Job {
    let job: Job = lock.withLock {
      nextSequence += 1
      let job = Job(priority: priority, cost: cost, sequence: nextSequence, work: work)
      waiting[job.sequence] = job
      byRank.push(Entry(job: job, priority: priority))
      byAge.push(Entry(job: job, priority: priority))
      if outer == nil { lock.signalOnUnlock() }
      return job
    }
    outer?.signalOnUnlock(of: lock)
    return job
  }

  /// Back-pressure (`isBacklogged`): the waiting jobs at which it answers true, whether it
  /// did since the backlog last fell below, and what is called (without the lock) when it
  /// does.
  private var backlogLimit = Int.max
  private var backlogReported = false
  private var backlogCleared: (@Sendable () -> Void)?

  /// `cleared` is called once the waiting jobs fall to half `limit` after `isBacklogged`
  /// answered true (not at once below it: each call starts a batch of transfers, not one
  /// per job picked, which would wake the network thread once per decode). Set before the
  /// first `isBacklogged`.
  func watchBacklog(limit: Int, cleared: @escaping @Sendable () -> Void) {
    lock.withLock {
      backlogLimit = limit
      backlogCleared = cleared
    }
  }

  /// Whether `limit` jobs or more wait (`watchBacklog`).
  func isBacklogged() -> Bool {
    lock.withLock {
      guard waiting.count >= backlogLimit else { return false }
      backlogReported = true
      return true
    }
  }

  /// Lock held: the callback to call once unlocked when the backlog just fell to half its
  /// limit after being reported.
  private func takeBacklogCleared() -> (@Sendable () -> Void)? {
    guard backlogReported, waiting.count <= backlogLimit / 2 else { return nil }
    backlogReported = false
    return backlogCleared
  }

  /// Removes a job that has not started. False if it already started (or finished).
  @discardableResult
  func cancel(_ job: Job) -> Bool {
    let (removed, cleared): (Bool, (@Sendable () -> Void)?) = lock.withLock {
      guard waiting.removeValue(forKey: job.sequence) != nil else { return (false, nil) }
      compactIfMostlyTombstones()
      return (true, takeBacklogCleared())
    }
    cleared?()
    return removed
  }

  func setPriority(_ job: Job, _ priority: Int32) {
    lock.withLock {
      guard job.priority != priority else { return }
      job.priority = priority
      guard waiting[job.sequence] === job else { return }
      // The entries at the old priority turn into tombstones.
      byRank.push(Entry(job: job, priority: priority))
      byAge.push(Entry(job: job, priority: priority))
      compactIfMostlyTombstones()
    }
  }

  /// The work the pool's bookkeeping has done so far (see `entriesVisited`).
  var bookkeepingWork: Int {
    lock.withLock { entriesVisited + byRank.comparisons + byAge.comparisons }
  }

  /// Drops waiting jobs, lets running ones finish, and joins the threads.
  func shutdown() {
    let toJoin: [WorkerThread] = lock.withLock {
      stopping = true
      waiting.removeAll()
      byRank.removeAll()
      byAge.removeAll()
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

  /// The order of the class comment among jobs that have not waited long.
  private static func ranksBefore(_ a: Entry, _ b: Entry) -> Bool {
    if a.priority != b.priority { return a.priority > b.priority }
    if a.job.cost != b.job.cost { return a.job.cost < b.job.cost }
    return a.job.sequence > b.job.sequence
  }

  /// Highest priority, then oldest: among the jobs of the top priority, the first to have
  /// aged (sequence numbers and submission times grow together).
  private static func isOlder(_ a: Entry, _ b: Entry) -> Bool {
    if a.priority != b.priority { return a.priority > b.priority }
    return a.job.sequence < b.job.sequence
  }

  /// Lock held: whether an entry still stands for a waiting job at its current priority.
  private func isLive(_ entry: Entry) -> Bool {
    waiting[entry.job.sequence] === entry.job && entry.job.priority == entry.priority
  }

  /// Lock held: the heap's top live entry, dropping the tombstones above it.
  private func liveTop(_ heap: inout BinaryHeap<Entry>) -> Entry? {
    while let top = heap.top {
      if isLive(top) { return top }
      heap.popTop()
      entriesVisited += 1
    }
    return nil
  }

  /// Lock held: rebuilds the heaps from the waiting jobs once tombstones outnumber them
  /// (a mass cancel, many re-ranks), so memory and picks stay proportional to live jobs.
  /// Each rebuild costs O(live) and follows at least as many cancels or re-ranks.
  private func compactIfMostlyTombstones() {
    if waiting.isEmpty {
      entriesVisited += byRank.count + byAge.count
      byRank.removeAll()
      byAge.removeAll()
      return
    }
    guard byRank.count + byAge.count > 4 * waiting.count + 64 else { return }
    let live = waiting.values.map { Entry(job: $0, priority: $0.priority) }
    entriesVisited += byRank.count + byAge.count + 2 * live.count
    byRank.rebuild(live)
    byAge.rebuild(live)
  }

  private func runWorker() {
    while true {
      var cleared: (@Sendable () -> Void)?
      let picked: (job: Job, aged: Bool)? = lock.withLock {
        while waiting.isEmpty && !stopping && !draining { lock.wait() }
        if stopping || waiting.isEmpty { return nil }
        let now = monotonicNanoseconds()
        // With half the threads on aged jobs, no job counts as aged (none was submitted at 0).
        let agedBefore = runningAged < agedLimit && now > Self.agingNanoseconds ? now - Self.agingNanoseconds : 0
        // Both tops are at the highest waiting priority. The oldest job there goes first if
        // it has aged; if it has not, no job of that priority has.
        guard let oldest = liveTop(&byAge), let ranked = liveTop(&byRank) else { return nil }
        let aged = oldest.job.submittedAt < agedBefore
        let job = aged ? oldest.job : ranked.job
        if aged { byAge.popTop() } else { byRank.popTop() }
        waiting.removeValue(forKey: job.sequence)
        compactIfMostlyTombstones()
        if aged { runningAged += 1 }
        cleared = takeBacklogCleared()
        return (job, aged)
      }
      cleared?()
      guard let picked else { return }
      picked.job.work()
      if picked.aged { lock.withLock { runningAged -= 1 } }
    }
  }
}
