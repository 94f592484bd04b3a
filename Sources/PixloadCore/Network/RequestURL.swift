import CCurl

/// A URL parsed once, at intake, with libcurl's own parser (so what we accept is exactly
/// what the engine fetches), and carried as a value to every stage after: nobody looks at
/// a URL's text to learn its scheme or host again. Two kinds libcurl does not fetch are
/// kept as the host wrote them (scheme lower-cased): `data:` URIs, and URLs of schemes
/// libcurl does not know (a host fetcher's, `app:...`), which go to whoever serves them.
public struct RequestURL: Sendable, Hashable, CustomStringConvertible {
  /// The URL as the parser normalised it (scheme lower-cased, `https:/host` spelled
  /// `https://host/`): the text handed to libcurl, so the transfer fetches what was checked.
  public let text: String
  /// Lower case: "http", "https", "file", ...
  public let scheme: String
  /// Lower case; "" where the scheme has none (file://).
  public let host: String
  /// The port the URL names, else its scheme's default (80, 443); 0 when it has none (file://).
  public let port: Int
  /// Kept as written, not parsed by libcurl (`data:`, a scheme libcurl does not know).
  public let isVerbatim: Bool

  /// Parses `text`; throws `.malformedURL` for text libcurl cannot parse, a URL without a
  /// scheme, an http(s) URL without a host, a `data:` URI without a comma, or a control
  /// character in a `data:` URI or a URL of a scheme libcurl does not know.
  public init(parsing text: String) throws(LoadError) {
    try self.init(parsing: text, against: nil)
  }

  /// A redirect's Location, relative or absolute, resolved against this URL (RFC 3986, by
  /// libcurl's URL API: the base set first, then the reference); throws `.malformedURL`
  /// as `init(parsing:)` does.
  public func resolving(_ location: String) throws(LoadError) -> RequestURL {
    try RequestURL(parsing: location, against: self)
  }

  private init(parsing text: String, against base: RequestURL?) throws(LoadError) {
    if base == nil, let scheme = Self.leadingScheme(text), scheme == "data" {
      guard text.utf8.contains(UInt8(ascii: ",")) else {
        throw LoadError(.malformedURL, "data: URI '\(text.prefix(200))' has no comma")
      }
      self = try RequestURL(verbatim: text, scheme: scheme)
      return
    }
    guard let handle = curl_url() else { throw LoadError(.noMemory, "out of memory parsing URL") }
    defer { curl_url_cleanup(handle) }
    if let base, curl_url_set(handle, CURLUPART_URL, base.text, 0) != CURLUE_OK {
      throw LoadError(.malformedURL, "malformed URL '\(base.text.prefix(200))'")
    }
    let rc = curl_url_set(handle, CURLUPART_URL, text, 0)
    if base == nil, rc == CURLUE_UNSUPPORTED_SCHEME, let scheme = Self.leadingScheme(text) {
      self = try RequestURL(verbatim: text, scheme: scheme)
      return
    }
    if rc != CURLUE_OK {
      throw LoadError(.malformedURL, "malformed URL '\(text.prefix(200))': \(String(cString: curl_url_strerror(rc)))")
    }
    guard let scheme = Self.part(handle, CURLUPART_SCHEME)?.lowercased() else {
      throw LoadError(.malformedURL, "URL '\(text.prefix(200))' has no scheme")
    }
    let host = Self.part(handle, CURLUPART_HOST)?.lowercased() ?? ""
    if (scheme == "http" || scheme == "https") && host.isEmpty {
      throw LoadError(.malformedURL, "URL '\(text.prefix(200))' has no host")
    }
    self.scheme = scheme
    self.host = host
    port = Self.part(handle, CURLUPART_PORT, flags: UInt32(CURLU_DEFAULT_PORT)).flatMap { Int($0) } ?? 0
    isVerbatim = false
    self.text = Self.part(handle, CURLUPART_URL) ?? text
  }

  /// A URL libcurl does not parse, as written: the scheme lower-cased, the host (lower
  /// case) read from a `//` authority when there is one.
  private init(verbatim text: String, scheme: String) throws(LoadError) {
    let rest = text.utf8.dropFirst(scheme.utf8.count + 1)
    guard !rest.isEmpty, !rest.contains(where: { $0 < 0x20 || $0 == 0x7f }) else {
      throw LoadError(.malformedURL, "malformed URL '\(text.prefix(200))'")
    }
    self.scheme = scheme
    self.text = scheme + ":" + String(decoding: rest, as: UTF8.self)
    var host = ""
    if rest.starts(with: "//".utf8) {
      let authority = rest.dropFirst(2).prefix { !"/?#".utf8.contains($0) }
      let afterUser = authority.lastIndex(of: UInt8(ascii: "@")).map { authority[authority.index(after: $0)...] } ?? authority
      host = String(decoding: afterUser.prefix { $0 != UInt8(ascii: ":") }, as: UTF8.self).lowercased()
    }
    self.host = host
    self.port = 0
    self.isVerbatim = true
  }

  /// The scheme of `text` (RFC 3986: a letter, then letters, digits, "+", "-", "."; then
  /// ":"), lower-cased; nil when it does not start with one.
  static func leadingScheme(_ text: String) -> String? {
    var scheme: [UInt8] = []
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: ":"): return scheme.isEmpty ? nil : String(decoding: scheme, as: UTF8.self).lowercased()
      case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"): scheme.append(byte)
      case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."):
        if scheme.isEmpty { return nil }
        scheme.append(byte)
      default: return nil
      }
    }
    return nil
  }

  /// http or https: a transfer with an HTTP status and caching headers.
  public var isHTTP: Bool { scheme == "http" || scheme == "https" }
  public var isHTTPS: Bool { scheme == "https" }
  /// A local file: no status, no caching headers.
  public var isFile: Bool { scheme == "file" }

  public var description: String { text }

  private static func part(_ handle: OpaquePointer, _ which: CURLUPart, flags: UInt32 = 0) -> String? {
    var value: UnsafeMutablePointer<CChar>?
    guard curl_url_get(handle, which, &value, flags) == CURLUE_OK, let value else { return nil }
    defer { curl_free(value) }
    return String(cString: value)
  }
}

/// HTTP dates (Expires, Retry-After), through libcurl's parser.
enum HTTPDate {
  static func seconds(_ text: String) -> Int? {
    let value = curl_getdate(text, nil)
    return value < 0 ? nil : Int(value)
  }
}
