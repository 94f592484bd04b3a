//! Safe Rust bindings of libpixload: asynchronous image loading and caching for table-
//! and grid-style user interfaces.
//!
//! A [`Loader`] downloads, decodes and caches on threads of its own; every result comes
//! back through a [`Queue`] that the host drains on a thread of its choice
//! ([`Queue::dispatch`], after [`Queue::wait`] or when [`Queue::fd`] is readable).
//! A load's closure runs exactly once, on the draining thread: with an [`Image`], an
//! [`Error`], or an error whose status is [`Status::Cancelled`].
//!
//! ```no_run
//! let loader = pixload::Loader::new()?;
//! let queue = pixload::Queue::new()?;
//! let request = pixload::Request::new("http://127.0.0.1:8080/photo.jpg").size(150, 150);
//! loader.load(&request, &queue, |result| match result {
//!     Ok(image) => println!("{}x{}", image.width(), image.height()),
//!     Err(e) => eprintln!("{e}"),
//! })?;
//! while queue.dispatch() == 0 { queue.wait(None); }
//! # Ok::<(), pixload::Error>(())
//! ```
//!
//! Lifetimes follow the header's rules: dropping a [`Queue`] (its last clone) runs the
//! closures of its unfinished requests with `Cancelled` on the dropping thread; dropping
//! a [`Loader`] cancels its requests, whose closures then run at their queue's next
//! dispatch or drop. No closure is ever lost, called twice or freed twice, and no panic
//! unwinds into C: a panicking closure is caught, reported on stderr and counted
//! ([`caught_panics`]).
#![deny(unsafe_op_in_unsafe_fn)]

pub mod sys;

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::fmt;
use std::num::NonZeroU64;
use std::os::fd::{AsRawFd, RawFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

// ---------------------------------------------------------------------------------
// Version, statuses, errors
// ---------------------------------------------------------------------------------

/// The version of the library actually loaded, "MAJOR.MINOR.PATCH".
pub fn version() -> &'static str {
    // SAFETY: static storage, never NULL, ASCII.
    unsafe { CStr::from_ptr(sys::pxl_version()) }.to_str().unwrap_or("?")
}

/// `PXL_VERSION_NUM` (0xMMmmpp) of the library actually loaded.
pub fn version_num() -> u32 {
    unsafe { sys::pxl_version_num() }
}

/// Whether a library of this `PXL_VERSION_NUM` can be used by this crate: the same
/// major.minor as `sys::PXL_VERSION_NUM` (before 1.0 a minor release may break the ABI,
/// as 0.2.0 did with the table callbacks), any patch.
pub fn version_compatible(num: u32) -> bool {
    num >> 8 == sys::PXL_VERSION_NUM >> 8
}

/// A pixload status. The C enum is append-only: a status this crate does not know yet
/// arrives as `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    Ok,
    InvalidArgument,
    MalformedUrl,
    SchemeNotAllowed,
    Dns,
    Connect,
    Tls,
    Timeout,
    Http,
    BodyTooLarge,
    NotAnImage,
    CorruptImage,
    TooManyPixels,
    Cancelled,
    LoaderClosed,
    Network,
    UnsupportedImage,
    NoMemory,
    NotFound,
    Io,
    TooManyRedirects,
    NotCached,
    /// A library the loader needs (libcurl) lacks a required feature.
    Unsupported,
    Unknown(u32),
}

const STATUSES: [Status; 23] = [
    Status::Ok,
    Status::InvalidArgument,
    Status::MalformedUrl,
    Status::SchemeNotAllowed,
    Status::Dns,
    Status::Connect,
    Status::Tls,
    Status::Timeout,
    Status::Http,
    Status::BodyTooLarge,
    Status::NotAnImage,
    Status::CorruptImage,
    Status::TooManyPixels,
    Status::Cancelled,
    Status::LoaderClosed,
    Status::Network,
    Status::UnsupportedImage,
    Status::NoMemory,
    Status::NotFound,
    Status::Io,
    Status::TooManyRedirects,
    Status::NotCached,
    Status::Unsupported,
];

impl Status {
    pub fn from_raw(raw: sys::pxl_status) -> Status {
        STATUSES.get(raw as usize).copied().unwrap_or(Status::Unknown(raw))
    }

    pub fn to_raw(self) -> sys::pxl_status {
        match self {
            Status::Unknown(raw) => raw,
            known => STATUSES.iter().position(|s| *s == known).unwrap() as sys::pxl_status,
        }
    }

    /// The library's short English description ("cancelled").
    pub fn description(self) -> &'static str {
        // SAFETY: static storage, never NULL, also for unknown values.
        unsafe { CStr::from_ptr(sys::pxl_status_string(self.to_raw())) }.to_str().unwrap_or("?")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

/// A failed call or a failed load: the status, the last HTTP status seen (0 if none) and
/// what went wrong, in English.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    http_status: i32,
    message: String,
}

impl Error {
    pub fn new(status: Status, http_status: i32, message: impl Into<String>) -> Error {
        Error { status, http_status, message: message.into() }
    }

    fn from_raw(raw: sys::pxl_status) -> Error {
        let status = Status::from_raw(raw);
        Error::new(status, 0, status.description())
    }

    fn invalid(message: impl Into<String>) -> Error {
        Error::new(Status::InvalidArgument, 0, message)
    }

    pub fn status(&self) -> Status {
        self.status
    }

