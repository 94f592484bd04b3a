/// The network engine's transfers waiting for a connection slot, in its start order (the
/// header's priority paragraph): foreground transfers (priority `foregroundPriority` or
/// more: visible rows, plain loads) before background ones (prefetches, rows kept behind),
/// except that every `backgroundShare`th start goes to a background transfer that has
/// waited `starvationNanoseconds` or more, if one does. Within each class, highest
/// priority first and, among equals, the newest (highest id), except that one waiting
/// `starvationNanoseconds` or more starts before any of its class that has not, oldest
/// first. So a foreground transfer that waited long starts in bounded time however many
/// newer ones arrive, a background one too (more slowly), and a sustained backlog (where
/// everything has waited long) does not turn into one first-in first-out line with the
/// rows on screen behind old prefetches. Only transfers whose host has a free slot may
/// start.
///
/// A transfer's age counts from when it first waited: a retry comes back with its first
/// `since`, so a failed attempt does not send the request to the back of the line (in a
/// backlog a retried request would otherwise wait the whole queue twice).
///
/// Cancels arrive under the loader's lock, thousands at a time (pxl_cancel_all, a fling):
/// removing is O(1) and re-ranking O(log n) amortized. Each host keeps, per class, a heap
/// by rank and one by age; all keep removed or re-ranked entries as tombstones, dropped
/// when they reach the top and compacted away once they outnumber the live ones. A pick
/// looks at the top of each host that has waiting transfers: O(hosts + log n).
///
/// Not thread safe: the engine guards it with its lock.
struct WaitingTransfers<Item> {
  /// A transfer that has waited this long starts before any of its class that has not,
  /// oldest first.
  let starvationNanoseconds: UInt64
  /// Priorities from this one up are foreground (PXL_PRIORITY_NORMAL).
  static var foregroundPriority: Int32 { 0 }
  /// One start in this many may go to a background transfer that has waited long, while
  /// foreground ones wait.
  static var backgroundShare: Int { 4 }
  /// Starts since the last background one.
  private var startsSinceBackground = 0

  static func isForeground(_ priority: Int32) -> Bool { priority >= foregroundPriority }

  private struct Waiter {
    let item: Item
    let host: String
    var priority: Int32
    /// Arrival order (unique per stay in the list) and time.
    let arrival: UInt64
    let since: UInt64
  }

  /// An entry of a host's heaps; live while `waiters[id]` is the same stay (`arrival`) and,
  /// in the rank heap, at the same priority (in the age heap: of the same class).
  private struct Key {
    let id: TransferID
    let priority: Int32
    let arrival: UInt64
    let since: UInt64
  }

  /// One class of a host's waiting transfers.
  private struct Lane {
    var byRank = BinaryHeap<Key> { a, b in
      a.priority != b.priority ? a.priority > b.priority : a.id > b.id
    }
    var byAge = BinaryHeap<Key>(comesFirst: WaitingTransfers.isOlder)
    var entries: Int { byRank.count + byAge.count }
    var comparisons: Int { byRank.comparisons + byAge.comparisons }
  }

  private struct HostQueue {
    /// [foreground, background]
    var lanes = [Lane(), Lane()]
    var live = 0
    var entries: Int { lanes[0].entries + lanes[1].entries }
  }

  private static func lane(_ priority: Int32) -> Int { isForeground(priority) ? 0 : 1 }

  private static func isOlder(_ a: Key, _ b: Key) -> Bool {
    a.since != b.since ? a.since < b.since : a.arrival < b.arrival
  }

  private var waiters: [TransferID: Waiter] = [:]
  private var hosts: [String: HostQueue] = [:]
  private var arrivals: UInt64 = 0
  /// Tombstones dropped, entries moved by compaction and hosts looked at, with the heaps'
  /// comparisons: the work the list did, for tests that check it stays near linear.
  private var entriesVisited = 0
  private var retiredComparisons = 0

  init(starvationNanoseconds: UInt64) {
    self.starvationNanoseconds = starvationNanoseconds
  }

  var count: Int { waiters.count }
  var isEmpty: Bool { waiters.isEmpty }

  /// See `entriesVisited`.
  var bookkeepingWork: Int {
    entriesVisited + retiredComparisons + hosts.values.reduce(0) { $0 + $1.lanes[0].comparisons + $1.lanes[1].comparisons }
  }

  /// Adds a transfer that has been waiting since `since`: now for a new one, the time it
  /// first waited for a retry.
  mutating func append(_ item: Item, id: TransferID, host: String, priority: Int32, since: UInt64) {
    arrivals += 1
    if let old = waiters.removeValue(forKey: id) { forget(old, id: id) }
    waiters[id] = Waiter(item: item, host: host, priority: priority, arrival: arrivals, since: since)
    let key = Key(id: id, priority: priority, arrival: arrivals, since: since)
    let lane = Self.lane(priority)
    hosts[host, default: HostQueue()].lanes[lane].byRank.push(key)
    hosts[host]!.lanes[lane].byAge.push(key)
    hosts[host]!.live += 1
  }

