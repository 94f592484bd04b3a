// pxl_config's trust store (ca_file, ca_path), checked when the loader is made: a path
// that cannot be used fails pxl_loader_new, instead of every https load later.
import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

/// Why the configured CA file or directory cannot be used (naming it), nil when both can
/// (or none is configured): the file must open for reading, the directory must be one
/// that can be listed.
func unreadableTrustStore(_ network: EngineConfiguration) -> String? {
  if let file = network.caFile {
    guard let handle = fopen(file, "r") else {
      return "ca_file '\(file)' cannot be read: \(String(cString: strerror(errno)))"
    }
    defer { fclose(handle) }
    var status = stat()
    if fstat(fileno(handle), &status) != 0 || status.st_mode & S_IFMT == S_IFDIR {
      return "ca_file '\(file)' is a directory, not a PEM file (a directory goes in ca_path)"
    }
  }
  if let path = network.caPath {
    guard let directory = opendir(path) else {
      return "ca_path '\(path)' cannot be read as a directory: \(String(cString: strerror(errno)))"
    }
    closedir(directory)
  }
  return nil
}
