"""examples/python/contact_sheet.py end to end."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT

Image = pytest.importorskip("PIL.Image")


def test_contact_sheet(server, tmp_path):
    urls = [server.url("gradient.jpg", case="sheet", i=i) for i in range(7)] + [server.url("alpha.png")]
    (tmp_path / "urls.txt").write_text("# a comment\n" + "\n".join(urls[4:]) + "\n")
    out = tmp_path / "sheet.png"
    run = subprocess.run([sys.executable, str(ROOT / "examples/python/contact_sheet.py"), "-o", str(out),
                          "--size", "40", "--columns", "3", "--gap", "2", "--urls", str(tmp_path / "urls.txt"),
                          *urls[:4]], capture_output=True, text=True, timeout=60, env=os.environ)
    assert run.returncode == 0, run.stderr
    assert "8/8 images, 3x3 grid" in run.stdout
    sheet = Image.open(out)
    assert sheet.size == (3 * 42 + 2, 3 * 42 + 2)
    # The first cell is the gradient's centre crop: red rises left to right.
    left, right = sheet.getpixel((2 + 1, 2 + 20)), sheet.getpixel((2 + 38, 2 + 20))
    assert right[0] > left[0] + 20


def test_contact_sheet_reports_failures(server, tmp_path):
    out = tmp_path / "sheet.png"
    run = subprocess.run([sys.executable, str(ROOT / "examples/python/contact_sheet.py"), "-o", str(out),
                          server.url("gradient.jpg"), server.url("missing.jpg")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "missing.jpg" in run.stderr and "404" in run.stderr
    assert "1/2 images" in run.stdout and out.exists()
