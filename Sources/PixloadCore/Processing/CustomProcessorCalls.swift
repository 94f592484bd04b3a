/// The calls of a processor the host registered, and its retirement (`CustomProcessor`, a
/// Model value, names only its id and version): no new call starts once it is retired, calls
/// under way see their flags raised, and `onRetired` (the C API's destroy callback) runs
/// once no call is running: never during or after one.
final class RetiringProcessorCalls: ProcessorCalls, @unchecked Sendable {
  private let lock = Lock()
  private var process: ((ProcessingFrame) -> LoadError?)?
  private var onRetired: (() -> Void)?
  private var running: [ObjectIdentifier: CancelFlag] = [:]
  private var runningCount = 0

  init(process: @escaping (ProcessingFrame) -> LoadError?, onRetired: (() -> Void)?) {
    self.process = process
    self.onRetired = onRetired
  }

  deinit { onRetired?() }

  func run(_ frame: ProcessingFrame) -> LoadError?? {
    let process: ((ProcessingFrame) -> LoadError?)? = lock.withLock {
      guard let process = self.process else { return nil }
      runningCount += 1
      running[ObjectIdentifier(frame.cancel), default: frame.cancel] = frame.cancel
      return process
    }
    guard let process else { return nil }
    let error = process(frame)
    let retired: (() -> Void)? = lock.withLock {
      runningCount -= 1
      if runningCount == 0 { running.removeAll() }
      guard self.process == nil, runningCount == 0 else { return nil }
      defer { onRetired = nil }
      return onRetired
    }
    retired?()
    return .some(error)
  }

  func retire() {
    let retired: (() -> Void)? = lock.withLock {
      process = nil
      for flag in running.values { flag.raise() }
      guard runningCount == 0 else { return nil }
      defer { onRetired = nil }
      return onRetired
    }
    retired?()
  }

  func abandon() {
    lock.withLock {
      process = nil
      onRetired = nil
    }
  }
}

extension CustomProcessor {
  /// A processor named `id` at `version` that runs `process` on each frame; `onRetired` runs
  /// once, after its last call (see `RetiringProcessorCalls`).
  public convenience init(id: String, version: UInt32, process: @escaping (ProcessingFrame) -> LoadError?,
                          onRetired: (() -> Void)? = nil) {
    self.init(id: id, version: version, calls: RetiringProcessorCalls(process: process, onRetired: onRetired))
  }
}
