/*
 * Tests/worker/lying_worker.c: a stand-in for pixload-decode-worker that breaks the
 * protocol on purpose, for test_worker.c's checks of the library's side
 * (worker/worker_client.c): the library must not trust a worker's answers. It takes the
 * spawn's arguments and reads its mode where the module directory goes (--modules MODE):
 *
 *   bad-hello      a HELLO one byte short
 *   silent         never answers a decode
 *   zero-size      a header of 0 x 4
 *   over-max       a header of 100000 x 100000 (then expects CANCEL)
 *   icc-huge       a header announcing a 1 GiB ICC profile
 *   wrong-serial   a header answering another decode
 *   oversized      a 4096-byte message
 *   garbage        16 bytes of no message
 *   keep-mapping   DONE while still mapping the pixel buffer writable
 *   shrink         truncates the pixel buffer (the seal refuses), then answers honestly
 *   send-fd        sends a descriptor with its header, then answers honestly
 *   size-lies      in a conversation (protocol 4), answers SIZE with another image's header
 *
 * An honest answer draws a 4 x 4 image of 0x5a bytes.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../worker/wire.h"

static int sock = PXL_WORKER_SOCKET_FD;

static void header(uint32_t serial, int32_t w, int32_t h, uint32_t icc, int fd) {
  pxl_worker_msg_header m;
  memset(&m, 0, sizeof m);
  pxl_wire_head(&m.head, PXL_WORKER_HEADER, sizeof m, serial);
  m.image_width = m.width = w;
  m.image_height = m.height = h;
  m.frame_count = m.orientation = 1;
  m.icc_size = icc;
  snprintf(m.codec, sizeof m.codec, "liar");
  pxl_wire_send(sock, &m, sizeof m, fd);
}

int main(int argc, char **argv) {
  const char *mode = "";
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--modules") == 0) mode = argv[i + 1];
  pxl_worker_msg_hello hello;
  memset(&hello, 0, sizeof hello);
  pxl_wire_head(&hello.head, PXL_WORKER_HELLO, sizeof hello, 0);
  snprintf(hello.codecs, sizeof hello.codecs, "liar");
  pxl_wire_send(sock, &hello, strcmp(mode, "bad-hello") == 0 ? sizeof hello - 1 : sizeof hello, -1);

  for (;;) {
    union {
      pxl_worker_msg_head head;
      pxl_worker_msg_decode decode;
      pxl_worker_msg_pixels pixels;
      char bytes[PXL_WORKER_MSG_MAX];
    } in;
    int fd;
    ssize_t n = pxl_wire_recv(sock, &in, sizeof in, &fd);
    if (n <= 0) return 0;
    if (fd >= 0) close(fd);
    if (in.head.type != PXL_WORKER_DECODE) continue;
    uint32_t serial = in.head.serial;
    if (strcmp(mode, "silent") == 0) {
      for (;;) pause();
    } else if (strcmp(mode, "zero-size") == 0) {
      header(serial, 0, 4, 0, -1);
    } else if (strcmp(mode, "over-max") == 0) {
      header(serial, 100000, 100000, 0, -1);
    } else if (strcmp(mode, "icc-huge") == 0) {
      header(serial, 4, 4, 1u << 30, -1);
    } else if (strcmp(mode, "wrong-serial") == 0) {
      header(serial + 1, 4, 4, 0, -1);
    } else if (strcmp(mode, "oversized") == 0) {
      static char big[4096];
      memcpy(big, &in.head, sizeof in.head);
      pxl_wire_send(sock, big, sizeof big, -1);
    } else if (strcmp(mode, "garbage") == 0) {
      pxl_wire_send(sock, "0123456789abcdef", 16, -1);
    } else if (strcmp(mode, "size-lies") == 0) {
      header(serial, 4, 4, 0, -1);
      n = pxl_wire_recv(sock, &in, sizeof in, &fd);
      if (n <= 0 || in.head.type != PXL_WORKER_SIZE) return 1;
      header(serial, 8, 8, 0, -1); /* the image is 4 x 4: its size is not SIZE's to change */
    } else {
      int passed = -1;
      if (strcmp(mode, "send-fd") == 0) passed = open("/dev/null", O_RDONLY);
      header(serial, 4, 4, 0, passed);
      if (passed >= 0) close(passed);
      n = pxl_wire_recv(sock, &in, sizeof in, &fd);
      if (n <= 0 || fd < 0) return 1;
      if (strcmp(mode, "shrink") == 0 && ftruncate(fd, 0) == 0) return 2; /* the seal must refuse */
      uint8_t *p = mmap(NULL, 64, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) return 3;
      memset(p, 0x5a, 64);
      if (strcmp(mode, "keep-mapping") != 0) munmap(p, 64);
      close(fd);
      pxl_worker_msg_done done;
      memset(&done, 0, sizeof done);
      pxl_wire_head(&done.head, PXL_WORKER_DONE, sizeof done, serial);
      pxl_wire_send(sock, &done, sizeof done, -1);
    }
  }
}
