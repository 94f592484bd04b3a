// libFuzzer target on the disk cache's entry reader, `DiskCache.entry(for:)`: the input is
// written as the entry file of a key in a private temporary directory, then read back.
// `make fuzz-diskentry` builds it with `-sanitize=fuzzer,address` and `-enable-testing`
// (it uses the cache's internal file naming and checksum through `@testable import`).
//
// A file on disk is as hostile as a network body: another process, an older version, a
// damaged disk or a user may have written it. What the reader promises, checked here:
//  - it never crashes, whatever the bytes (lengths near Int.max, truncated headers, ...);
//  - a well-formed entry for the key (magic, version, lengths that add up, the same key,
//    a matching checksum) is a hit with exactly the stored body and metadata;
//  - anything else is a miss, and a damaged file is deleted (another key's entry, a hash
//    collision, is left alone).
// The same bytes are also read as a decoded variant's entry (DiskCache+Variants.swift):
// never a trap, and a hit only with pixels that fill the file's stated shape.
// Most inputs would fail the checksum, so for half of them (chosen by the input's length
// and last byte, as the decode target does) the target first writes the correct checksum
// into the header: the fuzzer then explores what lies behind that check too.
//
// A plain build (`swift build`, `swift test`) has no libFuzzer: there
// `pixload-fuzz-diskentry FILE...` replays files through the same `fuzzOne`.
import FuzzDriver
@testable import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

let headerSize = 48

