#if canImport(Glibc)
import Glibc
#endif

/// The memory an `Image`'s pixels live in: a malloc'd buffer, or a mapping of an isolated
/// decode's sealed pixel memfd (pixload.h, "Isolation"), which becomes the image's pixels
/// instead of being copied out of it. The decode stage's buffers pass through the same
/// steps either way; what frees one (`release`) asks here which it is: munmap for a mapping,
/// free for the rest.
///
/// A mapping is private (MAP_PRIVATE, copy-on-write: `IsolatedCodec.mapPixels`): a step
/// that writes in place copies only the pages it touches, and never reaches the memfd. But
/// the memfd's pages stay while the mapping lives, so a step that writes every byte
/// (a colour conversion, premultiplying an image with alpha) would hold the image twice:
/// those steps call `owned` first and work on a malloc'd copy, as they did before.
enum PixelMemory {
  /// Pixels below this many bytes are copied, not mapped: a copy costs little there, and the
  /// memory cache's images stay within a few thousand mappings (vm.max_map_count).
  static let minimumMapped = 256 << 10

  private static let lock = Lock()
  /// Each mapping's address and its length in bytes (the pixels, then the ICC profile).
  private nonisolated(unsafe) static var mappings: [UInt: Int] = [:]

  /// Takes `base` (a mapping of `length` bytes) as pixels that `release` unmaps.
  static func adopt(_ base: UnsafeMutableRawPointer, length: Int) {
    lock.withLock { mappings[UInt(bitPattern: base)] = length }
  }

  /// The length of the mapping `pixels` starts, or nil for a malloc'd buffer.
  static func mappedLength(_ pixels: UnsafeRawPointer?) -> Int? {
    guard let pixels else { return nil }
    return lock.withLock { mappings[UInt(bitPattern: pixels)] }
  }

  /// Frees a buffer of pixels, whichever memory it is in (free(nil) does nothing, as here).
  static func release(_ pixels: UnsafeMutableRawPointer?) {
    guard let pixels else { return }
    if let length = lock.withLock({ mappings.removeValue(forKey: UInt(bitPattern: pixels)) }) {
      munmap(pixels, length)
    } else {
      free(pixels)
    }
  }

  /// `pixels` itself when malloc'd; for a mapping, a malloc'd copy of its first `count`
  /// bytes (the mapping released), for a step about to write every byte. Nil when out of
  /// memory (`pixels` kept).
  static func owned(_ pixels: UnsafeMutablePointer<UInt8>, count: Int) -> UnsafeMutablePointer<UInt8>? {
    guard mappedLength(pixels) != nil else { return pixels }
    guard let copy = malloc(max(count, 1))?.assumingMemoryBound(to: UInt8.self) else { return nil }
    copy.update(from: pixels, count: count)
    release(pixels)
    return copy
  }
}
