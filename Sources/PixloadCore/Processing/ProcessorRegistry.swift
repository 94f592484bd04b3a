/// The custom processors of one loader, by id (pxl_loader_add_processor). Requests
/// resolve ids when accepted; removing or replacing a registration retires it
/// (`CustomProcessor.retire`: its destroy callback runs once no call of it is running).
public final class ProcessorRegistry: @unchecked Sendable {
  private let lock = Lock()
  private var processors: [String: CustomProcessor] = [:]
  private var closed = false

  public init() {}

  /// Adds `processor`, replacing (and retiring) one of the same id. False once the loader
  /// closed: then `processor` is abandoned, its `onRetired` never runs (the caller keeps
  /// what it would free: pxl_loader_add_processor's failures do not call destroy).
  @discardableResult
  public func add(_ processor: CustomProcessor) -> Bool {
    let (added, replaced): (Bool, CustomProcessor?) = lock.withLock {
      if closed { return (false, nil) }
      defer { processors[processor.id] = processor }
      return (true, processors[processor.id])
    }
    guard added else {
      processor.abandon()
      return false
    }
    replaced?.retire()
    return true
  }

  /// Removes and retires the processor `id`; false when none is registered.
  @discardableResult
  public func remove(_ id: String) -> Bool {
    let removed: CustomProcessor? = lock.withLock { processors.removeValue(forKey: id) }
    removed?.retire()
    return removed != nil
  }

  public func processor(_ id: String) -> CustomProcessor? { lock.withLock { processors[id] } }

  /// Retires every registration (the loader closed).
  func removeAll() {
    let all: [String: CustomProcessor] = lock.withLock {
      closed = true
      defer { processors.removeAll() }
      return processors
    }
    all.values.forEach { $0.retire() }
  }
}
