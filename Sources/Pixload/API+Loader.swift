// The C API of loaders (pixload.h, "Loader"): pxl_config_init, pxl_loader_new and
// pxl_loader_free over the core's `ImageLoader`, and the calls on its memory cache, its
// disk cache and its statistics.
import CPixload
import PixloadCore

private let configVersions = [end(\pxl_config.disk_cache_max_age_s), end(\pxl_config.log_level),
                              end(\pxl_config.disk_variant_max_side), end(\pxl_config.hook_timeout_ms),
                              end(\pxl_config.isolation), end(\pxl_config.animation_ring_bytes)]
private let statsSize01 = end(\pxl_stats.disk_bytes)

// MARK: - Loader

@c @implementation public func pxl_config_init_size(_ config: UnsafeMutablePointer<pxl_config>?, _ size: Int) -> pxl_status {
  initGrowableStruct(config, size: size, defaults: defaultConfig(), knownEnds: configVersions)
}

private func defaultConfig() -> pxl_config {
  defaults(loaderConfigFields, empty: pxl_config(), core: LoaderConfiguration())
}

@c @implementation public func pxl_config_init(_ config: UnsafeMutablePointer<pxl_config>?) {
  _ = pxl_config_init_size(config, sizeOf01(pxl_config.self, configVersions))
}

@c @implementation public func pxl_loader_new(_ config: UnsafePointer<pxl_config>?,
                                              _ out: UnsafeMutablePointer<OpaquePointer?>?) -> pxl_status {
  guard let out else { return PXL_E_INVALID_ARGUMENT }
  out.pointee = nil
  var configuration = LoaderConfiguration()
  configuration.network.userAgent = versionUserAgent
  if let config {
    guard let c = readGrowableStruct(config, defaults: defaultConfig(), knownEnds: configVersions),
          apply(loaderConfigFields, c, to: &configuration)
    else { return PXL_E_INVALID_ARGUMENT }
    if let problem = unreadableTrustStore(configuration.network) {
      configuration.log?(.error, "pixload: pxl_loader_new: \(problem)")
      return PXL_E_INVALID_ARGUMENT
    }
  }
  do {
    let created = try ImageLoader(configuration: configuration)
    let handle = retainedHandle(created)
    var status = isolateBuiltIns(created)
    if status == PXL_OK { status = registerCodecModules(created, handle) }
    guard status == PXL_OK else {
      pxl_loader_free(handle)
      return status
    }
    out.pointee = handle
    return PXL_OK
  } catch {
    // The status says what kind of failure; the log line says which (a thread that could
    // not start, a libcurl without a safety option).
    configuration.log?(.error, "pixload: pxl_loader_new: \(error.message)")
    return cStatus(error.status)
  }
}

@c @implementation public func pxl_loader_free(_ handle: OpaquePointer?) {
  free(handle, as: ImageLoader.self) { $0.close() }
}

// MARK: - Memory cache

@c @implementation public func pxl_memory_cache_trim(_ loaderHandle: OpaquePointer?, _ maxBytes: UInt64) {
  loader(loaderHandle)?.memoryCache.trim(toBytes: Int(clamping: maxBytes))
}

@c @implementation public func pxl_memory_cache_bytes(_ loaderHandle: OpaquePointer?) -> UInt64 {
  UInt64(loader(loaderHandle)?.memoryCache.totalBytes ?? 0)
}

@c @implementation public func pxl_memory_cache_count(_ loaderHandle: OpaquePointer?) -> Int32 {
  Int32(clamping: loader(loaderHandle)?.memoryCache.count ?? 0)
}

// MARK: - Disk cache

@c @implementation public func pxl_disk_cache_bytes(_ loaderHandle: OpaquePointer?) -> UInt64 {
  UInt64(loader(loaderHandle)?.diskCacheBytesSeen ?? 0)
}

@c @implementation public func pxl_disk_cache_clear(_ loaderHandle: OpaquePointer?) {
  loader(loaderHandle)?.diskTier?.removeAll()
}

@c @implementation public func pxl_cache_remove(_ loaderHandle: OpaquePointer?, _ key: UnsafePointer<CChar>?) -> pxl_status {
  guard let loader = loader(loaderHandle), let key else { return PXL_E_INVALID_ARGUMENT }
  loader.removeCached(cacheKey: String(cString: key))
  return PXL_OK
}

@c @implementation public func pxl_loader_get_stats(_ loaderHandle: OpaquePointer?,
                                                    _ stats: UnsafeMutablePointer<pxl_stats>?) -> pxl_status {
  guard let loader = loader(loaderHandle), let stats else { return PXL_E_INVALID_ARGUMENT }
  let s = loader.statistics
  var filled = pxl_stats()
  filled.requests = UInt64(s.requests)
  filled.memory_hits = UInt64(s.memoryHits)
  filled.disk_hits = UInt64(s.diskHits)
  filled.network_fetches = UInt64(s.networkFetches)
  filled.revalidated = UInt64(s.revalidated)
  filled.coalesced = UInt64(s.coalesced)
  filled.cancelled = UInt64(s.cancelled)
  filled.failed = UInt64(s.failed)
  filled.bytes_downloaded = UInt64(s.bytesDownloaded)
  filled.memory_bytes = UInt64(loader.memoryCache.totalBytes)
  filled.memory_count = UInt64(loader.memoryCache.count)
  filled.disk_bytes = UInt64(loader.diskCacheBytesSeen)
  filled.bytes_saved = UInt64(s.bytesSaved)
  filled.variant_hits = UInt64(s.variantHits)
  filled.variants_stored = UInt64(s.variantsStored)
  filled.variant_bytes_stored = UInt64(s.variantBytesStored)
  let tls = loader.tlsHandshakes
  filled.tls_handshakes = UInt64(tls.handshakes)
  filled.tls_resumed = UInt64(tls.resumed)
  return writeGrowableStruct(filled, to: stats, minimumSize: statsSize01) ? PXL_OK : PXL_E_INVALID_ARGUMENT
}

@c @implementation public func pxl_get_stats(_ loaderHandle: OpaquePointer?, _ stats: UnsafeMutablePointer<pxl_stats>?) -> pxl_status {
  pxl_loader_get_stats(loaderHandle, stats)
}
