/*
 * libpixload-heif: HEIC/HEIF stills through libheif 1.15 (libde265), as a pixload codec
 * module. (libheif 1.15 has no image-sequence API: the primary image only.)
 *
 * - Sniffed by the ftyp box's brands (heic heix heim heis hevc hevx mif1 msf1), after the
 *   library's own AVIF check, so an AVIF (mif1 + avif) never reaches it.
 * - Orientation: irot/imir as libheif applies them while decoding; an EXIF orientation
 *   inside the file is not applied on top (the header says 1). PXL_CODEC_KEEP_ORIENTATION
 *   (PXL_FLAG_IGNORE_ORIENTATION) decodes with ignore_transformations and reports the
 *   stored (ispe) size, turned back where libheif 1.15's writer stored the turned one
 *   (handle_size).
 * - RGBA8 straight (heif_chroma_interleaved_RGBA: 10-bit is reduced to 8 by libheif),
 *   alpha from the alpha auxiliary image; the ICC profile (prof/rICC) or nclx code points
 *   to the library's colour stage.
 * - Sizes: libheif may make no image larger than the file's decoded items declare, HEVC's
 *   padding admitted, and a grid's or overlay's canvas may not exceed its own ispe
 *   (check_sizes); item references may not loop (check_references).
 * - Thumbnails: choose_size picks the smallest embedded thumbnail (thmb) that covers the
 *   size asked, and decode then decodes that thumbnail instead of the primary image; the
 *   library resamples it. Without one that covers it: the full image.
 */
#include <stdint.h>
#include <stdlib.h>

#include <libheif/heif.h>

#include "common.h"
#include "iso_bmff.h"

static int32_t heif_sniff(const uint8_t *data, size_t size, void *user_data) {
  (void)user_data;
  static const char *brands[] = {"heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1"};
  for (size_t i = 0; i < sizeof brands / sizeof brands[0]; i++)
    if (pxl_ftyp_has_brand(data, size, brands[i])) return 1;
  return 0;
}

/* The file's context and primary image; 0 on success. */
struct heif_file {
  struct heif_context *context;
  struct heif_image_handle *primary;
  heif_item_id primary_id;
  const uint8_t *data;  /* the file, for what libheif 1.15 does not tell (irot) */
  size_t size;
};

/* ISO-BMFF box walking, bounded by the data: the next box in [*at, end), its type and
 * payload; 0 when none is left or it does not fit. */
static int next_box(const uint8_t *data, size_t *at, size_t end, char type[4], size_t *payload, size_t *payload_end) {
  if (*at + 8 > end) return 0;
  const uint8_t *p = data + *at;
  uint64_t box = (uint64_t)p[0] << 24 | (uint64_t)p[1] << 16 | (uint64_t)p[2] << 8 | p[3];
  size_t header = 8;
  if (box == 1) {
    if (*at + 16 > end) return 0;
    box = 0;
    for (int i = 8; i < 16; i++) box = box << 8 | p[i];
    header = 16;
  } else if (box == 0) {
    box = end - *at;
  }
  if (box < header || box > end - *at) return 0;
  memcpy(type, p + 4, 4);
  *payload = *at + header;
  *payload_end = *at + (size_t)box;
  *at = *payload_end;
  return 1;
}

/* The payload of the first box of `type` in [from, end), or 0. */
static int find_box(const uint8_t *data, size_t from, size_t end, const char *type, size_t *payload, size_t *payload_end) {
  char t[4];
  size_t at = from;
  while (next_box(data, &at, end, t, payload, payload_end))
    if (memcmp(t, type, 4) == 0) return 1;
  return 0;
}

/* The meta box's children, [*from, *end): its payload after the full-box header; 0 when
 * the file has no meta box. */
static int meta_children(const uint8_t *data, size_t size, size_t *from, size_t *end) {
  return find_box(data, 0, size, "meta", from, end) && (*from += 4) <= *end;
}

static uint32_t read_be(const uint8_t *p, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; i++) v = v << 8 | p[i];
  return v;
}

/* Whether item `id` has an irot of 90 or 270 degrees among its properties (meta > iprp >
 * ipco, associated in ipma). libheif 1.15 has no call for it, and needs asking: see
 * handle_size. A file it cannot walk says no. */
static int turns_sideways(const uint8_t *data, size_t size, heif_item_id id) {
  size_t meta, meta_end, iprp, iprp_end, ipco, ipco_end, ipma, ipma_end;
  if (!meta_children(data, size, &meta, &meta_end) || !find_box(data, meta, meta_end, "iprp", &iprp, &iprp_end) ||
      !find_box(data, iprp, iprp_end, "ipco", &ipco, &ipco_end) ||
      !find_box(data, iprp, iprp_end, "ipma", &ipma, &ipma_end))
    return 0;
  /* The 1-based indices (up to 32767, ipma's widest) of the sideways irot properties. */
  uint8_t sideways[32768 / 8] = {0};
  char type[4];
  size_t at = ipco, payload, payload_end;
  for (uint32_t index = 1; index < 32768 && next_box(data, &at, ipco_end, type, &payload, &payload_end); index++)
    if (memcmp(type, "irot", 4) == 0 && payload < payload_end && (data[payload] & 1))
      sideways[index / 8] |= (uint8_t)(1u << (index % 8));
  if (ipma + 8 > ipma_end) return 0;
  int version = data[ipma], wide_index = data[ipma + 3] & 1;
  uint32_t entries = read_be(data + ipma + 4, 4);
  size_t p = ipma + 8;
  for (uint32_t e = 0; e < entries; e++) {
    int id_bytes = version < 1 ? 2 : 4;
    if (p + (size_t)id_bytes + 1 > ipma_end) return 0;
    uint32_t item = read_be(data + p, id_bytes);
    unsigned count = data[p + (size_t)id_bytes];
    p += (size_t)id_bytes + 1;
    size_t each = wide_index ? 2 : 1;
    if (p + count * each > ipma_end) return 0;
    for (unsigned i = 0; i < count; i++, p += each) {
      uint32_t index = wide_index ? read_be(data + p, 2) & 0x7fff : data[p] & 0x7fu;
      if (item == id && (sideways[index / 8] >> (index % 8) & 1)) return 1;
    }
  }
  return 0;
}

