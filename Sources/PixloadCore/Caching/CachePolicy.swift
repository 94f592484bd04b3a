#if canImport(Glibc)
import Glibc
#endif

/// HTTP freshness as the disk cache applies it: what a response lets us keep, and whether
/// a stored copy may be used without asking the server.
struct HTTPFreshness: Sendable {
  /// Every stored copy is fresh until evicted (what most image loaders do).
  let ignoresServer: Bool

  /// Whether `entry` may be served without revalidation now.
  func isFresh(_ entry: DiskCache.Entry, now: UInt64 = UInt64(time(nil))) -> Bool {
    isFresh(entry.metadata, now: now)
  }

  /// Whether what `metadata` describes (an entry, or a variant made from one) may be
  /// served without revalidation now.
  func isFresh(_ metadata: DiskCache.Metadata, now: UInt64 = UInt64(time(nil))) -> Bool {
    let expiry = metadata.expiresAt
    return ignoresServer || expiry == 0 || now < expiry
  }

  /// What to remember on disk about a response.
  static func metadata(for caching: ResponseCaching, now: Int = Int(time(nil))) -> DiskCache.Metadata {
    var metadata = DiskCache.Metadata()
    metadata.expiresAt = caching.expiry(now: now)
    metadata.etag = caching.etag
    metadata.lastModified = caching.lastModified
    return metadata
  }
}

/// A loader's disk cache, opened on first use (on a disk thread, never the host's): a
/// directory that cannot be used turns the loader memory-only, with one log line, never
/// failed loads.
final class LazyDiskCache: @unchecked Sendable {
  private let directory: String
  private let capacityBytes: Int
  private let maxAgeSeconds: Int
  private let log: @Sendable (String) -> Void
  private let lock = Lock()
  private var opened: DiskCache?
  private var state = State.unopened
  private enum State { case unopened, open, unusable }

  init(directory: String, capacityBytes: Int, maxAgeSeconds: Int, log: @escaping @Sendable (String) -> Void) {
    self.directory = directory
    self.capacityBytes = capacityBytes
    self.maxAgeSeconds = maxAgeSeconds
    self.log = log
  }

  /// The cache, opening it on the first call. Blocks on the disk then.
  func cache() -> DiskCache? {
    lock.withLock {
      if state == .unopened {
        do {
          opened = try DiskCache(directory: directory, capacityBytes: capacityBytes, maxAgeSeconds: maxAgeSeconds,
                                 log: log)
          state = .open
        } catch {
          log("pixload: \((error as? LoadError)?.message ?? "\(error)"); continuing without a disk cache")
          state = .unusable
        }
      }
      return opened
    }
  }

  /// Bytes as last seen, without touching the disk (0 before it opened).
  var bytesSeen: Int { lock.withLock { opened?.totalBytes ?? 0 } }
}
