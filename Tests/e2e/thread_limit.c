/*
 * Tests/e2e/thread_limit.c: an LD_PRELOAD shim for Tests/e2e/exhaust.c's "threads" mode.
 * It interposes pthread_create and fails it with EAGAIN (as under `ulimit -u` or a cgroup
 * pids limit) once a budget of successful creations is spent. The budget starts from
 * PXL_THREAD_BUDGET (unset: unlimited) and is set at run time with
 * pxl_test_thread_budget(n), which a test finds with dlsym (n < 0: unlimited).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static atomic_long budget = -1;

__attribute__((constructor)) static void read_budget(void) {
  const char *text = getenv("PXL_THREAD_BUDGET");
  if (text && *text) atomic_store(&budget, atol(text));
}

void pxl_test_thread_budget(long n) { atomic_store(&budget, n < 0 ? -1 : n); }

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg) {
  static _Atomic(create_fn) real;
  create_fn next = atomic_load(&real);
  if (!next) {
    next = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (!next) return ENOSYS;
    atomic_store(&real, next);
  }
  long left = atomic_load(&budget);
  for (;;) {
    if (left < 0) break;
    if (left == 0) return EAGAIN;
    if (atomic_compare_exchange_weak(&budget, &left, left - 1)) break;
  }
  return next(thread, attr, start, arg);
}
