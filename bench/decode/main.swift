// pixload-bench-decode: CPU time per image of pixload's decode path (ImageDecoder: shim,
// DCT scaling, area resample, orientation) against libjpeg-turbo / libpng called directly
// (bench/direct), on the same files, in the same process, interleaved image by image.
//
//   pixload-bench-decode [--reps N] [--mode full|thumb|both] [--only ours|direct] LIST
//   pixload-bench-decode --peak ours|direct full|thumb FILE
//   pixload-bench-decode --color [--reps N] PAIRS
//
// LIST names one file per line. `make bench-decode` (scripts/bench-decode.sh) builds it in
// release mode and runs it over the real-world photos and PNGs of ../shared/corpus and the
// demo photos. Full size is RGBA8 at the stored size; a thumbnail is 150x150 fill RGBA8.
// Each repetition times every image on both sides (alternating which goes first) with the
// thread's CPU clock; the report gives, per kind of file, the median over repetitions of
// the CPU milliseconds per image, and the ratio ours / direct of those medians.
//
// Both sides decode without colour management (the direct side has none): like for like.
// --color times colour management instead: PAIRS names a tagged file and the same file
// without its profile per line, then a kind to group them by (tab-separated); ImageDecoder
// with colour management on, tagged against untagged, interleaved, 150x150 fill and full
// size.
//
// --only runs one side alone (for `valgrind --tool=callgrind`); --peak decodes FILE once
// and prints the peak resident set before and after (task: memory of thumbnails).
import BenchDirect
import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

struct Sample {
  let path: String
  let data: [UInt8]
  let kind: String
  let megapixels: Double
}

enum Side: String { case ours, direct }

let thumbSize = 150

func fail(_ message: String) -> Never {
  fputs("bench-decode: \(message)\n", stderr)
  exit(1)
}

func readFile(_ path: String) -> [UInt8] {
  guard let file = fopen(path, "rb") else { fail("cannot open \(path)") }
  defer { fclose(file) }
  var data: [UInt8] = []
  var chunk = [UInt8](repeating: 0, count: 1 << 16)
  while true {
    let n = fread(&chunk, 1, chunk.count, file)
    if n <= 0 { break }
    data += chunk[0..<n]
  }
  return data
}

func variant(thumb: Bool, managesColor: Bool = false) -> ImageVariant {
  var request = ImageRequest(url: "bench:", targetWidth: thumb ? thumbSize : 0, targetHeight: thumb ? thumbSize : 0,
                             mode: .fill, format: .rgba8)
  request.managesColor = managesColor
  return request.variant
}

let fullVariant = variant(thumb: false), thumbVariant = variant(thumb: true)

/// One decode on our side; the pixels are freed before it returns.
@inline(never)
func decodeOurs(_ data: [UInt8], thumb: Bool) -> Bool {
  if case .success = ImageDecoder().decode(data, variant: thumb ? thumbVariant : fullVariant,
                                           maxPixels: 100_000_000) { return true }
  return false
}

/// One decode on the direct side; the pixels are freed before it returns.
@inline(never)
func decodeDirect(_ data: [UInt8], thumb: Bool) -> Bool {
  var image = bench_image()
  let size = Int32(thumb ? thumbSize : 0)
  let rc = data.withUnsafeBufferPointer { bench_direct_decode($0.baseAddress, $0.count, size, size, &image) }
  free(image.pixels)
  return rc == 0
}

func timed(_ side: Side, _ sample: Sample, thumb: Bool) -> Double {
  let start = bench_thread_cpu_ms()
  let ok = side == .ours ? decodeOurs(sample.data, thumb: thumb) : decodeDirect(sample.data, thumb: thumb)
  let spent = bench_thread_cpu_ms() - start
  if !ok { fail("\(side) failed to decode \(sample.path)") }
  return spent
}

/// Untimed check that both sides produce the same thing: identical bytes at full size,
/// the same size (and a small mean difference: different resamplers) for thumbnails.
func compareOutputs(_ samples: [Sample], thumb: Bool) -> String {
  var identical = 0, sameSize = 0, diffSum = 0.0, bytes = 0.0
  for sample in samples {
    guard case .success(let ours) = ImageDecoder().decode(sample.data, variant: thumb ? thumbVariant : fullVariant,
                                                          maxPixels: 100_000_000) else {
      fail("ours failed to decode \(sample.path)")
    }
    var direct = bench_image()
    let size = Int32(thumb ? thumbSize : 0)
    guard sample.data.withUnsafeBufferPointer({ bench_direct_decode($0.baseAddress, $0.count, size, size, &direct) }) == 0
    else { fail("direct failed to decode \(sample.path)") }
    defer { free(direct.pixels) }
    guard ours.width == Int(direct.width) && ours.height == Int(direct.height) else {
      if !thumb { print("  size differs: \(sample.path) \(ours.width)x\(ours.height) vs \(direct.width)x\(direct.height)") }
      continue
    }
    sameSize += 1
    let n = ours.width * ours.height * 4
    if memcmp(ours.pixels, direct.pixels, n) == 0 { identical += 1 }
    let a = ours.pixels.assumingMemoryBound(to: UInt8.self)
    for i in 0..<n { diffSum += Double(abs(Int(a[i]) - Int(direct.pixels[i]))) }
    bytes += Double(n)
  }
  let mean = bytes > 0 ? diffSum / bytes : 0
  return "\(identical)/\(samples.count) byte-identical, \(sameSize)/\(samples.count) same size, mean |difference| \(fmt(mean, 2)) levels"
}

