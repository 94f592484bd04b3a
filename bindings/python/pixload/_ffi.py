"""The C side of the bindings: finding libpixload, its structs and its functions.

Everything here mirrors include/pixload.h (the API contract). The structs passed in
(pxl_config, pxl_request, pxl_table_config) are filled by the library's *_init_size()
functions with this module's ctypes.sizeof, so the library never writes past them and
knows which fields they have ("Structs that grow"); at import those defaults are
checked where this module expects them, so a layout that drifted from the header fails
loudly instead of corrupting memory. tests/test_library.py compares every offset and
size with the header as gcc compiles it.
"""
import ctypes
import ctypes.util
import os
import subprocess

# The header's version macros this module was written against. The library loaded must
# have the same major.minor (before 1.0 a minor release may break the ABI, as 0.2.0 did
# with the table callbacks) and any patch.
PXL_VERSION_MAJOR = 0
PXL_VERSION_MINOR = 6
PXL_VERSION_PATCH = 0
PXL_VERSION_NUM = (PXL_VERSION_MAJOR << 16) | (PXL_VERSION_MINOR << 8) | PXL_VERSION_PATCH
SONAME = "libpixload.so.0"

_HELP = (
    "Build and install it with `make all && sudo make install` (then `sudo ldconfig` if "
    "the loader does not find it), or point the PIXLOAD_LIBRARY environment variable at "
    "the file, e.g. PIXLOAD_LIBRARY=/path/to/pixload/build/lib/libpixload.so.0."
)


class LibraryNotFoundError(ImportError):
    """libpixload could not be loaded, or is a version these bindings cannot use."""


def _candidates():
    """(description, path or soname) in the order they are tried."""
    override = os.environ.get("PIXLOAD_LIBRARY")
    if override:
        # An explicit override is final: silently falling back to another copy would hide
        # a typo and test the wrong library.
        return [("PIXLOAD_LIBRARY", override)], True
    found = []
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), SONAME)
    if os.path.exists(here):
        found.append(("next to the package", here))
    name = ctypes.util.find_library("pixload")
    if name:
        found.append(("ctypes.util.find_library", name))
    found.append(("the dynamic loader", SONAME))
    # `make install` runs no ldconfig, so a fresh /usr/local/lib copy is invisible to the
    # dynamic loader until someone does; pkg-config and the default prefix still know it.
    try:
        libdir = subprocess.run(
            ["pkg-config", "--variable=libdir", "pixload"],
            capture_output=True, text=True, timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        libdir = ""
    for d in (libdir, "/usr/local/lib"):
        if d and os.path.exists(os.path.join(d, SONAME)):
            found.append((d, os.path.join(d, SONAME)))
    return found, False


def version_compatible(num):
    """Whether a library whose pxl_version_num() is num can be used: same major.minor."""
    return num >> 8 == PXL_VERSION_NUM >> 8


def load_library():
    """Returns (CDLL, where it came from). Raises LibraryNotFoundError with advice."""
    candidates, explicit = _candidates()
    failures = []
    for origin, path in candidates:
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            failures.append(f"  {origin}: {path}: {e}")
            continue
        try:
            lib.pxl_version_num.restype = ctypes.c_uint32
            lib.pxl_version_num.argtypes = []
            lib.pxl_version.restype = ctypes.c_char_p
            lib.pxl_version.argtypes = []
        except AttributeError:
            failures.append(f"  {origin}: {path}: not libpixload (no pxl_version_num)")
            continue
        num = lib.pxl_version_num()
        if not version_compatible(num):
            failures.append(
                f"  {origin}: {path}: version {lib.pxl_version().decode()}, these bindings "
                f"need {PXL_VERSION_MAJOR}.{PXL_VERSION_MINOR}.x"
            )
            continue
        return lib, f"{origin}: {path}"
    where = "PIXLOAD_LIBRARY points at a file that cannot be used" if explicit else \
        "libpixload (libpixload.so.0) was not found"
    raise LibraryNotFoundError(f"{where}.\nTried:\n" + "\n".join(failures) + "\n" + _HELP)


# --- types --------------------------------------------------------------------------

c_status = ctypes.c_int  # C enums are int-sized on every ABI pixload supports
c_token = ctypes.c_uint64
c_char_pp = ctypes.POINTER(ctypes.c_char_p)


# Opaque handles travel as plain addresses (ints): finalizers then hold no ctypes object,
# and nothing in Python can dereference them by mistake.
image_p = queue_p = loader_p = table_p = ctypes.c_void_p


PXL_LOG_ERROR = 0
PXL_LOG_WARNING = 1
PXL_LOG_INFO = 2

log_callback = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_char_p, ctypes.c_void_p)
# pxl_request_hook_fn(url, headers, header_count, status, call, user_data). Since 0.5.0.
request_hook_fn = ctypes.CFUNCTYPE(None, ctypes.c_char_p, c_char_pp, ctypes.c_size_t, ctypes.c_int32,
                                   ctypes.c_void_p, ctypes.c_void_p)


