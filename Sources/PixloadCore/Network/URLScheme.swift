import CCurl

/// URL checks made before a request is accepted, with libcurl's own parser so that what we
/// accept is exactly what the engine can fetch.
enum URLScheme {
  /// The lower-case scheme of `url`, or `.malformedURL`.
  static func parse(_ url: String) throws(LoadError) -> String {
    guard let handle = curl_url() else { throw LoadError(.noMemory, "out of memory parsing URL") }
    defer { curl_url_cleanup(handle) }
    let rc = curl_url_set(handle, CURLUPART_URL, url, 0)
    if rc != CURLUE_OK {
      throw LoadError(.malformedURL, "malformed URL '\(url.prefix(200))': \(String(cString: curl_url_strerror(rc)))")
    }
    var part: UnsafeMutablePointer<CChar>?
    guard curl_url_get(handle, CURLUPART_SCHEME, &part, 0) == CURLUE_OK, let part else {
      throw LoadError(.malformedURL, "URL '\(url.prefix(200))' has no scheme")
    }
    let scheme = String(cString: part).lowercased()
    curl_free(part)
    if scheme == "http" || scheme == "https" {
      var host: UnsafeMutablePointer<CChar>?
      let hostRC = curl_url_get(handle, CURLUPART_HOST, &host, 0)
      defer { curl_free(host) }
      if hostRC != CURLUE_OK || host == nil || host!.pointee == 0 {
        throw LoadError(.malformedURL, "URL '\(url.prefix(200))' has no host")
      }
    }
    return scheme
  }
}

extension URLScheme {
  /// The host of `url` ("" for file://), for the per-host transfer limit.
  static func host(of url: String) throws(LoadError) -> String {
    guard let handle = curl_url() else { throw LoadError(.noMemory, "out of memory parsing URL") }
    defer { curl_url_cleanup(handle) }
    guard curl_url_set(handle, CURLUPART_URL, url, 0) == CURLUE_OK else {
      throw LoadError(.malformedURL, "malformed URL")
    }
    var host: UnsafeMutablePointer<CChar>?
    guard curl_url_get(handle, CURLUPART_HOST, &host, 0) == CURLUE_OK, let host else { return "" }
    defer { curl_free(host) }
    return String(cString: host).lowercased()
  }
}

/// HTTP dates (Expires, Retry-After), through libcurl's parser.
enum HTTPDate {
  static func seconds(_ text: String) -> Int? {
    let value = curl_getdate(text, nil)
    return value < 0 ? nil : Int(value)
  }
}
