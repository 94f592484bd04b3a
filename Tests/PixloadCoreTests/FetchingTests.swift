import XCTest
@testable import PixloadCore

/// The fetch stage: data: URIs, URLs libcurl does not parse, and host fetchers through
/// the loader (merging, limits, priorities, cancels, timeouts, the disk rule).
final class FetchingTests: XCTestCase {
  func testDataURIsDecodeBase64AndPercentEncoding() {
    XCTAssertEqual(try DataURI.decode("data:image/png;base64,aGVsbG8=", maxBytes: 100).get(), Array("hello".utf8))
    XCTAssertEqual(try DataURI.decode("data:;BASE64,aGVsbG8", maxBytes: 100).get(), Array("hello".utf8))
    XCTAssertEqual(try DataURI.decode("data:,a%20b%zz%4", maxBytes: 100).get(), Array("a b%zz%4".utf8))
    XCTAssertEqual(try DataURI.decode("data:text/plain;charset=x,%FF%00", maxBytes: 100).get(), [0xFF, 0])
    XCTAssertEqual(try DataURI.decode("data:;base64,aGVs%2BbG8", maxBytes: 100).get().count, 6)
    XCTAssertEqual(try DataURI.decode("data:,", maxBytes: 100).get(), [])
    for bad in ["data:;base64,a", "data:;base64,aGVsbG8=x", "data:;base64,****", "data:nocomma"] {
      if case .failure(let error) = DataURI.decode(bad, maxBytes: 100) {
        XCTAssertEqual(error.status, .malformedURL, bad)
      } else {
        XCTFail("\(bad) decoded")
      }
    }
  }

  /// pixload.h, "data: URIs": the fetch standard's data: URL processor and the infra
  /// standard's forgiving-base64 decode, rule by rule.
  func testDataURIsAreReadAsTheFetchStandardReadsThem() {
    func decoded(_ uri: String) -> String? {
      (try? DataURI.decode(uri, maxBytes: 100).get()).map { String(decoding: $0, as: UTF8.self) }
    }
    // Percent-decoding: a % without two hex digits stays; the fragment is not data.
    XCTAssertEqual(decoded("data:,%ZZ%4%41%2"), "%ZZ%4A%2")
    XCTAssertEqual(decoded("data:,hi#there"), "hi")
    XCTAssertEqual(decoded("data:,hi%23there"), "hi#there")
    XCTAssertEqual(decoded("data:;base64,aGk=#x"), "hi")
    // Base64 only for ";base64" at the end of the media type, spaces allowed before it.
    XCTAssertEqual(decoded("data:text/plain; base64,aGk="), "hi")
    XCTAssertEqual(decoded("data:text/plain;BaSe64 ,aGk="), "hi")
    XCTAssertEqual(decoded("data:base64,aGk="), "aGk=")
    XCTAssertEqual(decoded("data:;base64x,aGk="), "aGk=")
    // Padding optional, and only where it completes a multiple of 4.
    XCTAssertEqual(decoded("data:;base64,aGk"), "hi")
    XCTAssertEqual(decoded("data:;base64,aA=="), "h")
    XCTAssertEqual(decoded("data:;base64,aA"), "h")
    XCTAssertNil(decoded("data:;base64,aA="))
    XCTAssertNil(decoded("data:;base64,aGk=="))
    XCTAssertNil(decoded("data:;base64,aG=k"))
    // ASCII whitespace ignored, literal or escaped (form feed included).
    XCTAssertEqual(decoded("data:;base64, aG k= "), "hi")
    XCTAssertEqual(decoded("data:;base64,a%0AG%0Ck%09%0D="), "hi")
    // The standard alphabet only; a length leaving one character over is invalid.
    XCTAssertEqual(decoded("data:;base64,%2B%2F%2B%2F"), String(decoding: [0xFB, 0xFF, 0xBF], as: UTF8.self))
    XCTAssertNil(decoded("data:;base64,-_-_"))
    XCTAssertNil(decoded("data:;base64,aGVsb"))
  }

  func testTheBodyLimitComesBeforeDecoding() {
    // 8 characters of base64 are 6 bytes: over 5 refused whatever the characters are.
    if case .failure(let error) = DataURI.decode("data:;base64,********", maxBytes: 5) {
      XCTAssertEqual(error.status, .bodyTooLarge)
    } else { XCTFail() }
    XCTAssertEqual(try DataURI.decode("data:;base64,aGVsbG8h", maxBytes: 6).get().count, 6)
    if case .failure(let error) = DataURI.decode("data:,%41%41%41", maxBytes: 2) {
      XCTAssertEqual(error.status, .bodyTooLarge)
    } else { XCTFail() }
    XCTAssertEqual(try DataURI.decode("data:,%41%41%41", maxBytes: 3).get(), Array("AAA".utf8))
  }

