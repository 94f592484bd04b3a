import CCurl

/// One request through the engine, across its hops (redirects) and attempts: what libcurl
/// is told (URL, headers, callbacks) and what an attempt collects (body, caching headers,
/// progress, the stall clock). The engine owns it; its fields are touched on the engine
/// thread, except `priority`, `firstQueued` and (while it waits) `host`, which are under the
/// engine's lock.
final class CurlTransfer {
  let id: TransferID
  /// The redirects followed so far; `url` is the hop's URL.
  private(set) var chain: RedirectChain
  var url: RequestURL { chain.current }
  var host: String { url.host }
  /// Its headers, hop by hop (`TransferRequest.headers(for:origin:)`).
  let request: TransferRequest
  var priority: Int32
  let maxBodyBytes: Int
  let progress: TransferProgress?
  let completion: @Sendable (Result<DownloadedData, LoadError>) -> Void
  /// The engine's clock: the stall clock and progress throttling read it.
  private let clock: EngineClock
  var easy: UnsafeMutableRawPointer?
  var body: [UInt8] = []
  var abortReason: LoadError?
  let errorBuffer: UnsafeMutablePointer<CChar>
  /// The hop's request headers as libcurl wants them; remade for each hop, freed with the
  /// transfer.
  private var headerList: UnsafeMutablePointer<curl_slist>?
  /// The Location of the hop's last response, nil when it had none.
  var location: String?
  /// Whether the hop's TLS handshake was looked at (`noteHandshake`), and what it was: a
  /// new connection's full or resumed handshake; nil when it reused a connection or was
  /// not TLS.
  private var handshakeSeen = false
  private(set) var handshake: TLSHandshake?
  /// Attempts started so far.
  var attempts = 0
  /// When it first joined the waiting list (after any start delay); engine lock.
  var firstQueued: UInt64?
  /// When it last joined the waiting list, and the time all its attempts waited there for
  /// a slot (request metrics); engine lock, then the engine thread once started.
  var lastQueued: UInt64 = 0
  var slotWaitNanoseconds: UInt64 = 0
  /// Made with If-None-Match / If-Modified-Since: a 304 is a success.
  var conditional = false
  /// The request hook's answer for this hop (`RequestHook`): lines added or replacing
  /// the hop's own; whether it answered for the attempt about to start; the serial of the
  /// call waiting for it (a late answer to an older call is ignored); the 401 or 403 the
  /// next call follows; and whether that second call was made (once per transfer). Engine
  /// lock.
  var hookHeaders: [String] = []
  var hookAnswered = false
  var hookSerial: UInt64 = 0
  var hookStatus = 0
  var authRetried = false
  var caching = ResponseCaching()
  /// When the attempt started or last received body bytes (the stall clock).
  var lastActivity: UInt64 = 0
  /// The progress listener ended the transfer with the body so far.
  var endedEarly = false
  /// Body bytes of a redirect response, dropped.
  private var redirectBodyBytes = 0
  /// The response's declared length (0 until known or when not declared).
  private(set) var expectedLength: UInt64 = 0
  private var lastProgress: UInt64 = 0
  /// Bytes arrived since the last report, held back by the throttle: the engine reports
  /// them once it has passed (`heldProgressDue`), so the last bytes before the server pauses
  /// (the scan a preview waits for) are not left unreported until more come.
  private var progressHeld = false
  /// What the transfer has measured so far, for a request cancelled before it ends
  /// (`CurlEngine.measuredSoFar`): published on the engine thread as the response
  /// arrives (libcurl's handle may be read only there), read on any thread, both under
  /// the engine's lock. Boxed and made at the first attempt: thousands of transfers may
  /// wait, and a waiting one pays a pointer for it, not a lock and the figures
  /// (Tests/e2e/exhaust.c holds a queued request under 4 KiB).
  private final class Measured {
    var timing: TransferTiming
    init(_ timing: TransferTiming) { self.timing = timing }
  }
  private var measured: Measured?
  private let engineLock: Lock
  /// When the body's writes last published the timings (engine clock).
  private var lastMeasuredPublish: UInt64 = 0

  /// Progress reports from the network thread are throttled to this; each request's own
  /// interval is applied again on its queue.
  static let progressGranularity: UInt64 = 20_000_000

  init(id: TransferID, url: RequestURL, request: TransferRequest, priority: Int32, maxBodyBytes: Int,
       clock: @escaping EngineClock, engineLock: Lock, progress: TransferProgress?,
       completion: @escaping @Sendable (Result<DownloadedData, LoadError>) -> Void) {
    self.id = id
    self.engineLock = engineLock
    chain = RedirectChain(url)
    self.request = request
    self.priority = priority
    self.maxBodyBytes = maxBodyBytes
    self.clock = clock
    self.progress = progress
    self.completion = completion
    errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
    errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
  }

  deinit {
    errorBuffer.deallocate()
    curl_slist_free_all(headerList)
  }

