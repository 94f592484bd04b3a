import XCTest
@testable import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

private func solidImage(width: Int, height: Int, value: UInt8 = 7) -> Image {
  let pixels = malloc(width * height * 4)!
  memset(pixels, Int32(value), width * height * 4)
  return Image(width: width, height: height, stride: width * 4, format: .rgba8, originalWidth: width,
               originalHeight: height, takingPixels: pixels)
}

private func key(_ name: String) -> ImageVariant { ImageRequest(url: "http://h/\(name)").variant }

final class MemoryCacheTests: XCTestCase {
  func testEvictsLeastRecentlyUsedByBytes() {
    let cache = MemoryCache(capacityBytes: 10 * 400)  // ten 10x10 RGBA images
    for i in 0..<10 { cache.insert(solidImage(width: 10, height: 10), for: key("\(i)")) }
    XCTAssertNotNil(cache.image(for: key("0")))  // 0 becomes the most recent
    cache.insert(solidImage(width: 10, height: 10), for: key("new"))
    XCTAssertNil(cache.image(for: key("1")), "1 was least recently used")
    XCTAssertNotNil(cache.image(for: key("0")))
    XCTAssertNotNil(cache.image(for: key("2")))
    XCTAssertNotNil(cache.image(for: key("new")))
    XCTAssertEqual(cache.totalBytes, 4000)
    XCTAssertEqual(cache.count, 10)
  }

  func testAnImageOverATenthOfTheBudgetIsNotCached() {
    let cache = MemoryCache(capacityBytes: 3999)
    cache.insert(solidImage(width: 10, height: 10), for: key("big"))  // 400 > 399
    XCTAssertEqual(cache.count, 0)
    let roomy = MemoryCache(capacityBytes: 4000)
    roomy.insert(solidImage(width: 10, height: 10), for: key("fits"))
    XCTAssertEqual(roomy.count, 1)
  }

  func testTheCountLimitHoldsForTinyImages() {
    let cache = MemoryCache(capacityBytes: 1 << 20, capacityCount: 3)
    for i in 0..<5 { cache.insert(solidImage(width: 1, height: 1), for: key("\(i)")) }
    XCTAssertEqual(cache.count, 3)
    XCTAssertNil(cache.image(for: key("1")))
    XCTAssertNotNil(cache.image(for: key("4")))
  }

  func testRemovingAKeyDropsEveryVariant() {
    let cache = MemoryCache(capacityBytes: 1 << 20)
    cache.insert(solidImage(width: 2, height: 2), for: ImageRequest(url: "http://h/a").variant)
    cache.insert(solidImage(width: 2, height: 2), for: ImageRequest(url: "http://h/a", targetWidth: 1, targetHeight: 1).variant)
    cache.insert(solidImage(width: 2, height: 2), for: ImageRequest(url: "http://h/b").variant)
    cache.removeAll(cacheKey: "http://h/a")
    XCTAssertEqual(cache.count, 1)
  }

  func testTrimKeepsImagesTheHostStillHolds() {
    let cache = MemoryCache(capacityBytes: 10_000)
    var held: Image? = solidImage(width: 10, height: 10, value: 42)
    cache.insert(held!, for: key("a"))
    cache.insert(solidImage(width: 10, height: 10), for: key("b"))
    cache.trim(toBytes: 400)  // room for one
    XCTAssertNil(cache.image(for: key("a")))
    XCTAssertNotNil(cache.image(for: key("b")))
    XCTAssertEqual(held!.pixels.load(as: UInt8.self), 42, "pixels outlive their cache entry")
    held = nil
    cache.removeAll()
    XCTAssertEqual(cache.totalBytes, 0)
  }

  func testReplacingAnEntryKeepsTheByteCountRight() {
    let cache = MemoryCache(capacityBytes: 10_000)
    cache.insert(solidImage(width: 10, height: 10), for: key("a"))
    cache.insert(solidImage(width: 5, height: 5), for: key("a"))
    XCTAssertEqual(cache.totalBytes, 100)
    XCTAssertEqual(cache.count, 1)
  }