/// The private directory of this process, created once and removed at exit.
let fuzzDirectory: String = {
  var template = Array("/tmp/pxl-fuzz-diskentry.XXXXXX".utf8CString)
  guard let made = mkdtemp(&template) else { fatalError("mkdtemp failed") }
  let path = String(cString: made)
  atexit {
    // Only what this target writes lives there: entry files, the ledger, temporaries.
    if let dir = opendir(fuzzDirectory) {
      while let item = readdir(dir) {
        let name = withUnsafeBytes(of: item.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
        if name != "." && name != ".." { unlink(fuzzDirectory + "/" + name) }
      }
      closedir(dir)
    }
    rmdir(fuzzDirectory)
  }
  return path
}()

let fuzzCache: DiskCache = {
  do {
    return try DiskCache(directory: fuzzDirectory, capacityBytes: 1 << 30, maxAgeSeconds: 0, log: { _ in })
  } catch {
    fatalError("cannot open the disk cache in \(fuzzDirectory): \(error)")
  }
}()

func littleEndian(_ bytes: [UInt8], _ offset: Int, _ width: Int) -> UInt64 {
  var value: UInt64 = 0
  for i in 0..<width where offset + i < bytes.count { value |= UInt64(bytes[offset + i]) << UInt64(8 * i) }
  return value
}

/// What an independent reading of the header says the file holds, when its lengths add up.
struct Layout {
  var keyLength = 0, etagLength = 0, modifiedLength = 0
  var bodyLength: UInt64 = 0
  var addsUp = false
}

func layout(of data: [UInt8]) -> Layout {
  var layout = Layout()
  guard data.count >= headerSize else { return layout }
  layout.keyLength = Int(littleEndian(data, 8, 4))
  layout.etagLength = Int(littleEndian(data, 12, 4))
  layout.modifiedLength = Int(littleEndian(data, 16, 4))
  layout.bodyLength = littleEndian(data, 24, 8)
  let fixed = headerSize + layout.keyLength + layout.etagLength + layout.modifiedLength
  layout.addsUp = layout.bodyLength <= UInt64(data.count) && fixed + Int(layout.bodyLength) == data.count
  return layout
}

/// The reader compares keys as decoded strings (invalid UTF-8 repaired), so the oracle does too.
func storedKeyMatches(_ data: [UInt8], _ shape: Layout, _ key: String) -> Bool {
  String(decoding: data[headerSize..<(headerSize + shape.keyLength)], as: UTF8.self) == key
}

/// `input` as the variant entry of a fixed key: whatever it holds, reading it does not trap;
/// a hit's image has the pixels the file says, and the file is left in place.
func fuzzVariant(_ input: [UInt8]) -> String {
  let path = fuzzDirectory + "/" + DiskCache.variantFileName(VariantKey(cacheKey: CacheKey("fuzz-key"), descriptor: "fuzz"))
  let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
  precondition(fd >= 0, "cannot write \(path)")
  let written = input.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
  precondition(written == input.count, "short write")
  close(fd)
  defer { unlink(path) }
  guard let hit = fuzzCache.variant(VariantKey(cacheKey: CacheKey("fuzz-key"), descriptor: "fuzz")) else { return "" }
  precondition(access(path, F_OK) == 0, "a hit deleted its file")
  let image = hit.image
  precondition(image.byteCount == Int(littleEndian(input, 48, 8)) && image.stride >= image.width * image.format.bytesPerPixel,
               "a variant's image differs from its header")
  precondition(image.byteCount == input.count - DiskCache.variantHeaderSize - Int(littleEndian(input, 8, 4))
               - Int(littleEndian(input, 12, 4)) - Int(littleEndian(input, 16, 4)), "the pixels are not the file's tail")
  return "variant hit: \(image.width)x\(image.height); "
}

@discardableResult
func fuzzOne(_ input: [UInt8]) -> String {
  let variant = fuzzVariant(input)
  var data = input
  let shape = layout(of: data)
  let fixesChecksum = ((data.count &+ Int(data.last ?? 0)) & 1) == 0
  let bodyStart = headerSize + shape.keyLength + shape.etagLength + shape.modifiedLength
  if fixesChecksum && shape.addsUp {
    let sum = DiskCache.checksum(Array(data[bodyStart...]))
    for i in 0..<8 { data[32 + i] = UInt8(truncatingIfNeeded: sum >> UInt64(8 * i)) }
  }
  // The key the entry claims, so that a well-formed file is read as a hit; keys that are
  // not valid UTF-8 cannot be asked for (String repairs them) and end up as misses.
  var key = "fuzz-key"
  if shape.addsUp, shape.keyLength > 0 {
    key = String(decoding: data[headerSize..<(headerSize + shape.keyLength)], as: UTF8.self)
  }
  let path = fuzzDirectory + "/" + DiskCache.fileName(for: key)
  let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
  precondition(fd >= 0, "cannot write \(path)")
  let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
  precondition(written == data.count, "short write")
  close(fd)

  let wellFormed = shape.addsUp
    && littleEndian(data, 0, 4) == 0x4358_4C50 && littleEndian(data, 4, 4) == 1
    && storedKeyMatches(data, shape, key)
    && DiskCache.checksum(Array(data[bodyStart...])) == littleEndian(data, 32, 8)
  let entry = fuzzCache.entry(for: key)
  let stillThere = access(path, F_OK) == 0
  defer { unlink(path) }
  guard let entry else {
    precondition(!wellFormed, "a well-formed entry was a miss")
    let otherKey = shape.addsUp && littleEndian(data, 0, 4) == 0x4358_4C50 && littleEndian(data, 4, 4) == 1
      && !storedKeyMatches(data, shape, key)
    precondition(stillThere == otherKey, otherKey ? "another key's entry was deleted" : "a bad entry was left in place")
    return variant + "miss (\(data.count) bytes, checksum \(fixesChecksum ? "fixed" : "as given"))"
  }
  precondition(wellFormed, "a damaged entry was a hit")
  precondition(stillThere, "a hit deleted its file")
  precondition(entry.bytes == Array(data[bodyStart...]), "the body differs from the file's")
  precondition(entry.metadata.expiresAt == littleEndian(data, 40, 8), "expiresAt differs")
  let etagEnd = headerSize + shape.keyLength + shape.etagLength
  precondition(entry.metadata.etag == String(decoding: data[(headerSize + shape.keyLength)..<etagEnd], as: UTF8.self),
               "the ETag differs")
  // What was read stores and reads back the same (the writer's side of the format).
  fuzzCache.store(entry.bytes, metadata: entry.metadata, for: key)
  let again = fuzzCache.entry(for: key)
  precondition(again?.bytes == entry.bytes && again?.metadata == entry.metadata, "a stored entry did not read back")
  return variant + "hit: \(entry.bytes.count) body bytes, etag \(entry.metadata.etag.utf8.count) bytes"
}

@main
enum Main {
  static func main() { runFuzzTarget(name: "diskentry", fuzzOne) }
}
