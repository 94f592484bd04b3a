// The C API of registered codecs and codec modules (pixload.h, "Codecs", "Codec
// modules"): a host's pxl_codec becomes a PixloadCore `ExternalCodec` (`CCodec`) that
// calls its functions; modules register theirs through the same pxl_loader_add_codec.
import CPixload
import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

private let codecVersions = [end(\pxl_codec.destroy), end(\pxl_codec.close_frames)]
private let messageCapacity = 256

@c @implementation public func pxl_codec_init_size(_ codec: UnsafeMutablePointer<pxl_codec>?, _ size: Int) -> pxl_status {
  var empty = pxl_codec()
  empty.struct_size = MemoryLayout<pxl_codec>.stride
  return initGrowableStruct(codec, size: size, defaults: empty, knownEnds: codecVersions)
}

@c @implementation public func pxl_loader_add_codec(_ handle: OpaquePointer?, _ codec: UnsafePointer<pxl_codec>?) -> pxl_status {
  guard let codec else { return PXL_E_INVALID_ARGUMENT }
  // Every failure calls destroy, as 0.5.0 promised for codecs (pixload.h, "Extensions";
  // processors and fetchers never do), so that a host never frees user_data itself. A bad
  // struct_size too: pxl_codec came with destroy and user_data, so every pxl_codec a
  // program can declare holds them, whatever its struct_size says.
  // The log says why: a refused module is otherwise only "invalid argument".
  func refuse(_ loader: ImageLoader?, _ status: Status, _ why: String) -> pxl_status {
    codec.pointee.destroy?(codec.pointee.user_data)
    if let loader { ImageLoader.log(loader.configuration, .error, "pixload: pxl_loader_add_codec: \(why)") }
    return cStatus(status)
  }
  guard let loader = loader(handle) else { return refuse(nil, .invalidArgument, "no loader") }
  guard let c = readGrowableStruct(codec, defaults: pxl_codec(), knownEnds: codecVersions) else {
    return refuse(loader, .invalidArgument, "struct_size \(codec.pointee.struct_size) is not a pxl_codec's (pxl_codec_init sets it)")
  }
  let missing = [("id", c.id == nil), ("version", c.version == nil), ("sniff", c.sniff == nil),
                 ("read_header", c.read_header == nil), ("decode", c.decode == nil)].filter { $0.1 }.map { $0.0 }
  guard missing.isEmpty else {
    return refuse(loader, .invalidArgument, "the codec has no \(missing.joined(separator: ", ")) (required)")
  }
  do {
    try loader.codecs.add(isolating(CCodec(c), loader))
    return PXL_OK
  } catch {
    return refuse(loader, error.status, error.message)
  }
}

@c @implementation public func pxl_loader_remove_codec(_ handle: OpaquePointer?, _ id: UnsafePointer<CChar>?) -> pxl_status {
  guard let loader = loader(handle), let id else { return PXL_E_INVALID_ARGUMENT }
  return loader.codecs.remove(String(cString: id)) ? PXL_OK : PXL_E_NOT_FOUND
}

@c @implementation public func pxl_loader_formats(_ handle: OpaquePointer?, _ buffer: UnsafeMutablePointer<CChar>?,
                                                  _ capacity: Int) -> Int {
  let ids = ImageDecoder.builtInFormats + (loader(handle)?.codecs.ids ?? [])
  let text = Array(ids.joined(separator: " ").utf8)
  if let buffer, capacity > 0 {
    let copied = min(text.count, capacity - 1)
    text.withUnsafeBufferPointer { UnsafeMutableRawPointer(buffer).copyMemory(from: $0.baseAddress!, byteCount: copied) }
    buffer[copied] = 0
  }
  return text.count
}

@c @implementation public func pxl_loader_isolation(_ handle: OpaquePointer?, _ buffer: UnsafeMutablePointer<CChar>?,
                                                    _ capacity: Int) -> Int {
  var text: [UInt8] = []
  if let loader = loader(handle) {
    let layers = (loader.codecs.builtInWorkers?.layers() ?? loader.codecs.firstIsolated?.layers()) ?? ""
    text = Array((layers.isEmpty ? "none" : layers).utf8)
  }
  if let buffer, capacity > 0 {
    let copied = min(text.count, capacity - 1)
    text.withUnsafeBufferPointer { UnsafeMutableRawPointer(buffer).copyMemory(from: $0.baseAddress!, byteCount: copied) }
    buffer[copied] = 0
  }
  return text.count
}

