/* Tests/codecs/check.h: the pass/fail counting the shim tests share (api_edges.c, resample_test.c,
 * png_unfilter_test.c, color_test.c, webp_api.c). Each test is one translation unit: the
 * counters are its own.
 * CHECK(cond, printf-format, ...) counts a pass, or a failure printed with its line; the
 * test ends by printing "N passed, N failed" from them. */
#ifndef PXL_TESTS_CHECK_H
#define PXL_TESTS_CHECK_H

#include <stdio.h>

static int passed, failed;

#define CHECK(cond, ...)                                 \
  do {                                                   \
    if (cond) passed++;                                  \
    else {                                               \
      failed++;                                          \
      printf("  FAIL %s:%d: ", __FILE__, __LINE__);      \
      printf(__VA_ARGS__);                               \
      printf("\n");                                      \
    }                                                    \
  } while (0)

#endif
