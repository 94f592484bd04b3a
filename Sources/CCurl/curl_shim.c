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
