//! The C boundary: the trampolines of a load's closures, panics caught before they
//! reach C, and frees that wait until the thread is out of every callback (a loader's:
//! what a loader owns is freed by loader.rs, which hands its free to
//! [`free_outside_callbacks`]).

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::ffi::{c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{sys, Error, Image, Metrics, Status};

static CAUGHT_PANICS: AtomicUsize = AtomicUsize::new(0);

/// How many panics of user closures were caught at the C boundary so far (each was also
/// reported on stderr). A panic never unwinds into the library.
pub fn caught_panics() -> usize {
    CAUGHT_PANICS.load(Ordering::SeqCst)
}

/// Counts a panic caught outside `call_user` (a custom processor's) and reports it.
pub(crate) fn count_panic(what: &str) {
    CAUGHT_PANICS.fetch_add(1, Ordering::SeqCst);
    eprintln!("pixload: a panic in {what} was caught at the C boundary");
}

fn report_panic(what: &str, payload: Box<dyn Any + Send>) {
    CAUGHT_PANICS.fetch_add(1, Ordering::SeqCst);
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(not a string)".to_string());
    eprintln!("pixload: a panic in {what} was caught at the C boundary: {text}");
    // Dropping a payload may panic in turn; forget it rather than unwind into C.
    std::mem::forget(payload);
}

thread_local! {
    /// How deep this thread is in closures called from the library.
    static CALLBACK_DEPTH: Cell<usize> = const { Cell::new(0) };
    /// The frees of loaders dropped inside such a closure: pxl_loader_free must not run
    /// there.
    static DEFERRED_LOADERS: RefCell<Vec<Box<dyn FnOnce()>>> = const { RefCell::new(Vec::new()) };
    /// A per-thread address, to tell which thread drains a queue.
    static THREAD_KEY: u8 = const { 0 };
}

pub(crate) fn thread_key() -> usize {
    THREAD_KEY.with(|k| k as *const u8 as usize)
}

struct CallbackScope;

impl CallbackScope {
    fn enter() -> CallbackScope {
        CALLBACK_DEPTH.with(|d| d.set(d.get() + 1));
        CallbackScope
    }
}

impl Drop for CallbackScope {
    fn drop(&mut self) {
        CALLBACK_DEPTH.with(|d| d.set(d.get() - 1));
    }
}

fn in_callback() -> bool {
    CALLBACK_DEPTH.try_with(|d| d.get() > 0).unwrap_or(false)
}

/// Runs `free` (a dropped loader's) now or, on a thread inside a closure the library
/// called, once the thread is out of every such closure ([`free_deferred_loaders`]): the
/// library forbids freeing a loader from a callback of its requests.
pub(crate) fn free_outside_callbacks(free: impl FnOnce() + 'static) {
    let mut free = Some(free);
    if in_callback() {
        let deferred = DEFERRED_LOADERS
            .try_with(|l| l.borrow_mut().push(Box::new(free.take().expect("not taken yet"))))
            .is_ok();
        if deferred {
            return;
        }
    }
    if let Some(free) = free {
        free()
    }
}

/// Frees the loaders dropped inside callbacks, once this thread is out of every
/// callback. Called after each C call that may run callbacks.
pub(crate) fn free_deferred_loaders() {
    if in_callback() {
        return;
    }
    let frees = DEFERRED_LOADERS.try_with(|l| std::mem::take(&mut *l.borrow_mut())).unwrap_or_default();
    for free in frees {
        free()
    }
}

/// Runs a user closure: marks the thread as inside a callback and stops panics.
pub(crate) fn call_user(what: &str, f: impl FnOnce()) {
    let _scope = CallbackScope::enter();
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        report_panic(what, payload);
    }
}

/// # Safety
/// `result` must point to a live pxl_result (a callback's).
pub(crate) unsafe fn result_from_c(result: *const sys::pxl_result) -> Result<Image, Error> {
    // SAFETY: per the caller; borrowed for the callback, so the image is retained.
    let result = unsafe { &*result };
    if result.status == sys::PXL_OK {
        if let Some(image) = unsafe { Image::retain(result.image) } {
            return Ok(image);
        }
    }
    let message = if result.message.is_null() {
        String::new()
    } else {
        unsafe { CStr::from_ptr(result.message) }.to_string_lossy().into_owned()
    };
    let status = if result.status == sys::PXL_OK { sys::PXL_E_NOT_FOUND } else { result.status };
    Err(Error::new(Status::from_raw(status), result.http_status, message))
}

/// A load's final closure: its outcome and what it cost.
pub(crate) type DoneFn = Box<dyn FnOnce(Result<Image, Error>, Metrics) + Send>;
pub(crate) type ProgressFn = Box<dyn FnMut(u64, u64) + Send>;

/// A load's closures, behind the request's user_data from pxl_load until its one
/// callback (or until a call that failed or answered at once, which then frees it).
pub(crate) struct Pending {
    done: DoneFn,
    progress: Option<ProgressFn>,
}

impl Pending {
    pub(crate) fn into_raw(done: DoneFn, progress: Option<ProgressFn>) -> *mut Pending {
        Box::into_raw(Box::new(Pending { done, progress }))
    }

    /// Frees the closures of a request whose callback will never come.
    ///
    /// # Safety
    /// `raw` comes from into_raw and was not handed to the library for good.
    pub(crate) unsafe fn discard(raw: *mut Pending) {
        let pending = unsafe { Box::from_raw(raw) };
        call_user("dropping a load closure", move || drop(pending));
        free_deferred_loaders();
    }
}

pub(crate) unsafe extern "C" fn on_done(_token: sys::pxl_token, result: *const sys::pxl_result, user_data: *mut c_void) {
    // SAFETY: user_data is the Pending of this request; this is its one callback.
    let pending = unsafe { Box::from_raw(user_data as *mut Pending) };
    let outcome = unsafe { result_from_c(result) };
    // Valid only now, inside the library's callback.
    let metrics = unsafe { Metrics::from_result(result) }.unwrap_or_default();
    call_user("a load callback", move || {
        let Pending { done, progress } = *pending;
        drop(progress);
        done(outcome, metrics);
    });
}

pub(crate) unsafe extern "C" fn on_progress(_token: sys::pxl_token, received: u64, expected: u64, user_data: *mut c_void) {
    // SAFETY: never after the final callback, on the draining thread (one at a time).
    let progress = unsafe { &mut (*(user_data as *mut Pending)).progress };
    if let Some(progress) = progress.as_mut() {
        call_user("a progress callback", || progress(received, expected));
    }
}
