/// One scrolling table or grid: the host says which rows are visible and which way the
/// user scrolls; the table keeps visible rows loading at high priority, prefetches a
/// window ahead at low priority, lets a few rows behind finish, and cancels everything
/// else. A row's result reaches the host only while that row is visible, so an image can
/// never land in a slot that now shows another row.
///
/// Thread rules: `setVisible`, `setRowCount`, `cancelAll` and `close` are called by the host
/// (any thread, one at a time); row callbacks run on the thread draining the table's queue,
/// or synchronously inside `setVisible` for rows the memory cache already holds.
public final class ImageTable: @unchecked Sendable {
  public struct Configuration: Sendable {
    /// Rows ahead of the visible ones, in the scroll direction, loaded at low priority: at
    /// most this many, and no more than the network has lately delivered complete images
    /// in `prefetchHorizonMilliseconds` (the loader's `networkThroughput`), at least one:
    /// prefetches beyond what the pipe can fill before the user gets there only take its
    /// bandwidth from the rows on screen. Within that, the rows the scroll brings on
    /// screen within the time visible rows' loads have lately taken (at least two): on a
    /// network that loads a row in a frame, rows further ahead are bets that a stop or a
    /// turn loses (see `planScroll`).
    public var prefetchRows = 8
    /// 0: always `prefetchRows`, whatever the network.
    public var prefetchHorizonMilliseconds = 500
    /// Rows just behind the visible ones that keep loading instead of being cancelled
    /// (the user often scrolls back a little), while visible rows have lately loaded
    /// within `fastScrollMilliseconds`: there a row that just left finishes in a moment.
    /// On a slower network it would take the screen's bandwidth for a row the user left
    /// (and, preempted by a visible row, start over later), so it is cancelled.
    public var keepRows = 2
    public var visiblePriority: Int32 = 100
    public var prefetchPriority: Int32 = -100
    /// How long a row reached by a fling (or a jump) waits before its transfer starts: a
    /// couple of frames, about the time a fling takes to carry it off screen again.
    public var flingStartDelayMilliseconds = 20
    /// A visible row that will leave the screen within `fastScrollMilliseconds` (predicted
    /// from the speed of the last `speedWindowMilliseconds` and, once a fling slows down,
    /// its slowdown: `ScrollMotion`) is passing: its image would flash for a few frames at
    /// best (100 ms: six), and loading it mostly wastes bytes (a large image that is not
    /// drawn before the row leaves costs its whole transfer). A scroll is fast when every
    /// entering row is passing; fast scrolls are treated as flings.
    /// `fastScrollMilliseconds` 0: only moves of a screen or more per call are flings.
    public var fastScrollMilliseconds = 100
    /// Up to this, the threshold rises to the time the table's visible rows have lately
    /// taken to load (from their start to their result): a row that would leave before
    /// its image could arrive is not worth a request, and on a slow network a request cut
    /// as its row leaves still costs (a server's turn, a connection, the cancel-storm
    /// budget that then holds the rows where the scroll stops). 0: `fastScrollMilliseconds`
    /// only.
    public var measuredFastScrollCapMilliseconds = 400
    public var speedWindowMilliseconds = 50
    /// Prefetches wait while a visible row is still loading, so the screen gets the
    /// connections, the bandwidth, the server's turns and the decoders first; they start
    /// when the last visible row has its result, or once this long has passed since the
    /// last `setVisible` (each call while a visible row loads holds them this long again;
    /// a visible row on a stalled server ends with the engine's stall timeout, so it does
    /// not stop prefetching for good).
    public var prefetchHoldMilliseconds = 1000
    /// Visible rows get previews of progressive JPEGs while they download (`onPreview`).
    public var previews = true
    public init() {}
  }

  public struct Statistics: Sendable, Equatable {
    /// Loads started (prefetches included), of which cancelled when their rows left.
    public var started = 0
    public var cancelled = 0
    /// Rows made visible that the memory cache answered at once, without a load.
    public var memoryHits = 0
    /// Row callbacks with an image, and with an error.
    public var delivered = 0
    public var failed = 0
  }

  /// Returns the request for a row, or nil to leave the row without an image. Called
  /// inside `setVisible`, under the table's lock: it must not call back into the table.
  public typealias RequestProvider = (Int) -> ImageRequest?
  /// A visible row's result: an image (from memory or freshly loaded) or an error.
  public typealias RowHandler = (Int, Outcome) -> Void
  /// A preview for a visible row still loading: its result follows (see `ImageLoader.load`).
  public typealias PreviewHandler = (Int, Image) -> Void

