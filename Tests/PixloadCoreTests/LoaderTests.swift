import XCTest
@testable import PixloadCore

/// The rules of a request (DESIGN.md), driven deterministically through a manual network.
final class LoaderTests: XCTestCase {
  var network: ManualDataLoader!
  var decoder: FakeDecoder!
  var loader: ImageLoader!
  var queue: CompletionQueue!
  var recorder: Recorder!

  override func setUpWithError() throws {
    network = ManualDataLoader()
    decoder = FakeDecoder()
    var configuration = LoaderConfiguration()
    configuration.decodeThreads = 2
    loader = try ImageLoader(configuration: configuration, dataLoader: network, decoder: decoder)
    queue = try CompletionQueue()
    recorder = Recorder()
  }

  override func tearDown() {
    loader.close()
    queue.close()
  }

  func load(_ url: String = "http://h/a.jpg", width: Int = 0, height: Int = 0, priority: Int32 = 0,
            format: PixelFormat = .rgba8) throws -> UInt64 {
    let request = ImageRequest(url: url, targetWidth: width, targetHeight: height, format: format, priority: priority)
    return try loader.load(request, queue: queue, handler: recorder.handler)
  }

  func testDuplicateRequestsShareOneDownloadAndOneDecodePerVariant() throws {
    let a = try load(), b = try load(), c = try load()
    let small = try load(width: 10, height: 10)
    let gray = try load(format: .gray8)
    XCTAssertEqual(network.started.count, 1, "one download per URL")
    network.finish(0)
    XCTAssertTrue(queue.drain(until: recorder, reaches: 5))
    for token in [a, b, c, small, gray] { XCTAssertEqual(recorder.status(token), .ok) }
    XCTAssertEqual(decoder.count, 3, "one decode per variant")
    let stats = loader.statistics
    XCTAssertEqual([stats.requests, stats.coalesced, stats.networkFetches, stats.failed], [5, 4, 1, 0])
    if case .success(let image, let source, _)? = recorder.outcome(small) {
      XCTAssertEqual(image.width, 10)
      XCTAssertEqual(source, .network)
    } else { XCTFail("small variant missing") }
  }

  func testCancellingOneRequesterLeavesTheOthers() throws {
    let a = try load(), b = try load()
    XCTAssertTrue(loader.cancel(a))
    XCTAssertTrue(network.cancelled.isEmpty, "the shared download continues for b")
    network.finish(0)
    XCTAssertTrue(queue.drain(until: recorder, reaches: 2))
    XCTAssertEqual(recorder.status(a), .cancelled)
    XCTAssertEqual(recorder.status(b), .ok)
  }

  func testCancellingTheLastRequesterCancelsTheDownload() throws {
    let a = try load(), b = try load(width: 5, height: 5)
    loader.cancel(a)
    XCTAssertTrue(network.cancelled.isEmpty)
    loader.cancel(b)
    XCTAssertEqual(network.cancelled, [network.started[0].id])
    // A late completion of the cancelled transfer is ignored.
    network.finish(0)
    XCTAssertTrue(queue.drain(until: recorder, reaches: 2))
    XCTAssertEqual(decoder.count, 0)
    XCTAssertEqual(recorder.status(a), .cancelled)
    XCTAssertEqual(recorder.status(b), .cancelled)
  }

  func testCancelIsIdempotentAndReportsUnknownTokens() throws {
    let a = try load()
    XCTAssertTrue(loader.cancel(a))
    XCTAssertFalse(loader.cancel(a))
    XCTAssertFalse(loader.cancel(9999))
    XCTAssertTrue(queue.drain(until: recorder, reaches: 1))
    XCTAssertFalse(loader.cancel(a), "after the callback ran")
    XCTAssertEqual(recorder.calls(a), 1)
  }

  func testCancelWinsOverAQueuedResult() throws {
    let a = try load()
    network.finish(0)
    // Wait until the decoded result sits in the queue, undelivered.
    while queue.pendingCount == 0 { _ = queue.wait(timeoutMilliseconds: 5000) }
    XCTAssertTrue(loader.cancel(a))
    XCTAssertEqual(queue.dispatch(max: 0), 1)
    XCTAssertEqual(recorder.status(a), .cancelled)
    XCTAssertNotNil(loader.memoryCache.image(for: ImageRequest(url: "http://h/a.jpg").variant),
                    "the decoded image still went to the memory cache")
  }