    /// The last HTTP status seen, 0 if none (file://, no response, a refused call).
    pub fn http_status(&self) -> i32 {
        self.http_status
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn is_cancelled(&self) -> bool {
        self.status == Status::Cancelled
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let description = self.status.description();
        if self.message.is_empty() || self.message == description {
            f.write_str(description)?;
        } else {
            write!(f, "{description}: {}", self.message)?;
        }
        if self.http_status != 0 && !self.message.contains(&self.http_status.to_string()) {
            write!(f, " (HTTP {})", self.http_status)?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

fn check(raw: sys::pxl_status) -> Result<(), Error> {
    if raw == sys::PXL_OK { Ok(()) } else { Err(Error::from_raw(raw)) }
}

// ---------------------------------------------------------------------------------
// Formats, modes, flags
// ---------------------------------------------------------------------------------

/// Pixel formats of decoded images.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Format {
    /// R,G,B,A with straight alpha.
    #[default]
    Rgba8,
    /// R,G,B,A, colour premultiplied by alpha.
    Rgba8Premul,
    /// B,G,R,A premultiplied: Cairo ARGB32 and Skia N32 on little-endian machines.
    Bgra8Premul,
    /// R,G,B; alpha dropped.
    Rgb8,
    /// Luma; alpha dropped.
    Gray8,
}

impl Format {
    pub fn from_raw(raw: sys::pxl_format) -> Option<Format> {
        Some(match raw {
            sys::PXL_FORMAT_RGBA8 => Format::Rgba8,
            sys::PXL_FORMAT_RGBA8_PREMUL => Format::Rgba8Premul,
            sys::PXL_FORMAT_BGRA8_PREMUL => Format::Bgra8Premul,
            sys::PXL_FORMAT_RGB8 => Format::Rgb8,
            sys::PXL_FORMAT_GRAY8 => Format::Gray8,
            _ => return None,
        })
    }

    pub fn to_raw(self) -> sys::pxl_format {
        match self {
            Format::Rgba8 => sys::PXL_FORMAT_RGBA8,
            Format::Rgba8Premul => sys::PXL_FORMAT_RGBA8_PREMUL,
            Format::Bgra8Premul => sys::PXL_FORMAT_BGRA8_PREMUL,
            Format::Rgb8 => sys::PXL_FORMAT_RGB8,
            Format::Gray8 => sys::PXL_FORMAT_GRAY8,
        }
    }

    pub fn bytes_per_pixel(self) -> usize {
        match self {
            Format::Rgba8 | Format::Rgba8Premul | Format::Bgra8Premul => 4,
            Format::Rgb8 => 3,
            Format::Gray8 => 1,
        }
    }
}

/// How an image is fitted to a request's target size (see `pxl_mode` in the header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Scale to fit inside the target, keeping the aspect ratio.
    #[default]
    Fit,
    /// Scale to cover the target, then crop the centre to exactly it.
    Fill,
}

impl Mode {
    pub fn to_raw(self) -> sys::pxl_mode {
        match self {
            Mode::Fit => sys::PXL_MODE_FIT,
            Mode::Fill => sys::PXL_MODE_FILL,
        }
    }
}

/// Suggested request priorities: any i32, higher runs first.
pub mod priority {
    pub const PREFETCH: i32 = crate::sys::PXL_PRIORITY_PREFETCH;
    pub const NORMAL: i32 = crate::sys::PXL_PRIORITY_NORMAL;
    pub const VISIBLE: i32 = crate::sys::PXL_PRIORITY_VISIBLE;
}

/// URL schemes a loader accepts ([`LoaderBuilder::allowed_schemes`]).
pub mod scheme {
    pub const HTTP: u32 = crate::sys::PXL_SCHEME_HTTP;
    pub const HTTPS: u32 = crate::sys::PXL_SCHEME_HTTPS;
    pub const FILE: u32 = crate::sys::PXL_SCHEME_FILE;
}

fn c_string(what: &str, text: &str) -> Result<CString, Error> {
    CString::new(text).map_err(|_| Error::invalid(format!("{what} contains a NUL byte")))
}

fn path_string(what: &str, path: &Path) -> Result<CString, Error> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::invalid(format!("{what} contains a NUL byte")))
}

fn millis(duration: Duration) -> i32 {
    duration.as_millis().min(i32::MAX as u128) as i32
}

fn clamp_i32(value: u32) -> i32 {
    value.min(i32::MAX as u32) as i32
}

/// A NULL-terminated array of pointers into `lines`, valid while `lines` lives.
fn header_pointers(lines: &[CString]) -> Vec<*const c_char> {
    lines.iter().map(|l| l.as_ptr()).chain(std::iter::once(ptr::null())).collect()
}

// ---------------------------------------------------------------------------------
// Images
// ---------------------------------------------------------------------------------

/// An immutable, reference-counted decoded image. Cloning adds a reference; dropping
/// releases one. The memory cache holds its own, so a trim never frees pixels held here.
pub struct Image {
    raw: NonNull<sys::pxl_image>,
}

// SAFETY: a pxl_image is immutable and its reference count is thread-safe (header,
// "Threads": a pxl_image may be read from any thread).
unsafe impl Send for Image {}
unsafe impl Sync for Image {}

impl Image {
    /// Takes a new reference to a borrowed image (a callback's).
    ///
    /// # Safety
    /// `raw` must be NULL or a live image.
    pub unsafe fn retain(raw: *mut sys::pxl_image) -> Option<Image> {
        // SAFETY: per the caller.
        NonNull::new(unsafe { sys::pxl_image_retain(raw) }).map(|raw| Image { raw })
    }

