#if canImport(Glibc)
import Glibc
#endif

/// Placeholder hashes decoded and encoded (the value itself, `Placeholder`, is Model's):
/// BlurHash (https://blurha.sh: base 83 text, a DCT of the image in linear light) and
/// ThumbHash (https://evanw.github.io/thumbhash: about 25 bytes in an LPQA colour space,
/// with alpha and the aspect ratio). Decoding is synchronous and cheap (a 32x32 image takes
/// a few microseconds); encoding reads a copy scaled to fit in 100x100.
extension Placeholder {
  /// A hash too long to be one is malformed, as one of a wrong length is (pixload.h:
  /// PXL_E_CORRUPT_IMAGE), not a wrong argument.
  private func checkLength() throws(LoadError) {
    guard bytes.count <= Self.maxHashBytes else {
      throw LoadError(.corruptImage, "malformed placeholder: over \(Self.maxHashBytes) bytes, longer than any hash")
    }
  }

  /// Decodes into a `width` x `height` RGBA8 (straight alpha) image. Throws
  /// `.invalidArgument` for a size outside 1...maxSide, `.corruptImage` for a malformed hash.
  public func decode(width: Int, height: Int) throws(LoadError) -> Image {
    guard (1...Self.maxSide).contains(width), (1...Self.maxSide).contains(height) else {
      throw LoadError(.invalidArgument, "placeholder size \(width)x\(height) is outside 1x1...256x256")
    }
    try checkLength()
    let pixels = malloc(width * height * 4)!.assumingMemoryBound(to: UInt8.self)
    do throws(LoadError) {
      switch kind {
      case .blurHash: try BlurHash.decode(bytes, width: width, height: height, into: pixels)
      case .thumbHash: try ThumbHash.decode(bytes, width: width, height: height, into: pixels)
      }
    } catch {
      free(pixels)
      throw error
    }
    return Image(width: width, height: height, stride: width * 4, format: .rgba8, originalWidth: width,
                 originalHeight: height, takingPixels: UnsafeMutableRawPointer(pixels))
  }

  /// The width / height ratio the hash records: ThumbHash's approximate one; 1 for a
  /// BlurHash (which records none). Throws `.corruptImage` for a malformed hash.
  public func aspectRatio() throws(LoadError) -> Double {
    try checkLength()
    switch kind {
    case .blurHash:
      _ = try BlurHash.Header(bytes)
      return 1
    case .thumbHash: return try ThumbHash.Header(bytes).aspectRatio
    }
  }

  /// The size a placeholder is drawn at for a request of `width` x `height` (either 0:
  /// unknown): `side` pixels on the longer side, with the request's aspect ratio when it
  /// gives both, else the hash's own (ThumbHash) or square.
  public func drawingSize(width: Int, height: Int, side: Int = 32) throws(LoadError) -> (width: Int, height: Int) {
    let ratio = width > 0 && height > 0 ? Double(width) / Double(height) : try aspectRatio()
    if ratio >= 1 { return (side, max(1, Int((Double(side) / ratio).rounded()))) }
    return (max(1, Int((Double(side) * ratio).rounded())), side)
  }

  /// Encodes `image` (any format, its first frame): a BlurHash of `componentsX` x
  /// `componentsY` (1...9 each), or a ThumbHash (the components are ignored).
  public static func encode(_ kind: Kind, image: Image, componentsX: Int = 4, componentsY: Int = 3) throws(LoadError) -> Placeholder {
    let small = RGBAImage(image, maxSide: 100)
    switch kind {
    case .blurHash:
      guard (1...9).contains(componentsX), (1...9).contains(componentsY) else {
        throw LoadError(.invalidArgument, "BlurHash components must be 1...9 each")
      }
      return Placeholder(kind: .blurHash, bytes: BlurHash.encode(small, componentsX: componentsX, componentsY: componentsY))
    case .thumbHash:
      return Placeholder(kind: .thumbHash, bytes: ThumbHash.encode(small))
    }
  }
}

/// Straight RGBA8 pixels, scaled down (box filter) to fit in `maxSide` x `maxSide`: what
/// the encoders read.
struct RGBAImage {
  var width: Int
  var height: Int
  var pixels: [UInt8]

