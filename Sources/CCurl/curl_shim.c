#include "pxl_curl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

CURLcode pxl_curl_easy_setopt_long(CURL *easy, CURLoption option, long value) {
  return curl_easy_setopt(easy, option, value);
}

CURLcode pxl_curl_easy_setopt_off(CURL *easy, CURLoption option, curl_off_t value) {
  return curl_easy_setopt(easy, option, value);
}

CURLcode pxl_curl_easy_setopt_ptr(CURL *easy, CURLoption option, const void *value) {
  return curl_easy_setopt(easy, option, value);
}

CURLcode pxl_curl_easy_setopt_write(CURL *easy, pxl_curl_write_fn fn, void *user) {
  CURLcode rc = curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, fn);
  if (rc == CURLE_OK) rc = curl_easy_setopt(easy, CURLOPT_WRITEDATA, user);
  return rc;
}

CURLcode pxl_curl_easy_setopt_header(CURL *easy, pxl_curl_header_fn fn, void *user) {
  CURLcode rc = curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, fn);
  if (rc == CURLE_OK) rc = curl_easy_setopt(easy, CURLOPT_HEADERDATA, user);
  return rc;
}

CURLMcode pxl_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
  return curl_multi_setopt(multi, option, value);
}

long pxl_curl_response_code(CURL *easy) {
  long code = 0;
  if (curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK) return 0;
  return code;
}

curl_off_t pxl_curl_content_length(CURL *easy) {
  curl_off_t length = -1;
  if (curl_easy_getinfo(easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) != CURLE_OK) return -1;
  return length;
}

long pxl_curl_num_connects(CURL *easy) {
  long count = 0;
  if (curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &count) != CURLE_OK) return 0;
  return count;
}

curl_off_t pxl_curl_retry_after(CURL *easy) {
  curl_off_t seconds = -1;
  if (curl_easy_getinfo(easy, CURLINFO_RETRY_AFTER, &seconds) != CURLE_OK) return -1;
  return seconds > 0 ? seconds : -1;
}

/* ---- TLS sessions shared across transfers ---- */

/* libcurl asks for one lock per kind of data (CURL_LOCK_DATA_*); the engine uses the share
 * object from its thread only, where these mutexes are never contended, but libcurl's
 * rule is that a share used from several threads needs them, and a cleanup or a second
 * user on another thread must not be able to corrupt the session cache. */
struct pxl_share {
  pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
};

static void share_lock(CURL *easy, curl_lock_data data, curl_lock_access access, void *user) {
  (void)easy;
  (void)access;
  struct pxl_share *share = user;
  if (data >= 0 && data < CURL_LOCK_DATA_LAST) pthread_mutex_lock(&share->locks[data]);
}

static void share_unlock(CURL *easy, curl_lock_data data, void *user) {
  (void)easy;
  struct pxl_share *share = user;
  if (data >= 0 && data < CURL_LOCK_DATA_LAST) pthread_mutex_unlock(&share->locks[data]);
}

CURLSH *pxl_curl_share_new(void **locks) {
  struct pxl_share *state = calloc(1, sizeof *state);
  if (!state) return NULL;
  for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) pthread_mutex_init(&state->locks[i], NULL);
  CURLSH *share = curl_share_init();
  if (!share || curl_share_setopt(share, CURLSHOPT_USERDATA, (void *)state) != CURLSHE_OK ||
      curl_share_setopt(share, CURLSHOPT_LOCKFUNC, share_lock) != CURLSHE_OK ||
      curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, share_unlock) != CURLSHE_OK ||
      curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK) {
    if (share) curl_share_cleanup(share);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) pthread_mutex_destroy(&state->locks[i]);
    free(state);
    return NULL;
  }
  *locks = state;
  return share;
}

void pxl_curl_share_free(CURLSH *share, void *locks) {
  if (share) curl_share_cleanup(share);
  struct pxl_share *state = locks;
  if (!state) return;
  for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) pthread_mutex_destroy(&state->locks[i]);
  free(state);
}

/* OpenSSL's SSL_session_reused, from the libssl libcurl already loaded (found with
 * RTLD_NOLOAD: pixload links no TLS library of its own); NULL with another TLS backend. */
typedef int (*session_reused_fn)(const void *ssl);
static session_reused_fn session_reused;
static pthread_once_t session_reused_once = PTHREAD_ONCE_INIT;

static void find_session_reused(void) {
  static const char *const names[] = {"libssl.so.3", "libssl.so.1.1", "libssl.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !session_reused; i++) {
    void *lib = dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD);
    if (lib) session_reused = (session_reused_fn)dlsym(lib, "SSL_session_reused");
    /* The handle only counts a reference: libcurl keeps the library loaded. */
    if (lib) dlclose(lib);
  }
}

int pxl_curl_tls_handshake(CURL *easy) {
  long connects = 0;
  if (curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &connects) != CURLE_OK || connects <= 0) return -1;
  struct curl_tlssessioninfo *info = NULL;
  if (curl_easy_getinfo(easy, CURLINFO_TLS_SSL_PTR, &info) != CURLE_OK || !info ||
      info->backend == CURLSSLBACKEND_NONE || !info->internals)
    return -1;
  if (info->backend != CURLSSLBACKEND_OPENSSL) return 2;
  pthread_once(&session_reused_once, find_session_reused);
  if (!session_reused) return 2;
  return session_reused(info->internals) ? 1 : 0;
}

void pxl_curl_times(CURL *easy, int64_t times[5]) {
  static const CURLINFO infos[5] = {CURLINFO_NAMELOOKUP_TIME_T, CURLINFO_CONNECT_TIME_T, CURLINFO_APPCONNECT_TIME_T,
                                    CURLINFO_STARTTRANSFER_TIME_T, CURLINFO_TOTAL_TIME_T};
  for (int i = 0; i < 5; i++) {
    curl_off_t value = 0;
    times[i] = curl_easy_getinfo(easy, infos[i], &value) == CURLE_OK ? (int64_t)value : 0;
  }
}

long pxl_curl_http_version(CURL *easy) {
  long version = 0;
  if (curl_easy_getinfo(easy, CURLINFO_HTTP_VERSION, &version) != CURLE_OK) return 0;
  switch (version) {
  case CURL_HTTP_VERSION_1_0: return 10;
  case CURL_HTTP_VERSION_1_1: return 11;
  case CURL_HTTP_VERSION_2_0: return 20;
#ifdef CURL_HTTP_VERSION_3
  case CURL_HTTP_VERSION_3: return 30;
#endif
  default: return 0;
  }
}

