#!/usr/bin/env python3
"""A Qt for Python (PySide6) list of 1,000 remote thumbnails, loaded by a pixload.Table.

    python3 gallery.py [options] BASE_URL

    --index FILE          image paths, one a line, relative to BASE_URL (default
                          build/demo-data/index.txt, which `make demo` prepares)
    --rows N              rows in the list (default 1000); row i shows image i % count
                          with "?row=i" added, so every row is a URL of its own
    --script full|still   scroll by itself (full: slow scroll, fling, fling stopped dead,
                          back; still: only wait for the first screen), report, exit with a
                          status: 0 when every settled screen showed every visible row's
                          image and no row seen before flashed its placeholder
    --settle-timeout-ms N scripted: give up waiting for a screen after this (default 3000)
    --screenshot FILE     scripted: the window as drawn at the end, as a PNG, and one
                          "cell row=R ..." line per visible thumbnail (where it is in FILE)
    --placeholders FILE   BlurHashes, one "PATH<TAB>HASH" line per image (PATH as in the
                          index): a row still loading shows its image's hash, blurred,
                          instead of the flat placeholder colour
    --later-ms N          with --screenshot: a second screenshot N ms after the first
                          (FILE with "-later" before its extension): the animated rows
                          have moved on, the others not; then the view leaves the
                          animated rows for 0.5 s and comes back ("out of view: ...
                          N frames decoded", "back in view: ...")

Every row asks for a round thumbnail: 96x96 (FILL) cut to its disc by pixload's Circle
processor, so the pixels Qt draws are the ones pixload made, transparent outside the disc.
With --placeholders, each row's request carries its BlurHash: the table hands on_row the
decoded hash (result.placeholder, 32x32) inside the set_visible that shows the row, before
its image, and the row draws it scaled up into the disc. A row the memory cache holds gets
its image in that call instead, and no placeholder. (`pixload hash --blurhash --size 96x96
--mode fill URL...` computes the hashes; test_offscreen.sh does, for the demo photos.)

Animated rows (GIF, WebP, AVIF sequences) play with pixload's animation players, on Qt's
clock: every row loads as a still (its first frame, as fast as any photo); a row whose
image says source_frame_count > 1 gets a pixload.Player of the same request
(Loader.play), tied to its row with Table.bind_animation, so the table pauses it (no
decoding) while the row is out of view and it plays on where it stopped when the row comes
back. One QTimer, running while an animated row is on screen, asks each visible row's
player for the frame due now (Player.frame_at) and redraws the row when it is another
frame; the player decodes just ahead into its small ring. Players belong to rows (the
row's own URL), so a cell Qt reuses for another row never shows this row's frames; the
players of rows far off screen are closed, and every player before the loader.

Needs PySide6 and the pixload package (`pip install PySide6 dist/pixload-*.whl` in a
venv, or PYTHONPATH=bindings/python PIXLOAD_LIBRARY=build/lib/libpixload.so.0). To try it
on the demo photos: `scripts/photos.sh build/demo-data` and `scripts/nginx.sh start
build/demo-data 8080 build/qt-nginx`, then `python3 examples/qt/gallery.py
http://127.0.0.1:8080/`. examples/qt/test_offscreen.sh runs the scripted session under
Qt's offscreen platform and checks the screenshot cell by cell.

How it drives pixload, the way the API intends (examples/gtk/pixload_gtk.c is the same
app in C and GTK 4):
 - The completion queue's fd is watched by a QSocketNotifier, so every pixload callback
   runs on the Qt thread, inside Queue.dispatch, a batch at a time.
 - A pixload.Table owns the requests. The vertical scroll bar's valueChanged tells it
   which rows are on screen and which way they move; no movement for a few frames tells
   it the view is still. It loads the visible rows first, prefetches ahead, cancels what
   left, and calls on_row only for rows on screen, from memory inside set_visible when it
   can: a row scrolled back to is drawn in that frame, never as a placeholder.
 - The model keeps a QImage for the visible rows only, and drops a row's image when the
   row leaves the screen (the table delivers it again when the row comes back).
 - A QImage is made over the pixload image's pixels without a copy: Format_ARGB32_-
   Premultiplied is pixload's BGRA8_PREMUL on a little-endian machine (RGBA8_PREMUL and
   Format_RGBA8888_Premultiplied elsewhere), the raster engine's own format. The row keeps
   the pixload.Image next to its QImage, so the pixels live as long as the QImage does.
 - Every pixload call on the Qt thread is timed: the time spent inside them between two
   frames of the list is what a frame can lose to pixload (the scripted session reports
   its median, p99 and max).
"""
import argparse
import ctypes
import math
import os
import sys
import time

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPoint, QRect, QRectF, QSize, QSocketNotifier, Qt, QTimer
from PySide6.QtGui import QColor, QImage, QPainter, QPainterPath
from PySide6.QtWidgets import (QApplication, QLabel, QListView, QMainWindow, QStyle, QStyledItemDelegate,
                               QVBoxLayout, QWidget)

