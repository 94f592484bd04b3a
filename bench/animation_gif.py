"""bench/animation_gif.py OUT [FRAMES WIDTH HEIGHT]: the animated GIF bench/animation.c
measures (the issue's case: 150 frames of 480x270): a gradient that scrolls under moving
noise, every frame different and whole, 40 ms each, looping forever (Pillow)."""
import random
import sys

from PIL import Image


def main():
    out = sys.argv[1]
    frames, width, height = (int(v) for v in (sys.argv[2:5] or (150, 480, 270)))
    rng = random.Random(40)
    noise = bytes(rng.randrange(48) for _ in range(width * height))
    images = []
    for i in range(frames):
        shift = 3 * i
        pixels = bytearray(width * height * 3)
        for y in range(height):
            row = y * width
            for x in range(width):
                n = noise[(row + x + 7 * i) % len(noise)]
                o = 3 * (row + x)
                pixels[o] = (x + shift) * 255 // (width + 3 * frames) % 256
                pixels[o + 1] = (y * 255 // height + n) % 256
                pixels[o + 2] = (128 + n + i) % 256
        images.append(Image.frombytes("RGB", (width, height), bytes(pixels)).quantize(256))
    images[0].save(out, save_all=True, append_images=images[1:], duration=40, loop=0, optimize=False)


if __name__ == "__main__":
    main()