  func testFailedDownloadFailsEveryRequesterWithItsStatus() throws {
    let a = try load(), b = try load(width: 3, height: 3)
    network.finish(0, error: LoadError(.http, "HTTP status 404", httpStatus: 404))
    XCTAssertTrue(queue.drain(until: recorder, reaches: 2))
    for token in [a, b] {
      guard case .failure(let error)? = recorder.outcome(token) else { return XCTFail("expected failure") }
      XCTAssertEqual(error.status, .http)
      XCTAssertEqual(error.httpStatus, 404)
    }
  }

  func testCorruptImageReportsDecoderError() throws {
    let a = try load()
    network.finish(0, bytes: Array("bad".utf8))
    XCTAssertTrue(queue.drain(until: recorder, reaches: 1))
    XCTAssertEqual(recorder.status(a), .corruptImage)
    XCTAssertEqual(loader.memoryCache.count, 0)
  }

  func testMemoryHitCompletesThroughTheQueueWithoutNetwork() throws {
    _ = try load()
    network.finish(0)
    XCTAssertTrue(queue.drain(until: recorder, reaches: 1))
    XCTAssertNotNil(loader.cachedImage(for: ImageRequest(url: "http://h/a.jpg")))
    XCTAssertNil(loader.cachedImage(for: ImageRequest(url: "http://h/a.jpg", targetWidth: 9, targetHeight: 9)))
    let again = try load()
    XCTAssertEqual(recorder.calls(again), 0, "never synchronously inside load")
    XCTAssertTrue(queue.drain(until: recorder, reaches: 2))
    guard case .success(_, let source, _)? = recorder.outcome(again) else { return XCTFail() }
    XCTAssertEqual(source, .memory)
    XCTAssertEqual(network.started.count, 1)
  }

  func testMergedWorkRunsAtTheHighestPriorityAmongItsRequesters() throws {
    let low = try load(priority: -100)
    let id = network.started[0].id
    XCTAssertEqual(network.priority(of: id), -100)
    let high = try load(width: 8, height: 8, priority: 100)
    XCTAssertEqual(network.priority(of: id), 100, "a joining requester raises the download")
    loader.cancel(high)
    XCTAssertEqual(network.priority(of: id), -100, "a leaving requester lowers it again")
    XCTAssertTrue(loader.setPriority(low, 50))
    XCTAssertEqual(network.priority(of: id), 50)
    XCTAssertFalse(loader.setPriority(12345, 1))
  }

  func testProgressReachesListenersBeforeTheResultAndIsRateLimited() throws {
    var reports: [(UInt64, UInt64, UInt64)] = []
    let request = ImageRequest(url: "http://h/a.jpg", headers: ["X-Token: 1"], progressIntervalMilliseconds: 60_000)
    let listener = try loader.load(request, queue: queue, progress: { reports.append(($0, $1, $2)) },
                                   handler: recorder.handler)
    // Same headers, so the same transfer (other headers would be other credentials).
    let silent = try loader.load(ImageRequest(url: "http://h/a.jpg", headers: ["X-Token: 1"]), queue: queue,
                                 handler: recorder.handler)
    XCTAssertEqual(network.started.count, 1)
    XCTAssertEqual(network.started[0].headers, ["X-Token: 1"], "the starting request's headers")
    let report = network.started[0].progress!
    _ = report(10, 100, [])
    _ = report(50, 100, [])  // updates the queued report instead of adding one
    XCTAssertEqual(queue.dispatch(max: 0), 1)
    XCTAssertEqual(reports.count, 1)
    XCTAssertEqual(reports.first?.0, listener)
    XCTAssertEqual(reports.first?.1, 50)
    XCTAssertEqual(reports.first?.2, 100)
    _ = report(90, 100, [])  // inside the interval: dropped
    XCTAssertEqual(queue.dispatch(max: 0), 0)
    network.finish(0)
    XCTAssertTrue(queue.drain(until: recorder, reaches: 2))
    _ = report(100, 100, [])  // after the result: never delivered
    XCTAssertEqual(queue.dispatch(max: 0), 0)
    XCTAssertEqual(reports.count, 1)
    XCTAssertEqual(recorder.status(listener), .ok)
    XCTAssertEqual(recorder.status(silent), .ok)
  }

  func testRejectedRequestsNeverCallTheirHandler() throws {
    XCTAssertThrowsError(try load("ftp://h/a.jpg")) { XCTAssertEqual(($0 as? LoadError)?.status, .schemeNotAllowed) }
    XCTAssertThrowsError(try load("file:///tmp/a.jpg")) { XCTAssertEqual(($0 as? LoadError)?.status, .schemeNotAllowed) }
    XCTAssertThrowsError(try load("not a url")) { XCTAssertEqual(($0 as? LoadError)?.status, .malformedURL) }
    XCTAssertThrowsError(try load("http://")) { XCTAssertEqual(($0 as? LoadError)?.status, .malformedURL) }
    XCTAssertThrowsError(try load(width: -1)) { XCTAssertEqual(($0 as? LoadError)?.status, .invalidArgument) }
    XCTAssertEqual(queue.dispatch(max: 0), 0)
    XCTAssertEqual(recorder.totalCalls, 0)
    XCTAssertTrue(network.started.isEmpty)
  }