/// pxl_loader_new's last step: the codec modules pxl_config.codec_modules selects, each
/// registering itself through pxl_loader_add_codec on `handle`. A listed module that fails
/// fails the loader (PXL_E_UNSUPPORTED); a found one is skipped with a warning.
func registerCodecModules(_ loader: ImageLoader, _ handle: OpaquePointer) -> pxl_status {
  let configuration = loader.configuration
  let required = configuration.codecModules != nil
  do {
    // Under isolation, with a worker to decode in, a module with a manifest is not loaded
    // in this process (nor libheif, libjxl, librsvg): its manifest tells its codecs.
    let (modules, skipped) = try CodecModules.open(selection: configuration.codecModules,
                                                   manifests: configuration.isolation != .none && workerExecutable != nil)
    for line in skipped { ImageLoader.log(configuration, .warning, "pixload: \(line)") }
    for module in modules {
      guard let symbol = module.register else {
        for codec in CodecModules.manifestCodecs(module) {
          do {
            try loader.codecs.add(IsolatedCodec(wrapping: codec, settings: isolationSettings(module, loader)))
          } catch {
            let line = "pixload: codec module \(module.path) failed to register: \(error.message)"
            if required {
              ImageLoader.log(configuration, .error, line)
              return PXL_E_UNSUPPORTED
            }
            ImageLoader.log(configuration, .warning, line)
          }
        }
        continue
      }
      let register = unsafeBitCast(symbol, to: pxl_codec_module_register_fn.self)
      loader.registeringModule = module
      let status = register(handle)
      loader.registeringModule = nil
      if status != PXL_OK {
        let line = "pixload: codec module \(module.path) failed to register: \(String(cString: pxl_status_string(status)))"
        if required {
          ImageLoader.log(configuration, .error, line)
          return PXL_E_UNSUPPORTED
        }
        ImageLoader.log(configuration, .warning, line)
      }
    }
    return PXL_OK
  } catch {
    ImageLoader.log(configuration, .error, "pixload: pxl_loader_new: \(error.message)")
    return pxl_status(rawValue: UInt32(error.status.rawValue))
  }
}

/// A module's codec under isolation (pixload.h, "Isolation"): decoded by workers that load
/// the same module file; a host's codec, or any codec with PXL_ISOLATION_NONE, as it is.
/// Without the worker executable (a build without it), the module decodes in the host
/// with a warning, unless PXL_ISOLATION_REQUIRED: then its images fail.
private func isolating(_ codec: ExternalCodec, _ loader: ImageLoader) -> ExternalCodec {
  let configuration = loader.configuration
  guard let module = loader.registeringModule, configuration.isolation != .none else { return codec }
  let executable = IsolatedCodec.defaultExecutable
  if executable.map({ access($0, X_OK) != 0 }) ?? true, !configuration.isolationRequired {
    ImageLoader.log(configuration, .warning, "pixload: no decode worker at \(executable ?? "?"): "
                      + "codec \(codec.id) of module \(module.name) decodes in this process")
    return codec
  }
  return IsolatedCodec(wrapping: codec, settings: isolationSettings(module, loader))
}

/// PXL_ISOLATION_ALL: the built-in formats decode in a pool of workers that load the
/// library's shims (pixload-decode-builtins.so beside the worker) and no module. Without
/// the worker or that file: PXL_E_UNSUPPORTED with PXL_ISOLATION_REQUIRED, else the
/// built-in formats decode in this process with a warning (as a module does without a
/// worker). Nothing starts here: the pool's first worker starts with the first image.
func isolateBuiltIns(_ loader: ImageLoader) -> pxl_status {
  let configuration = loader.configuration
  guard configuration.isolation == .all else { return PXL_OK }
  guard let executable = workerExecutable,
        access(IsolatedBuiltIns.library(beside: executable), R_OK) == 0 else {
    let line = "pixload: no decode worker with the built-in formats (\(IsolatedCodec.defaultExecutable ?? "?")): "
    if configuration.isolationRequired {
      ImageLoader.log(configuration, .error, line + "PXL_ISOLATION_ALL | PXL_ISOLATION_REQUIRED refused")
      return PXL_E_UNSUPPORTED
    }
    ImageLoader.log(configuration, .warning, line + "JPEG, PNG, WebP, GIF and AVIF decode in this process")
    return PXL_OK
  }
  let directory = String(executable[..<(executable.lastIndex(of: "/") ?? executable.startIndex)])
  loader.codecs.isolateBuiltIns(WorkerPool(settings: WorkerPool.Settings(
    executable: executable, moduleDirectory: directory.isEmpty ? "." : directory, moduleName: "",
    builtIns: IsolatedBuiltIns.library(beside: executable), maxPixels: configuration.maxPixels,
    maxInputBytes: UInt64(max(configuration.network.maxBodyBytes, 64 << 20)),
    timeoutMilliseconds: configuration.decodeTimeoutMilliseconds, poolSize: loader.decodeThreadCount,
    required: configuration.isolationRequired, log: { level, line in ImageLoader.log(configuration, level, line) })))
  return PXL_OK
}

