// The C API of requests (pixload.h, "Requests"): a pxl_request read and checked into the
// core's `ImageRequest` (also one a table's request_fn filled), and what a host does with
// requests: pxl_load, pxl_cancel, pxl_set_priority, pxl_lookup, pxl_cancel_all,
// pxl_prefetch, pxl_bind.
import CPixload
import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

private let requestVersions = [end(\pxl_request.progress_interval_ms), end(\pxl_request.preview_interval_ms),
                               end(\pxl_request.placeholder_length)]

// MARK: - Requests

@c @implementation public func pxl_request_init_size(_ request: UnsafeMutablePointer<pxl_request>?, _ size: Int) -> pxl_status {
  initGrowableStruct(request, size: size, defaults: defaultRequest(), knownEnds: requestVersions)
}

@c @implementation public func pxl_request_init(_ request: UnsafeMutablePointer<pxl_request>?) {
  _ = pxl_request_init_size(request, sizeOf01(pxl_request.self, requestVersions))
}

private func defaultRequest() -> pxl_request {
  var r = pxl_request()
  r.struct_size = MemoryLayout<pxl_request>.stride
  r.url = nil
  r.cache_key = nil
  r.width = 0
  r.height = 0
  r.mode = Int32(PXL_MODE_FIT.rawValue)
  r.format = Int32(PXL_FORMAT_RGBA8.rawValue)
  r.priority = PXL_PRIORITY_NORMAL
  r.flags = 0
  r.headers = nil
  r.progress = nil
  r.progress_interval_ms = 100
  r.preview = nil
  r.preview_interval_ms = 250
  r.processors = nil
  r.processor_count = 0
  return r
}

/// Copies a NULL-terminated list of "Name: value" lines; nil when a line is malformed
/// (no colon, or a line break that would smuggle in another header).
func headerLines(_ list: UnsafePointer<UnsafePointer<CChar>?>?) -> [String]? {
  guard var cursor = list else { return [] }
  var lines: [String] = []
  while let line = cursor.pointee {
    let text = String(cString: line)
    guard isValidHeaderLine(text), lines.count < 256 else { return nil }
    lines.append(text)
    cursor += 1
  }
  return lines
}

/// Converts a C request, or nil when an argument is wrong.
private func imageRequest(_ request: UnsafePointer<pxl_request>?, _ loader: ImageLoader) -> ImageRequest? {
  guard let request, let r = readRequest(request) else { return nil }
  return try? imageRequest(r, loader)
}

/// The caller's request as this library's struct, read only up to its struct_size.
private func readRequest(_ request: UnsafePointer<pxl_request>) -> pxl_request? {
  readGrowableStruct(request, defaults: defaultRequest(), knownEnds: requestVersions)
}

/// A request the host passed, converted as pxl_load converts it; nil when invalid.
func parsedRequest(_ request: UnsafePointer<pxl_request>?, _ loader: ImageLoader) -> ImageRequest? {
  guard let request, let cRequest = readRequest(request) else { return nil }
  return try? imageRequest(cRequest, loader)
}

/// The request, or PXL_E_INVALID_ARGUMENT saying what is wrong: pxl_load returns only the
/// status, a table reports the message as the row's result. `loader` resolves custom
/// processors; what is wrong with a chain goes to `log` (by default the loader's log, once
/// per call).
private func imageRequest(_ r: pxl_request, _ loader: ImageLoader,
                          log: ((String) -> Void)? = nil) throws(LoadError) -> ImageRequest {
  func refused(_ message: String) -> LoadError { LoadError(.invalidArgument, "request: \(message)") }
  let knownFlags = UInt32(PXL_FLAG_IGNORE_ORIENTATION | PXL_FLAG_SKIP_MEMORY_CACHE | PXL_FLAG_RELOAD
                          | PXL_FLAG_CACHE_ONLY | PXL_FLAG_ANIMATE | PXL_FLAG_NO_COLOR_MANAGEMENT)
  let reloadAndCacheOnly = UInt32(PXL_FLAG_RELOAD | PXL_FLAG_CACHE_ONLY)
  guard let url = r.url else { throw refused("url is NULL") }
  guard r.width >= 0, r.height >= 0 else { throw refused("width \(r.width) or height \(r.height) is negative") }
  guard let mode = ScaleMode(rawValue: r.mode) else { throw refused("unknown mode \(r.mode)") }
  guard let format = PixelFormat(rawValue: r.format) else { throw refused("unknown format \(r.format)") }
  guard r.flags & ~knownFlags == 0 else {
    throw refused("unknown flag bits 0x\(String(r.flags & ~knownFlags, radix: 16))")
  }
  guard r.flags & reloadAndCacheOnly != reloadAndCacheOnly else {
    throw refused("PXL_FLAG_RELOAD and PXL_FLAG_CACHE_ONLY together")
  }
  guard r.progress_interval_ms >= 0, r.preview_interval_ms >= 0 else {
    throw refused("progress_interval_ms \(r.progress_interval_ms) or preview_interval_ms \(r.preview_interval_ms) is negative")
  }
  guard let headers = headerLines(r.headers) else {
    throw refused("a header line is not \"Name: value\" on one line, or there are more than 256")
  }
  var converted = ImageRequest(url: String(cString: url), cacheKey: r.cache_key.map { String(cString: $0) },
                               targetWidth: Int(r.width), targetHeight: Int(r.height), mode: mode, format: format,
                               priority: r.priority,
                               appliesOrientation: r.flags & UInt32(PXL_FLAG_IGNORE_ORIENTATION) == 0,
                               usesMemoryCache: r.flags & UInt32(PXL_FLAG_SKIP_MEMORY_CACHE) == 0,
                               headers: headers, progressIntervalMilliseconds: Int(r.progress_interval_ms))
  converted.previewIntervalMilliseconds = Int(r.preview_interval_ms)
  if r.flags & UInt32(PXL_FLAG_RELOAD) != 0 { converted.cachePolicy = .reload }
  if r.flags & UInt32(PXL_FLAG_CACHE_ONLY) != 0 { converted.cachePolicy = .cacheOnly }
  converted.animates = r.flags & UInt32(PXL_FLAG_ANIMATE) != 0
  converted.managesColor = r.flags & UInt32(PXL_FLAG_NO_COLOR_MANAGEMENT) == 0
  converted.processors = try processorChain(r.processors, count: r.processor_count, loader,
                                            log: log ?? { loader.configuration.log?(.error, $0) })
  guard readPlaceholder(r, into: &converted) else {
    throw refused("placeholder_kind \(r.placeholder_kind) is unknown, or placeholder is NULL with a length, or over 64 KB")
  }
  return converted
}