  /// An isolated decode's pixels mapped from the worker's memfd (PixelMemory): the cache
  /// counts the whole mapping (the ICC profile after the pixels, whole pages), and the
  /// image's end unmaps it (munmap, not free).
  func testAMappedImageCountsItsMappingAndUnmapsIt() throws {
    let page = Int(sysconf(Int32(_SC_PAGESIZE)))
    let pixelBytes = 100 * 100 * 4, length = pixelBytes + 3000  // 3000 bytes of ICC profile
    let base = try XCTUnwrap(mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
    XCTAssertNotEqual(base, MAP_FAILED)
    memset(base, 9, length)
    PixelMemory.adopt(base, length: length)
    var image: Image? = Image(width: 100, height: 100, stride: 400, format: .rgba8, originalWidth: 100,
                              originalHeight: 100, takingPixels: base)
    let mapped = (length + page - 1) / page * page
    XCTAssertEqual(image!.mappedByteCount, mapped)
    XCTAssertEqual(image!.cachedByteCount, mapped)
    XCTAssertTrue(image!.surrenderPixels().isEmpty, "a mapping is not handed to the processing steps")
    let cache = MemoryCache(capacityBytes: 10 * mapped)
    cache.insert(image!, for: key("mapped"))
    XCTAssertEqual(cache.totalBytes, mapped)
    XCTAssertEqual(PixelMemory.mappedLength(base), length)
    image = nil
    cache.removeAll()
    XCTAssertEqual(cache.totalBytes, 0)
    XCTAssertNil(PixelMemory.mappedLength(base), "released")
    // Unmapped: the kernel reports the page as not mapped (mincore: ENOMEM).
    var resident: UInt8 = 0
    XCTAssertEqual(mincore(base, page, &resident), -1)
    XCTAssertEqual(errno, ENOMEM)
    // A malloc'd image counts its pixels alone.
    XCTAssertEqual(solidImage(width: 10, height: 10).cachedByteCount, 400)
  }
}

final class SizePlanTests: XCTestCase {
  func testFitKeepsAspectAndRoundsToNearest() {
    let plan = SizePlan(sourceWidth: 640, sourceHeight: 480, orientation: .up, targetWidth: 150,
                        targetHeight: 150, mode: .fit)
    XCTAssertEqual([plan.outputWidth, plan.outputHeight], [150, 113])  // 112.5 rounds up
  }

  func testFillCropsTheCentreToExactlyTheTarget() {
    let plan = SizePlan(sourceWidth: 640, sourceHeight: 480, orientation: .up, targetWidth: 150,
                        targetHeight: 150, mode: .fill)
    XCTAssertEqual([plan.outputWidth, plan.outputHeight], [150, 150])
    XCTAssertEqual(plan.displayCrop, PixelRect(x: 80, y: 0, width: 480, height: 480))
    XCTAssertEqual(plan.dctScaleDenominator, 2, "480/2 = 240 covers 150; 480/4 = 120 does not")
  }

  func testNeverUpscales() {
    let fit = SizePlan(sourceWidth: 100, sourceHeight: 50, orientation: .up, targetWidth: 400,
                       targetHeight: 400, mode: .fit)
    XCTAssertEqual([fit.outputWidth, fit.outputHeight], [100, 50])
    let fill = SizePlan(sourceWidth: 100, sourceHeight: 50, orientation: .up, targetWidth: 400,
                        targetHeight: 400, mode: .fill)
    XCTAssertEqual([fill.outputWidth, fill.outputHeight], [50, 50], "the largest centred square")
    XCTAssertEqual(fill.dctScaleDenominator, 1)
  }

