import XCTest
@testable import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

/// The real parts together (libcurl engine, decode pool, real decoder) without a server:
/// file:// URLs, a refused connection, and the shared corpus when it is present. Run under
/// ThreadSanitizer too, so the network thread is covered.
final class EngineTests: XCTestCase {
  static let corpus: String? = {
    var path = #filePath
    for _ in 0..<4 { path = String(path[..<path.lastIndex(of: "/")!]) }  // repository's parent
    let candidate = path + "/shared/corpus"
    return access(candidate + "/README.md", R_OK) == 0 ? candidate : nil
  }()

  func makeLoader() throws -> ImageLoader {
    var configuration = LoaderConfiguration()
    configuration.network.allowedSchemes = ["http", "https", "file"]
    configuration.network.connectTimeoutMilliseconds = 2000
    return try ImageLoader(configuration: configuration)
  }

  func testNetworkAndFileErrorsHaveTheirStatus() throws {
    let loader = try makeLoader()
    let queue = try CompletionQueue()
    let recorder = Recorder()
    let path = "/tmp/pixload-engine-test-\(getpid()).txt"
    let file = fopen(path, "w")!
    fputs("<html>not an image</html>", file)
    fclose(file)
    defer { unlink(path) }
    let refused = try loader.load(ImageRequest(url: "http://127.0.0.1:1/x.jpg"), queue: queue, handler: recorder.handler)
    let missing = try loader.load(ImageRequest(url: "file:///nonexistent/pixload.jpg"), queue: queue, handler: recorder.handler)
    let text = try loader.load(ImageRequest(url: "file://" + path), queue: queue, handler: recorder.handler)
    XCTAssertTrue(queue.drain(until: recorder, reaches: 3))
    XCTAssertEqual(recorder.status(refused), .connect)
    XCTAssertEqual(recorder.status(missing), .io)
    XCTAssertEqual(recorder.status(text), .notAnImage)
    if case .failure(let error)? = recorder.outcome(text) {
      XCTAssertTrue(error.message.contains("<html>"), error.message)
    }
    loader.close()
    queue.close()
  }

  func testCorpusImagesLoadThroughTheWholePipeline() throws {
    guard let corpus = Self.corpus else { throw XCTSkip("../shared/corpus is absent: corpus tests skipped") }
    let loader = try makeLoader()
    let queue = try CompletionQueue()
    let recorder = Recorder()
    let landscape = "file://\(corpus)/realworld/exif-orientation/Landscape_6.jpg"
    let png = "file://\(corpus)/pngsuite/basn6a08.png"
    let thumb = try loader.load(ImageRequest(url: landscape, targetWidth: 150, targetHeight: 150, mode: .fill),
                                queue: queue, handler: recorder.handler)
    let upright = try loader.load(ImageRequest(url: landscape, targetWidth: 200, targetHeight: 200),
                                  queue: queue, handler: recorder.handler)
    let stored = try loader.load(ImageRequest(url: landscape, targetWidth: 200, targetHeight: 200,
                                              appliesOrientation: false), queue: queue, handler: recorder.handler)
    let alpha = try loader.load(ImageRequest(url: png, format: .bgra8Premultiplied), queue: queue, handler: recorder.handler)
    XCTAssertTrue(queue.drain(until: recorder, reaches: 4, timeoutMilliseconds: 20_000))
    func size(_ token: UInt64) -> [Int] {
      guard case .success(let image, _, _)? = recorder.outcome(token) else { return [] }
      return [image.width, image.height, image.originalWidth, image.originalHeight]
    }
    XCTAssertEqual(size(thumb), [150, 150, 1800, 1200])
    XCTAssertEqual(size(upright), [200, 133, 1800, 1200], "stored 1200x1800, orientation 6: shown landscape")
    XCTAssertEqual(size(stored), [133, 200, 1200, 1800])
    XCTAssertEqual(size(alpha), [32, 32, 32, 32])
    loader.close()
    queue.close()
  }

