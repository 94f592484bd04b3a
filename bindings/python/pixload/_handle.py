"""The base of the C objects the package owns (Loader, Queue, Table): close(), `with`
and a finalizer.

Finalizers. Handles are freed by weakref.finalize (run at garbage collection or, at the
latest, at interpreter exit while the interpreter still works). The C API forbids
freeing a loader or a queue from inside one of its callbacks, and a garbage collection
can start anywhere, so a finalizer that fires inside a pixload callback postpones the
free until the outermost dispatch on that thread has returned (_callbacks._free_soon).
"""
import weakref

from ._callbacks import _free_soon


class _Handle:
    """A C object: close() (idempotent), `with`, and a finalizer that frees it if the
    Python object is dropped without close()."""

    _ptr = None
    _finalizer = None

    def _own(self, ptr, free):
        self._ptr = ptr
        self._finalizer = weakref.finalize(self, _free_soon, free, ptr)

    @property
    def closed(self):
        return self._ptr is None

    def _handle(self):
        ptr = self._ptr
        if ptr is None:
            raise ValueError(f"{type(self).__name__} is closed")
        return ptr

    def close(self):
        """Frees the C object. Later calls are no-ops. Do not call it while another thread
        is using the same object."""
        if self._ptr is None:
            return
        self._ptr = None
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        state = "closed" if self._ptr is None else f"at 0x{self._ptr:x}"
        return f"<pixload.{type(self).__name__} {state}>"
