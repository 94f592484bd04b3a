import XCTest
@testable import PixloadCore

/// The table object, driven through a manual network: what scrolling starts, raises,
/// lowers, cancels and delivers.
final class TableTests: XCTestCase {
  var network: ManualDataLoader!
  var loader: ImageLoader!
  var queue: CompletionQueue!
  var delivered: [(row: Int, outcome: Outcome)] = []

  override func setUpWithError() throws {
    network = ManualDataLoader()
    var configuration = LoaderConfiguration()
    configuration.decodeThreads = 1
    loader = try ImageLoader(configuration: configuration, dataLoader: network, decoder: FakeDecoder())
    queue = try CompletionQueue()
    delivered = []
  }

  override func tearDown() {
    loader.close()
    queue.close()
  }

  /// The tests call setVisible in quick succession, far faster than frames: the speed
  /// window is a whole second so that what counts as a fast scroll does not depend on
  /// how fast the machine runs the test (rows moved within it, not the time between calls).
  func makeTable(rows: Int = 100, prefetch: Int = 4, keep: Int = 1, fastScrollMilliseconds: Int = 1000) -> ImageTable {
    var configuration = ImageTable.Configuration()
    configuration.prefetchRows = prefetch
    configuration.keepRows = keep
    configuration.fastScrollMilliseconds = fastScrollMilliseconds
    configuration.speedWindowMilliseconds = 1000
    return ImageTable(loader: loader, queue: queue, rowCount: rows, configuration: configuration,
                      requestForRow: { ImageRequest(url: "http://h/\($0).jpg", targetWidth: 10, targetHeight: 10) },
                      onRow: { [unowned self] row, outcome in self.delivered.append((row, outcome)) })
  }

  func transfer(forRow row: Int) -> ManualDataLoader.Started? {
    network.started.first { $0.url == "http://h/\(row).jpg" }
  }

  /// Finishes the transfer of each row and waits until the loader has handled them all.
  func finish(rows: [Int]) {
    for row in rows {
      guard let index = network.started.firstIndex(where: { $0.url == "http://h/\(row).jpg" }) else { continue }
      network.finish(index)
    }
  }

  func drain(until condition: () -> Bool) {
    let deadline = monotonicNanoseconds() + 5_000_000_000
    while !condition() && monotonicNanoseconds() < deadline {
      _ = queue.wait(timeoutMilliseconds: 100)
      _ = queue.dispatch(max: 0)
    }
  }

  func testVisibleRowsLoadHighAndPrefetchesAheadLow() {
    let table = makeTable()
    table.setVisible(first: 10, count: 3, direction: 1)
    for row in 10...12 { XCTAssertEqual(network.priority(of: transfer(forRow: row)!.id), 100, "row \(row)") }
    // Nearest first: each further row one lower.
    for row in 13...16 {
      XCTAssertEqual(network.priority(of: transfer(forRow: row)!.id), Int32(-100 - (row - 13)), "row \(row)")
    }
    XCTAssertNil(transfer(forRow: 9), "nothing behind when scrolling down")
    XCTAssertNil(transfer(forRow: 17))
    XCTAssertEqual(table.stats.started, 7)
  }

  /// The screen first: prefetches wait while a visible row loads, and go as soon as the
  /// last visible row has its result (not when their hold runs out).
  func testPrefetchesWaitForTheVisibleRows() {
    let table = makeTable(prefetch: 2)
    table.setVisible(first: 10, count: 2, direction: 1)
    XCTAssertEqual(transfer(forRow: 10)?.delay, 0)
    XCTAssertEqual(transfer(forRow: 12)?.delay, 1_000_000_000, "held while rows 10 and 11 load")
    XCTAssertEqual(transfer(forRow: 13)?.delay, 1_000_000_000)
    finish(rows: [10])
    drain { delivered.count == 1 }
    XCTAssertFalse(network.startedNow.contains(transfer(forRow: 12)!.id), "row 11 still loading")
    finish(rows: [11])
    drain { delivered.count == 2 }
    XCTAssertTrue(network.startedNow.contains(transfer(forRow: 12)!.id), "the screen is complete")
    XCTAssertTrue(network.startedNow.contains(transfer(forRow: 13)!.id))
    // Once the prefetched rows are in memory too, scrolling onto them completes the
    // screen at once, and the next prefetch starts without a hold.
    finish(rows: [12, 13])
    let request12 = ImageRequest(url: "http://h/12.jpg", targetWidth: 10, targetHeight: 10)
    drain { loader.cachedImage(for: request12) != nil && queue.pendingCount == 0 }
    table.setVisible(first: 11, count: 2, direction: 1)
    XCTAssertEqual(delivered.last?.row, 12, "from memory, inside setVisible")
    XCTAssertEqual(transfer(forRow: 14)?.delay, 0)
  }

