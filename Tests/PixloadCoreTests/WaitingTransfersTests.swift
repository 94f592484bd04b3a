import XCTest
@testable import PixloadCore

/// The engine's waiting list, driven with explicit times: its start order (the header's
/// priority paragraph) and that cancelling and starting stay near linear.
final class WaitingTransfersTests: XCTestCase {
  private let second: UInt64 = 1_000_000_000
  private func list() -> WaitingTransfers<String> { WaitingTransfers(starvationNanoseconds: 5 * second) }

  private func drain(_ list: inout WaitingTransfers<String>, now: UInt64,
                     hasRoom: (String) -> Bool = { _ in true }) -> [String] {
    var order: [String] = []
    while let next = list.takeNext(now: now, hasRoom: hasRoom) { order.append(next) }
    return order
  }

  func testHighestPriorityFirstThenNewest() {
    var waiting = list()
    for (id, priority) in [(1, -1), (2, 5), (3, 5), (4, 9), (5, -1)] as [(TransferID, Int32)] {
      waiting.append("t\(id)", id: id, host: id % 2 == 0 ? "a" : "b", priority: priority, since: second)
    }
    waiting.remove(4)
    waiting.setPriority(1, 7)
    XCTAssertEqual(drain(&waiting, now: 2 * second), ["t1", "t3", "t2", "t5"])
    XCTAssertTrue(waiting.isEmpty)
  }

  /// A transfer waiting 5 s starts before newer ones of its class (foreground: priority 0
  /// and up; background: below), whatever their priority, oldest first; the rest keep the
  /// usual order.
  func testATransferWaiting5sStartsBeforeNewerOnesOfItsClass() {
    var waiting = list()
    waiting.append("old-normal", id: 1, host: "a", priority: 0, since: 1 * second)
    waiting.append("old-high", id: 2, host: "b", priority: 100, since: 2 * second)
    waiting.append("new-high", id: 3, host: "a", priority: 100, since: 6 * second)
    waiting.append("new-low", id: 4, host: "b", priority: 5, since: 6 * second)
    // At 6.5 s only "old-normal" has waited 5 s.
    XCTAssertEqual(waiting.takeNext(now: 6 * second + second / 2, hasRoom: { _ in true }), "old-normal")
    XCTAssertEqual(drain(&waiting, now: 6 * second + second / 2), ["new-high", "old-high", "new-low"])
    // Two that have waited long go oldest first, before anything newer of their class.
    waiting = list()
    waiting.append("old-1", id: 1, host: "a", priority: 0, since: 1 * second)
    waiting.append("old-2", id: 2, host: "a", priority: 1, since: 2 * second)
    waiting.append("new-high", id: 3, host: "a", priority: 100, since: 3 * second)
    XCTAssertEqual(waiting.takeNext(now: 7 * second, hasRoom: { _ in true }), "old-1")
    waiting.append("newest", id: 9, host: "b", priority: 1_000, since: 7 * second)
    XCTAssertEqual(drain(&waiting, now: 7 * second + 1), ["old-2", "newest", "new-high"])
    // The same among background transfers.
    waiting = list()
    waiting.append("old-prefetch", id: 1, host: "a", priority: -108, since: 1 * second)
    waiting.append("near-prefetch", id: 2, host: "a", priority: -100, since: 6 * second)
    XCTAssertEqual(drain(&waiting, now: 6 * second + 1), ["old-prefetch", "near-prefetch"])
  }

