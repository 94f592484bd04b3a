/// Identifies one transfer of a `DataLoading` engine.
public typealias TransferID = UInt64

/// A transfer's progress: bytes received, expected (0 when unknown), and the body so far.
/// The body shares the transfer's storage: keeping it makes the transfer's next append
/// copy it once, so a listener keeps it only when it needs the bytes (a preview).
/// Returning true ends the transfer now, successfully, with the body so far
/// (`DownloadedData.endedEarly`): the listener has all it needs (a thumbnail's first scans).
public typealias TransferProgress = @Sendable (_ received: UInt64, _ expected: UInt64, _ body: [UInt8]) -> Bool

/// What the loader needs from the network: start, cancel and re-rank transfers.
///
/// - important: Implementations must be thread safe. `completion` runs at most once, on a
///   library thread, never on the caller's. It may still run after `cancel` when the
///   transfer was finishing at that moment; callers must tolerate that.
public protocol DataLoading: AnyObject, Sendable {
  /// `progress` runs on a library thread, now and then, before `completion`.
  /// `revalidating`: validators of a stored copy; the request is made conditional and a
  /// 304 completes successfully with no bytes. `delay`: nanoseconds before the transfer
  /// may start (a cancel before then costs nothing at all).
  func start(url: RequestURL, headers: [String], revalidating: (etag: String, lastModified: String)?,
             delay: UInt64, priority: Int32,
             progress: TransferProgress?,
             completion: @escaping @Sendable (Result<DownloadedData, LoadError>) -> Void) -> TransferID
  func cancel(_ id: TransferID)
  func setPriority(_ id: TransferID, _ priority: Int32)
  /// Ends the start delay of a transfer, if it is still waiting it out.
  func startNow(_ id: TransferID)
  /// Moves the end of a transfer's start delay to at least `nanoseconds` from now, if it
  /// is still waiting it out (a table whose row is still being flung past); a running or
  /// retrying transfer is unaffected.
  func postpone(_ id: TransferID, nanoseconds: UInt64)
  /// Ends every transfer without calling completions and joins the engine's threads.
  func shutdown()
  /// What the network has delivered lately; nil until it has measured enough.
  var throughput: Throughput? { get }
  /// TLS handshakes of the connections opened so far.
  var tlsHandshakes: TLSHandshakeCounts { get }
  /// What a transfer that has not completed has measured so far (the attempt under way,
  /// or the last one while a retry waits): a request cancelled meanwhile reports it. nil
  /// when the transfer is unknown or over, or the engine does not measure.
  func measuredSoFar(_ id: TransferID) -> TransferTiming?
}

extension DataLoading {
  public var throughput: Throughput? { nil }
  public var tlsHandshakes: TLSHandshakeCounts { TLSHandshakeCounts() }
  public func measuredSoFar(_ id: TransferID) -> TransferTiming? { nil }
}

/// A complete response body.
public struct DownloadedData: Sendable {
  public var bytes: [UInt8]
  /// 0 when the scheme has no status (file://). 304 answers a conditional request: no bytes.
  public var httpStatus: Int
  /// What the response said about caching it.
  public var caching = ResponseCaching()
  /// The listener ended the transfer before the body was complete (see TransferProgress):
  /// `bytes` is a prefix, never to be stored as the resource.
  public var endedEarly = false
  /// What the engine measured of the transfer (request metrics).
  public var timing = TransferTiming()
  /// Where the bytes came from: the network, a file:// URL, a host's fetcher, a `data:`
  /// URI.
  public var source = ImageSource.network
  /// Whether the disk tier may keep the body.
  public var diskStorage = DiskStorage.byScheme

  public init(bytes: [UInt8], httpStatus: Int, caching: ResponseCaching = ResponseCaching()) {
    self.bytes = bytes
    self.httpStatus = httpStatus
    self.caching = caching
  }
}

/// Whether a response's body may be written to the disk cache; the transfer's producer
/// says, the disk tier obeys (`DiskTier.received`).
public enum DiskStorage: Sendable, Equatable {
  /// http(s) bodies, as their caching headers allow (never no-store); no other scheme's
  /// (file:// is on disk already).
  case byScheme
  /// Never: a `data:` URI, a fetcher that does not allow it.
  case never
  /// Kept as its `caching` says (a fetcher's lifetime, as a max-age).
  case allowed

  public func allows(_ url: RequestURL) -> Bool {
    switch self {
    case .byScheme: return url.isHTTP
    case .never: return false
    case .allowed: return true
    }
  }
}

/// The caching headers of a response (RFC 9111, the parts an image loader needs).
public struct ResponseCaching: Sendable, Equatable {
  public var noStore = false
  public var noCache = false
  /// Cache-Control max-age (or s-maxage) in seconds.
  public var maxAge: Int?
  /// Expires, as seconds since 1970 (used when there is no max-age).
  public var expires: Int?
  public var etag = ""
  public var lastModified = ""

  public init() {}

  /// Seconds since 1970 after which a stored copy is stale: 0 when the response said
  /// nothing (fresh until evicted, as image loaders usually treat it), 1 when it must be
  /// revalidated every time (no-cache, max-age=0).
  public func expiry(now: Int) -> UInt64 {
    if noCache { return 1 }
    if let maxAge {
      if maxAge <= 0 { return 1 }
      // Saturating: "max-age=9223372036854775807" is "forever", not a trap.
      let (expiry, overflow) = now.addingReportingOverflow(maxAge)
      return overflow ? UInt64(Int.max) : UInt64(max(expiry, 2))
    }
    if let expires { return expires <= now ? 1 : UInt64(expires) }
    return 0
  }

  /// Reads one header line; a status line starts a new response (redirects, 100).
  mutating func take(headerLine line: String) {
    if line.hasPrefix("HTTP/") {
      self = ResponseCaching()
      return
    }
    guard let colon = line.firstIndex(of: ":") else { return }
    let name = line[..<colon].lowercased()
    let value = line[line.index(after: colon)...].trimmingCharacters(in: " \t\r\n")
    switch name {
    case "cache-control":
      for directive in value.lowercased().split(separator: ",") {
        let parts = directive.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: " \t\"") }
        // "Cache-Control: =" (a directive of only "=") splits into nothing: ignore it.
        guard let directiveName = parts.first else { continue }
        switch directiveName {
        case "no-store": noStore = true
        case "no-cache": noCache = true
        case "max-age", "s-maxage": if parts.count == 2, let seconds = Int(parts[1]) { maxAge = seconds }
        default: break
        }
      }
    case "expires": expires = HTTPDate.seconds(value) ?? 0  // an invalid date means "already expired"
    case "etag": etag = value
    case "last-modified": lastModified = value
    default: break
    }
  }
}

extension StringProtocol {
  /// Foundation-free trimming of a few ASCII characters.
  func trimmingCharacters(in set: String) -> String {
    let scalars = Set(set.unicodeScalars)
    var view = Substring(self).unicodeScalars[...]
    while let first = view.first, scalars.contains(first) { view = view.dropFirst() }
    while let last = view.last, scalars.contains(last) { view = view.dropLast() }
    return String(String.UnicodeScalarView(view))
  }
}