    /// Adopts a reference the caller owns (pxl_lookup's, pxl_bind's).
    ///
    /// # Safety
    /// `raw` must be NULL or an owned reference to a live image.
    pub unsafe fn from_raw(raw: *mut sys::pxl_image) -> Option<Image> {
        NonNull::new(raw).map(|raw| Image { raw })
    }

    pub fn as_ptr(&self) -> *mut sys::pxl_image {
        self.raw.as_ptr()
    }

    pub fn width(&self) -> u32 {
        unsafe { sys::pxl_image_width(self.raw.as_ptr()) as u32 }
    }

    pub fn height(&self) -> u32 {
        unsafe { sys::pxl_image_height(self.raw.as_ptr()) as u32 }
    }

    /// Bytes per row, at least `width * format.bytes_per_pixel()`.
    pub fn stride(&self) -> usize {
        unsafe { sys::pxl_image_stride(self.raw.as_ptr()) as usize }
    }

    pub fn format(&self) -> Format {
        let raw = unsafe { sys::pxl_image_format(self.raw.as_ptr()) };
        // An image has the format its request asked for, and requests only take Format.
        Format::from_raw(raw).unwrap_or_else(|| panic!("pixload returned an unknown pixel format {raw}"))
    }

    /// The source's size after EXIF orientation, before any scaling.
    pub fn original_width(&self) -> u32 {
        unsafe { sys::pxl_image_original_width(self.raw.as_ptr()) as u32 }
    }

    pub fn original_height(&self) -> u32 {
        unsafe { sys::pxl_image_original_height(self.raw.as_ptr()) as u32 }
    }

    /// All rows: row y starts at `y * stride()`.
    pub fn pixels(&self) -> &[u8] {
        let len = unsafe { sys::pxl_image_byte_count(self.raw.as_ptr()) };
        let data = unsafe { sys::pxl_image_pixels(self.raw.as_ptr()) };
        if data.is_null() || len == 0 {
            return &[];
        }
        // SAFETY: stride * height bytes, immutable, valid while this reference is held.
        unsafe { std::slice::from_raw_parts(data, len) }
    }

    /// Frames of an animation (requested with [`Request::animate`]); 1 for a still image.
    pub fn frame_count(&self) -> u32 {
        unsafe { sys::pxl_image_frame_count(self.raw.as_ptr()) as u32 }
    }

    /// Frames of the source: more than `frame_count` without [`Request::animate`], or
    /// past `PXL_ANIMATION_MAX_BYTES` (then only the first frame is kept).
    pub fn source_frame_count(&self) -> u32 {
        unsafe { sys::pxl_image_source_frame_count(self.raw.as_ptr()) as u32 }
    }

    /// How often the animation plays; 0 = forever (also for a still image).
    pub fn loop_count(&self) -> u32 {
        unsafe { sys::pxl_image_loop_count(self.raw.as_ptr()) as u32 }
    }

    /// Frame `index`'s duration in milliseconds as the file says it; None out of range.
    pub fn frame_duration_ms(&self, index: u32) -> Option<u32> {
        let ms = unsafe { sys::pxl_image_frame_duration_ms(self.raw.as_ptr(), index.min(i32::MAX as u32) as i32) };
        (ms >= 0).then_some(ms as u32)
    }

    /// Frame `index`'s rows, laid out as [`Image::pixels`] (frame 0 is `pixels()`); None
    /// out of range.
    pub fn frame_pixels(&self, index: u32) -> Option<&[u8]> {
        let data = unsafe { sys::pxl_image_frame_pixels(self.raw.as_ptr(), index.min(i32::MAX as u32) as i32) };
        let len = unsafe { sys::pxl_image_byte_count(self.raw.as_ptr()) };
        if data.is_null() {
            return None;
        }
        // SAFETY: every frame has the image's stride * height bytes, immutable, valid
        // while this reference is held.
        Some(unsafe { std::slice::from_raw_parts(data, len) })
    }

    /// Row y without the stride's padding; panics when y >= height.
    pub fn row(&self, y: u32) -> &[u8] {
        assert!(y < self.height(), "row {y} of an image {} high", self.height());
        let start = y as usize * self.stride();
        &self.pixels()[start..start + self.width() as usize * self.format().bytes_per_pixel()]
    }
}

