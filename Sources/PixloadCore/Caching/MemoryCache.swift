/// Decoded images, least recently used first out, bounded by total pixel bytes.
///
/// The cache holds its own reference to each image, so evicting an entry never frees
/// pixels a host still holds. Lookups take a lock for a few hash operations only and never
/// wait for decoding, disk or network: a row scrolled back into view draws at once.
public final class MemoryCache: @unchecked Sendable {
  private final class Node {
    let key: ImageVariant
    let image: Image
    var newer: Node?
    weak var older: Node?
    init(key: ImageVariant, image: Image) { self.key = key; self.image = image }
  }

  private let lock = Lock()
  private var entries: [ImageVariant: Node] = [:]
  // Recency list, oldest to newest. Links towards newer entries are strong and links back
  // are weak, so the list has no reference cycle and frees itself with the cache.
  private var oldest: Node?
  private weak var newest: Node?
  private var bytes = 0
  public let capacityBytes: Int
  /// At most this many entries, whatever their size (thousands of tiny icons).
  public let capacityCount: Int

  public init(capacityBytes: Int, capacityCount: Int = 1000) {
    self.capacityBytes = max(0, capacityBytes)
    self.capacityCount = max(0, capacityCount)
  }

  public var totalBytes: Int { lock.withLock { bytes } }
  public var count: Int { lock.withLock { entries.count } }

  /// The cached image, marked most recently used.
  public func image(for key: ImageVariant) -> Image? {
    lock.withLock {
      guard let node = entries[key] else { return nil }
      moveToNewest(node)
      return node.image
    }
  }

  /// Stores an image unless it alone takes more than a tenth of the budget (one full-size
  /// photo must not flush a screenful of thumbnails); evicts the least recently used.
  public func insert(_ image: Image, for key: ImageVariant) {
    let cost = image.cachedByteCount
    guard cost <= capacityBytes / 10, capacityCount > 0 else { return }
    lock.withLock {
      if let existing = entries[key] { unlink(existing) }
      let node = Node(key: key, image: image)
      entries[key] = node
      bytes += cost
      appendNewest(node)
      evict(downTo: capacityBytes)
    }
  }

  /// Drops least recently used entries until at most `maxBytes` remain.
  public func trim(toBytes maxBytes: Int) {
    lock.withLock { evict(downTo: max(0, maxBytes)) }
  }

  public func removeAll() { trim(toBytes: 0) }

  // MARK: - Lock held

  private func evict(downTo limit: Int) {
    while bytes > limit || entries.count > capacityCount, let node = oldest { unlink(node) }
  }

  /// Drops every variant of one cache key, and of the keys requests with per-request
  /// headers made from it (`CacheKey.belongs(to:)`).
  public func removeAll(cacheKey: String) {
    lock.withLock {
      for (key, node) in entries where key.cacheKey.belongs(to: cacheKey) {
        unlink(node)
      }
    }
  }

  private func unlink(_ node: Node) {
    entries.removeValue(forKey: node.key)
    bytes -= node.image.cachedByteCount
    let older = node.older, newer = node.newer
    if let older { older.newer = newer } else { oldest = newer }
    if let newer { newer.older = older } else { newest = older }
    node.newer = nil
    node.older = nil
  }

  private func appendNewest(_ node: Node) {
    if let last = newest {
      last.newer = node
      node.older = last
    } else {
      oldest = node
    }
    newest = node
  }

  private func moveToNewest(_ node: Node) {
    guard newest !== node else { return }
    let older = node.older, newer = node.newer
    if let older { older.newer = newer } else { oldest = newer }
    newer?.older = older
    node.newer = nil
    node.older = nil
    appendNewest(node)
  }
}
