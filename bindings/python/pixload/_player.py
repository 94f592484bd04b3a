"""Players driven by the host's frame clock (Loader.play): for GUI toolkits, whose timers
(Qt's QTimer, GTK's frame clock) decide when to draw, where the async iterator
(Loader.animate) would pace itself.

    player = loader.play(url, queue=queue, on_event=on_event, size=(96, 96))
    ...                                  # each tick of the GUI's clock:
    frame = player.frame_at(now_ms)      # the frame due now (None before LOADED)
    if frame is not None and frame.due_ms != shown_due:
        shown_due = frame.due_ms; draw(frame.image)

Events come on the thread dispatching `queue` (Queue.dispatch), as on_event(event), a
PlayerEvent: LOADED (event.image is frame 0, or event.error the load's PixloadError; no
other event follows an error), FRAME_READY (the frame after the one frame_at last
returned is decoded: event.index, event.due_ms on the clock given to frame_at), ENDED (the
loop count is played out; the last frame stays) and FAILED (a later frame could not be
decoded: event.error; playback stays at the last good frame). After each frame_at exactly
one of FRAME_READY, ENDED or FAILED follows, unless the playback already ended: a host may
sleep until FRAME_READY and then until its due_ms. Frames are decoded into a small ring
(Loader(animation_ring_frames=...)), so memory does not grow with the frame count; a host
that falls behind has frames skipped (Frame.skipped), not queued.

Table.bind_animation(row, player) ties a player to a table's row: the table pauses it
while the row is out of view (no decoding) and resumes it when the row comes back.

close() frees the player (also from inside its own on_event, or any pixload callback);
close players before their loader and queue (Loader.close and Queue.close close the ones
still open). A player dropped without close() is freed by garbage collection.
"""
import ctypes

from ._animation import (
    ENDED, FAILED, FRAME_READY, LOADED, AnimationStats, Frame, _load, _player_free, pxl_animation_frame,
    pxl_animation_stats,
)
from ._errors import PixloadError, Status
from ._ffi import lib
from ._handle import _Handle
from ._image import Image

_KIND_NAMES = {LOADED: "LOADED", FRAME_READY: "FRAME_READY", ENDED: "ENDED", FAILED: "FAILED"}


class PlayerEvent:
    """What a Player's on_event gets: `kind` (Player.LOADED, FRAME_READY, ENDED, FAILED),
    `player`, `image` (LOADED: frame 0, an Image), `error` (LOADED or FAILED: a
    PixloadError, else None), `index` and `due_ms` (FRAME_READY: the frame now decoded and
    when it is due), `frame_count` and `loop_count` (0: forever) of the source."""

    __slots__ = ("kind", "player", "image", "error", "index", "due_ms", "frame_count", "loop_count")

    def __init__(self, kind, player, image, error, index, due_ms, frame_count, loop_count):
        self.kind, self.player, self.image, self.error = kind, player, image, error
        self.index, self.due_ms, self.frame_count, self.loop_count = index, due_ms, frame_count, loop_count

    def __repr__(self):
        detail = f" {self.index} due {self.due_ms}" if self.kind == FRAME_READY else ""
        detail += f" {self.error!r}" if self.error is not None else ""
        return f"<pixload.PlayerEvent {_KIND_NAMES.get(self.kind, self.kind)}{detail}>"


def _error(event):
    message = event.message.decode("utf-8", "replace") if event.message else ""
    return PixloadError.from_status(event.status, message)


class Player(_Handle):
    """An animation played on the host's clock (Loader.play; the module's docstring says
    how). Attributes: `url`, `frame_count` and `loop_count` (0 until LOADED), `loaded`,
    `error` (the load's or a frame's PixloadError), `ended`, and closed (True once close() ran)."""

    LOADED, FRAME_READY, ENDED, FAILED = LOADED, FRAME_READY, ENDED, FAILED

    def __init__(self, loader, url, queue, on_event, request):
        self.url = url
        self._on_event = on_event
        self.frame_count = self.loop_count = 0
        self.loaded = self.ended = False
        self.error = None
        self._final_stats = None
        ptr, key = _load(self, loader, url, request, queue)
        self._own(ptr, _player_free(key))
        # Freed before them: Loader.close and Queue.close close the players still open.
        loader._players.add(self)
        queue._players.add(self)

    def _event(self, event):
        if self._ptr is None:
            return  # closed inside an earlier callback of the same dispatch
        kind = event.kind
        self.frame_count, self.loop_count = event.frame_count, event.loop_count
        image = error = None
        if kind == LOADED:
            self.loaded = True
            if event.status == Status.OK and event.image:
                image = Image._retained(event.image)
            else:
                error = self.error = _error(event)
        elif kind == FAILED:
            error = self.error = _error(event)
        elif kind == ENDED:
            self.ended = True
        if self._on_event is not None:
            self._on_event(PlayerEvent(kind, self, image, error, event.index, event.due_ms, event.frame_count,
                                       event.loop_count))

    def frame_at(self, now_ms):
        """The Frame due at now_ms (the host's monotonic clock in milliseconds; the first
        call after LOADED starts the playhead: frame 0 is due then), or None before LOADED,
        after a failed load or once closed. The same frame is returned until the next one is
        due and decoded: compare frame.due_ms (or index) to know whether to redraw."""
        ptr = self._ptr
        if ptr is None:
            return None
        info = pxl_animation_frame(struct_size=ctypes.sizeof(pxl_animation_frame))
        image = lib.pxl_animation_frame_at(ptr, int(now_ms), ctypes.byref(info))
        if not image:
            return None
        return Frame(Image(image), info.index, info.duration_ms, info.skipped, info.due_ms, info.next_due_ms,
                     bool(info.ended))

    def pause(self):
        """Stops decoding; the playhead stays where the last frame_at put it (frame_at keeps
        returning that frame)."""
        if self._ptr is not None:
            lib.pxl_animation_pause(self._ptr)

    def resume(self, now_ms):
        """The playhead continues from where it stopped, now_ms (the clock of frame_at)
        being that moment. A no-op unless paused."""
        if self._ptr is not None:
            lib.pxl_animation_resume(self._ptr, int(now_ms))

    def stats(self):
        """An AnimationStats (frames_decoded, frames_skipped, frames_shown, ring_bytes,
        peak_ring_bytes, loops_played); after close(), the last ones."""
        if self._ptr is None:
            return self._final_stats or AnimationStats(pxl_animation_stats())
        stats = pxl_animation_stats(struct_size=ctypes.sizeof(pxl_animation_stats))
        lib.pxl_animation_stats_get(self._ptr, ctypes.byref(stats))
        return AnimationStats(stats)

    def close(self):
        """Cancels the load and the decoding and frees the player; no on_event call
        follows. Frames already returned stay valid. Idempotent; safe inside on_event."""
        if self._ptr is None:
            return
        self._final_stats = self.stats()
        super().close()

    def __repr__(self):
        state = "closed" if self._ptr is None else "ended" if self.ended else "loaded" if self.loaded else "loading"
        return f"<pixload.Player {self.url!r} {state}>"