  func testAPrefetchThatBecomesVisibleIsRaisedNotRestarted() {
    let table = makeTable()
    table.setVisible(first: 10, count: 3, direction: 1)
    let prefetch = transfer(forRow: 14)!
    table.setVisible(first: 12, count: 3, direction: 1)
    XCTAssertEqual(network.priority(of: prefetch.id), 100)
    XCTAssertEqual(network.started.filter { $0.url == "http://h/14.jpg" }.count, 1)
    XCTAssertTrue(network.cancelled.isEmpty || !network.cancelled.contains(prefetch.id))
  }

  func testARowScrolledAwayBeforeItsImageArrivesNeverReceivesIt() {
    let table = makeTable(prefetch: 0, keep: 0)
    table.setVisible(first: 0, count: 2, direction: 1)
    let away = transfer(forRow: 0)!
    table.setVisible(first: 50, count: 2, direction: 1)
    XCTAssertTrue(network.cancelled.contains(away.id))
    finish(rows: [0, 50, 51])
    drain { delivered.count >= 2 }
    XCTAssertEqual(Set(delivered.map(\.row)), [50, 51])
    XCTAssertEqual(table.stats.cancelled, 2)
  }

  func testResultsForRowsNoLongerVisibleAreNotDeliveredButCached() {
    let table = makeTable(prefetch: 0, keep: 2)
    table.setVisible(first: 0, count: 3, direction: 1)
    table.setVisible(first: 2, count: 3, direction: 1)  // rows 0 and 1 are kept, not cancelled
    XCTAssertTrue(network.cancelled.isEmpty)
    XCTAssertEqual(network.priority(of: transfer(forRow: 0)!.id), -100, "kept rows drop to low priority")
    finish(rows: [0, 1, 2, 3, 4])
    // Every result handled: the five images are in memory and the queue is empty.
    drain {
      (0...4).allSatisfy { loader.cachedImage(for: ImageRequest(url: "http://h/\($0).jpg", targetWidth: 10, targetHeight: 10)) != nil }
        && queue.pendingCount == 0 && delivered.count >= 3
    }
    XCTAssertEqual(Set(delivered.map(\.row)), [2, 3, 4])
    // Scrolling back: rows 0 and 1 come from memory at once, inside setVisible.
    delivered = []
    table.setVisible(first: 0, count: 3, direction: -1)
    XCTAssertEqual(Set(delivered.map(\.row)), [0, 1])
    for (_, outcome) in delivered {
      guard case .success(_, let source, _) = outcome else { return XCTFail("expected images") }
      XCTAssertEqual(source, .memory)
    }
    XCTAssertEqual(table.stats.memoryHits, 2)
    XCTAssertEqual(network.started.count, 5, "no new transfers")
  }

  func testARowIsDeliveredOnceWhileItStaysVisible() {
    let table = makeTable(prefetch: 0, keep: 0)
    table.setVisible(first: 0, count: 1, direction: 0)
    finish(rows: [0])
    drain { delivered.count >= 1 }
    for _ in 0..<5 { table.setVisible(first: 0, count: 1, direction: 0) }
    _ = queue.dispatch(max: 0)
    XCTAssertEqual(delivered.count, 1)
    XCTAssertEqual(network.started.count, 1)
  }

