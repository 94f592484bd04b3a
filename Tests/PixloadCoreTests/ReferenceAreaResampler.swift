#if canImport(Glibc)
import Glibc
#endif
@testable import PixloadCore

/// The area resampler as it was written in Swift before it moved to C (pxl_resampler_*,
/// CCodecs/resample.c), kept verbatim as the float reference the fixed-point C one must
/// match within 1 level: thumbnails keep their pixels to that level.
///
/// Separable and streaming: source rows arrive one at a time (`addRow`) and are shrunk
/// horizontally at once into float rows of the output's width; `finish` does the vertical
/// pass. So a decoder that produces rows (libpng) never needs the full-size bitmap: only
/// the crop's rows at the output's width are kept.
final class ReferenceAreaResampler {
  /// Source pixels `[first, first + count)` and their normalised weights, per output pixel.
  private struct Taps {
    var first: [Int32] = []
    var count: [Int32] = []
    var offsets: [Int32] = []
    var weights: [Float] = []

    init(outputCount: Int, start: Double, length: Double, limit: Int) {
      let step = length / Double(outputCount)
      first.reserveCapacity(outputCount)
      for i in 0..<outputCount {
        let lo = start + Double(i) * step
        let hi = lo + step
        let begin = min(max(0, Int(lo.rounded(.down))), limit - 1)
        let end = min(limit, max(begin + 1, Int(hi.rounded(.up))))
        var total = 0.0
        let offset = weights.count
        for j in begin..<end {
          let w = max(0, min(hi, Double(j + 1)) - max(lo, Double(j)))
          weights.append(Float(w))
          total += w
        }
        if total <= 0 {
          // The window fell between pixel edges at the very border: take the nearest.
          weights.removeLast(end - begin)
          weights.append(1)
          first.append(Int32(begin))
          count.append(1)
        } else {
          for k in offset..<weights.count { weights[k] = Float(Double(weights[k]) / total) }
          first.append(Int32(begin))
          count.append(Int32(end - begin))
        }
        offsets.append(Int32(offset))
      }
    }
  }

  let outputWidth: Int
  let outputHeight: Int
  private let channels: Int
  private let columns: Taps
  private let rows: Taps
  /// Source rows [firstRow, firstRow + rowCount) contribute; others are skipped.
  private let firstRow: Int
  private let rowCount: Int
  /// Horizontally shrunk rows, `rowCount x outputWidth x channels` floats.
  private let shrunk: UnsafeMutablePointer<Float>

  /// Nil when memory runs out.
  init?(sourceWidth: Int, sourceHeight: Int, channels: Int, crop: PixelRect, outputWidth: Int, outputHeight: Int) {
    self.outputWidth = outputWidth
    self.outputHeight = outputHeight
    self.channels = channels
    columns = Taps(outputCount: outputWidth, start: crop.x, length: crop.width, limit: sourceWidth)
    let rowTaps = Taps(outputCount: outputHeight, start: crop.y, length: crop.height, limit: sourceHeight)
    rows = rowTaps
    let first = Int(rowTaps.first.first ?? 0)
    let last = (0..<outputHeight).map { Int(rowTaps.first[$0] + rowTaps.count[$0]) }.max() ?? first
    firstRow = first
    rowCount = last - first
    guard let raw = malloc(max(1, rowCount * outputWidth * channels) * MemoryLayout<Float>.size) else { return nil }
    shrunk = raw.assumingMemoryBound(to: Float.self)
  }

  deinit { free(shrunk) }

  /// Shrinks source row `y` horizontally (rows outside the crop are ignored).
  func addRow(_ y: Int, _ source: UnsafePointer<UInt8>) {
    let index = y - firstRow
    guard index >= 0 && index < rowCount else { return }
    let destination = shrunk + index * outputWidth * channels
    columns.weights.withUnsafeBufferPointer { weights in
      columns.first.withUnsafeBufferPointer { first in
        columns.count.withUnsafeBufferPointer { count in
          columns.offsets.withUnsafeBufferPointer { offsets in
            for x in 0..<outputWidth {
              let base = source + Int(first[x]) * channels
              let w = weights.baseAddress! + Int(offsets[x])
              let n = Int(count[x])
              if channels == 4 {
                var a0: Float = 0, a1: Float = 0, a2: Float = 0, a3: Float = 0
                for k in 0..<n {
                  let p = base + k * 4, wk = w[k]
                  a0 += Float(p[0]) * wk; a1 += Float(p[1]) * wk
                  a2 += Float(p[2]) * wk; a3 += Float(p[3]) * wk
                }
                let d = destination + x * 4
                d[0] = a0; d[1] = a1; d[2] = a2; d[3] = a3
              } else {
                for c in 0..<channels {
                  var acc: Float = 0
                  for k in 0..<n { acc += Float(base[k * channels + c]) * w[k] }
                  destination[x * channels + c] = acc
                }
              }
            }
          }
        }
      }
    }
  }

  /// The vertical pass: a new malloc'd, tightly packed output buffer, or nil without memory.
  func finish() -> UnsafeMutablePointer<UInt8>? {
    let rowLength = outputWidth * channels
    guard let raw = malloc(max(1, outputHeight * rowLength)) else { return nil }
    let output = raw.assumingMemoryBound(to: UInt8.self)
    var accumulator = [Float](repeating: 0, count: rowLength)
    rows.weights.withUnsafeBufferPointer { weights in
      accumulator.withUnsafeMutableBufferPointer { acc in
        for y in 0..<outputHeight {
          for i in 0..<rowLength { acc[i] = 0 }
          let n = Int(rows.count[y])
          let w = weights.baseAddress! + Int(rows.offsets[y])
          for k in 0..<n {
            let source = shrunk + (Int(rows.first[y]) - firstRow + k) * rowLength
            let wk = w[k]
            for i in 0..<rowLength { acc[i] += source[i] * wk }
          }
          let destination = output + y * rowLength
          for i in 0..<rowLength {
            let v = acc[i] + 0.5
            destination[i] = v >= 255 ? 255 : (v <= 0 ? 0 : UInt8(v))
          }
        }
      }
    }
    return output
  }

  /// Resamples a whole, tightly packed bitmap.
  static func resample(source: UnsafeMutablePointer<UInt8>, width: Int, height: Int, channels: Int,
                       crop: PixelRect, outputWidth: Int, outputHeight: Int) -> UnsafeMutablePointer<UInt8>? {
    guard let resampler = ReferenceAreaResampler(sourceWidth: width, sourceHeight: height, channels: channels, crop: crop,
                                        outputWidth: outputWidth, outputHeight: outputHeight) else { return nil }
    for y in 0..<height { resampler.addRow(y, source + y * width * channels) }
    return resampler.finish()
  }
}
