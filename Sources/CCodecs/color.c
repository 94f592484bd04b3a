/*
 * Colour management: the colour information a file carries (pxl_codec_color) to sRGB,
 * relative colorimetric, through lcms2. pxl_codecs.h ("Colour management") is the
 * contract; this comment says how.
 *
 * One source of colour, in this order: an ICC profile; else the file's word that it is
 * sRGB (PNG sRGB, nclx 1/13); else nclx primaries + transfer (AVIF); else PNG cHRM/gAMA.
 *
 * What costs nothing: untagged files and sRGB files never reach lcms2 more than once.
 * Each distinct source (the ICC bytes, or the few numbers of the other kinds) is one
 * cache entry holding its verdict: nothing to do (sRGB, or a kind we leave alone), a
 * transform, or unusable (with the reason). A second image with the same profile finds
 * the entry by a 64-bit hash confirmed by comparing the bytes (a crafted collision must
 * not borrow another profile's transform), so it pays one hash of the profile.
 *
 * Sharing: the cache is process-wide, guarded by one mutex held only for lookups. An
 * entry is reference-counted (a user keeps it alive after eviction) and has its own mutex
 * under which its lcms2 objects are built, once: the first user builds, the others wait
 * for it and share the result. Each entry has an lcms2 context of its own, whose error
 * handler writes into the entry (so messages of concurrent builds never mix). A built
 * transform is only read by cmsDoTransform, which keeps its one-pixel cache in a local
 * copy (cmsxform.c), so any number of threads may run it at once.
 *
 * Speed: most sources (every one but ICC profiles with lookup tables) are matrix/TRC
 * profiles, whose relative colorimetric conversion to sRGB is three curves, one 3x3
 * matrix (the source's D50 colorants, then the inverse of sRGB's), a clip and the sRGB
 * curve. lcms2 2.14 runs that at about 10 ns a pixel through its formatters; here it is
 * tables built once from lcms2's own curves and colorants (256 floats per input channel,
 * 16384 output levels) and a float matrix, several times faster, and within a level of
 * lcms2's own 8-bit result (Tests/codecs/color_test.c compares with ImageCms). Profiles
 * with lookup tables go through lcms2 transforms:
 * lcms2 transforms depend on the pixel layout, so such an entry builds up to three
 * (RGBA, BGRA, RGB), each when first needed. Premultiplied pixels are divided by alpha,
 * converted and multiplied again here, row by row: lcms2 2.14's own premultiplied 8-bit
 * formats (TYPE_RGBA_8_PREMUL) convert wrongly (half-transparent red comes out grey;
 * fixed in later releases), and Debian 12 ships 2.14. A gray profile
 * is reduced to a 256-entry table (gray in, sRGB-encoded gray out), applied to each
 * colour channel.
 */
#include "pxl_codecs.h"

#include <lcms2.h>
#include <math.h> /* fabs, a builtin: no libm needed */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Cache bounds: entries, and bytes of keys kept (ICC profiles are a few KB; a huge one is
 * used once and not kept). */
#define CACHE_MAX_ENTRIES 16
#define CACHE_MAX_KEY_BYTES ((size_t)4 << 20)
#define ENTRY_MAX_KEY_BYTES ((size_t)1 << 20)

/* How close to sRGB a matrix/TRC profile must be to count as sRGB: colorants (PCS XYZ,
 * D50) within this of lcms2's own sRGB, and each tone curve within 1/4 of an 8-bit level
 * of the sRGB curve at 256 points. Room for the s15Fixed16 rounding of colorants and the
 * slightly different adaptation other makers' sRGB profiles use (the corpus's and
 * Ghostscript's sRGB profiles pass), far from the nearest other gamut: Display P3's red
 * is 0.08 away, Adobe RGB's green 0.2; a gamma-2.2 curve is 2.2 levels away (linear) at
 * its worst. */
#define SRGB_XYZ_TOLERANCE 0.002
#define SRGB_TRC_TOLERANCE (0.25 / 255.0)

enum verdict { VERDICT_PENDING = 0, VERDICT_NONE, VERDICT_CONVERT, VERDICT_BAD };

#define FAST_LEVELS 16384 /* sRGB-encoded output per linear step: 0.2 of an 8-bit level at most */
typedef struct fast_matrix {
  float lin[3][256];       /* the source's curves: coded value -> linear */
  float m[3][3];           /* source linear RGB -> sRGB linear RGB, through D50 XYZ */
  uint8_t enc[FAST_LEVELS]; /* sRGB linear [0, 1] -> coded value */
  uint8_t enc_pad[4];      /* the AVX2 path gathers 32 bits at enc + i: the last i reads 3 past */
} fast_matrix;
enum slot { SLOT_RGBA, SLOT_BGRA, SLOT_RGB, SLOT_COUNT };

