#!/usr/bin/env python3
"""scripts/make-module-suites.py MIRRORS OUTDIR

Writes the public suites the codec modules are checked against (Tests/modules/suites.py,
run by `make test-modules`): OUTDIR/jxl-suite, OUTDIR/svg-suite and OUTDIR/heif-suite, each
with the selected files, the licence files and module-manifest.tsv. Run once by hand; its output
is committed (each folder's README.md, written by hand, says where everything is from).

MIRRORS holds bare git directories of the source repositories, one per repository, named
OWNER+NAME/repo (as the `fetch` tool leaves them): libjxl+conformance, GNOME+librsvg,
strukturag+libheif, bigcat88+pillow_heif, GNOME+adwaita-icon-theme (for its licence).
Files are read at the commits pinned below, so a rerun writes the same bytes.

module-manifest.tsv (not manifest.tsv, which Tests/codecs/conformance.c reads as a built-in
decoder's set under Tests/fixtures) columns: file, expect (decode | error), reference, tolerance (the largest
channel difference allowed, 8-bit units), extra (space-separated checks: frames=N, every
frame of an animation; stored=WxH orientation=N, the size with --no-orientation and the
EXIF orientation that turns those pixels upright; size=WxH, an SVG drawn at that size;
thumb=WxH, a thumbnail
request; resources=A,B, files the SVG references; icc, pixload with colour management
against the reference tool's PNG taken to sRGB from its ICC profile by lcms2), note.
reference is one of:
  suite:FILE          the suite's own expected output, stored beside it (FILE)
  djxl | heif-convert | rsvg-convert
                      the format's reference tool, run at test time on this machine
  rsvg-convert-alone  rsvg-convert on a copy of the file alone in an empty folder: the
                      file references resources that exist beside it here, and pixload
                      must load none of them
  -                   (expect error) no reference
A suite reference stored as lossless WebP (to fit the size budget) has the PNG's exact
pixels: this script checks it before writing.
"""
import io
import os
import subprocess
import sys

from PIL import Image

if len(sys.argv) != 3:
    sys.exit(__doc__)
mirrors, out = sys.argv[1:]

COMMITS = {
    "libjxl+conformance": "4bf053529c7cefd2951be453475bb3dccc7e7be8",
    "GNOME+librsvg": "3da74df8c96be9b9247c7a1f05dfde0f4bf1fec9",
    "strukturag+libheif": "9f31998e0f426eeec9ece938baabe6fbf858e042",
    "bigcat88+pillow_heif": "657f27d7955bbd730701e2e966e7e8751e119eb9",
    "GNOME+adwaita-icon-theme": "551245ae75fdc42cde42a8cf24ca2ccab9d3a815",  # its licence files only
}


def blob(repo, path):
    git_dir = os.path.join(mirrors, repo, "repo")
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{COMMITS[repo]}:{path}"], check=True,
                          capture_output=True).stdout


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def smallest_lossless(png_bytes):
    """(extension, bytes): the PNG itself or a lossless WebP of the same pixels, whichever
    is clearly smaller. A 16-bit PNG stays a PNG (WebP holds 8 bits)."""
    if png_bytes[24] != 8:  # IHDR bit depth
        return "png", png_bytes
    im = Image.open(io.BytesIO(png_bytes))
    buf = io.BytesIO()
    im.save(buf, "WEBP", lossless=True, quality=100, method=6, exact=True)
    webp = buf.getvalue()
    back = Image.open(io.BytesIO(webp)).convert(im.mode)
    if back.tobytes() != im.tobytes():
        sys.exit("lossless WebP changed the pixels")
    return ("webp", webp) if len(webp) < len(png_bytes) * 0.8 else ("png", png_bytes)


def manifest(folder, rows):
    with open(os.path.join(folder, "module-manifest.tsv"), "w") as f:
        f.write("file\texpect\treference\ttolerance\textra\tnote\n")
        for row in rows:
            f.write("\t".join(str(c) for c in row) + "\n")


