//! Codecs (pixload.h, "Codecs"): a format the library does not decode itself, added to a
//! loader as an implementation of [`Codec`]: bytes in, RGBA8 pixels out. The built-in
//! formats are sniffed first, then the registered codecs in the order they were added;
//! the pixels then go the way every decoded image goes (orientation, resize, processors,
//! both caches). A codec runs on the library's decode threads, several at once: it must
//! be `Send + Sync`, and it never sees the loader.

use std::ffi::{c_char, c_void, CStr};
use std::ptr;

use crate::callbacks::call_user;
use crate::convert::c_string;
use crate::error::check;
use crate::{sys, Error, Loader, Status};

/// What [`Codec::read_header`] reports of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodecHeader {
    /// The size `decode` draws (in the orientation it writes), at least 1x1.
    pub width: u32,
    pub height: u32,
    /// false: every pixel opaque (the library skips alpha work).
    pub has_alpha: bool,
    /// The EXIF orientation (1..8) the library applies to the decoded pixels; 1: none.
    pub orientation: u8,
}

impl CodecHeader {
    /// A `width` x `height` image with alpha, orientation 1.
    pub fn new(width: u32, height: u32) -> CodecHeader {
        CodecHeader { width, height, has_alpha: true, orientation: 1 }
    }
}

/// The buffer [`Codec::decode`] draws into: `height` rows of `stride` bytes, RGBA8
/// (straight, or premultiplied when [`Codec::premultiplied`]), allocated by the library
/// and zeroed. Valid during the call only.
pub struct CodecTarget<'a> {
    width: u32,
    height: u32,
    stride: usize,
    pixels: &'a mut [u8],
    cancel: *const i32,
}

impl CodecTarget<'_> {
    pub fn width(&self) -> u32 {
        self.width
    }

    pub fn height(&self) -> u32 {
        self.height
    }

    /// Bytes per row (at least 4 x width).
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// The whole buffer, `stride` x `height` bytes.
    pub fn pixels_mut(&mut self) -> &mut [u8] {
        self.pixels
    }

    /// Row `y`'s 4 x width bytes.
    pub fn row_mut(&mut self, y: u32) -> &mut [u8] {
        let start = y as usize * self.stride;
        &mut self.pixels[start..start + self.width as usize * 4]
    }

    /// Whether nobody wants the result any more (every request waiting on this decode was
    /// cancelled, or the loader is being freed): a long decode may poll it and return
    /// [`Status::Cancelled`].
    pub fn is_cancelled(&self) -> bool {
        // SAFETY: the library's flag, valid and 4-byte aligned during the call; another
        // thread raises it with an atomic store, so it is read with an atomic load (pixload.h).
        !self.cancel.is_null()
            && unsafe { (*(self.cancel as *const std::sync::atomic::AtomicI32)).load(std::sync::atomic::Ordering::Acquire) }
                != 0
    }
}

/// A decoder for one format. Every method may run on any decode thread, several at once
/// (on different files). An `Err` fails the request with its status (CorruptImage, or
/// UnsupportedImage, NoMemory, Cancelled) and the message "<id>: <message>"; a panic is
/// caught (see [`caught_panics`]) and counts as a corrupt image. The codec is dropped
/// after its last call: when it was removed and no decode uses it, or when its loader is
/// dropped.
///
/// [`caught_panics`]: crate::caught_panics
pub trait Codec: Send + Sync + 'static {
    /// Its short name, `[a-z0-9_-]`, 1..31 characters ("qoi"): what [`Loader::formats`]
    /// lists and what [`Loader::remove_codec`] takes.
    fn id(&self) -> &str;
    /// The decoder's version, recorded with the thumbnails it decodes into the disk cache:
    /// one made by another version is decoded anew.
    fn version(&self) -> &str;
    /// `decode` writes premultiplied alpha (default: straight).
    fn premultiplied(&self) -> bool {
        false
    }
    /// `decode` draws at any size (a vector format): a request larger than the header's
    /// size has `target` at the size it asks (PXL_CODEC_SCALABLE; default: false, a raster
    /// image is never enlarged).
    fn scalable(&self) -> bool {
        false
    }
    /// Whether the file is this codec's, from its first bytes (at most 4096). Cheap.
    fn sniff(&self, head: &[u8]) -> bool;
    /// The header of the whole file `data`: cheap, no pixels.
    fn read_header(&self, data: &[u8]) -> Result<CodecHeader, Error>;
    /// Draws the image, whole, into `target` (the header's size).
    fn decode(&self, data: &[u8], target: &mut CodecTarget<'_>) -> Result<(), Error>;
}