impl Clone for Image {
    fn clone(&self) -> Image {
        // SAFETY: self holds a reference, so the image is live.
        unsafe { Image::retain(self.raw.as_ptr()) }.expect("pxl_image_retain returned NULL")
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        unsafe { sys::pxl_image_release(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Image {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Image")
            .field("width", &self.width())
            .field("height", &self.height())
            .field("stride", &self.stride())
            .field("format", &self.format())
            .field("original", &(self.original_width(), self.original_height()))
            .finish()
    }
}

// ---------------------------------------------------------------------------------
// Callbacks: the C boundary
// ---------------------------------------------------------------------------------

static CAUGHT_PANICS: AtomicUsize = AtomicUsize::new(0);

/// How many panics of user closures were caught at the C boundary so far (each was also
/// reported on stderr). A panic never unwinds into the library.
pub fn caught_panics() -> usize {
    CAUGHT_PANICS.load(Ordering::SeqCst)
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
    /// Loaders dropped inside such a closure (with their log closures): pxl_loader_free
    /// must not run there.
    static DEFERRED_LOADERS: RefCell<Vec<(NonNull<sys::pxl_loader>, *mut LogFn)>> = const { RefCell::new(Vec::new()) };
    /// A per-thread address, to tell which thread drains a queue.
    static THREAD_KEY: u8 = const { 0 };
}

fn thread_key() -> usize {
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

/// Frees the loaders dropped inside callbacks, once this thread is out of every
/// callback. Called after each C call that may run callbacks.
fn free_deferred_loaders() {
    if in_callback() {
        return;
    }
    let loaders = DEFERRED_LOADERS.try_with(|l| std::mem::take(&mut *l.borrow_mut())).unwrap_or_default();
    for (loader, log) in loaders {
        unsafe { free_loader(loader, log) }
    }
}

/// pxl_loader_free, then the loader's log closure: the library never calls it after
/// pxl_loader_free returned.
///
/// # Safety
/// `raw` is a live loader not used afterwards; `log` is NULL or its log closure from
/// Box::into_raw.
unsafe fn free_loader(raw: NonNull<sys::pxl_loader>, log: *mut LogFn) {
    unsafe { sys::pxl_loader_free(raw.as_ptr()) };
    if !log.is_null() {
        let log = unsafe { Box::from_raw(log) };
        call_user("dropping the log closure", move || drop(log));
        // The closure may have held the last reference to another loader.
        free_deferred_loaders();
    }
}

/// Runs a user closure: marks the thread as inside a callback and stops panics.
fn call_user(what: &str, f: impl FnOnce()) {
    let _scope = CallbackScope::enter();
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        report_panic(what, payload);
    }
}

/// # Safety
/// `result` must point to a live pxl_result (a callback's).
unsafe fn result_from_c(result: *const sys::pxl_result) -> Result<Image, Error> {
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

type DoneFn = Box<dyn FnOnce(Result<Image, Error>) + Send>;
type ProgressFn = Box<dyn FnMut(u64, u64) + Send>;

/// A load's closures, behind the request's user_data from pxl_load until its one
/// callback (or until a call that failed or answered at once, which then frees it).
struct Pending {
    done: DoneFn,
    progress: Option<ProgressFn>,
}

impl Pending {
    fn into_raw(done: DoneFn, progress: Option<ProgressFn>) -> *mut Pending {
        Box::into_raw(Box::new(Pending { done, progress }))
    }

    /// Frees the closures of a request whose callback will never come.
    ///
    /// # Safety
    /// `raw` comes from into_raw and was not handed to the library for good.
    unsafe fn discard(raw: *mut Pending) {
        let pending = unsafe { Box::from_raw(raw) };
        call_user("dropping a load closure", move || drop(pending));
        free_deferred_loaders();
    }
}

unsafe extern "C" fn on_done(_token: sys::pxl_token, result: *const sys::pxl_result, user_data: *mut c_void) {
    // SAFETY: user_data is the Pending of this request; this is its one callback.
    let pending = unsafe { Box::from_raw(user_data as *mut Pending) };
    let outcome = unsafe { result_from_c(result) };
    call_user("a load callback", move || {
        let Pending { done, progress } = *pending;
        drop(progress);
        done(outcome);
    });
}

unsafe extern "C" fn on_progress(_token: sys::pxl_token, received: u64, expected: u64, user_data: *mut c_void) {
    // SAFETY: never after the final callback, on the draining thread (one at a time).
    let progress = unsafe { &mut (*(user_data as *mut Pending)).progress };
    if let Some(progress) = progress.as_mut() {
        call_user("a progress callback", || progress(received, expected));
    }
}

// ---------------------------------------------------------------------------------
// Queues
// ---------------------------------------------------------------------------------

struct QueueInner {
    raw: NonNull<sys::pxl_queue>,
    /// One drainer (dispatch, wait, a table's free) at a time, as the header requires.
    drainer: Mutex<()>,
    /// thread_key() of the thread holding `drainer`, 0 for none.
    drainer_thread: AtomicUsize,
}

// SAFETY: fd, wakeup and pending are any-thread; draining is serialized by `drainer`.
unsafe impl Send for QueueInner {}
unsafe impl Sync for QueueInner {}

impl Drop for QueueInner {
    fn drop(&mut self) {
        // The last handle is gone, so nobody dispatches (that holds a handle) and this is
        // not inside one of this queue's callbacks (the dispatcher's handle would be
        // alive). The free runs the unfinished requests' closures, CANCELLED, here.
        unsafe { sys::pxl_queue_free(self.raw.as_ptr()) };
        free_deferred_loaders();
    }
}

/// A completion queue: every closure of a request runs on a thread that drains the
/// request's queue. A handle: clones share one queue, freed with the last clone.
///
/// One thread drains at a time ([`dispatch`](Queue::dispatch) and [`wait`](Queue::wait)
/// from another thread block until it is done); [`fd`](Queue::fd),
/// [`wakeup`](Queue::wakeup) and [`pending`](Queue::pending) never block.
#[derive(Clone)]
pub struct Queue {
    inner: Arc<QueueInner>,
}

impl Queue {
    pub fn new() -> Result<Queue, Error> {
        let mut raw = ptr::null_mut();
        check(unsafe { sys::pxl_queue_new(&mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::from_raw(sys::PXL_E_NO_MEMORY))?;
        Ok(Queue { inner: Arc::new(QueueInner { raw, drainer: Mutex::new(()), drainer_thread: AtomicUsize::new(0) }) })
    }

    pub fn as_ptr(&self) -> *mut sys::pxl_queue {
        self.inner.raw.as_ptr()
    }

    /// An eventfd, readable while completions are pending. Owned by the queue: poll it,
    /// never read, write or close it.
    pub fn fd(&self) -> RawFd {
        unsafe { sys::pxl_queue_fd(self.as_ptr()) }
    }

    /// Completions waiting to be dispatched.
    pub fn pending(&self) -> usize {
        unsafe { sys::pxl_queue_pending(self.as_ptr()) }.max(0) as usize
    }

    /// Runs every pending closure on this thread; returns how many ran. Never blocks on
    /// the network. From inside one of this queue's own closures it does nothing.
    pub fn dispatch(&self) -> usize {
        self.dispatch_max(0)
    }

    /// Runs up to `max` pending closures (all of them when `max` is 0).
    pub fn dispatch_max(&self, max: usize) -> usize {
        let max = max.min(i32::MAX as usize) as i32;
        let ran = self.as_drainer(|raw| unsafe { sys::pxl_queue_dispatch(raw, max) }).unwrap_or(0);
        free_deferred_loaders();
        ran.max(0) as usize
    }

    /// Blocks until a completion is pending, [`wakeup`](Queue::wakeup) is called, or the
    /// timeout passes (`None`: no limit). Returns the number pending. Runs no closure.
    pub fn wait(&self, timeout: Option<Duration>) -> usize {
        let ms = timeout.map_or(-1, millis);
        self.as_drainer(|raw| unsafe { sys::pxl_queue_wait(raw, ms) }).unwrap_or(0).max(0) as usize
    }

    /// Makes a [`wait`](Queue::wait) in progress (or the next one) return early.
    pub fn wakeup(&self) {
        unsafe { sys::pxl_queue_wakeup(self.as_ptr()) }
    }

    /// Runs f as the queue's one drainer; None when this thread already drains it (f
    /// would be re-entered from one of the queue's callbacks).
    fn as_drainer<R>(&self, f: impl FnOnce(*mut sys::pxl_queue) -> R) -> Option<R> {
        let me = thread_key();
        if self.inner.drainer_thread.load(Ordering::SeqCst) == me {
            return None;
        }
        let _guard = self.inner.drainer.lock().unwrap_or_else(|e| e.into_inner());
        self.inner.drainer_thread.store(me, Ordering::SeqCst);
        struct Release<'a>(&'a AtomicUsize);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.store(0, Ordering::SeqCst);
            }
        }
        let _release = Release(&self.inner.drainer_thread);
        Some(f(self.as_ptr()))
    }

    fn drained_by_this_thread(&self) -> bool {
        self.inner.drainer_thread.load(Ordering::SeqCst) == thread_key()
    }
}

impl AsRawFd for Queue {
    fn as_raw_fd(&self) -> RawFd {
        self.fd()
    }
}

impl fmt::Debug for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue").field("fd", &self.fd()).field("pending", &self.pending()).finish()
    }
}

// ---------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------

/// One accepted request of a loader; never 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token(NonZeroU64);

impl Token {
    pub fn get(self) -> u64 {
        self.0.get()
    }

