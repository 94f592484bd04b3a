// libFuzzer target on the QOI test codec through the library's own registration path
// (`make fuzz-qoi-loader` builds it with -sanitize=fuzzer,address and runs it on the QOI
// seeds): a loader made by pxl_loader_new (no modules, no disk cache), the codec added by
// its module function (Tests/fuzz/qoi/module) through the real pxl_loader_add_codec (its
// checks, CCodec, the loader's CodecTable), and each input decoded by that loader's own
// decoder, as its decode stage does: built-in sniffers first, then the codec table's
// sniff, read_header, max_pixels and the animation bound, read_icc, decode_frames or
// choose_size + decode, then layout, resize, colour and orientation
// (ImageDecoder+Codecs.swift). The variant is picked from the input's length and last
// bytes (FuzzChoices), animated or not by its length. A plain build (`swift build`)
// replays files: `pixload-fuzz-qoi FILE...`.
import CPixload
import FuzzDriver
@testable import Pixload
@testable import PixloadCore
import QOIModule
#if canImport(Glibc)
import Glibc
#endif

/// As the module fuzz targets: enough for the seeds, far below libFuzzer's RSS limit.
let fuzzMaxPixels: UInt64 = 4_000_000

/// A loader whose only codec is QOI, registered as a module registers one; kept for the
/// whole run (a global, so LeakSanitizer sees it reachable).
let qoiLoader: OpaquePointer = {
  var config = pxl_config()
  precondition(pxl_config_init_size(&config, MemoryLayout<pxl_config>.size) == PXL_OK)
  config.disk_cache_bytes = 0
  var handle: OpaquePointer?
  let status = "".withCString { none -> pxl_status in
    config.codec_modules = none // "": no module from disk, only the one registered below
    return pxl_loader_new(&config, &handle)
  }
  precondition(status == PXL_OK && handle != nil, "pxl_loader_new: \(status)")
  precondition(pxl_codec_module_register(handle) == PXL_OK, "the QOI module did not register")
  precondition(loader(handle)!.codecs.ids == ["qoi"], "codecs: \(loader(handle)!.codecs.ids)")
  return handle!
}()

/// What the loader's decode stage decodes with.
let decoder: ImageDecoding = loader(qoiLoader)!.decoder

@discardableResult
func fuzzOne(_ data: [UInt8]) -> String {
  var variant = formatFuzzVariant(for: data)
  variant.animates = data.count % 2 == 0
  return checkedFormatDecode(decoder.decode(data, variant: variant, maxPixels: fuzzMaxPixels), variant: variant)
}

@main
enum Main {
  static func main() { runFuzzTarget(name: "qoi", fuzzOne) }
}
