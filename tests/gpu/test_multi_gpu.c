/* GPU suite: one process's ckjit serving two GPUs (issue 19).  An op runs
 * on the device that owns its stream (cuStreamGetCtx); the default stream
 * is the current context's device's, or the default device's when no
 * context is current; every device has its own loaded kernels; a call never
 * changes the caller's current context.  Needs two NVIDIA GPUs: with one (or
 * none, or AMD) it prints "SKIP: <reason>" and exits 77.
 *
 *  1. two threads, one per GPU, at once: each makes its GPU's primary
 *     context current, makes its own stream and runs every op family
 *     ROUNDS times on fresh random data, checking every result against an
 *     f64 reference (multi_gpu/mg_rows.c, multi_gpu/mg_matmul.c); then
 *     ckjit_get_stats must show the later rounds served from the loaded
 *     kernels (memory hits) and modules loaded;
 *  2. one thread switching the current device between calls, on the
 *     default stream and on each device's own stream;
 *  3. streams of one device used while the other device's context, or no
 *     context, is current (ckjit is shut down before: it initializes again
 *     under device 1's context, and device 1 is opened by an op on its
 *     stream under device 0's);
 *  4. ckjit_get_device_count and ckjit_get_device_info_for against the
 *     driver (device 1 first opened by the query: shut down again before);
 *  5. an operand on the wrong device with CKJIT_DEVICE_CHECKS=1: read at
 *     initialization, so this part runs in a child process (this program
 *     again with --pointer-checks, which sets the variable before ckjit
 *     starts; it can also be run alone that way).
 * After each op and synchronize call the test checks that the current
 * context is still the one it set before the call.  The CUDA driver is opened with dlopen (no
 * CUDA headers); the driver is tests/common/gpu_harness.c.
 * Environment: CKJIT_TEST_SEED (default: time). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckjit/ckjit.h"
#include "gpu_harness.h"
#include "multi_gpu/multi_gpu.h"

#define ROUNDS 20
#define CHECK GT_CHECK

typedef unsigned long long devptr;
static struct {
  int (*init)(unsigned);
  int (*device_count)(int *);
  int (*device_get)(int *, int);
  int (*device_name)(char *, int, int);
  int (*device_attribute)(int *, int, int);
  int (*primary_retain)(void **, int);
  int (*ctx_get_current)(void **);
  int (*ctx_set_current)(void *);
  int (*stream_create)(void **, unsigned);
  int (*stream_destroy)(void *);
  int (*pointer_attribute)(void *, int, devptr);
  int (*memset_d8)(devptr, unsigned char, size_t);
} cu;

static int load_driver(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return -1;
#define SYM(f, n) \
  if (!(*(void **)&cu.f = dlsym(h, n))) return -1;
  SYM(init, "cuInit");
  SYM(device_count, "cuDeviceGetCount");
  SYM(device_get, "cuDeviceGet");
  SYM(device_name, "cuDeviceGetName");
  SYM(device_attribute, "cuDeviceGetAttribute");
  SYM(primary_retain, "cuDevicePrimaryCtxRetain");
  SYM(ctx_get_current, "cuCtxGetCurrent");
  SYM(ctx_set_current, "cuCtxSetCurrent");
  SYM(stream_create, "cuStreamCreate");
  SYM(stream_destroy, "cuStreamDestroy_v2");
  SYM(pointer_attribute, "cuPointerGetAttribute");
  SYM(memset_d8, "cuMemsetD8_v2");
#undef SYM
  return cu.init(0) ? -1 : 0;
}

static void *current(void) {
  void *ctx = NULL;
  cu.ctx_get_current(&ctx);
  return ctx;
}

/* The device's primary context, retained for the whole run (ckjit_shutdown
 * releases ckjit's own reference; the test's keeps the buffers alive). */
static void *primary(int ordinal) {
  int dev;
  void *ctx = NULL;
  if (cu.device_get(&dev, ordinal) || cu.primary_retain(&ctx, dev)) return NULL;
  return ctx;
}

static int device_of(const void *p) {
  int ordinal = -1;
  cu.pointer_attribute(&ordinal, 9 /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */, (devptr)(uintptr_t)p);
  return ordinal;
}

/* ---- 1. two threads, one per GPU, at once ------------------------------------------------- */

static pthread_barrier_t g_start;

