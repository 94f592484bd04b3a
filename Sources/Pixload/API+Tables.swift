// The C API of tables (pixload.h, "Tables"): pxl_table handles over the core's
// `ImageTable`, its rows' requests and results through the host's two functions.
import CPixload
import PixloadCore

private let tableConfigVersions = [end(\pxl_table_config.prefetch_priority), end(\pxl_table_config.previews)]
private let tableStatsSize01 = end(\pxl_table_stats.failed)

// MARK: - Tables

/// More rows on screen than any display shows: a host bug, refused rather than looped over.
private let maximumVisibleRows: Int32 = 65_536

@inline(__always) private func table(_ handle: OpaquePointer?) -> ImageTable? {
  handle.map { Unmanaged<ImageTable>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

@c @implementation public func pxl_table_config_init_size(_ config: UnsafeMutablePointer<pxl_table_config>?,
                                                          _ size: Int) -> pxl_status {
  initGrowableStruct(config, size: size, defaults: defaultTableConfig(), knownEnds: tableConfigVersions)
}

@c @implementation public func pxl_table_config_init(_ config: UnsafeMutablePointer<pxl_table_config>?) {
  _ = pxl_table_config_init_size(config, sizeOf01(pxl_table_config.self, tableConfigVersions))
}

private func defaultTableConfig() -> pxl_table_config {
  defaults(tableConfigFields, empty: pxl_table_config(), core: ImageTable.Configuration())
}

@c @implementation public func pxl_table_create(_ loaderHandle: OpaquePointer?, _ queueHandle: OpaquePointer?,
                                                _ config: UnsafePointer<pxl_table_config>?, _ rowCount: Int64,
                                                _ requestFunction: pxl_table_request_fn?,
                                                _ rowFunction: pxl_table_row_fn?,
                                                _ userData: UnsafeMutableRawPointer?,
                                                _ out: UnsafeMutablePointer<OpaquePointer?>?) -> pxl_status {
  out?.pointee = nil
  guard let requestFunction, let rowFunction else { return PXL_E_INVALID_ARGUMENT }
  let refusals = RowRefusals()
  let provider: ImageTable.RequestProvider = { row throws(LoadError) in
    try tableRequest(loaderHandle, row: row, refusals: refusals) { requestFunction(Int64(row), $0, userData) }
  }
  let handler: ImageTable.MeasuredRowHandler = { row, outcome, metrics in
    withResult(outcome, metrics: metrics) { result in rowFunction(Int64(row), result, userData) }
  }
  let preview: ImageTable.PreviewHandler = { row, image in
    withResult(.success(image, .network, httpStatus: 0), preview: 1) { result in rowFunction(Int64(row), result, userData) }
  }
  let placeholder: ImageTable.PlaceholderHandler = { row, image in
    withResult(.success(image, .none, httpStatus: 0), preview: PXL_PREVIEW_PLACEHOLDER) { result in
      rowFunction(Int64(row), result, userData)
    }
  }
  return makeTable(loaderHandle, queueHandle, config, rowCount, provider, handler, preview, placeholder, out)
}

/// What pxl_table_create and 0.1.0's pxl_table_new share once the callbacks are wrapped.
private func makeTable(_ loaderHandle: OpaquePointer?, _ queueHandle: OpaquePointer?,
                       _ config: UnsafePointer<pxl_table_config>?, _ rowCount: Int64,
                       _ provider: @escaping ImageTable.RequestProvider, _ handler: @escaping ImageTable.MeasuredRowHandler,
                       _ preview: ImageTable.PreviewHandler?, _ placeholder: ImageTable.PlaceholderHandler?,
                       _ out: UnsafeMutablePointer<OpaquePointer?>?) -> pxl_status {
  guard let loader = loader(loaderHandle), let queue = queue(queueHandle), let out, rowCount >= 0 else {
    return PXL_E_INVALID_ARGUMENT
  }
  var configuration = ImageTable.Configuration()
  if let config {
    guard let c = readGrowableStruct(config, defaults: defaultTableConfig(), knownEnds: tableConfigVersions),
          apply(tableConfigFields, c, to: &configuration) else {
      return PXL_E_INVALID_ARGUMENT
    }
  }
  let created = ImageTable(loader: loader, queue: queue, rowCount: Int(rowCount), configuration: configuration,
                           requestForRow: provider, onMeasuredRow: handler, onPreview: preview,
                           onPlaceholder: placeholder)
  out.pointee = retainedHandle(created)
  return PXL_OK
}

/// 0.1.0's symbol: the same table, its callbacks taking user_data first.
@c @implementation public func pxl_table_new(_ loaderHandle: OpaquePointer?, _ queueHandle: OpaquePointer?,
                                             _ config: UnsafePointer<pxl_table_config>?, _ rowCount: Int64,
                                             _ requestFunction: pxl_table_request_fn_0_1?,
                                             _ rowFunction: pxl_table_row_fn_0_1?,
                                             _ userData: UnsafeMutableRawPointer?,
                                             _ out: UnsafeMutablePointer<OpaquePointer?>?) -> pxl_status {
  out?.pointee = nil
  guard let requestFunction, let rowFunction else { return PXL_E_INVALID_ARGUMENT }
  let refusals = RowRefusals()
  let provider: ImageTable.RequestProvider = { row throws(LoadError) in
    try tableRequest(loaderHandle, row: row, refusals: refusals) { requestFunction(userData, Int64(row), $0) }
  }
  let handler: ImageTable.MeasuredRowHandler = { row, outcome, _ in
    withResult(outcome) { result in rowFunction(userData, Int64(row), result) }
  }
  // A 0.1.0 program expects one row call per load: no previews, no placeholders.
  return makeTable(loaderHandle, queueHandle, config, rowCount, provider, handler, nil, nil, out)
}

@c @implementation public func pxl_table_set_visible(_ handle: OpaquePointer?, _ first: Int64, _ count: Int32,
                                                     _ direction: Int32) -> pxl_status {
  guard let table = table(handle), count >= 0, count <= maximumVisibleRows else { return PXL_E_INVALID_ARGUMENT }
  table.setVisible(first: Int(clamping: first), count: Int(count), direction: Int(direction))
  return PXL_OK
}

@c @implementation public func pxl_table_set_row_count(_ handle: OpaquePointer?, _ rowCount: Int64) -> pxl_status {
  guard let table = table(handle), rowCount >= 0 else { return PXL_E_INVALID_ARGUMENT }
  table.setRowCount(Int(clamping: rowCount))
  return PXL_OK
}

@c @implementation public func pxl_table_cancel_all(_ handle: OpaquePointer?) {
  table(handle)?.cancelAll()
}

@c @implementation public func pxl_table_get_stats(_ handle: OpaquePointer?,
                                                  _ stats: UnsafeMutablePointer<pxl_table_stats>?) -> pxl_status {
  guard let table = table(handle), let stats else { return PXL_E_INVALID_ARGUMENT }
  let s = table.stats
  var filled = pxl_table_stats()
  filled.started = UInt64(s.started)
  filled.cancelled = UInt64(s.cancelled)
  filled.memory_hits = UInt64(s.memoryHits)
  filled.delivered = UInt64(s.delivered)
  filled.failed = UInt64(s.failed)
  filled.animation_frames_decoded = UInt64(s.animationFramesDecoded)
  return writeGrowableStruct(filled, to: stats, minimumSize: tableStatsSize01) ? PXL_OK : PXL_E_INVALID_ARGUMENT
}

@c @implementation public func pxl_table_bind_animation(_ handle: OpaquePointer?, _ row: Int64,
                                                        _ animationHandle: OpaquePointer?) -> pxl_status {
  guard let table = table(handle), let animationHandle, row >= -1 else { return PXL_E_INVALID_ARGUMENT }
  let player = Unmanaged<AnimationPlayer>.fromOpaque(UnsafeRawPointer(animationHandle)).takeUnretainedValue()
  table.bind(player, row: row < 0 ? nil : Int(clamping: row))
  return PXL_OK
}

@c @implementation public func pxl_table_free(_ handle: OpaquePointer?) {
  free(handle, as: ImageTable.self) { $0.close() }
}
