#if canImport(Glibc)
import Glibc
#endif

/// A codec of pxl_codec's shape (pixload.h, "Codecs"): one registered with a loader (in C:
/// pxl_loader_add_codec), or a built-in format's (`BuiltInCodecs`). Bytes in, pixels out:
/// it never sees the loader. Every function may run on any decode thread, several at once.
public protocol ExternalCodec: AnyObject, Sendable {
  /// The short name ("qoi", "heic"): what the format list shows and what removes it.
  var id: String { get }
  /// The decoder's version: part of the disk key of the thumbnails it made.
  var version: String { get }
  /// decode writes premultiplied alpha (else straight).
  var writesPremultiplied: Bool { get }
  /// decode accepts a prefix of the file (`CodecTarget.partial`) for previews.
  var isProgressive: Bool { get }
  /// decodeFrames gives every frame of an animation; false: the first frame only.
  var decodesFrames: Bool { get }
  /// decode draws at any size, also above the header's (a vector format).
  var isScalable: Bool { get }
  /// chooseSize may answer something else than nil (default true).
  var choosesSize: Bool { get }
  func sniff(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool
  func readHeader(_ bytes: UnsafeBufferPointer<UInt8>, keepOrientation: Bool) -> Result<CodecHeader, CodecFailure>
  /// The ICC profile of `size` bytes the header announced; nil when it cannot be read.
  func readICC(_ bytes: UnsafeBufferPointer<UInt8>, size: Int) -> [UInt8]?
  /// The size the codec draws when asked for the whole image at `width` x `height`; nil:
  /// the header's size.
  func chooseSize(_ bytes: UnsafeBufferPointer<UInt8>, keepOrientation: Bool, width: Int,
                  height: Int) -> (width: Int, height: Int)?
  /// Draws the first frame into `target`; nil on success.
  func decode(_ bytes: UnsafeBufferPointer<UInt8>, into target: CodecTarget) -> CodecFailure?
  /// Every frame into `target` in turn, `frameDone(duration)` after each (false: stop).
  func decodeFrames(_ bytes: UnsafeBufferPointer<UInt8>, into target: CodecTarget,
                    frameDone: (Int) -> Bool) -> CodecFailure?
  /// The last call: the host's destroy(user_data).
  func destroy()
  /// openFrames, nextFrame and closeFrames work (pxl_codec.open_frames): frames one at a
  /// time from the codec's state, for animation players. False by default.
  var readsFrames: Bool { get }
  /// The codec's state for reading `bytes` frame by frame (valid until closeFrames).
  func openFrames(_ bytes: UnsafeBufferPointer<UInt8>) -> Result<UnsafeMutableRawPointer?, CodecFailure>
  /// Draws the next frame into `target` (the header's size, the same buffer every call):
  /// its duration, or nil after the last frame.
  func nextFrame(_ state: UnsafeMutableRawPointer?, into target: CodecTarget) -> Result<Int?, CodecFailure>
  func closeFrames(_ state: UnsafeMutableRawPointer?)
}

extension ExternalCodec {
  /// Whether chooseSize may answer anything but nil (pxl_codec.choose_size is set): an
  /// isolated codec asks its worker only then.
  public var choosesSize: Bool { true }

  public var readsFrames: Bool { false }
  public func openFrames(_ bytes: UnsafeBufferPointer<UInt8>) -> Result<UnsafeMutableRawPointer?, CodecFailure> {
    .failure(CodecFailure(.unsupportedImage, "\(id) does not read frames one at a time"))
  }
  public func nextFrame(_ state: UnsafeMutableRawPointer?, into target: CodecTarget) -> Result<Int?, CodecFailure> {
    .failure(CodecFailure(.unsupportedImage, "\(id) does not read frames one at a time"))
  }
  public func closeFrames(_ state: UnsafeMutableRawPointer?) {}
}

/// What a codec's header reader reports (pxl_codec_header).
public struct CodecHeader: Sendable {
  public var width = 0, height = 0
  public var frameCount = 1, loopCount = 0
  public var orientation = 1
  public var hasAlpha = true
  public var iccSize = 0
  public var cicpPrimaries: Int32 = 0, cicpTransfer: Int32 = 0, cicpMatrix: Int32 = 0
  public init() {}
}

/// A codec function's failure: the status it returned and its message.
public struct CodecFailure: Error, Sendable {
  public var status: Status
  public var message: String
  public init(_ status: Status, _ message: String) {
    self.status = status
    self.message = message
  }
}

/// The buffer a codec draws into (pxl_codec_target): RGBA8, `stride` bytes per row, zeroed.
public struct CodecTarget {
  public let pixels: UnsafeMutablePointer<UInt8>
  public let width: Int, height: Int, stride: Int
  public let keepOrientation: Bool
  /// The bytes are a prefix of a file still arriving (a preview).
  public let partial: Bool
  /// Non-zero once nobody wants the result (every requester cancelled, or the loader is
  /// closing).
  public let cancel: UnsafePointer<Int32>
}

/// A loader's codecs, in order, for the decode stage: the built-in formats first
/// (`builtIns`, the same in every table), then the registered ones. A codec removed while decodes use it is
/// destroyed after the last of them; `close` (after the decode threads are joined)
/// destroys the rest, so no codec function runs once the loader is gone.
public final class CodecTable: @unchecked Sendable {
  final class Entry {
    let codec: ExternalCodec
    /// Its part of `CodecTable.signature`.
    let signature: CodecSignature.Codec
    /// What a disk variant it made records: `signature.stamp`; 0 for a built-in format.
    let stamp: UInt32
    /// A built-in format's capabilities beyond pxl_codec's shape (`NativeCodec`), which
    /// the decode stage uses in place of that shape; nil for a registered codec.
    let native: NativeCodec?
    var users = 0
    var removed = false
    var destroyed = false
    init(_ codec: ExternalCodec) {
      self.codec = codec
      signature = CodecSignature.Codec(id: codec.id, version: codec.version)
      stamp = signature.stamp
      native = nil
    }

