/*
 * libpixload-svg: SVG through librsvg 2.54 (cairo), as a pixload codec module.
 *
 * - Sniffed as text that starts, after an optional UTF-8 BOM, an XML declaration,
 *   comments and a doctype, with an <svg element (within the first 4096 bytes).
 *   gzip-compressed SVG (.svgz) is not taken.
 * - Size: the intrinsic size in pixels (width/height); without usable width/height the
 *   viewBox's size; without either PXL_SVG_DEFAULT_W x PXL_SVG_DEFAULT_H (300x150, the
 *   size HTML gives a replaced element without one). Rounded up, at least 1. Read from
 *   the prolog and the root's start tag alone: a load parses the drawing once, to render.
 * - Rendered at the size the library asks (choose_size returns it unchanged), never
 *   drawn small and scaled up; PXL_CODEC_SCALABLE: a request larger than the intrinsic
 *   size is drawn at the size it asks (FIT/FILL on the intrinsic aspect), within
 *   max_pixels; the library's max_pixels check meets the intrinsic size first.
 *   A fractional intrinsic size leaves its rounding transparent on the right and bottom.
 * - No external resources: the document is parsed from memory with no base file, so
 *   librsvg resolves no reference (file://, http(s)://, relative): only data: URLs load.
 * - librsvg cannot interrupt a render, so hostile input is bounded before rendering:
 *   at most PXL_SVG_MAX_BYTES of text, PXL_SVG_MAX_ELEMENTS elements, nesting depth
 *   PXL_SVG_MAX_DEPTH, and no entity declarations (<!ENTITY) at all.
 * - Output: cairo's premultiplied ARGB32 in the library's buffer, reordered to RGBA
 *   (PXL_CODEC_PREMULTIPLIED).
 */
#include <stdlib.h>

#include <librsvg/rsvg.h>
#include <math.h>

#include "common.h"

#define PXL_SVG_DEFAULT_W 300
#define PXL_SVG_DEFAULT_H 150
#define PXL_SVG_MAX_BYTES (8u << 20)
#define PXL_SVG_MAX_ELEMENTS 20000
#define PXL_SVG_MAX_DEPTH 64

static int starts(const uint8_t *p, const uint8_t *end, const char *s) {
  size_t n = strlen(s);
  return (size_t)(end - p) >= n && memcmp(p, s, n) == 0;
}

static const uint8_t *skip_past(const uint8_t *p, const uint8_t *end, const char *s) {
  size_t n = strlen(s);
  for (; (size_t)(end - p) >= n; p++)
    if (memcmp(p, s, n) == 0) return p + n;
  return NULL;
}

/* The root element's "<svg" after the prolog (an optional BOM, XML declaration,
 * comments, doctype), within the first 4096 bytes; NULL when the text is not an SVG. */
static const uint8_t *find_root(const uint8_t *data, size_t size) {
  const uint8_t *p = data, *end = data + (size < 4096 ? size : 4096);
  if (starts(p, end, "\xef\xbb\xbf")) p += 3;
  while (p && p < end) {
    if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') { p++; continue; }
    if (starts(p, end, "<?xml")) { p = skip_past(p, end, "?>"); continue; }
    if (starts(p, end, "<!--")) { p = skip_past(p, end, "-->"); continue; }
    if (starts(p, end, "<!DOCTYPE")) {
      const uint8_t *q = p;
      while (q < end && *q != '[' && *q != '>') q++;
      if (q < end && *q == '[') { p = skip_past(q, end, "]"); if (!p) return NULL; }
      p = skip_past(p, end, ">");
      continue;
    }
    if (!starts(p, end, "<svg") || p + 4 >= end) return NULL;
    uint8_t next = p[4];
    return next == ' ' || next == '\t' || next == '\n' || next == '\r' || next == '>' || next == '/' ? p : NULL;
  }
  return NULL;
}

static int32_t svg_sniff(const uint8_t *data, size_t size, void *user_data) {
  (void)user_data;
  return find_root(data, size) != NULL;
}

/* The '>' that ends the tag starting at tag (quoted attribute values may hold '>'); NULL
 * when the text ends first. */
static const uint8_t *tag_end(const uint8_t *tag, const uint8_t *end) {
  uint8_t quote = 0;
  for (const uint8_t *p = tag + 1; p < end; p++) {
    if (quote) { if (*p == quote) quote = 0; continue; }
    if (*p == '"' || *p == '\'') { quote = *p; continue; }
    if (*p == '>') return p;
  }
  return NULL;
}