  init(width: Int, height: Int, pixels: [UInt8]) {
    self.width = width
    self.height = height
    self.pixels = pixels
  }

  init(_ image: Image, maxSide: Int) {
    let scale = max(1, (max(image.width, image.height) + maxSide - 1) / maxSide)
    width = max(1, image.width / scale)
    height = max(1, image.height / scale)
    var out = [UInt8](repeating: 0, count: width * height * 4)
    let source = image.pixels.assumingMemoryBound(to: UInt8.self)
    let format = image.format
    let bpp = format.bytesPerPixel
    for y in 0..<height {
      for x in 0..<width {
        var sum: (UInt32, UInt32, UInt32, UInt32) = (0, 0, 0, 0)
        for sy in (y * scale)..<min(image.height, (y + 1) * scale) {
          for sx in (x * scale)..<min(image.width, (x + 1) * scale) {
            let p = source + sy * image.stride + sx * bpp
            let rgba = Self.straight(p, format)
            sum.0 += UInt32(rgba.0); sum.1 += UInt32(rgba.1); sum.2 += UInt32(rgba.2); sum.3 += UInt32(rgba.3)
          }
        }
        let n = UInt32(max(1, min(scale, image.height - y * scale) * min(scale, image.width - x * scale)))
        let o = (y * width + x) * 4
        out[o] = UInt8((sum.0 + n / 2) / n)
        out[o + 1] = UInt8((sum.1 + n / 2) / n)
        out[o + 2] = UInt8((sum.2 + n / 2) / n)
        out[o + 3] = UInt8((sum.3 + n / 2) / n)
      }
    }
    pixels = out
  }

  private static func straight(_ p: UnsafePointer<UInt8>, _ format: PixelFormat) -> (UInt8, UInt8, UInt8, UInt8) {
    func unpremultiply(_ c: UInt8, _ a: UInt8) -> UInt8 {
      a == 0 ? 0 : UInt8(min(255, (UInt32(c) * 255 + UInt32(a) / 2) / UInt32(a)))
    }
    switch format {
    case .rgba8: return (p[0], p[1], p[2], p[3])
    case .rgba8Premultiplied: return (unpremultiply(p[0], p[3]), unpremultiply(p[1], p[3]), unpremultiply(p[2], p[3]), p[3])
    case .bgra8Premultiplied: return (unpremultiply(p[2], p[3]), unpremultiply(p[1], p[3]), unpremultiply(p[0], p[3]), p[3])
    case .rgb8: return (p[0], p[1], p[2], 255)
    case .gray8: return (p[0], p[0], p[0], 255)
    }
  }
}

// MARK: - BlurHash

enum BlurHash {
  static let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz#$%*+,-.:;=?@[]^_{|}~".utf8)
  /// Base 83 digit of each byte, -1 for bytes outside the alphabet.
  static let digits: [Int8] = {
    var table = [Int8](repeating: -1, count: 256)
    for (index, byte) in alphabet.enumerated() { table[Int(byte)] = Int8(index) }
    return table
  }()

