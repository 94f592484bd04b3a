//! Table-style loading: the visible rows of a scrolling list, prefetch and cancel.

use std::ffi::{c_int, c_void};
use std::ptr::{self, NonNull};

use crate::callbacks::{call_user, free_deferred_loaders, result_from_c};
use crate::convert::clamp_i32;
use crate::error::check;
use crate::request::RawRequest;
use crate::{sys, Error, Image, Loader, Queue, Request};

/// A table's configuration (`pxl_table_config`), defaults from the library.
#[derive(Debug, Clone, Copy)]
pub struct TableConfig {
    raw: sys::pxl_table_config,
}

impl TableConfig {
    pub fn new() -> TableConfig {
        let mut raw = sys::pxl_table_config::default();
        let status = unsafe { sys::pxl_table_config_init_size(&mut raw, std::mem::size_of::<sys::pxl_table_config>()) };
        assert_eq!(status, sys::PXL_OK, "pxl_table_config_init_size refused sys::pxl_table_config");
        // The row closure takes no "preview" flag yet: one call per row load, as before.
        raw.previews = 0;
        TableConfig { raw }
    }

    /// At most this many rows ahead in the scroll direction are prefetched (fewer where
    /// rows load faster than the scroll reaches them; see pixload.h).
    pub fn prefetch_rows(mut self, rows: u32) -> TableConfig {
        self.raw.prefetch_rows = clamp_i32(rows);
        self
    }

    /// Rows just behind that keep loading, where rows load within 100 ms.
    pub fn keep_rows(mut self, rows: u32) -> TableConfig {
        self.raw.keep_rows = clamp_i32(rows);
        self
    }

    pub fn visible_priority(mut self, priority: i32) -> TableConfig {
        self.raw.visible_priority = priority;
        self
    }

    pub fn prefetch_priority(mut self, priority: i32) -> TableConfig {
        self.raw.prefetch_priority = priority;
        self
    }
}

impl Default for TableConfig {
    fn default() -> Self {
        TableConfig::new()
    }
}

/// What a table did so far (`pxl_table_stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableStats {
    pub started: u64,
    pub cancelled: u64,
    pub memory_hits: u64,
    pub delivered: u64,
    pub failed: u64,
}

/// What a table hands a visible row (see [`Table::with_placeholders`]).
#[derive(Debug)]
pub enum RowUpdate {
    /// The row's placeholder ([`Request::placeholder`]), decoded: RGBA8 straight, 32
    /// pixels on its longer side (the request's width/height ratio when it gives both).
    /// Handed over inside the [`Table::set_visible`] (or [`Table::set_row_count`]) that
    /// makes the row visible, when the memory cache does not hold its image; the row's
    /// final update follows, never the other way round.
    Placeholder(Image),
    /// The row's image, or its error.
    Final(Result<Image, Error>),
}

type RequestFn = Box<dyn FnMut(i64) -> Option<Request> + Send>;
type RowFn = Box<dyn Fn(i64, RowUpdate) + Send + Sync>;

/// A table's closures. request_fn runs only inside set_visible / set_row_count (which
/// take &mut Table); row_fn also on the queue's draining thread, hence Fn + Sync. The
/// trampolines touch one field each, never the whole struct, so the two never alias.
struct TableCallbacks {
    request_fn: RequestFn,
    row_fn: RowFn,
    /// Strings of the requests request_fn made during the current table call.
    kept: Vec<RawRequest>,
}

