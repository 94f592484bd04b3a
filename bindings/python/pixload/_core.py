"""Python objects over the C API: Loader, Queue, Image, Table, Request, Result, errors.

Callbacks. Every load's callback goes through one module-level CFUNCTYPE trampoline
(created once, referenced by this module and by every Queue, so it can never be
collected while C may call it). The C side gets a small integer as user_data; the
trampoline looks the Python callable up in _pending by that id and removes it, so each
callable lives exactly until its one result has been delivered. The id is registered
before pxl_load is called, because another thread may dispatch the queue, and so run the
callback, before pxl_load has returned the token.

Finalizers. Handles are freed by weakref.finalize (run at garbage collection or, at the
latest, at interpreter exit while the interpreter still works). The C API forbids
freeing a loader or a queue from inside one of its callbacks, and a garbage collection
can start anywhere, so a finalizer that fires inside a pixload callback postpones the
free until the outermost dispatch on that thread has returned.
"""
import asyncio
import collections
import ctypes
import enum
import itertools
import sys
import threading
import time
import weakref

from . import _ffi, _processors
from ._errors import (
    HTTPError, ImageError, InvalidArgumentError, LoaderClosedError, LocalIOError, NetworkError, NotCachedError,
    NotFoundError, OutOfMemoryError, PixloadError, PixloadTimeoutError, RequestCancelled, Status, URLError,
    _check, status_string, version,
)
from ._ffi import lib
from ._metrics import metrics_from_c
from ._strings import _encode, _header_array


# --- enums ----------------------------------------------------------------------------

class Format(enum.IntEnum):
    RGBA8 = 0
    RGBA8_PREMUL = 1
    BGRA8_PREMUL = 2
    RGB8 = 3
    GRAY8 = 4

    @property
    def bytes_per_pixel(self):
        return lib.pxl_format_bytes_per_pixel(self)


class Mode(enum.IntEnum):
    FIT = 0
    FILL = 1


class Source(enum.IntEnum):
    NONE = 0
    MEMORY = 1
    NETWORK = 2
    DISK = 3
    REVALIDATED = 4
    FETCHER = 5  # a fetcher of the host's (Loader.add_fetcher); since 0.5.0
    DATA = 6     # a data: URI (Scheme.DATA); since 0.5.0


class LogLevel(enum.IntEnum):
    """Levels of the library's log lines (Loader(log=...)); lower is more severe."""
    ERROR = 0
    WARNING = 1
    INFO = 2


class Scheme(enum.IntFlag):
    HTTP = 0x1
    HTTPS = 0x2
    FILE = 0x4
    DATA = 0x8  # data: URIs; since 0.5.0


PRIORITY_PREFETCH = -100
PRIORITY_NORMAL = 0
PRIORITY_VISIBLE = 100

_FLAGS = {
    "ignore_orientation": 0x1,
    "skip_memory_cache": 0x2,
    "reload": 0x4,
    "cache_only": 0x8,
    "animate": 0x10,  # every frame of an animated image (Image.frames); since 0.4.0
    "no_color_management": 0x20,  # since 0.4.0
}


# --- callback context: deferred frees and exceptions raised by user callbacks --------

_tls = threading.local()


def _callback_depth():
    return getattr(_tls, "depth", 0)


class _CallbackScope:
    """Marks "pixload may call back into Python on this thread" (a dispatch, a queue free,
    pxl_table_set_visible). Collects what user callbacks raise, to re-raise it when the C
    call has returned (an exception cannot cross C frames), and runs the frees postponed
    inside it."""

    __slots__ = ("errors",)

    def __enter__(self):
        _tls.depth = _callback_depth() + 1
        self.errors = getattr(_tls, "errors", None)
        _tls.errors = []
        return self

    def __exit__(self, *exc):
        errors = _tls.errors
        _tls.errors = self.errors
        _tls.depth -= 1
        if _tls.depth == 0:
            deferred = getattr(_tls, "deferred", None)
            while deferred:
                free, ptr = deferred.pop(0)
                free(ptr)
        if errors and exc[0] is None:
            first = errors[0]
            for other in errors[1:]:
                _report_unraisable(other, "in a pixload callback (after an earlier one raised)")
            raise first
        return False


def _call_user(fn, *args):
    try:
        fn(*args)
    except BaseException as e:  # noqa: B902 -- must not unwind into C; re-raised later
        _record_callback_error(e)


def _record_callback_error(e):
    errors = getattr(_tls, "errors", None)
    if errors is None:
        _report_unraisable(e, "in a pixload callback")
    else:
        errors.append(e)


def _report_unraisable(exc, where):
    hook = getattr(sys, "unraisablehook", None)
    if hook is None:
        return
    hook_arg = collections.namedtuple("UnraisableHookArgs", "exc_type exc_value exc_traceback err_msg object")
    hook(hook_arg(type(exc), exc, exc.__traceback__, f"Exception ignored {where}", None))


def _free_soon(free, ptr):
    """free(ptr) now, or when the outermost callback scope on this thread ends: the C API
    forbids freeing a loader or queue from inside its own callbacks."""
    if _callback_depth() > 0:
        if getattr(_tls, "deferred", None) is None:
            _tls.deferred = []
        _tls.deferred.append((free, ptr))
    else:
        free(ptr)


# --- handles --------------------------------------------------------------------------

class _Handle:
    """A C object: close() (idempotent), `with`, and a finalizer that frees it if the
    Python object is dropped without close()."""

    _ptr = None
    _finalizer = None

    def _own(self, ptr, free):
        self._ptr = ptr
        self._finalizer = weakref.finalize(self, _free_soon, free, ptr)

    @property
    def closed(self):
        return self._ptr is None

    def _handle(self):
        ptr = self._ptr
        if ptr is None:
            raise ValueError(f"{type(self).__name__} is closed")
        return ptr

    def close(self):
        """Frees the C object. Later calls are no-ops. Do not call it while another thread
        is using the same object."""
        if self._ptr is None:
            return
        self._ptr = None
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        state = "closed" if self._ptr is None else f"at 0x{self._ptr:x}"
        return f"<pixload.{type(self).__name__} {state}>"


