#!/usr/bin/env python3
"""bench/svg_writer.py OUT_DIR: the SVG drawings of the codec modules' bench rows
(scripts/bench-modules.sh), moderately complex and the same on every run (seeded):

  icons.svg         1024x768: a grid of 48 icons of paths, rounded rectangles and
                    circles, strokes, a linear gradient each (a list of logos or icons)
  chart.svg         1200x800: grid lines, dashed guides, 5 polylines of 400 points with
                    translucent areas under them (a dashboard)
  illustration.svg  800x800: radial gradients, 120 translucent Bezier blobs, a clip path,
                    a group with opacity and a Gaussian blur (a landing-page drawing)
  flags.svg         900x600: 60 flag-like tiles of stripes and five-pointed stars,
                    rotated and scaled through transforms (a list of flags)

No text (it would measure the fonts installed, not the renderer) and nothing external.
"""
import math
import os
import random
import sys


def color(rng):
    return "#%02x%02x%02x" % (rng.randrange(256), rng.randrange(256), rng.randrange(256))


def icons(rng):
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="1024" height="768" viewBox="0 0 1024 768">', "<defs>"]
    for i in range(48):
        out.append(f'<linearGradient id="g{i}" x1="0" y1="0" x2="1" y2="1">'
                   f'<stop offset="0" stop-color="{color(rng)}"/><stop offset="1" stop-color="{color(rng)}"/>'
                   "</linearGradient>")
    out.append("</defs>")
    out.append('<rect width="1024" height="768" fill="#f4f4f6"/>')
    for i in range(48):
        x, y = 16 + (i % 8) * 126, 16 + (i // 8) * 124
        out.append(f'<g transform="translate({x} {y})">')
        out.append(f'<rect x="4" y="4" width="104" height="104" rx="22" fill="url(#g{i})" '
                   f'stroke="{color(rng)}" stroke-width="2"/>')
        for _ in range(3):
            cx, cy, r = rng.uniform(30, 80), rng.uniform(30, 80), rng.uniform(8, 26)
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r:.1f}" fill="{color(rng)}" fill-opacity="0.8"/>')
        d = f"M{rng.uniform(20, 40):.1f} {rng.uniform(60, 90):.1f}"
        for _ in range(4):
            d += " C" + " ".join(f"{rng.uniform(15, 95):.1f} {rng.uniform(15, 95):.1f}" for _ in range(3))
        out.append(f'<path d="{d} Z" fill="none" stroke="#ffffff" stroke-width="5" stroke-linecap="round" '
                   'stroke-linejoin="round"/>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


def chart(rng):
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="1200" height="800">',
           '<rect width="1200" height="800" fill="white"/>']
    for x in range(60, 1180, 40):
        out.append(f'<line x1="{x}" y1="40" x2="{x}" y2="760" stroke="#e0e0e0" stroke-width="1"/>')
    for y in range(40, 780, 40):
        out.append(f'<line x1="60" y1="{y}" x2="1160" y2="{y}" stroke="#e0e0e0" stroke-width="1"/>')
    for y in (200, 400, 600):
        out.append(f'<line x1="60" y1="{y}" x2="1160" y2="{y}" stroke="#888" stroke-dasharray="8 6"/>')
    for s in range(5):
        value, points = rng.uniform(200, 600), []
        for k in range(400):
            value = min(740, max(60, value + rng.gauss(0, 12)))
            points.append(f"{60 + k * 1100 / 399:.2f},{value:.2f}")
        c = color(rng)
        out.append(f'<polygon points="60,760 {" ".join(points)} 1160,760" fill="{c}" fill-opacity="0.15"/>')
        out.append(f'<polyline points="{" ".join(points)}" fill="none" stroke="{c}" stroke-width="2.5" '
                   'stroke-linejoin="round"/>')
    out.append('<path d="M60 40 V760 H1160" fill="none" stroke="#333" stroke-width="2"/>')
    out.append("</svg>")
    return "\n".join(out)