  private enum RowState {
    /// A request is in flight; `visible` decides whether its result reaches the host.
    /// `generation` names this start of the row: only results of this start count for it
    /// (a previous start's CANCELLED result may still be queued). `token` is nil while
    /// `start` issues the load: its result may arrive on another thread before it returns.
    case loading(generation: UInt64, token: UInt64?)
    /// The host has this row's result (or its error) while the row stays on screen.
    case shown
  }

  private let loader: ImageLoader
  private let queue: CompletionQueue
  private let configuration: Configuration
  private let requestForRow: RequestProvider
  private let onRow: RowHandler
  private let onPreview: PreviewHandler?

  private let lock = Lock()
  private var rowCount: Int
  private var visible = 0..<0
  /// What the host last asked for, before clipping to the rows that exist, so that rows
  /// appended later (`setRowCount`) fill a range that was declared visible.
  private var requested = (first: 0, count: 0, direction: 0)
  /// The visible rows at the previous call: during a fling, only rows seen twice load.
  private var previousVisible = 0..<0
  /// The recent moves of the visible rows: the scroll's speed and where it stops.
  private var motion: ScrollMotion
  private var rows: [Int: RowState] = [:]
  /// The last generation given to a start of a row.
  private var lastGeneration: UInt64 = 0
  /// Prefetched rows whose transfers wait for the visible rows to finish loading.
  private var heldPrefetchRows: Set<Int> = []
  /// Visible rows started with a fling's start delay and not confirmed since: if they
  /// leave the screen before that, they are cancelled even within the rows kept behind
  /// (they were never worth a request; keeping them would send one when the delay ends).
  private var unconfirmedRows: Set<Int> = []
  private var statistics = Statistics()
  private var closed = false
  /// Monotonic nanoseconds; tests pass their own clock.
  private let clock: () -> UInt64
  /// When each visible row's transfer was asked to start now (not held by a fling), and
  /// how long such loads have lately taken (an average weighing the latest a quarter).
  private var loadStartedAt: [Int: UInt64] = [:]
  private var recentLoadNanoseconds: Double?

  public init(loader: ImageLoader, queue: CompletionQueue, rowCount: Int = 0,
              configuration: Configuration = Configuration(),
              clock: (() -> UInt64)? = nil,
              requestForRow: @escaping RequestProvider, onRow: @escaping RowHandler,
              onPreview: PreviewHandler? = nil) {
    self.clock = clock ?? { monotonicNanoseconds() }
    self.loader = loader
    self.queue = queue
    self.rowCount = max(0, rowCount)
    self.configuration = configuration
    motion = ScrollMotion(windowMilliseconds: configuration.speedWindowMilliseconds)
    self.requestForRow = requestForRow
    self.onRow = onRow
    self.onPreview = configuration.previews ? onPreview : nil
  }

  public var stats: Statistics { lock.withLock { statistics } }

  public func setRowCount(_ count: Int) {
    let last = lock.withLock {
      rowCount = max(0, count)
      return requested
    }
    setVisible(first: last.first, count: last.count, direction: last.direction)
  }

