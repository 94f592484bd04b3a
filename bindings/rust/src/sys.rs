//! Raw declarations of `include/pixload.h`, written by hand (no bindgen: crates.io is
//! out of reach and the header is small). Every struct, constant and function of the
//! header is here, in the header's order, with the header's names; `tests/header.rs`
//! compiles the header and checks sizes, offsets, constants and signatures against
//! this file. The ownership and thread rules are the header's: read it before using
//! anything here directly.
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_uint, c_void};
use core::marker::{PhantomData, PhantomPinned};
use core::mem::{offset_of, size_of};

/// An opaque C type: no size, not Send, not Sync, not Unpin (the nomicon's recipe).
macro_rules! opaque {
    ($name:ident) => {
        #[repr(C)]
        pub struct $name {
            _data: [u8; 0],
            _marker: PhantomData<(*mut u8, PhantomPinned)>,
        }
    };
}

// Version
pub const PXL_VERSION_MAJOR: u32 = 0;
pub const PXL_VERSION_MINOR: u32 = 6;
pub const PXL_VERSION_PATCH: u32 = 0;
pub const PXL_VERSION_NUM: u32 = (PXL_VERSION_MAJOR << 16) | (PXL_VERSION_MINOR << 8) | PXL_VERSION_PATCH;
pub const PXL_VERSION_STRING: &str = "0.6.0";

// Status codes. A C enum whose values are all non-negative is an unsigned int (gcc,
// clang): 4 bytes, passed like one.
pub type pxl_status = c_uint;
pub const PXL_OK: pxl_status = 0;
pub const PXL_E_INVALID_ARGUMENT: pxl_status = 1;
pub const PXL_E_MALFORMED_URL: pxl_status = 2;
pub const PXL_E_SCHEME_NOT_ALLOWED: pxl_status = 3;
pub const PXL_E_DNS: pxl_status = 4;
pub const PXL_E_CONNECT: pxl_status = 5;
pub const PXL_E_TLS: pxl_status = 6;
pub const PXL_E_TIMEOUT: pxl_status = 7;
pub const PXL_E_HTTP: pxl_status = 8;
pub const PXL_E_BODY_TOO_LARGE: pxl_status = 9;
pub const PXL_E_NOT_AN_IMAGE: pxl_status = 10;
pub const PXL_E_CORRUPT_IMAGE: pxl_status = 11;
pub const PXL_E_TOO_MANY_PIXELS: pxl_status = 12;
pub const PXL_E_CANCELLED: pxl_status = 13;
pub const PXL_E_LOADER_CLOSED: pxl_status = 14;
pub const PXL_E_NETWORK: pxl_status = 15;
pub const PXL_E_UNSUPPORTED_IMAGE: pxl_status = 16;
pub const PXL_E_NO_MEMORY: pxl_status = 17;
pub const PXL_E_NOT_FOUND: pxl_status = 18;
pub const PXL_E_IO: pxl_status = 19;
pub const PXL_E_TOO_MANY_REDIRECTS: pxl_status = 20;
pub const PXL_E_NOT_CACHED: pxl_status = 21;
pub const PXL_E_UNSUPPORTED: pxl_status = 22;
pub const PXL_E_DECODER_FAILED: pxl_status = 23;

// Pixel formats and sizing
pub type pxl_format = c_uint;
pub const PXL_FORMAT_RGBA8: pxl_format = 0;
pub const PXL_FORMAT_RGBA8_PREMUL: pxl_format = 1;
pub const PXL_FORMAT_BGRA8_PREMUL: pxl_format = 2;
pub const PXL_FORMAT_RGB8: pxl_format = 3;
pub const PXL_FORMAT_GRAY8: pxl_format = 4;

pub type pxl_mode = c_uint;
pub const PXL_MODE_FIT: pxl_mode = 0;
pub const PXL_MODE_FILL: pxl_mode = 1;

pub const PXL_PRIORITY_PREFETCH: i32 = -100;
pub const PXL_PRIORITY_NORMAL: i32 = 0;
pub const PXL_PRIORITY_VISIBLE: i32 = 100;

pub const PXL_FLAG_IGNORE_ORIENTATION: u32 = 0x1;
pub const PXL_FLAG_SKIP_MEMORY_CACHE: u32 = 0x2;
pub const PXL_FLAG_RELOAD: u32 = 0x4;
pub const PXL_FLAG_CACHE_ONLY: u32 = 0x8;
pub const PXL_FLAG_ANIMATE: u32 = 0x10;
pub const PXL_ANIMATION_MAX_BYTES: u32 = 128 << 20;
/// Since 0.4.0.
pub const PXL_FLAG_NO_COLOR_MANAGEMENT: u32 = 0x20;

