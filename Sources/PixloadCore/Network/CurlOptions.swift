import CCurl

/// One libcurl option the engine sets on every transfer, with the value and the libcurl
/// version that introduced it (for the error when an older libcurl lacks it).
struct CurlOption {
  enum Value {
    case long(Int)
    case offset(Int64)
    case string(String)
    /// A string option set to NULL: libcurl's built-in default is dropped.
    case null
  }

  let id: CURLoption
  let name: String
  let value: Value
  let since: String

  /// Sets the option on an easy handle through the C shim's typed setters.
  func apply(to easy: UnsafeMutableRawPointer) -> CURLcode {
    switch value {
    case .long(let number): return pxl_curl_easy_setopt_long(easy, id, number)
    case .offset(let number): return pxl_curl_easy_setopt_off(easy, id, curl_off_t(number))
    case .string(let text): return pxl_curl_easy_setopt_ptr(easy, id, text)
    case .null: return pxl_curl_easy_setopt_ptr(easy, id, nil)
    }
  }

  /// The options the safety rules rely on: the scheme allow-list, libcurl never following
  /// a redirect itself (the engine does, checking every hop: `RedirectChain`), the size and
  /// time limits, no signals on the engine thread, TLS verification on, the minimum TLS
  /// version, the configured CAs only (when there are any), and the proxy when one is
  /// configured. `protocols` is the comma-separated allow-list of `CURLOPT_PROTOCOLS_STR`.
  static func safety(_ configuration: EngineConfiguration, protocols: String) -> [CurlOption] {
    var options = [
      CurlOption(id: CURLOPT_NOSIGNAL, name: "CURLOPT_NOSIGNAL", value: .long(1), since: "7.10"),
      CurlOption(id: CURLOPT_PROTOCOLS_STR, name: "CURLOPT_PROTOCOLS_STR", value: .string(protocols), since: "7.85.0"),
      CurlOption(id: CURLOPT_FOLLOWLOCATION, name: "CURLOPT_FOLLOWLOCATION", value: .long(0), since: "7.1"),
      CurlOption(id: CURLOPT_CONNECTTIMEOUT_MS, name: "CURLOPT_CONNECTTIMEOUT_MS",
                 value: .long(configuration.connectTimeoutMilliseconds), since: "7.16.2"),
      CurlOption(id: CURLOPT_TIMEOUT_MS, name: "CURLOPT_TIMEOUT_MS", value: .long(configuration.timeoutMilliseconds),
                 since: "7.16.2"),
      CurlOption(id: CURLOPT_MAXFILESIZE_LARGE, name: "CURLOPT_MAXFILESIZE_LARGE",
                 value: .offset(Int64(configuration.maxBodyBytes)), since: "7.11.0"),
      // libcurl's defaults, set anyway: verification must never depend on a build's defaults.
      CurlOption(id: CURLOPT_SSL_VERIFYPEER, name: "CURLOPT_SSL_VERIFYPEER", value: .long(1), since: "7.1"),
      CurlOption(id: CURLOPT_SSL_VERIFYHOST, name: "CURLOPT_SSL_VERIFYHOST", value: .long(2), since: "7.8.1"),
    ]
    let tls = configuration.tlsMinVersion == .v1_3 ? CURL_SSLVERSION_TLSv1_3 : CURL_SSLVERSION_TLSv1_2
    options.append(CurlOption(id: CURLOPT_SSLVERSION, name: "CURLOPT_SSLVERSION", value: .long(Int(tls)), since: "7.52.0"))
    // A configured CA file or directory replaces the system's trust store: both of
    // libcurl's built-in defaults (Debian's: the bundle and /etc/ssl/certs) are replaced,
    // the one not configured by nothing.
    if configuration.caFile != nil || configuration.caPath != nil {
      options.append(CurlOption(id: CURLOPT_CAINFO, name: "CURLOPT_CAINFO",
                                value: configuration.caFile.map { .string($0) } ?? .null, since: "7.1"))
      options.append(CurlOption(id: CURLOPT_CAPATH, name: "CURLOPT_CAPATH",
                                value: configuration.caPath.map { .string($0) } ?? .null, since: "7.9.8"))
    }
    if let proxy = configuration.proxy {
      // "" is libcurl's "no proxy, whatever the environment says".
      options.append(CurlOption(id: CURLOPT_PROXY, name: "CURLOPT_PROXY", value: .string(proxy), since: "7.1"))
    }
    return options
  }

  /// Sets each option with `setopt`; the first one refused throws, naming the option and
  /// `libcurlVersion`. The engine runs this on a throwaway handle when it is created (so
  /// a libcurl too old for a safety rule fails `pxl_loader_new`), and on every transfer.
  static func require(_ options: [CurlOption], libcurlVersion: String,
                      setopt: (CurlOption) -> CURLcode) throws(LoadError) {
    for option in options {
      let code = setopt(option)
      guard code != CURLE_OK else { continue }
      switch code {
      case CURLE_UNKNOWN_OPTION, CURLE_NOT_BUILT_IN:
        throw LoadError(.unsupported, "libcurl \(libcurlVersion) lacks \(option.name) (needs \(option.since))")
      default:
        throw LoadError(.unsupported, "libcurl \(libcurlVersion) refused \(option.name): \(String(cString: curl_easy_strerror(code)))")
      }
    }
  }

  /// The running libcurl's version ("7.88.1"), from "libcurl/7.88.1 OpenSSL/3.0.11 ...".
  static var libcurlVersion: String {
    let full = String(cString: curl_version())
    let first = full.split(separator: " ").first ?? ""
    return first.hasPrefix("libcurl/") ? String(first.dropFirst("libcurl/".count)) : full
  }
}
