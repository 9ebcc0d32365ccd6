/* 8 processes x 4 threads ask ckjit_compile_spec for one overlapping set of
 * 24 default specializations at once, into one empty cache directory, for
 * sm_90 (NVRTC) and gfx90a (hipRTC); a vendor whose compiler is missing is
 * skipped with a message.
 *
 * Each child process (this program run again with --child;
 * concurrency_compile_child.c, which lists its checks) waits until all are
 * started, compiles the set from 4 threads and checks what it got and what
 * is on disk under its keys.
 *
 * The parent then checks that every process got the same key and code size
 * per spec, runs `ckjit-cache verify --json` (its path is argv[1], given by
 * meson) and decodes every file in the cache itself: exactly one valid entry
 * per spec, nothing else (no temporary file left).  The parent kills every
 * child after a bounded time (CKJIT_TEST_DEADLINE_S, default 300 s per arch)
 * and fails: no hang. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ckjit/ckjit.h"
#include "concurrency_compile.h"
#include "test_util.h"

/* Under AddressSanitizer: LLVM inside hipRTC (comgr) replaces a thread's
 * alternate signal stack with one of its own (malloc'ed), and ASan then
 * fails to munmap it when the thread exits ("unable to unmap", a CHECK in
 * UnsetAlternateSignalStack).  Without ASan's own alternate stacks the two
 * do not meet.  Ignored in a build without ASan. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "use_sigaltstack=0"; }

static const char *g_tool; /* ckjit-cache */
static char *g_base;

/* ---- parent -------------------------------------------------------------- */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Prints a child's stdout and the warnings/errors of its log. */
static void show_child(const char *dir, int i) {
  char path[1200];
  tu_fmt(path, sizeof path, "%s/out-%d", dir, i);
  char *out = tu_read_file(path, NULL);
  if (out && *out) printf("--- process %d stdout:\n%s", i, out);
  free(out);
  tu_fmt(path, sizeof path, "%s/log-%d", dir, i);
  char *log = tu_read_file(path, NULL);
  if (log) {
    for (char *line = log; line && *line;) {
      char *end = strchr(line, '\n');
      if (end) *end = 0;
      if (!strstr(line, ": info: ") && !strstr(line, ": debug: "))
        printf("--- process %d stderr: %s\n", i, line);
      line = end ? end + 1 : NULL;
    }
  }
  free(log);
}

/* Value of a top-level unsigned JSON member "name" (first occurrence); -1
 * when missing. */
static long long json_uint_member(const char *json, const char *name) {
  char pat[64];
  tu_fmt(pat, sizeof pat, "\"%s\"", name);
  const char *p = strstr(json, pat);
  if (!p) return -1;
  p += strlen(pat);
  while (*p == ' ' || *p == ':' || *p == '\n') p++;
  if (*p < '0' || *p > '9') return -1;
  return strtoll(p, NULL, 10);
}

/* Runs `ckjit-cache --cache-dir DIR --json verify`; returns its exit status
 * (-1 when it could not run) and its stdout in *out. */
static int run_verify(const char *cache, const char *work, char **out) {
  char out_path[1200];
  tu_fmt(out_path, sizeof out_path, "%s/verify.json", work);
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    FILE *o = freopen(out_path, "w", stdout);
    if (!o) _exit(126);
    execl(g_tool, g_tool, "--cache-dir", cache, "--json", "verify", (char *)NULL);
    _exit(127);
  }
  int status;
  if (waitpid(pid, &status, 0) != pid) return -1;
  *out = tu_read_file(out_path, NULL);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

typedef struct child_result {
  char key[NSPEC][33];
  size_t size[NSPEC];
  char kernel[NSPEC][64];
  unsigned count[NSPEC];
  unsigned long long compiles;
} child_result;

static int read_child_result(const char *path, child_result *r) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int ok = 1;
  for (int s = 0; s < NSPEC && ok; s++)
    ok = fscanf(f, "%32s %zu %63s %u", r->key[s], &r->size[s], r->kernel[s], &r->count[s]) == 4;
  if (ok) ok = fscanf(f, " compiles %llu", &r->compiles) == 1;
  fclose(f);
  return ok ? 0 : -1;
}

/* Every file below the cache: a valid entry of one of `keys`, each present
 * exactly once; nothing else.  Returns the number of problems (printed). */
