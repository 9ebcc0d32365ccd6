/* GPU suite: ops launch on the caller's stream without synchronizing, so a
 * sequence of them can be captured into a CUDA graph and replayed.  Exits 77
 * (skip) with the reason when there is no NVIDIA GPU (the driver:
 * tests/common/gpu_harness.c).  The CUDA driver is opened with dlopen, so
 * the test needs no CUDA headers to build. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "gpu_harness.h"

enum { ROWS = 1000, COLS = 37 };

typedef int (*stream_create_t)(void **, unsigned);
typedef int (*begin_capture_t)(void *, int);
typedef int (*end_capture_t)(void *, void **);
typedef int (*instantiate_t)(void **, void *, unsigned long long);
typedef int (*graph_launch_t)(void *, void *);
typedef int (*stream_sync_t)(void *);

#define CHECK GT_CHECK

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

typedef int (*get_t)(int *, int);
typedef int (*retain_t)(void **, int);
typedef int (*set_t)(void *);
typedef int (*exec_destroy_t)(void *);
typedef int (*graph_destroy_t)(void *);
static struct {
  stream_create_t stream_create;
  begin_capture_t begin;
  end_capture_t end;
  instantiate_t instantiate;
  graph_launch_t launch;
  stream_sync_t sync;
  get_t device_get;
  retain_t retain;
  set_t set_current;
  exec_destroy_t exec_destroy;
  graph_destroy_t graph_destroy;
} cu;

/* The CUDA driver with the graph API; 0 skips with the reason. */
static int requires(gt_ctx *ctx, char *why, size_t len) {
  if (ctx->info.backend != CKJIT_BACKEND_CUDA) {
    snprintf(why, len, "graph capture test uses the CUDA driver; device is %s", ctx->info.device_arch);
    return 0;
  }
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cuda) {
    cu.stream_create = (stream_create_t)dlsym(cuda, "cuStreamCreate");
    cu.begin = (begin_capture_t)dlsym(cuda, "cuStreamBeginCapture_v2");
    cu.end = (end_capture_t)dlsym(cuda, "cuStreamEndCapture");
    cu.instantiate = (instantiate_t)dlsym(cuda, "cuGraphInstantiateWithFlags");
    cu.launch = (graph_launch_t)dlsym(cuda, "cuGraphLaunch");
    cu.sync = (stream_sync_t)dlsym(cuda, "cuStreamSynchronize");
    cu.device_get = (get_t)dlsym(cuda, "cuDeviceGet");
    cu.retain = (retain_t)dlsym(cuda, "cuDevicePrimaryCtxRetain");
    cu.set_current = (set_t)dlsym(cuda, "cuCtxSetCurrent");
    cu.exec_destroy = (exec_destroy_t)dlsym(cuda, "cuGraphExecDestroy");
    cu.graph_destroy = (graph_destroy_t)dlsym(cuda, "cuGraphDestroy");
  }
  if (!cu.stream_create || !cu.begin || !cu.end || !cu.instantiate || !cu.launch || !cu.sync || !cu.device_get ||
      !cu.retain || !cu.set_current || !cu.exec_destroy || !cu.graph_destroy) {
    snprintf(why, len, "this CUDA driver lacks the graph API");
    return 0;
  }
  return 1;
}

static gt_result run(gt_ctx *ctx) {
  const ckjit_device_info info = ctx->info;
  /* The stream is created in the device's primary context, which the test
   * makes current itself: ckjit never leaves its context current. */
  int dev;
  void *primary = NULL;
  CHECK(cu.device_get(&dev, info.device) == 0 && cu.retain(&primary, dev) == 0 && cu.set_current(primary) == 0,
        "primary context");

  size_t bytes = sizeof(float) * ROWS * COLS;
  float *hx = malloc(bytes), *ht = malloc(bytes), *want = malloc(bytes);
  /* NULL first: CHECK goes on after a failure, so a failed ckjit_malloc
   * leaves the later ones unset and the cleanup frees them. */
  void *x = NULL, *y = NULL, *z = NULL, *t = NULL, *stream = NULL, *graph = NULL, *exec = NULL;
  CHECK(ckjit_malloc(&x, bytes) == 0 && ckjit_malloc(&y, bytes) == 0 &&
            ckjit_malloc(&z, bytes) == 0 && ckjit_malloc(&t, bytes) == 0, "malloc");
  CHECK(cu.stream_create(&stream, 0) == 0, "cuStreamCreate");

  /* Eager run first: kernels are compiled and loaded outside the capture
   * (module loading is not allowed while a stream is being captured). */
  fill(hx, 1);
  ckjit_memcpy(x, hx, bytes, CKJIT_HOST_TO_DEVICE);
  CHECK(enqueue(x, y, z, t, stream) == 0, "eager run");
  CHECK(cu.sync(stream) == 0, "sync");
  ckjit_memcpy(ht, t, bytes, CKJIT_DEVICE_TO_HOST);
  reference(hx, want);
  compare(ht, want, "eager");

  /* Capture the same four ops, then replay the graph on new inputs. */
  CHECK(cu.begin(stream, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */) == 0, "cuStreamBeginCapture");
  CHECK(enqueue(x, y, z, t, stream) == 0, "enqueue while capturing");
  CHECK(cu.end(stream, &graph) == 0 && graph, "cuStreamEndCapture");
  CHECK(cu.instantiate(&exec, graph, 0) == 0, "cuGraphInstantiate");
  for (unsigned round = 2; round < 5 && !ctx->ck->failures; round++) {
    fill(hx, round);
    ckjit_memcpy(x, hx, bytes, CKJIT_HOST_TO_DEVICE);
    ckjit_memset(t, 0xFF, bytes);
    CHECK(cu.launch(exec, stream) == 0, "cuGraphLaunch");
    CHECK(cu.sync(stream) == 0, "sync");
    ckjit_memcpy(ht, t, bytes, CKJIT_DEVICE_TO_HOST);
    reference(hx, want);
    char what[32];
    snprintf(what, sizeof what, "graph replay %u", round);
    compare(ht, want, what);
  }
  if (exec) cu.exec_destroy(exec);
  if (graph) cu.graph_destroy(graph);
  ckjit_free(x), ckjit_free(y), ckjit_free(z), ckjit_free(t);
  free(hx), free(ht), free(want);
  if (!ctx->ck->failures) printf("4 ops captured into a CUDA graph and replayed 3 times: results match\n");
  return (gt_result){ctx->ck->checks, ctx->ck->failures};
}

static const gt_suite suite = {
    .name = "graph_gpu",
    .requires = requires,
    .run = run,
};

GT_MAIN(suite)
