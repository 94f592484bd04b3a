/// Identifies one transfer of a `DataLoading` engine.
public typealias TransferID = UInt64

/// What the loader needs from the network: start, cancel and re-rank transfers.
///
/// - important: Implementations must be thread safe. `completion` runs at most once, on a
///   library thread, never on the caller's. It may still run after `cancel` when the
///   transfer was finishing at that moment; callers must tolerate that.
public protocol DataLoading: AnyObject, Sendable {
  /// `progress` (bytes received, expected or 0) runs on a library thread, now and then,
  /// before `completion`.
  func start(url: String, headers: [String], priority: Int32,
             progress: (@Sendable (UInt64, UInt64) -> Void)?,
             completion: @escaping @Sendable (Result<DownloadedData, LoadError>) -> Void) -> TransferID
  func cancel(_ id: TransferID)
  func setPriority(_ id: TransferID, _ priority: Int32)
  /// Ends every transfer without calling completions and joins the engine's threads.
  func shutdown()
}

/// A complete response body.
public struct DownloadedData: Sendable {
  public var bytes: [UInt8]
  /// 0 when the scheme has no status (file://).
  public var httpStatus: Int

  public init(bytes: [UInt8], httpStatus: Int) {
    self.bytes = bytes
    self.httpStatus = httpStatus
  }
}