  func testClosingTheQueueCancelsItsRequestsBeforeReturning() throws {
    let a = try load(), b = try load("http://h/b.jpg")
    let other = try CompletionQueue()
    let kept = try loader.load(ImageRequest(url: "http://h/a.jpg", targetWidth: 2, targetHeight: 2),
                               queue: other, handler: recorder.handler)
    queue.close()
    XCTAssertEqual(recorder.status(a), .cancelled, "ran inside close")
    XCTAssertEqual(recorder.status(b), .cancelled)
    XCTAssertEqual(network.cancelled, [network.started[1].id], "b's download had no other requester")
    network.finish(0)
    XCTAssertTrue(other.drain(until: recorder, reaches: 3))
    XCTAssertEqual(recorder.status(kept), .ok)
    XCTAssertThrowsError(try load()) { XCTAssertEqual(($0 as? LoadError)?.status, .invalidArgument) }
    other.close()
  }

  func testClosingTheLoaderCancelsEverythingThroughTheQueues() throws {
    let a = try load(), b = try load("http://h/b.jpg")
    network.finish(0)
    loader.close()
    XCTAssertTrue(queue.drain(until: recorder, reaches: 2))
    XCTAssertEqual(recorder.status(a), .cancelled)
    XCTAssertEqual(recorder.status(b), .cancelled)
    XCTAssertThrowsError(try load()) { XCTAssertEqual(($0 as? LoadError)?.status, .loaderClosed) }
    network.finish(1)  // late: ignored
    XCTAssertEqual(queue.dispatch(max: 0), 0)
    XCTAssertEqual(recorder.totalCalls, 2)
  }

  /// Cancels from several threads race completions and dispatch; every request still gets
  /// exactly one result, and every cancel that succeeded yields CANCELLED.
  func testExactlyOnceUnderCancelRaces() throws {
    let rounds = 300
    var tokens: [UInt64] = []
    for i in 0..<rounds { tokens.append(try load("http://h/\(i % 37).jpg", width: i % 3, height: i % 3)) }
    let cancelledOK = Recorder()
    let finisher = try WorkerThread(name: "finisher") {
      for index in 0..<self.network.started.count { self.network.finish(index) }
    }
    let cancellers = try (0..<2).map { worker in
      try WorkerThread(name: "cancel-\(worker)") {
        for (i, token) in tokens.enumerated() where i % 2 == worker && i % 3 != 0 {
          if self.loader.cancel(token) { cancelledOK.handler(token, .failure(.cancelled)) }
        }
      }
    }
    XCTAssertTrue(queue.drain(until: recorder, reaches: rounds, timeoutMilliseconds: 20_000))
    finisher.join()
    cancellers.forEach { $0.join() }
    XCTAssertEqual(queue.dispatch(max: 0), 0)
    for token in tokens {
      XCTAssertEqual(recorder.calls(token), 1, "token \(token)")
      if cancelledOK.calls(token) == 1 { XCTAssertEqual(recorder.status(token), .cancelled) }
    }
  }

  // MARK: - What may be merged (contract issue, defects 3 and 5)

