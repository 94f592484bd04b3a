import CCurl
import XCTest
@testable import PixloadCore

/// How a finished attempt ends for its request, judged from plain values: no libcurl
/// transfer, no server.
final class HTTPOutcomeTests: XCTestCase {
  private let configuration: EngineConfiguration = {
    var configuration = EngineConfiguration()
    configuration.maxRetries = 2
    configuration.retryBaseDelayMilliseconds = 250
    configuration.retryMaxDelayMilliseconds = 10_000
    return configuration
  }()

  private func judge(_ attempt: FinishedAttempt, attemptsMade: Int = 1, jitter: Double = 1) -> HTTPOutcome {
    HTTPOutcome(attempt, attemptsMade: attemptsMade, chain: RedirectChain(try! RequestURL(parsing: "http://example.com/a.jpg")),
                configuration: configuration, jitter: { jitter })
  }

  private func failure(_ outcome: HTTPOutcome) -> LoadError? {
    if case .failure(let error) = outcome { return error }
    return nil
  }

  private func retryDelay(_ outcome: HTTPOutcome) -> UInt64? {
    if case .retry(_, let delay) = outcome { return delay }
    return nil
  }

  func testA2xxIsASuccessAndOtherStatusesAreHTTPErrors() {
    guard case .success(let data) = judge(FinishedAttempt(code: CURLE_OK, httpStatus: 200, body: [1, 2])) else {
      return XCTFail("200 is a success")
    }
    XCTAssertEqual(data.bytes, [1, 2])
    XCTAssertEqual(data.httpStatus, 200)
    let notFound = failure(judge(FinishedAttempt(code: CURLE_OK, httpStatus: 404)))
    XCTAssertEqual(notFound?.status, .http)
    XCTAssertEqual(notFound?.httpStatus, 404)
    XCTAssertEqual(notFound?.message, "HTTP status 404")
    // A redirect libcurl did not follow (too many, or not allowed) is no body either.
    XCTAssertEqual(failure(judge(FinishedAttempt(code: CURLE_OK, httpStatus: 302)))?.httpStatus, 302)
    // file:// has no status: what it read is the body.
    guard case .success = judge(FinishedAttempt(code: CURLE_OK, httpStatus: 0, isHTTP: false)) else {
      return XCTFail("a file read is a success")
    }
  }

  func testA304IsASuccessOnlyForAConditionalRequest() {
    guard case .success(let data) = judge(FinishedAttempt(code: CURLE_OK, httpStatus: 304, conditional: true)) else {
      return XCTFail("304 answers a revalidation")
    }
    XCTAssertEqual(data.httpStatus, 304)
    XCTAssertEqual(failure(judge(FinishedAttempt(code: CURLE_OK, httpStatus: 304)))?.status, .http)
  }

  /// The transfer's own reason wins over libcurl's code, which then only says that the
  /// write callback refused the bytes; a listener that ended early gets the body so far.
  func testTheTransfersOwnEndWinsOverLibcurlsCode() {
    let tooLarge = failure(judge(FinishedAttempt(code: CURLE_WRITE_ERROR, httpStatus: 200,
                                                 abortReason: LoadError(.bodyTooLarge, "too big"))))
    XCTAssertEqual(tooLarge?.status, .bodyTooLarge)
    XCTAssertEqual(tooLarge?.httpStatus, 200, "the last status seen")
    guard case .success(let data) = judge(FinishedAttempt(code: CURLE_WRITE_ERROR, httpStatus: 200,
                                                          body: [9], endedEarly: true)) else {
      return XCTFail("ended early is a success")
    }
    XCTAssertTrue(data.endedEarly)
    XCTAssertEqual(data.bytes, [9])
  }

  func testLibcurlErrorsHaveTheirStatusAndMessage() {
    let dns = failure(judge(FinishedAttempt(code: CURLE_COULDNT_RESOLVE_HOST, httpStatus: 0,
                                            errorText: "Could not resolve host: nowhere")))
    XCTAssertEqual(dns?.status, .dns)
    XCTAssertEqual(dns?.message, "Could not resolve host: nowhere")
    let tls = failure(judge(FinishedAttempt(code: CURLE_PEER_FAILED_VERIFICATION, httpStatus: 0)))
    XCTAssertEqual(tls?.status, .tls)
    XCTAssertEqual(tls?.message, String(cString: curl_easy_strerror(CURLE_PEER_FAILED_VERIFICATION)),
                   "libcurl's words when its error buffer is empty")
    XCTAssertEqual(HTTPOutcome.status(for: CURLE_TOO_MANY_REDIRECTS), .tooManyRedirects)
    XCTAssertEqual(HTTPOutcome.status(for: CURLE_UNSUPPORTED_PROTOCOL), .schemeNotAllowed)
    XCTAssertEqual(HTTPOutcome.status(for: CURLE_SEND_ERROR), .network)
  }

  /// Broken connections and overloaded servers are retried, with exponential backoff, while
  /// attempts are left; other failures are reported at once.
  func testTransientFailuresAreRetriedWithBackoffWhileAttemptsAreLeft() {
    let refused = FinishedAttempt(code: CURLE_COULDNT_CONNECT, httpStatus: 0)
    XCTAssertEqual(retryDelay(judge(refused, attemptsMade: 1)), 250_000_000)
    XCTAssertEqual(retryDelay(judge(refused, attemptsMade: 2)), 500_000_000)
    XCTAssertEqual(retryDelay(judge(refused, attemptsMade: 2, jitter: 1.5)), 750_000_000)
    XCTAssertEqual(failure(judge(refused, attemptsMade: 3))?.status, .connect, "maxRetries 2: three attempts in all")
    let overloaded = FinishedAttempt(code: CURLE_OK, httpStatus: 503)
    XCTAssertNotNil(retryDelay(judge(overloaded)))
    XCTAssertNotNil(retryDelay(judge(FinishedAttempt(code: CURLE_OK, httpStatus: 429))))
    XCTAssertNotNil(retryDelay(judge(FinishedAttempt(code: CURLE_WRITE_ERROR, httpStatus: 502,
                                                     abortReason: LoadError(.http, "HTTP status 502", httpStatus: 502)))),
                    "an error page stopped at its first byte")
    XCTAssertNil(retryDelay(judge(FinishedAttempt(code: CURLE_OK, httpStatus: 404))))
    XCTAssertNil(retryDelay(judge(FinishedAttempt(code: CURLE_COULDNT_RESOLVE_HOST, httpStatus: 0))))
    XCTAssertNil(retryDelay(judge(FinishedAttempt(code: CURLE_OPERATION_TIMEDOUT, httpStatus: 0))))
  }

  /// The server's Retry-After replaces the backoff, capped like it.
  func testRetryAfterReplacesTheBackoffUpToTheCap() {
    XCTAssertEqual(retryDelay(judge(FinishedAttempt(code: CURLE_OK, httpStatus: 503, retryAfterSeconds: 3),
                                    jitter: 1.5)), 3_000_000_000)
    XCTAssertEqual(retryDelay(judge(FinishedAttempt(code: CURLE_OK, httpStatus: 429, retryAfterSeconds: 3600))),
                   10_000_000_000)
  }
}
