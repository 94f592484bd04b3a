// The C API of completion queues (pixload.h, "Completion queues"): pxl_queue handles
// over the core's `CompletionQueue`.
import CPixload
import PixloadCore

// MARK: - Queues

@c @implementation public func pxl_queue_new(_ out: UnsafeMutablePointer<OpaquePointer?>?) -> pxl_status {
  guard let out else { return PXL_E_INVALID_ARGUMENT }
  out.pointee = nil
  do {
    let created = try CompletionQueue()
    out.pointee = retainedHandle(created)
    return PXL_OK
  } catch {
    return cStatus(error.status)
  }
}

@c @implementation public func pxl_queue_free(_ handle: OpaquePointer?) {
  free(handle, as: CompletionQueue.self) { $0.close() }
}

@c @implementation public func pxl_queue_fd(_ handle: OpaquePointer?) -> Int32 {
  queue(handle)?.fileDescriptor ?? -1
}

@c @implementation public func pxl_queue_dispatch(_ handle: OpaquePointer?, _ max: Int32) -> Int32 {
  Int32(queue(handle)?.dispatch(max: Int(max)) ?? 0)
}

@c @implementation public func pxl_queue_wait(_ handle: OpaquePointer?, _ timeoutMilliseconds: Int32) -> Int32 {
  Int32(clamping: queue(handle)?.wait(timeoutMilliseconds: timeoutMilliseconds) ?? 0)
}

@c @implementation public func pxl_queue_wakeup(_ handle: OpaquePointer?) {
  queue(handle)?.wakeup()
}

@c @implementation public func pxl_queue_pending(_ handle: OpaquePointer?) -> Int32 {
  Int32(clamping: queue(handle)?.pendingCount ?? 0)
}
