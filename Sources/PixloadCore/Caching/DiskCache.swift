import CSupport
#if canImport(Glibc)
import Glibc
#endif

/// Encoded bytes on disk, one file per entry, named by a hash of the cache key; beside
/// them, decoded variants (DiskCache+Variants.swift) under the same rules.
///
/// An entry is a header (magic, version, lengths, checksum, dates, HTTP validators), the
/// key, then the body. Writes go to a temporary file renamed into place, so a reader (in
/// this process or another) sees a whole entry or none; a reader still verifies the length,
/// the key (a hash collision is a miss, never another image) and the checksum, and deletes
/// what fails. Recency is the file's modification time, touched on every hit, so that
/// several processes sharing the directory agree on what is least recently used.
///
/// - important: Methods do blocking file I/O: call them from the loader's disk threads,
///   never from the host's thread.
public final class DiskCache: @unchecked Sendable {
  /// What is stored beside the bytes.
  public struct Metadata: Sendable, Equatable {
    /// Seconds since 1970 after which the entry is stale; 0: no expiry known.
    public var expiresAt: UInt64 = 0
    public var etag: String = ""
    public var lastModified: String = ""
    public init() {}
  }

  public struct Entry: Sendable {
    public var bytes: [UInt8]
    public var metadata: Metadata
    /// `DiskCache.checksum(bytes)`, as the entry's header holds it: what a decoded
    /// variant records of the bytes it was made from.
    public var checksum: UInt64 = 0
  }

  public let directory: String
  public let capacityBytes: Int
  /// After an eviction the cache holds at most this much, so that evictions come in
  /// batches rather than one per write.
  public var lowWaterBytes: Int { capacityBytes / 10 * 9 }
  /// An entry not used for this many seconds is dropped (on its next read, and by the
  /// start-up scan and every eviction); 0: no age limit.
  public let maxAgeSeconds: Int

  private let lock = Lock()
  private var temporaryCounter: UInt64 = 0
  /// When a failed write (a full disk, no file descriptors) was last logged: later ones
  /// are not, for a minute. A full disk costs one log line, not one per image (a write
  /// that fits between failures must not start a new line either).
  private var writeFailureLoggedAt: UInt64?
  private static let writeFailureLogInterval: UInt64 = 60_000_000_000
  /// The directory's totals, shared by every process that uses it: the file ".ledger"
  /// holds the bytes and the number of entries, read and rewritten under flock. Every
  /// rename into place and every deletion updates it in the same critical section, so the
  /// limit is checked against what all processes wrote, not only this one. flock does not
  /// exclude threads that share a descriptor, hence the in-process lock around it.
  private let ledgerDescriptor: Int32
  private let ledgerLock = Lock()
  private struct Ledger: Equatable { var bytes = 0; var entries = 0 }
  private var lastSeen = Ledger()
  let log: (String) -> Void

  private static let magic: UInt32 = 0x4358_4C50  // "PLXC" little-endian
  private static let version: UInt32 = 1
  static let headerSize = 48
  /// Where an entry's header keeps its body's length and checksum (a variant reads them to
  /// tell whether its original changed).
  static let bodyLengthOffset = 24, checksumOffset = 32