# --- images ---------------------------------------------------------------------------

class _ImageReference:
    """Owns one C reference to a pxl_image. Image objects and every pixel view hold this,
    so the pixels live until the last of them is gone, whatever close() was called."""

    __slots__ = ("ptr", "__weakref__")

    def __init__(self, ptr):
        self.ptr = ptr
        weakref.finalize(self, lib.pxl_image_release, ptr)


class Image:
    """Immutable decoded pixels: width x height, `stride` bytes per row, in `format`.

    `pixels` is a read-only memoryview straight over the C buffer (no copy);
    to_numpy() is a view too. Both keep the pixels alive on their own."""

    __slots__ = ("_ref", "width", "height", "stride", "format", "original_width",
                 "original_height", "frame_count", "source_frame_count", "loop_count",
                 "incomplete", "__weakref__")

    def __init__(self, _ptr):
        """Takes over one reference to a pxl_image (internal: images come from loads)."""
        self._ref = _ImageReference(_ptr)
        self.width = lib.pxl_image_width(_ptr)
        self.height = lib.pxl_image_height(_ptr)
        self.stride = lib.pxl_image_stride(_ptr)
        self.format = Format(lib.pxl_image_format(_ptr))
        self.original_width = lib.pxl_image_original_width(_ptr)
        self.original_height = lib.pxl_image_original_height(_ptr)
        # Animations (load with animate=True): 1 frame for a still image.
        self.frame_count = lib.pxl_image_frame_count(_ptr)
        self.source_frame_count = lib.pxl_image_source_frame_count(_ptr)
        self.loop_count = lib.pxl_image_loop_count(_ptr)  # 0: forever
        # The data ended early and the decoder filled in the rest (pixload.h, "Images
        # whose data ended early"): a cut JPEG's or GIF's.
        self.incomplete = bool(lib.pxl_image_incomplete(_ptr))

    @classmethod
    def _retained(cls, borrowed_ptr):
        return cls(lib.pxl_image_retain(borrowed_ptr))

    @property
    def size(self):
        return (self.width, self.height)

    @property
    def original_size(self):
        return (self.original_width, self.original_height)

    @property
    def bytes_per_pixel(self):
        return self.format.bytes_per_pixel

    @property
    def byte_count(self):
        return self.stride * self.height

    @property
    def closed(self):
        return self._ref is None

    def close(self):
        """Drops this object's reference. Views made earlier stay valid."""
        self._ref = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _reference(self):
        ref = self._ref
        if ref is None:
            raise ValueError("Image is closed")
        return ref

    @property
    def pixels(self):
        """A read-only, flat memoryview (format 'B', stride * height bytes) over the C
        pixel buffer; row y starts at y * stride. No copy. Frame 0 of an animation."""
        return self._frame_view(0)

    def _frame_view(self, index):
        ref = self._reference()
        count = self.stride * self.height
        address = lib.pxl_image_frame_pixels(ref.ptr, index)
        if count == 0 or not address:
            return memoryview(b"")
        array = (ctypes.c_ubyte * count).from_address(address)
        array._pixload_owner = ref  # the view -> array -> reference chain keeps pixels alive
        return memoryview(array).cast("B").toreadonly()

    @property
    def frames(self):
        """Every frame as a Frame (one for a still image, or without animate=True):
        composited, in this image's size, stride and format, with its duration."""
        self._reference()
        return [Frame(self, i) for i in range(self.frame_count)]

    def tobytes(self):
        """A copy of the pixels with rows packed (width * bytes_per_pixel per row), as
        `pixload fetch --out FILE.raw` writes them."""
        view = self.pixels
        row = self.width * self.bytes_per_pixel
        if row == self.stride:
            return view.tobytes()
        return b"".join(view[y * self.stride:y * self.stride + row] for y in range(self.height))

    def to_numpy(self):
        """A read-only numpy view (no copy): shape (height, width, channels), or
        (height, width) for GRAY8; dtype uint8. Requires numpy."""
        import numpy as np

        bpp = self.bytes_per_pixel
        view = self.pixels
        if bpp == 1:
            shape, strides = (self.height, self.width), (self.stride, 1)
        else:
            shape, strides = (self.height, self.width, bpp), (self.stride, bpp, 1)
        return np.ndarray(shape, dtype=np.uint8, buffer=view, strides=strides)

    def to_pil(self):
        """A Pillow image (a copy: Pillow images are mutable). Premultiplied formats are
        converted to straight RGBA. Requires Pillow."""
        from PIL import Image as PILImage

        mode, rawmode = {
            Format.RGBA8: ("RGBA", "RGBA"),
            Format.RGBA8_PREMUL: ("RGBA", "RGBa"),
            Format.BGRA8_PREMUL: ("RGBA", "BGRa"),
            Format.RGB8: ("RGB", "RGB"),
            Format.GRAY8: ("L", "L"),
        }[self.format]
        return PILImage.frombytes(mode, self.size, self.pixels, "raw", rawmode, self.stride, 1)

    def __repr__(self):
        state = " closed" if self._ref is None else ""
        frames = f" {self.frame_count} frames" if self.frame_count > 1 else ""
        return f"<pixload.Image {self.width}x{self.height} {self.format.name}{frames}{state}>"


