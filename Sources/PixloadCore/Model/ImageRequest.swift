/// Pixel layouts an image can be delivered in. Raw values are the C API's `pxl_format`.
public enum PixelFormat: Int32, Sendable, CaseIterable {
  case rgba8 = 0
  case rgba8Premultiplied = 1
  case bgra8Premultiplied = 2
  case rgb8 = 3
  case gray8 = 4

  public var bytesPerPixel: Int {
    switch self {
    case .rgba8, .rgba8Premultiplied, .bgra8Premultiplied: return 4
    case .rgb8: return 3
    case .gray8: return 1
    }
  }

  var hasAlpha: Bool { bytesPerPixel == 4 }
  var isPremultiplied: Bool { self == .rgba8Premultiplied || self == .bgra8Premultiplied }
}

/// How an image is fitted to its target size. Raw values are the C API's `pxl_mode`.
public enum ScaleMode: Int32, Sendable {
  /// Scale down to fit inside the target, keeping the aspect ratio.
  case fit = 0
  /// Scale down to cover the target, then crop the centre to exactly the target.
  case fill = 1
}

/// What a host asks for. Two requests with equal `variant` produce identical images.
public struct ImageRequest: Sendable {
  public var url: String
  /// The caller's cache key (signed or tokenised URLs), nil for none.
  public var explicitCacheKey: String?
  /// Requests with equal keys share one download and one cache entry: the caller's key, or
  /// the URL; with per-request headers (credentials) and no caller's key, the URL plus a
  /// fingerprint of those headers, so that a response fetched with one user's
  /// Authorization or Cookie is never handed to a request that did not send the same.
  public var cacheKey: CacheKey { CacheKey(url: url, headers: headers, callersKey: explicitCacheKey) }
  public var targetWidth: Int
  public var targetHeight: Int
  public var mode: ScaleMode
  public var format: PixelFormat
  public var priority: Int32
  public var appliesOrientation: Bool
  public var usesMemoryCache: Bool
  /// "Name: value" lines added to the loader's for the transfer this request starts.
  public var headers: [String]
  /// At most one progress report per interval reaches the request's queue.
  public var progressIntervalMilliseconds: Int
  /// At most one preview (a progressive JPEG still downloading) per interval; 0: no limit.
  public var previewIntervalMilliseconds = 250
  /// Where the bytes may come from. Only requests of the same policy are merged: a
  /// request never fails (or skips the network) because of another requester's flag.
  public var cachePolicy: CachePolicy = .normal
  /// Every frame of an animated source (pixload.h: PXL_FLAG_ANIMATE); false: the first
  /// frame only. An animated and a still request are different variants.
  public var animates = false
  /// The decoded first frame also carries the encoded bytes (`Image.encodedSource`), for
  /// an animation player (AnimationPlayer). A variant of its own, never a disk variant.
  public var keepsSource = false
  /// The network transfer waits this long before it may start, so that a request
  /// cancelled within it costs no connection and no bytes (tables set it during flings).
  public var startDelayMilliseconds = 0
  /// Convert an embedded colour profile (ICC, PNG cHRM/gAMA, AVIF nclx) to sRGB; false keeps
  /// the decoded values (PXL_FLAG_NO_COLOR_MANAGEMENT). Part of the variant.
  public var managesColor = true
  /// Processors applied after the resize and orientation, in order (ImageProcessor). Part
  /// of the variant.
  public var processors: [ImageProcessor] = []
  /// A placeholder a table draws for the row at once, before its image (not part of the
  /// variant: it changes nothing the loader produces).
  public var placeholder: Placeholder?

  public enum CachePolicy: Sendable {
    /// Memory, then disk, then network.
    case normal
    /// Ignore both caches (they are still written): a forced refresh.
    case reload
    /// Memory, then disk; never the network (offline): a miss fails with `.notCached`.
    case cacheOnly
  }

  public init(url: String, cacheKey: String? = nil, targetWidth: Int = 0, targetHeight: Int = 0,
              mode: ScaleMode = .fit, format: PixelFormat = .rgba8, priority: Int32 = 0,
              appliesOrientation: Bool = true, usesMemoryCache: Bool = true, headers: [String] = [],
              progressIntervalMilliseconds: Int = 100) {
    self.headers = headers
    self.progressIntervalMilliseconds = progressIntervalMilliseconds
    self.url = url
    self.explicitCacheKey = cacheKey
    self.targetWidth = targetWidth
    self.targetHeight = targetHeight
    self.mode = mode
    self.format = format
    self.priority = priority
    self.appliesOrientation = appliesOrientation
    self.usesMemoryCache = usesMemoryCache
  }

  /// Identifies the decoded result: the memory-cache key and the decode-coalescing key.
  public var variant: ImageVariant {
    ImageVariant(cacheKey: cacheKey, width: targetWidth, height: targetHeight, mode: mode,
                 format: format, appliesOrientation: appliesOrientation, animates: animates,
                 keepsSource: keepsSource, managesColor: managesColor, chain: ProcessorChain(processors))
  }
}

/// One decoded rendition of one source: the key of the memory cache and of decode merging.
public struct ImageVariant: Hashable, Sendable {
  public var cacheKey: CacheKey
  public var width: Int
  public var height: Int
  public var mode: ScaleMode
  public var format: PixelFormat
  public var appliesOrientation: Bool
  /// All frames of an animation, or only the first.
  public var animates = false
  /// The image carries the encoded bytes too (ImageRequest.keepsSource).
  public var keepsSource = false
  /// Converted to sRGB (the default), or the decoded values: two different renditions.
  public var managesColor = true
  /// The loader's registered codecs (`CodecTable.signature`): another decoder may give
  /// other pixels. `.none` for none. Part of the memory key only: a disk variant records
  /// the one codec that made it (`Image.decoderStamp`), checked against
  /// `codecs.stamps`, so that adding or upgrading a module does not miss every other
  /// format's thumbnails on disk.
  public var codecs = CodecSignature.none
  /// The processor chain applied to the decoded pixels (empty: none); its identity is its
  /// canonical form, which the disk key (`VariantKey`) reads too.
  public var chain = ProcessorChain()
  /// The chain's steps.
  public var processors: [ImageProcessor] {
    get { chain.steps }
    set { chain = ProcessorChain(newValue) }
  }
}
