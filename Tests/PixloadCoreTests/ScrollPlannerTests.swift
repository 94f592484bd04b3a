import XCTest
@testable import PixloadCore

/// The table's scroll planner alone: plans read directly from the screen's moves, the
/// rows' states and made-up times, with no loader, no network and no clock.
final class ScrollPlannerTests: XCTestCase {
  typealias Plan = ScrollPlanner.Plan

  /// A planner and the rows a table would track, updated from each plan as the table
  /// does (every load asked for is recorded as issued; nothing finishes).
  struct Rig {
    var planner: ScrollPlanner
    var rows: [Int: TableRow] = [:]
    var now: UInt64 = 1_000_000_000
    let rowCount: Int
    private var lastToken: UInt64 = 0

    init(rowCount: Int = 1000, _ configure: (inout ImageTable.Configuration) -> Void = { _ in }) {
      var configuration = ImageTable.Configuration()
      configure(&configuration)
      planner = ScrollPlanner(configuration: configuration)
      self.rowCount = rowCount
    }

    /// A row whose load has been issued.
    mutating func loading(unconfirmed: Bool = false) -> TableRow {
      lastToken += 1
      return TableRow(phase: .loading(generation: lastToken, token: lastToken), unconfirmed: unconfirmed)
    }

    /// Shows `first ..< first + count`, `milliseconds` after the previous call.
    mutating func show(_ first: Int, count: Int, direction: Int, after milliseconds: UInt64 = 0) -> Plan {
      now += milliseconds * 1_000_000
      let plan = planner.plan(visible: first..<min(rowCount, first + count), rowCount: rowCount, direction: direction,
                              prefetchLimit: planner.configuration.prefetchRows, rows: rows, now: now)
      for row in plan.cancel + plan.forget { rows[row] = nil }
      for (row, action) in plan.visible {
        switch action {
        case .load(_, let delay): rows[row] = loading(unconfirmed: delay != nil)
        case .raise(_, nil): rows[row]?.unconfirmed = false
        case .raise: break
        }
      }
      for (row, _) in plan.prefetch { rows[row] = loading() }
      return plan
    }
  }

  /// Still: the screen loads at the visible priority, prefetches look both ways (half the
  /// window below, half above, nearest first, a rank lower each); rows the host had leave
  /// the table, loads outside every window are cancelled, loads within it go on at their
  /// new rank, and a fling's unconfirmed row is cancelled even there (and asked for anew
  /// as a prefetch).
  func testAtRestTheScreenLoadsAndPrefetchesLookBothWays() {
    var rig = Rig(rowCount: 100) { $0.prefetchRows = 8 }
    rig.rows = [30: TableRow(phase: .shown), 50: rig.loading(), 7: rig.loading(), 9: rig.loading(unconfirmed: true)]
    let plan = rig.show(10, count: 4, direction: 0)
    XCTAssertEqual(plan.visible.map(\.row), [10, 11, 12, 13])
    XCTAssertEqual(plan.visible.map(\.action), Array(repeating: .load(priority: 100, startDelayMilliseconds: nil), count: 4))
    XCTAssertEqual(plan.forget, [30])
    XCTAssertEqual(plan.cancel.sorted(), [9, 50])
    XCTAssertEqual(plan.keep, [7])
    // The window: 14 15 16 17 9 8 7 6; row 7 is loading already.
    XCTAssertEqual(plan.prefetch.map(\.row), [14, 15, 16, 17, 9, 8, 6])
    XCTAssertEqual(plan.prefetch.map(\.priority), [-100, -101, -102, -103, -104, -105, -107])
    XCTAssertEqual(plan.rerank.map(\.row), [7])
    XCTAssertEqual(plan.rerank.map(\.priority), [-106])
  }

