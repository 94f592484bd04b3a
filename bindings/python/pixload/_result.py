"""What a load's callback receives: a Result, made from the library's pxl_result."""
from . import _ffi
from ._enums import Source
from ._errors import PixloadError, Status
from ._image import Image
from ._metrics import metrics_copy, metrics_from_struct

# Status and Source by value without an enum call per result (unknown values stay ints).
_STATUS = {int(s): s for s in Status}
_SOURCE = {int(s): s for s in Source}


class Result:
    """What a load's callback receives: `image` (an Image, owned by you) when `ok`, else
    `error` (a PixloadError, RequestCancelled for a cancellation)."""

    __slots__ = ("token", "status", "http_status", "source", "message", "image", "preview", "incomplete",
                 "placeholder", "_metrics", "_metrics_c")

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
        self._metrics = metrics
        self._metrics_c = None  # a pxl_metrics copy, made into `metrics` when read
        self.status = _STATUS.get(status, status)
        self.http_status = http_status
        self.source = _SOURCE.get(source, source)
        self.message = message
        self.image = image

    @property
    def metrics(self):
        """What the request cost (a pixload.Metrics) on a final result; None on previews
        and placeholders."""
        if self._metrics is None and self._metrics_c is not None:
            self._metrics = metrics_from_struct(self._metrics_c)
            self._metrics_c = None
        return self._metrics

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
    result = Result(token, r.status, r.http_status, r.source, message, image, flag == 1, incomplete, flag == 2)
    if not flag:
        result._metrics_c = metrics_copy(result_p)
    return result


def _outcome_from_c(result_p):
    """A final load result as (image, None) or (None, PixloadError): what an awaiting
    fetch needs, without the Result, its message or its metrics when the load worked."""
    r = result_p.contents
    if r.status == 0:
        return Image._retained(r.image), None
    message = r.message.decode("utf-8", "replace") if r.message else ""
    return None, PixloadError.from_status(_STATUS.get(r.status, r.status), message, r.http_status)
