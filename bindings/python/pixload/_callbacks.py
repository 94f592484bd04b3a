"""The thread's callback context: exceptions raised by user callbacks and frees postponed
until the thread is out of every pixload callback.

A user callback runs inside a C call (a dispatch, a queue free, pxl_table_set_visible) and
an exception cannot cross C frames: _call_user records it and the _CallbackScope around the
C call re-raises it when the call has returned. The C API forbids freeing a loader or a
queue from inside one of its callbacks, and a garbage collection can start anywhere, so
_free_soon postpones a free asked for inside a callback until the outermost scope on that
thread has ended.
"""
import collections
import sys
import threading
import traceback


_tls = threading.local()


def _callback_depth():
    return getattr(_tls, "depth", 0)


class _CallbackScope:
    """Marks "pixload may call back into Python on this thread" (a dispatch, a queue free,
    pxl_table_set_visible). Collects what user callbacks raise, to re-raise it when the C
    call has returned (an exception cannot cross C frames), and runs the frees postponed
    inside it."""

    __slots__ = ("errors",)

    def __enter__(self):
        _tls.depth = _callback_depth() + 1
        self.errors = getattr(_tls, "errors", None)
        _tls.errors = []
        return self

    def __exit__(self, *exc):
        errors = _tls.errors
        _tls.errors = self.errors
        _tls.depth -= 1
        if _tls.depth == 0:
            deferred = getattr(_tls, "deferred", None)
            while deferred:
                free, ptr = deferred.pop(0)
                free(ptr)
        if errors and exc[0] is None:
            first = errors[0]
            for other in errors[1:]:
                _report_unraisable(other, "in a pixload callback (after an earlier one raised)")
            raise first
        return False


def _call_user(fn, *args):
    try:
        fn(*args)
    except BaseException as e:  # noqa: B902 -- must not unwind into C; re-raised later
        _record_callback_error(e)


def _record_callback_error(e):
    errors = getattr(_tls, "errors", None)
    if errors is None:
        _report_unraisable(e, "in a pixload callback")
    else:
        errors.append(e)


def _report_unraisable(exc, where):
    hook = getattr(sys, "unraisablehook", None)
    if hook is None:
        return
    hook_arg = collections.namedtuple("UnraisableHookArgs", "exc_type exc_value exc_traceback err_msg object")
    try:
        hook(hook_arg(type(exc), exc, exc.__traceback__, f"Exception ignored {where}", None))
    except TypeError:
        # The default hook takes only the interpreter's own struct: print what it would.
        print(f"Exception ignored {where}:", file=sys.stderr)
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)


def _free_soon(free, ptr):
    """free(ptr) now, or when the outermost callback scope on this thread ends: the C API
    forbids freeing a loader or queue from inside its own callbacks."""
    if _callback_depth() > 0:
        if getattr(_tls, "deferred", None) is None:
            _tls.deferred = []
        _tls.deferred.append((free, ptr))
    else:
        free(ptr)
