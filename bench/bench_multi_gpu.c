/*
 * bench_multi_gpu: host time of one C ckjit_unary call (relu, f32 1x1024:
 * the GPU keeps up, so the host's cost is what is timed) with N GPUs
 * driven at once, one thread per GPU, each on its GPU's primary context
 * and its own stream.  bench/multi_gpu.py runs it with one GPU visible and
 * with two, alternating, and writes the "two gpu launch host time vs one
 * gpu" record.
 *
 * usage: bench_multi_gpu [--gpus N] [--calls C] [--repeats R] [--raw]
 * --raw times cuLaunchKernel of the same kernel (ckjit_get_function on the
 * thread's GPU) with the same arguments instead: the driver's own cost, to
 * tell ckjit's share from the driver's when several threads launch at once.
 * Prints one JSON line per thread: {"kind":"multi_gpu_thread", "device",
 * "gpus", "median_us", "min_us", "calls", "repeats", "checks", "raw"}, after
 * checking each thread's result once (relu of a known input).
 */
#define BENCH_NAME "bench_multi_gpu"
#include "bench_util.h"

#include <pthread.h>

static void bench_cuda_fail(CUresult r, const char *what, const char *file, int line) {
  const char *name, *text;
  cuda_error_strings(r, &name, &text);
  msg("%s:%d: %s failed: %s: %s", file, line, what, name ? name : "?", text ? text : "");
  exit(1);
}

enum { COLS = 1024, CHUNK = 1000, MAX_GPUS = 16 };

/* The kernel ckjit_unary(RELU, F32, 1, 1024, ...) launches on 16-byte
 * aligned pointers (runtime/ops/elementwise/elementwise.c's plan) and its
 * argument struct (kernel_src/abi/elementwise_args.h: one kernel parameter
 * per field), mirrored for the raw launches. */
static const char *const RELU_SPEC =
    "elementwise:dtype=f32,op=relu,epilogue=none,vec=4,threads=256,unroll=1";
typedef struct relu_args {
  CUdeviceptr a;
  long long lda;
  CUdeviceptr b;
  long long ldb;
  CUdeviceptr y;
  long long ldy, rows, cols;
  float scale, bias;
} relu_args;
_Static_assert(sizeof(relu_args) == 72, "ckjit_elementwise_args is 72 bytes");

static int g_raw;

static void launch(CUfunction fn, void **params, CUdeviceptr x, CUdeviceptr y, CUstream stream,
                   int *failed) {
  if (g_raw) {
    CUresult r = cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, stream, params, NULL);
    if (r) *failed = 1;
  } else if (ckjit_unary(CKJIT_UNARY_RELU, CKJIT_F32, 1, COLS, (void *)x, COLS, (void *)y, COLS,
                         NULL, stream)) {
    *failed = 1;
  }
}

typedef struct worker {
  int device, calls, repeats;
  pthread_barrier_t *start;
  double per_call_us[64];
  int failed;
} worker;

