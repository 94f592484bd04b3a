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
    let cache = try makeCache()
    for key in ["k1", "k2", "k3"] { cache.store([UInt8](repeating: 7, count: 1000), metadata: .init(), for: key) }
    // One flipped byte in the body.
    let fd = open(path(for: "k1"), O_RDWR)
    var byte: UInt8 = 0x55
    pwrite(fd, &byte, 1, 600)
    close(fd)
    XCTAssertNil(cache.entry(for: "k1"))
    XCTAssertNotEqual(access(path(for: "k1"), F_OK), 0, "deleted")
    // Truncated, as by a crash of a writer that did not use rename.
    truncate(path(for: "k2"), 500)
    XCTAssertNil(cache.entry(for: "k2"))
    // Another key's entry under this key's name (a hash collision): a miss, not its image.
    rename(path(for: "k3"), path(for: "k4"))
    XCTAssertNil(cache.entry(for: "k4"))
    XCTAssertEqual(logged.count, 2, "one line per dropped entry: \(logged)")
  }

  func testTotalStaysWithinCapacityAndEvictsLeastRecentlyUsed() throws {
    let entrySize = 10_000
    let cache = try makeCache(capacity: 5 * (entrySize + 100))
    for i in 0..<5 {
      cache.store([UInt8](repeating: UInt8(i), count: entrySize), metadata: .init(), for: "key\(i)")
      usleep(2000)  // distinct modification times for the LRU order
    }
    XCTAssertNotNil(cache.entry(for: "key0"))  // key0 becomes the most recently used
    usleep(2000)
    cache.store([UInt8](repeating: 9, count: entrySize), metadata: .init(), for: "key5")
    XCTAssertLessThanOrEqual(cache.totalBytes, cache.capacityBytes)
    XCTAssertNil(cache.entry(for: "key1"), "least recently used goes first")
    XCTAssertNotNil(cache.entry(for: "key0"))
    XCTAssertNotNil(cache.entry(for: "key5"))
    // What is on disk agrees with the view.
    let onDisk = try makeCache(capacity: cache.capacityBytes)
    onDisk.rescan()
    XCTAssertEqual(onDisk.totalBytes, cache.totalBytes)
  }

  /// The age limit counts from the last use (the file's modification time, which a hit
  /// touches): an entry unused for longer is dropped on read and by the start-up scan.
  func testEntriesUnusedPastTheAgeLimitAreDropped() throws {
    let cache = try DiskCache(directory: directory, capacityBytes: 1 << 20, maxAgeSeconds: 3600, log: { _ in })
    for key in ["old-read", "old-scanned", "recent"] { cache.store([1, 2, 3], metadata: .init(), for: "http://h/\(key)") }
    func age(_ key: String, seconds: Int) {
      let when = timespec(tv_sec: time(nil) - seconds, tv_nsec: 0)
      XCTAssertEqual(utimensat(AT_FDCWD, path(for: "http://h/\(key)"), [when, when], 0), 0)
    }
    age("old-read", seconds: 7200)
    age("old-scanned", seconds: 7200)
    age("recent", seconds: 1800)
    XCTAssertNil(cache.entry(for: "http://h/old-read"))
    XCTAssertFalse(FileManager.default.fileExists(atPath: path(for: "http://h/old-read")))
    XCTAssertTrue(FileManager.default.fileExists(atPath: path(for: "http://h/old-scanned")))
    cache.rescan()
    XCTAssertFalse(FileManager.default.fileExists(atPath: path(for: "http://h/old-scanned")))
    XCTAssertEqual(cache.entry(for: "http://h/recent")?.bytes, [1, 2, 3])
    XCTAssertEqual(cache.count, 1)
  }

  func testTwoCachesOnOneDirectoryKeepTheLimit() throws {
    let entrySize = 4_000
    let capacity = 10 * (entrySize + 100)
    let a = try makeCache(capacity: capacity), b = try makeCache(capacity: capacity)
    for i in 0..<40 {
      (i % 2 == 0 ? a : b).store([UInt8](repeating: UInt8(i), count: entrySize), metadata: .init(), for: "k\(i)")
    }
    let check = try makeCache(capacity: capacity)
    check.rescan()
    XCTAssertLessThanOrEqual(check.totalBytes, capacity + entrySize + 100, "over by at most one entry")
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
}