/// The request a table's request_fn filled for a row (`fill` calls it with the library's
/// pxl_request), nil when it left the row without an image; a request that is wrong
/// throws, and the table reports it as the row's result. A row in the prefetch window is
/// converted again on every pxl_table_set_visible: `refusals` lets its chain's log line
/// out once while the row stays refused for that reason, not once a scroll frame.
func tableRequest(_ loaderHandle: OpaquePointer?, row: Int, refusals: RowRefusals,
                  _ fill: (UnsafeMutablePointer<pxl_request>) -> Int32) throws(LoadError) -> ImageRequest? {
  var request = defaultRequest()
  guard fill(&request) != 0, let owner = loader(loaderHandle) else {
    refusals.accepted(row)
    return nil
  }
  // The struct is this library's: a larger struct_size would make readRequest read past it.
  guard request.struct_size <= MemoryLayout<pxl_request>.stride,
        let r = withUnsafePointer(to: &request, { readRequest($0) }) else {
    refusals.accepted(row)
    throw LoadError(.invalidArgument, "request: struct_size \(request.struct_size) is not a pxl_request's "
                    + "(the table's is \(MemoryLayout<pxl_request>.stride) bytes)")
  }
  var logged = false
  do throws(LoadError) {
    let converted = try imageRequest(r, owner) { line in
      logged = true
      if refusals.refused(row, line) { owner.configuration.log?(.error, line) }
    }
    refusals.accepted(row)
    return converted
  } catch {
    if !logged { refusals.accepted(row) }  // refused for another reason, which is not logged
    throw error
  }
}

/// The rows of one table whose chain was refused, with the log line said for each: a row
/// is logged again only once it was accepted in between, or refused for another reason.
final class RowRefusals: @unchecked Sendable {
  private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
  private var lines: [Int: String] = [:]

  init() { pthread_mutex_init(mutex, nil) }
  deinit {
    pthread_mutex_destroy(mutex)
    mutex.deallocate()
  }

  private func locked<T>(_ body: () -> T) -> T {
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    return body()
  }

  /// Records `line` as row's refusal; true when it is news (to be logged).
  func refused(_ row: Int, _ line: String) -> Bool {
    locked { lines.updateValue(line, forKey: row) != line }
  }

  /// The row is no longer refused for its chain.
  func accepted(_ row: Int) {
    locked { _ = lines.removeValue(forKey: row) }
  }
}

