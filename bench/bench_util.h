/*
 * bench_util.h: what the CUDA benchmarks (bench_ckjit.c, bench_rows.c,
 * bench_gemm.c) share: stderr messages, the JSON-lines record writer, median,
 * the host random inputs and bf16/f16 conversions, the CU() check, timing
 * with CUDA events, and for the benchmarks that run one process per case
 * (bench_rows, bench_gemm) everything around the cases: the private cache
 * directory, the CUDA device check, the measuring stream, the child process
 * of a case (its command line, running it, forwarding its records) and the
 * case loop.
 *
 * Header only (static functions: each benchmark is one translation unit).
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

/* ---- one child process per case --------------------------------------------------- */
/* Runs this executable (/proc/self/exe) with argv (argv[0] first, NULL at
 * the end), forwarding each of its stdout lines to ours as it comes.  Sets
 * *recorded when a line is a record of kind `kind` (the case's record) and
 * *unsupported when such a line says CKJIT_ERROR_UNSUPPORTED.  Kills it after
 * timeout_s.  Returns the exit status, -1 when it died from a signal (*sig),
 * -2 when it timed out (then killed), -3 when it could not be started. */
static inline int bench_run_child(const char *const *argv, const char *kind, double timeout_s,
                                  int *recorded, int *unsupported, int *sig) {
  char kind_pat[96];
  snprintf(kind_pat, sizeof kind_pat, "\"kind\":\"%s\"", kind);
  int fd[2];
  if (pipe(fd) != 0) return -3;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fd[0]);
  posix_spawn_file_actions_addclose(&fa, fd[1]);
  fflush(stdout);
  fflush(stderr);
  pid_t pid;
  int err = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fd[1]);
  if (err != 0) {
    msg("posix_spawn: %s", strerror(err));
    close(fd[0]);
    return -3;
  }
  static char buf[1 << 16];
  size_t have = 0;
  int timed_out = 0;
  double deadline = now_s() + timeout_s;
  for (;;) {
    int wait_ms = (int)((deadline - now_s()) * 1e3);
    if (wait_ms <= 0) { timed_out = 1; break; }
    struct pollfd pfd = {fd[0], POLLIN, 0};
    int pr = poll(&pfd, 1, wait_ms < 1000 ? wait_ms : 1000);
    if (pr < 0 && errno != EINTR) break;
    if (pr <= 0) continue;
    ssize_t m = read(fd[0], buf + have, sizeof buf - 1 - have);
    if (m < 0 && errno == EINTR) continue;
    if (m <= 0) break; /* EOF: the child is done (or closed stdout) */
    have += (size_t)m;
    buf[have] = '\0';
    char *start = buf, *nl;
    while ((nl = strchr(start, '\n'))) {
      *nl = '\0';
      if (start[0] == '{') {
        if (strstr(start, kind_pat)) *recorded = 1;
        if (strstr(start, "\"status\":\"CKJIT_ERROR_UNSUPPORTED\"")) *unsupported = 1;
      }
      fputs(start, stdout);
      fputc('\n', stdout);
      start = nl + 1;
    }
    have = strlen(start);
    memmove(buf, start, have);
    if (have >= sizeof buf - 1) { /* a line longer than the buffer: pass it on */
      fwrite(buf, 1, have, stdout);
      have = 0;
    }
    fflush(stdout);
  }
  if (have) { /* an unterminated last line */
    buf[have] = '\0';
    puts(buf);
    fflush(stdout);
  }
  close(fd[0]);
  if (timed_out) kill(pid, SIGKILL);
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return -2;
  if (WIFSIGNALED(ws)) {
    *sig = WTERMSIG(ws);
    return -1;
  }
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

/* ---- the case loop (bench_rows, bench_gemm) ---------------------------------------- */
#define RC_MISMATCH 2    /* a case's result check failed */
#define RC_UNSUPPORTED 3 /* a case's op returned CKJIT_ERROR_UNSUPPORTED */

/* The selected cases of a benchmark (indices sel[0 .. n - 1] into its
 * table) and how to run one; the callbacks take the table index. */
typedef struct bench_cases {
  int n;
  const int *sel;
  double budget;        /* seconds for all of them; later cases get a "SKIPPED" record */
  double child_timeout; /* seconds per child process (at most what is left + 20) */
  CUstream stream;      /* the bench stream to run in process; NULL: a child per case */
  /* Measures a case in this process (in process, or a child's one case):
   * 0, RC_MISMATCH, RC_UNSUPPORTED or another failure. */
  int (*run)(int i, CUstream stream);
  void (*emit_error)(int i, const char *status, const char *error); /* the case's record */
  void (*label)(int i, char *buf, size_t len); /* the case in the list of unsupported ones */
  void (*note)(const char *text);              /* a note record */
  /* A child per case runs `name --child-case INDEX` and the non-NULL
   * child_args, and its record of the case has the kind `kind`
   * (bench_run_case_child). */
  const char *name;
  const char *kind;
  const char *child_args[4];
} bench_cases;