  /// A foreground transfer (a visible row) starts before background ones (prefetches),
  /// however long they have waited (but for their share, see below): the old rule sent a
  /// prefetch waiting 5 s ahead of everything, so in a sustained backlog, where all had waited 5 s, the list was first
  /// in, first out and the rows on screen waited behind old prefetches (the soak with one
  /// connection per host: 46 rows drawn in 300 s).
  func testForegroundAlwaysStartsBeforeBackground() {
    var waiting = list()
    for id in 1...TransferID(20) {
      waiting.append("prefetch-\(id)", id: id, host: "a", priority: -100 - Int32(id % 8), since: id * second / 10)
    }
    waiting.append("visible", id: 21, host: "a", priority: 100, since: 20 * second)
    waiting.append("plain", id: 22, host: "b", priority: 0, since: 21 * second)
    // At 21 s no foreground transfer has waited 5 s (highest first); at 30 s both have
    // (oldest first): either way both go before every prefetch, all of them starved.
    for now in [21 * second, 30 * second] {
      var copy = waiting
      let order = drain(&copy, now: now)
      XCTAssertEqual(Array(order.prefix(2)), ["visible", "plain"])
      XCTAssertEqual(order.count, 22)
      // The prefetches, all starved, oldest first.
      XCTAssertEqual(Array(order.dropFirst(2)), (1...20).map { "prefetch-\($0)" })
    }
  }

  /// A prefetch whose row becomes visible (raised to foreground) keeps its age there; one
  /// lowered to background leaves the foreground's order. Going back and forth leaves no
  /// duplicates behind: the work stays linear.
  func testChangingClassKeepsTheAge() {
    var waiting = list()
    waiting.append("raised", id: 1, host: "a", priority: -100, since: 1 * second)
    waiting.append("visible", id: 2, host: "a", priority: 100, since: 3 * second)
    waiting.append("lowered", id: 3, host: "a", priority: 100, since: 0)
    waiting.setPriority(1, 100)
    waiting.setPriority(3, -100)
    // At 6.5 s "raised" has waited 5.5 s: the oldest of the foreground.
    XCTAssertEqual(drain(&waiting, now: 6 * second + second / 2), ["raised", "visible", "lowered"])

    let n = 4_000
    for id in 1...TransferID(n) { waiting.append("t", id: id, host: "h", priority: 100, since: id) }
    let before = waiting.bookkeepingWork
    for round in 0..<8 {
      for id in 1...TransferID(n) { waiting.setPriority(id, round % 2 == 0 ? -100 : 100) }
    }
    XCTAssertEqual(drain(&waiting, now: TransferID(n) + 1).count, n)
    let bound = 64 * n * (Int.bitWidth - n.leadingZeroBitCount)
    XCTAssertLessThanOrEqual(waiting.bookkeepingWork - before, bound)
  }

  /// The engine preempts for the next foreground transfer: its host, as if every host had
  /// room; none when only background transfers wait.
  func testNextForegroundHost() {
    var waiting = list()
    XCTAssertNil(waiting.nextForegroundHost(now: 0))
    waiting.append("prefetch", id: 1, host: "a", priority: -100, since: 0)
    XCTAssertNil(waiting.nextForegroundHost(now: 10 * second))
    waiting.append("plain", id: 2, host: "b", priority: 0, since: 1)
    waiting.append("visible", id: 3, host: "c", priority: 100, since: 2)
    XCTAssertEqual(waiting.nextForegroundHost(now: 3), "c")
    XCTAssertEqual(waiting.count, 3)
    XCTAssertEqual(waiting.takeNext(now: 3, hasRoom: { $0 != "c" }), "plain")
  }

