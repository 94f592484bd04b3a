// Animation players (pixload.h, "Animation players"): pxl_animation_load, _frame_at,
// _pause, _resume, _stats_get, _free over PixloadCore's AnimationPlayer.
import CPixload
import PixloadCore

private let animationStatsVersions = [end(\pxl_animation_stats.loops_played)]
private let animationFrameEnd = end(\pxl_animation_frame.ended)

@inline(__always) private func player(_ handle: OpaquePointer?) -> AnimationPlayer? {
  handle.map { Unmanaged<AnimationPlayer>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

@c @implementation public func pxl_animation_load(_ loaderHandle: OpaquePointer?, _ request: UnsafePointer<pxl_request>?,
                                                  _ queueHandle: OpaquePointer?, _ fn: pxl_animation_fn?,
                                                  _ userData: UnsafeMutableRawPointer?,
                                                  _ out: UnsafeMutablePointer<OpaquePointer?>?) -> pxl_status {
  guard let out else { return PXL_E_INVALID_ARGUMENT }
  out.pointee = nil
  guard let loader = loader(loaderHandle), let queue = queue(queueHandle), let fn,
        let parsed = parsedRequest(request, loader) else {
    return PXL_E_INVALID_ARGUMENT
  }
  do {
    let player = try AnimationPlayer(loader: loader, request: parsed, queue: queue,
                                     ringFrames: loader.configuration.animationRingFrames,
                                     ringBytes: loader.configuration.animationRingBytes) { player, event in
      var e = pxl_animation_event()
      e.struct_size = MemoryLayout<pxl_animation_event>.stride
      e.kind = event.kind.rawValue
      e.status = event.error.map { cStatus($0.status) } ?? PXL_OK
      e.index = Int32(clamping: event.index)
      e.due_ms = event.dueMs
      e.frame_count = Int32(clamping: event.frameCount)
      e.loop_count = Int32(clamping: event.loopCount)
      e.image = event.image.map { handle($0) }
      let message = event.error?.message
      withExtendedLifetime(event.image) {
        if let message {
          message.withCString { text in
            e.message = text
            fn(handle(player), &e, userData)
          }
        } else {
          fn(handle(player), &e, userData)
        }
      }
    }
    out.pointee = retainedHandle(player)
    return PXL_OK
  } catch {
    return cStatus(error.status)
  }
}

@c @implementation public func pxl_animation_frame_at(_ handle: OpaquePointer?, _ nowMs: Int64,
                                                      _ frame: UnsafeMutablePointer<pxl_animation_frame>?) -> OpaquePointer? {
  guard let player = player(handle), let (image, shown) = player.frame(at: nowMs) else { return nil }
  if let frame {
    var f = pxl_animation_frame()
    f.struct_size = MemoryLayout<pxl_animation_frame>.stride
    f.index = Int32(clamping: shown.index)
    f.duration_ms = Int32(clamping: shown.durationMs)
    f.due_ms = shown.dueMs
    f.next_due_ms = shown.nextDueMs
    f.skipped = Int32(clamping: shown.skipped)
    f.ended = shown.ended ? 1 : 0
    // The caller's struct_size, 0 taken as this header's sizeof; nothing written past it.
    if UnsafeRawPointer(frame).loadUnaligned(as: Int.self) == 0 {
      UnsafeMutableRawPointer(frame).storeBytes(of: MemoryLayout<pxl_animation_frame>.stride, as: Int.self)
    }
    _ = writeGrowableStruct(f, to: frame, minimumSize: animationFrameEnd)
  }
  return retainedHandle(image)
}

@c @implementation public func pxl_animation_pause(_ handle: OpaquePointer?) {
  player(handle)?.pause()
}

@c @implementation public func pxl_animation_resume(_ handle: OpaquePointer?, _ nowMs: Int64) {
  player(handle)?.resume(at: nowMs)
}

@c @implementation public func pxl_animation_stats_get(_ handle: OpaquePointer?,
                                                       _ stats: UnsafeMutablePointer<pxl_animation_stats>?) -> pxl_status {
  guard let player = player(handle), let stats else { return PXL_E_INVALID_ARGUMENT }
  let counted = player.statistics
  var s = pxl_animation_stats()
  s.struct_size = MemoryLayout<pxl_animation_stats>.stride
  s.frames_decoded = counted.framesDecoded
  s.frames_skipped = counted.framesSkipped
  s.frames_shown = counted.framesShown
  s.ring_bytes = counted.ringBytes
  s.peak_ring_bytes = counted.peakRingBytes
  s.loops_played = Int32(clamping: counted.loopsPlayed)
  return writeGrowableStruct(s, to: stats, minimumSize: animationStatsVersions[0]) ? PXL_OK : PXL_E_INVALID_ARGUMENT
}

@c @implementation public func pxl_animation_free(_ handle: OpaquePointer?) {
  free(handle, as: AnimationPlayer.self) { $0.close() }
}