# --- JPEG XL: libjxl's conformance test vectors ------------------------------------------
# (case, stored reference?, tolerance, extra, note). Stored: the case's ref.png (8-bit
# rendering of the reference decode); otherwise djxl at test time, for 8-bit images only
# (djxl 0.7 writes deeper ones as 16-bit PNG holding unscaled samples, or refuses to write
# them: "Alpha bit depth does not match image bit depth"). Tolerance 2 against the suite:
# its own peak error for these cases is at most 0.004 (one 8-bit step) plus one step of
# rounding to 8 bits. djxl is the same libjxl 0.7, so exact. extra "icc": also checked
# with colour management (below, in module-manifest.tsv's description).
JXL = [
    ("alpha_nonpremultiplied", True, 2, "", "modular, alpha, 12-bit (the reference is 16-bit)"),
    ("alpha_triangles", True, 2, "", "modular, alpha, 9-bit"),
    ("animation_spline", True, 2, "frames=60", "splines, animation: frame 0 against the suite, every frame against djxl"),
    ("blendmodes", True, 2, "", "modular, layers with every blend mode, 12-bit"),
    ("patches_lossless", True, 2, "", "container, modular, patches, alpha"),
    ("alpha_premultiplied", True, 2, "", "VarDCT, premultiplied alpha (unpremultiplied by libjxl), 12/16-bit, ICC"),
    ("upsampling", False, 0, "", "VarDCT, alpha, upsampling, ICC"),
    ("sunset_logo", True, 2, "stored=1386x924 orientation=7", "modular, RCT, 10-bit, orientation, two layers"),
    ("grayscale", False, 0, "icc",
     "VarDCT, grayscale ICC; the suite's ref.png holds values in a colour space it does not tag, so djxl"),
    ("bench_oriented_brg", False, 0, "icc stored=500x606 orientation=5", "container, VarDCT, JPEG reconstruction data, orientation, ICC (BRG primaries)"),
]
folder = os.path.join(out, "jxl-suite")
rows = []
for case, stored, tolerance, extra, note in JXL:
    name = case + ".jxl"
    write(os.path.join(folder, name), blob("libjxl+conformance", f"testcases/{case}/input.jxl"))
    reference = "djxl"
    if stored:
        if case == "animation_spline":  # frame 0 of ref.apng only (the APNG is 533 KB)
            buf = io.BytesIO()
            Image.open(io.BytesIO(blob("libjxl+conformance", f"testcases/{case}/ref.apng"))).save(buf, "PNG", optimize=True)
            data = buf.getvalue()
        else:
            data = blob("libjxl+conformance", f"testcases/{case}/ref.png")
        ext, data = smallest_lossless(data)
        ref_name = f"{case}.ref.{ext}"
        write(os.path.join(folder, ref_name), data)
        reference = "suite:" + ref_name
    rows.append((name, "decode", reference, tolerance, extra or "-", note))
write(os.path.join(folder, "LICENSE"), blob("libjxl+conformance", "LICENSE"))
write(os.path.join(folder, "testcases-README.md"), blob("libjxl+conformance", "testcases/README.md"))
manifest(folder, rows)