  /// sRGB byte to linear light.
  static let toLinear: [Float] = (0..<256).map { value in
    let v = Double(value) / 255
    return Float(v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4))
  }

  /// Linear light (0...1, in `linearSteps` steps) to an sRGB byte, as the reference
  /// rounds it.
  static let linearSteps = 16384
  static let toSRGB: [UInt8] = (0...linearSteps).map { step in sRGBByte(Double(step) / Double(linearSteps)) }

  static func sRGBByte(_ linear: Double) -> UInt8 {
    let v = max(0, min(1, linear))
    let value = v <= 0.0031308 ? v * 12.92 * 255 + 0.5 : (1.055 * pow(v, 1 / 2.4) - 0.055) * 255 + 0.5
    return UInt8(max(0, min(255, Int(value))))
  }

  struct Header {
    let componentsX: Int
    let componentsY: Int

    init(_ hash: [UInt8]) throws(LoadError) {
      guard hash.count >= 6 else { throw BlurHash.malformed("is \(hash.count) characters long, at least 6 are needed") }
      for byte in hash where BlurHash.digits[Int(byte)] < 0 {
        throw BlurHash.malformed("has a character outside the base 83 alphabet")
      }
      let size = Int(BlurHash.digits[Int(hash[0])])
      componentsY = size / 9 + 1
      componentsX = size % 9 + 1
      let expected = 4 + 2 * componentsX * componentsY
      guard hash.count == expected else {
        throw BlurHash.malformed("is \(hash.count) characters long; its \(componentsX)x\(componentsY) components need \(expected)")
      }
    }
  }

  static func malformed(_ what: String) -> LoadError {
    LoadError(.corruptImage, "malformed BlurHash: it \(what)")
  }

  static func decode83(_ hash: [UInt8], _ range: Range<Int>) -> Int {
    range.reduce(0) { $0 * 83 + Int(digits[Int(hash[$1])]) }
  }

  static func decode(_ hash: [UInt8], width: Int, height: Int, into pixels: UnsafeMutablePointer<UInt8>) throws(LoadError) {
    let header = try Header(hash)
    let nx = header.componentsX, ny = header.componentsY
    let maximum = Float(decode83(hash, 1..<2) + 1) / 166
    var colors = [Float](repeating: 0, count: nx * ny * 3)
    let dc = decode83(hash, 2..<6)
    guard dc < 1 << 24 else { throw malformed("has a DC component out of range") }
    colors[0] = toLinear[dc >> 16]
    colors[1] = toLinear[(dc >> 8) & 255]
    colors[2] = toLinear[dc & 255]
    for index in 1..<(nx * ny) {
      let value = decode83(hash, (4 + index * 2)..<(6 + index * 2))
      guard value < 19 * 19 * 19 else { throw malformed("has an AC component out of range") }
      for (channel, quantised) in [value / (19 * 19), (value / 19) % 19, value % 19].enumerated() {
        let v = Float(quantised - 9) / 9
        colors[index * 3 + channel] = (v < 0 ? -(v * v) : v * v) * maximum
      }
    }
    // cos(pi * x * i / w), the reference's basis (no half-pixel shift).
    var cosX = [Float](repeating: 0, count: width * nx)
    for x in 0..<width { for i in 0..<nx { cosX[x * nx + i] = cosf(Float.pi * Float(x * i) / Float(width)) } }
    var row = [Float](repeating: 0, count: nx * 3)
    let steps = Float(linearSteps)
    toSRGB.withUnsafeBufferPointer { lut in
      colors.withUnsafeBufferPointer { colors in
        cosX.withUnsafeBufferPointer { cosX in
          row.withUnsafeMutableBufferPointer { row in
            for y in 0..<height {
              // The row's colour per horizontal component: sum over j of cos(pi*y*j/h) * c[i,j].
              for k in 0..<(nx * 3) { row[k] = 0 }
              for j in 0..<ny {
                let f = cosf(Float.pi * Float(y * j) / Float(height))
                for k in 0..<(nx * 3) { row[k] += f * colors[j * nx * 3 + k] }
              }
              for x in 0..<width {
                var r: Float = 0, g: Float = 0, b: Float = 0
                for i in 0..<nx {
                  let f = cosX[x * nx + i]
                  r += f * row[i * 3]; g += f * row[i * 3 + 1]; b += f * row[i * 3 + 2]
                }
                let p = pixels + (y * width + x) * 4
                p[0] = lut[Int(max(0, min(1, r)) * steps + 0.5)]
                p[1] = lut[Int(max(0, min(1, g)) * steps + 0.5)]
                p[2] = lut[Int(max(0, min(1, b)) * steps + 0.5)]
                p[3] = 255
              }
            }
          }
        }
      }
    }
  }

  static func encode(_ image: RGBAImage, componentsX nx: Int, componentsY ny: Int) -> [UInt8] {
    let w = image.width, h = image.height
    var factors = [Double](repeating: 0, count: nx * ny * 3)
    var linear = [Double](repeating: 0, count: w * h * 3)
    for index in 0..<(w * h) {
      for c in 0..<3 { linear[index * 3 + c] = Double(toLinear[Int(image.pixels[index * 4 + c])]) }
    }
    for j in 0..<ny {
      for i in 0..<nx {
        let normalisation: Double = (i == 0 && j == 0) ? 1 : 2
        var r = 0.0, g = 0.0, b = 0.0
        for y in 0..<h {
          let fy = cos(Double.pi * Double(j * y) / Double(h))
          for x in 0..<w {
            let f = normalisation * cos(Double.pi * Double(i * x) / Double(w)) * fy
            let o = (y * w + x) * 3
            r += f * linear[o]; g += f * linear[o + 1]; b += f * linear[o + 2]
          }
        }
        let scale = 1 / Double(w * h)
        let o = (j * nx + i) * 3
        factors[o] = r * scale; factors[o + 1] = g * scale; factors[o + 2] = b * scale
      }
    }
    var hash: [UInt8] = []
    func append(_ value: Int, _ length: Int) {
      var divisor = 1
      for _ in 1..<max(1, length) { divisor *= 83 }
      for _ in 0..<length {
        hash.append(alphabet[(value / divisor) % 83])
        divisor /= 83
      }
    }
    append((nx - 1) + (ny - 1) * 9, 1)
    let ac = factors.dropFirst(3)
    var maximum = 1.0
    if ac.isEmpty {
      append(0, 1)
    } else {
      let actual = ac.map(abs).max() ?? 0
      let quantised = Int(max(0, min(82, (actual * 166 - 0.5).rounded(.down))))
      maximum = Double(quantised + 1) / 166
      append(quantised, 1)
    }
    append((Int(sRGBByte(factors[0])) << 16) + (Int(sRGBByte(factors[1])) << 8) + Int(sRGBByte(factors[2])), 4)
    for index in 1..<(nx * ny) {
      func quantise(_ v: Double) -> Int {
        let scaled = v / maximum
        let signed = scaled < 0 ? -(-scaled).squareRoot() : scaled.squareRoot()
        return Int(max(0, min(18, (signed * 9 + 9.5).rounded(.down))))
      }
      let o = index * 3
      append(quantise(factors[o]) * 19 * 19 + quantise(factors[o + 1]) * 19 + quantise(factors[o + 2]), 2)
    }
    return hash
  }
}