static int scan_cache(const char *cache, const char *arch, const child_result *r) {
  int problems = 0, found[NSPEC] = {0};
  DIR *root = opendir(cache);
  if (!root) {
    printf("FAIL: cannot open the cache %s: %s\n", cache, strerror(errno));
    return 1;
  }
  struct dirent *de;
  while ((de = readdir(root))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    char sub[1400];
    tu_fmt(sub, sizeof sub, "%s/%s", cache, de->d_name);
    struct stat st;
    if (lstat(sub, &st) || !S_ISDIR(st.st_mode) || strlen(de->d_name) != 2) {
      printf("FAIL: unexpected item in the cache root: %s\n", de->d_name);
      problems++;
      continue;
    }
    DIR *d = opendir(sub);
    if (!d) {
      problems++;
      continue;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char hex[33] = "";
      int s = -1;
      if (strlen(e->d_name) == 38 && !strcmp(e->d_name + 32, ".ckjit")) {
        memcpy(hex, e->d_name, 32);
        hex[32] = 0;
        for (int k = 0; k < NSPEC; k++)
          if (!strcmp(r->key[k], hex)) s = k;
      }
      if (s < 0 || strncmp(de->d_name, hex, 2)) {
        printf("FAIL: unexpected file %s/%s (a temporary file left behind, or an entry nobody "
               "asked for)\n",
               de->d_name, e->d_name);
        problems++;
        continue;
      }
      char why[2400];
      if (check_entry_file(cache, hex, arch, r->kernel[s], r->size[s], why, sizeof why)) {
        printf("FAIL: corrupt entry: %s\n", why);
        problems++;
      }
      found[s]++;
    }
    closedir(d);
  }
  closedir(root);
  for (int s = 0; s < NSPEC; s++) {
    int dup = 0;
    for (int u = 0; u < s; u++) dup |= !strcmp(r->key[u], r->key[s]);
    if (!dup && found[s] != 1) {
      printf("FAIL: %s (key %s): %d entries in the cache\n", g_specs[s], r->key[s], found[s]);
      problems++;
    }
  }
  return problems;
}