/* ---- Item references, checked before libheif reads the file ----
 *
 * libheif 1.15 follows item references while decoding without noticing a loop: a primary
 * grid whose alpha (auxl) is a grid built (dimg) from the primary itself recursed until the
 * stack ran out (SEGV), or, with libheif's tile threads, hung for minutes (make fuzz-heif
 * found it; Tests/fuzz-regressions/heif). So the meta box's iref is read here, and a file
 * whose decode references form a loop is refused. */

#define PXL_HEIF_MAX_REFERENCES 65536 /* edges; a 12 MP phone grid has about 50 */

/* Decoding item `from` decodes item `to` (dimg: `from` is made of `to`; auxl: `to` is an
 * auxiliary image of `from`), or (thmb) `to` is a thumbnail of `from`, decoded instead of it,
 * never with it: no loop through it. */
enum heif_edge_kind { HEIF_DIMG, HEIF_AUXL, HEIF_THMB };
struct heif_edge { uint32_t from, to; enum heif_edge_kind kind; };

static int compare_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

static int compare_edge(const void *a, const void *b) {
  const struct heif_edge *x = a, *y = b;
  return x->from != y->from ? (x->from < y->from ? -1 : 1) : (x->to < y->to ? -1 : x->to > y->to);
}

/* Whether the edges form a loop (Kahn's algorithm: what is left once every item nothing
 * else needs is taken away). -1 when out of memory. */
static int has_loop(struct heif_edge *edges, size_t count) {
  uint32_t *ids = malloc(2 * count * sizeof *ids);
  size_t *indegree = calloc(2 * count, sizeof *indegree), *queue = malloc(2 * count * sizeof *queue);
  size_t *first = malloc((2 * count + 1) * sizeof *first);
  int loop = -1;
  if (!ids || !indegree || !queue || !first) goto done;
  size_t n = 0;
  for (size_t i = 0; i < count; i++) { ids[n++] = edges[i].from; ids[n++] = edges[i].to; }
  qsort(ids, n, sizeof *ids, compare_u32);
  size_t nodes = 0;
  for (size_t i = 0; i < n; i++)
    if (nodes == 0 || ids[nodes - 1] != ids[i]) ids[nodes++] = ids[i];
  qsort(edges, count, sizeof *edges, compare_edge);
#define NODE(id) ((size_t)((uint32_t *)bsearch(&(id), ids, nodes, sizeof *ids, compare_u32) - ids))
  for (size_t i = 0; i <= nodes; i++) first[i] = 0;
  for (size_t i = 0; i < count; i++) {
    first[NODE(edges[i].from) + 1]++;
    if (edges[i].kind != HEIF_THMB) indegree[NODE(edges[i].to)]++;
  }
  for (size_t i = 0; i < nodes; i++) first[i + 1] += first[i];
  size_t head = 0, tail = 0, taken = 0;
  for (size_t i = 0; i < nodes; i++)
    if (indegree[i] == 0) queue[tail++] = i;
  while (head < tail) {
    size_t node = queue[head++];
    taken++;
    for (size_t e = first[node]; e < first[node + 1]; e++)
      if (edges[e].kind != HEIF_THMB && --indegree[NODE(edges[e].to)] == 0) queue[tail++] = NODE(edges[e].to);
  }
#undef NODE
  loop = taken < nodes;
done:
  free(ids);
  free(indegree);
  free(queue);
  free(first);
  return loop;
}

/* PXL_OK, or why the file's item references are refused. On PXL_OK, *edges (malloc'd, the
 * caller frees it; NULL when none) holds the dimg, auxl and thmb references, *count of them. */
