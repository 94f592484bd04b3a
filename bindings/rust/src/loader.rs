//! Loaders: made from a [`LoaderBuilder`] (which hands them its log and hook closures)
//! and freed with those closures in `Drop`; loads, cancels, cache look-ups and statistics.

use std::ffi::c_void;
use std::fmt;
use std::ptr::{self, NonNull};

use crate::callbacks::{
    call_user, free_deferred_loaders, free_outside_callbacks, on_done, on_progress, DoneFn, Pending, ProgressFn,
};
use crate::config::{on_log, LogFn};
use crate::convert::{c_string, header_pointers, path_string};
use crate::error::check;
use crate::hook::{on_hook, HookFn};
use crate::{sys, version, version_compatible, version_num, Error, Image, LoaderBuilder, Prefetch, Queue, Request, Slot, Token};

/// A snapshot of what a loader did so far (`pxl_stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub requests: u64,
    pub memory_hits: u64,
    pub disk_hits: u64,
    pub network_fetches: u64,
    pub revalidated: u64,
    pub coalesced: u64,
    pub cancelled: u64,
    pub failed: u64,
    pub bytes_downloaded: u64,
    pub memory_bytes: u64,
    pub memory_count: u64,
    pub disk_bytes: u64,
    /// Bytes not downloaded because a thumbnail's transfer ended early.
    pub bytes_saved: u64,
    /// Of `disk_hits`: answered by a decoded thumbnail kept on disk, with no decode.
    pub variant_hits: u64,
    /// Decoded thumbnails this loader wrote to the disk cache, and their bytes.
    pub variants_stored: u64,
    pub variant_bytes_stored: u64,
    /// TLS handshakes of the https connections this loader opened (0.5.0).
    pub tls_handshakes: u64,
    /// Of those, the ones that resumed an earlier connection's session.
    pub tls_resumed: u64,
}

/// Downloads, decodes and caches images on threads of its own. Usable from any thread
/// (share it with `Arc`). Dropping it cancels its requests: their closures run, with
/// [`Status::Cancelled`], at their queue's next dispatch or drop. Dropped inside one of
/// the library's callbacks, it is freed once that callback's dispatch returns (the
/// library forbids freeing a loader from a callback).
///
/// [`Status::Cancelled`]: crate::Status::Cancelled
pub struct Loader {
    pub(crate) raw: NonNull<sys::pxl_loader>,
    /// The log closure (Box::into_raw), NULL for none; freed after pxl_loader_free.
    pub(crate) log: *mut LogFn,
}

// SAFETY: "A pxl_loader may be used from any thread."
unsafe impl Send for Loader {}
unsafe impl Sync for Loader {}

impl Loader {
    /// A loader with the default configuration.
    pub fn new() -> Result<Loader, Error> {
        LoaderBuilder::new().build()
    }

    pub fn builder() -> LoaderBuilder {
        LoaderBuilder::new()
    }

    pub fn as_ptr(&self) -> *mut sys::pxl_loader {
        self.raw.as_ptr()
    }

    /// Starts a load. On Ok, `done` runs exactly once on a thread dispatching `queue`:
    /// with the image, an error, or [`Status::Cancelled`]. On Err it never runs (it is
    /// dropped before this returns).
    ///
    /// [`Status::Cancelled`]: crate::Status::Cancelled
    pub fn load<F>(&self, request: &Request, queue: &Queue, done: F) -> Result<Token, Error>
    where
        F: FnOnce(Result<Image, Error>) + Send + 'static,
    {
        self.start(request, queue, Box::new(move |outcome, _| done(outcome)), None)
    }

    /// As [`load`](Loader::load), `done` also getting what the request cost
    /// ([`Metrics`](crate::Metrics); a failed or cancelled one has what was measured).
    pub fn load_measured<F>(&self, request: &Request, queue: &Queue, done: F) -> Result<Token, Error>
    where
        F: FnOnce(Result<Image, Error>, crate::Metrics) + Send + 'static,
    {
        self.start(request, queue, Box::new(done), None)
    }

