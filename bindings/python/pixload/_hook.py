"""The request hook (pixload.h, "Request hook"): Loader(request_hook=...).

hook(call) is asked before each http(s) transfer (first attempt, retries, every redirect
hop, and once more after a 401 or 403, call.status telling which) for headers to add or
replace, such as a bearer token. A plain function is called on the library's network
thread and must return at once: it answers through the call (call.answer(headers) or
call.fail(...), thread-safe, from any thread, now or later), or returns the headers. A
coroutine function is run on the event loop of the `await loader.fetch(...)` that started
the request (its return value answers, an exception fails the request). Every call is
answered exactly once: by the host, by the coroutine's end, or when it is
garbage-collected unanswered (failing the request CANCELLED), so no handle leaks.

The C callback is one module-level CFUNCTYPE; the C side gets a small integer as
user_data, the key of the loader's entry in _hooks, removed once pxl_loader_free returned
(after which the library never calls the hook).
"""
import asyncio
import ctypes
import inspect
import itertools
import threading
import weakref

from . import _ffi
from ._ffi import lib
from ._errors import PixloadError, Status
from ._strings import _encode, _header_array

for _name, _restype, _argtypes in [
    ("pxl_hook_answer", ctypes.c_uint32, [ctypes.c_void_p, _ffi.c_char_pp, ctypes.c_size_t]),
    ("pxl_hook_fail", ctypes.c_uint32, [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_char_p]),
]:
    _fn = getattr(lib, _name)
    _fn.restype, _fn.argtypes = _restype, _argtypes


class HookCall:
    """One question to the request hook: url (this hop's), headers (the "Name: value"
    lines the transfer sends so far; after a 401 or 403 they include the token that was
    refused) and status (0, or the 401 or 403 that made the library ask again; the
    request is retried once with the answer). Answer exactly once, from any thread:
    answer(headers) or fail(...). Both return False when the call no longer waits (its
    request was cancelled or timed out, the loader closed, or it was answered)."""

    def __init__(self, url, headers, status, handle):
        self.url = url
        self.headers = headers
        self.status = status
        self._lock = threading.Lock()
        self._finisher = weakref.finalize(self, _fail_handle, handle, Status.CANCELLED, None)
        self._handle = handle

    @property
    def answered(self):
        return not self._finisher.alive

    def answer(self, headers=()):
        """Lets the transfer go on with headers (a list of "Name: value" lines or a dict),
        each replacing the transfer's lines of that name or added. An invalid line (no
        colon, a CR or LF) fails the request with INVALID_ARGUMENT and raises
        ValueError."""
        keep = []
        array = _header_array(dict(headers) if isinstance(headers, dict) else list(headers), keep)
        count = len(keep[0]) if keep else 0
        with self._lock:
            if not self._finisher.alive:
                return False
            self._finisher.detach()
            status = lib.pxl_hook_answer(self._handle, array, count)
        if status == Status.INVALID_ARGUMENT:
            raise ValueError("request hook headers must be 'Name: value' lines without CR or LF (at most 256)")
        return status == Status.OK

    def fail(self, error=Status.IO, message=None):
        """Fails the request: with a Status (and message), or with a PixloadError's status
        and message, or with Status.IO and str(error) for any other exception. The
        message must not hold the secret."""
        if isinstance(error, PixloadError):
            status, message = error.status, error.message or None
        elif isinstance(error, BaseException):
            status, message = Status.IO, f"{type(error).__name__}: {error}"
        else:
            status = error
        with self._lock:
            if not self._finisher.alive:
                return False
            self._finisher.detach()
            return _fail_handle(self._handle, status, message) == Status.OK


def _fail_handle(handle, status, message):
    return lib.pxl_hook_fail(handle, int(status), _encode(message) if message is not None else None)


class _Entry:
    def __init__(self, loader, hook):
        self.loader = loader  # a weakref, set once the Loader exists
        self.hook = hook
        self.is_coroutine = inspect.iscoroutinefunction(hook)


_hooks = {}
_keys = itertools.count(1)
_lock = threading.Lock()


def _on_call(url, headers, count, status, handle, key):
    try:
        text = url.decode("utf-8", "replace")
        lines = [headers[i].decode("utf-8", "replace") for i in range(count)]
        call = HookCall(text, lines, status, handle)
        entry = _hooks.get(key)
        if entry is None:
            call.fail(Status.CANCELLED)
            return
        if not entry.is_coroutine:
            try:
                returned = entry.hook(call)
            except BaseException as error:  # noqa: B902 -- must not unwind into C
                call.fail(error)
                return
            if returned is not None and not call.answered:
                _answer_or_fail(call, returned)
            return
        loader = entry.loader() if entry.loader else None
        loop = loader._hook_loop(text) if loader is not None else None
        if loop is None:
            call.fail(Status.UNSUPPORTED, "a coroutine request hook runs only for `await loader.fetch(...)`")
            return
        asyncio.run_coroutine_threadsafe(_run_coroutine(entry.hook, call), loop)
    except BaseException:  # noqa: B902
        pass


def _answer_or_fail(call, headers):
    try:
        call.answer(headers)
    except ValueError as error:
        call.fail(error)


async def _run_coroutine(hook, call):
    try:
        returned = await hook(call)
    except asyncio.CancelledError:
        call.fail(Status.CANCELLED)
        raise
    except BaseException as error:  # noqa: B902
        call.fail(error)
    else:
        if not call.answered:
            _answer_or_fail(call, returned or ())


_trampoline = _ffi.request_hook_fn(_on_call)


def install(cfg, hook):
    """Puts hook into the pxl_config; returns (entry, forget), forget() to be called once
    pxl_loader_free returned (or pxl_loader_new failed)."""
    if not callable(hook):
        raise TypeError("request_hook must be a callable(call)")
    entry = _Entry(None, hook)
    with _lock:
        key = next(_keys)
        _hooks[key] = entry
    cfg.request_hook = _trampoline
    cfg.request_hook_user_data = key

    def forget():
        with _lock:
            _hooks.pop(key, None)
    return entry, forget