static pxl_status check_references(const uint8_t *data, size_t size, struct heif_edge **edges_out, size_t *count_out,
                                   char *message, size_t cap) {
  *edges_out = NULL;
  *count_out = 0;
  size_t meta, meta_end, iref, iref_end;
  if (!meta_children(data, size, &meta, &meta_end) || !find_box(data, meta, meta_end, "iref", &iref, &iref_end) ||
      iref + 4 > iref_end)
    return PXL_OK; /* no references: nothing to loop */
  int id_bytes = data[iref] == 0 ? 2 : 4;
  struct heif_edge *edges = NULL;
  size_t count = 0, capacity = 0;
  pxl_status status = PXL_OK;
  /* Read as libheif 1.15 reads it (Box_iref::parse): one reference after another, each a box
   * header (size, type, 8 more bytes for a 64-bit size, 16 for 'uuid') then the ids, the
   * header's size ignored; a reference cut short by the end keeps what was read. Reading by
   * the declared sizes instead let a mutated size hide the loop (a second fuzz timeout). */
  size_t at = iref + 4;
  while (iref_end - at >= 8) {
    const uint8_t *p = data + at;
    int dimg = memcmp(p + 4, "dimg", 4) == 0, auxl = memcmp(p + 4, "auxl", 4) == 0;
    int thmb = memcmp(p + 4, "thmb", 4) == 0;
    size_t header = 8 + (read_be(p, 4) == 1 ? 8 : 0) + (memcmp(p + 4, "uuid", 4) == 0 ? 16 : 0);
    if (iref_end - at < header + (size_t)id_bytes + 2) break;
    at += header;
    uint32_t from = read_be(data + at, id_bytes);
    uint32_t refs = read_be(data + at + id_bytes, 2);
    at += (size_t)id_bytes + 2;
    for (uint32_t r = 0; r < refs && iref_end - at >= (size_t)id_bytes; r++, at += (size_t)id_bytes) {
      if (!dimg && !auxl && !thmb) continue;
      if (count == capacity) {
        if (capacity == PXL_HEIF_MAX_REFERENCES) {
          free(edges);
          return pxl_module_fail(PXL_E_UNSUPPORTED_IMAGE, message, cap, "over %d item references",
                                 PXL_HEIF_MAX_REFERENCES);
        }
        capacity = capacity ? 2 * capacity : 64;
        struct heif_edge *grown = realloc(edges, capacity * sizeof *edges);
        if (!grown) { free(edges); return PXL_E_NO_MEMORY; }
        edges = grown;
      }
      uint32_t to = read_be(data + at, id_bytes);
      /* dimg: the derived image `from` is made of `to`. auxl: `from` is an auxiliary image
       * (alpha, depth) of `to`, decoded with it. thmb: `from` is a thumbnail of `to`. */
      edges[count++] = dimg ? (struct heif_edge){from, to, HEIF_DIMG}
                            : (struct heif_edge){to, from, thmb ? HEIF_THMB : HEIF_AUXL};
    }
  }
  if (count > 0) {
    int loop = has_loop(edges, count);
    if (loop < 0) status = PXL_E_NO_MEMORY;
    else if (loop) status = pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap, "the item references form a loop");
  }
  if (status != PXL_OK) {
    free(edges);
    return status;
  }
  *edges_out = edges;
  *count_out = count;
  return PXL_OK;
}

/* ---- The largest image libheif may make for the file ----
 *
 * heif_context_set_maximum_image_size_limit is one side, for width and height, and libheif
 * (Debian's 1.15.1-1+deb12u2 and later) holds two things to it: each coded picture's size
 * (HEVC's, or AV1's, from the bitstream: refused when larger) and a grid's or overlay's canvas
 * (from its descriptor: refused when equal or larger). A coded picture is larger than the
 * size the file declares for its item: HEVC codes whole minimum coding blocks (8 to 64 luma
 * samples; x265's default 8 makes a 97x61 image 104x64, min-cu-size=32 makes it 128x64) and
 * crops the rest by its conformance window. And a grid's tiles are items of their own, with
 * their own ispe, which may exceed the grid's (pillow_heif's 29x100 grids: one 64x100 tile,
 * coded 64x104). So the limit is the largest side declared by any item the decode makes (the
 * primary image, the tiles it is made of, its auxiliary images and thumbnails, and theirs),
 * rounded up to a multiple of 64 (the largest HEVC coding block: every legal minimum block
 * size divides it), plus one for the canvas check's "equal is too large".
 *
 * That limit alone no longer bounds a canvas by the size read_header reports (which the
 * library checks max_pixels against): a tile declared 30000 wide would admit a 30000x30000
 * canvas. So a grid's or overlay's canvas is checked here, before libheif reads it, against
 * the ispe its item declares: a 64x48 grid whose descriptor says 25705x28007 (2.8 GB in
 * libheif 1.15, which then crashed writing; Tests/fuzz-regressions/heif) is refused. Nor
 * does it bound the items themselves: a 64x48 grid on one tile declared 16384x16384 decoded
 * that tile (1.2 GB). So each item's sides may exceed the primary's (padded) only up to
 * ITEM_SIDE_FLOOR, and all items together cover at most ITEMS_AREA_FACTOR times its area
 * plus one such item. */

/* The items decoding `primary` makes: it, what it is made of (dimg), its auxiliary images
 * (auxl) and thumbnails (thmb), and theirs; sorted ids, *n of them. NULL when out of memory.
 * The edges come back sorted by compare_edge. */
