// The C API of images (pixload.h, "Images"): pxl_image handles over the core's `Image`,
// and the bytes per pixel of a pxl_format.
import CPixload
import PixloadCore

// MARK: - Images

@c @implementation public func pxl_format_bytes_per_pixel(_ format: pxl_format) -> Int32 {
  guard let format = PixelFormat(rawValue: Int32(bitPattern: format.rawValue)) else { return 0 }
  return Int32(format.bytesPerPixel)
}

@c @implementation public func pxl_image_retain(_ handle: OpaquePointer?) -> OpaquePointer? {
  guard let handle else { return nil }
  _ = Unmanaged<Image>.fromOpaque(UnsafeRawPointer(handle)).retain()
  return handle
}

@c @implementation public func pxl_image_release(_ handle: OpaquePointer?) {
  guard let handle else { return }
  Unmanaged<Image>.fromOpaque(UnsafeRawPointer(handle)).release()
}

@c @implementation public func pxl_image_width(_ handle: OpaquePointer?) -> Int32 {
  Int32(image(handle)?.width ?? 0)
}

@c @implementation public func pxl_image_height(_ handle: OpaquePointer?) -> Int32 {
  Int32(image(handle)?.height ?? 0)
}

@c @implementation public func pxl_image_stride(_ handle: OpaquePointer?) -> Int32 {
  Int32(image(handle)?.stride ?? 0)
}

@c @implementation public func pxl_image_format(_ handle: OpaquePointer?) -> pxl_format {
  pxl_format(rawValue: UInt32(image(handle)?.format.rawValue ?? 0))
}

@c @implementation public func pxl_image_pixels(_ handle: OpaquePointer?) -> UnsafePointer<UInt8>? {
  guard let image = image(handle) else { return nil }
  return UnsafePointer(image.pixels.assumingMemoryBound(to: UInt8.self))
}

@c @implementation public func pxl_image_original_width(_ handle: OpaquePointer?) -> Int32 {
  Int32(image(handle)?.originalWidth ?? 0)
}

@c @implementation public func pxl_image_original_height(_ handle: OpaquePointer?) -> Int32 {
  Int32(image(handle)?.originalHeight ?? 0)
}

@c @implementation public func pxl_image_byte_count(_ handle: OpaquePointer?) -> Int {
  image(handle)?.byteCount ?? 0
}

@c @implementation public func pxl_image_frame_count(_ handle: OpaquePointer?) -> Int32 {
  Int32(image(handle)?.frameCount ?? 0)
}

@c @implementation public func pxl_image_source_frame_count(_ handle: OpaquePointer?) -> Int32 {
  Int32(image(handle)?.sourceFrameCount ?? 0)
}

@c @implementation public func pxl_image_loop_count(_ handle: OpaquePointer?) -> Int32 {
  Int32(clamping: image(handle)?.loopCount ?? 0)
}

@c @implementation public func pxl_image_incomplete(_ handle: OpaquePointer?) -> Int32 {
  image(handle)?.isIncomplete == true ? 1 : 0
}

@c @implementation public func pxl_image_get_info(_ handle: OpaquePointer?,
                                                  _ info: UnsafeMutablePointer<pxl_image_info>?) -> pxl_status {
  guard let image = image(handle), let info else { return PXL_E_INVALID_ARGUMENT }
  var c = pxl_image_info()
  c.struct_size = MemoryLayout<pxl_image_info>.stride
  c.width = Int32(image.width)
  c.height = Int32(image.height)
  c.stride = Int32(image.stride)
  c.format = Int32(image.format.rawValue)
  c.pixels = UnsafePointer(image.pixels.assumingMemoryBound(to: UInt8.self))
  c.original_width = Int32(image.originalWidth)
  c.original_height = Int32(image.originalHeight)
  c.frame_count = Int32(image.frameCount)
  c.source_frame_count = Int32(image.sourceFrameCount)
  c.loop_count = Int32(clamping: image.loopCount)
  c.incomplete = image.isIncomplete ? 1 : 0
  let size = MemoryLayout<pxl_image_info>.stride
  return writeGrowableStruct(c, to: info, minimumSize: size) ? PXL_OK : PXL_E_INVALID_ARGUMENT
}

@c @implementation public func pxl_image_frame_duration_ms(_ handle: OpaquePointer?, _ index: Int32) -> Int32 {
  guard let image = image(handle), index >= 0, Int(index) < image.frameCount else { return -1 }
  return Int32(clamping: image.frameDurations[Int(index)])
}

@c @implementation public func pxl_image_frame_pixels(_ handle: OpaquePointer?, _ index: Int32) -> UnsafePointer<UInt8>? {
  guard let image = image(handle), let pixels = image.framePixels(Int(index)) else { return nil }
  return UnsafePointer(pixels.assumingMemoryBound(to: UInt8.self))
}
