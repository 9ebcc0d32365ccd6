/* GPU suite: ops launch on the caller's stream without synchronizing, so a
 * sequence of them can be captured into a CUDA graph and replayed.  Exits 77
 * (skip) with the reason when there is no NVIDIA GPU.  The CUDA driver is
 * opened with dlopen, so the test needs no CUDA headers to build. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"

#define SKIP_CODE 77
enum { ROWS = 1000, COLS = 37 };

typedef int (*stream_create_t)(void **, unsigned);
typedef int (*begin_capture_t)(void *, int);
typedef int (*end_capture_t)(void *, void **);
typedef int (*instantiate_t)(void **, void *, unsigned long long);
typedef int (*graph_launch_t)(void *, void *);
typedef int (*stream_sync_t)(void *);

static int failures;
#define CHECK(cond, ...)                                          \
  do {                                                            \
    if (!(cond)) {                                                \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);        \
      fprintf(stderr, __VA_ARGS__);                               \
      fprintf(stderr, " (last error: %s)\n", ckjit_last_error()); \
      failures++;                                                 \
    }                                                             \
  } while (0)

/* t = transpose(relu(2x + 1) + x), the graph's function, on the CPU. */
static void reference(const float *x, float *t) {
  for (int r = 0; r < ROWS; r++)
    for (int c = 0; c < COLS; c++) {
      float v = x[r * COLS + c], y = 2.0f * v + 1.0f;
      t[c * ROWS + r] = (y < 0 ? 0 : y) + v;
    }
}

/* y = 2x + 1 (identity with an epilogue), z = relu(y), z = z + x, t = z^T. */
static int enqueue(void *x, void *y, void *z, void *t, void *stream) {
  ckjit_epilogue lin = {.scale = 2.0f, .bias = 1.0f};
  int st = ckjit_unary(CKJIT_UNARY_IDENTITY, CKJIT_F32, ROWS, COLS, x, COLS, y, COLS, &lin, stream);
  st = st ? st : ckjit_unary(CKJIT_UNARY_RELU, CKJIT_F32, ROWS, COLS, y, COLS, z, COLS, NULL, stream);
  st = st ? st : ckjit_binary(CKJIT_BINARY_ADD, CKJIT_F32, ROWS, COLS, z, COLS, x, COLS, z, COLS, NULL, stream);
  st = st ? st : ckjit_transpose(CKJIT_F32, 1, ROWS, COLS, z, COLS, 0, t, ROWS, 0, stream);
  return st;
}

static void fill(float *x, unsigned seed) {
  for (int i = 0; i < ROWS * COLS; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)(seed >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
  }
}

static int compare(const float *got, const float *want, const char *what) {
  int bad = 0;
  for (int i = 0; i < ROWS * COLS; i++)
    if (fabsf(got[i] - want[i]) > 1e-6f * (1.0f + fabsf(want[i]))) bad++;
  CHECK(bad == 0, "%s: %d of %d elements differ", what, bad, ROWS * COLS);
  return bad;
}

