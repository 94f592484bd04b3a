/* The smallest complete pixload program: load one image as a 150x150 thumbnail.
 *
 *   cc hello.c $(pkg-config --cflags --libs pixload) -o hello
 *   ./hello https://example.org/photo.jpg
 *
 * Real hosts wait on pxl_queue_fd() in their event loop instead of pxl_queue_wait(). */
#include <pixload.h>
#include <stdio.h>

static void on_image(pxl_token token, const pxl_result *result, void *user_data) {
  int *status = user_data;
  *status = result->status;
  if (result->status == PXL_OK)
    printf("loaded #%llu: %dx%d (source %dx%d)\n", (unsigned long long)token,
           pxl_image_width(result->image), pxl_image_height(result->image),
           pxl_image_original_width(result->image), pxl_image_original_height(result->image));
  else
    printf("failed: %s (%s)\n", pxl_status_string(result->status), result->message);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s URL\n", argv[0]);
    return 2;
  }
  pxl_config config;
  pxl_config_init(&config);
  config.allowed_schemes |= PXL_SCHEME_FILE; /* let the example open local files too */

  pxl_loader *loader = NULL;
  pxl_queue *queue = NULL;
  if (pxl_loader_new(&config, &loader) != PXL_OK || pxl_queue_new(&queue) != PXL_OK) return 1;

  pxl_request request;
  pxl_request_init(&request);
  request.url = argv[1];
  request.width = 150;
  request.height = 150;
  request.mode = PXL_MODE_FILL;

  int status = -1; /* set by the callback, which runs exactly once */
  pxl_status rc = pxl_load(loader, &request, queue, on_image, &status, NULL);
  if (rc != PXL_OK) {
    fprintf(stderr, "pxl_load: %s\n", pxl_status_string(rc));
  } else {
    while (status < 0) {
      pxl_queue_wait(queue, -1);
      pxl_queue_dispatch(queue, 0);
    }
  }
  pxl_queue_free(queue);
  pxl_loader_free(loader);
  return status == PXL_OK ? 0 : 1;
}
