/* The GPU test harness, shared by every GPU test program (tests/gpu/),
 * through the public API only.
 *
 * The driver (gpu_harness.c): each program defines one gt_suite and its
 * main() is GT_MAIN(suite).  gt_main runs the suite's reference
 * self-checks (GPU or not), makes a private CKJIT_CACHE_DIR unless one is
 * set, checks for a usable GPU (none: "SKIP: <reason>", exit
 * GT_SKIP_CODE = 77, which meson reports as skipped), prints the device and
 * the run's seed, runs the cases, checks the compile / load failure
 * counters, shuts ckjit down and prints one summary line; the exit status
 * is 0 when nothing failed, else 1.
 *
 * The helpers (header-only, static inline):
 *   - element access for CKJIT_F32 / CKJIT_F16 / CKJIT_BF16 from / to double
 *     (f16 and bf16 through half.h: round to nearest even), and for the
 *     index dtypes CKJIT_I32 / CKJIT_I64,
 *   - a deterministic RNG (tu_rng, splitmix64, from test_util.h) and uniform
 *     random fills,
 *   - gt_check: counts checks and failures, prints the first few failures
 *     with the context they belong to; GT_CHECK(cond, ...) checks on the
 *     suite's own gt_check (the main thread's),
 *   - gt_buf: a device buffer with its host mirror (ckjit_malloc,
 *     ckjit_memcpy, 0xFF poison: a NaN in every float dtype), and the
 *     extent / membership of a row-major matrix (offset, leading dim) in it,
 *   - gt_have_device: the "is there a usable GPU" test,
 *   - gt_seed: the run's seed, printed with the device.
 * A gt_check belongs to one thread. */
#ifndef CKJIT_TESTS_GPU_HARNESS_H
#define CKJIT_TESTS_GPU_HARNESS_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckjit/ckjit.h"
#include "half.h"
#include "test_util.h"

#define GT_SKIP_CODE 77

/* ---- element access -------------------------------------------------------- */

/* Bytes per element of the float dtypes (and the index / quantized ones). */
static inline size_t gt_esize(ckjit_dtype dt) {
  switch (dt) {
    case CKJIT_F32:
    case CKJIT_I32: return 4;
    case CKJIT_F16:
    case CKJIT_BF16: return 2;
    case CKJIT_I64: return 8;
    default: return 1;
  }
}