type Boxed = Box<dyn Codec>;

impl Loader {
    /// Registers `codec`, after the built-in formats and the codecs added before. Requests
    /// made from now on may use it. Fails with InvalidArgument for an id that is not of
    /// the form above, a built-in format's or already registered (the codec is then
    /// dropped).
    pub fn add_codec<C: Codec>(&self, codec: C) -> Result<(), Error> {
        let id = c_string("a codec id", codec.id())?;
        let version = c_string("a codec version", codec.version())?;
        let flags = if codec.premultiplied() { sys::PXL_CODEC_PREMULTIPLIED } else { 0 }
            | if codec.scalable() { sys::PXL_CODEC_SCALABLE } else { 0 };
        let mut raw = std::mem::MaybeUninit::<sys::pxl_codec>::zeroed();
        // SAFETY: fills the whole struct (zeros, struct_size = its size).
        let mut raw = unsafe {
            check(sys::pxl_codec_init_size(raw.as_mut_ptr(), std::mem::size_of::<sys::pxl_codec>()))?;
            raw.assume_init()
        };
        let user_data = Box::into_raw(Box::new(Box::new(codec) as Boxed));
        raw.id = id.as_ptr();
        raw.version = version.as_ptr();
        raw.flags = flags;
        raw.user_data = user_data as *mut c_void;
        raw.sniff = Some(on_sniff);
        raw.read_header = Some(on_read_header);
        raw.decode = Some(on_decode);
        raw.destroy = Some(on_destroy);
        // SAFETY: the strings live until the call returns (copied). On failure the
        // library has called destroy, which dropped the codec.
        let status = unsafe { sys::pxl_loader_add_codec(self.as_ptr(), &raw) };
        if status == sys::PXL_OK {
            Ok(())
        } else {
            Err(Error::new(
                Status::from_raw(status),
                0,
                format!("cannot add the codec \"{}\" (a bad or taken id?)", id.to_string_lossy()),
            ))
        }
    }

    /// Unregisters the codec `id`: requests made from now on no longer use it; decodes
    /// under way finish with it, and it is dropped after the last of them. NotFound when
    /// no codec has that id.
    pub fn remove_codec(&self, id: &str) -> Result<(), Error> {
        let id = c_string("a codec id", id)?;
        // SAFETY: a live loader and a NUL-terminated string.
        check(unsafe { sys::pxl_loader_remove_codec(self.as_ptr(), id.as_ptr()) })
    }

    /// The short names of the formats this loader decodes, the built-in ones first
    /// (["jpeg", "png", "webp", "gif", "avif", ...]), then each codec's id in order
    /// (the modules' "heic", "jxl", "svg", and those added with [`add_codec`]).
    ///
    /// [`add_codec`]: Loader::add_codec
    pub fn formats(&self) -> Vec<String> {
        // SAFETY: a NULL buffer of capacity 0 asks for the length only.
        let length = unsafe { sys::pxl_loader_formats(self.as_ptr(), ptr::null_mut(), 0) };
        let mut buffer = vec![0u8; length + 1];
        unsafe { sys::pxl_loader_formats(self.as_ptr(), buffer.as_mut_ptr() as *mut c_char, buffer.len()) };
        let text = CStr::from_bytes_until_nul(&buffer).map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        text.split_whitespace().map(str::to_string).collect()
    }

    /// The confining layers of this loader's decode workers ("namespaces landlock seccomp
    /// rlimits" where the kernel has them all), starting one if none runs; "none" when
    /// nothing is isolated (pixload.h, "Isolation").
    pub fn isolation(&self) -> String {
        // SAFETY: a NULL buffer of capacity 0 asks for the length only.
        let length = unsafe { sys::pxl_loader_isolation(self.as_ptr(), ptr::null_mut(), 0) };
        let mut buffer = vec![0u8; length + 1];
        unsafe { sys::pxl_loader_isolation(self.as_ptr(), buffer.as_mut_ptr() as *mut c_char, buffer.len()) };
        CStr::from_bytes_until_nul(&buffer).map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
    }
}

