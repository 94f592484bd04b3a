/*
 * worker/wire.h: sending and receiving one protocol message (pxl_worker_protocol.h) with
 * at most one descriptor, for both sides. Static functions: include it from one .c file
 * per program.
 */
#ifndef PXL_WORKER_WIRE_H
#define PXL_WORKER_WIRE_H

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include "pxl_worker_protocol.h"

static inline void pxl_wire_head(pxl_worker_msg_head *head, uint16_t type, uint32_t size, uint32_t serial) {
  head->magic = PXL_WORKER_MAGIC;
  head->version = PXL_WORKER_PROTOCOL_VERSION;
  head->type = type;
  head->size = size;
  head->serial = serial;
}

/* Sends size bytes of msg, with fd (-1: none). Returns 0, or -1 (errno). MSG_NOSIGNAL: a
 * peer that died is an error, not a SIGPIPE. */
static inline int pxl_wire_send(int sock, const void *msg, size_t size, int fd) {
  struct iovec iov = {.iov_base = (void *)msg, .iov_len = size};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } control;
  struct msghdr mh;
  memset(&mh, 0, sizeof mh);
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  if (fd >= 0) {
    memset(&control, 0, sizeof control);
    mh.msg_control = control.buf;
    mh.msg_controllen = sizeof control.buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  ssize_t n;
  do n = sendmsg(sock, &mh, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == (ssize_t)size ? 0 : -1;
}

/* Receives one message into buf (cap bytes). Returns its length (0: the peer closed), or
 * -1 (errno; EMSGSIZE for a message longer than cap). *fd gets a descriptor that came
 * with it, else -1; pass fd NULL to refuse descriptors: any that arrive are closed, as
 * are all but the first, so a peer cannot fill our table. */
static inline ssize_t pxl_wire_recv(int sock, void *buf, size_t cap, int *fd) {
  struct iovec iov = {.iov_base = buf, .iov_len = cap};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(4 * sizeof(int))];
  } control;
  struct msghdr mh;
  memset(&mh, 0, sizeof mh);
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = control.buf;
  mh.msg_controllen = sizeof control.buf;
  if (fd) *fd = -1;
  ssize_t n;
  do n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n < 0) return -1;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; i++) {
      int got;
      memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
      if (fd && *fd < 0) *fd = got;
      else close(got);
    }
  }
  if (mh.msg_flags & MSG_TRUNC) {
    if (fd && *fd >= 0) close(*fd), *fd = -1;
    errno = EMSGSIZE;
    return -1;
  }
  return n;
}

/* Whether a received message of n bytes is a well-formed message of this type and size. */
static inline int pxl_wire_valid(const void *buf, ssize_t n, uint16_t type, size_t size) {
  const pxl_worker_msg_head *head = buf;
  return n == (ssize_t)size && head->magic == PXL_WORKER_MAGIC && head->version == PXL_WORKER_PROTOCOL_VERSION &&
         head->type == type && head->size == size;
}

#endif
