#if canImport(Glibc)
import Glibc
#endif

/// What a decoded variant records of the encoded bytes it was made from: their length and
/// checksum, as the original's entry header holds them.
public struct VariantOrigin: Sendable, Equatable {
  public var length: UInt64
  public var checksum: UInt64
}

/// A decoded variant read back from disk: the pixels, ready to deliver, with the HTTP
/// metadata of the original they were made from.
public struct VariantEntry: @unchecked Sendable {
  public var image: Image
  public var metadata: DiskCache.Metadata
  public var origin: VariantOrigin
}

/// Decoded variants (a thumbnail in its size, mode, pixel format and orientation) beside
/// the encoded entries, so that a warm start delivers thumbnails without decoding the
/// photographs again.
///
/// A variant entry is a file of the same directory, under the same rules as an encoded
/// one: written whole through a temporary file and a rename, counted in the shared ledger
/// and the size limit, evicted least recently used first, dropped past the age limit,
/// verified on every read. Its name is 32 hex digits like an encoded entry's; the first 16
/// are those of its original's name, so removing a key finds its variants.
///
/// Layout, little-endian (88-byte header):
///
///     0  u32 magic "PLXV"      4  u32 version (1)
///     8  u32 key length       12  u32 ETag length      16  u32 Last-Modified length
///    20  u32 width            24  u32 height           28  u32 stride (bytes per row)
///    32  u32 pixel format     36  u32 original width   40  u32 original height
///    44  u32 decoder          48  u64 pixel bytes (stride x height)
///    56  u64 checksum of the whole file, computed with these 8 bytes zero
///    64  u64 expiry of the original (seconds since 1970; 0: none)
///    72  u64 original's body length            80  u64 original's body checksum
///    88  key ("<descriptor>\n<cache key>"), ETag, Last-Modified, then the pixels
///
/// The decoder (`Image.decoderStamp`) is 0 for pixels the built-in decoders made (and in
/// every entry written before it was recorded: the field was reserved, zero); else the
/// stamp of the registered codec's "id@version". Such an entry is current only while that
/// very codec is registered (`currentCodecs`): one made by another version, or by a codec
/// no longer loaded, is outdated and the read drops it.
///
/// Raw pixels: a 150x150 RGBA thumbnail is 90 KB, read with two preads and one checksum
/// pass straight into the image's buffer (no codec, no copy).
///
/// Freshness follows the original (ImageLoader applies it): a variant carries its
/// original's expiry and validators as they were when it was made; it is served while
/// fresh by them without the original; a stale one is never revalidated on its own, the
/// request goes the encoded way (the original's entry revalidated, or fetched again if it
/// was evicted) and the variant is written anew from that result. A variant whose original
/// is on disk with other bytes (changed by a reload or a refetch) is outdated: the read
/// drops it. (When the original changes and is then evicted, the outdated variant, used
/// less recently than the new original, has gone first: eviction is least recently used.)
extension DiskCache {
  private static let variantMagic: UInt32 = 0x5658_4C50  // "PLXV" little-endian
  private static let variantVersion: UInt32 = 1
  static let variantHeaderSize = 88
  private static let variantChecksumOffset = 56

  /// The name of a variant's entry: its original's name prefix (so that removing the
  /// original finds it), then a hash of the key's text (`VariantKey.text`, which the entry
  /// also stores).
  static func variantFileName(_ key: VariantKey) -> String {
    namePrefix(for: key.cacheKey.text) + KeyHash.hex(KeyHash.fnv1a(Array(key.text.utf8), seed: KeyHash.secondSeed))
  }