/* Element i of a f32 / f16 / bf16 array. */
static inline double gt_get(ckjit_dtype dt, const uint8_t *buf, size_t i) {
  if (dt == CKJIT_F32) {
    float f;
    memcpy(&f, buf + 4 * i, 4);
    return f;
  }
  uint16_t h;
  memcpy(&h, buf + 2 * i, 2);
  return dt == CKJIT_F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

/* Stores v rounded to the dtype (through f32); returns the value stored. */
static inline double gt_put(ckjit_dtype dt, uint8_t *buf, size_t i, double v) {
  if (dt == CKJIT_F32) {
    float f = (float)v;
    memcpy(buf + 4 * i, &f, 4);
    return f;
  }
  uint16_t h = dt == CKJIT_F16 ? f32_to_f16((float)v) : f32_to_bf16((float)v);
  memcpy(buf + 2 * i, &h, 2);
  return dt == CKJIT_F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

/* Element i of a CKJIT_I32 / CKJIT_I64 array. */
static inline int64_t gt_get_int(ckjit_dtype dt, const uint8_t *buf, size_t i) {
  if (dt == CKJIT_I32) {
    int32_t v;
    memcpy(&v, buf + 4 * i, 4);
    return v;
  }
  int64_t v;
  memcpy(&v, buf + 8 * i, 8);
  return v;
}

static inline void gt_put_nan(ckjit_dtype dt, uint8_t *buf, size_t i) {
  if (dt == CKJIT_F32) {
    uint32_t u = 0x7FC00000u;
    memcpy(buf + 4 * i, &u, 4);
  } else {
    uint16_t h = dt == CKJIT_F16 ? 0x7E00u : 0x7FC0u;
    memcpy(buf + 2 * i, &h, 2);
  }
}

/* v rounded to the dtype (the value gt_put would store). */
static inline double gt_round(ckjit_dtype dt, double v) {
  if (isnan(v)) return v;
  float f = (float)v;
  if (dt == CKJIT_F16) return f16_to_f32(f32_to_f16(f));
  if (dt == CKJIT_BF16) return bf16_to_f32(f32_to_bf16(f));
  return f;
}

/* Whether element i holds the poison pattern (every byte 0xFF). */
static inline int gt_is_poison(ckjit_dtype dt, const uint8_t *buf, size_t i) {
  const size_t s = gt_esize(dt);
  for (size_t k = 0; k < s; k++)
    if (buf[i * s + k] != 0xFF) return 0;
  return 1;
}

/* ---- random numbers ---------------------------------------------------------- */

/* Uniform double in [lo, hi). */
static inline double gt_uniform(tu_rng *r, double lo, double hi) { return lo + (hi - lo) * tu_rng_unit(r); }

/* Elements first .. first + n - 1 of buf: uniform in [lo, hi), rounded to dt. */
static inline void gt_fill_uniform(ckjit_dtype dt, uint8_t *buf, size_t first, size_t n, tu_rng *r,
                                   double lo, double hi) {
  for (size_t i = first; i < first + n; i++) gt_put(dt, buf, i, gt_uniform(r, lo, hi));
}

/* Every element of buf (elems of them) NaN: padding that a kernel must not read. */
static inline void gt_fill_nan(ckjit_dtype dt, uint8_t *buf, size_t elems) {
  for (size_t i = 0; i < elems; i++) gt_put_nan(dt, buf, i);
}

/* ---- checks -------------------------------------------------------------------- */

typedef struct gt_check {
  char ctx[768];   /* what is being checked: printed with every failure */
  long checks;     /* checks made */
  long failures;   /* checks failed */
  int max_report;  /* failures printed per context (the rest are counted) */
  long reported;   /* failures printed in the current context */
} gt_check;

/* Starts a new context (the counters go on). */
static inline __attribute__((format(printf, 2, 3))) void gt_check_begin(gt_check *ck, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ck->ctx, sizeof ck->ctx, fmt, ap);
  va_end(ap);
  ck->reported = 0;
  if (ck->max_report <= 0) ck->max_report = 5;
}

/* Records a failure (and a check); prints it while the context has printed
 * fewer than max_report. */
static inline __attribute__((format(printf, 2, 3))) void gt_fail(gt_check *ck, const char *fmt, ...) {
  ck->checks++;
  ck->failures++;
  if (ck->reported++ >= ck->max_report) return;
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("FAIL %s: %s\n", ck->ctx, msg);
  fflush(stdout);
}

/* A passed check. */
static inline void gt_pass(gt_check *ck) { ck->checks++; }

/* Closes the context; when some of its failures were not printed, says
 * "FAIL <ctx>: ... <count> <what> in all". */
static inline void gt_check_end_as(gt_check *ck, const char *what) {
  if (ck->reported > ck->max_report) {
    printf("FAIL %s: ... %ld %s in all\n", ck->ctx, ck->reported, what);
    fflush(stdout);
  }
  ck->reported = 0;
}

/* Closes the context: says how many failures were not printed. */
static inline void gt_check_end(gt_check *ck) { gt_check_end_as(ck, "failures in this case"); }

/* |got - ref| <= tol (NaN ref: got must be NaN; inf ref: got must equal it). */
static inline int gt_close(double got, double ref, double tol) {
  if (isnan(ref)) return isnan(got);
  if (isinf(ref)) return got == ref;
  return fabs(got - ref) <= tol; /* false for a NaN got */
}

/* ---- device buffers ---------------------------------------------------------------- */

typedef struct gt_buf {
  void *dev;
  uint8_t *host;
  size_t elems;
  ckjit_dtype dt;
} gt_buf;

/* Allocates elems elements on the device and a zeroed host mirror (at least
 * one element of each, so an empty operand still has a valid pointer). */
static inline int gt_buf_alloc(gt_check *ck, gt_buf *b, ckjit_dtype dt, size_t elems) {
  b->dt = dt;
  b->elems = elems;
  b->dev = NULL;
  size_t bytes = (elems ? elems : 1) * gt_esize(dt);
  b->host = calloc(1, bytes);
  if (!b->host) {
    gt_fail(ck, "host malloc of %zu bytes failed", bytes);
    return -1;
  }
  ckjit_status st = ckjit_malloc(&b->dev, bytes);
  if (st != CKJIT_SUCCESS) {
    b->dev = NULL;
    gt_fail(ck, "ckjit_malloc(%zu): %s: %s", bytes, ckjit_status_string(st), ckjit_last_error());
    return -1;
  }
  return 0;
}

static inline void gt_buf_free(gt_buf *b) {
  if (b->dev) ckjit_free(b->dev);
  free(b->host);
  b->dev = NULL;
  b->host = NULL;
}

/* Elements a buffer needs for a rows x cols matrix (row stride ld) starting
 * at element off, plus guard elements after it (rows, cols >= 1). */
static inline size_t gt_extent(int64_t off, int64_t rows, int64_t cols, int64_t ld, size_t guard) {
  return (size_t)(off + (rows - 1) * ld + cols) + guard;
}

/* Whether element i lies inside that matrix (not in its padding, before
 * off or after it). */
static inline int gt_in_matrix(size_t i, int64_t off, int64_t rows, int64_t cols, int64_t ld) {
  if ((int64_t)i < off) return 0;
  int64_t k = (int64_t)i - off;
  return k / ld < rows && k % ld < cols;
}

/* Device address of element off. */
static inline void *gt_buf_ptr(const gt_buf *b, int64_t off) {
  return b->dev ? (uint8_t *)b->dev + (size_t)off * gt_esize(b->dt) : NULL;
}

static inline int gt_buf_upload(gt_check *ck, gt_buf *b) {
  ckjit_status st = ckjit_memcpy(b->dev, b->host, b->elems * gt_esize(b->dt), CKJIT_HOST_TO_DEVICE);
  if (st != CKJIT_SUCCESS) gt_fail(ck, "upload: %s: %s", ckjit_status_string(st), ckjit_last_error());
  return st == CKJIT_SUCCESS ? 0 : -1;
}

/* Copies the device buffer into dst (NULL: the host mirror). */
static inline int gt_buf_download(gt_check *ck, gt_buf *b, uint8_t *dst) {
  ckjit_status st = ckjit_memcpy(dst ? dst : b->host, b->dev, b->elems * gt_esize(b->dt), CKJIT_DEVICE_TO_HOST);
  if (st != CKJIT_SUCCESS) gt_fail(ck, "download: %s: %s", ckjit_status_string(st), ckjit_last_error());
  return st == CKJIT_SUCCESS ? 0 : -1;
}

/* Fills the device buffer and its host mirror with 0xFF bytes. */
static inline int gt_buf_poison(gt_check *ck, gt_buf *b) {
  memset(b->host, 0xFF, b->elems * gt_esize(b->dt));
  ckjit_status st = ckjit_memset(b->dev, 0xFF, b->elems * gt_esize(b->dt));
  if (st != CKJIT_SUCCESS) gt_fail(ck, "memset: %s: %s", ckjit_status_string(st), ckjit_last_error());
  return st == CKJIT_SUCCESS ? 0 : -1;
}

static inline int gt_sync(gt_check *ck) {
  ckjit_status st = ckjit_synchronize(NULL);
  if (st != CKJIT_SUCCESS) gt_fail(ck, "synchronize: %s: %s", ckjit_status_string(st), ckjit_last_error());
  return st == CKJIT_SUCCESS ? 0 : -1;
}

/* ---- device detection ------------------------------------------------------------------ */

/* 1 when a GPU is present (a failure other than CKJIT_ERROR_NO_DEVICE when
 * allocating on it counts as present, so that it fails the tests instead
 * of skipping them); otherwise 0 with the reason in why. */
static inline int gt_have_device(ckjit_device_info *info, char *why, size_t len) {
  memset(info, 0, sizeof *info);
  ckjit_status st = ckjit_get_device_info(info);
  if (st == CKJIT_SUCCESS) {
    void *p = NULL;
    const ckjit_status ms = ckjit_malloc(&p, 16); /* a usable device also allocates */
    if (ms == CKJIT_SUCCESS) ckjit_free(p);
    if (info->has_device && ms != CKJIT_ERROR_NO_DEVICE) return 1;
    st = ms;
  }
  snprintf(why, len, "%s%s%s", st != CKJIT_SUCCESS ? ckjit_status_string(st) : "no device reported",
           ckjit_last_error()[0] ? ": " : "", ckjit_last_error());
  return 0;
}

/* The run's seed (CKJIT_TEST_SEED, else the time), printed with the device. */
static inline uint64_t gt_seed(const ckjit_device_info *info) {
  const char *env = getenv("CKJIT_TEST_SEED");
  const uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
  printf("device: %s (%s), arch %s, %d multiprocessors, compiler %s\n", info->name, info->device_arch,
         info->arch, info->multiprocessors, info->compiler);
  printf("seed: %llu (rerun with CKJIT_TEST_SEED=%llu)\n", (unsigned long long)seed, (unsigned long long)seed);
  return seed;
}

/* ---- the driver (gpu_harness.c) ------------------------------------------------------- */

/* What a suite's hooks get. */
typedef struct gt_ctx {
  int argc;
  char **argv;
  ckjit_device_info info; /* the device (filled before requires and run) */
  uint64_t seed;          /* CKJIT_TEST_SEED, else the time */
  int threads;            /* CKJIT_TEST_THREADS: worker threads, default 8, 1..64 */
  int skip_large;         /* CKJIT_TEST_SKIP_LARGE=1: skip the large cases */
  gt_check *ck;           /* the suite's own checks (main thread); GT_CHECK uses it */
} gt_ctx;

/* How a run went: cases (or checks) run and how many failed. */
typedef struct gt_result {
  long cases, failed;
} gt_result;

typedef struct gt_suite {
  const char *name;      /* in the summary line */
  const char *cache_tag; /* a private cache "$TMPDIR/ckjit-<tag>-XXXXXX" unless CKJIT_CACHE_DIR is set;
                            NULL: none */
  /* Optional: the reference self-checks, before anything else (GPU or not);
   * returns the failures (the test itself is wrong: exit 1). */
  int (*self_check)(void);
  /* Optional: before the device check (e.g. a ckjit_init of its own);
   * nonzero: exit 1. */
  int (*setup)(gt_ctx *ctx);
  /* Optional: further conditions on the device found; 0 skips the suite
   * with the reason written into why. */
  int (*requires)(gt_ctx *ctx, char *why, size_t len);
  /* The cases. */
  gt_result (*run)(gt_ctx *ctx);
  /* Count compile or load failures in ckjit_get_stats() after the run as
   * a failure. */
  int check_stats;
} gt_suite;

/* Runs the suite as described at the top; returns the exit status. */
int gt_main(const gt_suite *suite, int argc, char **argv);

#define GT_MAIN(suite) \
  int main(int argc, char **argv) { return gt_main(&(suite), argc, argv); }

/* The check of the running suite (main thread), for GT_CHECK. */
extern gt_check *gt_suite_check;

/* Records a failed check at file:line (always printed, with ckjit's last error). */
void gt_fail_at(gt_check *ck, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* One check on the suite's gt_check: counted, and printed with file:line
 * and ckjit_last_error() when it fails. */
#define GT_CHECK(cond, ...)                                              \
  do {                                                                   \
    if (cond)                                                            \
      gt_pass(gt_suite_check);                                           \
    else                                                                 \
      gt_fail_at(gt_suite_check, __FILE__, __LINE__, __VA_ARGS__);       \
  } while (0)

#endif
