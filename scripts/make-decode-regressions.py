#!/usr/bin/env python3
"""Writes small hostile decode inputs into Tests/fuzz-regressions/decode (hand-made seeds
the fuzzer never found, so that FuzzRegressionTests replays something for the decoder).

    scripts/make-decode-regressions.py [FOLDER]

Needs Pillow for the one valid JPEG everything JPEG starts from; the PNGs are built
byte by byte. Each file is a few hundred bytes at most.
"""
import io
import os
import struct
import sys
import zlib

from PIL import Image

folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "Tests", "fuzz-regressions", "decode")


def write(name, data):
    assert len(data) <= 1024, (name, len(data))
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def small_jpeg():
    image = Image.new("RGB", (16, 16))
    image.putdata([(x * 16, y * 16, 128) for y in range(16) for x in range(16)])
    out = io.BytesIO()
    image.save(out, "JPEG", quality=50)
    return bytearray(out.getvalue())


def chunk(kind, body, crc=None):
    crc = zlib.crc32(kind + body) if crc is None else crc
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc & 0xFFFFFFFF)


def png(width, height, ihdr_crc=None):
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    rows = b"".join(b"\0" + b"\x80" * 3 * max(width, 1) for _ in range(min(max(height, 1), 4)))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr, ihdr_crc) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


jpeg = small_jpeg()
sos = jpeg.index(b"\xff\xda")
# Cut inside the entropy-coded data: the scan ends early, with no EOI.
write("jpeg-truncated-in-scan", bytes(jpeg[:sos + (len(jpeg) - sos) // 2]))
# SOF0 declares 65500 x 65500 (4.3 gigapixels) over 16 x 16 worth of data: must be
# refused by the pixel limit before anything that size is allocated.
sof = jpeg.index(b"\xff\xc0")
huge = bytearray(jpeg)
huge[sof + 5:sof + 9] = struct.pack(">HH", 65500, 65500)
write("jpeg-declares-65500x65500", bytes(huge))
# A valid 4 x 4 PNG whose IHDR CRC is wrong.
write("png-ihdr-bad-crc", png(4, 4, ihdr_crc=0xDEADBEEF))
# IHDR with width 0 (forbidden by the PNG spec), its CRC right.
write("png-ihdr-zero-width", png(0, 4))
