#if canImport(Glibc)
import Glibc
#endif

/// A player of one animated request (pixload.h, "Animation players"): frame 0 comes
/// through the loader as the still result of the request does (same pipeline, caches,
/// merging; the variant also keeps the encoded bytes, `ImageVariant.keepsSource`, so every
/// player of the source shares one download and one cache entry); later frames are decoded
/// on the loader's decode pool, ahead of the playhead, into a ring of at most
/// `ringFrames` frames (the one shown counts) and `ringBytes` bytes. Memory: the ring and
/// one `FrameSource` (the decoder's state), whatever the frame count.
///
/// Time: the playhead runs on the host's clock (milliseconds, given to `frame(at:)`); it
/// starts at the first call after frame 0 arrived, stops at `pause` (frozen at the last
/// call's time) and continues at `resume`. A frame is due at the sum of the durations
/// before it; a duration of 10 ms or less counts as 100 ms, as browsers play them.
///
/// Events go to `handler` through the queue (its thread); none runs once `close` returned.
public final class AnimationPlayer: @unchecked Sendable {
  public enum EventKind: Int32 { case loaded = 1, frameReady = 2, ended = 3, failed = 4 }

  public struct Event {
    public var kind: EventKind
    public var error: LoadError?
    public var image: Image?
    public var index = 0
    public var dueMs: Int64 = 0
    public var frameCount = 0
    public var loopCount = 0
  }

  public struct Frame {
    public var index = 0
    public var durationMs = 0
    public var dueMs: Int64 = 0
    public var nextDueMs: Int64 = -1
    public var skipped = 0
    public var ended = false
  }

  public struct Statistics {
    public var framesDecoded: UInt64 = 0
    public var framesSkipped: UInt64 = 0
    public var framesShown: UInt64 = 0
    public var ringBytes: UInt64 = 0
    public var peakRingBytes: UInt64 = 0
    public var loopsPlayed = 0
  }

  /// One decoded frame: where it sits on the playhead (ms from the start, over loops).
  private struct Entry {
    let index: Int
    let loop: Int
    let start: Int64
    var durationMs: Int
    let image: Image
  }

  public static let defaultRingFrames = 3
  /// How long a player stays paused before it releases the frames decoded ahead and the
  /// decoder's state (a table's row out of view for that long).
  static let releaseDelayNanoseconds: UInt64 = 1_000_000_000

  /// Weak: a player does not keep a freed loader (and its threads' jobs) alive; without
  /// it, nothing more is decoded.
  private weak var loader: ImageLoader?
  private let queue: CompletionQueue
  private let variant: ImageVariant
  private let handler: (AnimationPlayer, Event) -> Void
  private let ringFrames: Int
  private let ringByteBudget: Int
  private let lock = Lock()

  // Guarded by `lock`.
  private var token: UInt64 = 0
  private var closed = false
  private var callbacksRunning = 0
  private var callbackThread = pthread_t()
  private var first: Image?
  private var bytes: [UInt8]?
  private var frameCount = 0
  private var loopCount = 0
  /// The decoder's state: nil while the decode job has it, or before the first job.
  private var source: FrameSource?
  private var jobQueued = false
  private var ring: [Entry] = []
  private var current: Entry?
  private var started = false
  private var paused = false
  private var origin: Int64 = 0
  /// The playhead's position at the last `frame(at:)` (ms from the start).
  private var lastT: Int64 = 0
  /// Where the decoder is: the next frame's loop and start.
  private var decodeLoop = 0
  private var decodeStart: Int64 = 0
  /// The decoder reached the end of the last loop, or failed.
  private var decodeDone = false
  private var failed = false
  /// (index, loop) of the last frame played, once known.
  private var finalFrame: (index: Int, loop: Int)?
  private var wantsReady = false
  /// Frame 0's duration, once known (the container's first records, or the decoder
  /// passed it); -1 before.
  private var firstDurationMs = -1
  /// The index of the last frame the decoder went through in its current loop.
  private var lastIndexInLoop = -1
  /// The frame (index, loop) the last FRAME_READY announced: one event per frame.
  private var announced: (index: Int, loop: Int)?
  private var endedPosted = false
  private var pendingSkips = 0
  private var stats = Statistics()
  /// The playhead continues at the next frame(at:) from where it was (a table resumed it).
  private var rebase = false
  /// A table's count of its players' decoded frames (ImageTable.bind).
  private var counter: FrameCounter?
  /// When the current pause began (monotonic ns).
  private var pausedAt: UInt64 = 0
  /// The pause lasted long enough while a decode job held the decoder: the job releases
  /// the ring when it stops.
  private var releasePending = false
  /// After a release: the frame shown then (index, loop, start); the decoder, made again,
  /// walks up to it without rendering, and decodes ahead from there.
  private var seekTo: (index: Int, loop: Int, start: Int64)?