  func testZeroTargetMeansOriginalOrUnconstrained() {
    let original = SizePlan(sourceWidth: 300, sourceHeight: 200, orientation: .up, targetWidth: 0,
                            targetHeight: 0, mode: .fill)
    XCTAssertEqual([original.outputWidth, original.outputHeight], [300, 200])
    let byWidth = SizePlan(sourceWidth: 300, sourceHeight: 200, orientation: .up, targetWidth: 150,
                           targetHeight: 0, mode: .fit)
    XCTAssertEqual([byWidth.outputWidth, byWidth.outputHeight], [150, 100])
  }

  func testQuarterTurnOrientationsSwapAxesBeforeSizing() {
    let plan = SizePlan(sourceWidth: 1800, sourceHeight: 1200, orientation: .right, targetWidth: 100,
                        targetHeight: 300, mode: .fit)
    XCTAssertEqual([plan.displayWidth, plan.displayHeight], [1200, 1800])
    XCTAssertEqual([plan.outputWidth, plan.outputHeight], [100, 150])
    XCTAssertEqual([plan.storedOutputWidth, plan.storedOutputHeight], [150, 100])
    XCTAssertEqual(plan.dctScaleDenominator, 8)
  }
}

final class PixelTests: XCTestCase {
  func testAreaResampleAveragesExactly() {
    // 4x2 gray: left half 0, right half 200 -> 2x1 gives 0 and 200; 1x1 gives 100.
    var source: [UInt8] = [0, 0, 200, 200, 0, 0, 200, 200]
    let two = source.withUnsafeMutableBufferPointer {
      AreaResampler.resample(source: $0.baseAddress!, width: 4, height: 2, channels: 1,
                             crop: PixelRect(x: 0, y: 0, width: 4, height: 2), outputWidth: 2, outputHeight: 1)!
    }
    XCTAssertEqual([two[0], two[1]], [0, 200])
    free(two)
    let one = source.withUnsafeMutableBufferPointer {
      AreaResampler.resample(source: $0.baseAddress!, width: 4, height: 2, channels: 1,
                             crop: PixelRect(x: 0, y: 0, width: 4, height: 2), outputWidth: 1, outputHeight: 1)!
    }
    XCTAssertEqual(one[0], 100)
    free(one)
  }

  func testOrientationRight() {
    // Stored 2x1 [A B] with orientation 6 (rotate 90 clockwise) shows as 1x2: A on top.
    var source: [UInt8] = [1, 2]
    let turned = source.withUnsafeMutableBufferPointer {
      Orientation.right.apply($0.baseAddress!, width: 2, height: 1, channels: 1)!
    }
    XCTAssertEqual([turned[0], turned[1]], [1, 2])
    free(turned)
    // 2x2 [1 2 / 3 4] rotated clockwise is [3 1 / 4 2].
    var square: [UInt8] = [1, 2, 3, 4]
    let rotated = square.withUnsafeMutableBufferPointer {
      Orientation.right.apply($0.baseAddress!, width: 2, height: 2, channels: 1)!
    }
    XCTAssertEqual(Array(UnsafeBufferPointer(start: rotated, count: 4)), [3, 1, 4, 2])
    free(rotated)
  }