class Frame:
    """One frame of an Image: `pixels` (a read-only memoryview over the C buffer, laid
    out as the image's), `duration_ms` as the file gives it, and the image's
    tobytes / to_numpy / to_pil conversions. Keeps the pixels alive on its own."""

    __slots__ = ("_image", "index", "duration_ms", "pixels")

    def __init__(self, image, index):
        self._image = image
        self.index = index
        self.duration_ms = lib.pxl_image_frame_duration_ms(image._reference().ptr, index)
        self.pixels = image._frame_view(index)

    def tobytes(self):
        return _packed(self._image, self.pixels)

    def to_numpy(self):
        return _numpy_view(self._image, self.pixels)

    def to_pil(self):
        return _pil_image(self._image, self.pixels)

    def __repr__(self):
        return f"<pixload.Frame {self.index} {self.duration_ms} ms>"


def _packed(image, view):
    row = image.width * image.bytes_per_pixel
    if row == image.stride:
        return view.tobytes()
    return b"".join(view[y * image.stride:y * image.stride + row] for y in range(image.height))


def _numpy_view(image, view):
    import numpy as np

    bpp = image.bytes_per_pixel
    if bpp == 1:
        shape, strides = (image.height, image.width), (image.stride, 1)
    else:
        shape, strides = (image.height, image.width, bpp), (image.stride, bpp, 1)
    return np.ndarray(shape, dtype=np.uint8, buffer=view, strides=strides)


def _pil_image(image, view):
    from PIL import Image as PILImage

    mode, rawmode = {
        Format.RGBA8: ("RGBA", "RGBA"),
        Format.RGBA8_PREMUL: ("RGBA", "RGBa"),
        Format.BGRA8_PREMUL: ("RGBA", "BGRa"),
        Format.RGB8: ("RGB", "RGB"),
        Format.GRAY8: ("L", "L"),
    }[image.format]
    return PILImage.frombytes(mode, image.size, view, "raw", rawmode, image.stride, 1)


# --- results and the callback registry -----------------------------------------------

class Result:
    """What a load's callback receives: `image` (an Image, owned by you) when `ok`, else
    `error` (a PixloadError, RequestCancelled for a cancellation)."""

    __slots__ = ("token", "status", "http_status", "source", "message", "image", "preview", "incomplete",
                 "placeholder", "metrics")

    def __init__(self, token, status, http_status, source, message, image, preview=False, incomplete=False,
                 placeholder=False, metrics=None):
        self.token = token
        # A table row's preview (Table(previews=True)): the row's final result follows.
        self.preview = preview
        # The image's data ended early and its decoder filled in the rest (a cut JPEG or
        # GIF; pixload.h, "Images whose data ended early"); also image.incomplete.
        self.incomplete = incomplete
        # A table row's placeholder (its request's placeholder=), drawn before its image.
        self.placeholder = placeholder
        # What the request cost (a pixload.Metrics) on a final result; None on previews
        # and placeholders.
        self.metrics = metrics
        try:
            self.status = Status(status)
        except ValueError:
            self.status = status
        self.http_status = http_status
        self.source = Source(source) if source in Source._value2member_map_ else source
        self.message = message
        self.image = image

    @property
    def ok(self):
        return self.status == Status.OK

    @property
    def cancelled(self):
        return self.status == Status.CANCELLED

    @property
    def error(self):
        if self.ok:
            return None
        return PixloadError.from_status(self.status, self.message, self.http_status)

    def unwrap(self):
        """The image, or raises the error."""
        if self.ok:
            return self.image
        raise self.error

    def __repr__(self):
        what = repr(self.image) if self.ok else f"{self.status!r} {self.message!r}"
        return f"<pixload.Result token={self.token} {what}>"


def _result_from_c(token, result_p):
    r = result_p.contents
    image = Image._retained(r.image) if r.image else None
    message = r.message.decode("utf-8", "replace") if r.message else ""
    flag = r.preview if r.struct_size >= _ffi.pxl_result.preview.offset + 4 else 0
    incomplete = r.struct_size >= _ffi.pxl_result.incomplete.offset + 4 and bool(r.incomplete)
    metrics = None if flag else metrics_from_c(result_p)
    return Result(token, r.status, r.http_status, r.source, message, image, flag == 1, incomplete, flag == 2, metrics)


_Pending = collections.namedtuple("_Pending", "callback progress preview")
_pending = {}             # user_data id -> _Pending, until the request's one callback
_pending_lock = threading.Lock()
_ids = itertools.count(1)


def _register(callback, progress=None, preview=None):
    with _pending_lock:
        key = next(_ids)
        _pending[key] = _Pending(callback, progress, preview)
    return key


def _unregister(key):
    with _pending_lock:
        return _pending.pop(key, None)


@_ffi.load_callback
def _on_load(token, result_p, user_data):
    entry = _unregister(user_data)
    if entry is None:  # cannot happen if the library keeps rule 2; do not crash the host
        return
    _call_user(entry.callback, _result_from_c(token, result_p))


@_ffi.progress_callback
def _on_progress(token, received, expected, user_data):
    with _pending_lock:
        entry = _pending.get(user_data)
    if entry is not None and entry.progress is not None:
        _call_user(entry.progress, received, expected)


@_ffi.preview_callback
def _on_preview(token, image, user_data):
    with _pending_lock:
        entry = _pending.get(user_data)
    if entry is not None and entry.preview is not None:
        _call_user(entry.preview, Image._retained(image))


def pending_callbacks():
    """How many accepted requests still wait for their callback (all loaders). For tests
    and leak checks."""
    return len(_pending)


# --- requests -------------------------------------------------------------------------

_FORMAT_NAMES = {"rgba8": Format.RGBA8, "rgba8-premul": Format.RGBA8_PREMUL,
                 "bgra8-premul": Format.BGRA8_PREMUL, "rgb8": Format.RGB8, "gray8": Format.GRAY8}