static uint32_t *decoded_items(struct heif_edge *edges, size_t count, uint32_t primary, size_t *n) {
  uint32_t *ids = malloc((2 * count + 1) * sizeof *ids), *out = NULL;
  size_t *queue = malloc((2 * count + 1) * sizeof *queue);
  uint8_t *seen = calloc(2 * count + 1, 1);
  if (!ids || !queue || !seen) goto done;
  size_t nodes = 0;
  ids[nodes++] = primary;
  for (size_t i = 0; i < count; i++) { ids[nodes++] = edges[i].from; ids[nodes++] = edges[i].to; }
  qsort(ids, nodes, sizeof *ids, compare_u32);
  size_t unique = 0;
  for (size_t i = 0; i < nodes; i++)
    if (unique == 0 || ids[unique - 1] != ids[i]) ids[unique++] = ids[i];
  nodes = unique;
  if (count > 0) qsort(edges, count, sizeof *edges, compare_edge); /* edges is NULL when none */
#define NODE(id) ((size_t)((uint32_t *)bsearch(&(id), ids, nodes, sizeof *ids, compare_u32) - ids))
  size_t head = 0, tail = 0;
  queue[tail++] = NODE(primary);
  seen[queue[0]] = 1;
  while (head < tail) {
    uint32_t id = ids[queue[head++]];
    /* The first edge from `id` (edges are sorted by from), then each of its edges. */
    size_t lo = 0, hi = count;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (edges[mid].from < id) lo = mid + 1; else hi = mid;
    }
    for (size_t e = lo; e < count && edges[e].from == id; e++) {
      size_t to = NODE(edges[e].to);
      if (!seen[to]) { seen[to] = 1; queue[tail++] = to; }
    }
  }
#undef NODE
  out = malloc(tail * sizeof *out);
  if (!out) goto done;
  *n = 0;
  for (size_t i = 0; i < nodes; i++)
    if (seen[i]) out[(*n)++] = ids[i];
done:
  free(ids);
  free(queue);
  free(seen);
  return out;
}

/* What the file declares about one item the decode makes. */
struct heif_item {
  int32_t width, height; /* its ispe (the last one it is associated with, as libheif 1.15 reads it); 0: none */
  char type[4];          /* its infe item type (its first infe's, as libheif 1.15 keeps it); zeros: none */
  int declared;          /* an infe was read for it */
  int has_properties;    /* its first ipma entry was read (libheif reads the first) */
};

static struct heif_item *find_item(const uint32_t *ids, struct heif_item *items, size_t n, uint32_t id) {
  const uint32_t *at = bsearch(&id, ids, n, sizeof *ids, compare_u32);
  return at ? &items[at - ids] : NULL;
}

/* Reads ipco (the ispe properties), ipma (which belong to which item) and iinf (the item
 * types) for the items `ids`. A box missing or cut short leaves what was read: libheif
 * refuses such a file itself, or it declares less. */
static int read_items(const uint8_t *data, size_t size, const uint32_t *ids, struct heif_item *items, size_t n) {
  size_t meta, meta_end, iprp, iprp_end, ipco, ipco_end, ipma, ipma_end, iinf, iinf_end;
  if (!meta_children(data, size, &meta, &meta_end)) return 1;
  if (find_box(data, meta, meta_end, "iinf", &iinf, &iinf_end) && iinf + 4 <= iinf_end) {
    size_t at = iinf + 4 + (data[iinf] == 0 ? 2 : 4), payload, payload_end;
    char type[4];
    while (next_box(data, &at, iinf_end, type, &payload, &payload_end)) {
      if (memcmp(type, "infe", 4) != 0 || payload_end - payload < 6) continue;
      /* Versions 0 and 1: a 16-bit id and no item type; 2: a 16-bit id, 3: a 32-bit one. */
      int version = data[payload], id_bytes = version == 3 ? 4 : 2;
      if (version >= 2 && payload_end - payload < 4 + (size_t)id_bytes + 2 + 4) continue;
      struct heif_item *item = find_item(ids, items, n, read_be(data + payload + 4, id_bytes));
      if (!item || item->declared) continue;
      item->declared = 1;
      if (version >= 2) memcpy(item->type, data + payload + 4 + id_bytes + 2, 4);
    }
  }
  if (!find_box(data, meta, meta_end, "iprp", &iprp, &iprp_end) ||
      !find_box(data, iprp, iprp_end, "ipco", &ipco, &ipco_end) ||
      !find_box(data, iprp, iprp_end, "ipma", &ipma, &ipma_end))
    return 1;
  /* The ispe properties by their 1-based index (up to 32767, ipma's widest). */
  int32_t (*ispe)[2] = calloc(32768, sizeof *ispe);
  if (!ispe) return 0;
  char type[4];
  size_t at = ipco, payload, payload_end;
  for (uint32_t index = 1; index < 32768 && next_box(data, &at, ipco_end, type, &payload, &payload_end); index++)
    if (memcmp(type, "ispe", 4) == 0 && payload_end - payload >= 12) {
      uint32_t w = read_be(data + payload + 4, 4), h = read_be(data + payload + 8, 4);
      /* Over INT32_MAX: libheif refuses it (its own limit, 32768), so never the decode's. */
      ispe[index][0] = w > INT32_MAX ? INT32_MAX : (int32_t)w;
      ispe[index][1] = h > INT32_MAX ? INT32_MAX : (int32_t)h;
    }
  if (ipma + 8 <= ipma_end) {
    int version = data[ipma], wide_index = data[ipma + 3] & 1;
    uint32_t entries = read_be(data + ipma + 4, 4);
    size_t p = ipma + 8;
    for (uint32_t e = 0; e < entries; e++) {
      int id_bytes = version < 1 ? 2 : 4;
      if (p + (size_t)id_bytes + 1 > ipma_end) break;
      struct heif_item *item = find_item(ids, items, n, read_be(data + p, id_bytes));
      unsigned count = data[p + (size_t)id_bytes];
      p += (size_t)id_bytes + 1;
      size_t each = wide_index ? 2 : 1;
      if (p + count * each > ipma_end) break;
      if (item && !item->has_properties) {
        item->has_properties = 1;
        for (unsigned i = 0; i < count; i++) {
          uint32_t index = wide_index ? read_be(data + p + i * each, 2) & 0x7fff : data[p + i] & 0x7fu;
          if (ispe[index][0] || ispe[index][1]) {
            item->width = ispe[index][0];
            item->height = ispe[index][1];
          }
        }
      }
      p += count * each;
    }
  }
  free(ispe);
  return 1;
}

