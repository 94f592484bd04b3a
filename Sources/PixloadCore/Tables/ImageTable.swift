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
    /// turn loses (see `ScrollPlanner`).
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
    /// Frames decoded by the animation players tied to rows (`bind`), while tied.
    public var animationFramesDecoded = 0
  }

  /// Returns the request for a row, or nil to leave the row without an image; throws when
  /// the host's request is wrong (refused, as `ImageLoader.load` refuses one). Called
  /// inside `setVisible`, under the table's lock: it must not call back into the table.
  public typealias RequestProvider = (Int) throws(LoadError) -> ImageRequest?
  /// A visible row's result: an image (from memory or freshly loaded) or an error.
  public typealias RowHandler = (Int, Outcome) -> Void
  /// A preview for a visible row still loading: its result follows (see `ImageLoader.load`).
  public typealias PreviewHandler = (Int, Image) -> Void
  /// A row's result with what it cost (`RequestMetrics`; a refused request's are empty).
  public typealias MeasuredRowHandler = (Int, Outcome, RequestMetrics) -> Void
  /// A row's placeholder (its request's `placeholder`, decoded), drawn as it becomes
  /// visible, before its image.
  public typealias PlaceholderHandler = (Int, Image) -> Void

  private let loader: ImageLoader
  private let queue: CompletionQueue
  private let configuration: Configuration
  private let requestForRow: RequestProvider
  private let onRow: MeasuredRowHandler
  private let onPreview: PreviewHandler?
  private let onPlaceholder: PlaceholderHandler?

  private let lock = Lock()
  private var rowCount: Int
  private var visible = 0..<0
  /// What the host last asked for, before clipping to the rows that exist, so that rows
  /// appended later (`setRowCount`) fill a range that was declared visible.
  private var requested = (first: 0, count: 0, direction: 0)
  /// The scroll's history and what the table's rows lately took to load.
  private var planner: ScrollPlanner
  /// Every row the table tracks: loading, or shown while it stays on screen.
  private var rows: [Int: TableRow] = [:]
  /// The last generation given to a start of a row.
  private var lastGeneration: UInt64 = 0
  private var statistics = Statistics()
  private var closed = false
  /// Animation players tied to rows (`bind`): paused while their row is out of view.
  private var animations: [Int: WeakPlayer] = [:]
  let animationFrames = FrameCounter()

  private struct WeakPlayer {
    weak var player: AnimationPlayer?
  }
  /// Monotonic nanoseconds; tests pass their own clock.
  private let clock: () -> UInt64

  public convenience init(loader: ImageLoader, queue: CompletionQueue, rowCount: Int = 0,
              configuration: Configuration = Configuration(),
              clock: (() -> UInt64)? = nil,
              requestForRow: @escaping RequestProvider, onRow: @escaping RowHandler,
              onPreview: PreviewHandler? = nil) {
    self.init(loader: loader, queue: queue, rowCount: rowCount, configuration: configuration, clock: clock,
              requestForRow: requestForRow, onMeasuredRow: { row, outcome, _ in onRow(row, outcome) },
              onPreview: onPreview)
  }

  /// As the other init, rows' results coming with their metrics, and placeholders
  /// (`onPlaceholder`) drawn for rows whose requests carry one.
  public init(loader: ImageLoader, queue: CompletionQueue, rowCount: Int = 0,
              configuration: Configuration = Configuration(),
              clock: (() -> UInt64)? = nil,
              requestForRow: @escaping RequestProvider, onMeasuredRow: @escaping MeasuredRowHandler,
              onPreview: PreviewHandler? = nil, onPlaceholder: PlaceholderHandler? = nil) {
    self.onPlaceholder = onPlaceholder
    self.clock = clock ?? { monotonicNanoseconds() }
    self.loader = loader
    self.queue = queue
    self.rowCount = max(0, rowCount)
    self.configuration = configuration
    planner = ScrollPlanner(configuration: configuration)
    self.requestForRow = requestForRow
    self.onRow = onMeasuredRow
    self.onPreview = configuration.previews ? onPreview : nil
  }

  public var stats: Statistics {
    var copy = lock.withLock { statistics }
    copy.animationFramesDecoded = animationFrames.value
    return copy
  }

  /// Ties `player` to `row` (nil row: unties it): while the row is out of the visible rows
  /// the player is paused, when it is back it resumes at its next frame (pixload.h,
  /// pxl_table_bind_animation). One player a row; the table holds it weakly.
  public func bind(_ player: AnimationPlayer, row: Int?) {
    let shown: Bool? = lock.withLock {
      for (tied, entry) in animations where entry.player == nil || entry.player === player {
        animations.removeValue(forKey: tied)
      }
      guard let row, !closed else { return nil }
      if let previous = animations[row]?.player { previous.tie(to: nil) }
      animations[row] = WeakPlayer(player: player)
      return visible.contains(row)
    }
    player.tie(to: shown == nil ? nil : animationFrames)
    if shown == false { player.pause() }
    if shown == true { player.resumeAtNextFrame() }
  }

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
    let prefetchLimit = planner.prefetchWindow(loader.networkThroughput)
    var immediate: [(Int, Outcome)] = []
    var placeholders: [(row: Int, request: ImageRequest)] = []
    var toCancel: [UInt64] = []
    var toStart: [(row: Int, request: ImageRequest, record: TableRow)] = []
    var toRaise: [(UInt64, Int32)] = []
    var toConfirm: [UInt64] = []
    var toPostpone: [(UInt64, Int)] = []
    var toHoldAgain: [UInt64] = []
    var players: [(AnimationPlayer, Bool)] = []
    defer {
      // Out of view: no decoding; back in view: the playhead goes on at its next frame.
      for (player, shown) in players { if shown { player.resumeAtNextFrame() } else { player.pause() } }
    }
    lock.withLock {
      if closed { return }
      requested = (first, count, direction)
      let lower = max(0, min(first, rowCount))
      let upper = max(lower, min(ScrollPlanner.add(first, max(0, count)), rowCount))
      let wasVisible = visible
      visible = lower..<upper
      for (row, entry) in animations {
        guard let player = entry.player else { continue }
        if visible.contains(row) != wasVisible.contains(row) || wasVisible.isEmpty {
          players.append((player, visible.contains(row)))
        }
      }
      let now = clock()
      let plan = planner.plan(visible: visible, rowCount: rowCount, direction: direction,
                              prefetchLimit: prefetchLimit, rows: rows, now: now)
      for row in plan.cancel {
        // A load still being issued by `start` on another thread is cancelled there, once
        // it finds its row gone.
        if case .loading(_, let token?)? = rows.removeValue(forKey: row)?.phase { toCancel.append(token) }
        statistics.cancelled += 1
      }
      for row in plan.forget { rows.removeValue(forKey: row) }
      // A row that left is no longer timed: back on screen, its result would count the
      // time it spent away.
      for row in plan.keep { rows[row]?.startedAt = nil }
      for (row, action) in plan.visible {
        switch action {
        case .raise(let priority, let postpone):
          guard let record = rows[row], case .loading(_, let token?) = record.phase else { continue }
          // A row that comes on screen while it loads (a prefetch, a row kept behind)
          // gets its placeholder as a row that starts loading now does.
          if onPlaceholder != nil, !wasVisible.contains(row), let request = try? requestForRow(row),
             request.placeholder != nil {
            placeholders.append((row, request))
          }
          toRaise.append((token, priority))
          if let postpone {
            toPostpone.append((token, postpone))
          } else {
            toConfirm.append(token)
            if record.unconfirmed {
              rows[row]?.unconfirmed = false
              rows[row]?.startedAt = now
            }
          }
        case .load(let priority, let delay):
          let provided: ImageRequest?
          do throws(LoadError) {
            provided = try requestForRow(row)
          } catch {
            refused(row)
            immediate.append((row, .failure(error)))
            continue
          }
          guard var request = provided else { continue }
          request.priority = priority
          if let image = loader.cachedImage(for: request) {
            rows[row] = TableRow(phase: .shown)
            statistics.memoryHits += 1
            statistics.delivered += 1
            immediate.append((row, .success(image, .memory, httpStatus: 0)))
          } else {
            if let delay { request.startDelayMilliseconds = delay }
            if onPlaceholder != nil, request.placeholder != nil { placeholders.append((row, request)) }
            toStart.append((row, request, TableRow(unconfirmed: delay != nil, startedAt: delay == nil ? now : nil)))
          }
        }
      }
      // The screen first: while a visible row loads, prefetches wait (see
      // `prefetchHoldMilliseconds`); once none does, the waiting ones start.
      let screenLoading = !toStart.isEmpty || isLoadingAVisibleRow()
      if !screenLoading {
        toConfirm += releaseHeldPrefetches()
      } else {
        for record in rows.values where record.held {
          if case .loading(_, let token?) = record.phase { toHoldAgain.append(token) }
        }
      }
      for (row, priority) in plan.prefetch {
        // A refused request is tried again, and reported, when its row shows.
        guard var request = try? requestForRow(row) else { continue }
        request.priority = priority
        guard loader.cachedImage(for: request) == nil else { continue }
        let held = screenLoading && configuration.prefetchHoldMilliseconds > 0
        if held { request.startDelayMilliseconds = configuration.prefetchHoldMilliseconds }
        toStart.append((row, request, TableRow(held: held)))
      }
      for (row, priority) in plan.rerank {
        if case .loading(_, let token?)? = rows[row]?.phase { toRaise.append((token, priority)) }
      }
    }
    // Before any of their loads is issued: a placeholder never follows its row's image.
    for (row, request) in placeholders { drawPlaceholder(row: row, request: request) }
    for token in toCancel { loader.cancel(token) }
    for (token, priority) in toRaise { loader.setPriority(token, priority) }
    for token in toConfirm { loader.startNow(token) }
    for (token, milliseconds) in toPostpone { loader.postpone(token, milliseconds: milliseconds) }
    for token in toHoldAgain { loader.postpone(token, milliseconds: configuration.prefetchHoldMilliseconds) }
    for start in toStart { self.start(row: start.row, request: start.request, record: start.record) }
    for (row, outcome) in immediate {
      // A refused request's metrics are empty.
      var metrics = RequestMetrics()
      if case .success(let image, _, _) = outcome {
        metrics.tier = .memory
        metrics.deliveredBytes = UInt64(image.totalByteCount)
      }
      onRow(row, outcome, metrics)
    }
  }

  /// Decodes a row's placeholder at the size its request implies and hands it to the
  /// host; a malformed hash is logged and draws nothing.
  private func drawPlaceholder(row: Int, request: ImageRequest) {
    guard let placeholder = request.placeholder, let onPlaceholder else { return }
    do {
      let size = try placeholder.drawingSize(width: request.targetWidth, height: request.targetHeight)
      onPlaceholder(row, try placeholder.decode(width: size.width, height: size.height))
    } catch {
      ImageLoader.log(loader.configuration, .warning, "placeholder of row \(row): \(error.message)")
    }
  }

  /// Cancels every request of this table; rows start anew at the next `setVisible`.
  public func cancelAll() {
    let tokens: [UInt64] = lock.withLock {
      var tokens: [UInt64] = []
      for record in rows.values {
        guard case .loading(_, let token) = record.phase else { continue }
        // A load still being issued is cancelled by `start`, which finds its row gone.
        if let token { tokens.append(token) }
        statistics.cancelled += 1
      }
      rows.removeAll()
      return tokens
    }
    for token in tokens { loader.cancel(token) }
  }

  /// Cancels everything; no row callback runs after this returns (on the queue's thread).
  public func close() {
    let tied: [AnimationPlayer] = lock.withLock {
      closed = true
      defer { animations.removeAll() }
      return animations.values.compactMap(\.player)
    }
    for player in tied { player.tie(to: nil) }
    cancelAll()
  }

  /// The threshold in force now, for tests.
  var currentFastScrollMilliseconds: Double { lock.withLock { planner.fastScrollThresholdMilliseconds } }

  // MARK: - Private

  /// Whether a visible row is still waiting for its result. Called under the lock.
  private func isLoadingAVisibleRow() -> Bool {
    visible.contains { if case .loading? = rows[$0]?.phase { return true } else { return false } }
  }

  /// The tokens of held prefetches to start now, no longer holding them. Rows whose token
  /// is not known yet (their load is being issued on another thread) start when their hold
  /// ends. Called under the lock.
  private func releaseHeldPrefetches() -> [UInt64] {
    var tokens: [UInt64] = []
    for (row, record) in rows where record.held {
      rows[row]?.held = false
      if case .loading(_, let token?) = record.phase { tokens.append(token) }
    }
    return tokens
  }

  /// Starts a row's load; `record` holds its marks (held, unconfirmed, when it started).
  private func start(row: Int, request: ImageRequest, record: TableRow) {
    // The row may already have left (another thread) or been started: check and record
    // under the lock, load outside it (load may complete a memory hit through the queue).
    // The generation, recorded before the load is issued and captured by its handler, is
    // what lets a result claim the row: a previous start's CANCELLED result, dispatched
    // on another thread while this load is being issued, must not clear this start.
    let generation: UInt64? = lock.withLock {
      if closed || rows[row] != nil { return nil }
      lastGeneration += 1
      var record = record
      record.phase = .loading(generation: lastGeneration, token: nil)
      rows[row] = record
      return lastGeneration
    }
    guard let generation else { return }
    do {
      let preview: ((UInt64, Image) -> Void)? = onPreview == nil ? nil : { [weak self] _, image in
        self?.previewed(row: row, generation: generation, image: image)
      }
      let token = try loader.load(request, queue: queue, preview: preview) { [weak self] token, outcome, metrics in
        self?.finished(row: row, generation: generation, token: token, outcome: outcome, metrics: metrics)
      }
      let stillWanted: Bool = lock.withLock {
        statistics.started += 1
        guard case .loading(generation, nil)? = rows[row]?.phase, !closed else { return false }
        rows[row]?.phase = .loading(generation: generation, token: token)
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
        guard case .loading(generation, nil)? = rows[row]?.phase, !closed else { return false }
        if visible.contains(row) {
          refused(row)
          return true
        }
        rows.removeValue(forKey: row)
        return false
      }
      if report { onRow(row, .failure(error), RequestMetrics()) }
    }
  }

  /// A visible row whose request was refused: shown with its error, which the caller
  /// reports, so it is not asked for again while it stays on screen. Called under the lock.
  private func refused(_ row: Int) {
    rows[row] = TableRow(phase: .shown)
    statistics.failed += 1
  }

  /// A preview reaches the host only for this start of a row that is visible and still
  /// loading: never over the row's final image, never for a row that left.
  private func previewed(row: Int, generation: UInt64, image: Image) {
    let show: Bool = lock.withLock {
      guard !closed, case .loading(generation, _)? = rows[row]?.phase else { return false }
      return visible.contains(row)
    }
    if show { onPreview?(row, image) }
  }

  private func finished(row: Int, generation: UInt64, token: UInt64, outcome: Outcome, metrics: RequestMetrics) {
    var release: [UInt64] = []
    defer { for token in release { loader.startNow(token) } }
    let deliver: Bool = lock.withLock {
      // Only this start's result counts (its token may not be recorded yet: the result
      // can come first, on another thread); an earlier start's is stale.
      guard !closed, let record = rows[row], case .loading(generation, _) = record.phase else { return false }
      // A prefetch (or a row kept behind) that finished: its image waits in the memory
      // cache. A cancelled load: the row starts anew when it shows.
      guard visible.contains(row), !outcome.isCancelled else {
        rows.removeValue(forKey: row)
        return false
      }
      rows[row] = TableRow(phase: .shown)
      if case .success = outcome { statistics.delivered += 1 } else { statistics.failed += 1 }
      if let since = record.startedAt, case .success(_, let source, _) = outcome, source != .memory {
        planner.recordLoad(nanoseconds: Double(clock() &- since))
      }
      // The screen is complete: the prefetches it held back go.
      if !isLoadingAVisibleRow() { release = releaseHeldPrefetches() }
      return true
    }
    if deliver { onRow(row, outcome, metrics) }
  }
}