def _as_format(value):
    if isinstance(value, str):
        try:
            return _FORMAT_NAMES[value.lower().replace("_", "-")]
        except KeyError:
            raise ValueError(f"unknown format {value!r}; one of {', '.join(_FORMAT_NAMES)}") from None
    return Format(value)


def _as_mode(value):
    if isinstance(value, str):
        try:
            return Mode[value.upper()]
        except KeyError:
            raise ValueError(f"unknown mode {value!r}; 'fit' or 'fill'") from None
    return Mode(value)



_REQUEST_OPTIONS = frozenset((
    "size", "width", "height", "mode", "format", "priority", "cache_key", "headers",
    "progress_interval_ms", "preview_interval_ms", "process", "placeholder", *_FLAGS,
))


def _fill_request(req, url, keep, size=None, width=None, height=None, mode=Mode.FIT,
                  format=Format.RGBA8, priority=PRIORITY_NORMAL, cache_key=None, headers=None,
                  progress_interval_ms=None, preview_interval_ms=None, process=None, placeholder=None, _loader=None,
                  **flags):
    """Fills a pxl_request that pxl_request_init_size set up. Every byte string it points to
    is appended to keep: the caller holds keep until the C call has copied them."""
    unknown = set(flags) - set(_FLAGS)
    if unknown:
        raise TypeError(f"unknown request option(s): {', '.join(sorted(unknown))}")
    url_bytes = _encode(url)
    keep.append(url_bytes)
    req.url = url_bytes
    if cache_key is not None:
        key_bytes = _encode(cache_key)
        keep.append(key_bytes)
        req.cache_key = key_bytes
    if size is not None:
        if width is not None or height is not None:
            raise TypeError("give size=(w, h) or width/height, not both")
        width, height = (size, size) if isinstance(size, int) else size
    req.width = width or 0
    req.height = height or 0
    req.mode = _as_mode(mode)
    req.format = _as_format(format)
    req.priority = int(priority)
    bits = 0
    for name, on in flags.items():
        if on:
            bits |= _FLAGS[name]
    req.flags = bits
    req.headers = _header_array(headers, keep)
    if progress_interval_ms is not None:
        req.progress_interval_ms = progress_interval_ms
    if preview_interval_ms is not None:
        req.preview_interval_ms = preview_interval_ms
    if process:
        _processors.fill(req, process, keep, _loader)
    if placeholder is not None:  # a Placeholder; tables draw it (pxl_load ignores it)
        keep.append(placeholder.data)
        req.placeholder_kind = int(placeholder.kind)
        req.placeholder = ctypes.cast(ctypes.c_char_p(placeholder.data), ctypes.c_void_p)
        req.placeholder_length = len(placeholder.data)


def _new_request(url, keep, options, loader=None):
    req = _ffi.init_struct(_ffi.pxl_request)
    _fill_request(req, url, keep, _loader=loader, **options)
    return req


class Request:
    """An accepted load (pxl_token). Its callback runs exactly once."""

    __slots__ = ("token", "_loader", "__weakref__")

    def __init__(self, loader, token):
        self._loader = loader
        self.token = token

    def cancel(self):
        """True if this call cancelled it (its callback will report CANCELLED); False if
        it had already finished, started its callback or been cancelled. Any thread."""
        return self._loader.cancel(self.token)

    def set_priority(self, priority):
        """True if the request was still waiting or running."""
        return self._loader.set_priority(self.token, priority)

    def __repr__(self):
        return f"<pixload.Request token={self.token}>"


class Slot:
    """A reused view slot for Loader.bind (the token of its current load, 0 for none)."""

    __slots__ = ("_token",)

    def __init__(self):
        self._token = _ffi.c_token(0)

    @property
    def token(self):
        return self._token.value


# --- queues ---------------------------------------------------------------------------

def _free_queue(ptr):
    # pxl_queue_free runs the queue's remaining callbacks (CANCELLED) on this thread.
    with _CallbackScope():
        lib.pxl_queue_free(ptr)


