// The C API of fetchers (pixload.h, "Fetchers"): pxl_fetcher's callbacks as a core
// `Fetcher`, and pxl_fetch handles as `FetchHandle`s. A fetch is in the host handle table
// (API+Extensions.swift) from when start receives it until pxl_fetch_finish takes it out:
// a write or finish after that finds nothing and is refused.
import CPixload
import PixloadCore

private let fetcherVersions = [end(\pxl_fetcher.disk_max_age_s)]

private func defaultFetcher() -> pxl_fetcher {
  var fetcher = pxl_fetcher()
  fetcher.struct_size = MemoryLayout<pxl_fetcher>.stride
  fetcher.max_concurrent = Int32(FetcherSettings().maxConcurrent)
  return fetcher
}

/// A host's pxl_fetcher. user_data travels as a bit pattern: the host promised it is
/// usable from the fetch thread.
private final class CFetcher: Fetcher, @unchecked Sendable {
  let startFunction: pxl_fetch_start_fn
  let cancelFunction: pxl_fetch_cancel_fn?
  let destroyFunction: pxl_fetch_destroy_fn?
  let userData: UInt

  init(_ c: pxl_fetcher, start: pxl_fetch_start_fn) {
    startFunction = start
    cancelFunction = c.cancel
    destroyFunction = c.destroy
    userData = UInt(bitPattern: c.user_data)
  }

  private var userDataPointer: UnsafeMutableRawPointer? { UnsafeMutableRawPointer(bitPattern: userData) }

  func start(url: String, fetch: FetchHandle) {
    let handle = insertHostObject(fetch)
    fetch.hostHandle = UInt(bitPattern: handle)  // cancel names the fetch as start did
    url.withCString { startFunction($0, handle, userDataPointer) }
  }

  func cancel(_ fetch: FetchHandle) {
    cancelFunction?(OpaquePointer(bitPattern: fetch.hostHandle), userDataPointer)
  }

  func destroy() { destroyFunction?(userDataPointer) }
}

@c @implementation public func pxl_fetcher_init_size(_ fetcher: UnsafeMutablePointer<pxl_fetcher>?, _ size: Int) -> pxl_status {
  initGrowableStruct(fetcher, size: size, defaults: defaultFetcher(), knownEnds: fetcherVersions)
}

@c @implementation public func pxl_loader_add_fetcher(_ loaderHandle: OpaquePointer?, _ scheme: UnsafePointer<CChar>?,
                                                      _ fetcher: UnsafePointer<pxl_fetcher>?) -> pxl_status {
  // No failure calls destroy (pixload.h, "Extensions"): 0.5.0 promised it, and a 0.5.0
  // host frees user_data itself after a refusal, so a call here would be a double free.
  guard let loader = loader(loaderHandle), let scheme, let fetcher,
        let c = readGrowableStruct(fetcher, defaults: defaultFetcher(), knownEnds: fetcherVersions),
        let start = c.start, c.max_concurrent > 0, c.disk_max_age_s >= 0
  else { return PXL_E_INVALID_ARGUMENT }
  let settings = FetcherSettings(maxConcurrent: Int(c.max_concurrent),
                                 diskMaxAgeSeconds: c.disk_cache != 0 ? Int(clamping: c.disk_max_age_s) : nil)
  do {
    try loader.addFetcher(CFetcher(c, start: start), for: String(cString: scheme), settings: settings)
    return PXL_OK
  } catch {
    return cStatus(error.status)
  }
}

@c @implementation public func pxl_loader_remove_fetcher(_ loaderHandle: OpaquePointer?, _ scheme: UnsafePointer<CChar>?) -> pxl_status {
  guard let loader = loader(loaderHandle), let scheme else { return PXL_E_INVALID_ARGUMENT }
  return loader.removeFetcher(for: String(cString: scheme)) ? PXL_OK : PXL_E_NOT_FOUND
}

@c @implementation public func pxl_fetch_write(_ handle: OpaquePointer?, _ data: UnsafeRawPointer?, _ length: Int) -> pxl_status {
  guard let fetch = hostObject(handle, as: FetchHandle.self), data != nil || length == 0
  else { return PXL_E_INVALID_ARGUMENT }
  return cStatus(fetch.write(UnsafeRawBufferPointer(start: data, count: length)))
}

@c @implementation public func pxl_fetch_finish(_ handle: OpaquePointer?, _ status: pxl_status,
                                                _ message: UnsafePointer<CChar>?) -> pxl_status {
  guard let fetch = takeHostObject(handle, as: FetchHandle.self) else { return PXL_E_INVALID_ARGUMENT }
  var error: LoadError?
  if status != PXL_OK {
    let core = hostFailureStatus(status)
    error = LoadError(core, message.map { String(cString: $0) } ?? core.description)
  }
  return fetch.finish(error) ? PXL_OK : PXL_E_CANCELLED
}