/// What the table holds for a row it tracks, in one place: removing the row is removing
/// this. The marks of a load (`held`, `unconfirmed`, `startedAt`) are cleared when the row
/// is shown.
struct TableRow {
  enum Phase: Equatable {
    /// A request is in flight; `visible` decides whether its result reaches the host.
    /// `generation` names this start of the row: only results of this start count for it
    /// (a previous start's CANCELLED result may still be queued). `token` is nil while
    /// `start` issues the load: its result may arrive on another thread before it returns.
    case loading(generation: UInt64, token: UInt64?)
    /// The host has this row's result (or its error) while the row stays on screen.
    case shown
  }

  /// Until `start` records the load: `.loading` of no generation yet.
  var phase: Phase = .loading(generation: 0, token: nil)
  /// A prefetch whose transfer waits for the visible rows to finish loading.
  var held = false
  /// A visible row started with a fling's start delay and not confirmed since: if it
  /// leaves the screen before that, it is cancelled even within the rows kept behind (it
  /// was never worth a request; kept, it would send one when the delay ends).
  var unconfirmed = false
  /// When this visible row's transfer was asked to start now (not held by a fling): its
  /// result times the load (`ScrollPlanner.recordLoad`). Cleared when the row leaves.
  var startedAt: UInt64?
}