class Queue(_Handle):
    """A completion queue. Callbacks of its requests run on the thread that calls
    dispatch(). `fd` is readable while completions are pending (for select/poll/epoll
    or an event loop); asyncio users need not touch it (Loader.fetch does)."""

    def __init__(self):
        out = ctypes.c_void_p()
        _check(lib.pxl_queue_new(ctypes.byref(out)), "pxl_queue_new")
        self._own(out.value, _free_queue)
        # The trampolines are module globals; a reference here as well means they outlive
        # every queue even while the module itself is being torn down at exit.
        self._trampolines = (_on_load, _on_progress, _on_preview)
        self._tables = weakref.WeakSet()
        self._loop = None

    @property
    def fd(self):
        return lib.pxl_queue_fd(self._handle())

    def dispatch(self, max_callbacks=0):
        """Runs up to max_callbacks pending callbacks (all when <= 0) on this thread and
        returns how many ran. Never blocks. An exception a callback raised is re-raised
        here, after the others have run."""
        ptr = self._handle()
        with _CallbackScope():
            return lib.pxl_queue_dispatch(ptr, max_callbacks)

    def wait(self, timeout=None):
        """Blocks (without the GIL) until a completion is pending, wakeup() is called or
        timeout seconds pass (None: forever). Returns the number pending; runs nothing."""
        ms = -1 if timeout is None else max(0, int(timeout * 1000))
        return lib.pxl_queue_wait(self._handle(), ms)

    def wakeup(self):
        """Makes a wait() in progress (or the next one) return. Any thread."""
        lib.pxl_queue_wakeup(self._handle())

    @property
    def pending(self):
        return lib.pxl_queue_pending(self._handle())

    def run_until(self, done, timeout=None):
        """Waits and dispatches until done() is true; returns False on timeout. Waits in
        short slices so that Ctrl-C is not held off."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done():
            slice_s = 0.25
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                slice_s = min(slice_s, left)
            if self.wait(slice_s):
                self.dispatch()
        return True

    def attach(self, loop=None):
        """Dispatches this queue from an asyncio loop (the running one by default) when
        its fd becomes readable."""
        loop = loop or asyncio.get_running_loop()
        loop.add_reader(self.fd, self._dispatch_ready)
        self._loop = weakref.ref(loop)

    def detach(self):
        """Undoes attach() (call it on the loop's thread, or with the loop stopped)."""
        loop = self._loop() if self._loop is not None else None
        self._loop = None
        if loop is not None and not loop.is_closed() and self._ptr is not None:
            loop.remove_reader(self.fd)

    def _dispatch_ready(self):
        if self._ptr is not None:
            self.dispatch()

    def close(self):
        """Frees the queue: requests still waiting get their CANCELLED callback on this
        thread before it returns. Tables using the queue are closed first. Not from inside
        this queue's callbacks, nor while another thread dispatches it."""
        if self._ptr is None:
            return
        for table in list(self._tables):
            table.close()
        self.detach()
        super().close()


# --- loader ---------------------------------------------------------------------------

# "log" is a Python callable here, and log_user_data is the bindings' own business.
_CONFIG_FIELDS = {name for name, _ in _ffi.pxl_config._fields_} - {"struct_size", "log_user_data", "request_hook",
                                                                     "request_hook_user_data"}


def _as_tls_version(value):
    """tls_min_version: "1.2" / "1.3" (or 1.2, 1.3), or the header's number (12, 13)."""
    names = {"1.2": 12, "1.3": 13}
    if isinstance(value, float):
        value = f"{value:.1f}"
    if isinstance(value, str):
        if value not in names:
            raise ValueError(f"tls_min_version must be '1.2' or '1.3', not {value!r}")
        return names[value]
    return int(value)


def _as_schemes(value):
    if isinstance(value, int):
        return int(value)
    bits = 0
    for name in value:
        bits |= Scheme[name.upper()]
    return int(bits)


def _as_log_level(value):
    if isinstance(value, str):
        try:
            return LogLevel[value.upper()]
        except KeyError:
            raise ValueError(f"unknown log level {value!r}; 'error', 'warning' or 'info'") from None
    return int(value)


def _log_trampoline(log):
    """A pxl_log_callback calling log(level, message). It runs on the library's threads:
    nothing it raises may reach C, so exceptions are swallowed (a logger that fails must
    not take the loader down)."""
    def on_log(level, message, _user_data):
        try:
            try:
                level = LogLevel(level)
            except ValueError:  # a level newer than these bindings: keep the number
                pass
            log(level, message.decode("utf-8", "replace") if message else "")
        except BaseException:  # noqa: B902 -- must not unwind into C
            pass
    return _ffi.log_callback(on_log)


def _loader_free(log_trampoline, after=None):
    """The loader's free function. It holds the log trampoline, so the CFUNCTYPE lives
    until pxl_loader_free has returned (after which the library never calls it), even
    when the free is postponed past the Loader object's collection; then runs after()
    (the request hook's entry is forgotten)."""
    def free(ptr):
        lib.pxl_loader_free(ptr)
        del keep[:]
        if after is not None:
            after()
    keep = [log_trampoline]
    return free


class Loader(_Handle):
    """A pxl_loader: network, decoders and caches. Keyword arguments are pxl_config
    fields (memory_cache_bytes=..., max_concurrent_downloads=..., allowed_schemes=
    {"http", "https", "file"} or Scheme bits, headers=[...] or {...}, disk_cache_dir=...,
    user_agent=..., ca_file= / ca_path= (only those CAs are trusted, not the system's),
    proxy= (a URL; "" for none; default: the environment's http_proxy, https_proxy,
    ALL_PROXY, no_proxy), tls_min_version="1.2" (default) or "1.3", ...); anything not
    given keeps the library's default.

    log=callable(level, message) receives the library's diagnostics (a disk cache
    directory it cannot use, a corrupt cache entry dropped): a LogLevel and one line of
    text, up to log_level (default LogLevel.WARNING). It runs on the library's threads,
    possibly several at once, must return quickly and must not call pixload; what it
    raises is ignored. Without it (the default) the library is silent.

    request_hook=callable(call) is asked before each http(s) transfer (first attempt,
    retries, every redirect hop, once more after a 401 or 403) for headers to add or
    replace, such as a bearer token; they never enter a cache key, so images cached
    under an old token keep being served. A plain function is called on the library's
    network thread and must return at once: it answers through the HookCall
    (call.answer(headers) / call.fail(...), thread-safe, now or later from any thread)
    or returns the headers; a coroutine function runs on the event loop of the `await
    loader.fetch(...)` that started the request and returns the headers (see
    pixload._hook). hook_timeout_ms (default 30000) bounds an unanswered call
    (TimeoutError).

    Thread-safe: any thread may load, cancel and look up. close() must not race with
    other calls on the same loader."""

    def __init__(self, *, log=None, request_hook=None, **config):
        unknown = set(config) - _CONFIG_FIELDS
        if unknown:
            raise TypeError(f"unknown Loader option(s): {', '.join(sorted(unknown))}; "
                            f"known: {', '.join(sorted(_CONFIG_FIELDS))}")
        if log is not None and not callable(log):
            raise TypeError("log must be a callable(level, message)")
        cfg = _ffi.init_struct(_ffi.pxl_config)
        keep = []
        log_trampoline = None
        if log is not None:
            log_trampoline = _log_trampoline(log)
            cfg.log = log_trampoline
        for name, value in config.items():
            if value is None:
                continue
            if name == "log_level":
                value = _as_log_level(value)
            elif name == "allowed_schemes":
                value = _as_schemes(value)
            elif name == "headers":
                value = _header_array(value, keep)
            elif name == "tls_min_version":
                value = _as_tls_version(value)
            elif name in ("user_agent", "ca_file", "ca_path", "proxy", "disk_cache_dir", "codec_modules"):
                value = _encode(value)
                keep.append(value)
            setattr(cfg, name, value)
        hook_entry = forget_hook = None
        if request_hook is not None:
            from . import _hook
            hook_entry, forget_hook = _hook.install(cfg, request_hook)
        out = ctypes.c_void_p()
        try:
            _check(lib.pxl_loader_new(ctypes.byref(cfg), ctypes.byref(out)), "pxl_loader_new")
        except BaseException:
            if forget_hook is not None:
                forget_hook()
            raise
        self._own(out.value, _loader_free(log_trampoline, forget_hook))
        if hook_entry is not None:
            hook_entry.loader = weakref.ref(self)
        self._tables = weakref.WeakSet()
        self._loop_queues = weakref.WeakKeyDictionary()  # asyncio loop -> its Queue
        self._fetch_loops = {}  # url -> [asyncio loop, awaits]: where a coroutine fetcher runs
        self._coroutine_schemes = set()

    def add_codec(self, codec):
        """Registers a pixload.Codec (pixload._codecs): its format is decoded after the
        built-in ones and the codecs added before."""
        from . import _codecs
        _codecs.add_codec(self._handle(), codec)

    def remove_codec(self, codec_id):
        """Unregisters the codec named codec_id (NotFoundError if there is none)."""
        from . import _codecs
        _codecs.remove_codec(self._handle(), codec_id)

    def formats(self):
        """The short names of the formats this loader decodes: ["jpeg", ..., "heic", "jxl", "svg"]."""
        from . import _codecs
        return _codecs.formats(self._handle())

    def close(self):
        """Frees the loader: every request in flight ends CANCELLED (delivered at its
        queue's next dispatch). The queues fetch() made for asyncio are closed as well,
        which delivers those cancellations at once (close on the loop's thread, or with
        the loop stopped). Images you hold stay valid."""
        if self._ptr is None:
            return
        for table in list(self._tables):
            table.close()
        super().close()
        for queue in list(self._loop_queues.values()):
            queue.close()
        self._loop_queues.clear()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.close()
        return False

    # -- requests --

    def load(self, url, callback, *, queue, progress=None, preview=None, **request):
        """Starts loading url; callback(result) runs exactly once on the thread that
        dispatches queue. Request options: size=(w, h) (or width=, height=), mode="fit" |
        "fill", format="rgba8" | "rgba8-premul" | "bgra8-premul" | "rgb8" | "gray8",
        priority=int, cache_key=str, headers=[...], ignore_orientation / skip_memory_cache
        / reload / cache_only / no_color_management=True, progress=fn(received, expected) and
        progress_interval_ms, preview=fn(image) (a progressive JPEG's scans so far, or a
        JPEG XL's passes through its module, blurry then sharper, before the callback; see
        pxl_request.preview) and
        preview_interval_ms. Returns a Request; raises PixloadError (and calls nobody)
        when the library refuses the request."""
        keep = []
        req = _new_request(url, keep, request, self)
        if progress is not None:
            req.progress = _on_progress
        if preview is not None:
            req.preview = _on_preview
        loader_ptr, queue_ptr = self._handle(), queue._handle()
        key = _register(callback, progress, preview)
        token = _ffi.c_token()
        status = lib.pxl_load(loader_ptr, ctypes.byref(req), queue_ptr, _on_load, key, ctypes.byref(token))
        if status != Status.OK:
            _unregister(key)
            raise PixloadError.from_status(status, f"pxl_load {url}")
        return Request(self, token.value)

    def cancel(self, token):
        """True if this call cancelled the request. Any thread; idempotent."""
        ptr = self._ptr
        if ptr is None:
            return False
        return lib.pxl_cancel(ptr, token) == Status.OK

    def set_priority(self, token, priority):
        ptr = self._ptr
        if ptr is None:
            return False
        return lib.pxl_set_priority(ptr, token, priority) == Status.OK

    def cancel_all(self, queue=None):
        """Cancels every request of queue (every request of the loader when None);
        returns how many."""
        return lib.pxl_cancel_all(self._handle(), queue._handle() if queue is not None else None)

    def lookup(self, url, **request):
        """The memory cache's image for this request, or None. Never blocks on disk or
        network."""
        keep = []
        req = _new_request(url, keep, request, self)
        out = ctypes.c_void_p()
        status = lib.pxl_lookup(self._handle(), ctypes.byref(req), ctypes.byref(out))
        if status == Status.OK:
            return Image(out.value)
        if status == Status.NOT_FOUND:
            return None
        raise PixloadError.from_status(status, f"pxl_lookup {url}")

    def prefetch(self, urls, **request):
        """Warms the memory cache with urls (each a URL, or a dict of load options with
        'url', over the shared keyword options). Calls nobody. Returns one Request per
        item (cancel it to stop that prefetch), None where the library refused it."""
        keep = []
        items = list(urls)
        array = (_ffi.pxl_request * len(items))()
        for i, item in enumerate(items):
            options = dict(request)
            if isinstance(item, dict):
                options.update(item)
                url = options.pop("url")
            else:
                url = item
            _ffi.init_struct(_ffi.pxl_request, array[i])
            _fill_request(array[i], url, keep, _loader=self, **options)
        tokens = (_ffi.c_token * len(items))()
        status = lib.pxl_prefetch(self._handle(), array, len(items), tokens)
        if status == Status.INVALID_ARGUMENT and not any(tokens):
            raise PixloadError.from_status(status, "pxl_prefetch")
        return [Request(self, t) if t else None for t in tokens]

    def bind(self, slot, url, callback, *, queue, progress=None, **request):
        """The slot now shows url (pxl_bind): its previous load is cancelled; a memory
        hit is returned at once as an Image (and callback is not called); otherwise None
        is returned and callback(result) runs later, exactly once."""
        keep = []
        req = _new_request(url, keep, request, self)
        if progress is not None:
            req.progress = _on_progress
        loader_ptr, queue_ptr = self._handle(), queue._handle()
        key = _register(callback, progress)
        image = ctypes.c_void_p()
        status = lib.pxl_bind(loader_ptr, ctypes.byref(req), queue_ptr, _on_load, key,
                              ctypes.byref(slot._token), ctypes.byref(image))
        if status != Status.OK:
            _unregister(key)
            raise PixloadError.from_status(status, f"pxl_bind {url}")
        if image.value:
            _unregister(key)  # a memory hit: no request was made, no callback comes
            return Image(image.value)
        return None

    # -- fetchers of the host's own schemes --

    def add_fetcher(self, scheme, fetch, *, max_concurrent=8, disk_cache=False, disk_max_age=0):
        """Serves URLs of scheme ("app" for "app:..." URLs; not http, https, file or data)
        with fetch(url, sink), called on the library's fetch thread; it must return at
        once. A plain function hands the work to a thread of its own and answers with
        sink.write(bytes) and sink.finish() (or sink.fail(error)), from any thread; a
        coroutine function is run on the event loop of the `await loader.fetch(...)` that
        started the request (its return finishes the sink; an exception fails it), and is
        not allowed with fetch_sync. Requests for the scheme are merged, ranked, cached in
        memory and, with disk_cache=True, on disk (fresh disk_max_age seconds, 0: until
        evicted) like any other. A fetch the library ends early (every requester
        cancelled, timeout_ms, max_body_bytes, close()) sets sink.cancelled, calls
        sink.on_cancel if set, cancels a coroutine's task, and makes write() return
        False. max_concurrent: fetches at once. Raises PixloadError when refused."""
        from . import _fetchers
        entry = _fetchers.add_fetcher(self, scheme, fetch, max_concurrent, disk_cache, disk_max_age)
        if entry.is_coroutine:
            self._coroutine_schemes.add(entry.scheme)

    def remove_fetcher(self, scheme):
        """Removes the fetcher of scheme: its unanswered requests end CANCELLED. False
        when it had none."""
        from . import _fetchers
        self._coroutine_schemes.discard(scheme.lower())
        return _fetchers.remove_fetcher(self, scheme)

    def _fetch_loop(self, url):
        entry = self._fetch_loops.get(url)
        return entry[0] if entry else None

    def _hook_loop(self, url):
        """The loop a coroutine request hook runs on for url: its fetch's; for a redirect
        hop (another URL), the one loop awaiting fetches, if there is only one."""
        loop = self._fetch_loop(url)
        if loop is None:
            loops = {entry[0] for entry in list(self._fetch_loops.values())}
            loop = loops.pop() if len(loops) == 1 else None
        return loop

    # -- asyncio and blocking conveniences --

    def _queue_for_running_loop(self):
        loop = asyncio.get_running_loop()
        queue = self._loop_queues.get(loop)
        if queue is None or queue.closed:
            queue = Queue()
            queue.attach(loop)
            self._loop_queues[loop] = queue
        return queue

    async def fetch(self, url, **request):
        """Loads url and returns its Image; raises PixloadError on failure. Cancelling
        the awaiting task cancels the pixload request. Completions are dispatched from
        the running loop through the queue's fd (one queue per loader and loop)."""
        self._handle()  # a closed loader raises before a queue is made for it
        loop = asyncio.get_running_loop()
        queue = self._queue_for_running_loop()
        future = loop.create_future()

        def deliver(result):
            if future.done() or loop.is_closed():
                return  # the task was cancelled; the Image (if any) is simply dropped
            if result.ok:
                future.set_result(result.image)
            else:
                future.set_exception(result.error)

        # A coroutine fetcher of url's scheme runs on this loop (the first awaiting one's).
        waiting = self._fetch_loops.setdefault(url, [loop, 0])
        waiting[1] += 1
        try:
            handle = self.load(url, deliver, queue=queue, **request)
            try:
                return await future
            except asyncio.CancelledError:
                handle.cancel()
                raise
        finally:
            waiting[1] -= 1
            if waiting[1] == 0 and self._fetch_loops.get(url) is waiting:
                del self._fetch_loops[url]

    def fetch_sync(self, url, timeout=None, **request):
        """Loads url and blocks until its Image is ready (raises PixloadError on failure,
        TimeoutError after timeout seconds, after cancelling the request). Uses a
        private queue, so it may be called from any thread, also next to an asyncio
        loop using the same loader. Not for URLs of a coroutine fetcher's scheme."""
        if url.partition(":")[0].lower() in self._coroutine_schemes:
            raise TypeError(f"{url}: its fetcher is a coroutine function; use `await loader.fetch(...)`")
        results = []
        with Queue() as queue:
            handle = self.load(url, results.append, queue=queue, **request)
            try:
                if not queue.run_until(lambda: results, timeout):
                    handle.cancel()
                    queue.run_until(lambda: results)  # the one callback still comes
                    if not results[0].ok:
                        raise TimeoutError(f"pixload: {url} not loaded within {timeout} s")
            except BaseException:
                handle.cancel()  # Ctrl-C: the queue's close delivers the cancellation
                raise
        return results[0].unwrap()

    # -- caches and statistics --

    def trim_memory_cache(self, max_bytes=0):
        lib.pxl_memory_cache_trim(self._handle(), max_bytes)

    @property
    def memory_cache_bytes(self):
        return lib.pxl_memory_cache_bytes(self._handle())

    @property
    def memory_cache_count(self):
        return lib.pxl_memory_cache_count(self._handle())

    @property
    def disk_cache_bytes(self):
        return lib.pxl_disk_cache_bytes(self._handle())

    def clear_disk_cache(self):
        """Deletes every disk-cache entry; blocks on the disk."""
        lib.pxl_disk_cache_clear(self._handle())

    def cache_remove(self, cache_key):
        _check(lib.pxl_cache_remove(self._handle(), _encode(cache_key)), "pxl_cache_remove")

    def stats(self):
        # The library fills what it knows and zeroes the rest of ours (a 0.2 library
        # and newer bindings: the newer counters read 0).
        stats = _ffi.pxl_stats(struct_size=ctypes.sizeof(_ffi.pxl_stats))
        _check(lib.pxl_loader_get_stats(self._handle(), ctypes.byref(stats)), "pxl_loader_get_stats")
        return Stats(**{name: getattr(stats, name) for name in Stats._fields})


Stats = collections.namedtuple("Stats", [n for n, _ in _ffi.pxl_stats._fields_[1:]])
TableStats = collections.namedtuple("TableStats", [n for n, _ in _ffi.pxl_table_stats._fields_[1:]])


# --- tables ---------------------------------------------------------------------------

class _TableEntry:
    __slots__ = ("request_for_row", "on_row", "defaults", "keep")

    def __init__(self, request_for_row, on_row, defaults):
        self.request_for_row = request_for_row
        self.on_row = on_row
        self.defaults = defaults
        self.keep = []  # strings handed to C from request_fn, until set_visible returns


_tables = {}  # user_data id -> _TableEntry, while the C table exists


@_ffi.table_request_fn
def _on_table_request(row, request_p, user_data):
    entry = _tables.get(user_data)
    if entry is None:
        return 0
    try:
        spec = entry.request_for_row(row)
        if spec is None:
            return 0
        options = dict(entry.defaults)
        if isinstance(spec, dict):
            options.update(spec)
            url = options.pop("url")
        else:
            url = spec
        _fill_request(request_p.contents, url, entry.keep, **options)
        return 1
    except BaseException as e:  # noqa: B902 -- re-raised by set_visible
        _record_callback_error(e)
        return 0


@_ffi.table_row_fn
def _on_table_row(row, result_p, user_data):
    entry = _tables.get(user_data)
    if entry is not None:
        _call_user(entry.on_row, row, _result_from_c(0, result_p))


def _free_table_entry(key):
    def free(ptr):
        lib.pxl_table_free(ptr)
        _tables.pop(key, None)
    return free


class Table(_Handle):
    """A pxl_table: say which rows are on screen (set_visible) and the library loads
    them first, prefetches ahead, and cancels what left.

    request_for_row(row) returns the row's URL, a dict of load options with 'url'
    (over the keyword request options given here), or None for no image. It runs inside
    set_visible / set_row_count and must not call the table. on_row(row, result) runs
    for visible rows only: on the thread dispatching queue, or inside set_visible for rows
    already in memory; never with a cancellation. previews=True: a visible row whose
    image is a progressive JPEG (or a JPEG XL, through its module) also gets on_row calls with result.preview True (blurry,
    then sharper) before its final one."""

    def __init__(self, loader, queue, row_count, request_for_row, on_row, *, prefetch_rows=None,
                 keep_rows=None, visible_priority=None, prefetch_priority=None, previews=False, **request):
        unknown = set(request) - _REQUEST_OPTIONS
        if unknown:
            raise TypeError(f"unknown Table option(s): {', '.join(sorted(unknown))}")
        config = _ffi.init_struct(_ffi.pxl_table_config)
        for name, value in (("prefetch_rows", prefetch_rows), ("keep_rows", keep_rows),
                            ("visible_priority", visible_priority),
                            ("prefetch_priority", prefetch_priority)):
            if value is not None:
                setattr(config, name, value)
        # Off unless asked: on_row then also receives previews (result.preview True).
        config.previews = 1 if previews else 0
        key = next(_ids)
        _tables[key] = _TableEntry(request_for_row, on_row, dict(request, _loader=loader))
        out = ctypes.c_void_p()
        status = lib.pxl_table_create(loader._handle(), queue._handle(), ctypes.byref(config), row_count,
                                   _on_table_request, _on_table_row, key, ctypes.byref(out))
        if status != Status.OK:
            del _tables[key]
            raise PixloadError.from_status(status, "pxl_table_create")
        self._own(out.value, _free_table_entry(key))
        self._key = key
        # Freed before them (explicitly or by reference order), never after.
        self.loader = loader
        self.queue = queue
        self._trampolines = (_on_table_request, _on_table_row)
        loader._tables.add(self)
        queue._tables.add(self)

    def _call(self, fn, *args):
        ptr = self._handle()
        entry = _tables[self._key]
        try:
            with _CallbackScope():
                return fn(ptr, *args)
        finally:
            entry.keep.clear()

    def set_visible(self, first, count, direction=0):
        """Rows first .. first + count - 1 are on screen; direction > 0 scrolls towards
        higher rows, < 0 towards lower, 0 still. May call on_row before it returns."""
        _check(self._call(lib.pxl_table_set_visible, first, count, direction), "pxl_table_set_visible")

    def set_row_count(self, row_count):
        _check(self._call(lib.pxl_table_set_row_count, row_count), "pxl_table_set_row_count")

    def cancel_all(self):
        lib.pxl_table_cancel_all(self._handle())

    def stats(self):
        stats = _ffi.pxl_table_stats(struct_size=ctypes.sizeof(_ffi.pxl_table_stats))
        _check(lib.pxl_table_get_stats(self._handle(), ctypes.byref(stats)), "pxl_table_get_stats")
        return TableStats(**{name: getattr(stats, name) for name in TableStats._fields})
