import CProcessing
#if canImport(Glibc)
import Glibc
#endif

/// One step of a request's processor chain (pixload.h, "Processors"): applied after the
/// resize and orientation, in order, on premultiplied RGBA8, before the conversion into the
/// requested format. Every parameter is part of its identity, and so of the variant's.
public enum ImageProcessor: Hashable, Sendable {
  /// The centred square of side min(w, h), pixels outside its disc transparent.
  case circle(border: Border?)
  /// Corners rounded by `radii` (top-left, top-right, bottom-right, bottom-left), in
  /// output pixels; each is clamped to half the shorter side when applied.
  case roundedCorners(radii: Radii, border: Border?)
  /// A Gaussian blur of standard deviation `sigma` output pixels; 0 is the identity.
  case blur(sigma: Double)
  /// The rectangle, in the pixels of the image as it is at this point of the chain.
  case crop(x: Int, y: Int, width: Int, height: Int)
  /// Clockwise by 90, 180 or 270 degrees (1, 2, 3 quarter turns).
  case rotate(quarterTurns: Int)
  /// Top-bottom when `vertical`, else left-right.
  case flip(vertical: Bool)
  /// Luma with the GRAY8 format's weights; alpha kept.
  case grayscale
  /// The colour composited source-atop: it covers the pixels and keeps their alpha.
  case tint(Color)
  /// A processor registered with the loader, named by id; merged and cached by id and
  /// version (a new version is a new cache entry).
  case custom(CustomProcessor)

  /// The longest chain a request may carry (pixload.h: PXL_MAX_PROCESSORS).
  public static let maxChainLength = 16
  /// The largest blur sigma (pixload.h: PXL_MAX_BLUR_SIGMA).
  public static let maxSigma = 250.0

  /// Straight (not premultiplied) 8-bit RGBA.
  public struct Color: Hashable, Sendable {
    public var r: UInt8, g: UInt8, b: UInt8, a: UInt8
    public init(r: UInt8, g: UInt8, b: UInt8, a: UInt8) {
      self.r = r
      self.g = g
      self.b = b
      self.a = a
    }
    /// From 0xRRGGBBAA.
    public init(rgba: UInt32) {
      self.init(r: UInt8(rgba >> 24), g: UInt8((rgba >> 16) & 0xFF), b: UInt8((rgba >> 8) & 0xFF),
                a: UInt8(rgba & 0xFF))
    }
    var hex: String {
      [r, g, b, a].map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
  }

  public struct Border: Hashable, Sendable {
    public var width: Double
    public var color: Color
    public init(width: Double, color: Color) {
      self.width = width
      self.color = color
    }
  }

  public struct Radii: Hashable, Sendable {
    public var topLeft: Double, topRight: Double, bottomRight: Double, bottomLeft: Double
    public init(_ all: Double) { self.init(topLeft: all, topRight: all, bottomRight: all, bottomLeft: all) }
    public init(topLeft: Double, topRight: Double, bottomRight: Double, bottomLeft: Double) {
      self.topLeft = topLeft
      self.topRight = topRight
      self.bottomRight = bottomRight
      self.bottomLeft = bottomLeft
    }
    var all: [Double] { [topLeft, topRight, bottomRight, bottomLeft] }
  }

  /// The kind's name, as the CLI spells it and as error messages name it.
  public var name: String {
    switch self {
    case .circle: return "circle"
    case .roundedCorners: return "round"
    case .blur: return "blur"
    case .crop: return "crop"
    case .rotate: return "rotate"
    case .flip: return "flip"
    case .grayscale: return "gray"
    case .tint: return "tint"
    case .custom(let processor): return "custom processor '\(processor.id)'"
    }
  }

