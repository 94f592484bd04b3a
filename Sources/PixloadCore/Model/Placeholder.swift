/// A tiny placeholder a server sends with an image's URL, drawn before the image arrives:
/// BlurHash (https://blurha.sh: base 83 text, a DCT of the image in linear light) or
/// ThumbHash (https://evanw.github.io/thumbhash: about 25 bytes in an LPQA colour space,
/// with alpha and the aspect ratio). The value only: Decoding decodes and encodes it
/// (`PlaceholderHashes.swift`).
public struct Placeholder: Sendable, Equatable {
  /// C: pxl_placeholder_kind (append-only raw values).
  public enum Kind: Int32, Sendable {
    /// The BlurHash string's bytes (ASCII).
    case blurHash = 1
    /// The ThumbHash's raw bytes.
    case thumbHash = 2
  }

  public var kind: Kind
  public var bytes: [UInt8]

  public init(kind: Kind, bytes: [UInt8]) {
    self.kind = kind
    self.bytes = bytes
  }

  /// The largest image a placeholder decodes into, each way.
  public static let maxSide = 256

  /// More bytes than any hash has (the longest, a BlurHash of 9x9 components, has 166): a
  /// longer one is malformed whatever it holds, so a caller copying a hash from a buffer
  /// needs no more than one byte past this to know.
  public static let maxHashBytes = 1 << 16
}