  /// Which running transfer a waiting foreground one stops: only background ones with less
  /// than half their body, on its host when the host is full, else on any; the least
  /// received first.
  func testPreemptionStopsTheBackgroundTransferThatLosesLeast() {
    func running(_ id: TransferID, _ host: String, _ priority: Int32, _ received: Int) -> PreemptionCandidate {
      PreemptionCandidate(id: id, host: host, priority: priority, received: received)
    }
    let all = [running(1, "a", 100, 0), running(2, "a", -100, 50_000), running(3, "a", -107, 90_000),
               running(4, "b", -100, 10), running(5, "a", 0, 0)]
    // Host a full: a background transfer of a, the one with least received.
    XCTAssertEqual(PreemptionCandidate.victim(for: "a", hostFull: true, engineFull: false, running: all), 2)
    // Only the engine full: any host's, least received.
    XCTAssertEqual(PreemptionCandidate.victim(for: "a", hostFull: false, engineFull: true, running: all), 4)
    XCTAssertEqual(PreemptionCandidate.victim(for: "a", hostFull: true, engineFull: true, running: all), 2)
    // Room for it: nothing to stop. Only foreground running: nothing either.
    XCTAssertNil(PreemptionCandidate.victim(for: "a", hostFull: false, engineFull: false, running: all))
    XCTAssertNil(PreemptionCandidate.victim(for: "a", hostFull: true, engineFull: true,
                                            running: [running(1, "a", 100, 0), running(5, "a", 0, 0)]))
    // Host b full but its only background transfer... is 4; a's do not help it.
    XCTAssertEqual(PreemptionCandidate.victim(for: "b", hostFull: true, engineFull: false, running: all), 4)
    XCTAssertNil(PreemptionCandidate.victim(for: "c", hostFull: true, engineFull: false, running: all))
    // One with half its body or more runs on: restarting it would cost more than waiting.
    let nearlyDone = [PreemptionCandidate(id: 7, host: "a", priority: -100, received: 600_000, expected: 1_100_000),
                      PreemptionCandidate(id: 8, host: "a", priority: -100, received: 500_000, expected: 1_100_000)]
    XCTAssertEqual(PreemptionCandidate.victim(for: "a", hostFull: true, engineFull: true, running: nearlyDone), 8)
    XCTAssertNil(PreemptionCandidate.victim(for: "a", hostFull: true, engineFull: true, running: [nearlyDone[0]]))
    // One that had waited long (started on the background's share) runs on too.
    let aged = PreemptionCandidate(id: 9, host: "a", priority: -100, received: 0, waitedLong: true)
    XCTAssertNil(PreemptionCandidate.victim(for: "a", hostFull: true, engineFull: true, running: [aged]))
  }

  /// While foreground transfers keep waiting, one start in four goes to the background
  /// transfer that has waited longest, once it has waited 5 s: a stream of visible rows
  /// cannot keep a prefetch (or a plain load at prefetch priority, with a callback its
  /// host waits for) waiting for ever. One that has not waited 5 s gets no share.
  func testAgedBackgroundGetsOneStartInFour() {
    var waiting = list()
    for id in 1...TransferID(9) {
      waiting.append("fg-\(id)", id: id, host: "a", priority: 100, since: 10 * second)
    }
    waiting.append("bg-old", id: 20, host: "a", priority: -100, since: 1 * second)
    waiting.append("bg-older", id: 21, host: "b", priority: -200, since: 0)
    waiting.append("bg-new", id: 22, host: "a", priority: -50, since: 10 * second)
    let order = drain(&waiting, now: 11 * second)
    XCTAssertEqual(order, ["fg-9", "fg-8", "fg-7", "bg-older", "fg-6", "fg-5", "fg-4", "bg-old",
                           "fg-3", "fg-2", "fg-1", "bg-new"])
  }

  /// A retry comes back with the time it first waited: in a backlog where everything is
  /// starved it goes before transfers that arrived after it, not to the back of the line
  /// (the soak saw retried requests wait the whole queue twice, over 60 s).
  func testARetryKeepsItsAge() {
    var waiting = list()
    waiting.append("second", id: 2, host: "a", priority: 0, since: 2 * second)
    waiting.append("third", id: 3, host: "a", priority: 0, since: 3 * second)
    // Transfer 1 first waited at 1 s, failed an attempt and is back after its backoff.
    waiting.append("retried", id: 1, host: "a", priority: 0, since: 1 * second)
    waiting.append("fourth", id: 4, host: "b", priority: 0, since: 4 * second)
    XCTAssertEqual(drain(&waiting, now: 20 * second), ["retried", "second", "third", "fourth"])
  }

