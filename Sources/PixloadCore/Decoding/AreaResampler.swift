import CCodecs
#if canImport(Glibc)
import Glibc
#endif

/// Downscaling by area averaging: each output pixel is the coverage-weighted mean of the
/// source pixels under it. Exact for shrinking (no aliasing, no ringing), which is all
/// pixload ever does after DCT scaling.
///
/// Streaming: source rows arrive one at a time (`addRow`, or straight from a decoder's row
/// callback through `rowFunction`/`context`) and each output row is done as soon as its
/// last source row has arrived, so neither the full-size bitmap nor a crop-sized
/// intermediate ever exists. The arithmetic is C (`pxl_resampler_*` in CCodecs): fixed
/// point, SSE2 or AVX2 chosen at run time (a scalar path elsewhere), within 1 level of the
/// exact average, premultiplying on the fly, with no allocation per row.
final class AreaResampler {
  let outputWidth: Int
  let outputHeight: Int
  private let handle: OpaquePointer

  /// Nil on bad sizes or when memory runs out. `premultiply`: 4-channel rows are
  /// premultiplied before averaging (so the output is premultiplied).
  init?(sourceWidth: Int, sourceHeight: Int, channels: Int, crop: PixelRect, outputWidth: Int, outputHeight: Int,
        premultiply: Bool = false) {
    guard let handle = pxl_resampler_new(Int32(sourceWidth), Int32(sourceHeight), Int32(channels), crop.x, crop.y,
                                         crop.width, crop.height, Int32(outputWidth), Int32(outputHeight),
                                         premultiply ? 1 : 0) else { return nil }
    self.outputWidth = outputWidth
    self.outputHeight = outputHeight
    self.handle = handle
  }

  deinit { pxl_resampler_free(handle) }

  /// The row callback to give a `*_decode_rows` shim function, with `context` as its user
  /// pointer (valid while this object lives).
  static let rowFunction: pxl_codec_row_fn = pxl_resampler_add_row
  /// The same for a region decode (rows that start at a column x0).
  static let regionRowFunction: pxl_codec_region_row_fn = pxl_resampler_add_row_at
  var context: UnsafeMutableRawPointer { UnsafeMutableRawPointer(handle) }

  /// The source pixels the output depends on: a decoder need not build the others.
  var sourceRegion: (x: Int32, y: Int32, width: Int32, height: Int32) {
    var x: Int32 = 0, y: Int32 = 0, width: Int32 = 0, height: Int32 = 0
    pxl_resampler_region(handle, &x, &y, &width, &height)
    return (x, y, width, height)
  }

  /// Adds source row `y` (rows outside the crop are ignored).
  func addRow(_ y: Int, _ source: UnsafePointer<UInt8>) {
    _ = pxl_resampler_add_row(context, Int32(y), source)
  }

  /// The output, malloc'd and tightly packed (the caller frees it); nil if some output row
  /// never got all its source rows.
  func finish() -> UnsafeMutablePointer<UInt8>? { pxl_resampler_finish(handle) }

  /// Resamples a whole, tightly packed bitmap.
  static func resample(source: UnsafeMutablePointer<UInt8>, width: Int, height: Int, channels: Int,
                       crop: PixelRect, outputWidth: Int, outputHeight: Int) -> UnsafeMutablePointer<UInt8>? {
    guard let resampler = AreaResampler(sourceWidth: width, sourceHeight: height, channels: channels, crop: crop,
                                        outputWidth: outputWidth, outputHeight: outputHeight) else { return nil }
    for y in 0..<height { resampler.addRow(y, source + y * width * channels) }
    return resampler.finish()
  }
}