struct pxl_color_transform {
  /* Set once at creation, then read-only. */
  uint64_t hash;
  uint8_t *key;
  size_t key_size;
  pthread_mutex_t lock; /* builds below */
  /* Under lock. */
  enum verdict verdict;
  int gray;                   /* gray profile: lut applies */
  cmsContext ctx;
  cmsHPROFILE source;         /* RGB profile the slot transforms start from */
  cmsHPROFILE srgb;
  cmsHTRANSFORM slots[SLOT_COUNT];
  fast_matrix *fast;          /* a matrix/TRC source: no lcms2 transform needed */
  uint8_t lut[256];
  char message[200];
  /* Under the cache mutex. */
  int refs;
  int cached;
  struct pxl_color_transform *prev, *next; /* LRU list, most recent first */
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pxl_color_transform *cache_head, *cache_tail;
static int cache_count;
static size_t cache_key_bytes;
static atomic_uint_fast64_t transforms_built;

uint64_t pxl_color_transforms_built(void) { return (uint64_t)atomic_load(&transforms_built); }

/* ---- keys ----------------------------------------------------------------------- */

static uint64_t fnv1a(const uint8_t *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* The source's bytes: 'I' + the profile; 'N' + primaries, transfer; 'P' + cHRM, gAMA.
 * Returns 0 when there is nothing to manage (untagged or sRGB): no entry at all. */
typedef struct key_header {
  char kind;
  int32_t numbers[10];
} key_header;

static int source_key(const pxl_codec_color *c, uint8_t **key, size_t *size, const uint8_t **borrowed) {
  *key = NULL;
  *borrowed = NULL;
  *size = 0;
  if (c->icc != NULL && c->icc_size > 0) {
    *borrowed = c->icc; /* the ICC bytes are the key; copied only when an entry is made */
    *size = c->icc_size;
    return 1;
  }
  if (c->srgb) return 0;
  key_header k;
  memset(&k, 0, sizeof k);
  if (c->cicp_primaries != 0 || c->cicp_transfer != 0) {
    int p = c->cicp_primaries == 2 ? 1 : c->cicp_primaries; /* unspecified: BT.709 */
    int t = c->cicp_transfer == 2 ? 13 : c->cicp_transfer;  /* unspecified: sRGB */
    if ((p == 1 || p == 0) && (t == 13 || t == 0)) return 0;
    k.kind = 'N';
    k.numbers[0] = p;
    k.numbers[1] = t;
  } else if (c->has_chrm || c->gamma > 0) {
    /* cHRM and gAMA each apply, alone or together, as browsers apply them: cHRM alone has
     * the sRGB curve, gAMA alone sRGB's primaries. */
    /* gAMA 45455 (1/2.2) with sRGB's cHRM or none is what libpng and most encoders write
     * for an sRGB image (the PNG spec asks writers of sRGB to add both for old readers):
     * taken as sRGB, so it costs nothing and looks like the untagged file. */
    static const int32_t srgb_chrm[8] = {31270, 32900, 64000, 33000, 30000, 60000, 15000, 6000};
    int chrm_srgb = 1;
    for (int i = 0; i < 8 && c->has_chrm; i++)
      if (c->chrm[i] < srgb_chrm[i] - 500 || c->chrm[i] > srgb_chrm[i] + 500) chrm_srgb = 0;
    if (chrm_srgb && (c->gamma == 0 || (c->gamma >= 45000 && c->gamma <= 46000))) return 0;
    k.kind = 'P';
    if (c->has_chrm) memcpy(k.numbers, c->chrm, sizeof c->chrm);
    k.numbers[8] = c->has_chrm;
    k.numbers[9] = c->gamma;
  } else {
    return 0;
  }
  *key = malloc(sizeof k);
  if (*key == NULL) return -1;
  memcpy(*key, &k, sizeof k);
  *size = sizeof k;
  return 1;
}

/* ---- lcms2 helpers ------------------------------------------------------------------ */

static void on_lcms_error(cmsContext ctx, cmsUInt32Number code, const char *text) {
  (void)code;
  struct pxl_color_transform *t = cmsGetContextUserData(ctx);
  if (t != NULL && t->message[0] == '\0') snprintf(t->message, sizeof t->message, "lcms2: %s", text ? text : "error");
}

static void set_bad(struct pxl_color_transform *t, const char *why) {
  t->verdict = VERDICT_BAD;
  /* An lcms2 message already there says more; keep it, prefixed with ours. */
  if (t->message[0] != '\0') {
    char lcms[sizeof t->message];
    memcpy(lcms, t->message, sizeof lcms);
    snprintf(t->message, sizeof t->message, "%.80s (%.110s)", why, lcms);
  } else {
    snprintf(t->message, sizeof t->message, "%s", why);
  }
}

/* The sRGB transfer as an lcms2 parametric curve (type 4, IEC 61966-2-1). */
static cmsToneCurve *srgb_curve(cmsContext ctx) {
  const cmsFloat64Number p[5] = {2.4, 1.0 / 1.055, 0.055 / 1.055, 1.0 / 12.92, 0.04045};
  return cmsBuildParametricToneCurve(ctx, 4, p);
}

/* reference: the curve of lcms2's own sRGB profile. */
static int curve_is_srgb(const cmsToneCurve *curve, const cmsToneCurve *reference) {
  if (curve == NULL || reference == NULL) return 0;
  for (int i = 0; i <= 255; i++) {
    cmsFloat32Number x = (cmsFloat32Number)(i / 255.0);
    if (fabs(cmsEvalToneCurveFloat(curve, x) - cmsEvalToneCurveFloat(reference, x)) > SRGB_TRC_TOLERANCE) return 0;
  }
  return 1;
}

static int xyz_close(const cmsCIEXYZ *a, const cmsCIEXYZ *b) {
  return a != NULL && b != NULL && fabs(a->X - b->X) <= SRGB_XYZ_TOLERANCE && fabs(a->Y - b->Y) <= SRGB_XYZ_TOLERANCE &&
         fabs(a->Z - b->Z) <= SRGB_XYZ_TOLERANCE;
}

/* A profile that converts like sRGB: matrix/TRC (no lookup table lcms2 would use for a
 * relative colorimetric input), colorants and curves within tolerance of lcms2's sRGB. */
static int profile_is_srgb(cmsHPROFILE p, cmsHPROFILE srgb) {
  cmsColorSpaceSignature space = cmsGetColorSpace(p);
  if (space == cmsSigGrayData) {
    return !cmsIsCLUT(p, INTENT_RELATIVE_COLORIMETRIC, LCMS_USED_AS_INPUT) &&
           curve_is_srgb(cmsReadTag(p, cmsSigGrayTRCTag), cmsReadTag(srgb, cmsSigRedTRCTag));
  }
  if (space != cmsSigRgbData || !cmsIsMatrixShaper(p) || cmsIsCLUT(p, INTENT_RELATIVE_COLORIMETRIC, LCMS_USED_AS_INPUT))
    return 0;
  const cmsTagSignature colorants[3] = {cmsSigRedColorantTag, cmsSigGreenColorantTag, cmsSigBlueColorantTag};
  const cmsTagSignature curves[3] = {cmsSigRedTRCTag, cmsSigGreenTRCTag, cmsSigBlueTRCTag};
  for (int i = 0; i < 3; i++) {
    if (!xyz_close(cmsReadTag(p, colorants[i]), cmsReadTag(srgb, colorants[i]))) return 0;
    if (!curve_is_srgb(cmsReadTag(p, curves[i]), cmsReadTag(srgb, curves[i]))) return 0;
  }
  return 1;
}

/* ITU-T H.273 colour primaries: white x, y, red x, y, green x, y, blue x, y. */
static int h273_primaries(int code, double out[8]) {
  static const struct { int code; double v[8]; } table[] = {
    {1, {0.3127, 0.3290, 0.640, 0.330, 0.300, 0.600, 0.150, 0.060}},   /* BT.709, sRGB */
    {4, {0.310, 0.316, 0.67, 0.33, 0.21, 0.71, 0.14, 0.08}},           /* BT.470 M (illuminant C) */
    {5, {0.3127, 0.3290, 0.64, 0.33, 0.29, 0.60, 0.15, 0.06}},         /* BT.470 BG, BT.601 625 */
    {6, {0.3127, 0.3290, 0.630, 0.340, 0.310, 0.595, 0.155, 0.070}},   /* BT.601 525, SMPTE 170M */
    {7, {0.3127, 0.3290, 0.630, 0.340, 0.310, 0.595, 0.155, 0.070}},   /* SMPTE 240M */
    {8, {0.310, 0.316, 0.681, 0.319, 0.243, 0.692, 0.145, 0.049}},     /* generic film (illuminant C) */
    {9, {0.3127, 0.3290, 0.708, 0.292, 0.170, 0.797, 0.131, 0.046}},   /* BT.2020, BT.2100 */
    {11, {0.314, 0.351, 0.680, 0.320, 0.265, 0.690, 0.150, 0.060}},    /* SMPTE RP 431-2 (DCI-P3) */
    {12, {0.3127, 0.3290, 0.680, 0.320, 0.265, 0.690, 0.150, 0.060}},  /* SMPTE EG 432-1 (Display P3) */
    {22, {0.3127, 0.3290, 0.630, 0.340, 0.295, 0.605, 0.155, 0.077}},  /* EBU Tech 3213-E */
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    if (table[i].code == code) {
      memcpy(out, table[i].v, sizeof table[i].v);
      return 1;
    }
  }
  return 0;
}

/* ITU-T H.273 transfer characteristics as the curve from the coded value to linear
 * light: the inverse of the OETF the standard gives (as Chrome and libavif's own
 * conversions read them). PQ and HLG are HDR: not handled (see pxl_codecs.h). */
static cmsToneCurve *h273_transfer(cmsContext ctx, int code, char *why, size_t cap) {
  switch (code) {
    case 1: case 6: case 11: case 14: case 15: { /* BT.709 / BT.601 / BT.2020 OETF */
      const cmsFloat64Number p[5] = {1.0 / 0.45, 1.0 / 1.099, 0.099 / 1.099, 1.0 / 4.5, 0.081};
      return cmsBuildParametricToneCurve(ctx, 4, p);
    }
    case 4: return cmsBuildGamma(ctx, 2.2);  /* BT.470 M */
    case 5: return cmsBuildGamma(ctx, 2.8);  /* BT.470 BG */
    case 8: return cmsBuildGamma(ctx, 1.0);  /* linear */
    case 13: return srgb_curve(ctx);         /* sRGB */
    case 16: snprintf(why, cap, "HDR transfer PQ (16) is not tone-mapped: values kept"); return NULL;
    case 18: snprintf(why, cap, "HDR transfer HLG (18) is not tone-mapped: values kept"); return NULL;
    default: snprintf(why, cap, "unsupported transfer characteristics %d: values kept", code); return NULL;
  }
}

static cmsHPROFILE rgb_profile(cmsContext ctx, const double v[8], cmsToneCurve *curve) {
  cmsCIExyY white = {v[0], v[1], 1.0};
  cmsCIExyYTRIPLE primaries = {{v[2], v[3], 1.0}, {v[4], v[5], 1.0}, {v[6], v[7], 1.0}};
  cmsToneCurve *curves[3] = {curve, curve, curve};
  return cmsCreateRGBProfileTHR(ctx, &white, &primaries, curves);
}

static fast_matrix *build_fast(struct pxl_color_transform *t);

/* Builds the entry's verdict and lcms2 objects (entry lock held, verdict PENDING). */
static void build_entry(struct pxl_color_transform *t) {
  t->ctx = cmsCreateContext(NULL, t);
  if (t->ctx == NULL) {
    set_bad(t, "out of memory");
    return;
  }
  cmsSetLogErrorHandlerTHR(t->ctx, on_lcms_error);
  t->srgb = cmsCreate_sRGBProfileTHR(t->ctx);
  if (t->srgb == NULL) {
    set_bad(t, "cannot build sRGB");
    return;
  }
  const key_header *k = (const key_header *)t->key;
  if (t->key_size != sizeof *k || (k->kind != 'N' && k->kind != 'P')) {
    /* An ICC profile. */
    cmsHPROFILE p = cmsOpenProfileFromMemTHR(t->ctx, t->key, (cmsUInt32Number)t->key_size);
    if (p == NULL) {
      set_bad(t, "unreadable ICC profile");
      return;
    }
    t->source = p;
    cmsColorSpaceSignature space = cmsGetColorSpace(p);
    cmsProfileClassSignature cls = cmsGetDeviceClass(p);
    if (cls == cmsSigLinkClass || cls == cmsSigAbstractClass || cls == cmsSigNamedColorClass) {
      set_bad(t, "ICC profile is not an image profile (device link, abstract or named colour)");
      return;
    }
    if (space == cmsSigCmykData) {
      /* The JPEG shim converts CMYK to RGB itself (as Pillow): the profile describes ink
       * values no longer at hand. Deliberately not applied. */
      t->verdict = VERDICT_NONE;
      return;
    }
    if (space != cmsSigRgbData && space != cmsSigGrayData) {
      set_bad(t, "ICC profile of an unsupported colour space (not RGB, gray or CMYK)");
      return;
    }
    if (profile_is_srgb(p, t->srgb)) {
      t->verdict = VERDICT_NONE;
      return;
    }
    if (space == cmsSigGrayData) {
      cmsToneCurve *curve = srgb_curve(t->ctx);
      cmsHPROFILE sgray = curve ? cmsCreateGrayProfileTHR(t->ctx, cmsD50_xyY(), curve) : NULL;
      if (curve) cmsFreeToneCurve(curve);
      cmsHTRANSFORM x = sgray ? cmsCreateTransformTHR(t->ctx, p, TYPE_GRAY_8, sgray, TYPE_GRAY_8,
                                                      INTENT_RELATIVE_COLORIMETRIC, 0) : NULL;
      if (sgray) cmsCloseProfile(sgray);
      if (x == NULL) {
        set_bad(t, "cannot convert this gray ICC profile");
        return;
      }
      uint8_t in[256];
      for (int i = 0; i < 256; i++) in[i] = (uint8_t)i;
      cmsDoTransform(x, in, t->lut, 256);
      cmsDeleteTransform(x);
      atomic_fetch_add(&transforms_built, 1);
      t->gray = 1;
    } else if ((t->fast = build_fast(t)) != NULL) {
      atomic_fetch_add(&transforms_built, 1);
    }
    t->verdict = VERDICT_CONVERT;
    return;
  }
  double v[8];
  cmsToneCurve *curve = NULL;
  char why[120] = "";
  if (k->kind == 'N') {
    if (!h273_primaries(k->numbers[0], v)) {
      snprintf(why, sizeof why, "unsupported colour primaries %d: values kept", (int)k->numbers[0]);
      set_bad(t, why);
      return;
    }
    curve = h273_transfer(t->ctx, k->numbers[1] == 0 ? 13 : k->numbers[1], why, sizeof why);
    if (curve == NULL) {
      set_bad(t, why[0] ? why : "cannot build the transfer curve");
      return;
    }
  } else {
    /* PNG: cHRM (or sRGB's primaries) and gAMA (or sRGB's curve). gAMA is the encoding
     * exponent in 1/100000: decoding raises to 100000 / gAMA. */
    if (k->numbers[8]) {
      for (int i = 0; i < 8; i++) v[i] = k->numbers[i] / 100000.0;
    } else {
      h273_primaries(1, v);
    }
    int32_t gamma = k->numbers[9];
    curve = gamma > 0 ? cmsBuildGamma(t->ctx, 100000.0 / gamma) : srgb_curve(t->ctx);
    if (curve == NULL) {
      set_bad(t, "cannot build the gAMA curve");
      return;
    }
  }
  t->source = rgb_profile(t->ctx, v, curve);
  cmsFreeToneCurve(curve);
  if (t->source == NULL) {
    set_bad(t, k->kind == 'N' ? "invalid colour primaries" : "invalid cHRM");
    return;
  }
  /* cHRM/gAMA that are sRGB's own (within tolerance: writers round them) cost nothing. */
  t->verdict = profile_is_srgb(t->source, t->srgb) ? VERDICT_NONE : VERDICT_CONVERT;
  if (t->verdict == VERDICT_CONVERT && (t->fast = build_fast(t)) != NULL) atomic_fetch_add(&transforms_built, 1);
}

static inline uint8_t unpremul(unsigned c, unsigned a) { return (uint8_t)(c >= a ? 255 : (c * 255 + a / 2) / a); }
static inline uint8_t premul(unsigned c, unsigned a) { return (uint8_t)((c * a + 127) / 255); }

/* A matrix/TRC RGB source's conversion as tables (see the top of this file); NULL for a
 * source with lookup tables, or without memory (lcms2 transforms then). */
static fast_matrix *build_fast(struct pxl_color_transform *t) {
  cmsHPROFILE p = t->source;
  if (cmsGetColorSpace(p) != cmsSigRgbData || !cmsIsMatrixShaper(p) ||
      cmsIsCLUT(p, INTENT_RELATIVE_COLORIMETRIC, LCMS_USED_AS_INPUT))
    return NULL;
  const cmsTagSignature colorants[3] = {cmsSigRedColorantTag, cmsSigGreenColorantTag, cmsSigBlueColorantTag};
  const cmsTagSignature curves[3] = {cmsSigRedTRCTag, cmsSigGreenTRCTag, cmsSigBlueTRCTag};
  double src[3][3], dst[3][3];
  const cmsToneCurve *trc[3];
  for (int i = 0; i < 3; i++) {
    const cmsCIEXYZ *a = cmsReadTag(p, colorants[i]), *b = cmsReadTag(t->srgb, colorants[i]);
    trc[i] = cmsReadTag(p, curves[i]);
    if (a == NULL || b == NULL || trc[i] == NULL) return NULL;
    src[0][i] = a->X, src[1][i] = a->Y, src[2][i] = a->Z;
    dst[0][i] = b->X, dst[1][i] = b->Y, dst[2][i] = b->Z;
  }
  /* inverse of dst by cofactors */
  double det = dst[0][0] * (dst[1][1] * dst[2][2] - dst[1][2] * dst[2][1]) -
               dst[0][1] * (dst[1][0] * dst[2][2] - dst[1][2] * dst[2][0]) +
               dst[0][2] * (dst[1][0] * dst[2][1] - dst[1][1] * dst[2][0]);
  if (fabs(det) < 1e-9) return NULL;
  double inv[3][3];
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 3; c++) {
      int r1 = (c + 1) % 3, r2 = (c + 2) % 3, c1 = (r + 1) % 3, c2 = (r + 2) % 3;
      inv[r][c] = (dst[r1][c1] * dst[r2][c2] - dst[r1][c2] * dst[r2][c1]) / det;
    }
  static const cmsFloat64Number srgb_inverse[5] = {2.4, 1.0 / 1.055, 0.055 / 1.055, 1.0 / 12.92, 0.04045};
  cmsToneCurve *encode = cmsBuildParametricToneCurve(t->ctx, -4, srgb_inverse); /* -4: type 4 inverted */
  fast_matrix *f = encode ? malloc(sizeof *f) : NULL;
  if (f == NULL) {
    if (encode) cmsFreeToneCurve(encode);
    return NULL;
  }
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 3; c++)
      f->m[r][c] = (float)(inv[r][0] * src[0][c] + inv[r][1] * src[1][c] + inv[r][2] * src[2][c]);
  for (int c = 0; c < 3; c++)
    for (int i = 0; i < 256; i++) f->lin[c][i] = cmsEvalToneCurveFloat(trc[c], (cmsFloat32Number)(i / 255.0));
  for (int i = 0; i < FAST_LEVELS; i++) {
    double v = cmsEvalToneCurveFloat(encode, (cmsFloat32Number)((double)i / (FAST_LEVELS - 1))) * 255.0 + 0.5;
    f->enc[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
  }
  cmsFreeToneCurve(encode);
  return f;
}

static inline uint8_t fast_encode(const fast_matrix *f, float v) {
  v = v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
  return f->enc[(int)(v * (FAST_LEVELS - 1) + 0.5f)];
}

/* One pixel of `channels` bytes at px; r, g, b: the offsets of its colour channels. */
static inline void fast_pixel(const fast_matrix *f, uint8_t *px, int channels, int r, int g, int b,
                              int premultiplied) {
  unsigned a = channels == 4 ? px[3] : 255, R = px[r], G = px[g], B = px[b];
  if (premultiplied && a != 255) {
    if (a == 0) return; /* nothing visible: stays 0 */
    R = unpremul(R, a), G = unpremul(G, a), B = unpremul(B, a);
  }
  float lr = f->lin[0][R], lg = f->lin[1][G], lb = f->lin[2][B];
  uint8_t outr = fast_encode(f, f->m[0][0] * lr + f->m[0][1] * lg + f->m[0][2] * lb);
  uint8_t outg = fast_encode(f, f->m[1][0] * lr + f->m[1][1] * lg + f->m[1][2] * lb);
  uint8_t outb = fast_encode(f, f->m[2][0] * lr + f->m[2][1] * lg + f->m[2][2] * lb);
  if (premultiplied && a != 255) outr = premul(outr, a), outg = premul(outg, a), outb = premul(outb, a);
  px[r] = outr, px[g] = outg, px[b] = outb;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PXL_COLOR_X86 1
#include <immintrin.h>

/* Eight 4-byte pixels at a time: the scalar path's float operations in its order (a
 * multiply, then the additions left to right, no fused multiply-add: "avx2" alone lets
 * no compiler contract them), the table reads as gathers; so every pixel comes out as
 * fast_pixel makes it (Tests/codecs/color_test.c compares the two). A group of eight with
 * a pixel not opaque in premultiplied pixels goes through fast_pixel. */
__attribute__((target("avx2"))) static void fast_row_avx2(const fast_matrix *f, uint8_t *row, int32_t width, int r,
                                                          int g, int b, int premultiplied) {
  const __m256i byte = _mm256_set1_epi32(0xff);
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  const __m256 levels = _mm256_set1_ps((float)(FAST_LEVELS - 1)), half = _mm256_set1_ps(0.5f);
  __m256 m[3][3];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) m[i][j] = _mm256_set1_ps(f->m[i][j]);
  const __m256i keep = _mm256_set1_epi32((int)~((0xffu << (8 * r)) | (0xffu << (8 * g)) | (0xffu << (8 * b))));
  int32_t x = 0;
  for (; x + 8 <= width; x += 8) {
    uint8_t *px = row + 4 * (size_t)x;
    __m256i v = _mm256_loadu_si256((const __m256i *)px);
    if (premultiplied) {
      __m256i alpha = _mm256_srli_epi32(v, 24);
      if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(alpha, byte)) != -1) {
        for (int i = 0; i < 8; i++) fast_pixel(f, px + 4 * i, 4, r, g, b, 1);
        continue;
      }
    }
    __m256i ri = _mm256_and_si256(_mm256_srli_epi32(v, 8 * r), byte);
    __m256i gi = _mm256_and_si256(_mm256_srli_epi32(v, 8 * g), byte);
    __m256i bi = _mm256_and_si256(_mm256_srli_epi32(v, 8 * b), byte);
    __m256 lr = _mm256_i32gather_ps(f->lin[0], ri, 4);
    __m256 lg = _mm256_i32gather_ps(f->lin[1], gi, 4);
    __m256 lb = _mm256_i32gather_ps(f->lin[2], bi, 4);
    __m256i out = _mm256_and_si256(v, keep);
    for (int c = 0; c < 3; c++) {
      __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(m[c][0], lr), _mm256_mul_ps(m[c][1], lg)),
                               _mm256_mul_ps(m[c][2], lb));
      /* v < 0 ? 0 : v > 1 ? 1 : v, then (int)(v * 16383 + 0.5f) */
      s = _mm256_min_ps(_mm256_max_ps(s, zero), one);
      __m256i index = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(s, levels), half));
      __m256i coded = _mm256_and_si256(_mm256_i32gather_epi32((const int *)(const void *)f->enc, index, 1), byte);
      int shift = 8 * (c == 0 ? r : c == 1 ? g : b);
      out = _mm256_or_si256(out, _mm256_sll_epi32(coded, _mm_cvtsi32_si128(shift)));
    }
    _mm256_storeu_si256((__m256i *)px, out);
  }
  for (; x < width; x++) fast_pixel(f, row + 4 * (size_t)x, 4, r, g, b, premultiplied);
}

