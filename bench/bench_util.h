/*
 * bench_util.h: what the CUDA benchmarks (bench_ckjit, bench_rows,
 * bench_gemm, bench_multi_gpu) share: stderr messages, the JSON-lines record
 * writer, median, the host random inputs and bf16/f16 conversions, the CU()
 * check, timing with CUDA events, removing a directory tree.  What the
 * benchmarks that run one process per case need besides is bench_cases.h.
 *
 * Header only (static functions, a copy in each translation unit).
 * Before including it define BENCH_NAME, the program name that prefixes
 * messages ("bench_rows"); the includer must define
 *   static void bench_cuda_fail(CUresult r, const char *what, const char *file,
 *                               int line);
 * which CU() calls on a CUDA error and which must not return (the context
 * may be gone: a kernel fault is sticky).
 *
 * Record format (JSONL, one object per line on stdout):
 *   {"metric":..., "unit":..., "value":..., "kind":..., then details}
 * with null for a missing string and for a non-finite number.
 */
#ifndef CKJIT_BENCH_UTIL_H
#define CKJIT_BENCH_UTIL_H

#include <cuda.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ckjit/ckjit.h"

#ifndef BENCH_NAME
#error "define BENCH_NAME before including bench_util.h"
#endif

#define BENCH_UNUSED __attribute__((unused))

extern char **environ;

/* ---- time, messages -------------------------------------------------------- */
static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "BENCH_NAME: ..." and a newline on stderr. */
static inline void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void msg(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs(BENCH_NAME ": ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  fflush(stderr);
}

static inline void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    msg("out of host memory (%zu bytes)", n);
    exit(1);
  }
  return p;
}

/* ---- CUDA errors --------------------------------------------------------------- */
/* Defined by the includer; must not return. */
static void bench_cuda_fail(CUresult r, const char *what, const char *file, int line)
    __attribute__((noreturn));

#define CU(call)                                                          \
  do {                                                                    \
    CUresult r_ = (call);                                                 \
    if (r_ != CUDA_SUCCESS) bench_cuda_fail(r_, #call, __FILE__, __LINE__); \
  } while (0)

/* The name ("CUDA_ERROR_...") and text of a CUresult; NULL when unknown. */
static inline void cuda_error_strings(CUresult r, const char **name, const char **text) {
  *name = NULL;
  *text = NULL;
  cuGetErrorName(r, name);
  cuGetErrorString(r, text);
}

/* Makes a context of `device` current on this thread: the one current
 * already (ckjit's, after a ckjit call), else the device's primary context.
 * Returns 1 when it had to retain the primary context. */
static inline int bench_use_context(int device) {
  CU(cuInit(0));
  CUcontext ctx = NULL;
  CU(cuCtxGetCurrent(&ctx));
  if (ctx) return 0;
  CUdevice dev;
  CU(cuDeviceGet(&dev, device));
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  return 1;
}

/* ---- JSON lines ------------------------------------------------------------------ */
typedef struct jrec {
  char buf[8192];
  size_t n;
} jrec;

static inline void j_raw(jrec *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void j_raw(jrec *r, const char *fmt, ...) {
  if (r->n >= sizeof r->buf) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(r->buf + r->n, sizeof r->buf - r->n, fmt, ap);
  va_end(ap);
  if (k > 0) r->n += (size_t)k;
  if (r->n >= sizeof r->buf) r->n = sizeof r->buf - 1;
}

static inline void j_escaped(jrec *r, const char *s) {
  j_raw(r, "\"");
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') j_raw(r, "\\%c", c);
    else if (c == '\n') j_raw(r, "\\n");
    else if (c == '\t') j_raw(r, "\\t");
    else if (c < 0x20) j_raw(r, "\\u%04x", c);
    else j_raw(r, "%c", c);
  }
  j_raw(r, "\"");
}

static inline void j_key(jrec *r, const char *key) {
  j_raw(r, ",");
  j_escaped(r, key);
  j_raw(r, ":");
}

static inline void j_str(jrec *r, const char *key, const char *val) {
  j_key(r, key);
  if (val) j_escaped(r, val);
  else j_raw(r, "null");
}

static inline void j_num(jrec *r, const char *key, double v) {
  j_key(r, key);
  if (isfinite(v)) j_raw(r, "%.9g", v);
  else j_raw(r, "null");
}

static inline void j_int(jrec *r, const char *key, long long v) {
  j_key(r, key);
  j_raw(r, "%lld", v);
}

static inline void j_bool(jrec *r, const char *key, int v) {
  j_key(r, key);
  j_raw(r, v ? "true" : "false");
}

/* Starts a record: {"metric":..., "unit":..., "value":..., "kind":... */
static inline void j_begin(jrec *r, const char *metric, const char *unit, double value,
                           const char *kind) {
  r->n = 0;
  j_raw(r, "{\"metric\":");
  j_escaped(r, metric);
  j_str(r, "unit", unit);
  j_num(r, "value", value);
  j_str(r, "kind", kind);
}

/* Ends the record and writes it as one line on stdout. */
static inline void j_end(jrec *r) {
  j_raw(r, "}");
  fwrite(r->buf, 1, r->n, stdout);
  fputc('\n', stdout);
  fflush(stdout);
}

/* The record {"metric":"note SECTION", "unit":null, "value":null, "kind":"note",
 * "impl":"ckjit", "note":TEXT} (no message: the caller prints its own). */
static inline void j_note_record(const char *section, const char *text) {
  jrec r;
  char metric[128];
  snprintf(metric, sizeof metric, "note %s", section);
  j_begin(&r, metric, NULL, NAN, "note");
  j_str(&r, "impl", "ckjit");
  j_str(&r, "note", text);
  j_end(&r);
}

/* ---- statistics ------------------------------------------------------------------- */
static inline int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v: v[0] is then the minimum). */
static inline double median(double *v, int n) {
  if (n <= 0) return NAN;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static inline double min_of(const double *v, int n) {
  double m = INFINITY;
  for (int i = 0; i < n; i++) m = v[i] < m ? v[i] : m;
  return m;
}

/* ---- host inputs ------------------------------------------------------------------- */
static uint64_t g_rng BENCH_UNUSED = 0x9E3779B97F4A7C15ull;

static inline uint64_t rng_next(void) { /* xorshift64* */
  g_rng ^= g_rng >> 12;
  g_rng ^= g_rng << 25;
  g_rng ^= g_rng >> 27;
  return g_rng * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [-4, 4) with |x| >= 1/16: random and never zero (as peers.py's
 * rand_tensor). */
static inline float rng_value(void) {
  float x = (float)((double)(rng_next() >> 11) * (1.0 / 9007199254740992.0) * 8.0 - 4.0);
  if (fabsf(x) < 0.0625f) x = x < 0 ? x - 0.5f : x + 0.5f;
  return x;
}

static inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* NaN */
  u += 0x7fffu + ((u >> 16) & 1u);                                          /* RNE */
  return (uint16_t)(u >> 16);
}

static inline float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* IEEE half, round to nearest even (overflow to infinity, subnormals kept). */
static inline uint16_t f32_to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);      /* NaN */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);     /* >= 65520: inf */
  if (a < 0x38800000u) {                                       /* subnormal or zero */
    float af;
    memcpy(&af, &a, 4);
    /* multiples of 2^-24: nearbyint rounds to nearest even */
    return (uint16_t)(sign | (uint32_t)nearbyintf(af * 16777216.0f));
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1u); /* RNE at bit 13 */
  return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