static void run_arch(const char *arch) {
  char work[1200], cache[1300];
  tu_fmt(work, sizeof work, "%s/%s", g_base, arch);
  assert_int_equal(mkdir(work, 0700), 0);
  tu_fmt(cache, sizeof cache, "%s/cache", work);
  assert_int_equal(pick_specs(), 0);

  int go[2];
  assert_int_equal(pipe(go), 0);
  pid_t pids[NPROC];
  fflush(NULL);
  for (int i = 0; i < NPROC; i++) {
    char out[1300], log[1300], res[1300], idx[16], fd[16];
    tu_fmt(out, sizeof out, "%s/out-%d", work, i);
    tu_fmt(log, sizeof log, "%s/log-%d", work, i);
    tu_fmt(res, sizeof res, "%s/result-%d", work, i);
    tu_fmt(idx, sizeof idx, "%d", i);
    tu_fmt(fd, sizeof fd, "%d", go[0]);
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0) {
      close(go[1]);
      if (!freopen(out, "w", stdout) || !freopen(log, "w", stderr)) _exit(126);
      setvbuf(stdout, NULL, _IOLBF, 0);
      setenv("CKJIT_CACHE_DIR", cache, 1);
      setenv("CKJIT_LOG", "info", 1);
      tu_unset_cache_settings();
      execl("/proc/self/exe", "test_concurrency_compile", "--child", arch, cache, idx, res, log,
            fd, (char *)NULL);
      _exit(127);
    }
  }
  close(go[0]);
  double t0 = now_s();
  close(go[1]); /* go */

  const char *d = getenv("CKJIT_TEST_DEADLINE_S");
  double deadline = d && atof(d) > 0 ? atof(d) : 300.0;
  int status[NPROC], done[NPROC] = {0}, remaining = NPROC, hung = 0;
  while (remaining) {
    for (int i = 0; i < NPROC; i++) {
      if (done[i]) continue;
      pid_t r = waitpid(pids[i], &status[i], WNOHANG);
      if (r == pids[i]) {
        done[i] = 1;
        remaining--;
      }
    }
    if (!remaining) break;
    if (now_s() - t0 > deadline) {
      hung = 1;
      for (int i = 0; i < NPROC; i++)
        if (!done[i]) kill(pids[i], SIGKILL);
      for (int i = 0; i < NPROC; i++)
        if (!done[i]) waitpid(pids[i], &status[i], 0);
      break;
    }
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  double wall = now_s() - t0;
  if (hung) {
    for (int i = 0; i < NPROC; i++) {
      if (!done[i]) printf("FAIL: process %d still running after %.0f s: killed\n", i, deadline);
      show_child(work, i);
    }
    fail_msg("%s: processes hung (deadline %.0f s; CKJIT_TEST_DEADLINE_S)", arch, deadline);
  }

  int skipped = 0, failed = 0;
  for (int i = 0; i < NPROC; i++) {
    if (WIFEXITED(status[i]) && WEXITSTATUS(status[i]) == 77) {
      skipped++;
    } else if (!WIFEXITED(status[i]) || WEXITSTATUS(status[i]) != 0) {
      if (WIFSIGNALED(status[i]))
        printf("FAIL: process %d killed by signal %d\n", i, WTERMSIG(status[i]));
      else
        printf("FAIL: process %d exited with %d\n", i, WEXITSTATUS(status[i]));
      failed++;
      show_child(work, i);
    }
  }
  if (skipped == NPROC) {
    char path[1300];
    tu_fmt(path, sizeof path, "%s/out-0", work);
    char *why = tu_read_file(path, NULL);
    printf("SKIP %s: %s", arch, why ? why : "compiler unavailable\n");
    free(why);
    skip();
  }
  if (skipped) {
    printf("FAIL: %d of %d processes found no compiler for %s\n", skipped, NPROC, arch);
    failed++;
  }
  assert_int_equal(failed, 0);

  /* Same answer in every process. */
  child_result *r = calloc(NPROC, sizeof *r);
  assert_non_null(r);
  unsigned long long total = 0;
  int mismatches = 0;
  for (int i = 0; i < NPROC; i++) {
    char path[1300];
    tu_fmt(path, sizeof path, "%s/result-%d", work, i);
    if (read_child_result(path, &r[i])) fail_msg("process %d: unreadable result file", i);
    total += r[i].compiles;
    for (int s = 0; s < NSPEC; s++)
      if (strcmp(r[i].key[s], r[0].key[s]) || r[i].size[s] != r[0].size[s] ||
          strcmp(r[i].kernel[s], r[0].kernel[s])) {
        printf("FAIL: %s: process %d got key %s (%zu bytes, %s), process 0 got %s (%zu bytes, "
               "%s)\n",
               g_specs[s], i, r[i].key[s], r[i].size[s], r[i].kernel[s], r[0].key[s],
               r[0].size[s], r[0].kernel[s]);
        mismatches++;
      }
  }
  printf("%s: %d processes x %d threads x %d specs in %.1f s, %llu compiles in all\n", arch,
         NPROC, NTHREAD, NSPEC, wall, total);
  assert_int_equal(mismatches, 0);

  /* The library's own verification, through the tool. */
  char *json = NULL;
  int rc = run_verify(cache, work, &json);
  if (rc != 0 || !json) printf("ckjit-cache verify exited %d:\n%s\n", rc, json ? json : "");
  assert_int_equal(rc, 0);
  assert_non_null(json);
  long long bad = json_uint_member(json, "bad_count"), entries = json_uint_member(json, "entries"),
            ok = json_uint_member(json, "ok"), temps = json_uint_member(json, "temp_files");
  if (bad != 0 || entries != ok || temps != 0) printf("ckjit-cache verify --json:\n%s\n", json);
  assert_int_equal(bad, 0);
  assert_int_equal(entries, ok);
  assert_int_equal(temps, 0);
  free(json);

  /* And every file, decoded here. */
  int problems = scan_cache(cache, arch, &r[0]);
  assert_int_equal(problems, 0);
  int distinct = 0;
  for (int s = 0; s < NSPEC; s++) {
    int dup = 0;
    for (int u = 0; u < s; u++) dup |= !strcmp(r[0].key[u], r[0].key[s]);
    distinct += !dup;
  }
  assert_int_equal(entries, distinct);
  free(r);
}

static void test_sm_90(void **state) {
  (void)state;
  run_arch("sm_90");
}

static void test_gfx90a(void **state) {
  (void)state;
  run_arch("gfx90a");
}

static int group_setup(void **state) {
  (void)state;
  g_base = tu_mkdtemp("concurrency");
  return g_base ? 0 : -1;
}

static int group_teardown(void **state) {
  (void)state;
  if (!getenv("CKJIT_TEST_KEEP")) tu_rm_rf(g_base);
  else printf("kept %s\n", g_base);
  free(g_base);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 8 && !strcmp(argv[1], "--child")) return child_main(argv);
  if (argc != 2) {
    fprintf(stderr, "usage: %s PATH-OF-ckjit-cache\n", argv[0]);
    return 2;
  }
  g_tool = argv[1];
  if (access(g_tool, X_OK)) {
    fprintf(stderr, "%s: not executable: %s\n", g_tool, strerror(errno));
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sm_90),
      cmocka_unit_test(test_gfx90a),
  };
  return cmocka_run_group_tests_name("concurrency_compile", tests, group_setup, group_teardown);
}