static void *device_thread(void *arg) {
  mg_dev *d = arg;
  /* A blocking stream (flags 0): it waits for the legacy default stream,
   * where ckjit_memcpy / ckjit_memset put the uploads and the poison. */
  if (cu.ctx_set_current(d->ctx) || cu.stream_create(&d->stream, 0)) {
    gt_fail(&d->ck, "GPU %d: context or stream set-up failed", d->ordinal);
    d->stream = NULL;
  }
  pthread_barrier_wait(&g_start);
  for (d->round = 0; d->stream && d->round < ROUNDS; d->round++) {
    mg_rows_round(d);
    mg_matmul_round(d);
  }
  if (d->stream) cu.stream_destroy(d->stream);
  cu.ctx_set_current(NULL);
  return NULL;
}

static void two_threads(gt_ctx *ctx, void *const prim[2]) {
  mg_dev dev[2];
  ckjit_stats s0, s1;
  ckjit_get_stats(&s0);
  pthread_barrier_init(&g_start, NULL, 2);
  pthread_t th[2];
  int started[2] = {0, 0};
  for (int i = 0; i < 2; i++) {
    memset(&dev[i], 0, sizeof dev[i]);
    dev[i].ordinal = i, dev[i].ctx = prim[i], dev[i].current = current, dev[i].ck.max_report = 5;
    dev[i].rng.s = ctx->seed * 1000003u + (uint64_t)i + 1;
    started[i] = pthread_create(&th[i], NULL, device_thread, &dev[i]) == 0;
    CHECK(started[i], "pthread_create for GPU %d", i);
  }
  if (started[0] != started[1]) pthread_barrier_wait(&g_start); /* stand in for the missing thread */
  for (int i = 0; i < 2; i++)
    if (started[i]) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&g_start);
  for (int i = 0; i < 2; i++) {
    printf("GPU %d: %d rounds, %ld op calls, %ld checks, %ld failed\n", i, ROUNDS, dev[i].calls, dev[i].ck.checks,
           dev[i].ck.failures);
    ctx->ck->checks += dev[i].ck.checks, ctx->ck->failures += dev[i].ck.failures;
  }
  /* Loose but real: after the first rounds every call on either device
   * finds its kernel loaded in that device's table (memory hits count per
   * device and are summed), and each device loaded modules of its own. */
  ckjit_get_stats(&s1);
  const unsigned long long hits = s1.memory_hits - s0.memory_hits, loads = s1.loads - s0.loads;
  const long warm = dev[0].warm_calls + dev[1].warm_calls;
  printf("two threads: %llu memory hits for %ld calls after round %d, %llu loads, %llu compiles\n", hits, warm,
         MG_WARM_ROUND, loads, (unsigned long long)(s1.compiles - s0.compiles));
  CHECK(warm > 0 && hits >= (unsigned long long)warm, "%llu memory hits for %ld warm op calls", hits, warm);
  CHECK(loads >= 2, "%llu module loads for two devices", loads);
}

/* ---- 2, 3: one thread, streams and contexts of either device ------------------------------------ */

enum { SR = 37, SC = 1000, GM = 64, GN = 48, GK = 32 };

/* A device's data: x and relu(x) (f32 SR x SC), A, B (bf16, multiples of
 * 1/8: exact) and D = A B (f32), allocated with its context current. */
typedef struct side {
  int dev;
  void *ctx, *stream;
  gt_buf x, y, a, b, d;
} side;

static int side_open(side *s, int dev, void *ctx, tu_rng *rng) {
  memset(s, 0, sizeof *s);
  s->dev = dev, s->ctx = ctx;
  gt_check *ck = gt_suite_check;
  if (cu.ctx_set_current(ctx) || cu.stream_create(&s->stream, 0)) return -1;
  if (gt_buf_alloc(ck, &s->x, CKJIT_F32, SR * SC) || gt_buf_alloc(ck, &s->y, CKJIT_F32, SR * SC) ||
      gt_buf_alloc(ck, &s->a, CKJIT_BF16, GM * GK) || gt_buf_alloc(ck, &s->b, CKJIT_BF16, GK * GN) ||
      gt_buf_alloc(ck, &s->d, CKJIT_F32, GM * GN))
    return -1;
  gt_fill_uniform(CKJIT_F32, s->x.host, 0, s->x.elems, rng, -2, 2);
  for (size_t i = 0; i < s->a.elems; i++) gt_put(CKJIT_BF16, s->a.host, i, (double)tu_rng_range(rng, -8, 8) / 8);
  for (size_t i = 0; i < s->b.elems; i++) gt_put(CKJIT_BF16, s->b.host, i, (double)tu_rng_range(rng, -8, 8) / 8);
  CHECK(device_of(s->x.dev) == dev, "ckjit_malloc with GPU %d's context current allocated on GPU %d", dev,
        device_of(s->x.dev));
  return gt_buf_upload(ck, &s->x) || gt_buf_upload(ck, &s->a) || gt_buf_upload(ck, &s->b) ? -1 : 0;
}