  /// What is wrong with the parameters whatever the image, nil when nothing.
  public var problem: String? {
    // Any length from 0 up, infinity included: applying clamps it to the image (pixload.h,
    // "Shapes"), so a huge one is a circle-like corner, not a mistake. NaN fails `>= 0`.
    func length(_ value: Double, _ what: String) -> String? {
      value >= 0 ? nil : "\(what) \(value) is not a length (0 or more)"
    }
    switch self {
    case .circle(let border): return border.flatMap { length($0.width, "border width") }
    case .roundedCorners(let radii, let border):
      return radii.all.lazy.compactMap { length($0, "radius") }.first ?? border.flatMap { length($0.width, "border width") }
    case .blur(let sigma):
      return sigma.isFinite && sigma >= 0 && sigma <= Self.maxSigma ? nil : "sigma \(sigma) is not in 0...\(Self.maxSigma)"
    case .crop(let x, let y, let width, let height):
      return x >= 0 && y >= 0 && width > 0 && height > 0 && width <= Int(Int32.max) && height <= Int(Int32.max)
        ? nil : "crop \(x),\(y) \(width)x\(height): the origin must not be negative and the size must be positive"
    case .rotate(let turns): return (1...3).contains(turns) ? nil : "rotation must be 90, 180 or 270 degrees"
    case .flip, .grayscale, .tint, .custom: return nil
    }
  }

  /// The canonical text of this step in a variant's descriptor: kind and every parameter,
  /// numbers in Swift's shortest round-tripping form, a custom id percent-escaped, so that
  /// no user text can forge another step or break the key's lines.
  public var canonical: String {
    func n(_ value: Double) -> String { (value + 0).description }  // -0 and 0 are one value
    func border(_ b: Border?) -> String { b.map { ",border=\(n($0.width)):#\($0.color.hex)" } ?? "" }
    switch self {
    case .circle(let b): return "circle(\(border(b).dropFirst()))"
    case .roundedCorners(let r, let b): return "round(\(r.all.map(n).joined(separator: ":"))\(border(b)))"
    case .blur(let sigma): return "blur(\(n(sigma)))"
    case .crop(let x, let y, let width, let height): return "crop(\(x):\(y):\(width):\(height))"
    case .rotate(let turns): return "rotate(\(turns * 90))"
    case .flip(let vertical): return vertical ? "flip(v)" : "flip(h)"
    case .grayscale: return "gray()"
    case .tint(let color): return "tint(#\(color.hex))"
    case .custom(let processor): return "custom(\(Self.escape(processor.id)):\(processor.version))"
    }
  }

  /// The canonical text of a chain ("" for none).
  public static func canonical(_ chain: [ImageProcessor]) -> String {
    chain.isEmpty ? "" : "[" + chain.map(\.canonical).joined(separator: ";") + "]"
  }

  /// Percent-escapes every byte outside [A-Za-z0-9._-].
  static func escape(_ text: String) -> String {
    var out = ""
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
           UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
        out.unicodeScalars.append(UnicodeScalar(byte))
      default:
        out += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
      }
    }
    return out
  }

  /// Whether a chain can be run as it is: its length and each step's parameters; the
  /// error names the step.
  public static func validate(_ chain: [ImageProcessor]) -> LoadError? {
    if chain.count > maxChainLength {
      return LoadError(.invalidArgument, "a processor chain of \(chain.count) steps exceeds the limit of \(maxChainLength)")
    }
    for (index, step) in chain.enumerated() {
      if let problem = step.problem {
        return LoadError(.invalidArgument, "processor \(index) (\(step.name)): \(problem)")
      }
    }
    return nil
  }
}

/// A processor chain as one value: its steps and its canonical form
/// (`ImageProcessor.canonical`: kind, parameters, version), computed once. Equal and hashed
/// by the canonical form alone, so the memory key (`ImageVariant`) and the disk key
/// (`VariantKey`'s descriptor) take the chain's identity from one place.
public struct ProcessorChain: Hashable, Sendable {
  public let steps: [ImageProcessor]
  /// "" for the empty chain.
  public let canonical: String

  public init(_ steps: [ImageProcessor] = []) {
    self.steps = steps
    canonical = ImageProcessor.canonical(steps)
  }

  public var isEmpty: Bool { steps.isEmpty }

  public static func == (a: ProcessorChain, b: ProcessorChain) -> Bool { a.canonical == b.canonical }
  public func hash(into hasher: inout Hasher) { hasher.combine(canonical) }
}

/// Runs a registered processor's calls and retires it: the state behind `CustomProcessor`
/// (its lock, its calls under way), which Processing keeps.
protocol ProcessorCalls: AnyObject, Sendable {
  /// nil: the processor is retired (the caller reports CANCELLED); else the call's result.
  func run(_ frame: ProcessingFrame) -> LoadError??
  func retire()
  /// Never registered: no call will start, and `onRetired` is dropped without running.
  func abandon()
}