/* Runs case `index` in a child process (bench_run_child, with b's command
 * line for it); returns as bench_run_child does. */
static inline int bench_run_case_child(const bench_cases *b, int index, double timeout_s,
                                       int *recorded, int *unsupported, int *sig) {
  char idx[16];
  snprintf(idx, sizeof idx, "%d", index);
  const char *argv[4 + sizeof b->child_args / sizeof b->child_args[0]];
  int n = 0;
  argv[n++] = b->name;
  argv[n++] = "--child-case";
  argv[n++] = idx;
  for (size_t i = 0; i < sizeof b->child_args / sizeof b->child_args[0]; i++)
    if (b->child_args[i]) argv[n++] = b->child_args[i];
  argv[n] = NULL;
  return bench_run_child(argv, b->kind, timeout_s, recorded, unsupported, sig);
}

/* Appends `item` to the ", "-separated `list` unless it is already there. */
static inline void bench_list_add(char *list, size_t cap, const char *item) {
  const size_t n = strlen(item);
  for (const char *p = list; (p = strstr(p, item)); p++)
    if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ','))
      return;
  const size_t len = strlen(list);
  snprintf(list + len, cap - len, "%s%s", len ? ", " : "", item);
}

/* Runs every case (each in a child process unless b->stream), writes the
 * error records of cases that left none, a note on the unsupported and the
 * failed ones, and a summary line.  Returns the exit status: 0 when every
 * case was measured or unsupported, 2 when one only failed its result
 * check, 1 otherwise. */
