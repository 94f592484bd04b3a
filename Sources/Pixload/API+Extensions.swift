// What every extension shares (pixload.h, "Extensions"): the host handle table that
// names hook calls and fetches, and the status a host's failure counts as.
import CPixload
import PixloadCore

/// The handles of hook calls and fetches (pxl_hook_call, pxl_fetch) are numbers in this
/// table, not object addresses: pixload.h lets a host's race answer a call twice or write
/// to a finished fetch, and that must be refused (PXL_E_INVALID_ARGUMENT), not reach a freed
/// object. One table for the process, not one per loader: a host may answer a call or
/// finish a fetch after its loader was freed (PXL_E_CANCELLED).
private let hostHandles = HandleTable()

/// A new handle for `object`, named until `takeHostObject` takes it.
func insertHostObject(_ object: AnyObject) -> OpaquePointer {
  OpaquePointer(bitPattern: UInt(hostHandles.insert(object)))!
}

/// The object `handle` names: nil for NULL, a handle already taken, or another kind's.
func hostObject<T: AnyObject>(_ handle: OpaquePointer?, as type: T.Type) -> T? {
  hostHandles.object(UInt64(UInt(bitPattern: handle)), as: type)
}

/// Takes the object `handle` names out of the table, as `hostObject` finds it: of racing
/// calls with one handle, only the first gets it.
func takeHostObject<T: AnyObject>(_ handle: OpaquePointer?, as type: T.Type) -> T? {
  hostHandles.remove(UInt64(UInt(bitPattern: handle)), as: type)
}

/// The core's status for a host's failure status: an unknown number, or PXL_OK, is `.io`.
func hostFailureStatus(_ status: pxl_status) -> Status {
  Status(rawValue: Int32(bitPattern: status.rawValue)).flatMap { $0 == .ok ? nil : $0 } ?? .io
}
