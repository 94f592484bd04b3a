#!/usr/bin/env python3
"""scripts/docs/c_reference.py HEADER OUT_HTML

The C reference, one HTML page rendered from include/pixload.h, whose comments are the
documentation (the header is the contract): its overview, then each section of the
header in order, every declaration with its comment, structs and enums with a table of
their fields and values, names in the text linked to their entries.

A public declaration without documentation is a warning, printed as
"HEADER:LINE: warning: NAME ..." (as compilers print them), and any warning fails the run
(exit 1), after writing the page. Public: every PXL_API function, typedef, enum value,
struct field and #define of the header (its include guard and PXL_API excepted).
Documented: a comment block right above the declaration, or above the run of
declarations it belongs to (no blank line between: the image accessors share one); a
comment on the declaration's own line (flags, enum values, struct fields). A struct
field or enum value needs its own comment.

Only the standard library: the header's comment style is plain C comments, so Doxygen
would need every one rewritten.
"""
import html
import re
import sys

SKIP_DEFINES = {"PIXLOAD_H", "PXL_API"}
BANNER = re.compile(r"^/\* -{20,}$")


class Decl:
    def __init__(self, kind, name, line, code):
        self.kind = kind          # function, macro, typedef, struct, enum, opaque, callback
        self.name = name
        self.line = line
        self.code = code          # the declaration's text, PXL_API dropped
        self.doc = ""             # the group's comment
        self.trailing = ""        # the comment on its own line(s)
        self.members = []         # (name, type or value, comment, since-note, line)


def comment_text(lines):
    """The text of a /* ... */ block given as its source lines, prefixes stripped."""
    text = "\n".join(lines).strip()
    text = re.sub(r"^/\*+", "", text)
    text = re.sub(r"\*+/$", "", text)
    out = []
    for ln in text.split("\n"):
        ln = ln.rstrip()
        ln = re.sub(r"^\s*\* ?", "", ln) if re.match(r"^\s*\*", ln) else ln.strip()
        out.append(ln)
    while out and not out[0].strip():
        out.pop(0)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out)


def split_trailing(line):
    """(code, comment start or None) of a line with a trailing /* comment."""
    i = line.find("/*")
    if i < 0:
        return line, None
    return line[:i].rstrip(), line[i:]


def read_comment(lines, i, first):
    """Collects a comment that starts with `first` at line i; returns (text lines, next i)."""
    block = [first]
    while "*/" not in block[-1]:
        i += 1
        block.append(lines[i])
    return block, i + 1