static int color_path_best(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") ? 1 : 0;
}
#endif

static atomic_int color_path = -1; /* -1: not chosen yet; 0 scalar, 1 AVX2 */

int pxl_color_force_path(int32_t path) {
  if (path < 0) {
    atomic_store(&color_path, -1);
    return -1;
  }
#ifdef PXL_COLOR_X86
  if (path == 1 && !color_path_best()) return -1;
#else
  if (path == 1) return -1;
#endif
  atomic_store(&color_path, path ? 1 : 0);
  return path ? 1 : 0;
}

static int use_avx2(void) {
#ifdef PXL_COLOR_X86
  int path = atomic_load(&color_path);
  if (path < 0) {
    path = color_path_best();
    atomic_store(&color_path, path);
  }
  return path == 1;
#else
  return 0;
#endif
}

/* r, g, b: the offsets of the colour channels in a pixel of `channels` bytes. */
static void apply_fast(const fast_matrix *f, uint8_t *pixels, int32_t width, int32_t height, int32_t stride,
                       int channels, int r, int g, int b, int premultiplied) {
#ifdef PXL_COLOR_X86
  if (channels == 4 && use_avx2()) {
    for (int32_t y = 0; y < height; y++) fast_row_avx2(f, pixels + (size_t)y * (size_t)stride, width, r, g, b,
                                                       premultiplied);
    return;
  }
#endif
  for (int32_t y = 0; y < height; y++) {
    uint8_t *px = pixels + (size_t)y * (size_t)stride;
    for (int32_t x = 0; x < width; x++, px += channels) fast_pixel(f, px, channels, r, g, b, premultiplied);
  }
}

