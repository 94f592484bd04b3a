"""Animation players: Loader.animate, an async iterator of frames decoded on demand."""
import asyncio
import time

import pytest

import pixload

FRAMES = 40
DURATION = 20  # ms: the whole loop is 0.8 s


def colour(i):
    return ((i * 37) % 256, (i * 91) % 256, (255 - i * 5) % 256)


@pytest.fixture(scope="module")
def long_gif(server):
    PIL = pytest.importorskip("PIL.Image")
    frames = [PIL.new("RGB", (64, 48), colour(i)) for i in range(FRAMES)]
    path = server.www / "py-player.gif"
    # loop=1: NETSCAPE2.0 repeat 1, so the animation plays twice in all (pxl_image_loop_count 2).
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=DURATION, loop=1, disposal=1,
                   optimize=False)
    return "py-player.gif"


def run(coroutine):
    return asyncio.run(coroutine)


def test_plays_every_frame_in_order_then_ends(server, long_gif):
    async def play():
        frames = []
        with pixload.Loader() as loader:
            animation = loader.animate(server.url(long_gif, case="order"))
            started = time.monotonic()
            async for frame in animation:
                frames.append((frame.index, frame.duration_ms, frame.skipped, frame.image.tobytes()[:3]))
            elapsed = time.monotonic() - started
            return frames, elapsed, animation
    frames, elapsed, animation = run(play())
    assert animation.loop_count == 2 and animation.frame_count == FRAMES
    indexes = [f[0] for f in frames]
    skipped = sum(f[2] for f in frames)
    # Two loops; a frame the iterator was late for is skipped, never repeated or reordered.
    assert len(frames) + skipped == 2 * FRAMES, (len(frames), skipped)
    assert indexes[0] == 0 and indexes[-1] == FRAMES - 1
    for (index, duration, _, pixel) in frames:
        assert duration == DURATION
        assert tuple(pixel) == colour(index)
    # Paced at the file's durations: two loops take at least 2 * 40 * 20 ms less the last frame's.
    assert elapsed >= (2 * FRAMES - 1) * DURATION / 1000 * 0.95
    stats = animation.stats()
    assert stats.frames_shown == len(frames)
    # The ring (default three frames of 64x48 RGBA), not the animation, is what it holds.
    assert 0 < stats.peak_ring_bytes <= 3 * 64 * 48 * 4


def test_frames_at_the_requested_size_with_processors(server, long_gif):
    async def first_frames():
        with pixload.Loader() as loader:
            seen = []
            async for frame in loader.animate(server.url(long_gif, case="size"), size=(16, 16), mode="fill",
                                               process=[pixload.Circle()]):
                seen.append(frame)
                if len(seen) == 3:
                    break
            return seen
    frames = run(first_frames())
    assert [f.index for f in frames][:1] == [0]
    for frame in frames:
        assert frame.image.size == (16, 16)
        data = frame.image.tobytes()
        assert data[3] == 0  # the circle's corner is transparent
        centre = (8 * 16 + 8) * 4
        assert tuple(data[centre:centre + 3]) == colour(frame.index)


def test_load_error_raises_at_first_iteration(server):
    async def play():
        with pixload.Loader() as loader:
            async for _ in loader.animate(server.url("no-such-animation.gif")):
                pass
    with pytest.raises(pixload.HTTPError):
        run(play())


def test_still_image_gives_one_frame(server):
    async def play():
        with pixload.Loader() as loader:
            return [f.index async for f in loader.animate(server.url("gradient.jpg", case="still-player"))]
    assert run(play()) == [0]


