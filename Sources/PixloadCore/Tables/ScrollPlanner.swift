/// What a table does around its screen at one `setVisible`, decided from the scroll and the
/// rows' states alone: which visible rows load (and whether their transfers wait), which
/// rows ahead are prefetched, which loads off screen go on or are cancelled, and every
/// priority. A fling (the screen moving a screen or more per call, or rows passing faster
/// than they load) loads only the rows that will stay long enough for their images to
/// arrive, predicted from the scroll's speed and, once it slows down, where it will stop
/// (`ScrollMotion`): so the rows where a fling comes to rest start before they are on
/// screen, while the rows it sweeps past cost no request. Prefetching reaches the rows that
/// the scroll brings on screen within the time a load has lately taken (`leadSeconds`), at
/// least `minimumPrefetchRows` and at most the prefetch window: on a fast network a row
/// ahead is loaded as it comes, on a slow one the window fills.
///
/// A value with no lock, no loader and no clock: the table owns one under its lock, passes
/// the time and its rows, and carries out the plan (asking the host for requests, the
/// memory cache for images, the loader for transfers).
struct ScrollPlanner {
  let configuration: ImageTable.Configuration
  /// The recent moves of the visible rows: the scroll's speed and where it stops.
  private(set) var motion: ScrollMotion
  /// The visible rows at the previous plan: how far the screen moved since.
  private(set) var previousVisible = 0..<0
  /// How long visible rows' loads (asked to start now, not held by a fling) have lately
  /// taken, from their start to their result: an average weighing the latest a quarter.
  private(set) var recentLoadNanoseconds: Double?

  init(configuration: ImageTable.Configuration) {
    self.configuration = configuration
    motion = ScrollMotion(windowMilliseconds: configuration.speedWindowMilliseconds)
  }

  /// What one `setVisible` does. Rows are named by index; the table finds their tokens.
  struct Plan {
    enum VisibleRow: Equatable {
      /// Not tracked: load it (unless the memory cache has it) at `priority`. A passing
      /// row's transfer waits `startDelayMilliseconds` (a fling's start delay; nil: it
      /// starts now), to be cancelled if the row leaves and confirmed if it stays.
      case load(priority: Int32, startDelayMilliseconds: Int?)
      /// Loading: set its priority, then postpone its transfer this long (still passing)
      /// or, nil, let it start now (a fling's start delay is over for it).
      case raise(priority: Int32, postponeMilliseconds: Int?)
    }

    /// Rows off screen whose loads are cancelled: they left every window, or were started
    /// by a fling and never confirmed (kept, they would send a request when their delay
    /// ends), in the order of the rows given.
    var cancel: [Int] = []
    /// Rows off screen the host was given: forgotten (the host's slot may show another
    /// row now; when the row comes back it is delivered again, from memory).
    var forget: [Int] = []
    /// Rows off screen whose loads go on, kept ahead or behind.
    var keep: [Int] = []
    /// The visible rows to act on, top to bottom (rows shown, or whose load is still being
    /// issued, are left as they are).
    var visible: [(row: Int, action: VisibleRow)] = []
    /// Rows to prefetch, nearest (soonest on screen) first, at their priorities; the table
    /// holds their transfers while the screen loads.
    var prefetch: [(row: Int, priority: Int32)] = []
    /// Rows loading off screen (kept ahead or behind) and the priority each has now:
    /// visible rows that left drop to low priority, rows ahead take this plan's rank.
    var rerank: [(row: Int, priority: Int32)] = []
  }

