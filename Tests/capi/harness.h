/*
 * harness.h: a tiny test framework and the helpers the C API tests share.
 *
 * Every CHECK counts one pass or one failure; a failure prints where and why and the
 * test goes on, so one run shows every broken rule. The program prints
 * "N passed, N failed" alone on its last line and exits 1 if anything failed.
 */
#ifndef PXL_TEST_HARNESS_H
#define PXL_TEST_HARNESS_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "pixload.h"

/* What every test gets from the command line: the server, its access log, and the
 * directory it serves (for file:// URLs). */
struct test_env {
  const char *base_url;    /* http://127.0.0.1:PORT, no trailing slash */
  const char *access_log;  /* "$request_uri $status $body_bytes_sent $connection" lines */
  const char *fixture_dir; /* absolute */
  int refused_port;        /* a local port nothing listens on */
  long run_id;             /* makes this run's URLs unique in a log shared with older runs */
  int slow_factor;         /* > 1 under valgrind: deadlines are multiplied by it */
  /* From --name=value options (run.sh passes them all); NULL when not given, and the
   * tests that need one fail saying so. */
  const char *fault_url;      /* --fault-url: Tests/faultserver over http, no trailing slash */
  const char *fault_tls_url;  /* --fault-tls-url: the same server over https (test CA) */
  const char *ca_file;        /* --ca-file: PEM of the test CA that signed both servers' cert */
  const char *other_ca_file;  /* --other-ca-file: an unrelated CA */
  const char *tls_url;        /* --tls-url: nginx over https + HTTP/2, serving fixture_dir */
  const char *tls_access_log; /* --tls-log: its log, "$request_uri $status $body_bytes_sent
                                 $connection $server_protocol" */
  const char *tls_reconnect_url; /* --tls-reconnect-url: nginx over https, one request per
                                    connection (every request a new TLS handshake) */
  const char *tls_reconnect_log; /* --tls-reconnect-log: its log, "$request_uri $status
                                    $connection $ssl_session_reused $ssl_protocol" */
  const char *ca_dir;         /* --ca-dir: the test CA as a hashed directory (ca_path) with
                                 a ca-certificates.crt: a system store that trusts it */
  const char *self;           /* argv[0]: the test program, for tests that run a probe of
                                 it in another process (test_tls.c) */
};

/* Run as "PROGRAM --ca-probe URL CA_FILE": loads URL with a loader whose ca_file is
 * CA_FILE ("-": none) and exits with the pxl_status of the load (test_tls.c runs it in a
 * mount namespace where the system's CA directory is another). */
int tls_ca_probe_main(int argc, char **argv);

/* ---- checks ---- */

