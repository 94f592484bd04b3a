"""bench/make_photo.py OUT [WIDTH HEIGHT]: a photo-like baseline JPEG (smooth gradients,
shapes and grain; quality 90, 4:2:0) for bench/stream_decode.c: 12 MP by default."""
import sys

from PIL import Image, ImageDraw, ImageFilter

out = sys.argv[1]
width, height = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (4000, 3000)
base = Image.linear_gradient("L").resize((width, height))
image = Image.merge("RGB", (base, base.rotate(90).resize((width, height)), base.transpose(Image.FLIP_LEFT_RIGHT)))
draw = ImageDraw.Draw(image)
for i in range(60):
    x, y = (i * 7919) % width, (i * 104729) % height
    r = 40 + (i * 37) % 400
    draw.ellipse((x - r, y - r, x + r, y + r), fill=((i * 53) % 256, (i * 97) % 256, (i * 31) % 256))
image = image.filter(ImageFilter.GaussianBlur(3))
grain = Image.effect_noise((width, height), 24).convert("RGB")
image = Image.blend(image, grain, 0.12)
image.save(out, "JPEG", quality=90, subsampling=2, progressive=False)
