#!/usr/bin/env python3
"""Colour-managed fixtures for Tests/codecs/color_test.c, made at test time.

usage: gen-color-fixtures.py OUTDIR

ICC profiles are built with lcms2 itself (ctypes on the system liblcms2: the
cmsCreateRGBProfile / cmsCreateGrayProfile a C program would call): Display P3 (SMPTE EG
432-1 primaries, sRGB curve), Adobe RGB (1998) (its primaries, gamma 563/256), a large
Adobe-like profile with 12,000-entry tabulated curves (one per channel) (over 64 KB: a JPEG carries it in
several APP2 chunks), a gray gamma-1.8 profile, and lcms2's sRGB (as Pillow's ImageCms
makes it). Images are written by Pillow (JPEG APP2, PNG iCCP) or by hand (PNG cHRM/gAMA,
sRGB chunks). The expected pixels are the reference conversion: Pillow's ImageCms
(its own bundled lcms2), relative colorimetric, from the embedded profile to sRGB, applied
to the pixels Pillow decodes from the very file (the shim decodes JPEG and PNG to the same
pixels: the conformance runner checks that).

OUTDIR/manifest.tsv: file, expect (convert | same), layout source (rgba | gray), expected
RGBA file (straight RGBA8 of the converted image; "-" for "same": the decode without colour
management is the reference), then a note. A PNG that converts also has NAME.decoded.rgba,
the decoded values (what colour management off keeps). With $CORPUS/pngsuite present
(CORPUS: ../shared/corpus unless set), PngSuite's gAMA/cHRM files are rows too, by their
absolute path (read where they are, not copied).
"""
import ctypes
import io
import os
import struct
import sys
import zlib

from PIL import Image, ImageCms

lcms = ctypes.CDLL("liblcms2.so.2")


class XyY(ctypes.Structure):
    _fields_ = [("x", ctypes.c_double), ("y", ctypes.c_double), ("Y", ctypes.c_double)]


class XyYTriple(ctypes.Structure):
    _fields_ = [("red", XyY), ("green", XyY), ("blue", XyY)]


lcms.cmsBuildParametricToneCurve.restype = ctypes.c_void_p
lcms.cmsBuildParametricToneCurve.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_double)]
lcms.cmsBuildTabulatedToneCurve16.restype = ctypes.c_void_p
lcms.cmsBuildTabulatedToneCurve16.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint16)]
lcms.cmsCreateRGBProfile.restype = ctypes.c_void_p
lcms.cmsCreateRGBProfile.argtypes = [ctypes.POINTER(XyY), ctypes.POINTER(XyYTriple), ctypes.c_void_p * 3]
lcms.cmsCreateGrayProfile.restype = ctypes.c_void_p
lcms.cmsCreateGrayProfile.argtypes = [ctypes.POINTER(XyY), ctypes.c_void_p]
lcms.cmsSaveProfileToMem.restype = ctypes.c_int
lcms.cmsSaveProfileToMem.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32)]
lcms.cmsCloseProfile.argtypes = [ctypes.c_void_p]
lcms.cmsFreeToneCurve.argtypes = [ctypes.c_void_p]

D65 = (0.3127, 0.3290)
D50 = (0.3457, 0.3585)


def parametric(kind, *params):
    arr = (ctypes.c_double * len(params))(*params)
    return lcms.cmsBuildParametricToneCurve(None, kind, arr)


