/*
 * bench_cases.h: for the benchmarks that measure each case in a process of
 * its own (bench_rows, bench_gemm), everything around the cases: the child
 * process of a case (its command line, running it, forwarding its records),
 * the case loop with its budget, a case's device memory that fails into the
 * case's record, the private cache directory, the CUDA device check and the
 * measuring stream.  A fresh process per case keeps one case's fault or
 * leftover state (a sticky CUDA error, a warm L2, a loaded module) out of the
 * next one's numbers.  Header only, on top of bench_util.h (include this
 * instead, with BENCH_NAME defined first).
 */
#ifndef CKJIT_BENCH_CASES_H
#define CKJIT_BENCH_CASES_H

#include "bench_util.h"

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

/* ---- a case's device memory (bench_rows, bench_gemm) ------------------------------- */
/* Allocation and upload for the case a process measures that fail softly:
 * the error becomes that case's record (`fail`, the bench's own) and the
 * case ends, instead of the run. */
typedef void (*bench_fail_fn)(const char *status, const char *error);

static inline int bench_dev_alloc(void **p, size_t bytes, bench_fail_fn fail) {
  ckjit_status st = ckjit_malloc(p, bytes);
  if (st == CKJIT_SUCCESS) return 0;
  char err[600];
  snprintf(err, sizeof err, "ckjit_malloc(%zu): %s", bytes, ckjit_last_error());
  fail(ckjit_status_string(st), err);
  return -1;
}

static inline int bench_upload(void *dst, const void *src, size_t bytes, bench_fail_fn fail) {
  ckjit_status st = ckjit_memcpy(dst, src, bytes, CKJIT_HOST_TO_DEVICE);
  if (st == CKJIT_SUCCESS) return 0;
  char err[600];
  snprintf(err, sizeof err, "ckjit_memcpy(H2D): %s", ckjit_last_error());
  fail(ckjit_status_string(st), err);
  return -1;
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

#endif /* CKJIT_BENCH_CASES_H */