import pixload

THUMB_WIDTH, THUMB_HEIGHT = 96, 96   # a round thumbnail: FILL to the square, then Circle
PAD = 4
ROW_HEIGHT = THUMB_HEIGHT + 2 * PAD
DISPATCH_BATCH = 32          # callbacks per turn of the event loop: input and drawing stay responsive
STILL_AFTER_MS = 50          # no scrolling for three frames: the view is still
FRAME_MS = 16                # the scripted session moves the view once a frame
PAUSE_BETWEEN_PHASES_MS = 250
OUT_OF_VIEW_MS = 500         # --later-ms: how long the animated rows are left out of view

# The slot's background (the disc's corners and a transparent PNG's show it) and the
# placeholder of a row without a hash (or whose load failed): a flat colour no photograph
# has, so a screenshot tells it apart.
SLOT_COLOR = QColor(32, 32, 32)
PLACEHOLDER_COLOR = QColor(255, 0, 255)
PROCESS = [pixload.Circle()]

if sys.byteorder == "little":
    PIXEL_FORMAT, QIMAGE_FORMAT = pixload.Format.BGRA8_PREMUL, QImage.Format.Format_ARGB32_Premultiplied
else:
    PIXEL_FORMAT, QIMAGE_FORMAT = pixload.Format.RGBA8_PREMUL, QImage.Format.Format_RGBA8888_Premultiplied


# ---- timing the pixload calls on the Qt thread ----

class CallClock:
    """Times every pixload call made on the Qt thread, and the host's callbacks that ran
    inside them (on_row making QImages). Per frame of the list (a paint of its viewport),
    the time spent inside pixload calls since the previous frame."""

    def __init__(self):
        self.depth = 0
        self.started = 0
        self.host_ns = 0           # inside the current outer call, in our callbacks
        self.calls = 0
        self.longest = (0, 0, "-", 0)  # ns, host ns, name, when (ns after the clock was made)
        self.created = time.perf_counter_ns()
        self.frame_ns = self.frame_host_ns = 0
        self.frames = []           # (ns in pixload calls, of which in our callbacks) per frame
        self.recording = False

    def call(self, name, fn, *args):
        outer = self.depth == 0
        if outer:
            self.host_ns = 0
            self.started = time.perf_counter_ns()
        self.depth += 1
        try:
            return fn(*args)
        finally:
            self.depth -= 1
            if outer:
                took = time.perf_counter_ns() - self.started
                self.calls += 1
                self.frame_ns += took
                self.frame_host_ns += self.host_ns
                if took > self.longest[0]:
                    self.longest = (took, self.host_ns, name, self.started - self.created)

    def host_callback(self, started_ns):
        if self.depth > 0:
            self.host_ns += time.perf_counter_ns() - started_ns

    def frame_drawn(self):
        if self.recording:
            self.frames.append((self.frame_ns, self.frame_host_ns))
        self.frame_ns = self.frame_host_ns = 0


def percentile(sorted_values, p):
    """Nearest rank (p in 0..1) of sorted values."""
    rank = math.ceil(p * len(sorted_values))
    return sorted_values[max(0, rank - 1)]


class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


ctypes.pythonapi.PyObject_GetBuffer.argtypes = (ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int)
ctypes.pythonapi.PyBuffer_Release.argtypes = (ctypes.POINTER(_PyBuffer),)


def buffer_address(obj):
    """Where a buffer object's bytes are (to check that a QImage wraps the pixels)."""
    view = _PyBuffer()
    if ctypes.pythonapi.PyObject_GetBuffer(obj, ctypes.byref(view), 0) != 0:
        return None
    try:
        return view.buf
    finally:
        ctypes.pythonapi.PyBuffer_Release(ctypes.byref(view))


