import CSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A pthread mutex with a condition variable beside it.
///
/// The core avoids Foundation and Dispatch so that the shipped library stays small when
/// the Swift runtime is linked statically; this is the one lock type everything uses.
/// - important: Not recursive. Never call out to host code while holding it.
final class Lock: @unchecked Sendable {
  private let mutex: UnsafeMutablePointer<pthread_mutex_t>
  private let condition: UnsafeMutablePointer<pthread_cond_t>

  init() {
    mutex = .allocate(capacity: 1)
    mutex.initialize(to: pthread_mutex_t())
    pthread_mutex_init(mutex, nil)
    condition = .allocate(capacity: 1)
    condition.initialize(to: pthread_cond_t())
    // Timed waits measure against the monotonic clock, immune to wall-clock jumps.
    var attributes = pthread_condattr_t()
    pthread_condattr_init(&attributes)
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
    pthread_cond_init(condition, &attributes)
    pthread_condattr_destroy(&attributes)
  }

  deinit {
    pthread_cond_destroy(condition)
    condition.deallocate()
    pthread_mutex_destroy(mutex)
    mutex.deallocate()
  }

  /// What `unlock` wakes once the mutex is free (`signalOnUnlock`, `broadcastOnUnlock`);
  /// read and written with the lock held.
  private var pendingWake = Wake.none
  private enum Wake { case none, one, all }
  /// Another lock whose waiter `unlock` wakes once this mutex is free
  /// (`signalOnUnlock(of:)`); read and written with this lock held.
  private var pendingOther: Lock?

  func lock() { pthread_mutex_lock(mutex) }
  func unlock() {
    let wake = pendingWake
    pendingWake = .none
    let other = pendingOther
    if other != nil { pendingOther = nil }
    pthread_mutex_unlock(mutex)
    switch wake {
    case .none: break
    case .one: pthread_cond_signal(condition)
    case .all: pthread_cond_broadcast(condition)
    }
    other?.signal()
  }

  @inline(__always)
  func withLock<T>(_ body: () throws -> T) rethrows -> T {
    pthread_mutex_lock(mutex)
    defer { unlock() }
    return try body()
  }

  /// Lock held: wakes one waiter once the lock is released, not now. A waiter woken while
  /// its waker still holds the mutex runs on the other core only to block on that mutex
  /// at once, and wakes again when it is released: two thread switches where one does.
  /// Safe for waits that re-check their condition under the lock, as every wait here does:
  /// the change they wait for is made under the lock before it is released.
  func signalOnUnlock() {
    if pendingWake == .none { pendingWake = .one }
  }

  /// This lock held: wakes one waiter of `other` once this lock is released. For work queued
  /// under `other` by code that holds this lock, whose job starts by taking this lock (the
  /// decode pool's jobs take the loader's): woken now, the job's thread would block on this
  /// lock at once. Same rule as `signalOnUnlock`: the queued work is visible under `other`
  /// before the wake. One lock is remembered; a second, different one is woken at once.
  func signalOnUnlock(of other: Lock) {
    if pendingOther == nil || pendingOther === other {
      pendingOther = other
    } else {
      other.signal()
    }
  }

  /// Lock held: `signalOnUnlock` for every waiter.
  func broadcastOnUnlock() { pendingWake = .all }

  /// Waits on the condition; the lock must be held.
  func wait() { pthread_cond_wait(condition, mutex) }

  /// Waits on the condition until `deadline` (monotonic nanoseconds); the lock must be held.
  func wait(untilNanoseconds deadline: UInt64) {
    var spec = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
    pthread_cond_timedwait(condition, mutex, &spec)
  }

  func signal() { pthread_cond_signal(condition) }
  func broadcast() { pthread_cond_broadcast(condition) }
}

/// Monotonic clock in nanoseconds.
@inline(__always)
func monotonicNanoseconds() -> UInt64 {
  var spec = timespec()
  clock_gettime(CLOCK_MONOTONIC, &spec)
  return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
}

/// A joinable OS thread running `body`.
///
/// Creating one can fail (`ulimit -u`, a cgroup's pids limit): a library must report that,
/// not end the host, so `init` throws. An owner that started other threads before a later
/// one failed stops and joins those before it throws in turn.
final class WorkerThread {
  private var handle = pthread_t()

  private final class Box {
    let body: () -> Void
    let name: String
    init(_ body: @escaping () -> Void, name: String) { self.body = body; self.name = name }
  }

  /// Throws `.noMemory` when the thread cannot be created; `body` then never runs.
  init(name: String, body: @escaping () -> Void) throws(LoadError) {
    let box = Unmanaged.passRetained(Box(body, name: name))
    let rc = pthread_create(&handle, nil, { raw in
      let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
      pxl_set_thread_name(box.name)
      box.body()
      return nil
    }, box.toOpaque())
    if rc != 0 {
      box.release()
      throw LoadError(.noMemory, "could not start a thread (pthread_create: \(Self.errnoName(rc)))")
    }
    // Also named here, so that it carries its name as soon as this returns (a test or a
    // profiler looking at /proc right after would otherwise find the creator's name).
    pxl_name_thread(handle, name)
  }

  private static func errnoName(_ code: Int32) -> String {
    switch code {
    case EAGAIN: return "EAGAIN"
    case ENOMEM: return "ENOMEM"
    case EPERM: return "EPERM"
    case EINVAL: return "EINVAL"
    default: return "errno \(code)"
    }
  }

  func join() { pthread_join(handle, nil) }

}

/// CPU cores available to this process.
func availableCoreCount() -> Int { Int(pxl_available_cores()) }
