"""HEIF grid images for Tests/modules/conformance.py: heif-enc (libheif 1.15) writes a grid only
around one padded tile, so a grid of several tiles is assembled here from heif-enc's files.

read_tile(path): the coded picture of the one HEVC (hvc1) item in a file heif-enc wrote (its
hvcC box, its ispe size, its data). write_grid(path, tiles, rows, columns, width, height):
a HEIF file whose primary item is a grid of those tiles (row by row) on a width x height
canvas; `ispe` and `tile_ispe` override the sizes the file declares for the grid and for each
tile (for a file that contradicts itself). write_overlay: the same for an overlay (iovl).
Only what libheif 1.15 needs: ftyp, meta (hdlr, pitm, iinf, iref dimg, iprp, iloc, idat
holding the descriptor), mdat.
"""
import struct


def _boxes(data, start, end):
    """(type, payload start, box end) of each box in data[start:end]."""
    at = start
    while at + 8 <= end:
        size, kind = struct.unpack(">I4s", data[at:at + 8])
        header = 8
        if size == 1:
            size = struct.unpack(">Q", data[at + 8:at + 16])[0]
            header = 16
        elif size == 0:
            size = end - at
        if size < header or at + size > end:
            raise ValueError("box overruns its parent")
        yield kind, at + header, at + size
        at += size


def _child(data, start, end, kind):
    for k, payload, box_end in _boxes(data, start, end):
        if k == kind:
            return payload, box_end
    raise ValueError(f"no {kind!r} box")


def read_tile(path):
    """(hvcC box bytes, (width, height) from its ispe, coded data) of the file's hvc1 item."""
    data = open(path, "rb").read()
    meta, meta_end = _child(data, 0, len(data), b"meta")
    meta += 4  # full box
    iinf, iinf_end = _child(data, meta, meta_end, b"iinf")
    hvc1 = None
    for kind, p, e in _boxes(data, iinf + 4 + (2 if data[iinf] == 0 else 4), iinf_end):
        if kind == b"infe" and data[p] == 2 and data[p + 8:p + 12] == b"hvc1":
            hvc1 = struct.unpack(">H", data[p + 4:p + 6])[0]
    if hvc1 is None:
        raise ValueError("no hvc1 item")
    iprp, iprp_end = _child(data, meta, meta_end, b"iprp")
    ipco, ipco_end = _child(data, iprp, iprp_end, b"ipco")
    props = [(kind, data[p - 8:e], data[p:e]) for kind, p, e in _boxes(data, ipco, ipco_end)]
    ipma, _ = _child(data, iprp, iprp_end, b"ipma")
    version, wide = data[ipma], data[ipma + 3] & 1
    at, hvcc, size = ipma + 8, None, None
    for _ in range(struct.unpack(">I", data[ipma + 4:ipma + 8])[0]):
        item = struct.unpack(">H" if version == 0 else ">I", data[at:at + (2 if version == 0 else 4)])[0]
        at += 2 if version == 0 else 4
        count = data[at]
        at += 1
        for _ in range(count):
            index = (struct.unpack(">H", data[at:at + 2])[0] & 0x7FFF) if wide else data[at] & 0x7F
            at += 2 if wide else 1
            if item == hvc1 and index:
                kind, box, payload = props[index - 1]
                if kind == b"hvcC":
                    hvcc = box
                elif kind == b"ispe":
                    size = struct.unpack(">II", payload[4:12])
    iloc, iloc_end = _child(data, meta, meta_end, b"iloc")
    version = data[iloc]
    offset_size, length_size = data[iloc + 4] >> 4, data[iloc + 4] & 15
    base_size = data[iloc + 5] >> 4
    if version > 1 or {offset_size, length_size} - {4, 8} or base_size not in (0, 4, 8):
        raise ValueError("an iloc this reader does not follow")
    at = iloc + 6
    count = struct.unpack(">H", data[at:at + 2])[0]
    at += 2

    def field(n):
        nonlocal at
        value = int.from_bytes(data[at:at + n], "big") if n else 0
        at += n
        return value

    for _ in range(count):
        item = field(2)
        method = field(2) & 15 if version == 1 else 0
        field(2)
        base = field(base_size)
        chunks = []
        for _ in range(field(2)):
            offset, length = field(offset_size), field(length_size)
            chunks.append(data[base + offset:base + offset + length])
        if item == hvc1:
            if method != 0:
                raise ValueError("tile data not in the file's body")
            return hvcc, size, b"".join(chunks)
    raise ValueError("the hvc1 item has no location")


