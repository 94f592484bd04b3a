/*
 * worker/seccomp.c: which system calls the worker may make, installed last, just before
 * it reads its first message. An allow-list (libseccomp): a call not named here kills the
 * whole worker with SIGSYS (SCMP_ACT_KILL_PROCESS), which the library reports as "decoder
 * killed by SIGSYS: a forbidden system call". The filter is inherited by every thread and
 * cannot be removed.
 *
 * Why it is here: a decoder needs memory, its socket, time, threads, and to read fonts.
 * Everything else (sockets, connecting anywhere, running a program, new processes,
 * ptrace, signals to others, writing files, mount, bpf, keyctl, io_uring, userfaultfd,
 * perf, the kernel's rarer surface an exploit would use to escalate) is removed, so a
 * hijacked decoder can only compute and answer on its socket.
 *
 * What it does not stop: anything done with the calls allowed: reading files (landlock
 * decides which), using much CPU (the library's wall-clock limit kills it), lying in its
 * answers (the library checks them), a kernel bug in an allowed call.
 *
 * Threads: libjxl and libde265 (HEIC) decode on threads of their own, and librsvg's
 * Rust runtime may start them, so clone is allowed, but only with CLONE_THREAD (a thread
 * of this process, sharing this filter); clone3 answers ENOSYS, because its flags sit in
 * a struct the filter cannot read, and glibc then falls back to clone. fork and vfork kill.
 *
 * Some calls a library makes harmlessly answer an error instead of killing: open and
 * openat with write, create or truncate flags answer EACCES (fontconfig tries to write
 * its cache when stale: the decode goes on with fonts read as they are), ioctl answers
 * ENOTTY (isatty on a closed stderr), prctl other than the thread name EPERM.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <ucontext.h>
#include <unistd.h>

#include "sandbox.h"

/* O_TMPFILE's own bit: glibc's __O_TMPFILE includes O_DIRECTORY, which read-only opens of
 * directories (fontconfig's scan) carry. */
#define PXL_O_TMPFILE_BIT 020000000

/* Calls allowed whatever their arguments. */
static const int allowed[] = {
    /* memory */
    SCMP_SYS(brk), SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(madvise), SCMP_SYS(membarrier),
    SCMP_SYS(mincore),
    /* the socket, and reading files landlock lets it open */
    SCMP_SYS(read), SCMP_SYS(readv), SCMP_SYS(pread64), SCMP_SYS(write), SCMP_SYS(writev),
    SCMP_SYS(sendmsg), SCMP_SYS(recvmsg), SCMP_SYS(sendto), SCMP_SYS(recvfrom), SCMP_SYS(close),
    SCMP_SYS(fstat), SCMP_SYS(newfstatat), SCMP_SYS(statx), SCMP_SYS(stat), SCMP_SYS(lstat),
    SCMP_SYS(lseek), SCMP_SYS(getdents64), SCMP_SYS(readlink), SCMP_SYS(readlinkat), SCMP_SYS(access),
    SCMP_SYS(faccessat), SCMP_SYS(faccessat2), SCMP_SYS(fcntl), SCMP_SYS(dup), SCMP_SYS(getcwd),
    SCMP_SYS(fadvise64), SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(statfs), SCMP_SYS(fstatfs),
    /* threads and their synchronisation */
    SCMP_SYS(futex), SCMP_SYS(set_robust_list), SCMP_SYS(get_robust_list), SCMP_SYS(rseq),
    SCMP_SYS(set_tid_address), SCMP_SYS(sched_yield), SCMP_SYS(sched_getaffinity),
    SCMP_SYS(sched_getparam), SCMP_SYS(sched_getscheduler), SCMP_SYS(getpriority),
    /* signals within the process (kill and tgkill: below) */
    SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn), SCMP_SYS(sigaltstack),
    SCMP_SYS(restart_syscall),
    /* time, identity, randomness */
    SCMP_SYS(clock_gettime), SCMP_SYS(clock_getres), SCMP_SYS(clock_nanosleep), SCMP_SYS(nanosleep),
    SCMP_SYS(gettimeofday), SCMP_SYS(time), SCMP_SYS(getpid), SCMP_SYS(gettid), SCMP_SYS(getppid),
    SCMP_SYS(getuid), SCMP_SYS(geteuid), SCMP_SYS(getgid), SCMP_SYS(getegid), SCMP_SYS(getresuid),
    SCMP_SYS(getresgid), SCMP_SYS(getrandom), SCMP_SYS(uname), SCMP_SYS(sysinfo), SCMP_SYS(getrusage),
    SCMP_SYS(times),
    /* the end */
    SCMP_SYS(exit), SCMP_SYS(exit_group),
};

