"""Loading: pixels (against the C client), zero-copy views, results, errors, caches."""
import gc
import subprocess

import pytest

import pixload

from conftest import drain


# (fixture, size, mode, format): each is loaded by the bindings and by build/bin/pixload.
CASES = [
    ("gradient.jpg", (150, 150), "fill", "rgba8"),
    ("gradient.jpg", (100, 1000), "fit", "rgb8"),
    ("gradient.jpg", None, "fit", "gray8"),
    ("oriented6.jpg", (120, 120), "fit", "bgra8-premul"),
    ("alpha.png", (64, 64), "fill", "rgba8-premul"),
    ("alpha.png", None, "fit", "rgba8"),
    ("medium.jpg", (97, 61), "fill", "rgb8"),
]


@pytest.mark.parametrize("name,size,mode,fmt", CASES)
def test_pixels_equal_the_c_client(server, cli, loader, tmp_path, name, size, mode, fmt):
    url = server.url(name, case=f"cmp-{mode}-{fmt}")
    image = loader.fetch_sync(url, size=size, mode=mode, format=fmt)
    out = tmp_path / "c.raw"
    args = [cli, "fetch", "--quiet", "--no-disk-cache", "--mode", mode, "--format", fmt, "--out", str(out)]
    if size:
        args += ["--size", f"{size[0]}x{size[1]}"]
    subprocess.run(args + [url], check=True, capture_output=True, timeout=60)
    c_pixels = out.read_bytes()
    assert len(c_pixels) == image.width * image.height * image.bytes_per_pixel
    assert image.tobytes() == c_pixels
    assert image.format == pixload.Format[fmt.upper().replace("-", "_")]


def test_gradient_pixels_follow_the_fixture_formula(server, loader):
    np = pytest.importorskip("numpy")
    image = loader.fetch_sync(server.url("gradient.jpg"), format="rgb8")
    assert image.size == (640, 480) and image.original_size == (640, 480)
    a = image.to_numpy().astype(int)
    x = np.arange(640) * 255 // 639
    y = np.arange(480) * 255 // 479
    # JPEG is lossy: compare with the formula mkfixtures.c wrote, within a few levels.
    assert np.abs(a[:, :, 0] - x[None, :]).mean() < 3
    assert np.abs(a[:, :, 1] - y[:, None]).mean() < 3


def test_views_share_the_c_buffer_and_outlive_the_image(server):
    np = pytest.importorskip("numpy")
    with pixload.Loader() as loader:
        image = loader.fetch_sync(server.url("alpha.png", case="views"), format="rgba8")
        view = image.pixels
        assert view.readonly and view.format == "B" and len(view) == image.stride * image.height
        array = image.to_numpy()
        assert array.shape == (200, 300, 4) and not array.flags.writeable
        address = pixload._ffi.lib.pxl_image_pixels(image._ref.ptr)
        assert array.ctypes.data == address  # a view, not a copy
        expected = bytes(view)
        image.close()
        with pytest.raises(ValueError):
            image.pixels
        del image
        gc.collect()
        loader.trim_memory_cache(0)  # the cache's own reference goes too
        assert loader.memory_cache_count == 0
    # The loader is gone as well; the views alone keep the pixels.
    assert bytes(view) == expected
    assert array.tobytes() == expected
    assert tuple(array[0, 299]) == (255, 0, 200, 255)


def test_to_pil_unpremultiplies(server, loader):
    np = pytest.importorskip("numpy")
    pytest.importorskip("PIL")
    straight = loader.fetch_sync(server.url("alpha.png"), format="rgba8").to_pil()
    premul = loader.fetch_sync(server.url("alpha.png"), format="bgra8-premul").to_pil()
    assert straight.mode == premul.mode == "RGBA" and straight.size == (300, 200)
    a = np.asarray(straight).astype(int)
    b = np.asarray(premul).astype(int)
    opaque = a[:, :, 3] > 128  # where unpremultiplying loses little precision
    assert np.abs(a - b)[opaque].max() <= 2
    gray = loader.fetch_sync(server.url("gradient.jpg"), format="gray8")
    assert gray.to_pil().mode == "L" and gray.to_numpy().shape == (480, 640)


