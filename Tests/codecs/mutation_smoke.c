/*
 * Mutation smoke test for the CCodecs shims: hostile input must never crash, read out
 * of bounds, leak, or hang. Not a coverage-guided fuzzer; a cheap, deterministic check
 * meant to run under AddressSanitizer/UBSan or valgrind.
 */
// gcc -O1 -g -fsanitize=address,undefined -I Sources/CCodecs/include Tests/codecs/mutation_smoke.c Sources/CCodecs/*.c -ljpeg -lpng -o /tmp/mutation_smoke
// find ../shared/corpus -name '*.png' -o -name '*.jp*g' | /tmp/mutation_smoke [mutations_per_file] [seed]
/*
 * Reads file paths from stdin, one per line. Each file is mutated mutations_per_file
 * times (default 20) with a fixed-seed PRNG (bit flips, random bytes, 0x00/0xff runs,
 * truncation, duplicated spans; every other PNG mutant gets its chunk CRCs fixed, so
 * the mutation reaches the image data) and every mutant goes through read_info and decode in
 * all four layouts (JPEG also at 1/2, 1/4, 1/8). Each mutant is copied into a buffer of
 * exactly its size so a read past the end is caught. Prints the slowest decode, and
 * per status counts; exits non-zero only by crashing (the sanitizer reports why).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zlib.h>

#include "pxl_codecs.h"

static uint64_t rng_state;
static uint32_t rnd(void) { /* xorshift64*: deterministic across platforms */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

static uint8_t *load(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return NULL; }
  long len = ftell(f);
  if (len < 0 || len > (64L << 20)) { fclose(f); return NULL; }
  rewind(f);
  uint8_t *d = malloc((size_t)len + 1);
  if (d && fread(d, 1, (size_t)len, f) != (size_t)len) { free(d); d = NULL; }
  fclose(f);
  *n = (size_t)len;
  return d;
}

/* Returns a freshly malloc'd mutant of exactly *n bytes. */
static uint8_t *mutate(const uint8_t *src, size_t len, size_t *n) {
  size_t cap = len * 2 + 64;
  uint8_t *m = malloc(cap);
  memcpy(m, src, len);
  size_t cur = len;
  int ops = 1 + (int)(rnd() % 4);
  for (int k = 0; k < ops; k++) {
    size_t pos = cur ? rnd() % cur : 0;
    switch (rnd() % 6) {
      case 0: if (cur) m[pos] ^= (uint8_t)(1u << (rnd() % 8)); break;
      case 1: if (cur) m[pos] = (uint8_t)rnd(); break;
      case 2: { size_t run = 1 + rnd() % 16; uint8_t v = (rnd() & 1) ? 0xff : 0x00;
                for (size_t i = pos; i < cur && i < pos + run; i++) m[i] = v; } break;
      case 3: cur = pos; break; /* truncate */
      case 4: { size_t span = 1 + rnd() % 64; if (pos + span > cur) span = cur - pos;
                if (cur + span <= cap) { memmove(m + pos + span, m + pos, cur - pos); cur += span; } } break;
      default: /* header region: sizes, chunk lengths, marker lengths live here */
        if (cur > 8) m[rnd() % (cur < 64 ? cur : 64)] = (uint8_t)rnd();
        break;
    }
  }
  uint8_t *exact = malloc(cur ? cur : 1);
  memcpy(exact, m, cur);
  free(m);
  *n = cur;
  return exact;
}

/* Recomputes the CRC of every complete chunk of a PNG mutant, so the mutation reaches
 * the image data (libpng's and png_fast.c's) instead of stopping at a CRC check. */