    fn from_raw(raw: sys::pxl_token) -> Option<Token> {
        NonZeroU64::new(raw).map(Token)
    }
}

/// What to load and how: a builder. Defaults are the library's (`pxl_request_init`):
/// original size, [`Mode::Fit`], [`Format::Rgba8`], normal priority, no flags.
#[derive(Clone, Debug)]
pub struct Request {
    url: String,
    cache_key: Option<String>,
    width: u32,
    height: u32,
    mode: Mode,
    format: Format,
    priority: i32,
    flags: u32,
    headers: Vec<String>,
    progress_interval_ms: i32,
}

/// A request's C strings, alive while its pxl_request is in use.
struct RawRequest {
    raw: sys::pxl_request,
    _url: CString,
    _cache_key: Option<CString>,
    _headers: Vec<CString>,
    _header_pointers: Vec<*const c_char>,
}

impl Request {
    pub fn new(url: impl Into<String>) -> Request {
        let defaults = default_request();
        Request {
            url: url.into(),
            cache_key: None,
            width: defaults.width.max(0) as u32,
            height: defaults.height.max(0) as u32,
            mode: if defaults.mode == sys::PXL_MODE_FILL as i32 { Mode::Fill } else { Mode::Fit },
            format: Format::from_raw(defaults.format as sys::pxl_format).unwrap_or_default(),
            priority: defaults.priority,
            flags: defaults.flags,
            headers: Vec::new(),
            progress_interval_ms: defaults.progress_interval_ms,
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Target size; 0 for a side leaves it unconstrained, 0x0 is the original size.
    pub fn size(mut self, width: u32, height: u32) -> Request {
        self.width = width;
        self.height = height;
        self
    }

    pub fn mode(mut self, mode: Mode) -> Request {
        self.mode = mode;
        self
    }

    pub fn format(mut self, format: Format) -> Request {
        self.format = format;
        self
    }

    /// Higher runs first; see [`priority`].
    pub fn priority(mut self, priority: i32) -> Request {
        self.priority = priority;
        self
    }

    /// Requests with equal keys share one download and one cache entry (signed URLs).
    pub fn cache_key(mut self, key: impl Into<String>) -> Request {
        self.cache_key = Some(key.into());
        self
    }

    /// A "Name: value" line sent with this request (besides the loader's).
    pub fn header(mut self, line: impl Into<String>) -> Request {
        self.headers.push(line.into());
        self
    }

    /// Raw PXL_FLAG_* bits, replacing those set so far.
    pub fn flags(mut self, flags: u32) -> Request {
        self.flags = flags;
        self
    }

    fn flag(mut self, flag: u32, on: bool) -> Request {
        if on { self.flags |= flag } else { self.flags &= !flag }
        self
    }

    /// Do not apply EXIF orientation.
    pub fn ignore_orientation(self, on: bool) -> Request {
        self.flag(sys::PXL_FLAG_IGNORE_ORIENTATION, on)
    }

    /// Neither read nor write the memory cache.
    pub fn skip_memory_cache(self, on: bool) -> Request {
        self.flag(sys::PXL_FLAG_SKIP_MEMORY_CACHE, on)
    }

    /// Ignore what the caches hold (they are still written): a forced refresh.
    pub fn reload(self, on: bool) -> Request {
        self.flag(sys::PXL_FLAG_RELOAD, on)
    }

    /// Memory, then disk, never the network; a miss fails with [`Status::NotCached`].
    pub fn cache_only(self, on: bool) -> Request {
        self.flag(sys::PXL_FLAG_CACHE_ONLY, on)
    }

    /// Every frame of an animated image ([`Image::frame_count`]); off: the first frame.
    pub fn animate(self, on: bool) -> Request {
        self.flag(sys::PXL_FLAG_ANIMATE, on)
    }

    /// Keep the decoded values: no conversion of an embedded colour profile to sRGB
    /// (a variant of its own in the caches). Since 0.4.0.
    pub fn no_color_management(self, on: bool) -> Request {
        self.flag(sys::PXL_FLAG_NO_COLOR_MANAGEMENT, on)
    }

    /// At most one progress call per interval (for [`Loader::load_with_progress`]).
    pub fn progress_interval(mut self, interval: Duration) -> Request {
        self.progress_interval_ms = millis(interval);
        self
    }

    fn to_raw(&self) -> Result<RawRequest, Error> {
        let url = c_string("the URL", &self.url)?;
        let cache_key = self.cache_key.as_deref().map(|k| c_string("the cache key", k)).transpose()?;
        let headers = self.headers.iter().map(|h| c_string("a header line", h)).collect::<Result<Vec<_>, _>>()?;
        let header_pointers = header_pointers(&headers);
        let mut raw = default_request();
        self.fill(&mut raw);
        raw.url = url.as_ptr();
        raw.cache_key = cache_key.as_ref().map_or(ptr::null(), |k| k.as_ptr());
        raw.headers = if headers.is_empty() { ptr::null() } else { header_pointers.as_ptr() };
        Ok(RawRequest { raw, _url: url, _cache_key: cache_key, _headers: headers, _header_pointers: header_pointers })
    }

    /// The non-string fields. Values beyond i32 pass as i32::MAX: the library then
    /// refuses them or treats them as "very large", as it documents.
    fn fill(&self, raw: &mut sys::pxl_request) {
        raw.width = clamp_i32(self.width);
        raw.height = clamp_i32(self.height);
        raw.mode = self.mode.to_raw() as i32;
        raw.format = self.format.to_raw() as i32;
        raw.priority = self.priority;
        raw.flags = self.flags;
        raw.progress_interval_ms = self.progress_interval_ms;
    }
}

/// The library's request defaults, struct_size = our size_of (pxl_request_init_size: the
/// library then reads every field we have, and none we do not).
fn default_request() -> sys::pxl_request {
    let mut raw = std::mem::MaybeUninit::<sys::pxl_request>::zeroed();
    // SAFETY: fills all size_of::<pxl_request>() bytes (zeroed first anyway).
    unsafe {
        let status = sys::pxl_request_init_size(raw.as_mut_ptr(), std::mem::size_of::<sys::pxl_request>());
        assert_eq!(status, sys::PXL_OK, "pxl_request_init_size refused sys::pxl_request");
        raw.assume_init()
    }
}

/// The slot of a reused view (a cell) for [`Loader::bind`]: the token of its current
/// load, none at first.
#[derive(Debug, Default)]
pub struct Slot {
    token: sys::pxl_token,
}

impl Slot {
    pub fn new() -> Slot {
        Slot::default()
    }

    pub fn token(&self) -> Option<Token> {
        Token::from_raw(self.token)
    }
}

/// What [`Loader::prefetch`] did: one token per request (None where it was refused),
/// and the first refusal's error, if any.
#[derive(Debug)]
pub struct Prefetch {
    pub tokens: Vec<Option<Token>>,
    pub result: Result<(), Error>,
}

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
}

// ---------------------------------------------------------------------------------
// Loaders
// ---------------------------------------------------------------------------------

/// The severity of a library log line ([`LoaderBuilder::log`]); lower is more severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LogLevel {
    /// Something failed that the library worked around.
    Error,
    /// Degraded: a disk cache turned off, an entry dropped.
    Warning,
    Info,
}

impl LogLevel {
    /// A level above `PXL_LOG_INFO` (from a newer library) reads as `Info`.
    pub fn from_raw(raw: i32) -> LogLevel {
        match raw {
            i32::MIN..=sys::PXL_LOG_ERROR => LogLevel::Error,
            sys::PXL_LOG_WARNING => LogLevel::Warning,
            _ => LogLevel::Info,
        }
    }