  /// Per-request headers are credentials: requests whose header lines differ share no
  /// transfer and no memory entry, unless the caller gives them one explicit cache key.
  func testRequestsWithOtherCredentialsShareNothing() throws {
    let alice = ImageRequest(url: "http://h/me.jpg", headers: ["Authorization: Bearer alice"])
    let bob = ImageRequest(url: "http://h/me.jpg", headers: ["Authorization: Bearer bob"])
    let anonymous = ImageRequest(url: "http://h/me.jpg")
    let a = try loader.load(alice, queue: queue, handler: recorder.handler)
    let b = try loader.load(bob, queue: queue, handler: recorder.handler)
    let c = try loader.load(anonymous, queue: queue, handler: recorder.handler)
    XCTAssertEqual(network.started.count, 3, "one transfer per set of credentials")
    XCTAssertEqual(network.started.map(\.headers), [["Authorization: Bearer alice"], ["Authorization: Bearer bob"], []])
    network.finish(0, bytes: Array("alice".utf8))
    network.finish(1, bytes: Array("bob-bob".utf8))
    network.finish(2, bytes: Array("anonymous".utf8))
    XCTAssertTrue(queue.drain(until: recorder, reaches: 3))
    func firstByte(_ token: UInt64) -> UInt8? {
      if case .success(let image, _, _)? = recorder.outcome(token) { return image.pixels.load(as: UInt8.self) }
      return nil
    }
    XCTAssertEqual([firstByte(a), firstByte(b), firstByte(c)], [5, 7, 9], "each got its own response")
    // The memory cache keeps them apart too: nobody is served another's image.
    XCTAssertEqual(loader.cachedImage(for: bob)?.pixels.load(as: UInt8.self), 7)
    XCTAssertEqual(loader.cachedImage(for: anonymous)?.pixels.load(as: UInt8.self), 9)
    XCTAssertNil(loader.cachedImage(for: ImageRequest(url: "http://h/me.jpg", headers: ["Cookie: s=1"])))
    // Removing the URL forgets its credentialed variants in memory too.
    loader.removeCached(cacheKey: "http://h/me.jpg")
    XCTAssertNil(loader.cachedImage(for: alice))
    XCTAssertNil(loader.cachedImage(for: anonymous))

    // One explicit cache key: the caller says it is the same image, so they merge.
    let d = try loader.load(ImageRequest(url: "http://h/x.jpg", cacheKey: "x", headers: ["Cookie: s=1"]),
                            queue: queue, handler: recorder.handler)
    let e = try loader.load(ImageRequest(url: "http://h/x.jpg", cacheKey: "x", headers: ["Cookie: s=2"]),
                            queue: queue, handler: recorder.handler)
    XCTAssertEqual(network.started.count, 4, "equal explicit keys share one transfer")
    network.finish(3)
    XCTAssertTrue(queue.drain(until: recorder, reaches: 5))
    XCTAssertEqual([recorder.status(d), recorder.status(e)], [.ok, .ok])
  }

  /// A request never fails because of a flag of a request it would have merged with: a
  /// normal load that meets a cache-only load (or prefetch) of the same image goes to the
  /// network, and the cache-only one still never does.
  func testALoadNeverMergesWithACacheOnlyRequest() throws {
    var offline = ImageRequest(url: "http://h/a.jpg")
    offline.cachePolicy = .cacheOnly
    var offlineSized = offline
    offlineSized.targetWidth = 10
    offlineSized.targetHeight = 10
    let c = try loader.load(offline, queue: queue, handler: recorder.handler)
    let prefetch = try loader.prefetch(offlineSized)
    let n = try load()
    let sized = try load(width: 10, height: 10)
    XCTAssertEqual(network.started.count, 1, "the normal loads share one transfer")
    XCTAssertTrue(queue.drain(until: recorder, reaches: 1))
    XCTAssertEqual(recorder.status(c), .notCached, "no disk cache: the cache-only load misses at once")
    network.finish(0)
    XCTAssertTrue(queue.drain(until: recorder, reaches: 3))
    XCTAssertEqual([recorder.status(n), recorder.status(sized)], [.ok, .ok])
    XCTAssertFalse(loader.cancel(prefetch), "the cache-only prefetch ended on its own")
  }

  /// A download held back for its first requester (a table's prefetch waits up to a second
  /// while the screen loads) starts at once when a request that wants it now joins it,
  /// through the same variant or another size.
  func testARequestWithoutDelayStartsAHeldTransferItJoins() throws {
    var held = ImageRequest(url: "http://h/a.jpg", priority: -100)
    held.startDelayMilliseconds = 1000
    _ = try loader.prefetch(held)
    XCTAssertEqual(network.started.count, 1)
    XCTAssertEqual(network.started[0].delay, 1_000_000_000)
    XCTAssertTrue(network.startedNow.isEmpty)
    var alsoHeld = held
    alsoHeld.targetWidth = 5
    _ = try loader.prefetch(alsoHeld)
    XCTAssertTrue(network.startedNow.isEmpty, "a joiner that may wait too leaves the hold alone")
    _ = try load(priority: 100)
    XCTAssertEqual(network.startedNow, [network.started[0].id], "the same variant: started now")
    XCTAssertEqual(network.priority(of: network.started[0].id), 100)

    var other = ImageRequest(url: "http://h/b.jpg", priority: -100)
    other.startDelayMilliseconds = 1000
    _ = try loader.prefetch(other)
    _ = try load("http://h/b.jpg", width: 20, height: 20, priority: 100)
    XCTAssertEqual(network.started.count, 2)
    XCTAssertTrue(network.startedNow.contains(network.started[1].id), "another size of it: started now too")
  }
}
