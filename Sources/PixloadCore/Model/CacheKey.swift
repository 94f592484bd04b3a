/// The identity of one resource's bytes in both caches, and the grammar of every key made
/// from it: nobody else joins, splits or prefixes key text.
///
/// Grammar (stable: disk entries of earlier versions are found by it):
///
///     key          = caller's key | url | url "\n" fingerprint(headers joined by "\n")
///     variant key  = descriptor "\n" key                       (a decoded variant on disk)
///     descriptor   = "v" rendition " " W "x" H " mode=" m " format=" f " orient=" 0|1 [" nocolor"]
///                    [" process=" chain]
///     chain        = "[" step *(";" step) "]"      (ImageProcessor.canonical: kind(params),
///                                                    a custom id percent-escaped)
///
/// Which registered codec decoded a variant (modules included, their versions saying the
/// module's and its library's) is not part of the key but of the entry (DiskCache+Variants:
/// the decoder stamp), checked against the loader's codecs when read: a thumbnail an older
/// decoder made is never served once it changed, and one the built-in decoders made stays
/// valid whatever modules are loaded. (0.5.0 development builds wrote a " codecs=" part
/// naming every registered codec; such entries are never looked up again and age out.)
///
/// A line break cannot be part of a URL or of a header line, so no request without
/// per-request headers shares a key with one that sent credentials.
public struct CacheKey: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
  public let text: String

  /// A key given as it is (the caller's, or one read back).
  public init(_ text: String) { self.text = text }
  public init(stringLiteral text: String) { self.text = text }

  /// The caller's key when given; else the URL, with a fingerprint of the per-request
  /// headers (Authorization, Cookie...) when there are any, so that a response fetched with
  /// one user's credentials is never handed to a request that did not send the same.
  public init(url: String, headers: [String], callersKey: String?) {
    if let callersKey {
      text = callersKey
    } else if headers.isEmpty {
      text = url
    } else {
      text = url + "\n" + KeyHash.name(of: headers.joined(separator: "\n"))
    }
  }

  public var description: String { text }

  /// Whether this key is `key` or a credentialed key made from the URL `key` (what removing
  /// a key by its URL also removes).
  public func belongs(to key: String) -> Bool {
    text == key || text.hasPrefix(key + "\n")
  }

  /// The descriptor of `variant` at `rendition` (the disk tier's version of its pixels).
  public static func variantDescriptor(_ variant: ImageVariant, rendition: Int) -> String {
    "v\(rendition) \(variant.width)x\(variant.height) mode=\(variant.mode.rawValue) format=\(variant.format.rawValue) "
      + "orient=\(variant.appliesOrientation ? 1 : 0)" + (variant.managesColor ? "" : " nocolor")
      + (variant.chain.isEmpty ? "" : " process=" + variant.chain.canonical)
  }
}

/// The disk key of one decoded variant (the grammar's `variant key`) as a value: the
/// resource's `CacheKey` and the variant's descriptor (size, mode, format, orientation,
/// colour, the chain's canonical form). The disk tier makes it, the disk cache names and
/// checks its entries by it; nobody re-parses its text.
public struct VariantKey: Hashable, Sendable, CustomStringConvertible {
  public let cacheKey: CacheKey
  public let descriptor: String

  public init(cacheKey: CacheKey, descriptor: String) {
    self.cacheKey = cacheKey
    self.descriptor = descriptor
  }

  /// The key of `variant` at `rendition` (the disk tier's version of its pixels).
  public init(_ variant: ImageVariant, rendition: Int) {
    self.init(cacheKey: variant.cacheKey, descriptor: CacheKey.variantDescriptor(variant, rendition: rendition))
  }

  /// The key's text, as a variant entry stores it: the descriptor (no line break) first, so
  /// that the pair maps to one string whatever the cache key holds.
  public var text: String { descriptor + "\n" + cacheKey.text }
  public var description: String { text }
}
