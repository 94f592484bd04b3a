/*
 * worker/sandbox.h: the layers that lock the decode worker, one file each (Chromium's
 * sandbox/linux and glycin's sandbox.rs keep them apart the same way): sandbox.c (no new
 * privileges, namespaces, resource limits, descriptors), landlock.c (which files may be
 * read), seccomp.c (which system calls may be made). The decoders do not know they are
 * confined. Each function applies its layer where the kernel offers it and says whether
 * it is in force; a missing layer is reported, never fatal (worker/README.md).
 */
#ifndef PXL_WORKER_SANDBOX_H
#define PXL_WORKER_SANDBOX_H

#include <stdint.h>

/* PR_SET_NO_NEW_PRIVS and not dumpable. 1: in force. */
int pxl_sandbox_no_new_privs(void);

/* New user, network, IPC and mount namespaces, capabilities dropped inside. Must run
 * while the process has one thread (unshare(CLONE_NEWUSER) refuses otherwise). 1: in force. */
int pxl_sandbox_namespaces(void);

/* RLIMIT_AS = as_limit, no core files, no file growth (unless keep_stderr: debugging).
 * 1: in force. */
int pxl_sandbox_rlimits(uint64_t as_limit, int keep_stderr);

/* Closes every descriptor but keep_fd (and 2 with keep_stderr: debugging). 1: done. */
int pxl_sandbox_close_fds(int keep_fd, int keep_stderr);

/* Landlock: read-only access beneath each of paths (NULL-terminated; missing ones skipped),
 * nothing else on the file system, no TCP, no signals or abstract sockets outside.
 * Returns the ABI the rules use, 0 when landlock is not in force. */
int pxl_landlock_apply(const char *const *paths);

/* The seccomp-bpf allow-list (seccomp.c). debug: a forbidden call raises SIGSYS with a
 * handler that names it on stderr, instead of killing the process. 1: in force. */
int pxl_seccomp_apply(int debug);

#endif
