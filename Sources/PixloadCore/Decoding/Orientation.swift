import CCodecs
#if canImport(Glibc)
import Glibc
#endif

/// EXIF orientation (tag 0x0112): how the stored pixels must be turned to stand upright.
enum Orientation: Int {
  case up = 1, upMirrored, down, downMirrored, leftMirrored, right, rightMirrored, left

  /// A missing or invalid value means upright.
  init(exif value: Int) { self = Orientation(rawValue: value) ?? .up }

  /// Values 5 to 8 rotate by a quarter turn: width and height trade places.
  var swapsAxes: Bool { rawValue >= 5 }

  /// Returns a new malloc'd buffer with the pixels turned upright, or nil without memory
  /// (pxl_orient: a thumbnail's turn costs a copy of its pixels, no more).
  func apply(_ source: UnsafeMutablePointer<UInt8>, width: Int, height: Int, channels: Int) -> UnsafeMutablePointer<UInt8>? {
    pxl_orient(source, Int32(width), Int32(height), Int32(channels), Int32(rawValue))
  }
}