/* Up to the first `want` bytes of item `id`'s data (iloc: in the file or in idat, its extents
 * one after another, as libheif 1.15 reads them): how many; 0 when it has none or the file
 * does not hold an extent it names. */
static size_t item_data(const uint8_t *data, size_t size, uint32_t id, uint8_t *out, size_t want) {
  size_t meta, meta_end, iloc, iloc_end, idat = 0, idat_end = 0;
  if (!meta_children(data, size, &meta, &meta_end) || !find_box(data, meta, meta_end, "iloc", &iloc, &iloc_end) ||
      iloc + 6 > iloc_end)
    return 0;
  int has_idat = find_box(data, meta, meta_end, "idat", &idat, &idat_end);
  int version = data[iloc];
  const uint8_t *p = data + iloc + 4;
  int offset_size = p[0] >> 4, length_size = p[0] & 15, base_size = p[1] >> 4, index_size = version > 1 ? p[1] & 15 : 0;
  size_t at = iloc + 6, id_bytes = version < 2 ? 2 : 4;
  if (at + id_bytes > iloc_end) return 0;
  uint32_t items = read_be(data + at, (int)id_bytes);
  at += id_bytes;
  /* A field of 4 or 8 bytes is read; any other size is none (libheif's reading). */
#define FIELD(bytes, value)                                                                    \
  do {                                                                                         \
    size_t b_ = (bytes) == 4 || (bytes) == 8 ? (size_t)(bytes) : 0;                            \
    if (at + b_ > iloc_end) return 0;                                                          \
    uint64_t v_ = 0;                                                                           \
    for (size_t i_ = 0; i_ < b_; i_++) v_ = v_ << 8 | data[at + i_];                           \
    at += b_;                                                                                  \
    (value) = v_;                                                                              \
  } while (0)
  for (uint32_t i = 0; i < items; i++) {
    if (at + id_bytes + (version >= 1 ? 2 : 0) + 2 > iloc_end) return 0;
    uint32_t item = read_be(data + at, (int)id_bytes);
    at += id_bytes;
    int method = 0;
    if (version >= 1) { method = data[at + 1] & 15; at += 2; }
    at += 2; /* data_reference_index */
    uint64_t base = 0, index = 0, offset = 0, length = 0;
    FIELD(base_size, base);
    if (at + 2 > iloc_end) return 0;
    uint32_t extents = read_be(data + at, 2);
    at += 2;
    size_t got = 0;
    for (uint32_t e = 0; e < extents; e++) {
      if (version > 1) FIELD(index_size, index);
      FIELD(offset_size, offset);
      FIELD(length_size, length);
      if (item != id || got == want) continue;
      /* The extent's bytes: file offsets (method 0) or idat's (method 1); libheif 1.15
       * implements no other method. */
      size_t from, end;
      if (method == 0) { from = 0; end = size; }
      else if (method == 1 && has_idat) { from = idat; end = idat_end; }
      else return 0;
      if (offset > end - from || base > end - from - offset || length > end - from - offset - base) return 0;
      size_t start = from + (size_t)(base + offset), take = want - got < length ? want - got : (size_t)length;
      memcpy(out + got, data + start, take);
      got += take;
    }
    (void)index;
    if (item == id) return got; /* the first entry for the item, as libheif looks it up */
  }
#undef FIELD
  return 0;
}

/* Item types libheif 1.15 decodes as images (item_type_is_image), and the derived ones. */
static int is_image(const char type[4]) {
  static const char *types[] = {"hvc1", "av01", "vvc1", "grid", "iovl", "iden"};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (memcmp(type, types[i], 4) == 0) return 1;
  return 0;
}

/* A side rounded up to the largest HEVC coding block: every minimum block size (8, 16, 32,
 * 64) divides it, so a coded picture is at most this. */
static int64_t pad_to_block(int64_t side) { return side > 0 ? (side + 63) / 64 * 64 : 0; }

/* How far the items a decode makes may exceed the primary image (check_sizes). */
enum { ITEM_SIDE_FLOOR = 1024, ITEMS_AREA_FACTOR = 4 };

static int is_derived(const char type[4]) {
  return memcmp(type, "grid", 4) == 0 || memcmp(type, "iovl", 4) == 0 || memcmp(type, "iden", 4) == 0;
}

/* PXL_OK and the side for heif_context_set_maximum_image_size_limit (*side, 0: none), or why
 * the file is refused. */
