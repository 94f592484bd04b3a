//! Fetchers for the host's own schemes (pixload.h, "Fetchers"): [`Loader::add_fetcher`].
//!
//! The start closure runs on the library's fetch thread and must return at once: it
//! moves the [`Fetch`] to a thread (or task) of the host's, which answers with
//! [`Fetch::write`] and [`Fetch::finish`] or [`Fetch::fail`]. A `Fetch` is finished
//! exactly once: by those, or when dropped unfinished (as cancelled), so no handle leaks.
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::callbacks::call_user;
use crate::error::{check, Error, Status};
use crate::loader::Loader;
use crate::sys;

/// How the loader treats a fetcher's work.
#[derive(Debug, Clone, Copy)]
pub struct FetcherOptions {
    /// Fetches started and not yet ended at once (default 8); more wait, highest
    /// priority first.
    pub max_concurrent: i32,
    /// `None` (default): its bytes never reach the disk cache. `Some(age)`: they do, fresh
    /// for `age` (zero: until evicted).
    pub disk_cache: Option<Duration>,
}

impl Default for FetcherOptions {
    fn default() -> Self {
        FetcherOptions { max_concurrent: 8, disk_cache: None }
    }
}

struct FetchState {
    cancelled: AtomicBool,
    on_cancel: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

type Registry = Mutex<HashMap<usize, Arc<FetchState>>>;

struct FetcherBox {
    start: Box<dyn Fn(Fetch) + Send + Sync>,
    live: Arc<Registry>,
}

/// One fetch the library asked for: write its bytes, then finish it, from any thread.
pub struct Fetch {
    raw: Mutex<Option<NonNull<sys::pxl_fetch>>>,
    url: String,
    state: Arc<FetchState>,
    live: Arc<Registry>,
}

// SAFETY: the library's pxl_fetch functions may be called from any thread; the pointer is
// used under the mutex and given up by the one finish.
unsafe impl Send for Fetch {}
unsafe impl Sync for Fetch {}

impl Fetch {
    pub fn url(&self) -> &str {
        &self.url
    }

    /// True once the library told the fetcher to stop (the request went away, timed out,
    /// went over the body-size limit, the loader was dropped): stop fetching.
    pub fn is_cancelled(&self) -> bool {
        self.state.cancelled.load(Ordering::Acquire)
    }

    /// Runs `f` (on the library's fetch thread) when the library cancels this fetch; at
    /// once if it already did.
    pub fn on_cancel(&self, f: impl FnOnce() + Send + 'static) {
        let mut slot = self.state.on_cancel.lock().unwrap();
        if self.is_cancelled() {
            drop(slot);
            f();
        } else {
            *slot = Some(Box::new(f));
        }
    }

    /// Appends bytes. `Err` with [`Status::Cancelled`] when the fetch has ended (the bytes
    /// are ignored), [`Status::BodyTooLarge`] when these took it over the limit.
    pub fn write(&self, data: &[u8]) -> Result<(), Error> {
        let raw = self.raw.lock().unwrap();
        match *raw {
            Some(fetch) => check(unsafe { sys::pxl_fetch_write(fetch.as_ptr(), data.as_ptr().cast(), data.len()) }),
            None => Err(Error::from_raw(sys::PXL_E_CANCELLED)),
        }
    }

    /// Delivers the bytes written. False when the fetch had already ended.
    pub fn finish(self) -> bool {
        self.end(sys::PXL_OK, None)
    }

    /// Fails the fetch's requests with `status` and `message`. False when it had ended.
    pub fn fail(self, status: Status, message: &str) -> bool {
        self.end(status.to_raw(), Some(message))
    }

