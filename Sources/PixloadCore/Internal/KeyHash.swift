/// The 32-hex-digit name of a string key: two independent 64-bit FNV-1a hashes. The disk
/// cache names its files with it and a cache key fingerprints credentials with it; both
/// must keep computing the same digits, or every entry on disk is orphaned.
enum KeyHash {
  static let firstSeed: UInt64 = 0xcbf2_9ce4_8422_2325
  static let secondSeed: UInt64 = 0x84222325_cbf29ce4

  /// 32 hex digits: `prefix(of:)` then the second hash.
  static func name(of key: String) -> String {
    prefix(of: key) + hex(fnv1a(Array(key.utf8), seed: secondSeed))
  }

  /// The first 16 of the 32 hex digits.
  static func prefix(of key: String) -> String { hex(fnv1a(Array(key.utf8), seed: firstSeed)) }

  static func fnv1a(_ bytes: [UInt8], seed: UInt64) -> UInt64 {
    var hash = seed
    for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
    return hash
  }

  static func hex(_ value: UInt64) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out = [UInt8](repeating: 0, count: 16)
    for i in 0..<16 { out[i] = digits[Int((value >> UInt64(60 - i * 4)) & 0xF)] }
    return String(decoding: out, as: UTF8.self)
  }

  /// A 32-bit digest of `text` that is never 0 (0 says "none" where it is stored).
  static func stamp(of text: String) -> UInt32 {
    let hash = fnv1a(Array(text.utf8), seed: firstSeed)
    let folded = UInt32(truncatingIfNeeded: hash ^ (hash >> 32))
    return folded == 0 ? 1 : folded
  }
}
