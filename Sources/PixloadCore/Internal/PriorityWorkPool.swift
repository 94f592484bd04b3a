/// A fixed set of threads running jobs highest priority first, newest first among equals
/// (the row the user scrolled to last is the one they are looking at).
///
/// Jobs that have not started can be cancelled or re-ranked. Picking scans the waiting
/// jobs: there are tens of them, not thousands, and a scan keeps re-ranking O(1).
final class PriorityWorkPool: @unchecked Sendable {
  final class Job {
    fileprivate(set) var priority: Int32
    fileprivate let sequence: UInt64
    fileprivate let work: () -> Void
    fileprivate init(priority: Int32, sequence: UInt64, work: @escaping () -> Void) {
      self.priority = priority
      self.sequence = sequence
      self.work = work
    }
  }

  private let lock = Lock()
  private var waiting: [Job] = []
  private var nextSequence: UInt64 = 0
  private var stopping = false
  private var draining = false
  private var threads: [WorkerThread] = []

  init(threadCount: Int, name: String) {
    for index in 0..<max(1, threadCount) {
      threads.append(WorkerThread(name: "\(name)-\(index)") { [unowned self] in self.runWorker() })
    }
  }

  func submit(priority: Int32, work: @escaping () -> Void) -> Job {
    lock.withLock {
      nextSequence += 1
      let job = Job(priority: priority, sequence: nextSequence, work: work)
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

  private func runWorker() {
    while true {
      let job: Job? = lock.withLock {
        while waiting.isEmpty && !stopping && !draining { lock.wait() }
        if stopping || waiting.isEmpty { return nil }
        var best = 0
        for index in 1..<waiting.count {
          let candidate = waiting[index], current = waiting[best]
          if candidate.priority > current.priority
            || (candidate.priority == current.priority && candidate.sequence > current.sequence) {
            best = index
          }
        }
        return waiting.remove(at: best)
      }
      guard let job else { return }
      job.work()
    }
  }
}