static pxl_status check_sizes(const struct heif_file *file, struct heif_edge *edges, size_t count, int64_t *side,
                              char *message, size_t cap) {
  /* What libheif itself says of the primary image. */
  int32_t sides[4] = {heif_image_handle_get_width(file->primary), heif_image_handle_get_height(file->primary),
                      heif_image_handle_get_ispe_width(file->primary), heif_image_handle_get_ispe_height(file->primary)};
  *side = 0;
  for (int i = 0; i < 4; i++)
    if (sides[i] > *side) *side = sides[i];
  /* What the items may add: the primary's own size read_header reports and max_pixels was
   * checked against. An item may exceed its side (a tile padded past a small grid: Apple's
   * 512x512 tiles under a 100x29 picture) up to ITEM_SIDE_FLOOR, and all of them together
   * may cover its area a few times over (tiles, an alpha plane of as many, thumbnails); a
   * 64x48 grid on one tile declared 16384x16384 took 1.2 GB before this (second reader). */
  int64_t primary_side = pad_to_block(*side);
  int64_t item_side = primary_side > ITEM_SIDE_FLOOR ? primary_side : ITEM_SIDE_FLOOR;
  int64_t primary_area = pad_to_block(sides[0] > sides[2] ? sides[0] : sides[2]) *
                         pad_to_block(sides[1] > sides[3] ? sides[1] : sides[3]);
  int64_t area_budget = ITEMS_AREA_FACTOR * primary_area + ITEM_SIDE_FLOOR * ITEM_SIDE_FLOOR, area = 0;
  size_t n = 0;
  uint32_t *ids = decoded_items(edges, count, file->primary_id, &n);
  struct heif_item *items = ids ? calloc(n, sizeof *items) : NULL;
  if (!items || !read_items(file->data, file->size, ids, items, n)) {
    free(ids);
    free(items);
    return PXL_E_NO_MEMORY;
  }
  pxl_status status = PXL_OK;
  /* What a derived image (grid, overlay, identity) is made of must be images: libheif 1.15
   * (Debian's build, its assertions on) aborts decoding an overlay made of an item it has no
   * image for (make fuzz-heif, input kept); a grid's it refuses. */
  for (size_t e = 0; e < count && status == PXL_OK; e++) {
    const struct heif_item *from = find_item(ids, items, n, edges[e].from), *to = find_item(ids, items, n, edges[e].to);
    if (edges[e].kind != HEIF_DIMG || !from || !to || !is_derived(from->type) || is_image(to->type)) continue;
    status = pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap, "the %.4s item %u is made of item %u, which is no image",
                             from->type, edges[e].from, edges[e].to);
  }
  for (size_t i = 0; i < n && status == PXL_OK; i++) {
    area += pad_to_block(items[i].width) * pad_to_block(items[i].height);
    if (items[i].width > item_side || items[i].height > item_side || area > area_budget) {
      status = pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap,
                               "item %u (%.4s, declared %dx%d) is more than a %dx%d image can be made of", ids[i],
                               items[i].type, items[i].width, items[i].height, sides[0], sides[1]);
      break;
    }
    if (items[i].width > *side) *side = items[i].width;
    if (items[i].height > *side) *side = items[i].height;
    int grid = memcmp(items[i].type, "grid", 4) == 0, overlay = memcmp(items[i].type, "iovl", 4) == 0;
    if (!grid && !overlay) continue;
    /* The canvas: grid: version, flags, rows - 1, columns - 1, width, height; iovl: version,
     * flags, a 16-bit RGBA fill colour, width, height; 32-bit sizes when flags & 1, else 16. */
    uint8_t head[18];
    size_t at = grid ? 4 : 10, got = item_data(file->data, file->size, ids[i], head, sizeof head);
    int bytes = got >= 2 && (head[1] & 1) ? 4 : 2;
    if (got < at + 2 * (size_t)bytes) {
      status = pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap, "the %.4s item %u's canvas is cut short",
                               items[i].type, ids[i]);
      break;
    }
    uint32_t w = read_be(head + at, bytes), h = read_be(head + at + bytes, bytes);
    uint32_t iw = (uint32_t)items[i].width, ih = (uint32_t)items[i].height;
    /* Either way round for an item turned sideways: libheif 1.15's writer stores its ispe
     * turned (see handle_size), over the canvas as coded. The same pixels either way. */
    if ((w > iw || h > ih) && !(w <= ih && h <= iw && turns_sideways(file->data, file->size, ids[i])))
      status = pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap,
                               "the %.4s item %u's canvas %ux%u is larger than its declared size %dx%d", items[i].type,
                               ids[i], w, h, items[i].width, items[i].height);
  }
  free(ids);
  free(items);
  *side = pad_to_block(*side);
  return status;
}

static void close_heif(struct heif_file *file);