// MARK: - ThumbHash

enum ThumbHash {
  struct Header {
    let lDC, pDC, qDC, lScale, pScale, qScale, aDC, aScale: Float
    let hasAlpha: Bool
    let lx, ly: Int
    /// lx / ly before the minimum of 3: the reference's approximate aspect ratio.
    let aspectRatio: Double
    let acStart: Int

    init(_ hash: [UInt8]) throws(LoadError) {
      guard hash.count >= 5 else { throw ThumbHash.malformed("is \(hash.count) bytes long, at least 5 are needed") }
      let header24 = Int(hash[0]) | Int(hash[1]) << 8 | Int(hash[2]) << 16
      let header16 = Int(hash[3]) | Int(hash[4]) << 8
      lDC = Float(header24 & 63) / 63
      pDC = Float((header24 >> 6) & 63) / 31.5 - 1
      qDC = Float((header24 >> 12) & 63) / 31.5 - 1
      lScale = Float((header24 >> 18) & 31) / 31
      hasAlpha = header24 >> 23 != 0
      pScale = Float((header16 >> 3) & 63) / 63
      qScale = Float((header16 >> 9) & 63) / 63
      let landscape = header16 >> 15 != 0
      let rawX = landscape ? (hasAlpha ? 5 : 7) : header16 & 7
      let rawY = landscape ? header16 & 7 : (hasAlpha ? 5 : 7)
      guard rawX > 0, rawY > 0 else { throw ThumbHash.malformed("records an empty luminance grid") }
      aspectRatio = Double(rawX) / Double(rawY)
      lx = max(3, rawX)
      ly = max(3, rawY)
      acStart = hasAlpha ? 6 : 5
      guard hash.count >= acStart else { throw ThumbHash.malformed("is \(hash.count) bytes long, its alpha needs 6") }
      aDC = hasAlpha ? Float(hash[5] & 15) / 15 : 1
      aScale = hasAlpha ? Float(hash[5] >> 4) / 15 : 0
      let count = ThumbHash.triangle(lx, ly) + 2 * ThumbHash.triangle(3, 3) + (hasAlpha ? ThumbHash.triangle(5, 5) : 0)
      let expected = acStart + (count + 1) / 2
      guard hash.count == expected else {
        throw ThumbHash.malformed("is \(hash.count) bytes long; its header says \(expected)")
      }
    }
  }

