/* Linux facilities that Swift's Glibc module does not expose (they need _GNU_SOURCE). */
#ifndef PXL_SUPPORT_H
#define PXL_SUPPORT_H

#include <pthread.h>

/* CPU cores this process may run on (its affinity mask, as containers set it); >= 1. */
int pxl_available_cores(void);

/* Names the calling thread (visible in top, gdb, perf); truncated to 15 bytes. */
void pxl_set_thread_name(const char *name);
/* Names another thread (its creator, right after pthread_create): the name is then in
 * place when the creator returns, not only once the new thread has run. */
void pxl_name_thread(pthread_t thread, const char *name);

/* A non-blocking, close-on-exec eventfd with counter 0, or -1 with errno set. */
int pxl_eventfd_new(void);

/* getenv, except in a program running with privileges it did not start with (setuid,
 * file capabilities): then NULL, as glibc's secure_getenv. */
const char *pxl_secure_getenv(const char *name);

/* The directory of the shared object holding this code (libpixload.so.0's, or the
 * program's when linked statically), written to buffer; 0 on success, -1 when unknown
 * or longer than capacity. */
int pxl_own_directory(char *buffer, unsigned long capacity);

/* A per-thread pointer: the record of the result whose callback runs now (request
 * metrics), NULL outside callbacks. */
void *pxl_current_result_record(void);
void pxl_set_current_result_record(void *record);

#endif