  /// Records the screen's move to `visible` at `now` and plans the rows: `rows` are the
  /// rows the table tracks, `prefetchLimit` the prefetch window (`prefetchWindow`).
  mutating func plan(visible: Range<Int>, rowCount: Int, direction: Int, prefetchLimit: Int,
                     rows: [Int: TableRow], now: UInt64) -> Plan {
    let window = scroll(to: visible, rowCount: rowCount, direction: direction, prefetchLimit: prefetchLimit, now: now)
    var plan = Plan()
    var gone: Set<Int> = []
    for (row, state) in rows where !visible.contains(row) {
      switch state.phase {
      case .shown:
        plan.forget.append(row)
        gone.insert(row)
      case .loading:
        if state.unconfirmed || (!window.keepAhead.contains(row) && !window.behind.contains(row)) {
          plan.cancel.append(row)
          gone.insert(row)
        } else {
          plan.keep.append(row)
        }
      }
    }
    let minimumDelay = configuration.flingStartDelayMilliseconds
    for row in visible {
      switch rows[row]?.phase {
      case .shown?, .loading(_, nil)?:
        continue  // delivered, or being issued on another thread with the priority it had then
      case .loading(_, _?)?:
        // Still on screen a frame later: a fling's start delay is over for this row,
        // unless it is still passing (it is likely gone before its image could arrive).
        let postpone = window.isPassing(row) ? window.passingDelay(row, minimum: minimumDelay) : nil
        plan.visible.append((row, .raise(priority: visiblePriority(row, window, visible), postponeMilliseconds: postpone)))
      case nil:
        let delay = window.isPassing(row) ? window.passingDelay(row, minimum: minimumDelay) : nil
        plan.visible.append((row, .load(priority: visiblePriority(row, window, visible), startDelayMilliseconds: delay)))
      }
    }
    // Also the rows a slowing fling will stop on are prefetches (the table holds them
    // while the screen loads): sent at once, they took a slow link's bandwidth from rows
    // still on screen that were about to leave.
    for (distance, row) in window.ahead.enumerated() where rows[row] == nil || gone.contains(row) {
      plan.prefetch.append((row, aheadPriority(row, distance: distance, window)))
    }
    for (distance, row) in (window.keepAhead + Array(window.behind)).enumerated() where !gone.contains(row) {
      if case .loading(_, _?)? = rows[row]?.phase { plan.rerank.append((row, aheadPriority(row, distance: distance, window))) }
    }
    return plan
  }

  /// A visible row's load took `nanoseconds` (from its start to its result, not from
  /// memory): the measure behind `leadSeconds`, `fastScrollThresholdMilliseconds` and
  /// the rows kept behind.
  mutating func recordLoad(nanoseconds took: Double) {
    recentLoadNanoseconds = recentLoadNanoseconds.map { $0 + (took - $0) / 4 } ?? took
  }

  /// How many rows to prefetch when the network delivers `throughput` (see
  /// `Configuration.prefetchRows`).
  func prefetchWindow(_ throughput: Throughput?) -> Int {
    let most = max(0, configuration.prefetchRows)
    guard configuration.prefetchHorizonMilliseconds > 0, let throughput, most > 0 else { return most }
    let fill = throughput.responsesPerSecond * Double(configuration.prefetchHorizonMilliseconds) / 1000
    return fill >= Double(most) ? most : max(1, Int(fill.rounded(.up)))
  }

  /// See `Configuration.measuredFastScrollCapMilliseconds`.
  var fastScrollThresholdMilliseconds: Double {
    let fixed = Double(configuration.fastScrollMilliseconds)
    guard let load = recentLoadNanoseconds, fixed > 0 else { return fixed }
    return max(fixed, min(load / 1e6, Double(configuration.measuredFastScrollCapMilliseconds)))
  }

  /// Row arithmetic saturates: a host may pass any Int64.
  static func add(_ a: Int, _ b: Int) -> Int {
    let (sum, overflow) = a.addingReportingOverflow(b)
    return overflow ? (b > 0 ? Int.max : Int.min) : sum
  }

  // MARK: - Private

  /// The rows around the screen, from where the scroll is going.
  private struct Window {
    /// Rows to prefetch now, nearest (soonest on screen) first.
    var ahead: [Int] = []
    /// Rows of `ahead` that the scroll will stop on (a slowing fling's final screen, as
    /// predicted): ranked as visible rows are, after them.
    var landing: Set<Int> = []
    /// Rows ahead whose loads, once started, go on: `ahead` and the configured window
    /// beyond it, so that a prediction that wavers from frame to frame does not cut and
    /// restart transfers (on a slow server each start costs a turn).
    var keepAhead: [Int] = []
    /// Rows behind that keep loading.
    var behind: Range<Int> = 0..<0
    /// The screen moved by a screen or more: nothing on it was there a frame ago.
    var skipping = false
    var prediction: ScrollPrediction?
    /// Seconds a row must stay on screen to be worth a request now (nil: only skipping
    /// screens pass rows by).
    var threshold: Double?

    /// A visible row that will have left before an image could arrive: its transfer waits
    /// (a fling's start delay), to be cancelled if it leaves and confirmed if it stays.
    func isPassing(_ row: Int) -> Bool {
      if skipping { return true }
      guard let threshold, let prediction else { return false }
      return prediction.visit(of: row).leave < threshold
    }