  /// The size checked before decoding never exceeds the decoded size: escaped whitespace
  /// and an escaped `=` are ignored by base64 as their raw forms are (pixload.h, "data:
  /// URIs"), so they count for nothing. Each case sits at the limit (taken) and one byte
  /// over it (refused).
  func testTheBodyLimitIgnoresEscapedWhitespaceAndPadding() {
    func status(_ uri: String, _ maxBytes: Int) -> Status? {
      switch DataURI.decode(uri, maxBytes: maxBytes) {
      case .success(let bytes): return bytes.count <= maxBytes ? .ok : nil
      case .failure(let error): return error.status
      }
    }
    let cases: [(uri: String, size: Int)] = [
      ("data:;base64,AAAA%0A%0A", 3),           // escaped LF
      ("data:;base64,AA%20AA%09%0C%0D", 3),     // escaped space, TAB, FF, CR
      ("data:;base64,AAAAAA%3D%3D", 4),         // escaped padding
      ("data:;base64,AA%3d%0a%0A%20=", 1),      // lower-case hex, mixed with raw padding
      ("data:;base64,%41%41%41%41%0A%0A", 3),   // escaped base64 characters too
    ]
    for (uri, size) in cases {
      XCTAssertEqual(try DataURI.decode(uri, maxBytes: size).get().count, size, uri)
      XCTAssertEqual(status(uri, size + 1), .ok, "\(uri) under the limit")
      XCTAssertEqual(status(uri, size), .ok, "\(uri) at the limit")
      XCTAssertEqual(status(uri, size - 1), .bodyTooLarge, "\(uri) one byte over the limit")
    }
  }

  func testRequestURLKeepsDataAndUnknownSchemesAsWritten() throws {
    let data = try RequestURL(parsing: "DATA:image/png;base64,AAAA")
    XCTAssertEqual(data.scheme, "data")
    XCTAssertEqual(data.text, "data:image/png;base64,AAAA")
    XCTAssertTrue(data.isVerbatim)
    let app = try RequestURL(parsing: "App://User@Images:1/Photo%20one.jpg?x#y")
    XCTAssertEqual(app.scheme, "app")
    XCTAssertEqual(app.host, "images")
    XCTAssertEqual(app.text, "app://User@Images:1/Photo%20one.jpg?x#y")
    XCTAssertEqual(try RequestURL(parsing: "db:42").text, "db:42")
    XCTAssertFalse(try RequestURL(parsing: "ftp://h/x").isVerbatim)
    XCTAssertFalse(try RequestURL(parsing: "HTTPS://H/x").isVerbatim)
    for bad in ["data:nocomma", "app:", "app:a\nb", "not a url", ":x", "1a:x"] {
      XCTAssertThrowsError(try RequestURL(parsing: bad), bad) { XCTAssertEqual(($0 as? LoadError)?.status, .malformedURL) }
    }
  }

  func testTheDiskRuleIsTheProducers() throws {
    let http = try RequestURL(parsing: "http://h/a"), file = try RequestURL(parsing: "file:///a")
    let app = try RequestURL(parsing: "app:a")
    XCTAssertTrue(DiskStorage.byScheme.allows(http))
    XCTAssertFalse(DiskStorage.byScheme.allows(file))
    XCTAssertFalse(DiskStorage.byScheme.allows(app))
    XCTAssertFalse(DiskStorage.never.allows(http))
    XCTAssertTrue(DiskStorage.allowed.allows(app))
  }

  // MARK: - Through the loader

  final class ManualFetcher: Fetcher, @unchecked Sendable {
    let lock = Lock()
    var started: [(url: String, fetch: FetchHandle)] = []
    var cancelled: [FetchHandle] = []
    var destroyed = 0
    var callsAfterDestroy = 0

    func start(url: String, fetch: FetchHandle) {
      lock.withLock {
        if destroyed > 0 { callsAfterDestroy += 1 }
        started.append((url, fetch))
      }
    }
    func cancel(_ fetch: FetchHandle) {
      lock.withLock {
        if destroyed > 0 { callsAfterDestroy += 1 }
        cancelled.append(fetch)
      }
    }
    func destroy() { lock.withLock { destroyed += 1 } }

