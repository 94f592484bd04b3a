"""Loader.add_codec: a QOI codec written in Python (the spec's decoder), its pixels
checked against the PyPI reference `qoi` and against the built-in PNG decoder's output of
the same pixels, at full size and as a thumbnail; errors, removal, the format list."""
import struct

import pytest

import pixload
from conftest import drain

W, H = 64, 48


def source_pixels():
    return bytes(v for y in range(H) for x in range(W)
                 for v in (x * 255 // (W - 1), y * 255 // (H - 1), (x * 5 + y * 3) % 256, 255 if x > 4 else x * 60))


def qoi_encode(rgba, w, h):
    """QOI with QOI_OP_RGBA and QOI_OP_RUN only: valid per the spec, simple."""
    out = bytearray(b"qoif" + struct.pack(">II", w, h) + bytes([4, 0]))
    prev, run = b"\0\0\0\xff", 0
    for i in range(w * h):
        px = rgba[4 * i:4 * i + 4]
        if px == prev:
            run += 1
            if run == 62 or i == w * h - 1:
                out.append(0xC0 | (run - 1))
                run = 0
            continue
        if run:
            out.append(0xC0 | (run - 1))
            run = 0
        out += b"\xff" + px
        prev = px
    return bytes(out + b"\0" * 7 + b"\1")


def qoi_decode(data, w, h):
    """The spec's decoder (every op)."""
    index = [b"\0\0\0\0"] * 64
    r, g, b, a = 0, 0, 0, 255
    out = bytearray()
    p, end, run = 14, len(data) - 8, 0
    for _ in range(w * h):
        if run:
            run -= 1
        else:
            if p >= end:
                raise pixload.CodecError(pixload.Status.CORRUPT_IMAGE, "truncated")
            b1 = data[p]
            p += 1
            if b1 == 0xFE:
                r, g, b = data[p:p + 3]
                p += 3
            elif b1 == 0xFF:
                r, g, b, a = data[p:p + 4]
                p += 4
            elif b1 >> 6 == 0:
                r, g, b, a = index[b1]
            elif b1 >> 6 == 1:
                r, g, b = (r + ((b1 >> 4) & 3) - 2) & 255, (g + ((b1 >> 2) & 3) - 2) & 255, (b + (b1 & 3) - 2) & 255
            elif b1 >> 6 == 2:
                b2 = data[p]
                p += 1
                vg = (b1 & 0x3F) - 32
                r, g, b = (r + vg - 8 + (b2 >> 4)) & 255, (g + vg) & 255, (b + vg - 8 + (b2 & 15)) & 255
            else:
                run = b1 & 0x3F
            index[(r * 3 + g * 5 + b * 7 + a * 11) % 64] = bytes((r, g, b, a))
        out += bytes((r, g, b, a))
    return bytes(out)


class QOI(pixload.Codec):
    id = "qoi"
    version = "1.0"

    def __init__(self):
        self.destroyed = 0
        self.decodes = 0

    def sniff(self, head):
        return head[:4] == b"qoif"

    def read_header(self, data):
        if len(data) < 22:
            raise ValueError("too short")
        w, h = struct.unpack(">II", data[4:12])
        return pixload.CodecHeader(width=w, height=h, has_alpha=data[12] == 4)

    def decode(self, data, width, height):
        self.decodes += 1
        return qoi_decode(data, width, height)

    def destroy(self):
        self.destroyed += 1


@pytest.fixture
def files(tmp_path):
    rgba = source_pixels()
    paths = {"qoi": tmp_path / "a.qoi", "truncated": tmp_path / "t.qoi", "png": tmp_path / "a.png"}
    paths["qoi"].write_bytes(qoi_encode(rgba, W, H))
    paths["truncated"].write_bytes(qoi_encode(rgba, W, H)[:200])
    try:
        from PIL import Image
        Image.frombytes("RGBA", (W, H), rgba).save(paths["png"])
    except ImportError:
        paths["png"] = None
    return rgba, paths


def url(path):
    return "file://" + str(path)


def test_qoi_codec(files):
    rgba, paths = files
    with pixload.Loader(allowed_schemes={"file"}, codec_modules="") as loader:
        assert loader.formats() == ["jpeg", "png", "webp", "gif", "avif"]
        with pytest.raises(pixload.ImageError):
            loader.fetch_sync(url(paths["qoi"]))
        codec = QOI()
        loader.add_codec(codec)
        assert loader.formats()[-1] == "qoi"
        with pytest.raises(pixload.InvalidArgumentError):
            loader.add_codec(QOI())  # the id is taken

        image = loader.fetch_sync(url(paths["qoi"]))
        assert (image.width, image.height) == (W, H)
        assert image.tobytes() == rgba

        if paths["png"] is not None:
            for size, mode in [((20, 20), "fit"), ((30, 30), "fill"), ((0, 0), "fit")]:
                a = loader.fetch_sync(url(paths["qoi"]), size=size, mode=mode, format="rgba8-premul")
                b = loader.fetch_sync(url(paths["png"]), size=size, mode=mode, format="rgba8-premul")
                assert (a.width, a.height) == (b.width, b.height)
                assert a.tobytes() == b.tobytes(), f"{size} {mode}"

        with pytest.raises(pixload.ImageError, match="qoi: truncated"):
            loader.fetch_sync(url(paths["truncated"]))

        loader.remove_codec("qoi")
        assert codec.destroyed == 1
        with pytest.raises(pixload.NotFoundError):
            loader.remove_codec("qoi")
        with pytest.raises(pixload.ImageError):
            loader.fetch_sync(url(paths["qoi"]), size=(33, 33))
        last = QOI()
        loader.add_codec(last)
    assert last.destroyed == 1  # freed with the loader


def test_qoi_reference(files, tmp_path):
    """The PyPI reference: it reads our file as our pixels, and our codec reads its file."""
    qoi = pytest.importorskip("qoi")
    np = pytest.importorskip("numpy")
    rgba, paths = files
    array = np.frombuffer(rgba, dtype=np.uint8).reshape(H, W, 4)
    assert qoi.decode(paths["qoi"].read_bytes()).tobytes() == rgba
    theirs = tmp_path / "theirs.qoi"
    theirs.write_bytes(qoi.encode(np.ascontiguousarray(array)))
    with pixload.Loader(allowed_schemes={"file"}, codec_modules="") as loader:
        loader.add_codec(QOI())
        image = loader.fetch_sync(url(theirs))
        assert image.tobytes() == rgba


def test_jxl_previews(server, queue, tmp_path):
    """A progressive JPEG XL through nginx's /slow/ (20 KB/s) gives previews through the
    JPEG XL module (PXL_CODEC_PROGRESSIVE: libjxl flushes the passes it has), each the
    final's size, blurry first, never after the final callback."""
    import shutil
    import subprocess
    np = pytest.importorskip("numpy")
    Image = pytest.importorskip("PIL.Image")
    # Previews of a prefix do not cross the decode worker's protocol yet (pixload.h,
    # "Isolation"): the module decodes in-process here.
    with pixload.Loader(isolation="none") as loader:
        if "jxl" not in loader.formats():
            pytest.skip("no JPEG XL module next to the library (make modules)")
        if shutil.which("cjxl") is None:
            pytest.skip("cjxl (libjxl-tools) is not installed")
        # A photo-like source: smooth shapes and fine noise, so the passes differ.
        y, x = np.mgrid[0:384, 0:512]
        rng = np.random.default_rng(7)
        rgb = np.stack([(x * 255 // 511), (y * 255 // 383), ((x + y) * 3) % 256], axis=-1).astype(np.int16)
        rgb += rng.integers(-40, 40, size=rgb.shape, dtype=np.int16)
        png = tmp_path / "source.png"
        Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8)).save(png)
        subprocess.run(["cjxl", str(png), str(server.www / "progressive.jxl"), "-p", "-d", "1"],
                       check=True, capture_output=True)
        previews, results = [], []
        loader.load(server.url("slow/progressive.jxl", case="jxl-preview"), results.append, queue=queue,
                    size=(256, 192), preview=lambda image: previews.append((image, bool(results))),
                    preview_interval_ms=0)
        drain(queue, lambda: results)
    final = results[0]
    assert final.ok, final.message
    print(f"{len(previews)} previews of a {(server.www / 'progressive.jxl').stat().st_size}-byte JPEG XL")
    assert previews, "no preview of a progressive JPEG XL"
    assert all(image.size == final.image.size for image, _ in previews)
    assert not any(after for _, after in previews)  # never after the final callback
    want = np.frombuffer(final.image.tobytes(), dtype=np.uint8).astype(np.int16)
    first = np.frombuffer(previews[0][0].tobytes(), dtype=np.uint8).astype(np.int16)
    # A preview shows the image (not an empty canvas): close to the final on average.
    assert np.abs(first - want).mean() < 40
    last = np.frombuffer(previews[-1][0].tobytes(), dtype=np.uint8).astype(np.int16)
    assert np.abs(last - want).mean() <= np.abs(first - want).mean()  # sharper as more arrives