  /// Stores `image` as the variant `key`, made from the bytes `origin`
  /// describes, whose response said `metadata`. Returns the bytes written, 0 when nothing
  /// was (larger than the whole cache, or a failed write, logged as for encoded entries).
  @discardableResult
  public func storeVariant(_ image: Image, _ key: VariantKey, metadata: Metadata,
                           origin: VariantOrigin) -> Int {
    let keyBytes = Array(key.text.utf8)
    let etag = Array(metadata.etag.utf8), modified = Array(metadata.lastModified.utf8)
    let pixelCount = image.byteCount
    let size = Self.variantHeaderSize + keyBytes.count + etag.count + modified.count + pixelCount
    guard size <= capacityBytes else { return 0 }
    var file: [UInt8] = []
    file.reserveCapacity(size)
    for field in [Self.variantMagic, Self.variantVersion, UInt32(keyBytes.count), UInt32(etag.count),
                  UInt32(modified.count), UInt32(image.width), UInt32(image.height), UInt32(image.stride),
                  UInt32(bitPattern: image.format.rawValue), UInt32(image.originalWidth),
                  UInt32(image.originalHeight), image.decoderStamp] {
      Self.append(field, to: &file)
    }
    for field in [UInt64(pixelCount), 0, metadata.expiresAt, origin.length, origin.checksum] {
      Self.append(field, to: &file)
    }
    file += keyBytes
    file += etag
    file += modified
    let metaCount = file.count
    file += UnsafeRawBufferPointer(start: image.pixels, count: pixelCount)
    let sum = file.withUnsafeBytes {
      Self.variantChecksum(meta: UnsafeRawBufferPointer(rebasing: $0[..<metaCount]),
                           pixels: UnsafeRawBufferPointer(rebasing: $0[metaCount...]))
    }
    withUnsafeBytes(of: sum.littleEndian) { sumBytes in
      for i in 0..<8 { file[Self.variantChecksumOffset + i] = sumBytes[i] }
    }
    return commit(file, name: Self.variantFileName(key)) ? size : 0
  }

  /// The variant `key`, verified; nil on a miss. A damaged entry is
  /// deleted and logged; one whose original is on disk with other bytes, or made by a
  /// registered codec not among `currentCodecs` (their stamps), is deleted silently
  /// (outdated, not damaged). Does not need the original: a variant whose original was
  /// evicted is still served.
  public func variant(_ key: VariantKey, currentCodecs: Set<UInt32> = []) -> VariantEntry? {
    let name = Self.variantFileName(key)
    let path = "\(directory)/\(name)"
    guard let (fd, size) = openUnexpired(name) else { return nil }
    defer { close(fd) }
    guard size >= Self.variantHeaderSize, size <= 1 << 31 else { return badVariant(name, path, "bad size \(size)") }

    // The header and the strings in one read (they are small); then the pixels.
    let metaGuess = min(size, Self.variantHeaderSize + 4096)
    var meta = [UInt8](repeating: 0, count: metaGuess)
    guard meta.withUnsafeMutableBytes({ preadFully(fd, $0.baseAddress!, metaGuess, 0) }) == metaGuess else {
      return badVariant(name, path, "short read")
    }
    var reader = ByteReader(meta)
    guard reader.u32() == Self.variantMagic, reader.u32() == Self.variantVersion else {
      return badVariant(name, path, "not a variant entry")
    }
    let keyLength = Int(reader.u32()), etagLength = Int(reader.u32()), modifiedLength = Int(reader.u32())
    let width = Int(reader.u32()), height = Int(reader.u32()), stride = Int(reader.u32())
    let format = PixelFormat(rawValue: Int32(bitPattern: reader.u32()))
    let originalWidth = Int(reader.u32()), originalHeight = Int(reader.u32())
    let decoder = reader.u32()
    let pixelCount = Int(clamping: reader.u64())
    let checksum = reader.u64()
    var metadata = Metadata()
    metadata.expiresAt = reader.u64()
    let origin = VariantOrigin(length: reader.u64(), checksum: reader.u64())
    let stringsLength = keyLength + etagLength + modifiedLength
    guard let format, width > 0, height > 0, stride >= width * format.bytesPerPixel, stride <= 1 << 20,
          height <= 1 << 20, pixelCount == stride * height, stringsLength <= size,
          Self.variantHeaderSize + stringsLength + pixelCount == size else {
      return badVariant(name, path, "lengths do not add up (torn or truncated)")
    }
    let metaCount = Self.variantHeaderSize + stringsLength
    if metaCount > meta.count {
      meta = [UInt8](repeating: 0, count: metaCount)
      guard meta.withUnsafeMutableBytes({ preadFully(fd, $0.baseAddress!, metaCount, 0) }) == metaCount else {
        return badVariant(name, path, "short read")
      }
      reader = ByteReader(meta)
    }
    reader.offset = Self.variantHeaderSize
    let storedKey = reader.string(keyLength)
    metadata.etag = reader.string(etagLength)
    metadata.lastModified = reader.string(modifiedLength)
    guard storedKey == key.text else { return nil }
    // Made by a codec not registered now (or in another version): outdated, not read.
    if decoder != 0 && !currentCodecs.contains(decoder) {
      delete(name)
      return nil
    }

    guard let pixels = malloc(max(1, pixelCount)) else { return nil }
    guard preadFully(fd, pixels, pixelCount, metaCount) == pixelCount else {
      free(pixels)
      return badVariant(name, path, "short read")
    }
    for i in 0..<8 { meta[Self.variantChecksumOffset + i] = 0 }
    let computed = meta.withUnsafeBytes { metaBytes in
      Self.variantChecksum(meta: UnsafeRawBufferPointer(rebasing: metaBytes[..<metaCount]),
                           pixels: UnsafeRawBufferPointer(start: pixels, count: pixelCount))
    }
    guard computed == checksum else {
      free(pixels)
      return badVariant(name, path, "checksum mismatch (corrupt)")
    }
    // Made from other bytes than the original now on disk: outdated.
    if let current = storedOrigin(for: key.cacheKey.text), current != origin {
      free(pixels)
      delete(name)
      return nil
    }
    futimens(fd, nil)  // the most recently used, for every process
    let image = Image(width: width, height: height, stride: stride, format: format, originalWidth: originalWidth,
                      originalHeight: originalHeight, takingPixels: pixels)
    image.decoderStamp = decoder
    return VariantEntry(image: image, metadata: metadata, origin: origin)
  }