/// The worker executable, when there is one to run.
private var workerExecutable: String? {
  IsolatedCodec.defaultExecutable.flatMap { access($0, X_OK) == 0 ? $0 : nil }
}

/// How the workers of a module's codecs run.
private func isolationSettings(_ module: CodecModules.Module, _ loader: ImageLoader) -> IsolatedCodec.Settings {
  let configuration = loader.configuration
  let directory = String(module.path[..<(module.path.lastIndex(of: "/") ?? module.path.startIndex)])
  return IsolatedCodec.Settings(
    executable: IsolatedCodec.defaultExecutable ?? "", moduleDirectory: directory.isEmpty ? "." : directory,
    moduleName: module.name, maxPixels: configuration.maxPixels,
    maxInputBytes: UInt64(max(configuration.network.maxBodyBytes, 64 << 20)),
    timeoutMilliseconds: configuration.decodeTimeoutMilliseconds, poolSize: loader.decodeThreadCount,
    required: configuration.isolationRequired, log: { level, line in ImageLoader.log(configuration, level, line) })
}

/// A host's (or module's) pxl_codec as the decode stage calls it.
private final class CCodec: ExternalCodec, @unchecked Sendable {
  let id: String
  let version: String
  /// The caller's struct, its strings no longer used (copied into id and version).
  private let c: pxl_codec

  init(_ c: pxl_codec) {
    id = String(cString: c.id)
    version = String(cString: c.version)
    self.c = c
  }

  var writesPremultiplied: Bool { c.flags & UInt32(PXL_CODEC_PREMULTIPLIED) != 0 }
  var isProgressive: Bool { c.flags & UInt32(PXL_CODEC_PROGRESSIVE) != 0 }
  var isScalable: Bool { c.flags & UInt32(PXL_CODEC_SCALABLE) != 0 }
  var decodesFrames: Bool { c.decode_frames != nil }
  var choosesSize: Bool { c.choose_size != nil }

  private func flags(keepOrientation: Bool, partial: Bool = false) -> UInt32 {
    (keepOrientation ? UInt32(PXL_CODEC_KEEP_ORIENTATION) : 0) | (partial ? UInt32(PXL_CODEC_PARTIAL) : 0)
  }

  /// Calls `body` with a message buffer; the failure it reports, nil for PXL_OK.
  private func call(_ body: (UnsafeMutablePointer<CChar>, Int) -> pxl_status) -> CodecFailure? {
    var message = [CChar](repeating: 0, count: messageCapacity)
    let status = message.withUnsafeMutableBufferPointer { body($0.baseAddress!, $0.count) }
    guard status != PXL_OK else { return nil }
    message[messageCapacity - 1] = 0
    return CodecFailure(hostFailureStatus(status), String(cString: message))
  }

  func sniff(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    c.sniff!(bytes.baseAddress, bytes.count, c.user_data) != 0
  }

  func readHeader(_ bytes: UnsafeBufferPointer<UInt8>, keepOrientation: Bool) -> Result<CodecHeader, CodecFailure> {
    var h = pxl_codec_header()
    h.struct_size = MemoryLayout<pxl_codec_header>.stride
    h.flags = flags(keepOrientation: keepOrientation)
    h.frame_count = 1
    h.orientation = 1
    h.has_alpha = 1
    if let failure = call({ c.read_header!(bytes.baseAddress, bytes.count, &h, $0, $1, c.user_data) }) {
      return .failure(failure)
    }
    var header = CodecHeader()
    header.width = Int(h.width)
    header.height = Int(h.height)
    header.frameCount = Int(h.frame_count)
    header.loopCount = Int(max(0, h.loop_count))
    header.orientation = Int(h.orientation)
    header.hasAlpha = h.has_alpha != 0
    header.iccSize = c.read_icc == nil ? 0 : Int(clamping: h.icc_size)
    header.cicpPrimaries = h.cicp_primaries
    header.cicpTransfer = h.cicp_transfer
    header.cicpMatrix = h.cicp_matrix
    return .success(header)
  }

