import XCTest
@testable import PixloadCore

/// libcurl's cumulative times into phases (`TransferTiming`), and placeholders' refusals
/// at the core's level (the C and Python tests compare pixels with references).
final class MetricsTests: XCTestCase {
  func testPhasesAreStepsBetweenLibcurlsMarks() {
    let fresh = TransferTiming(nameLookup: 100, connect: 300, appConnect: 1000, startTransfer: 1500, total: 4000)
    XCTAssertEqual([fresh.dnsMicroseconds, fresh.connectMicroseconds, fresh.tlsMicroseconds,
                    fresh.firstByteMicroseconds, fresh.transferMicroseconds], [100, 200, 700, 500, 2500])
    // Plain HTTP: no TLS mark (0); its phase is 0, the first byte counts from the connect.
    let plain = TransferTiming(nameLookup: 100, connect: 300, appConnect: 0, startTransfer: 800, total: 900)
    XCTAssertEqual([plain.tlsMicroseconds, plain.firstByteMicroseconds, plain.transferMicroseconds], [0, 500, 100])
    // A reused connection: every mark before the first byte is 0.
    let reused = TransferTiming(nameLookup: 0, connect: 0, appConnect: 0, startTransfer: 400, total: 450)
    XCTAssertEqual([reused.dnsMicroseconds, reused.connectMicroseconds, reused.firstByteMicroseconds], [0, 0, 400])
    // A failure before the first byte: the later phases are 0, never negative.
    let refused = TransferTiming(nameLookup: 50, connect: 0, appConnect: 0, startTransfer: 0, total: 60)
    XCTAssertEqual([refused.dnsMicroseconds, refused.connectMicroseconds, refused.transferMicroseconds], [50, 0, 10])
  }

  func testTimingIsNotPartOfAnErrorsIdentity() {
    var a = LoadError(.http, "HTTP status 404", httpStatus: 404)
    a.timing.dnsMicroseconds = 5
    XCTAssertEqual(a, LoadError(.http, "HTTP status 404", httpStatus: 404))
  }

  func testPlaceholderDrawingSizeAndRefusals() throws {
    let blur = Placeholder(kind: .blurHash, bytes: Array("LEHV6nWB2yk8pyo0adR*.7kCMdnj".utf8))
    XCTAssertTrue(try blur.drawingSize(width: 300, height: 100) == (32, 11))
    XCTAssertTrue(try blur.drawingSize(width: 0, height: 0) == (32, 32))
    XCTAssertEqual(try blur.decode(width: 5, height: 7).width, 5)
    XCTAssertThrowsError(try blur.decode(width: 257, height: 1))
    let short = Placeholder(kind: .blurHash, bytes: Array("LEHV6nWB2yk8pyo0adR*.7kCMdn".utf8))
    XCTAssertThrowsError(try short.decode(width: 8, height: 8)) { error in
      XCTAssertEqual((error as? LoadError)?.status, .corruptImage)
    }
    // Longer than any hash: malformed, as a wrong length is, and said so.
    let long = Placeholder(kind: .thumbHash, bytes: [UInt8](repeating: 0x4C, count: Placeholder.maxHashBytes + 1))
    XCTAssertThrowsError(try long.aspectRatio()) { error in
      XCTAssertEqual((error as? LoadError)?.status, .corruptImage)
      XCTAssertTrue((error as? LoadError)?.message.contains("longer than any hash") == true, "\(error)")
    }
    let thumb = Placeholder(kind: .thumbHash, bytes: try Placeholder.encode(.thumbHash, image: blur.decode(width: 40, height: 20)).bytes)
    XCTAssertEqual(try thumb.aspectRatio(), 7.0 / 4.0, accuracy: 0.01)
    XCTAssertTrue(try thumb.drawingSize(width: 0, height: 0) == (32, 18))
  }
}