  /// Starts loading `request` (its `animates` ignored); `handler` gets `.loaded` through
  /// `queue` as a still's result would arrive, then the playback events.
  public init(loader: ImageLoader, request: ImageRequest, queue: CompletionQueue, ringFrames: Int, ringBytes: Int,
              handler: @escaping (AnimationPlayer, Event) -> Void) throws(LoadError) {
    var request = request
    request.animates = false
    request.keepsSource = true
    self.loader = loader
    self.queue = queue
    self.variant = loader.variant(of: request)
    self.handler = handler
    self.ringFrames = max(2, ringFrames > 0 ? ringFrames : Self.defaultRingFrames)
    self.ringByteBudget = ringBytes
    let token = try loader.load(request, queue: queue) { [self] _, outcome in loaded(outcome) }
    lock.withLock { self.token = token }
  }

  private static func effective(_ duration: Int) -> Int64 { duration <= 10 ? 100 : Int64(duration) }

  // MARK: - Events

  /// Runs the handler unless closed; `close` waits for a handler running on another thread.
  private func deliver(_ event: Event) {
    let go: Bool = lock.withLock {
      guard !closed else { return false }
      callbacksRunning += 1
      callbackThread = pthread_self()
      return true
    }
    guard go else { return }
    handler(self, event)
    lock.withLock {
      callbacksRunning -= 1
      lock.broadcast()
    }
  }

  private func post(_ event: Event) { queue.post { [self] in deliver(event) } }

  /// The load's result, on the queue's thread.
  private func loaded(_ outcome: Outcome) {
    switch outcome {
    case .failure(let error):
      lock.withLock { failed = true; decodeDone = true }
      deliver(Event(kind: .loaded, error: error))
    case .success(let image, _, _):
      let event: Event = lock.withLock {
        first = image
        bytes = image.encodedSource
        frameCount = max(1, image.sourceFrameCount)
        loopCount = image.sourceLoopCount
        if frameCount == 1 || bytes == nil {
          decodeDone = true
          finalFrame = (0, 0)
          firstDurationMs = 0
        } else if let loader, loader.codecs.builtInWorkers == nil, let bytes,
                  let reading = CodecTable.builtIn(for: bytes)?.native?.frames {
          // Read from the container's first records, no pixels: the first frame_at can
          // tell when frame 1 is due. (Not under PXL_ISOLATION_ALL: the host parses no
          // more of the bytes than their sniff.)
          firstDurationMs = Int(bytes.withUnsafeBufferPointer { reading.firstDuration($0.baseAddress, $0.count) })
        }
        scheduleLocked()
        return Event(kind: .loaded, image: image, frameCount: frameCount, loopCount: loopCount)
      }
      deliver(event)
    }
  }

  // MARK: - Decoding ahead

  /// The frame shown (frame 0 before the playhead starts: the first frame_at shows it)
  /// and those decoded ahead.
  private var heldBytesLocked: Int {
    (current?.image.byteCount ?? first?.byteCount ?? 0) + ring.reduce(0) { $0 + $1.image.byteCount }
  }

  private var hasRoomLocked: Bool {
    guard ring.count < ringFrames - 1 else { return false }
    guard ringByteBudget > 0, !ring.isEmpty, let first else { return true }
    return heldBytesLocked + first.byteCount <= ringByteBudget
  }

  /// Lock held: queues the decode job when there is something to decode and room for it.
  private func scheduleLocked() {
    guard !closed, !paused, !decodeDone, !jobQueued, first != nil, hasRoomLocked else { return }
    jobQueued = true
    guard let loader else { return }
    _ = loader.decodePool.submit(priority: 0, cost: 0) { [self] in pump() }
  }