    pub fn to_raw(self) -> i32 {
        match self {
            LogLevel::Error => sys::PXL_LOG_ERROR,
            LogLevel::Warning => sys::PXL_LOG_WARNING,
            LogLevel::Info => sys::PXL_LOG_INFO,
        }
    }
}

type LogFn = Box<dyn Fn(LogLevel, &str) + Send + Sync>;

unsafe extern "C" fn on_log(level: i32, message: *const c_char, user_data: *mut c_void) {
    // SAFETY: user_data is the loader's LogFn, freed only after pxl_loader_free returned
    // ("never called after"); Fn + Sync, so calls on several threads at once are fine.
    let log = unsafe { &*(user_data as *const LogFn) };
    call_user("the log closure", || {
        let text = if message.is_null() {
            std::borrow::Cow::Borrowed("")
        } else {
            // SAFETY: a NUL-terminated line, borrowed for this call.
            unsafe { CStr::from_ptr(message) }.to_string_lossy()
        };
        log(LogLevel::from_raw(level), &text)
    });
}

/// A loader's configuration: a builder over `pxl_config`, defaults from the library.
pub struct LoaderBuilder {
    config: sys::pxl_config,
    user_agent: Option<String>,
    ca_file: Option<std::path::PathBuf>,
    disk_cache_dir: Option<std::path::PathBuf>,
    headers: Vec<String>,
    log: Option<LogFn>,
}

macro_rules! config_setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty => |$c:ident, $v:ident| $body:expr;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, $v: $ty) -> LoaderBuilder {
                let $c = &mut self.config;
                $body;
                self
            }
        )*
    };
}

