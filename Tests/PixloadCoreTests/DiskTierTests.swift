@testable import PixloadCore
import XCTest

/// The coordinator's side of the disk tier, with a tier that answers when the test says
/// (ManualDiskTier): lookups merge like the rest of the work, a variant on disk needs no
/// download and no decode, the tier's answers decide between decoding, revalidating,
/// fetching and failing, and a request that leaves cancels the lookup. No directory, no
/// disk thread, no waiting for one (DiskCacheTests covers the real tier on a real disk).
final class DiskTierTests: XCTestCase {
  var network: ManualDataLoader!
  var tier: ManualDiskTier!
  var decoder: FakeDecoder!
  var loader: ImageLoader!
  var queue: CompletionQueue!
  var recorder: Recorder!

  func makeLoader(variantMaxSide: Int = 0) throws {
    network = ManualDataLoader()
    tier = ManualDiskTier(variantMaxSide: variantMaxSide)
    decoder = FakeDecoder()
    var configuration = LoaderConfiguration()
    configuration.decodeThreads = 1
    loader = try ImageLoader(configuration: configuration, dataLoader: network, diskTier: tier, decoder: decoder)
    queue = try CompletionQueue()
    recorder = Recorder()
  }

  override func tearDown() {
    loader?.close()
    super.tearDown()
  }

  func load(_ url: String, side: Int = 0, policy: ImageRequest.CachePolicy = .normal) throws -> UInt64 {
    var request = ImageRequest(url: url, targetWidth: side, targetHeight: side)
    request.cachePolicy = policy
    return try loader.load(request, queue: queue, handler: recorder.handler)
  }

  func source(_ token: UInt64) -> ImageSource? {
    if case .success(_, let source, _)? = recorder.outcome(token) { return source }
    return nil
  }

  func testAVariantOnDiskNeedsNoDownloadAndNoDecode() throws {
    try makeLoader(variantMaxSide: 64)
    let a = try load("http://h/a.jpg", side: 8)
    let b = try load("http://h/a.jpg", side: 8)
    XCTAssertEqual(tier.variantLookups.count, 1, "both requests wait on one lookup")
    let image = try XCTUnwrap(FakeDecoder().decode([1, 2], variant: tier.variantLookups[0].variant, maxPixels: 1 << 20)
      .get())
    tier.variantLookups[0].answer(image)
    XCTAssertTrue(queue.drain(until: recorder, reaches: 2))
    XCTAssertEqual(source(a), .disk)
    XCTAssertEqual(source(b), .disk)
    XCTAssertTrue(network.started.isEmpty)
    XCTAssertTrue(tier.originalLookups.isEmpty)
    XCTAssertEqual(decoder.count, 0)
    XCTAssertEqual(loader.statistics.variantHits, 1)
    XCTAssertEqual(loader.statistics.coalesced, 1)
  }

  /// A processed request whose chain is `[grayscale, flip, rotate]`, as RGBA8.
  func loadChain(_ url: String, side: Int) throws -> UInt64 {
    var request = ImageRequest(url: url, targetWidth: side, targetHeight: side)
    request.processors = [.grayscale, .flip(vertical: true), .rotate(quarterTurns: 2)]
    return try loader.load(request, queue: queue, handler: recorder.handler)
  }

  func testAChainReachesTheOriginalAfterOneDiskJob() throws {
    try makeLoader(variantMaxSide: 64)
    let token = try loadChain("http://h/a.jpg", side: 8)
    // One job for the chain and every prefix (its own variant, its premultiplied form,
    // two shorter chains, the decoded variant), not five lookups one after another.
    XCTAssertEqual(tier.variantLookups.count, 1)
    XCTAssertEqual(tier.variantLookups[0].variants.map(\.processors.count), [3, 3, 2, 1, 0])
    XCTAssertTrue(tier.originalLookups.isEmpty, "the original waits for the variants' answer")
    tier.variantLookups[0].found(nil)
    XCTAssertEqual(tier.variantLookups.count, 1, "the prefixes are not looked up again")
    XCTAssertEqual(tier.originalLookups.count, 1, "the miss looks for the original next")
    tier.originalLookups[0].answer(.fresh([1, 2, 3], OriginalRecord(metadata: .init(), bytes: [1, 2, 3])))
    XCTAssertTrue(queue.drain(until: recorder, reaches: 1))
    guard case .success(_, .disk, _)? = recorder.outcome(token) else { return XCTFail("a disk decode expected") }
    XCTAssertEqual(decoder.count, 1)
    XCTAssertEqual(tier.variantLookups.count, 1)
    XCTAssertTrue(network.started.isEmpty)
  }

  func testAChainPrefixOnDiskIsProcessedFrom() throws {
    try makeLoader(variantMaxSide: 64)
    let token = try loadChain("http://h/a.jpg", side: 8)
    let lookup = try XCTUnwrap(tier.variantLookups.first)
    // The one-step prefix ([grayscale], premultiplied) is on disk: two steps and the
    // conversion remain, no original, no decode.
    let prefix = lookup.variants[3]
    XCTAssertEqual(prefix.processors, [.grayscale])
    let image = try XCTUnwrap(FakeDecoder().decode([1, 2], variant: prefix, maxPixels: 1 << 20).get())
    lookup.found(VariantFound(index: 3, image: image))
    XCTAssertTrue(queue.drain(until: recorder, reaches: 1))
    guard case .success(let result, .disk, _)? = recorder.outcome(token) else { return XCTFail("an image expected") }
    XCTAssertEqual(result.format, .rgba8)
    XCTAssertTrue(tier.originalLookups.isEmpty)
    XCTAssertEqual(tier.variantLookups.count, 1)
    XCTAssertEqual(decoder.count, 0)
    XCTAssertEqual(loader.statistics.variantHits, 1)
    XCTAssertEqual(loader.statistics.processorRuns, 2)
  }

