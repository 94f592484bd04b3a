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

  /// Returns a new malloc'd buffer with the pixels turned upright, or nil without memory.
  func apply(_ source: UnsafeMutablePointer<UInt8>, width: Int, height: Int, channels: Int) -> UnsafeMutablePointer<UInt8>? {
    guard let raw = malloc(width * height * channels) else { return nil }
    let destination = raw.assumingMemoryBound(to: UInt8.self)
    let outWidth = swapsAxes ? height : width
    let outHeight = swapsAxes ? width : height
    for y in 0..<outHeight {
      let row = destination + y * outWidth * channels
      for x in 0..<outWidth {
        // The stored pixel shown at display position (x, y).
        let sx: Int, sy: Int
        switch self {
        case .up: (sx, sy) = (x, y)
        case .upMirrored: (sx, sy) = (width - 1 - x, y)
        case .down: (sx, sy) = (width - 1 - x, height - 1 - y)
        case .downMirrored: (sx, sy) = (x, height - 1 - y)
        case .leftMirrored: (sx, sy) = (y, x)
        case .right: (sx, sy) = (y, height - 1 - x)
        case .rightMirrored: (sx, sy) = (width - 1 - y, height - 1 - x)
        case .left: (sx, sy) = (width - 1 - y, x)
        }
        let from = source + (sy * width + sx) * channels
        let to = row + x * channels
        for c in 0..<channels { to[c] = from[c] }
      }
    }
    return destination
  }
}
