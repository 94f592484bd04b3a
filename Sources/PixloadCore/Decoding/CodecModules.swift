import CSupport
import CWorker
#if canImport(Glibc)
import Glibc
#endif

/// Codec modules (pixload.h, "Codec modules"): shared objects named
/// libpixload-<name>.so, each exporting pxl_codec_module_register, which registers its
/// codecs through the public pxl_loader_add_codec like any host. Found in
/// PIXLOAD_CODEC_PATH (read with secure_getenv) or in pixload/codecs beside the library;
/// opened once per process (RTLD_NOW | RTLD_LOCAL) and never closed.
public enum CodecModules {
  /// A found module: its name ("heif") and either its register function (opened) or its
  /// manifest (pixload.h, "Codec modules"), read from the file without loading it.
  public struct Module: @unchecked Sendable {
    public let name: String
    public let path: String
    public let register: UnsafeMutableRawPointer?
    /// A pxlw_manifest_read result, kept for the process's life; nil for an opened module.
    public let manifest: UnsafeMutableRawPointer?
  }

  /// The environment variable of the search path.
  public static let environmentVariable = "PIXLOAD_CODEC_PATH"

  /// The directories searched, in order.
  public static var searchPath: [String] {
    if let value = pxl_secure_getenv(environmentVariable) {
      return String(cString: value).split(separator: ":").map(String.init).filter { !$0.isEmpty }
    }
    var buffer = [CChar](repeating: 0, count: 4096)
    guard pxl_own_directory(&buffer, UInt(buffer.count)) == 0 else { return [] }
    return [String(cString: buffer) + "/pixload/codecs"]
  }

  /// The modules `selection` asks for (pxl_config.codec_modules: nil every one found, ""
  /// none, "heif,jxl" those, each required), opened; `skipped` says what was found but
  /// could not be opened. Throws unsupported for a listed module that cannot be opened.
  /// `manifests`: a module whose file has a manifest is not opened (isolation: its codecs
  /// decode in workers, and the host sniffs with the manifest's rules); one without is.
  public static func open(selection: String?, manifests: Bool = false) throws(LoadError) -> (modules: [Module], skipped: [String]) {
    if selection == "" { return ([], []) }
    let directories = searchPath
    var skipped: [String] = []
    var modules: [Module] = []
    if let selection {
      for name in selection.split(separator: ",").map({ String($0).trimmingSpaces }) where !name.isEmpty {
        guard CodecTable.isValidID(name) else { throw LoadError(.invalidArgument, "bad codec module name \"\(name)\"") }
        var opened: Module?
        var why = "not found in \(directories.joined(separator: ":"))"
        for directory in directories where opened == nil {
          let path = directory + "/libpixload-\(name).so"
          guard access(path, F_OK) == 0 else { continue }
          switch openModule(path, name: name, manifests: manifests) {
          case .success(let module): opened = module
          case .failure(let error): why = error.message
          }
        }
        guard let opened else { throw LoadError(.unsupported, "codec module \(name): \(why)") }
        modules.append(opened)
      }
      return (modules, skipped)
    }
    var seen = Set<String>()
    for directory in directories {
      guard let dir = opendir(directory) else { continue }
      var names: [String] = []
      while let entry = readdir(dir) {
        let file = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
        if file.hasPrefix("libpixload-") && file.hasSuffix(".so") { names.append(file) }
      }
      closedir(dir)
      for file in names.sorted() {
        let name = String(file.dropFirst("libpixload-".count).dropLast(".so".count))
        // The first directory that has a module wins (PATH-like).
        guard CodecTable.isValidID(name), seen.insert(name).inserted else { continue }
        switch openModule(directory + "/" + file, name: name, manifests: manifests) {
        case .success(let module): modules.append(module)
        case .failure(let error): skipped.append("codec module \(directory)/\(file) skipped: \(error.message)")
        }
      }
    }
    return (modules, skipped)
  }

  private static let lock = Lock()
  private static nonisolated(unsafe) var opened: [String: Module] = [:]

