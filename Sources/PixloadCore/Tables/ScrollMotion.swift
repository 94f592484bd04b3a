#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Where the scroll is going: the table's recent moves of its first visible row, their
/// speed and, once a fling slows down, where it will stop. Kinetic scrolling (GTK, Qt,
/// Android, iOS) slows a fling exponentially: the speed falls by the same factor in every
/// interval, so the stop lies the speed times its time constant ahead. From that the table
/// predicts, for any row, when it enters the screen and when it leaves, and loads a row
/// only if it will stay long enough for its image to arrive, starting rows before they
/// enter when they would otherwise arrive late.
///
/// Times are the table's clock (monotonic nanoseconds, injected by tests). Not thread
/// safe: the table's lock guards it.
struct ScrollMotion {
  /// The speed is rows moved over this window (a frame or three), so that a host calling
  /// more than once per frame does not make a slow scroll look fast.
  let windowNanoseconds: UInt64

  /// Signed moves (rows; > 0 towards higher rows) and when they happened, all in one
  /// direction, over the last `historyNanoseconds`.
  private var moves: [(at: UInt64, rows: Int)] = []
  private var lastMoveAt: UInt64?
  /// The time constant (seconds) of the scroll's exponential slowdown, and its speed
  /// (rows per second) at a time, as last measured; see `measureDecay`.
  private(set) var decay: Double?
  private var slowing: (at: UInt64, rowsPerSecond: Double)?

  init(windowMilliseconds: Int) {
    windowNanoseconds = UInt64(max(1, windowMilliseconds)) * 1_000_000
  }

  /// A jump or a new scroll from rest: the moves so far say nothing of what follows.
  mutating func reset() {
    moves.removeAll()
    lastMoveAt = nil
    decay = nil
    slowing = nil
  }

  /// Records a move of the first visible row by `rows` (signed) at `now`; a move the other
  /// way, or one after a pause, starts a new history.
  mutating func record(rows: Int, at now: UInt64) {
    if let last = moves.last, rows != 0, (last.rows > 0) != (rows > 0) { reset() }
    let history = historyNanoseconds
    moves.removeAll { now &- $0.at > history }
    if moves.isEmpty {
      decay = nil
      slowing = nil
    }
    guard rows != 0 else { return }
    moves.append((now, rows))
    lastMoveAt = now
    measureDecay()
  }

  var previousMoveAt: UInt64? { lastMoveAt }

  /// Rows moved within the speed window before `now`, excluding moves at `now` itself.
  func rowsMoved(before now: UInt64) -> Int {
    moves.reduce(0) { $0 + (now &- $1.at <= windowNanoseconds && $1.at != now ? abs($1.rows) : 0) }
  }

  /// Rows per second (signed), over the speed window: rows moved in it over the whole
  /// window. A move after a pause (nothing else moved within the window) took the whole
  /// pause, so a page-down a second after the last one is slow; a first move has no speed
  /// (nil): nothing says how long it took.
  func velocity(at now: UInt64, previousMoveAt: UInt64?) -> Double? {
    let recent = moves.filter { now &- $0.at <= windowNanoseconds }
    let rows = recent.reduce(0) { $0 + $1.rows }
    guard rows != 0 else { return 0 }
    let span: UInt64
    if recent.count > 1 {
      span = windowNanoseconds
    } else if let previousMoveAt, previousMoveAt != now {
      span = max(windowNanoseconds, now &- previousMoveAt)
    } else {
      return nil
    }
    return Double(rows) / (Double(span) / 1e9)
  }

  /// The speed (rows per second, unsigned) at `now` of a scroll that is slowing down, nil
  /// when it is not (then `steadySpeed` is the speed).
  func slowingSpeed(at now: UInt64) -> Double? {
    guard let decay, let slowing else { return nil }
    return slowing.rowsPerSecond * exp(-Double(now &- slowing.at) / 1e9 / decay)
  }