pub const PXL_SCHEME_HTTP: u32 = 0x1;
pub const PXL_SCHEME_HTTPS: u32 = 0x2;
pub const PXL_SCHEME_FILE: u32 = 0x4;
/// Since 0.5.0.
pub const PXL_SCHEME_DATA: u32 = 0x8;

pub type pxl_source = c_uint;
pub const PXL_SOURCE_NONE: pxl_source = 0;
pub const PXL_SOURCE_MEMORY: pxl_source = 1;
pub const PXL_SOURCE_NETWORK: pxl_source = 2;
pub const PXL_SOURCE_DISK: pxl_source = 3;
pub const PXL_SOURCE_REVALIDATED: pxl_source = 4;
/// Since 0.5.0.
pub const PXL_SOURCE_FETCHER: pxl_source = 5;
pub const PXL_SOURCE_DATA: pxl_source = 6;
/// Since 0.6.0. A file:// URL, read and decoded (a 0.5 library said PXL_SOURCE_NETWORK).
pub const PXL_SOURCE_FILE: pxl_source = 7;

opaque!(pxl_image);
opaque!(pxl_queue);
opaque!(pxl_loader);
opaque!(pxl_table);

// Log levels (pxl_log_callback's level)
pub const PXL_LOG_ERROR: i32 = 0;
pub const PXL_LOG_WARNING: i32 = 1;
pub const PXL_LOG_INFO: i32 = 2;

/// Runs on a library thread, possibly several at once; `message` is borrowed for the call.
pub type pxl_log_callback = Option<unsafe extern "C" fn(level: i32, message: *const c_char, user_data: *mut c_void)>;

// The request hook (pixload.h, "Request hook"). Since 0.5.0.
opaque!(pxl_hook_call);
pub type pxl_request_hook_fn = Option<unsafe extern "C" fn(url: *const c_char, headers: *const *const c_char, header_count: usize, status: i32, call: *mut pxl_hook_call, user_data: *mut c_void)>;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pxl_config {
    pub struct_size: usize,
    pub memory_cache_bytes: u64,
    pub max_concurrent_downloads: i32,
    pub max_downloads_per_host: i32,
    pub decode_threads: i32,
    pub connect_timeout_ms: i32,
    pub timeout_ms: i32,
    pub max_body_bytes: u64,
    pub max_pixels: u64,
    pub allowed_schemes: u32,
    pub user_agent: *const c_char,
    pub stall_timeout_ms: i32,
    pub max_redirects: i32,
    pub max_retries: i32,
    pub retry_base_delay_ms: i32,
    pub retry_max_delay_ms: i32,
    pub ca_file: *const c_char,
    pub headers: *const *const c_char,
    pub cancel_storm_limit: i32,
    pub disk_cache_bytes: u64,
    pub ignore_http_freshness: i32,
    pub memory_cache_count: i32,
    pub disk_cache_dir: *const c_char,
    pub disk_cache_max_age_s: i64,
    // Since 0.2.0.
    pub log: pxl_log_callback,
    pub log_user_data: *mut c_void,
    pub log_level: i32,
    // Since 0.3.0.
    pub disk_variant_max_side: i64,
    // Since 0.5.0.
    pub codec_modules: *const c_char,
    pub ca_path: *const c_char,
    pub proxy: *const c_char,
    pub tls_min_version: i32,
    pub request_hook: pxl_request_hook_fn,
    pub request_hook_user_data: *mut c_void,
    pub hook_timeout_ms: i32,
    // Since 0.6.0.
    pub decode_timeout_ms: i64,
    pub isolation: i32,
    pub animation_ring_frames: u32,
    pub animation_ring_bytes: u64,
}

// pxl_config.isolation values. Since 0.6.0.
pub const PXL_ISOLATION_MODULES: i32 = 0;
pub const PXL_ISOLATION_NONE: i32 = 1;
pub const PXL_ISOLATION_ALL: i32 = 2;
pub const PXL_ISOLATION_REQUIRED: i32 = 0x100;

// pxl_config.tls_min_version values. Since 0.5.0.
pub const PXL_TLS_1_2: i32 = 12;
pub const PXL_TLS_1_3: i32 = 13;

