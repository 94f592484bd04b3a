import XCTest
@testable import PixloadCore

/// The table's scroll prediction, fed frame by frame with the moves of a kinetic fling
/// (the one bench/scroll.c plays: 16 ms frames, the speed a fixed share of the distance
/// left, at most 10 rows a frame, at least a quarter), with made-up times.
final class ScrollMotionTests: XCTestCase {
  static let frame: UInt64 = 16_000_000

  /// Plays a fling from `start` towards `target` and returns, for each frame, the first
  /// visible row and the prediction the motion gave after that frame's move.
  func fling(from start: Double, to target: Double, visible: Int = 8, share: Double = 0.04)
    -> [(at: UInt64, first: Int, prediction: ScrollPrediction?)] {
    var motion = ScrollMotion(windowMilliseconds: 50)
    var position = start, now: UInt64 = 1_000_000_000
    var first = Int(start)
    var frames: [(UInt64, Int, ScrollPrediction?)] = []
    motion.record(rows: 0, at: now)
    while position < target {
      now += Self.frame
      let speed = max(0.25, min(10, (target - position) * share))
      position = min(target, position + speed)
      let previousMoveAt = motion.previousMoveAt
      let next = Int(position.rounded(.down))
      motion.record(rows: next - first, at: now)
      first = next
      let velocity = motion.slowingSpeed(at: now) ?? motion.velocity(at: now, previousMoveAt: previousMoveAt)
      let prediction = velocity.flatMap { $0 == 0 ? nil : ScrollPrediction(first: first, count: visible, velocity: $0, decay: motion.decay) }
      frames.append((now, first, prediction))
    }
    return frames
  }

  /// While the fling slows down, the predicted stop is where it stops: within 20 rows at
  /// every frame over the last 60 rows of travel, within 6 on average (whole rows per
  /// frame make each measure rough).
  func testASlowingFlingsStopIsPredicted() {
    let frames = fling(from: 42, to: 595)
    var errors: [Double] = []
    for (_, first, prediction) in frames where first >= 535 && first < 590 {
      guard let prediction else { continue }
      let stop = Double(first) + prediction.remainingTravel
      XCTAssertEqual(stop, 595, accuracy: 20, "at row \(first)")
      errors.append(abs(stop - 595))
    }
    XCTAssertGreaterThan(errors.count, 30, "predictions over the last rows")
    XCTAssertLessThan(errors.reduce(0, +) / Double(errors.count), 6)
  }

  /// Each row entering the screen of that fling is told apart by how long it will stay:
  /// a row that stays 400 ms or more (up to the final screen, which stays for good) is
  /// predicted to stay at least 300 ms, a row swept past within 150 ms to leave within
  /// 250 ms.
  func testRowsVisitsArePredicted() {
    let frames = fling(from: 42, to: 595)
    // Actual visits: from the frame a row enters to the frame it leaves.
    var entered: [Int: UInt64] = [:], left: [Int: UInt64] = [:]
    var previousFirst = 42
    for (at, first, _) in frames {
      for row in (previousFirst + 8)..<(first + 8) where entered[row] == nil { entered[row] = at }
      for row in previousFirst..<first where left[row] == nil { left[row] = at }
      previousFirst = first
    }
    var long = 0, short = 0
    for (at, _, prediction) in frames {
      guard let prediction else { continue }
      for row in 100..<603 where entered[row] == at {
        let predicted = prediction.visit(of: row).leave
        let actual = left[row].map { Double($0 - at) / 1e9 } ?? .infinity
        if actual >= 0.4 {
          XCTAssertGreaterThanOrEqual(predicted, 0.3, "row \(row) stays \(actual) s")
          long += 1
        } else if actual < 0.15 {
          XCTAssertLessThan(predicted, 0.25, "row \(row) stays \(actual) s")
          short += 1
        }
      }
    }
    XCTAssertGreaterThan(long, 10)
    XCTAssertGreaterThan(short, 20)
  }

  /// A steady scroll (one row every 8 frames) has a speed and no decay; its rows' visits
  /// are linear; a first move has no speed; a turn starts a new history.
  func testSteadyScrollFirstMoveAndTurn() {
    var motion = ScrollMotion(windowMilliseconds: 50)
    var now: UInt64 = 1_000_000_000
    motion.record(rows: 1, at: now)
    XCTAssertNil(motion.velocity(at: now, previousMoveAt: nil), "a first move has no speed")
    for _ in 0..<10 {
      let previous = motion.previousMoveAt
      now += 8 * Self.frame
      motion.record(rows: 1, at: now)
      XCTAssertEqual(motion.velocity(at: now, previousMoveAt: previous)!, 1 / 0.128, accuracy: 0.01)
      XCTAssertNil(motion.decay)
    }
    let prediction = ScrollPrediction(first: 10, count: 8, velocity: 1 / 0.128, decay: nil)
    XCTAssertEqual(prediction.visit(of: 18).enter, 0.128, accuracy: 1e-9)
    XCTAssertEqual(prediction.visit(of: 18).leave, 9 * 0.128, accuracy: 1e-9)
    XCTAssertEqual(prediction.visit(of: 12).enter, 0)
    let up = ScrollPrediction(first: 10, count: 8, velocity: -1 / 0.128, decay: nil)
    XCTAssertEqual(up.visit(of: 9).enter, 0.128, accuracy: 1e-9)
    XCTAssertEqual(up.visit(of: 17).leave, 0.128, accuracy: 1e-9)
    now += Self.frame
    motion.record(rows: -1, at: now)
    XCTAssertEqual(motion.rowsMoved(before: now + 1), 1, "the other way: a new history")
  }
}