def _box(kind, payload):
    return struct.pack(">I4s", 8 + len(payload), kind) + payload


def _full(kind, version, flags, payload):
    return _box(kind, struct.pack(">I", version << 24 | flags) + payload)


def write_grid(path, tiles, rows, columns, width, height, ispe=None, tile_ispe=None):
    assert len(tiles) == rows * columns
    descriptor = struct.pack(">BBBBHH", 0, 0, rows - 1, columns - 1, width, height)
    _write_derived(path, b"grid", tiles, descriptor, ispe or (width, height), tile_ispe)


def write_overlay(path, tiles, width, height, offsets, ispe=None):
    """An overlay (iovl) of the tiles at offsets [(x, y)] on a width x height canvas, its
    fields 32-bit (flags 1), an opaque white fill."""
    descriptor = struct.pack(">BB4HII", 0, 1, 65535, 65535, 65535, 65535, width, height)
    descriptor += b"".join(struct.pack(">ii", x, y) for x, y in offsets)
    _write_derived(path, b"iovl", tiles, descriptor, ispe or (width, height), None)


def _write_derived(path, kind, tiles, descriptor, ispe, tile_ispe):
    derived = len(tiles) + 1  # tiles are items 1..n, the derived image n+1
    infes = [_full(b"infe", 2, 1, struct.pack(">HH4s", i + 1, 0, b"hvc1") + b"\0") for i in range(len(tiles))]
    infes.append(_full(b"infe", 2, 0, struct.pack(">HH4s", derived, 0, kind) + b"\0"))
    iinf = _full(b"iinf", 0, 0, struct.pack(">H", len(infes)) + b"".join(infes))
    iref = _full(b"iref", 0, 0, _box(b"dimg", struct.pack(">HH", derived, len(tiles)) +
                                     b"".join(struct.pack(">H", i + 1) for i in range(len(tiles)))))
    props, ipma = [], []
    for i, (hvcc, size, _) in enumerate(tiles):
        props.append(hvcc)
        props.append(_full(b"ispe", 0, 0, struct.pack(">II", *(tile_ispe or size))))
        ipma.append(struct.pack(">HBBB", i + 1, 2, 0x80 | len(props) - 1, len(props)))
    props.append(_full(b"ispe", 0, 0, struct.pack(">II", *ispe)))
    ipma.append(struct.pack(">HBB", derived, 1, len(props)))
    iprp = _box(b"iprp", _box(b"ipco", b"".join(props)) +
                _full(b"ipma", 0, 0, struct.pack(">I", len(ipma)) + b"".join(ipma)))
    hdlr = _full(b"hdlr", 0, 0, struct.pack(">I4s12x", 0, b"pict") + b"\0")

    def meta(body_start):
        extents, at = [], body_start
        for i, (_, _, coded) in enumerate(tiles):  # construction method 0: the file's offsets
            extents.append(struct.pack(">HHHHII", i + 1, 0, 0, 1, at, len(coded)))
            at += len(coded)
        extents.append(struct.pack(">HHHHII", derived, 1, 0, 1, 0, len(descriptor)))  # 1: idat
        iloc = _full(b"iloc", 1, 0, struct.pack(">BBH", 0x44, 0x00, len(extents)) + b"".join(extents))
        return _full(b"meta", 0, 0, hdlr + _full(b"pitm", 0, 0, struct.pack(">H", derived)) + iinf + iref + iprp +
                     iloc + _box(b"idat", descriptor))

    ftyp = _box(b"ftyp", b"heic" + struct.pack(">I", 0) + b"mif1heic")
    body = b"".join(coded for _, _, coded in tiles)
    start = len(ftyp) + len(meta(0)) + 8
    with open(path, "wb") as f:
        f.write(ftyp + meta(start) + _box(b"mdat", body))