/// A processor the host registered (pxl_loader_add_processor). Equal, and merged and
/// cached, by id and version. Requests resolve it when accepted; once it is retired
/// (unregistered, replaced, or its loader closed) a request that has not run it yet fails
/// with CANCELLED, one running it sees its cancel flag raised, and `onRetired` (the C
/// API's destroy callback) runs once no call is running: never during or after one.
public final class CustomProcessor: Hashable, @unchecked Sendable {
  public let id: String
  public let version: UInt32
  /// What runs it and retires it (Processing's `RetiringProcessorCalls`).
  private let calls: ProcessorCalls

  init(id: String, version: UInt32, calls: ProcessorCalls) {
    self.id = id
    self.version = version
    self.calls = calls
  }

  /// Runs the processor on one frame (a decode thread); its error, or CANCELLED once retired.
  func run(_ frame: ProcessingFrame) -> LoadError? {
    guard let result = calls.run(frame) else { return LoadError(.cancelled, "custom processor '\(id)' was unregistered") }
    return result
  }

  /// No new call starts; calls under way see their flags raised. The destroy callback runs
  /// now, or when the last call under way returns.
  public func retire() { calls.retire() }

  /// It was never registered (its loader had closed): no call starts and the destroy
  /// callback never runs, the registration's caller keeps what it would free.
  public func abandon() { calls.abandon() }

  public static func == (a: CustomProcessor, b: CustomProcessor) -> Bool { a.id == b.id && a.version == b.version }
  public func hash(into hasher: inout Hasher) {
    hasher.combine(id)
    hasher.combine(version)
  }
}

/// Raised when every requester of a processing step left, or the loader closed: a custom
/// processor polls it (through `pointer`, a C int32 that stays valid for the call).
public final class CancelFlag: @unchecked Sendable {
  public let pointer: UnsafeMutablePointer<Int32>

  public init() {
    pointer = .allocate(capacity: 1)
    pointer.initialize(to: 0)
  }

  deinit { pointer.deallocate() }

  /// Sets the flag (an atomic store, as C code polling it reads it).
  public func raise() { pxl_process_flag_set(pointer) }
  public var isRaised: Bool { pxl_process_flag_get(pointer) != 0 }
}

/// One frame handed to a custom processor: premultiplied RGBA8, tightly packed, its own
/// copy (changed in place), or a new buffer of another size (`makeOutput`).
public final class ProcessingFrame {
  public private(set) var pixels: UnsafeMutablePointer<UInt8>
  public private(set) var width: Int
  public private(set) var height: Int
  public var stride: Int { width * 4 }
  public let frameIndex: Int
  public let frameCount: Int
  public let cancel: CancelFlag
  let maxPixels: UInt64
  /// The input, kept readable while the processor writes a new output.
  private var input: UnsafeMutablePointer<UInt8>?

  init(pixels: UnsafeMutablePointer<UInt8>, width: Int, height: Int, frameIndex: Int, frameCount: Int,
       cancel: CancelFlag, maxPixels: UInt64) {
    self.pixels = pixels
    self.width = width
    self.height = height
    self.frameIndex = frameIndex
    self.frameCount = frameCount
    self.cancel = cancel
    self.maxPixels = maxPixels
  }

  /// The input pixels, which stay readable until the processor returns.
  public var inputPixels: UnsafeMutablePointer<UInt8> { input ?? pixels }

  /// A new output buffer of `width` x `height` (zeroed): the frame's result becomes it.
  /// nil for a size out of range (0, or over max_pixels) or no memory.
  public func makeOutput(width: Int, height: Int) -> UnsafeMutablePointer<UInt8>? {
    guard width > 0, height > 0, UInt64(width) * UInt64(height) <= maxPixels,
          let buffer = calloc(width * height, 4)?.assumingMemoryBound(to: UInt8.self) else { return nil }
    if let input { free(pixels); _ = input } else { input = pixels }
    pixels = buffer
    self.width = width
    self.height = height
    return buffer
  }

  /// The result buffer (the caller owns it) after the processor returned; frees the input
  /// when a new output replaced it.
  func takeResult() -> UnsafeMutablePointer<UInt8> {
    if let input { free(input) }
    input = nil
    return pixels
  }

  /// Frees everything (a failed processor).
  func discard() {
    if let input { free(input) }
    input = nil
    free(pixels)
  }
}
