/// The custom processors of one loader, by id (pxl_loader_add_processor). A request
/// resolves its ids when accepted and keeps what it found, so unregistering never breaks
/// a request under way; a registration is released (its destroy callback, in the C API)
/// when it is unregistered and the last request holding it is done.
public final class ProcessorRegistry: @unchecked Sendable {
  private let lock = Lock()
  private var processors: [String: CustomProcessor] = [:]

  public init() {}

  /// Adds `processor`, replacing one of the same id (a new version is a new cache entry).
  public func add(_ processor: CustomProcessor) {
    let replaced: CustomProcessor? = lock.withLock {
      defer { processors[processor.id] = processor }
      return processors[processor.id]
    }
    _ = replaced  // released here, outside the lock
  }

  /// Removes the processor `id`; false when none is registered.
  @discardableResult
  public func remove(_ id: String) -> Bool {
    let removed: CustomProcessor? = lock.withLock { processors.removeValue(forKey: id) }
    return removed != nil
  }

  public func processor(_ id: String) -> CustomProcessor? { lock.withLock { processors[id] } }

  func removeAll() {
    let all: [String: CustomProcessor] = lock.withLock {
      defer { processors.removeAll() }
      return processors
    }
    _ = all
  }
}