  static func malformed(_ what: String) -> LoadError {
    LoadError(.corruptImage, "malformed ThumbHash: it \(what)")
  }

  /// The AC terms of an nx x ny channel: (cx, cy) with cx * ny < nx * (ny - cy), less the DC.
  static func triangle(_ nx: Int, _ ny: Int) -> Int {
    var count = 0
    for cy in 0..<ny { for cx in 0..<nx where cx * ny < nx * (ny - cy) { count += 1 } }
    return count - 1
  }

  static func decode(_ hash: [UInt8], width: Int, height: Int, into pixels: UnsafeMutablePointer<UInt8>) throws(LoadError) {
    let header = try Header(hash)
    // Each channel's AC terms as a dense ny x nx grid (0 outside its triangle and at the
    // DC), so a row's sum over cy is taken once per row, not per pixel: separable.
    let nx = max(header.lx, header.hasAlpha ? 5 : 3), ny = max(header.ly, header.hasAlpha ? 5 : 3)
    var grids = [Float](repeating: 0, count: 4 * nx * ny)  // l, p, q, a
    var acIndex = 0
    func channel(_ index: Int, _ cnx: Int, _ cny: Int, _ scale: Float) {
      for cy in 0..<cny {
        for cx in (cy == 0 ? 1 : 0)..<cnx where cx * cny < cnx * (cny - cy) {
          let nibble = (hash[header.acStart + (acIndex >> 1)] >> ((acIndex & 1) << 2)) & 15
          acIndex += 1
          grids[index * nx * ny + cy * nx + cx] = (Float(nibble) / 7.5 - 1) * scale
        }
      }
    }
    channel(0, header.lx, header.ly, header.lScale)
    channel(1, 3, 3, header.pScale * 1.25)
    channel(2, 3, 3, header.qScale * 1.25)
    if header.hasAlpha { channel(3, 5, 5, header.aScale) }
    let channels = header.hasAlpha ? 4 : 3
    var fx = [Float](repeating: 0, count: width * nx)
    var fy = [Float](repeating: 0, count: ny)
    for x in 0..<width { for c in 0..<nx { fx[x * nx + c] = cosf(Float.pi / Float(width) * (Float(x) + 0.5) * Float(c)) } }
    var row = [Float](repeating: 0, count: 4 * nx)
    let dc: (Float, Float, Float, Float) = (header.lDC, header.pDC, header.qDC, header.aDC)
    grids.withUnsafeBufferPointer { grid in
      fx.withUnsafeBufferPointer { fx in
        row.withUnsafeMutableBufferPointer { row in
          fy.withUnsafeMutableBufferPointer { fy in
            for y in 0..<height {
              // Doubled, as the reference's fy2.
              for c in 0..<ny { fy[c] = 2 * cosf(Float.pi / Float(height) * (Float(y) + 0.5) * Float(c)) }
              for k in 0..<channels {
                for cx in 0..<nx {
                  var sum: Float = 0
                  for cy in 0..<ny { sum += grid[k * nx * ny + cy * nx + cx] * fy[cy] }
                  row[k * nx + cx] = sum
                }
              }
              for x in 0..<width {
                var vl = dc.0, vp = dc.1, vq = dc.2, va = dc.3
                let f = x * nx
                for cx in 0..<nx {
                  let basis = fx[f + cx]
                  vl += row[cx] * basis
                  vp += row[nx + cx] * basis
                  vq += row[2 * nx + cx] * basis
                  if channels == 4 { va += row[3 * nx + cx] * basis }
                }
                let b = vl - 2 / 3 * vp
                let r = (3 * vl - b + vq) / 2
                let g = r - vq
                let o = pixels + (y * width + x) * 4
                // The reference stores into a Uint8Array: truncation.
                o[0] = UInt8(max(0, 255 * min(1, r)))
                o[1] = UInt8(max(0, 255 * min(1, g)))
                o[2] = UInt8(max(0, 255 * min(1, b)))
                o[3] = UInt8(max(0, 255 * min(1, va)))
              }
            }
          }
        }
      }
    }
  }

