// What every file of the C API uses: handles (Unmanaged: passRetained in *_new, release
// in *_free, takeUnretainedValue elsewhere), statuses, and the structs that grow
// (pixload.h, "Structs that grow").
import CPixload
import PixloadCore

// MARK: - Handles

@inline(__always) func loader(_ handle: OpaquePointer?) -> ImageLoader? {
  handle.map { Unmanaged<ImageLoader>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

@inline(__always) func queue(_ handle: OpaquePointer?) -> CompletionQueue? {
  handle.map { Unmanaged<CompletionQueue>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

@inline(__always) func image(_ handle: OpaquePointer?) -> Image? {
  handle.map { Unmanaged<Image>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

@inline(__always) func handle(_ object: AnyObject) -> OpaquePointer {
  OpaquePointer(Unmanaged.passUnretained(object).toOpaque())
}

/// A handle that owns a reference: what *_new and pxl_lookup hand out.
@inline(__always) func retainedHandle(_ object: AnyObject) -> OpaquePointer {
  OpaquePointer(Unmanaged.passRetained(object).toOpaque())
}

/// The *_free pattern: shut the object down while the host's reference still keeps it
/// alive, then drop that reference. NULL is a no-op.
func free<T: AnyObject>(_ handle: OpaquePointer?, as type: T.Type, closing close: (T) -> Void) {
  guard let handle else { return }
  let unmanaged = Unmanaged<T>.fromOpaque(UnsafeRawPointer(handle))
  close(unmanaged.takeUnretainedValue())
  unmanaged.release()
}

@inline(__always) func cStatus(_ status: Status) -> pxl_status {
  pxl_status(rawValue: UInt32(status.rawValue))
}

// MARK: - Structs that grow

/// Reads a struct the caller passed in, whatever header it was built against (pixload.h,
/// "Structs that grow"): `declaredSize` from `minimumSize` (0.1.0's) up. `knownEnds` are
/// the ends of the last field of each released version of the struct, oldest first: only
/// whole versions are copied, so a 0.1.0 struct's tail padding is never read as a newer
/// field. Bytes past this library's struct must be zero. Fields not copied keep `defaults`.
/// Returns nil (PXL_E_INVALID_ARGUMENT) for a size out of range or a non-zero unknown tail.
func readGrowableStruct<T>(_ pointer: UnsafePointer<T>, defaults: T, knownEnds: [Int]) -> T? {
  let raw = UnsafeRawPointer(pointer)
  let declaredSize = raw.loadUnaligned(as: Int.self)
  guard let minimumSize = knownEnds.first, declaredSize >= minimumSize else { return nil }
  let librarySize = MemoryLayout<T>.stride
  if declaredSize > librarySize {
    guard declaredSize <= 1 << 16 else { return nil }  // not a struct_size: garbage
    // From the end of the last field this library knows: a newer field may sit in what
    // is tail padding here.
    for offset in knownEnds.last!..<declaredSize where raw.load(fromByteOffset: offset, as: UInt8.self) != 0 {
      return nil
    }
  }
  let copied = knownEnds.last { $0 <= declaredSize } ?? minimumSize
  var value = defaults
  withUnsafeMutableBytes(of: &value) { $0.baseAddress!.copyMemory(from: raw, byteCount: copied) }
  return value
}

/// An *_init_size function: the defaults into the caller's `size` bytes (from 0.1.0's size
/// up), a zeroed tail past this library's struct, struct_size = size.
func initGrowableStruct<T>(_ pointer: UnsafeMutablePointer<T>?, size: Int, defaults: T,
                                   knownEnds: [Int]) -> pxl_status {
  guard let pointer, let minimumSize = knownEnds.first, size >= minimumSize, size <= 1 << 16 else {
    return PXL_E_INVALID_ARGUMENT
  }
  let raw = UnsafeMutableRawPointer(pointer)
  // Up to the last field's end; padding and the unknown tail are zeroed, so the struct
  // passes the zero-tail check when it comes back.
  let filled = min(size, knownEnds.last!)
  withUnsafeBytes(of: defaults) { raw.copyMemory(from: $0.baseAddress!, byteCount: filled) }
  if size > filled { (raw + filled).initializeMemory(as: UInt8.self, repeating: 0, count: size - filled) }
  raw.storeBytes(of: size, as: Int.self)
  return PXL_OK
}

/// sizeof() of a struct in 0.1.0: its first version's end, rounded up to its alignment.
func sizeOf01<T>(_ type: T.Type, _ knownEnds: [Int]) -> Int {
  let alignment = MemoryLayout<T>.alignment
  return (knownEnds[0] + alignment - 1) / alignment * alignment
}

/// Fills a struct the library writes (stats): the caller's struct_size from `minimumSize`
/// up; the fields both know are copied, the rest of the caller's struct is zeroed, and
/// struct_size becomes the bytes filled.
func writeGrowableStruct<T>(_ value: T, to pointer: UnsafeMutablePointer<T>, minimumSize: Int) -> Bool {
  let raw = UnsafeMutableRawPointer(pointer)
  let declaredSize = raw.loadUnaligned(as: Int.self)
  guard declaredSize >= minimumSize, declaredSize <= 1 << 16 else { return false }
  let filled = min(declaredSize, MemoryLayout<T>.stride)
  withUnsafeBytes(of: value) { raw.copyMemory(from: $0.baseAddress!, byteCount: filled) }
  if declaredSize > filled { (raw + filled).initializeMemory(as: UInt8.self, repeating: 0, count: declaredSize - filled) }
  raw.storeBytes(of: filled, as: Int.self)
  return true
}

/// The end of a struct's field: a released version's size.
func end<T, F>(_ field: KeyPath<T, F>) -> Int {
  MemoryLayout<T>.offset(of: field)! + MemoryLayout<F>.size
}