unsafe extern "C" fn on_table_request(row: i64, request: *mut sys::pxl_request, user_data: *mut c_void) -> c_int {
    // SAFETY: user_data is the table's TableCallbacks, alive until pxl_table_free
    // returns; request_fn and `kept` are used only on the thread calling set_visible or
    // set_row_count (&mut Table).
    let callbacks = user_data as *mut TableCallbacks;
    let request_fn = unsafe { &mut (*callbacks).request_fn };
    let mut wanted = None;
    call_user("a table's request closure", || wanted = request_fn(row));
    let Some(wanted) = wanted else { return 0 };
    let raw = match wanted.to_raw() {
        Ok(raw) => raw,
        Err(e) => {
            eprintln!("pixload: row {row}'s request is not valid ({e}): the row stays without an image");
            return 0;
        }
    };
    // SAFETY: the library's request, with its defaults (and its own struct_size).
    let request = unsafe { &mut *request };
    wanted.fill(request);
    request.url = raw.raw.url;
    request.processors = raw.raw.processors;
    request.processor_count = raw.raw.processor_count;
    request.cache_key = raw.raw.cache_key;
    request.headers = raw.raw.headers;
    // Fields of 0.5.0: set only where the library's struct has them (an older library
    // draws no placeholders).
    if request.struct_size >= std::mem::offset_of!(sys::pxl_request, placeholder_length) + std::mem::size_of::<usize>() {
        request.placeholder_kind = raw.raw.placeholder_kind;
        request.placeholder = raw.raw.placeholder;
        request.placeholder_length = raw.raw.placeholder_length;
    }
    // The header says the strings need only live until this returns, but libpixload
    // 0.1.0 reads them after (pxl_table_new's provider copies the request once
    // request_fn has returned): keep them until set_visible / set_row_count returns.
    unsafe { (*callbacks).kept.push(raw) };
    1
}

unsafe extern "C" fn on_table_row(row: i64, result: *const sys::pxl_result, user_data: *mut c_void) {
    // SAFETY: as above; row_fn is Fn + Sync, so a shared reference is enough.
    let row_fn = unsafe { &(*(user_data as *const TableCallbacks)).row_fn };
    // pxl_result.preview exists since 0.3.0: read it only where the library's struct has it.
    let placeholder = unsafe {
        (*result).struct_size >= std::mem::offset_of!(sys::pxl_result, preview) + std::mem::size_of::<i32>()
            && (*result).preview == sys::PXL_PREVIEW_PLACEHOLDER
    };
    let outcome = unsafe { result_from_c(result) };
    let update = match outcome {
        Ok(image) if placeholder => RowUpdate::Placeholder(image),
        outcome => RowUpdate::Final(outcome),
    };
    call_user("a table's row closure", move || row_fn(row, update));
}

/// Table-style loading: tell the library which rows are on screen and which way the
/// user scrolls; it keeps the visible rows loading, prefetches ahead and cancels what
/// left the window. `row_fn` receives a visible row's image (or error) on the thread
/// draining the queue, or inside [`set_visible`](Table::set_visible) for rows the memory
/// cache already holds; never for a row that is not visible.
pub struct Table {
    raw: NonNull<sys::pxl_table>,
    callbacks: *mut TableCallbacks,
    /// The table posts to this queue: keep it alive while the table is.
    queue: Queue,
}

// SAFETY: the table is driven by one thread at a time (&mut self); its closures are Send.
unsafe impl Send for Table {}

impl Table {
    /// `row_fn` gets each visible row's final result only: the placeholders of requests
    /// that carry one are not handed to it (see [`Table::with_placeholders`]).
    pub fn new<R, F>(loader: &Loader, queue: &Queue, config: &TableConfig, row_count: u64, request_fn: R, row_fn: F) -> Result<Table, Error>
    where
        R: FnMut(i64) -> Option<Request> + Send + 'static,
        F: Fn(i64, Result<Image, Error>) + Send + Sync + 'static,
    {
        let row_fn = move |row, update| {
            if let RowUpdate::Final(outcome) = update {
                row_fn(row, outcome)
            }
        };
        Table::with_placeholders(loader, queue, config, row_count, request_fn, row_fn)
    }