  /// Creates the directory (0700) if needed. Throws when it cannot be created or written:
  /// the loader then runs memory-only and says so once.
  public init(directory: String, capacityBytes: Int, maxAgeSeconds: Int = 0,
              log: @escaping (String) -> Void) throws(LoadError) {
    self.directory = directory
    self.capacityBytes = max(0, capacityBytes)
    self.maxAgeSeconds = max(0, maxAgeSeconds)
    self.log = log
    try Self.makeDirectory(directory)
    // Writable? A probe file proves it before any load relies on it.
    let probe = "\(directory)/.probe-\(getpid())"
    let fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    if fd < 0 {
      throw LoadError(.io, "disk cache directory \(directory) is not writable: \(String(cString: strerror(errno)))")
    }
    close(fd)
    unlink(probe)
    ledgerDescriptor = open("\(directory)/.ledger", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
    if ledgerDescriptor < 0 {
      throw LoadError(.io, "disk cache directory \(directory) is not writable: \(String(cString: strerror(errno)))")
    }
  }

  deinit { close(ledgerDescriptor) }

  /// The default directory: $XDG_CACHE_HOME/pixload, else ~/.cache/pixload.
  public static var defaultDirectory: String {
    if let xdg = getenv("XDG_CACHE_HOME"), xdg.pointee != 0 { return String(cString: xdg) + "/pixload" }
    if let home = getenv("HOME"), home.pointee != 0 { return String(cString: home) + "/.cache/pixload" }
    return "/tmp/pixload-cache-\(getuid())"
  }

  /// The bytes in the directory, counting every process's entries, as of this process's
  /// last disk cache operation (never waits for the ledger's lock: hosts call it on their
  /// UI thread).
  public var totalBytes: Int { lock.withLock { lastSeen.bytes } }
  /// The entries in the directory, counting every process's, as of the last operation.
  public var count: Int { lock.withLock { lastSeen.entries } }

  // MARK: - Entries

  /// The entry for `key`, verified; nil on a miss. A bad entry is deleted, logged, and a miss.
  public func entry(for key: String) -> Entry? {
    let name = Self.fileName(for: key)
    let path = "\(directory)/\(name)"
    guard let (fd, size) = openUnexpired(name) else { return nil }
    defer { close(fd) }
    guard size >= Self.headerSize, size <= 1 << 31 else { return discard(name, path, "bad size \(size)") }
    var file = [UInt8](repeating: 0, count: size)
    let read = file.withUnsafeMutableBytes { readFully(fd, $0.baseAddress!, size) }
    guard read == size else { return discard(name, path, "short read") }

    var reader = ByteReader(file)
    guard reader.u32() == Self.magic, reader.u32() == Self.version else { return discard(name, path, "not an entry") }
    let keyLength = Int(reader.u32()), etagLength = Int(reader.u32()), modifiedLength = Int(reader.u32())
    _ = reader.u32()  // reserved
    // Clamped: a damaged length of 2^63 or more must be a bad entry, not a trap.
    let bodyLength = Int(clamping: reader.u64())
    let checksum = reader.u64()
    var metadata = Metadata()
    metadata.expiresAt = reader.u64()
    guard keyLength + etagLength + modifiedLength <= size, bodyLength <= size,
          Self.headerSize + keyLength + etagLength + modifiedLength + bodyLength == size else {
      return discard(name, path, "lengths do not add up (torn or truncated)")
    }
    let storedKey = reader.string(keyLength)
    metadata.etag = reader.string(etagLength)
    metadata.lastModified = reader.string(modifiedLength)
    guard storedKey == key else { return nil }  // another key with the same hash: a miss
    let body = Array(file[reader.offset...])
    guard Self.checksum(body) == checksum else { return discard(name, path, "checksum mismatch (corrupt)") }
    // A hit makes the entry the most recently used, for every process.
    futimens(fd, nil)
    return Entry(bytes: body, metadata: metadata, checksum: checksum)
  }

  /// The length and checksum of the body of the entry for `key`, from its header only (the
  /// body is not read, not verified, and the entry is not touched); nil when there is no
  /// such entry. What a variant compares with the original it was made from.
  func storedOrigin(for key: String) -> VariantOrigin? {
    let fd = open("\(directory)/\(Self.fileName(for: key))", O_RDONLY | O_CLOEXEC)
    if fd < 0 { return nil }
    defer { close(fd) }
    var header = [UInt8](repeating: 0, count: Self.headerSize)
    let read = header.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, Self.headerSize, 0) }
    guard read == Self.headerSize else { return nil }
    var reader = ByteReader(header)
    guard reader.u32() == Self.magic, reader.u32() == Self.version else { return nil }
    reader.offset = Self.bodyLengthOffset
    let length = reader.u64()
    return VariantOrigin(length: length, checksum: reader.u64())
  }

  /// Stores `bytes` for `key` (replacing any entry), then evicts down to the low-water
  /// mark if the cache went over its capacity. Failures (a full disk) are logged and
  /// leave no partial file.
  /// `checksum`, when given, is `DiskCache.checksum(bytes)` computed already.
  public func store(_ bytes: [UInt8], metadata: Metadata, for key: String, checksum: UInt64? = nil) {
    let name = Self.fileName(for: key)
    var file: [UInt8] = []
    let keyBytes = Array(key.utf8), etag = Array(metadata.etag.utf8), modified = Array(metadata.lastModified.utf8)
    let size = Self.headerSize + keyBytes.count + etag.count + modified.count + bytes.count
    guard size <= capacityBytes else { return }  // larger than the whole cache: never stored
    file.reserveCapacity(size)
    Self.append(Self.magic, to: &file)
    Self.append(Self.version, to: &file)
    Self.append(UInt32(keyBytes.count), to: &file)
    Self.append(UInt32(etag.count), to: &file)
    Self.append(UInt32(modified.count), to: &file)
    Self.append(UInt32(0), to: &file)
    Self.append(UInt64(bytes.count), to: &file)
    Self.append(checksum ?? Self.checksum(bytes), to: &file)
    Self.append(metadata.expiresAt, to: &file)
    file += keyBytes
    file += etag
    file += modified
    file += bytes
    commit(file, name: name)
  }

  /// Writes a whole entry file under `name`: a temporary file renamed into place, the
  /// ledger updated and the cache evicted down to its low-water mark in the same critical
  /// section. False (logged at most once a minute) when it could not be written.
  @discardableResult
  func commit(_ file: [UInt8], name: String) -> Bool {
    let size = file.count
    let temporary: String = lock.withLock {
      temporaryCounter += 1
      return "\(directory)/.tmp-\(getpid())-\(temporaryCounter)"
    }
    let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard fd >= 0 else {
      logWriteFailure("disk cache: cannot create a file in \(directory): \(String(cString: strerror(errno)))")
      return false
    }
    let written = file.withUnsafeBytes { writeFully(fd, $0.baseAddress!, size) }
    let writeError = errno
    close(fd)
    guard written == size else {
      unlink(temporary)
      logWriteFailure("disk cache: write failed in \(directory): \(String(cString: strerror(writeError))); "
        + "entries are not stored while this lasts (logged once a minute at most)")
      return false
    }
    let path = "\(directory)/\(name)"
    let renameError: Int32 = withLedger { ledger in
      var replaced = stat()
      let replaces = stat(path, &replaced) == 0
      guard rename(temporary, path) == 0 else { return errno }
      ledger.bytes += size - (replaces ? Int(replaced.st_size) : 0)
      ledger.entries += replaces ? 0 : 1
      if ledger.bytes > capacityBytes { evict(&ledger) }
      return 0
    }
    if renameError != 0 {
      unlink(temporary)
      logWriteFailure("disk cache: rename failed in \(directory): \(String(cString: strerror(renameError)))")
      return false
    }
    return true
  }

  private func logWriteFailure(_ line: String) {
    let now = monotonicNanoseconds()
    let due: Bool = lock.withLock {
      if let last = writeFailureLoggedAt, now - last < Self.writeFailureLogInterval { return false }
      writeFailureLoggedAt = now
      return true
    }
    if due { log(line) }
  }

  /// Deletes the entry for `key`, if any, and every decoded variant of it.
  public func remove(_ key: String) {
    delete(Self.fileName(for: key))
    removeVariants(of: key)
  }

  /// Deletes every entry.
  public func removeAll() {
    withLedger { ledger in
      for entry in listEntries() { unlink("\(directory)/\(entry.name)") }
      ledger = Ledger()
    }
  }

  // MARK: - Eviction

  /// Recounts the directory (the ledger may have drifted: files deleted behind our back, a
  /// writer killed between its rename and its ledger update), drops entries past the age
  /// limit, then deletes least recently used entries down to the low-water mark. Called
  /// inside `withLedger`.
  private func evict(_ ledger: inout Ledger) {
    var entries = removeTooOld(listEntries())
    entries.sort { $0.modified < $1.modified }
    var sum = entries.reduce(0) { $0 + $1.size }
    var count = entries.count
    for entry in entries where sum > lowWaterBytes {
      if unlink("\(directory)/\(entry.name)") == 0 || errno == ENOENT {
        sum -= entry.size
        count -= 1
      }
    }
    ledger = Ledger(bytes: sum, entries: count)
  }

  /// Recounts the directory into the ledger and evicts if it is over capacity: the loader
  /// runs it once on a disk thread after start-up, so a large cache never delays a first
  /// load.
  public func rescan() {
    removeOrphanedTemporaries()
    withLedger { ledger in
      let entries = removeTooOld(listEntries())
      ledger = Ledger(bytes: entries.reduce(0) { $0 + $1.size }, entries: entries.count)
      if ledger.bytes > capacityBytes { evict(&ledger) }
    }
  }

  /// Runs `body` with the shared totals, holding them against every other thread and
  /// process; writes them back if `body` changed them. A missing or short ledger (a new
  /// directory, or one from before the ledger existed) is rebuilt by counting.
  private func withLedger<T>(_ body: (inout Ledger) -> T) -> T {
    ledgerLock.withLock {
      flock(ledgerDescriptor, LOCK_EX)
      defer { flock(ledgerDescriptor, LOCK_UN) }
      var stored: (UInt64, UInt64) = (0, 0)
      let read = withUnsafeMutableBytes(of: &stored) { pread(ledgerDescriptor, $0.baseAddress, 16, 0) }
      var ledger: Ledger
      if read == 16 {
        ledger = Ledger(bytes: Int(clamping: stored.0), entries: Int(clamping: stored.1))
      } else {
        let entries = listEntries()
        ledger = Ledger(bytes: entries.reduce(0) { $0 + $1.size }, entries: entries.count)
      }
      let before = ledger
      let result = body(&ledger)
      ledger.bytes = max(0, ledger.bytes)
      ledger.entries = max(0, ledger.entries)
      if ledger != before || read != 16 {
        var updated = (UInt64(ledger.bytes), UInt64(ledger.entries))
        _ = withUnsafeBytes(of: &updated) { pwrite(ledgerDescriptor, $0.baseAddress, 16, 0) }
      }
      lock.withLock { lastSeen = ledger }
      return result
    }
  }

  /// Deletes one entry and takes it out of the ledger (only the process whose unlink
  /// succeeded subtracts it).
  func delete(_ name: String) {
    let path = "\(directory)/\(name)"
    withLedger { ledger in
      var info = stat()
      guard stat(path, &info) == 0, unlink(path) == 0 else { return }
      ledger.bytes -= Int(info.st_size)
      ledger.entries -= 1
    }
  }

  func isTooOld(modifiedSeconds: Int) -> Bool {
    maxAgeSeconds > 0 && modifiedSeconds + maxAgeSeconds < Int(time(nil))
  }

  /// Opens entry file `name` for reading with its size; nil when it is missing, or past the
  /// age limit (then deleted). The caller closes the descriptor.
  func openUnexpired(_ name: String) -> (fd: Int32, size: Int)? {
    let fd = open("\(directory)/\(name)", O_RDONLY | O_CLOEXEC)
    if fd < 0 { return nil }
    var info = stat()
    guard fstat(fd, &info) == 0 else {
      close(fd)
      return nil
    }
    if isTooOld(modifiedSeconds: Int(info.st_mtim.tv_sec)) {
      close(fd)
      delete(name)
      return nil
    }
    return (fd, Int(info.st_size))
  }

  /// Deletes the entries past the age limit and returns the others.
  private func removeTooOld(_ entries: [Listed]) -> [Listed] {
    guard maxAgeSeconds > 0 else { return entries }
    return entries.filter { entry in
      guard isTooOld(modifiedSeconds: entry.modified / 1_000_000_000) else { return true }
      return unlink("\(directory)/\(entry.name)") != 0 && errno != ENOENT
    }
  }

  /// Temporary files of writers that died (SIGKILL, power loss) before their rename: a
  /// ".tmp-PID-N" whose process is gone is deleted. Live writers' files are left alone.
  private func removeOrphanedTemporaries() {
    guard let dir = opendir(directory) else { return }
    var orphans: [String] = []
    while let item = readdir(dir) {
      let name = withUnsafeBytes(of: item.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
      guard name.hasPrefix(".tmp-") else { continue }
      let fields = name.split(separator: "-")
      guard fields.count == 3, let pid = Int32(fields[1]) else { continue }
      if kill(pid, 0) != 0 && errno == ESRCH { orphans.append(name) }
    }
    closedir(dir)
    for name in orphans { unlink("\(directory)/\(name)") }
  }

  struct Listed { let name: String; let size: Int; let modified: Int }

  func listEntries() -> [Listed] {
    guard let dir = opendir(directory) else { return [] }
    defer { closedir(dir) }
    var result: [Listed] = []
    while let item = readdir(dir) {
      let name = withUnsafeBytes(of: item.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
      guard name.count == 32, name.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else { continue }
      var info = stat()
      guard stat("\(directory)/\(name)", &info) == 0 else { continue }
      result.append(Listed(name: name, size: Int(info.st_size),
                           modified: Int(info.st_mtim.tv_sec) * 1_000_000_000 + Int(info.st_mtim.tv_nsec)))
    }
    return result
  }

  @discardableResult
  func discard(_ name: String, _ path: String, _ why: String) -> Entry? {
    delete(name)
    log("disk cache: dropped a bad entry \(name): \(why)")
    return nil
  }

  // MARK: - Encoding

  /// 32 hex digits from two independent 64-bit hashes of the key (`KeyHash`).
  static func fileName(for key: String) -> String { KeyHash.name(of: key) }

  /// The first 16 of the 32 hex digits: the same for a key's entry and all its variants,
  /// so that removing a key finds its variants by name.
  static func namePrefix(for key: String) -> String { KeyHash.prefix(of: key) }

  /// A fast 64-bit checksum (8 bytes at a time, multiply-xorshift mixing): it detects torn
  /// and damaged entries; it is not a defence against a deliberate forger.
  static func checksum(_ bytes: [UInt8]) -> UInt64 {
    bytes.withUnsafeBytes { checksum($0) }
  }

  static func checksum(_ raw: UnsafeRawBufferPointer) -> UInt64 {
    var hash: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(raw.count)
    var offset = 0
    while offset + 8 <= raw.count {
      let word = raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
      hash = (hash ^ word) &* 0xBF58_476D_1CE4_E5B9
      hash ^= hash >> 31
      offset += 8
    }
    while offset < raw.count {
      hash = (hash ^ UInt64(raw[offset])) &* 0x94D0_49BB_1331_11EB
      offset += 1
    }
    return hash ^ (hash >> 29)
  }

  static func append<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
    withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
  }

  private static func makeDirectory(_ path: String) throws(LoadError) {
    var prefix = ""
    for component in path.split(separator: "/", omittingEmptySubsequences: true) {
      prefix += "/" + component
      if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
        throw LoadError(.io, "cannot create disk cache directory \(prefix): \(String(cString: strerror(errno)))")
      }
    }
    var info = stat()
    guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
      throw LoadError(.io, "disk cache path \(path) is not a directory")
    }
  }
}