/* The limits checked before librsvg sees the bytes. */
static pxl_status check_limits(const uint8_t *data, size_t size, char *message, size_t cap) {
  if (size > PXL_SVG_MAX_BYTES)
    return pxl_module_fail(PXL_E_UNSUPPORTED_IMAGE, message, cap, "%zu bytes is over the SVG limit of %u", size,
                           PXL_SVG_MAX_BYTES);
  long elements = 0, depth = 0, deepest = 0;
  /* Tags are read with their quoted attribute values, so "/>" or ">" inside a value
   * cannot hide an element's nesting. */
  for (size_t i = 0; i + 1 < size; i++) {
    if (data[i] != '<') continue;
    uint8_t next = data[i + 1];
    if (next == '!') {
      if (i + 8 <= size && memcmp(data + i, "<!ENTITY", 8) == 0)
        return pxl_module_fail(PXL_E_UNSUPPORTED_IMAGE, message, cap, "entity declarations are not accepted");
      continue;
    }
    if (next == '?') continue;
    int closing = next == '/';
    const uint8_t *close = tag_end(data + i, data + size);
    size_t j = close ? (size_t)(close - data) : size;
    if (closing) {
      depth--;
    } else {
      elements++;
      if (!(j < size && data[j - 1] == '/')) depth++;
      if (depth + 1 > deepest) deepest = depth + 1;
    }
    i = j;
  }
  if (elements > PXL_SVG_MAX_ELEMENTS)
    return pxl_module_fail(PXL_E_UNSUPPORTED_IMAGE, message, cap, "%ld elements, over the limit of %d", elements,
                           PXL_SVG_MAX_ELEMENTS);
  if (deepest > PXL_SVG_MAX_DEPTH)
    return pxl_module_fail(PXL_E_UNSUPPORTED_IMAGE, message, cap, "nested %ld deep, over the limit of %d", deepest,
                           PXL_SVG_MAX_DEPTH);
  return PXL_OK;
}

/* Parses data (no base file: no external resource resolves); NULL with a message. */
static RsvgHandle *parse_svg(const uint8_t *data, size_t size, char *message, size_t cap, pxl_status *status) {
  GError *error = NULL;
  RsvgHandle *handle = rsvg_handle_new_from_data(data, size, &error);
  if (!handle) {
    *status = pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap, "%s", error ? error->message : "cannot parse");
    if (error) g_error_free(error);
  }
  return handle;
}

/* parse_svg within the limits. */
static RsvgHandle *open_svg(const uint8_t *data, size_t size, char *message, size_t cap, pxl_status *status) {
  *status = check_limits(data, size, message, cap);
  return *status == PXL_OK ? parse_svg(data, size, message, cap, status) : NULL;
}

static void intrinsic_size(RsvgHandle *handle, double *w, double *h) {
  rsvg_handle_set_dpi(handle, 96.0);
  if (rsvg_handle_get_intrinsic_size_in_pixels(handle, w, h) && *w > 0 && *h > 0) return;
  gboolean has_width, has_height, has_viewbox;
  RsvgLength width, height;
  RsvgRectangle viewbox;
  rsvg_handle_get_intrinsic_dimensions(handle, &has_width, &width, &has_height, &height, &has_viewbox, &viewbox);
  if (has_viewbox && viewbox.width > 0 && viewbox.height > 0) {
    *w = viewbox.width;
    *h = viewbox.height;
    return;
  }
  *w = PXL_SVG_DEFAULT_W;
  *h = PXL_SVG_DEFAULT_H;
}

static int32_t pixels_of(double v) {
  if (!(v >= 1)) return 1;
  if (v > 1e9) return 1000000000;
  return (int32_t)(v + 0.999);
}

static pxl_status svg_header(const uint8_t *data, size_t size, pxl_codec_header *header, char *message, size_t cap,
                             void *user_data) {
  (void)user_data;
  pxl_status status = check_limits(data, size, message, cap);
  if (status != PXL_OK) return status;
  /* The size is the root element's (width, height, viewBox): librsvg is given the prolog
   * and the root's start tag, closed, not the whole drawing, whose parse costs a tenth of
   * its render (`make bench-decode`), so that a load parses the drawing once, to render
   * it. A root tag that does not end is parsed whole (and refused). */
  const uint8_t *root = find_root(data, size);
  const uint8_t *close = root ? tag_end(root, data + size) : NULL;
  RsvgHandle *handle;
  if (close && close[-1] != '/') {
    size_t head = (size_t)(close + 1 - data);
    uint8_t *document = malloc(head + 6);
    if (!document) return PXL_E_NO_MEMORY;
    memcpy(document, data, head);
    memcpy(document + head, "</svg>", 6);
    handle = parse_svg(document, head + 6, message, cap, &status);
    free(document);
  } else {
    handle = parse_svg(data, close ? (size_t)(close + 1 - data) : size, message, cap, &status);
  }
  if (!handle) return status;
  double w, h;
  intrinsic_size(handle, &w, &h);
  g_object_unref(handle);
  header->width = pixels_of(w);
  header->height = pixels_of(h);
  header->has_alpha = 1;
  return PXL_OK;
}