    /// As [`Table::new`], and a row whose request carries a placeholder
    /// ([`Request::placeholder`]) gets it first, as [`RowUpdate::Placeholder`], when it
    /// becomes visible and its image is not in the memory cache: something to draw in
    /// that frame. Its [`RowUpdate::Final`] follows.
    pub fn with_placeholders<R, F>(
        loader: &Loader,
        queue: &Queue,
        config: &TableConfig,
        row_count: u64,
        request_fn: R,
        row_fn: F,
    ) -> Result<Table, Error>
    where
        R: FnMut(i64) -> Option<Request> + Send + 'static,
        F: Fn(i64, RowUpdate) + Send + Sync + 'static,
    {
        let callbacks = Box::into_raw(Box::new(TableCallbacks { request_fn: Box::new(request_fn), row_fn: Box::new(row_fn), kept: Vec::new() }));
        let mut raw = ptr::null_mut();
        let status = unsafe {
            sys::pxl_table_create(
                loader.as_ptr(),
                queue.as_ptr(),
                &config.raw,
                row_count.min(i64::MAX as u64) as i64,
                Some(on_table_request),
                Some(on_table_row),
                callbacks as *mut c_void,
                &mut raw,
            )
        };
        let raw = match (status, NonNull::new(raw)) {
            (sys::PXL_OK, Some(raw)) => raw,
            _ => {
                let callbacks = unsafe { Box::from_raw(callbacks) };
                call_user("dropping a table's closures", move || drop(callbacks));
                free_deferred_loaders();
                return Err(Error::from_raw(if status == sys::PXL_OK { sys::PXL_E_NO_MEMORY } else { status }));
            }
        };
        Ok(Table { raw, callbacks, queue: queue.clone() })
    }

    /// Rows first .. first + count - 1 are visible; direction > 0 scrolls towards higher
    /// rows, < 0 towards lower ones, 0 is still.
    pub fn set_visible(&mut self, first: i64, count: u32, direction: i32) -> Result<(), Error> {
        let count = clamp_i32(count);
        let status = unsafe { sys::pxl_table_set_visible(self.raw.as_ptr(), first, count, direction) };
        self.release_kept_requests();
        free_deferred_loaders();
        check(status)
    }

    pub fn set_row_count(&mut self, row_count: u64) -> Result<(), Error> {
        let status = unsafe { sys::pxl_table_set_row_count(self.raw.as_ptr(), row_count.min(i64::MAX as u64) as i64) };
        self.release_kept_requests();
        free_deferred_loaders();
        check(status)
    }

    fn release_kept_requests(&mut self) {
        // SAFETY: the table call that used them has returned; only this thread uses `kept`.
        unsafe { (*self.callbacks).kept.clear() }
    }

    /// Cancels every request of this table and forgets which rows were shown.
    pub fn cancel_all(&mut self) {
        unsafe { sys::pxl_table_cancel_all(self.raw.as_ptr()) }
    }

    pub fn stats(&self) -> TableStats {
        let mut s = sys::pxl_table_stats { struct_size: std::mem::size_of::<sys::pxl_table_stats>(), ..Default::default() };
        unsafe { sys::pxl_table_get_stats(self.raw.as_ptr(), &mut s) };
        TableStats { started: s.started, cancelled: s.cancelled, memory_hits: s.memory_hits, delivered: s.delivered, failed: s.failed }
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        let free = |_: *mut sys::pxl_queue| unsafe { sys::pxl_table_free(self.raw.as_ptr()) };
        // "Call it on the queue's thread, or while no other thread dispatches the queue."
        if self.queue.drained_by_this_thread() {
            free(self.queue.as_ptr());
        } else {
            self.queue.as_drainer(free);
        }
        // No row_fn runs after pxl_table_free returned: the closures can go.
        let callbacks = unsafe { Box::from_raw(self.callbacks) };
        call_user("dropping a table's closures", move || drop(callbacks));
        // A closure may have held the last reference to a loader.
        free_deferred_loaders();
    }
}
