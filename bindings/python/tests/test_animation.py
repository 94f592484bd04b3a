"""Animated images: Image.frames with animate=True, one frame without."""
import pytest

import pixload

COLOURS = [(255, 0, 0), (0, 200, 0), (0, 0, 255)]
DURATIONS = [100, 250, 40]


@pytest.fixture(scope="module")
def animated_gif(server):
    PIL = pytest.importorskip("PIL.Image")
    frames = [PIL.new("RGB", (12, 7), c) for c in COLOURS]
    path = server.www / "py-anim.gif"
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=DURATIONS, loop=0, disposal=1,
                   optimize=False)
    return "py-anim.gif"


def test_frames_with_animate(server, loader, animated_gif):
    image = loader.fetch_sync(server.url(animated_gif, case="animate"), animate=True)
    assert (image.frame_count, image.source_frame_count, image.loop_count) == (3, 3, 0)
    frames = image.frames
    assert [f.duration_ms for f in frames] == DURATIONS
    for frame, colour in zip(frames, COLOURS):
        data = frame.tobytes()
        assert len(data) == 12 * 7 * 4
        assert set(data[i:i + 4] for i in range(0, len(data), 4)) == {bytes(colour) + b"\xff"}
    assert frames[0].pixels.tobytes() == image.pixels.tobytes()
    del image
    assert frames[2].tobytes()[:4] == bytes(COLOURS[2]) + b"\xff"  # a frame keeps the pixels alive


def test_first_frame_without_animate(server, loader, animated_gif):
    image = loader.fetch_sync(server.url(animated_gif, case="still"))
    assert (image.frame_count, image.source_frame_count) == (1, 3)
    assert len(image.frames) == 1
    assert image.frames[0].duration_ms == 0
    assert image.tobytes()[:4] == bytes(COLOURS[0]) + b"\xff"


def test_thumbnail_frames(server, loader, animated_gif):
    image = loader.fetch_sync(server.url(animated_gif, case="thumb"), size=(6, 6), mode="fill",
                              format="rgb8", animate=True)
    assert image.size == (6, 6) and image.frame_count == 3
    assert image.frames[1].tobytes() == bytes(COLOURS[1]) * 36
