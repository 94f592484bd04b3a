/* AVIF for bench_direct.c: libavif called directly (see avif_direct.c). Private to BenchDirect. */
#ifndef BENCH_AVIF_DIRECT_H
#define BENCH_AVIF_DIRECT_H

#include "bench_direct.h"

/* 1 when the data starts with an ftyp box naming the avif or avis brand. */
int bench_is_avif(const uint8_t *data, size_t size);
/* Full-size RGBA8 into out (0 on success); *has_alpha set. */
int bench_avif_decode(const uint8_t *data, size_t size, int *has_alpha, bench_image *out);
/* "AVIF 8-bit 4:2:0", "AVIF 10-bit 4:4:4", "AVIF alpha", ... or "unknown". */
const char *bench_avif_kind(const uint8_t *data, size_t size);

#endif