class pxl_config(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("memory_cache_bytes", ctypes.c_uint64),
        ("max_concurrent_downloads", ctypes.c_int32),
        ("max_downloads_per_host", ctypes.c_int32),
        ("decode_threads", ctypes.c_int32),
        ("connect_timeout_ms", ctypes.c_int32),
        ("timeout_ms", ctypes.c_int32),
        ("max_body_bytes", ctypes.c_uint64),
        ("max_pixels", ctypes.c_uint64),
        ("allowed_schemes", ctypes.c_uint32),
        ("user_agent", ctypes.c_char_p),
        ("stall_timeout_ms", ctypes.c_int32),
        ("max_redirects", ctypes.c_int32),
        ("max_retries", ctypes.c_int32),
        ("retry_base_delay_ms", ctypes.c_int32),
        ("retry_max_delay_ms", ctypes.c_int32),
        ("ca_file", ctypes.c_char_p),
        ("headers", c_char_pp),
        ("cancel_storm_limit", ctypes.c_int32),
        ("disk_cache_bytes", ctypes.c_uint64),
        ("ignore_http_freshness", ctypes.c_int32),
        ("memory_cache_count", ctypes.c_int32),
        ("disk_cache_dir", ctypes.c_char_p),
        ("disk_cache_max_age_s", ctypes.c_int64),
        # Since 0.2.0.
        ("log", log_callback),
        ("log_user_data", ctypes.c_void_p),
        ("log_level", ctypes.c_int32),
        # Since 0.3.0.
        ("disk_variant_max_side", ctypes.c_int64),
        # Since 0.5.0.
        ("codec_modules", ctypes.c_char_p),
        ("ca_path", ctypes.c_char_p),
        ("proxy", ctypes.c_char_p),
        ("tls_min_version", ctypes.c_int32),
        ("request_hook", request_hook_fn),
        ("request_hook_user_data", ctypes.c_void_p),
        ("hook_timeout_ms", ctypes.c_int32),
        # Since 0.6.0 (decode_timeout_ms past 0.5.0's sizeof: int64).
        ("decode_timeout_ms", ctypes.c_int64),
        ("isolation", ctypes.c_int32),
        ("animation_ring_frames", ctypes.c_uint32),
        ("animation_ring_bytes", ctypes.c_uint64),
    ]


progress_callback = ctypes.CFUNCTYPE(None, c_token, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_void_p)
preview_callback = ctypes.CFUNCTYPE(None, c_token, ctypes.c_void_p, ctypes.c_void_p)


class pxl_request(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("url", ctypes.c_char_p),
        ("cache_key", ctypes.c_char_p),
        ("width", ctypes.c_int32),
        ("height", ctypes.c_int32),
        ("mode", ctypes.c_int32),
        ("format", ctypes.c_int32),
        ("priority", ctypes.c_int32),
        ("flags", ctypes.c_uint32),
        ("headers", c_char_pp),
        ("progress", progress_callback),
        ("progress_interval_ms", ctypes.c_int32),
        # Since 0.3.0.
        ("preview", preview_callback),
        ("preview_interval_ms", ctypes.c_int32),
        # Since 0.5.0 (pxl_processor: _processors.py).
        ("processors", ctypes.c_void_p),
        ("processor_count", ctypes.c_size_t),
        # Since 0.5.0.
        ("placeholder_kind", ctypes.c_int32),
        ("placeholder", ctypes.c_void_p),
        ("placeholder_length", ctypes.c_size_t),
    ]


