// libFuzzer target on WebP decoding: `make fuzz-webp` builds it with -sanitize=fuzzer,address
// and runs it seeded from Tests/fixtures/webp-suite and the generated WebP set. Each input
// goes through every WebP entry point: read_info, ImageDecoder (shim, resampler,
// orientation) with a variant chosen from the input, every composited frame
// (pxl_webp_decode_frames) and the colour chunk (pxl_webp_color), and their answers are
// checked against each other. A plain build replays files (Tests/fuzz/driver), which is
// how `swift test` replays Tests/fuzz-regressions/webp.
import CCodecs
import FuzzDriver
import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

/// As the decode fuzzer: 16 Mpx still decode, far below libFuzzer's RSS limit.
let fuzzMaxPixels: UInt64 = 16_000_000
/// Frames composited per input at most: each is a canvas-sized copy to check.
let fuzzMaxFrames: Int32 = 64

final class FrameCheck {
  var frames: Int32 = 0, sum: UInt64 = 0, stride: Int32 = 0
  let height: Int32
  init(height: Int32) { self.height = height }
}

@discardableResult
func fuzzOne(_ data: [UInt8]) -> String {
  var report: [String] = []
  var info = pxl_codec_info()
  var message = [CChar](repeating: 0, count: 256)
  let infoStatus = data.withUnsafeBufferPointer { pxl_webp_read_info($0.baseAddress, $0.count, &info, &message, 256) }
  precondition(infoStatus == PXL_CODEC_OK || message[0] != 0, "read_info failed without a message")
  report.append(infoStatus == PXL_CODEC_OK ? "info \(info.width)x\(info.height) frames \(info.frame_count)"
                                           : "info: \(String(cString: message))")

  let variant = formatFuzzVariant(for: data)
  switch ImageDecoder().decode(data, variant: variant, maxPixels: fuzzMaxPixels) {
  case .failure(let error):
    precondition(!error.message.isEmpty, "a failure without a message")
    report.append("decode: \(error.message)")
  case .success(let image):
    precondition(infoStatus == PXL_CODEC_OK, "decoded what read_info refused")
    precondition(image.width >= 1 && image.height >= 1 && image.stride == image.width * variant.format.bytesPerPixel)
    let bytes = image.pixels.assumingMemoryBound(to: UInt8.self)
    var sum: UInt64 = 0
    for i in 0..<image.byteCount { sum &+= UInt64(bytes[i]) }
    report.append("decode \(image.width)x\(image.height) sum \(sum)")
  }

  // read_info's canvas height: the rows every frame must have.
  let check = FrameCheck(height: infoStatus == PXL_CODEC_OK ? info.height : 0)
  var out = pxl_codec_output()
  let framesStatus = withExtendedLifetime(check) { () -> pxl_codec_status in
    data.withUnsafeBufferPointer { bytes in
      pxl_webp_decode_frames(bytes.baseAddress, bytes.count, fuzzMaxPixels, { user, index, rgba, stride, duration in
        let check = Unmanaged<FrameCheck>.fromOpaque(user!).takeUnretainedValue()
        precondition(index == check.frames && duration >= 0, "frame \(index) out of order or duration \(duration)")
        // Reads the first and the last row of the canvas read_info promised:
        // AddressSanitizer catches a short buffer (every byte of a tall canvas is too slow
        // under the sanitizer: a 1 x 4980874 canvas timed out); the stride is checked
        // against the width afterwards.
        check.frames += 1
        check.stride = stride
        var sum: UInt64 = 0
        let n = Int(stride), rows = Int(check.height)
        for row in Set([0, rows - 1]) where row >= 0 { for i in 0..<n { sum &+= UInt64(rgba![row * n + i]) } }
        check.sum &+= sum
        return check.frames >= fuzzMaxFrames ? 1 : 0
      }, Unmanaged.passUnretained(check).toOpaque(), &out)
    }
  }
  precondition(out.pixels == nil, "decode_frames left pixels")
  if framesStatus == PXL_CODEC_OK {
    precondition(infoStatus == PXL_CODEC_OK && out.width == info.width && out.height == info.height,
                 "frames canvas \(out.width)x\(out.height), info \(info.width)x\(info.height)")
    precondition(check.frames == min(info.frame_count, fuzzMaxFrames), "\(check.frames) frames of \(info.frame_count)")
    precondition(check.stride == info.width * 4, "frame stride \(check.stride), canvas width \(info.width)")
    report.append("frames \(check.frames)")
  } else {
    let text = withUnsafeBytes(of: &out.message) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
    precondition(!text.isEmpty, "decode_frames failed without a message")
    report.append("frames: \(text)")
  }

  var color = pxl_codec_color()
  let colorStatus = data.withUnsafeBufferPointer { pxl_webp_color($0.baseAddress, $0.count, &color) }
  if colorStatus == PXL_CODEC_OK, let icc = color.icc {
    var sum: UInt64 = 0
    for i in 0..<color.icc_size { sum &+= UInt64(icc[i]) }
    report.append("icc \(color.icc_size) bytes")
  }
  pxl_codec_color_free(&color)
  return report.joined(separator: "; ")
}

@main
enum Main {
  static func main() { runFuzzTarget(name: "webp", fuzzOne) }
}