impl LoaderBuilder {
    pub fn new() -> LoaderBuilder {
        let mut config = std::mem::MaybeUninit::<sys::pxl_config>::zeroed();
        // SAFETY: fills all size_of::<pxl_config>() bytes, struct_size = that size (so the
        // library reads every field we have; 0.1.0's pxl_config_init would set its own).
        let config = unsafe {
            let status = sys::pxl_config_init_size(config.as_mut_ptr(), std::mem::size_of::<sys::pxl_config>());
            assert_eq!(status, sys::PXL_OK, "pxl_config_init_size refused sys::pxl_config");
            config.assume_init()
        };
        LoaderBuilder { config, user_agent: None, ca_file: None, disk_cache_dir: None, headers: Vec::new(), log: None }
    }

    config_setters! {
        /// Decoded-image cache budget; 0 disables the memory cache.
        memory_cache_bytes: u64 => |c, v| c.memory_cache_bytes = v;
        /// At most this many decoded images in memory.
        memory_cache_count: u32 => |c, v| c.memory_cache_count = clamp_i32(v);
        max_concurrent_downloads: u32 => |c, v| c.max_concurrent_downloads = clamp_i32(v);
        max_downloads_per_host: u32 => |c, v| c.max_downloads_per_host = clamp_i32(v);
        /// 0: one per CPU core.
        decode_threads: u32 => |c, v| c.decode_threads = clamp_i32(v);
        /// Zero: libcurl's own (300 s).
        connect_timeout: Duration => |c, v| c.connect_timeout_ms = millis(v);
        /// The whole transfer; zero: no limit.
        timeout: Duration => |c, v| c.timeout_ms = millis(v);
        /// No body bytes for this long fails the transfer; zero disables.
        stall_timeout: Duration => |c, v| c.stall_timeout_ms = millis(v);
        max_body_bytes: u64 => |c, v| c.max_body_bytes = v;
        max_pixels: u64 => |c, v| c.max_pixels = v;
        /// [`scheme`] bits.
        allowed_schemes: u32 => |c, v| c.allowed_schemes = v;
        max_redirects: u32 => |c, v| c.max_redirects = clamp_i32(v);
        max_retries: u32 => |c, v| c.max_retries = clamp_i32(v);
        retry_base_delay: Duration => |c, v| c.retry_base_delay_ms = millis(v);
        retry_max_delay: Duration => |c, v| c.retry_max_delay_ms = millis(v);
        /// Running transfers cancelled per second beyond which new ones wait; 0 disables.
        cancel_storm_limit: u32 => |c, v| c.cancel_storm_limit = clamp_i32(v);
        /// Disk cache of encoded bytes; 0 (default): none.
        disk_cache_bytes: u64 => |c, v| c.disk_cache_bytes = v;
        /// Zero: no age limit.
        disk_cache_max_age: Duration => |c, v| c.disk_cache_max_age_s = v.as_secs().min(i64::MAX as u64) as i64;
        /// Every stored copy is fresh until evicted, whatever the server said.
        ignore_http_freshness: bool => |c, v| c.ignore_http_freshness = v as i32;
        /// The most verbose level passed to the [`log`](LoaderBuilder::log) closure
        /// (default [`LogLevel::Warning`]).
        log_level: LogLevel => |c, v| c.log_level = v.to_raw();
        /// Decoded thumbnails whose sides are both at most this are also kept in the disk
        /// cache, so that a later start delivers them without decoding; default 256; 0: off.
        disk_variant_max_side: u32 => |c, v| c.disk_variant_max_side = i64::from(v);
    }