  func testPremultiplyRoundTripsOpaqueAndClearsTransparent() {
    var pixels: [UInt8] = [200, 100, 50, 255, 200, 100, 50, 128, 9, 9, 9, 0]
    pixels.withUnsafeMutableBufferPointer { PixelOps.premultiply($0.baseAddress!, count: 3) }
    XCTAssertEqual(Array(pixels[0..<4]), [200, 100, 50, 255])
    XCTAssertEqual(Array(pixels[4..<8]), [100, 50, 25, 128])
    XCTAssertEqual(Array(pixels[8..<12]), [0, 0, 0, 0])
    pixels.withUnsafeMutableBufferPointer { PixelOps.unpremultiply($0.baseAddress!, count: 3) }
    XCTAssertEqual(Array(pixels[4..<8]), [199, 100, 50, 128])
  }
}

final class WorkPoolTests: XCTestCase {
  /// With the only worker held busy, waiting jobs run highest priority first, newest first.
  func testRunsByPriorityThenNewest() throws {
    let pool = try PriorityWorkPool(threadCount: 1, name: "test")
    let gate = Lock()
    var released = false, holding = false
    var order: [String] = []
    let record = Lock()
    _ = pool.submit(priority: 0) {
      gate.withLock {
        holding = true
        gate.broadcast()
        while !released { gate.wait() }
      }
    }
    // The worker must be inside the first job before the others are queued: a loaded
    // machine (TSan, other work) could otherwise let it pick one of them first.
    gate.withLock { while !holding { gate.wait() } }
    for (name, priority) in [("low-old", -1), ("mid-old", 5), ("mid-new", 5), ("high", 9), ("low-new", -1)] {
      _ = pool.submit(priority: Int32(priority)) { record.withLock { order.append(name) } }
    }
    let cancelled = pool.submit(priority: 100) { record.withLock { order.append("cancelled") } }
    XCTAssertTrue(pool.cancel(cancelled))
    gate.withLock { released = true; gate.broadcast() }
    pool.shutdownAfterDraining()
    XCTAssertEqual(order, ["high", "mid-new", "mid-old", "low-new", "low-old"])
  }

  /// A job queued while the caller holds another lock (`wakingAfter:`, the loader's lock
  /// around a decode's submit) has its idle thread woken once that lock is released: no
  /// wake is lost, also when two pools' jobs are queued under it at once (the second is
  /// woken at once) and the jobs start by taking that lock, as a decode does.
  func testJobQueuedUnderAnotherLockIsWokenWhenItIsReleased() throws {
    let first = try PriorityWorkPool(threadCount: 1, name: "test-a")
    let second = try PriorityWorkPool(threadCount: 1, name: "test-b")
    let outer = Lock()
    var ran = 0
    func job() { outer.withLock { ran += 1; outer.broadcast() } }
    for round in 1...300 {
      outer.withLock {
        _ = first.submit(priority: 0, wakingAfter: outer, work: job)
        _ = second.submit(priority: 0, wakingAfter: outer, work: job)
      }
      let deadline = monotonicNanoseconds() + 10_000_000_000
      let done: Bool = outer.withLock {
        while ran < 2 * round && monotonicNanoseconds() < deadline { outer.wait(untilNanoseconds: deadline) }
        return ran == 2 * round
      }
      if !done {
        XCTFail("round \(round): a job queued under the outer lock was not woken for after its release")
        break
      }
    }
    first.shutdownAfterDraining()
    second.shutdownAfterDraining()
  }

  /// Back-pressure (`watchBacklog`, `isBacklogged`): true once `limit` jobs wait, and the
  /// callback comes once they fall to half of it (a pick or a cancel), only after a true
  /// answer.
  func testBacklogIsReportedAndItsEndCalledBack() throws {
    let pool = try PriorityWorkPool(threadCount: 1, name: "test")
    let gate = Lock()
    var released = false, holding = false, clearedCalls = 0
    pool.watchBacklog(limit: 3) { gate.withLock { clearedCalls += 1; gate.broadcast() } }
    _ = pool.submit(priority: 0) {
      gate.withLock {
        holding = true
        gate.broadcast()
        while !released { gate.wait() }
      }
    }
    gate.withLock { while !holding { gate.wait() } }
    XCTAssertFalse(pool.isBacklogged())
    let jobs = (0..<3).map { _ in pool.submit(priority: 0) {} }
    XCTAssertTrue(pool.isBacklogged())
    XCTAssertTrue(pool.cancel(jobs[0]))
    XCTAssertEqual(gate.withLock { clearedCalls }, 0, "2 waiting: above half the limit")
    XCTAssertTrue(pool.cancel(jobs[1]))
    XCTAssertEqual(gate.withLock { clearedCalls }, 1, "the cancel took the backlog to half its limit")
    XCTAssertFalse(pool.isBacklogged())
    _ = pool.submit(priority: 0) {}
    gate.withLock { released = true; gate.broadcast() }
    pool.shutdownAfterDraining()
    XCTAssertEqual(gate.withLock { clearedCalls }, 1, "not reported backlogged again: no second callback")
  }