static void *drive(void *arg) {
  worker *w = arg;
  CUdevice dev;
  CUcontext ctx;
  CU(cuDeviceGet(&dev, w->device));
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  CUstream stream;
  CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  float hx[COLS], got[COLS];
  for (int i = 0; i < COLS; i++) hx[i] = (float)(i % 17) - 8.0f;
  CUdeviceptr x, y;
  CU(cuMemAlloc(&x, sizeof hx));
  CU(cuMemAlloc(&y, sizeof hx));
  CU(cuMemcpyHtoD(x, hx, sizeof hx));
  CUfunction fn = NULL;
  relu_args args = {x, COLS, x, COLS, y, COLS, 1, COLS, 1.0f, 0.0f};
  void *params[10] = {&args.a,  &args.lda,  &args.b,    &args.ldb,   &args.y,
                      &args.ldy, &args.rows, &args.cols, &args.scale, &args.bias};
  if (g_raw && ckjit_get_function(RELU_SPEC, (void **)&fn)) {
    msg("device %d: ckjit_get_function: %s", w->device, ckjit_last_error());
    w->failed = 1;
  }
  /* Warm: the kernel is loaded on this GPU, and the result is right. */
  for (int i = 0; i < CHUNK && !w->failed; i++) launch(fn, params, x, y, stream, &w->failed);
  if (w->failed) msg("device %d: launch failed: %s", w->device, ckjit_last_error());
  CU(cuStreamSynchronize(stream));
  CU(cuMemcpyDtoH(got, y, sizeof got));
  for (int i = 0; i < COLS && !w->failed; i++)
    if (got[i] != (hx[i] > 0 ? hx[i] : 0.0f)) {
      msg("device %d: relu result wrong at %d", w->device, i);
      w->failed = 1;
    }
  pthread_barrier_wait(w->start);
  for (int r = 0; r < w->repeats && !w->failed; r++) {
    double total = 0;
    /* Chunks synchronized outside the timed loop: the launch queue never
     * fills, so the host is never held back by the GPU. */
    for (int done = 0; done < w->calls; done += CHUNK) {
      double t0 = now_s();
      for (int i = 0; i < CHUNK; i++) launch(fn, params, x, y, stream, &w->failed);
      total += now_s() - t0;
      CU(cuStreamSynchronize(stream));
    }
    w->per_call_us[r] = total / w->calls * 1e6;
  }
  cuMemFree(x);
  cuMemFree(y);
  cuStreamDestroy(stream);
  return NULL;
}

int main(int argc, char **argv) {
  int gpus = 1, calls = 20000, repeats = 10;
  for (int i = 1; i < argc; i += 2) {
    if (!strcmp(argv[i], "--raw")) {
      g_raw = 1;
      i--;
    } else if (i + 1 >= argc) {
      msg("usage: bench_multi_gpu [--gpus N] [--calls C] [--repeats R] [--raw]");
      return 2;
    } else if (!strcmp(argv[i], "--gpus")) gpus = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--calls")) calls = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--repeats")) repeats = atoi(argv[i + 1]);
    else {
      msg("usage: bench_multi_gpu [--gpus N] [--calls C] [--repeats R] [--raw]");
      return 2;
    }
  }
  if (repeats < 1 || repeats > 64) repeats = 10;
  if (calls < CHUNK) calls = CHUNK;
  CU(cuInit(0));
  int count = 0;
  CU(cuDeviceGetCount(&count));
  if (gpus < 1 || gpus > count || gpus > MAX_GPUS) {
    msg("--gpus %d: the process sees %d GPU(s)", gpus, count);
    return 77;
  }
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)gpus);
  worker w[MAX_GPUS];
  pthread_t t[MAX_GPUS];
  for (int i = 0; i < gpus; i++) {
    w[i] = (worker){.device = i, .calls = calls, .repeats = repeats, .start = &start};
    pthread_create(&t[i], NULL, drive, &w[i]);
  }
  int failed = 0;
  for (int i = 0; i < gpus; i++) {
    pthread_join(t[i], NULL);
    failed |= w[i].failed;
  }
  if (failed) return 1;
  const char *checks = getenv("CKJIT_DEVICE_CHECKS");
  for (int i = 0; i < gpus; i++) {
    jrec r;
    j_begin(&r, "multi_gpu unary relu f32 1x1024 host time", "us", median(w[i].per_call_us, repeats),
            "multi_gpu_thread");
    j_int(&r, "device", i);
    j_int(&r, "gpus", gpus);
    j_int(&r, "visible", count);
    j_num(&r, "median_us", median(w[i].per_call_us, repeats));
    j_num(&r, "min_us", min_of(w[i].per_call_us, repeats));
    j_int(&r, "calls", calls);
    j_int(&r, "repeats", repeats);
    j_str(&r, "checks", checks && *checks ? checks : "0");
    j_bool(&r, "raw", g_raw);
    j_end(&r);
  }
  return 0;
}
