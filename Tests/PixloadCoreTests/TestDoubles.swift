@testable import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

/// A network that does nothing until the test says so: it records every start, cancel and
/// priority change, and the test completes transfers by hand.
final class ManualDataLoader: DataLoading, @unchecked Sendable {
  struct Started {
    let id: TransferID
    let url: String
    let headers: [String]
    let revalidating: (etag: String, lastModified: String)?
    let delay: UInt64
    let progress: TransferProgress?
    let completion: @Sendable (Result<DownloadedData, LoadError>) -> Void
  }

  private let lock = Lock()
  private var nextID: TransferID = 0
  private var _started: [Started] = []
  private var _cancelled: Set<TransferID> = []
  private var _startedNow: Set<TransferID> = []
  private var _postponed: [TransferID: Int] = [:]
  private var _priorities: [TransferID: Int32] = [:]

  var started: [Started] { lock.withLock { _started } }
  var cancelled: Set<TransferID> { lock.withLock { _cancelled } }
  func priority(of id: TransferID) -> Int32? { lock.withLock { _priorities[id] } }

  func start(url: RequestURL, headers: [String], revalidating: (etag: String, lastModified: String)?,
             delay: UInt64, priority: Int32,
             progress: TransferProgress?,
             completion: @escaping @Sendable (Result<DownloadedData, LoadError>) -> Void) -> TransferID {
    lock.withLock {
      nextID += 1
      _started.append(Started(id: nextID, url: url.text, headers: headers, revalidating: revalidating, delay: delay,
                              progress: progress, completion: completion))
      _priorities[nextID] = priority
      return nextID
    }
  }

  func cancel(_ id: TransferID) { lock.withLock { _ = _cancelled.insert(id) } }
  func startNow(_ id: TransferID) { lock.withLock { _ = _startedNow.insert(id) } }
  var startedNow: Set<TransferID> { lock.withLock { _startedNow } }
  func postpone(_ id: TransferID, nanoseconds: UInt64) { lock.withLock { _postponed[id, default: 0] += 1 } }
  /// How many times each transfer's start was postponed.
  var postponed: [TransferID: Int] { lock.withLock { _postponed } }
  func setPriority(_ id: TransferID, _ priority: Int32) { lock.withLock { _priorities[id] = priority } }
  func shutdown() {}
  /// What the test says the network delivers.
  var measured: Throughput? {
    get { lock.withLock { _measured } }
    set { lock.withLock { _measured = newValue } }
  }
  private var _measured: Throughput?
  var throughput: Throughput? { measured }

  /// Finishes transfer `index` (in start order) with `bytes`, or with `error`.
  func finish(_ index: Int, bytes: [UInt8] = Array("ok".utf8), error: LoadError? = nil,
              status: Int = 200, caching: ResponseCaching = ResponseCaching()) {
    let transfer = started[index]
    if let error {
      transfer.completion(.failure(error))
    } else {
      transfer.completion(.success(DownloadedData(bytes: bytes, httpStatus: status, caching: caching)))
    }
  }
}

/// Decodes any body into a solid image of the requested size (4x3 when unsized) whose first
/// byte is the body's length; "bad" fails as a corrupt image. Counts decodes.
final class FakeDecoder: ImageDecoding, @unchecked Sendable {
  private let lock = Lock()
  private var _count = 0
  var count: Int { lock.withLock { _count } }
  /// The buffer of every image made, in order (for tests of who writes where).
  private var _buffers: [UnsafeMutableRawPointer] = []
  var buffers: [UnsafeMutableRawPointer] { lock.withLock { _buffers } }

  func decode(_ data: [UInt8], variant: ImageVariant, maxPixels: UInt64) -> Result<Image, LoadError> {
    lock.withLock { _count += 1 }
    if data == Array("bad".utf8) { return .failure(LoadError(.corruptImage, "fake corrupt")) }
    let width = variant.width > 0 ? variant.width : 4
    let height = variant.height > 0 ? variant.height : 3
    let bpp = variant.format.bytesPerPixel
    let pixels = malloc(width * height * bpp)!
    lock.withLock { _buffers.append(pixels) }
    memset(pixels, Int32(data.count & 0xFF), width * height * bpp)
    return .success(Image(width: width, height: height, stride: width * bpp, format: variant.format,
                          originalWidth: width, originalHeight: height, takingPixels: pixels))
  }
}

/// Collects handler calls; every handler call is checked to be the only one for its token.
final class Recorder: @unchecked Sendable {
  private let lock = Lock()
  private var outcomes: [UInt64: [Outcome]] = [:]

  func handler(_ token: UInt64, _ outcome: Outcome) {
    lock.withLock { outcomes[token, default: []].append(outcome) }
  }

  func calls(_ token: UInt64) -> Int { lock.withLock { outcomes[token]?.count ?? 0 } }
  var totalCalls: Int { lock.withLock { outcomes.values.reduce(0) { $0 + $1.count } } }
  func outcome(_ token: UInt64) -> Outcome? { lock.withLock { outcomes[token]?.first } }

  func status(_ token: UInt64) -> Status? {
    switch outcome(token) {
    case .success?: return .ok
    case .failure(let error)?: return error.status
    case nil: return nil
    }
  }
}