    /// Loads one image and waits for it: for scripts and tests, never for a UI thread.
    /// Uses a queue of its own, so it may be called from any thread, also while other
    /// queues are dispatched elsewhere (not from inside a pixload closure: that thread
    /// would wait for itself).
    pub fn fetch(&self, request: &Request) -> Result<Image, Error> {
        let queue = Queue::new()?;
        let result: std::sync::Arc<std::sync::Mutex<Option<Result<Image, Error>>>> = Default::default();
        let slot = result.clone();
        self.load(request, &queue, move |r| *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(r))?;
        loop {
            if let Some(r) = result.lock().unwrap_or_else(|e| e.into_inner()).take() {
                return r;
            }
            if queue.dispatch() == 0 {
                queue.wait(None);
            }
        }
    }

    /// As [`load`](Loader::load), and `progress(received, expected)` runs on the
    /// draining thread as bytes arrive (expected is 0 when the server did not say),
    /// never after `done`.
    pub fn load_with_progress<P, F>(&self, request: &Request, queue: &Queue, progress: P, done: F) -> Result<Token, Error>
    where
        P: FnMut(u64, u64) + Send + 'static,
        F: FnOnce(Result<Image, Error>) + Send + 'static,
    {
        self.start(request, queue, Box::new(move |outcome, _| done(outcome)), Some(Box::new(progress)))
    }

    fn start(&self, request: &Request, queue: &Queue, done: DoneFn, progress: Option<ProgressFn>) -> Result<Token, Error> {
        let mut raw = request.to_raw()?;
        if progress.is_some() {
            raw.raw.progress = Some(on_progress);
        }
        let pending = Pending::into_raw(done, progress);
        let mut token = 0;
        let status = unsafe {
            sys::pxl_load(self.as_ptr(), &raw.raw, queue.as_ptr(), Some(on_done), pending as *mut c_void, &mut token)
        };
        if status != sys::PXL_OK {
            // Rule 1: a call that fails never invokes its callback.
            unsafe { Pending::discard(pending) };
            return Err(Error::from_raw(status));
        }
        Ok(Token::from_raw(token).expect("pxl_load accepted a request with token 0"))
    }

    /// Cancels a request: its closure reports [`Status::Cancelled`] unless it already
    /// started. True if this call cancelled it, false if it was unknown, finished or
    /// already cancelled. Any thread, also inside a closure.
    ///
    /// [`Status::Cancelled`]: crate::Status::Cancelled
    pub fn cancel(&self, token: Token) -> bool {
        unsafe { sys::pxl_cancel(self.as_ptr(), token.get()) == sys::PXL_OK }
    }

    /// Changes the priority of a request still waiting or running.
    pub fn set_priority(&self, token: Token, priority: i32) -> Result<(), Error> {
        check(unsafe { sys::pxl_set_priority(self.as_ptr(), token.get(), priority) })
    }

    /// The image `request` would produce, if the memory cache holds it. Never blocks.
    pub fn lookup(&self, request: &Request) -> Result<Option<Image>, Error> {
        let raw = request.to_raw()?;
        let mut image = ptr::null_mut();
        match unsafe { sys::pxl_lookup(self.as_ptr(), &raw.raw, &mut image) } {
            sys::PXL_OK => Ok(unsafe { Image::from_raw(image) }),
            sys::PXL_E_NOT_FOUND => Ok(None),
            status => Err(Error::from_raw(status)),
        }
    }

    /// A view slot now shows `request`: cancels the slot's previous load, then returns
    /// the image at once when the memory cache holds it (`done` is dropped, never
    /// called), or starts a load whose `done` runs as [`load`](Loader::load)'s does.
    pub fn bind<F>(&self, request: &Request, queue: &Queue, slot: &mut Slot, done: F) -> Result<Option<Image>, Error>
    where
        F: FnOnce(Result<Image, Error>) + Send + 'static,
    {
        let raw = request.to_raw()?;
        let pending = Pending::into_raw(Box::new(move |outcome, _| done(outcome)), None);
        let mut image = ptr::null_mut();
        let status = unsafe {
            sys::pxl_bind(self.as_ptr(), &raw.raw, queue.as_ptr(), Some(on_done), pending as *mut c_void, &mut slot.token, &mut image)
        };
        if status != sys::PXL_OK {
            unsafe { Pending::discard(pending) };
            return Err(Error::from_raw(status));
        }
        match unsafe { Image::from_raw(image) } {
            Some(image) => {
                // Answered from memory: no request was made, the callback never comes.
                unsafe { Pending::discard(pending) };
                Ok(Some(image))
            }
            None => Ok(None),
        }
    }