  /// The decode job: frames until the ring is full, the player paused or closed.
  private func pump() {
    while true {
      let taken: (FrameSource?, [UInt8], Int64, Int, Int64)? = lock.withLock {
        guard !closed, !paused, !decodeDone, hasRoomLocked, let bytes else {
          jobQueued = false
          if releasePending {
            releasePending = false
            releaseLocked()
          }
          return nil
        }
        let reader = source
        source = nil
        return (reader, bytes, started ? lastT : Int64.min, decodeLoop, decodeStart)
      }
      guard let (held, bytes, skipBefore, loop, start) = taken else { return }
      var reader = held
      if reader == nil {
        guard let loader else {
          lock.withLock { jobQueued = false }
          return
        }
        do throws(LoadError) {
          reader = try FrameSource(bytes: bytes, variant: variant, decoder: loader.decoder, codecs: loader.codecs,
                                   maxPixels: loader.configuration.maxPixels)
        } catch {
          fail(error)
          return
        }
      }
      let step = reader!.advance()
      switch step {
      case .failure(let error):
        fail(error)
        return
      case .success(.end):
        let (more, ended): (Bool, Event?) = lock.withLock {
          // What the file holds, which its header may have miscounted.
          frameCount = max(1, lastIndexInLoop + 1)
          lastIndexInLoop = -1
          seekTo = nil  // the file ended before the frame sought: play on from the next loop
          // One frame (a codec that gave only the first, an animation over
          // Animation.maxBytes decoded at once): nothing to play beyond it.
          if frameCount > 1 && (loopCount == 0 || loop + 1 < loopCount) {
            decodeLoop += 1
            source = reader!.rewind() ? reader : nil  // else made again on the next round
            return (true, nil)
          }
          decodeDone = true
          jobQueued = false
          finalFrame = (frameCount - 1, loop)
          // The playhead is on it already: frame_at could not tell it was the last one.
          guard let shown = current, shown.index == frameCount - 1, shown.loop == loop, !endedPosted, !closed else {
            return (false, nil)
          }
          endedPosted = true
          stats.loopsPlayed = max(stats.loopsPlayed, loop + 1)
          return (false, Event(kind: .ended, frameCount: frameCount, loopCount: loopCount))
        }
        if let ended { post(ended) }
        if !more { return }
      case .success(.frame(let index, let duration)):
        let seeking: Bool = lock.withLock {
          lastIndexInLoop = index
          if index >= frameCount { frameCount = index + 1 }
          guard let seek = seekTo else { return false }
          // Walking back to the frame shown when the ring was released: decoded (the
          // next frames depend on it), not rendered, not counted as skipped.
          if !closed {
            source = reader
            stats.framesDecoded += 1
            counter?.add(1)
          }
          if index >= seek.index {
            decodeStart = seek.start + Self.effective(duration)
            seekTo = nil
          }
          return true
        }
        if seeking { continue }
        let end = start + Self.effective(duration)
        var image: Image? = nil
        if index == 0 {
          image = lock.withLock { first }
        } else if !(end <= skipBefore && index < frameCount - 1) {
          switch reader!.render() {
          case .failure(let error):
            fail(error)
            return
          case .success(let rendered): image = rendered
          }
        }
        let events: [Event] = lock.withLock {
          if closed { return [] }
          source = reader
          decodeStart = end
          stats.framesDecoded += 1
          counter?.add(1)
          if index == 0 && loop == 0 {  // frame 0's duration, now known
            firstDurationMs = duration
            if current?.index == 0 && current?.loop == 0 { current?.durationMs = duration }
            return []
          }
          guard let image else {
            stats.framesSkipped += 1
            pendingSkips += 1
            return []
          }
          ring.append(Entry(index: index, loop: loop, start: start, durationMs: duration, image: image))
          // The last frame of the last loop, as the header counts frames (the end of the
          // data confirms or corrects it).
          if loopCount > 0 && loop == loopCount - 1 {
            finalFrame = index == frameCount - 1 ? (index, loop) : nil
          }
          noteBytesLocked()
          if wantsReady && ring.count == 1 {
            wantsReady = false
            announced = (index, loop)
            return [Event(kind: .frameReady, index: index, dueMs: origin + start, frameCount: frameCount,
                          loopCount: loopCount)]
          }
          return []
        }
        events.forEach(post)
      }
    }
  }

  private func fail(_ error: LoadError) {
    let event: Event? = lock.withLock {
      jobQueued = false
      guard !closed else { return nil }
      failed = true
      decodeDone = true
      return Event(kind: .failed, error: error, frameCount: frameCount, loopCount: loopCount)
    }
    if let event { post(event) }
  }

  private func noteBytesLocked() {
    let held = UInt64(heldBytesLocked)
    stats.ringBytes = held
    stats.peakRingBytes = max(stats.peakRingBytes, held)
  }

  // MARK: - The host's side