  func item(_ id: TransferID) -> Item? { waiters[id]?.item }

  /// Removes a waiting transfer; nil if it is not waiting.
  @discardableResult
  mutating func remove(_ id: TransferID) -> Item? {
    guard let waiter = waiters.removeValue(forKey: id) else { return nil }
    forget(waiter, id: id)
    return waiter.item
  }

  /// Re-ranks a waiting transfer; false if it is not waiting.
  @discardableResult
  mutating func setPriority(_ id: TransferID, _ priority: Int32) -> Bool {
    guard let waiter = waiters[id] else { return false }
    guard waiter.priority != priority else { return true }
    waiters[id]!.priority = priority
    // The entry at the old priority turns into a tombstone; one that changes class joins
    // the other class's age heap too, with its age (the old class's entry is a tombstone).
    let key = Key(id: id, priority: priority, arrival: waiter.arrival, since: waiter.since)
    let lane = Self.lane(priority)
    hosts[waiter.host]!.lanes[lane].byRank.push(key)
    if lane != Self.lane(waiter.priority) { hosts[waiter.host]!.lanes[lane].byAge.push(key) }
    compactIfMostlyTombstones(waiter.host)
    return true
  }

  mutating func removeAll() {
    waiters.removeAll()
    hosts.removeAll()
  }

  /// Removes and returns the transfer that starts next among those whose host
  /// `hasRoom`, nil if none may start.
  mutating func takeNext(now: UInt64, hasRoom: (String) -> Bool) -> Item? {
    let foreground = pick(now: now, lane: 0, hasRoom: hasRoom)
    if let foreground, startsSinceBackground < Self.backgroundShare - 1 {
      startsSinceBackground += 1
      return remove(foreground.key.id)
    }
    // The background's turn (its share), or no foreground transfer may start.
    if let background = pick(now: now, lane: 1, hasRoom: hasRoom), foreground == nil || background.starved {
      startsSinceBackground = 0
      return remove(background.key.id)
    }
    guard let foreground else { return nil }
    startsSinceBackground += 1
    return remove(foreground.key.id)
  }

  /// The host of the foreground transfer that would start next if every host had room,
  /// nil when no foreground transfer waits: the engine frees a slot for it by preempting
  /// a background transfer when its host, or the engine, is full.
  mutating func nextForegroundHost(now: UInt64) -> String? {
    guard let best = pick(now: now, lane: 0, hasRoom: { _ in true }) else { return nil }
    return waiters[best.key.id]!.host
  }

  // MARK: - Private

  /// The next transfer of a lane (0 foreground, 1 background) to start among the hosts
  /// that have room, and whether it has waited long.
  private mutating func pick(now: UInt64, lane: Int, hasRoom: (String) -> Bool) -> (key: Key, starved: Bool)? {
    var best: (key: Key, starved: Bool)?
    var index = hosts.startIndex
    while index != hosts.endIndex {
      defer { index = hosts.index(after: index) }
      entriesVisited += 1
      let host = hosts.keys[index]
      guard hasRoom(host) else { continue }
      // The lane's oldest: if it has not waited long, none of the lane's has.
      let front = Self.liveOldest(&hosts.values[index].lanes[lane].byAge, lane: lane, waiters)
      let top = Self.liveTop(&hosts.values[index].lanes[lane].byRank, waiters)
      entriesVisited += front.dropped + top.dropped
      guard let oldest = front.key, let ranked = top.key else { continue }
      let starved = now &- waiters[oldest.id]!.since >= starvationNanoseconds
      let candidate = starved ? oldest : ranked
      if let current = best {
        let better: Bool
        if starved || current.starved {
          better = starved && (!current.starved || Self.isOlder(oldest, current.key))
        } else {
          better = candidate.priority > current.key.priority
            || (candidate.priority == current.key.priority && candidate.id > current.key.id)
        }
        guard better else { continue }
      }
      best = (candidate, starved)
    }
    return best
  }

  /// Whether the key is the waiter's current stay (in an age heap: at any priority of the
  /// heap's class).
  private static func isHere(_ key: Key, lane: Int, _ waiters: [TransferID: Waiter]) -> Bool {
    guard let waiter = waiters[key.id] else { return false }
    return waiter.arrival == key.arrival && Self.lane(waiter.priority) == lane
  }

  /// The heap's top live entry, and how many tombstones above it were dropped.
  private static func liveTop(_ heap: inout BinaryHeap<Key>, _ waiters: [TransferID: Waiter]) -> (key: Key?, dropped: Int) {
    var dropped = 0
    while let top = heap.top {
      if let waiter = waiters[top.id], waiter.arrival == top.arrival, waiter.priority == top.priority {
        return (top, dropped)
      }
      heap.popTop()
      dropped += 1
    }
    return (nil, dropped)
  }

