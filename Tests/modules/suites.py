#!/usr/bin/env python3
"""Tests/modules/suites.py BUILD_DIR: the codec modules on public suites, beside the set
conformance.py generates. Run by `make test-modules` after it.

Every file in Tests/fixtures/{jxl,svg,heif}-suite/module-manifest.tsv (scripts/make-module-suites.py
wrote them; each folder's README.md says where the files are from and their licences) goes
through pixload's CLI (`pixload fetch --allow-file --no-disk-cache --no-color-management
file://... --out x.png`, RGBA8 at full size) and is compared with its reference:

- JPEG XL: the suite's own ref.png where the folder holds it (tolerance 2: the suite's
  peak error for these cases is at most 0.004, one 8-bit step, plus one step of rounding;
  the references are 8-bit renderings of the float reference decode, a 16-bit one read back
  as its high byte), else djxl (the same libjxl 0.7: 0 for 8-bit images, 1 for deeper ones,
  whose 16-bit PNG is read back as its high byte). An animation: every frame of
  `--animate` against djxl's APNG.
- SVG: the suite's -ref.png with librsvg's own test tolerance (8, RSVG_TEST_TOLERANCE's
  default, on premultiplied values, as its harness compares cairo surfaces), else
  rsvg-convert at the same size (1: each unpremultiplies cairo's pixels with its own
  rounding). Files referencing resources that exist beside them: rsvg-convert on a copy
  alone in an empty folder, and that copy must differ from rsvg-convert's render with the
  resources (so the resource was reachable and pixload still loaded none of it).
- HEIF: heif-convert's output for the primary image (exact: the same libheif 1.15 and
  libde265, heif-convert writes 16-bit PNG for deeper images, read back as its high byte).
  Extra checks: a thumbnail request (the picture, fitted, close to the full decode made
  small).
- Orientation (extra "stored" and "orientation"; JPEG XL and HEIF): with --no-orientation
  the stored size, and those pixels turned by the EXIF orientation the file's transform
  amounts to give the upright ones exactly.
- SVG at another size (extra "size"): drawn at that size, against rsvg-convert -w -h.
- Colour (extra "icc", JPEG XL and HEIF): pixload with colour management against the
  reference tool's PNG taken to sRGB from the ICC profile in it by lcms2 (Pillow's
  ImageCms): 1, the rounding of two builds of the transform.

Then, for every file that decodes: truncated copies (cut at 16 bytes (not SVG), a third and
two thirds) and a copy with 16 header bytes flipped, made here, each with a time limit: each
must be refused with an error status, never crash or hang. (A damaged copy that pixload
decodes passes only if the reference tool decodes the same bytes too: the damage missed
what the picture needs.) Prints one line per check, the counts per suite, and
"N passed, N failed" last; exits 1 on a failure.
"""
import io
import os
import shutil
import sys
import tempfile
import time

from PIL import Image, ImageChops, ImageCms, ImageStat

from harness import Harness, first_line, run

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
work = tempfile.mkdtemp(prefix="pxl-suites.")
harness = Harness(build, work)
check = harness.check
LIMIT = 60  # seconds for any one pixload or tool run: a hang fails, the run goes on


def manifest(suite):
    with open(os.path.join(fixtures, suite, "module-manifest.tsv")) as f:
        header = f.readline().rstrip("\n").split("\t")
        return [dict(zip(header, line.rstrip("\n").split("\t"))) for line in f if line.strip()]


def as_rgba8(im):
    """Straight RGBA8 of a Pillow image: 16-bit grey (I;16) as its high byte, like Pillow
    reads 16-bit colour PNGs."""
    if im.mode in ("I;16", "I;16B", "I"):
        im = im.point(lambda v: v * (1 / 256)).convert("L")
    return im.convert("RGBA")


# EXIF orientation -> the Pillow transpose that makes stored pixels upright.
TRANSPOSE = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
             5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
             8: Image.Transpose.ROTATE_90}


def load(path, frame=0):
    im = Image.open(path)
    im.seek(frame)
    return as_rgba8(im)


def difference(a, b, premultiplied=False):
    """Largest channel difference; 999 for different sizes. Colour under alpha 0 in both
    does not count; premultiplied: compared as colour x alpha (how librsvg's reftests
    compare cairo surfaces)."""
    if a.size != b.size:
        return 999

    def prepared(im):
        r, g, b_, alpha = im.split()
        if premultiplied:
            r, g, b_ = (ImageChops.multiply(c, alpha) for c in (r, g, b_))
        else:
            visible = ImageChops.lighter(a.getchannel("A"), b.getchannel("A")).point(lambda v: 255 if v else 0)
            r, g, b_ = (ImageChops.multiply(c, visible) for c in (r, g, b_))
        return Image.merge("RGBA", (r, g, b_, alpha))

    return max(high for _, high in ImageChops.difference(prepared(a), prepared(b)).getextrema())


