"""Fetchers for the host's own schemes (pixload.h, "Fetchers"): Loader.add_fetcher.

fetch(url, sink) is called on the library's fetch thread and must return at once: a
plain function hands the work to a thread of its own (the sink's methods are
thread-safe), a coroutine function is run on the asyncio loop of the `await
loader.fetch(...)` that started the request. Every sink is finished exactly once: by
the host (finish / fail), by the coroutine's end, or when it is garbage-collected
unfinished (as cancelled), so no handle leaks.

The three C callbacks are module-level CFUNCTYPEs (they live as long as the module); the
C side gets a small integer as user_data, the key of the fetcher's entry in _fetchers,
removed by destroy (which the library calls once, after the fetcher's last callback).
"""
import asyncio
import ctypes
import inspect
import itertools
import threading
import weakref

from ._ffi import lib
from ._errors import PixloadError, Status
from ._strings import _encode

fetch_p = ctypes.c_void_p
fetch_start_fn = ctypes.CFUNCTYPE(None, ctypes.c_char_p, fetch_p, ctypes.c_void_p)
fetch_cancel_fn = ctypes.CFUNCTYPE(None, fetch_p, ctypes.c_void_p)
fetch_destroy_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class pxl_fetcher(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("start", fetch_start_fn),
        ("cancel", fetch_cancel_fn),
        ("destroy", fetch_destroy_fn),
        ("user_data", ctypes.c_void_p),
        ("max_concurrent", ctypes.c_int32),
        ("disk_cache", ctypes.c_int32),
        ("disk_max_age_s", ctypes.c_int64),
    ]


for _name, _restype, _argtypes in [
    ("pxl_fetcher_init_size", ctypes.c_uint32, [ctypes.POINTER(pxl_fetcher), ctypes.c_size_t]),
    ("pxl_loader_add_fetcher", ctypes.c_uint32, [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(pxl_fetcher)]),
    ("pxl_loader_remove_fetcher", ctypes.c_uint32, [ctypes.c_void_p, ctypes.c_char_p]),
    ("pxl_fetch_write", ctypes.c_uint32, [fetch_p, ctypes.c_char_p, ctypes.c_size_t]),
    ("pxl_fetch_finish", ctypes.c_uint32, [fetch_p, ctypes.c_uint32, ctypes.c_char_p]),
]:
    _fn = getattr(lib, _name)
    _fn.restype, _fn.argtypes = _restype, _argtypes


class FetchSink:
    """Where a fetcher delivers one URL's bytes. write() and finish() may be called from
    any thread; after the fetch ended (cancelled, timed out, too large, the loader
    closed) they do nothing. `cancelled` becomes True when the library tells the fetcher
    to stop; on_cancel (settable) is then called on the library's fetch thread."""

    def __init__(self, url, handle):
        self.url = url
        self.on_cancel = None
        self._handle = handle
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._finisher = weakref.finalize(self, _finish_handle, handle, Status.CANCELLED, None)

    @property
    def cancelled(self):
        return self._cancelled.is_set()

    @property
    def finished(self):
        return not self._finisher.alive

    def write(self, data):
        """Appends bytes; False when they were ignored (the fetch ended: stop)."""
        data = bytes(data)
        with self._lock:
            if not self._finisher.alive:
                return False
            return lib.pxl_fetch_write(self._handle, data, len(data)) == Status.OK

    def finish(self, status=Status.OK, message=None):
        """Ends the fetch: Status.OK delivers the bytes written, another status fails its
        requests with it. True if this ended it; a second call does nothing."""
        with self._lock:
            if not self._finisher.alive:
                return False
            self._finisher.detach()
            return _finish_handle(self._handle, status, message) == Status.OK

    def fail(self, error):
        """finish() with a PixloadError's status and message, or Status.IO and str(error)."""
        if isinstance(error, PixloadError):
            return self.finish(error.status, error.message or None)
        return self.finish(Status.IO, f"{type(error).__name__}: {error}")

    def _cancel(self):
        self._cancelled.set()
        callback = self.on_cancel
        if callback is not None:
            callback()


