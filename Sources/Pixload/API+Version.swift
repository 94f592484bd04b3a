// The version and status strings: pxl_version, pxl_version_num, pxl_status_string.
import CPixload
import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

// MARK: - Version and status

/// The header is the one source of the version: these come from its PXL_VERSION_* macros.
private let versionCString: UnsafePointer<CChar> = UnsafePointer(strdup(PXL_VERSION_STRING)!)
let versionUserAgent = "pixload/" + PXL_VERSION_STRING

@c @implementation public func pxl_version() -> UnsafePointer<CChar>? {
  versionCString
}

@c @implementation public func pxl_version_num() -> UInt32 {
  UInt32(PXL_VERSION_MAJOR << 16 | PXL_VERSION_MINOR << 8 | PXL_VERSION_PATCH)
}

/// Status.description as C strings with static storage (made once, never freed), indexed
/// by the status number.
private let statusCStrings: [UnsafePointer<CChar>] = Status.allCases.sorted { $0.rawValue < $1.rawValue }
  .map { UnsafePointer(strdup($0.description)!) }

@c @implementation public func pxl_status_string(_ status: pxl_status) -> UnsafePointer<CChar>? {
  let index = Int(status.rawValue)
  if index < statusCStrings.count, Status(rawValue: Int32(index)) != nil { return statusCStrings[index] }
  return UnsafeRawPointer(("unknown status" as StaticString).utf8Start).assumingMemoryBound(to: CChar.self)
}
