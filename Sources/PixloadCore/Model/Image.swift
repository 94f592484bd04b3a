#if canImport(Glibc)
import Glibc
#endif

/// Immutable decoded pixels. Reference-counted by Swift (and so by the C API's
/// retain/release): the memory cache and the host can share one image, and dropping it
/// from the cache never frees pixels someone still holds.
public final class Image: @unchecked Sendable {
  public let width: Int
  public let height: Int
  /// Bytes per row.
  public let stride: Int
  public let format: PixelFormat
  /// Size of the source after orientation, before scaling.
  public let originalWidth: Int
  public let originalHeight: Int
  /// Owned: allocated with malloc, freed in deinit.
  public let pixels: UnsafeMutableRawPointer
  /// What the decode recovered from without failing, for the log: a colour profile that
  /// could not be applied (the decoded values were kept). nil for none.
  public let warning: String?

  public var byteCount: Int { stride * height }

  /// Takes ownership of `pixels`, which must come from malloc.
  init(width: Int, height: Int, stride: Int, format: PixelFormat, originalWidth: Int,
       originalHeight: Int, takingPixels pixels: UnsafeMutableRawPointer, warning: String? = nil) {
    self.width = width
    self.height = height
    self.stride = stride
    self.format = format
    self.originalWidth = originalWidth
    self.originalHeight = originalHeight
    self.pixels = pixels
    self.warning = warning
  }

  deinit { free(pixels) }
}

/// Where a delivered image came from.
public enum ImageSource: Int32, Sendable {
  case none = 0
  case memory = 1
  case network = 2
  case disk = 3
  /// The disk cache, after the server confirmed it unchanged (HTTP 304).
  case revalidated = 4
}

/// What a request ends with: exactly one of these reaches its completion queue.
public enum Outcome: Sendable {
  /// The image, where it came from, and the HTTP status of its download (0 if none).
  case success(Image, ImageSource, httpStatus: Int)
  case failure(LoadError)

  var isCancelled: Bool {
    if case .failure(let error) = self { return error.status == .cancelled }
    return false
  }
}