def illustration(rng):
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="800" height="800" viewBox="0 0 400 400">', "<defs>",
           '<radialGradient id="sky" cx="0.5" cy="0.3" r="0.8"><stop offset="0" stop-color="#fff6d5"/>'
           '<stop offset="0.6" stop-color="#8fc1e3"/><stop offset="1" stop-color="#1d3557"/></radialGradient>',
           '<radialGradient id="sun"><stop offset="0" stop-color="#fff"/><stop offset="1" stop-color="#ffb703" '
           'stop-opacity="0"/></radialGradient>',
           '<filter id="blur" x="-20%" y="-20%" width="140%" height="140%"><feGaussianBlur stdDeviation="6"/></filter>',
           '<clipPath id="frame"><circle cx="200" cy="200" r="190"/></clipPath>', "</defs>",
           '<g clip-path="url(#frame)">', '<rect width="400" height="400" fill="url(#sky)"/>',
           '<circle cx="280" cy="110" r="70" fill="url(#sun)" filter="url(#blur)"/>', '<g opacity="0.85">']
    for _ in range(120):
        x, y, r = rng.uniform(0, 400), rng.uniform(150, 420), rng.uniform(10, 60)
        d = f"M{x - r:.1f} {y:.1f}"
        for k in range(4):
            a0, a1 = k * math.pi / 2, (k + 1) * math.pi / 2
            jitter = lambda: rng.uniform(0.7, 1.3) * r
            d += (f" C{x + jitter() * math.cos(a0 + 0.5):.1f} {y + jitter() * math.sin(a0 + 0.5):.1f}"
                  f" {x + jitter() * math.cos(a1 - 0.5):.1f} {y + jitter() * math.sin(a1 - 0.5):.1f}"
                  f" {x + r * math.cos(a1 + math.pi):.1f} {y + r * math.sin(a1 + math.pi):.1f}")
        out.append(f'<path d="{d} Z" fill="{color(rng)}" fill-opacity="{rng.uniform(0.3, 0.8):.2f}"/>')
    out += ["</g>", "</g>", '<circle cx="200" cy="200" r="190" fill="none" stroke="#1d3557" stroke-width="6"/>',
            "</svg>"]
    return "\n".join(out)


def star(cx, cy, r):
    points = []
    for k in range(10):
        radius = r if k % 2 == 0 else r * 0.38
        a = -math.pi / 2 + k * math.pi / 5
        points.append(f"{cx + radius * math.cos(a):.2f},{cy + radius * math.sin(a):.2f}")
    return " ".join(points)


def flags(rng):
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="900" height="600">', '<rect width="900" height="600" fill="#fafafa"/>']
    for i in range(60):
        x, y = 10 + (i % 10) * 89, 10 + (i // 10) * 98
        out.append(f'<g transform="translate({x} {y}) rotate({rng.uniform(-4, 4):.1f} 40 27) scale(0.9)">')
        stripes = rng.choice([3, 5, 7, 13])
        vertical = rng.random() < 0.4
        for s in range(stripes):
            c = color(rng) if s % 2 == 0 or stripes == 3 else "#ffffff"
            if vertical:
                out.append(f'<rect x="{s * 80 / stripes:.2f}" y="0" width="{80 / stripes + 0.2:.2f}" height="54" fill="{c}"/>')
            else:
                out.append(f'<rect x="0" y="{s * 54 / stripes:.2f}" width="80" height="{54 / stripes + 0.2:.2f}" fill="{c}"/>')
        if rng.random() < 0.6:
            out.append(f'<rect width="34" height="29" fill="{color(rng)}"/>')
            for _ in range(rng.choice([1, 5, 9])):
                out.append(f'<polygon points="{star(rng.uniform(5, 29), rng.uniform(5, 24), rng.uniform(2, 6))}" '
                           'fill="#ffffff"/>')
        out.append('<rect width="80" height="54" fill="none" stroke="#00000040" stroke-width="1"/>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, draw in (("icons", icons), ("chart", chart), ("illustration", illustration), ("flags", flags)):
        with open(os.path.join(out, name + ".svg"), "w") as f:
            f.write(draw(random.Random(name)) + "\n")


if __name__ == "__main__":
    main()