def mean_difference(a, b):
    return max(ImageStat.Stat(ImageChops.difference(a, b)).mean)


def refused(r):
    """An error status from the CLI: exit 1 and a status name, not a crash or a hang."""
    words = r.stdout.split()
    return r.returncode == 1 and bool(words) and words[0] in (
        "CORRUPT_IMAGE", "NOT_AN_IMAGE", "UNSUPPORTED_IMAGE", "TOO_MANY_PIXELS", "BODY_TOO_LARGE")


def fetch_status(path, *options):
    return run(harness.pixload, "fetch", "--allow-file", "--no-disk-cache", *options, "file://" + path, timeout=LIMIT)


# --- reference tools ------------------------------------------------------------------------
def djxl(path, apng=False):
    """djxl's PNG (APNG), or None. Used for 8-bit images only: djxl 0.7 writes deeper ones
    as 16-bit PNG holding unscaled samples, or not at all ("Alpha bit depth does not match
    image bit depth"), so those take the suite's reference."""
    out = os.path.join(work, "djxl.apng" if apng else "djxl.png")
    r = run("djxl", path, out, timeout=LIMIT)
    return out if r.returncode == 0 else None


def heif_primary_index(path):
    """1-based position of the primary among heif-info's top-level images, and their count."""
    images = [line for line in run("heif-info", path, timeout=LIMIT).stdout.splitlines() if line.startswith("image:")]
    primary = [i for i, line in enumerate(images, 1) if "primary" in line]
    return (primary[0] if primary else 1), len(images)


def heif_convert(path):
    stem = os.path.join(work, "heif-convert")
    for name in os.listdir(work):
        if name.startswith("heif-convert"):
            os.remove(os.path.join(work, name))
    r = run("heif-convert", "--quiet", path, stem + ".png", timeout=LIMIT)
    if r.returncode != 0:
        return None
    index, count = heif_primary_index(path)
    return stem + ".png" if count <= 1 else f"{stem}-{index}.png"


def rsvg_convert(path, cwd=None):
    out = os.path.join(work, "rsvg.png")
    # At the document's own size, as pixload draws it at full size: rsvg-convert -w -h would
    # stretch a fractional size (16x16.02) to the rounded one, pixload keeps the aspect.
    r = run("rsvg-convert", path, "-o", out, timeout=LIMIT, cwd=cwd)
    return out if r.returncode == 0 else None


def decodes_with_tool(fmt, path):
    if fmt == "jxl":
        return djxl(path) is not None
    if fmt == "heif":
        return heif_convert(path) is not None
    return run("rsvg-convert", path, "-o", os.path.join(work, "rsvg.png"), timeout=LIMIT).returncode == 0


# --- per format checks --------------------------------------------------------------------
def reference_image(fmt, row, path, got):
    """(Pillow image or None, its name)."""
    reference = row["reference"]
    if reference.startswith("suite:"):
        return load(os.path.join(os.path.dirname(path), os.path.basename(reference[6:])) if "/" not in reference[6:]
                    else os.path.join(fixtures, fmt + "-suite", reference[6:])), "the suite's " + reference[6:]
    if reference == "djxl":
        out = djxl(path)
        return (load(out) if out else None), "djxl"
    if reference == "heif-convert":
        out = heif_convert(path)
        return (load(out) if out else None), "heif-convert"
    if reference == "rsvg-convert":
        out = rsvg_convert(path)
        return (load(out) if out else None), "rsvg-convert"
    if reference == "rsvg-convert-alone":
        alone = tempfile.mkdtemp(dir=work)
        shutil.copy(path, alone)
        out = rsvg_convert(os.path.basename(path), cwd=alone)
        return (load(out) if out else None), "rsvg-convert with the file alone"
    raise ValueError(reference)


