/* Tests/codecs/rng.h: the seeded random cases the shim tests draw (resample_test.c,
 * png_unfilter_test.c): SplitMix64 from a fixed seed, so every run checks the same cases. */
#ifndef PXL_TESTS_RNG_H
#define PXL_TESTS_RNG_H

#include <stdint.h>

static inline uint64_t next(void) {
  static uint64_t state = 41;
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static inline int rand_in(int lo, int hi) { return lo + (int)(next() % (uint64_t)(hi - lo + 1)); }

#endif