func fmt(_ value: Double, _ digits: Int) -> String {
  var buffer = [CChar](repeating: 0, count: 64)
  _ = withVaList([value]) { vsnprintf(&buffer, buffer.count, "%.\(digits)f", $0) }
  return String(cString: buffer)
}

func median(_ values: [Double]) -> Double {
  let s = values.sorted()
  return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
func lpad(_ s: String, _ n: Int) -> String { s.count >= n ? s : String(repeating: " ", count: n - s.count) + s }

func run(_ samples: [Sample], thumb: Bool, reps: Int, only: Side?) {
  let kinds = Array(Set(samples.map(\.kind))).sorted()
  // perRep[side][kind][rep] = total CPU ms of that kind's images in that repetition
  var totals: [Side: [String: [Double]]] = [.ours: [:], .direct: [:]]
  for side in [Side.ours, .direct] { for kind in kinds + ["all"] { totals[side]![kind] = Array(repeating: 0, count: reps) } }
  for rep in 0..<reps {
    for (i, sample) in samples.enumerated() {
      let order: [Side] = only.map { [$0] } ?? ((rep + i) % 2 == 0 ? [.ours, .direct] : [.direct, .ours])
      for side in order {
        let ms = timed(side, sample, thumb: thumb)
        totals[side]![sample.kind]![rep] += ms
        totals[side]!["all"]![rep] += ms
      }
    }
  }
  let title = thumb ? "150x150 fill" : "full size"
  print("\n\(title): CPU ms per image, median of \(reps) repetitions")
  print("  \(pad("kind", 22)) \(lpad("files", 5)) \(lpad("Mpx", 5))  \(lpad("ours", 8)) \(lpad("direct", 8)) \(lpad("ours/direct", 11))")
  for kind in kinds + ["all"] {
    let group = kind == "all" ? samples : samples.filter { $0.kind == kind }
    let mpx = group.map(\.megapixels).reduce(0, +) / Double(group.count)
    let ours = median(totals[.ours]![kind]!) / Double(group.count)
    let direct = median(totals[.direct]![kind]!) / Double(group.count)
    let ratio = only == nil ? fmt(ours / direct, 3) : "-"
    print("  \(pad(kind, 22)) \(lpad(String(group.count), 5)) \(lpad(fmt(mpx, 2), 5))  "
          + "\(lpad(fmt(ours, 2), 8)) \(lpad(fmt(direct, 2), 8)) \(lpad(ratio, 11))")
  }
}

func peak(side: Side, thumb: Bool, path: String) {
  let data = readFile(path)
  let before = bench_max_rss_kib()
  let ok = side == .ours ? decodeOurs(data, thumb: thumb) : decodeDirect(data, thumb: thumb)
  if !ok { fail("\(side) failed to decode \(path)") }
  let after = bench_max_rss_kib()
  print("peak \(side) \(thumb ? "thumb" : "full") \(path): maxrss before decode \(before) KiB, after \(after) KiB, "
        + "decode added \(after - before) KiB (file \(data.count / 1024) KiB)")
}

func main() {
  var args = Array(CommandLine.arguments.dropFirst())
  var reps = 5, modes = [false, true], only: Side?
  func usage() -> Never {
    fail("usage: pixload-bench-decode [--reps N] [--mode full|thumb|both] [--only ours|direct] LIST\n"
         + "       pixload-bench-decode --peak ours|direct full|thumb FILE")
  }
  if args.first == "--color" {
    args.removeFirst()
    if args.first == "--reps" {
      args.removeFirst()
      guard let n = Int(args.first ?? ""), n > 0 else { usage() }
      reps = n
      args.removeFirst()
    }
    guard args.count == 1 else { usage() }
    colorCost(pairsFile: args[0], reps: reps)
    return
  }
  if args.first == "--peak" {
    guard args.count == 4, let side = Side(rawValue: args[1]), ["full", "thumb"].contains(args[2]) else { usage() }
    peak(side: side, thumb: args[2] == "thumb", path: args[3])
    return
  }
  while args.count > 1 {
    switch args.removeFirst() {
    case "--reps": guard let n = Int(args.removeFirst()), n > 0 else { usage() }; reps = n
    case "--mode":
      switch args.removeFirst() {
      case "full": modes = [false]
      case "thumb": modes = [true]
      case "both": modes = [false, true]
      default: usage()
      }
    case "--only": guard let side = Side(rawValue: args.removeFirst()) else { usage() }; only = side
    default: usage()
    }
  }
  guard args.count == 1 else { usage() }
  let list = String(decoding: readFile(args[0]), as: UTF8.self)
  let paths = list.split(separator: "\n").map(String.init).filter { !$0.isEmpty }
  let samples: [Sample] = paths.map { path in
    let data = readFile(path)
    let kind = data.withUnsafeBufferPointer { String(cString: bench_kind($0.baseAddress, $0.count)) }
    var image = bench_image()
    guard data.withUnsafeBufferPointer({ bench_direct_decode($0.baseAddress, $0.count, 0, 0, &image) }) == 0 else {
      fail("cannot decode \(path)")
    }
    free(image.pixels)
    return Sample(path: path, data: data, kind: kind, megapixels: Double(image.width) * Double(image.height) / 1e6)
  }
  if samples.isEmpty { fail("no files in \(args[0])") }
  print("bench-decode: \(samples.count) files, \(reps) repetitions, CPU time of the decoding thread "
        + "(CLOCK_THREAD_CPUTIME_ID), both sides interleaved image by image")
  for thumb in modes {
    if only == nil {
      // Also the warm-up: every file decoded once on each side before timing.
      print("\(thumb ? "150x150 fill" : "full size") outputs: \(compareOutputs(samples, thumb: thumb))")
    }
    run(samples, thumb: thumb, reps: reps, only: only)
  }
}

/// CPU per image of ImageDecoder with colour management on, tagged files against the same
/// files untagged (which cost nothing extra: no transform).
func colorCost(pairsFile: String, reps: Int) {
  let lines = String(decoding: readFile(pairsFile), as: UTF8.self).split(separator: "\n")
  let pairs: [(tagged: [UInt8], untagged: [UInt8], kind: String)] = lines.compactMap { line in
    let parts = line.split(separator: "\t").map(String.init)
    return parts.count >= 2 ? (readFile(parts[0]), readFile(parts[1]), parts.count > 2 ? parts[2] : "tagged") : nil
  }
  if pairs.isEmpty { fail("no pairs in \(pairsFile)") }
  let kinds = Array(Set(pairs.map(\.kind))).sorted()
  print("bench-decode --color: \(pairs.count) tagged files and the same files untagged, \(reps) repetitions, "
        + "ImageDecoder with colour management, CPU of the decoding thread")
  for thumb in [true, false] {
    let managed = variant(thumb: thumb, managesColor: true)
    var tagged: [String: [Double]] = [:], untagged: [String: [Double]] = [:]
    for kind in kinds { tagged[kind] = Array(repeating: 0, count: reps); untagged[kind] = tagged[kind] }
    for pair in pairs {  // warm-up: the transforms are built here
      _ = ImageDecoder().decode(pair.tagged, variant: managed, maxPixels: 100_000_000)
      _ = ImageDecoder().decode(pair.untagged, variant: managed, maxPixels: 100_000_000)
    }
    for rep in 0..<reps {
      for (i, pair) in pairs.enumerated() {
        for isTagged in (rep + i) % 2 == 0 ? [true, false] : [false, true] {
          let start = bench_thread_cpu_ms()
          guard case .success = ImageDecoder().decode(isTagged ? pair.tagged : pair.untagged, variant: managed,
                                                      maxPixels: 100_000_000) else { fail("decode failed") }
          let spent = bench_thread_cpu_ms() - start
          if isTagged { tagged[pair.kind]![rep] += spent } else { untagged[pair.kind]![rep] += spent }
        }
      }
    }
    for kind in kinds {
      let count = Double(pairs.filter { $0.kind == kind }.count)
      let t = median(tagged[kind]!) / count, u = median(untagged[kind]!) / count
      print("  \(pad(thumb ? "150x150 fill" : "full size", 13)) \(pad(kind, 11)) \(lpad(String(Int(count)), 3)) files  "
            + "tagged \(lpad(fmt(t, 3), 8)) ms  untagged \(lpad(fmt(u, 3), 8)) ms  "
            + "colour management \(t >= u ? "+" : "")\(fmt(t - u, 3)) ms (\(fmt(100 * (t - u) / u, 1)) %)")
    }
  }
}

main()
