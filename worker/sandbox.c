/*
 * worker/sandbox.c: the layers of the worker that are not landlock or seccomp: no new
 * privileges, namespaces, resource limits and descriptors. worker_main.c applies them in
 * the order its comment gives; each says here what it stops and what it does not.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox.h"

/* no_new_privs: nothing the worker runs can gain privileges (a setuid binary, file
 * capabilities), and it is what lets an unprivileged process install landlock and seccomp
 * filters at all. Not dumpable: no core file (which the kernel would write past landlock),
 * and other processes of the user cannot ptrace it or read its /proc files. Stops nothing
 * on its own; it is the ground the other layers stand on. */
int pxl_sandbox_no_new_privs(void) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 0;
  (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  return 1;
}

/* A new user namespace, and with the capabilities it grants, new network, IPC and mount
 * namespaces:
 *   - network: the worker's namespace has only a loopback interface, down: no route to the
 *     host's loopback services or the internet even if a socket could be made (seccomp
 *     forbids making one; this is the second wall);
 *   - IPC: no System V shared memory or message queues, no POSIX message queues of the
 *     user's other processes;
 *   - mount: mounts the worker could make (seccomp forbids mount) stay its own; the file
 *     system it sees is the host's, which landlock restricts, not this;
 *   - user: uid and gid are unmapped inside (65534): files it could create would fail, and
 *     the capabilities it holds inside apply only to its own empty namespaces. They are
 *     dropped anyway (capset below).
 * Not PID: a new PID namespace takes effect only for children, so it would need a fork
 * during setup and a second, waiting process per worker (the library's pid and the
 * decoder's would differ, and killing one must take the other). What it would stop is
 * covered: signals to other processes (seccomp allows kill/tgkill of itself only, landlock
 * ABI 6 scopes signals), ptrace (seccomp), seeing other processes in /proc (landlock: no
 * /proc). UTS is not needed: the host name is no secret worth a namespace.
 * Where user namespaces are off (a container, a sysctl), none of these is in force. */
int pxl_sandbox_namespaces(void) {
  if (unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWNS) != 0) return 0;
  /* Drop every capability the new user namespace granted: effective, permitted and
   * inheritable all zero, and the bounding set with them through no_new_privs. */
  struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {{0}};
  if (syscall(SYS_capset, &header, data) != 0) return 0;
  return 1;
}

/* RLIMIT_AS: the worker's whole address space (libraries, heap, thread stacks, the
 * mapped input and pixels) is at most as_limit bytes, so a decoder that allocates past
 * what max_pixels allows gets NULL (and fails) instead of growing until the machine
 * swaps or the OOM killer picks a victim, perhaps the host. It limits address space, not
 * resident memory, so its headroom must cover mappings a decoder reserves without
 * touching (malloc arenas, thread stacks); worker_main.c computes it. RLIMIT_CORE 0: no
 * core file. RLIMIT_FSIZE 0: no file the worker might still hold open for writing grows
 * (SIGXFSZ); the socket is no file. */
int pxl_sandbox_rlimits(uint64_t as_limit, int keep_stderr) {
  struct rlimit zero = {0, 0};
  struct rlimit as = {as_limit, as_limit};
  int ok = setrlimit(RLIMIT_AS, &as) == 0;
  ok &= setrlimit(RLIMIT_CORE, &zero) == 0;
  /* Not when debugging: a stderr redirected to a file would raise SIGXFSZ. */
  if (!keep_stderr) ok &= setrlimit(RLIMIT_FSIZE, &zero) == 0;
  return ok;
}

/* Every descriptor but the socket: the spawn passes only the socket (and the library
 * closes the rest with posix_spawn's closefrom), but stdin/out/err, and whatever a module's
 * library opened while it was loaded, are closed here so the decoder holds nothing it
 * could write to or read from but its socket. A descriptor opened later (a font) is read-
 * only (seccomp) and within landlock's directories. */
int pxl_sandbox_close_fds(int keep_fd, int keep_stderr) {
  int ok = 1;
  unsigned first = 0;
  for (int keep = 0; keep <= keep_fd; keep++) {
    if (keep != keep_fd && !(keep_stderr && keep == 2)) continue;
    if ((unsigned)keep > first && syscall(SYS_close_range, first, (unsigned)keep - 1, 0) != 0) ok = 0;
    first = (unsigned)keep + 1;
  }
  if (syscall(SYS_close_range, first, ~0U, 0) != 0) ok = 0;
  return ok;
}