static pxl_status svg_choose(const uint8_t *data, size_t size, uint32_t flags, int32_t *w, int32_t *h, void *user_data) {
  (void)data; (void)size; (void)flags; (void)user_data;
  (void)w; (void)h; /* a vector: drawn at exactly the size asked */
  return PXL_OK;
}

static pxl_status svg_decode(const uint8_t *data, size_t size, pxl_codec_target *target, char *message, size_t cap,
                             void *user_data) {
  (void)user_data;
  if (target->stride != (size_t)cairo_format_stride_for_width(CAIRO_FORMAT_ARGB32, target->width))
    return pxl_module_fail(PXL_E_UNSUPPORTED_IMAGE, message, cap, "unexpected stride");
  pxl_status status;
  RsvgHandle *handle = open_svg(data, size, message, cap, &status);
  if (!handle) return status;
  if (__atomic_load_n(target->cancel, __ATOMIC_ACQUIRE)) { g_object_unref(handle); return PXL_E_CANCELLED; }
  cairo_surface_t *surface = cairo_image_surface_create_for_data(target->pixels, CAIRO_FORMAT_ARGB32, target->width,
                                                                 target->height, (int)target->stride);
  cairo_t *cr = cairo_create(surface);
  /* The library sees the document as a raster of the header's size (the intrinsic size
   * rounded up) and asks for it whole at some scale: drawn at that scale from the top-left
   * corner, so the rounding stays a fraction of a transparent pixel on the right and bottom
   * (as rsvg-convert draws it). A viewport of the whole target would centre the document
   * in it, a fraction of a pixel off the grid: every edge of a 16x16.02 icon blurred. */
  double w, h;
  intrinsic_size(handle, &w, &h);
  /* (fmax: a size past pixels_of's cap still fits; a non-finite one takes the target.) */
  double scale = fmin(target->width / fmax(w, pixels_of(w)), target->height / fmax(h, pixels_of(h)));
  RsvgRectangle viewport = {0, 0, w * scale, h * scale};
  if (!isfinite(viewport.width) || !isfinite(viewport.height)) viewport = (RsvgRectangle){0, 0, target->width, target->height};
  GError *error = NULL;
  gboolean ok = rsvg_handle_render_document(handle, cr, &viewport, &error);
  cairo_destroy(cr);
  cairo_surface_flush(surface);
  cairo_surface_destroy(surface);
  g_object_unref(handle);
  if (!ok) {
    status = pxl_module_fail(PXL_E_CORRUPT_IMAGE, message, cap, "%s", error ? error->message : "cannot render");
    if (error) g_error_free(error);
    return status;
  }
  /* cairo's ARGB32 is a native-endian 32-bit word: B, G, R, A in memory here. */
  for (int32_t y = 0; y < target->height; y++) {
    uint8_t *row = target->pixels + (size_t)y * target->stride;
    for (int32_t x = 0; x < target->width; x++) {
      uint8_t b = row[4 * x];
      row[4 * x] = row[4 * x + 2];
      row[4 * x + 2] = b;
    }
  }
  return PXL_OK;
}

/* The manifest (pixload.h, "Codec modules"): find_root's rule. */
PXL_MODULE_MANIFEST const pxl_codec_manifest pxl_codec_module_manifest = {
    PXL_CODEC_MANIFEST_MAGIC, sizeof(pxl_codec_manifest), 1, 0,
    {{"svg", PXL_VERSION_STRING " librsvg " LIBRSVG_VERSION, PXL_CODEC_PREMULTIPLIED | PXL_CODEC_SCALABLE, 1, 1,
      {{PXL_SNIFF_XML_ROOT, 0, 3, "svg"}}}}};

PXL_MODULE_EXPORT pxl_status pxl_codec_module_register(pxl_loader *loader) {
  static char version[64];
  snprintf(version, sizeof version, "%s librsvg %u.%u.%u", PXL_VERSION_STRING, rsvg_major_version,
           rsvg_minor_version, rsvg_micro_version);
  pxl_codec codec;
  pxl_codec_init(&codec);
  codec.id = "svg";
  codec.version = version;
  codec.flags = PXL_CODEC_PREMULTIPLIED | PXL_CODEC_SCALABLE;
  codec.sniff = svg_sniff;
  codec.read_header = svg_header;
  codec.choose_size = svg_choose;
  codec.decode = svg_decode;
  return pxl_loader_add_codec(loader, &codec);
}