  /// The speed (rows per second, unsigned) between moves over the last deceleration
  /// interval or two: exact where `velocity`, counting the rows within its short window,
  /// rounds a row every other frame to one or two per window. Over the speed window at
  /// least, as `velocity`: moves a host makes within one frame are one move. Nil before a
  /// second move.
  var steadySpeed: Double? {
    guard let latest = moves.last,
          let earliest = moves.first(where: { $0.at < latest.at && latest.at - $0.at <= 2 * decelerationInterval })
    else { return nil }
    // The rows moved after `earliest` took the time since it; within a speed window, the
    // rows moved in the window took the window.
    let span = max(latest.at - earliest.at, windowNanoseconds)
    let rows = moves.reduce(0) { $0 + ($1.at > earliest.at || latest.at - $1.at < span ? abs($1.rows) : 0) }
    return Double(rows) / (Double(span) / 1e9)
  }

  /// Compares the speed over the last `interval` (up to the latest move) with the speed
  /// over the interval before it, each between two moves (exact positions): a slowdown by
  /// a factor f over the time between their middles t is a time constant of t / ln f.
  /// Kept while too few rows move to tell (a fling's last rows move every few frames);
  /// dropped when the scroll speeds up.
  private mutating func measureDecay() {
    guard let latest = moves.last else { return }
    let interval = decelerationInterval
    // Positions: rows moved up to each move, counted from the oldest.
    var position = 0
    var samples: [(at: UInt64, position: Int)] = []
    for move in moves {
      position += abs(move.rows)
      samples.append((move.at, position))
    }
    guard let middle = samples.last(where: { $0.at + interval <= latest.at }),
          let oldest = samples.last(where: { $0.at + interval <= middle.at }) else { return }
    let later = Double(position - middle.position), earlier = Double(middle.position - oldest.position)
    let laterSeconds = Double(latest.at - middle.at) / 1e9, earlierSeconds = Double(middle.at - oldest.at) / 1e9
    let laterRate = later / laterSeconds, earlierRate = earlier / earlierSeconds
    if earlier >= 4, later > 0, earlierRate > 1.05 * laterRate {
      // Whole rows make each measure rough: averaged, a third the latest.
      let measured = (earlierSeconds + laterSeconds) / 2 / log(earlierRate / laterRate)
      let tau = decay.map { $0 + (measured - $0) / 3 } ?? measured
      decay = tau
      // The later rate is the speed at its interval's middle.
      slowing = (latest.at, laterRate * exp(-laterSeconds / 2 / tau))
    } else if later >= 4, laterRate > 1.05 * earlierRate {
      decay = nil
      slowing = nil
    }
  }

  /// The two intervals compared for a slowdown: long enough to count several rows of a
  /// slowing fling in each.
  private var decelerationInterval: UInt64 { max(2 * windowNanoseconds, 100_000_000) }
  private var historyNanoseconds: UInt64 { 4 * decelerationInterval }
}

/// A prediction of the scroll from now on: the first visible row moving at `velocity`
/// rows per second, slowing with time constant `decay` (seconds; nil: steady).
struct ScrollPrediction {
  let first: Int
  let count: Int
  let velocity: Double
  let decay: Double?

  /// Rows the first visible row travels before the scroll stops (infinite when steady).
  var remainingTravel: Double {
    guard let decay else { return .infinity }
    return abs(velocity) * decay
  }

  /// Seconds until the first visible row has moved `distance` rows on (0 for distances of
  /// 0 or less; infinite if the scroll stops first or does not move).
  func seconds(toTravel distance: Double) -> Double {
    if distance <= 0 { return 0 }
    let speed = abs(velocity)
    guard speed > 0 else { return .infinity }
    guard let decay else { return distance / speed }
    let fraction = distance / (speed * decay)
    return fraction >= 1 ? .infinity : -decay * log(1 - fraction)
  }

  /// When `row` enters the screen and when it leaves it, in seconds from now (0: already
  /// on screen; infinite: not within this scroll).
  func visit(of row: Int) -> (enter: Double, leave: Double) {
    let last = first + count - 1
    let enterDistance: Int, leaveDistance: Int
    if velocity >= 0 {
      enterDistance = row - last
      leaveDistance = row + 1 - first
    } else {
      enterDistance = first - row
      leaveDistance = last + 1 - row
    }
    return (seconds(toTravel: Double(enterDistance)), seconds(toTravel: Double(leaveDistance)))
  }
}