  /// The oldest live entry of a lane's age heap (whatever its priority now).
  private static func liveOldest(_ heap: inout BinaryHeap<Key>, lane: Int, _ waiters: [TransferID: Waiter]) -> (key: Key?, dropped: Int) {
    var dropped = 0
    while let top = heap.top {
      if isHere(top, lane: lane, waiters) { return (top, dropped) }
      heap.popTop()
      dropped += 1
    }
    return (nil, dropped)
  }

  /// A waiter left the list: its host forgets it once it has no other, else its entries
  /// stay as tombstones.
  private mutating func forget(_ waiter: Waiter, id: TransferID) {
    hosts[waiter.host]!.live -= 1
    if hosts[waiter.host]!.live == 0 {
      let queue = hosts.removeValue(forKey: waiter.host)!
      retiredComparisons += queue.lanes[0].comparisons + queue.lanes[1].comparisons
      return
    }
    compactIfMostlyTombstones(waiter.host)
  }

  /// Rebuilds a host's heaps from its live waiters once tombstones
  /// outnumber them; each rebuild costs O(live) and follows at least as many removals
  /// or re-ranks, so the cost per operation stays constant.
  private mutating func compactIfMostlyTombstones(_ host: String) {
    guard var queue = hosts[host], queue.entries > 4 * queue.live + 64 else { return }
    hosts[host] = nil  // no second reference while it is rebuilt
    entriesVisited += queue.entries
    let waiters = self.waiters
    for lane in 0...1 {
      // A transfer that left its class and came back has two live age entries: keep one.
      var seen = Set<TransferID>()
      let live = queue.lanes[lane].byAge.elements.filter { Self.isHere($0, lane: lane, waiters) && seen.insert($0.id).inserted }
        .map { key in Key(id: key.id, priority: waiters[key.id]!.priority, arrival: key.arrival, since: key.since) }
      queue.lanes[lane].byAge.rebuild(live)
      queue.lanes[lane].byRank.rebuild(live)
    }
    hosts[host] = queue
  }
}

/// Transfers held until a time: a start delay (a table during a fling) or a retry's
/// backoff. Removing one is O(1), taking those that are due O(log n) each, with the same
/// lazy tombstones as `WaitingTransfers`. Not thread safe: the engine's lock guards it.
struct DelayedTransfers<Item> {
  private struct Entry {
    let id: TransferID
    let due: UInt64
  }

  private var held: [TransferID: (item: Item, due: UInt64)] = [:]
  /// Soonest first; an entry is live while `held[id]` has the same due time.
  private var byDue = BinaryHeap<Entry> { $0.due < $1.due }
  private var entriesVisited = 0

  var count: Int { held.count }
  var bookkeepingWork: Int { entriesVisited + byDue.comparisons }

  func item(_ id: TransferID) -> Item? { held[id]?.item }

  mutating func add(_ item: Item, id: TransferID, due: UInt64) {
    held[id] = (item, due)
    byDue.push(Entry(id: id, due: due))
    compactIfMostlyTombstones()
  }

  @discardableResult
  mutating func remove(_ id: TransferID) -> Item? {
    guard let removed = held.removeValue(forKey: id) else { return nil }
    compactIfMostlyTombstones()
    return removed.item
  }

  /// Moves a held transfer's due time to at least `due`.
  mutating func postpone(_ id: TransferID, until due: UInt64) {
    guard let current = held[id], due > current.due else { return }
    held[id] = (current.item, due)
    byDue.push(Entry(id: id, due: due))
    compactIfMostlyTombstones()
  }

  /// The soonest due time, if any transfer is held.
  mutating func nextDue() -> UInt64? {
    liveTop()?.due
  }

  /// Removes and returns the transfers due at `now`, soonest first.
  mutating func takeDue(now: UInt64) -> [Item] {
    var due: [Item] = []
    while let top = liveTop(), top.due <= now {
      byDue.popTop()
      due.append(held.removeValue(forKey: top.id)!.item)
    }
    if held.isEmpty { byDue.removeAll() }
    return due
  }

  mutating func removeAll() {
    held.removeAll()
    byDue.removeAll()
  }

  private mutating func liveTop() -> Entry? {
    while let top = byDue.top {
      if held[top.id]?.due == top.due { return top }
      byDue.popTop()
      entriesVisited += 1
    }
    return nil
  }

  private mutating func compactIfMostlyTombstones() {
    guard byDue.count > 4 * held.count + 64 else { return }
    entriesVisited += byDue.count + held.count
    byDue.rebuild(held.map { Entry(id: $0.key, due: $0.value.due) })
  }
}