static void entry_free(struct pxl_color_transform *t) {
  free(t->fast);
  for (int i = 0; i < SLOT_COUNT; i++)
    if (t->slots[i]) cmsDeleteTransform(t->slots[i]);
  if (t->source) cmsCloseProfile(t->source);
  if (t->srgb) cmsCloseProfile(t->srgb);
  if (t->ctx) cmsDeleteContext(t->ctx);
  pthread_mutex_destroy(&t->lock);
  free(t->key);
  free(t);
}

/* ---- the cache -------------------------------------------------------------------- */

static void lru_unlink(struct pxl_color_transform *t) {
  if (t->prev) t->prev->next = t->next; else cache_head = t->next;
  if (t->next) t->next->prev = t->prev; else cache_tail = t->prev;
  t->prev = t->next = NULL;
}

static void lru_push_front(struct pxl_color_transform *t) {
  t->prev = NULL;
  t->next = cache_head;
  if (cache_head) cache_head->prev = t;
  cache_head = t;
  if (cache_tail == NULL) cache_tail = t;
}

/* Cache lock held: drops t from the cache; returns 1 when the caller must free it. */
static int uncache(struct pxl_color_transform *t) {
  lru_unlink(t);
  t->cached = 0;
  cache_count--;
  cache_key_bytes -= t->key_size;
  return --t->refs == 0;
}

