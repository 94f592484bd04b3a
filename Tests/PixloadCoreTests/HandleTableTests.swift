import XCTest
@testable import PixloadCore

final class HandleTableTests: XCTestCase {
  private final class Thing {}
  private final class Other {}

  func testANumberNamesItsObjectUntilRemovedOnce() {
    let table = HandleTable()
    let thing = Thing()
    let number = table.insert(thing)
    XCTAssertNotEqual(number, 0)
    XCTAssertTrue(table.object(number, as: Thing.self) === thing)
    XCTAssertNil(table.object(number, as: Other.self))
    XCTAssertNil(table.remove(number, as: Other.self))  // the wrong kind takes nothing
    XCTAssertTrue(table.remove(number, as: Thing.self) === thing)
    XCTAssertNil(table.remove(number, as: Thing.self))
    XCTAssertNil(table.object(number, as: Thing.self))
  }

  func testAStaleNumberNeverNamesTheObjectThatReusesItsSlot() {
    let table = HandleTable()
    let stale = table.insert(Thing())
    XCTAssertNotNil(table.remove(stale, as: Thing.self))
    var numbers: Set<UInt64> = [stale]
    for _ in 0..<1000 {
      let thing = Thing()
      let number = table.insert(thing)
      XCTAssertTrue(numbers.insert(number).inserted)
      XCTAssertNil(table.object(stale, as: Thing.self))
      XCTAssertNil(table.remove(stale, as: Thing.self))
      XCTAssertTrue(table.remove(number, as: Thing.self) === thing)
    }
  }

  func testNumbersNeverHandedOutAreRefused() {
    let table = HandleTable()
    let number = table.insert(Thing())
    for forged in [0, number + 1, number ^ (1 << 32), UInt64.max] {
      XCTAssertNil(table.object(forged, as: Thing.self))
      XCTAssertNil(table.remove(forged, as: Thing.self))
    }
    XCTAssertNotNil(table.remove(number, as: Thing.self))
  }

  func testConcurrentRemovesOfOneNumberGiveTheObjectOnce() {
    let table = HandleTable()
    let lock = Lock()
    for _ in 0..<200 {
      let number = table.insert(Thing())
      var taken = 0
      let threads = (0..<4).map { _ in
        try! WorkerThread(name: "take") {
          if table.remove(number, as: Thing.self) != nil { lock.withLock { taken += 1 } }
        }
      }
      threads.forEach { $0.join() }
      XCTAssertEqual(taken, 1)
    }
  }
}