def extra_checks(fmt, row, path, got):
    extra = dict(item.split("=", 1) for item in row["extra"].split() if "=" in item)
    name = row["file"]
    if "frames" in extra:
        frames_dir = os.path.join(work, "frames")
        shutil.rmtree(frames_dir, ignore_errors=True)
        # Every frame in-process against djxl; isolated (the default: the module in a
        # decode worker, its frames crossing one by one) the same files, byte for byte.
        r = run(harness.pixload, "fetch", "--allow-file", "--no-disk-cache", "--no-color-management", "--animate",
                "--isolation", "none", "file://" + path, "--out-dir", frames_dir, timeout=LIMIT)
        isolated_dir = os.path.join(work, "frames-isolated")
        shutil.rmtree(isolated_dir, ignore_errors=True)
        i = run(harness.pixload, "fetch", "--allow-file", "--no-disk-cache", "--no-color-management", "--animate",
                "file://" + path, "--out-dir", isolated_dir, timeout=LIMIT)
        isolated = os.listdir(isolated_dir) if i.returncode == 0 else []
        # Frame 0 is DIR/0000-NAME.png, frame N > 0 DIR/0000-NAME.fNNN.png.
        ours = sorted(os.listdir(frames_dir), key=lambda f: (".f" in f, f)) if r.returncode == 0 else []
        same = sum(1 for f in isolated if f in ours and load(os.path.join(isolated_dir, f)).tobytes()
                   == load(os.path.join(frames_dir, f)).tobytes())
        check(len(isolated) == len(ours) == same and same > 1,
              f"{fmt} {name}: isolated, {len(isolated)} frames, {same} of them the same as in-process's {len(ours)}")
        apng = djxl(path, apng=True)
        worst = 999
        if apng and len(ours) == int(extra["frames"]):
            worst = max(difference(load(os.path.join(frames_dir, f)), load(apng, i)) for i, f in enumerate(ours))
        check(len(ours) == int(extra["frames"]) and worst <= 1,
              f"{fmt} {name}: {len(ours)} frames (the suite says {extra['frames']}), every one against djxl's APNG: "
              f"max difference {worst}")
    if "stored" in extra:
        # As stored; turned by the EXIF orientation the file's own transform amounts to
        # (Pillow's transpose for it), the upright pixels exactly.
        kept, why = harness.fetch(path, "--no-orientation", timeout=LIMIT)
        size = f"{kept.size[0]}x{kept.size[1]}" if kept else why
        d = difference(kept.transpose(TRANSPOSE[int(extra["orientation"])]), got) if kept else 999
        check(size == extra["stored"] and d == 0,
              f"{fmt} {name} --no-orientation: {size} as stored, {got.size[0]}x{got.size[1]} upright; turned by EXIF "
              f"orientation {extra['orientation']}: max difference {d} from the upright")
    if "size" in extra:
        w, h = (int(v) for v in extra["size"].split("x"))
        big, why = harness.fetch(path, "--size", extra["size"], timeout=LIMIT)
        out = os.path.join(work, "rsvg-sized.png")
        made = run("rsvg-convert", "-w", str(w), "-h", str(h), path, "-o", out, timeout=LIMIT).returncode == 0
        d = difference(big, load(out), premultiplied=True) if big and made else 999
        check(d <= 1, f"{fmt} {name} at {extra['size']}: drawn at that size, max difference {d} against rsvg-convert "
                      f"-w {w} -h {h} (at most 1) {why}")
    if "icc" in row["extra"].split():
        tool_png = djxl(path) if fmt == "jxl" else heif_convert(path)
        profile = Image.open(tool_png).info.get("icc_profile") if tool_png else None
        r = fetch_status(path, "--out", os.path.join(work, "managed.png"))
        if profile and r.returncode == 0:
            stored = Image.open(tool_png)
            stored = stored if stored.mode == "L" else as_rgba8(stored).convert("RGB")
            want = ImageCms.profileToProfile(stored, ImageCms.ImageCmsProfile(io.BytesIO(profile)),
                                             ImageCms.createProfile("sRGB"), outputMode="RGB")
            managed = load(os.path.join(work, "managed.png")).convert("RGB")
            raw = got.convert("RGB")
            d, d_raw = (difference(im.convert("RGBA"), want.convert("RGBA")) for im in (managed, raw))
            check(d <= 1, f"{fmt} {name} with colour management: max difference {d} against lcms2 from the "
                          f"{len(profile)}-byte ICC profile (at most 1; without colour management {d_raw})")
        else:
            check(False, f"{fmt} {name} with colour management: no ICC profile in the tool's PNG, or {first_line(r)}")
    if "resources" in extra:
        with_resources = rsvg_convert(path, cwd=os.path.dirname(path))
        d = difference(got, load(with_resources), premultiplied=True) if with_resources else 0
        check(d > 8, f"{fmt} {name}: rsvg-convert beside {extra['resources']} draws them (difference {d} from pixload's)")
    if "thumb" in extra:
        w, h = (int(v) for v in extra["thumb"].split("x"))
        r = fetch_status(path, "--no-color-management", "--size", extra["thumb"], "--out", os.path.join(work, "thumb.png"))
        scale = min(w / got.size[0], h / got.size[1])
        want = (max(1, int(got.size[0] * scale + 0.5)), max(1, int(got.size[1] * scale + 0.5)))
        if r.returncode == 0:
            thumb = load(os.path.join(work, "thumb.png"))
            small = got.resize(thumb.size, Image.Resampling.LANCZOS)
            mean = mean_difference(thumb, small)
            cpu = r.stdout.strip().splitlines()[-1].split(",")[-1].strip()
            check(thumb.size == want and mean < 12,
                  f"{fmt} {name} at {extra['thumb']}: {thumb.size[0]}x{thumb.size[1]} (fit: {want[0]}x{want[1]}), mean "
                  f"difference {mean:.1f} from the full decode made small, {cpu}")
        else:
            check(False, f"{fmt} {name} at {extra['thumb']}: {first_line(r)}")