    /// Warms the memory cache with `requests`, calling nobody.
    pub fn prefetch(&self, requests: &[Request]) -> Prefetch {
        let raws = match requests.iter().map(Request::to_raw).collect::<Result<Vec<_>, _>>() {
            Ok(raws) => raws,
            Err(e) => return Prefetch { tokens: vec![None; requests.len()], result: Err(e) },
        };
        let array: Vec<sys::pxl_request> = raws.iter().map(|r| r.raw).collect();
        let mut tokens = vec![0 as sys::pxl_token; array.len()];
        let status = unsafe { sys::pxl_prefetch(self.as_ptr(), array.as_ptr(), array.len(), tokens.as_mut_ptr()) };
        Prefetch { tokens: tokens.into_iter().map(Token::from_raw).collect(), result: check(status) }
    }

    /// Cancels every request of `queue`, or of the loader (prefetches and tables'
    /// included) for None. Returns how many were cancelled.
    pub fn cancel_all(&self, queue: Option<&Queue>) -> usize {
        let queue = queue.map_or(ptr::null_mut(), Queue::as_ptr);
        unsafe { sys::pxl_cancel_all(self.as_ptr(), queue) }.max(0) as usize
    }

    /// Drops memory-cache entries, least recently used first, down to `max_bytes`.
    pub fn memory_cache_trim(&self, max_bytes: u64) {
        unsafe { sys::pxl_memory_cache_trim(self.as_ptr(), max_bytes) }
    }

    pub fn memory_cache_bytes(&self) -> u64 {
        unsafe { sys::pxl_memory_cache_bytes(self.as_ptr()) }
    }

    pub fn memory_cache_count(&self) -> usize {
        unsafe { sys::pxl_memory_cache_count(self.as_ptr()) }.max(0) as usize
    }

    pub fn disk_cache_bytes(&self) -> u64 {
        unsafe { sys::pxl_disk_cache_bytes(self.as_ptr()) }
    }

    /// Deletes every disk-cache entry. Blocks on the disk.
    pub fn disk_cache_clear(&self) {
        unsafe { sys::pxl_disk_cache_clear(self.as_ptr()) }
    }

    /// Forgets one cache key (a URL or a request's cache key), in memory and on disk.
    pub fn cache_remove(&self, cache_key: &str) -> Result<(), Error> {
        let key = c_string("the cache key", cache_key)?;
        check(unsafe { sys::pxl_cache_remove(self.as_ptr(), key.as_ptr()) })
    }

    pub fn stats(&self) -> Stats {
        let mut s = sys::pxl_stats { struct_size: std::mem::size_of::<sys::pxl_stats>(), ..Default::default() };
        // Only a NULL loader or a bad struct_size fail, and neither can happen here.
        // The library fills what it knows and zeroes the rest of ours.
        unsafe { sys::pxl_loader_get_stats(self.as_ptr(), &mut s) };
        Stats {
            requests: s.requests,
            memory_hits: s.memory_hits,
            disk_hits: s.disk_hits,
            network_fetches: s.network_fetches,
            revalidated: s.revalidated,
            coalesced: s.coalesced,
            cancelled: s.cancelled,
            failed: s.failed,
            bytes_downloaded: s.bytes_downloaded,
            memory_bytes: s.memory_bytes,
            memory_count: s.memory_count,
            disk_bytes: s.disk_bytes,
            bytes_saved: s.bytes_saved,
            variant_hits: s.variant_hits,
            variants_stored: s.variants_stored,
            variant_bytes_stored: s.variant_bytes_stored,
            tls_handshakes: s.tls_handshakes,
            tls_resumed: s.tls_resumed,
        }
    }
}