def _finish_handle(handle, status, message):
    return lib.pxl_fetch_finish(handle, int(status), _encode(message) if message is not None else None)


class _Entry:
    def __init__(self, loader, scheme, fetch):
        self.loader = weakref.ref(loader)
        self.scheme = scheme
        self.fetch = fetch
        self.is_coroutine = inspect.iscoroutinefunction(fetch)
        self.sinks = weakref.WeakValueDictionary()  # handle -> sink, until finished
        self.tasks = {}  # handle -> concurrent.futures.Future of a coroutine fetch


_fetchers = {}
_keys = itertools.count(1)
_lock = threading.Lock()


def _on_start(url, handle, key):
    try:
        entry = _fetchers.get(key)
        text = url.decode("utf-8", "replace")
        sink = FetchSink(text, handle)
        if entry is None:
            sink.finish(Status.CANCELLED)
            return
        entry.sinks[handle] = sink
        if not entry.is_coroutine:
            try:
                entry.fetch(text, sink)
            except BaseException as error:  # noqa: B902 -- must not unwind into C
                sink.fail(error)
            return
        loader = entry.loader()
        loop = loader._fetch_loop(text) if loader is not None else None
        if loop is None:
            sink.finish(Status.UNSUPPORTED, "a coroutine fetcher runs only for `await loader.fetch(...)`")
            return
        future = asyncio.run_coroutine_threadsafe(_run_coroutine(entry.fetch, text, sink), loop)
        entry.tasks[handle] = future
        future.add_done_callback(lambda _f: entry.tasks.pop(handle, None))
    except BaseException:  # noqa: B902
        pass


async def _run_coroutine(fetch, url, sink):
    try:
        await fetch(url, sink)
    except asyncio.CancelledError:
        sink.finish(Status.CANCELLED)
        raise
    except BaseException as error:  # noqa: B902
        sink.fail(error)
    else:
        sink.finish()  # a coroutine that returned delivered what it wrote


def _on_cancel(handle, key):
    try:
        entry = _fetchers.get(key)
        if entry is None:
            return
        sink = entry.sinks.get(handle)
        if sink is not None:
            sink._cancel()
        task = entry.tasks.get(handle)
        if task is not None:
            task.cancel()
    except BaseException:  # noqa: B902
        pass


def _on_destroy(key):
    with _lock:
        _fetchers.pop(key, None)


_start_trampoline = fetch_start_fn(_on_start)
_cancel_trampoline = fetch_cancel_fn(_on_cancel)
_destroy_trampoline = fetch_destroy_fn(_on_destroy)


def add_fetcher(loader, scheme, fetch, max_concurrent=8, disk_cache=False, disk_max_age=0):
    if not callable(fetch):
        raise TypeError("fetch must be a callable(url, sink)")
    fetcher = pxl_fetcher()
    lib.pxl_fetcher_init_size(ctypes.byref(fetcher), ctypes.sizeof(pxl_fetcher))
    entry = _Entry(loader, scheme.lower(), fetch)
    with _lock:
        key = next(_keys)
        _fetchers[key] = entry
    fetcher.start, fetcher.cancel, fetcher.destroy = _start_trampoline, _cancel_trampoline, _destroy_trampoline
    fetcher.user_data = key
    fetcher.max_concurrent = max_concurrent
    fetcher.disk_cache = 1 if disk_cache else 0
    fetcher.disk_max_age_s = int(disk_max_age)
    status = lib.pxl_loader_add_fetcher(loader._handle(), _encode(scheme), ctypes.byref(fetcher))
    if status != Status.OK:
        with _lock:
            _fetchers.pop(key, None)  # a refusal never calls destroy (pixload.h, "Extensions")
        raise PixloadError.from_status(status, f"pxl_loader_add_fetcher {scheme!r}")
    return entry


def remove_fetcher(loader, scheme):
    status = lib.pxl_loader_remove_fetcher(loader._handle(), _encode(scheme))
    if status == Status.NOT_FOUND:
        return False
    if status != Status.OK:
        raise PixloadError.from_status(status, f"pxl_loader_remove_fetcher {scheme!r}")
    return True