def save(profile):
    size = ctypes.c_uint32(0)
    assert lcms.cmsSaveProfileToMem(profile, None, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    assert lcms.cmsSaveProfileToMem(profile, buf, ctypes.byref(size))
    lcms.cmsCloseProfile(profile)
    return buf.raw[: size.value]


def rgb_profile(white, primaries, curve):
    w = XyY(white[0], white[1], 1.0)
    t = XyYTriple(*(XyY(x, y, 1.0) for x, y in primaries))
    three = curve if isinstance(curve, list) else [curve] * 3
    curves = (ctypes.c_void_p * 3)(*three)
    data = save(lcms.cmsCreateRGBProfile(ctypes.byref(w), ctypes.byref(t), curves))
    for c in set(three):
        lcms.cmsFreeToneCurve(c)
    return data


def srgb_curve():
    return parametric(4, 2.4, 1 / 1.055, 0.055 / 1.055, 1 / 12.92, 0.04045)


P3_PRIMARIES = [(0.680, 0.320), (0.265, 0.690), (0.150, 0.060)]
ADOBE_PRIMARIES = [(0.64, 0.33), (0.21, 0.71), (0.15, 0.06)]
SRGB_PRIMARIES = [(0.64, 0.33), (0.30, 0.60), (0.15, 0.06)]


def profiles():
    p3 = rgb_profile(D65, P3_PRIMARIES, srgb_curve())
    adobe = rgb_profile(D65, ADOBE_PRIMARIES, parametric(1, 563 / 256))
    n = 12000
    tables = [lcms.cmsBuildTabulatedToneCurve16(None, n, (ctypes.c_uint16 * n)(
        *(round(65535 * (i / (n - 1)) ** g) for i in range(n)))) for g in (2.2, 2.19, 2.21)]
    big = rgb_profile(D65, ADOBE_PRIMARIES, tables)
    wd50 = XyY(D50[0], D50[1], 1.0)
    g18 = parametric(1, 1.8)
    gray = save(lcms.cmsCreateGrayProfile(ctypes.byref(wd50), g18))
    lcms.cmsFreeToneCurve(g18)
    srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    return {"p3": p3, "adobe": adobe, "big": big, "gray18": gray, "srgb": srgb}


def test_image(w, h, alpha):
    """Saturated ramps (where P3/Adobe differ most from sRGB), greys and a gradient alpha."""
    img = Image.new("RGBA" if alpha else "RGB", (w, h))
    px = img.load()
    for y in range(h):
        for x in range(w):
            r = (x * 255) // (w - 1)
            g = (y * 255) // (h - 1)
            b = ((x + y) * 255) // (w + h - 2)
            if (x // 8 + y // 8) % 3 == 0:  # saturated patches
                r, g, b = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0)][(x // 8) % 4]
            if (x // 8 + y // 8) % 5 == 0:
                r = g = b = (x * 7 + y) % 256
            px[x, y] = (r, g, b, (x * 4 + y) % 256) if alpha else (r, g, b)
    return img


def convert(img, icc):
    """Pillow's lcms2, relative colorimetric, to sRGB; straight RGBA out."""
    src = ImageCms.ImageCmsProfile(io.BytesIO(icc))
    dst = ImageCms.createProfile("sRGB")
    mode = img.mode
    if mode == "L":
        out = ImageCms.profileToProfile(img, src, dst, renderingIntent=ImageCms.Intent.RELATIVE_COLORIMETRIC,
                                        outputMode="RGB")
    else:
        out = ImageCms.profileToProfile(img, src, dst, renderingIntent=ImageCms.Intent.RELATIVE_COLORIMETRIC)
    return out.convert("RGBA") if mode != "RGBA" else out


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_with_chunks(img, chunks):
    """A PNG from Pillow with chunks inserted just after IHDR."""
    buf = io.BytesIO()
    img.save(buf, "PNG")
    data = buf.getvalue()
    ihdr_end = 8 + 8 + 13 + 4
    return data[:ihdr_end] + b"".join(png_chunk(k, v) for k, v in chunks) + data[ihdr_end:]


def png_color_chunks(data):
    """IHDR's bit depth and colour type, and the colour chunks before IDAT, of a PNG."""
    chunks, pos = {}, 8
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            break
        chunks[kind] = data[pos + 8:pos + 8 + length]
        pos += 12 + length
    return chunks


def pngsuite_rows(corpus, expect, rows):
    """PngSuite's gAMA and cHRM files of 8 bits or fewer (Pillow decodes them as libpng
    does; colour types without tRNS), read where they are, with their expected pixels
    made as for chrm-gama.png from the profile their chunks describe; gAMA 1/2.2 with
    sRGB's cHRM or none is taken as sRGB (pxl_codecs.h): a "same" row."""
    suite = os.path.join(corpus, "pngsuite")
    if not os.path.isdir(suite):
        print(f"gen-color-fixtures: {suite} is absent: its gAMA/cHRM rows skipped")
        return
    for name in sorted(os.listdir(suite)):
        if not name.endswith(".png") or name.startswith("x"):  # x*: PngSuite's corrupt files
            continue
        path = os.path.abspath(os.path.join(suite, name))
        with open(path, "rb") as f:
            data = f.read()
        c = png_color_chunks(data)
        if b"gAMA" not in c and b"cHRM" not in c or b"iCCP" in c or b"sRGB" in c or b"tRNS" in c:
            continue
        if c[b"IHDR"][8] > 8:
            continue
        gama = struct.unpack(">I", c[b"gAMA"])[0] if b"gAMA" in c else 0
        chrm = [v / 100000 for v in struct.unpack(">8I", c[b"cHRM"])] if b"cHRM" in c else None
        srgb_chrm = [*D65, *(v for xy in SRGB_PRIMARIES for v in xy)]
        if (chrm is None or all(abs(a - b) <= 0.005 for a, b in zip(chrm, srgb_chrm))) and \
                (gama == 0 or 45000 <= gama <= 46000):
            rows.append((path, "same", "rgba", "-", "PngSuite: gAMA 1/2.2, taken as sRGB"))
            continue
        white, primaries = (chrm[0:2], [chrm[2:4], chrm[4:6], chrm[6:8]]) if chrm else (D65, SRGB_PRIMARIES)
        icc = rgb_profile(white, primaries, parametric(1, 100000 / gama) if gama else srgb_curve())
        alpha = c[b"IHDR"][9] in (4, 6)
        expect(name, data, icc, f"PngSuite: gAMA {gama}" + (" + cHRM" if chrm else " alone"), path=path,
               mode="RGBA" if alpha else "RGB")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    prof = profiles()
    rows = []

    def write(name, data):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)

    def expect(name, data, icc, note, path=None, mode=None):
        """A "convert" row: name.rgba the conversion of what Pillow decodes (in mode when
        given); for a PNG also name.decoded.rgba, the decoded values themselves, which
        the shim's decode must give exactly (colour management off keeps them). path:
        where the file is, when it is not written here (PngSuite)."""
        decoded = Image.open(io.BytesIO(data))
        decoded.load()
        if mode is not None:
            decoded = decoded.convert(mode)
        exp = convert(decoded, icc)
        write(name + ".rgba", exp.tobytes())
        if data[:4] == b"\x89PNG":
            write(name + ".decoded.rgba", decoded.convert("RGBA").tobytes())
        rows.append((path or name, "convert", "rgba", name + ".rgba", note))

    rgb = test_image(64, 48, False)
    rgba = test_image(64, 48, True)
    gray = test_image(64, 48, False).convert("L")

    for key, note in [("p3", "Display P3"), ("adobe", "Adobe RGB (1998)"), ("big", "Adobe-like, 2 APP2 chunks")]:
        buf = io.BytesIO()
        rgb.save(buf, "JPEG", quality=95, icc_profile=prof[key])
        write(f"{key}.jpg", buf.getvalue())
        expect(f"{key}.jpg", buf.getvalue(), prof[key], note + " JPEG")
    for key in ("p3", "adobe"):
        buf = io.BytesIO()
        rgb.save(buf, "PNG", icc_profile=prof[key])
        write(f"{key}.png", buf.getvalue())
        expect(f"{key}.png", buf.getvalue(), prof[key], key + " PNG iCCP")
    buf = io.BytesIO()
    rgba.save(buf, "PNG", icc_profile=prof["p3"])
    write("p3-alpha.png", buf.getvalue())
    expect("p3-alpha.png", buf.getvalue(), prof["p3"], "Display P3 PNG with alpha")
    buf = io.BytesIO()
    gray.save(buf, "JPEG", quality=95, icc_profile=prof["gray18"])
    write("gray18.jpg", buf.getvalue())
    expect("gray18.jpg", buf.getvalue(), prof["gray18"], "gray gamma 1.8 JPEG")

    # cHRM (Display P3's primaries, D65) + gAMA 1/1.8, no iCCP: the reference is the
    # profile those chunks describe, built by lcms2 as the library builds it.
    chrm = [D65, *P3_PRIMARIES]
    chrm_data = b"".join(struct.pack(">II", round(x * 100000), round(y * 100000)) for x, y in chrm)
    gama = round(100000 / 1.8)
    data = png_with_chunks(rgb, [(b"gAMA", struct.pack(">I", gama)), (b"cHRM", chrm_data)])
    write("chrm-gama.png", data)
    chrm_icc = rgb_profile(*[(v[0] / 1, v[1] / 1) for v in [D65]], P3_PRIMARIES, parametric(1, 100000 / gama))
    expect("chrm-gama.png", data, chrm_icc, "PNG cHRM P3 + gAMA 1/1.8")

    # Pass-through: untagged, sRGB-tagged (ICC, sRGB chunk, sRGB's own cHRM + gAMA).
    for name, fmt, kw in [("untagged.jpg", "JPEG", {}), ("untagged.png", "PNG", {}),
                          ("srgb-icc.jpg", "JPEG", {"icc_profile": prof["srgb"]}),
                          ("srgb-icc.png", "PNG", {"icc_profile": prof["srgb"]})]:
        buf = io.BytesIO()
        rgb.save(buf, fmt, quality=95, **kw) if fmt == "JPEG" else rgb.save(buf, fmt, **kw)
        write(name, buf.getvalue())
        rows.append((name, "same", "rgba", "-", "no transform"))
    write("srgb-chunk.png", png_with_chunks(rgb, [(b"sRGB", b"\x00")]))
    rows.append(("srgb-chunk.png", "same", "rgba", "-", "sRGB chunk"))
    write("srgb-chrm-gama.png", png_with_chunks(rgb, [
        (b"gAMA", struct.pack(">I", 45455)),
        (b"cHRM", b"".join(struct.pack(">II", round(x * 100000), round(y * 100000)) for x, y in [D65, *SRGB_PRIMARIES]))]))
    rows.append(("srgb-chrm-gama.png", "same", "rgba", "-", "gAMA 45455 + sRGB's cHRM: taken as sRGB (pxl_codecs.h)"))
    # gAMA alone (1.0, as PngSuite writes it): sRGB's primaries with that curve.
    data = png_with_chunks(rgb, [(b"gAMA", struct.pack(">I", 100000))])
    write("gama-only.png", data)
    expect("gama-only.png", data, rgb_profile(D65, SRGB_PRIMARIES, parametric(1, 1.0)), "PNG gAMA 1.0 alone")
    pngsuite_rows(os.environ.get("CORPUS", "../shared/corpus"), expect, rows)
    # A broken profile: decodes, unconverted, with a message.
    broken = bytearray(prof["p3"])
    broken[36:40] = b"XXXX"  # the 'acsp' signature
    buf = io.BytesIO()
    rgb.save(buf, "JPEG", quality=95, icc_profile=bytes(broken))
    write("broken-icc.jpg", buf.getvalue())
    rows.append(("broken-icc.jpg", "broken", "rgba", "-", "profile without its acsp signature"))

    with open(os.path.join(out, "manifest.tsv"), "w") as f:
        f.write("# file\texpect\tsource\texpected_rgba\tnote\n")
        for row in rows:
            f.write("\t".join(row) + "\n")
    for key, data in prof.items():
        write(key + ".icc", data)
    print(f"gen-color-fixtures: {len(rows)} files in {out}")


if __name__ == "__main__":
    main()