static pxl_status open_heif(const uint8_t *data, size_t size, struct heif_file *file, char *message, size_t cap) {
  file->context = NULL;
  file->primary = NULL;
  struct heif_edge *edges = NULL;
  size_t count = 0;
  pxl_status checked = check_references(data, size, &edges, &count, message, cap);
  if (checked != PXL_OK) return checked;
  file->context = heif_context_alloc();
  if (!file->context) { free(edges); return PXL_E_NO_MEMORY; }
  file->data = data;
  file->size = size;
  struct heif_error error = heif_context_read_from_memory_without_copy(file->context, data, size, NULL);
  if (error.code == heif_error_Ok) error = heif_context_get_primary_image_ID(file->context, &file->primary_id);
  if (error.code == heif_error_Ok) error = heif_context_get_primary_image_handle(file->context, &file->primary);
  if (error.code != heif_error_Ok) {
    free(edges);
    pxl_status status = error.code == heif_error_Unsupported_feature || error.code == heif_error_Unsupported_filetype
                            ? PXL_E_UNSUPPORTED_IMAGE : PXL_E_CORRUPT_IMAGE;
    /* error.message may live in the context (libheif keeps its error strings there): copied
     * before the context goes (make fuzz-heif found the use after free). */
    pxl_module_fail(status, message, cap, "libheif: %s", error.message);
    heif_context_free(file->context);
    file->context = NULL;
    return status;
  }
  /* No image libheif makes for this file may be larger than what its items declare, with
   * the format's padding (check_sizes). */
  int64_t side = 0;
  pxl_status status = check_sizes(file, edges, count, &side, message, cap);
  free(edges);
  if (status != PXL_OK) {
    close_heif(file);
    file->context = NULL;
    file->primary = NULL;
    return status;
  }
  /* One more: libheif refuses a canvas side equal to the limit. None declared: 1, nothing. */
  heif_context_set_maximum_image_size_limit(file->context, side < INT32_MAX ? (int)side + 1 : INT32_MAX);
  return PXL_OK;
}

static void close_heif(struct heif_file *file) {
  if (file->primary) heif_image_handle_release(file->primary);
  if (file->context) heif_context_free(file->context);
}

/* The size image `id` (its handle) decodes to. Oriented: libheif's size. Kept as stored
 * (ignore_transformations): the ispe box's, which the format defines as the size before
 * irot, and which libheif then turns for a sideways irot. libheif 1.15's own writer
 * breaks that rule: it writes the turned size into ispe, and the irot before it, where
 * its reader does not turn it. So a sideways item whose ispe equals libheif's
 * (turned) size holds the turned size: turned back, it is the stored one. */
static void handle_size(const struct heif_file *file, const struct heif_image_handle *handle, heif_item_id id,
                        uint32_t flags, int32_t *w, int32_t *h) {
  if (flags & PXL_CODEC_KEEP_ORIENTATION) {
    *w = heif_image_handle_get_ispe_width(handle);
    *h = heif_image_handle_get_ispe_height(handle);
    if (*w != *h && *w == heif_image_handle_get_width(handle) && *h == heif_image_handle_get_height(handle) &&
        turns_sideways(file->data, file->size, id)) {
      int32_t t = *w;
      *w = *h;
      *h = t;
    }
  } else {
    *w = heif_image_handle_get_width(handle);
    *h = heif_image_handle_get_height(handle);
  }
}

static pxl_status heif_header(const uint8_t *data, size_t size, pxl_codec_header *header, char *message, size_t cap,
                              void *user_data) {
  (void)user_data;
  struct heif_file file;
  pxl_status status = open_heif(data, size, &file, message, cap);
  if (status != PXL_OK) return status;
  handle_size(&file, file.primary, file.primary_id, header->flags, &header->width, &header->height);
  header->has_alpha = heif_image_handle_has_alpha_channel(file.primary) != 0;
  enum heif_color_profile_type type = heif_image_handle_get_color_profile_type(file.primary);
  if (type == heif_color_profile_type_prof || type == heif_color_profile_type_rICC) {
    header->icc_size = heif_image_handle_get_raw_color_profile_size(file.primary);
  } else {
    struct heif_color_profile_nclx *nclx = NULL;
    if (heif_image_handle_get_nclx_color_profile(file.primary, &nclx).code == heif_error_Ok && nclx) {
      header->cicp_primaries = (int32_t)nclx->color_primaries;
      header->cicp_transfer = (int32_t)nclx->transfer_characteristics;
      header->cicp_matrix = (int32_t)nclx->matrix_coefficients;
    }
    /* Also after an error: libheif 1.15 may have allocated the profile before refusing its
     * values (a 52-byte leak per header, make fuzz-heif). */
    if (nclx) heif_nclx_color_profile_free(nclx);
  }
  close_heif(&file);
  return PXL_OK;
}

static pxl_status heif_icc(const uint8_t *data, size_t size, uint8_t *icc, size_t icc_size, void *user_data) {
  (void)user_data;
  char message[64];
  struct heif_file file;
  pxl_status status = open_heif(data, size, &file, message, sizeof message);
  if (status != PXL_OK) return status;
  if (heif_image_handle_get_raw_color_profile_size(file.primary) != icc_size ||
      heif_image_handle_get_raw_color_profile(file.primary, icc).code != heif_error_Ok)
    status = PXL_E_CORRUPT_IMAGE;
  close_heif(&file);
  return status;
}

/* The smallest thumbnail at least want_w x want_h (in the decode's orientation), retained;
 * NULL when none covers it. */
static struct heif_image_handle *covering_thumbnail(const struct heif_file *file, uint32_t flags,
                                                    int32_t want_w, int32_t want_h, int32_t *w, int32_t *h) {
  const struct heif_image_handle *primary = file->primary;
  int count = heif_image_handle_get_number_of_thumbnails(primary);
  if (count <= 0) return NULL;
  heif_item_id ids[16];
  count = heif_image_handle_get_list_of_thumbnail_IDs(primary, ids, count < 16 ? count : 16);
  struct heif_image_handle *best = NULL;
  for (int i = 0; i < count; i++) {
    struct heif_image_handle *thumb = NULL;
    if (heif_image_handle_get_thumbnail(primary, ids[i], &thumb).code != heif_error_Ok) continue;
    int32_t tw, th;
    handle_size(file, thumb, ids[i], flags, &tw, &th);
    if (tw >= want_w && th >= want_h && (!best || (int64_t)tw * th < (int64_t)*w * *h)) {
      if (best) heif_image_handle_release(best);
      best = thumb;
      *w = tw;
      *h = th;
    } else {
      heif_image_handle_release(thumb);
    }
  }
  return best;
}