  func readICC(_ bytes: UnsafeBufferPointer<UInt8>, size: Int) -> [UInt8]? {
    guard let read = c.read_icc else { return nil }
    var icc = [UInt8](repeating: 0, count: size)
    let status = icc.withUnsafeMutableBufferPointer { read(bytes.baseAddress, bytes.count, $0.baseAddress, size, c.user_data) }
    return status == PXL_OK ? icc : nil
  }

  func chooseSize(_ bytes: UnsafeBufferPointer<UInt8>, keepOrientation: Bool, width: Int,
                  height: Int) -> (width: Int, height: Int)? {
    guard let choose = c.choose_size else { return nil }
    var w = Int32(width), h = Int32(height)
    guard choose(bytes.baseAddress, bytes.count, flags(keepOrientation: keepOrientation), &w, &h, c.user_data) == PXL_OK
    else { return nil }
    return (Int(w), Int(h))
  }

  private func target(_ target: CodecTarget) -> pxl_codec_target {
    var t = pxl_codec_target()
    t.struct_size = MemoryLayout<pxl_codec_target>.stride
    t.flags = flags(keepOrientation: target.keepOrientation, partial: target.partial)
    t.width = Int32(target.width)
    t.height = Int32(target.height)
    t.pixels = target.pixels
    t.stride = target.stride
    t.cancel = target.cancel
    return t
  }

  func decode(_ bytes: UnsafeBufferPointer<UInt8>, into target: CodecTarget) -> CodecFailure? {
    var t = self.target(target)
    return call { c.decode!(bytes.baseAddress, bytes.count, &t, $0, $1, c.user_data) }
  }

  /// What frame_done reaches through pxl_codec_target.library.
  private final class FrameSink {
    let done: (Int) -> Bool
    init(_ done: @escaping (Int) -> Bool) { self.done = done }
  }

  func decodeFrames(_ bytes: UnsafeBufferPointer<UInt8>, into target: CodecTarget,
                    frameDone: (Int) -> Bool) -> CodecFailure? {
    guard let decodeFrames = c.decode_frames else { return CodecFailure(.unsupportedImage, "no frames") }
    return withoutActuallyEscaping(frameDone) { frameDone in
      let sink = FrameSink(frameDone)
      var t = self.target(target)
      t.library = Unmanaged.passUnretained(sink).toOpaque()
      t.frame_done = { library, duration in
        guard let library else { return 1 }
        let sink = Unmanaged<FrameSink>.fromOpaque(library).takeUnretainedValue()
        return sink.done(Int(duration)) ? 0 : 1
      }
      return withExtendedLifetime(sink) {
        call { decodeFrames(bytes.baseAddress, bytes.count, &t, $0, $1, c.user_data) }
      }
    }
  }

  var readsFrames: Bool { c.open_frames != nil && c.next_frame != nil && c.close_frames != nil }

  func openFrames(_ bytes: UnsafeBufferPointer<UInt8>) -> Result<UnsafeMutableRawPointer?, CodecFailure> {
    guard let open = c.open_frames, readsFrames else { return .failure(CodecFailure(.unsupportedImage, "no frames")) }
    var state: UnsafeMutableRawPointer? = nil
    if let failure = call({ open(bytes.baseAddress, bytes.count, &state, $0, $1, c.user_data) }) {
      return .failure(failure)
    }
    return .success(state)
  }

  func nextFrame(_ state: UnsafeMutableRawPointer?, into target: CodecTarget) -> Result<Int?, CodecFailure> {
    guard let next = c.next_frame else { return .failure(CodecFailure(.unsupportedImage, "no frames")) }
    var t = self.target(target)
    var duration: Int32 = 0
    if let failure = call({ next(state, &t, &duration, $0, $1, c.user_data) }) {
      return failure.status == .notFound ? .success(nil) : .failure(failure)
    }
    return .success(Int(duration))
  }

  func closeFrames(_ state: UnsafeMutableRawPointer?) { c.close_frames?(state, c.user_data) }

  func destroy() { c.destroy?(c.user_data) }
}