    /// A built-in format: never removed, so never counted or destroyed.
    init(builtIn codec: BuiltInCodec) {
      self.codec = codec
      signature = CodecSignature.Codec(id: codec.id, version: codec.version)
      stamp = 0
      native = codec.native
    }
  }

  /// The built-in formats (`BuiltInCodecs`), in every table before its registered codecs,
  /// in pxl_loader_formats' order.
  static let builtIns: [Entry] = BuiltInCodecs.all.map(Entry.init(builtIn:))

  /// The built-in format whose codec takes `bytes`, or nil. Needs no lock and no release.
  static func builtIn(for bytes: UnsafeBufferPointer<UInt8>) -> Entry? {
    let head = UnsafeBufferPointer(rebasing: bytes[0..<min(bytes.count, sniffBytes)])
    return builtIns.first { $0.codec.sniff(head) }
  }

  static func builtIn(for data: [UInt8]) -> Entry? { data.withUnsafeBufferPointer { builtIn(for: $0) } }

  /// A table of the built-in formats alone (an `ImageDecoder` made without a loader's).
  static let builtInOnly = CodecTable()

  /// This table's built-in formats: `builtIns`, or under PXL_ISOLATION_ALL the same formats
  /// decoded in workers (`isolateBuiltIns`). Set before the table's first decode.
  private nonisolated(unsafe) var builtInEntries = CodecTable.builtIns
  private var builtInPool: WorkerPool?
  /// The built-in formats' workers (PXL_ISOLATION_ALL), or nil.
  public var builtInWorkers: WorkerPool? { builtInPool }

  /// PXL_ISOLATION_ALL: the built-in formats decode in `pool`'s workers (IsolatedBuiltIns),
  /// ended by `close`. Before the table's first decode (pxl_loader_new).
  public func isolateBuiltIns(_ pool: WorkerPool) {
    builtInEntries = IsolatedBuiltIns.codecs(pool).map(Entry.init(builtIn:))
    builtInPool = pool
  }

  /// The built-in format of this table whose codec takes `bytes`, or nil.
  func builtIn(for bytes: UnsafeBufferPointer<UInt8>) -> Entry? {
    let head = UnsafeBufferPointer(rebasing: bytes[0..<min(bytes.count, Self.sniffBytes)])
    return builtInEntries.first { $0.codec.sniff(head) }
  }

  func builtIn(for data: [UInt8]) -> Entry? { data.withUnsafeBufferPointer { builtIn(for: $0) } }

  private let lock = Lock()
  private var entries: [Entry] = []
  private var closed = false
  /// The cancel flags of the decodes under way.
  private var cancelFlags: [ObjectIdentifier: CancelFlag] = [:]
  private var cancelling = false
  /// Cached `signature`.
  private var signatureValue = CodecSignature.none

  public init() {}

