"""Registered codecs (pixload.h, "Codecs"): a format of your own decoded by Python code,
through the same pxl_loader_add_codec the C modules use.

    class QOI(pixload.Codec):
        id, version = "qoi", "1.0"
        def sniff(self, head): return head[:4] == b"qoif"
        def read_header(self, data): return pixload.CodecHeader(width=..., height=...)
        def decode(self, data, width, height): return rgba_bytes   # width*height*4, straight

    loader.add_codec(QOI())

The library calls these on its decode threads (several at once, on different files), with
the whole encoded file as bytes; the pixels then go through the library's resize,
orientation, colour and caches like any other format's. An exception in read_header or
decode fails that request with PXL_E_CORRUPT_IMAGE and the exception's text; raise
CodecError(Status.UNSUPPORTED_IMAGE, "...") for another status.
"""
import ctypes
import dataclasses
import threading

from . import _ffi
from ._errors import Status, _check
from ._ffi import lib

PXL_CODEC_PREMULTIPLIED = 0x1
PXL_CODEC_SCALABLE = 0x4
PXL_CODEC_KEEP_ORIENTATION = 0x1
c_status = ctypes.c_uint32
_u8p = ctypes.POINTER(ctypes.c_uint8)


class pxl_codec_header(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("flags", ctypes.c_uint32), ("width", ctypes.c_int32),
        ("height", ctypes.c_int32), ("frame_count", ctypes.c_int32), ("loop_count", ctypes.c_int32),
        ("orientation", ctypes.c_int32), ("has_alpha", ctypes.c_int32), ("icc_size", ctypes.c_size_t),
        ("cicp_primaries", ctypes.c_int32), ("cicp_transfer", ctypes.c_int32), ("cicp_matrix", ctypes.c_int32),
    ]


frame_done_fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32)


class pxl_codec_target(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("flags", ctypes.c_uint32), ("width", ctypes.c_int32),
        ("height", ctypes.c_int32), ("pixels", ctypes.c_void_p), ("stride", ctypes.c_size_t),
        ("cancel", ctypes.POINTER(ctypes.c_int32)), ("frame_done", frame_done_fn), ("library", ctypes.c_void_p),
    ]

sniff_fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
header_fn = ctypes.CFUNCTYPE(c_status, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(pxl_codec_header),
                             ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
icc_fn = ctypes.CFUNCTYPE(c_status, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
choose_fn = ctypes.CFUNCTYPE(c_status, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32,
                             ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int32), ctypes.c_void_p)
decode_fn = ctypes.CFUNCTYPE(c_status, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(pxl_codec_target),
                             ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
destroy_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class pxl_codec(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("id", ctypes.c_char_p), ("version", ctypes.c_char_p),
        ("flags", ctypes.c_uint32), ("user_data", ctypes.c_void_p), ("sniff", sniff_fn), ("read_header", header_fn),
        ("read_icc", icc_fn), ("choose_size", choose_fn), ("decode", decode_fn), ("decode_frames", decode_fn),
        ("destroy", destroy_fn),
    ]


for _name, _restype, _argtypes in [
    ("pxl_codec_init_size", c_status, [ctypes.POINTER(pxl_codec), ctypes.c_size_t]),
    ("pxl_loader_add_codec", c_status, [ctypes.c_void_p, ctypes.POINTER(pxl_codec)]),
    ("pxl_loader_remove_codec", c_status, [ctypes.c_void_p, ctypes.c_char_p]),
    ("pxl_loader_formats", ctypes.c_size_t, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]),
    ("pxl_loader_isolation", ctypes.c_size_t, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]),
]:
    try:
        _fn = getattr(lib, _name)
    except AttributeError:
        raise _ffi.LibraryNotFoundError(f"the loaded libpixload ({_ffi.library_origin}) lacks {_name}. " + _ffi._HELP)
    _fn.restype, _fn.argtypes = _restype, _argtypes


@dataclasses.dataclass
class CodecHeader:
    """What read_header returns: the size decode draws, and what the library applies."""
    width: int
    height: int
    orientation: int = 1      # EXIF 1..8, applied by the library
    has_alpha: bool = True


class CodecError(Exception):
    """Raised by a codec: fails the request with `status` (a Status) and this text."""

    def __init__(self, status, message=""):
        super().__init__(message)
        self.status = status


