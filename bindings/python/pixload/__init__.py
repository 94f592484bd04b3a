"""pixload: asynchronous image loading and caching (Python bindings over libpixload).

    import pixload
    with pixload.Loader() as loader:
        image = loader.fetch_sync("https://example.org/a.jpg", size=(150, 150), mode="fill")
        array = image.to_numpy()          # (150, 150, 4) uint8, a view of the C pixels

asyncio: `image = await loader.fetch(url, size=(150, 150))`. Lower level: Queue,
Loader.load(url, callback, queue=...), Table, Loader.prefetch / lookup / bind.

The library is found through $PIXLOAD_LIBRARY (a path to libpixload.so.0), then a copy
inside this package, then the system's (`make install`).
"""
from ._animation import Animation, AnimationStats, Frame
from ._codecs import Codec, CodecError, CodecHeader
from ._ffi import LibraryNotFoundError, PXL_VERSION_NUM as BINDINGS_VERSION_NUM, library_origin
from ._fetchers import FetchSink
from ._hook import HookCall
from ._enums import PRIORITY_NORMAL, PRIORITY_PREFETCH, PRIORITY_VISIBLE, Format, LogLevel, Mode, Scheme, Source
from ._errors import (
    HTTPError, ImageError, InvalidArgumentError, LoaderClosedError, LocalIOError, NetworkError, NotCachedError,
    NotFoundError, OutOfMemoryError, PixloadError, PixloadTimeoutError, RequestCancelled, Status, URLError,
    status_string, version,
)
from ._image import Image
from ._loader import Loader, Stats
from ._queue import Queue
from ._request import Request, Slot, pending_callbacks
from ._result import Result
from ._table import Table, TableStats
from ._player import Player, PlayerEvent
from ._metrics import Metrics, Tier
from ._placeholders import Placeholder, PlaceholderKind, encode_blurhash, encode_thumbhash

from ._processors import (
    Blur, Circle, Crop, Custom, Flip, Grayscale, Processor, Rotate, RoundedCorners, Tint,
)

__version__ = "0.6.0"

__all__ = [
    "Animation", "AnimationStats", "BINDINGS_VERSION_NUM", "Frame", "Codec", "CodecError", "CodecHeader", "FetchSink", "Format", "HookCall", "HTTPError", "Image", "ImageError", "Player", "PlayerEvent", "InvalidArgumentError",
    "LibraryNotFoundError", "Loader", "LoaderClosedError", "LocalIOError", "LogLevel", "Mode", "NetworkError",
    "NotCachedError", "NotFoundError", "OutOfMemoryError", "PRIORITY_NORMAL", "PRIORITY_PREFETCH",
    "PRIORITY_VISIBLE", "PixloadError", "PixloadTimeoutError", "Queue", "Request",
    "RequestCancelled", "Result", "Scheme", "Slot", "Source", "Stats", "Status", "Table",
    "TableStats", "URLError", "library_origin", "pending_callbacks", "status_string", "version",
    "Processor", "Circle", "RoundedCorners", "Blur", "Crop", "Rotate", "Flip", "Grayscale", "Tint", "Custom",
    "Metrics", "Tier", "Placeholder", "PlaceholderKind", "encode_blurhash", "encode_thumbhash",
]
