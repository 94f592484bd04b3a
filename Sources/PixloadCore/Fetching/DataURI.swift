/// `data:` URIs (RFC 2397: `data:[<media type>][;base64],<data>`), read as browsers read
/// them: the fetch standard's data: URL processor
/// (https://fetch.spec.whatwg.org/#data-url-processor) with the infra standard's
/// forgiving-base64 decode (https://infra.spec.whatwg.org/#forgiving-base64-decode). So
/// the fragment is not data; the data is percent-decoded, a `%` without two hex digits
/// staying as it is; it is base64 when the media type ends with `;base64` (any case,
/// spaces allowed before `base64`), whose ASCII whitespace is ignored and whose `=`
/// padding is optional. The media type is ignored otherwise (the decoders sniff the
/// bytes, as for any response).
enum DataURI {
  /// The bytes of `text` (a whole `data:` URI), refusing a body over `maxBytes` before
  /// decoding it: the size is computed from the text first.
  static func decode(_ text: String, maxBytes: Int) -> Result<[UInt8], LoadError> {
    let url = Array(text.utf8).prefix { $0 != UInt8(ascii: "#") }
    guard let comma = url.dropFirst(5).firstIndex(of: UInt8(ascii: ",")) else {
      return .failure(LoadError(.malformedURL, "data: URI without a comma"))
    }
    let payload = url[(comma + 1)...]
    // Percent-decoding only shrinks: the decoded size is known from the text, so a body
    // over the limit is refused before any decoding.
    let escapes = payload.indices.filter { payload[$0] == UInt8(ascii: "%") && isEscape(payload, at: $0) }.count
    guard isBase64(mediaType: url[5..<comma]) else {
      guard payload.count - 2 * escapes <= maxBytes else { return .failure(tooLarge(maxBytes)) }
      return .success(percentDecoded(payload))
    }
    // Base64, under percent-encoding (a `+` or `/` may arrive escaped): 6 bits a character.
    // The characters counted are the percent-decoded ones that are not `=` or whitespace,
    // whether they came raw or escaped (`%0A`, `%20`, `%3D` are ignored as `\n`, ` `, `=`
    // are), so the estimate is the decoded size: never above it.
    guard base64Characters(payload) * 3 / 4 <= maxBytes else { return .failure(tooLarge(maxBytes)) }
    guard let bytes = forgivingBase64Decoded(percentDecoded(payload)) else {
      return .failure(LoadError(.malformedURL, "data: URI with invalid base64"))
    }
    guard bytes.count <= maxBytes else { return .failure(tooLarge(maxBytes)) }
    return .success(bytes)
  }

  /// Whether the media type (between `data:` and the comma) ends with `;`, any spaces,
  /// then `base64` in any case, ASCII whitespace around it ignored: the fetch standard's
  /// test, so `data:base64,` (no semicolon) is not base64.
  private static func isBase64(mediaType: ArraySlice<UInt8>) -> Bool {
    var type = mediaType.drop(while: isASCIIWhitespace)
    while let last = type.last, isASCIIWhitespace(last) { type.removeLast() }
    guard type.count >= 7, String(decoding: type.suffix(6), as: UTF8.self).lowercased() == "base64" else { return false }
    return type.dropLast(6).reversed().first { $0 != UInt8(ascii: " ") } == UInt8(ascii: ";")
  }

  /// TAB, LF, FF, CR and SPACE (the infra standard's ASCII whitespace).
  private static func isASCIIWhitespace(_ byte: UInt8) -> Bool {
    byte == 0x09 || byte == 0x0A || byte == 0x0C || byte == 0x0D || byte == 0x20
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

  /// How many characters of `text`, once percent-decoded, forgiving-base64 decodes (all
  /// but `=` and ASCII whitespace), without decoding it.
  private static func base64Characters(_ text: ArraySlice<UInt8>) -> Int {
    var count = 0
    var index = text.startIndex
    while index < text.endIndex {
      var byte = text[index]
      if byte == UInt8(ascii: "%"), isEscape(text, at: index) {
        byte = hexValue(text[index + 1])! << 4 | hexValue(text[index + 2])!
        index += 3
      } else {
        index += 1
      }
      if byte != UInt8(ascii: "="), !isASCIIWhitespace(byte) { count += 1 }
    }
    return count
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

  /// The forgiving-base64 decode: ASCII whitespace removed; one or two `=` removed when
  /// the length is a multiple of 4; then only the standard alphabet (`+`, `/`; not the
  /// URL-safe `-`, `_`), and not a length that leaves 1 character over (6 bits make no
  /// byte); the bits past the last whole byte are dropped. nil when it is not base64.
  private static func forgivingBase64Decoded(_ text: [UInt8]) -> [UInt8]? {
    var data = text.filter { !isASCIIWhitespace($0) }
    if data.count % 4 == 0, data.last == UInt8(ascii: "=") {
      data.removeLast()
      if data.last == UInt8(ascii: "=") { data.removeLast() }
    }
    guard data.count % 4 != 1 else { return nil }
    var out: [UInt8] = []
    out.reserveCapacity(data.count / 4 * 3 + 2)
    var accumulator: UInt32 = 0
    var bits = 0
    for byte in data {
      let value: UInt8
      switch byte {
      case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte - UInt8(ascii: "A")
      case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte - UInt8(ascii: "a") + 26
      case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0") + 52
      case UInt8(ascii: "+"): value = 62
      case UInt8(ascii: "/"): value = 63
      default: return nil
      }
      accumulator = accumulator << 6 | UInt32(value)
      bits += 6
      if bits >= 8 {
        bits -= 8
        out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
      }
    }
    return out
  }
}
