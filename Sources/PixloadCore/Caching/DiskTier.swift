#if canImport(Glibc)
import Glibc
#endif

/// The disk stage of the pipeline, as the coordinator sees it: what the disk holds for a
/// request and whether it may be served, and keeping what the network brought. The tier
/// owns the whole disk rule (freshness, the cache-only policy, revalidation, the variant
/// descriptor and its rendition, checksums); the coordinator only carries its answers.
///
/// - important: Implementations must be thread safe. Lookups answer on a thread of the
///   tier's, never inside the call (the coordinator calls them holding its lock), at most
///   once, and not at all once cancelled or shut down.
public protocol DiskTier: AnyObject, Sendable {
  /// Whether decoded variants like `variant` are kept on disk, so that looking one up
  /// first may spare the download and the decode.
  func keepsVariant(_ variant: ImageVariant) -> Bool
  /// Looks for decoded variants in one job, in order (a processed variant and the
  /// variants it is made from, longest chain first): `answer` gets the first that may be
  /// served now (fresh, or any under `.cacheOnly`) with its index in `variants`, nil when
  /// none may. The variants are ones the tier keeps (`keepsVariant`).
  func lookUpVariants(_ variants: [ImageVariant], policy: ImageRequest.CachePolicy, priority: Int32,
                      answer: @escaping @Sendable (VariantFound?) -> Void) -> DiskJob
  /// Looks for the encoded bytes of `key`.
  func lookUpOriginal(_ key: CacheKey, policy: ImageRequest.CachePolicy, priority: Int32,
                      answer: @escaping @Sendable (DiskAnswer) -> Void) -> DiskJob
  func setPriority(_ job: DiskJob, _ priority: Int32)
  func cancel(_ job: DiskJob)
  /// A finished transfer of `url` for `key` (conditional on `revalidating` when set): the
  /// bytes to decode (the stored ones when the server said 304) and where they came from.
  /// Stores the bytes in the background when the response lets it. Called without the
  /// coordinator's lock (a tier may take its own or touch the disk here).
  func received(_ response: DownloadedData, for key: CacheKey, url: RequestURL,
                revalidating: StoredOriginal?) -> ReceivedBytes
  /// Keeps `image`, decoded from the bytes `origin` describes, as the variant `variant`
  /// when the tier keeps such variants; `stored(bytes written)` runs after a write, on a
  /// tier thread or inside this call (the coordinator does not hold its lock here).
  func storeVariant(_ image: Image, of variant: ImageVariant, origin: OriginalRecord,
                    stored: @escaping @Sendable (Int) -> Void)
  /// Forgets `key` and the credentialed keys made from it, with their variants.
  func remove(_ key: CacheKey)
  /// Empties the cache. Blocks on the disk.
  func removeAll()
  /// The cache's size as last seen, without touching the disk.
  var bytesSeen: Int { get }
  /// Finishes the writes already queued and stops the tier's threads.
  func shutdown()
}

/// A queued disk job, to re-rank or cancel; a tier of one's own makes its own with `init()`.
public final class DiskJob: @unchecked Sendable {
  let poolJob: PriorityWorkPool.Job?

  public init() { poolJob = nil }
  init(_ job: PriorityWorkPool.Job) { poolJob = job }
}

/// A decoded variant a lookup found: which of those asked for, and its image.
public struct VariantFound: Sendable {
  public let index: Int
  public let image: Image

  public init(index: Int, image: Image) {
    self.index = index
    self.image = image
  }
}

/// The tier's answer for the encoded bytes of a key.
public enum DiskAnswer: Sendable {
  /// Serve these bytes without asking the server.
  case fresh([UInt8], OriginalRecord)
  /// A stale copy with validators: fetch with the request made conditional on it.
  case revalidate(StoredOriginal)
  /// Nothing usable: fetch.
  case miss
  /// Nothing usable, and the request may not fetch (`.cacheOnly`).
  case notCached
}

/// A stale stored original a conditional request is made for: its validators, and the
/// bytes a 304 makes current again.
public struct StoredOriginal: Sendable {
  public let etag: String
  public let lastModified: String
  let entry: DiskCache.Entry

  /// What makes the request conditional (If-None-Match, If-Modified-Since).
  public var validators: (etag: String, lastModified: String) { (etag, lastModified) }
}