def parse(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    overview = ""
    sections = []             # [title, intro, [items]] where item is Decl or ("note", text)
    decls = []
    warnings = []
    i = 0
    pending = []              # comments right above (no blank line since)
    group_doc = None          # the doc of the run of declarations under way
    depth_if = 0
    section = None

    def start_section(title, intro):
        nonlocal section
        section = [title, intro, []]
        sections.append(section)

    def add(decl):
        nonlocal group_doc, pending
        if pending:
            group_doc = "\n\n".join(pending)
            pending = []
        decl.doc = group_doc or ""
        decls.append(decl)
        if section is None:
            start_section("Declarations", "")
        section[2].append(decl)

    while i < len(lines):
        raw = lines[i]
        s = raw.strip()
        if not s:
            # A blank line ends a run of declarations; a comment left pending is a note.
            if pending:
                if section is not None:
                    section[2].append(("note", "\n\n".join(pending)))
                pending = []
            group_doc = None
            i += 1
            continue
        if i == 0 and s.startswith("/*"):
            block, i = read_comment(lines, i, raw)
            overview = comment_text(block)
            continue
        if BANNER.match(s):
            block, i = read_comment(lines, i, raw)
            body = [ln for ln in block[1:-1]]
            text = comment_text(["/*"] + body + ["*/"])
            # The title is the banner's first sentence; the rest introduces the section.
            first, _, rest = text.partition("\n\n")
            m = re.match(r"(.+?\.)(\s+.*)?$", first.replace("\n", " "), re.S)
            title, intro = (m.group(1), (m.group(2) or "").strip()) if m else (first, "")
            intro = "\n\n".join(p for p in (intro, rest.strip()) if p)
            start_section(title.strip().rstrip("."), intro)
            pending, group_doc = [], None
            continue
        if s.startswith("/*"):
            block, i = read_comment(lines, i, raw)
            if group_doc is not None and not pending:
                # A comment inside a run starts a new group (the accessors' byte_count).
                group_doc = None
            pending.append(comment_text(block))
            continue
        if s.startswith("#if"):
            depth_if += 1
            i += 1
            continue
        if s.startswith("#endif"):
            depth_if -= 1
            i += 1
            continue
        if s.startswith("#define"):
            code, com = split_trailing(raw)
            start = i
            if com is not None:
                block, i = read_comment(lines, i, com)
            else:
                i += 1
            m = re.match(r"#define\s+(\w+)(\([^)]*\))?", code)
            name = m.group(1)
            if name in SKIP_DEFINES or depth_if > 0 and name.startswith("__"):
                continue
            d = Decl("macro", name, start + 1, code.strip())
            if com is not None:
                d.trailing = comment_text(block)
            add(d)
            continue
        if s.startswith("#") or s.startswith("extern") or s == "}":
            i += 1
            continue
        if s.startswith("PXL_API"):
            start = i
            text = [s]
            while not text[-1].rstrip().endswith(";"):
                i += 1
                text.append(lines[i].strip())
            i += 1
            code = re.sub(r"^PXL_API\s+", "", " ".join(text))
            name = re.search(r"(pxl_\w+)\s*\(", code).group(1)
            add(Decl("function", name, start + 1, code))
            continue
        if s.startswith("typedef"):
            start = i
            m = re.match(r"typedef struct (\w+) (\w+);", s)
            if m:
                add(Decl("opaque", m.group(2), start + 1, s))
                i += 1
                continue
            m = re.match(r"typedef (struct|enum) (\w+) \{", s)
            if m:
                kind, tag = m.group(1), m.group(2)
                d = Decl(kind, tag, start + 1, "")
                i += 1
                since = ""
                while not lines[i].strip().startswith("}"):
                    ln = lines[i]
                    st = ln.strip()
                    if st.startswith("/*"):
                        block, i = read_comment(lines, i, ln)
                        since = comment_text(block)
                        continue
                    code, com = split_trailing(ln)
                    text = ""
                    if com is not None:
                        block, nxt = read_comment(lines, i, com)
                        text = comment_text(block)
                    else:
                        nxt = i + 1
                    code = code.strip().rstrip(",;")
                    if kind == "enum":
                        mname, _, value = code.partition("=")
                        d.members.append((mname.strip(), value.strip(), text, since, i + 1))
                    else:
                        mm = re.match(r"(.*?)(\w+)$", code) if "(" not in code else None
                        mtype, mname = (mm.group(1).strip(), mm.group(2)) if mm else ("", code)
                        d.members.append((mname, mtype, text, since, i + 1))
                    since = ""
                    i = nxt
                d.code = "typedef %s %s { ... } %s;" % (kind, tag, tag)
                i += 1
                add(d)
                continue
            text = [s]
            while not text[-1].rstrip().endswith(";"):
                i += 1
                text.append(lines[i].strip())
            i += 1
            code = " ".join(text)
            m = re.search(r"\(\*(\w+)\)", code) or re.search(r"(\w+);$", code)
            add(Decl("callback" if "(*" in code else "typedef", m.group(1), start + 1, code))
            continue
        raise SystemExit("%s:%d: cannot parse: %s" % (path, i + 1, s))

    for d in decls:
        if not (d.doc or d.trailing):
            warnings.append("%s:%d: warning: %s %s is not documented" % (path, d.line, d.kind, d.name))
        for (mname, _, text, _, line) in d.members:
            if not text:
                warnings.append("%s:%d: warning: %s of %s is not documented" % (path, line, mname, d.name))
    return overview, sections, decls, warnings


def anchors_of(decls):
    names = set()
    for d in decls:
        names.add(d.name)
        for m in d.members:
            names.add(m[0] if d.kind == "enum" else "%s.%s" % (d.name, m[0]))
    return names


def linkify(text, anchors, self_name=None):
    """Escapes text and links the header's names (pxl_load, PXL_OK, pxl_config.log)."""
    out = []
    pos = 0
    for m in re.finditer(r"\b(pxl_\w+|PXL_\w+)(\.\w+)?(\(\))?", text):
        out.append(html.escape(text[pos:m.start()]))
        name, field, call = m.group(1), m.group(2) or "", m.group(3) or ""
        target = name + field if name + field in anchors else name
        word = html.escape(m.group(0))
        if target in anchors and target != self_name:
            out.append('<a href="#%s"><code>%s</code></a>' % (target, word))
        else:
            out.append("<code>%s</code>" % word)
        pos = m.end()
    out.append(html.escape(text[pos:]))
    return "".join(out)


def prose(text, anchors, self_name=None):
    """Paragraphs, "Title / -----" headings and "- " or "1. " lists of a comment."""
    lines = text.split("\n")
    out, para, items = [], [], []

    def flush():
        if para:
            out.append("<p>%s</p>" % linkify(" ".join(para), anchors, self_name))
            para.clear()
        if items:
            tag = "ol" if items[0][0] == "ol" else "ul"
            out.append("<%s>%s</%s>" % (tag, "".join(
                "<li>%s</li>" % linkify(" ".join(t), anchors, self_name) for _, t in items), tag))
            items.clear()

    k = 0
    while k < len(lines):
        ln = lines[k]
        if k + 1 < len(lines) and re.match(r"^-{3,}$", lines[k + 1].strip()) and ln.strip():
            flush()
            out.append("<h3>%s</h3>" % html.escape(ln.strip()))
            k += 2
            continue
        st = ln.strip()
        bullet = re.match(r"^(-|\d+\.)\s+(.*)", st)
        if not st:
            flush()
        elif bullet and (ln.startswith(" ") or not para):
            if para:
                flush()
            items.append(("ol" if bullet.group(1)[0].isdigit() else "ul", [bullet.group(2)]))
        elif items and ln.startswith("  "):
            items[-1][1].append(st)
        else:
            if items:
                flush()
            para.append(st)
        k += 1
    flush()
    return "\n".join(out)


def code_html(code, anchors, self_name, anchor):
    return '<pre id="%s"><code>%s</code></pre>' % (
        anchor, linkify(code, anchors, self_name).replace("<code>", "").replace("</code>", ""))


def render(overview, sections, decls, version, title):
    anchors = anchors_of(decls)
    slug = lambda t: "section-" + re.sub(r"[^a-z0-9]+", "-", t.lower()).strip("-")
    toc = []
    body = []
    used = set()
    for title_s, intro, items in sections:
        sid = slug(title_s)
        names = [it.name for it in items if isinstance(it, Decl)]
        toc.append('<li><a href="#%s">%s</a><ul>%s</ul></li>' % (
            sid, html.escape(title_s),
            "".join('<li><a href="#%s">%s</a></li>' % (n, n) for n in dict.fromkeys(names))))
        body.append('<section id="%s"><h2>%s</h2>' % (sid, html.escape(title_s)))
        if intro:
            body.append(prose(intro, anchors))
        k = 0
        while k < len(items):
            it = items[k]
            if not isinstance(it, Decl):
                body.append('<div class="note">%s</div>' % prose(it[1], anchors))
                k += 1
                continue
            # A run of declarations under one comment (the image accessors, the flags) is
            # shown as the header shows it: their declarations, then the comment once.
            group = [it]
            while (k + len(group) < len(items) and isinstance(items[k + len(group)], Decl)
                   and it.doc and items[k + len(group)].doc is it.doc and not it.members
                   and not items[k + len(group)].members):
                group.append(items[k + len(group)])
            k += len(group)
            body.append('<div class="decl">')
            kinds = sorted({d.kind for d in group})
            body.append('<h4>%s <span class="kind">%s</span></h4>' % (
                ", ".join(d.name for d in group), ", ".join(kinds)))
            for d in group:
                # pxl_config_init is a function and a macro of the same name: one anchor each.
                anchor = d.name if d.name not in used else d.name + "-" + d.kind
                used.add(anchor)
                if d.kind in ("struct", "enum"):
                    body.append('<span id="%s"></span>' % anchor)
                else:
                    body.append(code_html(d.code, anchors, d.name, anchor))
                if d.trailing:
                    body.append('<div class="trailing">%s</div>' % prose(d.trailing, anchors, d.name))
            if it.doc:
                body.append(prose(it.doc, anchors, it.name))
            d = it
            if d.members:
                head = ("value", "name") if d.kind == "enum" else ("type", "field")
                rows = []
                for (mname, mt, text, since, _) in d.members:
                    mid = mname if d.kind == "enum" else "%s.%s" % (d.name, mname)
                    if since:
                        rows.append('<tr class="since"><td colspan="3">%s</td></tr>' % html.escape(since))
                    rows.append('<tr id="%s"><td><code>%s</code></td><td><code>%s</code></td><td>%s</td></tr>' % (
                        mid, html.escape(mname), linkify(mt, anchors).replace("<code>", "").replace("</code>", ""),
                        prose(text, anchors, mid)))
                body.append('<table><tr><th>%s</th><th>%s</th><th></th></tr>%s</table>' % (
                    head[1], head[0], "".join(rows)))
            body.append("</div>")
        body.append("</section>")
    return PAGE % {
        "title": html.escape(title), "version": html.escape(version),
        "overview": prose(overview, anchors), "toc": "".join(toc), "body": "\n".join(body),
    }


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>%(title)s</title>
<link rel="stylesheet" href="../style.css">
</head><body class="reference">
<nav class="toc"><p><a href="../index.html">pixload documentation</a></p>
<p><a href="#overview">Overview</a></p><ul>%(toc)s</ul></nav>
<main>
<h1>%(title)s</h1>
<p class="version">pixload %(version)s, rendered from <code>include/pixload.h</code>: the header is the contract.</p>
<section id="overview"><h2>Overview</h2>
%(overview)s
</section>
%(body)s
</main></body></html>
"""


def main():
    header, out = sys.argv[1], sys.argv[2]
    overview, sections, decls, warnings = parse(header)
    text = open(header, encoding="utf-8").read()
    version = re.search(r'#define PXL_VERSION_STRING "([^"]+)"', text).group(1)
    overview = overview.split("\n", 1)[1].strip() if "\n" in overview else overview
    with open(out, "w", encoding="utf-8") as f:
        f.write(render(overview, sections, decls, version, "pixload.h: the C API"))
    for w in warnings:
        print(w, file=sys.stderr)
    members = sum(len(d.members) for d in decls)
    print("c_reference.py: %d declarations, %d fields and values, %d warnings -> %s"
          % (len(decls), members, len(warnings), out))
    return 1 if warnings else 0


if __name__ == "__main__":
    sys.exit(main())
