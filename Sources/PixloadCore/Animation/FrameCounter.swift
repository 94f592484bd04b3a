/// A count several players add to from their decode jobs (a table's frames decoded by the
/// players tied to its rows).
final class FrameCounter: @unchecked Sendable {
  private let lock = Lock()
  private var count = 0

  func add(_ n: Int) { lock.withLock { count += n } }

  var value: Int { lock.withLock { count } }
}