void pxl_color_cache_clear(void) {
  struct pxl_color_transform *doomed = NULL;
  pthread_mutex_lock(&cache_lock);
  while (cache_head) {
    struct pxl_color_transform *t = cache_head;
    if (uncache(t)) { t->next = doomed; doomed = t; }
  }
  pthread_mutex_unlock(&cache_lock);
  while (doomed) {
    struct pxl_color_transform *next = doomed->next;
    entry_free(doomed);
    doomed = next;
  }
}

void pxl_color_transform_release(pxl_color_transform *t) {
  if (t == NULL) return;
  pthread_mutex_lock(&cache_lock);
  int last = --t->refs == 0;
  pthread_mutex_unlock(&cache_lock);
  if (last) entry_free(t);
}

/* The entry for key (found or made), with a reference for the caller; NULL without memory. */
static struct pxl_color_transform *entry_for(const uint8_t *key, size_t size, uint8_t *owned_key) {
  uint64_t hash = fnv1a(key, size);
  struct pxl_color_transform *found = NULL, *doomed = NULL;
  pthread_mutex_lock(&cache_lock);
  for (struct pxl_color_transform *t = cache_head; t; t = t->next) {
    if (t->hash == hash && t->key_size == size && memcmp(t->key, key, size) == 0) {
      found = t;
      break;
    }
  }
  if (found) {
    found->refs++;
    lru_unlink(found);
    lru_push_front(found);
    pthread_mutex_unlock(&cache_lock);
    free(owned_key);
    return found;
  }
  struct pxl_color_transform *t = calloc(1, sizeof *t);
  uint8_t *copy = owned_key ? owned_key : malloc(size);
  if (t == NULL || copy == NULL) {
    pthread_mutex_unlock(&cache_lock);
    free(t);
    free(copy);
    return NULL;
  }
  if (!owned_key) memcpy(copy, key, size);
  pthread_mutex_init(&t->lock, NULL);
  t->hash = hash;
  t->key = copy;
  t->key_size = size;
  t->refs = 1;
  if (size <= ENTRY_MAX_KEY_BYTES) {
    /* Make room, least recently used first; an entry in use lives on until released. */
    while (cache_tail && (cache_count >= CACHE_MAX_ENTRIES || cache_key_bytes + size > CACHE_MAX_KEY_BYTES)) {
      struct pxl_color_transform *old = cache_tail;
      if (uncache(old)) { old->next = doomed; doomed = old; }
    }
    t->cached = 1;
    t->refs++;
    cache_count++;
    cache_key_bytes += size;
    lru_push_front(t);
  }
  pthread_mutex_unlock(&cache_lock);
  while (doomed) {
    struct pxl_color_transform *next = doomed->next;
    entry_free(doomed);
    doomed = next;
  }
  return t;
}

