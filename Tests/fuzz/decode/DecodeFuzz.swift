// libFuzzer target on the decode entry point, `ImageDecoder().decode` (shim + DCT scaling +
// area resample + EXIF orientation). `make fuzz-decode` builds it with
// `-sanitize=fuzzer,address` and runs it seeded from ../shared/corpus.
//
// Tests/fuzz/driver runs it: under libFuzzer in the fuzz build, and in a plain build
// (`swift build`, `swift test`) `pixload-fuzz-decode FILE...` runs each file through the
// same `fuzzOne` and prints the variant and the outcome, which is how a crash input is
// reproduced without the sanitizer build.
import FuzzDriver
import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

/// 16 Mpx: the largest photos of the corpus (8.3 Mpx) still decode, and the worst case
/// (a progressive 4:4:4 JPEG: 4 bytes of output and 6 of coefficients per pixel) stays
/// far below libFuzzer's RSS limit.
let fuzzMaxPixels: UInt64 = 16_000_000

/// The variant an input is decoded with. It is chosen by a hash of the input's length and
/// its last 8 bytes, not by a prefix, so every corpus file is a valid seed as it stands,
/// and the fuzzer can still steer the choice: bytes after a JPEG's EOI or a PNG's IEND
/// are ignored by the decoders, so mutating them changes only the variant.
func fuzzVariant(for data: [UInt8]) -> ImageRequest {
  var choices = FuzzChoices(data)
  func take(_ n: UInt64) -> Int { choices.take(n) }

  let small = 1 + take(64), other = 1 + take(300)
  let (width, height, mode): (Int, Int, ScaleMode)
  switch take(8) {
  case 0: (width, height, mode) = (0, 0, .fit)  // full size
  case 1: (width, height, mode) = (150, 150, .fill)
  case 2: (width, height, mode) = (150, 150, .fit)
  case 3: (width, height, mode) = (1, 1, .fill)
  case 4: (width, height, mode) = (small, 0, .fit)
  case 5: (width, height, mode) = (0, small, .fit)
  case 6: (width, height, mode) = (small, other, .fill)
  default: (width, height, mode) = (other, small, .fit)
  }
  let format = PixelFormat.allCases[take(UInt64(PixelFormat.allCases.count))]
  var request = ImageRequest(url: "fuzz:", targetWidth: width, targetHeight: height, mode: mode,
                             format: format, appliesOrientation: take(2) == 0)
  // One input in four takes the animation path (every frame of a GIF, WebP or AVIF
  // sequence through decodeFrames, resampled like a still).
  request.animates = take(4) == 0
  return request
}

/// Decodes one input; on success checks what the decoder promises and reads every
/// output byte (so AddressSanitizer catches an image smaller than it claims to be).
/// Traps on a broken promise: libFuzzer then keeps the input as a crash.
@discardableResult
func fuzzOne(_ data: [UInt8]) -> String {
  let request = fuzzVariant(for: data)
  let variant = request.variant
  let what = "\(variant.width)x\(variant.height) \(variant.mode) \(variant.format) orientation=\(variant.appliesOrientation)"
    + (variant.animates ? " animated" : "")
  switch ImageDecoder().decode(data, variant: variant, maxPixels: fuzzMaxPixels) {
  case .failure(let error):
    precondition(!error.message.isEmpty, "a failure without a message")
    return "\(what): \(error.status) \(error.message)"
  case .success(let image):
    let w = image.width, h = image.height
    precondition(w >= 1 && h >= 1, "empty image \(w)x\(h)")
    precondition(image.stride == w * variant.format.bytesPerPixel, "stride \(image.stride) for width \(w)")
    precondition(image.format == variant.format, "format \(image.format) for \(variant.format)")
    precondition(w <= image.originalWidth && h <= image.originalHeight,
                 "upscaled: \(w)x\(h) from \(image.originalWidth)x\(image.originalHeight)")
    if variant.mode == .fill && variant.width > 0 && variant.height > 0 {
      precondition(w <= variant.width && h <= variant.height, "fill gave \(w)x\(h)")
      if image.originalWidth >= variant.width && image.originalHeight >= variant.height {
        precondition(w == variant.width && h == variant.height, "fill gave \(w)x\(h)")
      }
    } else {
      if variant.width > 0 { precondition(w <= variant.width, "fit gave \(w)x\(h)") }
      if variant.height > 0 { precondition(h <= variant.height, "fit gave \(w)x\(h)") }
      if variant.width == 0 && variant.height == 0 {
        precondition(w == image.originalWidth && h == image.originalHeight, "full size gave \(w)x\(h)")
      }
    }
    precondition(variant.animates || image.frameCount == 1, "frames without animates")
    var sum: UInt64 = 0
    for index in 0..<image.frameCount {
      guard let frame = index == 0 ? image.pixels : image.framePixels(index) else {
        preconditionFailure("frame \(index) of \(image.frameCount) missing")
      }
      let bytes = frame.assumingMemoryBound(to: UInt8.self)
      for i in 0..<image.byteCount { sum &+= UInt64(bytes[i]) }
    }
    return "\(what): \(w)x\(h) of \(image.originalWidth)x\(image.originalHeight), \(image.frameCount) frame(s), byte sum \(sum)"
  }
}

@main
enum Main {
  static func main() { runFuzzTarget(name: "decode", fuzzOne) }
}
