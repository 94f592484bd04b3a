"""Python text to the C strings the library reads: one string (_encode) or a NULL-ended
array of header lines (_header_array, which appends what C will point to to keep). The
caller holds those until the C call that reads them has returned (the library copies them)."""
import ctypes

from . import _ffi


def _encode(text):
    return text.encode() if isinstance(text, str) else bytes(text)


def _header_array(lines, keep):
    if not lines:
        return None
    if isinstance(lines, dict):
        lines = [f"{k}: {v}" for k, v in lines.items()]
    encoded = [_encode(line) for line in lines]
    array = (ctypes.c_char_p * (len(encoded) + 1))(*encoded, None)
    keep.append(encoded)
    keep.append(array)
    return ctypes.cast(array, _ffi.c_char_pp)
