// The fields of pxl_config (pixload.h, "Loader configuration") and pxl_table_config, each
// stated once (`ConfigField`): its default, its check and where it goes in the core's
// configuration. API+Loader.swift and API+Tables.swift read the structs through them.
import CPixload
import PixloadCore

// MARK: - Configuration fields

/// One field (or group of fields) of a config struct the host fills, all in one place: its
/// default, which the *_config_init functions write (taken from the core's configuration,
/// so the two cannot disagree), and what pxl_loader_new or pxl_table_create does with the
/// caller's value: check it (false: PXL_E_INVALID_ARGUMENT) and carry it into the core's
/// configuration. A caller's struct is applied field by field onto the core's defaults;
/// on the first refusal the half-built configuration is dropped.
struct ConfigField<CStruct, Core> {
  let setDefault: (inout CStruct, Core) -> Void
  let apply: (CStruct, inout Core) -> Bool
}

extension ConfigField {
  /// A number the core holds in its own integer type.
  static func number<CValue: BinaryInteger, CoreValue: BinaryInteger>(
    _ field: WritableKeyPath<CStruct, CValue>, _ core: WritableKeyPath<Core, CoreValue>,
    valid: @escaping (CValue) -> Bool = { _ in true }
  ) -> ConfigField {
    ConfigField(setDefault: { c, defaults in c[keyPath: field] = CValue(defaults[keyPath: core]) },
                apply: { c, configuration in
                  guard valid(c[keyPath: field]) else { return false }
                  configuration[keyPath: core] = CoreValue(c[keyPath: field])
                  return true
                })
  }

  /// An int32_t that is 0 or not: false or true.
  static func flag(_ field: WritableKeyPath<CStruct, Int32>, _ core: WritableKeyPath<Core, Bool>) -> ConfigField {
    ConfigField(setDefault: { c, defaults in c[keyPath: field] = defaults[keyPath: core] ? 1 : 0 },
                apply: { c, configuration in
                  configuration[keyPath: core] = c[keyPath: field] != 0
                  return true
                })
  }

  /// A string, copied; NULL (the default) for the core's nil.
  static func string(_ field: WritableKeyPath<CStruct, UnsafePointer<CChar>?>,
                     _ core: WritableKeyPath<Core, String?>) -> ConfigField {
    ConfigField(setDefault: { c, _ in c[keyPath: field] = nil },
                apply: { c, configuration in
                  configuration[keyPath: core] = c[keyPath: field].map { String(cString: $0) }
                  return true
                })
  }
}

/// The struct with every field's default (struct_size: this library's size).
func defaults<CStruct, Core>(_ fields: [ConfigField<CStruct, Core>], empty: CStruct, core: Core) -> CStruct {
  var c = empty
  withUnsafeMutableBytes(of: &c) { $0.storeBytes(of: MemoryLayout<CStruct>.stride, as: Int.self) }
  for field in fields { field.setDefault(&c, core) }
  return c
}

/// The caller's struct applied onto `configuration`; false when a field is refused.
func apply<CStruct, Core>(_ fields: [ConfigField<CStruct, Core>], _ c: CStruct,
                          to configuration: inout Core) -> Bool {
  fields.allSatisfy { $0.apply(c, &configuration) }
}

private let allSchemes = UInt32(PXL_SCHEME_HTTP | PXL_SCHEME_HTTPS | PXL_SCHEME_FILE | PXL_SCHEME_DATA)
private let schemeNames: [(bit: UInt32, name: String)] = [(UInt32(PXL_SCHEME_HTTP), "http"), (UInt32(PXL_SCHEME_HTTPS), "https"),
                                                          (UInt32(PXL_SCHEME_FILE), "file"), (UInt32(PXL_SCHEME_DATA), "data")]

