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