class Codec:
    """Subclass and set `id` ([a-z0-9_-], 1..31 characters) and `version` (recorded with
    the thumbnails it makes in the disk cache: another version decodes them anew); `premultiplied = True` if decode writes
    premultiplied alpha; `scalable = True` if decode draws at any size (a vector format: a
    request larger than the header's size then gets a target of the size it asks;
    PXL_CODEC_SCALABLE)."""
    id = None
    version = "1"
    premultiplied = False
    scalable = False

    def sniff(self, head):
        """Whether `head` (the file's first bytes, up to 4096) is this codec's."""
        raise NotImplementedError

    def read_header(self, data):
        """A CodecHeader for the whole file `data` (bytes)."""
        raise NotImplementedError

    def decode(self, data, width, height):
        """width*height*4 bytes of RGBA8 (bytes, bytearray or a buffer)."""
        raise NotImplementedError

    def destroy(self):
        """Called once, after the library's last call (removal, or the loader freed)."""


# Callbacks of registered codecs, alive until their destroy. The destroy trampolines stay
# for the process (one small object per registration): one must not free itself while
# it runs.
_alive = {}
_destroyers = []
_lock = threading.Lock()


def _fail(message, cap, status, text):
    if message and cap:
        raw = text.encode("utf-8", "replace")[: cap - 1] + b"\0"
        ctypes.memmove(message, raw, len(raw))
    return int(status)


def add_codec(loader_ptr, codec):
    if not isinstance(codec, Codec) or not isinstance(codec.id, str):
        raise TypeError("add_codec takes a pixload.Codec with an id")

    def sniff(data, size, _user):
        try:
            return 1 if codec.sniff(ctypes.string_at(data, size)) else 0
        except Exception:  # noqa: BLE001 -- never unwind into C
            return 0

    def read_header(data, size, header, message, cap, _user):
        try:
            h = codec.read_header(ctypes.string_at(data, size))
            header.contents.width, header.contents.height = h.width, h.height
            header.contents.orientation = h.orientation
            header.contents.has_alpha = 1 if h.has_alpha else 0
            return 0
        except CodecError as e:
            return _fail(message, cap, e.status, str(e))
        except Exception as e:  # noqa: BLE001
            return _fail(message, cap, Status.CORRUPT_IMAGE, f"{type(e).__name__}: {e}")

    def decode(data, size, target, message, cap, _user):
        t = target.contents
        try:
            pixels = codec.decode(ctypes.string_at(data, size), t.width, t.height)
            view = memoryview(pixels).cast("B")
            row = t.width * 4
            if len(view) != row * t.height:
                return _fail(message, cap, Status.CORRUPT_IMAGE, f"decode gave {len(view)} bytes, not {row * t.height}")
            buffer = (ctypes.c_char * len(view)).from_buffer_copy(view)
            for y in range(t.height):
                ctypes.memmove(t.pixels + y * t.stride, ctypes.addressof(buffer) + y * row, row)
            return 0
        except CodecError as e:
            return _fail(message, cap, e.status, str(e))
        except Exception as e:  # noqa: BLE001
            return _fail(message, cap, Status.CORRUPT_IMAGE, f"{type(e).__name__}: {e}")

    with _lock:
        key = id(codec)
        while key in _alive:
            key += 1

    def destroy(_user):
        with _lock:
            _alive.pop(key, None)
        try:
            codec.destroy()
        except Exception:  # noqa: BLE001
            pass

    c = pxl_codec()
    _check(lib.pxl_codec_init_size(ctypes.byref(c), ctypes.sizeof(c)), "pxl_codec_init")
    ident, version = codec.id.encode(), str(codec.version).encode()
    callbacks = (sniff_fn(sniff), header_fn(read_header), decode_fn(decode))
    destroyer = destroy_fn(destroy)
    c.id, c.version = ident, version
    c.flags = (PXL_CODEC_PREMULTIPLIED if codec.premultiplied else 0) | (PXL_CODEC_SCALABLE if codec.scalable else 0)
    c.sniff, c.read_header, c.decode = callbacks
    c.destroy = destroyer
    with _lock:
        _alive[key] = callbacks
        _destroyers.append(destroyer)
    # On failure the library has called destroy already.
    _check(lib.pxl_loader_add_codec(loader_ptr, ctypes.byref(c)), "pxl_loader_add_codec")


def remove_codec(loader_ptr, ident):
    _check(lib.pxl_loader_remove_codec(loader_ptr, ident.encode()), "pxl_loader_remove_codec")


def formats(loader_ptr):
    size = lib.pxl_loader_formats(loader_ptr, None, 0)
    buffer = ctypes.create_string_buffer(size + 1)
    lib.pxl_loader_formats(loader_ptr, buffer, size + 1)
    return buffer.value.decode().split()