  /// A request the provider refuses (a C request that does not convert) and one the loader
  /// refuses (its scheme) are reported alike: at once, once while the row stays visible,
  /// again when it comes back; prefetched, neither is reported nor started.
  func testARefusedRequestIsReportedOnceWhileItsRowIsVisible() {
    let wrong = LoadError(.invalidArgument, "request: processor 0 (rotate): 33 degrees is not 90, 180 or 270")
    var configuration = ImageTable.Configuration()
    configuration.prefetchRows = 4
    configuration.keepRows = 0
    configuration.speedWindowMilliseconds = 1000
    let table = ImageTable(loader: loader, queue: queue, rowCount: 100, configuration: configuration,
                           requestForRow: { row throws(LoadError) in
                             if row == 1 || row == 5 { throw wrong }
                             return ImageRequest(url: row == 6 ? "gopher://h/6" : "http://h/\(row).jpg")
                           },
                           onRow: { [unowned self] row, outcome in self.delivered.append((row, outcome)) })
    func reports(_ row: Int) -> [LoadError] {
      delivered.compactMap { if $0.row == row, case .failure(let error) = $0.outcome { return error } else { return nil } }
    }
    table.setVisible(first: 0, count: 3, direction: 1)  // prefetches 3 to 6
    XCTAssertEqual(reports(1), [wrong], "reported inside setVisible")
    XCTAssertTrue(reports(5).isEmpty && reports(6).isEmpty, "prefetched: not reported")
    XCTAssertNil(transfer(forRow: 5))
    table.setVisible(first: 0, count: 3, direction: 1)
    XCTAssertEqual(reports(1).count, 1, "once while it stays visible")
    table.setVisible(first: 4, count: 3, direction: 1)
    XCTAssertEqual(reports(5), [wrong])
    XCTAssertEqual(reports(6).map(\.status), [.schemeNotAllowed])
    table.setVisible(first: 0, count: 3, direction: -1)
    XCTAssertEqual(reports(1), [wrong, wrong], "again when it comes back")
    XCTAssertEqual(table.stats.failed, 4)
  }

  func testAFlingDelaysTransfersAndSkipsPrefetch() {
    let table = makeTable(rows: 1000, prefetch: 4, keep: 0, fastScrollMilliseconds: 0)  // screen jumps only
    table.setVisible(first: 0, count: 3, direction: 1)
    XCTAssertEqual(transfer(forRow: 1)?.delay, 0, "an ordinary start is immediate")
    table.setVisible(first: 10, count: 3, direction: 1)  // a screen or more per call
    XCTAssertEqual(transfer(forRow: 10)?.delay, 20_000_000, "held back a little over a frame")
    XCTAssertNil(transfer(forRow: 13), "no prefetch while flinging")
    table.setVisible(first: 20, count: 3, direction: 1)
    XCTAssertTrue(network.cancelled.contains(transfer(forRow: 10)!.id), "cancelled inside its delay")
    table.setVisible(first: 21, count: 3, direction: 1)  // slowed down: prefetch resumes
    XCTAssertNotNil(transfer(forRow: 24))
    XCTAssertEqual(transfer(forRow: 23)?.delay, 0)
    XCTAssertTrue(network.startedNow.contains(transfer(forRow: 21)!.id), "still on screen: its delay ends")
  }

  /// A row reached by a fling that leaves before its start delay was confirmed is
  /// cancelled, even within the rows kept behind: it was never worth a request.
  func testAnUnconfirmedFlingRowIsNotKeptBehind() {
    let table = makeTable(rows: 1000, prefetch: 0, keep: 2, fastScrollMilliseconds: 0)
    table.setVisible(first: 0, count: 3, direction: 1)
    table.setVisible(first: 10, count: 3, direction: 1)  // a fling: rows 10-12 wait
    XCTAssertEqual(transfer(forRow: 10)?.delay, 20_000_000)
    table.setVisible(first: 12, count: 3, direction: 1)  // slowed: 10 and 11 are behind
    XCTAssertTrue(network.cancelled.contains(transfer(forRow: 10)!.id))
    XCTAssertTrue(network.cancelled.contains(transfer(forRow: 11)!.id))
    XCTAssertTrue(network.startedNow.contains(transfer(forRow: 12)!.id), "still on screen: confirmed")
    table.setVisible(first: 13, count: 3, direction: 1)
    XCTAssertFalse(network.cancelled.contains(transfer(forRow: 12)!.id), "a confirmed row is kept behind")
  }

