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
