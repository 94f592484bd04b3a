/// Why a load failed. Raw values are the C API's `pxl_status` numbers: append-only.
public enum Status: Int32, Sendable, CaseIterable {
  case ok = 0
  case invalidArgument = 1
  case malformedURL = 2
  case schemeNotAllowed = 3
  case dns = 4
  case connect = 5
  case tls = 6
  case timeout = 7
  case http = 8
  case bodyTooLarge = 9
  case notAnImage = 10
  case corruptImage = 11
  case tooManyPixels = 12
  case cancelled = 13
  case loaderClosed = 14
  case network = 15
  case unsupportedImage = 16
  case noMemory = 17
  case notFound = 18
  case io = 19
  case tooManyRedirects = 20
  case notCached = 21
  case unsupported = 22
  /// The isolated decode worker crashed, was killed by its sandbox, or ran out of memory or time.
  case decoderFailed = 23

  /// The text of pxl_status_string(): this is the one table of status texts.
  public var description: String {
    switch self {
    case .ok: return "ok"
    case .invalidArgument: return "invalid argument"
    case .malformedURL: return "malformed URL"
    case .schemeNotAllowed: return "URL scheme not allowed"
    case .dns: return "host name could not be resolved"
    case .connect: return "could not connect"
    case .tls: return "TLS error"
    case .timeout: return "timed out"
    case .http: return "HTTP error status"
    case .bodyTooLarge: return "body too large"
    case .notAnImage: return "not an image"
    case .corruptImage: return "corrupt image"
    case .tooManyPixels: return "too many pixels"
    case .cancelled: return "cancelled"
    case .loaderClosed: return "loader closed"
    case .network: return "network error"
    case .unsupportedImage: return "unsupported image"
    case .noMemory: return "out of memory"
    case .notFound: return "not found"
    case .io: return "I/O error"
    case .tooManyRedirects: return "too many redirects"
    case .notCached: return "not in the cache"
    case .unsupported: return "a library the loader needs lacks a required feature"
    case .decoderFailed: return "the decoder failed (crashed, killed or timed out)"
    }
  }
}

/// A failed load: the status, the last HTTP status seen (0 if none) and what went wrong.
public struct LoadError: Error, Sendable, Equatable {
  public var status: Status
  public var httpStatus: Int
  public var message: String
  /// What a failed transfer measured before it ended (request metrics); not part of the
  /// error's identity (==).
  public var timing = TransferTiming()

  public init(_ status: Status, _ message: String, httpStatus: Int = 0) {
    self.status = status
    self.message = message
    self.httpStatus = httpStatus
  }

  public static func == (a: LoadError, b: LoadError) -> Bool {
    a.status == b.status && a.httpStatus == b.httpStatus && a.message == b.message
  }

  public static let cancelled = LoadError(.cancelled, "cancelled")
}
