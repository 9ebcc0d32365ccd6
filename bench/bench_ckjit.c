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
 * Files: this one has main, the child processes and the first and cold
 * sections; bench_ckjit_bandwidth.c and bench_ckjit_launch.c the other two;
 * bench_ckjit.h what they share.
 *
 * Exit status: 0 when all went well, 1 on an error (the ckjit or CUDA error
 * is printed), 2 when a result check failed.
 */
#include "bench_ckjit.h"

int g_status = 0;
int g_quick = 0;

void report_ckjit(ckjit_status st, const char *what, const char *file, int line) {
  msg("%s:%d: %s failed: %s: %s", file, line, what, ckjit_status_string(st), ckjit_last_error());
}

void report_cuda(CUresult r, const char *what, const char *file, int line) {
  const char *name, *text;
  cuda_error_strings(r, &name, &text);
  msg("%s:%d: %s failed: %s (%d): %s", file, line, what, name ? name : "?", (int)r,
      text ? text : "");
}

void emit_note(const char *section, const char *text) {
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

/* ---- first call, cold compile ------------------------------------------- */
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
