/// Which codecs a loader has registered, in order, as a value (`ImageVariant.codecs`, part of
/// the memory key): each codec's id and version and the stamp a disk variant it made
/// records (`Image.decoderStamp`). Built and compared as a value: nobody re-reads it from
/// text. Empty for none (the built-in formats are never part of it: their pixels do not
/// depend on the codecs registered).
public struct CodecSignature: Hashable, Sendable, CustomStringConvertible {
  /// One registered codec.
  public struct Codec: Hashable, Sendable {
    public let id: String
    public let version: String
    /// A 32-bit digest of "id@version", never 0 (0 is the built-in decoders'): what a disk
    /// variant this codec made records.
    public let stamp: UInt32

    public init(id: String, version: String) {
      self.id = id
      self.version = version
      // The digest of the text 0.5.0 wrote, where commas and line breaks separated the
      // key's parts: kept, so thumbnails already on disk stay current.
      stamp = KeyHash.stamp(of: id + "@" + String(version.map { $0 == "," || $0.isNewline ? "_" : $0 }))
    }

    /// The stamp alone: a memory-key lookup hashes one integer per codec, not its texts.
    public func hash(into hasher: inout Hasher) { hasher.combine(stamp) }
  }

  public let codecs: [Codec]

  public init(_ codecs: [Codec] = []) { self.codecs = codecs }

  /// None registered.
  public static let none = CodecSignature()

  public var isEmpty: Bool { codecs.isEmpty }

  /// The stamps of these codecs: a disk variant one of them made is current; one another
  /// codec made (another version, or one not registered now) is not.
  public var stamps: Set<UInt32> { Set(codecs.map(\.stamp)) }

  /// "id@version,..." for logs and messages.
  public var description: String { codecs.map { "\($0.id)@\($0.version)" }.joined(separator: ",") }
}