  /// Moves the transfer to a redirect's target (`RedirectChain.next`): its next attempt
  /// asks for it, with the headers that hop gets, and it has its own retries.
  func follow(_ target: RequestURL) {
    chain.follow(target)
    attempts = 0
    hookHeaders = []
    hookAnswered = false
  }

  /// The lines the hop sends: its own (`TransferRequest.headers(for:origin:)`) with the
  /// hook's answer applied.
  var hopHeaders: [String] {
    TransferRequest.merging(request.headers(for: url, origin: chain.origin), hookHeaders)
  }

  /// Resets what one attempt collects, before it starts, and makes the hop's headers.
  func prepareAttempt() {
    attempts += 1
    curl_slist_free_all(headerList)
    headerList = nil
    for header in hopHeaders {
      headerList = curl_slist_append(headerList, header) ?? headerList
    }
    location = nil
    handshakeSeen = false
    handshake = nil
    lastActivity = clock()
    caching = ResponseCaching()
    body = []
    redirectBodyBytes = 0
    abortReason = nil
    endedEarly = false
    progressHeld = false
    expectedLength = 0
    errorBuffer.pointee = 0
  }

  /// Sets what libcurl needs for this request on `easy`: the URL, the error buffer, the
  /// body and header callbacks, the user agent and the request headers. The first option
  /// refused throws (the safety options are the engine's, set before).
  func setRequestOptions(on easy: UnsafeMutableRawPointer, userAgent: String) throws(LoadError) {
    let user = Unmanaged.passUnretained(self).toOpaque()
    let required: [(String, () -> CURLcode)] = [
      ("CURLOPT_URL", { pxl_curl_easy_setopt_ptr(easy, CURLOPT_URL, self.url.text) }),
      ("CURLOPT_ERRORBUFFER", { pxl_curl_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, self.errorBuffer) }),
      ("CURLOPT_WRITEFUNCTION", { pxl_curl_easy_setopt_write(easy, curlWriteCallback, user) }),
      ("CURLOPT_HEADERFUNCTION", { pxl_curl_easy_setopt_header(easy, curlHeaderCallback, user) }),
      ("CURLOPT_USERAGENT", { pxl_curl_easy_setopt_ptr(easy, CURLOPT_USERAGENT, userAgent) }),
      ("CURLOPT_HTTPHEADER", {
        self.headerList.map { pxl_curl_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, $0) } ?? CURLE_OK
      }),
    ]
    for (name, setopt) in required {
      let code = setopt()
      if code != CURLE_OK {
        throw LoadError(HTTPOutcome.status(for: code), "libcurl refused \(name): \(String(cString: curl_easy_strerror(code)))")
      }
    }
  }

  /// What the attempt that just ended measured, read off its handle (request metrics).
  func timing(_ easy: UnsafeMutableRawPointer, httpStatus: Int, connects: Int) -> TransferTiming {
    var times: (Int64, Int64, Int64, Int64, Int64) = (0, 0, 0, 0, 0)
    withUnsafeMutableBytes(of: &times) { pxl_curl_times(easy, $0.baseAddress!.assumingMemoryBound(to: Int64.self)) }
    var timing = TransferTiming(nameLookup: times.0, connect: times.1, appConnect: times.2,
                                startTransfer: times.3, total: times.4)
    timing.slotWaitMicroseconds = slotWaitNanoseconds / 1000
    timing.bytesReceived = UInt64(body.count)
    timing.httpStatus = Int32(clamping: httpStatus)
    timing.httpVersion = Int32(clamping: pxl_curl_http_version(easy))
    // The engine follows redirects itself (RedirectChain): libcurl's own count is 0.
    timing.redirects = Int32(clamping: chain.hops)
    timing.connectionReused = connects == 0 && url.isHTTP && times.3 > 0
    return timing
  }

  /// Publishes what the attempt under way has measured (`measured`): its timing so far.
  func publishMeasured() {
    guard let easy else { return }
    publish(timing(easy, httpStatus: pxl_curl_response_code(easy), connects: pxl_curl_num_connects(easy)))
  }

  /// Publishes `timing` as what the transfer has measured (an attempt's final figures,
  /// kept while it waits to retry).
  func publish(_ timing: TransferTiming) {
    engineLock.withLock {
      if let measured { measured.timing = timing } else { measured = Measured(timing) }
    }
  }

  /// What the transfer has measured so far (nothing before its first attempt); the
  /// engine's lock held.
  var measuredSoFar: TransferTiming { measured?.timing ?? TransferTiming() }

  /// The attempt that just ended, as `HTTPOutcome` judges it: libcurl's `code`, the last
  /// HTTP status and the server's Retry-After (read off the handle before it was cleaned up).
  func finishedAttempt(code: CURLcode, httpStatus: Int, retryAfterSeconds: Int) -> FinishedAttempt {
    FinishedAttempt(code: code, httpStatus: httpStatus, body: body, caching: caching, endedEarly: endedEarly,
                    abortReason: abortReason, conditional: conditional, isHTTP: url.isHTTP,
                    errorText: errorBuffer.pointee != 0 ? String(cString: errorBuffer) : "",
                    retryAfterSeconds: retryAfterSeconds, location: location)
  }

  /// The write callback's work: appends to the body, or returns 0 to abort the attempt
  /// (an HTTP error status at the first byte, a body over the limit, a progress listener
  /// that has what it needs).
  func receive(_ data: UnsafeMutablePointer<CChar>?, _ length: Int) -> Int {
    lastActivity = clock()
    if body.isEmpty, let easy {
      let status = pxl_curl_response_code(easy)
      // A redirect's own body (a line of HTML) is read and dropped, so that its connection
      // stays open for the next hop; the engine follows the Location.
      if location != nil && RedirectChain.redirectStatuses.contains(Int(status)) {
        redirectBodyBytes += length
        if redirectBodyBytes > maxBodyBytes {
          abortReason = LoadError(.bodyTooLarge, "redirect body exceeds the limit of \(maxBodyBytes) bytes")
          return 0
        }
        return length
      }
      // An error page is not worth downloading: stop at its first byte.
      if status >= 300 {
        abortReason = LoadError(.http, "HTTP status \(status)", httpStatus: Int(status))
        return 0
      }
      let declared = pxl_curl_content_length(easy)
      if declared > 0 {
        if declared > maxBodyBytes {
          abortReason = LoadError(.bodyTooLarge, "body of \(declared) bytes exceeds the limit of \(maxBodyBytes)")
          return 0
        }
        body.reserveCapacity(Int(declared))
        expectedLength = UInt64(declared)
      }
    }
    if body.count + length > maxBodyBytes {
      abortReason = LoadError(.bodyTooLarge, "body exceeds the limit of \(maxBodyBytes) bytes")
      return 0
    }
    if let data, length > 0 {
      data.withMemoryRebound(to: UInt8.self, capacity: length) {
        body.append(contentsOf: UnsafeBufferPointer(start: $0, count: length))
      }
    }
    // Before the listener hears of the bytes: a request it cancels reports them. The
    // timings (ten libcurl reads) at most every progress interval, the byte count always.
    let now = clock()
    if now &- lastMeasuredPublish >= Self.progressGranularity {
      lastMeasuredPublish = now
      publishMeasured()
    } else {
      let received = UInt64(body.count)
      engineLock.withLock { measured?.timing.bytesReceived = received }
    }
    if progress != nil {
      if clock() - lastProgress < Self.progressGranularity {
        progressHeld = true
      } else if reportProgress() {
        // The listener has what it needs: libcurl ends the transfer (a write error) and
        // the outcome reports the body so far as a success.
        return 0
      }
    }
    return length
  }

  /// Engine thread: nanoseconds until the report the throttle held back is due, nil when
  /// none is held.
  func heldProgressDue(now: UInt64) -> UInt64? {
    guard progressHeld else { return nil }
    let due = lastProgress + Self.progressGranularity
    return due > now ? due - now : 0
  }

  /// The header callback's work: the caching headers and the Location of the last
  /// response (a status line starts a new one), and, at the first line, what TLS
  /// handshake the hop's connection made.
  func receive(headerLine line: String) {
    if !handshakeSeen, let easy {
      handshakeSeen = true
      handshake = TLSHandshake(pxl_curl_tls_handshake(easy))
    }
    caching.take(headerLine: line)
    // The end of a response's headers: its status and time to first byte are known.
    if line == "\r\n" || line == "\n" { publishMeasured() }
    if line.hasPrefix("HTTP/") {
      location = nil
    } else if line.count > 9, line.prefix(9).lowercased() == "location:" {
      let value = line.dropFirst(9).trimmingCharacters(in: " \t\r\n")
      location = value.isEmpty ? nil : value
    }
  }

  /// Reports the body so far; true (and `endedEarly`) when the listener ends the transfer.
  func reportProgress() -> Bool {
    guard let progress else { return false }
    progressHeld = false
    lastProgress = clock()
    endedEarly = progress(UInt64(body.count), expectedLength, body)
    return endedEarly
  }
}

/// libcurl's write callback: appends to the transfer's body, or returns 0 to abort it
/// (HTTP error status, body over the limit).
private let curlWriteCallback: pxl_curl_write_fn = { data, size, count, user in
  let transfer = Unmanaged<CurlTransfer>.fromOpaque(user!).takeUnretainedValue()
  return transfer.receive(data, size * count)
}

/// libcurl's header callback: collects the caching headers and Location of the response.
private let curlHeaderCallback: pxl_curl_header_fn = { data, size, count, user in
  let transfer = Unmanaged<CurlTransfer>.fromOpaque(user!).takeUnretainedValue()
  let length = size * count
  if let data, length > 0 {
    let line = data.withMemoryRebound(to: UInt8.self, capacity: length) {
      String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
    }
    transfer.receive(headerLine: line)
  }
  return length
}