    /// How long a passing row's transfer waits (at least `minimum` ms): until a frame after
    /// the row is predicted to leave, when it is cancelled. A host calls `setVisible` only
    /// when the screen moves, every few frames in a slow scroll: a shorter wait would end
    /// between two calls and send the request after all.
    func passingDelay(_ row: Int, minimum: Int) -> Int {
      guard !skipping, let prediction else { return minimum }
      let leave = prediction.visit(of: row).leave
      guard leave.isFinite else { return minimum }
      return max(minimum, Int((leave + ScrollPlanner.frameSeconds) * 1000) + 1)
    }
  }

  /// Records the move to `visible` and finds the rows around it (see the type's comment).
  private mutating func scroll(to visible: Range<Int>, rowCount: Int, direction: Int, prefetchLimit: Int,
                               now: UInt64) -> Window {
    let previousVisible = self.previousVisible
    self.previousVisible = visible
    let shift = visible.isEmpty || previousVisible.isEmpty ? 0 : visible.lowerBound - previousVisible.lowerBound
    let moved = abs(shift)
    let movedBefore = motion.rowsMoved(before: now)
    let previousMoveAt = motion.previousMoveAt
    // Several screens at once after less than a screen in the speed window is a jump (a
    // scrollbar drag, "go to the end"), not a fling's frame: flings build up, and no
    // further call follows a jump, so its rows load at once, and what moved before it
    // says nothing about what follows.
    let jumped = moved >= Self.jumpScreens * max(1, visible.count) && movedBefore < visible.count
    // (The jump itself stays on record: a fling that follows at once is fast.)
    if jumped { motion.reset() }
    motion.record(rows: shift, at: now)
    let fixedWindow = Self.prefetchRows(around: visible, rowCount: rowCount, direction: direction, limit: prefetchLimit)
    var window = Window()
    let restingCount = leadSeconds.map { lead in
      min(prefetchLimit, max(Self.minimumPrefetchRows, Int((lead * Double(visible.count)).rounded(.up))))
    } ?? prefetchLimit
    let moving = direction != 0 && !jumped && !visible.isEmpty && (moved > 0 || movedBefore > 0)
    let velocity = moving ? motion.velocity(at: now, previousMoveAt: previousMoveAt) : nil
    guard moving, let velocity, velocity != 0 else {
      // At rest, after a jump, or a first move (no speed yet): the rows a scroll of a
      // screen a second would reach within the lead, ahead or on both sides.
      window.ahead = Self.prefetchRows(around: visible, rowCount: rowCount, direction: direction, limit: restingCount)
      window.keepAhead = fixedWindow
      window.behind = keepRange(behind: visible, rowCount: rowCount, direction: direction)
      if moving && moved >= visible.count && !previousVisible.overlaps(visible) {
        // A first move of a screen or more: a fling starting, or a page-down.
        window.skipping = true
        window.ahead = []
        window.keepAhead = []
      }
      return window
    }
    let threshold = fastScrollThresholdMilliseconds / 1000
    let speed = motion.slowingSpeed(at: now) ?? motion.steadySpeed ?? abs(velocity)
    let prediction = ScrollPrediction(first: visible.lowerBound, count: visible.count,
                                      velocity: direction > 0 ? speed : -speed, decay: motion.decay)
    window.prediction = prediction
    window.threshold = configuration.fastScrollMilliseconds > 0 ? threshold : nil
    window.skipping = moved >= visible.count && !previousVisible.overlaps(visible)
    // Rows entering now would leave within the threshold: a fast scroll. Neither it nor a
    // fling slowing down comes back to the rows behind it. (A single page-down after a
    // pause is no fast scroll: its rows behind are kept.)
    let fast = window.threshold != nil && Double(visible.count) / abs(velocity) < threshold
    window.behind = fast || prediction.decay != nil ? 0..<0 : keepRange(behind: visible, rowCount: rowCount, direction: direction)
    if window.skipping && window.threshold == nil { return window }
    // Ahead, soonest on screen first: rows that will stay long enough, entering within
    // the lead.
    let lead = leadSeconds ?? .infinity
    let step = direction > 0 ? 1 : -1
    var row = direction > 0 ? visible.upperBound : visible.lowerBound - 1
    var scanned = 0
    while window.ahead.count < prefetchLimit, row >= 0, row < rowCount,
          scanned < prefetchLimit + Self.jumpScreens * visible.count {
      scanned += 1
      let visit = prediction.visit(of: row)
      if visit.enter == .infinity { break }
      // Past the lead only for the minimum, and only in a steady scroll (not a fling's
      // landing a second away).
      if visit.enter > lead && (window.ahead.count >= Self.minimumPrefetchRows || fast || prediction.decay != nil) {
        break
      }
      if window.threshold == nil || visit.leave - visit.enter >= threshold {
        window.ahead.append(row)
        if visit.leave == .infinity { window.landing.insert(row) }
      }
      row += step
    }
    window.keepAhead = window.ahead + (fast ? [] : fixedWindow.filter { !window.ahead.contains($0) })
    return window
  }