static inline float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  float f;
  if (e == 0) {
    f = (float)m * (1.0f / 16777216.0f); /* m * 2^-24 */
    return sign ? -f : f;
  }
  uint32_t u = sign | (e == 31 ? 0x7f800000u | (m << 13) : ((e + 112u) << 23) | (m << 13));
  memcpy(&f, &u, 4);
  return f;
}

/* ---- timing with CUDA events -------------------------------------------------------- */
typedef ckjit_status (*bench_launch_fn)(const void *ctx);

/* Times `runs` calls of launch(ctx), each ALONE between two events on
 * `stream` and synchronized after it (so a call never overlaps the next);
 * ms[i] is call i's event time in milliseconds.  With flush != NULL,
 * flush_bytes of it are overwritten on `stream` before each call and
 * before its first event (outside the timed interval): the call starts with
 * an L2 holding none of its data, as triton.testing.do_bench does.  Returns
 * CKJIT_SUCCESS, or the status of the first call that failed (the other
 * entries of ms are then unset).  CUDA errors go to CU(). */
static inline ckjit_status bench_time_runs(CUstream stream, int runs, bench_launch_fn launch,
                                           const void *ctx, void *flush, size_t flush_bytes,
                                           double *ms) {
  CUevent ev0 = NULL, ev1 = NULL;
  ckjit_status st = CKJIT_SUCCESS;
  CU(cuEventCreate(&ev0, CU_EVENT_DEFAULT));
  CU(cuEventCreate(&ev1, CU_EVENT_DEFAULT));
  for (int i = 0; i < runs; i++) {
    if (flush)
      CU(cuMemsetD32Async((CUdeviceptr)(uintptr_t)flush, 0x3f800000u + (unsigned)i,
                          flush_bytes / 4, stream));
    CU(cuEventRecord(ev0, stream));
    st = launch(ctx);
    if (st != CKJIT_SUCCESS) break;
    CU(cuEventRecord(ev1, stream));
    CU(cuEventSynchronize(ev1));
    float f = 0;
    CU(cuEventElapsedTime(&f, ev0, ev1));
    ms[i] = f;
  }
  CU(cuEventDestroy(ev0));
  CU(cuEventDestroy(ev1));
  return st;
}

/* ---- files ------------------------------------------------------------------------- */
static inline int bench_rm_entry(const char *path, const struct stat *sb, int type,
                                 struct FTW *ftw) {
  (void)sb; (void)type; (void)ftw;
  remove(path);
  return 0;
}

/* Removes a directory tree (the run's private CKJIT_CACHE_DIR). */
static inline void rm_tree(const char *dir) {
  if (dir && dir[0]) nftw(dir, bench_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif /* CKJIT_BENCH_UTIL_H */