// The sizes of the structs in 0.1.0 (up to the end of their last field): the smallest
// struct_size the library accepts.
pub const PXL_CONFIG_SIZE_0_1: usize = offset_of!(pxl_config, disk_cache_max_age_s) + size_of::<i64>();
pub const PXL_REQUEST_SIZE_0_1: usize = offset_of!(pxl_request, progress_interval_ms) + size_of::<i32>();
pub const PXL_TABLE_CONFIG_SIZE_0_1: usize = offset_of!(pxl_table_config, prefetch_priority) + size_of::<i32>();
pub const PXL_STATS_SIZE_0_1: usize = offset_of!(pxl_stats, disk_bytes) + size_of::<u64>();
// 0.2.0's pxl_config ends at log_level; 0.3.0's fields start past its sizeof().
pub const PXL_CONFIG_SIZE_0_2: usize = offset_of!(pxl_config, log_level) + size_of::<i32>();
pub const PXL_TABLE_STATS_SIZE_0_1: usize = offset_of!(pxl_table_stats, failed) + size_of::<u64>();

pub type pxl_token = u64;

pub type pxl_progress_callback =
    Option<unsafe extern "C" fn(token: pxl_token, received: u64, expected: u64, user_data: *mut c_void)>;

pub type pxl_preview_callback =
    Option<unsafe extern "C" fn(token: pxl_token, image: *mut pxl_image, user_data: *mut c_void)>;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pxl_request {
    pub struct_size: usize,
    pub url: *const c_char,
    pub cache_key: *const c_char,
    pub width: i32,
    pub height: i32,
    pub mode: i32,
    pub format: i32,
    pub priority: i32,
    pub flags: u32,
    pub headers: *const *const c_char,
    pub progress: pxl_progress_callback,
    pub progress_interval_ms: i32,
    // Since 0.3.0.
    pub preview: pxl_preview_callback,
    pub preview_interval_ms: i32,
    // Since 0.5.0.
    pub processors: *const pxl_processor,
    pub processor_count: usize,
    pub placeholder_kind: i32,
    pub placeholder: *const c_void,
    pub placeholder_length: usize,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pxl_result {
    pub struct_size: usize,
    pub status: pxl_status,
    pub image: *mut pxl_image,
    pub http_status: i32,
    pub source: pxl_source,
    pub message: *const c_char,
    // Since 0.3.0: read only when struct_size covers it.
    pub preview: i32,
    // Since 0.5.0: likewise.
    pub incomplete: i32,
}

/// pxl_result.preview of a table row's placeholder. Since 0.5.0.
pub const PXL_PREVIEW_PLACEHOLDER: i32 = 2;

pub type pxl_callback =
    Option<unsafe extern "C" fn(token: pxl_token, result: *const pxl_result, user_data: *mut c_void)>;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct pxl_stats {
    pub struct_size: usize,
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
    // Since 0.3.0.
    pub bytes_saved: u64,
    // Since 0.3.0.
    pub variant_hits: u64,
    pub variants_stored: u64,
    pub variant_bytes_stored: u64,
    // Since 0.5.0.
    pub tls_handshakes: u64,
    pub tls_resumed: u64,
}

// Animation players. Since 0.6.0.
opaque!(pxl_animation);

pub type pxl_animation_event_kind = c_uint;
pub const PXL_ANIMATION_LOADED: pxl_animation_event_kind = 1;
pub const PXL_ANIMATION_FRAME_READY: pxl_animation_event_kind = 2;
pub const PXL_ANIMATION_ENDED: pxl_animation_event_kind = 3;
pub const PXL_ANIMATION_FAILED: pxl_animation_event_kind = 4;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pxl_animation_event {
    pub struct_size: usize,
    pub kind: i32,
    pub status: pxl_status,
    pub message: *const c_char,
    pub image: *mut pxl_image,
    pub index: i32,
    pub due_ms: i64,
    pub frame_count: i32,
    pub loop_count: i32,
}

pub type pxl_animation_fn = Option<unsafe extern "C" fn(animation: *mut pxl_animation, event: *const pxl_animation_event, user_data: *mut c_void)>;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct pxl_animation_frame {
    pub struct_size: usize,
    pub index: i32,
    pub duration_ms: i32,
    pub due_ms: i64,
    pub next_due_ms: i64,
    pub skipped: i32,
    pub ended: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct pxl_animation_stats {
    pub struct_size: usize,
    pub frames_decoded: u64,
    pub frames_skipped: u64,
    pub frames_shown: u64,
    pub ring_bytes: u64,
    pub peak_ring_bytes: u64,
    pub loops_played: i32,
}

// user_data last since 0.2.0.
pub type pxl_table_request_fn =
    Option<unsafe extern "C" fn(row: i64, request: *mut pxl_request, user_data: *mut c_void) -> c_int>;

pub type pxl_table_row_fn =
    Option<unsafe extern "C" fn(row: i64, result: *const pxl_result, user_data: *mut c_void)>;

/// 0.1.0's table callbacks (user_data first), for pxl_table_new only.
pub type pxl_table_request_fn_0_1 =
    Option<unsafe extern "C" fn(user_data: *mut c_void, row: i64, request: *mut pxl_request) -> c_int>;

pub type pxl_table_row_fn_0_1 =
    Option<unsafe extern "C" fn(user_data: *mut c_void, row: i64, result: *const pxl_result)>;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct pxl_table_config {
    pub struct_size: usize,
    pub prefetch_rows: i32,
    pub keep_rows: i32,
    pub visible_priority: i32,
    pub prefetch_priority: i32,
    // Since 0.3.0.
    pub previews: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct pxl_table_stats {
    pub struct_size: usize,
    pub started: u64,
    pub cancelled: u64,
    pub memory_hits: u64,
    pub delivered: u64,
    pub failed: u64,
    // Since 0.6.0.
    pub animation_frames_decoded: u64,
}

// Codecs (since 0.5.0).
pub const PXL_CODEC_PREMULTIPLIED: u32 = 0x1;
pub const PXL_CODEC_PROGRESSIVE: u32 = 0x2;
pub const PXL_CODEC_SCALABLE: u32 = 0x4;
pub const PXL_CODEC_KEEP_ORIENTATION: u32 = 0x1;
pub const PXL_CODEC_PARTIAL: u32 = 0x2;
pub const PXL_CODEC_SNIFF_BYTES: u32 = 4096;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct pxl_codec_header {
    pub struct_size: usize,
    pub flags: u32,
    pub width: i32,
    pub height: i32,
    pub frame_count: i32,
    pub loop_count: i32,
    pub orientation: i32,
    pub has_alpha: i32,
    pub icc_size: usize,
    pub cicp_primaries: i32,
    pub cicp_transfer: i32,
    pub cicp_matrix: i32,
}

pub type pxl_codec_frame_done_fn = Option<unsafe extern "C" fn(library: *mut c_void, duration_ms: i32) -> i32>;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pxl_codec_target {
    pub struct_size: usize,
    pub flags: u32,
    pub width: i32,
    pub height: i32,
    pub pixels: *mut u8,
    pub stride: usize,
    pub cancel: *const i32,
    pub frame_done: pxl_codec_frame_done_fn,
    pub library: *mut c_void,
}

pub type pxl_codec_sniff_fn = Option<unsafe extern "C" fn(data: *const u8, size: usize, user_data: *mut c_void) -> i32>;
pub type pxl_codec_read_header_fn = Option<unsafe extern "C" fn(data: *const u8, size: usize, header: *mut pxl_codec_header, message: *mut c_char, message_cap: usize, user_data: *mut c_void) -> pxl_status>;
pub type pxl_codec_read_icc_fn = Option<unsafe extern "C" fn(data: *const u8, size: usize, icc: *mut u8, icc_size: usize, user_data: *mut c_void) -> pxl_status>;
pub type pxl_codec_choose_size_fn = Option<unsafe extern "C" fn(data: *const u8, size: usize, flags: u32, width: *mut i32, height: *mut i32, user_data: *mut c_void) -> pxl_status>;
pub type pxl_codec_decode_fn = Option<unsafe extern "C" fn(data: *const u8, size: usize, target: *mut pxl_codec_target, message: *mut c_char, message_cap: usize, user_data: *mut c_void) -> pxl_status>;
pub type pxl_codec_destroy_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;
// Since 0.6.0.
pub type pxl_codec_open_frames_fn = Option<unsafe extern "C" fn(data: *const u8, size: usize, state: *mut *mut c_void, message: *mut c_char, message_cap: usize, user_data: *mut c_void) -> pxl_status>;
pub type pxl_codec_next_frame_fn = Option<unsafe extern "C" fn(state: *mut c_void, target: *mut pxl_codec_target, duration_ms: *mut i32, message: *mut c_char, message_cap: usize, user_data: *mut c_void) -> pxl_status>;
pub type pxl_codec_close_frames_fn = Option<unsafe extern "C" fn(state: *mut c_void, user_data: *mut c_void)>;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pxl_codec {
    pub struct_size: usize,
    pub id: *const c_char,
    pub version: *const c_char,
    pub flags: u32,
    pub user_data: *mut c_void,
    pub sniff: pxl_codec_sniff_fn,
    pub read_header: pxl_codec_read_header_fn,
    pub read_icc: pxl_codec_read_icc_fn,
    pub choose_size: pxl_codec_choose_size_fn,
    pub decode: pxl_codec_decode_fn,
    pub decode_frames: pxl_codec_decode_fn,
    pub destroy: pxl_codec_destroy_fn,
    // Since 0.6.0.
    pub open_frames: pxl_codec_open_frames_fn,
    pub next_frame: pxl_codec_next_frame_fn,
    pub close_frames: pxl_codec_close_frames_fn,
}

pub type pxl_codec_module_register_fn = Option<unsafe extern "C" fn(loader: *mut pxl_loader) -> pxl_status>;

// A module's manifest (since 0.6.0): plain data a module exports as
// pxl_codec_module_manifest, read from its file without loading it. The header's
// PXL_MODULE_MANIFEST (an attribute: exported and kept) has no Rust counterpart: a Rust
// module writes `#[no_mangle] #[used] pub static pxl_codec_module_manifest: pxl_codec_manifest`.
pub const PXL_CODEC_MANIFEST_MAGIC: u32 = 0x4d4c5850;
pub const PXL_CODEC_MANIFEST_CODECS: usize = 4;
pub const PXL_CODEC_MANIFEST_RULES: usize = 12;

pub type pxl_codec_sniff_kind = c_uint;
pub const PXL_SNIFF_BYTES: pxl_codec_sniff_kind = 1;
pub const PXL_SNIFF_FTYP_BRAND: pxl_codec_sniff_kind = 2;
pub const PXL_SNIFF_XML_ROOT: pxl_codec_sniff_kind = 3;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct pxl_codec_sniff_rule {
    pub kind: u32,
    pub offset: u32,
    pub length: u32,
    pub bytes: [u8; 16],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pxl_codec_manifest_codec {
    pub id: [c_char; 32],
    pub version: [c_char; 64],
    pub flags: u32,
    pub has_choose_size: u32,
    pub rule_count: u32,
    pub rules: [pxl_codec_sniff_rule; PXL_CODEC_MANIFEST_RULES],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pxl_codec_manifest {
    pub magic: u32,
    pub struct_size: u32,
    pub codec_count: u32,
    pub reserved: u32,
    pub codecs: [pxl_codec_manifest_codec; PXL_CODEC_MANIFEST_CODECS],
}

// Since 0.5.0: request metrics and placeholders.
pub type pxl_tier = c_uint;
pub const PXL_TIER_NONE: pxl_tier = 0;
pub const PXL_TIER_MEMORY: pxl_tier = 1;
pub const PXL_TIER_DISK_VARIANT: pxl_tier = 2;
pub const PXL_TIER_DISK: pxl_tier = 3;
pub const PXL_TIER_REVALIDATED: pxl_tier = 4;
pub const PXL_TIER_NETWORK: pxl_tier = 5;
pub const PXL_TIER_FILE: pxl_tier = 6;
pub const PXL_TIER_DATA: pxl_tier = 7;
pub const PXL_TIER_FETCHER: pxl_tier = 8;

/// Since 0.6.0.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pxl_image_info {
    pub struct_size: usize,
    pub width: i32,
    pub height: i32,
    pub stride: i32,
    pub format: i32,
    pub pixels: *const u8,
    pub original_width: i32,
    pub original_height: i32,
    pub frame_count: i32,
    pub source_frame_count: i32,
    pub loop_count: i32,
    pub incomplete: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct pxl_metrics {
    pub struct_size: usize,
    pub tier: i32,
    pub joined: i32,
    pub slot_wait_us: u64,
    pub dns_us: u64,
    pub connect_us: u64,
    pub tls_us: u64,
    pub first_byte_us: u64,
    pub transfer_us: u64,
    pub disk_read_us: u64,
    pub decode_us: u64,
    pub process_us: u64,
    pub queue_wait_us: u64,
    pub bytes_received: u64,
    pub http_status: i32,
    pub http_version: i32,
    pub redirects: i32,
    pub connection_reused: i32,
    pub decoded_bytes: u64,
    pub delivered_bytes: u64,
    // Since 0.6.0.
    pub worker_us: u64,
    pub isolated: i32,
    pub other_us: u64,
    pub total_us: u64,
    pub after_last_byte_us: u64,
}

pub const PXL_METRICS_SIZE_0_5: usize = offset_of!(pxl_metrics, delivered_bytes) + size_of::<u64>();

pub type pxl_placeholder_kind = c_uint;
pub const PXL_PLACEHOLDER_NONE: pxl_placeholder_kind = 0;
pub const PXL_PLACEHOLDER_BLURHASH: pxl_placeholder_kind = 1;
pub const PXL_PLACEHOLDER_THUMBHASH: pxl_placeholder_kind = 2;
pub const PXL_PLACEHOLDER_MAX_SIDE: i32 = 256;
pub const PXL_PLACEHOLDER_MAX_BYTES: usize = 166;

extern "C" {
    pub fn pxl_version() -> *const c_char;
    pub fn pxl_version_num() -> u32;
    pub fn pxl_status_string(status: pxl_status) -> *const c_char;
    pub fn pxl_format_bytes_per_pixel(format: pxl_format) -> i32;

    pub fn pxl_image_retain(image: *mut pxl_image) -> *mut pxl_image;
    pub fn pxl_image_release(image: *mut pxl_image);
    pub fn pxl_image_width(image: *const pxl_image) -> i32;
    pub fn pxl_image_height(image: *const pxl_image) -> i32;
    pub fn pxl_image_stride(image: *const pxl_image) -> i32;
    pub fn pxl_image_format(image: *const pxl_image) -> pxl_format;
    pub fn pxl_image_pixels(image: *const pxl_image) -> *const u8;
    pub fn pxl_image_original_width(image: *const pxl_image) -> i32;
    pub fn pxl_image_original_height(image: *const pxl_image) -> i32;
    pub fn pxl_image_byte_count(image: *const pxl_image) -> usize;
    pub fn pxl_image_frame_count(image: *const pxl_image) -> i32;
    pub fn pxl_image_source_frame_count(image: *const pxl_image) -> i32;
    pub fn pxl_image_loop_count(image: *const pxl_image) -> i32;
    pub fn pxl_image_incomplete(image: *const pxl_image) -> i32;
    pub fn pxl_image_get_info(image: *const pxl_image, info: *mut pxl_image_info) -> pxl_status;
    pub fn pxl_image_frame_duration_ms(image: *const pxl_image, index: i32) -> i32;
    pub fn pxl_image_frame_pixels(image: *const pxl_image, index: i32) -> *const u8;

    pub fn pxl_queue_new(out: *mut *mut pxl_queue) -> pxl_status;
    pub fn pxl_queue_free(queue: *mut pxl_queue);
    pub fn pxl_queue_fd(queue: *const pxl_queue) -> c_int;
    pub fn pxl_queue_dispatch(queue: *mut pxl_queue, max: i32) -> i32;
    pub fn pxl_queue_wait(queue: *mut pxl_queue, timeout_ms: i32) -> i32;
    pub fn pxl_queue_wakeup(queue: *mut pxl_queue);
    pub fn pxl_queue_pending(queue: *const pxl_queue) -> i32;

    /// Fills `size` bytes (`size_of::<pxl_config>()`) with the defaults. Since 0.2.0.
    pub fn pxl_config_init_size(config: *mut pxl_config, size: usize) -> pxl_status;
    /// 0.1.0's: fills only the fields 0.1.0 had and sets 0.1.0's struct_size (the C
    /// header's macro of this name calls pxl_config_init_size). Use pxl_config_init_size.
    pub fn pxl_config_init(config: *mut pxl_config);
    pub fn pxl_loader_new(config: *const pxl_config, out: *mut *mut pxl_loader) -> pxl_status;
    pub fn pxl_loader_free(loader: *mut pxl_loader);

    pub fn pxl_request_init_size(request: *mut pxl_request, size: usize) -> pxl_status;
    /// 0.1.0's, as pxl_config_init: use pxl_request_init_size.
    pub fn pxl_request_init(request: *mut pxl_request);
    pub fn pxl_load(
        loader: *mut pxl_loader,
        request: *const pxl_request,
        queue: *mut pxl_queue,
        callback: pxl_callback,
        user_data: *mut c_void,
        token_out: *mut pxl_token,
    ) -> pxl_status;
    pub fn pxl_cancel(loader: *mut pxl_loader, token: pxl_token) -> pxl_status;
    pub fn pxl_set_priority(loader: *mut pxl_loader, token: pxl_token, priority: i32) -> pxl_status;
    pub fn pxl_lookup(loader: *mut pxl_loader, request: *const pxl_request, image_out: *mut *mut pxl_image) -> pxl_status;
    pub fn pxl_memory_cache_trim(loader: *mut pxl_loader, max_bytes: u64);
    pub fn pxl_memory_cache_bytes(loader: *mut pxl_loader) -> u64;
    pub fn pxl_memory_cache_count(loader: *mut pxl_loader) -> i32;
    pub fn pxl_disk_cache_bytes(loader: *mut pxl_loader) -> u64;
    pub fn pxl_disk_cache_clear(loader: *mut pxl_loader);
    pub fn pxl_cache_remove(loader: *mut pxl_loader, cache_key: *const c_char) -> pxl_status;
    pub fn pxl_loader_get_stats(loader: *mut pxl_loader, stats: *mut pxl_stats) -> pxl_status;
    /// The 0.1.0 name of pxl_loader_get_stats.
    pub fn pxl_get_stats(loader: *mut pxl_loader, stats: *mut pxl_stats) -> pxl_status;
    pub fn pxl_cancel_all(loader: *mut pxl_loader, queue: *mut pxl_queue) -> i32;
    pub fn pxl_prefetch(
        loader: *mut pxl_loader,
        requests: *const pxl_request,
        count: usize,
        tokens_out: *mut pxl_token,
    ) -> pxl_status;
    pub fn pxl_bind(
        loader: *mut pxl_loader,
        request: *const pxl_request,
        queue: *mut pxl_queue,
        callback: pxl_callback,
        user_data: *mut c_void,
        slot: *mut pxl_token,
        image_now: *mut *mut pxl_image,
    ) -> pxl_status;

    pub fn pxl_animation_load(
        loader: *mut pxl_loader,
        request: *const pxl_request,
        queue: *mut pxl_queue,
        fn_: pxl_animation_fn,
        user_data: *mut c_void,
        out: *mut *mut pxl_animation,
    ) -> pxl_status;
    pub fn pxl_animation_frame_at(animation: *mut pxl_animation, now_ms: i64, frame: *mut pxl_animation_frame) -> *mut pxl_image;
    pub fn pxl_animation_pause(animation: *mut pxl_animation);
    pub fn pxl_animation_resume(animation: *mut pxl_animation, now_ms: i64);
    pub fn pxl_animation_stats_get(animation: *const pxl_animation, stats: *mut pxl_animation_stats) -> pxl_status;
    pub fn pxl_animation_free(animation: *mut pxl_animation);

    pub fn pxl_table_config_init_size(config: *mut pxl_table_config, size: usize) -> pxl_status;
    /// 0.1.0's, as pxl_config_init: use pxl_table_config_init_size.
    pub fn pxl_table_config_init(config: *mut pxl_table_config);
    pub fn pxl_table_create(
        loader: *mut pxl_loader,
        queue: *mut pxl_queue,
        config: *const pxl_table_config,
        row_count: i64,
        request_fn: pxl_table_request_fn,
        row_fn: pxl_table_row_fn,
        user_data: *mut c_void,
        out: *mut *mut pxl_table,
    ) -> pxl_status;
    /// 0.1.0's, its callbacks taking user_data first: use pxl_table_create.
    pub fn pxl_table_new(
        loader: *mut pxl_loader,
        queue: *mut pxl_queue,
        config: *const pxl_table_config,
        row_count: i64,
        request_fn: pxl_table_request_fn_0_1,
        row_fn: pxl_table_row_fn_0_1,
        user_data: *mut c_void,
        out: *mut *mut pxl_table,
    ) -> pxl_status;
    pub fn pxl_table_set_visible(table: *mut pxl_table, first: i64, count: i32, direction: i32) -> pxl_status;
    pub fn pxl_table_set_row_count(table: *mut pxl_table, row_count: i64) -> pxl_status;
    pub fn pxl_table_cancel_all(table: *mut pxl_table);
    pub fn pxl_table_get_stats(table: *mut pxl_table, stats: *mut pxl_table_stats) -> pxl_status;
    pub fn pxl_table_bind_animation(table: *mut pxl_table, row: i64, animation: *mut pxl_animation) -> pxl_status;
    pub fn pxl_table_free(table: *mut pxl_table);
    pub fn pxl_codec_init_size(codec: *mut pxl_codec, size: usize) -> pxl_status;
    pub fn pxl_loader_add_codec(loader: *mut pxl_loader, codec: *const pxl_codec) -> pxl_status;
    pub fn pxl_loader_remove_codec(loader: *mut pxl_loader, id: *const c_char) -> pxl_status;
    pub fn pxl_loader_formats(loader: *mut pxl_loader, buffer: *mut c_char, capacity: usize) -> usize;
    pub fn pxl_loader_isolation(loader: *mut pxl_loader, buffer: *mut c_char, capacity: usize) -> usize;
}

// Processors (since 0.5.0)
pub const PXL_MAX_PROCESSORS: usize = 16;
pub const PXL_MAX_BLUR_SIGMA: u32 = 250;

pub type pxl_processor_kind = c_uint;
pub const PXL_PROCESS_CIRCLE: pxl_processor_kind = 1;
pub const PXL_PROCESS_ROUND: pxl_processor_kind = 2;
pub const PXL_PROCESS_BLUR: pxl_processor_kind = 3;
pub const PXL_PROCESS_CROP: pxl_processor_kind = 4;
pub const PXL_PROCESS_ROTATE: pxl_processor_kind = 5;
pub const PXL_PROCESS_FLIP: pxl_processor_kind = 6;
pub const PXL_PROCESS_GRAY: pxl_processor_kind = 7;
pub const PXL_PROCESS_TINT: pxl_processor_kind = 8;
pub const PXL_PROCESS_CUSTOM: pxl_processor_kind = 9;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pxl_processor {
    pub kind: i32,
    pub color: u32,
    pub radius_tl: f64,
    pub radius_tr: f64,
    pub radius_br: f64,
    pub radius_bl: f64,
    pub border_width: f64,
    pub sigma: f64,
    pub x: i32,
    pub y: i32,
    pub width: i32,
    pub height: i32,
    pub degrees: i32,
    pub vertical: i32,
    pub id: *const c_char,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pxl_processor_frame {
    pub struct_size: usize,
    pub pixels: *mut u8,
    pub width: i32,
    pub height: i32,
    pub stride: i32,
    pub frame_index: i32,
    pub frame_count: i32,
    pub input: *const u8,
    pub input_width: i32,
    pub input_height: i32,
    pub cancelled: *const i32,
    pub internal: *mut c_void,
}

pub type pxl_processor_callback = Option<unsafe extern "C" fn(frame: *mut pxl_processor_frame, message: *mut c_char, message_size: usize, user_data: *mut c_void) -> pxl_status>;
pub type pxl_processor_destroy_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

extern "C" {
    pub fn pxl_processor_frame_resize(frame: *mut pxl_processor_frame, width: i32, height: i32) -> *mut u8;
    pub fn pxl_loader_add_processor(
        loader: *mut pxl_loader,
        id: *const c_char,
        version: u32,
        process: pxl_processor_callback,
        user_data: *mut c_void,
        destroy: pxl_processor_destroy_fn,
    ) -> pxl_status;
    pub fn pxl_loader_remove_processor(loader: *mut pxl_loader, id: *const c_char) -> pxl_status;

    // Since 0.5.0.
    pub fn pxl_result_metrics(result: *const pxl_result, metrics: *mut pxl_metrics) -> pxl_status;
    pub fn pxl_placeholder_decode(
        kind: i32,
        bytes: *const c_void,
        length: usize,
        width: i32,
        height: i32,
        image_out: *mut *mut pxl_image,
    ) -> pxl_status;
    pub fn pxl_placeholder_aspect_ratio(kind: i32, bytes: *const c_void, length: usize, ratio_out: *mut f64) -> pxl_status;
    pub fn pxl_placeholder_encode(
        kind: i32,
        image: *const pxl_image,
        components_x: i32,
        components_y: i32,
        out: *mut u8,
        capacity: usize,
        length_out: *mut usize,
    ) -> pxl_status;
}

// Fetchers (since 0.5.0).
opaque!(pxl_fetch);

pub type pxl_fetch_start_fn = Option<unsafe extern "C" fn(url: *const c_char, fetch: *mut pxl_fetch, user_data: *mut c_void)>;
pub type pxl_fetch_cancel_fn = Option<unsafe extern "C" fn(fetch: *mut pxl_fetch, user_data: *mut c_void)>;
pub type pxl_fetch_destroy_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pxl_fetcher {
    pub struct_size: usize,
    pub start: pxl_fetch_start_fn,
    pub cancel: pxl_fetch_cancel_fn,
    pub destroy: pxl_fetch_destroy_fn,
    pub user_data: *mut c_void,
    pub max_concurrent: i32,
    pub disk_cache: i32,
    pub disk_max_age_s: i64,
}

pub const PXL_FETCHER_SIZE_0_5: usize = offset_of!(pxl_fetcher, disk_max_age_s) + size_of::<i64>();

extern "C" {
    pub fn pxl_fetcher_init_size(fetcher: *mut pxl_fetcher, size: usize) -> pxl_status;
    pub fn pxl_loader_add_fetcher(loader: *mut pxl_loader, scheme: *const c_char, fetcher: *const pxl_fetcher) -> pxl_status;
    pub fn pxl_loader_remove_fetcher(loader: *mut pxl_loader, scheme: *const c_char) -> pxl_status;
    pub fn pxl_fetch_write(fetch: *mut pxl_fetch, data: *const c_void, len: usize) -> pxl_status;
    pub fn pxl_fetch_finish(fetch: *mut pxl_fetch, status: pxl_status, message: *const c_char) -> pxl_status;
}

extern "C" {
    pub fn pxl_hook_answer(call: *mut pxl_hook_call, headers: *const *const c_char, count: usize) -> pxl_status;
    pub fn pxl_hook_fail(call: *mut pxl_hook_call, status: pxl_status, message: *const c_char) -> pxl_status;
}