# --- SVG: librsvg's reference tests ------------------------------------------------------
R = "rsvg/tests/fixtures/reftests/"
# Against the suite's -ref.png with librsvg's own tolerance (8, RSVG_TEST_TOLERANCE's
# default, on premultiplied values). Text-free: text depends on the fonts installed.
SVG_SUITE = ["adwaita/" + n + "-symbolic.svg" for n in (
    "application-exit", "audio-volume-muted", "battery-full", "call-start", "checkbox", "dialog-password",
    "emblem-shared", "face-kiss", "network-wireless-encrypted", "radio-checked", "weather-severe-alert",
    "view-refresh", "x-office-calendar")] + ["bugs/" + n + ".svg" for n in (
    "bug112-svg-delayed-attributes", "bug1128-elliptical-arcs-big-radius", "bug165-zero-length-subpath-square-linecap",
    "bug181-inheritable-attrs-in-svg", "bug241-light-source-type", "bug245-negative-dashoffset", "bug282-drop-shadow",
    "bug372-small-arcs", "bug373-gradient-userspaceonuse", "bug403357", "bug506-pattern-fallback",
    "bug510-pattern-fill-opacity", "bug548-data-url-without-mimetype", "bug563933", "bug590-mask-units",
    "bug609-clippath-transform", "bug634324-blur-negative-transform", "bug689832-unresolved-gradient",
    "bug718-rect-negative-rx-ry", "bug738367", "bug761175-recursive-masks", "bug763386-marker-coincident",
    "bug776297-marker-on-non-path-elements", "bug786372-default-style-type", "bug788-inner-svg-viewbox")] + [
    "bug483-attribute-selectors.svg", "bug525-specificity.svg", "duplicate-id.svg", "filter-conv-bounds.svg",
    "filter-conv-divisor.svg", "hexchat.svg", "specificity.svg", "structural-pseudo-classes.svg",
    "style-with-xml-comments.svg", "xml-lang-css.svg", "xml-lang-css-inherit.svg", "system-language-other.svg",
    "svg2/multi-filter.svg", "svg2/paint-order.svg"]
NOTES = {"bugs/bug548-data-url-without-mimetype.svg": "a data: URL image (the one kind of reference that loads)"}
# Also asked smaller or larger: drawn at that size (not drawn at the intrinsic size and
# resampled). Sizes the document reaches in whole pixels on both sides, where rsvg-convert
# -w -h draws the same.
SIZED = {"adwaita/weather-severe-alert-symbolic.svg": "size=8x8", "bugs/bug372-small-arcs.svg": "size=160x160",
         "bugs/bug788-inner-svg-viewbox.svg": "size=82x31", "svg2/paint-order.svg": "size=250x150",
         "adwaita/call-start-symbolic.svg": "size=48x48", "bugs/bug245-negative-dashoffset.svg": "size=300x60"}
# Against rsvg-convert 2.54 at the same size, and why not the suite's reference.
SVG_TOOL = {
    # A fractional size: pixload (like rsvg-convert) rounds it up and draws the document at
    # scale 1 from the corner; librsvg's harness rounds to the nearest and fits it.
    "adwaita/document-properties-symbolic.svg": "16x16.02: 16x17, the fraction transparent; librsvg's harness 16x16",
    "bugs/bug476507.svg": "size in mm, 744.1x1052.4 px: 745x1053; librsvg's harness 744x1052",
    "bugs/bug603550-mask-luminance.svg": "size in mm, as bug476507",
    "filter-effects-region.svg": "librsvg 2.54 itself differs from the newer reference (filter region)",
    "filter-offset.svg": "librsvg 2.54 itself differs from the newer reference",
    "svg1.1/shapes-intro-01-t.svg": "W3C SVG 1.1; has text, drawn with this machine's fonts",
    "svg1.1/pservers-grad-01-b.svg": "W3C SVG 1.1 gradients; has text",
    "svg1.1/coords-trans-01-b.svg": "W3C SVG 1.1 transforms; has text",
    "svg1.1/painting-stroke-01-t.svg": "W3C SVG 1.1 strokes; has text",
    "svg1.1/masking-path-01-b.svg": "W3C SVG 1.1 clip paths; has text",
    "svg1.1/painting-marker-01-f.svg": "W3C SVG 1.1 markers; has text",
    "svg1.1/filters-gauss-01-b.svg": "W3C SVG 1.1 blur; has text",
}
# Referencing files that exist beside them here: pixload must load none of them.
SVG_EXTERNAL = {
    "css-import.svg": ["css-import.css"],
    "include-compressed.svg": ["gzip-compressed.svg"],
    "filter-image-from-reference-page.svg": ["svg1.1/images/smiley.png"],
}
SVG_ERROR = {
    "gzip-compressed.svg": "gzip-compressed SVG is not taken (the issue's rule): not an image",
    "svg1.1/coords-viewattr-01-b.svg": "declares entities (<!ENTITY): refused before parsing (codecs/svg.c's limit)",
}
folder = os.path.join(out, "svg-suite")
rows = []
for path in SVG_SUITE:
    write(os.path.join(folder, path), blob("GNOME+librsvg", R + path))
    ref = path[:-4] + "-ref.png"
    write(os.path.join(folder, ref), blob("GNOME+librsvg", R + ref))
    rows.append((path, "decode", "suite:" + ref, 8, SIZED.get(path, "-"), NOTES.get(path, "")))