static void side_close(side *s) {
  if (s->ctx) cu.ctx_set_current(s->ctx);
  gt_buf *all[] = {&s->x, &s->y, &s->a, &s->b, &s->d};
  for (int i = 0; i < 5; i++) gt_buf_free(all[i]);
  if (s->stream) cu.stream_destroy(s->stream);
}

/* relu and a GEMM on s's data on `stream` (s's own, or NULL: the current
 * context's default stream) with whatever context the caller made current;
 * each call must succeed and leave that context current; the results are
 * read back with s's context current (then the caller's is restored). */
static void side_run(side *s, void *stream, const char *how) {
  void *const cur = current();
  /* Poison the outputs through the driver, not ckjit (so that the op is
   * ckjit's first call on the device after a shutdown), on the legacy
   * stream, which `stream` waits for. */
  cu.ctx_set_current(s->ctx);
  CHECK(!cu.memset_d8((devptr)(uintptr_t)s->y.dev, 0xFF, s->y.elems * 4) &&
            !cu.memset_d8((devptr)(uintptr_t)s->d.dev, 0xFF, s->d.elems * 4),
        "%s: cuMemsetD8", how);
  cu.ctx_set_current(cur);
  ckjit_status st = ckjit_unary(CKJIT_UNARY_RELU, CKJIT_F32, SR, SC, s->x.dev, SC, s->y.dev, SC, NULL, stream);
  CHECK(st == CKJIT_SUCCESS, "%s: relu on GPU %d's data: %s", how, s->dev, ckjit_status_string(st));
  CHECK(current() == cur, "%s: ckjit_unary changed the current context", how);
  ckjit_gemm_desc g;
  ckjit_gemm_desc_init(&g);
  g.m = GM, g.n = GN, g.k = GK, g.out_dtype = CKJIT_F32;
  g.a = s->a.dev, g.lda = GK, g.b = s->b.dev, g.ldb = GN, g.d = s->d.dev, g.ldd = GN;
  st = ckjit_gemm(&g, stream);
  CHECK(st == CKJIT_SUCCESS, "%s: gemm on GPU %d's data: %s", how, s->dev, ckjit_status_string(st));
  CHECK(current() == cur, "%s: ckjit_gemm changed the current context", how);
  st = ckjit_synchronize(stream);
  CHECK(st == CKJIT_SUCCESS, "%s: ckjit_synchronize: %s", how, ckjit_status_string(st));
  CHECK(current() == cur, "%s: ckjit_synchronize changed the current context", how);
  cu.ctx_set_current(s->ctx);
  long bad = 0;
  if (!gt_buf_download(gt_suite_check, &s->y, NULL) && !gt_buf_download(gt_suite_check, &s->d, NULL)) {
    for (size_t i = 0; i < s->x.elems; i++) {
      const double x = gt_get(CKJIT_F32, s->x.host, i);
      bad += gt_get(CKJIT_F32, s->y.host, i) != (x > 0 ? x : 0);
    }
    for (int i = 0; i < GM; i++)
      for (int j = 0; j < GN; j++) {
        double v = 0;
        for (int q = 0; q < GK; q++)
          v += gt_get(CKJIT_BF16, s->a.host, (size_t)(i * GK + q)) * gt_get(CKJIT_BF16, s->b.host, (size_t)(q * GN + j));
        bad += gt_get(CKJIT_F32, s->d.host, (size_t)(i * GN + j)) != v; /* exact data: exact result */
      }
    CHECK(bad == 0, "%s: %ld wrong elements in relu / gemm on GPU %d", how, bad, s->dev);
  }
  cu.ctx_set_current(cur);
}

