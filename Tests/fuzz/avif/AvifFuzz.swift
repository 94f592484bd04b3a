// libFuzzer target on the AVIF decoder: `make fuzz-avif` builds it with
// `-sanitize=fuzzer,address` and runs it seeded from the AVIF conformance sets
// (Tests/fixtures/avif-suite and build/conformance-gen/generated-avif).
//
// Each input goes through every AVIF entry point: ImageDecoder (sniff, avif_shim.c's info,
// whole decode or rows into the resampler, orientation), pxl_avif_decode_frames (every
// frame of a sequence, each byte read) and pxl_avif_color. The variant is picked from the
// input's length and last bytes, as pixload-fuzz-decode does, so every seed is valid as it
// stands. A plain build (`swift build`) replays files: `pixload-fuzz-avif FILE...`, which is
// how Tests/fuzz-regressions/avif is replayed by `swift test`.
import CCodecs
import FuzzDriver
import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

/// As pixload-fuzz-decode: large enough for every seed, far below libFuzzer's RSS limit.
let fuzzMaxPixels: UInt64 = 16_000_000

/// What pxl_avif_decode_frames' callback sees; frames past 16 stop the decode (the
/// caller's bound), which must still succeed.
struct FrameWalk {
  var frames = 0, height = 0, sum: UInt64 = 0
}

@discardableResult
func fuzzOne(_ data: [UInt8]) -> String {
  let variant = formatFuzzVariant(for: data)
  var report = checkedFormatDecode(ImageDecoder().decode(data, variant: variant, maxPixels: fuzzMaxPixels),
                                   variant: variant)

  var info = pxl_codec_info()
  let infoStatus = data.withUnsafeBufferPointer { pxl_avif_read_info($0.baseAddress, $0.count, &info, nil, 0) }
  var walk = FrameWalk(height: Int(info.height))
  var output = pxl_codec_output()
  let status = data.withUnsafeBufferPointer { bytes in
    withUnsafeMutablePointer(to: &walk) { walkPointer in
      pxl_avif_decode_frames(bytes.baseAddress, bytes.count, fuzzMaxPixels, { user, index, rgba, stride, duration in
        let walk = user!.assumingMemoryBound(to: FrameWalk.self)
        precondition(index == Int32(walk.pointee.frames) && duration >= 0 && stride > 0)
        let count = Int(stride) * walk.pointee.height
        for i in 0..<count { walk.pointee.sum &+= UInt64(rgba![i]) }
        walk.pointee.frames += 1
        return walk.pointee.frames >= 16 ? 1 : 0
      }, walkPointer, &output)
    }
  }
  precondition(output.pixels == nil, "decode_frames returned pixels")
  if status == PXL_CODEC_OK {
    precondition(infoStatus == PXL_CODEC_OK && walk.frames >= 1, "frames decoded without a header")
    precondition(walk.frames == min(Int(info.frame_count), 16), "\(walk.frames) frames of \(info.frame_count)")
  } else {
    precondition(output.message.0 != 0, "decode_frames failed without a message")
  }
  report += "; frames \(status.rawValue) x\(walk.frames) sum \(walk.sum)"

  var color = pxl_codec_color()
  let colorStatus = data.withUnsafeBufferPointer { pxl_avif_color($0.baseAddress, $0.count, &color) }
  if color.icc != nil {
    var sum: UInt64 = 0
    for i in 0..<color.icc_size { sum &+= UInt64(color.icc[i]) }
    report += "; icc \(color.icc_size) bytes sum \(sum)"
  }
  pxl_codec_color_free(&color)
  return report + "; color \(colorStatus.rawValue) \(color.cicp_primaries)/\(color.cicp_transfer)/\(color.cicp_matrix)"
}

@main
enum Main {
  static func main() { runFuzzTarget(name: "avif", fuzzOne) }
}
