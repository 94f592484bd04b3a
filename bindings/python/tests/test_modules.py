"""The codec modules (HEIC, JPEG XL, SVG) downstream of their decode: processors, a
table, the disk cache across two processes, thumbnails against the module's own
full-size pixels. Files are made here with heif-enc, cjxl and an SVG written below, and
served by the tests' nginx. Skipped when the library has no modules next to it or the
encoders are missing (make modules; scripts/deps.sh installs the tools)."""
import os
import shutil
import subprocess
import sys

import pytest

import pixload

from conftest import drain

np = pytest.importorskip("numpy")
PILImage = pytest.importorskip("PIL.Image")

SVG = """<svg xmlns="http://www.w3.org/2000/svg" width="240" height="180" viewBox="0 0 240 180">
  <rect width="240" height="180" fill="#2060c0"/>
  <circle cx="120" cy="90" r="70" fill="#f0c020"/>
  <path d="M40 160 L120 20 L200 160 Z" fill="#c03040" fill-opacity="0.8"/>
</svg>
"""


def photo_like(w, h, seed):
    y, x = np.mgrid[0:h, 0:w]
    rgb = np.stack([x * 255 // (w - 1), y * 255 // (h - 1), ((x + 2 * y) * 2) % 256], axis=-1).astype(np.int16)
    rgb += np.random.default_rng(seed).integers(-20, 20, size=rgb.shape, dtype=np.int16)
    return PILImage.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))


@pytest.fixture(scope="module")
def module_files(server, tmp_path_factory):
    """{format: served path} for the formats whose module the library has and whose
    encoder is here."""
    with pixload.Loader() as probe:
        formats = probe.formats()
    work = tmp_path_factory.mktemp("modules")
    source = work / "source.png"
    photo_like(320, 240, 3).save(source)
    made = {}
    if "heic" in formats and shutil.which("heif-enc"):
        subprocess.run(["heif-enc", "-q", "80", str(source), "-o", str(server.www / "m.heic")],
                       check=True, capture_output=True)
        made["heic"] = "m.heic"
    if "jxl" in formats and shutil.which("cjxl"):
        subprocess.run(["cjxl", str(source), str(server.www / "m.jxl"), "-d", "1"], check=True, capture_output=True)
        made["jxl"] = "m.jxl"
    if "svg" in formats:
        (server.www / "m.svg").write_text(SVG)
        made["svg"] = "m.svg"
    print(f"module files: {made}")
    if not made:
        pytest.skip("no codec module next to the library (make modules), or no encoders")
    return made


def pixels(image):
    return np.frombuffer(image.tobytes(), dtype=np.uint8).reshape(image.height, image.width, 4).astype(np.int16)


def test_thumbnail_matches_own_full_size(server, module_files, tmp_path):
    """A raster module's thumbnail is its full-size pixels through our resampler: the same
    as the same pixels loaded from a PNG. (An SVG is drawn at the size asked instead.)"""
    with pixload.Loader() as loader:
        for fmt, path in module_files.items():
            full = loader.fetch_sync(server.url(path, case="full"), no_color_management=True)
            png = tmp_path / f"{fmt}.png"
            full.to_pil().save(png)
            (server.www / f"{fmt}-as.png").write_bytes(png.read_bytes())
            for size, mode in [((96, 96), "fit"), ((64, 40), "fill")]:
                ours = loader.fetch_sync(server.url(path, case="thumb"), size=size, mode=mode, no_color_management=True)
                assert ours.size == loader.fetch_sync(server.url(f"{fmt}-as.png"), size=size, mode=mode).size
                if fmt == "svg":
                    continue
                same = loader.fetch_sync(server.url(f"{fmt}-as.png", case="thumb"), size=size, mode=mode)
                assert ours.tobytes() == same.tobytes(), f"{fmt} {size} {mode}"


def test_processors_on_module_formats(server, module_files):
    """circle and grayscale after a module's decode: the corners outside the disc are
    transparent, the centre opaque, every pixel gray."""
    with pixload.Loader() as loader:
        for fmt, path in module_files.items():
            image = loader.fetch_sync(server.url(path, case="proc"), size=(80, 80), mode="fill",
                                      process=[pixload.Circle(), pixload.Grayscale()])
            px = pixels(image)
            assert image.size == (80, 80)
            assert px[0, 0, 3] == 0 and px[79, 79, 3] == 0, fmt
            assert px[40, 40, 3] == 255, fmt
            assert (px[..., 0] == px[..., 1]).all() and (px[..., 1] == px[..., 2]).all(), fmt


def test_table_of_module_formats(server, module_files, queue):
    urls = [server.url(path, case="table") for path in module_files.values()]
    results = {}
    with pixload.Loader() as loader, \
            pixload.Table(loader, queue, len(urls), lambda row: urls[row],
                          lambda row, result: results.__setitem__(row, result), size=(48, 48), mode="fill") as table:
        table.set_visible(0, len(urls), +1)
        drain(queue, lambda: len(results) == len(urls))
        for row, result in results.items():
            assert result.ok, f"{urls[row]}: {result.message}"
            assert result.image.size == (48, 48)
            again = loader.fetch_sync(urls[row], size=(48, 48), mode="fill", skip_memory_cache=True)
            assert again.tobytes() == result.image.tobytes()


