#include "pxl_curl.h"

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

long pxl_curl_redirect_count(CURL *easy) {
  long count = 0;
  if (curl_easy_getinfo(easy, CURLINFO_REDIRECT_COUNT, &count) != CURLE_OK) return 0;
  return count;
}