    fn end(&self, status: sys::pxl_status, message: Option<&str>) -> bool {
        let Some(fetch) = self.raw.lock().unwrap().take() else { return false };
        self.live.lock().unwrap().remove(&(fetch.as_ptr() as usize));
        let message = message.map(|m| CString::new(m.replace('\0', " ")).unwrap());
        let ptr = message.as_ref().map_or(std::ptr::null(), |m| m.as_ptr());
        unsafe { sys::pxl_fetch_finish(fetch.as_ptr(), status, ptr) == sys::PXL_OK }
    }
}

impl Drop for Fetch {
    fn drop(&mut self) {
        self.end(sys::PXL_E_CANCELLED, None);
    }
}

unsafe extern "C" fn on_start(url: *const c_char, fetch: *mut sys::pxl_fetch, user_data: *mut c_void) {
    // SAFETY: user_data is the FetcherBox add_fetcher leaked; destroy frees it after the last call.
    let fetcher = unsafe { &*(user_data as *const FetcherBox) };
    let Some(raw) = NonNull::new(fetch) else { return };
    let url = unsafe { CStr::from_ptr(url) }.to_string_lossy().into_owned();
    let state = Arc::new(FetchState { cancelled: AtomicBool::new(false), on_cancel: Mutex::new(None) });
    fetcher.live.lock().unwrap().insert(fetch as usize, state.clone());
    let handle = Fetch { raw: Mutex::new(Some(raw)), url, state, live: fetcher.live.clone() };
    call_user("fetcher start", || (fetcher.start)(handle));
}

unsafe extern "C" fn on_cancel(fetch: *mut sys::pxl_fetch, user_data: *mut c_void) {
    let fetcher = unsafe { &*(user_data as *const FetcherBox) };
    let state = fetcher.live.lock().unwrap().get(&(fetch as usize)).cloned();
    if let Some(state) = state {
        state.cancelled.store(true, Ordering::Release);
        let callback = state.on_cancel.lock().unwrap().take();
        if let Some(callback) = callback {
            call_user("fetcher cancel", callback);
        }
    }
}

unsafe extern "C" fn on_destroy(user_data: *mut c_void) {
    drop(unsafe { Box::from_raw(user_data as *mut FetcherBox) });
}

impl Loader {
    /// Serves URLs of `scheme` (not http, https, file or data) with `start`, called on the
    /// library's fetch thread with each [`Fetch`]; it must return at once. Requests of the
    /// scheme are merged by cache key (one start per key), ranked, cached in memory and,
    /// with `options.disk_cache`, on disk, like any other.
    pub fn add_fetcher<S>(&self, scheme: &str, options: FetcherOptions, start: S) -> Result<(), Error>
    where
        S: Fn(Fetch) + Send + Sync + 'static,
    {
        let scheme = CString::new(scheme).map_err(|_| Error::invalid("scheme with a NUL byte"))?;
        let mut raw = std::mem::MaybeUninit::<sys::pxl_fetcher>::zeroed();
        check(unsafe { sys::pxl_fetcher_init_size(raw.as_mut_ptr(), std::mem::size_of::<sys::pxl_fetcher>()) })?;
        let mut raw = unsafe { raw.assume_init() };
        let boxed = Box::into_raw(Box::new(FetcherBox { start: Box::new(start), live: Arc::new(Mutex::new(HashMap::new())) }));
        raw.start = Some(on_start);
        raw.cancel = Some(on_cancel);
        raw.destroy = Some(on_destroy);
        raw.user_data = boxed.cast();
        raw.max_concurrent = options.max_concurrent;
        if let Some(age) = options.disk_cache {
            raw.disk_cache = 1;
            raw.disk_max_age_s = age.as_secs().min(i64::MAX as u64) as i64;
        }
        // SAFETY: after PXL_OK on_destroy gets the box back exactly once; a refusal never
        // calls destroy (pixload.h, "Extensions", as 0.5.0), so the box is ours to free.
        let status = unsafe { sys::pxl_loader_add_fetcher(self.as_ptr(), scheme.as_ptr(), &raw) };
        if status != sys::PXL_OK {
            drop(unsafe { Box::from_raw(boxed) });
        }
        check(status)
    }

    /// Removes the fetcher of `scheme` (its unanswered requests end Cancelled); false when
    /// it had none.
    pub fn remove_fetcher(&self, scheme: &str) -> bool {
        let Ok(scheme) = CString::new(scheme) else { return false };
        unsafe { sys::pxl_loader_remove_fetcher(self.as_ptr(), scheme.as_ptr()) == sys::PXL_OK }
    }
}
