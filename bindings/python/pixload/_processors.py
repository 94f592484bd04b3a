"""Processors (pixload.h, "Processors"): a request's chain, given as
`process=[pixload.Circle(border=(2, "#ffffffff")), pixload.Blur(4)]` to Loader.load,
fetch, fetch_sync, lookup, prefetch, bind and tables. Each step is applied in order after
the resize, on the library's decoder threads; the chain is part of the cache keys, and
requests sharing a chain prefix share its work."""
import ctypes
import inspect
import itertools
import threading

from . import _ffi
from ._errors import _check
from ._ffi import lib

CIRCLE, ROUND, BLUR, CROP, ROTATE, FLIP, GRAY, TINT, CUSTOM = range(1, 10)
MAX_PROCESSORS = 16
MAX_BLUR_SIGMA = 250


class pxl_processor(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_int32),
        ("color", ctypes.c_uint32),
        ("radius_tl", ctypes.c_double),
        ("radius_tr", ctypes.c_double),
        ("radius_br", ctypes.c_double),
        ("radius_bl", ctypes.c_double),
        ("border_width", ctypes.c_double),
        ("sigma", ctypes.c_double),
        ("x", ctypes.c_int32),
        ("y", ctypes.c_int32),
        ("width", ctypes.c_int32),
        ("height", ctypes.c_int32),
        ("degrees", ctypes.c_int32),
        ("vertical", ctypes.c_int32),
        ("id", ctypes.c_char_p),
    ]


class pxl_processor_frame(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("pixels", ctypes.c_void_p),
        ("width", ctypes.c_int32),
        ("height", ctypes.c_int32),
        ("stride", ctypes.c_int32),
        ("frame_index", ctypes.c_int32),
        ("frame_count", ctypes.c_int32),
        ("input", ctypes.c_void_p),
        ("input_width", ctypes.c_int32),
        ("input_height", ctypes.c_int32),
        ("cancelled", ctypes.POINTER(ctypes.c_int32)),
        ("internal", ctypes.c_void_p),
    ]


processor_callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(pxl_processor_frame), ctypes.c_void_p,
                                      ctypes.c_size_t, ctypes.c_void_p)
destroy_callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _color(value):
    """"#RRGGBB", "#RRGGBBAA" or an int 0xRRGGBBAA -> 0xRRGGBBAA."""
    if isinstance(value, int):
        if not 0 <= value <= 0xFFFFFFFF:
            raise ValueError(f"colour {value:#x} is not 0xRRGGBBAA")
        return value
    text = str(value).lstrip("#")
    if len(text) == 6:
        text += "ff"
    if len(text) != 8:
        raise ValueError(f"colour {value!r} is not #RRGGBB or #RRGGBBAA")
    return int(text, 16)


def _border(border):
    if border is None:
        return 0.0, 0
    width, color = border
    return float(width), _color(color)


class Processor:
    """One step of a chain. Subclasses: Circle, RoundedCorners, Blur, Crop, Rotate, Flip,
    Grayscale, Tint, Custom."""

    kind = 0

    def _fill(self, step, keep, loader):
        raise NotImplementedError

    def __eq__(self, other):
        return type(self) is type(other) and vars(self) == vars(other)

    def __hash__(self):
        return hash((type(self), tuple(sorted(vars(self).items(), key=lambda kv: kv[0]))))

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"pixload.{type(self).__name__}({args})"


class Circle(Processor):
    """The centred square of side min(w, h) cut to its disc (anti-aliased by exact
    coverage); border=(width, "#RRGGBBAA") is drawn inside it."""

    def __init__(self, border=None):
        self.border = border

    def _fill(self, step, keep, loader):
        step.kind = CIRCLE
        step.border_width, step.color = _border(self.border)


class RoundedCorners(Processor):
    """Corners rounded by radius (one number, or four: top-left, top-right, bottom-right,
    bottom-left) in output pixels; a radius over half the shorter side is clamped."""

    def __init__(self, radius, border=None):
        self.radius = tuple(radius) if isinstance(radius, (tuple, list)) else (radius,) * 4
        if len(self.radius) != 4:
            raise ValueError("radius is one number or four")
        self.border = border

    def _fill(self, step, keep, loader):
        step.kind = ROUND
        step.radius_tl, step.radius_tr, step.radius_br, step.radius_bl = (float(r) for r in self.radius)
        step.border_width, step.color = _border(self.border)


class Blur(Processor):
    """A Gaussian blur of standard deviation sigma output pixels (0 ... 250)."""

    def __init__(self, sigma):
        self.sigma = sigma

    def _fill(self, step, keep, loader):
        step.kind = BLUR
        step.sigma = float(self.sigma)


class Crop(Processor):
    """The rectangle (x, y, width, height) of the image as it is at this step."""

    def __init__(self, x, y, width, height):
        self.x, self.y, self.width, self.height = x, y, width, height

    def _fill(self, step, keep, loader):
        step.kind = CROP
        step.x, step.y, step.width, step.height = self.x, self.y, self.width, self.height


class Rotate(Processor):
    """Clockwise by 90, 180 or 270 degrees."""

    def __init__(self, degrees):
        self.degrees = degrees

    def _fill(self, step, keep, loader):
        step.kind = ROTATE
        step.degrees = self.degrees


