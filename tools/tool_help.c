/*
 * tool_help.c: the usage text (`pixload --help`, and after every usage error) and the
 * usage error itself. The manual says the same at length: docs/pixload.1.in.
 */
#include <stdio.h>

#include "tool_help.h"

const char usage_text[] =
    "usage: pixload version\n"
    "       pixload fetch [options] URL...\n"
    "       pixload hash --blurhash|--thumbhash [options] URL...\n"
    "       pixload play [--frames N] [options] URL\n"
    "\n"
    "fetch options:\n"
    "  --size WxH            target size (default: the original size)\n"
    "  --mode fit|fill       how the image meets the target (default fit)\n"
    "  --format F            rgba8 | rgba8-premul | bgra8-premul | rgb8 | gray8 (default rgba8)\n"
    "  --no-orientation      do not apply EXIF orientation\n"
    "  --no-color-management keep the decoded values (default: embedded profiles to sRGB)\n"
    "  --allow-file          allow file:// URLs\n"
    "  --allow-data          allow data: URIs (base64 or percent-encoded)\n"
    "  --memory-cache-mb N   memory cache budget in MiB (0 disables; default 64 when a\n"
    "                        URL is listed twice, else 0: no image is asked for again)\n"
    "  --concurrency N       transfers at once over all hosts (default 8)\n"
    "  --per-host N          transfers at once per host (default 6)\n"
    "  --header LINE         send LINE ('Name: value') with every request; repeatable\n"
    "  --ca-file FILE        trust only the CAs in FILE (PEM) for https, not the system's\n"
    "  --ca-path DIR         trust only the CAs in DIR (hashed names, openssl rehash),\n"
    "                        with those of --ca-file if given\n"
    "  --proxy URL           transfers go through the proxy URL; '' for none (default:\n"
    "                        http_proxy, https_proxy, ALL_PROXY, no_proxy)\n"
    "  --timeout-ms N        whole-transfer timeout in ms (default 30000)\n"
    "  --retries N           further attempts after a transient failure (default 2)\n"
    "  --cache-dir DIR       disk cache directory (default $XDG_CACHE_HOME/pixload,\n"
    "                        else ~/.cache/pixload)\n"
    "  --disk-cache-mb N     disk cache budget in MiB (default 256)\n"
    "  --no-disk-cache       no disk cache\n"
    "  --isolation none|modules|all\n"
    "                        which codecs decode in a confined worker process (default\n"
    "                        modules: HEIC, JPEG XL, SVG; all: JPEG, PNG, WebP, GIF,\n"
    "                        AVIF too, animations as their first frame)\n"
    "  --decode-timeout-ms N an isolated decode's wall-clock limit (default 10000; 0: none)\n"
    "  --decode-threads N    decode threads (default: one per core); isolated formats\n"
    "                        keep up to N workers each\n"
    "  --variant-max-side N  keep decoded thumbnails up to NxN in the disk cache\n"
    "                        (default 256; 0: only the downloaded bytes)\n"
    "  --cache-only          offline: memory and disk only; a miss fails (not in the cache)\n"
    "  --reload              ignore what the caches hold (they are still written)\n"
    "  --urls FILE           read more URLs from FILE, one a line ('#' starts a comment)\n"
    "  --out FILE            write the image (one URL only): PNG if FILE ends in .png,\n"
    "                        else the raw pixels, rows packed (width x bytes per pixel)\n"
    "  --out-dir DIR         write DIR/NNNN-NAME.png per URL (NNNN: its position,\n"
    "                        NAME: the URL's last path component without extension);\n"
    "                        DIR and its parents are created when missing\n"
    "  --animate             every frame of an animated image (GIF); with --out-dir,\n"
    "                        frame N > 0 goes to DIR/NNNN-NAME.fNNN.png beside frame 0\n"
    "  --process SPEC        processors applied in order, comma-separated: circle,\n"
    "                        circle:BORDER_W:#RRGGBBAA, round:R or round:TL/TR/BR/BL\n"
    "                        (optionally :BORDER_W:#RRGGBBAA), blur:SIGMA (<= 250),\n"
    "                        crop:X:Y:W:H, rotate:90|180|270, flip:h|v, gray,\n"
    "                        tint:#RRGGBBAA (e.g. --process round:12,blur:4)\n"
    "  --quiet               print only the summary line (and no progress line)\n"
    "  --metrics             one JSON object per URL on stdout (what it cost: tier,\n"
    "                        joined, *_us times, *_bytes sizes) instead of the text\n"
    "                        line; the summary goes to stderr, then 'memory cache:\n"
    "                        N images, B bytes' (what the cache holds at the end)\n"
    "\n"
    "play plays URL's animation at its frame durations, each frame decoded as it\n"
    "falls due (fetch's options, not --out*, --metrics or --animate): a line per\n"
    "frame, then 'played N frames, first after T ms, peak frame memory B bytes'.\n"
    "  --frames N            frames to play (default: one loop)\n"
    "\n"
    "hash prints one line per URL: --blurhash its BlurHash (4x3 components), or\n"
    "--thumbhash its ThumbHash in base64; it takes fetch's options (not --out*).\n"
    "\n"
    "One line per URL, in the order given: STATUS WxH SOURCE MS URL, where SOURCE is\n"
    "memory, disk, revalidated, network, file (file:// URLs), data (data: URIs) or\n"
    "none; then a summary.\n"
    "STATUS \"OK incomplete\": the file ended early and its decoder filled in the rest\n"
    "(a cut JPEG or GIF; a cut PNG, WebP or AVIF fails with CORRUPT_IMAGE).\n"
    "With more than 20 URLs and stderr a terminal, a progress line is shown there.\n"
    "Premultiplied formats are un-premultiplied when written as PNG (PNG alpha is\n"
    "straight), and written as they are in raw files.\n"
    "\n"
    "Exit status: 0 if every URL loaded (and was written), 1 otherwise, 2 on a usage\n"
    "error. More in man pixload.\n";

int usage_error(const char *fmt, const char *arg) {
  if (fmt) {
    fprintf(stderr, "pixload: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
  }
  fputs(usage_text, stderr);
  return 2;
}
