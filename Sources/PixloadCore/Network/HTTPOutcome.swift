import CCurl

/// What one finished attempt brought back: libcurl's result and what the transfer
/// collected, as plain values (the transfer reads them off its handle before the engine
/// cleans it up), so that `HTTPOutcome` judges it without libcurl running.
struct FinishedAttempt {
  var code: CURLcode
  /// The last HTTP status seen; 0 when there was none (file://, no response).
  var httpStatus: Int
  var body: [UInt8] = []
  var caching = ResponseCaching()
  /// The progress listener ended the transfer with the body so far.
  var endedEarly = false
  /// Why the transfer stopped itself: an error status at the first byte, a body over the
  /// limit, a stall.
  var abortReason: LoadError?
  /// Made with If-None-Match / If-Modified-Since: a 304 is a success.
  var conditional = false
  /// http(s): a status outside 2xx is an error.
  var isHTTP = true
  /// libcurl's error buffer; "" when it wrote nothing.
  var errorText = ""
  /// The server's Retry-After in seconds; 0 when it gave none.
  var retryAfterSeconds = 0
  /// The last response's Location header, as sent; nil when it had none.
  var location: String?
}

/// How an attempt ends for the request: a success, an error to report, a transient
/// failure that gets another attempt after a backoff, or a redirect to follow.
enum HTTPOutcome {
  case success(DownloadedData)
  case failure(LoadError)
  /// A redirect that `RedirectChain` allows: the transfer's next hop asks for this URL.
  case follow(RequestURL)
  /// Worth another attempt (`isTransient`, attempts left): the engine holds the transfer
  /// this long, then starts it again.
  case retry(LoadError, afterNanoseconds: UInt64)

  /// Judges `attempt`, the `attemptsMade`th (1 for the first) of the hop `chain` is at:
  /// a redirect (301, 302, 303, 307, 308 with a Location) is followed or refused by the
  /// chain's rules; otherwise its result, and whether a failure is retried under
  /// `configuration`'s limits. `jitter` draws the backoff's factor, in 0.5...1.5.
  init(_ attempt: FinishedAttempt, attemptsMade: Int, chain: RedirectChain, configuration: EngineConfiguration,
       jitter: () -> Double = { Double.random(in: 0.5...1.5) }) {
    if attempt.code == CURLE_OK, attempt.abortReason == nil, !attempt.endedEarly, attempt.isHTTP,
       let location = attempt.location, RedirectChain.redirectStatuses.contains(attempt.httpStatus) {
      switch chain.next(status: attempt.httpStatus, location: location, maxRedirects: configuration.maxRedirects,
                        allowedSchemes: configuration.allowedSchemes) {
      case .success(let target): self = .follow(target)
      case .failure(let error): self = .failure(error)
      }
      return
    }
    switch Self.result(of: attempt) {
    case .success(let data):
      self = .success(data)
    case .failure(let error):
      guard Self.isTransient(code: attempt.code, error: error), attemptsMade <= configuration.maxRetries else {
        self = .failure(error)
        return
      }
      self = .retry(error, afterNanoseconds: Self.backoffNanoseconds(
        attempt: attemptsMade, retryAfterSeconds: attempt.retryAfterSeconds, configuration: configuration,
        jitter: jitter))
    }
  }

  /// What the request gets when the attempt is its last: a listener that ended it early
  /// gets the body so far; the transfer's own abort reason wins over libcurl's code (which
  /// then only says the write callback refused); an http(s) status outside 2xx is an
  /// error, except 304 to a conditional request; libcurl's error otherwise.
  static func result(of attempt: FinishedAttempt) -> Result<DownloadedData, LoadError> {
    if attempt.endedEarly {
      var data = DownloadedData(bytes: attempt.body, httpStatus: attempt.httpStatus, caching: attempt.caching)
      data.endedEarly = true
      return .success(data)
    }
    if var reason = attempt.abortReason {
      // "The last HTTP status seen": a body cut for its size still came with a 200.
      if reason.httpStatus == 0 { reason.httpStatus = attempt.httpStatus }
      return .failure(reason)
    }
    if attempt.code == CURLE_OK {
      let notModified = attempt.conditional && attempt.httpStatus == 304
      if attempt.isHTTP && !(200..<300).contains(attempt.httpStatus) && !notModified {
        return .failure(LoadError(.http, "HTTP status \(attempt.httpStatus)", httpStatus: attempt.httpStatus))
      }
      return .success(DownloadedData(bytes: attempt.body, httpStatus: attempt.httpStatus, caching: attempt.caching))
    }
    let detail = attempt.errorText.isEmpty ? String(cString: curl_easy_strerror(attempt.code)) : attempt.errorText
    return .failure(LoadError(status(for: attempt.code), detail, httpStatus: attempt.httpStatus))
  }

  /// Failures worth another attempt: the connection broke (refused, reset, closed early,
  /// truncated body) or the server said it is overloaded (5xx, 429). Never other 4xx.
  static func isTransient(code: CURLcode, error: LoadError) -> Bool {
    if error.status == .http { return error.httpStatus >= 500 || error.httpStatus == 429 }
    switch code {
    case CURLE_COULDNT_CONNECT, CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_PARTIAL_FILE,
         CURLE_GOT_NOTHING, CURLE_HTTP2, CURLE_HTTP2_STREAM:
      return true
    default:
      return false
    }
  }

  /// Exponential backoff with jitter (`jitter()`: -50% to +50%), or the server's
  /// Retry-After when it gave one; both capped by the configuration.
  static func backoffNanoseconds(attempt: Int, retryAfterSeconds: Int, configuration: EngineConfiguration,
                                 jitter: () -> Double) -> UInt64 {
    let cap = Double(configuration.retryMaxDelayMilliseconds)
    var milliseconds: Double
    if retryAfterSeconds > 0 {
      milliseconds = Double(retryAfterSeconds) * 1000
    } else {
      let base = Double(configuration.retryBaseDelayMilliseconds) * Double(1 << min(attempt - 1, 20))
      milliseconds = base * jitter()
    }
    return UInt64(max(0, min(milliseconds, cap)) * 1_000_000)
  }

  /// The status a libcurl error reports.
  static func status(for code: CURLcode) -> Status {
    switch code {
    case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: return .dns
    case CURLE_COULDNT_CONNECT: return .connect
    case CURLE_OPERATION_TIMEDOUT: return .timeout
    case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
         CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ENGINE_NOTFOUND,
         CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_CRL_BADFILE, CURLE_SSL_ISSUER_ERROR,
         CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_SHUTDOWN_FAILED:
      return .tls
    case CURLE_UNSUPPORTED_PROTOCOL: return .schemeNotAllowed
    case CURLE_TOO_MANY_REDIRECTS: return .tooManyRedirects
    case CURLE_URL_MALFORMAT: return .malformedURL
    case CURLE_FILESIZE_EXCEEDED: return .bodyTooLarge
    case CURLE_FILE_COULDNT_READ_FILE, CURLE_READ_ERROR: return .io
    case CURLE_OUT_OF_MEMORY: return .noMemory
    default: return .network
    }
  }
}