static void on_sigsys(int sig, siginfo_t *info, void *context) {
  (void)sig;
  /* Debugging only (--debug-seccomp): name the call and its first arguments, then die as
   * the filter would have. */
  unsigned long long a[3] = {0, 0, 0};
#if defined(__x86_64__)
  const ucontext_t *uc = context;
  a[0] = (unsigned long long)uc->uc_mcontext.gregs[REG_RDI];
  a[1] = (unsigned long long)uc->uc_mcontext.gregs[REG_RSI];
  a[2] = (unsigned long long)uc->uc_mcontext.gregs[REG_RDX];
#else
  (void)context;
#endif
  char line[160];
  int n = snprintf(line, sizeof line, "pixload-decode-worker: forbidden system call %d (%#llx, %#llx, %#llx)\n",
                   info->si_syscall, a[0], a[1], a[2]);
  if (write(2, line, (size_t)n) < 0) {
  }
  _exit(128 + SIGSYS);
}

int pxl_seccomp_apply(int debug) {
  uint32_t forbidden = SCMP_ACT_KILL_PROCESS;
  if (debug) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSYS, &sa, NULL);
    forbidden = SCMP_ACT_TRAP;
  }
  scmp_filter_ctx ctx = seccomp_init(forbidden);
  if (!ctx) return 0;
  int rc = 0;
  for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);

  /* Memory, but never executable: the libraries are loaded, so no new code. An exploit
   * cannot map its payload executable (return-oriented code still runs). */
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));

  /* Files: read-only. Landlock decides which; this makes sure none is opened to write,
   * create or truncate even where landlock is missing. */
  const uint64_t writing = O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND | PXL_O_TMPFILE_BIT;
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, writing, 0));
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(open), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, writing, 0));
  /* Any one of the writing bits: EACCES (a filter compares masked values for equality
   * only, so one rule per bit; they never overlap the allowing rule above). */
  const uint64_t bits[] = {O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND, PXL_O_TMPFILE_BIT};
  for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(openat), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, bits[i], bits[i]));
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(open), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, bits[i], bits[i]));
  }
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0);
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(creat), 0);

  /* Threads only: clone with CLONE_THREAD; clone3 falls back to it. */
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                         SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);

  /* Signals to itself only (abort, raise, pthread_kill): pid fixed now, the worker never
   * changes it. kill(getppid(), ...) kills the worker instead of the library. */
  pid_t self = getpid();
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)self));
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)self));

  /* getrlimit through prlimit64: reading only (glibc's pthread_create asks for the stack
   * size), never raising RLIMIT_AS back. */
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 2, SCMP_A0(SCMP_CMP_EQ, 0),
                         SCMP_A2(SCMP_CMP_EQ, 0));
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(getrlimit), 0);

  /* Thread names (Rust's and glib's threads set theirs); any other prctl: EPERM. */
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1, SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME));
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1, SCMP_A0(SCMP_CMP_EQ, PR_GET_NAME));
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prctl), 1, SCMP_A0(SCMP_CMP_LT, PR_SET_NAME));
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prctl), 1, SCMP_A0(SCMP_CMP_GT, PR_GET_NAME));
  rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOTTY), SCMP_SYS(ioctl), 0);

  if (rc == 0) rc = seccomp_load(ctx);
  seccomp_release(ctx);
  return rc == 0;
}
