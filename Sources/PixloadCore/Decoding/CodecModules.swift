import CSupport
#if canImport(Glibc)
import Glibc
#endif

/// Codec modules (pixload.h, "Codec modules"): shared objects named
/// libpixload-<name>.so, each exporting pxl_codec_module_register, which registers its
/// codecs through the public pxl_loader_add_codec like any host. Found in
/// PIXLOAD_CODEC_PATH (read with secure_getenv) or in pixload/codecs beside the library;
/// opened once per process (RTLD_NOW | RTLD_LOCAL) and never closed.
public enum CodecModules {
  /// An opened module: its name ("heif") and its register function.
  public struct Module: @unchecked Sendable {
    public let name: String
    public let path: String
    public let register: UnsafeMutableRawPointer
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
  public static func open(selection: String?) throws(LoadError) -> (modules: [Module], skipped: [String]) {
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
          switch openModule(path, name: name) {
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
        switch openModule(directory + "/" + file, name: name) {
        case .success(let module): modules.append(module)
        case .failure(let error): skipped.append("codec module \(directory)/\(file) skipped: \(error.message)")
        }
      }
    }
    return (modules, skipped)
  }

  private static let lock = Lock()
  private static nonisolated(unsafe) var opened: [String: Module] = [:]

  private static func openModule(_ path: String, name: String) -> Result<Module, LoadError> {
    lock.withLock {
      if let module = opened[path] { return .success(module) }
      guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
        return .failure(LoadError(.unsupported, dlerror().map { String(cString: $0) } ?? "dlopen failed"))
      }
      guard let symbol = dlsym(handle, "pxl_codec_module_register") else {
        dlclose(handle)
        return .failure(LoadError(.unsupported, "\(path) has no pxl_codec_module_register"))
      }
      let module = Module(name: name, path: path, register: symbol)
      opened[path] = module
      return .success(module)
    }
  }
}

private extension String {
  var trimmingSpaces: String {
    var text = Substring(self)
    while text.first == " " { text.removeFirst() }
    while text.last == " " { text.removeLast() }
    return String(text)
  }
}
