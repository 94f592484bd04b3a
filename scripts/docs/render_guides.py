#!/usr/bin/env python3
"""scripts/docs/render_guides.py GUIDE_DIR OUT_DIR

Renders the guide pages (docs/guide/*.md: the index, one page per host, the cookbook) into
OUT_DIR/NAME.html with markdown2 (pdoc's own Markdown renderer, so the docs venv needs
nothing more), and writes OUT_DIR/style.css. Run after the C and Python references are in
OUT_DIR/c and OUT_DIR/python: links between guides (NAME.md) become NAME.html, and a code
span naming something the references define (`pxl_load`, `PXL_FLAG_RELOAD`,
`pixload.Table`) links to its entry.
"""
import glob
import html
import os
import re
import sys

import markdown2

EXTRAS = ["fenced-code-blocks", "tables", "header-ids", "code-friendly"]


def ids_in(path):
    if not os.path.exists(path):
        return set()
    return set(re.findall(r'\sid="([^"]+)"', open(path, encoding="utf-8").read()))


def main():
    guide_dir, out = sys.argv[1], sys.argv[2]
    c_ids = ids_in(os.path.join(out, "c", "index.html"))
    py_ids = ids_in(os.path.join(out, "python", "pixload.html"))

    def link_code(m):
        word = html.unescape(m.group(1))
        name = word.rstrip("()")
        if name in c_ids:
            return '<a href="c/index.html#%s"><code>%s</code></a>' % (name, m.group(1))
        if name.startswith("pixload.") and name[len("pixload."):] in py_ids:
            return '<a href="python/pixload.html#%s"><code>%s</code></a>' % (name[len("pixload."):], m.group(1))
        return m.group(0)

    pages = sorted(glob.glob(os.path.join(guide_dir, "*.md")))
    titles = {}
    for path in pages:
        first = open(path, encoding="utf-8").readline()
        titles[os.path.basename(path)[:-3]] = first.lstrip("# ").strip()
    order = ["index", "c-event-loop", "gtk", "qt-python", "asyncio", "rust", "cookbook"]
    nav_names = [n for n in order if n in titles] + sorted(set(titles) - set(order))
    for path in pages:
        name = os.path.basename(path)[:-3]
        text = open(path, encoding="utf-8").read()
        body = markdown2.markdown(text, extras=EXTRAS)
        # Guide-to-guide links as written for the repository (NAME.md) -> NAME.html.
        body = re.sub(r'href="([a-z0-9-]+)\.md(#[^"]*)?"', lambda m: 'href="%s.html%s"' % (m.group(1), m.group(2) or ""), body)
        # Code spans not already inside a link.
        parts = re.split(r"(<a [^>]*>.*?</a>|<pre>.*?</pre>)", body, flags=re.S)
        body = "".join(p if p.startswith("<a ") or p.startswith("<pre>") else
                       re.sub(r"<code>([^<]+)</code>", link_code, p) for p in parts)
        nav = " · ".join(
            ('<strong>%s</strong>' if n == name else '<a href="%s.html">%%s</a>' % n) % html.escape(
                "Contents" if n == "index" else titles[n]) for n in nav_names)
        nav += ' · <a href="c/index.html">C API</a> · <a href="python/pixload.html">Python API</a>'
        with open(os.path.join(out, name + ".html"), "w", encoding="utf-8") as f:
            f.write(PAGE % {"title": html.escape(titles[name]), "nav": nav, "body": body})
    with open(os.path.join(out, "style.css"), "w", encoding="utf-8") as f:
        f.write(CSS)
    print("render_guides.py: %d pages -> %s" % (len(pages), out))


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>%(title)s - pixload</title>
<link rel="stylesheet" href="style.css">
</head><body class="guide">
<nav class="top">%(nav)s</nav>
<main>
%(body)s
</main></body></html>
"""

CSS = """body { font: 16px/1.5 system-ui, sans-serif; color: #1d1d1f; margin: 0; }
main { max-width: 52rem; padding: 1rem 2rem 4rem; }
nav.top { padding: .6rem 2rem; background: #f3f3f5; border-bottom: 1px solid #ddd; font-size: 14px; }
pre { background: #f6f8fa; padding: .8rem 1rem; overflow-x: auto; font-size: 14px; line-height: 1.4; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 90%; }
a { color: #0b57d0; text-decoration: none; } a:hover { text-decoration: underline; }
table { border-collapse: collapse; margin: 1rem 0; }
td, th { border: 1px solid #ddd; padding: .3rem .6rem; vertical-align: top; text-align: left; }
td p { margin: 0; }
body.reference { display: flex; }
body.reference nav.toc { width: 18rem; flex: none; height: 100vh; overflow-y: auto; position: sticky; top: 0;
  font-size: 13px; background: #f7f7f9; padding: 1rem; box-sizing: border-box; border-right: 1px solid #ddd; }
nav.toc ul { padding-left: 1rem; margin: .2rem 0; }
body.reference main { max-width: 60rem; }
.decl { border-top: 1px solid #e4e4e8; padding-top: .4rem; margin-top: 1.2rem; }
.decl h4 { margin: .3rem 0; font-family: ui-monospace, monospace; }
.kind { color: #777; font-weight: normal; font-size: 80%; }
.trailing { margin: -.4rem 0 .6rem 1rem; color: #333; }
tr.since td { background: #f3f3f5; font-style: italic; }
.note { border-left: 3px solid #c9d7f2; padding-left: .8rem; color: #333; }
.version { color: #666; }
"""

if __name__ == "__main__":
    main()
