import XCTest
@testable import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

/// The disk cache on the real file system, in a fresh temporary directory per test.
final class DiskCacheTests: XCTestCase {
  var directory = ""
  var logged: [String] = []

  override func setUp() {
    var template = Array("/tmp/pxl-disk-XXXXXX".utf8CString)
    directory = String(cString: mkdtemp(&template)!) + "/cache"
    logged = []
  }

  override func tearDown() {
    _ = system("rm -rf '\(directory.dropLast(6))'")
  }

  func makeCache(capacity: Int = 1 << 20) throws -> DiskCache {
    try DiskCache(directory: directory, capacityBytes: capacity, log: { [unowned self] in self.logged.append($0) })
  }

  func path(for key: String) -> String { "\(directory)/\(DiskCache.fileName(for: key))" }

  // The rules of the directory (verification, the size limit, LRU, the age limit, several
  // writers) hold for both kinds of entry: the tests below run once for each.
  enum Kind: CaseIterable { case encoded, variant }
  static let descriptor = "v1 test"

  /// A fresh, empty directory for the next kind.
  func startOver() {
    _ = system("rm -rf '\(directory)'")
    logged = []
  }

  func path(_ kind: Kind, _ key: String) -> String {
    switch kind {
    case .encoded: return path(for: key)
    case .variant: return "\(directory)/\(DiskCache.variantFileName(VariantKey(cacheKey: CacheKey(key), descriptor: Self.descriptor)))"
    }
  }