  /// Four screens or more in one call from rest is a jump (nothing follows it): the rows
  /// where it lands load at once, and prefetching goes on.
  func testAJumpFromRestLoadsAtOnce() {
    let table = makeTable(rows: 1000, prefetch: 4, keep: 0)
    table.setVisible(first: 0, count: 3, direction: 0)
    table.setVisible(first: 500, count: 3, direction: 1)
    XCTAssertEqual(transfer(forRow: 500)?.delay, 0)
    XCTAssertNotNil(transfer(forRow: 503), "prefetching")
    table.setVisible(first: 520, count: 3, direction: 1)  // moving on at once: a fling after all
    XCTAssertEqual(transfer(forRow: 520)?.delay, 20_000_000)
  }

  /// Rows moving past faster than they could load (two rows a call with three visible:
  /// each row on screen for under two calls) are not prefetched and wait; rows still on
  /// screen while the scroll stays fast wait longer; once it slows, they start at once.
  func testAFastScrollHoldsTransfersUntilItSlows() {
    let table = makeTable(rows: 1000, prefetch: 4, keep: 0)
    table.setVisible(first: 0, count: 3, direction: 1)
    XCTAssertEqual(transfer(forRow: 0)?.delay, 0, "a scroll starting from rest loads at once")
    XCTAssertNotNil(transfer(forRow: 3), "and prefetches")
    for first in stride(from: 2, through: 10, by: 2) { table.setVisible(first: first, count: 3, direction: 1) }
    // 10 rows moved within the window, 3 visible: fast (3 x 1000 ms < 1000 ms x 10).
    // Row 12 waits until it is predicted to leave, and a frame: 3 rows at 10 rows a second.
    XCTAssertEqual(transfer(forRow: 12)?.delay, 317_000_000, "a row entering a fast scroll waits")
    XCTAssertNil(transfer(forRow: 13), "no prefetch while fast")
    table.setVisible(first: 11, count: 3, direction: 1)
    XCTAssertEqual(network.postponed[transfer(forRow: 12)!.id], 1, "still fast: row 12 waits longer")
    XCTAssertFalse(network.startedNow.contains(transfer(forRow: 12)!.id))
    XCTAssertTrue(network.cancelled.contains(transfer(forRow: 10)!.id), "left while waiting: cancelled")
    let slow = makeTable(rows: 1000, prefetch: 4, keep: 0)
    slow.setVisible(first: 500, count: 3, direction: 1)
    slow.setVisible(first: 501, count: 3, direction: 1)  // one row: 3 x 1000 ms > 1000 ms x 1
    // Row 503 was prefetched (held while 500-502 loaded): now visible, it starts at once.
    XCTAssertTrue(network.startedNow.contains(transfer(forRow: 503)!.id), "a slow scroll loads at once")
    XCTAssertNotNil(transfer(forRow: 504), "and prefetches")
  }

  func testTwoTablesOnOneLoaderCancelIndependently() {
    let a = makeTable(prefetch: 0, keep: 0), b = makeTable(prefetch: 0, keep: 0)
    a.setVisible(first: 0, count: 2, direction: 0)
    b.setVisible(first: 1, count: 2, direction: 0)  // row 1 is shared work
    XCTAssertEqual(network.started.count, 3)
    a.cancelAll()
    XCTAssertEqual(network.cancelled, [transfer(forRow: 0)!.id], "row 1 still wanted by b")
    finish(rows: [1, 2])
    drain { delivered.count >= 2 }
    XCTAssertEqual(Set(delivered.map(\.row)), [1, 2])
    XCTAssertEqual(b.stats.delivered, 2)
    XCTAssertEqual(a.stats.delivered, 0)
  }

  func testCloseStopsEveryCallback() {
    let table = makeTable(prefetch: 0, keep: 0)
    table.setVisible(first: 0, count: 3, direction: 0)
    table.close()
    finish(rows: [0, 1, 2])
    // The three loads end CANCELLED through the queue; the table passes none of them on.
    var dispatched = 0
    let deadline = monotonicNanoseconds() + 5_000_000_000
    while dispatched < 3 && monotonicNanoseconds() < deadline {
      _ = queue.wait(timeoutMilliseconds: 100)
      dispatched += queue.dispatch(max: 0)
    }
    XCTAssertEqual(dispatched, 3)
    XCTAssertTrue(delivered.isEmpty)
    XCTAssertEqual(network.cancelled.count, 3)
  }

