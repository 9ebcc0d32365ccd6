/* Helpers for the tests that run ckjit-prewarm and ckjit-inspect: run a
 * tool with extra environment and capture its output, pick numbers and
 * strings out of the tools' --json output (whose layout json_writer fixes:
 * `"key": value`), and find which compilers this host has. */
#ifndef CKJIT_TESTS_TOOL_RUN_H
#define CKJIT_TESTS_TOOL_RUN_H

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckjit/ckjit.h"
#include "test_util.h"

typedef struct tool_run {
  int status;   /* exit status, or 128 + signal */
  char *out;    /* stdout (NUL-terminated) */
  char *err;    /* stderr */
} tool_run;

static TU_UNUSED void tool_run_free(tool_run *r) {
  free(r->out);
  free(r->err);
  memset(r, 0, sizeof *r);
}

/* Runs argv (NULL-terminated) with `env` ("NAME=VALUE" strings, NULL-
 * terminated, may be NULL) added to the environment; `work` is a directory
 * for the captured output. */
static TU_UNUSED tool_run run_tool(const char *work, const char *const *argv,
                                   const char *const *env) {
  static int seq;
  char out_path[1024], err_path[1024];
  tu_fmt(out_path, sizeof out_path, "%s/run-%d.out", work, seq);
  tu_fmt(err_path, sizeof err_path, "%s/run-%d.err", work, seq++);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int n = open("/dev/null", O_RDONLY);
    if (o < 0 || e < 0 || n < 0) _exit(126);
    dup2(n, 0);
    dup2(o, 1);
    dup2(e, 2);
    for (int i = 0; env && env[i]; i++) putenv((char *)env[i]);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  tool_run r = {-1, NULL, NULL};
  int status;
  if (pid > 0 && waitpid(pid, &status, 0) == pid)
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  size_t n;
  r.out = tu_read_file(out_path, &n);
  r.err = tu_read_file(err_path, &n);
  if (!r.out) r.out = strdup("");
  if (!r.err) r.err = strdup("");
  unlink(out_path);
  unlink(err_path);
  return r;
}

/* The first number after `"name": ` following the first occurrence of
 * `after` (NULL: from the start), skipping members whose value is not a
 * number (an object, a string); -1 when absent or null. */
static TU_UNUSED double json_num_after(const char *text, const char *after, const char *name) {
  const char *p = after ? strstr(text, after) : text;
  if (!p) return -1;
  char key[128];
  tu_fmt(key, sizeof key, "\"%s\": ", name);
  for (p = strstr(p, key); p; p = strstr(p + 1, key)) {
    const char *v = p + strlen(key);
    if (!strncmp(v, "null", 4)) return -1;
    if ((*v >= '0' && *v <= '9') || *v == '-') return strtod(v, NULL);
  }
  return -1;
}

/* Occurrences of `needle` in `text`. */
static TU_UNUSED size_t count_of(const char *text, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* The string values of `"name": "..."` in order, joined with '\n' into a
 * malloc'ed, sorted list (for comparing sets of keys). */
static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static TU_UNUSED char *json_strings_sorted(const char *text, const char *name) {
  char key[128];
  tu_fmt(key, sizeof key, "\"%s\": \"", name);
  size_t n = count_of(text, key), k = 0, total = 1;
  char **v = calloc(n + 1, sizeof *v);
  for (const char *p = strstr(text, key); p && k < n; p = strstr(p + 1, key)) {
    const char *s = p + strlen(key), *e = strchr(s, '"');
    if (!e) break;
    v[k] = strndup(s, (size_t)(e - s));
    total += (size_t)(e - s) + 1;
    k++;
  }
  qsort(v, k, sizeof *v, cmp_str);
  char *out = calloc(total, 1);
  for (size_t i = 0; i < k; i++) {
    strcat(out, v[i]);
    strcat(out, "\n");
    free(v[i]);
  }
  free(v);
  return out;
}

/* Whether this host can compile for `arch` (its compiler library exists),
 * probed in this process with a throwaway cache under `work`. */
static TU_UNUSED int can_compile(const char *work, const char *arch) {
  char dir[1024];
  tu_fmt(dir, sizeof dir, "%s/probe-%s", work, arch);
  ckjit_shutdown();
  ckjit_options o;
  ckjit_options_init(&o);
  o.cache_dir = dir;
  o.disk_cache = 1;
  if (ckjit_init(&o) != CKJIT_SUCCESS) return 0;
  ckjit_status st = ckjit_compile_spec("transpose:dtype=f32", arch, NULL);
  if (st != CKJIT_SUCCESS)
    printf("# no compiler for %s here (%s): %.200s\n", arch, ckjit_status_string(st),
           ckjit_last_error());
  ckjit_shutdown();
  return st == CKJIT_SUCCESS;
}

#endif