  /// Stores `bytes` as an encoded entry, or as the pixels of a one-row GRAY8 variant.
  func put(_ cache: DiskCache, _ kind: Kind, _ key: String, _ bytes: [UInt8],
           metadata: DiskCache.Metadata = .init()) {
    switch kind {
    case .encoded:
      cache.store(bytes, metadata: metadata, for: key)
    case .variant:
      let pixels = malloc(bytes.count)!
      bytes.withUnsafeBytes { pixels.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
      let image = Image(width: bytes.count, height: 1, stride: bytes.count, format: .gray8,
                        originalWidth: 2 * bytes.count, originalHeight: 2, takingPixels: pixels)
      XCTAssertGreaterThan(cache.storeVariant(image, VariantKey(cacheKey: CacheKey(key), descriptor: Self.descriptor), metadata: metadata,
                                              origin: VariantOrigin(length: 0, checksum: 0)), 0)
    }
  }

  /// The bytes `put` stored, verified; nil on a miss.
  func get(_ cache: DiskCache, _ kind: Kind, _ key: String) -> [UInt8]? {
    switch kind {
    case .encoded:
      return cache.entry(for: key)?.bytes
    case .variant:
      guard let image = cache.variant(VariantKey(cacheKey: CacheKey(key), descriptor: Self.descriptor))?.image else { return nil }
      return Array(UnsafeRawBufferPointer(start: image.pixels, count: image.byteCount))
    }
  }

  func testRoundTripWithMetadataAndPrivatePermissions() throws {
    let cache = try makeCache()
    var metadata = DiskCache.Metadata()
    metadata.etag = "\"abc\""
    metadata.lastModified = "Sun, 22 Nov 2026 05:00:00 GMT"
    metadata.expiresAt = 1_900_000_000
    cache.store(Array(0..<200).map { UInt8($0) }, metadata: metadata, for: "http://h/a.jpg")
    let entry = try XCTUnwrap(cache.entry(for: "http://h/a.jpg"))
    XCTAssertEqual(entry.bytes, Array(0..<200).map { UInt8($0) })
    XCTAssertEqual(entry.metadata, metadata)
    XCTAssertNil(cache.entry(for: "http://h/b.jpg"))
    var info = stat()
    XCTAssertEqual(stat(directory, &info), 0)
    XCTAssertEqual(info.st_mode & 0o777, 0o700)
    XCTAssertEqual(stat(path(for: "http://h/a.jpg"), &info), 0)
    XCTAssertEqual(info.st_mode & 0o777, 0o600)
  }

  func testDamagedTruncatedAndForeignEntriesAreDroppedNotServed() throws {
    for kind in Kind.allCases {
      startOver()
      let cache = try makeCache()
      for key in ["k1", "k2", "k3", "k5"] { put(cache, kind, key, [UInt8](repeating: 7, count: 1000)) }
      XCTAssertEqual(get(cache, kind, "k5"), [UInt8](repeating: 7, count: 1000), "\(kind)")
      // One flipped byte in the body.
      let fd = open(path(kind, "k1"), O_RDWR)
      var byte: UInt8 = 0x55
      pwrite(fd, &byte, 1, 600)
      close(fd)
      XCTAssertNil(get(cache, kind, "k1"), "\(kind)")
      XCTAssertNotEqual(access(path(kind, "k1"), F_OK), 0, "\(kind): deleted")
      // Truncated, as by a crash of a writer that did not use rename.
      truncate(path(kind, "k2"), 500)
      XCTAssertNil(get(cache, kind, "k2"), "\(kind)")
      // Another key's entry under this key's name (a hash collision): a miss, not its image.
      rename(path(kind, "k3"), path(kind, "k4"))
      XCTAssertNil(get(cache, kind, "k4"), "\(kind)")
      XCTAssertEqual(logged.count, 2, "\(kind): one line per dropped entry: \(logged)")
    }
  }

  /// A variant's header is covered by its checksum too: a damaged size or format is a
  /// dropped entry, never an image of the wrong shape.
  func testAVariantWithADamagedHeaderIsDropped() throws {
    let cache = try makeCache()
    for (offset, key) in [(20, "width"), (36, "original-width"), (64, "expiry")] {
      put(cache, .variant, key, [UInt8](repeating: 9, count: 64))
      let fd = open(path(.variant, key), O_RDWR)
      var byte: UInt8 = 0x01
      pwrite(fd, &byte, 1, off_t(offset))
      close(fd)
      XCTAssertNil(get(cache, .variant, key), key)
      XCTAssertNotEqual(access(path(.variant, key), F_OK), 0, "\(key): deleted")
    }
    XCTAssertEqual(logged.count, 3, "\(logged)")
  }

  /// Whatever one damaged byte or a truncation does to a variant file, reading it never
  /// traps and never gives an image: every byte is covered by the checksum or the checks.
  func testEverySingleByteDamageOrTruncationOfAVariantIsAMiss() throws {
    let cache = try makeCache()
    put(cache, .variant, "k", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
    let file = try XCTUnwrap(FileManager.default.contents(atPath: path(.variant, "k"))).map { $0 }
    XCTAssertEqual(file.count, DiskCache.variantHeaderSize + "\(Self.descriptor)\nk".utf8.count + 12)
    func write(_ bytes: [UInt8]) {
      let fd = open(path(.variant, "k"), O_WRONLY | O_CREAT | O_TRUNC, 0o600)
      _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
      close(fd)
    }
    for offset in 0..<file.count {
      var damaged = file
      damaged[offset] ^= 0x10
      write(damaged)
      XCTAssertNil(get(cache, .variant, "k"), "byte \(offset) damaged")
    }
    for length in 0..<file.count {
      write(Array(file[..<length]))
      XCTAssertNil(get(cache, .variant, "k"), "truncated to \(length)")
    }
    write(file)
    XCTAssertEqual(get(cache, .variant, "k"), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], "the undamaged file reads")
  }

  /// A variant is served without its original, and its image is what was stored; one made
  /// from other bytes than the original now on disk is outdated and dropped; removing a
  /// key removes its variants and no other key's.
  func testVariantsFollowTheirOriginal() throws {
    let cache = try makeCache()
    let pixels = malloc(3 * 2 * 4)!
    for i in 0..<24 { pixels.storeBytes(of: UInt8(i), toByteOffset: i, as: UInt8.self) }
    let image = Image(width: 2, height: 3, stride: 8, format: .bgra8Premultiplied, originalWidth: 400,
                      originalHeight: 600, takingPixels: pixels)
    var metadata = DiskCache.Metadata()
    metadata.etag = "\"e1\""
    metadata.lastModified = "Sun, 22 Nov 2026 05:00:00 GMT"
    metadata.expiresAt = 1_900_000_000
    let original = Array("original bytes".utf8)
    cache.store(original, metadata: metadata, for: "http://h/a.jpg")
    let origin = VariantOrigin(length: UInt64(original.count), checksum: DiskCache.checksum(original))
    XCTAssertEqual(cache.entry(for: "http://h/a.jpg")?.checksum, origin.checksum)
    XCTAssertGreaterThan(cache.storeVariant(image, VariantKey(cacheKey: CacheKey("http://h/a.jpg"), descriptor: "small"), metadata: metadata,
                                            origin: origin), 0)
    cache.storeVariant(image, VariantKey(cacheKey: CacheKey("http://h/b.jpg"), descriptor: "small"), metadata: metadata, origin: origin)

    let read = try XCTUnwrap(cache.variant(VariantKey(cacheKey: CacheKey("http://h/a.jpg"), descriptor: "small")))
    XCTAssertEqual([read.image.width, read.image.height, read.image.stride, read.image.originalWidth,
                    read.image.originalHeight], [2, 3, 8, 400, 600])
    XCTAssertEqual(read.image.format, .bgra8Premultiplied)
    XCTAssertEqual(Array(UnsafeRawBufferPointer(start: read.image.pixels, count: 24)), (0..<24).map { UInt8($0) })
    XCTAssertEqual(read.metadata, metadata)
    XCTAssertEqual(read.origin, origin)
    XCTAssertNil(cache.variant(VariantKey(cacheKey: CacheKey("http://h/a.jpg"), descriptor: "large")), "another variant: a miss")

    // The original evicted: the variant is still served.
    unlink(path(for: "http://h/a.jpg"))
    XCTAssertNotNil(cache.variant(VariantKey(cacheKey: CacheKey("http://h/a.jpg"), descriptor: "small")))
    // The original stored again with other bytes (a reload, a changed image): outdated.
    cache.store(Array("new bytes".utf8), metadata: metadata, for: "http://h/a.jpg")
    XCTAssertNil(cache.variant(VariantKey(cacheKey: CacheKey("http://h/a.jpg"), descriptor: "small")))
    XCTAssertNotEqual(access("\(directory)/\(DiskCache.variantFileName(VariantKey(cacheKey: CacheKey("http://h/a.jpg"), descriptor: "small")))",
                             F_OK), 0, "deleted")
    XCTAssertTrue(logged.isEmpty, "outdated is not damaged: \(logged)")

    // Removing a key removes its variants, not another key's.
    cache.storeVariant(image, VariantKey(cacheKey: CacheKey("http://h/a.jpg"), descriptor: "small"), metadata: metadata, origin: origin)
    cache.storeVariant(image, VariantKey(cacheKey: CacheKey("http://h/a.jpg"), descriptor: "other"), metadata: metadata, origin: origin)
    cache.store(original, metadata: metadata, for: "http://h/a.jpg")
    cache.remove("http://h/a.jpg")
    XCTAssertNil(cache.entry(for: "http://h/a.jpg"))
    XCTAssertNil(cache.variant(VariantKey(cacheKey: CacheKey("http://h/a.jpg"), descriptor: "small")))
    XCTAssertNil(cache.variant(VariantKey(cacheKey: CacheKey("http://h/a.jpg"), descriptor: "other")))
    XCTAssertNotNil(cache.variant(VariantKey(cacheKey: CacheKey("http://h/b.jpg"), descriptor: "small")))
    cache.rescan()  // the unlink above went behind the ledger's back
    XCTAssertEqual(cache.count, 1, "\(cache.listEntries().map(\.name))")
  }

  func testAVariantACodecMadeIsCurrentOnlyWhileThatCodecIsRegistered() throws {
    let cache = try makeCache()
    func image(stamp: UInt32) -> Image {
      let pixels = malloc(4)!
      pixels.storeBytes(of: UInt32(0x0102_0304), as: UInt32.self)
      let image = Image(width: 1, height: 1, stride: 4, format: .rgba8, originalWidth: 8, originalHeight: 8,
                        takingPixels: pixels)
      image.decoderStamp = stamp
      return image
    }
    let origin = VariantOrigin(length: 0, checksum: 0)
    func stamps(_ codecs: (id: String, version: String)...) -> Set<UInt32> {
      CodecSignature(codecs.map { CodecSignature.Codec(id: $0.id, version: $0.version) }).stamps
    }
    let qoi1 = stamps(("qoi", "1.0")), both = stamps(("heic", "2"), ("qoi", "1.0"))
    XCTAssertEqual(qoi1.count, 1)
    XCTAssertFalse(qoi1.contains(0))
    // A stamp is the digest 0.5.0 wrote (of "id@version", a comma or line break in the
    // version written "_"), so the thumbnails already on disk stay current; a version's
    // comma is part of it, not a separator.
    XCTAssertEqual(qoi1, [KeyHash.stamp(of: "qoi@1.0")])
    XCTAssertEqual(stamps(("qoi", "1,0\n")), [KeyHash.stamp(of: "qoi@1_0_")])
    XCTAssertEqual(CodecSignature([CodecSignature.Codec(id: "qoi", version: "1,0")]).codecs.count, 1)
    cache.storeVariant(image(stamp: 0), VariantKey(cacheKey: CacheKey("http://h/a.jpg"), descriptor: "small"), metadata: .init(), origin: origin)
    cache.storeVariant(image(stamp: qoi1.first!), VariantKey(cacheKey: CacheKey("http://h/a.qoi"), descriptor: "small"), metadata: .init(),
                       origin: origin)

    // Built-in pixels: whatever codecs are registered.
    for current in [[], qoi1, both, stamps(("qoi", "2.0"))] {
      XCTAssertEqual(cache.variant(VariantKey(cacheKey: CacheKey("http://h/a.jpg"), descriptor: "small"), currentCodecs: current)?
                       .image.decoderStamp, 0)
    }
    // The codec's: while it is registered in that version, beside others or not.
    let read = cache.variant(VariantKey(cacheKey: CacheKey("http://h/a.qoi"), descriptor: "small"), currentCodecs: both)
    XCTAssertEqual(read?.image.decoderStamp, qoi1.first!)
    XCTAssertNotNil(cache.variant(VariantKey(cacheKey: CacheKey("http://h/a.qoi"), descriptor: "small"), currentCodecs: qoi1))
    // Another version: outdated, deleted silently.
    XCTAssertNil(cache.variant(VariantKey(cacheKey: CacheKey("http://h/a.qoi"), descriptor: "small"),
                               currentCodecs: stamps(("qoi", "1.1"))))
    XCTAssertNil(cache.variant(VariantKey(cacheKey: CacheKey("http://h/a.qoi"), descriptor: "small"), currentCodecs: qoi1), "deleted")
    // No longer registered: the same.
    cache.storeVariant(image(stamp: qoi1.first!), VariantKey(cacheKey: CacheKey("http://h/a.qoi"), descriptor: "small"), metadata: .init(),
                       origin: origin)
    XCTAssertNil(cache.variant(VariantKey(cacheKey: CacheKey("http://h/a.qoi"), descriptor: "small")))
    XCTAssertNil(cache.variant(VariantKey(cacheKey: CacheKey("http://h/a.qoi"), descriptor: "small"), currentCodecs: qoi1), "deleted")
    XCTAssertTrue(logged.isEmpty, "outdated is not damaged: \(logged)")
  }

  func testTotalStaysWithinCapacityAndEvictsLeastRecentlyUsed() throws {
    for kind in Kind.allCases {
      startOver()
      let entrySize = 10_000
      let cache = try makeCache(capacity: 5 * (entrySize + 100))
      for i in 0..<5 {
        put(cache, kind, "key\(i)", [UInt8](repeating: UInt8(i), count: entrySize))
        usleep(2000)  // distinct modification times for the LRU order
      }
      XCTAssertNotNil(get(cache, kind, "key0"))  // key0 becomes the most recently used
      usleep(2000)
      put(cache, kind, "key5", [UInt8](repeating: 9, count: entrySize))
      XCTAssertLessThanOrEqual(cache.totalBytes, cache.capacityBytes, "\(kind)")
      XCTAssertNil(get(cache, kind, "key1"), "\(kind): least recently used goes first")
      XCTAssertNotNil(get(cache, kind, "key0"), "\(kind)")
      XCTAssertNotNil(get(cache, kind, "key5"), "\(kind)")
      // What is on disk agrees with the view.
      let onDisk = try makeCache(capacity: cache.capacityBytes)
      onDisk.rescan()
      XCTAssertEqual(onDisk.totalBytes, cache.totalBytes, "\(kind)")
    }
  }

  /// Both kinds share one limit and one recency order.
  func testEncodedAndVariantEntriesShareTheLimitAndTheOrder() throws {
    let entrySize = 10_000
    let cache = try makeCache(capacity: 6 * (entrySize + 100))
    for i in 0..<6 {
      put(cache, i % 2 == 0 ? .encoded : .variant, "key\(i)", [UInt8](repeating: UInt8(i), count: entrySize))
      usleep(2000)
    }
    XCTAssertNotNil(get(cache, .encoded, "key0"))
    XCTAssertNotNil(get(cache, .variant, "key1"))
    usleep(2000)
    put(cache, .variant, "key6", [UInt8](repeating: 6, count: entrySize))
    XCTAssertLessThanOrEqual(cache.totalBytes, cache.capacityBytes)
    XCTAssertNil(get(cache, .encoded, "key2"), "the least recently used, of either kind, goes first")
    XCTAssertNotNil(get(cache, .encoded, "key0"))
    XCTAssertNotNil(get(cache, .variant, "key1"))
    XCTAssertNotNil(get(cache, .variant, "key6"))
  }

  /// The age limit counts from the last use (the file's modification time, which a hit
  /// touches): an entry unused for longer is dropped on read and by the start-up scan.
  func testEntriesUnusedPastTheAgeLimitAreDropped() throws {
    for kind in Kind.allCases {
      startOver()
      let cache = try DiskCache(directory: directory, capacityBytes: 1 << 20, maxAgeSeconds: 3600, log: { _ in })
      for key in ["old-read", "old-scanned", "recent"] { put(cache, kind, "http://h/\(key)", [1, 2, 3]) }
      func age(_ key: String, seconds: Int) {
        let when = timespec(tv_sec: time(nil) - seconds, tv_nsec: 0)
        XCTAssertEqual(utimensat(AT_FDCWD, path(kind, "http://h/\(key)"), [when, when], 0), 0)
      }
      age("old-read", seconds: 7200)
      age("old-scanned", seconds: 7200)
      age("recent", seconds: 1800)
      XCTAssertNil(get(cache, kind, "http://h/old-read"), "\(kind)")
      XCTAssertFalse(FileManager.default.fileExists(atPath: path(kind, "http://h/old-read")), "\(kind)")
      XCTAssertTrue(FileManager.default.fileExists(atPath: path(kind, "http://h/old-scanned")), "\(kind)")
      cache.rescan()
      XCTAssertFalse(FileManager.default.fileExists(atPath: path(kind, "http://h/old-scanned")), "\(kind)")
      XCTAssertEqual(get(cache, kind, "http://h/recent"), [1, 2, 3], "\(kind)")
      XCTAssertEqual(cache.count, 1, "\(kind)")
    }
  }

  func testTwoCachesOnOneDirectoryKeepTheLimit() throws {
    for kind in Kind.allCases {
      startOver()
      let entrySize = 4_000
      let capacity = 10 * (entrySize + 100)
      let a = try makeCache(capacity: capacity), b = try makeCache(capacity: capacity)
      for i in 0..<40 { put(i % 2 == 0 ? a : b, kind, "k\(i)", [UInt8](repeating: UInt8(i), count: entrySize)) }
      let check = try makeCache(capacity: capacity)
      check.rescan()
      XCTAssertLessThanOrEqual(check.totalBytes, capacity + entrySize + 100, "\(kind): over by at most one entry")
    }
  }

  func testAnUnwritableDirectoryIsRefused() throws {
    if getuid() == 0 {
      // root writes anywhere: a path under a regular file is unwritable for everyone.
      let file = directory + "-file"
      close(open(file, O_CREAT | O_WRONLY, 0o600))
      XCTAssertThrowsError(try DiskCache(directory: file + "/cache", capacityBytes: 1000, log: { _ in }))
    } else {
      XCTAssertThrowsError(try DiskCache(directory: "/proc/pixload", capacityBytes: 1000, log: { _ in }))
    }
  }

  /// Through the loader: a second loader on the same directory loads from disk, with no
  /// transfer; a reload goes to the network; cache-only misses fail clearly.
  func testASecondLoaderLoadsFromDiskWithoutNetwork() throws {
    var configuration = LoaderConfiguration()
    configuration.diskCacheBytes = 1 << 20
    configuration.diskCacheDirectory = directory
    configuration.decodeThreads = 1
    let firstNetwork = ManualDataLoader()
    let first = try ImageLoader(configuration: configuration, dataLoader: firstNetwork, decoder: FakeDecoder())
    let queue = try CompletionQueue()
    let recorder = Recorder()
    let a = try first.load(ImageRequest(url: "http://h/a.jpg"), queue: queue, handler: recorder.handler)
    let deadline = monotonicNanoseconds() + 5_000_000_000
    while firstNetwork.started.isEmpty && monotonicNanoseconds() < deadline { usleep(1000) }  // after the disk miss
    firstNetwork.finish(0, bytes: Array("abcdef".utf8))
    XCTAssertTrue(queue.drain(until: recorder, reaches: 1))
    XCTAssertEqual(recorder.status(a), .ok)
    first.close()  // finishes its disk writes

    // Tokens are per loader: the second one gets a recorder of its own.
    let recorder2 = Recorder()
    let secondNetwork = ManualDataLoader()
    let second = try ImageLoader(configuration: configuration, dataLoader: secondNetwork, decoder: FakeDecoder())
    let b = try second.load(ImageRequest(url: "http://h/a.jpg", targetWidth: 2, targetHeight: 2), queue: queue,
                            handler: recorder2.handler)
    var offline = ImageRequest(url: "http://h/missing.jpg")
    offline.cachePolicy = .cacheOnly
    let c = try second.load(offline, queue: queue, handler: recorder2.handler)
    XCTAssertTrue(queue.drain(until: recorder2, reaches: 2))
    guard case .success(let image, let source, _)? = recorder2.outcome(b) else { return XCTFail("disk hit expected") }
    XCTAssertEqual(source, .disk)
    XCTAssertEqual(image.pixels.load(as: UInt8.self), 6, "decoded from the 6 stored bytes")
    XCTAssertEqual(recorder2.status(c), .notCached)
    XCTAssertTrue(secondNetwork.started.isEmpty, "no transfer at all")

    var reload = ImageRequest(url: "http://h/a.jpg")
    reload.cachePolicy = .reload
    _ = try second.load(reload, queue: queue, handler: recorder2.handler)
    XCTAssertEqual(secondNetwork.started.count, 1, "a reload skips both caches")
    second.close()
    XCTAssertTrue(queue.drain(until: recorder2, reaches: 3))
    queue.close()
  }

  /// HTTP semantics through the loader: a stale entry with an ETag is revalidated and a
  /// 304 reuses the stored bytes; no-store is never written; ignoring freshness serves the
  /// stale entry without asking.
  func testStaleEntriesAreRevalidatedAndNoStoreIsNotKept() throws {
    var configuration = LoaderConfiguration()
    configuration.diskCacheBytes = 1 << 20
    configuration.diskCacheDirectory = directory
    configuration.decodeThreads = 1
    let queue = try CompletionQueue()

    func loadOnce(_ url: String, ignoring: Bool = false, respond: (ManualDataLoader) -> Void) throws
      -> (Outcome?, ManualDataLoader) {
      var settings = configuration
      settings.ignoresHTTPFreshness = ignoring
      let network = ManualDataLoader()
      let loader = try ImageLoader(configuration: settings, dataLoader: network, decoder: FakeDecoder())
      let recorder = Recorder()
      let token = try loader.load(ImageRequest(url: url), queue: queue, handler: recorder.handler)
      let deadline = monotonicNanoseconds() + 5_000_000_000
      while network.started.isEmpty && recorder.totalCalls == 0 && monotonicNanoseconds() < deadline {
        _ = queue.wait(timeoutMilliseconds: 5)
        _ = queue.dispatch(max: 0)
      }
      if !network.started.isEmpty { respond(network) }
      XCTAssertTrue(queue.drain(until: recorder, reaches: 1))
      loader.close()  // finishes disk writes
      return (recorder.outcome(token), network)
    }
    func source(_ outcome: Outcome?) -> ImageSource? {
      if case .success(_, let source, _)? = outcome { return source }
      return nil
    }

    var mustRevalidate = ResponseCaching()
    mustRevalidate.maxAge = 0
    mustRevalidate.etag = "\"v1\""
    let (first, _) = try loadOnce("http://h/a.jpg") { $0.finish(0, bytes: Array("abc".utf8), caching: mustRevalidate) }
    XCTAssertEqual(source(first), .network)

    let (second, network) = try loadOnce("http://h/a.jpg") { $0.finish(0, bytes: [], status: 304) }
    XCTAssertEqual(network.started.count, 1, "one conditional request")
    XCTAssertEqual(network.started.first?.revalidating?.etag, "\"v1\"")
    XCTAssertEqual(source(second), .revalidated)
    if case .success(let image, _, _)? = second {
      XCTAssertEqual(image.pixels.load(as: UInt8.self), 3, "decoded from the 3 stored bytes")
    }

    let (third, quiet) = try loadOnce("http://h/a.jpg", ignoring: true) { _ in }
    XCTAssertTrue(quiet.started.isEmpty, "freshness ignored: no request")
    XCTAssertEqual(source(third), .disk)

    var noStore = ResponseCaching()
    noStore.noStore = true
    _ = try loadOnce("http://h/secret.jpg") { $0.finish(0, bytes: Array("xyz".utf8), caching: noStore) }
    let (again, secondTry) = try loadOnce("http://h/secret.jpg") { $0.finish(0, bytes: Array("xyz".utf8)) }
    XCTAssertEqual(secondTry.started.count, 1, "no-store was not written: fetched again")
    XCTAssertEqual(source(again), .network)
    queue.close()
  }

  /// Loads `request` with a fresh loader on `directory`; `respond` answers the transfer if
  /// one starts. Closes the loader (which finishes its disk writes) before returning.
  func loadWithFreshLoader(_ request: ImageRequest, variantMaxSide: Int = 256, respond: (ManualDataLoader) -> Void = { _ in })
    throws -> (outcome: Outcome?, network: ManualDataLoader, decoder: FakeDecoder, stats: LoaderStatistics) {
    var configuration = LoaderConfiguration()
    configuration.diskCacheBytes = 1 << 20
    configuration.diskCacheDirectory = directory
    configuration.decodeThreads = 1
    configuration.diskVariantMaxSide = variantMaxSide
    let network = ManualDataLoader(), decoder = FakeDecoder()
    let loader = try ImageLoader(configuration: configuration, dataLoader: network, decoder: decoder)
    let queue = try CompletionQueue()
    let recorder = Recorder()
    let token = try loader.load(request, queue: queue, handler: recorder.handler)
    let deadline = monotonicNanoseconds() + 5_000_000_000
    while network.started.isEmpty && recorder.totalCalls == 0 && monotonicNanoseconds() < deadline {
      _ = queue.wait(timeoutMilliseconds: 5)
      _ = queue.dispatch(max: 0)
    }
    if !network.started.isEmpty { respond(network) }
    XCTAssertTrue(queue.drain(until: recorder, reaches: 1))
    loader.close()
    queue.close()
    return (recorder.outcome(token), network, decoder, loader.statistics)
  }

  func firstPixel(_ outcome: Outcome?) -> UInt8? {
    if case .success(let image, _, _)? = outcome { return image.pixels.load(as: UInt8.self) }
    return nil
  }

  func source(_ outcome: Outcome?) -> ImageSource? {
    if case .success(_, let source, _)? = outcome { return source }
    return nil
  }

  /// A warm start decodes nothing: a thumbnail made once is read back from disk by a fresh
  /// loader with no decode and no transfer, also when its encoded original was evicted.
  /// Sizes over the limit, and a limit of 0, store no variant.
  func testAFreshLoaderServesAStoredThumbnailWithoutDecoding() throws {
    let thumbnail = ImageRequest(url: "http://h/a.jpg", targetWidth: 150, targetHeight: 150, mode: .fill)
    let first = try loadWithFreshLoader(thumbnail) { $0.finish(0, bytes: Array("abcdef".utf8)) }
    XCTAssertEqual(source(first.outcome), .network)
    XCTAssertEqual(first.stats.variantsStored, 1)
    XCTAssertEqual(first.stats.variantBytesStored, 150 * 150 * 4 + DiskCache.variantHeaderSize
                   + VariantKey(cacheKey: "http://h/a.jpg",
                                descriptor: "v\(LocalDiskTier.variantRendition) 150x150 mode=1 format=0 orient=1").text.utf8.count)
    unlink(path(for: "http://h/a.jpg"))  // the original evicted

    let warm = try loadWithFreshLoader(thumbnail)
    XCTAssertEqual(source(warm.outcome), .disk)
    XCTAssertEqual(firstPixel(warm.outcome), 6, "the pixels decoded from the 6 bytes, stored")
    XCTAssertEqual(warm.decoder.count, 0, "no decode")
    XCTAssertTrue(warm.network.started.isEmpty, "no transfer")
    XCTAssertEqual(warm.stats.variantHits, 1)
    XCTAssertEqual(warm.stats.diskHits, 1)
    if case .success(let image, _, _)? = warm.outcome {
      XCTAssertEqual([image.width, image.height], [150, 150])
    }

    // Another size needs the original, which is gone: fetched again.
    let other = try loadWithFreshLoader(ImageRequest(url: "http://h/a.jpg", targetWidth: 100, targetHeight: 100)) {
      $0.finish(0, bytes: Array("abcdef".utf8))
    }
    XCTAssertEqual(other.network.started.count, 1)
    // Over the limit: no variant kept, the next start decodes.
    let large = ImageRequest(url: "http://h/a.jpg", targetWidth: 300, targetHeight: 300)
    XCTAssertEqual(try loadWithFreshLoader(large).stats.variantsStored, 0)
    XCTAssertEqual(try loadWithFreshLoader(large).decoder.count, 1)
    // Variants off: the stored one is not used, none is written.
    let off = try loadWithFreshLoader(thumbnail, variantMaxSide: 0)
    XCTAssertEqual(off.decoder.count, 1)
    XCTAssertEqual(off.stats.variantHits, 0)
  }

  /// A variant's freshness is its original's: a stale one is not served; the original is
  /// revalidated (304) and the variant written anew, fresh again; offline (cache-only) the
  /// stale one is served. A reload that brings other bytes outdates the stored variant.
  func testAVariantFollowsItsOriginalsFreshness() throws {
    let thumbnail = ImageRequest(url: "http://h/a.jpg", targetWidth: 64, targetHeight: 64)
    var mustRevalidate = ResponseCaching()
    mustRevalidate.maxAge = 0
    mustRevalidate.etag = "\"v1\""
    _ = try loadWithFreshLoader(thumbnail) { $0.finish(0, bytes: Array("abc".utf8), caching: mustRevalidate) }

    var offline = thumbnail
    offline.cachePolicy = .cacheOnly
    let stale = try loadWithFreshLoader(offline)
    XCTAssertEqual(source(stale.outcome), .disk)
    XCTAssertEqual(stale.stats.variantHits, 1, "offline, a stale variant beats none")
    XCTAssertEqual(stale.decoder.count, 0)

    var fresh = ResponseCaching()
    fresh.maxAge = 3600
    let revalidated = try loadWithFreshLoader(thumbnail) { $0.finish(0, bytes: [], status: 304, caching: fresh) }
    XCTAssertEqual(revalidated.network.started.first?.revalidating?.etag, "\"v1\"", "the original's validators")
    XCTAssertEqual(source(revalidated.outcome), .revalidated)
    XCTAssertEqual(revalidated.stats.variantHits, 0, "stale: not served")
    XCTAssertEqual(revalidated.decoder.count, 1)
    XCTAssertEqual(revalidated.stats.variantsStored, 1, "written anew")

    let again = try loadWithFreshLoader(thumbnail)
    XCTAssertEqual(source(again.outcome), .disk)
    XCTAssertEqual(again.stats.variantHits, 1, "fresh again after the 304")
    XCTAssertTrue(again.network.started.isEmpty)

    // A reload at another size brings other bytes: the stored 64x64 is outdated.
    var reload = ImageRequest(url: "http://h/a.jpg", targetWidth: 32, targetHeight: 32)
    reload.cachePolicy = .reload
    _ = try loadWithFreshLoader(reload) { $0.finish(0, bytes: Array("changed".utf8), caching: fresh) }
    let afterReload = try loadWithFreshLoader(thumbnail)
    XCTAssertEqual(afterReload.stats.variantHits, 0)
    XCTAssertEqual(firstPixel(afterReload.outcome), 7, "decoded from the 7 new bytes, not the old thumbnail")
  }

  /// pxl_cache_remove forgets a key's stored thumbnails too.
  func testRemovingAKeyRemovesItsVariants() throws {
    let thumbnail = ImageRequest(url: "http://h/a.jpg", targetWidth: 64, targetHeight: 64)
    _ = try loadWithFreshLoader(thumbnail) { $0.finish(0, bytes: Array("abc".utf8)) }
    var configuration = LoaderConfiguration()
    configuration.diskCacheBytes = 1 << 20
    configuration.diskCacheDirectory = directory
    let loader = try ImageLoader(configuration: configuration, dataLoader: ManualDataLoader(), decoder: FakeDecoder())
    loader.removeCached(cacheKey: "http://h/a.jpg")
    loader.close()  // runs the removal
    var offline = thumbnail
    offline.cachePolicy = .cacheOnly
    let after = try loadWithFreshLoader(offline)
    if case .failure(let error)? = after.outcome { XCTAssertEqual(error.status, .notCached) } else { XCTFail("removed") }
  }

  func testCacheControlParsing() {
    var caching = ResponseCaching()
    for line in ["HTTP/1.1 200 OK\r\n", "Cache-Control: public, max-age=60\r\n", "ETag: \"x\"\r\n",
                 "Last-Modified: Sun, 22 Nov 2026 05:00:00 GMT\r\n"] { caching.take(headerLine: line) }
    XCTAssertEqual(caching.maxAge, 60)
    XCTAssertEqual(caching.etag, "\"x\"")
    XCTAssertEqual(caching.expiry(now: 1000), 1060)
    caching.take(headerLine: "HTTP/1.1 304 Not Modified\r\n")
    XCTAssertEqual(caching, ResponseCaching(), "a new response starts over")
    caching.take(headerLine: "cache-control: no-cache\r\n")
    XCTAssertEqual(caching.expiry(now: 1000), 1, "always revalidate")
    var expires = ResponseCaching()
    expires.take(headerLine: "Expires: Thu, 01 Jan 2037 00:00:00 GMT\r\n")
    XCTAssertEqual(expires.expires, 2114380800)
    XCTAssertEqual(ResponseCaching().expiry(now: 5), 0, "no information: fresh until evicted")
  }

  /// Colour management is part of a stored variant's name: a thumbnail kept with it is not
  /// served to a request without it, which decodes and keeps its own.
  func testStoredVariantsKeepColourManagedAndUnmanagedApart() throws {
    let managed = ImageRequest(url: "http://h/c.jpg", targetWidth: 150, targetHeight: 150, mode: .fill)
    var kept = managed
    kept.managesColor = false
    XCTAssertEqual(try loadWithFreshLoader(managed) { $0.finish(0, bytes: Array("abcdef".utf8)) }.stats.variantsStored, 1)
    let other = try loadWithFreshLoader(kept)  // the original is on disk: decoded from it
    XCTAssertEqual(other.stats.variantHits, 0)
    XCTAssertEqual(other.decoder.count, 1)
    XCTAssertTrue(other.network.started.isEmpty)
    XCTAssertEqual(other.stats.variantsStored, 1)
    for request in [kept, managed] {
      let warm = try loadWithFreshLoader(request)
      XCTAssertEqual(warm.stats.variantHits, 1)
      XCTAssertEqual(warm.decoder.count, 0)
    }
  }
}
