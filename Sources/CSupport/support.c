#define _GNU_SOURCE
#include "pxl_support.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <string.h>
#include <unistd.h>

int pxl_available_cores(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int count = CPU_COUNT(&set);
    if (count > 0) return count;
  }
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? (int)online : 1;
}

void pxl_set_thread_name(const char *name) { pxl_name_thread(pthread_self(), name); }

void pxl_name_thread(pthread_t thread, const char *name) {
  char truncated[16];
  strncpy(truncated, name, sizeof truncated - 1);
  truncated[sizeof truncated - 1] = '\0';
  pthread_setname_np(thread, truncated);
}

int pxl_eventfd_new(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

const char *pxl_secure_getenv(const char *name) { return secure_getenv(name); }

int pxl_own_directory(char *buffer, unsigned long capacity) {
  Dl_info info;
  if (dladdr((void *)&pxl_own_directory, &info) == 0 || info.dli_fname == NULL) return -1;
  const char *slash = strrchr(info.dli_fname, '/');
  size_t length = slash ? (size_t)(slash - info.dli_fname) : 1;
  if (length + 1 > capacity) return -1;
  if (slash) memcpy(buffer, info.dli_fname, length); else buffer[0] = '.';
  buffer[length] = 0;
  return 0;
}

/* The innermost callback's metrics record on this thread (see API+Metrics.swift). */
static __thread void *current_result_record;

void *pxl_current_result_record(void) { return current_result_record; }

void pxl_set_current_result_record(void *record) { current_result_record = record; }
