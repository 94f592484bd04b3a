// libFuzzer target on response-header handling: the input is a response head, split into
// lines as libcurl hands them to the header callback (status lines included, since a
// redirect or a 100 Continue puts several responses' heads in a row). Every line goes
// through what the engine's header callback does with it: the same bytes-to-String
// conversion, then `ResponseCaching.take(headerLine:)` (Cache-Control, Expires, ETag,
// Last-Modified; a status line starts over). Then the decisions drawn from the result are
// taken at several clocks (`expiry(now:)`, what the disk entry would store), and the
// values of Location, Retry-After, Date, Expires and Last-Modified go through the
// library's URL checks (`RequestURL`, libcurl's URL parser) and date parser (`HTTPDate`,
// libcurl's curl_getdate) the way a redirect target and a Retry-After date would.
//
// Status lines, Retry-After and Location are parsed by libcurl itself (CURLINFO_RESPONSE_CODE,
// CURLINFO_RETRY_AFTER, its redirect logic); this target exercises pixload's own code
// around them, not libcurl's parser.
//
// `make fuzz-headers` builds it with `-sanitize=fuzzer,address` and `-enable-testing`
// (these parsers are internal: `@testable import`). A plain build replays files given as
// arguments: `pixload-fuzz-headers FILE...`.
import FuzzDriver
@testable import PixloadCore
#if canImport(Glibc)
import Glibc
#endif

/// Clocks the expiry is computed at: now, the epoch, and the far ends of the range, where
/// an addition can overflow.
let clocks: [Int] = [Int(time(nil)), 0, 1, Int(Int32.max), Int.max / 2, Int.max - 1, Int.max]

func lines(of data: [UInt8]) -> [[UInt8]] {
  var result: [[UInt8]] = []
  var start = 0
  for i in 0..<data.count where data[i] == 0x0A {
    result.append(Array(data[start...i]))
    start = i + 1
  }
  if start < data.count { result.append(Array(data[start...])) }
  return result
}

@discardableResult
func fuzzOne(_ data: [UInt8]) -> String {
  var caching = ResponseCaching()
  var urls = 0, dates = 0
  for raw in lines(of: data) {
    // Exactly the engine's header callback conversion.
    let line = raw.withUnsafeBufferPointer { String(decoding: $0, as: UTF8.self) }
    caching.take(headerLine: line)
    guard let colon = line.firstIndex(of: ":") else { continue }
    let name = line[..<colon].lowercased()
    let value = line[line.index(after: colon)...].trimmingCharacters(in: " \t\r\n")
    switch name {
    case "location", "content-location":
      // Relative targets are resolved against the request's URL, as libcurl does.
      for candidate in [value, "http://127.0.0.1/dir/" + value] {
        if let url = try? RequestURL(parsing: candidate) {
          precondition(!url.scheme.isEmpty && url.scheme == url.scheme.lowercased(), "scheme '\(url.scheme)'")
          precondition(url.host == url.host.lowercased(), "host '\(url.host)'")
          urls += 1
        }
      }
    case "retry-after", "date", "expires", "last-modified":
      if let seconds = HTTPDate.seconds(value) {
        precondition(seconds >= 0, "a negative date \(seconds)")
        dates += 1
      }
    default:
      break
    }
  }
  for now in clocks {
    let expiry = caching.expiry(now: now)
    if caching.noCache {
      precondition(expiry == 1, "no-cache must always revalidate (expiry \(expiry))")
    } else if let maxAge = caching.maxAge {
      if maxAge <= 0 { precondition(expiry == 1, "max-age \(maxAge) gave expiry \(expiry)") }
      // A positive max-age is fresh now (never "stale at once") and expires at or after now.
      else { precondition(expiry > 1 && expiry >= UInt64(now), "max-age \(maxAge) at \(now) gave \(expiry)") }
    } else if caching.expires != nil {
      precondition(expiry == 1 || expiry > UInt64(now), "Expires gave \(expiry) at \(now)")
    } else {
      precondition(expiry == 0, "nothing said, yet expiry \(expiry)")
    }
  }
  // What a disk entry would keep of it: the validators stored as given (bytes, not parsed).
  var metadata = DiskCache.Metadata()
  metadata.expiresAt = caching.expiry(now: clocks[0])
  metadata.etag = caching.etag
  metadata.lastModified = caching.lastModified
  _ = Array(metadata.etag.utf8).count + Array(metadata.lastModified.utf8).count
  return "no-store=\(caching.noStore) no-cache=\(caching.noCache) max-age=\(caching.maxAge.map(String.init) ?? "-") "
    + "expires=\(caching.expires.map(String.init) ?? "-") etag=\(caching.etag.utf8.count)B urls=\(urls) dates=\(dates)"
}

@main
enum Main {
  static func main() { runFuzzTarget(name: "headers", fuzzOne) }
}