static inline int bench_run_cases(const bench_cases *b) {
  int status = 0, n_unsupported = 0, n_failed = 0, n_mismatch = 0, n_skipped = 0;
  char unsupported[1024] = "";
  const double start = now_s();
  for (int i = 0; i < b->n; i++) {
    const double left = b->budget - (now_s() - start);
    if (left <= 0) {
      char e[128];
      snprintf(e, sizeof e, "not started: the --budget of %.0f s was used up", b->budget);
      b->emit_error(b->sel[i], "SKIPPED", e);
      n_skipped++;
      status = status ? status : 1;
      continue;
    }
    int rc, recorded = 0, is_unsupported = 0, sig = 0;
    if (b->stream) {
      rc = b->run(b->sel[i], b->stream);
      is_unsupported = rc == RC_UNSUPPORTED;
    } else {
      const double timeout = fmin(b->child_timeout, left + 20);
      rc = bench_run_case_child(b, b->sel[i], timeout, &recorded, &is_unsupported, &sig);
      if (!recorded) {
        char e[200];
        if (rc == -2) snprintf(e, sizeof e, "the case's process timed out after %.0f s", timeout);
        else if (rc == -1)
          snprintf(e, sizeof e, "the case's process died from signal %d (%s)", sig, strsignal(sig));
        else if (rc == -3) snprintf(e, sizeof e, "the case's process could not be started");
        else snprintf(e, sizeof e, "the case's process exited with %d and no record", rc);
        b->emit_error(b->sel[i], rc == -2 ? "CHILD_TIMEOUT" : "CHILD_DIED", e);
      }
    }
    if (is_unsupported) {
      n_unsupported++;
      char label[160];
      b->label(b->sel[i], label, sizeof label);
      bench_list_add(unsupported, sizeof unsupported, label);
    } else if (rc == RC_MISMATCH) {
      n_mismatch++;
      if (!status) status = 2;
    } else if (rc != 0) {
      n_failed++;
      status = 1;
    }
  }
  if (n_unsupported) {
    char note[1200];
    snprintf(note, sizeof note,
             "%d of %d cases not measured: CKJIT_ERROR_UNSUPPORTED (not implemented yet?): %s",
             n_unsupported, b->n, unsupported);
    b->note(note);
  }
  if (n_failed || n_mismatch || n_skipped) {
    char note[200];
    snprintf(note, sizeof note, "%d cases failed, %d failed their result check, %d skipped",
             n_failed, n_mismatch, n_skipped);
    b->note(note);
  }
  msg("%d cases in %.1f s: %d measured, %d unsupported, %d failed, %d check mismatches, "
      "%d skipped; exit %d",
      b->n, now_s() - start, b->n - n_unsupported - n_failed - n_mismatch - n_skipped,
      n_unsupported, n_failed, n_mismatch, n_skipped, status);
  return status;
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

/* ---- device, stream and process set-up (bench_rows, bench_gemm) -------------------- */
/* Makes the run's private cache directory /tmp/ckjit-TAG-XXXXXX (`dir`
 * holds at least 64 bytes) and sets CKJIT_CACHE_DIR to it, which the
 * children inherit.  0, or -1 (reported). */
static inline int bench_private_cache_dir(char *dir, size_t len, const char *tag) {
  snprintf(dir, len, "/tmp/ckjit-%s-XXXXXX", tag);
  if (!mkdtemp(dir)) {
    msg("mkdtemp: %s", strerror(errno));
    return -1;
  }
  setenv("CKJIT_CACHE_DIR", dir, 1); /* children inherit it */
  return 0;
}

/* ckjit's device, into *info.  0 when it is a CUDA device; else -1, with
 * the reason reported and the private `cache_dir` removed (nothing is
 * measured). */
static inline int bench_cuda_device(ckjit_device_info *info, const char *cache_dir) {
  ckjit_status st = ckjit_get_device_info(info);
  if (st != CKJIT_SUCCESS || !info->has_device || info->backend != CKJIT_BACKEND_CUDA) {
    if (st != CKJIT_SUCCESS) msg("ckjit_get_device_info: %s: %s", ckjit_status_string(st),
                                 ckjit_last_error());
    msg("needs a CUDA device (has_device %d, backend %d): nothing measured",
        st == CKJIT_SUCCESS ? info->has_device : 0, st == CKJIT_SUCCESS ? (int)info->backend : -1);
    rm_tree(cache_dir);
    return -1;
  }
  return 0;
}

/* Device, context and stream for measuring (ckjit initializes; the bench
 * uses the context it made current).  NULL stream on failure, reported as
 * case `index`'s record through emit_error (a child measuring that case),
 * or as a message when index < 0 (the parent, in process). */
static inline CUstream bench_open_stream(int index,
                                         void (*emit_error)(int i, const char *status,
                                                            const char *error)) {
  void *probe = NULL;
  ckjit_status st = ckjit_malloc(&probe, 256);
  if (st != CKJIT_SUCCESS) {
    if (index >= 0) emit_error(index, ckjit_status_string(st), ckjit_last_error());
    else msg("ckjit_malloc (device init): %s: %s", ckjit_status_string(st), ckjit_last_error());
    return NULL;
  }
  ckjit_free(probe);
  ckjit_device_info info;
  if (ckjit_get_device_info(&info) != CKJIT_SUCCESS || !info.has_device ||
      info.backend != CKJIT_BACKEND_CUDA) {
    const char *e = "needs a CUDA device";
    if (index >= 0) emit_error(index, "NO_CUDA_DEVICE", e);
    else msg("%s", e);
    return NULL;
  }
  bench_use_context(info.device);
  CUstream s = NULL;
  CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  return s;
}

/* A child (`--child-case INDEX`): measures case `index` in this fresh
 * process with run(index, stream).  The includer makes the case its
 * current one first, so that a CUDA error (CU()) while the stream is set up
 * is reported as the case's record.  Returns the exit status: the case's
 * result, 0 for an unsupported one (the parent reads the record's status). */
static inline int bench_child_case(int index, int (*run)(int i, CUstream stream),
                                   void (*emit_error)(int i, const char *status,
                                                      const char *error)) {
  CUstream s = bench_open_stream(index, emit_error);
  if (!s) return 1;
  int rc = run(index, s);
  cuStreamDestroy(s);
  return rc == RC_UNSUPPORTED ? 0 : rc;
}

/* The parent, once the device record is out: runs b's cases in this
 * process on a stream of its own (`in_process`), or each in a child after
 * ckjit_shutdown() has let go of the GPU (the children make their own
 * contexts); then removes the private `cache_dir`.  Returns the exit status
 * (bench_run_cases). */
static inline int bench_run_all(bench_cases *b, int in_process, const char *cache_dir) {
  b->stream = NULL;
  if (in_process) {
    b->stream = bench_open_stream(-1, NULL);
    if (!b->stream) {
      rm_tree(cache_dir);
      return 1;
    }
  } else {
    ckjit_shutdown(); /* releases the primary context */
  }
  const int status = bench_run_cases(b);
  if (b->stream) cuStreamDestroy(b->stream);
  rm_tree(cache_dir);
  return status;
}

#endif /* CKJIT_BENCH_UTIL_H */