void check_at(const char *file, int line, int ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void check_status_at(const char *file, int line, const char *expr, pxl_status got,
                     pxl_status want);
void check_int_at(const char *file, int line, const char *expr, long long got, long long want);

#define CHECK(cond) check_at(__FILE__, __LINE__, (cond) ? 1 : 0, "%s", #cond)
#define CHECKF(cond, ...) check_at(__FILE__, __LINE__, (cond) ? 1 : 0, __VA_ARGS__)
#define CHECK_STATUS(got, want) check_status_at(__FILE__, __LINE__, #got, (got), (want))
#define CHECK_INT(got, want) check_int_at(__FILE__, __LINE__, #got, (long long)(got), (long long)(want))

/* ---- time ---- */

double now_ms(void);
void sleep_ms(int ms);

/* ---- URLs: "/path" -> base + path + "?run=ID&case=NAME"; uri is what nginx logs ---- */

struct test_url {
  char url[512];
  char uri[384];
};
struct test_url test_url(const struct test_env *env, const char *path, const char *case_name);
void file_url(const struct test_env *env, const char *name, char *out, size_t size);
long fixture_bytes(const struct test_env *env, const char *name); /* its size; -1 if missing */

/* ---- the access log ---- */

/* Lines whose $request_uri is exactly uri. */
int log_count(const struct test_env *env, const char *uri);
/* $body_bytes_sent of the first line for uri, -1 if none. */
long log_bytes(const struct test_env *env, const char *uri);
/* $connection (nginx's connection serial number) of the first line for uri, -1 if none. */
long log_connection(const struct test_env *env, const char *uri);
/* 0-based position of the first line for uri, -1 if none. */
int log_position(const struct test_env *env, const char *uri);
/* Waits (up to timeout_ms) until uri has at least min lines; returns the count. nginx
 * writes a line once the response is sent, which may be just after the client has all
 * the bytes, so a test must wait a little for a line it expects. */
int log_wait_count(const struct test_env *env, const char *uri, int min, int timeout_ms);

/* ---- the fault server (Tests/faultserver/faultserver.py) ---- */

/* "/path" -> fault server (https when tls) + path + "?run=ID&case=NAME"; uri is the request
 * target the server records, query what follows its '?'. */
struct test_url fault_url(const struct test_env *env, int tls, const char *path,
                          const char *case_name);
const char *fault_query(const struct test_url *u); /* the query part of u->uri */

#define FAULT_MAX_RECORDS 64
struct fault_record {
  long conn;        /* the server's connection number */
  int tls;
  double at_ms;     /* arrival, ms since the server started */
  int status;       /* the status it answered (0: none yet, or never) */
  long bytes;       /* body bytes handed to the kernel */
  int complete;     /* the whole response was sent */
  int closed;       /* the client went away first */
  char path[160];
  char headers[2048]; /* "Name: value\n" lines, as received */
};
struct fault_stats {
  int ok;           /* the control request worked */
  int requests;     /* matching requests */
  int connections;  /* distinct connections among them */
  int accepted;     /* every connection accepted since the server started */
  int tls_handshake_failures;
  int count;        /* records below: min(requests, FAULT_MAX_RECORDS) */
  struct fault_record record[FAULT_MAX_RECORDS];
};

/* What the server saw; by is "uri" (exact target), "prefix" (of the target) or "query"
 * (exact query string). Returns stats.ok. */
int fault_stats(const struct test_env *env, const char *by, const char *value,
                struct fault_stats *stats);
/* Polls until at least min requests match (or timeout_ms passes); returns the count. */
int fault_wait_requests(const struct test_env *env, const char *by, const char *value, int min,
                        int timeout_ms);
/* Lets the /gate request with target uri send its next piece; returns the releases so far
 * for it (0 and a failed check when the server did not answer). */
int fault_release(const struct test_env *env, const char *uri);
/* Makes token the current one of the fault server's /auth realm (a rotation); returns 1
 * when the server took it. */
int fault_set_token(const struct test_env *env, const char *realm, const char *token);
/* The value of header name (case-insensitive) in record into out; 0 if absent. */
int fault_header(const struct fault_record *record, const char *name, char *out, size_t size);

/* ---- capturing callbacks ---- */

/* One request's callback(s). capture_callback records the first call in full and counts
 * every call, so "exactly once" is checkable, and checks the rules every result obeys
 * (message never NULL, an image exactly when the status is OK, ...). */
struct capture {
  atomic_int calls;
  pxl_token token;     /* what the callback received */
  pxl_status status;
  int32_t http_status;
  pxl_source source;
  char message[256];
  int32_t incomplete;  /* pxl_result.incomplete */
  pxl_image *image;    /* retained by the callback; release with capture_reset */
  int order;           /* 1-based position among the callbacks of a capture_seq */
  int phase;           /* the value of *phase_source when the callback ran */
  double at_ms;        /* now_ms() when the callback ran */
  atomic_int *seq;     /* optional: shared order counter */
  const atomic_int *phase_source; /* optional */
};

void capture_callback(pxl_token token, const pxl_result *result, void *user_data);
void capture_reset(struct capture *capture); /* releases the image, zeroes the rest */

/* A capture with the result's metrics, read inside the callback (where they exist);
 * metrics.isolated is -1 when pxl_result_metrics refused. */
struct metered {
  struct capture capture;
  pxl_metrics metrics;
};
void metered_callback(pxl_token token, const pxl_result *result, void *user_data);

/* Waits on and dispatches queue until *count >= target or timeout_ms passes (scaled by
 * slow_factor). Returns 1 if the target was reached. */
int drain_until(const struct test_env *env, pxl_queue *queue, const atomic_int *count,
                int target, int timeout_ms);

/* Dispatches queue for ms milliseconds: callbacks that should not come get their chance
 * to come. Returns how many ran. */
int drain_for(pxl_queue *queue, int ms);

/* ---- loaders and requests ---- */

pxl_loader *new_loader(const pxl_config *config); /* NULL config: defaults; fails the test run on error */
pxl_queue *new_queue(void);
/* Writes bytes to the served directory (env->fixture_dir) as name. */
void write_fixture(const struct test_env *env, const char *name, const uint8_t *bytes, size_t size);
/* The defaults with an 8 MiB disk cache in directory. */
void disk_cache_config(pxl_config *config, const char *directory);
void request_for(pxl_request *request, const char *url, int32_t width, int32_t height,
                 pxl_mode mode, pxl_format format);

/* Loads one request and waits for its callback; the capture holds the result. Returns
 * the status of pxl_load. */
pxl_status load_and_wait(const struct test_env *env, pxl_loader *loader, pxl_queue *queue,
                         const pxl_request *request, struct capture *capture);

/* Where the fault server's /gate pauses a progressive JPEG fixture so that each piece
 * completes one more scan: "at=C1,C2,..." into at; returns the number of cuts
 * (test_preview.c). */
int scan_cuts(const struct test_env *env, const char *name, char *at, size_t size);

/* ---- GIFs written by the tests (test_animation.c) ---- */

/* Starts env->fixture_dir/name: a w x h canvas, a global table of 16 entries (red,
 * green, blue, white, then black), a NETSCAPE2.0 loop count. NULL if it cannot be made. */
FILE *gif_start(const struct test_env *env, const char *name, int w, int h, int loop);
/* One image: GCE (disposal, delay in 1/100 s, transparent index or -1), descriptor, LZW
 * data (minimum code size 4, a Clear every 13 literals) in sub-blocks. End with 0x3b. */
void gif_put_frame(FILE *f, int left, int top, int w, int h, const uint8_t *indices, int disposal, int delay,
                   int transparent);

/* The bytes of pixel (x, y) of image. */
const uint8_t *pixel_at(const pxl_image *image, int x, int y);

/* ---- the tests ---- */

#define TEST_LIST(X)                \
  X(test_constants_and_defaults)    \
  X(test_null_handles)              \
  X(test_load_and_memory_cache)     \
  X(test_file_url_source)          \
  X(test_cache_key_and_cache_flags) \
  X(test_fit_and_fill_sizes)        \
  X(test_pixel_formats)             \
  X(test_gray_jpeg_formats)         \
  X(test_alpha_and_premultiplied)   \
  X(test_exif_orientation)          \
  X(test_avif_through_nginx)        \
  X(test_webp_over_http)            \
  X(test_webp_streamed)             \
  X(test_http_errors)               \
  X(test_connection_refused)        \
  X(test_bad_bodies)                \
  X(test_limits)                    \
  X(test_schemes_and_file_urls)     \
  X(test_malformed_urls)            \
  X(test_invalid_arguments)         \
  X(test_loader_new_probes_libcurl) \
  X(test_coalescing)                \
  X(test_cancel_from_other_thread)  \
  X(test_cancel_one_of_coalesced)   \
  X(test_cancel_wins_over_queued)   \
  X(test_cancel_inside_callback)    \
  X(test_exactly_once_under_races)  \
  X(test_priority)                  \
  X(test_visible_preempts_prefetch) \
  X(test_no_head_of_line_blocking)  \
  X(test_waiting_transfers_start_at_once) \
  X(test_old_requests_are_not_starved) \
  X(test_connection_reuse)          \
  X(test_free_queue_in_flight)      \
  X(test_free_loader_in_flight)     \
  X(test_free_orders)               \
  X(test_queue_wait_and_wakeup)     \
  X(test_queue_fd)                  \
  X(test_queue_fd_and_wakeup)       \
  X(test_queue_wakeup_reaches_a_waiter) \
  X(test_queue_fd_edge_triggered)   \
  X(test_table_row_scrolled_away) \
  X(test_bind_slot) \
  X(test_table_visible_before_prefetch) \
  X(test_table_prefetch_raised) \
  X(test_table_two_tables) \
  X(test_cancel_all_by_queue) \
  X(test_prefetch) \
  X(test_table_cached_rows_sync) \
  X(test_table_row_errors) \
  X(test_table_refused_requests) \
  X(test_table_row_count) \
  X(test_table_free_stops_callbacks) \
  X(test_table_invalid_arguments) \
  X(test_table_fling_storm) \
  X(test_table_drained_on_other_thread) \
  X(test_fault_http_statuses)       \
  X(test_fault_retry_then_success)  \
  X(test_fault_retry_after)         \
  X(test_fault_cancel_during_backoff) \
  X(test_fault_broken_bodies)       \
  X(test_fault_timeouts)            \
  X(test_fault_stalled_body)        \
  X(test_fault_connect_timeout)     \
  X(test_fault_dns)                 \
  X(test_fault_refused)             \
  X(test_fault_redirects)           \
  X(test_fault_tls)                 \
  X(test_fault_body_limits)         \
  X(test_fault_content_types)       \
  X(test_fault_coalesced_50)        \
  X(test_fault_cache_key)           \
  X(test_fault_transfer_limits)     \
  X(test_fault_headers)             \
  X(test_fault_progress)            \
  X(test_fault_progress_before_stall) \
  X(test_tls_http2_nginx)            \
  X(test_struct_sizes)              \
  X(test_log_callback)              \
  X(test_previews)                \
  X(test_table_previews)          \
  X(test_early_end) \
  X(test_previews_isolated) \
  X(test_disk_variants) \
  X(test_animated_gif) \
  X(test_animation_memory_bound)    \
  X(test_player_gif)                \
  X(test_player_webp)               \
  X(test_player_avif)               \
  X(test_player_codec_frames)       \
  X(test_player_ring_bound)         \
  X(test_player_skips_when_late)    \
  X(test_player_pause_resume)       \
  X(test_player_release_when_paused) \
  X(test_player_free)               \
  X(test_player_errors)             \
  X(test_player_shared_source)      \
  X(test_player_table_rows)         \
  X(test_player_isolation_all)      \
  X(test_player_isolation_modules)  \
  X(test_player_jxl_frames)         \
  X(test_player_isolation_module_frames) \
  X(test_player_isolation_release)  \
  X(test_truncated_jpeg)            \
  X(test_truncated_gif)             \
  X(test_truncated_png_webp_avif)   \
  X(test_incomplete_not_on_disk)    \
  X(test_incomplete_replaced_in_memory) \
  X(test_codec_qoi)                 \
  X(test_codec_disk_variants)       \
  X(test_codec_disk_variants_builtin) \
  X(test_codec_cancel_flag)         \
  X(test_codec_module_missing) \
  X(test_isolation_hostile_module) \
  X(test_isolation_warm_pool) \
  X(test_isolation_all) \
  X(test_isolation_all_stream) \
  X(test_isolation_modules_resampled) \
  X(test_isolation_manifest_version) \
  X(test_isolation_mapped) \
  X(test_isolation_one_conversation) \
  X(test_processors_builtin)        \
  X(test_processors_invalid)        \
  X(test_processors_custom) \
  X(test_processors_table)          \
  X(test_processors_table_refused_log) \
  X(test_processors_animated)       \
  X(test_processors_preview)        \
  X(test_tls_odd_https_spelling)    \
  X(test_tls_redirect_chain)        \
  X(test_tls_redirect_credentials)  \
  X(test_tls_ca_file_replaces_system_store) \
  X(test_tls_ca_path_and_bad_trust_files) \
  X(test_tls_min_version)           \
  X(test_tls_session_resumption)    \
  X(test_proxy_setting) \
  X(test_metrics_tiers)             \
  X(test_metrics_cancelled_transfer) \
  X(test_metrics_cancelled_processing) \
  X(test_metrics_add_up)            \
  X(test_image_get_info)            \
  X(test_placeholder_api) \
  X(test_fetcher_sqlite)            \
  X(test_fetcher_cancel_and_limit)  \
  X(test_fetcher_misbehaving)       \
  X(test_fetcher_loader_freed)      \
  X(test_fetcher_registration)      \
  X(test_fetcher_finished_twice)    \
  X(test_fetcher_finish_races)      \
  X(test_fetcher_table)             \
  X(test_data_uris)                 \
  X(test_hook_token_refresh)        \
  X(test_hook_redirect_hops)        \
  X(test_hook_failures)             \
  X(test_hook_misbehaving)          \
  X(test_hook_loader_freed)         \
  X(test_hook_answered_twice)       \
  X(test_hook_answer_races)

#define DECLARE_TEST(name) void name(const struct test_env *env);
TEST_LIST(DECLARE_TEST)
#undef DECLARE_TEST

#endif
