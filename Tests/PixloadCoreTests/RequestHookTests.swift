import XCTest
@testable import PixloadCore

/// How a request hook's answer joins a hop's headers (`TransferRequest.merging`) and which
/// lines a hook may answer with (`isValidHeaderLine`), from plain values. The
/// hook's calls themselves are tested with real transfers in Tests/capi/test_hook.c and the
/// bindings' tests.
final class RequestHookTests: XCTestCase {
  func testAnswerReplacesLinesOfTheSameNameAndAddsTheRest() {
    let hop = ["X-App: 1", "authorization: Bearer old", "Authorization: Bearer older", "If-None-Match: \"e\""]
    XCTAssertEqual(TransferRequest.merging(hop, []), hop)
    XCTAssertEqual(TransferRequest.merging(hop, ["Authorization: Bearer new", "X-Trace: 9"]),
                   ["X-App: 1", "If-None-Match: \"e\"", "Authorization: Bearer new", "X-Trace: 9"])
    // Names compare without case and surrounding blanks.
    XCTAssertEqual(TransferRequest.merging(["x-app : 1"], ["X-APP: 2"]), ["X-APP: 2"])
  }

  func testValidHeaderLines() {
    XCTAssertTrue(isValidHeaderLine("Authorization: Bearer t"))
    XCTAssertTrue(isValidHeaderLine("X-Empty:"))
    XCTAssertFalse(isValidHeaderLine("no colon"))
    XCTAssertFalse(isValidHeaderLine(": no name"))
    XCTAssertFalse(isValidHeaderLine("X: a\r\nInjected: 1"))
    XCTAssertFalse(isValidHeaderLine("X: a\nb"))
  }
}
