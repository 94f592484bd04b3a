"""Loaders: a pxl_loader (network, decoders, caches) and every call that starts, cancels
or looks up its requests, with the asyncio and blocking conveniences over them."""
import asyncio
import collections
import ctypes
import weakref

from . import _codecs, _fetchers, _ffi, _hook
from ._animation import Animation
from ._player import Player
from ._config import _CONFIG_FIELDS, _fill_config, _log_trampoline
from ._errors import PixloadError, Status, _check
from ._ffi import lib
from ._handle import _Handle
from ._image import Image
from ._queue import Queue
from ._request import Request, _fill_request, _new_request, _on_load, _on_preview, _on_progress, _register, _unregister
from ._strings import _encode


def _loader_free(log_trampoline, after=None):
    """The loader's free function. It holds the log trampoline, so the CFUNCTYPE lives
    until pxl_loader_free has returned (after which the library never calls it), even
    when the free is postponed past the Loader object's collection; then runs after()
    (the request hook's entry is forgotten)."""
    def free(ptr):
        lib.pxl_loader_free(ptr)
        del keep[:]
        if after is not None:
            after()
    keep = [log_trampoline]
    return free


class Loader(_Handle):
    """A pxl_loader: network, decoders and caches. Keyword arguments are pxl_config
    fields (memory_cache_bytes=..., max_concurrent_downloads=..., allowed_schemes=
    {"http", "https", "file"} or Scheme bits, headers=[...] or {...}, disk_cache_dir=...,
    user_agent=..., ca_file= / ca_path= (only those CAs are trusted, not the system's),
    proxy= (a URL; "" for none; default: the environment's http_proxy, https_proxy,
    ALL_PROXY, no_proxy), tls_min_version="1.2" (default) or "1.3", isolation="modules"
    (default: the codec modules decode in a confined worker process), "none" or
    "modules+required" (pixload.h, "Isolation"), decode_timeout_ms=10000, ...); anything
    not given keeps the library's default.

    log=callable(level, message) receives the library's diagnostics (a disk cache
    directory it cannot use, a corrupt cache entry dropped): a LogLevel and one line of
    text, up to log_level (default LogLevel.WARNING). It runs on the library's threads,
    possibly several at once, must return quickly and must not call pixload; what it
    raises is ignored. Without it (the default) the library is silent.

    request_hook=callable(call) is asked before each http(s) transfer (first attempt,
    retries, every redirect hop, once more after a 401 or 403) for headers to add or
    replace, such as a bearer token; they never enter a cache key, so images cached
    under an old token keep being served. A plain function is called on the library's
    network thread and must return at once: it answers through the HookCall
    (call.answer(headers) / call.fail(...), thread-safe, now or later from any thread)
    or returns the headers; a coroutine function runs on the event loop of the `await
    loader.fetch(...)` that started the request and returns the headers (see
    pixload._hook). hook_timeout_ms (default 30000) bounds an unanswered call
    (TimeoutError).

    Thread-safe: any thread may load, cancel and look up. close() must not race with
    other calls on the same loader."""

    def __init__(self, *, log=None, request_hook=None, **config):
        unknown = set(config) - _CONFIG_FIELDS
        if unknown:
            raise TypeError(f"unknown Loader option(s): {', '.join(sorted(unknown))}; "
                            f"known: {', '.join(sorted(_CONFIG_FIELDS))}")
        if log is not None and not callable(log):
            raise TypeError("log must be a callable(level, message)")
        cfg = _ffi.init_struct(_ffi.pxl_config)
        keep = []
        log_trampoline = None
        if log is not None:
            log_trampoline = _log_trampoline(log)
            cfg.log = log_trampoline
        _fill_config(cfg, config, keep)
        hook_entry = forget_hook = None
        if request_hook is not None:
            hook_entry, forget_hook = _hook.install(cfg, request_hook)
        out = ctypes.c_void_p()
        try:
            _check(lib.pxl_loader_new(ctypes.byref(cfg), ctypes.byref(out)), "pxl_loader_new")
        except BaseException:
            if forget_hook is not None:
                forget_hook()
            raise
        self._own(out.value, _loader_free(log_trampoline, forget_hook))
        if hook_entry is not None:
            hook_entry.loader = weakref.ref(self)
        self._tables = weakref.WeakSet()
        self._players = weakref.WeakSet()  # Loader.play's, closed before the loader
        self._loop_queues = weakref.WeakKeyDictionary()  # asyncio loop -> its Queue
        self._fetch_loops = {}  # url -> [asyncio loop, awaits]: where a coroutine fetcher runs
        self._coroutine_schemes = set()

    def add_codec(self, codec):
        """Registers a pixload.Codec (pixload._codecs): its format is decoded after the
        built-in ones and the codecs added before."""
        _codecs.add_codec(self._handle(), codec)

    def remove_codec(self, codec_id):
        """Unregisters the codec named codec_id (NotFoundError if there is none)."""
        _codecs.remove_codec(self._handle(), codec_id)

    def isolation(self):
        """The confining layers of this loader's decode workers: "namespaces landlock
        seccomp rlimits" where the kernel has them all; "none" when nothing is isolated."""
        size = lib.pxl_loader_isolation(self._handle(), None, 0)
        buffer = ctypes.create_string_buffer(size + 1)
        lib.pxl_loader_isolation(self._handle(), buffer, size + 1)
        return buffer.value.decode()

    def formats(self):
        """The short names of the formats this loader decodes: ["jpeg", ..., "heic", "jxl", "svg"]."""
        return _codecs.formats(self._handle())

    def close(self):
        """Frees the loader: every request in flight ends CANCELLED (delivered at its
        queue's next dispatch). The queues fetch() made for asyncio are closed as well,
        which delivers those cancellations at once (close on the loop's thread, or with
        the loop stopped). Images you hold stay valid."""
        if self._ptr is None:
            return
        for player in list(self._players):
            player.close()
        for table in list(self._tables):
            table.close()
        super().close()
        for queue in list(self._loop_queues.values()):
            queue.close()
        self._loop_queues.clear()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.close()
        return False

    # -- requests --

    def load(self, url, callback, *, queue, progress=None, preview=None, **request):
        """Starts loading url; callback(result) runs exactly once on the thread that
        dispatches queue. Request options: size=(w, h) (or width=, height=), mode="fit" |
        "fill", format="rgba8" | "rgba8-premul" | "bgra8-premul" | "rgb8" | "gray8",
        priority=int, cache_key=str, headers=[...], ignore_orientation / skip_memory_cache
        / reload / cache_only / no_color_management=True, progress=fn(received, expected) and
        progress_interval_ms, preview=fn(image) (a progressive JPEG's scans so far, or a
        JPEG XL's passes through its module, blurry then sharper, before the callback; see
        pxl_request.preview) and
        preview_interval_ms. Returns a Request; raises PixloadError (and calls nobody)
        when the library refuses the request."""
        return self._load(url, callback, queue, progress, preview, request, False)

    def _load(self, url, callback, queue, progress, preview, request, outcome):
        """load(); outcome: callback(image, error) instead of callback(result)."""
        keep = []
        req = _new_request(url, keep, request, self)
        if progress is not None:
            req.progress = _on_progress
        if preview is not None:
            req.preview = _on_preview
        loader_ptr, queue_ptr = self._handle(), queue._handle()
        key = _register(callback, progress, preview, outcome)
        token = _ffi.c_token()
        status = lib.pxl_load(loader_ptr, ctypes.byref(req), queue_ptr, _on_load, key, ctypes.byref(token))
        if status != Status.OK:
            _unregister(key)
            raise PixloadError.from_status(status, f"pxl_load {url}")
        return Request(self, token.value)

    def cancel(self, token):
        """True if this call cancelled the request. Any thread; idempotent."""
        ptr = self._ptr
        if ptr is None:
            return False
        return lib.pxl_cancel(ptr, token) == Status.OK

    def set_priority(self, token, priority):
        ptr = self._ptr
        if ptr is None:
            return False
        return lib.pxl_set_priority(ptr, token, priority) == Status.OK

    def cancel_all(self, queue=None):
        """Cancels every request of queue (every request of the loader when None);
        returns how many."""
        return lib.pxl_cancel_all(self._handle(), queue._handle() if queue is not None else None)

    def lookup(self, url, **request):
        """The memory cache's image for this request, or None. Never blocks on disk or
        network."""
        keep = []
        req = _new_request(url, keep, request, self)
        out = ctypes.c_void_p()
        status = lib.pxl_lookup(self._handle(), ctypes.byref(req), ctypes.byref(out))
        if status == Status.OK:
            return Image(out.value)
        if status == Status.NOT_FOUND:
            return None
        raise PixloadError.from_status(status, f"pxl_lookup {url}")

    def prefetch(self, urls, **request):
        """Warms the memory cache with urls (each a URL, or a dict of load options with
        'url', over the shared keyword options). Calls nobody. Returns one Request per
        item (cancel it to stop that prefetch), None where the library refused it."""
        keep = []
        items = list(urls)
        array = (_ffi.pxl_request * len(items))()
        for i, item in enumerate(items):
            options = dict(request)
            if isinstance(item, dict):
                options.update(item)
                url = options.pop("url")
            else:
                url = item
            _ffi.init_struct(_ffi.pxl_request, array[i])
            _fill_request(array[i], url, keep, _loader=self, **options)
        tokens = (_ffi.c_token * len(items))()
        status = lib.pxl_prefetch(self._handle(), array, len(items), tokens)
        if status == Status.INVALID_ARGUMENT and not any(tokens):
            raise PixloadError.from_status(status, "pxl_prefetch")
        return [Request(self, t) if t else None for t in tokens]

    def bind(self, slot, url, callback, *, queue, progress=None, **request):
        """The slot now shows url (pxl_bind): its previous load is cancelled; a memory
        hit is returned at once as an Image (and callback is not called); otherwise None
        is returned and callback(result) runs later, exactly once."""
        keep = []
        req = _new_request(url, keep, request, self)
        if progress is not None:
            req.progress = _on_progress
        loader_ptr, queue_ptr = self._handle(), queue._handle()
        key = _register(callback, progress)
        image = ctypes.c_void_p()
        status = lib.pxl_bind(loader_ptr, ctypes.byref(req), queue_ptr, _on_load, key,
                              ctypes.byref(slot._token), ctypes.byref(image))
        if status != Status.OK:
            _unregister(key)
            raise PixloadError.from_status(status, f"pxl_bind {url}")
        if image.value:
            _unregister(key)  # a memory hit: no request was made, no callback comes
            return Image(image.value)
        return None

    # -- fetchers of the host's own schemes --

    def add_fetcher(self, scheme, fetch, *, max_concurrent=8, disk_cache=False, disk_max_age=0):
        """Serves URLs of scheme ("app" for "app:..." URLs; not http, https, file or data)
        with fetch(url, sink), called on the library's fetch thread; it must return at
        once. A plain function hands the work to a thread of its own and answers with
        sink.write(bytes) and sink.finish() (or sink.fail(error)), from any thread; a
        coroutine function is run on the event loop of the `await loader.fetch(...)` that
        started the request (its return finishes the sink; an exception fails it), and is
        not allowed with fetch_sync. Requests for the scheme are merged, ranked, cached in
        memory and, with disk_cache=True, on disk (fresh disk_max_age seconds, 0: until
        evicted) like any other. A fetch the library ends early (every requester
        cancelled, timeout_ms, max_body_bytes, close()) sets sink.cancelled, calls
        sink.on_cancel if set, cancels a coroutine's task, and makes write() return
        False. max_concurrent: fetches at once. Raises PixloadError when refused."""
        entry = _fetchers.add_fetcher(self, scheme, fetch, max_concurrent, disk_cache, disk_max_age)
        if entry.is_coroutine:
            self._coroutine_schemes.add(entry.scheme)

    def remove_fetcher(self, scheme):
        """Removes the fetcher of scheme: its unanswered requests end CANCELLED. False
        when it had none."""
        self._coroutine_schemes.discard(scheme.lower())
        return _fetchers.remove_fetcher(self, scheme)

    def _fetch_loop(self, url):
        entry = self._fetch_loops.get(url)
        return entry[0] if entry else None

    def _hook_loop(self, url):
        """The loop a coroutine request hook runs on for url: its fetch's; for a redirect
        hop (another URL), the one loop awaiting fetches, if there is only one."""
        loop = self._fetch_loop(url)
        if loop is None:
            loops = {entry[0] for entry in list(self._fetch_loops.values())}
            loop = loops.pop() if len(loops) == 1 else None
        return loop

    # -- asyncio and blocking conveniences --

    def _queue_for_running_loop(self):
        loop = asyncio.get_running_loop()
        queue = self._loop_queues.get(loop)
        if queue is None or queue.closed:
            queue = Queue()
            queue.attach(loop)
            self._loop_queues[loop] = queue
        return queue

    async def fetch(self, url, **request):
        """Loads url and returns its Image; raises PixloadError on failure. Cancelling
        the awaiting task cancels the pixload request. Completions are dispatched from
        the running loop through the queue's fd (one queue per loader and loop)."""
        self._handle()  # a closed loader raises before a queue is made for it
        loop = asyncio.get_running_loop()
        queue = self._queue_for_running_loop()
        future = loop.create_future()

        # The callback gets the image or the error straight from the pxl_result: no
        # Result, no metrics (nobody would see them).
        def deliver(image, error):
            if future.done() or loop.is_closed():
                return  # the task was cancelled; the Image (if any) is simply dropped
            if error is None:
                future.set_result(image)
            else:
                future.set_exception(error)

        # A coroutine fetcher of url's scheme runs on this loop (the first awaiting one's).
        waiting = self._fetch_loops.setdefault(url, [loop, 0])
        waiting[1] += 1
        try:
            progress, preview = request.pop("progress", None), request.pop("preview", None)
            handle = self._load(url, deliver, queue, progress, preview, request, True)
            try:
                return await future
            except asyncio.CancelledError:
                handle.cancel()
                raise
        finally:
            waiting[1] -= 1
            if waiting[1] == 0 and self._fetch_loops.get(url) is waiting:
                del self._fetch_loops[url]

    def animate(self, url, size=None, mode="fit", process=None, **request):
        """Plays url's animation: an asynchronous iterator of Frames (pixload._animation),
        each decoded at the request's size, mode, format and processors when it falls due,
        into a small ring (pxl_config.animation_ring_frames), so memory does not grow with
        the frame count. Ends after the loop count (an animation that loops forever never
        ends: break out). A still image gives one frame. Raises the load's PixloadError at
        the first iteration. Other options as load()."""
        return Animation(self, url, dict(request, size=size, mode=mode, process=process))

    def play(self, url, *, queue, on_event=None, size=None, mode="fit", process=None, **request):
        """Plays url's animation on the host's clock: a Player (pixload._player) whose
        frame_at(now_ms) gives the frame due at that time, for a GUI's timer or frame clock.
        Its events (LOADED, FRAME_READY, ENDED, FAILED) go to on_event(PlayerEvent) on the
        thread dispatching queue. Frames as animate()'s; other options as load()."""
        return Player(self, url, queue, on_event, dict(request, size=size, mode=mode, process=process))

    def fetch_sync(self, url, timeout=None, **request):
        """Loads url and blocks until its Image is ready (raises PixloadError on failure,
        TimeoutError after timeout seconds, after cancelling the request). Uses a
        private queue, so it may be called from any thread, also next to an asyncio
        loop using the same loader. Not for URLs of a coroutine fetcher's scheme."""
        if url.partition(":")[0].lower() in self._coroutine_schemes:
            raise TypeError(f"{url}: its fetcher is a coroutine function; use `await loader.fetch(...)`")
        results = []
        with Queue() as queue:
            handle = self.load(url, results.append, queue=queue, **request)
            try:
                if not queue.run_until(lambda: results, timeout):
                    handle.cancel()
                    queue.run_until(lambda: results)  # the one callback still comes
                    if not results[0].ok:
                        raise TimeoutError(f"pixload: {url} not loaded within {timeout} s")
            except BaseException:
                handle.cancel()  # Ctrl-C: the queue's close delivers the cancellation
                raise
        return results[0].unwrap()

    # -- caches and statistics --

    def trim_memory_cache(self, max_bytes=0):
        lib.pxl_memory_cache_trim(self._handle(), max_bytes)

    @property
    def memory_cache_bytes(self):
        return lib.pxl_memory_cache_bytes(self._handle())

    @property
    def memory_cache_count(self):
        return lib.pxl_memory_cache_count(self._handle())

    @property
    def disk_cache_bytes(self):
        return lib.pxl_disk_cache_bytes(self._handle())

    def clear_disk_cache(self):
        """Deletes every disk-cache entry; blocks on the disk."""
        lib.pxl_disk_cache_clear(self._handle())

    def cache_remove(self, cache_key):
        _check(lib.pxl_cache_remove(self._handle(), _encode(cache_key)), "pxl_cache_remove")

    def stats(self):
        # The library fills what it knows and zeroes the rest of ours (a 0.2 library
        # and newer bindings: the newer counters read 0).
        stats = _ffi.pxl_stats(struct_size=ctypes.sizeof(_ffi.pxl_stats))
        _check(lib.pxl_loader_get_stats(self._handle(), ctypes.byref(stats)), "pxl_loader_get_stats")
        return Stats(**{name: getattr(stats, name) for name in Stats._fields})


Stats = collections.namedtuple("Stats", [n for n, _ in _ffi.pxl_stats._fields_[1:]])