def test_load_callback_result(server, loader, queue):
    results = []
    request = loader.load(server.url("gradient.jpg", case="cb"), results.append, queue=queue, size=(32, 32))
    assert request.token > 0
    drain(queue, lambda: results)
    (result,) = results
    assert result.ok and result.token == request.token and result.error is None
    assert result.source == pixload.Source.NETWORK and result.http_status == 200
    assert result.image.size == (32, 24)
    assert not request.cancel()  # already delivered
    assert pixload.pending_callbacks() == 0


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # a second raise in one dispatch is reported, not raised
def test_callback_exception_is_raised_from_dispatch_after_the_others(server, loader, queue):
    seen = []

    def boom(result):
        seen.append(result)
        raise KeyError("from a callback")

    for i in range(3):
        loader.load(server.url("gradient.jpg", case=f"boom{i}"), boom, queue=queue, size=(8, 8))
    raised = 0
    while len(seen) < 3:
        assert queue.wait(30) > 0
        before = len(seen)
        try:
            queue.dispatch()
        except KeyError:
            raised += 1
        assert len(seen) > before
    # Every dispatch that ran callbacks raised once; the others in it still ran.
    assert 1 <= raised <= 3 and all(r.ok for r in seen)


def test_progress(server, loader, queue):
    progress, results = [], []
    loader.load(server.url("medium.jpg", case="progress"), results.append, queue=queue,
                progress=lambda got, total: progress.append((got, total, bool(results))),
                progress_interval_ms=1)
    drain(queue, lambda: results)
    assert results[0].ok and progress
    assert all(got <= total for got, total, _ in progress if total)
    assert not any(after for _, _, after in progress)  # never after the final callback


def test_previews(server, loader, queue):
    # The progressive fixture through nginx's /slow/ (20 KB/s): blurry images, then the result.
    previews, results = [], []
    loader.load(server.url("slow/progressive.jpg", case="preview"), results.append, queue=queue,
                size=(120, 90), preview=lambda image: previews.append((image, bool(results))),
                preview_interval_ms=0)
    drain(queue, lambda: results)
    assert results[0].ok and len(previews) >= 2
    assert all(image.size == results[0].image.size for image, _ in previews)
    assert not any(after for _, after in previews)  # never after the final callback


@pytest.mark.parametrize("path,status,cls,http", [
    ("missing.jpg", pixload.Status.HTTP, pixload.HTTPError, 404),
    ("corrupt.jpg", pixload.Status.CORRUPT_IMAGE, pixload.ImageError, 200),
    ("not-an-image.jpg", pixload.Status.NOT_AN_IMAGE, pixload.ImageError, 200),
])
def test_error_statuses(server, loader, path, status, cls, http):
    with pytest.raises(cls) as info:
        loader.fetch_sync(server.url(path))
    e = info.value
    assert isinstance(e, pixload.PixloadError)
    assert e.status == status and e.http_status == http and e.message
    assert pixload.status_string(status) in str(e)


def test_fetch_awaits_images_errors_and_progress(server, loader):
    # Loader.fetch's callback takes the image or the error straight from the pxl_result,
    # and requests with the same options share one filled pxl_request (a copy per URL).
    import asyncio

    async def main():
        progress = []
        a, b = await asyncio.gather(
            loader.fetch(server.url("gradient.jpg", case="fetch-a"), size=(40, 30), mode="fill"),
            loader.fetch(server.url("alpha.png", case="fetch-b"), size=(40, 30), mode="fill",
                         progress=lambda got, total: progress.append(got), progress_interval_ms=1))
        assert (a.size, b.size, a.original_size, b.original_size) == ((40, 30), (40, 30), (640, 480), (300, 200))
        assert a.pixels[0:3] != b.pixels[0:3] and progress
        with pytest.raises(pixload.HTTPError) as info:
            await loader.fetch(server.url("missing.jpg", case="fetch-404"), size=(40, 30), mode="fill")
        assert info.value.status == pixload.Status.HTTP and info.value.http_status == 404 and info.value.message

    asyncio.run(main())


def test_connection_refused(loader):
    import socket
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(pixload.NetworkError) as info:
        loader.fetch_sync(f"http://127.0.0.1:{port}/x.jpg")
    assert info.value.status == pixload.Status.CONNECT