/// What a finished transfer gives the decoders: the bytes, where they came from, and the
/// record a decoded variant of them keeps (nil: no variant may be stored: no-store, file://,
/// a transfer that ended early).
public struct ReceivedBytes: Sendable {
  public var data: DownloadedData
  public var source: ImageSource
  public var origin: OriginalRecord?
}

/// What a decoded variant written to disk carries of its original: the response's metadata
/// (its freshness follows the original's) and the bytes' identity, the checksum computed
/// once, on the first disk thread that needs it (the original's write or a variant's),
/// never on the decode path.
public final class OriginalRecord: @unchecked Sendable {
  let metadata: DiskCache.Metadata
  private let bytes: [UInt8]
  private let lock = Lock()
  private var known: VariantOrigin?

  init(metadata: DiskCache.Metadata, bytes: [UInt8]) {
    self.metadata = metadata
    self.bytes = bytes
  }

  init(metadata: DiskCache.Metadata, entry: DiskCache.Entry) {
    self.metadata = metadata
    bytes = []
    known = VariantOrigin(length: UInt64(entry.bytes.count), checksum: entry.checksum)
  }

  var origin: VariantOrigin {
    lock.withLock {
      if let known { return known }
      let computed = VariantOrigin(length: UInt64(bytes.count), checksum: DiskCache.checksum(bytes))
      known = computed
      return computed
    }
  }
}

/// The disk tier over a `DiskCache` directory: two threads of its own, so a disk hit never
/// waits behind decoding or the network and the host's thread never touches the disk; the
/// directory opened on the first job.
public final class LocalDiskTier: DiskTier, @unchecked Sendable {
  private let pool: PriorityWorkPool
  private let lazyCache: LazyDiskCache
  private let freshness: HTTPFreshness
  /// Variants whose sides are both at most this are kept; 0: none.
  private let variantMaxSide: Int

  /// The rendition of decoded variants kept on disk: raise it whenever decoding gives other
  /// pixels for the same request (another resampler, a colour fix), so that thumbnails an
  /// older library kept are not served by a newer one (they are never looked up again and
  /// age out, least recently used).
  /// 2: colour management (an ICC-tagged file's thumbnail is now converted to sRGB).
  public static let variantRendition = 2

  /// `directory` nil: `DiskCache.defaultDirectory`. `ignoresHTTPFreshness`: every stored
  /// copy is fresh until evicted. `log` gets the warnings (an unusable directory, a dropped
  /// corrupt entry).
  public init(directory: String?, capacityBytes: Int, maxAgeSeconds: Int, ignoresHTTPFreshness: Bool,
              variantMaxSide: Int, log: @escaping @Sendable (String) -> Void) throws(LoadError) {
    pool = try PriorityWorkPool(threadCount: 2, name: "pxl-disk")
    lazyCache = LazyDiskCache(directory: directory ?? DiskCache.defaultDirectory, capacityBytes: capacityBytes,
                              maxAgeSeconds: maxAgeSeconds, log: log)
    freshness = HTTPFreshness(ignoresServer: ignoresHTTPFreshness)
    self.variantMaxSide = variantMaxSide
    // Read the directory once, in the background: a large cache must not delay a first load.
    _ = pool.submit(priority: Int32.min) { [lazyCache] in lazyCache.cache()?.rescan() }
  }

  /// The cache, opened on first use; nil when unusable. Blocks on the disk.
  public var cache: DiskCache? { lazyCache.cache() }
  public var bytesSeen: Int { lazyCache.bytesSeen }

  /// The key of `variant` among the decoded variants on disk, nil when it is not one the
  /// tier keeps (variants off, no target size, a side over the limit, an animation: a
  /// variant file holds one frame).
  private func variantKey(_ variant: ImageVariant) -> VariantKey? {
    let limit = variantMaxSide
    guard limit > 0, !variant.animates, !variant.keepsSource, variant.width > 0 || variant.height > 0, variant.width <= limit,
          variant.height <= limit else { return nil }
    return VariantKey(variant, rendition: Self.variantRendition)
  }

  public func keepsVariant(_ variant: ImageVariant) -> Bool { variantKey(variant) != nil }