def test_cli_play_prints_a_line_per_frame_and_the_summary(server, long_gif, cli):
    import re
    import subprocess

    run = subprocess.run([cli, "play", "--no-disk-cache", "--size", "32x24", "--frames", "50",
                          server.url(long_gif, case="cli")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    frames = [re.fullmatch(r"frame (\d+) 32x24 20 ms, due (\d+) ms, shown (\d+) ms(, late)?(, skipped (\d+))?", line)
              for line in lines[:-1]]
    assert all(frames), lines
    shown = len(frames)
    skipped = sum(int(m.group(6) or 0) for m in frames)
    assert shown + skipped == 50
    # Frames in playing order: 0..39, then the second loop from 0 again.
    order = [int(m.group(1)) for m in frames]
    assert order[0] == 0 and all((b - a) % FRAMES == 1 + int(m.group(6) or 0)
                                 for a, b, m in zip(order, order[1:], frames[1:]))
    summary = re.fullmatch(r"played (\d+) frames, first after (\d+) ms, peak frame memory (\d+) bytes", lines[-1])
    assert summary, lines[-1]
    assert int(summary.group(1)) == shown
    assert 0 < int(summary.group(3)) <= 3 * 32 * 24 * 4


# --- Loader.play: a player on the host's clock (a GUI's timer), events on a Queue ---------

class Host:
    """A GUI host's side: its queue, the events its player sent, and its own clock."""

    def __init__(self, loader):
        self.loader = loader
        self.queue = pixload.Queue()
        self.events = []

    def play(self, url, **request):
        return self.loader.play(url, queue=self.queue, on_event=self.events.append, **request)

    def kinds(self):
        return [e.kind for e in self.events]

    def until(self, kind, after=0, timeout=10):
        """Dispatches the queue until an event of kind arrives past events[after:]."""
        assert self.queue.run_until(lambda: kind in self.kinds()[after:], timeout), (kind, self.events)
        return next(e for e in self.events[after:] if e.kind == kind)

    def advance(self, player, now):
        """frame_at(now), then frame_at at the next frame's due time once FRAME_READY says it
        is decoded: returns that next frame."""
        frame = player.frame_at(now)
        index = (frame.index + 1) % FRAMES

        def ready():  # (sent once per frame: its due_ms is older when the player was paused since)
            return any(e.kind == pixload.Player.FRAME_READY and e.index == index for e in self.events)
        assert self.queue.run_until(ready, 10), (frame.index, frame.next_due_ms, self.events[-3:])
        return player.frame_at(frame.next_due_ms)

    def play_until_decoded_past(self, player, frame, decoded):
        """Plays on from frame (each next one at its due time) until the player has decoded
        more than `decoded` frames; the frames decoded ahead before fill the ring first."""
        for _ in range(FRAMES):
            if player.stats().frames_decoded > decoded:
                return frame
            frame = self.advance(player, frame.due_ms)
        raise AssertionError(f"no frame decoded past {decoded}: {player.stats()}")

    def quiet(self, seconds):
        """Dispatches whatever comes for that long (checks that nothing more happens)."""
        self.queue.run_until(lambda: False, seconds)


def test_player_gives_frames_in_order_on_the_hosts_clock(server, long_gif):
    with pixload.Loader() as loader:
        host = Host(loader)
        player = host.play(server.url(long_gif, case="host-order"))
        assert player.frame_at(5) is None  # nothing before LOADED
        loaded = host.until(pixload.Player.LOADED)
        assert loaded.error is None and loaded.image.size == (64, 48)
        assert tuple(loaded.image.tobytes()[:3]) == colour(0)
        assert (player.frame_count, player.loop_count) == (FRAMES, 2)
        now = 1000  # the host's clock, in ms: driven here, not read
        frame = player.frame_at(now)
        assert (frame.index, frame.due_ms, frame.next_due_ms, frame.skipped) == (0, now, now + DURATION, 0)
        shown = [frame.index]
        while not frame.ended:
            count = len(host.events)
            # Asked again before the next frame is due: the same frame.
            assert player.frame_at(frame.next_due_ms - 1).due_ms == frame.due_ms
            ready = host.until(pixload.Player.FRAME_READY, count)
            assert ready.index == (frame.index + 1) % FRAMES and ready.due_ms == frame.next_due_ms
            frame = player.frame_at(ready.due_ms)
            assert (frame.index, frame.due_ms, frame.skipped) == (ready.index, ready.due_ms, 0)
            assert tuple(frame.image.tobytes()[:3]) == colour(frame.index)
            shown.append(frame.index)
        assert shown == list(range(FRAMES)) * 2 and frame.next_due_ms == -1
        host.until(pixload.Player.ENDED)
        stats = player.stats()
        assert (stats.frames_shown, stats.frames_skipped, stats.loops_played) == (2 * FRAMES, 0, 2)
        assert 0 < stats.peak_ring_bytes <= 3 * 64 * 48 * 4
        player.close()
        assert player.closed and player.frame_at(now) is None and player.stats().frames_shown == 2 * FRAMES
        host.queue.close()


def test_player_skips_frames_a_late_host_missed(server, long_gif):
    with pixload.Loader() as loader:
        host = Host(loader)
        with host.play(server.url(long_gif, case="host-late")) as player:
            host.until(pixload.Player.LOADED)
            player.frame_at(0)
            host.until(pixload.Player.FRAME_READY)
            late = 10 * DURATION + 5  # frames 1..10 were due meanwhile
            first = player.frame_at(late)
            # The newest decoded (the ring decodes ahead): late, the ones before it skipped.
            assert first.index in (1, 2) and first.skipped == first.index - 1
            # The frames already in the ring come next; then the decoder, knowing frames are
            # late, goes on past them rather than queue them.
            frame = first
            for _ in range(3):
                previous = frame
                ready = host.until(pixload.Player.FRAME_READY, len(host.events))
                frame = player.frame_at(max(late, ready.due_ms))
                if frame.skipped:
                    break
            assert frame.index > previous.index + 1 and frame.skipped == frame.index - previous.index - 1, frame
            assert tuple(frame.image.tobytes()[:3]) == colour(frame.index)
            assert player.stats().frames_skipped >= frame.skipped
        host.queue.close()


def test_paused_player_decodes_nothing_until_resumed(server, long_gif):
    with pixload.Loader() as loader:
        host = Host(loader)
        player = host.play(server.url(long_gif, case="host-pause"))
        host.until(pixload.Player.LOADED)
        player.frame_at(0)
        host.until(pixload.Player.FRAME_READY)
        player.frame_at(DURATION)
        host.until(pixload.Player.FRAME_READY, len(host.events))
        player.pause()
        host.quiet(0.1)  # a decode already running when it paused may end; no other starts
        decoded = player.stats().frames_decoded
        assert player.frame_at(100 * DURATION).index == 1  # the playhead stays
        host.quiet(0.3)
        assert player.stats().frames_decoded == decoded
        player.resume(100 * DURATION)  # from where it stopped: frame 2 is due DURATION later
        frame = player.frame_at(101 * DURATION)
        assert frame.index == 2
        host.play_until_decoded_past(player, frame, decoded)
        player.close()
        host.queue.close()


def test_a_table_pauses_the_player_of_a_row_out_of_view(server, long_gif):
    with pixload.Loader() as loader:
        host = Host(loader)
        table = pixload.Table(loader, host.queue, 30, lambda row: None, lambda row, result: None)
        table.set_visible(0, 10)
        player = host.play(server.url(long_gif, case="host-table"))
        table.bind_animation(5, player)
        host.until(pixload.Player.LOADED)
        player.frame_at(0)
        host.until(pixload.Player.FRAME_READY)
        assert player.frame_at(DURATION).index == 1
        host.until(pixload.Player.FRAME_READY, len(host.events))
        table.set_visible(20, 10)  # row 5 leaves the screen
        host.quiet(0.1)  # a decode already running when it paused may end; no other starts
        decoded, tied = player.stats().frames_decoded, table.stats().animation_frames_decoded
        assert tied > 0
        assert player.frame_at(50 * DURATION).index == 1
        host.quiet(0.3)
        assert player.stats().frames_decoded == decoded
        assert table.stats().animation_frames_decoded == tied
        table.set_visible(0, 10)  # back: it plays on from frame 1
        frame = host.advance(player, 60 * DURATION)
        assert frame.index == 2
        frame = host.advance(player, frame.due_ms)
        assert (frame.index, frame.skipped) == (3, 0)
        frame = host.play_until_decoded_past(player, frame, decoded)
        assert table.stats().animation_frames_decoded > tied
        # Untied (row -1), the table no longer pauses it, nor counts its frames.
        table.bind_animation(-1, player)
        table.set_visible(20, 10)
        host.quiet(0.1)
        decoded, tied = player.stats().frames_decoded, table.stats().animation_frames_decoded
        host.play_until_decoded_past(player, frame, decoded)
        assert table.stats().animation_frames_decoded == tied
        player.close()
        table.close()
        host.queue.close()


def test_close_inside_the_players_own_event_is_safe(server, long_gif):
    with pixload.Loader() as loader:
        host = Host(loader)
        seen = []

        def close_at_loaded(event):
            seen.append(event.kind)
            event.player.close()

        first = loader.play(server.url(long_gif, case="host-close1"), queue=host.queue, on_event=close_at_loaded)
        host.queue.run_until(lambda: seen, 10)
        assert seen == [pixload.Player.LOADED] and first.closed and first.frame_at(0) is None

        def close_at_ready(event):
            seen.append(event.kind)
            if event.kind == pixload.Player.LOADED:
                event.player.frame_at(0)
            else:
                event.player.close()
                event.player.close()

        second = loader.play(server.url(long_gif, case="host-close2"), queue=host.queue, on_event=close_at_ready)
        host.queue.run_until(lambda: len(seen) == 3, 10)
        host.quiet(0.2)
        assert seen[1:] == [pixload.Player.LOADED, pixload.Player.FRAME_READY] and second.closed
        host.queue.close()


def test_player_load_error_and_loader_close(server, long_gif):
    loader = pixload.Loader()
    host = Host(loader)
    failing = host.play(server.url("no-such-animation.gif", case="host"))
    loaded = host.until(pixload.Player.LOADED)
    assert isinstance(loaded.error, pixload.HTTPError) and loaded.image is None
    assert failing.frame_at(0) is None and failing.error is loaded.error
    playing = host.play(server.url(long_gif, case="host-loader-close"))
    host.until(pixload.Player.LOADED, 1)
    loader.close()  # closes the players still open first
    assert playing.closed and failing.closed
    host.queue.close()
