/// A rectangle in pixel coordinates with fractional edges (area sampling needs them).
struct PixelRect: Equatable {
  var x: Double, y: Double, width: Double, height: Double

  func scaled(x sx: Double, y sy: Double) -> PixelRect {
    PixelRect(x: x * sx, y: y * sy, width: width * sx, height: height * sy)
  }

  func isWhole(width w: Int, height h: Int) -> Bool {
    abs(x) < 1e-9 && abs(y) < 1e-9 && abs(width - Double(w)) < 1e-9 && abs(height - Double(h)) < 1e-9
  }
}

/// Where the pixels of a request come from and what size they end up: computed in display
/// space (after EXIF orientation, where the host's target lives), then mapped back to the
/// stored orientation in which the decoder produces pixels.
///
/// Rules: never upscale. FIT scales the whole image to fit inside the target (a target of
/// 0 in one dimension leaves it unconstrained; 0x0 is the original size); sizes round to
/// the nearest pixel, at least 1. FILL takes the largest centred region with the target's
/// aspect ratio and scales it to exactly the target, or keeps that region at its own
/// resolution when it is smaller than the target.
struct SizePlan {
  let displayWidth: Int
  let displayHeight: Int
  let outputWidth: Int
  let outputHeight: Int
  let displayCrop: PixelRect
  let swapsAxes: Bool

  init(sourceWidth: Int, sourceHeight: Int, orientation: Orientation, targetWidth: Int,
       targetHeight: Int, mode: ScaleMode) {
    swapsAxes = orientation.swapsAxes
    displayWidth = swapsAxes ? sourceHeight : sourceWidth
    displayHeight = swapsAxes ? sourceWidth : sourceHeight
    let w = Double(displayWidth), h = Double(displayHeight)
    if mode == .fill && targetWidth > 0 && targetHeight > 0 {
      let aspect = Double(targetWidth) / Double(targetHeight)
      let cropWidth = min(w, h * aspect), cropHeight = min(h, w / aspect)
      displayCrop = PixelRect(x: (w - cropWidth) / 2, y: (h - cropHeight) / 2, width: cropWidth, height: cropHeight)
      if cropWidth >= Double(targetWidth) {
        outputWidth = targetWidth
        outputHeight = targetHeight
      } else {
        outputWidth = max(1, Int(cropWidth.rounded()))
        outputHeight = max(1, Int(cropHeight.rounded()))
      }
    } else {
      let scaleX = targetWidth > 0 ? Double(targetWidth) / w : 1
      let scaleY = targetHeight > 0 ? Double(targetHeight) / h : 1
      let scale = min(scaleX, scaleY, 1)
      outputWidth = max(1, Int((w * scale).rounded()))
      outputHeight = max(1, Int((h * scale).rounded()))
      displayCrop = PixelRect(x: 0, y: 0, width: w, height: h)
    }
  }

  /// The output size in stored orientation.
  var storedOutputWidth: Int { swapsAxes ? outputHeight : outputWidth }
  var storedOutputHeight: Int { swapsAxes ? outputWidth : outputHeight }

  /// The crop in stored orientation. The crop is centred, and every EXIF transform maps a
  /// centred rectangle to a centred one, so only the axes swap.
  var storedCrop: PixelRect {
    swapsAxes ? PixelRect(x: displayCrop.y, y: displayCrop.x, width: displayCrop.height, height: displayCrop.width)
              : displayCrop
  }

  /// The largest libjpeg scale denominator (8, 4, 2, 1) whose output still covers the
  /// crop at the output size, so the resample only ever shrinks.
  var dctScaleDenominator: Int {
    let crop = storedCrop
    for denominator in [8, 4, 2] {
      let d = Double(denominator)
      if crop.width / d >= Double(storedOutputWidth) && crop.height / d >= Double(storedOutputHeight) {
        return denominator
      }
    }
    return 1
  }
}
