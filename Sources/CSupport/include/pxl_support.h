/* Linux facilities that Swift's Glibc module does not expose (they need _GNU_SOURCE). */
#ifndef PXL_SUPPORT_H
#define PXL_SUPPORT_H

/* CPU cores this process may run on (its affinity mask, as containers set it); >= 1. */
int pxl_available_cores(void);

/* Names the calling thread (visible in top, gdb, perf); truncated to 15 bytes. */
void pxl_set_thread_name(const char *name);

/* A non-blocking, close-on-exec eventfd with counter 0, or -1 with errno set. */
int pxl_eventfd_new(void);

/* A per-thread pointer: the record of the result whose callback runs now (request
 * metrics), NULL outside callbacks. */
void *pxl_current_result_record(void);
void pxl_set_current_result_record(void *record);

#endif