  /// A row every 200 ms, four on screen: each row stays 800 ms, no fling. The screen's
  /// rows rank by when they leave (the top one first), the rows ahead are prefetched in
  /// scroll order, a row behind still loading is kept (ranked after the window ahead),
  /// and a row the host had that scrolled off is forgotten.
  func testASlowScrollRanksTheLeavingRowFirstAndKeepsRowsBehind() {
    var rig = Rig(rowCount: 100) { $0.prefetchRows = 8; $0.keepRows = 2 }
    _ = rig.show(0, count: 4, direction: 1)
    _ = rig.show(1, count: 4, direction: 1, after: 200)
    rig.rows[0] = rig.loading()
    rig.rows[1] = TableRow(phase: .shown)
    rig.rows[5] = nil
    let plan = rig.show(2, count: 4, direction: 1, after: 200)
    XCTAssertEqual(plan.forget, [1])
    XCTAssertEqual(plan.keep.sorted(), [0] + Array(6...12))
    XCTAssertEqual(plan.cancel, [])
    XCTAssertEqual(plan.visible.map(\.row), [2, 3, 4, 5])
    XCTAssertEqual(plan.visible.map(\.action), [
      .raise(priority: 103, postponeMilliseconds: nil), .raise(priority: 102, postponeMilliseconds: nil),
      .raise(priority: 101, postponeMilliseconds: nil), .load(priority: 100, startDelayMilliseconds: nil),
    ])
    // Rows 6-12 were prefetched by the previous calls; 13 completes the window.
    XCTAssertEqual(plan.prefetch.map(\.row), [13])
    XCTAssertEqual(plan.prefetch.map(\.priority), [-107])
    XCTAssertEqual(plan.rerank.map(\.row), Array(6...12) + [0])
    XCTAssertEqual(plan.rerank.map(\.priority), [-100, -101, -102, -103, -104, -105, -106, -108])
  }

  /// A fling: the first frame moves three screens, so every row on it waits out the start
  /// delay (20 ms) and nothing is prefetched; what it left is cancelled but for the rows
  /// just behind. The next frame, at 480 rows a second, is fast: it keeps nothing behind,
  /// also cancels the unconfirmed rows it leaves, and its own rows wait too, ranked by when
  /// they leave.
  func testAFlingsRowsWaitAndWhatItLeavesIsCancelled() {
    var rig = Rig { $0.keepRows = 2 }
    _ = rig.show(0, count: 4, direction: 1)
    XCTAssertEqual(rig.rows.keys.sorted(), Array(0...11), "the screen and 8 prefetches")
    var plan = rig.show(12, count: 4, direction: 1, after: 16)
    XCTAssertEqual(plan.cancel.sorted(), Array(0...9))
    XCTAssertEqual(plan.keep.sorted(), [10, 11], "behind")
    XCTAssertEqual(plan.visible.map(\.action), Array(repeating: .load(priority: 100, startDelayMilliseconds: 20), count: 4))
    XCTAssertEqual(plan.prefetch.count, 0)
    XCTAssertEqual(plan.rerank.map(\.row), [10, 11])
    XCTAssertEqual(plan.rerank.map(\.priority), [-100, -101])
    plan = rig.show(24, count: 4, direction: 1, after: 16)
    XCTAssertEqual(plan.cancel.sorted(), Array(10...15), "a fast scroll keeps nothing behind")
    XCTAssertEqual(plan.visible.map(\.action), [103, 102, 101, 100].map { .load(priority: $0, startDelayMilliseconds: 20) })
    XCTAssertEqual(plan.prefetch.count, 0)
    XCTAssertEqual(plan.keep, [])
  }

  /// A row every 25 ms with three on screen (a row stays 75 ms, under the 100 ms
  /// threshold): an entering row's transfer waits until a frame after it is predicted to
  /// leave; still on screen at the next move and still passing, it is postponed again. A
  /// move after a 300 ms pause is the scroll slowing to a stop (a slowdown from 40 rows a
  /// second to 3): the rows still on screen start now, the entering row loads at once,
  /// and nothing past the stop is prefetched.
  func testAPassingRowIsPostponedAndStartsWhenTheScrollSlows() {
    var rig = Rig { $0.prefetchRows = 4; $0.keepRows = 0 }
    _ = rig.show(0, count: 3, direction: 1)
    var plan = Plan()
    for first in 1...10 { plan = rig.show(first, count: 3, direction: 1, after: 25) }
    // 40 rows a second: row 12 leaves after 3 rows, 75 ms, and a frame.
    XCTAssertEqual(plan.visible.last?.row, 12)
    XCTAssertEqual(plan.visible.last?.action, .load(priority: 100, startDelayMilliseconds: 92))
    XCTAssertEqual(rig.rows[12]?.unconfirmed, true)
    XCTAssertEqual(plan.prefetch.count, 0, "no prefetch while fast")
    plan = rig.show(11, count: 3, direction: 1, after: 25)
    // Two rows left to go at 40 rows a second: 50 ms, and a frame.
    XCTAssertEqual(plan.visible.first { $0.row == 12 }?.action, .raise(priority: 101, postponeMilliseconds: 67))
    XCTAssertEqual(plan.cancel, [10], "left while waiting")
    plan = rig.show(12, count: 3, direction: 1, after: 300)
    XCTAssertEqual(plan.visible.first { $0.row == 12 }?.action, .raise(priority: 102, postponeMilliseconds: nil))
    XCTAssertEqual(rig.rows[12]?.unconfirmed, false)
    XCTAssertEqual(plan.visible.last?.action, .load(priority: 100, startDelayMilliseconds: nil))
    XCTAssertEqual(plan.prefetch.count, 0, "stopping here")
  }

