"""Processors from Python: every built-in class, the chain in the cache key, exact
coverage and an exact Gaussian as independent references (numpy), Custom processors
with numpy views (in place, resized, failing), merged work counted by calls."""
import threading

import pytest

import pixload

from conftest import drain


def _supersampled_disc(side, samples=16):
    """Coverage of each pixel of a side x side square by its inscribed disc, by
    samples x samples points per pixel (numpy)."""
    np = pytest.importorskip("numpy")
    offsets = (np.arange(samples) + 0.5) / samples
    px = (np.arange(side)[:, None] + offsets[None, :]).reshape(-1)
    r = side / 2
    inside = ((px[:, None] - r) ** 2 + (px[None, :] - r) ** 2) <= r * r
    return inside.reshape(side, samples, side, samples).mean(axis=(1, 3))


def test_circle_is_exact_coverage_and_the_chain_is_in_the_key(server, loader):
    np = pytest.importorskip("numpy")
    url = server.url("gradient.jpg", case="py-circle")
    image = loader.fetch_sync(url, size=(96, 64), mode="fill", process=[pixload.Circle()])
    assert image.size == (64, 64)
    alpha = image.to_numpy()[:, :, 3] / 255.0
    reference = _supersampled_disc(64, samples=64)
    assert np.abs(alpha - reference).max() <= 1 / 32
    # Inside pixels keep their values: the plain image's centre square.
    plain = loader.fetch_sync(url, size=(96, 64), mode="fill").to_numpy()
    inner = reference == 1
    assert (image.to_numpy()[:, :, :3][inner] == plain[:, 16:80, :3][inner]).all()
    assert loader.lookup(url, size=(96, 64), mode="fill", process=[pixload.Circle()]) is not None
    assert loader.lookup(url, size=(96, 64), mode="fill", process=[pixload.Circle(border=(1, "#000000ff"))]) is None


def test_issue_example_and_every_builtin(server, loader):
    url = server.url("gradient.jpg", case="py-builtins")
    image = loader.fetch_sync(url, size=(96, 96), process=[pixload.Circle(border=(2, "#ffffffff")), pixload.Blur(4)])
    assert image.size == (72, 72)  # the 640x480 gradient fits in 96x72; its centred square
    chains = [
        ([pixload.RoundedCorners(12)], (96, 72)),
        ([pixload.RoundedCorners((4, 8, 12, 16), border=(2, "#ff0000"))], (96, 72)),
        ([pixload.Crop(10, 5, 30, 20)], (30, 20)),
        ([pixload.Rotate(90)], (72, 96)),
        ([pixload.Flip("v"), pixload.Grayscale()], (96, 72)),
        ([pixload.Tint("#00ff0080")], (96, 72)),
    ]
    for chain, size in chains:
        assert loader.fetch_sync(url, size=(96, 96), process=chain).size == size, chain
    gray = loader.fetch_sync(url, size=(96, 96), process=[pixload.Grayscale()]).to_numpy()
    assert (gray[:, :, 0] == gray[:, :, 1]).all() and (gray[:, :, 1] == gray[:, :, 2]).all()


def test_bad_chains_are_refused_before_any_work(server, loader):
    url = server.url("gradient.jpg", case="py-bad")
    for chain in ([pixload.Blur(1000)], [pixload.Rotate(45)], [pixload.RoundedCorners(-1)],
                  [pixload.Grayscale()] * 17, [pixload.Crop(-1, 0, 4, 4)]):
        with pytest.raises(pixload.InvalidArgumentError):
            loader.fetch_sync(url, process=chain)
    assert server.requests_for("/gradient.jpg?case=py-bad") == []
    with pytest.raises(pixload.InvalidArgumentError) as error:
        loader.fetch_sync(url, size=(50, 50), process=[pixload.Crop(40, 40, 20, 20)])
    assert "crop" in str(error.value)


def _gaussian(pixels, sigma):
    """The exact Gaussian: a direct separable convolution in float64, edges extended."""
    np = pytest.importorskip("numpy")
    radius = int(np.ceil(4 * sigma))
    k = np.exp(-np.arange(-radius, radius + 1) ** 2 / (2 * sigma * sigma))
    k /= k.sum()
    data = pixels.astype(np.float64)
    padded = np.pad(data, ((0, 0), (radius, radius), (0, 0)), mode="edge")
    rows = sum(k[i] * padded[:, i:i + data.shape[1]] for i in range(2 * radius + 1))
    padded = np.pad(rows, ((radius, radius), (0, 0), (0, 0)), mode="edge")
    return sum(k[i] * padded[i:i + data.shape[0]] for i in range(2 * radius + 1))


