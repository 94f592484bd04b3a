"""Animation players (pxl_animation, since 0.6.0): an animated image played frame by
frame, each decoded when it falls due into a small ring, in memory that does not grow with
the number of frames.

    async for frame in loader.animate(url, size=(240, 240)):
        show(frame.image)              # frame.index, frame.duration_ms

The iterator paces itself: each frame is returned when it falls due (the first at once),
frames the consumer was too slow for are skipped (frame.skipped counts them), and it ends
after the animation's loop count (never, for one that loops forever: break out of it).
Leaving the loop early, or aclose(), frees the player; so does garbage collection.
"""
import asyncio
import ctypes
import itertools
import threading
import time
import weakref

from . import _ffi
from ._callbacks import _call_user, _free_soon
from ._errors import PixloadError, Status
from ._ffi import c_status, lib
from ._image import Image
from ._request import _new_request

LOADED, FRAME_READY, ENDED, FAILED = 1, 2, 3, 4


class pxl_animation_event(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("kind", ctypes.c_int32), ("status", c_status),
        ("message", ctypes.c_char_p), ("image", ctypes.c_void_p), ("index", ctypes.c_int32),
        ("due_ms", ctypes.c_int64), ("frame_count", ctypes.c_int32), ("loop_count", ctypes.c_int32),
    ]


class pxl_animation_frame(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t), ("index", ctypes.c_int32), ("duration_ms", ctypes.c_int32),
        ("due_ms", ctypes.c_int64), ("next_due_ms", ctypes.c_int64), ("skipped", ctypes.c_int32),
        ("ended", ctypes.c_int32),
    ]


class pxl_animation_stats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t)] + [
        (name, ctypes.c_uint64) for name in
        ("frames_decoded", "frames_skipped", "frames_shown", "ring_bytes", "peak_ring_bytes")
    ] + [("loops_played", ctypes.c_int32)]


animation_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(pxl_animation_event), ctypes.c_void_p)

for _name, _restype, _argtypes in [
    ("pxl_animation_load", c_status, [ctypes.c_void_p, ctypes.POINTER(_ffi.pxl_request), ctypes.c_void_p,
                                      animation_fn, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]),
    ("pxl_animation_frame_at", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int64,
                                                 ctypes.POINTER(pxl_animation_frame)]),
    ("pxl_animation_pause", None, [ctypes.c_void_p]),
    ("pxl_animation_resume", None, [ctypes.c_void_p, ctypes.c_int64]),
    ("pxl_animation_stats_get", c_status, [ctypes.c_void_p, ctypes.POINTER(pxl_animation_stats)]),
    ("pxl_animation_free", None, [ctypes.c_void_p]),
    ("pxl_table_bind_animation", c_status, [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]),
]:
    try:
        _fn = getattr(lib, _name)
    except AttributeError:
        raise _ffi.LibraryNotFoundError(f"the loaded libpixload ({_ffi.library_origin}) lacks {_name}. " + _ffi._HELP)
    _fn.restype, _fn.argtypes = _restype, _argtypes


# The players whose events may still come, by the id the C side holds as user_data (a
# weak reference: a dropped player is freed by its finalizer, after which no event comes).
_players = {}
_players_lock = threading.Lock()
_ids = itertools.count(1)


@animation_fn
def _on_event(animation, event_p, user_data):
    with _players_lock:
        ref = _players.get(user_data)
    player = ref() if ref is not None else None
    if player is not None:
        _call_user(player._event, event_p.contents)


def _clock_ms():
    return int(time.monotonic() * 1000)


class Frame:
    """One frame of a playing animation: `image` (an Image of the requested size, format
    and processors), its `index` in the source, how long it shows (`duration_ms`, as the
    file says it), and how many frames were `skipped` before it (the consumer fell
    behind). From a Player (Loader.play) also: `due_ms`, when it was due on the host's
    clock (a frame shown again in a later loop has a later one), `next_due_ms`, when the
    next frame is (-1: none, the animation ended), and `ended` (the last frame)."""

    __slots__ = ("image", "index", "duration_ms", "skipped", "due_ms", "next_due_ms", "ended")

    def __init__(self, image, index, duration_ms, skipped, due_ms=None, next_due_ms=None, ended=False):
        self.image, self.index, self.duration_ms, self.skipped = image, index, duration_ms, skipped
        self.due_ms, self.next_due_ms, self.ended = due_ms, next_due_ms, ended

    def __repr__(self):
        return f"<pixload.Frame {self.index} {self.duration_ms} ms {self.image!r}>"


class AnimationStats:
    """What a player did: frames decoded, skipped and shown; ring_bytes held now and
    peak_ring_bytes at most (the decoded frames' memory); loops_played."""

    def __init__(self, stats):
        for name, _ in pxl_animation_stats._fields_[1:]:
            setattr(self, name, getattr(stats, name))

    def __repr__(self):
        fields = ", ".join(f"{n}={getattr(self, n)}" for n, _ in pxl_animation_stats._fields_[1:])
        return f"AnimationStats({fields})"


