import CCurl
import XCTest
@testable import PixloadCore

/// The libcurl options the safety rules rely on are checked, not assumed.
final class CurlOptionTests: XCTestCase {
  /// A libcurl without CURLOPT_PROTOCOLS_STR (older than 7.85.0) must stop the engine with
  /// an error that names the option and the version, never run without the allow-list.
  func testAMissingSafetyOptionIsAClearError() {
    var configuration = EngineConfiguration()
    configuration.caFile = "/etc/ssl/certs/ca-certificates.crt"
    let options = CurlOption.safety(configuration, protocols: "http,https")
    XCTAssertEqual(Set(options.map(\.name)), [
      "CURLOPT_NOSIGNAL", "CURLOPT_PROTOCOLS_STR", "CURLOPT_FOLLOWLOCATION",
      "CURLOPT_CONNECTTIMEOUT_MS", "CURLOPT_TIMEOUT_MS", "CURLOPT_MAXFILESIZE_LARGE",
      "CURLOPT_SSL_VERIFYPEER", "CURLOPT_SSL_VERIFYHOST", "CURLOPT_SSLVERSION", "CURLOPT_CAINFO", "CURLOPT_CAPATH",
    ])
    var tried: [String] = []
    XCTAssertThrowsError(try CurlOption.require(options, libcurlVersion: "7.74.0") { option in
      tried.append(option.name)
      return option.id == CURLOPT_PROTOCOLS_STR ? CURLE_UNKNOWN_OPTION : CURLE_OK
    }) { error in
      let error = error as! LoadError
      XCTAssertEqual(error.status, .unsupported)
      XCTAssertEqual(error.message, "libcurl 7.74.0 lacks CURLOPT_PROTOCOLS_STR (needs 7.85.0)")
    }
    XCTAssertEqual(tried.last, "CURLOPT_PROTOCOLS_STR")

    // Refused for another reason (a bad value): still an error, with libcurl's words.
    XCTAssertThrowsError(try CurlOption.require(options, libcurlVersion: "8.0.0") { option in
      option.id == CURLOPT_SSLVERSION ? CURLE_BAD_FUNCTION_ARGUMENT : CURLE_OK
    }) { error in
      XCTAssertTrue((error as! LoadError).message.hasPrefix("libcurl 8.0.0 refused CURLOPT_SSLVERSION: "))
    }
  }

  /// This machine's libcurl has every option: creating an engine succeeds.
  func testThisLibcurlPassesTheProbe() throws {
    var configuration = EngineConfiguration()
    configuration.allowedSchemes = []
    let engine = try CurlEngine(configuration: configuration)
    engine.shutdown()
    XCTAssertFalse(CurlOption.libcurlVersion.isEmpty)
    XCTAssertTrue(CurlOption.libcurlVersion.first!.isNumber, CurlOption.libcurlVersion)
  }
}
