"""Completion queues: the thread that dispatches a Queue runs its requests' callbacks."""
import asyncio
import ctypes
import time
import weakref

from ._callbacks import _CallbackScope
from ._errors import _check
from ._ffi import lib
from ._handle import _Handle
from ._request import _on_load, _on_preview, _on_progress


def _free_queue(ptr):
    # pxl_queue_free runs the queue's remaining callbacks (CANCELLED) on this thread.
    with _CallbackScope():
        lib.pxl_queue_free(ptr)


class Queue(_Handle):
    """A completion queue. Callbacks of its requests run on the thread that calls
    dispatch(). `fd` is readable while completions are pending (for select/poll/epoll
    or an event loop); asyncio users need not touch it (Loader.fetch does)."""

    def __init__(self):
        out = ctypes.c_void_p()
        _check(lib.pxl_queue_new(ctypes.byref(out)), "pxl_queue_new")
        self._own(out.value, _free_queue)
        # The trampolines are module globals; a reference here as well means they outlive
        # every queue even while the module itself is being torn down at exit.
        self._trampolines = (_on_load, _on_progress, _on_preview)
        self._tables = weakref.WeakSet()
        self._players = weakref.WeakSet()  # Loader.play's on this queue, closed before it
        self._loop = None

    @property
    def fd(self):
        return lib.pxl_queue_fd(self._handle())

    def dispatch(self, max_callbacks=0):
        """Runs up to max_callbacks pending callbacks (all when <= 0) on this thread and
        returns how many ran. Never blocks. An exception a callback raised is re-raised
        here, after the others have run."""
        ptr = self._handle()
        with _CallbackScope():
            return lib.pxl_queue_dispatch(ptr, max_callbacks)

    def wait(self, timeout=None):
        """Blocks (without the GIL) until a completion is pending, wakeup() is called or
        timeout seconds pass (None: forever). Returns the number pending; runs nothing."""
        ms = -1 if timeout is None else max(0, int(timeout * 1000))
        return lib.pxl_queue_wait(self._handle(), ms)

    def wakeup(self):
        """Makes a wait() in progress (or the next one) return. Any thread."""
        lib.pxl_queue_wakeup(self._handle())

    @property
    def pending(self):
        return lib.pxl_queue_pending(self._handle())

    def run_until(self, done, timeout=None):
        """Waits and dispatches until done() is true; returns False on timeout. Waits in
        short slices so that Ctrl-C is not held off."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done():
            slice_s = 0.25
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                slice_s = min(slice_s, left)
            if self.wait(slice_s):
                self.dispatch()
        return True

    def attach(self, loop=None):
        """Dispatches this queue from an asyncio loop (the running one by default) when
        its fd becomes readable."""
        loop = loop or asyncio.get_running_loop()
        loop.add_reader(self.fd, self._dispatch_ready)
        self._loop = weakref.ref(loop)

    def detach(self):
        """Undoes attach() (call it on the loop's thread, or with the loop stopped)."""
        loop = self._loop() if self._loop is not None else None
        self._loop = None
        if loop is not None and not loop.is_closed() and self._ptr is not None:
            loop.remove_reader(self.fd)

    def _dispatch_ready(self):
        if self._ptr is not None:
            self.dispatch()

    def close(self):
        """Frees the queue: requests still waiting get their CANCELLED callback on this
        thread before it returns. Tables and players using the queue are closed first. Not from inside
        this queue's callbacks, nor while another thread dispatches it."""
        if self._ptr is None:
            return
        for player in list(self._players):
            player.close()
        for table in list(self._tables):
            table.close()
        self.detach()
        super().close()
