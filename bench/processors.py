"""make bench-processors: the cost of processors, in one run.

1. 150x150 FILL thumbnails of a 1024x768 JPEG (file://, no caches, one at a time): process
   CPU per thumbnail plain, with round:12 and with circle (the target: at most 3 % more).
   A shared machine drifts (other processes' load, the CPU's clock) by more than the 3 %
   being measured, so the three are taken in short blocks of 10 in turn, the order rotated
   each round, 100 rounds: each round's processed blocks are compared with its plain block
   measured beside them, and the overhead is the median of those paired ratios (the CPU per
   image is the median over the rounds).
2. Blur of a 1024x768 RGBA image: pixload's Blur(2) and Blur(40) (a 1024x768 request with
   and without the blur; the difference is the blur) against Pillow's GaussianBlur at the
   same sigma on the same pixels (the target: sigma 2 and 40 within 1.3x, not slower than
   Pillow).
Usage: python bench/processors.py [rounds]: rounds / 2 thumbnail rounds (default 100), blur
batches of rounds / 20 (default 10)."""
import os

# numpy's OpenBLAS threads spin for a while after any call and their CPU is this process's:
# one thread, so process_time measures pixload (set before numpy is imported).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import statistics
import sys
import tempfile
import time

import numpy as np
from PIL import Image as PILImage, ImageFilter

import pixload

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
thumb_rounds = max(10, rounds // 2)
rng = np.random.default_rng(1)
# A photo-like 1024x768: smooth gradients plus noise (JPEG of ordinary size).
y, x = np.mgrid[0:768, 0:1024]
photo = np.stack([x * 255 // 1023, y * 255 // 767, (x + y) * 255 // 1790], axis=2).astype(np.int16)
photo = np.clip(photo + rng.normal(0, 12, photo.shape), 0, 255).astype(np.uint8)
folder = tempfile.mkdtemp()
path = os.path.join(folder, "photo.jpg")
PILImage.fromarray(photo).save(path, quality=85)
url = "file://" + path


def cpu_per_image(loader, n, **request):
    loader.fetch_sync(url, skip_memory_cache=True, **request)  # warm
    best = None
    for _ in range(3):
        start = time.process_time()
        for _ in range(n):
            loader.fetch_sync(url, skip_memory_cache=True, **request)
        spent = (time.process_time() - start) / n * 1000
        best = spent if best is None else min(best, spent)
    return best


def cpu_per_image_in_turn(loader, rounds, block, requests):
    """CPU per image (ms) of each request, blocks of `block` loads taken in turn, the order
    rotated each round: a shared machine's drift weighs on the requests alike. Returns, per
    request, the per-round figures (round i of every request measured side by side)."""
    for request in requests.values():
        loader.fetch_sync(url, skip_memory_cache=True, **request)  # warm
    names = list(requests)
    spent = {name: [] for name in names}
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.process_time()
            for _ in range(block):
                loader.fetch_sync(url, skip_memory_cache=True, **requests[name])
            spent[name].append((time.process_time() - start) / block * 1000)
    return spent


def overhead(spent, name, base="plain"):
    """The median over the rounds of name's CPU against base's in the same round, in %."""
    return (statistics.median(a / b for a, b in zip(spent[name], spent[base])) - 1) * 100


with pixload.Loader(allowed_schemes=pixload.Scheme.FILE | pixload.Scheme.HTTP, decode_threads=1) as loader:
    thumb = dict(size=(150, 150), mode="fill")
    thumbs = cpu_per_image_in_turn(loader, thumb_rounds, 10, {
        "plain": thumb, "round": dict(process=[pixload.RoundedCorners(12)], **thumb),
        "circle": dict(process=[pixload.Circle()], **thumb)})
    plain, rounded, circle = (statistics.median(thumbs[name]) for name in ("plain", "round", "circle"))
    print(f"150x150 thumbnail CPU (median of {thumb_rounds} rounds of 10): plain {plain:.3f} ms, "
          f"round:12 {rounded:.3f} ms ({overhead(thumbs, 'round'):+.1f} %), "
          f"circle {circle:.3f} ms ({overhead(thumbs, 'circle'):+.1f} %)")
    n = max(5, rounds // 20)
    whole = cpu_per_image(loader, n, format="rgba8-premul")
    blur = {s: cpu_per_image(loader, n, format="rgba8-premul", process=[pixload.Blur(s)]) - whole for s in (2, 40)}

rgba = PILImage.fromarray(np.dstack([photo, np.full(photo.shape[:2], 255, np.uint8)]), "RGBA")
pillow = {}
for s in (2, 40):
    best = None
    for _ in range(5):
        start = time.process_time()
        rgba.filter(ImageFilter.GaussianBlur(s))
        spent = (time.process_time() - start) * 1000
        best = spent if best is None else min(best, spent)
    pillow[s] = best
print(f"1024x768 blur CPU: pixload sigma 2 {blur[2]:.1f} ms, sigma 40 {blur[40]:.1f} ms "
      f"(ratio {max(blur.values()) / min(blur.values()):.2f}); Pillow GaussianBlur sigma 2 {pillow[2]:.1f} ms, "
      f"sigma 40 {pillow[40]:.1f} ms")