def test_disk_cache_across_processes(server, module_files, tmp_path):
    """One process loads and stores (original and thumbnail variant); a second, with a
    fresh loader on the same directory, is answered from disk with the same pixels."""
    cache = tmp_path / "cache"
    script = (
        "import sys, pixload\n"
        "with pixload.Loader(disk_cache_dir=sys.argv[1], disk_cache_bytes=32 << 20) as loader:\n"
        "    for url in sys.argv[2:]:\n"
        "        image = loader.fetch_sync(url, size=(72, 72))\n"
        "        sys.stdout.write(image.tobytes().hex() + '\\n')\n")
    urls = [server.url(path, case="disk") for path in module_files.values()]
    first = subprocess.run([sys.executable, "-c", script, str(cache), *urls], check=True, capture_output=True,
                           text=True, env=os.environ).stdout.split()
    assert len(first) == len(urls)
    with pixload.Loader(disk_cache_dir=str(cache), disk_cache_bytes=32 << 20) as loader, pixload.Queue() as q:
        results = []
        for url in urls:
            loader.load(url, results.append, queue=q, size=(72, 72))
        drain(q, lambda: len(results) == len(urls))
    assert all(r.ok for r in results)
    assert {r.source for r in results} == {pixload.Source.DISK}
    assert sorted(r.image.tobytes().hex() for r in results) == sorted(first)


def test_svg_drawn_larger_than_intrinsic(server, module_files, tmp_path):
    """A vector asked for more than its intrinsic 240x180 is drawn at that size (FIT on its
    aspect), not drawn small and scaled up: the same pixels as rsvg-convert at 480x360."""
    if "svg" not in module_files or not shutil.which("rsvg-convert"):
        pytest.skip("no SVG module or no rsvg-convert")
    with pixload.Loader() as loader:
        image = loader.fetch_sync(server.url("m.svg", case="large"), size=(480, 480), no_color_management=True)
        assert image.size == (480, 360)
        filled = loader.fetch_sync(server.url("m.svg", case="large"), size=(600, 300), mode="fill")
        assert filled.size == (600, 300)
    ref = tmp_path / "ref.png"
    subprocess.run(["rsvg-convert", "-w", "480", "-h", "360", "-o", str(ref), str(server.www / "m.svg")], check=True)
    theirs = np.asarray(PILImage.open(ref).convert("RGBA"), dtype=np.int16)
    assert np.abs(pixels(image) - theirs).max() <= 1


def test_isolation_option():
    """Loader(isolation=...) (pixload.h, "Isolation"): the default isolates the modules in
    workers with their layers; "none" isolates nothing; "all" isolates the built-in
    formats too (its workers' layers); a bad name is a ValueError."""
    assert pixload.Status.DECODER_FAILED == 23
    with pixload.Loader() as loader:
        layers = loader.isolation()
        if "svg" in loader.formats() or "heic" in loader.formats():
            assert "seccomp" in layers.split(), layers
    with pixload.Loader(isolation="none") as loader:
        assert loader.isolation() == "none"
    with pixload.Loader(isolation="all") as loader:
        # The built-in formats' workers: the same layers as the modules' (the same worker).
        if "seccomp" in layers.split():
            assert loader.isolation() == layers, (loader.isolation(), layers)
    with pytest.raises(ValueError):
        pixload.Loader(isolation="sometimes")


MODULE_LIBRARIES = ("libheif", "libjxl", "librsvg")

HOST_MAPS = """
import sys, pixload
isolation, urls = sys.argv[1], sys.argv[2:]
with pixload.Loader(isolation=isolation) as loader:
    for url in urls:
        image = loader.fetch_sync(url, size=(64, 64))
        assert image.width > 0, url
    with open("/proc/self/maps") as maps:
        names = {line.split()[-1] for line in maps if len(line.split()) >= 6}
    print(" ".join(sorted(n.rsplit("/", 1)[-1] for n in names
                          if any(lib in n for lib in ("libheif", "libjxl", "librsvg")))))
"""


def mapped_module_libraries(server, module_files, isolation):
    """The module libraries (libheif, libjxl, librsvg) mapped in a fresh process after a
    Loader was made and each module's image decoded with `isolation` (a subprocess: a
    module, once opened, stays open in its process)."""
    urls = [server.url(path, case=f"maps-{isolation}") for path in module_files.values()]
    run = subprocess.run([sys.executable, "-c", HOST_MAPS, isolation, *urls],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stdout.split()


def test_module_libraries_mapped_in_process_without_isolation(server, module_files):
    """The control of the check below: with isolation="none" the host decodes the modules'
    images itself, so their libraries are in its /proc/self/maps."""
    mapped = mapped_module_libraries(server, module_files, "none")
    for fmt, lib in (("heic", "libheif"), ("jxl", "libjxl"), ("svg", "librsvg")):
        if fmt in module_files:
            assert any(name.startswith(lib) for name in mapped), (fmt, mapped)


def test_module_libraries_not_mapped_in_host_when_isolated(server, module_files):
    """Issue 39: under the default isolation the host never loads an isolated module's
    library: a Loader made and a HEIC, a JPEG XL and an SVG decoded (in workers), and none
    of libheif, libjxl, librsvg is mapped in the host: the host reads each module's
    manifest from its file (pixload.h, "Codec modules") and sniffs with its rules."""
    assert mapped_module_libraries(server, module_files, "modules") == []
