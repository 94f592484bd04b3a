extension ImageLoader {
  /// TLS handshakes of the network's connections so far, and how many resumed a session.
  public var tlsHandshakes: TLSHandshakeCounts { dataLoader.tlsHandshakes }
}
