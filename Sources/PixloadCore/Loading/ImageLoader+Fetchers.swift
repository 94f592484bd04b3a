/// Fetchers of the host's own schemes (the fetch stage, `FetchRouter`, runs them): a
/// request whose URL has such a scheme goes through the loader as any other (merging,
/// priorities, caches, progress, previews), its bytes coming from the fetcher.
extension ImageLoader {
  /// Serves URLs of `scheme` (any case; not one libcurl or the loader itself serves:
  /// http, https, file, data...) with `fetcher`; the scheme allow-list lets them in.
  /// Throws `.invalidArgument` for such a scheme, a malformed one, one that has a fetcher
  /// already or a limit below 1; `.loaderClosed` once closed.
  public func addFetcher(_ fetcher: Fetcher, for scheme: String, settings: FetcherSettings = FetcherSettings()) throws(LoadError) {
    guard let name = RequestURL.leadingScheme(scheme + ":"), name.utf8.count == scheme.utf8.count else {
      throw LoadError(.invalidArgument, "'\(scheme.prefix(64))' is not a URL scheme")
    }
    guard !Self.reservedSchemes.contains(name), !Self.curlServes(name) else {
      throw LoadError(.invalidArgument, "scheme '\(name)' is served by the loader itself")
    }
    guard settings.maxConcurrent > 0, (settings.diskMaxAgeSeconds ?? 0) >= 0 else {
      throw LoadError(.invalidArgument, "a fetcher's limit must be at least 1 and its disk lifetime not negative")
    }
    try fetchRouter.register(fetcher, for: name, settings: settings)
  }

  /// Removes the fetcher of `scheme`: requests it has not answered end CANCELLED, the
  /// fetches it started are cancelled, then it is destroyed (on the fetch thread, soon).
  /// False when the scheme had none.
  @discardableResult
  public func removeFetcher(for scheme: String) -> Bool {
    fetchRouter.unregister(scheme: scheme.lowercased())
  }

  private static let reservedSchemes: Set<String> = ["http", "https", "file", "data"]

  /// Whether libcurl parses `scheme` as one of its own (ftp, ...): such URLs never reach
  /// a fetcher (RequestURL hands them to libcurl's parser).
  private static func curlServes(_ scheme: String) -> Bool {
    (try? RequestURL(parsing: scheme + "://example.invalid/"))?.isVerbatim == false
  }
}