  /// Among equal priorities the cheaper job runs first, whatever its age; a job that has
  /// waited past the aging limit runs before cheaper and newer ones.
  func testCheaperFirstUnlessAJobHasWaitedLong() throws {
    let pool = try PriorityWorkPool(threadCount: 1, name: "test")
    let gate = Lock()
    var released = false
    var order: [String] = []
    let record = Lock()
    func hold() { gate.withLock { while !released { gate.wait() } } }
    _ = pool.submit(priority: 0) { hold() }
    // "big-old" waits past the aging limit while the worker is held; the rest are fresh.
    _ = pool.submit(priority: 5, cost: 1_000_000) { record.withLock { order.append("big-old") } }
    let agedAt = monotonicNanoseconds() + PriorityWorkPool.agingNanoseconds
    while monotonicNanoseconds() <= agedAt { usleep(10_000) }
    for (name, cost) in [("small-old", 10), ("big-new", 1_000_000), ("medium", 500), ("small-new", 10)] {
      _ = pool.submit(priority: 5, cost: cost) { record.withLock { order.append(name) } }
    }
    _ = pool.submit(priority: 1, cost: 0) { record.withLock { order.append("low-cheap") } }
    gate.withLock { released = true; gate.broadcast() }
    pool.shutdownAfterDraining()
    XCTAssertEqual(order, ["big-old", "small-new", "small-old", "medium", "big-new", "low-cheap"])
  }

  /// Jobs that waited long take at most half the threads: with two, one runs the oldest and
  /// the other still runs the cheapest of the fresh ones.
  func testWaitedJobsTakeHalfTheThreads() throws {
    let pool = try PriorityWorkPool(threadCount: 2, name: "test")
    let gate = Lock()
    var released = false
    var started: [String] = []
    var holding = 0
    func hold() {
      gate.withLock {
        holding += 1
        gate.broadcast()
        while !released { gate.wait() }
      }
    }
    // Two blockers, one per thread; each later job waits until two jobs have started, so
    // the first two picks happen while both run.
    for _ in 0..<2 { _ = pool.submit(priority: 0) { hold() } }
    gate.withLock { while holding < 2 { gate.wait() } }
    func job(_ name: String) -> () -> Void {
      return {
        gate.withLock {
          started.append(name)
          gate.broadcast()
          while started.count < 2 { gate.wait() }
        }
      }
    }
    _ = pool.submit(priority: 5, cost: 1_000, work: job("old-1"))
    _ = pool.submit(priority: 5, cost: 1_000, work: job("old-2"))
    let agedAt = monotonicNanoseconds() + PriorityWorkPool.agingNanoseconds
    while monotonicNanoseconds() <= agedAt { usleep(10_000) }
    _ = pool.submit(priority: 5, cost: 10, work: job("new"))
    gate.withLock { released = true; gate.broadcast() }
    pool.shutdownAfterDraining()
    XCTAssertEqual(Set(started.prefix(2)), ["old-1", "new"])
    XCTAssertEqual(started.count, 3)
  }
}

extension WorkPoolTests {
  /// A pool whose only worker is held until `release` runs, so submitted jobs wait.
  private func heldPool() throws -> (PriorityWorkPool, release: () -> Void) {
    let pool = try PriorityWorkPool(threadCount: 1, name: "test")
    let gate = Lock()
    var released = false
    var holding = false
    _ = pool.submit(priority: Int32.max) {
      gate.withLock {
        holding = true
        gate.broadcast()
        while !released { gate.wait() }
      }
    }
    gate.withLock { while !holding { gate.wait() } }
    return (pool, { gate.withLock { released = true; gate.broadcast() } })
  }

