/// What one request cost, stage by stage: every final result carries one (C:
/// `pxl_result_metrics`). Filled as the request passes each stage; a request that failed or
/// was cancelled has what was measured up to then (a zero is "not reached" or "not
/// measured", never an estimate). Requests that joined shared work (`joined`) report that
/// work's figures: the same transfer and decode as the request that started it.
///
/// Durations are microseconds. The network's are libcurl's own (CURLINFO_*_TIME_T) turned
/// into phases: DNS, then connect, then TLS, then waiting for the first byte, then the
/// body; `slotWaitMicroseconds` is the engine's (start to a free connection slot).
public struct RequestMetrics: Sendable, Equatable {
  /// Which tier produced the result (C: pxl_tier; append-only raw values).
  public enum Tier: Int32, Sendable {
    /// No tier answered (an error before any did, a cancellation).
    case none = 0
    case memory = 1
    /// A decoded variant the disk tier kept: no download, no decode.
    case diskVariant = 2
    /// The disk's encoded original, decoded.
    case disk = 3
    /// The disk's original after the server answered 304.
    case revalidated = 4
    /// Downloaded over http(s).
    case network = 5
    /// Read from a file:// URL.
    case file = 6
    /// A data: URL.
    case data = 7
    /// A host fetcher (pxl_loader_add_fetcher).
    case fetcher = 8

    /// The name `pixload fetch --metrics` prints.
    public var name: String {
      switch self {
      case .none: return "none"
      case .memory: return "memory"
      case .diskVariant: return "disk_variant"
      case .disk: return "disk"
      case .revalidated: return "revalidated"
      case .network: return "network"
      case .file: return "file"
      case .data: return "data"
      case .fetcher: return "fetcher"
      }
    }
  }

  public var tier = Tier.none
  /// The request joined a download or decode another request had started.
  public var joined = false
  /// The decode ran in a confined worker (`IsolatedCodec`; `workerMicroseconds`).
  public var isolated = false
  /// `mark` holds the total (after `settle`), not `workStartedAt`. (The flags sit
  /// together in one word's padding: a waiting request holds three of these, and its
  /// memory is budgeted, Tests/e2e/exhaust.c.)
  private var settled = false

  /// Waiting for a network slot (overall and per host), after any start delay.
  public var slotWaitMicroseconds: UInt64 = 0
  public var dnsMicroseconds: UInt64 = 0
  public var connectMicroseconds: UInt64 = 0
  public var tlsMicroseconds: UInt64 = 0
  /// From the request sent (connection ready) to the first byte of the response.
  public var firstByteMicroseconds: UInt64 = 0
  /// From the first byte to the last.
  public var transferMicroseconds: UInt64 = 0
  /// The disk tier's lookups (original and decoded variant), from asking to the answer.
  public var diskReadMicroseconds: UInt64 = 0
  public var decodeMicroseconds: UInt64 = 0
  /// The processor chain's steps (0 without processors).
  public var processMicroseconds: UInt64 = 0
  /// From the result posted to its queue to its callback starting.
  public var queueWaitMicroseconds: UInt64 = 0

  /// Body bytes received over the network (0 for a 304 or no transfer).
  public var bytesReceived: UInt64 = 0
  /// The last HTTP status seen (0: none).
  public var httpStatus: Int32 = 0
  /// 10, 11, 20, 30 for HTTP/1.0, 1.1, 2, 3 (0: none).
  public var httpVersion: Int32 = 0
  public var redirects: Int32 = 0
  /// The transfer reused an open connection (no DNS, connect or TLS of its own).
  public var connectionReused = false
  /// Pixel bytes the decode produced (0 when no decode ran for this request).
  public var decodedBytes: UInt64 = 0
  /// Pixel bytes of the image delivered (0 without an image).
  public var deliveredBytes: UInt64 = 0
  /// How long of the decode the confined worker took (its conversations, wall clock;
  /// `isolated`).
  public var workerMicroseconds: UInt64 = 0
  /// `workStartedAt` until the result is dispatched, `totalMicroseconds` after.
  private var mark: UInt64 = 0

  /// From intake (the load call) to the callback starting: the sum of the stage fields
  /// (`stagesMicroseconds`) and `otherMicroseconds`, exactly. Set when the result is
  /// dispatched (`settle`); a joined request counts from the intake of the request that
  /// started the work whose figures it reports (`workStartedAt`). 0 before.
  public var totalMicroseconds: UInt64 { settled ? mark : 0 }
  /// What no stage field holds: intake and the cache lookups in memory, a start delay,
  /// retry backoffs and the attempts before the last, the hand-offs between threads
  /// (waiting for a decode thread included), storing the bytes on disk, and delivery up
  /// to the queue. `totalMicroseconds - stagesMicroseconds`.
  public var otherMicroseconds: UInt64 { totalMicroseconds - min(totalMicroseconds, stagesMicroseconds) }
  /// When the work these figures measure began (monotonic ns): the intake of the request
  /// that started it (a delivery's own: its intake); 0: not known. Kept until `settle`.
  var workStartedAt: UInt64 {
    get { settled ? 0 : mark }
    set { if !settled { mark = newValue } }
  }

