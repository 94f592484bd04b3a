/// The loader's authentication (pxl_config.request_hook): asked before each network
/// transfer of an http(s) URL (the first attempt, every retry, every redirect hop, and
/// once more after a 401 or 403) for headers to add or replace, such as a bearer token.
/// It runs after the cache key was computed: what it adds is never part of a cache key, so
/// a refreshed token keeps serving what the old one cached.
///
/// - important: `call` runs on the network thread and must return at once; the host
///   answers through the `HookCall`, then or later, from any thread. While it has not,
///   the transfer holds no connection slot.
public protocol RequestHook: AnyObject, Sendable {
  func call(_ call: HookCall)
}

/// One question to the request hook: the hop's URL, the headers it would send, and why it
/// is asked again (`status`: 401 or 403 after such a response, else 0). Answered at most
/// once: the first `answer` or `fail` counts, later ones (and any after the request was
/// cancelled, the hook timed out or the loader closed) return false and do nothing.
public final class HookCall: @unchecked Sendable {
  public let url: String
  /// "Name: value" lines the hop sends so far: the loader's and the request's headers for
  /// this hop (the request's only to its origin), validators, and the hook's own answer
  /// that got a 401 or 403.
  public let headers: [String]
  /// 0, or the 401 or 403 of the response this call follows (the request is retried once
  /// with the answer).
  public let status: Int
  let transferID: TransferID
  let serial: UInt64
  private weak var engine: CurlEngine?

  init(url: String, headers: [String], status: Int, transferID: TransferID, serial: UInt64, engine: CurlEngine) {
    self.url = url
    self.headers = headers
    self.status = status
    self.transferID = transferID
    self.serial = serial
    self.engine = engine
  }

  /// Lets the transfer go on with `headers` ("Name: value" lines, each replacing any line
  /// of the same name, else added). False when the call no longer waits.
  @discardableResult
  public func answer(headers: [String]) -> Bool {
    engine?.hookAnswered(self, .success(headers)) ?? false
  }

  /// Fails the request with `error`. False when the call no longer waits.
  @discardableResult
  public func fail(_ error: LoadError) -> Bool {
    engine?.hookAnswered(self, .failure(error)) ?? false
  }
}

extension TransferRequest {
  /// `base` with `replacements` applied: each replacement line takes the place of every
  /// base line of the same (case-insensitive) name, or is added.
  static func merging(_ base: [String], _ replacements: [String]) -> [String] {
    guard !replacements.isEmpty else { return base }
    let replaced = Set(replacements.map(headerName))
    return base.filter { !replaced.contains(headerName($0)) } + replacements
  }

  static func headerName(_ line: String) -> String {
    line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).first
      .map { $0.trimmingCharacters(in: " \t").lowercased() } ?? ""
  }
}

/// Whether `line` may be sent as a header (the loader's, a request's, a hook's): "Name:
/// value" with a name, and no CR or LF anywhere (looked for in the bytes: "\r\n" is one
/// Character, which a Character search for "\r" or "\n" does not find).
public func isValidHeaderLine(_ line: String) -> Bool {
  guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else { return false }
  return !line.utf8.contains(where: { $0 == 13 || $0 == 10 })
}
