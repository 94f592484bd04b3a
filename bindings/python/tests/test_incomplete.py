"""Images whose data ended early (pixload.h): Result.incomplete and Image.incomplete for a
cut JPEG, a refusal for a cut PNG, and neither for the complete files."""
import pytest

import pixload
from conftest import drain


def _cut(server, name, keep):
    data = (server.www / name).read_bytes()
    cut = "cut-py-" + name
    (server.www / cut).write_bytes(data[:keep(len(data))])
    return cut


def _result(server, loader, name, case):
    results = []
    with pixload.Queue() as queue:
        loader.load(server.url(name, case=case), results.append, queue=queue, size=(64, 48))
        drain(queue, lambda: results)
    (result,) = results
    return result


def test_cut_jpeg_is_delivered_incomplete(server, loader):
    cut = _cut(server, "gradient.jpg", lambda n: n // 2)
    result = _result(server, loader, cut, "incomplete")
    assert result.ok and result.incomplete and result.image.incomplete
    whole = _result(server, loader, "gradient.jpg", "incomplete-whole")
    assert whole.ok and not whole.incomplete and not whole.image.incomplete


def test_cut_png_is_refused(server, loader):
    cut = _cut(server, "alpha.png", lambda n: n * 2 // 3)
    result = _result(server, loader, cut, "incomplete-png")
    assert result.status == pixload.Status.CORRUPT_IMAGE and not result.incomplete
    with pytest.raises(pixload.PixloadError):
        result.unwrap()