impl LoaderBuilder {
    pub fn build(self) -> Result<Loader, Error> {
        let num = version_num();
        if !version_compatible(num) {
            return Err(Error::invalid(format!(
                "libpixload {} is loaded, but this crate needs {}.{}.x",
                version(),
                sys::PXL_VERSION_MAJOR,
                sys::PXL_VERSION_MINOR
            )));
        }
        let user_agent = self.user_agent.as_deref().map(|a| c_string("the user agent", a)).transpose()?;
        let ca_file = self.ca_file.as_deref().map(|p| path_string("the CA file", p)).transpose()?;
        let ca_path = self.ca_path.as_deref().map(|p| path_string("the CA directory", p)).transpose()?;
        let proxy = self.proxy.as_deref().map(|p| c_string("the proxy", p)).transpose()?;
        let disk_cache_dir = self.disk_cache_dir.as_deref().map(|p| path_string("the disk cache directory", p)).transpose()?;
        let codec_modules = self.codec_modules.as_deref().map(|m| c_string("the codec modules", m)).transpose()?;
        let headers = self.headers.iter().map(|h| c_string("a header line", h)).collect::<Result<Vec<_>, _>>()?;
        let header_pointers = header_pointers(&headers);
        let mut config = self.config;
        config.user_agent = user_agent.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        config.ca_file = ca_file.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        config.ca_path = ca_path.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        config.proxy = proxy.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        config.disk_cache_dir = disk_cache_dir.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        config.codec_modules = codec_modules.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        config.headers = if headers.is_empty() { ptr::null() } else { header_pointers.as_ptr() };
        // Owned by the Loader from here on (freed after pxl_loader_free).
        let log = self.log.map_or(ptr::null_mut(), |f| Box::into_raw(Box::new(f)));
        if !log.is_null() {
            config.log = Some(on_log);
            config.log_user_data = log as *mut c_void;
        }
        // Boxed twice, so that user_data is a thin pointer; kept by the hook registry once
        // the loader exists, dropped after pxl_loader_free.
        let hook = self.request_hook.map(Box::new);
        if let Some(hook) = &hook {
            config.request_hook = Some(on_hook);
            config.request_hook_user_data = hook.as_ref() as *const HookFn as *mut c_void;
        }
        let mut raw = ptr::null_mut();
        // SAFETY: the strings live until the call returns; the library copies them.
        let status = unsafe { sys::pxl_loader_new(&config, &mut raw) };
        match (status, NonNull::new(raw)) {
            (sys::PXL_OK, Some(raw)) => {
                if let Some(hook) = hook {
                    crate::hook::keep(raw, hook);
                }
                Ok(Loader { raw, log })
            }
            (status, _) => {
                if let Some(hook) = hook {
                    call_user("dropping the request hook", move || drop(hook));
                }
                if !log.is_null() {
                    // No loader: the library never calls it.
                    let log = unsafe { Box::from_raw(log) };
                    call_user("dropping the log closure", move || drop(log));
                    free_deferred_loaders();
                }
                Err(Error::from_raw(if status == sys::PXL_OK { sys::PXL_E_NO_MEMORY } else { status }))
            }
        }
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        // "Must not be called from a callback of this loader's requests": inside one, freed
        // once the dispatch (or queue free, or table call) around us returns.
        let (raw, log) = (self.raw, self.log);
        // SAFETY: this loader's pointers, used by nobody after its drop.
        free_outside_callbacks(move || unsafe { free_loader(raw, log) });
    }
}

/// pxl_loader_free, then the loader's request hook and log closures: the library never
/// calls them after pxl_loader_free returned.
///
/// # Safety
/// `raw` is a live loader not used afterwards; `log` is NULL or its log closure from
/// Box::into_raw.
unsafe fn free_loader(raw: NonNull<sys::pxl_loader>, log: *mut LogFn) {
    unsafe { sys::pxl_loader_free(raw.as_ptr()) };
    if let Some(hook) = crate::hook::forget(raw) {
        // After pxl_loader_free: the library calls the hook no more.
        call_user("dropping the request hook", move || drop(hook));
        free_deferred_loaders();
    }
    if !log.is_null() {
        let log = unsafe { Box::from_raw(log) };
        call_user("dropping the log closure", move || drop(log));
        // The closure may have held the last reference to another loader.
        free_deferred_loaders();
    }
}

impl fmt::Debug for Loader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loader").field("raw", &self.raw).field("log", &!self.log.is_null()).finish()
    }
}
