import XCTest
@testable import PixloadCore

/// A host that stops draining its queue: the images waiting in it stay within
/// `CompletionQueue.undrainedImageLimit`; decodes wait (never dropped) and resume when the
/// host drains again.
final class UndrainedQueueTests: XCTestCase {
  func testDecodesWaitWhileTheQueueIsFullAndResumeWhenItDrains() throws {
    let network = ManualDataLoader()
    let decoder = FakeDecoder()
    var configuration = LoaderConfiguration()
    configuration.decodeThreads = 1  // one decode at a time: the count below is exact
    configuration.memoryCacheBytes = 0
    let loader = try ImageLoader(configuration: configuration, dataLoader: network, decoder: decoder)
    let queue = try CompletionQueue()
    let recorder = Recorder()
    defer {
      loader.close()
      queue.close()
    }
    // 2048x2048 RGBA: 16 MiB each, so four fill the 64 MiB limit.
    let side = 2048, imageBytes = side * side * 4
    XCTAssertEqual(CompletionQueue.undrainedImageLimit / imageBytes, 4)
    var tokens: [UInt64] = []
    for i in 0..<10 {
      let request = ImageRequest(url: "http://h/\(i).jpg", targetWidth: side, targetHeight: side)
      tokens.append(try loader.load(request, queue: queue, handler: recorder.handler))
    }
    for i in 0..<10 { network.finish(i) }
    let deadline = monotonicNanoseconds() + 5_000_000_000
    while queue.pendingCount < 4 && monotonicNanoseconds() < deadline { _ = queue.wait(timeoutMilliseconds: 100) }
    XCTAssertEqual(queue.pendingCount, 4)
    // Nothing more comes while nobody drains (the other six decodes are held, not run).
    usleep(300_000)
    XCTAssertEqual(queue.pendingCount, 4, "decodes kept going for an undrained queue")
    XCTAssertEqual(decoder.count, 4)
    XCTAssertEqual(queue.undrainedBytes, 4 * imageBytes)
    // Draining brings everything, each exactly once, with its image.
    XCTAssertTrue(queue.drain(until: recorder, reaches: 10, timeoutMilliseconds: 10_000))
    for token in tokens {
      XCTAssertEqual(recorder.calls(token), 1)
      XCTAssertEqual(recorder.status(token), .ok)
    }
    XCTAssertEqual(queue.undrainedBytes, 0)
  }

  func testCancellingHeldRequestsReportsCancelledAndDropsTheirWork() throws {
    let network = ManualDataLoader()
    let decoder = FakeDecoder()
    var configuration = LoaderConfiguration()
    configuration.decodeThreads = 1
    configuration.memoryCacheBytes = 0
    let loader = try ImageLoader(configuration: configuration, dataLoader: network, decoder: decoder)
    let queue = try CompletionQueue()
    let recorder = Recorder()
    defer {
      loader.close()
      queue.close()
    }
    let side = 2048
    var tokens: [UInt64] = []
    for i in 0..<6 {
      let request = ImageRequest(url: "http://h/\(i).jpg", targetWidth: side, targetHeight: side)
      tokens.append(try loader.load(request, queue: queue, handler: recorder.handler))
    }
    for i in 0..<6 { network.finish(i) }
    let deadline = monotonicNanoseconds() + 5_000_000_000
    while queue.pendingCount < 4 && monotonicNanoseconds() < deadline { _ = queue.wait(timeoutMilliseconds: 100) }
    usleep(200_000)
    XCTAssertEqual(queue.pendingCount, 4)
    // Two decodes are held (which two depends on the pool's order among equal
    // priorities). Cancelling everything: each request reports CANCELLED exactly once (the
    // four queued images too: cancel wins over a queued result), and the held decodes
    // never run.
    for token in tokens { XCTAssertTrue(loader.cancel(token)) }
    XCTAssertEqual(queue.undrainedBytes, 0, "cancelling released the queued images")
    XCTAssertTrue(queue.drain(until: recorder, reaches: 6, timeoutMilliseconds: 10_000))
    for token in tokens {
      XCTAssertEqual(recorder.calls(token), 1)
      XCTAssertEqual(recorder.status(token), .cancelled)
    }
    usleep(100_000)
    XCTAssertEqual(decoder.count, 4, "a cancelled held decode ran")
  }
}