  /// The frame to show at `now` (see the class comment); nil before frame 0 arrived.
  public func frame(at now: Int64) -> (Image, Frame)? {
    var events: [Event] = []
    let answer: (Image, Frame)? = lock.withLock {
      guard let first, !closed else { return nil }
      var skipped = 0
      if !started {
        started = true
        origin = now
        lastT = 0
        current = Entry(index: 0, loop: 0, start: 0, durationMs: firstDurationMs, image: first)
        stats.framesShown += 1
      } else {
        if rebase {
          origin = now - lastT
          rebase = false
        }
        let t = paused ? lastT : now - origin
        lastT = max(lastT, t)
        var advanced = 0
        while let next = ring.first, next.start <= lastT {
          current = ring.removeFirst()
          advanced += 1
        }
        if advanced > 0 {
          stats.framesShown += 1
          stats.framesSkipped += UInt64(advanced - 1)
          skipped = advanced - 1 + pendingSkips
          pendingSkips = 0
          stats.loopsPlayed = max(stats.loopsPlayed, current!.loop)
        }
      }
      noteBytesLocked()
      let shown = current!
      var frame = Frame(index: shown.index, durationMs: shown.durationMs, dueMs: origin + shown.start, skipped: skipped)
      let isFinal = finalFrame.map { $0.index == shown.index && $0.loop == shown.loop } ?? false
      if isFinal && !failed {
        frame.ended = true
        stats.loopsPlayed = max(stats.loopsPlayed, shown.loop + 1)
        if !endedPosted {
          endedPosted = true
          events.append(Event(kind: .ended, frameCount: frameCount, loopCount: loopCount))
        }
      } else if let next = ring.first {
        frame.nextDueMs = origin + next.start
        if announced.map({ $0.index != next.index || $0.loop != next.loop }) ?? true {
          announced = (next.index, next.loop)
          events.append(Event(kind: .frameReady, index: next.index, dueMs: frame.nextDueMs, frameCount: frameCount,
                              loopCount: loopCount))
        }
        wantsReady = false
      } else if decodeDone {
        frame.nextDueMs = -1
      } else {
        frame.nextDueMs = origin + shown.start + Self.effective(shown.durationMs)
        wantsReady = true
      }
      scheduleLocked()
      return (shown.image, frame)
    }
    events.forEach(post)
    return answer
  }

  /// Stops decoding; the playhead stays where the last `frame(at:)` put it. Paused for
  /// `releaseDelayNanoseconds`, the player releases its ring (`releaseIfPausedLong`).
  public func pause() {
    let deadline: UInt64? = lock.withLock {
      guard !paused, !closed else { return nil }
      paused = true
      pausedAt = monotonicNanoseconds()
      return pausedAt + Self.releaseDelayNanoseconds
    }
    if let deadline { RingReleaser.shared.remind(self, at: deadline) }
  }

  /// Called by `RingReleaser`: when paused for `releaseDelayNanoseconds` or longer, drops
  /// the frames decoded ahead and the decoder's state, keeping the frame shown.
  func releaseIfPausedLong() {
    lock.withLock {
      guard paused, monotonicNanoseconds() - pausedAt >= Self.releaseDelayNanoseconds else { return }
      releaseLocked()
    }
  }

  /// Lock held, paused: what `releaseIfPausedLong` says. The decoder is made again at
  /// resume and walks from frame 0 of the shown frame's loop up to it (GIF and WebP frames
  /// build on the ones before), rendering nothing until the frame after it.
  private func releaseLocked() {
    guard paused, !closed, !failed, let first else { return }
    if jobQueued {  // the job has the decoder: it releases when it sees the pause
      releasePending = true
      return
    }
    if ring.isEmpty && (decodeDone || source == nil) { return }  // nothing held ahead
    let shown = current ?? Entry(index: 0, loop: 0, start: 0, durationMs: firstDurationMs, image: first)
    ring.removeAll()
    // The host may have been told the next frame is ready: that frame is gone now, so
    // it is announced again once decoded again (else a frame that comes back before the
    // next frame_at would never be announced, and a host waiting for FRAME_READY waits on).
    announced = nil
    source = nil
    decodeDone = false
    decodeLoop = shown.loop
    lastIndexInLoop = -1
    seekTo = (shown.index, shown.loop, shown.start)
    noteBytesLocked()
  }

  /// The playhead continues from where it was, at `now`.
  public func resume(at now: Int64) {
    lock.withLock {
      guard paused else { return }
      paused = false
      releasePending = false
      if started { origin = now - lastT }
      scheduleLocked()
    }
  }

  /// Resumes with no clock at hand (a table whose row came back into view): the next
  /// frame(at:) continues the playhead from where it stopped.
  public func resumeAtNextFrame() {
    lock.withLock {
      guard paused else { return }
      paused = false
      releasePending = false
      rebase = started
      scheduleLocked()
    }
  }

  /// Counts this player's decoded frames in `counter` too (nil: no more).
  func tie(to counter: FrameCounter?) {
    lock.withLock { self.counter = counter }
  }

  public var statistics: Statistics {
    lock.withLock {
      var copy = stats
      copy.ringBytes = UInt64(heldBytesLocked)
      return copy
    }
  }

  /// Cancels the load and the decoding; no handler runs once this returns (one running
  /// on another thread is waited for; called from a handler, that handler is the last).
  public func close() {
    let token: UInt64 = lock.withLock {
      closed = true
      // The frames, the bytes and the decoder's state go now (a decode job under way
      // drops what it holds when it sees `closed`).
      ring.removeAll()
      current = nil
      first = nil
      bytes = nil
      source = nil
      while callbacksRunning > 0 && pthread_equal(callbackThread, pthread_self()) == 0 { lock.wait() }
      return self.token
    }
    loader?.cancel(token)
  }
}
