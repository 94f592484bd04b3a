import CCurl
import XCTest
@testable import PixloadCore

/// The rules every redirect hop is checked against (`RedirectChain`) and the headers each
/// hop gets (`TransferRequest`), from plain values: no transfer, no server.
final class RedirectTests: XCTestCase {
  private func url(_ text: String) -> RequestURL { try! RequestURL(parsing: text) }

  private func next(_ chain: RedirectChain, _ location: String, status: Int = 302, maxRedirects: Int = 5,
                    allowed: Set<String> = ["http", "https"]) -> Result<RequestURL, LoadError> {
    chain.next(status: status, location: location, maxRedirects: maxRedirects, allowedSchemes: allowed)
  }

  private func target(_ result: Result<RequestURL, LoadError>) -> String? {
    if case .success(let url) = result { return url.text }
    return nil
  }

  private func refusal(_ result: Result<RequestURL, LoadError>) -> LoadError? {
    if case .failure(let error) = result { return error }
    return nil
  }

  func testARelativeLocationIsResolvedAgainstTheCurrentURL() {
    let chain = RedirectChain(url("http://a.example/img/x/1.jpg?s=1"))
    XCTAssertEqual(target(next(chain, "2.jpg")), "http://a.example/img/x/2.jpg")
    XCTAssertEqual(target(next(chain, "../y/3.jpg")), "http://a.example/img/y/3.jpg")
    XCTAssertEqual(target(next(chain, "/root.jpg?q=2")), "http://a.example/root.jpg?q=2")
    XCTAssertEqual(target(next(chain, "//b.example/z.jpg")), "http://b.example/z.jpg")
    XCTAssertEqual(target(next(chain, "https://c.example:8443/w.jpg")), "https://c.example:8443/w.jpg")
    // Against the hop the chain is at, not the origin.
    var moved = chain
    moved.follow(url("https://d.example/deep/dir/"))
    XCTAssertEqual(target(next(moved, "e.jpg")), "https://d.example/deep/dir/e.jpg")
  }

  func testOnceOnHTTPSTheChainNeverGoesBackToHTTP() {
    let plain = RedirectChain(url("http://a.example/1.jpg"))
    XCTAssertEqual(target(next(plain, "https://a.example/1.jpg")), "https://a.example/1.jpg")
    // http -> https -> http: the second hop is refused.
    var upgraded = plain
    upgraded.follow(url("https://a.example/1.jpg"))
    let down = refusal(next(upgraded, "http://b.example/1.jpg", status: 301))
    XCTAssertEqual(down?.status, .schemeNotAllowed)
    XCTAssertEqual(down?.httpStatus, 301)
    XCTAssertTrue(down?.message.contains("from https to http") ?? false, down?.message ?? "")
    // A relative Location keeps the scheme: followed.
    XCTAssertEqual(target(next(upgraded, "/2.jpg")), "https://a.example/2.jpg")
  }

  /// Defect 1 of issue 32: a URL spelled `https:/host` or `https:///host` is https for
  /// every rule, since the chain starts from the parsed URL, not its text.
  func testOddlySpelledHTTPSIsHTTPS() {
    for spelling in ["https:/a.example/1.jpg", "https:///a.example/1.jpg", "HTTPS://a.example/1.jpg"] {
      let origin = url(spelling)
      XCTAssertTrue(origin.isHTTPS, spelling)
      XCTAssertEqual(origin.text, "https://a.example/1.jpg", spelling)
      XCTAssertEqual(origin.port, 443, spelling)
      XCTAssertEqual(refusal(next(RedirectChain(origin), "http://a.example/1.jpg"))?.status, .schemeNotAllowed, spelling)
    }
  }

  func testOnlyAllowedHTTPSchemes() {
    let chain = RedirectChain(url("http://a.example/1.jpg"))
    // Never a file:// through a redirect, not even when file:// URLs are allowed.
    XCTAssertEqual(refusal(next(chain, "file:///etc/passwd", allowed: ["http", "https", "file"]))?.status,
                   .schemeNotAllowed)
    XCTAssertEqual(refusal(next(chain, "ftp://a.example/1.jpg"))?.status, .schemeNotAllowed)
    // A loader that allows https only follows no redirect to http.
    XCTAssertEqual(refusal(next(chain, "http://b.example/1.jpg", allowed: ["https"]))?.status, .schemeNotAllowed)
    XCTAssertEqual(refusal(next(chain, "http://[bad"))?.status, .malformedURL)
  }