def test_refused_request_raises_and_never_calls_back(loader, queue):
    before = pixload.pending_callbacks()
    called = []
    with pytest.raises(pixload.URLError) as info:
        loader.load("not a url", called.append, queue=queue)
    assert info.value.status == pixload.Status.MALFORMED_URL
    with pytest.raises(pixload.URLError) as info:
        loader.load("file:///etc/hostname", called.append, queue=queue)
    assert info.value.status == pixload.Status.SCHEME_NOT_ALLOWED
    with pytest.raises(pixload.InvalidArgumentError):
        loader.load("http://127.0.0.1/x.jpg", called.append, queue=queue, size=(-1, 5))
    assert queue.wait(0.05) == 0 and queue.dispatch() == 0 and not called
    assert pixload.pending_callbacks() == before


def test_loader_config_keywords(server, tmp_path):
    with pytest.raises(TypeError, match="no_such_option"):
        pixload.Loader(no_such_option=1)
    with pytest.raises(pixload.InvalidArgumentError):
        pixload.Loader(max_concurrent_downloads=0)
    with pytest.raises(pixload.InvalidArgumentError):
        pixload.Loader(headers=["no colon here"])
    local = tmp_path / "local.png"
    local.write_bytes((server.www / "alpha.png").read_bytes())
    with pixload.Loader(allowed_schemes={"http", "file"}, memory_cache_bytes=1 << 20, user_agent="pytest",
                        headers={"X-Test": "1"}, max_retries=0) as loader:
        assert loader.fetch_sync(local.as_uri(), size=(30, 20)).size == (30, 20)


def test_file_url_source(server, tmp_path):
    """A file:// load says Source.FILE (0.6.0; NETWORK before) and an http one NETWORK,
    so nobody reads the scheme from the URL; the memory cache's hit of the file is MEMORY."""
    local = tmp_path / "local.png"
    local.write_bytes((server.www / "alpha.png").read_bytes())
    urls = [local.as_uri(), local.as_uri(), server.url("alpha.png", case="file-source")]
    results = []
    with pixload.Loader(allowed_schemes={"http", "file"}) as loader, pixload.Queue() as queue:
        for count, url in enumerate(urls, 1):
            loader.load(url, results.append, queue=queue, size=(30, 20))
            drain(queue, lambda: len(results) == count)
    assert all(r.ok for r in results), [r.message for r in results]
    assert [r.source for r in results] == [pixload.Source.FILE, pixload.Source.MEMORY, pixload.Source.NETWORK]
    assert [r.http_status for r in results] == [0, 0, 200]
    assert pixload.Source(7) is pixload.Source.FILE


def test_lookup_and_cache_controls(server, loader):
    url = server.url("gradient.jpg", case="lookup")
    assert loader.lookup(url, size=(40, 40)) is None
    loader.fetch_sync(url, size=(40, 40))
    hit = loader.lookup(url, size=(40, 40))
    assert hit is not None and hit.size == (40, 30)
    assert loader.lookup(url, size=(41, 41)) is None  # another variant
    stats = loader.stats()
    assert stats.memory_count == loader.memory_cache_count >= 1 and loader.memory_cache_bytes > 0
    loader.cache_remove(url)
    assert loader.lookup(url, size=(40, 40)) is None
    assert hit.to_numpy().shape == (30, 40, 4)  # our reference outlives the cache's


def test_memory_hit_source_and_cache_only(server, loader):
    url = server.url("gradient.jpg", case="cacheonly")
    with pytest.raises(pixload.NotCachedError):
        loader.fetch_sync(url, size=(16, 16), cache_only=True)
    loader.fetch_sync(url, size=(16, 16))
    results = []
    with pixload.Queue() as queue:
        loader.load(url, results.append, queue=queue, size=(16, 16), cache_only=True)
        drain(queue, lambda: results)
    assert results[0].ok and results[0].source == pixload.Source.MEMORY


def test_bind_slot(server, loader, queue):
    slot = pixload.Slot()
    results = []
    first = server.url("slow/medium.jpg", case="bind1")
    second = server.url("gradient.jpg", case="bind2")
    assert loader.bind(slot, first, results.append, queue=queue) is None
    first_token = slot.token
    assert first_token
    assert loader.bind(slot, second, results.append, queue=queue, size=(20, 20)) is None
    assert slot.token not in (0, first_token)
    drain(queue, lambda: len(results) == 2)
    by_token = {r.token: r for r in results}
    assert by_token[first_token].cancelled  # the reused slot's old load never shows an image
    assert by_token[slot.token].ok
    # Now in memory: bind answers at once and makes no request.
    image = loader.bind(slot, second, results.append, queue=queue, size=(20, 20))
    assert image is not None and image.size == (20, 15) and slot.token == 0
    assert queue.wait(0.05) == 0 and len(results) == 2
    assert pixload.pending_callbacks() == 0


