import PixloadCore

/// The variant a per-format fuzz target (AVIF, WebP) decodes an input with, from
/// `FuzzChoices`: full size, the common thumbnails, a 1x1, a narrow FIT and a tall FILL,
/// in any pixel format, with or without orientation.
public func formatFuzzVariant(for data: [UInt8]) -> ImageVariant {
  var choices = FuzzChoices(data)
  func take(_ n: UInt64) -> Int { choices.take(n) }
  let sizes: [(Int, Int, ScaleMode)] = [(0, 0, .fit), (150, 150, .fill), (150, 150, .fit), (1, 1, .fill),
                                        (1 + take(64), 0, .fit), (7, 300, .fill)]
  let (width, height, mode) = sizes[take(UInt64(sizes.count))]
  let format = PixelFormat.allCases[take(UInt64(PixelFormat.allCases.count))]
  return ImageRequest(url: "fuzz:", targetWidth: width, targetHeight: height, mode: mode, format: format,
                      appliesOrientation: take(2) == 0).variant
}

/// Checks what decoding an input as `variant` gave (a failure has a message; an image is
/// at least 1x1, tightly packed in the variant's format, never wider than asked) and says
/// it in a line: the sizes, the frame count and a byte sum of the first frame, or the error.
public func checkedFormatDecode(_ result: Result<Image, LoadError>, variant: ImageVariant) -> String {
  let asked = "\(variant.width)x\(variant.height) \(variant.format)"
  switch result {
  case .failure(let error):
    precondition(!error.message.isEmpty, "a failure without a message")
    return "\(asked): \(error.status) \(error.message)"
  case .success(let image):
    precondition(image.width >= 1 && image.height >= 1 && image.stride == image.width * variant.format.bytesPerPixel)
    if variant.width > 0 { precondition(image.width <= max(variant.width, 1), "wider than asked") }
    let bytes = image.pixels.assumingMemoryBound(to: UInt8.self)
    var sum: UInt64 = 0
    for i in 0..<image.byteCount { sum &+= UInt64(bytes[i]) }
    return "\(asked): \(image.width)x\(image.height), frames \(image.frameCount), sum \(sum)"
  }
}
