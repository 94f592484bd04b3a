/// Alpha conversions on 4-channel pixels whose alpha is the last byte (RGBA and BGRA).
enum PixelOps {
  static func premultiply(_ pixels: UnsafeMutablePointer<UInt8>, count: Int) {
    var p = pixels
    for _ in 0..<count {
      let a = UInt32(p[3])
      if a != 255 {
        // (c * a + 127) / 255, rounded: the usual 8-bit premultiplication.
        p[0] = UInt8((UInt32(p[0]) * a + 127) / 255)
        p[1] = UInt8((UInt32(p[1]) * a + 127) / 255)
        p[2] = UInt8((UInt32(p[2]) * a + 127) / 255)
      }
      p += 4
    }
  }

  static func unpremultiply(_ pixels: UnsafeMutablePointer<UInt8>, count: Int) {
    var p = pixels
    for _ in 0..<count {
      let a = UInt32(p[3])
      if a == 0 {
        p[0] = 0; p[1] = 0; p[2] = 0
      } else if a != 255 {
        p[0] = UInt8(min(255, (UInt32(p[0]) * 255 + a / 2) / a))
        p[1] = UInt8(min(255, (UInt32(p[1]) * 255 + a / 2) / a))
        p[2] = UInt8(min(255, (UInt32(p[2]) * 255 + a / 2) / a))
      }
      p += 4
    }
  }
}