static void one_thread(void *const prim[2], uint64_t seed) {
  tu_rng rng = {seed ^ 0x5eed};
  side s[2];
  char how[160];
  int bad = side_open(&s[0], 0, prim[0], &rng);
  bad |= side_open(&s[1], 1, prim[1], &rng);
  CHECK(!bad, "set-up of both devices' streams and buffers");
  /* The buffers live in the primary contexts, which the test retains: they
   * outlive ckjit's state.  Device 0 (the default) is opened again when
   * ckjit initializes, under device 1's context, and device 1 by the first
   * op on its stream, under device 0's. */
  ckjit_shutdown();
  if (!bad) {
    /* 3. Streams used while another device's context, or none, is current. */
    for (int k = 0; k < 2; k++) {
      CHECK(cu.ctx_set_current(prim[1 - k]) == 0, "cuCtxSetCurrent(primary %d)", 1 - k);
      snprintf(how, sizeof how, "GPU %d's stream while GPU %d's context is current", k, 1 - k);
      side_run(&s[k], s[k].stream, how);
      CHECK(current() == prim[1 - k], "%s: the context changed", how);
    }
    for (int k = 1; k >= 0; k--) {
      CHECK(cu.ctx_set_current(NULL) == 0, "cuCtxSetCurrent(NULL)");
      snprintf(how, sizeof how, "GPU %d's stream with no context current", k);
      side_run(&s[k], s[k].stream, how);
      CHECK(current() == NULL, "%s: a context was left current", how);
    }
    /* 2. One thread switching the current device between calls: the
     * default stream and each device's own stream. */
    for (int i = 0; i < 8; i++) {
      const int k = i % 2, own = i / 2 % 2;
      CHECK(cu.ctx_set_current(prim[k]) == 0, "cuCtxSetCurrent(primary %d)", k);
      snprintf(how, sizeof how, "switch %d: GPU %d current, %s", i, k, own ? "its own stream" : "the default stream");
      side_run(&s[k], own ? s[k].stream : NULL, how);
    }
    /* A prepared call belongs to its device: one prepared for GPU 1 runs on
     * GPU 1's stream whatever is current, and refuses GPU 0's. */
    ckjit_prepared *pp = NULL;
    CHECK(cu.ctx_set_current(prim[0]) == 0, "cuCtxSetCurrent(primary 0)");
    ckjit_status st = ckjit_softmax_prepare(CKJIT_F32, SR, SC, SC, SC, NULL, 1, &pp);
    CHECK(st == CKJIT_SUCCESS, "ckjit_softmax_prepare for GPU 1: %s", ckjit_last_error());
    if (st == CKJIT_SUCCESS) {
      st = ckjit_prepared_run(pp, s[1].x.dev, s[1].y.dev, s[1].stream);
      CHECK(st == CKJIT_SUCCESS && ckjit_synchronize(s[1].stream) == CKJIT_SUCCESS,
            "prepared for GPU 1, GPU 1's stream, GPU 0 current: %s", ckjit_last_error());
      st = ckjit_prepared_run(pp, s[0].x.dev, s[0].y.dev, s[0].stream);
      CHECK(st == CKJIT_ERROR_INVALID_ARGUMENT && strstr(ckjit_last_error(), "GPU 1") &&
                strstr(ckjit_last_error(), "GPU 0"),
            "prepared for GPU 1, run on GPU 0's stream: %s (%s)", ckjit_status_string(st),
            ckjit_last_error());
      CHECK(current() == prim[0], "ckjit_prepared_run changed the current context");
    }
    ckjit_prepared_free(pp);
  }
  side_close(&s[0]);
  side_close(&s[1]);
  cu.ctx_set_current(NULL);
}

/* ---- 4. device info ------------------------------------------------------------------------------ */

