/*
 * worker/landlock.c: which files the worker may read. Landlock (Linux 5.13+, no
 * privilege needed) restricts the process and every thread it starts, for good: after
 * landlock_restrict_self the worker may open for reading only files beneath the
 * directories it names (its codec modules and the fonts SVG text needs), and may write,
 * create, remove, rename, link, truncate or execute nothing anywhere.
 *
 * Why it is here: seccomp (seccomp.c) cannot look at a path (the argument is a pointer), so
 * without landlock a hijacked decoder could read the user's files (~/.ssh, the browser's
 * cookies) and send them back inside its "pixels". What it does not stop: reading the
 * allowed directories (fonts, our modules: nothing secret), stat and readlink anywhere
 * (landlock governs opening, not metadata: which files exist is visible), using
 * descriptors it already holds (only its socket, sandbox.c), and anything not on the file
 * system (seccomp's job).
 *
 * The rules use the highest ABI the kernel offers up to the one written here (6): 1 file
 * access, 2 refer (rename across directories), 3 truncate, 4 TCP bind/connect (denied
 * outright: the worker has no business on the network), 5 device ioctls, 6 scoping:
 * signals and abstract unix sockets only within the worker's own domain. ABI 7 adds only
 * audit logging, nothing to restrict. Debian 12's <linux/landlock.h> knows ABI 2, so the
 * later constants are spelled out here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox.h"

#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif
#define PXL_LL_ACCESS_FS_TRUNCATE (1ULL << 14)        /* ABI 3 */
#define PXL_LL_ACCESS_FS_IOCTL_DEV (1ULL << 15)       /* ABI 5 */
#define PXL_LL_ACCESS_NET_BIND_TCP (1ULL << 0)        /* ABI 4 */
#define PXL_LL_ACCESS_NET_CONNECT_TCP (1ULL << 1)     /* ABI 4 */
#define PXL_LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define PXL_LL_SCOPE_SIGNAL (1ULL << 1)               /* ABI 6 */
#define PXL_LL_HANDLED_ABI 6

/* struct landlock_ruleset_attr as of ABI 6; the kernel takes a prefix of it (the size
 * passed says which fields the caller knows). */
struct pxl_ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net; /* ABI 4 */
  uint64_t scoped;             /* ABI 6 */
};

static int landlock_abi(void) {
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : (int)abi;
}

int pxl_landlock_apply(const char *const *paths) {
  int abi = landlock_abi();
  if (abi <= 0) return 0;
  if (abi > PXL_LL_HANDLED_ABI) abi = PXL_LL_HANDLED_ABI;

  /* Every access right the ABI knows is handled, so every one is denied unless a rule
   * below grants it. */
  uint64_t fs = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
                LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
                LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
                LANDLOCK_ACCESS_FS_MAKE_SYM;
  if (abi >= 2) fs |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) fs |= PXL_LL_ACCESS_FS_TRUNCATE;
  if (abi >= 5) fs |= PXL_LL_ACCESS_FS_IOCTL_DEV;
  struct pxl_ruleset_attr attr = {.handled_access_fs = fs};
  size_t attr_size = offsetof(struct pxl_ruleset_attr, handled_access_net);
  if (abi >= 4) {
    attr.handled_access_net = PXL_LL_ACCESS_NET_BIND_TCP | PXL_LL_ACCESS_NET_CONNECT_TCP;
    attr_size = offsetof(struct pxl_ruleset_attr, scoped);
  }
  if (abi >= 6) {
    attr.scoped = PXL_LL_SCOPE_ABSTRACT_UNIX_SOCKET | PXL_LL_SCOPE_SIGNAL;
    attr_size = sizeof attr;
  }

  int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
  if (ruleset < 0) return 0;
  for (const char *const *p = paths; *p; p++) {
    /* O_PATH: a handle on the directory for the rule, not an open of its contents. A
     * path that does not exist here (no fonts installed) is skipped. */
    int dir = open(*p, O_PATH | O_CLOEXEC);
    if (dir < 0) continue;
    struct landlock_path_beneath_attr rule = {
        .allowed_access = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR,
        .parent_fd = dir,
    };
    int ok = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) == 0;
    int saved = errno;
    close(dir);
    /* A file, not a directory, takes READ_FILE only. */
    if (!ok && saved == EINVAL) {
      dir = open(*p, O_PATH | O_CLOEXEC);
      if (dir >= 0) {
        rule.allowed_access = LANDLOCK_ACCESS_FS_READ_FILE;
        rule.parent_fd = dir;
        (void)syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
        close(dir);
      }
    }
  }
  /* landlock_restrict_self needs no_new_privs (sandbox.c sets it first). */
  int ok = syscall(SYS_landlock_restrict_self, ruleset, 0) == 0;
  close(ruleset);
  return ok ? abi : 0;
}