  /// The earlier of the two starts (0: not known).
  mutating func startNoLaterThan(_ start: UInt64) {
    if start != 0 && (workStartedAt == 0 || start < workStartedAt) { workStartedAt = start }
  }

  /// The stage fields' sum: the network's phases, the disk reads, decode, processing and
  /// the queue wait (the worker's time is part of the decode's).
  public var stagesMicroseconds: UInt64 {
    slotWaitMicroseconds + dnsMicroseconds + connectMicroseconds + tlsMicroseconds + firstByteMicroseconds
      + transferMicroseconds + diskReadMicroseconds + decodeMicroseconds + processMicroseconds + queueWaitMicroseconds
  }

  /// From the transfer's last byte (its completion reaching the loader) to the callback
  /// starting: what the decode and delivery left for after the download (0 without a
  /// transfer: a cache hit, a data: URL, a fetcher; 0 until the callback).
  public var afterLastByteMicroseconds: UInt64 { lastByte & Self.lastByteMark != 0 ? 0 : lastByte }
  /// One field for both (Tests/e2e/exhaust.c's budget: every waiting task holds metrics):
  /// until the callback, when the last byte came (monotonic nanoseconds, marked by the top
  /// bit; 0: no transfer); from then on, the microseconds since.
  private var lastByte: UInt64 = 0
  private static let lastByteMark: UInt64 = 1 << 63

  /// The transfer's last byte came now (`monotonicNanoseconds()`), or never (0).
  mutating func lastByteCame(at nanoseconds: UInt64) {
    lastByte = nanoseconds == 0 ? 0 : nanoseconds | Self.lastByteMark
  }

  /// The callback starts at `now`: the time since the last byte is final.
  mutating func callbackStarts(at now: UInt64) {
    guard lastByte & Self.lastByteMark != 0 else { return }
    lastByte = microseconds(from: lastByte & ~Self.lastByteMark, to: now)
  }

  public init() {}

  /// The request's callback starts now (monotonic ns): sets `totalMicroseconds` to the
  /// time since `workStartedAt` (the delivery made it the earlier of its intake and the
  /// work's start), or to the stages' sum when that is larger (stage clocks that are
  /// libcurl's, or a joined request's own disk lookup next to the shared work's), so the
  /// stages never exceed it.
  mutating func settle(now: UInt64) {
    let total = max(microseconds(from: workStartedAt, to: now), stagesMicroseconds)
    settled = true
    mark = total
  }

  /// Copies the network figures of a transfer.
  mutating func take(_ timing: TransferTiming) {
    slotWaitMicroseconds = timing.slotWaitMicroseconds
    dnsMicroseconds = timing.dnsMicroseconds
    connectMicroseconds = timing.connectMicroseconds
    tlsMicroseconds = timing.tlsMicroseconds
    firstByteMicroseconds = timing.firstByteMicroseconds
    transferMicroseconds = timing.transferMicroseconds
    bytesReceived = timing.bytesReceived
    httpVersion = timing.httpVersion
    redirects = timing.redirects
    connectionReused = timing.connectionReused
    if timing.httpStatus != 0 { httpStatus = timing.httpStatus }
  }
}

/// What the engine measured of one transfer (its last attempt; the slot wait of all).
public struct TransferTiming: Sendable, Equatable {
  public var slotWaitMicroseconds: UInt64 = 0
  public var dnsMicroseconds: UInt64 = 0
  public var connectMicroseconds: UInt64 = 0
  public var tlsMicroseconds: UInt64 = 0
  public var firstByteMicroseconds: UInt64 = 0
  public var transferMicroseconds: UInt64 = 0
  public var bytesReceived: UInt64 = 0
  public var httpStatus: Int32 = 0
  public var httpVersion: Int32 = 0
  public var redirects: Int32 = 0
  public var connectionReused = false

  public init() {}

  /// Phases from libcurl's cumulative times (microseconds since the attempt started):
  /// each phase is the step from the previous mark; a mark libcurl left at 0 (no TLS, a
  /// reused connection) takes the previous one's value, so its phase is 0.
  public init(nameLookup: Int64, connect: Int64, appConnect: Int64, startTransfer: Int64, total: Int64) {
    func clamp(_ value: Int64) -> UInt64 { UInt64(max(0, value)) }
    let dns = max(0, nameLookup)
    let connected = max(dns, connect)
    let secured = max(connected, appConnect)
    let first = max(secured, startTransfer)
    let end = max(first, total)
    dnsMicroseconds = clamp(dns)
    connectMicroseconds = clamp(connected - dns)
    tlsMicroseconds = clamp(secured - connected)
    firstByteMicroseconds = clamp(first - secured)
    transferMicroseconds = clamp(end - first)
  }
}

/// Microseconds between two monotonic nanosecond readings (0 if `start` is 0: not taken).
@inline(__always) func microseconds(from start: UInt64, to end: UInt64) -> UInt64 {
  start == 0 || end < start ? 0 : (end - start) / 1000
}
