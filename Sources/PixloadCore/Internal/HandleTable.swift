/// Numbers that name objects a host holds (the C API's pxl_hook_call and pxl_fetch
/// handles) instead of their addresses, so that a number used after its release is
/// refused rather than reaching a freed object. A number is a slot's index and the slot's
/// generation; a release bumps the generation, so a stale number never names the object
/// that reuses its slot (until the generation wraps, after 2^32 - 1 reuses of that slot).
/// The table grows only to the most objects held at once.
public final class HandleTable: @unchecked Sendable {
  private struct Slot {
    var generation: UInt32 = 1
    var object: AnyObject?
  }

  private let lock = Lock()
  private var slots: [Slot] = []
  private var unused: [Int] = []

  public init() {}

  /// A number for `object`, never 0, that names it until `remove`.
  public func insert(_ object: AnyObject) -> UInt64 {
    lock.withLock {
      let index = unused.popLast() ?? slots.count
      if index == slots.count { slots.append(Slot()) }
      slots[index].object = object
      return UInt64(slots[index].generation) << 32 | UInt64(index)
    }
  }

  /// The object `number` names: nil when it was removed, was never handed out, or is not a `T`.
  public func object<T: AnyObject>(_ number: UInt64, as type: T.Type) -> T? {
    lock.withLock { index(number).flatMap { slots[$0].object as? T } }
  }

  /// Removes the object `number` names and returns it, as `object` finds it: of any calls
  /// with one number, only the first gets the object.
  public func remove<T: AnyObject>(_ number: UInt64, as type: T.Type) -> T? {
    lock.withLock {
      guard let index = index(number), let object = slots[index].object as? T else { return nil }
      slots[index].object = nil
      slots[index].generation = slots[index].generation == .max ? 1 : slots[index].generation + 1
      unused.append(index)
      return object
    }
  }

  private func index(_ number: UInt64) -> Int? {
    let index = Int(number & 0xffff_ffff)
    guard index < slots.count, slots[index].generation == UInt32(number >> 32) else { return nil }
    return index
  }
}
