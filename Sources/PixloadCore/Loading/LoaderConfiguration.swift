/// Settings of one loader. Defaults match `pxl_config_init`.
public struct LoaderConfiguration: Sendable {
  public var memoryCacheBytes = 64 << 20
  public var memoryCacheCount = 1000
  /// 0: one per core.
  public var decodeThreads = 0
  public var maxPixels: UInt64 = 100_000_000
  /// The network engine's settings (limits, timeouts, retries, TLS, headers). The C API
  /// sets the user agent "pixload/<version>" from the header's version.
  public var network = EngineConfiguration()
  /// Disk cache of encoded bytes; 0 bytes: none.
  public var diskCacheBytes = 0
  /// nil: `DiskCache.defaultDirectory`.
  public var diskCacheDirectory: String?
  /// Disk entries unused for this long are dropped; 0: no age limit. Default: 7 days.
  public var diskCacheMaxAgeSeconds = 7 * 24 * 3600
  /// Decoded variants whose width and height are both at most this are also kept in the
  /// disk cache (requests whose non-zero target sides are at most this, and not 0x0, look
  /// for one first), so that a warm start delivers thumbnails without decoding; 0: off.
  public var diskVariantMaxSide = 256
  /// Treat stored entries as fresh until evicted, whatever Cache-Control and Expires said
  /// (what most image loaders do); false: stale entries are revalidated.
  public var ignoresHTTPFreshness = false
  /// Where diagnostics go (an unusable cache directory, a dropped corrupt entry); nil:
  /// nowhere. A library never writes to stderr. Called on library threads.
  public var log: (@Sendable (LogLevel, String) -> Void)?
  /// The most verbose level passed to `log`.
  public var logLevel = LogLevel.warning
  /// Which codec modules a loader made through the C API loads (`CodecModules`): nil every
  /// one found, "" none, "heif,jxl" exactly those.
  public var codecModules: String?
  /// Which codecs decode in a confined worker process (pixload.h, "Isolation").
  public var isolation = Isolation.modules
  /// An isolated format whose worker lacks a layer (or cannot start) fails rather than
  /// decodes (PXL_ISOLATION_REQUIRED).
  public var isolationRequired = false
  /// An isolated decode's wall-clock limit; 0: none.
  public var decodeTimeoutMilliseconds = 10_000
  /// Frames an animation player holds (AnimationPlayer); 0: its default (3).
  public var animationRingFrames = 0
  /// Most frame bytes an animation player holds; 0: no byte budget beyond the frame count.
  public var animationRingBytes = 0

  public init() {}
}

/// pxl_config.isolation without its REQUIRED bit. Raw values are the C API's.
public enum Isolation: Int32, Sendable {
  case modules = 0
  case none = 1
  case all = 2
}

/// Levels of the log callback. Raw values are the C API's PXL_LOG_*.
public enum LogLevel: Int32, Sendable, Comparable {
  case error = 0
  case warning = 1
  case info = 2

  public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

/// What a loader did so far (a snapshot).
public struct LoaderStatistics: Sendable, Equatable {
  /// Requests accepted (prefetches included).
  public var requests = 0
  public var memoryHits = 0
  public var diskHits = 0
  /// Transfers that brought a body (retries not counted twice).
  public var networkFetches = 0
  /// Stale disk entries the server confirmed (HTTP 304).
  public var revalidated = 0
  /// Requests that joined work already under way instead of starting their own.
  public var coalesced = 0
  public var cancelled = 0
  /// Requests that ended with an error other than CANCELLED.
  public var failed = 0
  public var bytesDownloaded = 0
  /// Bytes not downloaded because a thumbnail's first scans were enough (the declared
  /// length minus what arrived; transfers without a length count nothing).
  public var bytesSaved = 0
  /// Of `diskHits`: requests answered by a decoded variant from disk, with no decode.
  public var variantHits = 0
  /// Decoded variants this loader wrote to the disk cache, and their bytes.
  public var variantsStored = 0
  public var variantBytesStored = 0
  /// Decodes run (each merged decode counted once), and processor steps run (each merged
  /// step once; the final conversion into a format not counted).
  public var decodes = 0
  public var processorRuns = 0
}
