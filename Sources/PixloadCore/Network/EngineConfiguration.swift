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
  /// PEM file of the CAs that verify https servers, and a directory of them (hashed names,
  /// as `openssl rehash` makes): with either, only those are trusted; with neither, the
  /// system's.
  public var caFile: String?
  public var caPath: String?
  /// The lowest TLS version accepted.
  public var tlsMinVersion = TLSVersion.v1_2
  /// nil: libcurl's proxy environment (http_proxy, https_proxy, ALL_PROXY, no_proxy);
  /// "": no proxy whatever the environment; else the proxy's URL.
  public var proxy: String?
  /// "Name: value" lines sent with every request.
  public var headers: [String] = []
  /// Running transfers cancelled per second (averaged over a second) beyond which new
  /// transfers are held back until the rate falls: flinging through thousands of rows must
  /// not open and drop thousands of connections. 0 disables.
  public var cancelStormLimit = 16
  /// Asked for headers before each http(s) transfer (`RequestHook`); nil: none.
  public var requestHook: RequestHook?
  /// A hook call not answered for this long (or for `timeoutMilliseconds`, when that is
  /// shorter and not 0) fails its request with `.timeout`; 0: only `timeoutMilliseconds`.
  public var hookTimeoutMilliseconds = 30_000

  public init() {}
}

/// TLS versions a loader may require at least. Raw values are pxl_config.tls_min_version's.
public enum TLSVersion: Int32, Sendable {
  case v1_2 = 12
  case v1_3 = 13
}
