/* Running remote_helper processes (a fleet) and reading what they print,
 * for the sources of test_remote (header-only, static; the settings below,
 * which main sets and every source reads, are defined once, in
 * test_remote.c). */
#ifndef CKJIT_TESTS_REMOTE_TEST_UTIL_H
#define CKJIT_TESTS_REMOTE_TEST_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_test_util.h"
#include "test_util.h"

/* Set by main: the helper and the tools, a work directory, the arch; the
 * checks passed; the processes started (their stderr files' numbers). */
extern const char *g_helper, *g_cache_tool, *g_prewarm_tool;
extern char *g_work;
extern const char *g_arch;
extern int g_checks;
extern int g_proc_seq;

#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    g_checks++;                                                            \
    if (!(cond)) {                                                         \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
      fprintf(stderr, __VA_ARGS__);                                        \
      fprintf(stderr, "\n");                                               \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

/* A helper (or tool) process: started, then waited for. */
typedef struct proc {
  pid_t pid;
  int out_fd;          /* its stdout (a pipe), read while it runs */
  char err_path[700];  /* its stderr */
  char *out, *err;     /* after proc_wait */
  size_t out_len, out_cap;
  int status;          /* exit status, 128 + signal */
  double started_ms, ended_ms;
} proc;

/* Starts argv (NULL-terminated) with `env` ("NAME=VALUE", NULL-terminated,
 * may be NULL) added to the environment. */
static TU_UNUSED void proc_start(proc *p, const char *const *argv, const char *const *env) {
  memset(p, 0, sizeof *p);
  tu_fmt(p->err_path, sizeof p->err_path, "%s/proc-%d-%d.err", g_work, (int)getpid(), g_proc_seq++);
  int fds[2];
  CHECK(pipe2(fds, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
  fflush(stdout);
  fflush(stderr);
  p->started_ms = rs_now_ms();
  p->pid = fork();
  CHECK(p->pid >= 0, "fork: %s", strerror(errno));
  if (p->pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int e = open(p->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int n = open("/dev/null", O_RDONLY);
    if (e < 0 || n < 0) _exit(126);
    dup2(n, 0);
    dup2(fds[1], 1);
    dup2(e, 2);
    for (int i = 0; env && env[i]; i++) putenv((char *)env[i]);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  close(fds[1]);
  p->out_fd = fds[0];
}

/* Reads what is available of its stdout (waiting up to `ms`); 1 when it
 * ended (EOF). */
static TU_UNUSED int proc_pump(proc *p, int ms) {
  if (p->out_fd < 0) return 1;
  struct pollfd pf = {p->out_fd, POLLIN, 0};
  if (poll(&pf, 1, ms) <= 0) return 0;
  if (p->out_len + 4097 > p->out_cap) {
    p->out_cap = p->out_cap ? p->out_cap * 2 + 4097 : 8192;
    p->out = realloc(p->out, p->out_cap);
    CHECK(p->out, "out of memory");
  }
  ssize_t n = read(p->out_fd, p->out + p->out_len, 4096);
  if (n <= 0) {
    close(p->out_fd);
    p->out_fd = -1;
    return 1;
  }
  p->out_len += (size_t)n;
  p->out[p->out_len] = '\0';
  return 0;
}

/* Waits until its stdout holds `text`, at most `ms`; 1 when it does. */
static TU_UNUSED int proc_wait_for(proc *p, const char *text, int ms) {
  double end = rs_now_ms() + ms;
  while (rs_now_ms() < end) {
    if (p->out && strstr(p->out, text)) return 1;
    if (proc_pump(p, 20) && !(p->out && strstr(p->out, text))) return 0;
  }
  return p->out && strstr(p->out, text);
}

/* Waits for it to end (killed after `timeout_ms`: a hang is a failure). */
static TU_UNUSED void proc_wait(proc *p, int timeout_ms) {
  double end = rs_now_ms() + timeout_ms;
  int status = 0;
  for (;;) {
    proc_pump(p, 20);
    pid_t w = waitpid(p->pid, &status, WNOHANG);
    if (w == p->pid) break;
    if (rs_now_ms() > end) {
      kill(p->pid, SIGKILL);
      waitpid(p->pid, &status, 0);
      fprintf(stderr, "process %d still running after %d ms: killed\n", (int)p->pid, timeout_ms);
      break;
    }
  }
  while (!proc_pump(p, 100)) {
  }
  p->ended_ms = rs_now_ms();
  p->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (!p->out) p->out = strdup("");
  size_t n;
  p->err = tu_read_file(p->err_path, &n);
  if (!p->err) p->err = strdup("");
  unlink(p->err_path);
}

static TU_UNUSED void proc_free(proc *p) {
  free(p->out);
  free(p->err);
  if (p->out_fd >= 0) close(p->out_fd);
  memset(p, 0, sizeof *p);
}

/* The helper with `cache_dir` and `url` (CKJIT_CACHE_DIR, CKJIT_REMOTE_CACHE;
 * NULL: unset), `env` more variables, `opts` its options (NULL-terminated,
 * may be NULL) and the specs. */
static TU_UNUSED void helper_start(proc *p, const char *cache_dir, const char *url,
                                   const char *const *env, const char *const *opts,
                                   const char *const *specs) {
  const char *argv[64];
  int n = 0;
  argv[n++] = g_helper;
  for (int i = 0; opts && opts[i]; i++) argv[n++] = opts[i];
  argv[n++] = g_arch;
  for (int i = 0; specs[i] && n < 62; i++) argv[n++] = specs[i];
  argv[n] = NULL;
  static char envs[64][1200];
  static int next;
  const char *all[32];
  int k = 0;
  char *e = envs[next++ % 64];
  tu_fmt(e, 1200, "CKJIT_CACHE_DIR=%s", cache_dir);
  all[k++] = e;
  e = envs[next++ % 64];
  tu_fmt(e, 1200, "CKJIT_REMOTE_CACHE=%s", url ? url : "");
  all[k++] = e;
  for (int i = 0; env && env[i] && k < 30; i++) all[k++] = env[i];
  all[k] = NULL;
  proc_start(p, argv, all);
}

/* Runs the helper to its end (60 s at most) and checks its exit status. */
static TU_UNUSED void helper_run(proc *p, const char *cache_dir, const char *url,
                                 const char *const *env, const char *const *opts,
                                 const char *const *specs, int want_status) {
  helper_start(p, cache_dir, url, env, opts, specs);
  proc_wait(p, 60000);
  CHECK(p->status == want_status, "helper exit %d, expected %d\nstdout:\n%s\nstderr:\n%s",
        p->status, want_status, p->out, p->err);
}

/* `name=value` from the helper's "stats" line (-1 when absent). */
static TU_UNUSED double stat_of(const proc *p, const char *name) {
  const char *line = strstr(p->out, "stats ");
  if (!line) return -1;
  char key[64];
  tu_fmt(key, sizeof key, " %s=", name);
  const char *v = strstr(line, key);
  return v ? strtod(v + strlen(key), NULL) : -1;
}

/* The n-th "call" line (0-based), or NULL. */
static TU_UNUSED const char *call_line(const proc *p, int n) {
  int i = 0;
  for (const char *c = p->out; c && *c; c = strchr(c, '\n'), c = c ? c + 1 : NULL)
    if (!strncmp(c, "call ", 5) && i++ == n) return c;
  return NULL;
}

/* `name=value` of the n-th call as a number (-1 when absent). */
static TU_UNUSED double call_num(const proc *p, int n, const char *name) {
  const char *c = call_line(p, n);
  if (!c) return -1;
  const char *end = strchr(c, '\n');
  char key[64];
  tu_fmt(key, sizeof key, " %s=", name);
  const char *v = strstr(c, key);
  return v && (!end || v < end) ? strtod(v + strlen(key), NULL) : -1;
}

/* `name=value` of the n-th call as text into out. */
static TU_UNUSED void call_str(const proc *p, int n, const char *name, char *out, size_t len) {
  out[0] = '\0';
  const char *c = call_line(p, n);
  if (!c) return;
  const char *end = strchr(c, '\n');
  char key[64];
  tu_fmt(key, sizeof key, " %s=", name);
  const char *v = strstr(c, key);
  if (!v || (end && v > end)) return;
  v += strlen(key);
  size_t k = strcspn(v, " \n");
  snprintf(out, len, "%.*s", (int)k, v);
}

static TU_UNUSED size_t occurrences(const char *text, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* A fresh directory under the work directory. */
static TU_UNUSED const char *work_dir(const char *tag) {
  static char dirs[64][900];
  static int next;
  char *d = dirs[next++ % 64];
  tu_fmt(d, 900, "%s/%s", g_work, tag);
  mkdir(d, 0700);
  return d;
}

/* Runs a tool (argv NULL-terminated) to its end. */
static TU_UNUSED void tool_run_env(proc *p, const char *const *argv, const char *const *env) {
  proc_start(p, argv, env);
  proc_wait(p, 120000);
}

#endif