  /// Tells the table what is on screen. `direction` > 0 when scrolling towards higher rows,
  /// < 0 towards lower ones, 0 when still (prefetch then looks both ways).
  public func setVisible(first: Int, count: Int, direction: Int) {
    let prefetchLimit = prefetchWindow(loader.networkThroughput)
    var immediate: [(Int, Outcome)] = []
    var toCancel: [UInt64] = []
    var toStart: [(Int, ImageRequest, Bool)] = []  // row, request, visible
    var toRaise: [(UInt64, Int32)] = []
    var toConfirm: [UInt64] = []
    var toPostpone: [(UInt64, Int)] = []
    var toHoldAgain: [UInt64] = []
    lock.withLock {
      if closed { return }
      requested = (first, count, direction)
      let lower = max(0, min(first, rowCount))
      let upper = max(lower, min(Self.add(first, max(0, count)), rowCount))
      previousVisible = visible
      visible = lower..<upper
      let plan = planScroll(direction: direction, prefetchLimit: prefetchLimit)
      let ahead = plan.ahead
      let behind = plan.behind

      for row in loadStartedAt.keys where !visible.contains(row) { loadStartedAt.removeValue(forKey: row) }
      for (row, state) in rows where !visible.contains(row) {
        switch state {
        case .shown:
          // Off screen, the host's slot may show another row now: when this row comes
          // back it is delivered again (from memory).
          rows.removeValue(forKey: row)
        case .loading(_, let token):
          // Loads of rows that left every window are cancelled (one still being issued by
          // `start` on another thread is cancelled there, once it finds its row gone).
          if unconfirmedRows.contains(row) || (!plan.keepAhead.contains(row) && !behind.contains(row)) {
            if let token { toCancel.append(token) }
            statistics.cancelled += 1
            rows.removeValue(forKey: row)
            heldPrefetchRows.remove(row)
            unconfirmedRows.remove(row)
          }
        }
      }
      for row in visible {
        let passing = plan.isPassing(row)
        switch rows[row] {
        case .shown?: continue
        case .loading(_, nil)?:
          continue  // being issued on another thread, with the priority it had then
        case .loading(_, let token?)?:
          toRaise.append((token, visiblePriority(row, plan)))
          // Still on screen a frame later: a fling's start delay is over for this row,
          // unless it is still passing (it is likely gone before its image could arrive).
          if passing {
            toPostpone.append((token, plan.passingDelay(row, minimum: configuration.flingStartDelayMilliseconds)))
          } else {
            toConfirm.append(token)
            if unconfirmedRows.remove(row) != nil { loadStartedAt[row] = clock() }
          }
        case nil:
          guard let request = requestForRow(row) else { continue }
          var wanted = request
          wanted.priority = visiblePriority(row, plan)
          if let image = loader.cachedImage(for: wanted) {
            rows[row] = .shown
            statistics.memoryHits += 1
            statistics.delivered += 1
            immediate.append((row, .success(image, .memory, httpStatus: 0)))
          } else {
            if passing {
              wanted.startDelayMilliseconds = plan.passingDelay(row, minimum: configuration.flingStartDelayMilliseconds)
              unconfirmedRows.insert(row)
            } else {
              loadStartedAt[row] = clock()
            }
            toStart.append((row, wanted, true))
          }
        }
      }
      // The screen first: while a visible row loads, prefetches wait (see
      // `prefetchHoldMilliseconds`); once none does, the waiting ones start.
      let screenLoading = !toStart.isEmpty || isLoadingAVisibleRow()
      if !screenLoading {
        toConfirm += releaseHeldPrefetches()
      } else {
        for row in heldPrefetchRows {
          if case .loading(_, let token?)? = rows[row] { toHoldAgain.append(token) }
        }
      }
      // Prefetches wait for the screen like any prefetch, also the rows a slowing fling
      // will stop on: sent at once, they took a slow link's bandwidth from rows still on
      // screen that were about to leave.
      for (distance, row) in ahead.enumerated() where rows[row] == nil {
        guard var request = requestForRow(row) else { continue }
        request.priority = aheadPriority(row, distance: distance, plan)
        guard loader.cachedImage(for: request) == nil else { continue }
        if screenLoading && configuration.prefetchHoldMilliseconds > 0 {
          request.startDelayMilliseconds = configuration.prefetchHoldMilliseconds
          heldPrefetchRows.insert(row)
        }
        toStart.append((row, request, false))
      }
      // Rows that were visible and are now only kept or prefetched drop to low priority;
      // rows loading ahead take the rank of this call's plan (landing or not).
      for (distance, row) in (plan.keepAhead + Array(behind)).enumerated() {
        if case .loading(_, let token?)? = rows[row] { toRaise.append((token, aheadPriority(row, distance: distance, plan))) }
      }
    }
    for token in toCancel { loader.cancel(token) }
    for (token, priority) in toRaise { loader.setPriority(token, priority) }
    for token in toConfirm { loader.startNow(token) }
    for (token, milliseconds) in toPostpone { loader.postpone(token, milliseconds: milliseconds) }
    for token in toHoldAgain { loader.postpone(token, milliseconds: configuration.prefetchHoldMilliseconds) }
    for (row, request, _) in toStart { start(row: row, request: request) }
    for (row, outcome) in immediate { onRow(row, outcome) }
  }

