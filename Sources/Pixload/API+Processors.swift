// The C API of processors (pixload.h, "Processors"): a request's chain converted into
// PixloadCore's `ImageProcessor` values, and custom processors registered as
// `CustomProcessor`s that call the host's callback.
import CPixload
import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

/// The chain of a request; PXL_E_INVALID_ARGUMENT naming the step when one is wrong
/// whatever the image, which `log` also hears as a log line (pxl_load returns only the
/// status; a table logs a row's reason once while the row stays refused, `RowRefusals`).
func processorChain(_ steps: UnsafePointer<pxl_processor>?, count: Int, _ loader: ImageLoader,
                    log: (String) -> Void) throws(LoadError) -> [ImageProcessor] {
  func reject(_ message: String) -> LoadError {
    log("pixload: request: \(message)")
    return LoadError(.invalidArgument, "request: \(message)")
  }
  guard count > 0 else { return [] }
  guard let steps else { throw reject("processor_count is \(count) but processors is NULL") }
  guard count <= ImageProcessor.maxChainLength else {
    throw reject("a processor chain of \(count) steps exceeds the limit of \(ImageProcessor.maxChainLength)")
  }
  var chain: [ImageProcessor] = []
  for index in 0..<count {
    let step = steps[index]
    let border = step.border_width > 0 || step.border_width.isNaN || step.border_width < 0
      ? ImageProcessor.Border(width: step.border_width, color: .init(rgba: step.color)) : nil
    let processor: ImageProcessor
    switch step.kind {
    case Int32(PXL_PROCESS_CIRCLE.rawValue): processor = .circle(border: border)
    case Int32(PXL_PROCESS_ROUND.rawValue):
      processor = .roundedCorners(radii: .init(topLeft: step.radius_tl, topRight: step.radius_tr,
                                               bottomRight: step.radius_br, bottomLeft: step.radius_bl), border: border)
    case Int32(PXL_PROCESS_BLUR.rawValue): processor = .blur(sigma: step.sigma)
    case Int32(PXL_PROCESS_CROP.rawValue):
      processor = .crop(x: Int(step.x), y: Int(step.y), width: Int(step.width), height: Int(step.height))
    case Int32(PXL_PROCESS_ROTATE.rawValue):
      guard [90, 180, 270].contains(step.degrees) else {
        throw reject("processor \(index) (rotate): \(step.degrees) degrees is not 90, 180 or 270")
      }
      processor = .rotate(quarterTurns: Int(step.degrees) / 90)
    case Int32(PXL_PROCESS_FLIP.rawValue):
      guard step.vertical == 0 || step.vertical == 1 else {
        throw reject("processor \(index) (flip): vertical is \(step.vertical), not 0 or 1")
      }
      processor = .flip(vertical: step.vertical == 1)
    case Int32(PXL_PROCESS_GRAY.rawValue): processor = .grayscale
    case Int32(PXL_PROCESS_TINT.rawValue): processor = .tint(.init(rgba: step.color))
    case Int32(PXL_PROCESS_CUSTOM.rawValue):
      guard let id = step.id else { throw reject("processor \(index) (custom): id is NULL") }
      let name = String(cString: id)
      guard let custom = loader.customProcessors.processor(name) else {
        throw reject("processor \(index) (custom): no processor '\(name)' is registered")
      }
      processor = .custom(custom)
    default: throw reject("processor \(index): unknown kind \(step.kind)")
    }
    chain.append(processor)
  }
  if let error = ImageProcessor.validate(chain) { throw reject(error.message) }
  return chain
}

/// What pxl_processor_frame.internal points to during a callback.
private final class FrameContext {
  let frame: ProcessingFrame
  init(_ frame: ProcessingFrame) { self.frame = frame }
}

@c @implementation public func pxl_processor_frame_resize(_ frame: UnsafeMutablePointer<pxl_processor_frame>?,
                                                          _ width: Int32, _ height: Int32) -> UnsafeMutablePointer<UInt8>? {
  guard let frame, let opaque = frame.pointee.internal else { return nil }
  let context = Unmanaged<FrameContext>.fromOpaque(opaque).takeUnretainedValue()
  guard let buffer = context.frame.makeOutput(width: Int(width), height: Int(height)) else { return nil }
  frame.pointee.pixels = buffer
  frame.pointee.width = width
  frame.pointee.height = height
  frame.pointee.stride = width * 4
  return buffer
}

@c @implementation public func pxl_loader_add_processor(_ loaderHandle: OpaquePointer?, _ id: UnsafePointer<CChar>?,
                                                        _ version: UInt32, _ process: pxl_processor_callback?,
                                                        _ userData: UnsafeMutableRawPointer?,
                                                        _ destroy: pxl_processor_destroy_fn?)
  -> pxl_status {
  // No failure calls destroy (pixload.h, "Extensions"): 0.5.0 promised it, and a 0.5.0
  // host frees user_data itself after a refusal, so a call here would be a double free. A
  // closed loader abandons the refused CustomProcessor (ProcessorRegistry.add) for the same reason.
  guard let loader = loader(loaderHandle), let id, let process else { return PXL_E_INVALID_ARGUMENT }
  let name = String(cString: id)
  guard !name.isEmpty, name.utf8.count <= 256 else { return PXL_E_INVALID_ARGUMENT }
  // The user data travels as an integer: the callback may run on any decoder thread.
  let data = UInt(bitPattern: userData)
  let custom = CustomProcessor(id: name, version: version, process: { frame in
    let context = FrameContext(frame)
    let input = frame.pixels
    var c = pxl_processor_frame()
    c.struct_size = MemoryLayout<pxl_processor_frame>.stride
    c.pixels = input
    c.width = Int32(frame.width)
    c.height = Int32(frame.height)
    c.stride = Int32(frame.stride)
    c.frame_index = Int32(frame.frameIndex)
    c.frame_count = Int32(frame.frameCount)
    c.input = UnsafePointer(input)
    c.input_width = Int32(frame.width)
    c.input_height = Int32(frame.height)
    c.cancelled = UnsafePointer(frame.cancel.pointer)
    var message = [CChar](repeating: 0, count: 256)
    let status = withExtendedLifetime(context) { () -> pxl_status in
      c.internal = Unmanaged.passUnretained(context).toOpaque()
      return process(&c, &message, message.count, UnsafeMutableRawPointer(bitPattern: data))
    }
    guard status != PXL_OK else { return nil }
    message[message.count - 1] = 0
    let text = String(cString: message)
    let known = hostFailureStatus(status)
    return LoadError(known, text.isEmpty ? "custom processor '\(name)' failed: \(known.description)" : text)
  }, onRetired: destroy.map { destroy in { destroy(UnsafeMutableRawPointer(bitPattern: data)) } })
  guard loader.customProcessors.add(custom) else { return PXL_E_LOADER_CLOSED }
  return PXL_OK
}

@c @implementation public func pxl_loader_remove_processor(_ loaderHandle: OpaquePointer?,
                                                           _ id: UnsafePointer<CChar>?) -> pxl_status {
  guard let loader = loader(loaderHandle), let id else { return PXL_E_INVALID_ARGUMENT }
  return loader.customProcessors.remove(String(cString: id)) ? PXL_OK : PXL_E_NOT_FOUND
}
