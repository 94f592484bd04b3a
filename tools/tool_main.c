/*
 * pixload: the command-line client of libpixload, written against pixload.h only.
 *
 *   pixload version
 *   pixload fetch [options] URL...
 *   pixload hash --blurhash|--thumbhash [options] URL...
 *   pixload play [--frames N] [options] URL
 *
 * fetch loads every URL through one loader and one queue, all at once, drains the
 * queue on this thread, and prints one line per URL in the order given:
 *
 *   STATUS WxH SOURCE MS URL[  (message, HTTP n)]
 *
 * SOURCE is memory, disk, revalidated, network, file (a file:// URL, --allow-file),
 * data (a data: URI, --allow-data) or none: the result's pxl_source.
 * A closing summary line follows (tool_operate.c says what its figures measure):
 *
 *   N loaded, N failed, X.X images/s, Y.YYY ms CPU/image
 *
 * --out-dir creates its directory, parents included. While more than 20 URLs load and
 * stderr is a terminal, one line there counts what has finished (tool_progress.c).
 *
 * fetch --metrics prints one JSON object per URL instead (tool_writeout_json.c), and the
 * summary on stderr, then "memory cache: N images, B bytes", so that stdout pipes into
 * jq. hash prints one placeholder per URL:
 * the BlurHash (4x3 components) or the ThumbHash in base64. play plays one animation
 * frame by frame at its durations through a player (tool_play.c says what it prints).
 *
 * Exit status: 0 if every URL loaded (and was written), 1 otherwise, 2 on a usage error.
 * The manual: docs/pixload.1 (`man pixload` once installed). tools/README.md names the
 * files of this program and what each does.
 *
 * Build: gcc -std=c11 -O2 -I include tools/tool_*.c -L DIR -lpixload -lpng -o pixload
 */
#include <stdio.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "pixload.h"
#include "tool_help.h"
#include "tool_operate.h"
#include "tool_play.h"

int main(int argc, char **argv) {
  if (argc < 2) return usage_error(NULL, NULL);
#ifdef __GLIBC__
  /* A short-lived batch: freed memory is kept for the next body and decode instead of
   * going back to the kernel after each (glibc trims a heap's top and unmaps blocks over
   * 128 KiB-32 MiB as they are freed, and every reuse then faults in fresh zeroed pages:
   * ~8 of a web thumbnail's ~25 page faults). A library leaves this to its host. */
  mallopt(M_MMAP_THRESHOLD, 16 << 20);
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
#endif
  if (strcmp(argv[1], "version") == 0 && argc == 2) {
    printf("%s\n", pxl_version());
    /* The formats a default loader decodes: the built-in ones and the codec modules found. */
    pxl_loader *loader = NULL;
    if (pxl_loader_new(NULL, &loader) == PXL_OK) {
      char formats[512];
      pxl_loader_formats(loader, formats, sizeof formats);
      printf("formats: %s\n", formats);
      /* The layers the codec modules' decode workers run with ("Isolation"). */
      char layers[128];
      pxl_loader_isolation(loader, layers, sizeof layers);
      printf("isolation: %s\n", layers);
      pxl_loader_free(loader);
    }
    return 0;
  }
  if (strcmp(argv[1], "fetch") == 0) return operate(argc - 1, argv + 1, 0);
  if (strcmp(argv[1], "hash") == 0) return operate(argc - 1, argv + 1, 1);
  if (strcmp(argv[1], "play") == 0) return play(argc - 1, argv + 1);
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
    fputs(usage_text, stdout);
    return 0;
  }
  return usage_error("unknown command '%s'", argv[1]);
}