class pxl_result(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("status", c_status),
        ("image", image_p),
        ("http_status", ctypes.c_int32),
        ("source", ctypes.c_int),
        ("message", ctypes.c_char_p),
        # Since 0.3.0: read only when struct_size covers it.
        ("preview", ctypes.c_int32),
        # Since 0.5.0: likewise.
        ("incomplete", ctypes.c_int32),
    ]


class pxl_metrics(ctypes.Structure):  # since 0.5.0
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("tier", ctypes.c_int32),
        ("joined", ctypes.c_int32),
    ] + [(name, ctypes.c_uint64) for name in (
        "slot_wait_us", "dns_us", "connect_us", "tls_us", "first_byte_us", "transfer_us",
        "disk_read_us", "decode_us", "process_us", "queue_wait_us", "bytes_received")] + [
        (name, ctypes.c_int32) for name in ("http_status", "http_version", "redirects", "connection_reused")
    ] + [("decoded_bytes", ctypes.c_uint64), ("delivered_bytes", ctypes.c_uint64),
         ("worker_us", ctypes.c_uint64), ("isolated", ctypes.c_int32),
         ("other_us", ctypes.c_uint64), ("total_us", ctypes.c_uint64),  # since 0.6.0
        ("after_last_byte_us", ctypes.c_uint64)]  # since 0.6.0


class pxl_image_info(ctypes.Structure):  # since 0.6.0: an image's accessors in one call
    _fields_ = [("struct_size", ctypes.c_size_t)] + [
        (name, ctypes.c_int32) for name in ("width", "height", "stride", "format")] + [
        ("pixels", ctypes.c_void_p)] + [(name, ctypes.c_int32) for name in (
            "original_width", "original_height", "frame_count", "source_frame_count", "loop_count", "incomplete")]


class pxl_stats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t)] + [
        (name, ctypes.c_uint64)
        for name in (
            "requests", "memory_hits", "disk_hits", "network_fetches", "revalidated",
            "coalesced", "cancelled", "failed", "bytes_downloaded", "memory_bytes",
            "memory_count", "disk_bytes",
            "bytes_saved",  # since 0.3.0
            # Since 0.3.0.
            "variant_hits", "variants_stored", "variant_bytes_stored",
            # Since 0.5.0.
            "tls_handshakes", "tls_resumed",
        )
    ]


class pxl_table_config(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("prefetch_rows", ctypes.c_int32),
        ("keep_rows", ctypes.c_int32),
        ("visible_priority", ctypes.c_int32),
        ("prefetch_priority", ctypes.c_int32),
        # Since 0.3.0.
        ("previews", ctypes.c_int32),
    ]


class pxl_table_stats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t)] + [
        (name, ctypes.c_uint64)
        for name in ("started", "cancelled", "memory_hits", "delivered", "failed", "animation_frames_decoded")
    ]


load_callback = ctypes.CFUNCTYPE(None, c_token, ctypes.POINTER(pxl_result), ctypes.c_void_p)
# user_data last since 0.2.0.
table_request_fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64, ctypes.POINTER(pxl_request), ctypes.c_void_p)
table_row_fn = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.POINTER(pxl_result), ctypes.c_void_p)