/// pxl_config, in the header's order: what pxl_config_init fills and pxl_loader_new checks
/// and maps onto LoaderConfiguration.
let loaderConfigFields: [ConfigField<pxl_config, LoaderConfiguration>] = [
  .number(\.memory_cache_bytes, \.memoryCacheBytes, valid: { $0 <= UInt64(Int.max) }),
  .number(\.max_concurrent_downloads, \.network.maxConcurrentDownloads, valid: { $0 > 0 }),
  .number(\.max_downloads_per_host, \.network.maxDownloadsPerHost, valid: { $0 > 0 }),
  .number(\.decode_threads, \.decodeThreads, valid: { $0 >= 0 && $0 <= 256 }),
  .number(\.connect_timeout_ms, \.network.connectTimeoutMilliseconds, valid: { $0 >= 0 }),
  .number(\.timeout_ms, \.network.timeoutMilliseconds, valid: { $0 >= 0 }),
  .number(\.max_body_bytes, \.network.maxBodyBytes, valid: { $0 > 0 && $0 <= UInt64(Int.max) }),
  .number(\.max_pixels, \.maxPixels, valid: { $0 > 0 }),
  // allowed_schemes: PXL_SCHEME_* bits; the default is the header's (HTTP | HTTPS), as
  // the core's default set.
  ConfigField(setDefault: { c, _ in c.allowed_schemes = UInt32(PXL_SCHEME_HTTP | PXL_SCHEME_HTTPS) },
              apply: { c, configuration in
                guard c.allowed_schemes & ~allSchemes == 0 else { return false }
                configuration.network.allowedSchemes = Set(schemeNames.filter { c.allowed_schemes & $0.bit != 0 }
                                                             .map(\.name))
                return true
              }),
  // user_agent: NULL keeps the "pixload/<version>" pxl_loader_new starts from.
  ConfigField(setDefault: { c, _ in c.user_agent = nil },
              apply: { c, configuration in
                if let agent = c.user_agent { configuration.network.userAgent = String(cString: agent) }
                return true
              }),
  .number(\.stall_timeout_ms, \.network.stallTimeoutMilliseconds, valid: { $0 >= 0 }),
  .number(\.max_redirects, \.network.maxRedirects, valid: { $0 >= 0 }),
  .number(\.max_retries, \.network.maxRetries, valid: { $0 >= 0 && $0 <= 100 }),
  .number(\.retry_base_delay_ms, \.network.retryBaseDelayMilliseconds, valid: { $0 >= 0 }),
  .number(\.retry_max_delay_ms, \.network.retryMaxDelayMilliseconds, valid: { $0 >= 0 }),
  .string(\.ca_file, \.network.caFile),
  // headers: checked and copied as a request's are (headerLines).
  ConfigField(setDefault: { c, _ in c.headers = nil },
              apply: { c, configuration in
                guard let headers = headerLines(c.headers) else { return false }
                configuration.network.headers = headers
                return true
              }),
  .number(\.cancel_storm_limit, \.network.cancelStormLimit, valid: { $0 >= 0 }),
  // disk_cache_bytes: any size; more than the address space is as good as no limit.
  ConfigField(setDefault: { c, defaults in c.disk_cache_bytes = UInt64(defaults.diskCacheBytes) },
              apply: { c, configuration in
                configuration.diskCacheBytes = Int(clamping: c.disk_cache_bytes)
                return true
              }),
  .flag(\.ignore_http_freshness, \.ignoresHTTPFreshness),
  .number(\.memory_cache_count, \.memoryCacheCount, valid: { $0 >= 0 }),
  .string(\.disk_cache_dir, \.diskCacheDirectory),
  .number(\.disk_cache_max_age_s, \.diskCacheMaxAgeSeconds, valid: { $0 >= 0 }),
  // log, log_user_data and log_level (0.2.0): one group. The level is clamped to the known
  // ones and used only with a callback.
  ConfigField(setDefault: { c, defaults in
                c.log = nil
                c.log_user_data = nil
                c.log_level = defaults.logLevel.rawValue
              },
              apply: { c, configuration in
                guard let logLevel = LogLevel(rawValue: min(max(c.log_level, 0), LogLevel.info.rawValue)) else {
                  return false
                }
                if let log = c.log {
                  // The pointer travels as a bit pattern: the host promised log_user_data is
                  // usable from any thread.
                  let userData = UInt(bitPattern: c.log_user_data)
                  configuration.log = { level, line in
                    line.withCString { log(level.rawValue, $0, UnsafeMutableRawPointer(bitPattern: userData)) }
                  }
                  configuration.logLevel = logLevel
                }
                return true
              }),
  // disk_variant_max_side (0.3.0): larger than any image max_pixels lets through is the
  // same as no limit.
  ConfigField(setDefault: { c, defaults in c.disk_variant_max_side = Int64(defaults.diskVariantMaxSide) },
              apply: { c, configuration in
                guard c.disk_variant_max_side >= 0 else { return false }
                configuration.diskVariantMaxSide = Int(min(c.disk_variant_max_side, 1 << 30))
                return true
              }),
  // codec_modules (0.5.0): API+Codecs.swift loads them.
  .string(\.codec_modules, \.codecModules),
  // 0.5.0: ca_path, proxy, tls_min_version. Whether ca_file and ca_path can be read is
  // checked once all fields are in (unreadableTrustStore), so that the log line goes out.
  .string(\.ca_path, \.network.caPath),
  .string(\.proxy, \.network.proxy),
  ConfigField(setDefault: { c, defaults in c.tls_min_version = defaults.network.tlsMinVersion.rawValue },
              apply: { c, configuration in
                guard let version = TLSVersion(rawValue: c.tls_min_version) else { return false }
                configuration.network.tlsMinVersion = version
                return true
              }),
  // request_hook and request_hook_user_data (0.5.0): API+Hook.swift.
  ConfigField(setDefault: { c, _ in
                c.request_hook = nil
                c.request_hook_user_data = nil
              },
              apply: { c, configuration in
                configuration.network.requestHook = c.request_hook.map { CRequestHook($0, userData: c.request_hook_user_data) }
                return true
              }),
  .number(\.hook_timeout_ms, \.network.hookTimeoutMilliseconds, valid: { $0 >= 0 }),
  // 0.6.0: decode_timeout_ms and isolation (pixload.h, "Isolation"). ALL is refused by
  // pxl_loader_new (PXL_E_UNSUPPORTED, with a log line), not here.
  .number(\.decode_timeout_ms, \.decodeTimeoutMilliseconds, valid: { $0 >= 0 && $0 <= Int64(Int32.max) }),
  ConfigField(setDefault: { c, defaults in c.isolation = defaults.isolation.rawValue },
              apply: { c, configuration in
                let required = Int32(PXL_ISOLATION_REQUIRED)
                guard c.isolation & ~(required | 0xFF) == 0, let isolation = Isolation(rawValue: c.isolation & 0xFF) else {
                  return false
                }
                configuration.isolation = isolation
                configuration.isolationRequired = c.isolation & required != 0
                return true
              }),
  // 0.6.0: animation players' rings (pixload.h, "Animation players").
  .number(\.animation_ring_frames, \.animationRingFrames, valid: { $0 <= 1 << 16 }),
  .number(\.animation_ring_bytes, \.animationRingBytes, valid: { $0 <= UInt64(Int.max) }),
]

/// pxl_table_config, in the header's order: what pxl_table_config_init fills and
/// pxl_table_create checks and maps onto ImageTable.Configuration.
let tableConfigFields: [ConfigField<pxl_table_config, ImageTable.Configuration>] = [
  .number(\.prefetch_rows, \.prefetchRows, valid: { $0 >= 0 }),
  .number(\.keep_rows, \.keepRows, valid: { $0 >= 0 }),
  .number(\.visible_priority, \.visiblePriority),
  .number(\.prefetch_priority, \.prefetchPriority),
  .flag(\.previews, \.previews),
]