/// Runs a codec method with panics caught (`fallback` then).
fn guarded<R>(what: &str, fallback: R, f: impl FnOnce() -> R) -> R {
    let mut out = None;
    call_user(what, || out = Some(f()));
    out.unwrap_or(fallback)
}

/// # Safety
/// `user_data` is the pointer add_codec gave, not yet destroyed.
unsafe fn codec<'a>(user_data: *mut c_void) -> &'a dyn Codec {
    unsafe { &**(user_data as *const Boxed) }
}

/// # Safety
/// `data` points to `size` readable bytes, or `size` is 0.
unsafe fn bytes<'a>(data: *const u8, size: usize) -> &'a [u8] {
    if data.is_null() || size == 0 { &[] } else { unsafe { std::slice::from_raw_parts(data, size) } }
}

/// The status of a failed method, its message copied into the library's buffer.
///
/// # Safety
/// `message` has room for `cap` bytes (or is NULL).
unsafe fn failure(error: &Error, message: *mut c_char, cap: usize) -> sys::pxl_status {
    if !message.is_null() && cap > 0 {
        let text = error.message().as_bytes();
        let n = text.len().min(cap - 1);
        unsafe {
            ptr::copy_nonoverlapping(text.as_ptr(), message as *mut u8, n);
            *message.add(n) = 0;
        }
    }
    match error.status() {
        Status::Ok => sys::PXL_E_CORRUPT_IMAGE,
        status => status.to_raw(),
    }
}

fn panicked() -> Result<(), Error> {
    Err(Error::new(Status::CorruptImage, 0, "the codec panicked"))
}

unsafe extern "C" fn on_sniff(data: *const u8, size: usize, user_data: *mut c_void) -> i32 {
    let (codec, head) = unsafe { (codec(user_data), bytes(data, size)) };
    guarded("a codec's sniff", 0, || codec.sniff(head) as i32)
}

unsafe extern "C" fn on_read_header(data: *const u8, size: usize, header: *mut sys::pxl_codec_header,
                                    message: *mut c_char, cap: usize, user_data: *mut c_void) -> sys::pxl_status {
    let (codec, data) = unsafe { (codec(user_data), bytes(data, size)) };
    let result = guarded("a codec's read_header", panicked().map(|_| CodecHeader::new(0, 0)), || codec.read_header(data));
    match result {
        Ok(read) => {
            // SAFETY: the library's header, valid during the call.
            let header = unsafe { &mut *header };
            header.width = i32::try_from(read.width).unwrap_or(i32::MAX);
            header.height = i32::try_from(read.height).unwrap_or(i32::MAX);
            header.has_alpha = read.has_alpha as i32;
            header.orientation = i32::from(read.orientation);
            sys::PXL_OK
        }
        Err(error) => unsafe { failure(&error, message, cap) },
    }
}

unsafe extern "C" fn on_decode(data: *const u8, size: usize, target: *mut sys::pxl_codec_target,
                               message: *mut c_char, cap: usize, user_data: *mut c_void) -> sys::pxl_status {
    let (codec, data) = unsafe { (codec(user_data), bytes(data, size)) };
    // SAFETY: the library's target and buffer (stride x height bytes), valid during the call.
    let raw = unsafe { &*target };
    let (width, height) = (raw.width.max(0) as u32, raw.height.max(0) as u32);
    let pixels = unsafe { std::slice::from_raw_parts_mut(raw.pixels, raw.stride * height as usize) };
    let mut target = CodecTarget { width, height, stride: raw.stride, pixels, cancel: raw.cancel };
    match guarded("a codec's decode", panicked(), || codec.decode(data, &mut target)) {
        Ok(()) => sys::PXL_OK,
        Err(error) => unsafe { failure(&error, message, cap) },
    }
}

unsafe extern "C" fn on_destroy(user_data: *mut c_void) {
    // SAFETY: the box add_codec made; the library calls destroy once, after the last call.
    let codec = unsafe { Box::from_raw(user_data as *mut Boxed) };
    call_user("dropping a codec", move || drop(codec));
}