  /// A kinetic fling (bench/scroll.c's: 16 ms frames, the speed 4 % of the distance left,
  /// at most 10 rows and at least a quarter a frame) from row 0 to row 300, eight rows on
  /// screen, where visible rows have lately loaded in 200 ms. At full speed nothing is
  /// prefetched and every row on screen waits; as it slows down, the rows of the final
  /// screen are asked for before they enter, ranked just below the visible rows; at rest,
  /// the final screen starts now.
  func testASlowingFlingPrefetchesTheScreenItStopsOn() {
    var rig = Rig()
    rig.planner.recordLoad(nanoseconds: 200_000_000)
    XCTAssertEqual(rig.planner.fastScrollThresholdMilliseconds, 200)
    _ = rig.show(0, count: 8, direction: 0)
    var position = 0.0, first = 0
    var fastFrames = 0
    var landingAskedAt: [Int: Int] = [:]
    let target = 300.0
    while position < target {
      let speed = max(0.25, min(10, (target - position) * 0.04))
      position = min(target, position + speed)
      first = Int(position.rounded(.down))
      let plan = rig.show(first, count: 8, direction: 1, after: 16)
      if speed >= 5 {
        fastFrames += 1
        XCTAssertEqual(plan.prefetch.count, 0, "at full speed, row \(first)")
        for (row, action) in plan.visible {
          guard case .load(_, let delay) = action else { continue }
          XCTAssertNotNil(delay, "row \(row) at full speed")
        }
      }
      for (row, priority) in plan.prefetch where row >= 300 && (0..<100).contains(priority) {
        landingAskedAt[row] = landingAskedAt[row] ?? first
      }
    }
    XCTAssertGreaterThan(fastFrames, 15)
    // Rows 300-307 enter when the first row reaches 293-300: asked for before that, but
    // possibly the last two.
    let early = landingAskedAt.filter { row, askedAt in askedAt < row - 7 }
    XCTAssertGreaterThanOrEqual(early.count, 6, "\(landingAskedAt.sorted { $0.key < $1.key })")
    rig.rows = [:]
    let plan = rig.show(300, count: 8, direction: 0, after: 1000)
    XCTAssertEqual(plan.visible.map(\.action), Array(repeating: .load(priority: 100, startDelayMilliseconds: nil), count: 8))
  }

  /// Load times: the fast-scroll threshold follows them (an average weighing the latest a
  /// quarter) up to its cap; rows behind are kept only while loads take under the fixed
  /// threshold. The prefetch window shrinks to what the network delivers in its horizon.
  func testLoadTimesAndThroughputShapeThePlan() {
    var rig = Rig(rowCount: 100) { $0.keepRows = 2; $0.prefetchRows = 0 }
    XCTAssertEqual(rig.planner.fastScrollThresholdMilliseconds, 100)
    rig.planner.recordLoad(nanoseconds: 50_000_000)
    XCTAssertEqual(rig.planner.fastScrollThresholdMilliseconds, 100, "never below the fixed threshold")
    _ = rig.show(0, count: 4, direction: 1)
    rig.rows[0] = rig.loading()
    XCTAssertEqual(rig.show(1, count: 4, direction: 1, after: 1000).keep, [0], "loads of 50 ms: kept behind")
    rig.planner.recordLoad(nanoseconds: 450_000_000)  // 50 + (450 - 50) / 4
    XCTAssertEqual(rig.planner.fastScrollThresholdMilliseconds, 150)
    rig.rows[1] = rig.loading()
    XCTAssertEqual(rig.show(2, count: 4, direction: 1, after: 1000).cancel.sorted(), [0, 1], "loads of 150 ms: cancelled")
    rig.planner.recordLoad(nanoseconds: 5_000_000_000)
    XCTAssertEqual(rig.planner.fastScrollThresholdMilliseconds, 400, "capped")

    let planner = ScrollPlanner(configuration: ImageTable.Configuration())  // 8 rows, 500 ms
    XCTAssertEqual(planner.prefetchWindow(nil), 8)
    XCTAssertEqual(planner.prefetchWindow(Throughput(bytesPerSecond: 100_000, meanResponseBytes: 10_000)), 5)
    XCTAssertEqual(planner.prefetchWindow(Throughput(bytesPerSecond: 1_000, meanResponseBytes: 10_000)), 1)
    XCTAssertEqual(planner.prefetchWindow(Throughput(bytesPerSecond: 1_000_000, meanResponseBytes: 10_000)), 8)
  }
}