  /// How far ahead (seconds) prefetching looks: the time visible rows' loads have lately
  /// taken, at least the fixed fast-scroll threshold, plus a frame; nil before any load
  /// was timed (then the whole prefetch window is used).
  private var leadSeconds: Double? {
    guard let load = recentLoadNanoseconds else { return nil }
    return max(Double(configuration.fastScrollMilliseconds) / 1000, load / 1e9) + Self.frameSeconds
  }

  fileprivate static let frameSeconds = 0.016
  /// Rows prefetched however fast rows load, where the window allows: the next rows, so
  /// that a row entering the screen is drawn in the frame it enters.
  private static let minimumPrefetchRows = 2
  /// A move of this many screens in one call, after less than a screen, is a jump rather
  /// than a fling: no fling's first frame covers four screens.
  private static let jumpScreens = 4

  /// Rows to prefetch, nearest first: ahead in the scroll direction, or when still, half
  /// the window on each side of the visible rows (never the visible rows themselves).
  private static func prefetchRows(around visible: Range<Int>, rowCount: Int, direction: Int, limit n: Int) -> [Int] {
    let below = visible.upperBound..<min(rowCount, add(visible.upperBound, n))
    let above = max(0, visible.lowerBound - n)..<visible.lowerBound
    if direction > 0 { return Array(below) }
    if direction < 0 { return Array(above.reversed()) }
    let half = (n + 1) / 2
    return Array(below.prefix(half)) + Array(above.suffix(n - half).reversed())
  }

  /// The rows just behind the screen that keep loading (`Configuration.keepRows`).
  private func keepRange(behind visible: Range<Int>, rowCount: Int, direction: Int) -> Range<Int> {
    if let load = recentLoadNanoseconds, load > Double(configuration.fastScrollMilliseconds) * 1e6 { return 0..<0 }
    let n = configuration.keepRows
    if direction > 0 { return max(0, visible.lowerBound - n)..<visible.lowerBound }
    if direction < 0 { return visible.upperBound..<min(rowCount, Self.add(visible.upperBound, n)) }
    return 0..<0
  }

  /// A visible row's priority: while scrolling at a known speed, the row that leaves
  /// first ranks highest (one above the next, up to `visiblePriority` + rows - 1 at the
  /// leaving edge), so that when the screen's rows wait for connections, or share a slow
  /// link, the rows about to leave go first and the rows that just came on screen, with
  /// the longest time ahead of them, last (the engine would otherwise start the newest
  /// first). Still, or with no speed yet (a first screen, a jump): all at
  /// `visiblePriority`, none has a deadline.
  private func visiblePriority(_ row: Int, _ window: Window, _ visible: Range<Int>) -> Int32 {
    guard let prediction = window.prediction else { return configuration.visiblePriority }
    if prediction.velocity > 0 { return Self.add32(configuration.visiblePriority, visible.upperBound - 1 - row) }
    return Self.add32(configuration.visiblePriority, row - visible.lowerBound)
  }

  /// The priority of a row off screen, `distance` places from it in the window's order:
  /// nearest first, each further one a rank lower (among equal priorities the engine would
  /// start the newest, that is the furthest). Prefetched and kept rows rank from
  /// `prefetchPriority` down; the rows a slowing fling will stop on are the next screen,
  /// and rank from just below `visiblePriority` (never below an ordinary load, unless the
  /// visible priority itself is lower).
  private func aheadPriority(_ row: Int, distance: Int, _ window: Window) -> Int32 {
    guard window.landing.contains(row) else { return Self.add32(configuration.prefetchPriority, -distance) }
    let ranked = Self.add32(configuration.visiblePriority, -1 - distance)
    return configuration.visiblePriority > 0 ? max(ranked, 0) : ranked
  }

  private static func add32(_ a: Int32, _ b: Int) -> Int32 {
    Int32(clamping: Int(a) + b)
  }
}