int main(void) {
  ckjit_device_info info;
  if (ckjit_get_device_info(&info) || !info.has_device) {
    printf("SKIP: no GPU: %s\n", ckjit_last_error());
    return SKIP_CODE;
  }
  if (info.backend != CKJIT_BACKEND_CUDA) {
    printf("SKIP: graph capture test uses the CUDA driver; device is %s\n", info.device_arch);
    return SKIP_CODE;
  }
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  stream_create_t stream_create = cuda ? (stream_create_t)dlsym(cuda, "cuStreamCreate") : NULL;
  begin_capture_t begin = cuda ? (begin_capture_t)dlsym(cuda, "cuStreamBeginCapture_v2") : NULL;
  end_capture_t end = cuda ? (end_capture_t)dlsym(cuda, "cuStreamEndCapture") : NULL;
  instantiate_t instantiate = cuda ? (instantiate_t)dlsym(cuda, "cuGraphInstantiateWithFlags") : NULL;
  graph_launch_t launch = cuda ? (graph_launch_t)dlsym(cuda, "cuGraphLaunch") : NULL;
  stream_sync_t sync = cuda ? (stream_sync_t)dlsym(cuda, "cuStreamSynchronize") : NULL;
  typedef int (*get_t)(int *, int);
  typedef int (*retain_t)(void **, int);
  typedef int (*set_t)(void *);
  get_t device_get = cuda ? (get_t)dlsym(cuda, "cuDeviceGet") : NULL;
  retain_t retain = cuda ? (retain_t)dlsym(cuda, "cuDevicePrimaryCtxRetain") : NULL;
  set_t set_current = cuda ? (set_t)dlsym(cuda, "cuCtxSetCurrent") : NULL;
  if (!stream_create || !begin || !end || !instantiate || !launch || !sync || !device_get ||
      !retain || !set_current) {
    printf("SKIP: this CUDA driver lacks the graph API\n");
    return SKIP_CODE;
  }
  /* The stream is created in the device's primary context, which the test
   * makes current itself: ckjit never leaves its context current. */
  int dev;
  void *ctx = NULL;
  CHECK(device_get(&dev, info.device) == 0 && retain(&ctx, dev) == 0 && set_current(ctx) == 0,
        "primary context");

  size_t bytes = sizeof(float) * ROWS * COLS;
  float *hx = malloc(bytes), *ht = malloc(bytes), *want = malloc(bytes);
  /* NULL first: CHECK goes on after a failure, so a failed ckjit_malloc
   * leaves the later ones unset and the cleanup frees them. */
  void *x = NULL, *y = NULL, *z = NULL, *t = NULL, *stream = NULL, *graph = NULL, *exec = NULL;
  CHECK(ckjit_malloc(&x, bytes) == 0 && ckjit_malloc(&y, bytes) == 0 &&
            ckjit_malloc(&z, bytes) == 0 && ckjit_malloc(&t, bytes) == 0, "malloc");
  CHECK(stream_create(&stream, 0) == 0, "cuStreamCreate");

  /* Eager run first: kernels are compiled and loaded outside the capture
   * (module loading is not allowed while a stream is being captured). */
  fill(hx, 1);
  ckjit_memcpy(x, hx, bytes, CKJIT_HOST_TO_DEVICE);
  CHECK(enqueue(x, y, z, t, stream) == 0, "eager run");
  CHECK(sync(stream) == 0, "sync");
  ckjit_memcpy(ht, t, bytes, CKJIT_DEVICE_TO_HOST);
  reference(hx, want);
  compare(ht, want, "eager");

  /* Capture the same four ops, then replay the graph on new inputs. */
  CHECK(begin(stream, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */) == 0, "cuStreamBeginCapture");
  CHECK(enqueue(x, y, z, t, stream) == 0, "enqueue while capturing");
  CHECK(end(stream, &graph) == 0 && graph, "cuStreamEndCapture");
  CHECK(instantiate(&exec, graph, 0) == 0, "cuGraphInstantiate");
  for (unsigned round = 2; round < 5 && !failures; round++) {
    fill(hx, round);
    ckjit_memcpy(x, hx, bytes, CKJIT_HOST_TO_DEVICE);
    ckjit_memset(t, 0xFF, bytes);
    CHECK(launch(exec, stream) == 0, "cuGraphLaunch");
    CHECK(sync(stream) == 0, "sync");
    ckjit_memcpy(ht, t, bytes, CKJIT_DEVICE_TO_HOST);
    reference(hx, want);
    char what[32];
    snprintf(what, sizeof what, "graph replay %u", round);
    compare(ht, want, what);
  }
  ckjit_free(x), ckjit_free(y), ckjit_free(z), ckjit_free(t);
  free(hx), free(ht), free(want);
  if (!failures) printf("4 ops captured into a CUDA graph and replayed 3 times: results match\n");
  return failures ? 1 : 0;
}
