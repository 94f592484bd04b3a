"""Requests: load options made into a pxl_request, an accepted load (Request), a bind
slot (Slot), and the registry of every load's callbacks.

Callbacks. Every load's callback goes through one module-level CFUNCTYPE trampoline
(created once, referenced by this module and by every Queue, so it can never be
collected while C may call it). The C side gets a small integer as user_data; the
trampoline looks the Python callable up in _pending by that id and removes it, so each
callable lives exactly until its one result has been delivered. The id is registered
before pxl_load is called, because another thread may dispatch the queue, and so run the
callback, before pxl_load has returned the token.
"""
import collections
import ctypes
import itertools
import threading

from . import _ffi, _processors
from ._callbacks import _call_user
from ._enums import PRIORITY_NORMAL, Format, Mode
from ._image import Image
from ._result import _outcome_from_c, _result_from_c
from ._strings import _encode, _header_array

_FLAGS = {
    "ignore_orientation": 0x1,
    "skip_memory_cache": 0x2,
    "reload": 0x4,
    "cache_only": 0x8,
    "animate": 0x10,  # every frame of an animated image (Image.frames); since 0.4.0
    "no_color_management": 0x20,  # since 0.4.0
}


# --- the callback registry ------------------------------------------------------------

# outcome: the callback takes (image, error) (_outcome_from_c), not a Result (Loader.fetch).
_Pending = collections.namedtuple("_Pending", "callback progress preview outcome")
_pending = {}             # user_data id -> _Pending, until the request's one callback
_pending_lock = threading.Lock()
_ids = itertools.count(1)


def _register(callback, progress=None, preview=None, outcome=False):
    with _pending_lock:
        key = next(_ids)
        _pending[key] = _Pending(callback, progress, preview, outcome)
    return key


def _unregister(key):
    with _pending_lock:
        return _pending.pop(key, None)


@_ffi.load_callback
def _on_load(token, result_p, user_data):
    entry = _unregister(user_data)
    if entry is None:  # cannot happen if the library keeps rule 2; do not crash the host
        return
    if entry.outcome:
        _call_user(entry.callback, *_outcome_from_c(result_p))
    else:
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


# Options that point at memory the caller keeps, or depend on the loader: never cached.
_POINTING = frozenset(("cache_key", "headers", "process", "placeholder"))
# Filled pxl_requests without a URL, by their other options (sizes, mode, format, flags):
# most loads repeat a few, and a copy costs a tenth of filling one.
_templates = {}


def _new_request(url, keep, options, loader=None):
    try:
        key = None if _POINTING.intersection(options) else tuple(sorted(options.items()))
        template = _templates.get(key) if key is not None else None
    except TypeError:  # an unhashable value (a size given as a list)
        key = template = None
    if template is None:
        req = _ffi.init_struct(_ffi.pxl_request)
        _fill_request(req, url, keep, _loader=loader, **options)
        if key is not None:
            if len(_templates) >= 64:
                _templates.clear()
            template = _ffi.pxl_request.from_buffer_copy(req)
            template.url = None
            _templates[key] = template
        return req
    req = _ffi.pxl_request.from_buffer_copy(template)
    url_bytes = _encode(url)
    keep.append(url_bytes)
    req.url = url_bytes
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