  /// Cancelling n waiting jobs costs a constant per job, whatever n (the loader cancels
  /// under its lock; a linear search per cancel made pxl_cancel_all quadratic). Newest
  /// first, as the worst case for a search from the front; a few re-ranks on the way.
  func testCancellingEveryWaitingJobIsLinear() throws {
    for n in [1_000, 8_000] {
      let (pool, release) = try heldPool()
      var jobs: [PriorityWorkPool.Job] = []
      for index in 0..<n { jobs.append(pool.submit(priority: Int32(index % 5), cost: index % 7) {}) }
      for job in jobs.prefix(n / 10) { pool.setPriority(job, 9) }
      let before = pool.bookkeepingWork
      for job in jobs.reversed() { XCTAssertTrue(pool.cancel(job)) }
      let work = pool.bookkeepingWork - before
      XCTAssertLessThanOrEqual(work, 32 * n, "cancelling \(n) jobs took \(work) steps")
      release()
      pool.shutdownAfterDraining()
    }
  }

  /// Running a backlog of n jobs costs O(n log n) bookkeeping, not a scan of the backlog
  /// per pick.
  func testRunningABacklogIsNotQuadratic() throws {
    let n = 8_000
    let (pool, release) = try heldPool()
    let counted = Lock()
    var ran = 0
    for index in 0..<n { _ = pool.submit(priority: Int32(index % 3), cost: index % 11) { counted.withLock { ran += 1 } } }
    release()
    pool.shutdownAfterDraining()
    XCTAssertEqual(ran, n)
    let bound = 16 * n * (Int.bitWidth - n.leadingZeroBitCount)
    XCTAssertLessThanOrEqual(pool.bookkeepingWork, bound)
  }
}

final class LockTests: XCTestCase {
  /// A wake asked for under the lock (signalOnUnlock, broadcastOnUnlock) is sent once the
  /// lock is released, and reaches every waiter a broadcast is for: the waiters wait with
  /// a 10-second deadline and report whether they saw the change before it.
  func testAWakeAskedForUnderTheLockReachesTheWaitersAfterUnlock() throws {
    for broadcast in [false, true] {
      let lock = Lock()
      var generation = 0, waiting = 0, woken = 0
      let waiters = broadcast ? 2 : 1
      var threads: [WorkerThread] = []
      for index in 0..<waiters {
        threads.append(try WorkerThread(name: "lock-test-\(index)") {
          lock.withLock {
            waiting += 1
            lock.broadcast()
            let deadline = monotonicNanoseconds() + 10_000_000_000
            while generation == 0 && monotonicNanoseconds() < deadline { lock.wait(untilNanoseconds: deadline) }
            if generation == 1 { woken += 1 }
          }
        })
      }
      lock.withLock { while waiting < waiters { lock.wait() } }
      let started = monotonicNanoseconds()
      lock.withLock {
        generation = 1
        if broadcast { lock.broadcastOnUnlock() } else { lock.signalOnUnlock() }
      }
      for thread in threads { thread.join() }
      XCTAssertEqual(lock.withLock { woken }, waiters, broadcast ? "broadcastOnUnlock" : "signalOnUnlock")
      XCTAssertLessThan(monotonicNanoseconds() - started, 5_000_000_000, "the waiters woke only at their deadline")
    }
  }
}

final class CompletionQueueTests: XCTestCase {
  func testDescriptorIsReadableExactlyWhilePending() throws {
    let queue = try CompletionQueue()
    XCTAssertEqual(queue.wait(timeoutMilliseconds: 0), 0)
    let recorder = Recorder()
    let delivery = Delivery(token: 1, owner: nil, handler: recorder.handler)
    XCTAssertTrue(queue.register(delivery))
    queue.complete(delivery, with: .failure(LoadError(.http, "x")))
    var fds = pollfd(fd: queue.fileDescriptor, events: Int16(POLLIN), revents: 0)
    XCTAssertEqual(poll(&fds, 1, 0), 1)
    XCTAssertEqual(queue.dispatch(max: 0), 1)
    fds.revents = 0
    XCTAssertEqual(poll(&fds, 1, 0), 0, "drained: no longer readable")
    queue.complete(delivery, with: .failure(LoadError(.http, "again")))
    XCTAssertEqual(queue.pendingCount, 0, "a delivered request never completes twice")
    XCTAssertFalse(queue.cancel(delivery))
    queue.close()
  }