  func testTheLimitAndLoops() {
    var chain = RedirectChain(url("http://a.example/0"))
    for hop in 1...3 {
      guard case .success(let to) = next(chain, "/\(hop)", maxRedirects: 3) else { return XCTFail("hop \(hop)") }
      chain.follow(to)
    }
    XCTAssertEqual(chain.hops, 3)
    let limit = refusal(next(chain, "/4", maxRedirects: 3))
    XCTAssertEqual(limit?.status, .tooManyRedirects)
    XCTAssertTrue(limit?.message.hasPrefix("more than 3 redirects") ?? false, limit?.message ?? "")
    XCTAssertEqual(refusal(next(RedirectChain(url("http://a.example/0")), "/1", maxRedirects: 0))?.status,
                   .tooManyRedirects)
    // Back to any URL already asked for is a loop, said so, long before the limit.
    let loop = refusal(next(chain, "/1", maxRedirects: 50))
    XCTAssertEqual(loop?.status, .tooManyRedirects)
    XCTAssertTrue(loop?.message.hasPrefix("redirect loop: http://a.example/3 redirects back to http://a.example/1") ?? false,
                  loop?.message ?? "")
    XCTAssertEqual(refusal(next(chain, "/0", maxRedirects: 50))?.status, .tooManyRedirects)
    XCTAssertEqual(refusal(next(chain, "/3", maxRedirects: 50))?.status, .tooManyRedirects)
  }

  func testCredentialsStayWithTheirOrigin() {
    let request = TransferRequest(loaderHeaders: ["X-App: 1", "authorization: Bearer loader", "Cookie: c=1"],
                                  requestHeaders: ["Authorization: Bearer request", "X-Row: 7"],
                                  validatorHeaders: ["If-None-Match: \"e\""])
    let origin = url("http://a.example/1.jpg")
    let all = ["X-App: 1", "authorization: Bearer loader", "Cookie: c=1", "Authorization: Bearer request", "X-Row: 7",
               "If-None-Match: \"e\""]
    XCTAssertEqual(request.headers(for: origin, origin: origin), all)
    XCTAssertEqual(request.headers(for: url("http://a.example:80/2.jpg"), origin: origin), all)
    // The same host's upgrade to https keeps them.
    XCTAssertEqual(request.headers(for: url("https://a.example/1.jpg"), origin: origin), all)
    // Another host, or another port: the request's headers and the loader's credentials go.
    let stripped = ["X-App: 1", "If-None-Match: \"e\""]
    XCTAssertEqual(request.headers(for: url("http://b.example/1.jpg"), origin: origin), stripped)
    XCTAssertEqual(request.headers(for: url("http://a.example:8080/1.jpg"), origin: origin), stripped)
    XCTAssertEqual(request.headers(for: url("https://a.example:8443/1.jpg"), origin: origin), stripped)
    XCTAssertEqual(request.headers(for: url("http://sub.a.example/1.jpg"), origin: origin), stripped)
  }

  /// What the engine does with a response: a redirect status with a Location is
  /// "follow" (or the chain's refusal); without a Location, or another 3xx, it is the
  /// HTTP error it was.
  func testTheOutcomeOfARedirectingHop() {
    let chain = RedirectChain(url("https://a.example/1.jpg"))
    let configuration = EngineConfiguration()
    func judge(_ status: Int, _ location: String?, code: CURLcode = CURLE_OK) -> HTTPOutcome {
      HTTPOutcome(FinishedAttempt(code: code, httpStatus: status, location: location), attemptsMade: 1, chain: chain,
                  configuration: configuration)
    }
    for status in [301, 302, 303, 307, 308] {
      guard case .follow(let to) = judge(status, "/2.jpg") else { return XCTFail("\(status) is followed") }
      XCTAssertEqual(to.text, "https://a.example/2.jpg")
    }
    guard case .failure(let down) = judge(302, "http://a.example/1.jpg") else { return XCTFail("a downgrade") }
    XCTAssertEqual(down.status, .schemeNotAllowed)
    for (status, location) in [(302, nil), (300, "/2.jpg"), (305, "/2.jpg")] as [(Int, String?)] {
      guard case .failure(let error) = judge(status, location) else { return XCTFail("\(status) is not followed") }
      XCTAssertEqual(error.status, .http)
      XCTAssertEqual(error.httpStatus, status)
    }
  }
}