    /// Receives the library's diagnostics (a disk cache directory it cannot use, a
    /// corrupt cache entry dropped): a level and one line without a newline. Runs on the
    /// library's threads, possibly several at once: keep it quick, and call no pixload
    /// function from it. A panic is caught (see [`caught_panics`]). Dropped after the
    /// loader is freed. Without it the library is silent.
    pub fn log<F>(mut self, log: F) -> LoaderBuilder
    where
        F: Fn(LogLevel, &str) + Send + Sync + 'static,
    {
        self.log = Some(Box::new(log));
        self
    }

    pub fn user_agent(mut self, agent: impl Into<String>) -> LoaderBuilder {
        self.user_agent = Some(agent.into());
        self
    }

    /// PEM file of the CAs that verify https servers (default: the system's).
    pub fn ca_file(mut self, path: impl AsRef<Path>) -> LoaderBuilder {
        self.ca_file = Some(path.as_ref().to_path_buf());
        self
    }

    pub fn disk_cache_dir(mut self, path: impl AsRef<Path>) -> LoaderBuilder {
        self.disk_cache_dir = Some(path.as_ref().to_path_buf());
        self
    }

    /// A "Name: value" line sent with every request.
    pub fn header(mut self, line: impl Into<String>) -> LoaderBuilder {
        self.headers.push(line.into());
        self
    }

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
        let disk_cache_dir = self.disk_cache_dir.as_deref().map(|p| path_string("the disk cache directory", p)).transpose()?;
        let headers = self.headers.iter().map(|h| c_string("a header line", h)).collect::<Result<Vec<_>, _>>()?;
        let header_pointers = header_pointers(&headers);
        let mut config = self.config;
        config.user_agent = user_agent.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        config.ca_file = ca_file.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        config.disk_cache_dir = disk_cache_dir.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        config.headers = if headers.is_empty() { ptr::null() } else { header_pointers.as_ptr() };
        // Owned by the Loader from here on (freed after pxl_loader_free).
        let log = self.log.map_or(ptr::null_mut(), |f| Box::into_raw(Box::new(f)));
        if !log.is_null() {
            config.log = Some(on_log);
            config.log_user_data = log as *mut c_void;
        }
        let mut raw = ptr::null_mut();
        // SAFETY: the strings live until the call returns; the library copies them.
        let status = unsafe { sys::pxl_loader_new(&config, &mut raw) };
        match (status, NonNull::new(raw)) {
            (sys::PXL_OK, Some(raw)) => Ok(Loader { raw, log }),
            (status, _) => {
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

impl Default for LoaderBuilder {
    fn default() -> Self {
        LoaderBuilder::new()
    }
}

/// Downloads, decodes and caches images on threads of its own. Usable from any thread
/// (share it with `Arc`). Dropping it cancels its requests: their closures run, with
/// [`Status::Cancelled`], at their queue's next dispatch or drop. Dropped inside one of
/// the library's callbacks, it is freed once that callback's dispatch returns (the
/// library forbids freeing a loader from a callback).
pub struct Loader {
    raw: NonNull<sys::pxl_loader>,
    /// The log closure (Box::into_raw), NULL for none; freed after pxl_loader_free.
    log: *mut LogFn,
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
    pub fn load<F>(&self, request: &Request, queue: &Queue, done: F) -> Result<Token, Error>
    where
        F: FnOnce(Result<Image, Error>) + Send + 'static,
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
        self.start(request, queue, Box::new(done), Some(Box::new(progress)))
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
        let pending = Pending::into_raw(Box::new(done), None);
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
        }
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        if in_callback() {
            // "Must not be called from a callback of this loader's requests": free it
            // once the dispatch (or queue free, or table call) around us returns.
            let (raw, log) = (self.raw, self.log);
            let deferred = DEFERRED_LOADERS.try_with(|l| l.borrow_mut().push((raw, log))).is_ok();
            if deferred {
                return;
            }
        }
        unsafe { free_loader(self.raw, self.log) }
    }
}

impl fmt::Debug for Loader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loader").field("raw", &self.raw).field("log", &!self.log.is_null()).finish()
    }
}

// ---------------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------------

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

type RequestFn = Box<dyn FnMut(i64) -> Option<Request> + Send>;
type RowFn = Box<dyn Fn(i64, Result<Image, Error>) + Send + Sync>;

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
    request.cache_key = raw.raw.cache_key;
    request.headers = raw.raw.headers;
    // The header says the strings need only live until this returns, but libpixload
    // 0.1.0 reads them after (pxl_table_new's provider copies the request once
    // request_fn has returned): keep them until set_visible / set_row_count returns.
    unsafe { (*callbacks).kept.push(raw) };
    1
}

unsafe extern "C" fn on_table_row(row: i64, result: *const sys::pxl_result, user_data: *mut c_void) {
    // SAFETY: as above; row_fn is Fn + Sync, so a shared reference is enough.
    let row_fn = unsafe { &(*(user_data as *const TableCallbacks)).row_fn };
    let outcome = unsafe { result_from_c(result) };
    call_user("a table's row closure", move || row_fn(row, outcome));
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
    pub fn new<R, F>(loader: &Loader, queue: &Queue, config: &TableConfig, row_count: u64, request_fn: R, row_fn: F) -> Result<Table, Error>
    where
        R: FnMut(i64) -> Option<Request> + Send + 'static,
        F: Fn(i64, Result<Image, Error>) + Send + Sync + 'static,
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
