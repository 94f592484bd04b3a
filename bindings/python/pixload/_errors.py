"""The library's statuses and the exceptions raised for them (PixloadError and its
subclasses, one per kind of failure; _check raises one for a status that is not OK), with
status_string and version, the library's own words about a status and about itself.

At the bottom of the package beside _ffi: any module may raise through it, and it imports
nothing of pixload but _ffi.
"""
import enum

from ._ffi import lib


class Status(enum.IntEnum):
    OK = 0
    INVALID_ARGUMENT = 1
    MALFORMED_URL = 2
    SCHEME_NOT_ALLOWED = 3
    DNS = 4
    CONNECT = 5
    TLS = 6
    TIMEOUT = 7
    HTTP = 8
    BODY_TOO_LARGE = 9
    NOT_AN_IMAGE = 10
    CORRUPT_IMAGE = 11
    TOO_MANY_PIXELS = 12
    CANCELLED = 13
    LOADER_CLOSED = 14
    NETWORK = 15
    UNSUPPORTED_IMAGE = 16
    NO_MEMORY = 17
    NOT_FOUND = 18
    IO = 19
    TOO_MANY_REDIRECTS = 20
    NOT_CACHED = 21
    UNSUPPORTED = 22
    DECODER_FAILED = 23


def status_string(status):
    """The library's short description of a status ("cancelled")."""
    return lib.pxl_status_string(int(status)).decode()


def version():
    """The version of the libpixload actually loaded, "MAJOR.MINOR.PATCH"."""
    return lib.pxl_version().decode()

# --- errors ---------------------------------------------------------------------------

class PixloadError(Exception):
    """A pixload failure: .status (Status), .http_status (0 if none) and .message."""

    def __init__(self, status, message="", http_status=0):
        try:
            status = Status(status)
        except ValueError:  # a code newer than these bindings: keep the number
            pass
        self.status = status
        self.http_status = http_status
        self.message = message
        text = status_string(status)
        if http_status:
            text += f" (HTTP {http_status})"
        if message:
            text += f": {message}"
        super().__init__(text)

    @staticmethod
    def from_status(status, message="", http_status=0):
        cls = _ERROR_CLASSES.get(status, PixloadError)
        return cls(status, message, http_status)


class InvalidArgumentError(PixloadError, ValueError): pass
class URLError(PixloadError, ValueError): pass
class NetworkError(PixloadError, OSError): pass
class PixloadTimeoutError(NetworkError, TimeoutError): pass
class HTTPError(PixloadError): pass
class ImageError(PixloadError): pass
class RequestCancelled(PixloadError): pass
class LoaderClosedError(PixloadError): pass
class NotFoundError(PixloadError, LookupError): pass
class NotCachedError(NotFoundError): pass
class OutOfMemoryError(PixloadError, MemoryError): pass
class LocalIOError(PixloadError, OSError): pass
class UnsupportedError(PixloadError): pass

_ERROR_CLASSES = {
    Status.INVALID_ARGUMENT: InvalidArgumentError,
    Status.MALFORMED_URL: URLError,
    Status.SCHEME_NOT_ALLOWED: URLError,
    Status.DNS: NetworkError,
    Status.CONNECT: NetworkError,
    Status.TLS: NetworkError,
    Status.TIMEOUT: PixloadTimeoutError,
    Status.HTTP: HTTPError,
    Status.BODY_TOO_LARGE: ImageError,
    Status.NOT_AN_IMAGE: ImageError,
    Status.CORRUPT_IMAGE: ImageError,
    Status.TOO_MANY_PIXELS: ImageError,
    Status.CANCELLED: RequestCancelled,
    Status.LOADER_CLOSED: LoaderClosedError,
    Status.NETWORK: NetworkError,
    Status.UNSUPPORTED_IMAGE: ImageError,
    Status.NO_MEMORY: OutOfMemoryError,
    Status.NOT_FOUND: NotFoundError,
    Status.IO: LocalIOError,
    Status.TOO_MANY_REDIRECTS: NetworkError,
    Status.NOT_CACHED: NotCachedError,
    Status.UNSUPPORTED: UnsupportedError,
    Status.DECODER_FAILED: ImageError,
}


def _check(status, what=""):
    if status != Status.OK:
        raise PixloadError.from_status(status, what)