  /// Cancels every request of this table; rows start anew at the next `setVisible`.
  public func cancelAll() {
    let tokens: [UInt64] = lock.withLock {
      var tokens: [UInt64] = []
      for case .loading(_, let token) in rows.values {
        // A load still being issued is cancelled by `start`, which finds its row gone.
        if let token { tokens.append(token) }
        statistics.cancelled += 1
      }
      rows.removeAll()
      heldPrefetchRows.removeAll()
      unconfirmedRows.removeAll()
      loadStartedAt.removeAll()
      return tokens
    }
    for token in tokens { loader.cancel(token) }
  }

  /// Cancels everything; no row callback runs after this returns (on the queue's thread).
  public func close() {
    lock.withLock { closed = true }
    cancelAll()
  }

  // MARK: - Private

  /// What one `setVisible` does around the screen, from where the scroll is going.
  private struct ScrollPlan {
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
      return max(minimum, Int((leave + ImageTable.frameSeconds) * 1000) + 1)
    }
  }

  /// Records this call's move and plans the rows around the screen. A fling (the screen
  /// moving a screen or more per call, or rows passing faster than they load) loads only
  /// the rows that will stay long enough for their images to arrive, predicted from the
  /// scroll's speed and, once it slows down, where it will stop (`ScrollMotion`): so the
  /// rows where a fling comes to rest start before they are on screen, while the rows it
  /// sweeps past cost no request. Prefetching reaches the rows that the scroll brings on
  /// screen within the time a load has lately taken (`leadSeconds`), at least
  /// `minimumPrefetchRows` and at most the prefetch window (`prefetchLimit`): on a fast
  /// network a row ahead is loaded as it comes, on a slow one the window fills. Called
  /// under the lock, after `visible` was updated.
  private func planScroll(direction: Int, prefetchLimit: Int) -> ScrollPlan {
    let now = clock()
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
    let fixedWindow = prefetchRows(direction: direction, limit: prefetchLimit)
    var plan = ScrollPlan()
    let restingCount = leadSeconds.map { lead in
      min(prefetchLimit, max(Self.minimumPrefetchRows, Int((lead * Double(visible.count)).rounded(.up))))
    } ?? prefetchLimit
    let moving = direction != 0 && !jumped && !visible.isEmpty && (moved > 0 || movedBefore > 0)
    let velocity = moving ? motion.velocity(at: now, previousMoveAt: previousMoveAt) : nil
    guard moving, let velocity, velocity != 0 else {
      // At rest, after a jump, or a first move (no speed yet): the rows a scroll of a
      // screen a second would reach within the lead, ahead or on both sides.
      plan.ahead = prefetchRows(direction: direction, limit: restingCount)
      plan.keepAhead = fixedWindow
      plan.behind = keepRange(direction: direction)
      if moving && moved >= visible.count && !previousVisible.overlaps(visible) {
        // A first move of a screen or more: a fling starting, or a page-down.
        plan.skipping = true
        plan.ahead = []
        plan.keepAhead = []
      }
      return plan
    }
    let threshold = fastScrollThresholdMilliseconds / 1000
    let speed = motion.slowingSpeed(at: now) ?? motion.steadySpeed ?? abs(velocity)
    let prediction = ScrollPrediction(first: visible.lowerBound, count: visible.count,
                                      velocity: direction > 0 ? speed : -speed, decay: motion.decay)
    plan.prediction = prediction
    plan.threshold = configuration.fastScrollMilliseconds > 0 ? threshold : nil
    plan.skipping = moved >= visible.count && !previousVisible.overlaps(visible)
    // Rows entering now would leave within the threshold: a fast scroll. Neither it nor a
    // fling slowing down comes back to the rows behind it. (A single page-down after a
    // pause is no fast scroll: its rows behind are kept.)
    let fast = plan.threshold != nil && Double(visible.count) / abs(velocity) < threshold
    plan.behind = fast || prediction.decay != nil ? 0..<0 : keepRange(direction: direction)
    if plan.skipping && plan.threshold == nil { return plan }
    // Ahead, soonest on screen first: rows that will stay long enough, entering within
    // the lead.
    let lead = leadSeconds ?? .infinity
    let step = direction > 0 ? 1 : -1
    var row = direction > 0 ? visible.upperBound : visible.lowerBound - 1
    var scanned = 0
    while plan.ahead.count < prefetchLimit, row >= 0, row < rowCount,
          scanned < prefetchLimit + Self.jumpScreens * visible.count {
      scanned += 1
      let visit = prediction.visit(of: row)
      if visit.enter == .infinity { break }
      // Past the lead only for the minimum, and only in a steady scroll (not a fling's
      // landing a second away).
      if visit.enter > lead && (plan.ahead.count >= Self.minimumPrefetchRows || fast || prediction.decay != nil) {
        break
      }
      if plan.threshold == nil || visit.leave - visit.enter >= threshold {
        plan.ahead.append(row)
        if visit.leave == .infinity { plan.landing.insert(row) }
      }
      row += step
    }
    plan.keepAhead = plan.ahead + (fast ? [] : fixedWindow.filter { !plan.ahead.contains($0) })
    return plan
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

  /// See `Configuration.measuredFastScrollCapMilliseconds`. Under the lock.
  private var fastScrollThresholdMilliseconds: Double {
    let fixed = Double(configuration.fastScrollMilliseconds)
    guard let load = recentLoadNanoseconds, fixed > 0 else { return fixed }
    return max(fixed, min(load / 1e6, Double(configuration.measuredFastScrollCapMilliseconds)))
  }

  /// The threshold in force now, for tests.
  var currentFastScrollMilliseconds: Double { lock.withLock { fastScrollThresholdMilliseconds } }

  /// Whether a visible row is still waiting for its result. Called under the lock.
  private func isLoadingAVisibleRow() -> Bool {
    visible.contains { if case .loading? = rows[$0] { return true } else { return false } }
  }

  /// The tokens of held prefetches to start now, forgetting them. Rows whose token is not
  /// known yet (their load is being issued on another thread) start when their hold ends.
  /// Called under the lock.
  private func releaseHeldPrefetches() -> [UInt64] {
    guard !heldPrefetchRows.isEmpty else { return [] }
    defer { heldPrefetchRows.removeAll() }
    return heldPrefetchRows.compactMap { row in
      if case .loading(_, let token?)? = rows[row] { return token } else { return nil }
    }
  }

  /// A move of this many screens in one call, after less than a screen, is a jump rather
  /// than a fling: no fling's first frame covers four screens.
  private static let jumpScreens = 4

  /// How many rows to prefetch when the network delivers `throughput` (see
  /// `Configuration.prefetchRows`).
  func prefetchWindow(_ throughput: Throughput?) -> Int {
    let most = max(0, configuration.prefetchRows)
    guard configuration.prefetchHorizonMilliseconds > 0, let throughput, most > 0 else { return most }
    let fill = throughput.responsesPerSecond * Double(configuration.prefetchHorizonMilliseconds) / 1000
    return fill >= Double(most) ? most : max(1, Int(fill.rounded(.up)))
  }

  /// Rows to prefetch, nearest first: ahead in the scroll direction, or when still, half
  /// the window on each side of the visible rows (never the visible rows themselves).
  private func prefetchRows(direction: Int, limit: Int) -> [Int] {
    let n = limit
    let below = visible.upperBound..<min(rowCount, Self.add(visible.upperBound, n))
    let above = max(0, visible.lowerBound - n)..<visible.lowerBound
    if direction > 0 { return Array(below) }
    if direction < 0 { return Array(above.reversed()) }
    let half = (n + 1) / 2
    return Array(below.prefix(half)) + Array(above.suffix(n - half).reversed())
  }

  private func keepRange(direction: Int) -> Range<Int> {
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
  /// `visiblePriority`, none has a deadline. Called under the lock.
  private func visiblePriority(_ row: Int, _ plan: ScrollPlan) -> Int32 {
    guard let prediction = plan.prediction else { return configuration.visiblePriority }
    if prediction.velocity > 0 { return Self.add32(configuration.visiblePriority, visible.upperBound - 1 - row) }
    return Self.add32(configuration.visiblePriority, row - visible.lowerBound)
  }

  /// The priority of a row off screen, `distance` places from it in the plan's order:
  /// nearest first, each further one a rank lower (among equal priorities the engine would
  /// start the newest, that is the furthest). Prefetched and kept rows rank from
  /// `prefetchPriority` down; the rows a slowing fling will stop on are the next screen,
  /// and rank from just below `visiblePriority` (never below an ordinary load, unless the
  /// visible priority itself is lower).
  private func aheadPriority(_ row: Int, distance: Int, _ plan: ScrollPlan) -> Int32 {
    guard plan.landing.contains(row) else { return Self.add32(configuration.prefetchPriority, -distance) }
    let ranked = Self.add32(configuration.visiblePriority, -1 - distance)
    return configuration.visiblePriority > 0 ? max(ranked, 0) : ranked
  }

  private static func add32(_ a: Int32, _ b: Int) -> Int32 {
    Int32(clamping: Int(a) + b)
  }

  /// Row arithmetic saturates: a host may pass any Int64.
  private static func add(_ a: Int, _ b: Int) -> Int {
    let (sum, overflow) = a.addingReportingOverflow(b)
    return overflow ? (b > 0 ? Int.max : Int.min) : sum
  }

  private func start(row: Int, request: ImageRequest) {
    // The row may already have left (another thread) or been started: check and record
    // under the lock, load outside it (load may complete a memory hit through the queue).
    // The generation, recorded before the load is issued and captured by its handler, is
    // what lets a result claim the row: a previous start's CANCELLED result, dispatched
    // on another thread while this load is being issued, must not clear this start.
    let generation: UInt64? = lock.withLock {
      if closed || rows[row] != nil { return nil }
      lastGeneration += 1
      rows[row] = .loading(generation: lastGeneration, token: nil)
      return lastGeneration
    }
    guard let generation else { return }
    do {
      let preview: ((UInt64, Image) -> Void)? = onPreview == nil ? nil : { [weak self] _, image in
        self?.previewed(row: row, generation: generation, image: image)
      }
      let token = try loader.load(request, queue: queue, preview: preview) { [weak self] token, outcome in
        self?.finished(row: row, generation: generation, token: token, outcome: outcome)
      }
      let stillWanted: Bool = lock.withLock {
        statistics.started += 1
        guard case .loading(generation, nil)? = rows[row], !closed else { return false }
        rows[row] = .loading(generation: generation, token: token)
        return true
      }
      // Not recorded: the row left meanwhile, or the table closed (nobody else knows the
      // token to cancel it), or the result came first on another thread (the load is over
      // and the cancel a no-op).
      if !stillWanted { loader.cancel(token) }
    } catch {
      // A refused request: a visible row shows the error (once, while it stays visible); a
      // prefetched one is forgotten, so it is tried again, and reported, when it shows.
      let report: Bool = lock.withLock {
        guard case .loading(generation, nil)? = rows[row], !closed else { return false }
        heldPrefetchRows.remove(row)
        unconfirmedRows.remove(row)
        if visible.contains(row) {
          rows[row] = .shown
          statistics.failed += 1
          return true
        }
        rows.removeValue(forKey: row)
        return false
      }
      if report { onRow(row, .failure(error)) }
    }
  }

  /// A preview reaches the host only for this start of a row that is visible and still
  /// loading: never over the row's final image, never for a row that left.
  private func previewed(row: Int, generation: UInt64, image: Image) {
    let show: Bool = lock.withLock {
      guard !closed, case .loading(generation, _)? = rows[row] else { return false }
      return visible.contains(row)
    }
    if show { onPreview?(row, image) }
  }

  private func finished(row: Int, generation: UInt64, token: UInt64, outcome: Outcome) {
    var release: [UInt64] = []
    defer { for token in release { loader.startNow(token) } }
    let deliver: Bool = lock.withLock {
      // Only this start's result counts (its token may not be recorded yet: the result
      // can come first, on another thread); an earlier start's is stale.
      guard !closed, case .loading(generation, _)? = rows[row] else { return false }
      unconfirmedRows.remove(row)
      if outcome.isCancelled {
        rows.removeValue(forKey: row)
        heldPrefetchRows.remove(row)
        return false
      }
      if visible.contains(row) {
        rows[row] = .shown
        if case .success = outcome { statistics.delivered += 1 } else { statistics.failed += 1 }
        if let since = loadStartedAt.removeValue(forKey: row), case .success(_, let source, _) = outcome,
           source != .memory {
          let took = Double(clock() &- since)
          recentLoadNanoseconds = recentLoadNanoseconds.map { $0 + (took - $0) / 4 } ?? took
        }
        // The screen is complete: the prefetches it held back go.
        if !isLoadingAVisibleRow() { release = releaseHeldPrefetches() }
        return true
      }
      // A prefetch (or a row kept behind) finished: its image waits in the memory cache.
      rows.removeValue(forKey: row)
      heldPrefetchRows.remove(row)
      return false
    }
    if deliver { onRow(row, outcome) }
  }
}