def test_blur_matches_an_exact_gaussian(server, loader):
    np = pytest.importorskip("numpy")
    PIL = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(7)
    blocks = rng.integers(0, 256, size=(20, 25, 3), dtype=np.uint8)
    photo = np.kron(blocks, np.ones((8, 8, 1), dtype=np.uint8))  # 160x200, sharp edges
    PIL.fromarray(photo).save(server.www / "py-blocks.png")
    url = server.url("py-blocks.png", case="py-blur")
    for sigma in (1.0, 2.0, 4.0, 8.0):
        got = loader.fetch_sync(url, process=[pixload.Blur(sigma)]).to_numpy()[:, :, :3].astype(np.float64)
        want = _gaussian(photo, sigma)
        m = int(np.ceil(3 * sigma))
        diff = np.abs(got - want)[m:-m, m:-m]
        print(f"blur sigma {sigma}: mean abs diff {diff.mean():.3f}, max {diff.max():.2f} (vs numpy direct Gaussian)")
        assert diff.mean() <= 1.5 and diff.max() <= 6, sigma
    same = loader.fetch_sync(url, process=[pixload.Blur(0)]).to_numpy()[:, :, :3]
    assert (same == photo).all()


def test_custom_processors(server, loader, queue):
    np = pytest.importorskip("numpy")
    calls = []
    lock = threading.Lock()

    def invert(pixels):
        with lock:
            calls.append(pixels.shape)
        pixels[:, :, :3] = pixels[:, :, 3:4] - pixels[:, :, :3]

    inv = pixload.Custom("invert", 1, invert)
    url = server.url("gradient.jpg", case="py-custom")
    # Merged: [invert] and [invert, gray] requested together run invert once. Served slowly
    # (nginx's /slow/, 20 kB/s: 17 kB) so that "together" holds on a loaded machine too,
    # where the first request could otherwise be decoded and processed before the next call.
    results = []
    slow = server.url("slow/gradient.jpg", case="py-custom")
    for i, chain in enumerate(([inv], [inv, pixload.Grayscale()], [inv, pixload.Blur(2)])):
        loader.load(slow, lambda r, i=i: results.append((i, r)), queue=queue, size=(64, 48), process=chain)
    drain(queue, lambda: len(results) == 3)
    assert all(r.ok for _, r in results), [r.message for _, r in results]
    assert calls == [(48, 64, 4)]
    plain = loader.fetch_sync(url, size=(64, 48)).to_numpy()
    inverted = next(r.image for i, r in results if i == 0).to_numpy()
    assert (inverted[:, :, :3].astype(int) + plain[:, :, :3] == 255).mean() > 0.99

    # A new size; a failing one; one polling its cancel flag.
    thumb = loader.fetch_sync(url, size=(64, 48), process=[pixload.Custom("half", 1, lambda p: p[::2, ::2].copy())])
    assert thumb.size == (32, 24)

    def fails(pixels):
        raise RuntimeError("no faces")

    with pytest.raises(pixload.InvalidArgumentError) as error:
        loader.fetch_sync(url, size=(64, 48), process=[pixload.Custom("fails", 1, fails)])
    assert "no faces" in str(error.value)
    seen = []
    # A new version is a new cache entry: the processor runs again.
    loader.fetch_sync(url, size=(64, 48), process=[pixload.Custom("invert", 2, invert)])
    assert len(calls) == 2
    waiting = threading.Event()

    def slow(pixels, cancelled):
        waiting.set()
        while not cancelled():
            pass
        seen.append(True)

    result = []
    request = loader.load(url, result.append, queue=queue, size=(64, 48), process=[pixload.Custom("slow", 1, slow)])
    assert waiting.wait(10)
    assert request.cancel()
    drain(queue, lambda: result)
    assert result[0].status == pixload.Status.CANCELLED
    for _ in range(1000):
        if seen:
            break
        threading.Event().wait(0.01)
    assert seen == [True]


def test_a_refused_custom_processor_keeps_no_trampoline(loader):
    from pixload import _processors

    before = len(_processors._live)
    # "" is refused by pxl_loader_add_processor, which never calls destroy then
    # (pixload.h, "Extensions"): the binding drops the trampoline itself.
    with pytest.raises(pixload.InvalidArgumentError):
        loader.fetch_sync("http://127.0.0.1:9/x.png", process=[pixload.Custom("", 1, lambda pixels: None)])
    assert len(_processors._live) == before


def test_cli_process_and_the_disk_cache_across_processes(server, cli, tmp_path):
    import subprocess

    url = server.url("gradient.jpg", case="py-cli")
    args = [cli, "fetch", "--cache-dir", str(tmp_path / "cache"), "--size", "96x96", "--mode", "fill",
            "--process", "round:1/2/3/4:2:#ff0000ff,blur:2", url]
    first = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    assert " 96x96 " in first.stdout and "network" in first.stdout
    second = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert second.returncode == 0 and "disk" in second.stdout, second.stdout  # the processed variant
    other = subprocess.run(args[:-3] + ["--process", "round:1/2/3/4:2:#ff0000ff,blur:3", url],
                           capture_output=True, text=True, timeout=60)
    assert other.returncode == 0 and " 96x96 " in other.stdout
    for bad in ("round", "circle:2", "blur:x", "rotate:45", "crop:1:2:3", "tint:red", "gray,", "flip:h:v"):
        run = subprocess.run([cli, "fetch", "--process", bad, url], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2, (bad, run.stderr)