  static func encode(_ image: RGBAImage) -> [UInt8] {
    let w = image.width, h = image.height
    var avgR = 0.0, avgG = 0.0, avgB = 0.0, avgA = 0.0
    for i in 0..<(w * h) {
      let alpha = Double(image.pixels[i * 4 + 3]) / 255
      avgR += alpha / 255 * Double(image.pixels[i * 4])
      avgG += alpha / 255 * Double(image.pixels[i * 4 + 1])
      avgB += alpha / 255 * Double(image.pixels[i * 4 + 2])
      avgA += alpha
    }
    if avgA > 0 { avgR /= avgA; avgG /= avgA; avgB /= avgA }
    let hasAlpha = avgA < Double(w * h)
    let lLimit = hasAlpha ? 5.0 : 7.0
    let lx = max(1, Int((lLimit * Double(w) / Double(max(w, h))).rounded()))
    let ly = max(1, Int((lLimit * Double(h) / Double(max(w, h))).rounded()))
    var l = [Double](repeating: 0, count: w * h), p = l, q = l, a = l
    for i in 0..<(w * h) {
      let alpha = Double(image.pixels[i * 4 + 3]) / 255
      let r = avgR * (1 - alpha) + alpha / 255 * Double(image.pixels[i * 4])
      let g = avgG * (1 - alpha) + alpha / 255 * Double(image.pixels[i * 4 + 1])
      let b = avgB * (1 - alpha) + alpha / 255 * Double(image.pixels[i * 4 + 2])
      l[i] = (r + g + b) / 3
      p[i] = (r + g) / 2 - b
      q[i] = r - g
      a[i] = alpha
    }
    func channel(_ values: [Double], _ nx: Int, _ ny: Int) -> (dc: Double, ac: [Double], scale: Double) {
      var dc = 0.0, ac: [Double] = [], scale = 0.0
      var fx = [Double](repeating: 0, count: w)
      for cy in 0..<ny {
        for cx in 0..<nx where cx * ny < nx * (ny - cy) {
          var f = 0.0
          for x in 0..<w { fx[x] = cos(Double.pi / Double(w) * Double(cx) * (Double(x) + 0.5)) }
          for y in 0..<h {
            let fy = cos(Double.pi / Double(h) * Double(cy) * (Double(y) + 0.5))
            for x in 0..<w { f += values[x + y * w] * fx[x] * fy }
          }
          f /= Double(w * h)
          if cx > 0 || cy > 0 {
            ac.append(f)
            scale = max(scale, abs(f))
          } else {
            dc = f
          }
        }
      }
      if scale > 0 { ac = ac.map { 0.5 + 0.5 / scale * $0 } }
      return (dc, ac, scale)
    }
    // JavaScript's Math.round: halves go up.
    func round(_ v: Double) -> Int { Int((v + 0.5).rounded(.down)) }
    let lc = channel(l, max(3, lx), max(3, ly))
    let pc = channel(p, 3, 3)
    let qc = channel(q, 3, 3)
    let ac = hasAlpha ? channel(a, 5, 5) : (dc: 0, ac: [], scale: 0)
    let landscape = w > h
    let header24 = round(63 * lc.dc) | round(31.5 + 31.5 * pc.dc) << 6 | round(31.5 + 31.5 * qc.dc) << 12
      | round(31 * lc.scale) << 18 | (hasAlpha ? 1 << 23 : 0)
    let header16 = (landscape ? ly : lx) | round(63 * pc.scale) << 3 | round(63 * qc.scale) << 9 | (landscape ? 1 << 15 : 0)
    var hash: [UInt8] = [UInt8(header24 & 255), UInt8((header24 >> 8) & 255), UInt8(header24 >> 16),
                         UInt8(header16 & 255), UInt8(header16 >> 8)]
    if hasAlpha { hash.append(UInt8(round(15 * ac.dc) | round(15 * ac.scale) << 4)) }
    var acIndex = 0
    for factors in hasAlpha ? [lc.ac, pc.ac, qc.ac, ac.ac] : [lc.ac, pc.ac, qc.ac] {
      for f in factors {
        let index = hash.count - (hasAlpha ? 6 : 5)
        if acIndex >> 1 >= index { hash.append(0) }
        hash[(hasAlpha ? 6 : 5) + (acIndex >> 1)] |= UInt8(round(15 * f)) << ((acIndex & 1) << 2)
        acIndex += 1
      }
    }
    return hash
  }
}