  /// Whether `id` is a codec's name: 1..31 of [a-z0-9_-].
  public static func isValidID(_ id: String) -> Bool {
    let bytes = Array(id.utf8)
    return (1...31).contains(bytes.count) && bytes.allSatisfy {
      (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5F || $0 == 0x2D
    }
  }

  /// Adds `codec` last. Throws invalidArgument (bad or taken id, the name of a built-in
  /// format) or loaderClosed; the caller then destroys it.
  public func add(_ codec: ExternalCodec) throws(LoadError) {
    guard Self.isValidID(codec.id), !Self.builtIns.contains(where: { $0.codec.id == codec.id }) else {
      throw LoadError(.invalidArgument, "codec id \"\(codec.id)\" is not of the form [a-z0-9_-]{1,31} or is built in")
    }
    let refusal: LoadError? = lock.withLock {
      if closed { return LoadError(.loaderClosed, "the loader is closed") }
      if entries.contains(where: { $0.codec.id == codec.id }) {
        return LoadError(.invalidArgument, "a codec \"\(codec.id)\" is already registered")
      }
      entries.append(Entry(codec))
      updateSignature()
      return nil
    }
    if let refusal { throw refusal }
  }

  /// Removes the codec named `id`; false when there is none.
  public func remove(_ id: String) -> Bool {
    let removed: Entry? = lock.withLock {
      guard let index = entries.firstIndex(where: { $0.codec.id == id }) else { return nil }
      let entry = entries.remove(at: index)
      entry.removed = true
      updateSignature()
      return entry
    }
    guard let removed else { return false }
    // Not in use: destroyed now; otherwise by the last decode using it (`release`).
    if claimDestroy(removed) { removed.codec.destroy() }
    return true
  }

  /// The registered codecs' ids, in order (not the built-in formats').
  public var ids: [String] { lock.withLock { entries.map(\.codec.id) } }

  public var isEmpty: Bool { lock.withLock { entries.isEmpty } }

  /// The first registered codec that decodes in a worker (pixload.h, "Isolation"), or nil.
  public var firstIsolated: IsolatedCodec? {
    lock.withLock { entries.lazy.compactMap { $0.codec as? IsolatedCodec }.first }
  }

  /// What the registered codecs are, as part of a variant's memory key
  /// (`ImageVariant.codecs`); `.none` for none.
  public var signature: CodecSignature { lock.withLock { signatureValue } }

  private func updateSignature() {
    signatureValue = CodecSignature(entries.map(\.signature))
  }

  /// The first codec that takes `bytes`, a built-in format's first, in use until
  /// `release`d; nil for none. Sniffs outside the lock, over the first
  /// PXL_CODEC_SNIFF_BYTES.
  func acquire(for bytes: UnsafeBufferPointer<UInt8>) -> Entry? {
    if let builtIn = builtIn(for: bytes) { return builtIn }
    let candidates: [Entry] = lock.withLock {
      if closed || bytes.isEmpty { return [] }
      for entry in entries { entry.users += 1 }
      return entries
    }
    let head = UnsafeBufferPointer(rebasing: bytes[0..<min(bytes.count, Self.sniffBytes)])
    var found: Entry?
    for entry in candidates where found == nil && entry.codec.sniff(head) { found = entry }
    for entry in candidates where entry !== found { release(entry) }
    return found
  }

  /// Bytes sniff is given at most (pixload.h: PXL_CODEC_SNIFF_BYTES).
  static let sniffBytes = 4096

  func release(_ entry: Entry) {
    if entry.native != nil { return }
    lock.withLock { entry.users -= 1 }
    if claimDestroy(entry) { entry.codec.destroy() }
  }

  /// Whether the caller is the one to destroy `entry`: removed, unused, not yet destroyed.
  private func claimDestroy(_ entry: Entry) -> Bool {
    lock.withLock {
      guard entry.removed, entry.users == 0, !entry.destroyed else { return false }
      entry.destroyed = true
      return true
    }
  }

  /// Lets `cancelAll` raise one decode's cancel flag (the coordinator's for the decode
  /// task, raised also when its last requester leaves), until `unregister`; raised at
  /// once when closing.
  func register(_ flag: CancelFlag) {
    lock.withLock {
      if cancelling { flag.raise() }
      cancelFlags[ObjectIdentifier(flag)] = flag
    }
  }

  func unregister(_ flag: CancelFlag) {
    lock.withLock { _ = cancelFlags.removeValue(forKey: ObjectIdentifier(flag)) }
  }

  /// Raises every decode's cancel flag, and those of decodes that start later: the loader
  /// is closing.
  public func cancelAll() {
    lock.withLock {
      cancelling = true
      for flag in cancelFlags.values { flag.raise() }
    }
  }

  /// After the decode threads are joined: no codec is used again; each is destroyed now,
  /// or by its last user should one still run.
  public func close() {
    let idle: [Entry] = lock.withLock {
      closed = true
      cancelling = true
      let all = entries
      entries.removeAll()
      updateSignature()
      for entry in all { entry.removed = true }
      return all
    }
    for entry in idle where claimDestroy(entry) { entry.codec.destroy() }
    builtInPool?.destroy()
  }
}
