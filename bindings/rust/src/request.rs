//! What to load and how: requests, their modes and priorities, and the tokens, slots
//! and prefetch results that name them.

use std::ffi::{c_char, c_void, CString};
use std::num::NonZeroU64;
use std::ptr;
use std::time::Duration;

use crate::convert::{c_string, clamp_i32, header_pointers, millis};
use crate::{sys, Error, Format, Placeholder, Processor};

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

/// One accepted request of a loader; never 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token(NonZeroU64);

impl Token {
    pub fn get(self) -> u64 {
        self.0.get()
    }

    pub(crate) fn from_raw(raw: sys::pxl_token) -> Option<Token> {
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
    processors: Vec<Processor>,
    placeholder: Option<Placeholder>,
}

/// A request's C strings, alive while its pxl_request is in use.
pub(crate) struct RawRequest {
    pub(crate) raw: sys::pxl_request,
    _url: CString,
    _cache_key: Option<CString>,
    _headers: Vec<CString>,
    _header_pointers: Vec<*const c_char>,
    _processors: Vec<sys::pxl_processor>,
    _processor_ids: Vec<CString>,
    _placeholder: Vec<u8>,
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
            processors: Vec::new(),
            placeholder: None,
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
    ///
    /// [`Status::NotCached`]: crate::Status::NotCached
    pub fn cache_only(self, on: bool) -> Request {
        self.flag(sys::PXL_FLAG_CACHE_ONLY, on)
    }

    /// Every frame of an animated image ([`Image::frame_count`]); off: the first frame.
    ///
    /// [`Image::frame_count`]: crate::Image::frame_count
    pub fn animate(self, on: bool) -> Request {
        self.flag(sys::PXL_FLAG_ANIMATE, on)
    }

    /// Keep the decoded values: no conversion of an embedded colour profile to sRGB
    /// (a variant of its own in the caches). Since 0.4.0.
    pub fn no_color_management(self, on: bool) -> Request {
        self.flag(sys::PXL_FLAG_NO_COLOR_MANAGEMENT, on)
    }

    /// At most one progress call per interval (for [`Loader::load_with_progress`]).
    ///
    /// [`Loader::load_with_progress`]: crate::Loader::load_with_progress
    pub fn progress_interval(mut self, interval: Duration) -> Request {
        self.progress_interval_ms = millis(interval);
        self
    }

    /// The row's placeholder, for a [`Table`](crate::Table): a visible row still loading
    /// gets it, decoded, before its image (see [`RowUpdate`](crate::RowUpdate)). Loads
    /// outside tables ignore it.
    pub fn placeholder(mut self, placeholder: Placeholder) -> Request {
        self.placeholder = Some(placeholder);
        self
    }

    /// Appends a processor step (see [`Processor`]); the builder methods below name each.
    pub fn process(mut self, step: Processor) -> Request {
        self.processors.push(step);
        self
    }

    /// A circular crop (the centred min(w, h) square), with an optional border
    /// (width, 0xRRGGBBAA) drawn inside it.
    pub fn circle(self, border: Option<(f64, u32)>) -> Request {
        self.process(Processor::Circle { border })
    }

    /// Rounded corners of `radius` output pixels.
    pub fn rounded_corners(self, radius: f64) -> Request {
        self.process(Processor::RoundedCorners { radii: [radius; 4], border: None })
    }

    /// Rounded corners: top-left, top-right, bottom-right, bottom-left, with an optional border.
    pub fn rounded_corners_each(self, radii: [f64; 4], border: Option<(f64, u32)>) -> Request {
        self.process(Processor::RoundedCorners { radii, border })
    }

    /// A Gaussian blur of `sigma` output pixels (0 ..= 250).
    pub fn blur(self, sigma: f64) -> Request {
        self.process(Processor::Blur { sigma })
    }

    /// The rectangle of the image as it is at this step.
    pub fn crop(self, x: i32, y: i32, width: i32, height: i32) -> Request {
        self.process(Processor::Crop { x, y, width, height })
    }

    /// Clockwise by 90, 180 or 270 degrees.
    pub fn rotate(self, degrees: i32) -> Request {
        self.process(Processor::Rotate { degrees })
    }

    /// Mirror left-right (`vertical` false) or top-bottom.
    pub fn flip(self, vertical: bool) -> Request {
        self.process(Processor::Flip { vertical })
    }

    pub fn grayscale(self) -> Request {
        self.process(Processor::Grayscale)
    }

    /// 0xRRGGBBAA composited source-atop.
    pub fn tint(self, color: u32) -> Request {
        self.process(Processor::Tint { color })
    }

    /// A custom processor registered with the loader under `id` (through
    /// `sys::pxl_loader_add_processor`).
    pub fn custom(self, id: impl Into<String>) -> Request {
        self.process(Processor::Custom { id: id.into() })
    }

    pub(crate) fn to_raw(&self) -> Result<RawRequest, Error> {
        let url = c_string("the URL", &self.url)?;
        let cache_key = self.cache_key.as_deref().map(|k| c_string("the cache key", k)).transpose()?;
        let headers = self.headers.iter().map(|h| c_string("a header line", h)).collect::<Result<Vec<_>, _>>()?;
        let header_pointers = header_pointers(&headers);
        let mut raw = default_request();
        self.fill(&mut raw);
        raw.url = url.as_ptr();
        raw.cache_key = cache_key.as_ref().map_or(ptr::null(), |k| k.as_ptr());
        raw.headers = if headers.is_empty() { ptr::null() } else { header_pointers.as_ptr() };
        let mut processor_ids = Vec::new();
        let processors =
            self.processors.iter().map(|p| p.to_raw(&mut processor_ids)).collect::<Result<Vec<_>, _>>()?;
        raw.processors = if processors.is_empty() { ptr::null() } else { processors.as_ptr() };
        raw.processor_count = processors.len();
        let placeholder = self.placeholder.as_ref().map_or_else(Vec::new, |p| p.data.clone());
        if let Some(p) = &self.placeholder {
            raw.placeholder_kind = p.kind.raw();
            raw.placeholder = placeholder.as_ptr() as *const c_void;
            raw.placeholder_length = placeholder.len();
        }
        Ok(RawRequest {
            raw,
            _url: url,
            _cache_key: cache_key,
            _headers: headers,
            _header_pointers: header_pointers,
            _processors: processors,
            _processor_ids: processor_ids,
            _placeholder: placeholder,
        })
    }

    /// The non-string fields. Values beyond i32 pass as i32::MAX: the library then
    /// refuses them or treats them as "very large", as it documents.
    pub(crate) fn fill(&self, raw: &mut sys::pxl_request) {
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
///
/// [`Loader::bind`]: crate::Loader::bind
#[derive(Debug, Default)]
pub struct Slot {
    pub(crate) token: sys::pxl_token,
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
///
/// [`Loader::prefetch`]: crate::Loader::prefetch
#[derive(Debug)]
pub struct Prefetch {
    pub tokens: Vec<Option<Token>>,
    pub result: Result<(), Error>,
}
