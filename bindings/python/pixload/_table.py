"""Tables: say which rows are on screen and the library loads them first, prefetches
ahead and cancels what left."""
import collections
import ctypes

from . import _animation, _ffi
from ._callbacks import _CallbackScope, _call_user, _record_callback_error
from ._errors import PixloadError, Status, _check
from ._ffi import lib
from ._handle import _Handle
from ._request import _REQUEST_OPTIONS, _fill_request, _ids
from ._result import _result_from_c

TableStats = collections.namedtuple("TableStats", [n for n, _ in _ffi.pxl_table_stats._fields_[1:]])

# --- tables ---------------------------------------------------------------------------

class _TableEntry:
    __slots__ = ("request_for_row", "on_row", "defaults", "keep")

    def __init__(self, request_for_row, on_row, defaults):
        self.request_for_row = request_for_row
        self.on_row = on_row
        self.defaults = defaults
        self.keep = []  # strings handed to C from request_fn, until set_visible returns


_tables = {}  # user_data id -> _TableEntry, while the C table exists


@_ffi.table_request_fn
def _on_table_request(row, request_p, user_data):
    entry = _tables.get(user_data)
    if entry is None:
        return 0
    try:
        spec = entry.request_for_row(row)
        if spec is None:
            return 0
        options = dict(entry.defaults)
        if isinstance(spec, dict):
            options.update(spec)
            url = options.pop("url")
        else:
            url = spec
        _fill_request(request_p.contents, url, entry.keep, **options)
        return 1
    except BaseException as e:  # noqa: B902 -- re-raised by set_visible
        _record_callback_error(e)
        return 0


@_ffi.table_row_fn
def _on_table_row(row, result_p, user_data):
    entry = _tables.get(user_data)
    if entry is not None:
        _call_user(entry.on_row, row, _result_from_c(0, result_p))


def _free_table_entry(key):
    def free(ptr):
        lib.pxl_table_free(ptr)
        _tables.pop(key, None)
    return free


class Table(_Handle):
    """A pxl_table: say which rows are on screen (set_visible) and the library loads
    them first, prefetches ahead, and cancels what left.

    request_for_row(row) returns the row's URL, a dict of load options with 'url'
    (over the keyword request options given here), or None for no image. It runs inside
    set_visible / set_row_count and must not call the table. on_row(row, result) runs
    for visible rows only: on the thread dispatching queue, or inside set_visible for rows
    already in memory; never with a cancellation. previews=True: a visible row whose
    image is a progressive JPEG (or a JPEG XL, through its module) also gets on_row calls with result.preview True (blurry,
    then sharper) before its final one."""

    def __init__(self, loader, queue, row_count, request_for_row, on_row, *, prefetch_rows=None,
                 keep_rows=None, visible_priority=None, prefetch_priority=None, previews=False, **request):
        unknown = set(request) - _REQUEST_OPTIONS
        if unknown:
            raise TypeError(f"unknown Table option(s): {', '.join(sorted(unknown))}")
        config = _ffi.init_struct(_ffi.pxl_table_config)
        for name, value in (("prefetch_rows", prefetch_rows), ("keep_rows", keep_rows),
                            ("visible_priority", visible_priority),
                            ("prefetch_priority", prefetch_priority)):
            if value is not None:
                setattr(config, name, value)
        # Off unless asked: on_row then also receives previews (result.preview True).
        config.previews = 1 if previews else 0
        key = next(_ids)
        _tables[key] = _TableEntry(request_for_row, on_row, dict(request, _loader=loader))
        out = ctypes.c_void_p()
        status = lib.pxl_table_create(loader._handle(), queue._handle(), ctypes.byref(config), row_count,
                                   _on_table_request, _on_table_row, key, ctypes.byref(out))
        if status != Status.OK:
            del _tables[key]
            raise PixloadError.from_status(status, "pxl_table_create")
        self._own(out.value, _free_table_entry(key))
        self._key = key
        # Freed before them (explicitly or by reference order), never after.
        self.loader = loader
        self.queue = queue
        self._trampolines = (_on_table_request, _on_table_row)
        loader._tables.add(self)
        queue._tables.add(self)

    def _call(self, fn, *args):
        ptr = self._handle()
        entry = _tables[self._key]
        try:
            with _CallbackScope():
                return fn(ptr, *args)
        finally:
            entry.keep.clear()

    def set_visible(self, first, count, direction=0):
        """Rows first .. first + count - 1 are on screen; direction > 0 scrolls towards
        higher rows, < 0 towards lower, 0 still. May call on_row before it returns."""
        _check(self._call(lib.pxl_table_set_visible, first, count, direction), "pxl_table_set_visible")

    def set_row_count(self, row_count):
        _check(self._call(lib.pxl_table_set_row_count, row_count), "pxl_table_set_row_count")

    def bind_animation(self, row, player):
        """Ties a Player (Loader.play) to row: while set_visible leaves the row out of
        view the player is paused (no decoding), and it resumes, where it stopped, when
        the row is visible again; at once for the current rows. One player a row: tying
        another unties the first; row -1 unties player (left as it is). The table keeps no
        reference: closing the player unties it. Frames decoded by tied players count in
        stats().animation_frames_decoded."""
        _check(_animation.lib.pxl_table_bind_animation(self._handle(), row, player._ptr or None),
               "pxl_table_bind_animation")

    def cancel_all(self):
        lib.pxl_table_cancel_all(self._handle())

    def stats(self):
        stats = _ffi.pxl_table_stats(struct_size=ctypes.sizeof(_ffi.pxl_table_stats))
        _check(lib.pxl_table_get_stats(self._handle(), ctypes.byref(stats)), "pxl_table_get_stats")
        return TableStats(**{name: getattr(stats, name) for name in TableStats._fields})
