/* GPU suite: ckjit is a good citizen of the caller's CUDA state.
 *
 * Two rules hold whatever the caller does:
 *   - a ckjit call never changes the calling thread's current context
 *     (ckjit pushes the stream's device's for the call and pops it);
 *   - an op runs on the device of its stream, whichever context is
 *     current (it used to "succeed" on device 0 and compute nothing).
 * The context checks run on any NVIDIA GPU; the other-device checks
 * (--other-device) need two and skip with the reason on one; the
 * many-thread, every-family checks are test_multi_gpu.c.  The test
 * driver is tests/common/gpu_harness.c; the CUDA driver is opened with
 * dlopen, so no CUDA headers are needed. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "gpu_harness.h"

enum { ROWS = 4, COLS = 256, N = ROWS * COLS };

typedef unsigned long long devptr;
static struct {
  int (*device_count)(int *);
  int (*device_get)(int *, int);
  int (*primary_retain)(void **, int);
  int (*ctx_create)(void **, unsigned, int);
  int (*ctx_destroy)(void *);
  int (*ctx_get_current)(void **);
  int (*ctx_set_current)(void *);
  int (*stream_create)(void **, unsigned);
  int (*stream_destroy)(void *);
  int (*stream_sync)(void *);
  int (*mem_alloc)(devptr *, size_t);
  int (*mem_free)(devptr);
  int (*htod)(devptr, const void *, size_t);
  int (*dtoh)(void *, devptr, size_t);
  int (*pointer_attribute)(void *, int, devptr);
} cu;

#define CHECK GT_CHECK

static int load_driver(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return -1;
#define SYM(f, n) \
  if (!(*(void **)&cu.f = dlsym(h, n))) return -1;
  SYM(device_count, "cuDeviceGetCount");
  SYM(device_get, "cuDeviceGet");
  SYM(primary_retain, "cuDevicePrimaryCtxRetain");
  SYM(ctx_create, "cuCtxCreate_v2");
  SYM(ctx_destroy, "cuCtxDestroy_v2");
  SYM(ctx_get_current, "cuCtxGetCurrent");
  SYM(ctx_set_current, "cuCtxSetCurrent");
  SYM(stream_create, "cuStreamCreate");
  SYM(stream_destroy, "cuStreamDestroy_v2");
  SYM(stream_sync, "cuStreamSynchronize");
  SYM(mem_alloc, "cuMemAlloc_v2");
  SYM(mem_free, "cuMemFree_v2");
  SYM(htod, "cuMemcpyHtoD_v2");
  SYM(dtoh, "cuMemcpyDtoH_v2");
  SYM(pointer_attribute, "cuPointerGetAttribute");
#undef SYM
  return 0;
}

static void *current(void) {
  void *ctx = NULL;
  cu.ctx_get_current(&ctx);
  return ctx;
}

static void *primary(int ordinal) {
  int dev;
  void *ctx = NULL;
  if (cu.device_get(&dev, ordinal) || cu.primary_retain(&ctx, dev)) return NULL;
  return ctx;
}

/* x = -2, -1.9, ... (half of it negative) and its relu. */
static void fill(float *x, float *want) {
  for (int i = 0; i < N; i++) {
    x[i] = (float)(i % 41) / 10.0f - 2.0f;
    want[i] = x[i] > 0 ? x[i] : 0;
  }
}

/* A device buffer of N floats in the current context, holding `init`. */
static devptr buffer(const float *init) {
  devptr p = 0;
  if (cu.mem_alloc(&p, N * sizeof(float)) || cu.htod(p, init, N * sizeof(float))) return 0;
  return p;
}

static int equals(devptr p, const float *want) {
  float got[N];
  if (cu.dtoh(got, p, sizeof got)) return 0;
  return memcmp(got, want, sizeof got) == 0;
}

static ckjit_status relu(devptr x, devptr y, void *stream) {
  return ckjit_unary(CKJIT_UNARY_RELU, CKJIT_F32, ROWS, COLS, (void *)(uintptr_t)x, COLS,
                     (void *)(uintptr_t)y, COLS, NULL, stream);
}

/* On device 0's primary context: ops and memory helpers leave
 * whatever was current (none, the primary one, a private context) current. */