  public func lookUpVariants(_ variants: [ImageVariant], policy: ImageRequest.CachePolicy, priority: Int32,
                             answer: @escaping @Sendable (VariantFound?) -> Void) -> DiskJob {
    let keys = variants.map { ($0, variantKey($0)) }
    return DiskJob(pool.submit(priority: priority) { [self] in
      // A fresh variant (or any, offline) is served; a stale one is made anew from its
      // revalidated or refetched original.
      for (index, (variant, key)) in keys.enumerated() {
        guard let key, let entry = cache?.variant(key, currentCodecs: variant.codecs.stamps) else { continue }
        if freshness.isFresh(entry.metadata) || policy == .cacheOnly {
          answer(VariantFound(index: index, image: entry.image))
          return
        }
      }
      answer(nil)
    })
  }

  public func lookUpOriginal(_ key: CacheKey, policy: ImageRequest.CachePolicy, priority: Int32,
                             answer: @escaping @Sendable (DiskAnswer) -> Void) -> DiskJob {
    DiskJob(pool.submit(priority: priority) { [self] in
      let entry = cache?.entry(for: key.text)
      // Offline, a stale copy beats none.
      if let entry, freshness.isFresh(entry) || policy == .cacheOnly {
        answer(.fresh(entry.bytes, OriginalRecord(metadata: entry.metadata, entry: entry)))
      } else if let entry, !entry.metadata.etag.isEmpty || !entry.metadata.lastModified.isEmpty {
        // Stale with validators: ask the server whether it changed (a 304 reuses the bytes).
        answer(.revalidate(StoredOriginal(etag: entry.metadata.etag, lastModified: entry.metadata.lastModified,
                                          entry: entry)))
      } else {
        answer(policy == .cacheOnly ? .notCached : .miss)
      }
    })
  }

  public func setPriority(_ job: DiskJob, _ priority: Int32) {
    if let poolJob = job.poolJob { pool.setPriority(poolJob, priority) }
  }

  public func cancel(_ job: DiskJob) {
    if let poolJob = job.poolJob { pool.cancel(poolJob) }
  }

  public func received(_ response: DownloadedData, for key: CacheKey, url: RequestURL,
                       revalidating stored: StoredOriginal?) -> ReceivedBytes {
    var data = response
    var source = response.source
    var metadata = HTTPFreshness.metadata(for: response.caching)
    if response.httpStatus == 304, let stored {
      // Not modified: the stored bytes are current again. Validators the 304 did not
      // repeat are kept.
      data.bytes = stored.entry.bytes
      source = .revalidated
      if metadata.etag.isEmpty { metadata.etag = stored.etag }
      if metadata.lastModified.isEmpty { metadata.lastModified = stored.lastModified }
    }
    // Keep the bytes on disk for next time, without delaying the decode; never what the
    // server marked no-store, nor a prefix, nor what its producer keeps off disk.
    guard response.diskStorage.allows(url), !response.caching.noStore, !response.endedEarly else {
      return ReceivedBytes(data: data, source: source, origin: nil)
    }
    let origin = response.httpStatus == 304 && stored != nil
      ? OriginalRecord(metadata: metadata, entry: stored!.entry) : OriginalRecord(metadata: metadata, bytes: data.bytes)
    let bytes = data.bytes
    _ = pool.submit(priority: Int32.min + 1) { [self] in
      cache?.store(bytes, metadata: metadata, for: key.text, checksum: origin.origin.checksum)
    }
    return ReceivedBytes(data: data, source: source, origin: origin)
  }

  public func storeVariant(_ image: Image, of variant: ImageVariant, origin: OriginalRecord,
                           stored: @escaping @Sendable (Int) -> Void) {
    guard let key = variantKey(variant), image.width <= variantMaxSide, image.height <= variantMaxSide
    else { return }
    _ = pool.submit(priority: Int32.min + 1) { [self] in
      guard let cache else { return }
      let written = cache.storeVariant(image, key, metadata: origin.metadata, origin: origin.origin)
      if written > 0 { stored(written) }
    }
  }

  public func remove(_ key: CacheKey) {
    _ = pool.submit(priority: Int32.max) { [self] in cache?.remove(key.text) }
  }

  public func removeAll() { cache?.removeAll() }

  public func shutdown() { pool.shutdownAfterDraining() }
}