  /// Many loads and cancels racing on the real engine and pool: one result each.
  func testRealPipelineExactlyOnceUnderCancels() throws {
    guard let corpus = Self.corpus else { throw XCTSkip("../shared/corpus is absent: corpus tests skipped") }
    let loader = try makeLoader()
    let queue = try CompletionQueue()
    let recorder = Recorder()
    let files = ["pngsuite/basn2c08.png", "pngsuite/basi3p08.png", "pngsuite/basn4a16.png",
                 "realworld/exif-orientation/Portrait_3.jpg"].map { "file://\(corpus)/\($0)" }
    var tokens: [UInt64] = []
    for i in 0..<200 {
      tokens.append(try loader.load(ImageRequest(url: files[i % files.count], targetWidth: 16 + i % 5,
                                                 targetHeight: 16), queue: queue, handler: recorder.handler))
    }
    let canceller = try WorkerThread(name: "canceller") {
      for (i, token) in tokens.enumerated() where i % 3 == 0 { loader.cancel(token) }
    }
    XCTAssertTrue(queue.drain(until: recorder, reaches: tokens.count, timeoutMilliseconds: 60_000))
    canceller.join()
    XCTAssertEqual(queue.dispatch(max: 0), 0)
    for token in tokens { XCTAssertEqual(recorder.calls(token), 1) }
    loader.close()
    queue.close()
  }

  /// A start delay ends on the engine's clock, not the system's: while the clock stands
  /// the transfer waits, however many rounds the engine runs for others, and it starts once
  /// the clock reaches the delay's end, not a nanosecond before.
  func testAStartDelayEndsOnTheEnginesClock() throws {
    let clock = ManualClock()
    var configuration = EngineConfiguration()
    configuration.allowedSchemes = ["file"]
    // One slot: a due transfer (foreground) starts, and so finishes, before a background
    // one that waits beside it.
    configuration.maxConcurrentDownloads = 1
    let engine = try CurlEngine(configuration: configuration, clock: { clock.now })
    defer { engine.shutdown() }
    let path = "/tmp/pixload-engine-clock-\(getpid()).txt"
    let file = fopen(path, "w")!
    fputs("body", file)
    fclose(file)
    defer { unlink(path) }
    let url = try RequestURL(parsing: "file://" + path)
    let completions = Completions()
    func start(_ name: String, delay: UInt64 = 0, priority: Int32 = -1) {
      _ = engine.start(url: url, headers: [], revalidating: nil, delay: delay, priority: priority, progress: nil,
                       completion: completions.record(name))
    }
    let second: UInt64 = 1_000_000_000
    start("delayed", delay: 10 * second, priority: 0)
    // Each background transfer finishing shows the engine ran a round after the clock
    // moved, in which the delayed one, were it due, would have started (and ended) first.
    start("first")
    XCTAssertNotNil(completions.wait(for: "first"))
    XCTAssertFalse(completions.has("delayed"))
    clock.advance(nanoseconds: 10 * second - 1)
    start("second")
    XCTAssertNotNil(completions.wait(for: "second"))
    XCTAssertFalse(completions.has("delayed"), "started before its delay ended")
    clock.advance(nanoseconds: 1)
    start("third")
    guard case .success(let data)? = completions.wait(for: "delayed") else {
      return XCTFail("the delayed transfer did not start once its delay was over")
    }
    XCTAssertEqual(data.bytes, Array("body".utf8))
  }
}

/// Completions of engine transfers by name, waited for on the lock's condition (no sleeps).
final class Completions: @unchecked Sendable {
  private let lock = Lock()
  private var results: [String: Result<DownloadedData, LoadError>] = [:]

  func record(_ name: String) -> @Sendable (Result<DownloadedData, LoadError>) -> Void {
    { result in self.lock.withLock { self.results[name] = result; self.lock.broadcast() } }
  }

  func has(_ name: String) -> Bool { lock.withLock { results[name] != nil } }

  /// `name`'s result, or nil when it has not come within `timeoutMilliseconds`.
  func wait(for name: String, timeoutMilliseconds: UInt64 = 5000) -> Result<DownloadedData, LoadError>? {
    let deadline = monotonicNanoseconds() + timeoutMilliseconds * 1_000_000
    return lock.withLock {
      while results[name] == nil && monotonicNanoseconds() < deadline { lock.wait(untilNanoseconds: deadline) }
      return results[name]
    }
  }
}