static void context_is_left_alone(void *ctx0) {
  float hx[N], want[N], sentinel[N];
  fill(hx, want);
  for (int i = 0; i < N; i++) sentinel[i] = 12345.0f;

  /* No current context: ckjit pushes the default device's for the call,
   * then pops it. */
  CHECK(cu.ctx_set_current(NULL) == 0, "cuCtxSetCurrent(NULL)");
  void *x = NULL, *y = NULL;
  CHECK(ckjit_malloc(&x, sizeof hx) == CKJIT_SUCCESS && ckjit_malloc(&y, sizeof hx) == CKJIT_SUCCESS,
        "ckjit_malloc with no current context");
  CHECK(current() == NULL, "ckjit_malloc made a context current");
  CHECK(ckjit_memcpy(x, hx, sizeof hx, CKJIT_HOST_TO_DEVICE) == CKJIT_SUCCESS, "memcpy");
  CHECK(relu((devptr)(uintptr_t)x, (devptr)(uintptr_t)y, NULL) == CKJIT_SUCCESS,
        "relu on the default stream with no current context");
  CHECK(ckjit_synchronize(NULL) == CKJIT_SUCCESS, "synchronize");
  CHECK(current() == NULL, "an op made a context current (it must push and pop)");
  float got[N];
  CHECK(ckjit_memcpy(got, y, sizeof got, CKJIT_DEVICE_TO_HOST) == CKJIT_SUCCESS &&
            memcmp(got, want, sizeof got) == 0,
        "relu with no current context computed a wrong result");

  /* Device 0's primary context current (as under PyTorch): unchanged. */
  CHECK(cu.ctx_set_current(ctx0) == 0, "cuCtxSetCurrent(primary 0)");
  void *s0 = NULL;
  CHECK(cu.stream_create(&s0, 0) == 0, "cuStreamCreate on device 0");
  CHECK(ckjit_memset(y, 0, sizeof hx) == CKJIT_SUCCESS, "memset");
  CHECK(relu((devptr)(uintptr_t)x, (devptr)(uintptr_t)y, s0) == CKJIT_SUCCESS, "relu on a stream");
  CHECK(cu.stream_sync(s0) == 0, "sync");
  CHECK(current() == ctx0, "the primary context is no longer current");
  CHECK(equals((devptr)(uintptr_t)y, want), "relu on device 0's stream computed a wrong result");

  /* A private context of the same device: ckjit loads its kernels into
   * primary contexts only, so a call on its default stream is refused,
   * nothing is written, and the private context stays current. */
  void *mine = NULL;
  int dev0;
  cu.device_get(&dev0, 0);
  if (cu.ctx_create(&mine, 0, dev0) == 0 && mine) {
    CHECK(cu.ctx_set_current(mine) == 0, "cuCtxSetCurrent(private)");
    CHECK(ckjit_memcpy(y, sentinel, sizeof sentinel, CKJIT_HOST_TO_DEVICE) == CKJIT_SUCCESS, "memcpy");
    ckjit_status st = relu((devptr)(uintptr_t)x, (devptr)(uintptr_t)y, NULL);
    CHECK(st == CKJIT_ERROR_INVALID_ARGUMENT && strstr(ckjit_last_error(), "not its primary context"),
          "default stream of a private context: got %s", ckjit_status_string(st));
    CHECK(current() == mine, "the private context is no longer current");
    /* Device 0's explicit stream still works from here, and the private context stays. */
    CHECK(relu((devptr)(uintptr_t)x, (devptr)(uintptr_t)y, s0) == CKJIT_SUCCESS,
          "relu on device 0's stream while a private context is current");
    CHECK(ckjit_synchronize(s0) == CKJIT_SUCCESS, "sync");
    CHECK(current() == mine, "the private context is no longer current");
    CHECK(cu.ctx_set_current(ctx0) == 0 && cu.ctx_destroy(mine) == 0, "cuCtxDestroy");
    CHECK(cu.ctx_set_current(ctx0) == 0, "cuCtxSetCurrent(primary 0)");
    CHECK(equals((devptr)(uintptr_t)y, want), "relu after the private context");
  } else {
    printf("note: cuCtxCreate failed; private-context checks not run\n");
  }
  cu.stream_destroy(s0);
  ckjit_free(x);
  ckjit_free(y);
}

/* Device 1's data, streams and context work from any thread state: the
 * op runs on its stream's device, and the caller's current context stays
 * current (the report: device 1's tensors and stream returned success with
 * a wrong result and left device 0 current). */
