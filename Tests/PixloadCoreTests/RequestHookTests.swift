import XCTest
@testable import PixloadCore

/// How a request hook's answer joins a hop's headers (`TransferRequest.merging`) and which
/// lines a hook may answer with (`HookCall.isValidHeaderLine`), from plain values. The
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
    XCTAssertTrue(HookCall.isValidHeaderLine("Authorization: Bearer t"))
    XCTAssertTrue(HookCall.isValidHeaderLine("X-Empty:"))
    XCTAssertFalse(HookCall.isValidHeaderLine("no colon"))
    XCTAssertFalse(HookCall.isValidHeaderLine(": no name"))
    XCTAssertFalse(HookCall.isValidHeaderLine("X: a\r\nInjected: 1"))
    XCTAssertFalse(HookCall.isValidHeaderLine("X: a\nb"))
  }
}