  /// Only transfers whose host has room start; a full host does not block the others.
  func testAFullHostIsSkipped() {
    var waiting = list()
    waiting.append("a-starved", id: 1, host: "a", priority: 0, since: 0)
    waiting.append("a-high", id: 2, host: "a", priority: 50, since: 10 * second)
    waiting.append("b-low", id: 3, host: "b", priority: -5, since: 10 * second)
    XCTAssertEqual(drain(&waiting, now: 10 * second, hasRoom: { $0 != "a" }), ["b-low"])
    XCTAssertEqual(drain(&waiting, now: 10 * second), ["a-starved", "a-high"])
  }

  /// Removing n waiting transfers costs a constant per transfer, whatever n: the loader
  /// cancels under its lock, and a search per cancel made pxl_cancel_all quadratic.
  func testCancellingEveryWaitingTransferIsLinear() {
    for n in [1_000, 16_000] {
      var waiting = list()
      for id in 1...TransferID(n) {
        waiting.append("t", id: id, host: "h\(id % 3)", priority: Int32(id % 5), since: id)
      }
      for id in stride(from: TransferID(1), through: TransferID(n), by: 10) { waiting.setPriority(id, 9) }
      // One start in between, as the engine thread would.
      XCTAssertNotNil(waiting.takeNext(now: TransferID(n), hasRoom: { _ in true }))
      let before = waiting.bookkeepingWork
      var removed = 0
      for id in (1...TransferID(n)).reversed() where waiting.remove(id) != nil { removed += 1 }
      XCTAssertEqual(removed, n - 1)
      let work = waiting.bookkeepingWork - before
      XCTAssertLessThanOrEqual(work, 32 * n, "cancelling \(n) transfers took \(work) steps")
    }
  }

  /// Starting a backlog of n transfers one slot at a time costs O(n log n), also when a
  /// full host's transfers are passed over on every pick.
  func testStartingABacklogIsNotQuadratic() {
    let n = 16_000
    var waiting = list()
    for id in 1...TransferID(n) {
      waiting.append("t", id: id, host: id % 2 == 0 ? "full" : "h\(id % 7)", priority: Int32(id % 3), since: id)
    }
    let before = waiting.bookkeepingWork
    XCTAssertEqual(drain(&waiting, now: TransferID(n), hasRoom: { $0 != "full" }).count, n / 2)
    let bound = 16 * n * (Int.bitWidth - n.leadingZeroBitCount)
    XCTAssertLessThanOrEqual(waiting.bookkeepingWork - before, bound)
  }

  /// Start delays and backoffs: due soonest first, postponing moves one later, and
  /// removing n of them is linear.
  func testDelayedTransfersAreTakenWhenDueAndCancelledInLinearTime() {
    var delayed = DelayedTransfers<String>()
    delayed.add("late", id: 1, due: 30)
    delayed.add("soon", id: 2, due: 10)
    delayed.add("postponed", id: 3, due: 5)
    delayed.postpone(3, until: 20)
    delayed.postpone(2, until: 1)  // never earlier
    XCTAssertEqual(delayed.nextDue(), 10)
    XCTAssertEqual(delayed.takeDue(now: 20), ["soon", "postponed"])
    XCTAssertEqual(delayed.takeDue(now: 29), [])
    XCTAssertEqual(delayed.remove(1), "late")
    XCTAssertNil(delayed.nextDue())

    let n = 16_000
    for id in 1...TransferID(n) { delayed.add("t", id: id, due: id * 7 % 1_000) }
    let before = delayed.bookkeepingWork
    for id in (1...TransferID(n)).reversed() { XCTAssertNotNil(delayed.remove(id)) }
    XCTAssertLessThanOrEqual(delayed.bookkeepingWork - before, 32 * n)
    XCTAssertEqual(delayed.count, 0)
  }
}