# name: (restype, argtypes). One table, declared once, so a signature is written in one
# place only.
_FUNCTIONS = {
    "pxl_version": (ctypes.c_char_p, []),
    "pxl_version_num": (ctypes.c_uint32, []),
    "pxl_status_string": (ctypes.c_char_p, [c_status]),
    "pxl_format_bytes_per_pixel": (ctypes.c_int32, [ctypes.c_int]),
    "pxl_image_retain": (image_p, [image_p]),
    "pxl_image_release": (None, [image_p]),
    "pxl_image_width": (ctypes.c_int32, [image_p]),
    "pxl_image_height": (ctypes.c_int32, [image_p]),
    "pxl_image_stride": (ctypes.c_int32, [image_p]),
    "pxl_image_format": (ctypes.c_int, [image_p]),
    "pxl_image_pixels": (ctypes.c_void_p, [image_p]),
    "pxl_image_original_width": (ctypes.c_int32, [image_p]),
    "pxl_image_original_height": (ctypes.c_int32, [image_p]),
    "pxl_image_byte_count": (ctypes.c_size_t, [image_p]),
    "pxl_image_frame_count": (ctypes.c_int32, [image_p]),
    "pxl_image_source_frame_count": (ctypes.c_int32, [image_p]),
    "pxl_image_loop_count": (ctypes.c_int32, [image_p]),
    "pxl_image_incomplete": (ctypes.c_int32, [image_p]),
    "pxl_image_get_info": (c_status, [image_p, ctypes.POINTER(pxl_image_info)]),  # since 0.6.0
    "pxl_image_frame_duration_ms": (ctypes.c_int32, [image_p, ctypes.c_int32]),
    "pxl_image_frame_pixels": (ctypes.c_void_p, [image_p, ctypes.c_int32]),
    "pxl_queue_new": (c_status, [ctypes.POINTER(queue_p)]),
    "pxl_queue_free": (None, [queue_p]),
    "pxl_queue_fd": (ctypes.c_int, [queue_p]),
    "pxl_queue_dispatch": (ctypes.c_int32, [queue_p, ctypes.c_int32]),
    "pxl_queue_wait": (ctypes.c_int32, [queue_p, ctypes.c_int32]),
    "pxl_queue_wakeup": (None, [queue_p]),
    "pxl_queue_pending": (ctypes.c_int32, [queue_p]),
    # The *_init_size functions, not 0.1.0's *_init (which fill only 0.1.0's fields).
    "pxl_config_init_size": (c_status, [ctypes.POINTER(pxl_config), ctypes.c_size_t]),
    "pxl_loader_new": (c_status, [ctypes.POINTER(pxl_config), ctypes.POINTER(loader_p)]),
    "pxl_loader_free": (None, [loader_p]),
    "pxl_request_init_size": (c_status, [ctypes.POINTER(pxl_request), ctypes.c_size_t]),
    "pxl_load": (c_status, [loader_p, ctypes.POINTER(pxl_request), queue_p, load_callback,
                            ctypes.c_void_p, ctypes.POINTER(c_token)]),
    "pxl_cancel": (c_status, [loader_p, c_token]),
    "pxl_set_priority": (c_status, [loader_p, c_token, ctypes.c_int32]),
    "pxl_lookup": (c_status, [loader_p, ctypes.POINTER(pxl_request), ctypes.POINTER(image_p)]),
    "pxl_memory_cache_trim": (None, [loader_p, ctypes.c_uint64]),
    "pxl_memory_cache_bytes": (ctypes.c_uint64, [loader_p]),
    "pxl_memory_cache_count": (ctypes.c_int32, [loader_p]),
    "pxl_disk_cache_bytes": (ctypes.c_uint64, [loader_p]),
    "pxl_disk_cache_clear": (None, [loader_p]),
    "pxl_cache_remove": (c_status, [loader_p, ctypes.c_char_p]),
    "pxl_loader_get_stats": (c_status, [loader_p, ctypes.POINTER(pxl_stats)]),
    "pxl_cancel_all": (ctypes.c_int32, [loader_p, queue_p]),
    "pxl_prefetch": (c_status, [loader_p, ctypes.POINTER(pxl_request), ctypes.c_size_t,
                                ctypes.POINTER(c_token)]),
    "pxl_bind": (c_status, [loader_p, ctypes.POINTER(pxl_request), queue_p, load_callback,
                            ctypes.c_void_p, ctypes.POINTER(c_token), ctypes.POINTER(image_p)]),
    "pxl_table_config_init_size": (c_status, [ctypes.POINTER(pxl_table_config), ctypes.c_size_t]),
    "pxl_table_create": (c_status, [loader_p, queue_p, ctypes.POINTER(pxl_table_config), ctypes.c_int64,
                                 table_request_fn, table_row_fn, ctypes.c_void_p,
                                 ctypes.POINTER(table_p)]),
    "pxl_table_set_visible": (c_status, [table_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_int32]),
    "pxl_table_set_row_count": (c_status, [table_p, ctypes.c_int64]),
    "pxl_table_cancel_all": (None, [table_p]),
    "pxl_table_get_stats": (c_status, [table_p, ctypes.POINTER(pxl_table_stats)]),
    "pxl_table_free": (None, [table_p]),
    # Since 0.5.0 (the types are _processors.py's; declared here with void pointers).
    "pxl_processor_frame_resize": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32]),
    "pxl_loader_add_processor": (c_status, [loader_p, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_void_p,
                                            ctypes.c_void_p, ctypes.c_void_p]),
    "pxl_loader_remove_processor": (c_status, [loader_p, ctypes.c_char_p]),
    # Since 0.5.0.
    "pxl_result_metrics": (c_status, [ctypes.POINTER(pxl_result), ctypes.POINTER(pxl_metrics)]),
    "pxl_placeholder_decode": (c_status, [ctypes.c_int32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int32,
                                          ctypes.c_int32, ctypes.POINTER(image_p)]),
    "pxl_placeholder_aspect_ratio": (c_status, [ctypes.c_int32, ctypes.c_void_p, ctypes.c_size_t,
                                                ctypes.POINTER(ctypes.c_double)]),
    "pxl_placeholder_encode": (c_status, [ctypes.c_int32, image_p, ctypes.c_int32, ctypes.c_int32,
                                          ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
}


def init_struct(struct, into=None):
    """A struct (or `into`, a pxl_config / pxl_request / pxl_table_config already
    allocated, e.g. an array element) with the library's defaults, struct_size =
    ctypes.sizeof of this module's declaration."""
    init = _INIT_SIZE[struct]
    value = struct() if into is None else into
    status = init(ctypes.byref(value), ctypes.sizeof(struct))
    if status != 0:  # only a size below 0.1.0's: these bindings are broken
        raise LibraryNotFoundError(f"{init.__name__} refused {struct.__name__} of {ctypes.sizeof(struct)} bytes")
    return value


# Each struct's last field, and the library's default for it: after *_init_size the
# default must be there, struct_size must be our size and no byte past our struct may
# have been written. A field added to the header but not here, or a field of the wrong
# size before the last, moves the default away from where we read it.
_LAST_FIELD_DEFAULTS = {
    "pxl_config": ("animation_ring_bytes", 0),
    "pxl_request": ("placeholder_length", 0),
    "pxl_table_config": ("previews", 1),
}


def _check_struct_layouts(lib):
    guard = 64
    for struct in (pxl_config, pxl_request, pxl_table_config):
        size = ctypes.sizeof(struct)
        buffer = (ctypes.c_ubyte * (size + guard))(*([0xA5] * (size + guard)))
        status = _INIT_SIZE[struct](ctypes.cast(buffer, ctypes.POINTER(struct)), size)
        probe = struct.from_buffer(buffer)
        field, default = _LAST_FIELD_DEFAULTS[struct.__name__]
        problem = None
        if status != 0:
            problem = f"{_INIT_SIZE[struct].__name__} refused its size ({status})"
        elif probe.struct_size != size:
            problem = f"struct_size became {probe.struct_size}, not {size}"
        elif getattr(probe, field) != default:
            problem = f"{field} (the last field) is {getattr(probe, field)}, not its default {default}"
        elif any(b != 0xA5 for b in buffer[size:]):
            problem = "the library wrote past its end"
        if problem:
            raise LibraryNotFoundError(
                f"{struct.__name__} of these bindings ({size} bytes) does not match the loaded "
                f"libpixload ({library_origin}): {problem}. " + _HELP
            )


lib, library_origin = load_library()
for _name, (_restype, _argtypes) in _FUNCTIONS.items():
    try:
        _fn = getattr(lib, _name)
    except AttributeError:
        raise LibraryNotFoundError(f"the loaded libpixload ({library_origin}) lacks {_name}. " + _HELP)
    _fn.restype = _restype
    _fn.argtypes = _argtypes
_INIT_SIZE = {
    pxl_config: lib.pxl_config_init_size,
    pxl_request: lib.pxl_request_init_size,
    pxl_table_config: lib.pxl_table_config_init_size,
}
_check_struct_layouts(lib)
