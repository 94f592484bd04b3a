#if canImport(Glibc)
import Glibc
#endif

/// The previews of one original's transfer, and the early end of a thumbnail's transfer:
/// its state (one preview decode at a time, the body that came during it, when the last
/// was made and from how many scans) and the only place the loader asks the decoder what
/// a body's bytes mean (`ImageDecoding.previewPrefix`, `firstScansEnd`, `scansPrefix`).
/// Its functions on the pool below run with the pool's lock where they take it.
final class PreviewTask {
  var previewing = false
  /// The newest body that came during the preview decode under way.
  var pending: [UInt8]?
  var lastPreviewAt: UInt64 = 0
  /// The scan count of the last preview made.
  var scans = 0
  /// The length of the prefix its transfer ended with (`TaskPool.endsEarly`); 0: none.
  var endedEarly = 0

  /// Where the first scans end that decode each of `variants` exactly (a progressive
  /// JPEG's 1/8 scale); nil when some variant needs more.
  static func firstScansEnd(_ body: [UInt8], of variants: [ImageVariant], decoder: ImageDecoding) -> Int? {
    decoder.firstScansEnd(body, variants: variants)
  }

  /// The bytes the decodes take of a transfer that ended early with `body` (its
  /// `endedEarly` read under the lock): the first scans as a file (what the thumbnails
  /// decode from).
  static func bytesToDecode(_ body: [UInt8], endedEarly: Int, decoder: ImageDecoding) -> [UInt8] {
    guard endedEarly > 0, endedEarly <= body.count else { return body }
    return decoder.scansPrefix(body, length: endedEarly)
  }
}

/// The preview task of an original's transfer (progressive downloads): when a transfer's progress reaches its
/// requesters, when a preview decode runs and for whom, and when a thumbnail's transfer
/// may end early. What the bytes mean (scans, prefixes, the EOI that closes them) is the
/// decoder's (`ImageDecoding.previewPrefix`, `firstScansEnd`, `scansPrefix`).
extension TaskPool {
  /// Returns true when the body so far is all the download's requesters need (see
  /// `endsEarly`): the engine then ends the transfer with it.
  func downloadProgressed(_ download: OriginalDataTask, received: UInt64, expected: UInt64,
                                  body: [UInt8]) -> Bool {
    if endsEarly(download, received: received, expected: expected, body: body) { return true }
    streamProgress(download, body: body)
    var previewNow = false
    let listeners: [PendingRequest] = lock.withLock {
      guard downloads[download.key] === download else { return [] }
      let requesters = download.decodes.values.flatMap { requestsBelow($0) }
      if download.preview.previewing {
        // One preview decode at a time per download: the newest body waits for the one
        // under way, so the scans it completes are not lost if the server pauses now.
        if requesters.contains(where: \.delivery.wantsPreview) { download.preview.pending = body }
      } else {
        previewNow = previewIsDue(download)
      }
      return requesters.filter(\.delivery.wantsProgress)
    }
    for pending in listeners {
      pending.queue.progress(pending.delivery, received: received, expected: expected)
    }
    if previewNow { submitPreview(download, body) }
    return false
  }

  /// Lock held: whether a preview decode starts now (then marked under way): someone wants
  /// previews, the scan limit is not reached, and the shortest interval its requesters asked
  /// for has passed since the last preview made (the queue drops what comes sooner anyway;
  /// counting from the last attempt would let one before the first complete scan hold the
  /// first preview back).
  private func previewIsDue(_ download: OriginalDataTask) -> Bool {
    let previewers = download.decodes.values.flatMap { requestsBelow($0) }.filter(\.delivery.wantsPreview)
    guard !previewers.isEmpty, download.preview.scans < Self.previewScanLimit else { return false }
    let interval = previewers.map(\.delivery.previewInterval).min() ?? 0
    guard download.preview.lastPreviewAt == 0 || monotonicNanoseconds() - download.preview.lastPreviewAt >= interval else { return false }
    download.preview.previewing = true
    return true
  }

  private func submitPreview(_ download: OriginalDataTask, _ body: [UInt8]) {
    _ = decodePool.submit(priority: download.priority) { [weak self, weak download] in
      guard let self, let download else { return }
      self.previewDownload(download, body)
      // A body that arrived during the decode is previewed next, if still due.
      let next: [UInt8]? = self.lock.withLock {
        download.preview.previewing = false
        guard let pending = download.preview.pending else { return nil }
        download.preview.pending = nil
        return self.downloads[download.key] === download && self.previewIsDue(download) ? pending : nil
      }
      if let next { self.submitPreview(download, next) }
    }
  }