class Flip(Processor):
    """"h" mirrors left-right, "v" top-bottom."""

    def __init__(self, axis="h"):
        if axis not in ("h", "v"):
            raise ValueError('axis is "h" or "v"')
        self.axis = axis

    def _fill(self, step, keep, loader):
        step.kind = FLIP
        step.vertical = 1 if self.axis == "v" else 0


class Grayscale(Processor):
    """Luma with the GRAY8 format's weights; alpha kept."""

    def _fill(self, step, keep, loader):
        step.kind = GRAY


class Tint(Processor):
    """color ("#RRGGBBAA") composited source-atop: it covers the pixels, keeps alpha."""

    def __init__(self, color):
        self.color = color

    def _fill(self, step, keep, loader):
        step.kind = TINT
        step.color = _color(self.color)


class Custom(Processor):
    """Your own processor: fn(pixels) gets each frame as a writable numpy view (height,
    width, 4) of premultiplied RGBA8 and changes it in place (returns None), or returns a
    new (h, w, 4) uint8 array (a new size). With a second parameter, fn(pixels,
    cancelled) also gets a callable that says whether the result is still wanted. It runs
    on the library's decoder threads (several at once): no UI work in it. Raising fails
    the requests that need it (PXL_E_INVALID_ARGUMENT, the exception as the message).
    Registered with the loader on first use; id and version are its cache identity (bump
    version when its output changes)."""

    def __init__(self, id, version, fn):
        if not callable(fn):
            raise TypeError("fn must be callable")
        self.id, self.version, self.fn = str(id), int(version), fn

    def __hash__(self):
        return hash((Custom, self.id, self.version))

    def _fill(self, step, keep, loader):
        if loader is None:
            raise TypeError("a Custom processor needs a loader (not available here)")
        _register(loader, self)
        step.kind = CUSTOM
        encoded = self.id.encode()
        keep.append(encoded)
        step.id = encoded


# Trampolines the library may still call, by the user_data token it got; dropped by the
# destroy callback (the library's promise: no call after it).
_live = {}
_tokens = itertools.count(1)
_lock = threading.Lock()


@destroy_callback
def _destroy(user_data):
    with _lock:
        _live.pop(user_data or 0, None)


def _trampoline(custom):
    import numpy as np

    try:
        wants_cancel = len(inspect.signature(custom.fn).parameters) >= 2
    except (TypeError, ValueError):
        wants_cancel = False

    @processor_callback
    def call(frame_p, message, message_size, user_data):
        frame = frame_p.contents
        try:
            buffer = (ctypes.c_uint8 * (frame.stride * frame.height)).from_address(frame.pixels)
            view = np.ndarray((frame.height, frame.width, 4), dtype=np.uint8, buffer=buffer,
                              strides=(frame.stride, 4, 1))
            if wants_cancel:
                flag = frame.cancelled
                result = custom.fn(view, lambda: bool(flag[0]))
            else:
                result = custom.fn(view)
            if result is not None:
                out = np.ascontiguousarray(result, dtype=np.uint8)
                if out.ndim != 3 or out.shape[2] != 4:
                    raise ValueError(f"a processor returns (h, w, 4) uint8, not {out.shape}")
                h, w = out.shape[:2]
                target = lib.pxl_processor_frame_resize(frame_p, w, h)
                if not target:
                    raise ValueError(f"the library refused an output of {w}x{h}")
                ctypes.memmove(target, out.ctypes.data, w * h * 4)
            if frame.cancelled[0]:
                return 13  # PXL_E_CANCELLED
            return 0
        except BaseException as e:  # noqa: B902 -- reported as the request's error
            text = f"{type(e).__name__}: {e}".encode(errors="replace")[: max(0, message_size - 1)]
            ctypes.memmove(message, text + b"\0", len(text) + 1)
            return 1  # PXL_E_INVALID_ARGUMENT

    return call


def _register(loader, custom):
    """Registers custom with loader unless this very object already is (a new version or
    function under the same id replaces the old registration)."""
    registered = loader.__dict__.setdefault("_customs", {})
    if registered.get(custom.id) is custom:
        return
    call = _trampoline(custom)
    with _lock:
        token = next(_tokens)
        _live[token] = call
    status = lib.pxl_loader_add_processor(loader._ptr, custom.id.encode(), custom.version,
                                          ctypes.cast(call, ctypes.c_void_p), token,
                                          ctypes.cast(_destroy, ctypes.c_void_p))
    if status != 0:
        with _lock:
            _live.pop(token, None)  # a refusal never calls _destroy (pixload.h, "Extensions")
        _check(status, "pxl_loader_add_processor")
    registered[custom.id] = custom


def fill(req, process, keep, loader):
    """Points req at a pxl_processor array made from process (kept alive in keep)."""
    steps = list(process or ())
    if not steps:
        return
    for step in steps:
        if not isinstance(step, Processor):
            raise TypeError(f"process takes pixload processors (Circle, Blur, ...), not {step!r}")
    array = (pxl_processor * len(steps))()
    for step, value in zip(array, steps):
        value._fill(step, keep, loader)
    keep.append(array)
    req.processors = ctypes.cast(array, ctypes.c_void_p)
    req.processor_count = len(steps)