    var startCount: Int { lock.withLock { started.count } }
    var cancelCount: Int { lock.withLock { cancelled.count } }
    func fetch(_ index: Int) -> FetchHandle { lock.withLock { started[index].fetch } }
    func url(_ index: Int) -> String { lock.withLock { started[index].url } }

    func waitFor(starts: Int = 0, cancels: Int = 0) -> Bool {
      let deadline = monotonicNanoseconds() + 5_000_000_000
      while startCount < starts || cancelCount < cancels {
        if monotonicNanoseconds() > deadline { return false }
        usleep(1000)
      }
      return true
    }
  }

  func makeLoader(timeout: Int = 30_000, maxBody: Int = 1 << 20, diskTier: DiskTier? = nil,
                  schemes: Set<String> = ["http", "https"]) throws -> ImageLoader {
    var configuration = LoaderConfiguration()
    configuration.decodeThreads = 1
    configuration.network.timeoutMilliseconds = timeout
    configuration.network.maxBodyBytes = maxBody
    configuration.network.allowedSchemes = schemes
    return try ImageLoader(configuration: configuration, dataLoader: ManualDataLoader(), diskTier: diskTier,
                           decoder: FakeDecoder())
  }

  func write(_ fetch: FetchHandle, _ text: String) -> Status {
    Array(text.utf8).withUnsafeBytes { fetch.write($0) }
  }

  func testMergedRequestsStartOneFetchAndTheLimitRanksTheRest() throws {
    let loader = try makeLoader()
    defer { loader.close() }
    let fetcher = ManualFetcher()
    try loader.addFetcher(fetcher, for: "App", settings: FetcherSettings(maxConcurrent: 1))
    let queue = try CompletionQueue()
    defer { queue.close() }
    let recorder = Recorder()
    let a = try loader.load(ImageRequest(url: "app:one"), queue: queue, handler: recorder.handler)
    let b = try loader.load(ImageRequest(url: "app:one", targetWidth: 2, targetHeight: 2), queue: queue,
                            handler: recorder.handler)
    XCTAssertTrue(fetcher.waitFor(starts: 1))
    let low = try loader.load(ImageRequest(url: "app:low", priority: 1), queue: queue, handler: recorder.handler)
    let high = try loader.load(ImageRequest(url: "app:high", priority: 9), queue: queue, handler: recorder.handler)
    usleep(20_000)
    XCTAssertEqual(fetcher.startCount, 1, "the limit")
    XCTAssertEqual(fetcher.url(0), "app:one")
    XCTAssertEqual(write(fetcher.fetch(0), "12345"), .ok)
    XCTAssertTrue(fetcher.fetch(0).finish(nil))
    XCTAssertFalse(fetcher.fetch(0).finish(nil), "a second finish does nothing")
    XCTAssertTrue(fetcher.waitFor(starts: 2))
    XCTAssertEqual(fetcher.url(1), "app:high", "highest priority first")
    XCTAssertTrue(queue.drain(until: recorder, reaches: 2))
    for token in [a, b] {
      guard case .success(_, let source, _)? = recorder.outcome(token) else { return XCTFail("\(token)") }
      XCTAssertEqual(source, .fetcher)
    }
    XCTAssertTrue(loader.cancel(high))
    XCTAssertTrue(fetcher.waitFor(starts: 3, cancels: 1))
    XCTAssertTrue(fetcher.lock.withLock { fetcher.cancelled[0] === fetcher.started[1].fetch })
    XCTAssertEqual(write(fetcher.fetch(1), "late"), .cancelled)
    XCTAssertTrue(fetcher.fetch(2).finish(LoadError(.notFound, "nope")))
    XCTAssertTrue(queue.drain(until: recorder, reaches: 4))
    XCTAssertEqual(recorder.status(low), .notFound)
    XCTAssertEqual(recorder.status(high), .cancelled)
    XCTAssertEqual(fetcher.cancelCount, 1)
  }

