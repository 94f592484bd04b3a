/// `data:` URIs (RFC 2397): `data:[<media type>][;base64],<data>`. The media type is
/// ignored (the decoders sniff the bytes, as for any response); the data is
/// percent-decoded, then base64-decoded when the parameters end with `;base64`.
enum DataURI {
  /// The bytes of `text` (a whole `data:` URI), refusing a body over `maxBytes` before
  /// decoding it: the size is computed from the text first.
  static func decode(_ text: String, maxBytes: Int) -> Result<[UInt8], LoadError> {
    let utf8 = Array(text.utf8)
    guard utf8.count >= 5, let comma = utf8.firstIndex(of: UInt8(ascii: ",")) else {
      return .failure(LoadError(.malformedURL, "data: URI without a comma"))
    }
    let parameters = String(decoding: utf8[5..<comma], as: UTF8.self).lowercased()
    let isBase64 = parameters.split(separator: ";").last.map { $0.trimmingCharacters(in: " ") == "base64" } ?? false
    let payload = utf8[(comma + 1)...]
    // Percent-decoding only shrinks: the decoded size is known from the text, so a body
    // over the limit is refused before any decoding.
    let escapes = payload.indices.filter { payload[$0] == UInt8(ascii: "%") && isEscape(payload, at: $0) }.count
    if !isBase64 {
      guard payload.count - 2 * escapes <= maxBytes else { return .failure(tooLarge(maxBytes)) }
      return .success(percentDecoded(payload))
    }
    // Base64, under percent-encoding (a `+` or `/` may arrive escaped): 6 bits a character.
    let ignored = payload.lazy.filter { $0 == UInt8(ascii: "=") || $0 == UInt8(ascii: " ") }.count
    guard (payload.count - 2 * escapes - ignored) * 3 / 4 <= maxBytes else { return .failure(tooLarge(maxBytes)) }
    guard let bytes = base64Decoded(percentDecoded(payload)) else {
      return .failure(LoadError(.malformedURL, "data: URI with invalid base64"))
    }
    guard bytes.count <= maxBytes else { return .failure(tooLarge(maxBytes)) }
    return .success(bytes)
  }

  private static func tooLarge(_ maxBytes: Int) -> LoadError {
    LoadError(.bodyTooLarge, "data: URI body larger than the limit (\(maxBytes) bytes)")
  }

  private static func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
    default: return nil
    }
  }

  private static func isEscape(_ text: ArraySlice<UInt8>, at index: Int) -> Bool {
    index + 2 < text.endIndex && hexValue(text[index + 1]) != nil && hexValue(text[index + 2]) != nil
  }

  /// `%XX` as a byte; a `%` not followed by two hex digits stays as it is (as browsers do).
  private static func percentDecoded(_ text: ArraySlice<UInt8>) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(text.count)
    var index = text.startIndex
    while index < text.endIndex {
      if text[index] == UInt8(ascii: "%"), isEscape(text, at: index) {
        out.append(hexValue(text[index + 1])! << 4 | hexValue(text[index + 2])!)
        index += 3
      } else {
        out.append(text[index])
        index += 1
      }
    }
    return out
  }

  /// Standard or URL-safe alphabet; spaces are skipped; `=` only as padding at the end.
  /// nil for any other character, or a length no base64 text has.
  private static func base64Decoded(_ text: [UInt8]) -> [UInt8]? {
    var out: [UInt8] = []
    out.reserveCapacity(text.count / 4 * 3)
    var accumulator: UInt32 = 0
    var bits = 0
    var padding = 0
    for byte in text {
      let value: UInt8
      switch byte {
      case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte - UInt8(ascii: "A")
      case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte - UInt8(ascii: "a") + 26
      case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0") + 52
      case UInt8(ascii: "+"), UInt8(ascii: "-"): value = 62
      case UInt8(ascii: "/"), UInt8(ascii: "_"): value = 63
      case UInt8(ascii: "="):
        padding += 1
        continue
      case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"), UInt8(ascii: "\n"): continue
      default: return nil
      }
      if padding > 0 { return nil }  // data after padding
      accumulator = accumulator << 6 | UInt32(value)
      bits += 6
      if bits >= 8 {
        bits -= 8
        out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
      }
    }
    // 6 leftover bits cannot end a base64 text (one character of a final quantum).
    return bits == 6 || padding > 2 ? nil : out
  }
}