pxl_color_transform *pxl_color_transform_get(const pxl_codec_color *color, char *message, size_t cap) {
  if (message && cap) message[0] = '\0';
  if (color == NULL) return NULL;
  uint8_t *owned = NULL;
  const uint8_t *borrowed = NULL;
  size_t size = 0;
  int has = source_key(color, &owned, &size, &borrowed);
  if (has <= 0) {
    if (has < 0 && message && cap) snprintf(message, cap, "colour: out of memory");
    return NULL;
  }
  struct pxl_color_transform *t = entry_for(owned ? owned : borrowed, size, owned);
  if (t == NULL) {
    if (message && cap) snprintf(message, cap, "colour: out of memory");
    return NULL;
  }
  pthread_mutex_lock(&t->lock);
  if (t->verdict == VERDICT_PENDING) build_entry(t);
  enum verdict verdict = t->verdict;
  if (verdict == VERDICT_BAD && message && cap) snprintf(message, cap, "colour profile not applied: %s", t->message);
  pthread_mutex_unlock(&t->lock);
  if (verdict != VERDICT_CONVERT) {
    pxl_color_transform_release(t);
    return NULL;
  }
  return t;
}

int32_t pxl_color_transform_is_gray(const pxl_color_transform *t) {
  /* gray is set before the verdict is published under the entry lock, and never after. */
  return t != NULL && t->gray;
}