def damaged_copies(fmt, data):
    """(what, bytes): truncated at three lengths, and 16 header bytes flipped where the
    format's structure begins (past the signature the sniffers read)."""
    cuts = [16, len(data) // 3, 2 * len(data) // 3]
    # SVG: 16 bytes never pass the sniffer, and a cut past the closing tag would leave a
    # whole document.
    if fmt == "svg":
        cuts = [min(c, data.rfind(b"</svg>")) for c in cuts[1:]]
    copies = [(f"cut at {c} of {len(data)} bytes", data[:c]) for c in sorted(set(cuts))]
    if fmt == "svg":
        at = data.find(b"<svg") + 5  # past "<svg" and the space the sniffer wants: the parser meets it
    elif fmt == "heif":
        at = data.find(b"meta") + 8  # the meta box's version, flags and first child's header
    elif data[:2] == b"\xff\x0a":
        at = 2  # a bare codestream: its size header and image header
    else:
        at = max(data.find(b"jxlc"), data.find(b"jxlp")) + 4
    flipped = data[:at] + bytes(b ^ 0xA5 for b in data[at:at + 16]) + data[at + 16:]
    copies.append((f"bytes {at}..{at + 15} flipped", flipped))
    return copies


def run_suite(fmt):
    suite = fmt + "-suite"
    rows = manifest(suite)
    counts = {"files": len(rows), "matched": 0, "errors": 0, "worst": 0, "damaged": 0, "damaged_decoded": 0}
    decodable = []
    for row in rows:
        path = os.path.join(fixtures, suite, row["file"])
        name = row["file"]
        t0 = time.monotonic()
        # A row marked isolation=none decodes in-process (what the worker cannot do yet).
        inprocess = ["--isolation", "none"] if "isolation=none" in row["extra"].split() else []
        got, why = harness.fetch(path, *inprocess, timeout=LIMIT)
        elapsed = (time.monotonic() - t0) * 1000
        if row["expect"] == "error":
            r = fetch_status(path)
            ok = got is None and refused(r)
            counts["errors"] += ok
            check(ok, f"{fmt} {name}: {'refused' if ok else 'expected a refusal, got'} ({first_line(r)[:110]}) "
                      f"[{row['note']}]")
            continue
        if got is None:
            check(False, f"{fmt} {name}: {why} [{row['note']}]")
            continue
        decodable.append((path, name))
        want, what = reference_image(fmt, row, path, got)
        if want is None:
            check(False, f"{fmt} {name}: the reference ({row['reference']}) could not be made")
            continue
        d = difference(got, want, premultiplied=(fmt == "svg"))
        ok = d <= int(row["tolerance"])
        counts["matched"] += ok
        counts["worst"] = max(counts["worst"], d if d != 999 else counts["worst"])
        size = f"{got.size[0]}x{got.size[1]}" + ("" if got.size == want.size else f" vs {want.size[0]}x{want.size[1]}")
        check(ok, f"{fmt} {name} {size}: max difference {d} against {what} (at most {row['tolerance']}), "
                  f"{elapsed:.0f} ms [{row['note']}]")
        extra_checks(fmt, row, path, got)

    for path, name in decodable:
        data = open(path, "rb").read()
        for what, body in damaged_copies(fmt, data):
            bad = os.path.join(work, "damaged." + os.path.basename(path).rsplit(".", 1)[-1])
            with open(bad, "wb") as f:
                f.write(body)
            t0 = time.monotonic()
            r = fetch_status(bad)
            elapsed = (time.monotonic() - t0) * 1000
            counts["damaged"] += 1
            if r.returncode == 0:
                counts["damaged_decoded"] += 1
                ok = decodes_with_tool(fmt, bad)
                verdict = "decoded, as the reference tool decodes it" if ok else "decoded, but the reference tool refuses it"
            else:
                ok = refused(r)
                verdict = "refused" if ok else f"exit {r.returncode}"
            check(ok, f"{fmt} {name} {what}: {verdict} in {elapsed:.0f} ms ({first_line(r)[:90]})")
    return counts


totals = {fmt: run_suite(fmt) for fmt in ("jxl", "svg", "heif")}
for fmt, c in totals.items():
    print(f"{fmt}-suite: {c['files']} files, {c['matched']} matched their reference, {c['errors']} refused as "
          f"expected, worst difference {c['worst']}; {c['damaged']} damaged copies, {c['damaged_decoded']} "
          f"decoded like the reference tool, the rest refused")
shutil.rmtree(work, ignore_errors=True)
print(f"{harness.passed} passed, {harness.failed} failed")
sys.exit(1 if harness.failed else 0)