/// Little-endian fields from an entry; reads past the end give zeros (lengths are checked
/// against the file size before any variable part is used).
struct ByteReader {
  let bytes: [UInt8]
  var offset = 0
  init(_ bytes: [UInt8]) { self.bytes = bytes }

  mutating func u32() -> UInt32 { UInt32(truncatingIfNeeded: integer(4)) }
  mutating func u64() -> UInt64 { integer(8) }

  private mutating func integer(_ width: Int) -> UInt64 {
    var value: UInt64 = 0
    for i in 0..<width where offset + i < bytes.count { value |= UInt64(bytes[offset + i]) << UInt64(8 * i) }
    offset += width
    return value
  }

  mutating func string(_ length: Int) -> String {
    let end = min(bytes.count, offset + length)
    defer { offset = end }
    return String(decoding: bytes[offset..<end], as: UTF8.self)
  }
}

func readFully(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
  var done = 0
  while done < count {
    let n = read(fd, buffer + done, count - done)
    if n < 0 && errno == EINTR { continue }
    if n <= 0 { break }
    done += n
  }
  return done
}

private func writeFully(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
  var done = 0
  while done < count {
    let n = write(fd, buffer + done, count - done)
    if n < 0 && errno == EINTR { continue }
    if n <= 0 { break }
    done += n
  }
  return done
}