  func testAVariantMissDecodesTheStoredOriginalAndKeepsTheVariant() throws {
    try makeLoader(variantMaxSide: 64)
    let token = try load("http://h/a.jpg", side: 8)
    tier.variantLookups[0].answer(nil)
    XCTAssertEqual(tier.originalLookups.count, 1, "the miss looks for the original next")
    XCTAssertEqual(tier.originalLookups[0].key, CacheKey("http://h/a.jpg"))
    tier.originalLookups[0].answer(.fresh([1, 2, 3, 4, 5], OriginalRecord(metadata: .init(), bytes: [1, 2, 3, 4, 5])))
    XCTAssertTrue(queue.drain(until: recorder, reaches: 1))
    guard case .success(let image, .disk, _)? = recorder.outcome(token) else { return XCTFail("a disk decode expected") }
    XCTAssertEqual(image.pixels.load(as: UInt8.self), 5, "decoded from the 5 stored bytes")
    XCTAssertTrue(network.started.isEmpty)
    XCTAssertEqual(tier.storedVariants.map(\.width), [8], "the thumbnail is offered to the tier")
    XCTAssertEqual(loader.statistics.variantsStored, 1)
  }

  func testAStaleOriginalIsRevalidatedAndA304ServesTheStoredBytes() throws {
    try makeLoader()
    let token = try load("http://h/a.jpg")
    XCTAssertTrue(tier.variantLookups.isEmpty, "an unsized request has no variant on disk")
    tier.originalLookups[0].answer(.revalidate(ManualDiskTier.stored([9, 9, 9], etag: "\"e1\"")))
    XCTAssertEqual(network.started.count, 1)
    XCTAssertEqual(network.started[0].revalidating?.etag, "\"e1\"", "the transfer is conditional")
    network.finish(0, bytes: [], status: 304)
    XCTAssertTrue(queue.drain(until: recorder, reaches: 1))
    guard case .success(let image, .revalidated, 304)? = recorder.outcome(token) else {
      return XCTFail("a revalidated result expected, got \(String(describing: recorder.outcome(token)))")
    }
    XCTAssertEqual(image.pixels.load(as: UInt8.self), 3, "decoded from the 3 stored bytes")
    XCTAssertEqual(tier.received.map(\.1), [304])
    XCTAssertEqual(loader.statistics.revalidated, 1)
    XCTAssertEqual(loader.statistics.networkFetches, 0)
  }

  func testAMissFetchesAndNotCachedFails() throws {
    try makeLoader()
    let fetched = try load("http://h/a.jpg")
    let offline = try load("http://h/b.jpg", policy: .cacheOnly)
    XCTAssertEqual(tier.originalLookups.map(\.policy), [.normal, .cacheOnly])
    tier.originalLookups[0].answer(.miss)
    tier.originalLookups[1].answer(.notCached)
    XCTAssertEqual(network.started.map(\.url), ["http://h/a.jpg"], "only the miss goes to the network")
    XCTAssertNil(network.started[0].revalidating)
    network.finish(0, bytes: [7, 7])
    XCTAssertTrue(queue.drain(until: recorder, reaches: 2))
    XCTAssertEqual(source(fetched), .network)
    XCTAssertEqual(recorder.status(offline), .notCached)
    XCTAssertEqual(tier.received.map(\.0), [CacheKey("http://h/a.jpg")], "the tier keeps what the network brought")
  }

  func testLeavingDuringALookupCancelsItAndALateAnswerIsDropped() throws {
    try makeLoader(variantMaxSide: 64)
    let thumbnail = try load("http://h/a.jpg", side: 8)
    let original = try load("http://h/b.jpg")
    XCTAssertTrue(loader.cancel(thumbnail))
    XCTAssertTrue(loader.cancel(original))
    XCTAssertTrue(tier.wasCancelled(tier.variantLookups[0].job))
    XCTAssertTrue(tier.wasCancelled(tier.originalLookups[0].job))
    // A tier may answer a job it could not stop in time: nobody is waiting any more.
    tier.variantLookups[0].answer(nil)
    tier.originalLookups[0].answer(.miss)
    XCTAssertTrue(queue.drain(until: recorder, reaches: 2))
    XCTAssertEqual(recorder.status(thumbnail), .cancelled)
    XCTAssertEqual(recorder.status(original), .cancelled)
    XCTAssertTrue(network.started.isEmpty, "no transfer for requests that left")
    XCTAssertEqual(tier.originalLookups.count, 1, "the late variant miss started nothing")
  }

  func testAReloadSkipsTheTierButStillHandsItTheBytes() throws {
    try makeLoader(variantMaxSide: 64)
    let token = try load("http://h/a.jpg", side: 8, policy: .reload)
    XCTAssertTrue(tier.variantLookups.isEmpty)
    XCTAssertTrue(tier.originalLookups.isEmpty)
    network.finish(0, bytes: [1])
    XCTAssertTrue(queue.drain(until: recorder, reaches: 1))
    XCTAssertEqual(source(token), .network)
    XCTAssertEqual(tier.received.count, 1)
  }
}