  /// Deletes every variant of `cacheKey`: the entries whose names start as its entry's
  /// does and whose stored key says they belong to it. One pass over the directory's
  /// names; only those with the prefix are opened.
  func removeVariants(of cacheKey: String) {
    let prefix = Self.namePrefix(for: cacheKey), own = Self.fileName(for: cacheKey)
    guard let dir = opendir(directory) else { return }
    var candidates: [String] = []
    while let item = readdir(dir) {
      let name = withUnsafeBytes(of: item.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
      if name.count == 32, name.hasPrefix(prefix), name != own { candidates.append(name) }
    }
    closedir(dir)
    for name in candidates {
      let fd = open("\(directory)/\(name)", O_RDONLY | O_CLOEXEC)
      if fd < 0 { continue }
      var header = [UInt8](repeating: 0, count: Self.variantHeaderSize)
      let read = header.withUnsafeMutableBytes { preadFully(fd, $0.baseAddress!, Self.variantHeaderSize, 0) }
      var reader = ByteReader(header)
      let isVariant = read == Self.variantHeaderSize && reader.u32() == Self.variantMagic
        && reader.u32() == Self.variantVersion
      let keyLength = Int(reader.u32())
      let wanted = isVariant && keyLength <= 1 << 20 ? keyLength : 0
      var key = [UInt8](repeating: 0, count: wanted)
      let keyRead = key.withUnsafeMutableBytes { preadFully(fd, $0.baseAddress, wanted, Self.variantHeaderSize) }
      close(fd)
      guard isVariant, keyRead == keyLength, let newline = key.firstIndex(of: 10),
            key[(newline + 1)...].elementsEqual(cacheKey.utf8) else { continue }
      delete(name)
    }
  }

  private func badVariant(_ name: String, _ path: String, _ why: String) -> VariantEntry? {
    discard(name, path, why)
    return nil
  }

  /// One checksum over the header and strings (with the checksum field zero) and the
  /// pixels, which sit in two buffers when read.
  private static func variantChecksum(meta: UnsafeRawBufferPointer, pixels: UnsafeRawBufferPointer) -> UInt64 {
    let a = checksum(meta), b = checksum(pixels)
    var hash = (a ^ (b &* 0x9E37_79B9_7F4A_7C15)) &* 0xBF58_476D_1CE4_E5B9
    hash ^= hash >> 31
    return hash
  }
}

private func preadFully(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int, _ offset: Int) -> Int {
  guard count > 0, let buffer else { return 0 }
  var done = 0
  while done < count {
    let n = pread(fd, buffer + done, count - done, off_t(offset + done))
    if n < 0 && errno == EINTR { continue }
    if n <= 0 { break }
    done += n
  }
  return done
}