  /// Previews: a queued one is replaced by a sharper one, never one from fewer scans;
  /// none runs after a cancel or the result; one per interval.
  func testPreviewRules() throws {
    let queue = try CompletionQueue()
    let recorder = Recorder()
    var shown: [Int] = []  // the width of each preview run, standing for its scans
    let delivery = Delivery(token: 1, owner: nil, previewHandler: { _, image in shown.append(image.width) },
                            previewIntervalMilliseconds: 0, handler: recorder.handler)
    XCTAssertTrue(queue.register(delivery))
    queue.preview(delivery, image: solidImage(width: 1, height: 1), scans: 1)
    queue.preview(delivery, image: solidImage(width: 3, height: 1), scans: 3)  // replaces the queued one
    queue.preview(delivery, image: solidImage(width: 2, height: 1), scans: 2)  // fewer scans: dropped
    XCTAssertEqual(queue.dispatch(max: 0), 1)
    XCTAssertEqual(shown, [3])
    queue.preview(delivery, image: solidImage(width: 4, height: 1), scans: 4)
    XCTAssertTrue(queue.cancel(delivery))  // drops the queued preview
    queue.preview(delivery, image: solidImage(width: 5, height: 1), scans: 5)  // after the cancel: dropped
    _ = queue.dispatch(max: 0)
    XCTAssertEqual(shown, [3], "no preview after a cancel")
    XCTAssertEqual(recorder.status(1), .cancelled)

    // With an interval, a preview sooner than it after the last that ran is dropped.
    let spaced = Delivery(token: 2, owner: nil, previewHandler: { _, image in shown.append(image.width) },
                          previewIntervalMilliseconds: 60_000, handler: recorder.handler)
    XCTAssertTrue(queue.register(spaced))
    queue.preview(spaced, image: solidImage(width: 6, height: 1), scans: 1)
    _ = queue.dispatch(max: 0)
    queue.preview(spaced, image: solidImage(width: 7, height: 1), scans: 2)
    queue.complete(spaced, with: .failure(LoadError(.http, "x")))
    queue.preview(spaced, image: solidImage(width: 8, height: 1), scans: 3)  // after the result: dropped
    _ = queue.dispatch(max: 0)
    XCTAssertEqual(shown, [3, 6])
    queue.close()
  }

  func testDispatchConsumesAWakeup() throws {
    let queue = try CompletionQueue()
    var fds = pollfd(fd: queue.fileDescriptor, events: Int16(POLLIN), revents: 0)
    queue.wakeup()
    XCTAssertEqual(poll(&fds, 1, 0), 1, "an unconsumed wakeup: readable")
    XCTAssertEqual(queue.dispatch(max: 0), 0)
    fds.revents = 0
    XCTAssertEqual(poll(&fds, 1, 0), 0, "consumed by a dispatch that ran nothing: a level-triggered loop must not spin")
    queue.wakeup()
    XCTAssertEqual(queue.wait(timeoutMilliseconds: 10_000), 0, "returns at once for an earlier wakeup")
    XCTAssertEqual(poll(&fds, 1, 0), 0, "and consumes it")
    queue.close()
  }

  func testWakeupEndsAWaitEarly() throws {
    let queue = try CompletionQueue()
    let start = monotonicNanoseconds()
    let waker = try WorkerThread(name: "waker") { queue.wakeup() }
    XCTAssertEqual(queue.wait(timeoutMilliseconds: 10_000), 0)
    XCTAssertLessThan(monotonicNanoseconds() - start, 5_000_000_000)
    waker.join()
    queue.close()
  }
}
