// The pxl_result a request's callback and a table's row function receive, made from the
// core's `Outcome`; a final result's metrics are kept (`ResultRecord`) for
// pxl_result_metrics (API+Metrics.swift) while the callback runs.
import CPixload
import PixloadCore

// MARK: - Results

/// Calls `body` with a pxl_result for `outcome`; its image and message live for the call,
/// and so do its `metrics` for pxl_result_metrics (a final result's; none for previews).
func withResult(_ outcome: Outcome, preview: Int32 = 0, metrics: RequestMetrics? = nil,
                _ body: (UnsafePointer<pxl_result>) -> Void) {
  guard let metrics else { return withPlainResult(outcome, preview: preview, body) }
  withPlainResult(outcome, preview: preview) { result in ResultRecord.with(result, metrics) { body(result) } }
}

private func withPlainResult(_ outcome: Outcome, preview: Int32, _ body: (UnsafePointer<pxl_result>) -> Void) {
  var result = pxl_result()
  result.struct_size = MemoryLayout<pxl_result>.stride
  result.preview = preview
  let message: String
  switch outcome {
  case .success(let image, let source, let httpStatus):
    result.status = PXL_OK
    result.image = handle(image)
    result.http_status = Int32(clamping: httpStatus)
    result.source = pxl_source(rawValue: UInt32(source.rawValue))
    result.incomplete = image.isIncomplete ? 1 : 0
    message = ""
    message.withCString { text in
      result.message = text
      withExtendedLifetime(image) { body(&result) }
    }
    return
  case .failure(let error):
    result.status = cStatus(error.status)
    result.image = nil
    result.http_status = Int32(clamping: error.httpStatus)
    result.source = PXL_SOURCE_NONE
    message = error.message
  }
  message.withCString { text in
    result.message = text
    body(&result)
  }
}
