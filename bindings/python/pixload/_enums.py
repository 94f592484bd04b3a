"""The values requests and loaders take: pixel formats, fit modes, where a result came
from, log levels, URL schemes and request priorities."""
import enum

from ._ffi import lib


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
    FILE = 7     # a file:// URL (Scheme.FILE), read and decoded; since 0.6.0 (NETWORK before)


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