  func testPrefetchWarmsTheCacheSilentlyAndCancelAllReachesIt() throws {
    let token = try loader.prefetch(ImageRequest(url: "http://h/p.jpg"))
    let other = try loader.prefetch(ImageRequest(url: "http://h/q.jpg"))
    XCTAssertEqual(loader.cancelAll(), 1 + 0 + 1)
    XCTAssertFalse(loader.cancel(token))
    _ = other
    let warm = try loader.prefetch(ImageRequest(url: "http://h/r.jpg"))
    network.finish(2)
    let deadline = monotonicNanoseconds() + 5_000_000_000
    while loader.cachedImage(for: ImageRequest(url: "http://h/r.jpg")) == nil && monotonicNanoseconds() < deadline {
      _ = queue.wait(timeoutMilliseconds: 10)
    }
    XCTAssertNotNil(loader.cachedImage(for: ImageRequest(url: "http://h/r.jpg")))
    XCTAssertFalse(loader.cancel(warm), "finished and forgotten")
  }
}

/// The table's scheduling rules that depend on time, driven by a clock the test moves: no
/// sleeps, the same result on any machine.
final class TableClockTests: XCTestCase {
  final class Clock: @unchecked Sendable {
    var now: UInt64 = 1_000_000_000
    func advance(milliseconds: UInt64) { now += milliseconds * 1_000_000 }
  }

  /// A table over a manual network, on the test's clock.
  final class Rig {
    let network = ManualDataLoader()
    let loader: ImageLoader
    let queue: CompletionQueue
    let clock = Clock()
    private(set) var table: ImageTable!
    private(set) var delivered = 0

    init(_ configuration: ImageTable.Configuration, rows: Int = 100) throws {
      var loaderConfiguration = LoaderConfiguration()
      loaderConfiguration.decodeThreads = 1
      loader = try ImageLoader(configuration: loaderConfiguration, dataLoader: network, decoder: FakeDecoder())
      queue = try CompletionQueue()
      table = ImageTable(loader: loader, queue: queue, rowCount: rows, configuration: configuration,
                         clock: { [clock] in clock.now },
                         requestForRow: { ImageRequest(url: "http://h/\($0).jpg", targetWidth: 10, targetHeight: 10) },
                         onRow: { [unowned self] _, _ in delivered += 1 })
    }

    /// Shows rows 0 ..< count at rest and, `milliseconds` later on the clock, finishes
    /// their transfers and delivers them: the table's measure of the network.
    func loadFirstScreen(count: Int, milliseconds: UInt64) {
      table.setVisible(first: 0, count: count, direction: 0)
      clock.advance(milliseconds: milliseconds)
      for row in 0..<count {
        guard let index = network.started.firstIndex(where: { $0.url == "http://h/\(row).jpg" }) else {
          return XCTFail("row \(row) was not started")
        }
        network.finish(index)
      }
      let deadline = monotonicNanoseconds() + 5_000_000_000
      while delivered < count && monotonicNanoseconds() < deadline {
        _ = queue.wait(timeoutMilliseconds: 100)
        _ = queue.dispatch(max: 0)
      }
      XCTAssertEqual(delivered, count)
    }

    /// The latest transfer for `row`.
    func transfer(forRow row: Int) -> ManualDataLoader.Started? {
      network.started.last { $0.url == "http://h/\(row).jpg" }
    }

    func close() {
      table.close()
      loader.close()
      queue.close()
    }
  }

