/*
 * bench_ckjit: measures ckjit on a CUDA GPU and prints one JSON object per
 * line (JSONL) on stdout.  Diagnostics go to stderr.
 *
 * usage: bench_ckjit [--quick] [--only SECTION]...
 *   --quick      fewer repeats and runs (same shapes, so the same metrics)
 *   --only S     run only section S (repeatable): first, cold, bandwidth, launch
 *
 * Sections:
 *   first      first op call in a NEW process with the kernel already in the
 *              disk cache: (ii) after the device/context is initialized
 *              (kind "first_call") and (i) including device/context init
 *              (kind "first_call_init"); each a median over fresh processes.
 *   cold       cold compile of every default spec into an EMPTY cache dir
 *              (kind "cold_compile"); the first includes compiler init.
 *   bandwidth  copy2d, relu, gelu_tanh, add on bf16 8192x8192 and transpose
 *              on bf16 and f32 8192x8192, timed with device events (median),
 *              GB/s counting bytes read + written (kind "bandwidth").
 *   launch     host time per ckjit_copy2d call on a loaded kernel (f32
 *              1x1024) vs a raw cuLaunchKernel of the same CUfunction
 *              (kind "launch", impl "ckjit" / "raw").
 *
 * Every record has "metric", "unit", "value" plus "kind", "impl" and details;
 * bench/make_results.py turns them into bench/results.json.  The whole run
 * uses a private temporary CKJIT_CACHE_DIR, removed at the end.
 *
 * Exit status: 0 when all went well, 1 on an error (the ckjit or CUDA error
 * is printed), 2 when a result check failed.
 */
#define BENCH_NAME "bench_ckjit"
#include "bench_util.h"

/* ------------------------------------------------------------------------ */
/* TODO(lead): keep COPY_SPEC and raw_args_for_copy() in sync with the library.
 * Both were derived from runtime/ops/elementwise/elementwise.c (plan) and
 * kernel_src/abi/elementwise_args.h (CKJIT_ELEMENTWISE_ARGS, the parameter
 * list, whose offsets give ckjit's own kernelParams); the launch section checks
 * them at run time:
 *   - COPY_SPEC: when ckjit_get_function(COPY_SPEC) fails or had to load or
 *     compile anything (ckjit_get_stats), it is NOT the kernel the op
 *     launched; the bench then tries the default spec with dtype=f32 and
 *     op=identity, and failing that the record says "same_kernel_as_op":
 *     false and a note is printed;
 *   - raw_args_for_copy(): one raw launch is checked to copy correctly before
 *     it is timed; a wrong layout gives a note and exit status 2. */

/* The canonical spec of the kernel that
 *   ckjit_copy2d(CKJIT_F32, 1, 1024, src, 1024, dst, 1024, stream)
 * launches with 16-byte aligned pointers (ckjit_malloc): the identity op of
 * the elementwise family, vec = 16 bytes / 4, threads 256, unroll 4. */
#define COPY_SPEC "elementwise:dtype=f32,op=identity,epilogue=none,vec=4,threads=256,unroll=1"
#define COPY_THREADS 256 /* must match COPY_SPEC */
#define COPY_VEC 4
#define COPY_UNROLL 1

/* A raw launch: grid, block, dynamic shared memory and the kernel parameter
 * array for cuLaunchKernel.  params[i] points at slot[i]. */
#define RAW_MAX_PARAMS 16
typedef struct raw_launch {
  unsigned grid[3], block[3], shared_bytes;
  int n_params;
  void *params[RAW_MAX_PARAMS];
  union {
    CUdeviceptr ptr;
    long long ll;
    int32_t i32;
    float f32;
    unsigned char bytes[64]; /* room for a by-value struct parameter */
  } slot[RAW_MAX_PARAMS];
} raw_launch;

/* The launch ckjit_copy2d(CKJIT_F32, rows, cols, src, ld_src, dst, ld_dst, s)
 * makes with the COPY_SPEC kernel, which is
 *   ckjit_elementwise(const T *a, long long lda, const T *b, long long ldb,
 *                     T *y, long long ldy, long long rows, long long cols,
 *                     float scale, float bias)
 * with b = a for unary ops, scale 1 and bias 0 without an epilogue; a
 * contiguous tensor is launched as one long row; grid = (ceil(cols / (threads
 * * vec * unroll)), min(rows, 65535)), block = threads.  Returns 0 when the
 * parameters are filled in, -1 when this bench cannot mirror the launch
 * (then the raw comparison is skipped with a note). */
static int raw_args_for_copy(raw_launch *L, CUdeviceptr src, int64_t ld_src, CUdeviceptr dst,
                             int64_t ld_dst, int64_t rows, int64_t cols) {
  memset(L, 0, sizeof *L);
  if (rows > 1 && ld_src == cols && ld_dst == cols) {
    cols *= rows;
    rows = 1;
    ld_src = ld_dst = cols;
  }
  L->slot[0].ptr = src;                  /* a */
  L->slot[1].ll = (long long)ld_src;     /* lda */
  L->slot[2].ptr = src;                  /* b = a (unary) */
  L->slot[3].ll = (long long)ld_src;     /* ldb */
  L->slot[4].ptr = dst;                  /* y */
  L->slot[5].ll = (long long)ld_dst;     /* ldy */
  L->slot[6].ll = (long long)rows;       /* rows */
  L->slot[7].ll = (long long)cols;       /* cols */
  L->slot[8].f32 = 1.0f;                 /* scale */
  L->slot[9].f32 = 0.0f;                 /* bias */
  L->n_params = 10;
  for (int i = 0; i < L->n_params; i++) L->params[i] = &L->slot[i];
  const int64_t chunk = (int64_t)COPY_THREADS * COPY_VEC * COPY_UNROLL;
  int64_t gx = (cols + chunk - 1) / chunk;
  L->grid[0] = (unsigned)(gx < 0x7fffffff ? gx : 0x7fffffff);
  L->grid[1] = (unsigned)(rows < 65535 ? rows : 65535);
  L->grid[2] = 1;
  L->block[0] = COPY_THREADS;
  L->block[1] = 1;
  L->block[2] = 1;
  L->shared_bytes = 0;
  return 0;
}
/* ------------------------------------------------------------------------ */

