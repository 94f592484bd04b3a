#!/usr/bin/env python3
"""bench/scroll_plot.py TRACE PNG [--title TEXT]

Draws bench/scroll.c's --trace as a timeline, one panel per strategy (a no cancel, b
per-row cancel, c the table): time across (ms from the session's start), rows down.
  grey    the row on screen (its visits)
  blue    a load under way: start to its callback (a, b), or, for the table (which reports
          only visible rows' results), from its last ask for the row's request to the row
          drawn; its other asks (a prefetch, a memory lookup, a load it cancelled: the
          table does not say which) have no known end: a tick
  red     the same for a row never drawn in the session whose bytes the server sent:
          waste
  orange  a cancel (b)
  green   the row drawn (a dot; darker: from memory at once)
Loads still under way at the session's end run to the right edge (a's run on after it).
Each panel's caption: loads started, cancelled, rows drawn, wasted bytes and rows.
Pillow only.
"""
import argparse
import collections
import sys

from PIL import Image, ImageDraw, ImageFont

NAMES = {"a": "a  no cancel", "b": "b  per-row cancel", "c": "c  the table"}
WIDTH, PANEL_H, LEFT, RIGHT, TOP, GAP = 1600, 460, 70, 20, 50, 60
COLORS = {"visit": (215, 215, 215), "load": (40, 90, 220), "waste": (220, 40, 40), "cancel": (245, 150, 20),
          "drawn": (20, 170, 60), "memory": (10, 100, 30), "axis": (60, 60, 60), "grid": (235, 235, 235)}


def read_trace(path):
    events = collections.defaultdict(lambda: collections.defaultdict(list))  # strategy -> row -> [(event, ms, detail)]
    for line in open(path):
        parts = line.rstrip("\n").split("\t")
        if len(parts) < 4:
            continue
        strategy, row, event, ms = parts[0], int(parts[1]), parts[2], float(parts[3])
        events[strategy][row].append((event, ms, parts[4:]))
    return events


def spans(row_events, strategy):
    """(start, end) loads of a row, end None when nothing closes it: a, b: each start to
    its load's callback or cancel; c: the table's last ask before the row was drawn to
    the drawing (a row drawn from memory: at once), and every other ask on its own."""
    out, open_at = [], None
    closers = ("finish", "cancel") if strategy != "c" else ("drawn",)
    for event, ms, _ in sorted(row_events, key=lambda e: e[1]):
        if event == "start":
            if open_at is not None:
                out.append((open_at, None))
            open_at = ms
        elif event in closers and open_at is not None:
            out.append((open_at, ms))
            open_at = None
    if open_at is not None:
        out.append((open_at, None))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("png")
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    events = read_trace(args.trace)
    strategies = [s for s in "abc" if s in events]
    if not strategies:
        print("scroll_plot.py: %s has no events" % args.trace, file=sys.stderr)
        return 1
    rows = max(row for s in strategies for row in events[s]) + 1
    # The time axis: the longest session (its last visit's end), a little more.
    session_end = {s: max((float(d[1]) for r in events[s].values() for e, _, d in r if e == "visit"), default=0.0)
                   for s in strategies}
    t_max = max(session_end.values()) * 1.03 or 1.0
    height = TOP + len(strategies) * (PANEL_H + GAP)
    image = Image.new("RGB", (WIDTH, height), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    plot_w = WIDTH - LEFT - RIGHT
    x_of = lambda ms: LEFT + min(max(ms, 0.0), t_max) / t_max * plot_w
    draw.text((LEFT, 12), args.title or args.trace, fill="black", font=font)
    legend = [("on screen", "visit"), ("loading", "load"), ("loading, never drawn (waste)", "waste"),
              ("cancel", "cancel"), ("drawn", "drawn"), ("drawn from memory", "memory")]
    x = LEFT + 420
    for label, key in legend:
        draw.rectangle((x, 14, x + 14, 24), fill=COLORS[key])
        draw.text((x + 18, 12), label, fill="black", font=font)
        x += 30 + 7 * len(label)

    for i, s in enumerate(strategies):
        top = TOP + i * (PANEL_H + GAP) + 18
        y_of = lambda row: top + row / rows * PANEL_H
        row_h = max(1.0, PANEL_H / rows)
        # grid: a line a second, rows every 100
        for ms in range(0, int(t_max) + 1, 1000):
            draw.line((x_of(ms), top, x_of(ms), top + PANEL_H), fill=COLORS["grid"])
            draw.text((x_of(ms) - 8, top + PANEL_H + 3), "%ds" % (ms // 1000), fill=COLORS["axis"], font=font)
        for row in range(0, rows, 100):
            draw.text((8, y_of(row) - 5), "row %d" % row, fill=COLORS["axis"], font=font)
        draw.rectangle((LEFT, top, LEFT + plot_w, top + PANEL_H), outline=COLORS["axis"])
        started = cancelled = drawn_rows = waste_rows = 0
        waste_bytes = total_bytes = 0
        per_row = events[s]
        for row, evs in per_row.items():  # visits under everything
            for event, _, detail in evs:
                if event == "visit":
                    draw.rectangle((x_of(float(detail[0])), y_of(row), x_of(float(detail[1])), y_of(row) + row_h),
                                   fill=COLORS["visit"])
        for row, evs in sorted(per_row.items()):
            drawn = any(e == "drawn" for e, _, _ in evs)
            sent = sum(int(d[0]) for e, _, d in evs if e == "bytes")
            total_bytes += sent
            drawn_rows += drawn
            if not drawn and sent:
                waste_rows += 1
                waste_bytes += sent
            color = COLORS["load"] if drawn or not sent else COLORS["waste"]
            y = y_of(row) + row_h / 2
            for start, end in spans(evs, s):
                started += 1
                if end is None and s == "c":
                    draw.line((x_of(start), y - 2, x_of(start), y + 2), fill=color, width=2)
                else:
                    draw.line((x_of(start), y, x_of(t_max if end is None else end), y), fill=color, width=1)
            for event, ms, detail in evs:
                if event == "cancel":
                    cancelled += 1
                    draw.line((x_of(ms), y - 2, x_of(ms), y + 2), fill=COLORS["cancel"], width=2)
                elif event == "drawn":
                    key = "memory" if detail and detail[0] == "memory" else "drawn"
                    draw.ellipse((x_of(ms) - 2, y - 2, x_of(ms) + 2, y + 2), fill=COLORS[key])
        what = "requests asked" if s == "c" else "loads started"
        caption = ("%s: %d %s, %d cancelled, %d rows drawn; wasted %.1f MB on %d rows never drawn, "
                   "%.1f MB in total (server's count)"
                   % (NAMES.get(s, s), started, what, cancelled, drawn_rows, waste_bytes / 1e6, waste_rows,
                      total_bytes / 1e6))
        draw.text((LEFT, top - 15), caption, fill="black", font=font)
    image.save(args.png)
    print("scroll_plot.py: %s (%d strategies, %d rows, %.1f s)" % (args.png, len(strategies), rows, t_max / 1000))
    return 0


if __name__ == "__main__":
    sys.exit(main())