class Animation:
    """An asynchronous iterator of Frames (Loader.animate). The load starts on the first
    iteration, on the running asyncio loop."""

    def __init__(self, loader, url, request):
        self._loader, self._url, self._request = loader, url, request
        self._ptr = None
        self._finalizer = None
        self._loaded = None    # a future: the LOADED event's (frame_count, loop_count) or error
        self._ready = None     # an asyncio.Event, set by FRAME_READY / ENDED / FAILED
        self._failure = None
        self._ended = False
        self._last = None      # the (index, loop-aware due_ms) of the frame last returned
        self._done = False
        self._final_stats = None
        self.frame_count = 0
        self.loop_count = 0

    def __aiter__(self):
        return self

    async def _start(self):
        loader = self._loader
        loader._handle()
        queue = loader._queue_for_running_loop()
        self._loaded = asyncio.get_running_loop().create_future()
        self._ready = asyncio.Event()
        self._ptr, key = _load(self, loader, self._url, self._request, queue)
        self._finalizer = weakref.finalize(self, _free_soon, _player_free(key), self._ptr)

    def _event(self, event):
        if event.kind == LOADED:
            self.frame_count, self.loop_count = event.frame_count, event.loop_count
            if not self._loaded.done():
                if event.status == Status.OK:
                    self._loaded.set_result(None)
                else:
                    message = event.message.decode("utf-8", "replace") if event.message else ""
                    self._loaded.set_exception(PixloadError.from_status(event.status, message))
            return
        if event.kind == FAILED:
            message = event.message.decode("utf-8", "replace") if event.message else ""
            self._failure = PixloadError.from_status(event.status, message)
        elif event.kind == ENDED:
            self._ended = True
        self._ready.set()

    async def __anext__(self):
        if self._done:
            raise StopAsyncIteration
        if self._ptr is None:
            await self._start()
        if not self._loaded.done():
            try:
                await self._loaded
            except BaseException:
                self._close()
                raise
        self._loaded.result()  # the load's error, again, to a second caller
        while True:
            info = pxl_animation_frame(struct_size=ctypes.sizeof(pxl_animation_frame))
            ptr = lib.pxl_animation_frame_at(self._ptr, _clock_ms(), ctypes.byref(info))
            image = Image(ptr) if ptr else None
            key = (info.index, info.due_ms)
            if image is not None and key != self._last:
                self._last = key
                if info.ended or info.next_due_ms < 0:
                    self._done = True  # this is the last frame: the next call ends
                return Frame(image, info.index, info.duration_ms, info.skipped)
            if info.ended or self._ended and info.next_due_ms < 0:
                self._finish()
            if self._failure is not None:
                failure, self._failure = self._failure, None
                self._finish()
                raise failure
            # Until the next frame is due, or is decoded if it is late.
            self._ready.clear()
            wait = None if info.next_due_ms < 0 else max(0, info.next_due_ms - _clock_ms()) / 1000
            if wait == 0:
                wait = 0.5  # due but not decoded yet: FRAME_READY wakes us
            try:
                await asyncio.wait_for(self._ready.wait(), wait)
            except asyncio.TimeoutError:
                pass

    def _finish(self):
        self._done = True
        self._close()
        raise StopAsyncIteration

    def pause(self):
        """Stops decoding; the playhead stays where it is."""
        if self._ptr is not None:
            lib.pxl_animation_pause(self._ptr)

    def resume(self):
        if self._ptr is not None:
            lib.pxl_animation_resume(self._ptr, _clock_ms())

    def stats(self):
        """An AnimationStats (all zero before the first iteration; after the end, the
        player's last)."""
        if self._ptr is None and self._final_stats is not None:
            return self._final_stats
        stats = pxl_animation_stats(struct_size=ctypes.sizeof(pxl_animation_stats))
        if self._ptr is not None:
            lib.pxl_animation_stats_get(self._ptr, ctypes.byref(stats))
        return AnimationStats(stats)

    def _close(self):
        if self._finalizer is not None:
            self._final_stats = self.stats()
            self._ptr = None
            self._finalizer()
            self._finalizer = None

    async def aclose(self):
        """Frees the player (also what leaving an `async for` early does, once the
        iterator is collected)."""
        self._done = True
        self._close()

    def __repr__(self):
        return f"<pixload.Animation {self._url!r} {'playing' if self._ptr else 'stopped'}>"


def _load(owner, loader, url, request, queue):
    """pxl_animation_load for owner (an Animation or a Player: its _event gets the events,
    while it lives): (the player, its key in _players)."""
    keep = []
    req = _new_request(url, keep, request, loader)
    key = next(_ids)
    with _players_lock:
        _players[key] = weakref.ref(owner)
    out = ctypes.c_void_p()
    status = lib.pxl_animation_load(loader._handle(), ctypes.byref(req), queue._handle(), _on_event, key,
                                    ctypes.byref(out))
    if status != Status.OK:
        with _players_lock:
            del _players[key]
        raise PixloadError.from_status(status, f"pxl_animation_load {url}")
    return out.value, key


def _player_free(key):
    """The function that frees a player of that key (given to _free_soon)."""
    def free(p):
        lib.pxl_animation_free(p)  # no event runs after it returns
        with _players_lock:
            _players.pop(key, None)
    return free
