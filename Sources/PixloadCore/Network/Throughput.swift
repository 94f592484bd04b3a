#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What the network has been delivering lately: bytes per second of busy time (time with
/// at least one transfer running), and the mean size of a complete response. A table sizes
/// its prefetch window by it (`ImageTable.Configuration.prefetchHorizonMilliseconds`): a
/// pipe that brings 10 images a second cannot fill 8 rows ahead in half a second.
public struct Throughput: Sendable, Equatable {
  public var bytesPerSecond: Double
  public var meanResponseBytes: Double

  public init(bytesPerSecond: Double, meanResponseBytes: Double) {
    self.bytesPerSecond = bytesPerSecond
    self.meanResponseBytes = meanResponseBytes
  }

  /// Complete responses the network delivers per second, at the mean size.
  public var responsesPerSecond: Double { bytesPerSecond / max(1, meanResponseBytes) }
}

/// Measures `Throughput` from what the engine reports, with no clock of its own: each
/// record says how many bytes arrived and how much busy time passed since the previous
/// one, so tests drive it with made-up times. Older records weigh less the more busy time
/// has passed since (a decay of e per `windowNanoseconds`), so the estimate follows a
/// network that slows down or recovers within seconds of use. Not thread safe.
struct ThroughputMeter {
  let windowNanoseconds: Double
  /// Records of complete responses before there is an estimate.
  static let minimumResponses = 3

  private var bytes = 0.0
  private var busy = 0.0
  private var responses = 0
  private var meanSize = 0.0

  init(windowNanoseconds: UInt64 = 2_000_000_000) {
    self.windowNanoseconds = Double(windowNanoseconds)
  }

  /// `bytes` received by a transfer that ended (`complete`: a whole response; a cut or
  /// stopped transfer's bytes still took the pipe's time) after `busyNanoseconds` of busy
  /// time since the previous record.
  mutating func record(bytes received: Int, complete: Bool, busyNanoseconds: UInt64) {
    let decay = exp(-Double(busyNanoseconds) / windowNanoseconds)
    bytes = bytes * decay + Double(received)
    busy = busy * decay + Double(busyNanoseconds)
    guard complete, received > 0 else { return }
    responses += 1
    meanSize = responses == 1 ? Double(received) : meanSize + (Double(received) - meanSize) / 4
  }

  var estimate: Throughput? {
    guard responses >= Self.minimumResponses, busy > 0 else { return nil }
    return Throughput(bytesPerSecond: bytes / busy * 1e9, meanResponseBytes: meanSize)
  }
}
