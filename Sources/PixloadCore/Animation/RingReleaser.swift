#if canImport(Glibc)
import Glibc
#endif

/// Tells paused players when their pause has lasted `AnimationPlayer.releaseDelayNanoseconds`
/// (they then release their ring: `AnimationPlayer.releaseIfPausedLong`). One thread for the
/// process, started when a player pauses and gone once no paused player waits, so an idle
/// process has none. Holds the players weakly: a freed player is simply skipped.
final class RingReleaser: @unchecked Sendable {
  static let shared = RingReleaser()

  private struct Waiting {
    let deadline: UInt64
    weak var player: AnimationPlayer?
  }

  private let lock = Lock()
  private var waiting: [Waiting] = []
  private var running = false

  /// `player` asks again at `deadline` (monotonic nanoseconds).
  func remind(_ player: AnimationPlayer, at deadline: UInt64) {
    lock.withLock {
      waiting.append(Waiting(deadline: deadline, player: player))
      if running {
        lock.signal()
        return
      }
      // Without a thread (none could start), rings are kept as before this existed.
      running = (try? WorkerThread(name: "pxl-anim-release") { [self] in
        pthread_detach(pthread_self())
        run()
      }) != nil
      if !running { waiting.removeAll() }
    }
  }

  private func run() {
    lock.lock()
    while !waiting.isEmpty {
      let now = monotonicNanoseconds()
      let due = waiting.filter { $0.deadline <= now }
      if due.isEmpty {
        lock.wait(untilNanoseconds: waiting.map(\.deadline).min()!)
        continue
      }
      waiting.removeAll { $0.deadline <= now }
      lock.unlock()
      for entry in due { entry.player?.releaseIfPausedLong() }
      lock.lock()
    }
    running = false
    lock.unlock()
  }
}
