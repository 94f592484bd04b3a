"""Placeholders (since 0.5.0): BlurHash and ThumbHash, decoded and encoded by libpixload.

    ph = pixload.Placeholder.blurhash("LEHV6nWB2yk8pyo0adR*.7kCMdnj")
    image = ph.decode(32, 32)                    # an RGBA8 (straight) pixload.Image
    pixload.encode_blurhash(image)               # -> str, 4x3 components
    pixload.encode_thumbhash(image)              # -> bytes

A Table row's request may carry one (request_for_row returns {"url": ..., "placeholder":
ph}): the row's on_row gets it at once, with result.placeholder True, before its image."""
import base64
import ctypes
import dataclasses
import enum

from . import _ffi
from ._errors import PixloadError
from ._ffi import lib
from ._image import Image

PLACEHOLDER_MAX_SIDE = 256
_MAX_BYTES = 166


class PlaceholderKind(enum.IntEnum):
    BLURHASH = 1
    THUMBHASH = 2


@dataclasses.dataclass(frozen=True)
class Placeholder:
    """A hash: `data` is a BlurHash's text as bytes, or a ThumbHash's raw bytes."""
    kind: PlaceholderKind
    data: bytes

    @classmethod
    def blurhash(cls, text):
        return cls(PlaceholderKind.BLURHASH, text.encode("ascii", "replace") if isinstance(text, str) else bytes(text))

    @classmethod
    def thumbhash(cls, data):
        """Raw bytes, or the base64 text of them."""
        return cls(PlaceholderKind.THUMBHASH, base64.b64decode(data, validate=True) if isinstance(data, str) else bytes(data))

    def _error(self, status, what):
        name = "BlurHash" if self.kind == PlaceholderKind.BLURHASH else "ThumbHash"
        if status == 11:  # PXL_E_CORRUPT_IMAGE
            return PixloadError.from_status(status, f"malformed {name} {self.data!r} (wrong length, a value out of "
                                                     "range or, for a BlurHash, a character outside base 83)")
        return PixloadError.from_status(status, what)

    def decode(self, width, height):
        """An RGBA8 straight-alpha Image of width x height (1..256 each way)."""
        out = _ffi.image_p()
        status = lib.pxl_placeholder_decode(int(self.kind), self.data, len(self.data), width, height,
                                            ctypes.byref(out))
        if status != 0:
            raise self._error(status, f"pxl_placeholder_decode {width}x{height}")
        return Image(out.value)

    @property
    def aspect_ratio(self):
        """Width / height as the hash records it (ThumbHash); 1.0 for a BlurHash."""
        ratio = ctypes.c_double()
        status = lib.pxl_placeholder_aspect_ratio(int(self.kind), self.data, len(self.data), ctypes.byref(ratio))
        if status != 0:
            raise self._error(status, "pxl_placeholder_aspect_ratio")
        return ratio.value


def _encode(kind, image, x, y):
    out = (ctypes.c_ubyte * (_MAX_BYTES + 1))()
    length = ctypes.c_size_t()
    status = lib.pxl_placeholder_encode(int(kind), image._ref.ptr, x, y, out, len(out), ctypes.byref(length))
    if status != 0:
        raise PixloadError.from_status(status, "pxl_placeholder_encode")
    return bytes(out[:length.value])


def encode_blurhash(image, components=(4, 3)):
    """The BlurHash of an Image (any format), components (x, y) 1..9 each."""
    return _encode(PlaceholderKind.BLURHASH, image, components[0], components[1]).decode("ascii")


def encode_thumbhash(image):
    """The ThumbHash of an Image (any format), its raw bytes."""
    return _encode(PlaceholderKind.THUMBHASH, image, 0, 0)
