"""Decoded pixels: Image (immutable, reference-counted by the library) and the Frames of
an animation, read through memoryviews straight over the C buffer."""
import ctypes

from ._enums import Format
from ._ffi import lib, pxl_image_info


class _ImageReference:
    """Owns one C reference to a pxl_image. Image objects and every pixel view hold this,
    so the pixels live until the last of them is gone, whatever close() was called.
    Released by __del__ (reference counting frees it the moment the last holder goes; a
    weakref.finalize per image cost about 2 us, a tenth of a cached image's whole fetch)."""

    __slots__ = ("ptr", "__weakref__")

    def __init__(self, ptr):
        self.ptr = ptr

    def __del__(self, _release=lib.pxl_image_release):
        # The default argument: still bound while the module is being torn down at exit.
        _release(self.ptr)


_FORMATS = {int(f): f for f in Format}
_INFO_SIZE = ctypes.sizeof(pxl_image_info)


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
        info = pxl_image_info(struct_size=_INFO_SIZE)  # every accessor's value, one C call
        lib.pxl_image_get_info(_ptr, info)
        self.width = info.width
        self.height = info.height
        self.stride = info.stride
        self.format = _FORMATS[info.format]
        self.original_width = info.original_width
        self.original_height = info.original_height
        # Animations (load with animate=True): 1 frame for a still image.
        self.frame_count = info.frame_count
        self.source_frame_count = info.source_frame_count
        self.loop_count = info.loop_count  # 0: forever
        # The data ended early and the decoder filled in the rest (pixload.h, "Images
        # whose data ended early"): a cut JPEG's or GIF's.
        self.incomplete = bool(info.incomplete)

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
        return _packed(self, self.pixels)

    def to_numpy(self):
        """A read-only numpy view (no copy): shape (height, width, channels), or
        (height, width) for GRAY8; dtype uint8. Requires numpy."""
        return _numpy_view(self, self.pixels)

    def to_pil(self):
        """A Pillow image (a copy: Pillow images are mutable). Premultiplied formats are
        converted to straight RGBA. Requires Pillow."""
        return _pil_image(self, self.pixels)

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


# An image's and a frame's conversions: the frame's view is laid out as its image's.
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