static int g_status = 0; /* exit status at the end: 1 error, 2 check failed */
static int g_quick = 0;

static void report_ckjit(ckjit_status st, const char *what, const char *file, int line) {
  msg("%s:%d: %s failed: %s: %s", file, line, what, ckjit_status_string(st), ckjit_last_error());
}

static void report_cuda(CUresult r, const char *what, const char *file, int line) {
  const char *name, *text;
  cuda_error_strings(r, &name, &text);
  msg("%s:%d: %s failed: %s (%d): %s", file, line, what, name ? name : "?", (int)r,
      text ? text : "");
}

/* CU() (bench_util.h): print the CUDA error and exit 1. */
static void bench_cuda_fail(CUresult r, const char *what, const char *file, int line) {
  report_cuda(r, what, file, line);
  exit(1);
}

/* Fatal check: print the error and exit 1. */
#define CK(call)                                                         \
  do {                                                                   \
    ckjit_status st_ = (call);                                           \
    if (st_ != CKJIT_SUCCESS) {                                          \
      report_ckjit(st_, #call, __FILE__, __LINE__);                      \
      exit(1);                                                           \
    }                                                                    \
  } while (0)
/* Soft check for ckjit errors (they leave the CUDA context usable): print,
 * remember the failure and return -1 from the enclosing function. */
#define CK_SOFT(call)                                                    \
  do {                                                                   \
    ckjit_status st_ = (call);                                           \
    if (st_ != CKJIT_SUCCESS) {                                          \
      report_ckjit(st_, #call, __FILE__, __LINE__);                      \
      g_status = 1;                                                      \
      return -1;                                                         \
    }                                                                    \
  } while (0)

static void emit_note(const char *section, const char *text) {
  j_note_record(section, text);
  msg("note (%s): %s", section, text);
}

/* ---- child processes ---------------------------------------------------- */
/* Runs this executable again with the first `n_args` of `args` (after
 * argv[0]; a NULL among them ends the list early, for optional flags),
 * with env_key=env_val set when env_key is non-NULL.  When `capture` is
 * non-NULL the child's stdout goes into it (keep it small: it must fit the
 * pipe buffer); otherwise the child shares our stdout.  Kills the child after
 * timeout_s.  Returns the exit status, or -1 when it could not run or died. */
static int spawn_self(const char *const *args, size_t n_args, const char *env_key,
                      const char *env_val, char *capture, size_t cap_len, double timeout_s) {
  const char *argv[16];
  int argc = 0;
  argv[argc++] = "bench_ckjit";
  /* Bounded by the caller's array size, not only by its NULL: GCC -O3 with
   * ASan unrolls a NULL-only loop past the end of a 3-element array and
   * fails the build with -Warray-bounds. */
  for (size_t i = 0; i < n_args && args[i] && argc < 15; i++) argv[argc++] = args[i];
  argv[argc] = NULL;

  size_t n_env = 0;
  while (environ[n_env]) n_env++;
  char **envp = calloc(n_env + 2, sizeof *envp);
  char *kv = NULL;
  if (!envp) return -1;
  size_t k = 0, key_len = env_key ? strlen(env_key) : 0;
  for (size_t i = 0; i < n_env; i++) {
    if (env_key && strncmp(environ[i], env_key, key_len) == 0 && environ[i][key_len] == '=')
      continue;
    envp[k++] = environ[i];
  }
  if (env_key) {
    size_t len = key_len + strlen(env_val) + 2;
    kv = malloc(len);
    if (!kv) { free(envp); return -1; }
    snprintf(kv, len, "%s=%s", env_key, env_val);
    envp[k++] = kv;
  }
  envp[k] = NULL;

  int pipefd[2] = {-1, -1};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (capture) {
    if (pipe(pipefd) != 0) {
      posix_spawn_file_actions_destroy(&fa);
      free(kv); free(envp);
      return -1;
    }
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, pipefd[0]);
    posix_spawn_file_actions_addclose(&fa, pipefd[1]);
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid;
  int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, (char *const *)argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  free(kv);
  free(envp);
  if (capture) close(pipefd[1]);
  if (rc != 0) {
    msg("posix_spawn failed: %s", strerror(rc));
    if (capture) close(pipefd[0]);
    return -1;
  }

  int ws = 0;
  double deadline = now_s() + timeout_s;
  for (;;) {
    pid_t w = waitpid(pid, &ws, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) { ws = -1; break; }
    if (now_s() > deadline) {
      msg("child %s timed out after %.0f s; killing it", args[0], timeout_s);
      kill(pid, SIGKILL);
      waitpid(pid, &ws, 0);
      ws = -1;
      break;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }

  if (capture) {
    size_t got = 0;
    ssize_t m;
    while (got + 1 < cap_len && (m = read(pipefd[0], capture + got, cap_len - 1 - got)) > 0)
      got += (size_t)m;
    capture[got] = '\0';
    close(pipefd[0]);
  }
  if (ws == -1 || !WIFEXITED(ws)) return -1;
  return WEXITSTATUS(ws);
}

/* Child: the first op call in this fresh process.  mode "ctx": the device is
 * initialized first (ckjit_malloc) and only the op call is timed; mode
 * "full": the timing starts before any ckjit or CUDA call.  Prints one line
 * "FIRSTCALL call_ms sync_ms init_ms disk_hits compiles loads". */
static int child_first_call(const char *mode) {
  int full = strcmp(mode, "full") == 0;
  void *src = NULL, *dst = NULL;
  double t_start = now_s();
  CK(ckjit_malloc(&src, 1024 * sizeof(float)));
  CK(ckjit_malloc(&dst, 1024 * sizeof(float)));
  CK(ckjit_memset(src, 0, 1024 * sizeof(float)));
  CK(ckjit_synchronize(NULL));
  double t_init = now_s();
  ckjit_stats before, after;
  ckjit_get_stats(&before);
  double t0 = now_s();
  CK(ckjit_copy2d(CKJIT_F32, 1, 1024, src, 1024, dst, 1024, NULL));
  double t1 = now_s();
  CK(ckjit_synchronize(NULL));
  double t2 = now_s();
  ckjit_get_stats(&after);
  double base = full ? t_start : t0;
  printf("FIRSTCALL %.6f %.6f %.6f %llu %llu %llu\n", (t1 - base) * 1e3, (t2 - base) * 1e3,
         (t_init - t_start) * 1e3,
         (unsigned long long)(after.disk_hits - before.disk_hits),
         (unsigned long long)(after.compiles - before.compiles),
         (unsigned long long)(after.loads - before.loads));
  fflush(stdout);
  ckjit_free(src);
  ckjit_free(dst);
  return 0;
}

/* Child: compiles every default spec into the (empty) CKJIT_CACHE_DIR given
 * by the parent and prints one record per spec. */
static int child_cold_compile(void) {
  ckjit_device_info info;
  CK(ckjit_get_device_info(&info));
  size_t count = ckjit_default_spec_count();
  double budget_s = g_quick ? 20.0 : 140.0;
  size_t max_specs = g_quick ? 8 : count;
  double start = now_s(), total_ms = 0.0;
  double *each = calloc(count ? count : 1, sizeof *each);
  size_t done = 0, failed = 0;
  int complete = 1; /* every default spec with a kernel for the arch was tried */
  if (!each) return 1;
  msg("cold compile: %zu default specs for %s into %s", count, info.arch, info.cache_dir);
  for (size_t i = 0; i < count && i < max_specs; i++) {
    if (now_s() - start > budget_s) {
      char note[160];
      snprintf(note, sizeof note, "cold compile stopped after %zu of %zu specs (%.0f s budget)",
               done, count, budget_s);
      emit_note("cold compile", note);
      complete = 0;
      break;
    }
    char spec[512];
    CK(ckjit_default_spec(i, spec, sizeof spec));
    if (ckjit_spec_has_kernel(spec, info.arch) == CKJIT_ERROR_UNSUPPORTED) continue; /* other archs' GEMMs */
    ckjit_compile_result res;
    memset(&res, 0, sizeof res);
    double t0 = now_s();
    ckjit_status st = ckjit_compile_spec(spec, NULL, &res);
    double ms = (now_s() - t0) * 1e3;
    if (st != CKJIT_SUCCESS) {
      report_ckjit(st, spec, __FILE__, __LINE__);
      failed++;
      g_status = 1;
      continue;
    }
    char metric[640];
    snprintf(metric, sizeof metric, "cold compile %s %s", spec, info.arch);
    jrec r;
    j_begin(&r, metric, "ms", ms, "cold_compile");
    j_str(&r, "impl", "ckjit");
    j_str(&r, "spec", spec);
    j_str(&r, "arch", info.arch);
    j_int(&r, "index", (long long)i);
    j_num(&r, "lib_ms", res.ms);
    j_bool(&r, "cached", res.cached);
    j_int(&r, "code_size", (long long)res.code_size);
    j_str(&r, "kernel", res.kernel);
    if (done == 0) j_str(&r, "note", "first compile: includes runtime-compiler load and init");
    j_end(&r);
    if (res.cached) msg("warning: %s was already cached in an empty cache dir", spec);
    each[done++] = ms;
    total_ms += ms;
  }
  if (done > 0) {
    double first = each[0];
    double med_rest = done > 1 ? median(each + 1, (int)(done - 1)) : NAN;
    char metric[128];
    snprintf(metric, sizeof metric, "cold compile all default specs %s", info.arch);
    jrec r;
    j_begin(&r, metric, "ms", total_ms, "cold_compile_total");
    j_str(&r, "impl", "ckjit");
    j_str(&r, "arch", info.arch);
    j_int(&r, "specs", (long long)done);
    j_int(&r, "default_spec_count", (long long)count);
    j_bool(&r, "complete", complete && max_specs >= count);
    j_int(&r, "failed", (long long)failed);
    j_num(&r, "first_ms", first);
    j_num(&r, "median_ms_excluding_first", med_rest);
    j_end(&r);
  }
  free(each);
  return g_status;
}

/* ---- the benchmark ------------------------------------------------------ */
typedef struct bench {
  CUstream stream;
  ckjit_device_info info;
  char cache_dir[256];
} bench;

static void parse_first_call(const char *out, double *call_ms, double *sync_ms, double *init_ms,
                             unsigned long long *hits, unsigned long long *compiles, int *ok) {
  const char *p = strstr(out, "FIRSTCALL ");
  unsigned long long loads = 0;
  *ok = p && sscanf(p, "FIRSTCALL %lf %lf %lf %llu %llu %llu", call_ms, sync_ms, init_ms, hits,
                    compiles, &loads) == 6;
}

static int section_first(bench *b) {
  /* Put the kernel into the (private, empty) disk cache: the first call in
   * this process compiles it. */
  void *src = NULL, *dst = NULL;
  CK(ckjit_malloc(&src, 1024 * sizeof(float)));
  CK(ckjit_malloc(&dst, 1024 * sizeof(float)));
  CK(ckjit_memset(src, 0, 1024 * sizeof(float)));
  CK(ckjit_synchronize(NULL));
  ckjit_stats before, after;
  ckjit_get_stats(&before);
  double t0 = now_s();
  ckjit_status st = ckjit_copy2d(CKJIT_F32, 1, 1024, src, 1024, dst, 1024, (void *)b->stream);
  double t1 = now_s();
  if (st != CKJIT_SUCCESS) {
    report_ckjit(st, "ckjit_copy2d (first call)", __FILE__, __LINE__);
    g_status = 1;
    ckjit_free(src);
    ckjit_free(dst);
    return -1;
  }
  CU(cuStreamSynchronize(b->stream));
  double t2 = now_s();
  ckjit_get_stats(&after);
  jrec r;
  j_begin(&r, "first call with cold compile copy2d f32 1x1024", "ms", (t2 - t0) * 1e3,
          "first_call_compile");
  j_str(&r, "impl", "ckjit");
  j_num(&r, "call_return_ms", (t1 - t0) * 1e3);
  j_int(&r, "compiles", (long long)(after.compiles - before.compiles));
  j_int(&r, "disk_writes", (long long)(after.disk_writes - before.disk_writes));
  j_num(&r, "compile_ms", after.compile_ms - before.compile_ms);
  j_num(&r, "load_ms", after.load_ms - before.load_ms);
  j_end(&r);
  ckjit_free(src);
  ckjit_free(dst);
  if (after.disk_writes == before.disk_writes)
    emit_note("first call", "the first call wrote nothing to the disk cache; "
                            "the fresh processes below will not find the kernel there");

  /* Fresh processes. */
  static const char *const modes[2] = {"ctx", "full"};
  for (int m = 0; m < 2; m++) {
    int runs = m == 0 ? (g_quick ? 2 : 7) : (g_quick ? 1 : 3);
    double call[16], sync[16], init[16];
    unsigned long long hits_min = ~0ull, compiles_max = 0;
    int n = 0;
    for (int i = 0; i < runs; i++) {
      const char *args[] = {"--child-first-call", modes[m], NULL};
      char out[4096];
      int rc = spawn_self(args, sizeof args / sizeof args[0], NULL, NULL, out, sizeof out, 60.0);
      double c = 0, s = 0, in = 0;
      unsigned long long h = 0, co = 0;
      int ok = 0;
      if (rc == 0) parse_first_call(out, &c, &s, &in, &h, &co, &ok);
      if (!ok) {
        msg("first-call child (%s) failed: exit %d, output: %s", modes[m], rc, out);
        g_status = 1;
        continue;
      }
      call[n] = c; sync[n] = s; init[n] = in; n++;
      if (h < hits_min) hits_min = h;
      if (co > compiles_max) compiles_max = co;
    }
    if (n == 0) continue;
    double sync_min = min_of(sync, n);
    double sync_med = median(sync, n), call_med = median(call, n), init_med = median(init, n);
    if (m == 0) {
      j_begin(&r, "first call from disk cache copy2d f32 1x1024", "ms", sync_med, "first_call");
      j_str(&r, "impl", "ckjit");
      j_str(&r, "measures", "a fresh process, device and context already initialized "
                            "(ckjit_malloc): the first ckjit_copy2d call until it has returned "
                            "and the stream is synchronized");
    } else {
      j_begin(&r, "first call incl. device init copy2d f32 1x1024", "ms", sync_med,
              "first_call_init");
      j_str(&r, "impl", "ckjit");
      j_str(&r, "measures", "a fresh process, from before any ckjit or CUDA call: "
                            "ckjit_malloc (lazy init, driver and context creation), the first "
                            "ckjit_copy2d call and a synchronize");
      j_num(&r, "init_ms", init_med);
    }
    j_num(&r, "call_return_ms", call_med);
    j_num(&r, "min_ms", sync_min);
    j_int(&r, "runs", n);
    j_bool(&r, "disk_hit", hits_min >= 1 && compiles_max == 0);
    j_end(&r);
    if (!(hits_min >= 1 && compiles_max == 0))
      emit_note("first call", "a fresh process did not get the kernel from the disk cache "
                              "(disk_hits 0 or it compiled)");
  }
  return 0;
}

static int section_cold(bench *b) {
  (void)b;
  char dir[] = "/tmp/ckjit-bench-cold-XXXXXX";
  if (!mkdtemp(dir)) {
    msg("mkdtemp: %s", strerror(errno));
    g_status = 1;
    return -1;
  }
  const char *args[] = {"--child-cold-compile", g_quick ? "--quick" : NULL, NULL};
  int rc = spawn_self(args, sizeof args / sizeof args[0], "CKJIT_CACHE_DIR", dir, NULL, 0,
                      g_quick ? 60.0 : 150.0);
  rm_tree(dir);
  if (rc != 0) {
    msg("cold compile child failed (exit %d)", rc);
    g_status = rc == 2 ? 2 : 1;
    return -1;
  }
  return 0;
}

/* ---- bandwidth ---------------------------------------------------------- */
enum { OP_COPY, OP_RELU, OP_GELU_TANH, OP_ADD, OP_TRANSPOSE };

typedef struct bw_ctx {
  int op;
  ckjit_dtype dtype;
  int64_t rows, cols;
  void *a, *b, *y;
  CUstream stream;
} bw_ctx;

static ckjit_status bw_launch(const bw_ctx *c) {
  void *s = (void *)c->stream;
  switch (c->op) {
  case OP_COPY:
    return ckjit_copy2d(c->dtype, c->rows, c->cols, c->a, c->cols, c->y, c->cols, s);
  case OP_RELU:
    return ckjit_unary(CKJIT_UNARY_RELU, c->dtype, c->rows, c->cols, c->a, c->cols, c->y,
                       c->cols, NULL, s);
  case OP_GELU_TANH:
    return ckjit_unary(CKJIT_UNARY_GELU_TANH, c->dtype, c->rows, c->cols, c->a, c->cols, c->y,
                       c->cols, NULL, s);
  case OP_ADD:
    return ckjit_binary(CKJIT_BINARY_ADD, c->dtype, c->rows, c->cols, c->a, c->cols, c->b,
                        c->cols, c->y, c->cols, NULL, s);
  case OP_TRANSPOSE:
    return ckjit_transpose(c->dtype, 1, c->rows, c->cols, c->a, c->cols, c->rows * c->cols,
                           c->y, c->rows, c->rows * c->cols, s);
  }
  return CKJIT_ERROR_INVALID_ARGUMENT;
}

static ckjit_status bw_launch_cb(const void *c) { return bw_launch((const bw_ctx *)c); }

static const char *const op_names[] = {"copy", "relu", "gelu_tanh", "add", "transpose"};
static const char *const op_apis[] = {"ckjit_copy2d", "ckjit_unary(RELU)",
                                      "ckjit_unary(GELU_TANH)", "ckjit_binary(ADD)",
                                      "ckjit_transpose"};

static float gelu_tanh_ref(float x) {
  double xd = x;
  return (float)(0.5 * xd * (1.0 + tanh(0.7978845608028654 * (xd + 0.044715 * xd * xd * xd))));
}

/* Host input element as float. */
static float host_in(const bw_ctx *c, const void *h, size_t i) {
  if (c->dtype == CKJIT_BF16) return bf16_to_f32(((const uint16_t *)h)[i]);
  return ((const float *)h)[i];
}

/* Spot-checks a few output rows against the host inputs.  1: ok, 0: mismatch, -1: error. */
static int bw_check(const bw_ctx *c, const void *ha, const void *hb) {
  size_t es = ckjit_dtype_size(c->dtype);
  int64_t out_rows = c->op == OP_TRANSPOSE ? c->cols : c->rows;
  int64_t out_cols = c->op == OP_TRANSPOSE ? c->rows : c->cols;
  int64_t check_rows[3] = {0, out_rows / 2 + 3, out_rows - 1};
  unsigned char *row = malloc((size_t)out_cols * es);
  if (!row) return -1;
  int ok = 1;
  long bad = 0;
  for (int k = 0; k < 3 && ok; k++) {
    int64_t r = check_rows[k];
    ckjit_status st = ckjit_memcpy(row, (const char *)c->y + (size_t)(r * out_cols) * es,
                                   (size_t)out_cols * es, CKJIT_DEVICE_TO_HOST);
    if (st != CKJIT_SUCCESS) {
      report_ckjit(st, "ckjit_memcpy (check)", __FILE__, __LINE__);
      free(row);
      return -1;
    }
    for (int64_t j = 0; j < out_cols; j++) {
      float got = c->dtype == CKJIT_BF16 ? bf16_to_f32(((uint16_t *)row)[j]) : ((float *)row)[j];
      float want, tol = 0.0f;
      size_t i = (size_t)(r * c->cols + j);
      switch (c->op) {
      case OP_COPY: want = host_in(c, ha, i); break;
      case OP_RELU: want = host_in(c, ha, i) > 0 ? host_in(c, ha, i) : 0.0f; break;
      case OP_GELU_TANH:
        want = gelu_tanh_ref(host_in(c, ha, i));
        tol = 1e-2f * fmaxf(1.0f, fabsf(want));
        break;
      case OP_ADD:
        want = host_in(c, ha, i) + host_in(c, hb, i);
        tol = 1e-2f * fmaxf(1.0f, fabsf(want));
        break;
      default: /* transpose: out[r][j] = in[j][r] */
        want = host_in(c, ha, (size_t)(j * c->cols + r));
        break;
      }
      if (!(fabsf(got - want) <= tol)) {
        if (bad++ < 3)
          msg("check %s %s: out[%lld][%lld] = %g, want %g", op_names[c->op],
              ckjit_dtype_name(c->dtype), (long long)r, (long long)j, got, want);
        ok = 0;
      }
    }
  }
  free(row);
  return ok;
}

static int bw_measure(bench *bn, bw_ctx *c, const void *ha, const void *hb, int warmup,
                      int runs) {
  char shape[64], metric[160];
  snprintf(shape, sizeof shape, "%lldx%lld", (long long)c->rows, (long long)c->cols);
  snprintf(metric, sizeof metric, "bandwidth %s %s %s", op_names[c->op],
           ckjit_dtype_name(c->dtype), shape);
  msg("%s ...", metric);
  CU(cuMemsetD8Async((CUdeviceptr)(uintptr_t)c->y, 0,
                     (size_t)(c->rows * c->cols) * ckjit_dtype_size(c->dtype), bn->stream));
  for (int i = 0; i < warmup; i++) CK_SOFT(bw_launch(c));
  CU(cuStreamSynchronize(bn->stream));
  int check = bw_check(c, ha, hb);
  if (check < 0) { g_status = 1; return -1; }
  if (check == 0) g_status = 2;

  double *ms = calloc((size_t)runs, sizeof *ms);
  if (!ms) exit(1);
  ckjit_status st = bench_time_runs(bn->stream, runs, bw_launch_cb, c, NULL, 0, ms);
  if (st != CKJIT_SUCCESS) {
    report_ckjit(st, metric, __FILE__, __LINE__);
    g_status = 1;
    free(ms);
    return -1;
  }
  double min_ms = min_of(ms, runs);
  double med_ms = median(ms, runs);
  size_t n = (size_t)(c->rows * c->cols), es = ckjit_dtype_size(c->dtype);
  int tensors = c->op == OP_ADD ? 3 : 2;
  double bytes = (double)n * (double)es * tensors;
  jrec r;
  j_begin(&r, metric, "GB/s", bytes / (med_ms * 1e-3) / 1e9, "bandwidth");
  j_str(&r, "impl", "ckjit");
  j_str(&r, "op", op_names[c->op]);
  j_str(&r, "api", op_apis[c->op]);
  j_str(&r, "dtype", ckjit_dtype_name(c->dtype));
  j_str(&r, "shape", shape);
  j_num(&r, "median_ms", med_ms);
  j_num(&r, "min_ms", min_ms);
  j_num(&r, "bytes", bytes);
  j_int(&r, "runs", runs);
  j_str(&r, "check", check ? "ok" : "mismatch");
  j_end(&r);
  free(ms);
  return 0;
}

static int section_bandwidth(bench *bn) {
  const int64_t R = 8192, C = 8192;
  const size_t n = (size_t)(R * C);
  int warmup = g_quick ? 2 : 5, runs = g_quick ? 10 : 50;
  uint16_t *hx = malloc(n * 2), *hb = malloc(n * 2);
  float *hf = malloc(n * 4);
  if (!hx || !hb || !hf) {
    msg("out of host memory");
    exit(1);
  }
  for (size_t i = 0; i < n; i++) hx[i] = f32_to_bf16(rng_value());
  for (size_t i = 0; i < n; i++) hb[i] = f32_to_bf16(rng_value());
  for (size_t i = 0; i < n; i++) hf[i] = rng_value();

  void *dx, *db, *dy, *dfx, *dfy;
  CK(ckjit_malloc(&dx, n * 2));
  CK(ckjit_malloc(&db, n * 2));
  CK(ckjit_malloc(&dy, n * 2));
  CK(ckjit_malloc(&dfx, n * 4));
  CK(ckjit_malloc(&dfy, n * 4));
  CK(ckjit_memcpy(dx, hx, n * 2, CKJIT_HOST_TO_DEVICE));
  CK(ckjit_memcpy(db, hb, n * 2, CKJIT_HOST_TO_DEVICE));
  CK(ckjit_memcpy(dfx, hf, n * 4, CKJIT_HOST_TO_DEVICE));
  /* A copy from pageable memory may return before its DMA is done, and the
   * bench stream does not wait for the default stream. */
  CK(ckjit_synchronize(NULL));

  bw_ctx cases[] = {
      {OP_COPY, CKJIT_BF16, R, C, dx, NULL, dy, bn->stream},
      {OP_RELU, CKJIT_BF16, R, C, dx, NULL, dy, bn->stream},
      {OP_GELU_TANH, CKJIT_BF16, R, C, dx, NULL, dy, bn->stream},
      {OP_ADD, CKJIT_BF16, R, C, dx, db, dy, bn->stream},
      {OP_TRANSPOSE, CKJIT_BF16, R, C, dx, NULL, dy, bn->stream},
      {OP_TRANSPOSE, CKJIT_F32, R, C, dfx, NULL, dfy, bn->stream},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const void *ha = cases[i].dtype == CKJIT_F32 ? (const void *)hf : (const void *)hx;
    bw_measure(bn, &cases[i], ha, hb, warmup, runs);
  }
  CK(ckjit_free(dx));
  CK(ckjit_free(db));
  CK(ckjit_free(dy));
  CK(ckjit_free(dfx));
  CK(ckjit_free(dfy));
  free(hx);
  free(hb);
  free(hf);
  return 0;
}

/* ---- launch host time --------------------------------------------------- */
typedef struct launch_case {
  int raw;
  raw_launch L;
  CUfunction fn;
  void *src, *dst;
  const ckjit_gemm_desc *gemm; /* set: time ckjit_gemm(gemm) instead */
} launch_case;

/* Host seconds per call: `calls` calls in chunks of `chunk`, the stream
 * synchronized between chunks (outside the timed loops) so the launch queue
 * never fills and the GPU never throttles the host.  <0 on a failure. */
static double launch_loop(bench *bn, launch_case *lc, int calls, int chunk) {
  double total = 0.0;
  for (int done = 0; done < calls; done += chunk) {
    int m = calls - done < chunk ? calls - done : chunk;
    double t0 = now_s();
    if (lc->raw) {
      for (int i = 0; i < m; i++) {
        CUresult r = cuLaunchKernel(lc->fn, lc->L.grid[0], lc->L.grid[1], lc->L.grid[2],
                                    lc->L.block[0], lc->L.block[1], lc->L.block[2],
                                    lc->L.shared_bytes, bn->stream, lc->L.params, NULL);
        if (r != CUDA_SUCCESS) {
          report_cuda(r, "cuLaunchKernel", __FILE__, __LINE__);
          exit(1);
        }
      }
    } else if (lc->gemm) {
      for (int i = 0; i < m; i++) {
        ckjit_status st = ckjit_gemm(lc->gemm, (void *)bn->stream);
        if (st != CKJIT_SUCCESS) {
          report_ckjit(st, "ckjit_gemm", __FILE__, __LINE__);
          g_status = 1;
          return -1.0;
        }
      }
    } else {
      for (int i = 0; i < m; i++) {
        ckjit_status st = ckjit_copy2d(CKJIT_F32, 1, 1024, lc->src, 1024, lc->dst, 1024,
                                       (void *)bn->stream);
        if (st != CKJIT_SUCCESS) {
          report_ckjit(st, "ckjit_copy2d", __FILE__, __LINE__);
          g_status = 1;
          return -1.0;
        }
      }
    }
    total += now_s() - t0;
    CU(cuStreamSynchronize(bn->stream));
  }
  return total / calls;
}

static void emit_launch(const char *impl, const char *api, double *per_call_us, int repeats,
                        int calls, int chunk, const char *extra_key, int extra_val,
                        const char *spec) {
  char metric[128];
  snprintf(metric, sizeof metric, "launch host time copy2d f32 1x1024 (%s)", impl);
  double mn = min_of(per_call_us, repeats);
  double med = median(per_call_us, repeats);
  jrec r;
  j_begin(&r, metric, "us", med, "launch");
  j_str(&r, "impl", impl);
  j_str(&r, "api", api);
  j_str(&r, "op", "copy2d");
  j_str(&r, "dtype", "f32");
  j_str(&r, "shape", "1x1024");
  j_num(&r, "min_us", mn);
  j_int(&r, "calls", calls);
  j_int(&r, "chunk", chunk);
  j_int(&r, "repeats", repeats);
  if (extra_key) j_bool(&r, extra_key, extra_val);
  if (spec) j_str(&r, "spec", spec);
  j_end(&r);
}

static int check_copy_result(void *dst, const float *want) {
  float got[1024];
  CK(ckjit_memcpy(got, dst, sizeof got, CKJIT_DEVICE_TO_HOST));
  return memcmp(got, want, sizeof got) == 0;
}

/* Host time of one ckjit_gemm call (planning, tensor maps, kernel lookup,
 * launch) on shapes small enough that the GPU keeps up with the host:
 * m = 128 takes the wgmma pipeline through TMA on a 9.0 device, m = 16
 * mma.sync; split_k 1 so that each call is one launch.  A and B are all
 * ones, so every entry of D must be exactly k. */
static int gemm_launch_case(bench *bn, int64_t m, int64_t n, int64_t k, const char *path) {
  const int calls = g_quick ? 2000 : 20000, chunk = 1000, repeats = g_quick ? 5 : 10;
  const size_t na = (size_t)(m * k), nb = (size_t)(k * n), nd = (size_t)(m * n);
  uint16_t *h = malloc(sizeof(uint16_t) * (na > nb ? (na > nd ? na : nd) : (nb > nd ? nb : nd)));
  void *a = NULL, *b = NULL, *d = NULL;
  if (!h) return -1;
  for (size_t i = 0; i < na || i < nb; i++) h[i] = 0x3f80; /* bf16 1.0 */
  CK(ckjit_malloc(&a, na * 2));
  CK(ckjit_malloc(&b, nb * 2));
  CK(ckjit_malloc(&d, nd * 2));
  CK(ckjit_memcpy(a, h, na * 2, CKJIT_HOST_TO_DEVICE));
  CK(ckjit_memcpy(b, h, nb * 2, CKJIT_HOST_TO_DEVICE));
  CU(cuMemsetD8Async((CUdeviceptr)(uintptr_t)d, 0xff, nd * 2, bn->stream));
  ckjit_gemm_desc g;
  ckjit_gemm_desc_init(&g);
  g.m = m, g.n = n, g.k = k, g.ab_dtype = g.out_dtype = CKJIT_BF16;
  g.a = a, g.lda = k, g.a_order = CKJIT_ROW_MAJOR;
  g.b = b, g.ldb = n, g.b_order = CKJIT_ROW_MAJOR;
  g.d = d, g.ldd = n, g.split_k = 1;
  launch_case lc;
  memset(&lc, 0, sizeof lc);
  lc.gemm = &g;
  int rc = 0;
  if (launch_loop(bn, &lc, chunk, chunk) < 0) rc = -1; /* warm-up: compiles or loads */
  CK(ckjit_memcpy(h, d, nd * 2, CKJIT_DEVICE_TO_HOST));
  uint16_t want = 0;
  { float f = (float)k; uint32_t u; memcpy(&u, &f, 4); want = (uint16_t)(u >> 16); }
  for (size_t i = 0; rc == 0 && i < nd; i++)
    if (h[i] != want) {
      msg("check: ckjit_gemm bf16 %lldx%lldx%lld of ones: D[%zu] = 0x%04x, want 0x%04x",
          (long long)m, (long long)n, (long long)k, i, h[i], want);
      g_status = 2;
      rc = -1;
    }
  double per_call[32];
  for (int i = 0; rc == 0 && i < repeats; i++) {
    double s = launch_loop(bn, &lc, calls, chunk);
    if (s < 0) rc = -1;
    per_call[i] = s * 1e6;
  }
  if (rc == 0) {
    char metric[128], shape[64];
    snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
    snprintf(metric, sizeof metric, "launch host time gemm bf16 %s (ckjit)", shape);
    jrec r;
    j_begin(&r, metric, "us", median(per_call, repeats), "launch_gemm");
    j_str(&r, "impl", "ckjit");
    j_str(&r, "api", "ckjit_gemm (split_k 1)");
    j_str(&r, "op", "gemm");
    j_str(&r, "dtype", "bf16");
    j_str(&r, "shape", shape);
    j_str(&r, "pipeline", path);
    j_num(&r, "min_us", min_of(per_call, repeats));
    j_int(&r, "calls", calls);
    j_int(&r, "chunk", chunk);
    j_int(&r, "repeats", repeats);
    j_end(&r);
  }
  CK(ckjit_free(a));
  CK(ckjit_free(b));
  CK(ckjit_free(d));
  free(h);
  return rc;
}

static int section_launch(bench *bn) {
  const int calls = g_quick ? 2000 : 20000, chunk = 1000, repeats = g_quick ? 5 : 10;
  launch_case lc;
  memset(&lc, 0, sizeof lc);
  float h[1024];
  for (int i = 0; i < 1024; i++) h[i] = rng_value();
  CK(ckjit_malloc(&lc.src, sizeof h));
  CK(ckjit_malloc(&lc.dst, sizeof h));
  CK(ckjit_memcpy(lc.src, h, sizeof h, CKJIT_HOST_TO_DEVICE));
  CK(ckjit_synchronize(NULL));

  /* ckjit: warm up (loads the kernel), check, then time. */
  double per_call[32];
  CK_SOFT(ckjit_copy2d(CKJIT_F32, 1, 1024, lc.src, 1024, lc.dst, 1024, (void *)bn->stream));
  CU(cuStreamSynchronize(bn->stream));
  if (!check_copy_result(lc.dst, h)) {
    msg("check: ckjit_copy2d f32 1x1024 copied wrong data");
    g_status = 2;
  }
  if (launch_loop(bn, &lc, chunk, chunk) < 0) return -1; /* warm-up */
  for (int i = 0; i < repeats; i++) {
    double s = launch_loop(bn, &lc, calls, chunk);
    if (s < 0) return -1;
    per_call[i] = s * 1e6;
  }
  emit_launch("ckjit", "ckjit_copy2d", per_call, repeats, calls, chunk, NULL, 0, NULL);

  /* Raw driver launch of the same CUfunction: COPY_SPEC, else the default
   * spec of the f32 identity op. */
  char fallback[512] = "";
  size_t n_default = ckjit_default_spec_count();
  for (size_t i = 0; i < n_default; i++) {
    char spec[512];
    if (ckjit_default_spec(i, spec, sizeof spec) == CKJIT_SUCCESS &&
        strstr(spec, "dtype=f32") && strstr(spec, "op=identity,")) {
      snprintf(fallback, sizeof fallback, "%s", spec);
      break;
    }
  }
  const char *candidates[2] = {COPY_SPEC, fallback};
  const char *used = NULL;
  void *fn = NULL;
  int same_kernel = 0;
  char errors[1024] = "";
  for (int c = 0; c < 2 && !same_kernel; c++) {
    if (!candidates[c][0] || (c == 1 && strcmp(candidates[1], COPY_SPEC) == 0)) continue;
    ckjit_stats before, after;
    ckjit_get_stats(&before);
    void *f = NULL;
    ckjit_status st = ckjit_get_function(candidates[c], &f);
    ckjit_get_stats(&after);
    if (st != CKJIT_SUCCESS) {
      size_t len = strlen(errors);
      snprintf(errors + len, sizeof errors - len, "%sckjit_get_function(\"%s\"): %s: %s",
               len ? "; " : "", candidates[c], ckjit_status_string(st), ckjit_last_error());
      continue;
    }
    int same = after.compiles == before.compiles && after.loads == before.loads &&
               after.disk_hits == before.disk_hits && after.disk_misses == before.disk_misses;
    if (!used || same) {
      used = candidates[c];
      fn = f;
      same_kernel = same;
    }
  }
  if (!used) {
    emit_note("launch", errors);
    g_status = 1;
    return -1;
  }
  if (errors[0]) msg("%s", errors);
  if (!same_kernel)
    emit_note("launch", "neither COPY_SPEC nor the default f32 identity spec is the kernel "
                        "ckjit_copy2d(F32, 1, 1024) uses: ckjit_get_function had to load or "
                        "compile it (fix COPY_SPEC in bench/bench_ckjit.c)");
  else if (used != candidates[0])
    emit_note("launch", "COPY_SPEC in bench/bench_ckjit.c is stale; used the default spec "
                        "instead (update COPY_SPEC)");
  msg("raw launch uses spec %s", used);
  lc.fn = (CUfunction)fn;
  if (raw_args_for_copy(&lc.L, (CUdeviceptr)(uintptr_t)lc.src, 1024,
                        (CUdeviceptr)(uintptr_t)lc.dst, 1024, 1, 1024) != 0) {
    emit_note("launch", "raw_args_for_copy() cannot mirror this launch: "
                        "no raw driver comparison");
    return 0;
  }
  lc.raw = 1;
  CU(cuMemsetD8Async((CUdeviceptr)(uintptr_t)lc.dst, 0, sizeof h, bn->stream));
  CU(cuLaunchKernel(lc.fn, lc.L.grid[0], lc.L.grid[1], lc.L.grid[2], lc.L.block[0],
                    lc.L.block[1], lc.L.block[2], lc.L.shared_bytes, bn->stream, lc.L.params,
                    NULL));
  CU(cuStreamSynchronize(bn->stream));
  if (!check_copy_result(lc.dst, h)) {
    emit_note("launch", "the raw launch from raw_args_for_copy() copied wrong data: "
                        "its argument layout or grid is wrong; not timed");
    g_status = 2;
    return -1;
  }
  if (launch_loop(bn, &lc, chunk, chunk) < 0) return -1; /* warm-up */
  for (int i = 0; i < repeats; i++) per_call[i] = launch_loop(bn, &lc, calls, chunk) * 1e6;
  emit_launch("raw", "cuLaunchKernel", per_call, repeats, calls, chunk, "same_kernel_as_op",
              same_kernel, used);
  CK(ckjit_free(lc.src));
  CK(ckjit_free(lc.dst));
  int rc = gemm_launch_case(bn, 128, 128, 128, "wgmma, TMA (9.0 devices)");
  if (gemm_launch_case(bn, 16, 128, 128, "mma.sync")) rc = -1;
  return rc;
}

/* ---- main --------------------------------------------------------------- */
static void usage(void) {
  fprintf(stderr, "usage: bench_ckjit [--quick] [--only first|cold|bandwidth|launch]...\n");
}

int main(int argc, char **argv) {
  int only = 0; /* bit mask; 0 = all */
  static const char *const sections[] = {"first", "cold", "bandwidth", "launch"};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      g_quick = 1;
    } else if (strcmp(argv[i], "--child-first-call") == 0 && i + 1 < argc) {
      return child_first_call(argv[i + 1]);
    } else if (strcmp(argv[i], "--child-cold-compile") == 0) {
      for (int j = i + 1; j < argc; j++)
        if (strcmp(argv[j], "--quick") == 0) g_quick = 1;
      return child_cold_compile();
    } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      int found = 0;
      for (int s = 0; s < 4; s++)
        if (strcmp(argv[i + 1], sections[s]) == 0) { only |= 1 << s; found = 1; }
      if (!found) { usage(); return 1; }
      i++;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage();
      return 0;
    } else {
      usage();
      return 1;
    }
  }
  if (only == 0) only = 0xf;

  bench bn;
  memset(&bn, 0, sizeof bn);
  /* A private cache directory for the whole run (children inherit it). */
  snprintf(bn.cache_dir, sizeof bn.cache_dir, "/tmp/ckjit-bench-XXXXXX");
  if (!mkdtemp(bn.cache_dir)) {
    msg("mkdtemp: %s", strerror(errno));
    return 1;
  }
  setenv("CKJIT_CACHE_DIR", bn.cache_dir, 1);

  /* Initialize through ckjit, then use the context it made current. */
  void *probe = NULL;
  ckjit_status st = ckjit_malloc(&probe, 256);
  if (st != CKJIT_SUCCESS) {
    report_ckjit(st, "ckjit_malloc (device init)", __FILE__, __LINE__);
    rm_tree(bn.cache_dir);
    return 1;
  }
  CK(ckjit_get_device_info(&bn.info));
  if (!bn.info.has_device || bn.info.backend != CKJIT_BACKEND_CUDA) {
    msg("needs a CUDA device (has_device %d, backend %d)", bn.info.has_device,
        (int)bn.info.backend);
    rm_tree(bn.cache_dir);
    return 1;
  }
  if (bench_use_context(bn.info.device))
    msg("ckjit left no current context on this thread; using the primary context of "
        "device %d", bn.info.device);
  CU(cuStreamCreate(&bn.stream, CU_STREAM_NON_BLOCKING));
  int driver = 0;
  CU(cuDriverGetVersion(&driver));

  jrec r;
  j_begin(&r, "device", NULL, NAN, "info");
  j_str(&r, "impl", "ckjit");
  j_str(&r, "name", bn.info.name);
  j_str(&r, "arch", bn.info.arch);
  j_str(&r, "device_arch", bn.info.device_arch);
  j_int(&r, "multiprocessors", bn.info.multiprocessors);
  j_str(&r, "compiler", bn.info.compiler);
  j_str(&r, "ckjit_version", ckjit_version_string());
  j_int(&r, "cuda_driver_version", driver);
  j_bool(&r, "quick", g_quick);
  j_end(&r);
  msg("device %s (%s), cache %s", bn.info.name, bn.info.arch, bn.cache_dir);

  if (only & 1) section_first(&bn);
  if (only & 2) section_cold(&bn);
  if (only & 4) section_bandwidth(&bn);
  if (only & 8) section_launch(&bn);

  CK(ckjit_free(probe));
  CU(cuStreamDestroy(bn.stream));
  rm_tree(bn.cache_dir);
  if (g_status) msg("finished with status %d (see the messages above)", g_status);
  return g_status;
}