@c @implementation public func pxl_load(_ loaderHandle: OpaquePointer?, _ request: UnsafePointer<pxl_request>?,
                                        _ queueHandle: OpaquePointer?, _ callback: pxl_callback?,
                                        _ userData: UnsafeMutableRawPointer?,
                                        _ tokenOut: UnsafeMutablePointer<pxl_token>?) -> pxl_status {
  guard let loader = loader(loaderHandle), let queue = queue(queueHandle), let callback,
        let request, let cRequest = readRequest(request), let parsed = try? imageRequest(cRequest, loader) else {
    return PXL_E_INVALID_ARGUMENT
  }
  let handler: (UInt64, Outcome, RequestMetrics) -> Void = { token, outcome, metrics in
    withResult(outcome, metrics: metrics) { callback(token, $0, userData) }
  }
  let progress: ((UInt64, UInt64, UInt64) -> Void)? = cRequest.progress.map { report in
    { token, received, expected in report(token, received, expected, userData) }
  }
  let preview: ((UInt64, Image) -> Void)? = cRequest.preview.map { show in
    { token, image in withExtendedLifetime(image) { show(token, handle(image), userData) } }
  }
  do {
    let token = try loader.load(parsed, queue: queue, progress: progress, preview: preview, completion: handler)
    tokenOut?.pointee = token
    return PXL_OK
  } catch {
    return cStatus(error.status)
  }
}

@c @implementation public func pxl_cancel(_ loaderHandle: OpaquePointer?, _ token: pxl_token) -> pxl_status {
  guard let loader = loader(loaderHandle) else { return PXL_E_INVALID_ARGUMENT }
  return loader.cancel(token) ? PXL_OK : PXL_E_NOT_FOUND
}

@c @implementation public func pxl_set_priority(_ loaderHandle: OpaquePointer?, _ token: pxl_token,
                                                _ priority: Int32) -> pxl_status {
  guard let loader = loader(loaderHandle) else { return PXL_E_INVALID_ARGUMENT }
  return loader.setPriority(token, priority) ? PXL_OK : PXL_E_NOT_FOUND
}

@c @implementation public func pxl_lookup(_ loaderHandle: OpaquePointer?, _ request: UnsafePointer<pxl_request>?,
                                          _ imageOut: UnsafeMutablePointer<OpaquePointer?>?) -> pxl_status {
  imageOut?.pointee = nil
  guard let loader = loader(loaderHandle), let imageOut, let request = imageRequest(request, loader) else {
    return PXL_E_INVALID_ARGUMENT
  }
  guard let found = loader.cachedImage(for: request) else { return PXL_E_NOT_FOUND }
  imageOut.pointee = retainedHandle(found)
  return PXL_OK
}

// MARK: - Prefetch, slots, cancel-all

@c @implementation public func pxl_cancel_all(_ loaderHandle: OpaquePointer?, _ queueHandle: OpaquePointer?) -> Int32 {
  guard let loader = loader(loaderHandle) else { return 0 }
  return Int32(clamping: loader.cancelAll(queue: queue(queueHandle)))
}

@c @implementation public func pxl_prefetch(_ loaderHandle: OpaquePointer?, _ requests: UnsafePointer<pxl_request>?,
                                            _ count: Int, _ tokensOut: UnsafeMutablePointer<pxl_token>?) -> pxl_status {
  guard let loader = loader(loaderHandle), count >= 0, requests != nil || count == 0 else {
    return PXL_E_INVALID_ARGUMENT
  }
  // The elements are the caller's sizeof(pxl_request) apart, which the first one's
  // struct_size says (a program built against another header has another size); every
  // element must say the same.
  let stride = count > 0 ? UnsafeRawPointer(requests!).loadUnaligned(as: Int.self) : 0
  var first = PXL_OK
  for index in 0..<count {
    var token: pxl_token = 0
    let element = (UnsafeRawPointer(requests!) + index * stride).assumingMemoryBound(to: pxl_request.self)
    if stride >= requestVersions[0], stride <= 1 << 16,
       UnsafeRawPointer(element).loadUnaligned(as: Int.self) == stride, let request = imageRequest(element, loader) {
      do {
        token = try loader.prefetch(request)
      } catch {
        if first == PXL_OK { first = cStatus(error.status) }
      }
    } else if first == PXL_OK {
      first = PXL_E_INVALID_ARGUMENT
    }
    tokensOut?[index] = token
  }
  return first
}

@c @implementation public func pxl_bind(_ loaderHandle: OpaquePointer?, _ request: UnsafePointer<pxl_request>?,
                                        _ queueHandle: OpaquePointer?, _ callback: pxl_callback?,
                                        _ userData: UnsafeMutableRawPointer?, _ slot: UnsafeMutablePointer<pxl_token>?,
                                        _ imageNow: UnsafeMutablePointer<OpaquePointer?>?) -> pxl_status {
  imageNow?.pointee = nil
  guard let loader = loader(loaderHandle), let slot, let imageNow else { return PXL_E_INVALID_ARGUMENT }
  // The slot now shows something else: its previous load goes, whatever happens next.
  if slot.pointee != 0 {
    loader.cancel(slot.pointee)
    slot.pointee = 0
  }
  guard queueHandle != nil, callback != nil, let parsed = imageRequest(request, loader) else { return PXL_E_INVALID_ARGUMENT }
  if let cached = loader.cachedImage(for: parsed) {
    imageNow.pointee = retainedHandle(cached)
    return PXL_OK
  }
  return pxl_load(loaderHandle, request, queueHandle, callback, userData, slot)
}

