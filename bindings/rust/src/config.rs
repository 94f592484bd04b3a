//! A loader's configuration, its URL schemes and its log closure.

use std::ffi::{c_char, c_void, CStr};
use std::path::Path;
use std::time::Duration;

use crate::callbacks::call_user;
use crate::convert::{clamp_i32, millis};
use crate::hook::HookFn;
use crate::sys;

/// URL schemes a loader accepts ([`LoaderBuilder::allowed_schemes`]).
pub mod scheme {
    pub const HTTP: u32 = crate::sys::PXL_SCHEME_HTTP;
    pub const HTTPS: u32 = crate::sys::PXL_SCHEME_HTTPS;
    pub const FILE: u32 = crate::sys::PXL_SCHEME_FILE;
    /// data: URIs (since 0.5.0).
    pub const DATA: u32 = crate::sys::PXL_SCHEME_DATA;
}

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

pub(crate) type LogFn = Box<dyn Fn(LogLevel, &str) + Send + Sync>;

pub(crate) unsafe extern "C" fn on_log(level: i32, message: *const c_char, user_data: *mut c_void) {
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

/// The oldest TLS version a loader accepts (`pxl_config.tls_min_version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum TlsVersion {
    V1_2 = sys::PXL_TLS_1_2,
    V1_3 = sys::PXL_TLS_1_3,
}

/// Which codecs decode in a confined worker process (`pxl_config.isolation`; pixload.h,
/// "Isolation").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Isolation {
    /// Every codec module loaded from a file (HEIC, JPEG XL, SVG): the default.
    Modules = sys::PXL_ISOLATION_MODULES,
    /// Everything in the host's process.
    None = sys::PXL_ISOLATION_NONE,
    /// The built-in formats (JPEG, PNG, WebP, GIF, AVIF) too, in workers of their own.
    All = sys::PXL_ISOLATION_ALL,
}

/// A loader's configuration: a builder over `pxl_config`, defaults from the library.
// build() is in loader.rs, which owns the closures from there until the loader's Drop.
pub struct LoaderBuilder {
    pub(crate) config: sys::pxl_config,
    pub(crate) user_agent: Option<String>,
    pub(crate) ca_file: Option<std::path::PathBuf>,
    pub(crate) ca_path: Option<std::path::PathBuf>,
    pub(crate) proxy: Option<String>,
    pub(crate) disk_cache_dir: Option<std::path::PathBuf>,
    pub(crate) codec_modules: Option<String>,
    pub(crate) headers: Vec<String>,
    pub(crate) log: Option<LogFn>,
    pub(crate) request_hook: Option<HookFn>,
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
        LoaderBuilder {
            config,
            user_agent: None,
            ca_file: None,
            ca_path: None,
            proxy: None,
            disk_cache_dir: None,
            codec_modules: None,
            headers: Vec::new(),
            log: None,
            request_hook: None,
        }
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
        /// The oldest TLS version an https server may speak (default [`TlsVersion::V1_2`]).
        tls_min_version: TlsVersion => |c, v| c.tls_min_version = v as i32;
        /// A request hook call not answered for this long fails its request with
        /// [`Status::Timeout`](crate::Status::Timeout) (so does [`timeout`], when shorter
        /// and not zero); default 30 s; zero: only `timeout` bounds it.
        ///
        /// [`timeout`]: LoaderBuilder::timeout
        hook_timeout: Duration => |c, v| c.hook_timeout_ms = millis(v);
        /// An isolated decode not done in this much wall-clock time is killed and fails
        /// with [`Status::DecoderFailed`](crate::Status::DecoderFailed); default 10 s; zero: no limit.
        decode_timeout: Duration => |c, v| c.decode_timeout_ms = i64::from(millis(v));
    }

    /// Which codecs decode in a confined worker process (default [`Isolation::Modules`]);
    /// `required`: an isolated format whose worker lacks a layer fails rather than decodes.
    pub fn isolation(mut self, isolation: Isolation, required: bool) -> LoaderBuilder {
        self.config.isolation = isolation as i32 | if required { sys::PXL_ISOLATION_REQUIRED } else { 0 };
        self
    }

    /// The request hook (pixload.h, "Request hook"; see [`HookCall`]): asked before each
    /// http(s) transfer (first attempt, retries, every redirect hop, once more after a 401
    /// or 403) for "Name: value" headers to add or replace, such as a bearer token. They
    /// never enter a cache key: images cached under an old token keep being served. It
    /// runs on the library's network thread and must return at once, answering the call
    /// there or moving it to a thread of its own that answers later (a refresh: keep the
    /// calls that come meanwhile and answer them all with the new token). While a call
    /// waits its transfer holds no connection slot. A panic is caught and fails the
    /// request (the dropped call). Dropped after the loader is freed.
    ///
    /// [`HookCall`]: crate::HookCall
    pub fn request_hook<F>(mut self, hook: F) -> LoaderBuilder
    where
        F: Fn(crate::HookCall) + Send + Sync + 'static,
    {
        self.request_hook = Some(Box::new(hook));
        self
    }

    /// Receives the library's diagnostics (a disk cache directory it cannot use, a
    /// corrupt cache entry dropped): a level and one line without a newline. Runs on the
    /// library's threads, possibly several at once: keep it quick, and call no pixload
    /// function from it. A panic is caught (see [`caught_panics`]). Dropped after the
    /// loader is freed. Without it the library is silent.
    ///
    /// [`caught_panics`]: crate::caught_panics
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

    /// PEM file of the CAs that verify https servers: with it (or [`ca_path`]) only those
    /// are trusted, never the system's store (default: the system's). A file that cannot
    /// be read fails [`build`](LoaderBuilder::build).
    ///
    /// [`ca_path`]: LoaderBuilder::ca_path
    pub fn ca_file(mut self, path: impl AsRef<Path>) -> LoaderBuilder {
        self.ca_file = Some(path.as_ref().to_path_buf());
        self
    }

    /// A directory of CA certificates named by their subject hash (`openssl rehash`),
    /// trusted with [`ca_file`](LoaderBuilder::ca_file) instead of the system's store.
    pub fn ca_path(mut self, path: impl AsRef<Path>) -> LoaderBuilder {
        self.ca_path = Some(path.as_ref().to_path_buf());
        self
    }

    /// Every transfer goes through the proxy at this URL; "" means no proxy whatever the
    /// environment says. Default: the environment's (`http_proxy`, `https_proxy`,
    /// `ALL_PROXY`, `no_proxy`), as libcurl reads it.
    pub fn proxy(mut self, url: impl Into<String>) -> LoaderBuilder {
        self.proxy = Some(url.into());
        self
    }

    pub fn disk_cache_dir(mut self, path: impl AsRef<Path>) -> LoaderBuilder {
        self.disk_cache_dir = Some(path.as_ref().to_path_buf());
        self
    }

    /// The codec modules to load (pixload.h, "Codec modules"): "" none, "heif,jxl" those
    /// (each must be found). Default: every module found in `PIXLOAD_CODEC_PATH`, else in
    /// `pixload/codecs` beside the library.
    pub fn codec_modules(mut self, list: impl Into<String>) -> LoaderBuilder {
        self.codec_modules = Some(list.into());
        self
    }

    /// A "Name: value" line sent with every request.
    pub fn header(mut self, line: impl Into<String>) -> LoaderBuilder {
        self.headers.push(line.into());
        self
    }
}

impl Default for LoaderBuilder {
    fn default() -> Self {
        LoaderBuilder::new()
    }
}
