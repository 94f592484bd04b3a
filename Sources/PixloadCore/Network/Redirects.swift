/// A transfer's redirects, followed by the engine one hop at a time (never libcurl's
/// CURLOPT_FOLLOWLOCATION), so that every hop is checked against the same rules: only
/// http(s) and only the allowed schemes; never from https to http, so a chain that reached
/// https stays there; at most `maxRedirects` hops; no URL twice (a loop); and a hop to
/// another origin gets no credentials (`TransferRequest.headers(for:)`).
struct RedirectChain: Equatable {
  /// The URL the request asked for.
  let origin: RequestURL
  /// The URL the transfer asks for now (the origin until a redirect is followed).
  private(set) var current: RequestURL
  /// Every URL asked for so far, the current one included.
  private(set) var visited: Set<String>
  /// Redirects followed so far.
  private(set) var hops = 0

  init(_ origin: RequestURL) {
    self.origin = origin
    current = origin
    visited = [origin.text]
  }

  /// The statuses that redirect a GET to Location: all of them are followed as a GET with
  /// no body (303 says so; 301 and 302 change only a POST; 307 and 308 keep the method).
  static let redirectStatuses: Set<Int> = [301, 302, 303, 307, 308]

  /// The next hop for a response with `status` and `location` (the raw header value), or
  /// why the redirect is refused; `status` is the refusal's HTTP status.
  func next(status: Int, location: String, maxRedirects: Int,
            allowedSchemes: Set<String>) -> Result<RequestURL, LoadError> {
    if hops >= maxRedirects {
      return .failure(LoadError(.tooManyRedirects, "more than \(maxRedirects) redirects (max_redirects), last to '\(location.prefix(200))'",
                                httpStatus: status))
    }
    let target: RequestURL
    do throws(LoadError) {
      target = try current.resolving(location)
    } catch {
      var error = error
      error.httpStatus = status
      return .failure(error)
    }
    // Never a file:// (or any other scheme) through a redirect, whatever the allow-list.
    guard target.isHTTP, allowedSchemes.contains(target.scheme) else {
      return .failure(LoadError(.schemeNotAllowed, "redirect from \(current) to \(target.scheme):// refused",
                                httpStatus: status))
    }
    // Every earlier hop was checked the same way, so the chain is on https from the first
    // https hop on: this is "once https, always https".
    if current.isHTTPS && !target.isHTTPS {
      return .failure(LoadError(.schemeNotAllowed, "redirect from https to http refused (\(current) to \(target))",
                                httpStatus: status))
    }
    if visited.contains(target.text) {
      return .failure(LoadError(.tooManyRedirects, "redirect loop: \(current) redirects back to \(target)",
                                httpStatus: status))
    }
    return .success(target)
  }

  /// Moves the chain to `target` (a URL `next` returned).
  mutating func follow(_ target: RequestURL) {
    current = target
    visited.insert(target.text)
    hops += 1
  }
}

/// The headers a transfer sends, hop after hop. The one place a hop's request is built:
/// whatever must see every hop (a credential hook) belongs here.
struct TransferRequest {
  /// The loader's headers (pxl_config.headers).
  var loaderHeaders: [String] = []
  /// The request's own (pxl_request.headers): credentials for the origin.
  var requestHeaders: [String] = []
  /// If-None-Match / If-Modified-Since of a revalidation: about the resource, sent on
  /// every hop.
  var validatorHeaders: [String] = []

  /// Header names that carry credentials: a loader header with one of them is held back
  /// from another origin, as the request's own headers are.
  static let credentialNames: Set<String> = ["authorization", "cookie", "proxy-authorization"]

  /// The lines sent to `url` on a transfer that asked for `origin`: all of them to the
  /// origin (or to the origin's own https upgrade); to another host or port the request's
  /// own headers are dropped, and so are the loader's credential headers
  /// (`credentialNames`); the loader's other headers and the validators always go.
  func headers(for url: RequestURL, origin: RequestURL) -> [String] {
    if Self.sameOrigin(url, origin) { return loaderHeaders + requestHeaders + validatorHeaders }
    let loader = loaderHeaders.filter { !Self.credentialNames.contains(Self.headerName($0)) }
    return loader + validatorHeaders
  }

  /// The same host and port, or the same host's upgrade from http on 80 to https on 443:
  /// whom the origin's credentials are for.
  static func sameOrigin(_ url: RequestURL, _ origin: RequestURL) -> Bool {
    guard url.host == origin.host else { return false }
    if url.port == origin.port { return true }
    return origin.scheme == "http" && origin.port == 80 && url.scheme == "https" && url.port == 443
  }
}