  /// Visible rows have lately taken 200 ms to load: a scroll that keeps a row on screen
  /// 100 ms is a fling for the table (its rows wait out a start delay, until a frame after
  /// they are predicted to leave, instead of sending requests that would be cut as they
  /// leave), although the fixed threshold (40 ms) says slow; the threshold never rises
  /// above its cap (250 ms) however slow loads are.
  func testAScrollFasterThanRowsLoadIsAFling() throws {
    // Row 5, the last of rows 2-5, leaves after 4 rows at a row per 25 ms: 100 ms, and a
    // frame (16 ms), rounded up.
    for (loadMilliseconds, threshold, expectedDelay) in [(0 as UInt64, 40.0, 0 as UInt64), (200, 200, 117_000_000),
                                                         (2_000, 250, 117_000_000)] {
      var configuration = ImageTable.Configuration()
      configuration.prefetchRows = 0
      configuration.fastScrollMilliseconds = 40
      configuration.speedWindowMilliseconds = 50
      configuration.measuredFastScrollCapMilliseconds = 250
      let rig = try Rig(configuration)
      if loadMilliseconds > 0 {
        rig.loadFirstScreen(count: 4, milliseconds: loadMilliseconds)
      } else {
        rig.table.setVisible(first: 0, count: 4, direction: 0)
      }
      XCTAssertEqual(rig.table.currentFastScrollMilliseconds, threshold, "loads of \(loadMilliseconds) ms")
      // One row per 25 ms: an entering row stays 100 ms.
      rig.clock.advance(milliseconds: 1_000)
      rig.table.setVisible(first: 1, count: 4, direction: 1)
      rig.clock.advance(milliseconds: 25)
      rig.table.setVisible(first: 2, count: 4, direction: 1)
      XCTAssertEqual(rig.transfer(forRow: 5)?.delay, expectedDelay, "loads of \(loadMilliseconds) ms")
      rig.close()
    }
  }

  /// A row still loading when it scrolls off the top is kept (it finishes into the memory
  /// cache) where visible rows have lately loaded within the fast-scroll threshold
  /// (10 ms < 40 ms), and cancelled where they take longer (200 ms): there it would take
  /// the screen's bandwidth for a row the user left.
  func testARowBehindIsKeptOnlyWhereRowsLoadQuickly() throws {
    for (loadMilliseconds, kept) in [(10 as UInt64, true), (200, false)] {
      var configuration = ImageTable.Configuration()
      configuration.prefetchRows = 0
      configuration.keepRows = 2
      configuration.fastScrollMilliseconds = 40
      let rig = try Rig(configuration)
      rig.loadFirstScreen(count: 4, milliseconds: loadMilliseconds)
      // A slow scroll, two rows a second: row 4 comes on screen, starts, and leaves at
      // the top while still loading.
      for first in [1, 3, 5] {
        rig.clock.advance(milliseconds: 1_000)
        rig.table.setVisible(first: first, count: 4, direction: 1)
      }
      let row4 = rig.transfer(forRow: 4)!
      XCTAssertEqual(row4.delay, 0)
      XCTAssertEqual(rig.network.cancelled.contains(row4.id), !kept, "loads of \(loadMilliseconds) ms")
      rig.close()
    }
  }

  /// Scrolling at a known speed, the screen's rows rank by when they leave: the row at the
  /// leaving edge highest, the row just entering at the visible priority. With no speed
  /// yet (a first screen), all rank alike.
  func testWhileScrollingTheRowAboutToLeaveRanksFirst() throws {
    var configuration = ImageTable.Configuration()
    configuration.prefetchRows = 0
    let rig = try Rig(configuration)
    defer { rig.close() }
    func priority(_ row: Int) -> Int32? { rig.transfer(forRow: row).flatMap { rig.network.priority(of: $0.id) } }
    rig.table.setVisible(first: 0, count: 4, direction: 1)
    XCTAssertEqual((0...3).map(priority), [100, 100, 100, 100])
    // A row every 100 ms: each row stays 400 ms, longer than the 100 ms threshold.
    for first in 1...3 {
      rig.clock.advance(milliseconds: 100)
      rig.table.setVisible(first: first, count: 4, direction: 1)
    }
    XCTAssertEqual((3...6).map(priority), [103, 102, 101, 100])
    rig.clock.advance(milliseconds: 100)
    rig.table.setVisible(first: 2, count: 4, direction: -1)  // a turn: no speed yet that way
    rig.clock.advance(milliseconds: 100)
    rig.table.setVisible(first: 1, count: 4, direction: -1)
    XCTAssertEqual((1...4).map(priority), [100, 101, 102, 103], "scrolling up, row 4 leaves first")
  }