  /// The early end of a thumbnail's transfer (pixload.h states the rule): when every
  /// requester wants a thumbnail that a progressive JPEG's first scans decode exactly (1/8
  /// scale), no disk cache would store the file and it is not a revalidation, the transfer
  /// ends once those scans have arrived. Previews do not keep it going: the final image is
  /// then ready as soon as a preview would be. The download leaves the table first, so a
  /// request that comes later starts its own transfer.
  private func endsEarly(_ download: OriginalDataTask, received: UInt64, expected: UInt64, body: [UInt8]) -> Bool {
    guard diskTier == nil else { return false }
    let variants: [ImageVariant]? = lock.withLock {
      guard downloads[download.key] === download, download.revalidating == nil, !download.decodes.isEmpty
      else { return nil }
      return Array(download.decodes.keys)
    }
    guard let variants, let end = PreviewTask.firstScansEnd(body, of: variants, decoder: decoder) else { return false }
    return lock.withLock {
      // Unchanged meanwhile: still registered, no other variant joined.
      guard downloads[download.key] === download, Set(download.decodes.keys) == Set(variants) else { return false }
      downloads.removeValue(forKey: download.key)
      download.preview.endedEarly = end
      if expected > received { counters.bytesSaved += Int(expected - received) }
      return true
    }
  }

  /// A preview decode never runs for more scans than this (libjpeg's own scan limit).
  static let previewScanLimit = 500

  /// Decodes what a download holds so far into each variant whose requesters want
  /// previews, and queues the images to them: the complete scans of a progressive JPEG,
  /// or the prefix itself when a registered codec decodes prefixes (JPEG XL's module
  /// flushes the passes it has). Baseline JPEGs and other formats get no preview: their
  /// rows arrive top to bottom, and a half-drawn image is not what a list row should show.
  private func previewDownload(_ download: OriginalDataTask, _ body: [UInt8]) {
    let source: PreviewSource
    if let prefix = decoder.previewPrefix(body) {
      source = .scans(prefix.length, count: prefix.scans)
    } else if decoder.decodesPrefixes(body) {
      source = .codecPrefix
    } else {
      return
    }
    let targets: [(ImageVariant, [PendingRequest])] = lock.withLock {
      guard downloads[download.key] === download else { return [] }
      if case .scans(_, let count) = source {
        guard count > download.preview.scans else { return [] }
        download.preview.scans = count
        download.preview.lastPreviewAt = monotonicNanoseconds()
      }
      return download.decodes.values.flatMap { tasksBelow($0, \.delivery.wantsPreview) }
    }
    guard !targets.isEmpty else { return }
    let bytes: [UInt8]
    switch source {
    case .scans(let length, _): bytes = decoder.scansPrefix(body, length: length)
    case .codecPrefix: bytes = body
    }
    func decodeRoot(_ variant: ImageVariant) -> Image? {
      switch source {
      case .scans: return try? decoder.decode(bytes, variant: variant, maxPixels: configuration.maxPixels).get()
      case .codecPrefix: return try? decoder.decodePrefix(bytes, variant: variant, maxPixels: configuration.maxPixels).get()
      }
    }
    // A processed variant's preview passes through its chain (a circular avatar's preview
    // is circular); one decode per decoded variant.
    var decoded: [ImageVariant: Image] = [:]
    var previews: [(Image, [PendingRequest])] = []
    for (variant, previewers) in targets {
      let (root, steps) = ImageProcessing.lineage(of: variant)
      guard let rootImage = decoded[root] ?? decodeRoot(root) else { continue }
      decoded[root] = rootImage
      // A step that fails (a crop outside this image) gives no preview; the final result
      // reports the error.
      let processed = steps.reduce(Optional(rootImage)) { image, step in
        // Only the decoded image is shared (with other variants' previews): a step's own
        // output is taken over by the next step.
        image.flatMap { try? ImageProcessing.apply(step, to: $0, owned: $0 !== rootImage, cancel: CancelFlag(),
                                                   maxPixels: configuration.maxPixels).get() }
      }
      if let image = processed { previews.append((image, previewers)) }
    }
    guard !previews.isEmpty else { return }
    // A codec's prefix has no scan count: its previews are numbered as they are made (the
    // queues want each one later than the last), and only a preview made counts for the
    // interval, so a prefix that held nothing yet does not hold the first one back.
    let scans: Int
    switch source {
    case .scans(_, let count): scans = count
    case .codecPrefix:
      scans = lock.withLock {
        download.preview.scans += 1
        download.preview.lastPreviewAt = monotonicNanoseconds()
        return download.preview.scans
      }
    }
    for (image, previewers) in previews {
      for pending in previewers { pending.queue.preview(pending.delivery, image: image, scans: scans) }
    }
  }
}

/// What a preview decodes: a progressive JPEG's complete scans (the prefix's length and
/// how many scans it holds), or a prefix a registered codec takes whole.
private enum PreviewSource {
  case scans(Int, count: Int)
  case codecPrefix
}
