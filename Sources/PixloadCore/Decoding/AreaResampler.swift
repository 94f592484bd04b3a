#if canImport(Glibc)
import Glibc
#endif

/// Downscaling by area averaging: each output pixel is the coverage-weighted mean of the
/// source pixels under it. Exact for shrinking (no aliasing, no ringing), which is all
/// pixload ever does after DCT scaling. Separable: a horizontal pass into float rows, then
/// a vertical pass.
enum AreaResampler {
  /// Source pixels `[first, first + weights.count)` and their normalised weights.
  private struct Taps {
    var first: [Int32] = []
    var count: [Int32] = []
    var weights: [Float] = []
    var offsets: [Int32] = []

    init(outputCount: Int, start: Double, length: Double, limit: Int) {
      let step = length / Double(outputCount)
      first.reserveCapacity(outputCount)
      for i in 0..<outputCount {
        let lo = start + Double(i) * step
        let hi = lo + step
        var j = max(0, Int(lo.rounded(.down)))
        let end = min(limit, max(j + 1, Int(hi.rounded(.up))))
        var taps: [Float] = []
        var total = 0.0
        let begin = j
        while j < end {
          let w = max(0, min(hi, Double(j + 1)) - max(lo, Double(j)))
          taps.append(Float(w))
          total += w
          j += 1
        }
        if total <= 0 {
          // The window fell between pixel centres at the very edge: take the nearest.
          taps = [1]
          total = 1
        }
        first.append(Int32(min(begin, limit - 1)))
        count.append(Int32(taps.count))
        offsets.append(Int32(weights.count))
        for w in taps { weights.append(w / Float(total)) }
      }
    }
  }

  /// Returns a new malloc'd `outputWidth x outputHeight` buffer (tightly packed), or nil
  /// when memory runs out.
  static func resample(source: UnsafeMutablePointer<UInt8>, width: Int, height: Int, channels: Int,
                       crop: PixelRect, outputWidth: Int, outputHeight: Int) -> UnsafeMutablePointer<UInt8>? {
    let columns = Taps(outputCount: outputWidth, start: crop.x, length: crop.width, limit: width)
    let rows = Taps(outputCount: outputHeight, start: crop.y, length: crop.height, limit: height)
    let firstRow = Int(rows.first.first ?? 0)
    let lastRow = (0..<outputHeight).map { Int(rows.first[$0] + rows.count[$0]) }.max() ?? firstRow
    let rowCount = lastRow - firstRow
    let rowLength = outputWidth * channels

    guard let rawOut = malloc(outputWidth * outputHeight * channels),
          let rawTemp = malloc(max(1, rowCount * rowLength) * MemoryLayout<Float>.size) else { return nil }
    defer { free(rawTemp) }
    let output = rawOut.assumingMemoryBound(to: UInt8.self)
    let temp = rawTemp.assumingMemoryBound(to: Float.self)

    columns.weights.withUnsafeBufferPointer { weights in
      columns.first.withUnsafeBufferPointer { first in
        columns.count.withUnsafeBufferPointer { count in
          columns.offsets.withUnsafeBufferPointer { offsets in
            for r in 0..<rowCount {
              let src = source + (firstRow + r) * width * channels
              let dst = temp + r * rowLength
              for x in 0..<outputWidth {
                let base = src + Int(first[x]) * channels
                let w = weights.baseAddress! + Int(offsets[x])
                let n = Int(count[x])
                if channels == 4 {
                  var a0: Float = 0, a1: Float = 0, a2: Float = 0, a3: Float = 0
                  for k in 0..<n {
                    let p = base + k * 4, wk = w[k]
                    a0 += Float(p[0]) * wk; a1 += Float(p[1]) * wk
                    a2 += Float(p[2]) * wk; a3 += Float(p[3]) * wk
                  }
                  let d = dst + x * 4
                  d[0] = a0; d[1] = a1; d[2] = a2; d[3] = a3
                } else {
                  for c in 0..<channels {
                    var acc: Float = 0
                    for k in 0..<n { acc += Float(base[k * channels + c]) * w[k] }
                    dst[x * channels + c] = acc
                  }
                }
              }
            }
          }
        }
      }
    }

    rows.weights.withUnsafeBufferPointer { weights in
      var accumulator = [Float](repeating: 0, count: rowLength)
      accumulator.withUnsafeMutableBufferPointer { acc in
        for y in 0..<outputHeight {
          for i in 0..<rowLength { acc[i] = 0 }
          let n = Int(rows.count[y])
          let w = weights.baseAddress! + Int(rows.offsets[y])
          for k in 0..<n {
            let src = temp + (Int(rows.first[y]) - firstRow + k) * rowLength
            let wk = w[k]
            for i in 0..<rowLength { acc[i] += src[i] * wk }
          }
          let dst = output + y * rowLength
          for i in 0..<rowLength {
            let v = acc[i] + 0.5
            dst[i] = v >= 255 ? 255 : (v <= 0 ? 0 : UInt8(v))
          }
        }
      }
    }
    return output
  }
}