/* ---- applying --------------------------------------------------------------------- */

static cmsHTRANSFORM slot_transform(struct pxl_color_transform *t, enum slot slot, char *message, size_t cap) {
  static const cmsUInt32Number formats[SLOT_COUNT] = {TYPE_RGBA_8, TYPE_BGRA_8, TYPE_RGB_8};
  pthread_mutex_lock(&t->lock);
  cmsHTRANSFORM x = t->slots[slot];
  if (x == NULL) {
    t->message[0] = '\0';
    /* Alpha (the extra channel) is copied as it is. */
    cmsUInt32Number flags = slot == SLOT_RGB ? 0 : cmsFLAGS_COPY_ALPHA;
    x = cmsCreateTransformTHR(t->ctx, t->source, formats[slot], t->srgb, formats[slot], INTENT_RELATIVE_COLORIMETRIC,
                              flags);
    if (x != NULL) {
      t->slots[slot] = x;
      atomic_fetch_add(&transforms_built, 1);
    } else if (message && cap) {
      snprintf(message, cap, "colour profile not applied: cannot build the transform%s%s",
               t->message[0] ? ": " : "", t->message);
    }
  }
  pthread_mutex_unlock(&t->lock);
  return x;
}


static void apply_lut(const uint8_t lut[256], uint8_t *p, int32_t width, int32_t height, int32_t stride,
                      int32_t channels, int premultiplied) {
  for (int32_t y = 0; y < height; y++) {
    uint8_t *row = p + (size_t)y * (size_t)stride;
    for (int32_t x = 0; x < width; x++) {
      uint8_t *px = row + (size_t)x * (size_t)channels;
      int colours = channels == 4 ? 3 : channels;
      unsigned a = channels == 4 ? px[3] : 255;
      for (int c = 0; c < colours; c++) {
        if (premultiplied && a < 255) px[c] = a == 0 ? 0 : premul(lut[unpremul(px[c], a)], a);
        else px[c] = lut[px[c]];
      }
    }
  }
}