  private static func openModule(_ path: String, name: String, manifests: Bool) -> Result<Module, LoadError> {
    if manifests, let manifest = manifestCache(path) {
      return .success(Module(name: name, path: path, register: nil, manifest: manifest))
    }
    return lock.withLock {
      if let module = opened[path] { return .success(module) }
      guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
        return .failure(LoadError(.unsupported, dlerror().map { String(cString: $0) } ?? "dlopen failed"))
      }
      guard let symbol = dlsym(handle, "pxl_codec_module_register") else {
        dlclose(handle)
        return .failure(LoadError(.unsupported, "\(path) has no pxl_codec_module_register"))
      }
      let module = Module(name: name, path: path, register: symbol, manifest: nil)
      opened[path] = module
      return .success(module)
    }
  }
}

extension CodecModules {
  private static nonisolated(unsafe) var manifests: [String: UnsafeMutableRawPointer?] = [:]

  /// The module file's manifest, read once per process (a file replaced later is read
  /// again only by a new process, as a module once opened stays opened).
  private static func manifestCache(_ path: String) -> UnsafeMutableRawPointer? {
    lock.withLock {
      if let known = manifests[path] { return known }
      let manifest = pxlw_manifest_read(path)
      manifests[path] = manifest
      return manifest
    }
  }

  /// The codecs a manifest describes, each sniffing with its rules; their other functions
  /// are never called in the host (an IsolatedCodec wraps each).
  public static func manifestCodecs(_ module: Module) -> [ExternalCodec] {
    guard let manifest = module.manifest else { return [] }
    return (0..<Int(pxlw_manifest_codec_count(manifest))).map { ManifestCodec(manifest: manifest, index: Int32($0)) }
  }
}

/// A codec known from a module's manifest (pixload.h, "Codec modules"), without the
/// module: id, version, flags and sniff. Only its worker draws (IsolatedCodec); a call
/// that would need the module answers that it is not here.
final class ManifestCodec: ExternalCodec, @unchecked Sendable {
  let manifest: UnsafeMutableRawPointer
  let index: Int32
  let id: String
  let version: String
  let flags: UInt32
  let choosesSize: Bool

  init(manifest: UnsafeMutableRawPointer, index: Int32) {
    self.manifest = manifest
    self.index = index
    id = String(cString: pxlw_manifest_id(manifest, index))
    version = String(cString: pxlw_manifest_version(manifest, index))
    flags = pxlw_manifest_flags(manifest, index)
    choosesSize = pxlw_manifest_chooses_size(manifest, index) != 0
  }

  var writesPremultiplied: Bool { flags & 0x1 != 0 }  // PXL_CODEC_PREMULTIPLIED
  var isProgressive: Bool { flags & 0x2 != 0 }        // PXL_CODEC_PROGRESSIVE
  var isScalable: Bool { flags & 0x4 != 0 }           // PXL_CODEC_SCALABLE
  var decodesFrames: Bool { false }

  func sniff(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    guard let base = bytes.baseAddress else { return false }
    return pxlw_manifest_sniff(manifest, index, base, bytes.count) != 0
  }

  private var absent: CodecFailure { CodecFailure(.unsupportedImage, "codec \(id) is only in its decode worker") }
  func readHeader(_ bytes: UnsafeBufferPointer<UInt8>, keepOrientation: Bool) -> Result<CodecHeader, CodecFailure> {
    .failure(absent)
  }
  func readICC(_ bytes: UnsafeBufferPointer<UInt8>, size: Int) -> [UInt8]? { nil }
  func chooseSize(_ bytes: UnsafeBufferPointer<UInt8>, keepOrientation: Bool, width: Int,
                  height: Int) -> (width: Int, height: Int)? { nil }
  func decode(_ bytes: UnsafeBufferPointer<UInt8>, into target: CodecTarget) -> CodecFailure? { absent }
  func decodeFrames(_ bytes: UnsafeBufferPointer<UInt8>, into target: CodecTarget,
                    frameDone: (Int) -> Bool) -> CodecFailure? { absent }
  func destroy() {}
}

private extension String {
  var trimmingSpaces: String {
    var text = Substring(self)
    while text.first == " " { text.removeFirst() }
    while text.last == " " { text.removeLast() }
    return String(text)
  }
}