  func testTimeoutBodyLimitAndCloseEndFetchesAndCancelTheHostOnce() throws {
    let loader = try makeLoader(timeout: 100, maxBody: 4)
    let fetcher = ManualFetcher()
    try loader.addFetcher(fetcher, for: "app")
    let queue = try CompletionQueue()
    defer { queue.close() }
    let recorder = Recorder()
    let silent = try loader.load(ImageRequest(url: "app:silent"), queue: queue, handler: recorder.handler)
    XCTAssertTrue(queue.drain(until: recorder, reaches: 1))
    XCTAssertEqual(recorder.status(silent), .timeout)
    XCTAssertTrue(fetcher.waitFor(cancels: 1))
    let big = try loader.load(ImageRequest(url: "app:big"), queue: queue, handler: recorder.handler)
    XCTAssertTrue(fetcher.waitFor(starts: 2))
    XCTAssertEqual(write(fetcher.fetch(1), "12345"), .bodyTooLarge)
    XCTAssertTrue(queue.drain(until: recorder, reaches: 2))
    XCTAssertEqual(recorder.status(big), .bodyTooLarge)
    XCTAssertTrue(fetcher.waitFor(cancels: 2))
    let open = try loader.load(ImageRequest(url: "app:open"), queue: queue, handler: recorder.handler)
    XCTAssertTrue(fetcher.waitFor(starts: 3))
    loader.close()
    XCTAssertEqual(fetcher.cancelCount, 3)
    XCTAssertEqual(fetcher.lock.withLock { fetcher.destroyed }, 1)
    XCTAssertFalse(fetcher.fetch(2).finish(nil))
    XCTAssertTrue(queue.drain(until: recorder, reaches: 3))
    XCTAssertEqual(recorder.status(open), .cancelled)
    XCTAssertEqual(fetcher.lock.withLock { fetcher.callsAfterDestroy }, 0)
  }

  func testFetcherBytesReachTheDiskOnlyWhenAllowed() throws {
    let tier = ManualDiskTier()
    let loader = try makeLoader(diskTier: tier, schemes: ["data"])
    defer { loader.close() }
    let keeps = ManualFetcher(), never = ManualFetcher()
    try loader.addFetcher(keeps, for: "keep", settings: FetcherSettings(diskMaxAgeSeconds: 60))
    try loader.addFetcher(never, for: "never")
    let queue = try CompletionQueue()
    defer { queue.close() }
    let recorder = Recorder()
    for url in ["keep:a", "never:a", "data:,abc"] {
      _ = try loader.load(ImageRequest(url: url), queue: queue, handler: recorder.handler)
    }
    // Each asks the disk first; a miss goes to its fetcher.
    XCTAssertEqual(tier.originalLookups.count, 3)
    for lookup in tier.originalLookups { lookup.answer(.miss) }
    XCTAssertTrue(keeps.waitFor(starts: 1) && never.waitFor(starts: 1))
    _ = write(keeps.fetch(0), "k")
    keeps.fetch(0).finish(nil)
    _ = write(never.fetch(0), "n")
    never.fetch(0).finish(nil)
    XCTAssertTrue(queue.drain(until: recorder, reaches: 3))
    let received = tier.receivedResponses
    XCTAssertEqual(received.count, 3)
    for (key, response) in received {
      switch key {
      case "keep:a":
        XCTAssertEqual(response.diskStorage, .allowed)
        XCTAssertEqual(response.caching.maxAge, 60)
        XCTAssertEqual(response.source, .fetcher)
      case "never:a":
        XCTAssertEqual(response.diskStorage, .never)
      default:
        XCTAssertEqual(response.diskStorage, .never)
        XCTAssertEqual(response.source, .data)
        XCTAssertEqual(response.bytes, Array("abc".utf8))
      }
    }
  }

  func testRegistrationRules() throws {
    let loader = try makeLoader()
    defer { loader.close() }
    let fetcher = ManualFetcher()
    for scheme in ["http", "HTTPS", "file", "data", "ftp", "", "a b", "1a", "a:"] {
      XCTAssertThrowsError(try loader.addFetcher(fetcher, for: scheme), scheme)
    }
    XCTAssertThrowsError(try loader.addFetcher(fetcher, for: "app", settings: FetcherSettings(maxConcurrent: 0)))
    XCTAssertThrowsError(try loader.load(ImageRequest(url: "app:x"), queue: try CompletionQueue()) { _, _ in })
    try loader.addFetcher(fetcher, for: "app")
    XCTAssertThrowsError(try loader.addFetcher(fetcher, for: "APP"))
    XCTAssertTrue(loader.removeFetcher(for: "App"))
    XCTAssertFalse(loader.removeFetcher(for: "app"))
  }
}