  /// A slowing fling played frame by frame, as kinetic scrolling moves it (16 ms frames,
  /// the speed 4 % of the distance left, at most 10 rows and at least a quarter row a
  /// frame: bench/scroll.c's fling), on a network where visible rows have lately taken
  /// 200 ms to load. Nothing finishes during the fling: what the test reads is which
  /// transfers the table asked for, sent (started without a delay, or let go), and when.
  func testASlowingFlingSendsTheRowsItStopsOnAndNotTheRowsItSweepsPast() throws {
    var configuration = ImageTable.Configuration()
    configuration.speedWindowMilliseconds = 50
    let rig = try Rig(configuration, rows: 1000)
    defer { rig.close() }
    rig.loadFirstScreen(count: 8, milliseconds: 200)
    XCTAssertEqual(rig.table.currentFastScrollMilliseconds, 200)
    rig.clock.advance(milliseconds: 1_000)
    func row(of started: ManualDataLoader.Started) -> Int { Int(started.url.dropFirst(9).dropLast(4))! }
    var sentAt: [Int: Int] = [:], enteredAt: [Int: Int] = [:], leftAt: [Int: Int] = [:]
    var requestedAt: [Int: Int] = [:], foregroundAt: [Int: Int] = [:]
    var position = 0.0, first = 0, frame = 0
    let target = 300.0
    for started in rig.network.started where started.delay == 0 || rig.network.startedNow.contains(started.id) {
      sentAt[row(of: started)] = 0
    }
    while frame < 400 {
      frame += 1
      rig.clock.advance(milliseconds: 16)
      let moving = position < target
      if moving { position = min(target, position + max(0.25, min(10, (target - position) * 0.04))) }
      let next = Int(position.rounded(.down))
      for row in max(first + 8, next)..<(next + 8) where enteredAt[row] == nil { enteredAt[row] = frame }
      for row in first..<min(next, first + 8) { leftAt[row] = frame }
      first = next
      rig.table.setVisible(first: first, count: 8, direction: moving ? 1 : 0)
      let now = rig.network.startedNow
      for started in rig.network.started {
        let row = row(of: started)
        if requestedAt[row] == nil { requestedAt[row] = frame }
        if (rig.network.priority(of: started.id) ?? -1) >= 0 && enteredAt[row] == nil { foregroundAt[row] = frame }
        if (started.delay == 0 || now.contains(started.id)) && sentAt[row] == nil { sentAt[row] = frame }
      }
    }
    // The final screen, rows 300-307: asked for before they were on screen (the last rows
    // of a fling creep in a quarter row a frame), all but possibly two, ranked with the
    // visible rows (as prefetches they wait while visible rows load: nothing finishes
    // here), and sent once on screen.
    let early = (300...307).filter { row in requestedAt[row].map { asked in asked < enteredAt[row]! } ?? false }
    XCTAssertGreaterThanOrEqual(early.count, 6, "asked for before entering: \(early)")
    for row in early {
      XCTAssertGreaterThanOrEqual(foregroundAt[row] ?? -1, 0, "row \(row) ranked in the foreground before entering")
    }
    for row in 300...307 { XCTAssertNotNil(sentAt[row], "final screen row \(row)") }
    // Rows on screen under 150 ms: no request. Rows on screen 400 ms or more: sent by their
    // second frame on screen.
    var swept = 0, stayed = 0
    for (row, entered) in enteredAt where row >= 8 && row < 300 {
      let frames = (leftAt[row] ?? frame) - entered
      if frames * 16 < 150 {
        XCTAssertEqual(sentAt[row] ?? 0, 0, "row \(row) on screen \(frames * 16) ms: sent during the fling")
        swept += 1
      } else if frames * 16 >= 400 {
        XCTAssertLessThanOrEqual(sentAt[row] ?? .max, entered + 1, "row \(row) on screen \(frames * 16) ms")
        stayed += 1
      }
    }
    XCTAssertGreaterThan(swept, 200)
    XCTAssertGreaterThanOrEqual(stayed, 4)
  }
}