int pxl_color_transform_apply(pxl_color_transform *t, uint8_t *pixels, int32_t width, int32_t height, int32_t stride,
                              int32_t layout, int32_t premultiplied, char *message, size_t cap) {
  if (message && cap) message[0] = '\0';
  if (t == NULL || pixels == NULL || width < 0 || height < 0) return 0;
  int32_t channels = layout == PXL_CODEC_RGBA || layout == PXL_CODEC_BGRA ? 4 : layout == PXL_CODEC_RGB ? 3
                     : layout == PXL_CODEC_GRAY ? 1 : 0;
  if (channels == 0 || stride < width * channels) return 0;
  if (t->gray) {
    apply_lut(t->lut, pixels, width, height, stride, channels, premultiplied && channels == 4);
    return 1;
  }
  if (channels == 1) {
    if (message && cap) snprintf(message, cap, "colour: an RGB profile needs RGB pixels");
    return 0;
  }
  if (t->fast != NULL) {
    if (layout == PXL_CODEC_BGRA) apply_fast(t->fast, pixels, width, height, stride, 4, 2, 1, 0, premultiplied);
    else apply_fast(t->fast, pixels, width, height, stride, channels, 0, 1, 2, premultiplied && channels == 4);
    return 1;
  }
  enum slot slot = layout == PXL_CODEC_RGB ? SLOT_RGB : layout == PXL_CODEC_RGBA ? SLOT_RGBA : SLOT_BGRA;
  cmsHTRANSFORM x = slot_transform(t, slot, message, cap);
  if (x == NULL) return 0;
  if (!premultiplied || channels != 4) {
    cmsDoTransformLineStride(x, pixels, pixels, (cmsUInt32Number)width, (cmsUInt32Number)height,
                             (cmsUInt32Number)stride, (cmsUInt32Number)stride, 0, 0);
    return 1;
  }
  for (int32_t y = 0; y < height; y++) {
    uint8_t *row = pixels + (size_t)y * (size_t)stride;
    for (int32_t i = 0; i < width; i++) {
      uint8_t *px = row + 4 * (size_t)i;
      unsigned a = px[3];
      if (a != 0 && a != 255)
        for (int c = 0; c < 3; c++) px[c] = unpremul(px[c], a);
    }
    cmsDoTransform(x, row, row, (cmsUInt32Number)width);
    for (int32_t i = 0; i < width; i++) {
      uint8_t *px = row + 4 * (size_t)i;
      unsigned a = px[3];
      if (a == 0) px[0] = px[1] = px[2] = 0;
      else if (a != 255)
        for (int c = 0; c < 3; c++) px[c] = premul(px[c], a);
    }
  }
  return 1;
}

int pxl_color_transform_apply_gray(pxl_color_transform *t, uint8_t *rgb, int32_t width, int32_t height, uint8_t *gray,
                                   char *message, size_t cap) {
  /* Luma of the unconverted pixels if the conversion fails: the caller gets GRAY anyway. */
  int ok = pxl_color_transform_apply(t, rgb, width, height, width * 3, PXL_CODEC_RGB, 0, message, cap);
  if (gray == NULL) return 0;
  size_t n = (size_t)width * (size_t)height;
  /* libjpeg's BT.601 integer luma, as the shims' GRAY layout (pxl_codecs.h). */
  for (size_t i = 0; i < n; i++)
    gray[i] = (uint8_t)((19595u * rgb[3 * i] + 38470u * rgb[3 * i + 1] + 7471u * rgb[3 * i + 2] + 32768u) >> 16);
  return ok;
}
