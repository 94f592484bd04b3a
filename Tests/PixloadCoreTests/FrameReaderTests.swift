import CCodecs
import XCTest
@testable import PixloadCore

/// The frame readers (pxl_codecs.h, "Frame readers") against decode_frames on every file
/// of the public suites (Tests/fixtures/gif-suite, webp-suite, avif-suite): the same
/// frames, durations and pixels in the same order, and the same failure; the first
/// duration read without decoding is frame 0's. Animation players play what the readers
/// give, PXL_FLAG_ANIMATE what decode_frames gives: these must never differ.
final class FrameReaderTests: XCTestCase {
  struct Frames: Equatable {
    var pixels: [[UInt8]] = []
    var durations: [Int32] = []
    var failed = false
  }

  static func suite(_ name: String) -> [String] {
    let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .appendingPathComponent("fixtures/\(name)").path
    let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
    return names.filter { $0.hasSuffix(".gif") || $0.hasSuffix(".webp") || $0.hasSuffix(".avif") }.sorted()
      .map { "\(dir)/\($0)" }
  }

  private final class Sink {
    var frames = Frames()
    var height = 0
  }

  /// decode_frames' frames (canvas copies).
  static func allAtOnce(_ data: [UInt8], _ codec: NativeCodec, height: Int) -> Frames {
    let sink = Sink()
    sink.height = height
    var output = pxl_codec_output()
    let status = data.withUnsafeBufferPointer { bytes in
      codec.decodeFrames!(bytes.baseAddress, bytes.count, 1 << 26, { user, _, rgba, stride, duration in
        let sink = Unmanaged<Sink>.fromOpaque(user!).takeUnretainedValue()
        sink.frames.pixels.append(Array(UnsafeBufferPointer(start: rgba, count: Int(stride) * sink.height)))
        sink.frames.durations.append(duration)
        return 0
      }, Unmanaged.passUnretained(sink).toOpaque(), &output)
    }
    sink.frames.failed = status != PXL_CODEC_OK
    return sink.frames
  }

  /// The reader's frames.
  static func oneAtATime(_ data: [UInt8], _ reading: FrameReading, height: Int) -> Frames {
    var frames = Frames()
    data.withUnsafeBufferPointer { bytes in
      var status = PXL_CODEC_OK
      var message = [CChar](repeating: 0, count: 256)
      guard let reader = reading.open(bytes.baseAddress, bytes.count, 1 << 26, &status, &message, message.count) else {
        frames.failed = true
        return
      }
      defer { reading.close(reader) }
      var frame = pxl_codec_frame()
      while true {
        if reading.next(reader, &frame) != PXL_CODEC_OK {
          frames.failed = true
          return
        }
        guard let rgba = frame.rgba else { return }
        frames.pixels.append(Array(UnsafeBufferPointer(start: rgba, count: Int(frame.stride) * height)))
        frames.durations.append(frame.duration_ms)
      }
    }
    return frames
  }

  func testReadersGiveDecodeFramesFrames() throws {
    var compared = 0, animated = 0
    for path in Self.suite("gif-suite") + Self.suite("webp-suite") + Self.suite("avif-suite") {
      guard let contents = FileManager.default.contents(atPath: path) else { continue }
      let data = [UInt8](contents)
      guard let native = CodecTable.builtIn(for: data)?.native, let reading = native.frames else { continue }
      var info = pxl_codec_info()
      var message = [CChar](repeating: 0, count: 256)
      let infoStatus = data.withUnsafeBufferPointer { native.readInfo($0.baseAddress, $0.count, &info, &message, 256) }
      guard infoStatus == PXL_CODEC_OK else { continue }
      let height = Int(info.height)
      let expected = Self.allAtOnce(data, native, height: height)
      let got = Self.oneAtATime(data, reading, height: height)
      let name = URL(fileURLWithPath: path).lastPathComponent
      XCTAssertEqual(got.durations, expected.durations, name)
      XCTAssertEqual(got.failed, expected.failed, name)
      XCTAssertEqual(got.pixels.count, expected.pixels.count, name)
      XCTAssertTrue(got.pixels == expected.pixels, "\(name): pixels differ")
      if let first = expected.durations.first {
        let read = data.withUnsafeBufferPointer { reading.firstDuration($0.baseAddress, $0.count) }
        XCTAssertEqual(read, first, "\(name): first duration")
      }
      compared += 1
      if expected.pixels.count > 1 { animated += 1 }
    }
    XCTAssertGreaterThan(compared, 100)
    XCTAssertGreaterThanOrEqual(animated, 8)  // the suites' animations (GIF disposal cases, WebP, AVIF sequences)
  }
}