static void fix_png_crcs(uint8_t *d, size_t n) {
  size_t pos = 8;
  while (n - pos >= 12) {
    uint32_t len = (uint32_t)d[pos] << 24 | (uint32_t)d[pos + 1] << 16 | (uint32_t)d[pos + 2] << 8 | d[pos + 3];
    if ((uint64_t)len + 12 > n - pos) return;
    uint32_t crc = (uint32_t)crc32(0L, d + pos + 4, (uInt)len + 4);
    d[pos + 8 + len] = (uint8_t)(crc >> 24); d[pos + 9 + len] = (uint8_t)(crc >> 16);
    d[pos + 10 + len] = (uint8_t)(crc >> 8); d[pos + 11 + len] = (uint8_t)crc;
    pos += (size_t)len + 12;
  }
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  int per_file = argc > 1 ? atoi(argv[1]) : 20;
  rng_state = argc > 2 ? strtoull(argv[2], NULL, 10) : 0x9E3779B97F4A7C15ull;
  if (rng_state == 0) rng_state = 1;
  long counts[5] = {0}, runs = 0, files = 0;
  double worst = 0;
  char worst_name[512] = "", line[4096];
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\r\n")] = '\0';
    size_t len;
    uint8_t *orig = load(line, &len);
    if (!orig) continue;
    files++;
    for (int i = 0; i < per_file; i++) {
      size_t n;
      uint8_t *d = mutate(orig, len, &n);
      int is_png = n >= 4 && memcmp(d, "\x89PNG", 4) == 0;
      if (is_png && n > 8 && (i & 1)) fix_png_crcs(d, n);
      pxl_codec_info info;
      char msg[64];
      /* Exercise both parsers on every mutant: the magic may have been destroyed. */
      (void)pxl_png_read_info(d, n, &info, msg, sizeof msg);
      (void)pxl_jpeg_read_info(d, n, &info, msg, 1); /* capacity 1: must still terminate */
      /* The colour readers and lcms2 on the (mutated) profiles they find, converting a
       * few pixels when a conversion comes of it. */
      for (int png = 0; png < 2; png++) {
        pxl_codec_color c;
        if ((png ? pxl_png_color : pxl_jpeg_color)(d, n, &c) != PXL_CODEC_OK) continue;
        pxl_color_transform *t = pxl_color_transform_get(&c, msg, sizeof msg);
        uint8_t px[4 * 3] = {255, 0, 0, 255, 0, 255, 0, 128, 0, 0, 255, 0};
        if (t) (void)pxl_color_transform_apply(t, px, 3, 1, 12, PXL_CODEC_RGBA, i & 1, msg, sizeof msg);
        pxl_color_transform_release(t);
        pxl_codec_color_free(&c);
      }
      for (int layout = 0; layout < 4; layout++) {
        for (int s = 1; s <= 8; s *= 2) {
          if (is_png && s > 1) break;
          pxl_codec_output o;
          double t0 = now();
          pxl_codec_status st = is_png ? pxl_png_decode(d, n, layout, 20000000ull, &o)
                                       : pxl_jpeg_decode(d, n, layout, s, 20000000ull, &o);
          double dt = now() - t0;
          if (dt > worst) { worst = dt; snprintf(worst_name, sizeof worst_name, "%.400s (mutant %d)", line, i); }
          if (st >= 0 && st <= 4) counts[st]++;
          if (st == PXL_CODEC_OK) {
            /* Touch every byte so sanitizers see any short buffer. */
            volatile uint8_t acc = 0;
            for (size_t b = 0; b < (size_t)o.stride * (size_t)o.height; b++) acc ^= o.pixels[b];
            (void)acc;
          } else if (o.pixels != NULL) {
            fprintf(stderr, "BUG: failure with pixels: %s\n", line);
            abort();
          }
          if (memchr(o.message, '\0', sizeof o.message) == NULL) { fprintf(stderr, "BUG: message\n"); abort(); }
          free(o.pixels);
          runs++;
        }
      }
      free(d);
    }
    free(orig);
  }
  printf("%ld files, %ld decodes: ok %ld, corrupt %ld, too_many_pixels %ld, unsupported %ld, no_memory %ld\n", files, runs,
         counts[0], counts[1], counts[2], counts[3], counts[4]);
  printf("slowest decode: %.3f s: %s\n", worst, worst_name);
  pxl_color_cache_clear(); /* so LeakSanitizer sees only real leaks */
  return 0;
}
