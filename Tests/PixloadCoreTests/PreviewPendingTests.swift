@testable import PixloadCore
import Dispatch
import XCTest

/// A progressive download whose bytes arrive while a preview decode is under way: the
/// newest body is previewed as soon as that decode ends, instead of waiting for more bytes
/// that may not come (a server pausing between scans).
final class PreviewPendingTests: XCTestCase {
  /// Every body is "a complete scan per byte"; decodes give an image as wide as their
  /// input; a preview decode waits at the gate while `holding` is set.
  final class GatedDecoder: ImageDecoding, @unchecked Sendable {
    let entered = DispatchSemaphore(value: 0)
    let gate = DispatchSemaphore(value: 0)
    private let lock = Lock()
    private var _holding = true
    private var _decoded: [Int] = []
    var decoded: [Int] { lock.withLock { _decoded } }

    func release() {
      lock.withLock { _holding = false }
      gate.signal()
    }

    func previewPrefix(_ data: [UInt8]) -> (length: Int, scans: Int)? { data.isEmpty ? nil : (data.count, data.count) }
    func firstScansEnd(_ data: [UInt8], variants: [ImageVariant]) -> Int? { nil }

    func decode(_ data: [UInt8], variant: ImageVariant, maxPixels: UInt64) -> Result<Image, LoadError> {
      let hold = lock.withLock { () -> Bool in
        _decoded.append(data.count)
        return _holding
      }
      if hold {
        entered.signal()
        gate.wait()
      }
      let pixels = malloc(data.count * 4)!
      return .success(Image(width: data.count, height: 1, stride: data.count * 4, format: .rgba8,
                            originalWidth: data.count, originalHeight: 1, takingPixels: pixels))
    }
  }

  func testBytesThatCameDuringAPreviewDecodeArePreviewedWhenItEnds() throws {
    let network = ManualDataLoader()
    let decoder = GatedDecoder()
    var configuration = LoaderConfiguration()
    configuration.decodeThreads = 1
    let loader = try ImageLoader(configuration: configuration, dataLoader: network, decoder: decoder)
    defer { loader.close() }
    let queue = try CompletionQueue()
    let recorder = Recorder()
    var request = ImageRequest(url: "http://h/p.jpg")
    request.previewIntervalMilliseconds = 0
    var shown: [Int] = []
    _ = try loader.load(request, queue: queue, preview: { _, image in shown.append(image.width) },
                        handler: recorder.handler)
    let progress = try XCTUnwrap(network.started.first?.progress)

    XCTAssertFalse(progress(1, 0, [1]))
    XCTAssertEqual(decoder.entered.wait(timeout: .now() + 5), .success, "the first preview decode started")
    // Two more scans arrive while it runs; then the server pauses.
    XCTAssertFalse(progress(3, 0, [1, 2, 3]))
    XCTAssertFalse(progress(5, 0, [1, 2, 3, 4, 5]))
    decoder.release()

    // Each preview decodes its scans plus the EOI that closes them (2 bytes).
    let deadline = monotonicNanoseconds() + 5_000_000_000
    while shown.last != 7 && monotonicNanoseconds() < deadline {
      _ = queue.wait(timeoutMilliseconds: 100)
      _ = queue.dispatch(max: 0)
    }
    XCTAssertEqual(shown.last, 7, "the newest body (5 scans) was previewed without more bytes arriving")
    XCTAssertEqual(decoder.decoded, [3, 7], "one decode for the first body, one for the newest: the middle one was skipped")
    XCTAssertEqual(recorder.totalCalls, 0, "still downloading")
  }
}
