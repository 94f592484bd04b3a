/// Request metrics for the C API: the thread-local record that makes a final callback's
/// metrics findable from its `pxl_result` (pxl_result_metrics). Plumbing of the C boundary,
/// so it lives here, not in the core's Model.
import CSupport
import PixloadCore

/// The C API's way from a `pxl_result` to its metrics: while a final callback runs, the
/// thread's current record names that callback's result and holds its metrics; records of
/// nested callbacks (a callback that dispatches another queue) chain to the outer one.
struct ResultRecord {
  let result: UnsafeRawPointer
  let metrics: RequestMetrics
  let outer: UnsafeMutableRawPointer?

  /// Runs `body` with `metrics` findable for `result` on this thread (`find`).
  static func with(_ result: UnsafeRawPointer, _ metrics: RequestMetrics, _ body: () -> Void) {
    var record = ResultRecord(result: result, metrics: metrics, outer: pxl_current_result_record())
    withUnsafeMutablePointer(to: &record) { pointer in
      pxl_set_current_result_record(UnsafeMutableRawPointer(pointer))
      body()
      pxl_set_current_result_record(pointer.pointee.outer)
    }
  }

  /// The metrics of the callback now running on this thread whose result is `result`.
  static func find(_ result: UnsafeRawPointer) -> RequestMetrics? {
    var next = pxl_current_result_record()
    while let raw = next {
      let record = raw.assumingMemoryBound(to: ResultRecord.self)
      if record.pointee.result == result { return record.pointee.metrics }
      next = record.pointee.outer
    }
    return nil
  }
}
