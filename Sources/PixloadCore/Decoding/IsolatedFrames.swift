import CCodecs
import CWorker
#if canImport(Glibc)
import Glibc
#endif

/// An animation's frames decoded in a worker (worker/pxl_worker_protocol.h: FRAMES_OPEN,
/// FRAME_NEXT, FRAMES_CLOSE): a codec module's codec (`IsolatedCodec`), or under
/// PXL_ISOLATION_ALL a built-in format's frame reader (`IsolatedBuiltIns`). The host runs
/// no decoder of the bytes: the worker composites each frame into a canvas memfd the host
/// maps read-only, and the host copies it out (`canvas`) before it asks for the next.
///
/// Holds one worker of `pool` for itself from `open` until `close` (or deinit): an
/// animation player keeps it while its decoder's state lives (released with its ring, at
/// the end, or when the player is freed). Each conversation has the pool's time limit
/// (per frame). A worker that dies or fails is not given back for reuse: the pool ends
/// it and the next request gets a fresh one.
final class IsolatedFrames: @unchecked Sendable {
  let header: pxlw_header
  /// Frame 0's duration as the worker read it from the container (-1: unknown).
  let firstDurationMs: Int32
  /// The ICC profile the worker wrote after the canvas (a module's codec), or nil.
  let icc: [UInt8]?
  /// The last frame, straight from the worker's canvas: width * height * 4 bytes.
  let canvas: UnsafeMutablePointer<UInt8>
  var width: Int { Int(header.width) }
  var height: Int { Int(header.height) }

  private let pool: WorkerPool
  private var worker: WorkerPool.Idle?
  private let mapping: UnsafeMutableRawPointer
  private var usable = true
  /// The last frame's data ended early (GIF: pxl_codec_frame.incomplete).
  private(set) var lastIncomplete = false

  private init(pool: WorkerPool, worker: WorkerPool.Idle, mapping: UnsafeMutableRawPointer, header: pxlw_header,
               firstDurationMs: Int32, canvas: UnsafeMutablePointer<UInt8>) {
    self.pool = pool
    self.worker = worker
    self.mapping = mapping
    self.header = header
    self.firstDurationMs = firstDurationMs
    self.canvas = canvas
    if header.icc_size > 0, let icc = pxlw_result_icc(mapping) {
      self.icc = Array(UnsafeBufferPointer(start: icc, count: Int(header.icc_size)))
    } else {
      icc = nil
    }
  }

  /// Opens the frames of `bytes` in a worker taken from `pool`: `codec` (a module's id) or
  /// `format` (a built-in format's reader).
  static func open(_ bytes: UnsafeBufferPointer<UInt8>, pool: WorkerPool, codec: String?, format: String?,
                   keepOrientation: Bool, maxPixels: UInt64) -> Result<IsolatedFrames, CodecFailure> {
    var taken: WorkerPool.Idle
    switch pool.take() {
    case .failure(let failure): return .failure(failure)
    case .success(let worker): taken = worker
    }
    taken.decodes += 1
    var status: Int32 = 0, ended: Int32 = 0, first: Int32 = -1
    var header = pxlw_header()
    var message = [CChar](repeating: 0, count: 512)
    let result = pxlw_frames_open(taken.worker, bytes.baseAddress, bytes.count, codec, format,
                                  keepOrientation ? 1 : 0, maxPixels, pool.timeout, &status, &message, message.count,
                                  &ended, &header, &first)
    let failed = { (failure: CodecFailure) -> Result<IsolatedFrames, CodecFailure> in
      pxlw_result_free(result)
      pool.give(back: taken, usable: ended == 0 && status != Status.decoderFailed.rawValue)
      return .failure(failure)
    }
    guard let result else { return failed(CodecFailure(.noMemory, "out of memory")) }
    guard status == 0 else {
      let text = String(cString: message)
      let known = Status(rawValue: status) ?? .corruptImage
      return failed(CodecFailure(known, text.isEmpty ? known.description : text))
    }
    let count = Int(header.width) * Int(header.height) * 4
    guard let canvas = malloc(max(1, count))?.assumingMemoryBound(to: UInt8.self) else {
      pxlw_frames_close(taken.worker)
      return failed(CodecFailure(.noMemory, "out of memory for a \(header.width)x\(header.height) canvas"))
    }
    return .success(IsolatedFrames(pool: pool, worker: taken, mapping: result, header: header, firstDurationMs: first,
                                   canvas: canvas))
  }

  /// The next frame into `canvas`: its index and duration, or nil after the last frame.
  func next() -> Result<(index: Int, durationMs: Int)?, CodecFailure> {
    guard let worker else { return .failure(CodecFailure(.decoderFailed, "the animation's decoder was closed")) }
    var status: Int32 = 0, ended: Int32 = 0, end: Int32 = 0, index: Int32 = 0, duration: Int32 = 0, incomplete: Int32 = 0
    var message = [CChar](repeating: 0, count: 512)
    pxlw_frame_next(worker.worker, pool.timeout, &status, &message, message.count, &ended, &end, &index, &duration,
                    &incomplete)
    lastIncomplete = incomplete != 0
    guard status == 0 else {
      usable = ended == 0 && status != Status.decoderFailed.rawValue
      let text = String(cString: message)
      let known = Status(rawValue: status) ?? .corruptImage
      close()
      return .failure(CodecFailure(known, text.isEmpty ? known.description : text))
    }
    if end != 0 { return .success(nil) }
    guard let pixels = pxlw_result_pixels(mapping) else {
      return .failure(CodecFailure(.decoderFailed, "the canvas is not mapped"))
    }
    canvas.update(from: pixels, count: width * height * 4)
    return .success((Int(index), Int(duration)))
  }

  /// Ends the worker's animation and gives the worker back (ended instead when it failed).
  func close() {
    guard let worker else { return }
    self.worker = nil
    pxlw_frames_close(worker.worker)
    pool.give(back: worker, usable: usable && pxlw_alive(worker.worker) != 0)
  }

  deinit {
    close()
    pxlw_result_free(mapping)
    free(canvas)
  }
}
