#!/usr/bin/env python3
"""Loads a grid of thumbnails with asyncio and saves them as one contact sheet (PNG).

    python3 contact_sheet.py -o sheet.png URL...
    python3 contact_sheet.py -o sheet.png --urls urls.txt --size 150 --columns 6

Needs `pip install ./bindings/python pillow` and libpixload (`make install`, or
PIXLOAD_LIBRARY=build/lib/libpixload.so.0). Every thumbnail is loaded concurrently;
images that fail leave a grey cell and a line on stderr.
"""
import argparse
import asyncio
import sys

from PIL import Image

import pixload


def read_urls(args):
    urls = list(args.url)
    if args.urls:
        with open(args.urls) as f:
            urls += [line.split("#", 1)[0].strip() for line in f]
    return [u for u in urls if u]


async def load_all(urls, size):
    async with pixload.Loader() as loader:
        async def one(url):
            try:
                return await loader.fetch(url, size=(size, size), mode="fill", format="rgba8")
            except pixload.PixloadError as e:
                print(f"contact_sheet: {url}: {e}", file=sys.stderr)
                return None
        images = await asyncio.gather(*(one(u) for u in urls))
        # Pillow copies the pixels here, so the sheet no longer needs the loader.
        return [im.to_pil() if im is not None else None for im in images]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", nargs="*", help="image URLs (http, https)")
    parser.add_argument("--urls", help="a file of URLs, one a line ('#' starts a comment)")
    parser.add_argument("-o", "--output", default="contact-sheet.png", help="PNG to write")
    parser.add_argument("--size", type=int, default=150, help="thumbnail side in pixels")
    parser.add_argument("--columns", type=int, default=5)
    parser.add_argument("--gap", type=int, default=4)
    args = parser.parse_args()
    urls = read_urls(args)
    if not urls:
        parser.error("no URLs: give them as arguments or with --urls FILE")

    thumbs = asyncio.run(load_all(urls, args.size))
    columns = min(args.columns, len(thumbs))
    rows = (len(thumbs) + columns - 1) // columns
    cell = args.size + args.gap
    sheet = Image.new("RGBA", (columns * cell + args.gap, rows * cell + args.gap), (255, 255, 255, 255))
    for i, thumb in enumerate(thumbs):
        x = args.gap + (i % columns) * cell
        y = args.gap + (i // columns) * cell
        if thumb is None:
            sheet.paste((200, 200, 200, 255), (x, y, x + args.size, y + args.size))
        else:  # centred: an image smaller than the cell is never scaled up
            ox, oy = (args.size - thumb.width) // 2, (args.size - thumb.height) // 2
            sheet.alpha_composite(thumb, (x + ox, y + oy))
    sheet.convert("RGB").save(args.output)
    loaded = sum(t is not None for t in thumbs)
    print(f"{args.output}: {loaded}/{len(thumbs)} images, {columns}x{rows} grid")
    return 0 if loaded == len(thumbs) else 1


if __name__ == "__main__":
    sys.exit(main())
