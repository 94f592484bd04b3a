/* Non-variadic wrappers over libcurl's variadic setters and getters: Swift cannot call a
 * C function declared with `...`, so each argument type gets one typed entry point. */
#ifndef PXL_CURL_H
#define PXL_CURL_H

#include <curl/curl.h>
#include <stdint.h>

typedef size_t (*pxl_curl_write_fn)(char *data, size_t size, size_t count, void *user);
typedef size_t (*pxl_curl_header_fn)(char *data, size_t size, size_t count, void *user);

CURLcode pxl_curl_easy_setopt_long(CURL *easy, CURLoption option, long value);
CURLcode pxl_curl_easy_setopt_off(CURL *easy, CURLoption option, curl_off_t value);
CURLcode pxl_curl_easy_setopt_ptr(CURL *easy, CURLoption option, const void *value);
CURLcode pxl_curl_easy_setopt_write(CURL *easy, pxl_curl_write_fn fn, void *user);
CURLcode pxl_curl_easy_setopt_header(CURL *easy, pxl_curl_header_fn fn, void *user);
CURLMcode pxl_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);

long pxl_curl_response_code(CURL *easy);
curl_off_t pxl_curl_content_length(CURL *easy);  /* -1 when unknown */
/* Number of new connections the transfer opened (0 when it reused one). */
long pxl_curl_num_connects(CURL *easy);
/* The server's Retry-After in seconds (libcurl parses both forms), -1 when absent. */
curl_off_t pxl_curl_retry_after(CURL *easy);

/* A share object for TLS sessions (CURL_LOCK_DATA_SSL_SESSION) with a mutex per kind of
 * data; *locks receives their state, for pxl_curl_share_free. NULL when out of memory or
 * refused. */
CURLSH *pxl_curl_share_new(void **locks);
void pxl_curl_share_free(CURLSH *share, void *locks);

/* The TLS handshake of the connection the transfer opened, while it runs (a header
 * callback): 0 full, 1 resumed a session, 2 a handshake whose kind is unknown (a TLS
 * backend other than OpenSSL); -1 when the transfer opened no TLS connection (it reused
 * one, or it is not TLS). */
int pxl_curl_tls_handshake(CURL *easy);

/* What a transfer's last hop measured (Since 0.5.0): libcurl's cumulative times in
 * microseconds (CURLINFO_NAMELOOKUP/CONNECT/APPCONNECT/STARTTRANSFER/TOTAL_TIME_T, 0 where
 * unknown) into times[0..5), and its HTTP version (CURLINFO_HTTP_VERSION: 10, 11, 20, 30;
 * 0 none). */
void pxl_curl_times(CURL *easy, int64_t times[5]);
long pxl_curl_http_version(CURL *easy);

#endif
