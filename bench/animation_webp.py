"""bench/animation_webp.py OUT [FRAMES WIDTH HEIGHT DURATION_MS]: the long animated WebP
bench/animation.sh plays (the issue's case: 2,000 frames of 1280x720, lossy): a fixed
gradient under a block that moves and changes colour and a bar that grows, every frame
different, DURATION_MS (40) each, looping forever. Pillow draws the frames into a
temporary directory as PNG, img2webp (libwebp's tools) encodes them, fastest method."""
import os
import subprocess
import sys
import tempfile

from PIL import Image, ImageDraw


def main():
    out = sys.argv[1]
    frames, width, height, duration = (int(v) for v in (sys.argv[2:6] or (2000, 1280, 720, 40)))
    background = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    with tempfile.TemporaryDirectory() as tmp:
        args = ["img2webp", "-loop", "0"]
        for i in range(frames):
            frame = background.copy()
            draw = ImageDraw.Draw(frame)
            x = (i * 7) % (width - width // 6)
            y = (i * 3) % (height - height // 6)
            draw.rectangle([x, y, x + width // 6, y + height // 6], fill=(i % 256, 255 - i % 256, (i * 5) % 256))
            draw.rectangle([0, height - 8, (i * width) // frames, height], fill=(255, 64, 0))
            path = os.path.join(tmp, "%05d.png" % i)
            frame.save(path, compress_level=1)
            args += ["-lossy", "-q", "40", "-m", "0", "-d", str(duration), path]
        subprocess.run(args + ["-o", out], check=True, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