static void device_info(void *const prim[2]) {
  int n = -1, drv = -1;
  CHECK(ckjit_get_device_count(&n) == CKJIT_SUCCESS && cu.device_count(&drv) == 0 && n == drv,
        "ckjit_get_device_count %d, cuDeviceGetCount %d", n, drv);
  CHECK(cu.ctx_set_current(prim[0]) == 0, "cuCtxSetCurrent(primary 0)");
  for (int i = 0; i < drv && i < 8; i++) {
    ckjit_device_info info;
    char name[128] = "", arch[32];
    int dev = -1, major = 0, minor = 0, sms = 0;
    cu.device_get(&dev, i);
    cu.device_name(name, (int)sizeof name, dev);
    cu.device_attribute(&major, 75 /* COMPUTE_CAPABILITY_MAJOR */, dev);
    cu.device_attribute(&minor, 76 /* COMPUTE_CAPABILITY_MINOR */, dev);
    cu.device_attribute(&sms, 16 /* MULTIPROCESSOR_COUNT */, dev);
    snprintf(arch, sizeof arch, "sm_%d%d", major, minor);
    ckjit_status st = ckjit_get_device_info_for(i, &info); /* device 1: opened by this query */
    CHECK(st == CKJIT_SUCCESS, "ckjit_get_device_info_for(%d): %s", i, ckjit_status_string(st));
    CHECK(info.has_device && info.device == i && info.backend == CKJIT_BACKEND_CUDA,
          "device %d: has_device %d, device %d, backend %d", i, info.has_device, info.device, (int)info.backend);
    CHECK(!strcmp(info.name, name), "device %d: name '%s', the driver says '%s'", i, info.name, name);
    CHECK(!strcmp(info.device_arch, arch), "device %d: device_arch '%s', want '%s'", i, info.device_arch, arch);
    CHECK(getenv("CKJIT_ARCH") || !strncmp(info.arch, arch, strlen(arch)), "device %d: arch '%s' for a %s", i,
          info.arch, arch);
    CHECK(info.multiprocessors == sms, "device %d: %d multiprocessors, the driver says %d", i, info.multiprocessors, sms);
    CHECK(current() == prim[0], "ckjit_get_device_info_for(%d) changed the current context", i);
    printf("device %d: %s, %s, %d SMs\n", i, info.name, info.device_arch, info.multiprocessors);
  }
  ckjit_device_info info, def;
  ckjit_status st = ckjit_get_device_info_for(99, &info);
  CHECK(st == CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_get_device_info_for(99): %s", ckjit_status_string(st));
  st = ckjit_get_device_info_for(-2, &info);
  CHECK(st == CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_get_device_info_for(-2): %s", ckjit_status_string(st));
  CHECK(ckjit_get_device_info_for(-1, &info) == CKJIT_SUCCESS && ckjit_get_device_info(&def) == CKJIT_SUCCESS &&
            info.device == def.device && !strcmp(info.name, def.name),
        "ckjit_get_device_info_for(-1) is not the default device (%d, %d)", info.device, def.device);
  cu.ctx_set_current(NULL);
}

/* ---- 5. operands on the wrong device (CKJIT_DEVICE_CHECKS=1) ---------------------------------------- */

static int pointer_checks_mode(const gt_ctx *ctx) {
  return ctx->argc > 1 && !strcmp(ctx->argv[1], "--pointer-checks");
}

/* In the child: x on one device and y on the other, each device's stream
 * in turn: refused, both devices and the operand named, y untouched; the
 * same call with both operands on the stream's device succeeds. */
static void wrong_device(void *const prim[2]) {
  tu_rng rng = {7};
  side s[2];
  int bad = side_open(&s[0], 0, prim[0], &rng);
  bad |= side_open(&s[1], 1, prim[1], &rng);
  CHECK(!bad, "set-up of both devices' streams and buffers");
  for (int k = 0; !bad && k < 2; k++) {
    side *own = &s[k], *other = &s[1 - k];
    CHECK(cu.ctx_set_current(own->ctx) == 0, "cuCtxSetCurrent(primary %d)", k);
    const float sentinel = 12345.0f;
    for (size_t i = 0; i < own->y.elems; i++) memcpy(own->y.host + 4 * i, &sentinel, 4);
    CHECK(!gt_buf_upload(gt_suite_check, &own->y), "upload");
    ckjit_status st = ckjit_unary(CKJIT_UNARY_RELU, CKJIT_F32, SR, SC, other->x.dev, SC, own->y.dev, SC, NULL, own->stream);
    char msg[1024], want_own[32], want_other[32];
    snprintf(msg, sizeof msg, "%s", ckjit_last_error()); /* valid until the next ckjit call */
    snprintf(want_own, sizeof want_own, "CUDA device %d", k);
    snprintf(want_other, sizeof want_other, "CUDA device %d", 1 - k);
    CHECK(st == CKJIT_ERROR_INVALID_ARGUMENT, "x on GPU %d, stream of GPU %d: got %s, want CKJIT_ERROR_INVALID_ARGUMENT",
          1 - k, k, ckjit_status_string(st));
    CHECK(strstr(msg, want_own) && strstr(msg, want_other) && strstr(msg, "x ("),
          "the message must name both devices and the operand x: %s", msg);
    CHECK(current() == own->ctx, "a refused call changed the current context");
    CHECK(ckjit_synchronize(own->stream) == CKJIT_SUCCESS && !gt_buf_download(gt_suite_check, &own->y, NULL),
          "synchronize, download");
    long changed = 0;
    for (size_t i = 0; i < own->y.elems; i++) changed += memcmp(own->y.host + 4 * i, &sentinel, 4) != 0;
    CHECK(changed == 0, "the refused call wrote %ld elements of y", changed);
    printf("refused as it should be: %s\n", msg);
    st = ckjit_unary(CKJIT_UNARY_RELU, CKJIT_F32, SR, SC, own->x.dev, SC, own->y.dev, SC, NULL, own->stream);
    CHECK(st == CKJIT_SUCCESS, "both operands on GPU %d with the checks on: %s", k, ckjit_status_string(st));
    CHECK(ckjit_synchronize(own->stream) == CKJIT_SUCCESS, "synchronize");
  }
  side_close(&s[0]);
  side_close(&s[1]);
  cu.ctx_set_current(NULL);
}

/* Runs this program again with --pointer-checks; its exit status. */
static int run_child(const gt_ctx *ctx) {
  fflush(NULL);
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("CKJIT_DEVICE_CHECKS", "1", 1);
    static char flag[] = "--pointer-checks";
    char *args[] = {ctx->argv[0], flag, NULL};
    execv("/proc/self/exe", args);
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- the suite ------------------------------------------------------------------------------------- */

/* --pointer-checks: CKJIT_DEVICE_CHECKS=1 before ckjit reads it (setup runs
 * before anything initializes ckjit). */
static int setup(gt_ctx *ctx) {
  if (pointer_checks_mode(ctx)) setenv("CKJIT_DEVICE_CHECKS", "1", 1);
  return 0;
}

static int requires(gt_ctx *ctx, char *why, size_t len) {
  const ckjit_device_info *info = &ctx->info;
  int count = 0;
  if (info->backend != CKJIT_BACKEND_CUDA || load_driver() || cu.device_count(&count)) {
    snprintf(why, len, "this test drives the CUDA driver; device is %s (%s)", info->name, info->device_arch);
    return 0;
  }
  if (count < 2) {
    snprintf(why, len, "one GPU (%s): the multi-GPU checks need two", info->name);
    return 0;
  }
  return 1;
}

static gt_result run(gt_ctx *ctx) {
  void *const prim[2] = {primary(0), primary(1)};
  CHECK(prim[0] && prim[1], "primary contexts of GPUs 0 and 1");
  if (!prim[0] || !prim[1]) return (gt_result){ctx->ck->checks, ctx->ck->failures};
  cu.ctx_set_current(NULL);
  if (pointer_checks_mode(ctx)) {
    wrong_device(prim);
  } else {
    two_threads(ctx, prim);
    printf("two threads on two GPUs: %s\n", ctx->ck->failures ? "FAILED" : "passed");
    one_thread(prim, ctx->seed);
    printf("one thread, streams and contexts of either GPU: %s\n", ctx->ck->failures ? "FAILED" : "passed");
    ckjit_shutdown(); /* device 1 is opened again, by ckjit_get_device_info_for */
    device_info(prim);
    printf("operands on the wrong device: a child process with CKJIT_DEVICE_CHECKS=1 (%s --pointer-checks)\n",
           ctx->argv[0]);
    const int rc = run_child(ctx);
    CHECK(rc == 0, "the --pointer-checks child exited with %d", rc);
  }
  return (gt_result){ctx->ck->checks, ctx->ck->failures};
}

static const gt_suite suite = {
    .name = "multi_gpu",
    .cache_tag = "gpu",
    .setup = setup,
    .requires = requires,
    .run = run,
    .check_stats = 1,
};

GT_MAIN(suite)