for path, why in SVG_TOOL.items():
    write(os.path.join(folder, path), blob("GNOME+librsvg", R + path))
    rows.append((path, "decode", "rsvg-convert", 1, "-", why))
for path, resources in SVG_EXTERNAL.items():
    write(os.path.join(folder, path), blob("GNOME+librsvg", R + path))
    for resource in resources:
        write(os.path.join(folder, resource), blob("GNOME+librsvg", R + resource))
    rows.append((path, "decode", "rsvg-convert-alone", 1, "resources=" + ",".join(resources),
                 "references " + ", ".join(resources) + " (present beside it): pixload loads none"))
for path, why in SVG_ERROR.items():
    write(os.path.join(folder, path), blob("GNOME+librsvg", R + path))
    rows.append((path, "error", "-", "-", "-", why))
write(os.path.join(folder, "LICENSES", "librsvg-COPYING.LIB"), blob("GNOME+librsvg", "COPYING.LIB"))
for name in ("COPYING", "COPYING_LGPL", "COPYING_CCBYSA3"):
    write(os.path.join(folder, "LICENSES", "adwaita-" + name), blob("GNOME+adwaita-icon-theme", name))
manifest(folder, rows)

# --- HEIF: pillow_heif's test images and libheif's own files ------------------------------
P = "tests/images/"
HEIF = [  # (repository, path, expect, extra, note)
    ("bigcat88+pillow_heif", P + "heif/RGB_8__128x128.heif", "decode", "-", "8-bit 4:2:0"),
    ("bigcat88+pillow_heif", P + "heif/RGB_8__29x100.heif", "decode", "-", "grid of tiles, odd width"),
    ("bigcat88+pillow_heif", P + "heif/RGB_10__128x128.heif", "decode", "-", "10-bit"),
    ("bigcat88+pillow_heif", P + "heif/RGB_12__29x100.heif", "decode", "-", "12-bit grid"),
    ("bigcat88+pillow_heif", P + "heif/RGBA_8__128x128.heif", "decode", "-", "alpha auxiliary image"),
    ("bigcat88+pillow_heif", P + "heif/RGBA_10__29x100.heif", "decode", "-", "10-bit grid with a 10-bit alpha grid"),
    ("bigcat88+pillow_heif", P + "heif/RGBA_12__128x128.heif", "decode", "-", "12-bit, alpha"),
    ("bigcat88+pillow_heif", P + "heif/L_8__128x128.heif", "decode", "-", "monochrome"),
    ("bigcat88+pillow_heif", P + "heif/L_10__29x100.heif", "decode", "-", "10-bit monochrome, clap"),
    ("bigcat88+pillow_heif", P + "heif/LA_8__29x100.heif", "decode", "-", "monochrome grid with alpha"),
    ("bigcat88+pillow_heif", P + "heif/L_8__29x100.heif", "decode", "-", "monochrome, a 64x100 item cropped (clap) to 29x100, coded 64x104"),
    ("bigcat88+pillow_heif", P + "heif/L_12__29x100.heif", "decode", "-", "12-bit monochrome, clap"),
    ("bigcat88+pillow_heif", P + "heif/RGB_10__29x100.heif", "decode", "-", "10-bit grid"),
    ("bigcat88+pillow_heif", P + "heif/RGBA_8__29x100.heif", "decode", "-", "grid with an alpha grid"),
    ("bigcat88+pillow_heif", P + "heif/RGBA_12__29x100.heif", "decode", "-", "12-bit grid with a 12-bit alpha grid"),
    ("bigcat88+pillow_heif", P + "heif/L_xmp.heif", "decode", "-", "a 32x32 grid of one 64x64 tile, XMP"),
    ("bigcat88+pillow_heif", P + "heif/zPug_3.heic", "decode", "-", "three top-level images, the primary the second"),
    ("bigcat88+pillow_heif", P + "heif_other/RGB_8_chroma444.heif", "decode", "-", "4:4:4, clap"),
    ("bigcat88+pillow_heif", P + "heif_other/L_exif_xmp_iptc.heic", "decode", "-", "EXIF, XMP and IPTC items"),
    ("bigcat88+pillow_heif", P + "heif_other/empty_icc.heic", "decode", "-", "an empty ICC profile, a 1025x900 grid of one 1026x900 tile"),
    ("bigcat88+pillow_heif", P + "heif_other/arrow.heic", "decode", "thumb=150x150 stored=4032x3024 orientation=6 icc",
     "phone photo: 12 MP grid, irot 270, ICC, a 240x320 thumbnail"),
    ("bigcat88+pillow_heif", P + "heif_corrupted/corrupted.heic", "error", "-", "an ftyp and garbage"),
    ("bigcat88+pillow_heif", P + "heif_corrupted/corrupted.hif", "error", "-", "damaged Canon HIF"),
    ("bigcat88+pillow_heif", P + "heif_truncated/truncated.heic", "error", "-", "cut in the image data"),
    ("bigcat88+pillow_heif", P + "heif_corrupted/empty.heic", "error", "-", "zero bytes"),
    ("strukturag+libheif", "fuzzing/data/corpus/colors-no-alpha.heic", "decode", "-", "64x64"),
    ("strukturag+libheif", "fuzzing/data/corpus/colors-with-alpha.heic", "decode", "-", "alpha"),
    ("strukturag+libheif", "fuzzing/data/corpus/colors-no-alpha-thumbnail.heic", "decode", "thumb=32x32",
     "a 64x64 thumbnail of a 72x72 image"),
    ("strukturag+libheif", "fuzzing/data/corpus/colors-with-alpha-thumbnail.heic", "decode", "thumb=32x32",
     "a thumbnail with its own alpha"),
    ("strukturag+libheif", "tests/data/rainbow-451x461.heic", "decode", "icc", "odd size, ICC, clap, XMP"),
    ("strukturag+libheif", "fuzzing/data/corpus/hevc32.heif", "decode", "-", "nclx, clap"),
    ("strukturag+libheif", "fuzzing/data/corpus/github_45.heic", "error", "-", "grid + irot, tiles undecodable"),
    ("strukturag+libheif", "fuzzing/data/corpus/clap-overflow-divide-zero.heic", "error", "-", "fuzzed clap"),
    ("strukturag+libheif", "fuzzing/data/corpus/github_20.heic", "error", "-", "no ftyp"),
    ("strukturag+libheif", "fuzzing/data/corpus/clusterfuzz-testcase-minimized-file-fuzzer-5720856641142784.heic",
     "error", "-", "fuzzed grid"),
    ("strukturag+libheif", "fuzzing/data/corpus/uncompressed_comp_RGB.heic", "error", "-",
     "uncompressed (unci) item: libheif 1.15 predates it"),
    ("strukturag+libheif", "fuzzing/data/corpus/jpeg32.heif", "error", "-", "JPEG-coded item: libheif 1.15 reads no jpeg items"),
    ("strukturag+libheif", "tests/data/lightning_mini.heif", "error", "-", "'mini' box format (newer than libheif 1.15)"),
]
folder = os.path.join(out, "heif-suite")
rows = []
for repo, path, expect, extra, note in HEIF:
    name = os.path.basename(path)
    write(os.path.join(folder, name), blob(repo, path))
    reference, tolerance = ("heif-convert", 0) if expect == "decode" else ("-", "-")
    rows.append((name, expect, reference, tolerance, extra, note))
write(os.path.join(folder, "LICENSES", "pillow_heif-LICENSE.txt"), blob("bigcat88+pillow_heif", "LICENSE.txt"))
write(os.path.join(folder, "LICENSES", "libheif-COPYING"), blob("strukturag+libheif", "COPYING"))
manifest(folder, rows)
print("wrote", out)