extension CompletionQueue {
  /// Drains until `count` handlers have run in total or five seconds pass. Waits on the
  /// eventfd (no sleeping): returns as soon as results arrive.
  @discardableResult
  func drain(until recorder: Recorder, reaches count: Int, timeoutMilliseconds: UInt64 = 5000) -> Bool {
    let deadline = monotonicNanoseconds() + timeoutMilliseconds * 1_000_000
    while recorder.totalCalls < count {
      let now = monotonicNanoseconds()
      if now >= deadline { return false }
      _ = wait(timeoutMilliseconds: Int32((deadline - now) / 1_000_000) + 1)
      _ = dispatch(max: 0)
    }
    return true
  }
}

/// A disk tier that answers only when the test says so: it records every lookup, cancel,
/// store and received response, so the coordinator's disk rules are tested without a
/// directory, a disk thread or a wait.
final class ManualDiskTier: DiskTier, @unchecked Sendable {
  /// One lookup job: the variants asked for (longest chain first).
  struct VariantLookup {
    let variants: [ImageVariant]
    let policy: ImageRequest.CachePolicy
    let job: DiskJob
    let found: @Sendable (VariantFound?) -> Void
    /// The first variant asked for.
    var variant: ImageVariant { variants[0] }
    /// Answers with `image` as the first variant, or a miss of all.
    func answer(_ image: Image?) { found(image.map { VariantFound(index: 0, image: $0) }) }
  }
  struct OriginalLookup {
    let key: CacheKey
    let policy: ImageRequest.CachePolicy
    let job: DiskJob
    let answer: @Sendable (DiskAnswer) -> Void
  }

  /// Variants with both sides at most this are kept; 0: none.
  let variantMaxSide: Int
  private let lock = Lock()
  private var _variantLookups: [VariantLookup] = []
  private var _originalLookups: [OriginalLookup] = []
  private var _cancelled: [ObjectIdentifier] = []
  private var _storedVariants: [ImageVariant] = []
  private var _received: [(CacheKey, Int)] = []
  private var _receivedResponses: [(CacheKey, DownloadedData)] = []

  init(variantMaxSide: Int = 0) { self.variantMaxSide = variantMaxSide }

  var variantLookups: [VariantLookup] { lock.withLock { _variantLookups } }
  var originalLookups: [OriginalLookup] { lock.withLock { _originalLookups } }
  var storedVariants: [ImageVariant] { lock.withLock { _storedVariants } }
  /// Each finished transfer handed to the tier: its key and HTTP status.
  var received: [(CacheKey, Int)] { lock.withLock { _received } }
  /// The same, whole.
  var receivedResponses: [(CacheKey, DownloadedData)] { lock.withLock { _receivedResponses } }
  func wasCancelled(_ job: DiskJob) -> Bool { lock.withLock { _cancelled.contains(ObjectIdentifier(job)) } }

  /// A stale stored original with these validators and bytes.
  static func stored(_ bytes: [UInt8], etag: String) -> StoredOriginal {
    var metadata = DiskCache.Metadata()
    metadata.etag = etag
    return StoredOriginal(etag: etag, lastModified: "", entry: DiskCache.Entry(bytes: bytes, metadata: metadata))
  }

  func keepsVariant(_ variant: ImageVariant) -> Bool {
    variantMaxSide > 0 && variant.width > 0 && variant.width <= variantMaxSide && variant.height <= variantMaxSide
  }

  func lookUpVariants(_ variants: [ImageVariant], policy: ImageRequest.CachePolicy, priority: Int32,
                      answer: @escaping @Sendable (VariantFound?) -> Void) -> DiskJob {
    let job = DiskJob()
    lock.withLock { _variantLookups.append(VariantLookup(variants: variants, policy: policy, job: job, found: answer)) }
    return job
  }

  func lookUpOriginal(_ key: CacheKey, policy: ImageRequest.CachePolicy, priority: Int32,
                      answer: @escaping @Sendable (DiskAnswer) -> Void) -> DiskJob {
    let job = DiskJob()
    lock.withLock { _originalLookups.append(OriginalLookup(key: key, policy: policy, job: job, answer: answer)) }
    return job
  }

  func setPriority(_ job: DiskJob, _ priority: Int32) {}
  func cancel(_ job: DiskJob) { lock.withLock { _cancelled.append(ObjectIdentifier(job)) } }

  func received(_ response: DownloadedData, for key: CacheKey, url: RequestURL,
                revalidating stored: StoredOriginal?) -> ReceivedBytes {
    lock.withLock {
      _received.append((key, response.httpStatus))
      _receivedResponses.append((key, response))
    }
    var data = response
    var source = response.source
    if response.httpStatus == 304, let stored {
      data.bytes = stored.entry.bytes
      source = .revalidated
    }
    return ReceivedBytes(data: data, source: source, origin: OriginalRecord(metadata: .init(), bytes: data.bytes))
  }

  func storeVariant(_ image: Image, of variant: ImageVariant, origin: OriginalRecord,
                    stored: @escaping @Sendable (Int) -> Void) {
    guard keepsVariant(variant) else { return }
    lock.withLock { _storedVariants.append(variant) }
    stored(image.byteCount)
  }

  func remove(_ key: CacheKey) {}
  func removeAll() {}
  var bytesSeen: Int { 0 }
  func shutdown() {}
}

/// A clock the test moves by hand (monotonic nanoseconds), readable from any thread: an
/// engine reads it on its own.
final class ManualClock: @unchecked Sendable {
  private let lock = Lock()
  private var nanoseconds: UInt64 = 1_000_000_000

  var now: UInt64 { lock.withLock { nanoseconds } }
  func advance(nanoseconds step: UInt64) { lock.withLock { nanoseconds += step } }
}
