/// What the network engine needs to know: limits, timeouts, retries, TLS and headers
/// (`LoaderConfiguration.network`).
public struct EngineConfiguration: Sendable {
  public var maxConcurrentDownloads = 8
  public var maxDownloadsPerHost = 6
  public var connectTimeoutMilliseconds = 10_000
  public var timeoutMilliseconds = 30_000
  public var maxBodyBytes = 32 << 20
  public var allowedSchemes: Set<String> = ["http", "https"]
  public var userAgent = "pixload"
  /// A transfer that receives nothing for this long fails; 0 disables.
  public var stallTimeoutMilliseconds = 10_000
  public var maxRedirects = 5
  /// Further attempts after a transient failure (see `HTTPOutcome.isTransient`).
  public var maxRetries = 2
  public var retryBaseDelayMilliseconds = 250
  /// Caps every backoff and a server's Retry-After.
  public var retryMaxDelayMilliseconds = 10_000
  /// PEM file of the CAs that verify https servers; nil: the system's.
  public var caFile: String?
  /// "Name: value" lines sent with every request.
  public var headers: [String] = []
  /// Running transfers cancelled per second (averaged over a second) beyond which new
  /// transfers are held back until the rate falls: flinging through thousands of rows must
  /// not open and drop thousands of connections. 0 disables.
  public var cancelStormLimit = 16

  public init() {}
}
