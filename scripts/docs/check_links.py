#!/usr/bin/env python3
"""scripts/docs/check_links.py DOCS_DIR

Every internal link of the rendered documentation resolves: for each href and src of
every .html under DOCS_DIR that is not an absolute URL (http:, https:, mailto:, data:,
javascript:), the file exists (inside DOCS_DIR: the pages ship as one folder) and a
#fragment names an id (or <a name>) of that page. Also every id of a page is unique.
Prints each broken link as "PAGE: broken link HREF (why)" and a summary; exits 1 if any.
"""
import html.parser
import os
import sys
import urllib.parse


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links = []
        self.ids = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("href", "src"):
            if attrs.get(key) is not None and not (tag == "link" and attrs.get("rel") in ("canonical", "alternate")):
                self.links.append(attrs[key])
        if attrs.get("id"):
            self.ids.append(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.append(attrs["name"])


def main():
    root = os.path.realpath(sys.argv[1])
    pages = {}
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".html"):
                path = os.path.join(folder, name)
                page = Page()
                page.feed(open(path, encoding="utf-8").read())
                pages[path] = page
    broken = []
    checked = 0
    for path, page in sorted(pages.items()):
        rel = os.path.relpath(path, root)
        seen = set()
        for i in page.ids:
            if i in seen:
                broken.append("%s: duplicate id %r" % (rel, i))
            seen.add(i)
        for href in page.links:
            url = urllib.parse.urlsplit(href)
            if url.scheme or href.startswith("//"):
                continue
            checked += 1
            target = path if not url.path else os.path.realpath(
                os.path.join(os.path.dirname(path), urllib.parse.unquote(url.path)))
            if not (target == root or target.startswith(root + os.sep)):
                broken.append("%s: broken link %s (outside the docs folder)" % (rel, href))
            elif os.path.isdir(target):
                if not os.path.exists(os.path.join(target, "index.html")):
                    broken.append("%s: broken link %s (a folder without index.html)" % (rel, href))
            elif not os.path.exists(target):
                broken.append("%s: broken link %s (no such file)" % (rel, href))
            elif url.fragment and target.endswith(".html"):
                if url.fragment not in pages[target].ids:
                    broken.append("%s: broken link %s (no id %r there)" % (rel, href, url.fragment))
    for b in broken:
        print(b)
    print("check_links.py: %d pages, %d internal links, %d broken" % (len(pages), checked, len(broken)))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
