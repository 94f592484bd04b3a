/// A host's source of bytes for the URLs of one scheme (pxl_fetcher in the C API): a
/// database blob, an archive member, an encrypted file. The fetch stage calls it on its
/// thread; it answers through the `FetchHandle`, now or later, from any thread.
///
/// - important: `start` must return at once (a host with blocking storage hands the work
///   to a thread of its own). `cancel` runs at most once per handle, never before its
///   `start` returned; `destroy` runs once, after the fetcher's last `start` or `cancel`.
public protocol Fetcher: AnyObject, Sendable {
  func start(url: String, fetch: FetchHandle)
  func cancel(_ fetch: FetchHandle)
  func destroy()
}

/// How the fetch stage treats one fetcher's work.
public struct FetcherSettings: Sendable {
  /// Fetches started and not yet ended at once; more wait, highest priority first.
  public var maxConcurrent = 8
  /// nil: its bytes are never written to the disk cache. Otherwise they are, fresh for
  /// this many seconds (0: until evicted), as a max-age would say of an http response.
  public var diskMaxAgeSeconds: Int?

  public init(maxConcurrent: Int = 8, diskMaxAgeSeconds: Int? = nil) {
    self.maxConcurrent = maxConcurrent
    self.diskMaxAgeSeconds = diskMaxAgeSeconds
  }
}

/// The host's end of one fetch. Valid for as long as the host holds it: once the fetch
/// ended (finished, cancelled, timed out, over the body-size limit, the fetcher removed or
/// the loader closed), `write` and `finish` do nothing.
public final class FetchHandle: @unchecked Sendable {
  private weak var router: FetchRouter?
  let job: FetchJob
  /// What the host knows this fetch by (the C API's pxl_fetch handle), for the fetcher's
  /// `cancel` to name it as `start` did. Set and read on the stage's thread only.
  public var hostHandle: UInt = 0

  init(router: FetchRouter, job: FetchJob) {
    self.router = router
    self.job = job
  }

  public var url: String { job.url.text }

  /// Appends bytes to the body: `.ok`; `.cancelled` when they were ignored (the fetch had
  /// ended); `.bodyTooLarge` when they took it over the body-size limit, which ends it.
  @discardableResult
  public func write(_ bytes: UnsafeRawBufferPointer) -> Status {
    router?.write(job, bytes) ?? .cancelled
  }

  /// Ends the fetch: with the bytes written when `error` is nil, else with `error`. False
  /// when it had already ended (nothing happens).
  @discardableResult
  public func finish(_ error: LoadError?) -> Bool {
    router?.finish(job, error) ?? false
  }
}

/// The built-in fetcher of `data:` URIs: decodes on the fetch thread, never stored on disk.
final class DataURIFetcher: Fetcher {
  let maxBytes: Int

  init(maxBytes: Int) { self.maxBytes = maxBytes }

  func start(url: String, fetch: FetchHandle) {
    switch DataURI.decode(url, maxBytes: maxBytes) {
    case .success(let bytes):
      bytes.withUnsafeBytes { _ = fetch.write($0) }
      fetch.finish(nil)
    case .failure(let error):
      fetch.finish(error)
    }
  }

  func cancel(_ fetch: FetchHandle) {}
  func destroy() {}
}
