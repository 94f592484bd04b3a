// The C API of the request hook (pixload.h, "Request hook"): pxl_config.request_hook as a
// core `RequestHook`, and pxl_hook_call handles as `HookCall`s. A call is retained once
// for the host when the hook receives it, and released by pxl_hook_answer or pxl_hook_fail.
import CPixload
import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

/// A host's pxl_request_hook_fn. user_data travels as a bit pattern: the host promised it
/// is usable from the network thread.
final class CRequestHook: RequestHook, @unchecked Sendable {
  let function: pxl_request_hook_fn
  let userData: UInt

  init(_ function: pxl_request_hook_fn, userData: UnsafeMutableRawPointer?) {
    self.function = function
    self.userData = UInt(bitPattern: userData)
  }

  func call(_ call: HookCall) {
    let handle = retainedHandle(call)
    withCStrings(call.headers) { lines in
      call.url.withCString {
        function($0, lines.baseAddress, call.headers.count, Int32(clamping: call.status), handle,
                 UnsafeMutableRawPointer(bitPattern: userData))
      }
    }
  }
}

/// `strings` as a borrowed array of C strings for the call.
private func withCStrings<R>(_ strings: [String], _ body: (UnsafeBufferPointer<UnsafePointer<CChar>?>) -> R) -> R {
  let copies = strings.map { strdup($0) }
  defer { copies.forEach { free($0) } }
  return copies.map { UnsafePointer($0) }.withUnsafeBufferPointer(body)
}

/// The core's status for a host's failure status: an unknown number, or PXL_OK, is `.io`.
func hostFailureStatus(_ status: pxl_status) -> Status {
  Status(rawValue: Int32(bitPattern: status.rawValue)).flatMap { $0 == .ok ? nil : $0 } ?? .io
}

/// Takes the host's reference to a call: it is released when this returns.
private func takeCall(_ handle: OpaquePointer?) -> HookCall? {
  guard let handle else { return nil }
  return Unmanaged<HookCall>.fromOpaque(UnsafeRawPointer(handle)).takeRetainedValue()
}

@c @implementation public func pxl_hook_answer(_ handle: OpaquePointer?, _ headers: UnsafePointer<UnsafePointer<CChar>?>?,
                                               _ count: Int) -> pxl_status {
  guard let call = takeCall(handle) else { return PXL_E_INVALID_ARGUMENT }
  var lines: [String] = []
  var valid = (headers != nil || count == 0) && count <= 256
  if valid, let headers {
    for index in 0..<count {
      guard let line = headers[index].map({ String(cString: $0) }), isValidHeaderLine(line) else {
        valid = false
        break
      }
      lines.append(line)
    }
  }
  guard valid else {
    // Never echo the lines: they hold the secret.
    call.fail(LoadError(.invalidArgument, "the request hook answered with an invalid header line"))
    return PXL_E_INVALID_ARGUMENT
  }
  return call.answer(headers: lines) ? PXL_OK : PXL_E_CANCELLED
}

@c @implementation public func pxl_hook_fail(_ handle: OpaquePointer?, _ status: pxl_status,
                                             _ message: UnsafePointer<CChar>?) -> pxl_status {
  guard let call = takeCall(handle) else { return PXL_E_INVALID_ARGUMENT }
  let core = hostFailureStatus(status)
  return call.fail(LoadError(core, message.map { String(cString: $0) } ?? core.description)) ? PXL_OK : PXL_E_CANCELLED
}
