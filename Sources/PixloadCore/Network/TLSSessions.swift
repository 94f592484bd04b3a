import CCurl

/// The TLS handshake a transfer's new connection made.
enum TLSHandshake: Equatable {
  /// A full handshake (certificate chain sent and verified).
  case full
  /// An abbreviated one: the server took a session from an earlier connection.
  case resumed
  /// One whose kind the TLS backend does not tell (not OpenSSL).
  case unknown

  /// From `pxl_curl_tls_handshake`: nil when the transfer made no handshake.
  init?(_ code: Int32) {
    switch code {
    case 0: self = .full
    case 1: self = .resumed
    case 2: self = .unknown
    default: return nil
    }
  }
}

/// TLS handshakes a loader's connections made.
public struct TLSHandshakeCounts: Sendable, Equatable {
  /// Every completed handshake (each new https connection).
  public var handshakes = 0
  /// Of those, the ones that resumed a session instead of a full handshake.
  public var resumed = 0

  public init() {}

  mutating func add(_ handshake: TLSHandshake?) {
    guard let handshake else { return }
    handshakes += 1
    if handshake == .resumed { resumed += 1 }
  }
}

/// libcurl's share object for TLS sessions: every transfer's easy handle joins it, so a new
/// connection to a server (after an idle timeout, the server's keep-alive limit, a reset)
/// resumes the session an earlier one got instead of a full handshake. A session lives in
/// an easy handle's own cache otherwise, and the engine makes one handle per attempt.
///
/// Only TLS sessions: the DNS cache and the connection pool are already shared by the
/// multi handle between all its easy handles (libcurl's CURLSHOPT_SHARE says so); a share
/// object's connection pool would take them out of the multi handle, whose pool
/// CURLMOPT_MAXCONNECTS sizes and whose connections HTTP/2 multiplexes. The share is used
/// on the engine's thread only; it has a lock per kind of data anyway (libcurl's rule for
/// a share several threads may touch, see curl_shim.c).
final class TLSSessionShare {
  let handle: UnsafeMutableRawPointer
  private let locks: UnsafeMutableRawPointer?

  init() throws(LoadError) {
    var locks: UnsafeMutableRawPointer?
    guard let handle = pxl_curl_share_new(&locks) else {
      throw LoadError(.noMemory, "libcurl \(CurlOption.libcurlVersion) could not make a TLS session share")
    }
    self.handle = handle
    self.locks = locks
  }

  /// After every easy handle that used it is cleaned up.
  deinit { pxl_curl_share_free(handle, locks) }
}