def test_a_fresh_loader_reads_kept_thumbnails_from_disk(server, tmp_path):
    """disk_variant_max_side (default 256): the thumbnail a first loader decoded comes back
    from disk in a second one, the same pixels, counted as a variant hit; 0 turns it off."""
    url = server.url("gradient.jpg", case="variants")
    options = dict(disk_cache_dir=str(tmp_path / "cache"), disk_cache_bytes=8 << 20)
    with pixload.Loader(**options) as first:
        decoded = first.fetch_sync(url, size=(150, 150), mode="fill").tobytes()
    # close() joined the disk threads: the thumbnail is written.
    for max_side, hits in ((256, 1), (0, 0)):
        with pixload.Loader(disk_variant_max_side=max_side, **options) as loader:
            assert loader.fetch_sync(url, size=(150, 150), mode="fill").tobytes() == decoded
            stats = loader.stats()
            assert stats.disk_hits == 1 and stats.variant_hits == hits and stats.network_fetches == 0


def test_no_color_management_keeps_the_decoded_values(server, loader):
    """A Display P3 JPEG is converted to sRGB by default; no_color_management=True keeps
    the decoded values (those of the same file without its profile), as another variant."""
    import struct
    from conftest import ROOT

    icc = (ROOT / "Tests/codecs/display-p3.icc").read_bytes()  # lcms2's Display P3 (scripts/gen-color-fixtures.py)
    jpeg = (server.www / "gradient.jpg").read_bytes()
    segment = b"ICC_PROFILE\0\x01\x01" + icc
    (server.www / "p3.jpg").write_bytes(jpeg[:2] + b"\xff\xe2" + struct.pack(">H", len(segment) + 2) + segment + jpeg[2:])
    url = server.url("p3.jpg")
    plain = loader.fetch_sync(server.url("gradient.jpg", case="cm"), size=(64, 48), format="rgb8")
    kept = loader.fetch_sync(url, size=(64, 48), format="rgb8", no_color_management=True)
    converted = loader.fetch_sync(url, size=(64, 48), format="rgb8")
    assert kept.tobytes() == plain.tobytes()
    assert converted.tobytes() != kept.tobytes()
    assert loader.lookup(url, size=(64, 48), format="rgb8", no_color_management=True).tobytes() == kept.tobytes()
    assert loader.lookup(url, size=(64, 48), format="rgb8").tobytes() == converted.tobytes()


def test_tls_and_proxy_keywords(server, tmp_path):
    """0.5.0's ca_path, proxy and tls_min_version go through; a CA file that cannot be
    read fails the loader, as pxl_loader_new says; the TLS counters are in stats()."""
    for bad in ({"tls_min_version": "1.1"}, {"tls_min_version": 11}):
        with pytest.raises((ValueError, pixload.InvalidArgumentError)):
            pixload.Loader(**bad)
    with pytest.raises(pixload.InvalidArgumentError):
        pixload.Loader(ca_file=str(tmp_path / "missing.pem"))
    with pytest.raises(pixload.InvalidArgumentError):
        pixload.Loader(ca_path=str(tmp_path / "missing-dir"))
    url = server.url("gradient.jpg", case="tls-keywords")
    # proxy="" ignores whatever proxy the environment names; tls_min_version for http is moot.
    with pixload.Loader(proxy="", ca_path=str(tmp_path), tls_min_version="1.3", max_retries=0) as loader:
        assert loader.fetch_sync(url, size=(40, 40)).size == (40, 30)
        stats = loader.stats()
        assert stats.tls_handshakes == 0 and stats.tls_resumed == 0  # plain http
    # A proxy that refuses: the load fails to connect (the proxy, not the server).
    with pixload.Loader(proxy="http://127.0.0.1:1", max_retries=0) as loader:
        with pytest.raises(pixload.PixloadError):
            loader.fetch_sync(server.url("gradient.jpg", case="tls-keywords-proxy"))
