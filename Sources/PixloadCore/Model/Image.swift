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
  /// Owned, released in deinit: allocated with malloc, or (frame 0 of an isolated decode's
  /// still) a private mapping of the worker's sealed pixel memfd (`PixelMemory`), the same
  /// bytes without a copy; valid, unchanged, until the image's last release either way.
  public let pixels: UnsafeMutableRawPointer
  /// What the decode recovered from without failing, for the log: a colour profile that
  /// could not be applied (the decoded values were kept). nil for none.
  public let warning: String?

  public var byteCount: Int { stride * height }

  /// An animation's frames after the first (`pixels` is frame 0), each `byteCount` bytes
  /// in the same size, stride and format; empty for a still image. Owned like `pixels`.
  public let laterFrames: [UnsafeMutableRawPointer]
  /// Each frame's duration in milliseconds as the file gives it (frame 0 first); [0] for a still.
  public let frameDurations: [Int]
  /// How often the animation plays: 0 = forever (also for a still image).
  public let loopCount: Int
  /// The frames of the source (1 for a still image): more than `frameCount` when only
  /// the first frame was asked for, or when the animation was over `Animation.maxBytes`
  /// and only its first frame was kept. Set by the decoder before the image is shared.
  public internal(set) var sourceFrameCount = 1
  /// The source's data ended before its last pixel and the decoder filled in the rest
  /// (JPEG's gray blocks, GIF's transparent rows): pixload.h, "Images whose data ended
  /// early". Never stored as a disk variant. Set by the decoder before the image is shared.
  public internal(set) var isIncomplete = false
  /// Which decoder made the pixels, for the disk variant entry that keeps them:
  /// `CodecSignature.Codec.stamp` of the registered codec that decoded them, 0 for the built-in
  /// decoders. Set by the decoder before the image is shared.
  public internal(set) var decoderStamp: UInt32 = 0
  /// How often the source animation plays (as `loopCount`), also when only its first
  /// frame was decoded. Set by the decoder before the image is shared.
  public internal(set) var sourceLoopCount = 0
  /// The encoded bytes the image was decoded from, for a variant that keeps them
  /// (`ImageVariant.keepsSource`: an animation player decodes its later frames from them;
  /// an Array, so every player of the source shares one copy). nil otherwise.
  public internal(set) var encodedSource: [UInt8]?

  public var frameCount: Int { 1 + laterFrames.count }
  /// Bytes of every frame: what the image costs in the memory cache.
  public var totalByteCount: Int { byteCount * frameCount }
  /// The bytes of the memfd mapping `pixels` lives in (its pixels, the ICC profile after
  /// them, rounded up to whole pages), 0 for malloc'd pixels.
  public let mappedByteCount: Int
  /// What the image costs in the memory cache: its frames (a mapping counted whole) and the
  /// encoded bytes it keeps.
  public var cachedByteCount: Int {
    totalByteCount + max(0, mappedByteCount - byteCount) + (encodedSource?.count ?? 0)
  }

  /// Frame `index`'s pixels (0 is `pixels`), nil when out of range.
  public func framePixels(_ index: Int) -> UnsafeMutableRawPointer? {
    if index == 0 { return pixels }
    return index > 0 && index < frameCount ? laterFrames[index - 1] : nil
  }

  /// Takes ownership of `pixels` and `laterFrames`, which must come from malloc (`pixels`
  /// may be a mapping `PixelMemory` adopted).
  init(width: Int, height: Int, stride: Int, format: PixelFormat, originalWidth: Int,
       originalHeight: Int, takingPixels pixels: UnsafeMutableRawPointer, warning: String? = nil,
       laterFrames: [UnsafeMutableRawPointer] = [], frameDurations: [Int] = [0], loopCount: Int = 0) {
    self.width = width
    self.height = height
    self.stride = stride
    self.format = format
    self.originalWidth = originalWidth
    self.originalHeight = originalHeight
    self.pixels = pixels
    self.laterFrames = laterFrames
    self.frameDurations = frameDurations
    self.loopCount = loopCount
    self.warning = warning
    let page = Int(sysconf(Int32(_SC_PAGESIZE)))
    mappedByteCount = PixelMemory.mappedLength(pixels).map { ($0 + page - 1) / page * page } ?? 0
  }

  /// False once `surrenderPixels` handed the buffers on.
  private var ownsPixels = true

  /// Hands every frame's buffer (frame 0 first) to the caller, who frees them: for the
  /// processing stage, on an image nobody else can reach (a step's input no request,
  /// cache or other step shares), so the next step works in place instead of on a copy.
  /// Empty (nothing handed on) for mapped pixels, which the steps read into a buffer of
  /// their own as they read a shared image's.
  func surrenderPixels() -> [UnsafeMutableRawPointer] {
    guard mappedByteCount == 0 else { return [] }
    ownsPixels = false
    return [pixels] + laterFrames
  }

  deinit {
    guard ownsPixels else { return }
    PixelMemory.release(pixels)
    laterFrames.forEach { PixelMemory.release($0) }
  }
}

/// Animated results (requests with `ImageRequest.animates`).
public enum Animation {
  /// The most bytes an animated image's frames take together (pixload.h:
  /// PXL_ANIMATION_MAX_BYTES). An animation whose frames, in the requested size and
  /// format, would take more is delivered as its first frame alone (frameCount 1,
  /// sourceFrameCount the source's).
  public static let maxBytes = 128 << 20
}

/// Where a delivered image came from.
public enum ImageSource: Int32, Sendable {
  case none = 0
  case memory = 1
  case network = 2
  case disk = 3
  /// The disk cache, after the server confirmed it unchanged (HTTP 304).
  case revalidated = 4
  /// A host's fetcher (`Fetcher`) delivered the bytes; decoded.
  case fetcher = 5
  /// A `data:` URI; decoded.
  case data = 6
  /// A file:// URL, read (by the network engine's libcurl) and decoded.
  case file = 7
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
