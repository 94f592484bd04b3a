//! The request hook (pixload.h, "Request hook"): [`LoaderBuilder::request_hook`].
//!
//! The closure is asked before each http(s) transfer (first attempt, retries, every
//! redirect hop, once more after a 401 or 403) for headers to add or replace, such as a
//! bearer token. It runs on the library's network thread and must return at once: it
//! answers the [`HookCall`] there, or moves it to a thread of its own (a token refresh)
//! and answers later. A `HookCall` is answered exactly once: by [`HookCall::answer`] or
//! [`HookCall::fail`], or when dropped unanswered (failing its request as cancelled), so
//! no handle leaks.
//!
//! [`LoaderBuilder::request_hook`]: crate::LoaderBuilder::request_hook
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr::NonNull;
use std::sync::Mutex;

use crate::callbacks::call_user;
use crate::error::{Error, Status};
use crate::sys;

pub(crate) type HookFn = Box<dyn Fn(HookCall) + Send + Sync>;

/// One question to the request hook. Send it anywhere; answer it once.
pub struct HookCall {
    raw: Option<NonNull<sys::pxl_hook_call>>,
    url: String,
    headers: Vec<String>,
    status: i32,
}

// SAFETY: pxl_hook_answer and pxl_hook_fail may be called from any thread; the pointer is
// given up by the one answer (answer/fail take self).
unsafe impl Send for HookCall {}

impl HookCall {
    /// The URL of this hop.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The "Name: value" lines the transfer sends so far; after a 401 or 403 they
    /// include the token that was refused.
    pub fn headers(&self) -> &[String] {
        &self.headers
    }

    /// 0, or the 401 or 403 that made the library ask again (the request is retried once
    /// with the answer).
    pub fn status(&self) -> i32 {
        self.status
    }

    /// Lets the transfer go on with `headers` ("Name: value"), each replacing the
    /// transfer's lines of that name or added. `Ok(false)` when the call no longer waited
    /// (its request was cancelled or timed out, or the loader dropped). An invalid line
    /// (no colon, CR, LF, NUL) fails the request with [`Status::InvalidArgument`] and is
    /// that error.
    pub fn answer<S: AsRef<str>>(mut self, headers: &[S]) -> Result<bool, Error> {
        let raw = self.raw.take().expect("a HookCall is answered once");
        let lines: Result<Vec<CString>, _> = headers.iter().map(|h| CString::new(h.as_ref())).collect();
        let Ok(lines) = lines else {
            let message = c"the request hook answered with a header line holding NUL";
            unsafe { sys::pxl_hook_fail(raw.as_ptr(), sys::PXL_E_INVALID_ARGUMENT, message.as_ptr()) };
            return Err(Error::from_raw(sys::PXL_E_INVALID_ARGUMENT));
        };
        let pointers: Vec<*const c_char> = lines.iter().map(|l| l.as_ptr()).collect();
        let array = if pointers.is_empty() { std::ptr::null() } else { pointers.as_ptr() };
        match unsafe { sys::pxl_hook_answer(raw.as_ptr(), array, pointers.len()) } {
            sys::PXL_OK => Ok(true),
            sys::PXL_E_CANCELLED => Ok(false),
            status => Err(Error::from_raw(status)),
        }
    }

    /// Fails the request with `status` and `message` (which must not hold the secret).
    /// False when the call no longer waited.
    pub fn fail(mut self, status: Status, message: &str) -> bool {
        let raw = self.raw.take().expect("a HookCall is answered once");
        fail_raw(raw, status.to_raw(), Some(message))
    }
}

fn fail_raw(raw: NonNull<sys::pxl_hook_call>, status: sys::pxl_status, message: Option<&str>) -> bool {
    let message = message.map(|m| CString::new(m.replace('\0', " ")).unwrap());
    let ptr = message.as_ref().map_or(std::ptr::null(), |m| m.as_ptr());
    unsafe { sys::pxl_hook_fail(raw.as_ptr(), status, ptr) == sys::PXL_OK }
}

impl Drop for HookCall {
    fn drop(&mut self) {
        if let Some(raw) = self.raw.take() {
            fail_raw(raw, sys::PXL_E_CANCELLED, None);
        }
    }
}

pub(crate) unsafe extern "C" fn on_hook(
    url: *const c_char,
    headers: *const *const c_char,
    count: usize,
    status: i32,
    call: *mut sys::pxl_hook_call,
    user_data: *mut c_void,
) {
    // SAFETY: user_data is the HookFn the builder boxed; freed after pxl_loader_free.
    let hook = unsafe { &*(user_data as *const HookFn) };
    let Some(raw) = NonNull::new(call) else { return };
    let string = |p: *const c_char| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    let headers = (0..count).map(|i| string(unsafe { *headers.add(i) })).collect();
    let call = HookCall { raw: Some(raw), url: string(url), headers, status };
    call_user("request hook", || hook(call));
}

/// The hook closures of live loaders, by loader address: dropped after pxl_loader_free.
static HOOKS: Mutex<Option<HashMap<usize, Box<HookFn>>>> = Mutex::new(None);

pub(crate) fn keep(loader: NonNull<sys::pxl_loader>, hook: Box<HookFn>) {
    HOOKS.lock().unwrap().get_or_insert_with(HashMap::new).insert(loader.as_ptr() as usize, hook);
}

/// After pxl_loader_free(loader): its hook closure, if any, to be dropped.
pub(crate) fn forget(loader: NonNull<sys::pxl_loader>) -> Option<Box<HookFn>> {
    HOOKS.lock().unwrap().as_mut().and_then(|hooks| hooks.remove(&(loader.as_ptr() as usize)))
}