static void other_device_works(void *ctx0, void *ctx1) {
  float hx[N], want[N], sentinel[N];
  fill(hx, want);
  for (int i = 0; i < N; i++) sentinel[i] = 12345.0f;

  CHECK(cu.ctx_set_current(ctx0) == 0, "set primary 0");
  void *s0 = NULL;
  CHECK(cu.stream_create(&s0, 0) == 0, "stream on device 0");
  devptr x0 = buffer(hx), y0 = buffer(sentinel);

  /* As in the report: torch.cuda.set_device(1), tensors and stream on 1. */
  CHECK(cu.ctx_set_current(ctx1) == 0, "set primary 1");
  void *s1 = NULL;
  CHECK(cu.stream_create(&s1, 0) == 0, "stream on device 1");
  devptr x1 = buffer(hx), y1 = buffer(sentinel);
  CHECK(x1 && y1 && x0 && y0, "buffers");
  int ordinal = -1;
  cu.pointer_attribute(&ordinal, 9 /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */, x1);
  CHECK(ordinal == 1, "x1 is on device %d, expected 1", ordinal);

  ckjit_status st = relu(x1, y1, s1);
  CHECK(st == CKJIT_SUCCESS, "device 1's stream and data: %s", ckjit_last_error());
  CHECK(current() == ctx1, "ckjit changed the current context (device 1's primary)");
  cu.stream_sync(s1);
  CHECK(equals(y1, want), "relu on device 1's stream computed a wrong result");

  /* The default stream while device 1 is current is device 1's. */
  CHECK(cu.htod(y1, sentinel, sizeof sentinel) == 0, "reset y1");
  st = relu(x1, y1, NULL);
  CHECK(st == CKJIT_SUCCESS, "device 1's data on its default stream: %s", ckjit_last_error());
  CHECK(ckjit_synchronize(NULL) == CKJIT_SUCCESS, "synchronize the current device");
  CHECK(current() == ctx1, "current context changed");
  CHECK(equals(y1, want), "relu on device 1's default stream computed a wrong result");

  /* Device 0's stream and data work while device 1 is current. */
  CHECK(relu(x0, y0, s0) == CKJIT_SUCCESS, "device 0's stream and data from device 1's thread");
  CHECK(ckjit_synchronize(s0) == CKJIT_SUCCESS, "sync device 0's stream");
  CHECK(current() == ctx1, "current context changed");
  CHECK(equals(y0, want), "relu on device 0 from device 1's thread: wrong result");

  /* The memory helpers work on the current device. */
  void *p = NULL;
  CHECK(ckjit_malloc(&p, 256) == CKJIT_SUCCESS, "malloc");
  ordinal = -1;
  cu.pointer_attribute(&ordinal, 9, (devptr)(uintptr_t)p);
  CHECK(ordinal == 1, "ckjit_malloc with device 1 current allocated on device %d", ordinal);
  CHECK(current() == ctx1, "ckjit_malloc changed the current context");
  ckjit_free(p);

  cu.stream_destroy(s1);
  cu.mem_free(x1), cu.mem_free(y1);
  cu.ctx_set_current(ctx0);
  cu.stream_destroy(s0);
  cu.mem_free(x0), cu.mem_free(y0);
}

/* Without arguments: the context checks (any NVIDIA GPU).  With
 * --other-device: the checks that need a second GPU (skipped on one). */
static int other_device(const gt_ctx *ctx) { return ctx->argc > 1 && !strcmp(ctx->argv[1], "--other-device"); }

static int requires(gt_ctx *ctx, char *why, size_t len) {
  const ckjit_device_info *info = &ctx->info;
  if (info->backend != CKJIT_BACKEND_CUDA || load_driver()) {
    snprintf(why, len, "this test drives the CUDA driver; device is %s", info->device_arch);
    return 0;
  }
  if (info->device != 0) {
    snprintf(why, len, "the test expects ckjit on device 0 (CKJIT_DEVICE=%d)", info->device);
    return 0;
  }
  int count = 0;
  cu.device_count(&count);
  if (other_device(ctx) && count < 2) {
    snprintf(why, len, "one GPU (%s): the other-device checks need two", info->name);
    return 0;
  }
  return 1;
}

static gt_result run(gt_ctx *ctx) {
  const int other = other_device(ctx);
  void *ctx0 = primary(0), *ctx1 = other ? primary(1) : NULL;
  CHECK(ctx0 != NULL, "primary context of device 0");
  CHECK(!other || ctx1 != NULL, "primary context of device 1");
  if (!other && ctx0) context_is_left_alone(ctx0);
  if (other && ctx0 && ctx1) other_device_works(ctx0, ctx1);
  printf("%s checks: %s\n", other ? "other-device" : "context", ctx->ck->failures ? "FAILED" : "passed");
  return (gt_result){ctx->ck->checks, ctx->ck->failures};
}

static const gt_suite suite = {
    .name = "devices_gpu",
    .requires = requires,
    .run = run,
};

GT_MAIN(suite)
