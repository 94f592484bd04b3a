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
    /// bandwidth from the rows on screen.
    public var prefetchRows = 8
    /// 0: always `prefetchRows`, whatever the network.
    public var prefetchHorizonMilliseconds = 500
    /// Rows just behind the visible ones that keep loading instead of being cancelled
    /// (the user often scrolls back a little).
    public var keepRows = 2
    public var visiblePriority: Int32 = 100
    public var prefetchPriority: Int32 = -100
    /// How long a row reached by a fling (or a jump) waits before its transfer starts: a
    /// couple of frames, about the time a fling takes to carry it off screen again.
    public var flingStartDelayMilliseconds = 20
    /// A scroll is fast when, at the speed of the last `speedWindowMilliseconds`, a row
    /// entering the screen would leave it within `fastScrollMilliseconds`, before its
    /// image could arrive. Loading such a row only wastes bytes; fast scrolls are treated
    /// as flings. `fastScrollMilliseconds` 0: only moves of a screen or more per call are
    /// flings.
    public var fastScrollMilliseconds = 40
    /// Up to this, the threshold rises to the time the table's visible rows have lately
    /// taken to load (from their start to their result): a row that would leave before
    /// its image could arrive is not worth a request, and on a slow network a request cut
    /// as its row leaves still costs (a server's turn, a connection, the cancel-storm
    /// budget that then holds the rows where the scroll stops). 0: `fastScrollMilliseconds`
    /// only.
    public var measuredFastScrollCapMilliseconds = 400
    public var speedWindowMilliseconds = 50
    /// Prefetches wait while a visible row is still loading, so the screen gets the
    /// connections, the server's turns and the decoders first; they start when the last
    /// visible row has its result, or after this long at most (a visible row on a stalled
    /// server must not stop prefetching for good).
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
  /// When the visible rows moved recently, and by how many rows: the scroll speed.
  private var recentMoves: [(at: UInt64, rows: Int)] = []
  private var lastMoveAt: UInt64?
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
    var toPostpone: [UInt64] = []
    lock.withLock {
      if closed { return }
      requested = (first, count, direction)
      let lower = max(0, min(first, rowCount))
      let upper = max(lower, min(Self.add(first, max(0, count)), rowCount))
      previousVisible = visible
      visible = lower..<upper
      // A fling moves a screen or more per call, or fast enough that a row entering the
      // screen leaves it again within `fastScrollMilliseconds`: rows flash past faster
      // than any image arrives. Then nothing is prefetched, and visible rows' transfers
      // wait a little (`flingStartDelay`, pushed back again while the scroll stays fast)
      // before they may start: rows that leave meanwhile are cancelled before any
      // connection or byte, and the rows where the fling stops (or a jump lands) start
      // by themselves, with no further call from the host.
      let moved = visible.isEmpty || previousVisible.isEmpty ? 0 : abs(visible.lowerBound - previousVisible.lowerBound)
      let (fast, movedBefore) = isScrollingFast(moved: moved)
      // Several screens at once after less than a screen in the speed window is a jump
      // (a scrollbar drag, "go to the end"), not a fling's frame: flings build up, and no
      // further call follows a jump, so its rows load at once.
      let jumped = moved >= Self.jumpScreens * max(1, visible.count) && movedBefore < visible.count
      let flinging = direction != 0 && moved > 0 && !jumped
        && ((!previousVisible.overlaps(visible) && moved >= visible.count) || fast)
      let ahead = flinging ? [] : prefetchRows(direction: direction, limit: prefetchLimit)
      // Nor are rows kept behind a fast scroll: it does not come back to them. (A single
      // page-down after a pause is no fast scroll: its rows behind are kept.)
      let behind = flinging && fast ? 0..<0 : keepRange(direction: direction)

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
          if unconfirmedRows.contains(row) || (!ahead.contains(row) && !behind.contains(row)) {
            if let token { toCancel.append(token) }
            statistics.cancelled += 1
            rows.removeValue(forKey: row)
            heldPrefetchRows.remove(row)
            unconfirmedRows.remove(row)
          }
        }
      }
      for row in visible {
        switch rows[row] {
        case .shown?: continue
        case .loading(_, nil)?:
          continue  // being issued on another thread, with the priority it had then
        case .loading(_, let token?)?:
          toRaise.append((token, configuration.visiblePriority))
          // Still on screen a frame later: a fling's start delay is over for this row,
          // unless the fling goes on (it is likely gone by the next frame).
          if flinging {
            toPostpone.append(token)
          } else {
            toConfirm.append(token)
            if unconfirmedRows.remove(row) != nil { loadStartedAt[row] = clock() }
          }
        case nil:
          guard let request = requestForRow(row) else { continue }
          var wanted = request
          wanted.priority = configuration.visiblePriority
          if let image = loader.cachedImage(for: wanted) {
            rows[row] = .shown
            statistics.memoryHits += 1
            statistics.delivered += 1
            immediate.append((row, .success(image, .memory, httpStatus: 0)))
          } else {
            if flinging {
              wanted.startDelayMilliseconds = configuration.flingStartDelayMilliseconds
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
      if !screenLoading { toConfirm += releaseHeldPrefetches() }
      // Nearest first: each row further away ranks one lower (among equal priorities the
      // engine would start the newest, that is the furthest).
      for (distance, row) in ahead.enumerated() where rows[row] == nil {
        guard var request = requestForRow(row) else { continue }
        request.priority = Self.add32(configuration.prefetchPriority, -distance)
        guard loader.cachedImage(for: request) == nil else { continue }
        if screenLoading && configuration.prefetchHoldMilliseconds > 0 {
          request.startDelayMilliseconds = configuration.prefetchHoldMilliseconds
          heldPrefetchRows.insert(row)
        }
        toStart.append((row, request, false))
      }
      // Rows that were visible and are now only kept or prefetched drop to low priority.
      for (distance, row) in (ahead + Array(behind)).enumerated() {
        if case .loading(_, let token?)? = rows[row] {
          toRaise.append((token, Self.add32(configuration.prefetchPriority, -distance)))
        }
      }
    }
    for token in toCancel { loader.cancel(token) }
    for (token, priority) in toRaise { loader.setPriority(token, priority) }
    for token in toConfirm { loader.startNow(token) }
    for token in toPostpone { loader.postpone(token, milliseconds: configuration.flingStartDelayMilliseconds) }
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

  /// Records a move of the visible rows and says whether, at the current speed, a row
  /// entering the screen would leave it within `fastScrollMilliseconds`. Speed is rows
  /// moved over the last `speedWindowMilliseconds`, over the whole window, so calls in
  /// quick succession (a host calling more than once a frame) do not make a slow scroll
  /// look fast; a move after a pause (nothing else moved within the window) took the whole
  /// pause, so a page-down a second after the last one is slow, and a first move is never
  /// fast. Called under the lock. Also returns the rows moved in the window before this move.
  private func isScrollingFast(moved: Int) -> (fast: Bool, movedBefore: Int) {
    let window = UInt64(max(1, configuration.speedWindowMilliseconds)) * 1_000_000
    let now = clock()
    let previousMoveAt = lastMoveAt
    recentMoves.removeAll { now &- $0.at > window }
    let movedBefore = recentMoves.reduce(0) { $0 + $1.rows }
    if moved > 0 {
      recentMoves.append((now, moved))
      lastMoveAt = now
    }
    guard configuration.fastScrollMilliseconds > 0, !visible.isEmpty, moved > 0 || movedBefore > 0 else {
      return (false, movedBefore)
    }
    let span: UInt64
    if movedBefore > 0 {
      span = window
    } else if let previousMoveAt {
      span = max(window, now &- previousMoveAt)
    } else {
      return (false, movedBefore)
    }
    // Time on screen of an entering row: visible.count rows at (rows / span) rows per ms.
    let onScreenMilliseconds = Double(visible.count) * (Double(span) / 1e6) / Double(movedBefore + moved)
    return (onScreenMilliseconds < fastScrollThresholdMilliseconds, movedBefore)
  }

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
    let n = configuration.keepRows
    if direction > 0 { return max(0, visible.lowerBound - n)..<visible.lowerBound }
    if direction < 0 { return visible.upperBound..<min(rowCount, Self.add(visible.upperBound, n)) }
    return 0..<0
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