# ---- the model: one row per thumbnail ----

class Thumb:
    """A row's picture: the QImage and the pixload.Image whose pixels it wraps."""
    __slots__ = ("image", "qimage", "source")

    def __init__(self, image, source, qimage_format=QIMAGE_FORMAT):
        self.image = image                # owns the pixels; lives as long as this Thumb
        self.qimage = QImage(image.pixels, image.width, image.height, image.stride, qimage_format)
        self.source = source


class Animated:
    """An animated row's player, the due time of the frame its cell shows (None: the
    still, not a frame of the player yet) and where the still came from."""
    __slots__ = ("player", "due", "index", "source")

    def __init__(self, player, source):
        self.player, self.source = player, source
        self.due = self.index = None


def read_placeholders(path):
    """PATH<TAB>HASH lines -> {path: pixload.Placeholder}."""
    hashes = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                name, text = line.rstrip("\n").split("\t")
                hashes[name] = pixload.Placeholder.blurhash(text)
    return hashes


class Gallery(QAbstractListModel):
    def __init__(self, urls, rows, clock, placeholders=None):
        super().__init__()
        self.urls = urls
        self.rows = rows
        self.clock = clock
        self.hashes = placeholders or [None] * len(urls)  # per image: a pixload.Placeholder or None
        self.thumbs = {}                  # visible row -> Thumb
        self.placeholders = {}            # visible row still loading -> Thumb of its decoded hash
        self.placeholder_calls = 0        # on_row calls with a placeholder
        self.waited_without = set()       # rows whose image came from disk or network with no placeholder first
        self.errors = {}                  # visible row -> the load's error
        self.ever_shown = set()           # rows whose image was on screen once
        self.image_at = {}                # row -> perf_counter when its image arrived
        self.qimages_made = self.qimages_copied = self.placeholder_flashes = 0
        self.loader = pixload.Loader()
        self.queue = pixload.Queue()
        self.table = pixload.Table(self.loader, self.queue, rows, self.request_for_row, self.on_row,
                                   width=THUMB_WIDTH, height=THUMB_HEIGHT, mode=pixload.Mode.FILL,
                                   process=PROCESS, format=PIXEL_FORMAT)
        self.notifier = QSocketNotifier(self.queue.fd, QSocketNotifier.Type.Read)
        self.notifier.activated.connect(self.dispatch)
        self.told = (0, 0)
        self.players = {}                 # animated row -> Animated, while near the screen
        self.frames_drawn = 0             # cells redrawn with a later frame of their animation
        self.animation_timer = QTimer()   # the clock animated rows play on
        self.animation_timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.animation_timer.setInterval(FRAME_MS)
        self.animation_timer.timeout.connect(self.animate)

    def url(self, row):
        return "%s?row=%d" % (self.urls[row % len(self.urls)], row)

    # pixload's callbacks, on this thread

    def request_for_row(self, row):
        placeholder = self.hashes[row % len(self.urls)]
        if placeholder is None:
            return self.url(row)
        return {"url": self.url(row), "placeholder": placeholder}

    def on_row(self, row, result):
        began = time.perf_counter_ns()
        if result.placeholder:
            # The row's hash, decoded: RGBA8 straight, 32x32; drawn scaled into the disc.
            self.placeholders[row] = Thumb(result.image, result.source, QImage.Format.Format_RGBA8888)
            self.placeholder_calls += 1
        elif result.ok:
            if (self.hashes[row % len(self.urls)] is not None and row not in self.placeholders
                    and result.source != pixload.Source.MEMORY):
                self.waited_without.add(row)
            self.placeholders.pop(row, None)
            self.show(row, result.image, result.source)
            self.errors.pop(row, None)
            self.image_at[row] = time.perf_counter()
            animated = self.players.get(row)
            if animated is not None:  # back on screen: where its player is, not the still
                animated.due = None
                self.draw_frame(row, animated, time.monotonic_ns() // 1_000_000)
            elif result.image.source_frame_count > 1:
                self.start_player(row, result.source)
            if self.players and not self.animation_timer.isActive():
                self.animation_timer.start()
        else:
            self.placeholders.pop(row, None)  # a failed row: the flat colour and why
            self.errors[row] = result.error
        index = self.index(row)
        self.dataChanged.emit(index, index)
        self.clock.host_callback(began)

    def show(self, row, image, source):
        thumb = Thumb(image, source)
        self.qimages_made += 1
        if buffer_address(thumb.qimage.constBits()) != buffer_address(image.pixels):
            self.qimages_copied += 1
        self.thumbs[row] = thumb

    # animated rows

    def start_player(self, row, source):
        player = self.clock.call("Loader.play", lambda: self.loader.play(
            self.url(row), queue=self.queue, on_event=self.on_player_event, size=(THUMB_WIDTH, THUMB_HEIGHT),
            mode=pixload.Mode.FILL, process=PROCESS, format=PIXEL_FORMAT))
        self.players[row] = Animated(player, source)
        self.clock.call("Table.bind_animation", self.table.bind_animation, row, player)

    def on_player_event(self, event):
        if event.error is not None:  # the row keeps its still; the player is done
            row = next((r for r, a in self.players.items() if a.player is event.player), None)
            if row is not None:
                print("row %d: its animation stopped: %s" % (row, event.error))
                self.players.pop(row).player.close()

    def animate(self):
        """A tick of the animation clock: each visible animated row's frame due now, drawn
        when it is not the one shown."""
        now_ms = time.monotonic_ns() // 1_000_000
        first, count = self.told
        playing = False
        for row, animated in list(self.players.items()):
            if not first <= row < first + count or row not in self.thumbs:
                continue
            playing = True
            if self.draw_frame(row, animated, now_ms):
                index = self.index(row)
                self.dataChanged.emit(index, index)
        if not playing:
            self.animation_timer.stop()  # started again by on_row when an animated row shows

    def draw_frame(self, row, animated, now_ms):
        """Makes row's picture its player's frame due at now_ms; False when that is the
        one already shown (or the player has none yet: the still stays)."""
        frame = self.clock.call("Player.frame_at", animated.player.frame_at, now_ms)
        if frame is None or frame.due_ms == animated.due:
            return False
        animated.due, animated.index = frame.due_ms, frame.index
        self.show(row, frame.image, animated.source)
        self.frames_drawn += 1
        return True

    def dispatch(self):
        self.clock.call("Queue.dispatch", self.queue.dispatch, DISPATCH_BATCH)

    def set_visible(self, first, count, direction):
        """Tells the table; drops the images of rows that left the screen (it delivers
        them again, from memory, when they come back)."""
        self.told = (first, count)
        self.clock.call("Table.set_visible", self.table.set_visible, first, count, direction)
        for row in [r for r in self.thumbs if not first <= r < first + count]:
            del self.thumbs[row]
        for row in [r for r in self.errors if not first <= r < first + count]:
            del self.errors[row]
        for row in [r for r in self.placeholders if not first <= r < first + count]:
            del self.placeholders[row]
        # Players of rows near the screen stay (paused by the table); farther ones go.
        for row in [r for r in self.players if not first - 2 * count <= r < first + 3 * count]:
            self.players.pop(row).player.close()

    def close(self):
        self.notifier.setEnabled(False)
        self.animation_timer.stop()
        self.thumbs.clear()
        self.placeholders.clear()
        for animated in self.players.values():  # players before the table, queue and loader
            animated.player.close()
        self.players.clear()
        self.table.close()
        self.queue.close()
        self.loader.close()

    # Qt's side

    def rowCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else self.rows

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.DisplayRole:
            return self.urls[index.row() % len(self.urls)]
        return None


def thumb_rect(cell, thumb):
    """Where a row's picture goes in its cell: the slot, and the image centred in it (a
    placeholder, or no picture: the whole slot)."""
    slot = QRect(cell.x() + PAD, cell.y() + PAD, THUMB_WIDTH, THUMB_HEIGHT)
    if thumb is None:
        return slot, slot
    w, h = thumb.qimage.width(), thumb.qimage.height()
    return slot, QRect(slot.x() + (THUMB_WIDTH - w) // 2, slot.y() + (THUMB_HEIGHT - h) // 2, w, h)


class ThumbDelegate(QStyledItemDelegate):
    def __init__(self, gallery):
        super().__init__()
        self.gallery = gallery

    def sizeHint(self, option, index):
        return QSize(THUMB_WIDTH + 2 * PAD, ROW_HEIGHT)

    def paint(self, painter, option, index):
        gallery, row = self.gallery, index.row()
        if option.state & QStyle.StateFlag.State_Selected:
            painter.fillRect(option.rect, option.palette.highlight())
        thumb = gallery.thumbs.get(row)
        placeholder = gallery.placeholders.get(row) if thumb is None else None
        slot, picture = thumb_rect(option.rect, thumb)
        painter.fillRect(slot, SLOT_COLOR)
        if thumb is not None:
            painter.drawImage(picture.topLeft(), thumb.qimage)  # 1:1, no scaling: round already
            gallery.ever_shown.add(row)
        else:
            if placeholder is not None:  # the hash's 32x32 scaled up, cut to the disc
                painter.save()
                painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
                disc = QPainterPath()
                disc.addEllipse(QRectF(slot))
                painter.setClipPath(disc)
                painter.drawImage(QRectF(slot), placeholder.qimage)
                painter.restore()
            else:
                painter.fillRect(slot, PLACEHOLDER_COLOR)
            if row in gallery.ever_shown:
                gallery.placeholder_flashes += 1
        text = QRect(slot.right() + 2 * PAD, option.rect.y() + PAD, option.rect.width() - slot.width() - 4 * PAD,
                     THUMB_HEIGHT)
        if thumb is not None:
            detail = "%dx%d from %s" % (thumb.image.width, thumb.image.height, thumb.source.name.lower())
        elif row in gallery.errors:
            detail = "failed: %s" % gallery.errors[row]
        else:
            detail = "loading" + (", its placeholder drawn" if placeholder is not None else "")
        painter.drawText(text, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         "Row %d\n%s\n%s" % (row, gallery.urls[row % len(gallery.urls)], detail))


class ListView(QListView):
    """A QListView that tells the clock when it has drawn a frame."""

    def __init__(self, clock):
        super().__init__()
        self.clock = clock

    def paintEvent(self, event):
        super().paintEvent(event)
        self.clock.frame_drawn()


# ---- the window ----

class Window(QMainWindow):
    def __init__(self, gallery, clock):
        super().__init__()
        self.gallery = gallery
        self.view = ListView(clock)
        self.view.setModel(gallery)
        self.view.setItemDelegate(ThumbDelegate(gallery))
        self.view.setUniformItemSizes(True)
        self.view.setVerticalScrollMode(QListView.ScrollMode.ScrollPerPixel)
        self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.status = QLabel()
        box = QWidget()
        layout = QVBoxLayout(box)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.view)
        layout.addWidget(self.status)
        self.setCentralWidget(box)
        self.setWindowTitle("pixload: %d thumbnails" % gallery.rows)
        self.resize(680, 720)

        self.last_value = 0
        self.still = QTimer(self)
        self.still.setSingleShot(True)
        self.still.setInterval(STILL_AFTER_MS)
        self.still.timeout.connect(lambda: self.tell_table(0))
        bar = self.view.verticalScrollBar()
        bar.valueChanged.connect(self.on_scrolled)
        bar.rangeChanged.connect(lambda *_: self.tell_table(0))  # first layout, a resize
        self.status_timer = QTimer(self)
        self.status_timer.timeout.connect(self.update_status)
        self.status_timer.start(500)

    def visible_rows(self):
        """The rows the viewport shows, from the scroll position (uniform row heights)."""
        viewport = self.view.viewport().rect()
        top = self.view.indexAt(QPoint(0, viewport.top()))
        if not top.isValid():
            return 0, 0
        bottom = self.view.indexAt(QPoint(0, viewport.bottom()))
        last = bottom.row() if bottom.isValid() else self.gallery.rows - 1
        return top.row(), last - top.row() + 1

    def tell_table(self, direction):
        first, count = self.visible_rows()
        self.gallery.set_visible(first, count, direction)

    def on_scrolled(self, value):
        direction = 1 if value > self.last_value else -1 if value < self.last_value else 0
        self.last_value = value
        self.tell_table(direction)
        self.still.start()

    def update_status(self):
        stats = self.gallery.clock.call("Table.stats", self.gallery.table.stats)
        self.status.setText("%d rows \u00b7 %d loads, %d cancelled, %d memory hits \u00b7 longest call %.1f ms"
                            % (self.gallery.rows, stats.started, stats.cancelled, stats.memory_hits,
                               self.gallery.clock.longest[0] / 1e6))

    def visible_cells(self):
        """(row, its cell's rectangle in the viewport) for the rows on screen."""
        viewport = self.view.viewport().rect()
        first, count = self.visible_rows()
        cells = []
        for row in range(first, first + count):
            rect = self.view.visualRect(self.gallery.index(row))
            if rect.intersects(viewport):
                cells.append((row, rect))
        return cells


# ---- the scripted session ----

# name, first visible row where the move ends, seconds (0: no move), eased out (a fling),
# the fraction of its time after which the user stops it dead (1: it ends by itself)
FULL_SCRIPT = [
    ("first screen", 0, 0, False, 1),
    ("slow scroll", 30, 5.0, False, 1),      # 6 rows a second
    ("fling", 330, 1.5, True, 1),            # 300 rows from 600 rows a second to rest
    ("fling, stop", 930, 2.0, True, 0.3),    # stopped dead at ~440 rows a second
    ("back", 12, 1.2, True, 1),              # to rows the slow scroll showed: from memory
]
STILL_SCRIPT = FULL_SCRIPT[:1]


class Script:
    def __init__(self, app, window, phases, settle_timeout_ms, screenshot, later_ms=0):
        self.app, self.window, self.gallery = app, window, window.gallery
        self.later_ms = later_ms
        self.phases = phases
        self.settle_timeout_ms = settle_timeout_ms
        self.screenshot = screenshot
        self.phase = 0
        self.stage = "moving"
        self.stage_started = self.settle_at = None
        self.move_from = 0
        self.reports = []
        self.exit_status = 1
        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.timeout.connect(self.tick)

    def start(self):
        self.timer.start(FRAME_MS)

    def row_height(self):
        return self.window.view.visualRect(self.gallery.index(0)).height() or ROW_HEIGHT

    def screen_complete(self):
        cells = self.window.visible_cells()
        return bool(cells) and all(row in self.gallery.thumbs for row, _ in cells)

    def tick(self):
        now = time.perf_counter()
        bar = self.window.view.verticalScrollBar()
        if self.stage_started is None:  # the first frame: the session starts
            self.session_started = self.stage_started = self.settle_at = now
            self.move_from = bar.value()
            return
        name, to_row, seconds, fling, stop_at = self.phases[self.phase]
        elapsed = now - self.stage_started
        if self.stage == "moving":
            target = min(to_row * self.row_height(), bar.maximum())
            t = min(stop_at, elapsed / seconds) if seconds > 0 else 1.0
            progress = 1.0 - (1.0 - t) ** 3 if fling else t
            bar.setValue(round(self.move_from + (target - self.move_from) * progress))
            if t >= stop_at or seconds <= 0:
                self.stage = "settling"
                self.stage_started = self.settle_at = time.perf_counter()
        elif self.stage == "settling":
            timed_out = elapsed * 1000 >= self.settle_timeout_ms
            if self.screen_complete() or timed_out:
                print('phase "%s" settled %.0f ms into the session'
                      % (name, (self.settle_at - self.session_started) * 1000))
                self.report_settle(name, timed_out)
                self.stage = "pausing"
                self.stage_started = now
        elif self.stage == "pausing" and elapsed * 1000 >= PAUSE_BETWEEN_PHASES_MS:
            if self.phase + 1 < len(self.phases):
                self.phase += 1
                self.stage = "moving"
                self.stage_started = now
                self.move_from = bar.value()
            else:
                self.timer.stop()
                self.gallery.clock.recording = False
                self.finish()

    def report_settle(self, name, timed_out):
        gallery = self.gallery
        cells = self.window.visible_cells()
        first, count = gallery.told
        print('settle "%s": rows %d..%d told to the table, %d visible%s'
              % (name, first, first + count - 1, len(cells), " (timed out)" if timed_out else ""))
        placeholders, slowest = 0, 0.0
        for row, _ in cells:
            if row in gallery.thumbs:
                after = max(0.0, (gallery.image_at[row] - self.settle_at) * 1000)
                slowest = max(slowest, after)
                print("  row %4d: image %6.1f ms after settle, from %s"
                      % (row, after, gallery.thumbs[row].source.name.lower()))
            else:
                placeholders += 1
                error = gallery.errors.get(row)
                print("  row %4d: PLACEHOLDER%s%s" % (row, " (its hash)" if row in gallery.placeholders else "",
                                                      ", failed: %s" % error if error else ""))
        print('settle "%s": %d visible, %d placeholders, slowest %.1f ms after settle'
              % (name, len(cells), placeholders, slowest))
        self.reports.append((name, len(cells), placeholders, slowest))
        sys.stdout.flush()

    def finish(self):
        gallery, clock = self.gallery, self.gallery.clock
        failures = sum(1 for _, visible, placeholders, _ in self.reports if visible == 0 or placeholders)
        failures += gallery.placeholder_flashes > 0
        print("placeholder flashes on rows seen before: %d" % gallery.placeholder_flashes)
        print("hash placeholders: %d drawn; rows whose image came from disk or network without one first: %d%s"
              % (gallery.placeholder_calls, len(gallery.waited_without),
                 "" if not gallery.waited_without else " (%s)" % " ".join(map(str, sorted(gallery.waited_without)[:20]))))
        print("qimages: %d made, %d copied their pixels" % (gallery.qimages_made, gallery.qimages_copied))
        frames = sorted(ns for ns, _ in clock.frames)
        own = sorted(ns - host for ns, host in clock.frames)
        if frames:
            print("time in pixload calls per frame: %d frames, median %.3f ms, p99 %.3f ms, max %.3f ms"
                  % (len(frames), percentile(frames, 0.5) / 1e6, percentile(frames, 0.99) / 1e6, frames[-1] / 1e6))
            print("  without our on_row callbacks: median %.3f ms, p99 %.3f ms, max %.3f ms"
                  % (percentile(own, 0.5) / 1e6, percentile(own, 0.99) / 1e6, own[-1] / 1e6))
        took, host, name, at = clock.longest
        print("longest pixload call on the Qt thread: %.3f ms (%s, %.0f ms after the app started; %.3f ms of it "
              "in our callbacks), %d calls" % (took / 1e6, name, at / 1e6, host / 1e6, clock.calls))
        stats = gallery.table.stats()
        print("table: %d started, %d cancelled, %d memory hits, %d delivered"
              % (stats.started, stats.cancelled, stats.memory_hits, stats.delivered))
        print("animations: %d players near the screen, %d frames drawn, %d decoded by players tied to rows"
              % (len(gallery.players), gallery.frames_drawn, stats.animation_frames_decoded))
        self.exit_status = 1 if failures else 0
        print("script: %s" % ("FAILED" if failures else "OK"))
        sys.stdout.flush()
        if self.screenshot:
            self.waited_ms = 0
            self.when_playing()
        else:
            self.app.quit()

    def when_playing(self):
        """The screenshot once every visible animated row shows a frame of its player (or
        after 3 s), and with --later-ms a second one that much later; then quits."""
        gallery = self.gallery
        cells = self.window.visible_cells()
        waiting = [row for row, _ in cells if row in gallery.players and gallery.players[row].due is None]
        if waiting and self.waited_ms < 3000:
            self.waited_ms += FRAME_MS
            QTimer.singleShot(FRAME_MS, self.when_playing)
            return
        if waiting:
            print("animated rows not playing after 3 s: %s" % " ".join(map(str, waiting)))
        self.save_screenshot()
        if self.later_ms:
            QTimer.singleShot(self.later_ms, self.save_later)
        else:
            self.app.quit()

    def save_later(self):
        root, ext = os.path.splitext(self.screenshot)
        later = root + "-later" + ext
        self.app.processEvents()
        if not self.window.grab().save(later, "PNG"):
            print("screenshot: cannot write %s" % later)
        for row, _ in self.window.visible_cells():
            animated = self.gallery.players.get(row)
            index = None if animated is None else animated.index
            print("later row=%d frame=%s" % (row, "-" if index is None else index))
        print("later screenshot: %s, %d ms after" % (later, self.later_ms))
        sys.stdout.flush()
        self.out_of_view()

    def out_of_view(self, step=0):
        """After the screenshots: the view moves one screen down, leaving the animated rows
        (their players stay, paused by the table), and comes back; prints what the players
        decoded meanwhile and how many frames were drawn after the return. While away, the
        off-screen players are asked for frames every tick all the same (as a host that
        does not track what is visible would): only the table's pause keeps them still."""
        gallery, bar = self.gallery, self.window.view.verticalScrollBar()
        # The players' own counters (the table's animation_frames_decoded counts tied ones only).
        decoded = sum(a.player.stats().frames_decoded for a in gallery.players.values())
        if step == 0:
            self.rows_before = gallery.told
            bar.setValue(bar.value() + self.window.view.viewport().height() + self.row_height())
        elif step == 1:  # a decode running when the rows left may have ended by now
            self.decoded_away = decoded
            self.probe = QTimer()
            self.probe.timeout.connect(lambda: [a.player.frame_at(time.monotonic_ns() // 1_000_000)
                                                for a in gallery.players.values()])
            self.probe.start(FRAME_MS)
        elif step == 2:
            self.probe.stop()
            first, count = gallery.told
            left = [r for r in gallery.players if first <= r < first + count]
            print("out of view: rows %d..%d on screen, %d players kept for rows off it (%s on it), "
                  "%d frames decoded by them in %d ms"
                  % (first, first + count - 1, len(gallery.players), len(left), decoded - self.decoded_away,
                     OUT_OF_VIEW_MS))
            bar.setValue(0)
            self.drawn_back, self.decoded_back = gallery.frames_drawn, decoded
        else:
            print("back in view: %d frames drawn, %d decoded in %d ms"
                  % (gallery.frames_drawn - self.drawn_back, decoded - self.decoded_back, OUT_OF_VIEW_MS))
            sys.stdout.flush()
            self.app.quit()
            return
        QTimer.singleShot(100 if step == 0 else OUT_OF_VIEW_MS, lambda: self.out_of_view(step + 1))

    def save_screenshot(self):
        """The window as drawn now, and where each visible row's picture is in it."""
        window, view = self.window, self.window.view
        self.app.processEvents()
        pixmap = window.grab()
        ratio = pixmap.devicePixelRatio()
        if not pixmap.save(self.screenshot, "PNG"):
            print("screenshot: cannot write %s" % self.screenshot)
            return
        origin = view.viewport().mapTo(window, QPoint(0, 0))
        size = view.viewport().size()
        print("geometry: window %dx%d, scale %g, viewport %d,%d %dx%d"
              % (pixmap.width(), pixmap.height(), ratio, origin.x(), origin.y(), size.width(), size.height()))
        for row, cell in window.visible_cells():
            thumb = self.gallery.thumbs.get(row)
            _, picture = thumb_rect(cell, thumb)
            at = view.viewport().mapTo(window, picture.topLeft())
            shown = "none"
            if thumb:
                shown = "%dx%d" % (thumb.image.width, thumb.image.height)
            elif row in self.gallery.placeholders:
                shown = "placeholder"
            hashed = self.gallery.hashes[row % len(self.gallery.urls)]
            animated = self.gallery.players.get(row)
            print("cell row=%d x=%d y=%d w=%d h=%d image=%s url=%s hash=%s frame=%s"
                  % (row, at.x(), at.y(), picture.width(), picture.height(), shown,
                     self.gallery.url(row), hashed.data.decode("ascii") if hashed else "-",
                     "-" if animated is None or animated.index is None else animated.index))
        print("screenshot: %s" % self.screenshot)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base_url", nargs="?", default=os.environ.get("PIXLOAD_QT_BASE_URL"))
    parser.add_argument("--index", default="build/demo-data/index.txt")
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--script", choices=("full", "still"))
    parser.add_argument("--settle-timeout-ms", type=int, default=3000)
    parser.add_argument("--screenshot")
    parser.add_argument("--placeholders")
    parser.add_argument("--later-ms", type=int, default=0)
    args, qt_args = parser.parse_known_args()
    if not args.base_url:
        parser.error("no BASE_URL (or PIXLOAD_QT_BASE_URL)")
    with open(args.index) as f:
        paths = [line.strip() for line in f if line.strip()]
    if not paths:
        parser.error("%s lists no images" % args.index)
    base = args.base_url if args.base_url.endswith("/") else args.base_url + "/"

    app = QApplication([sys.argv[0]] + qt_args)
    clock = CallClock()
    clock.recording = args.script is not None  # from the first screen's set_visible on
    hashes = None
    if args.placeholders:
        known = read_placeholders(args.placeholders)
        hashes = [known.get(p) for p in paths]
    gallery = Gallery([base + p for p in paths], args.rows, clock, hashes)
    window = Window(gallery, clock)
    window.show()
    script = None
    if args.script:
        phases = FULL_SCRIPT if args.script == "full" else STILL_SCRIPT
        script = Script(app, window, phases, args.settle_timeout_ms, args.screenshot, args.later_ms)
        script.start()
    status = app.exec()
    # The table, the queue and the loader go before Qt does: on_row touches the model.
    gallery.close()
    return script.exit_status if script else status


if __name__ == "__main__":
    sys.exit(main())
