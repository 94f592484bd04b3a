import XCTest
@testable import PixloadCore

/// The network's measured throughput, driven with made-up bytes and busy times, and what a
/// table does with it: no fixed number of rows ahead when the pipe cannot fill them.
final class ThroughputTests: XCTestCase {
  private let millisecond: UInt64 = 1_000_000

  func testTheMeterMeasuresBytesPerBusySecondAndTheMeanResponse() {
    var meter = ThroughputMeter(windowNanoseconds: 2_000 * millisecond)
    // Three 200 kB responses in 300 ms of busy time: 2 MB/s, 10 responses a second.
    meter.record(bytes: 200_000, complete: true, busyNanoseconds: 100 * millisecond)
    meter.record(bytes: 200_000, complete: true, busyNanoseconds: 100 * millisecond)
    XCTAssertNil(meter.estimate, "two responses are no measurement yet")
    meter.record(bytes: 200_000, complete: true, busyNanoseconds: 100 * millisecond)
    let estimate = try! XCTUnwrap(meter.estimate)
    XCTAssertEqual(estimate.bytesPerSecond, 2_000_000, accuracy: 150_000)
    XCTAssertEqual(estimate.meanResponseBytes, 200_000)
    XCTAssertEqual(estimate.responsesPerSecond, 10, accuracy: 1)
    // A cut transfer's bytes took the pipe's time but are no response size.
    meter.record(bytes: 50_000, complete: false, busyNanoseconds: 25 * millisecond)
    XCTAssertEqual(meter.estimate!.meanResponseBytes, 200_000)
    XCTAssertEqual(meter.estimate!.bytesPerSecond, 2_000_000, accuracy: 150_000)
  }

  /// The network slows down to a tenth: within ten seconds of busy time the estimate
  /// follows (older records decay), instead of averaging over the whole session.
  func testTheMeterFollowsANetworkThatSlowsDown() {
    var meter = ThroughputMeter(windowNanoseconds: 2_000 * millisecond)
    for _ in 0..<100 { meter.record(bytes: 200_000, complete: true, busyNanoseconds: 10 * millisecond) }
    XCTAssertEqual(meter.estimate!.bytesPerSecond, 20_000_000, accuracy: 1_000_000)
    for _ in 0..<100 { meter.record(bytes: 200_000, complete: true, busyNanoseconds: 100 * millisecond) }
    XCTAssertEqual(meter.estimate!.bytesPerSecond, 2_000_000, accuracy: 300_000)
  }

  func table(network: ManualDataLoader, loader: ImageLoader, queue: CompletionQueue) -> ImageTable {
    var configuration = ImageTable.Configuration()
    configuration.prefetchRows = 8
    configuration.prefetchHoldMilliseconds = 0
    return ImageTable(loader: loader, queue: queue, rowCount: 100, configuration: configuration,
                      requestForRow: { ImageRequest(url: "http://h/\($0).jpg", targetWidth: 10, targetHeight: 10) },
                      onRow: { _, _ in })
  }

  /// A table prefetches what the network can bring in half a second: 8 rows (its most)
  /// when nothing is measured yet or the pipe is fast, 5 at 10 images a second, 1 at
  /// least on a crawl.
  func testTheTablePrefetchesWhatThePipeCanFill() throws {
    let cases: [(Throughput?, Int)] = [
      (nil, 8),
      (Throughput(bytesPerSecond: 50_000_000, meanResponseBytes: 200_000), 8),
      (Throughput(bytesPerSecond: 2_000_000, meanResponseBytes: 200_000), 5),
      (Throughput(bytesPerSecond: 20_000, meanResponseBytes: 200_000), 1),
    ]
    for (throughput, expected) in cases {
      let network = ManualDataLoader()
      network.measured = throughput
      var configuration = LoaderConfiguration()
      configuration.decodeThreads = 1
      let loader = try ImageLoader(configuration: configuration, dataLoader: network, decoder: FakeDecoder())
      let queue = try CompletionQueue()
      let table = table(network: network, loader: loader, queue: queue)
      table.setVisible(first: 10, count: 4, direction: 1)
      let prefetched = network.started.filter { started in (14...30).contains { "http://h/\($0).jpg" == started.url } }
      XCTAssertEqual(prefetched.count, expected, "\(String(describing: throughput))")
      XCTAssertEqual(network.started.count, 4 + expected)
      table.close()
      loader.close()
      queue.close()
    }
  }
}