static pxl_status heif_choose(const uint8_t *data, size_t size, uint32_t flags, int32_t *w, int32_t *h, void *user_data) {
  (void)user_data;
  char message[64];
  struct heif_file file;
  pxl_status status = open_heif(data, size, &file, message, sizeof message);
  if (status != PXL_OK) return status;
  int32_t tw = 0, th = 0;
  struct heif_image_handle *thumb = covering_thumbnail(&file, flags, *w, *h, &tw, &th);
  if (thumb) {
    *w = tw;
    *h = th;
    heif_image_handle_release(thumb);
  } else {
    handle_size(&file, file.primary, file.primary_id, flags, w, h);
  }
  close_heif(&file);
  return PXL_OK;
}

static pxl_status heif_decode_fn(const uint8_t *data, size_t size, pxl_codec_target *target, char *message, size_t cap,
                                 void *user_data) {
  (void)user_data;
  struct heif_file file;
  pxl_status status = open_heif(data, size, &file, message, cap);
  if (status != PXL_OK) return status;
  struct heif_image_handle *handle = file.primary;
  int32_t w, h;
  handle_size(&file, handle, file.primary_id, target->flags, &w, &h);
  struct heif_image_handle *thumb = NULL;
  if (w != target->width || h != target->height) {
    thumb = covering_thumbnail(&file, target->flags, target->width, target->height, &w, &h);
    if (!thumb || w != target->width || h != target->height) {
      if (thumb) heif_image_handle_release(thumb);
      close_heif(&file);
      return pxl_module_fail(PXL_E_UNSUPPORTED_IMAGE, message, cap, "no thumbnail of %dx%d", target->width, target->height);
    }
    handle = thumb;
  }
  struct heif_decoding_options *options = heif_decoding_options_alloc();
  options->ignore_transformations = (target->flags & PXL_CODEC_KEEP_ORIENTATION) != 0;
  struct heif_image *image = NULL;
  struct heif_error error = heif_decode_image(handle, &image, heif_colorspace_RGB, heif_chroma_interleaved_RGBA, options);
  heif_decoding_options_free(options);
  if (error.code != heif_error_Ok) {
    /* Over the size limit open_heif sets: the file contradicts itself, not out of memory. */
    int no_memory = error.code == heif_error_Memory_allocation_error && error.subcode != heif_suberror_Security_limit_exceeded;
    status = pxl_module_fail(no_memory ? PXL_E_NO_MEMORY : PXL_E_CORRUPT_IMAGE, message, cap, "libheif: %s", error.message);
  } else {
    int stride = 0;
    const uint8_t *plane = heif_image_get_plane_readonly(image, heif_channel_interleaved, &stride);
    if (!plane || heif_image_get_width(image, heif_channel_interleaved) != target->width ||
        heif_image_get_height(image, heif_channel_interleaved) != target->height) {
      status = pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap, "libheif: decoded another size than it declared");
    } else {
      for (int32_t y = 0; y < target->height; y++)
        memcpy(target->pixels + (size_t)y * target->stride, plane + (size_t)y * stride, (size_t)target->width * 4);
    }
    heif_image_release(image);
  }
  if (thumb) heif_image_handle_release(thumb);
  close_heif(&file);
  return status;
}

/* The manifest (pixload.h, "Codec modules"): what register adds, for a host that does not
 * load this module (isolation); heif_sniff's brands as rules. */
PXL_MODULE_MANIFEST const pxl_codec_manifest pxl_codec_module_manifest = {
    PXL_CODEC_MANIFEST_MAGIC, sizeof(pxl_codec_manifest), 1, 0,
    {{"heic", PXL_VERSION_STRING " libheif " LIBHEIF_VERSION, 0, 1, 8,
      {
         {PXL_SNIFF_FTYP_BRAND, 0, 4, "heic"},
         {PXL_SNIFF_FTYP_BRAND, 0, 4, "heix"},
         {PXL_SNIFF_FTYP_BRAND, 0, 4, "heim"},
         {PXL_SNIFF_FTYP_BRAND, 0, 4, "heis"},
         {PXL_SNIFF_FTYP_BRAND, 0, 4, "hevc"},
         {PXL_SNIFF_FTYP_BRAND, 0, 4, "hevx"},
         {PXL_SNIFF_FTYP_BRAND, 0, 4, "mif1"},
         {PXL_SNIFF_FTYP_BRAND, 0, 4, "msf1"}}}}};

PXL_MODULE_EXPORT pxl_status pxl_codec_module_register(pxl_loader *loader) {
  static char version[64];
  snprintf(version, sizeof version, "%s libheif %s", PXL_VERSION_STRING, heif_get_version());
  pxl_codec codec;
  pxl_codec_init(&codec);
  codec.id = "heic";
  codec.version = version;
  codec.sniff = heif_sniff;
  codec.read_header = heif_header;
  codec.read_icc = heif_icc;
  codec.choose_size = heif_choose;
  codec.decode = heif_decode_fn;
  return pxl_loader_add_codec(loader, &codec);
}
