// The C API of the request hook (pixload.h, "Request hook"): pxl_config.request_hook as a
// core `RequestHook`, and pxl_hook_call handles as `HookCall`s. A call is in the host
// handle table (API+Extensions.swift) from when the hook receives it until
// pxl_hook_answer or pxl_hook_fail takes it out: a second answer finds nothing and is
// refused.
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
    let handle = insertHostObject(call)
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

@c @implementation public func pxl_hook_answer(_ handle: OpaquePointer?, _ headers: UnsafePointer<UnsafePointer<CChar>?>?,
                                               _ count: Int) -> pxl_status {
  guard let call = takeHostObject(handle, as: HookCall.self) else { return PXL_E_INVALID_ARGUMENT }
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
  guard let call = takeHostObject(handle, as: HookCall.self) else { return PXL_E_INVALID_ARGUMENT }
  let core = hostFailureStatus(status)
  return call.fail(LoadError(core, message.map { String(cString: $0) } ?? core.description)) ? PXL_OK : PXL_E_CANCELLED
}
