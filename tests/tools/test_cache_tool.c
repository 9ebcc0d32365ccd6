/* ckjit-cache end to end (its path is argv[1], given by meson): --help of
 * every command, usage errors, export -> clear -> import -> verify (files
 * and stdin/stdout), a damaged archive (refused whole), prune by count
 * and size in LRU order, info with limits and layers, ls with last use. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/scan.h"
#include "cache_test_util.h"

static const char *g_tool;

typedef struct fixture {
  char *base;
  char dir[CKJIT_PATH_MAX];
  char out_path[CKJIT_PATH_MAX + 16], err_path[CKJIT_PATH_MAX + 16];
  char *out; /* stdout of the last run */
  ckjit_disk_cache c;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || !(f->base = tu_mkdtemp("cache-tool"))) return -1;
  tu_fmt(f->dir, sizeof f->dir, "%s/cache", f->base);
  tu_fmt(f->out_path, sizeof f->out_path, "%s/stdout", f->base);
  tu_fmt(f->err_path, sizeof f->err_path, "%s/stderr", f->base);
  ckjit__disk_open(&f->c, f->dir);
  if (!f->c.usable) return -1;
  f->c.max_bytes = f->c.max_entries = 0;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  tu_rm_rf(f->base);
  free(f->base);
  free(f->out);
  free(f);
  return 0;
}

/* Runs the tool with the NULL-terminated arguments, stdin from `in` (or
 * /dev/null); returns the exit status (-1 on a signal); f->out = stdout. */
static int run(fixture *f, const char *in, ...) {
  const char *argv[32];
  int argc = 0;
  argv[argc++] = g_tool;
  va_list ap;
  va_start(ap, in);
  const char *a;
  while ((a = va_arg(ap, const char *)) && argc < 31) argv[argc++] = a;
  va_end(ap);
  argv[argc] = NULL;
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int i = open(in ? in : "/dev/null", O_RDONLY);
    int o = open(f->out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = open(f->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (i < 0 || o < 0 || e < 0) _exit(126);
    dup2(i, 0);
    dup2(o, 1);
    dup2(e, 2);
    execv(g_tool, (char *const *)argv);
    _exit(127);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  free(f->out);
  f->out = tu_read_file(f->out_path, NULL);
  if (!f->out) f->out = strdup("");
  if (!WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

/* Runs and checks the exit status, printing the output when it differs. */
#define RUN_EXPECT(want, f, in, ...)                                                         \
  do {                                                                                       \
    int rc_ = run(f, in, __VA_ARGS__, (const char *)NULL);                                   \
    if (rc_ != (want)) {                                                                     \
      char *err_ = tu_read_file((f)->err_path, NULL);                                        \
      print_error("%s:%d: exit %d, want %d\nstdout:\n%s\nstderr:\n%s\n", __FILE__, __LINE__, \
                  rc_, (want), (f)->out, err_ ? err_ : "");                                  \
      free(err_);                                                                            \
    }                                                                                        \
    assert_int_equal(rc_, (want));                                                           \
  } while (0)

static void expect_out(fixture *f, const char *needle) {
  if (!strstr(f->out, needle)) print_error("output lacks \"%s\":\n%s\n", needle, f->out);
  assert_non_null(strstr(f->out, needle));
}

static void test_help_and_usage_errors(void **state) {
  fixture *f = *state;
  RUN_EXPECT(0, f, NULL, "--help");
  expect_out(f, "usage: ckjit-cache");
  const char *cmds[] = {"info", "ls", "verify", "prune", "clear", "export", "import"};
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    RUN_EXPECT(0, f, NULL, cmds[i], "--help");
    expect_out(f, "usage: ckjit-cache [options] ");
    expect_out(f, cmds[i]);
    expect_out(f, "--cache-dir");
    RUN_EXPECT(0, f, NULL, "-h", cmds[i]);
  }
  RUN_EXPECT(2, f, NULL, "--cache-dir", f->dir);
  RUN_EXPECT(2, f, NULL, "--cache-dir", f->dir, "frobnicate");
  RUN_EXPECT(2, f, NULL, "--cache-dir", f->dir, "export");
  RUN_EXPECT(2, f, NULL, "--cache-dir", f->dir, "import");
  RUN_EXPECT(2, f, NULL, "--cache-dir", f->dir, "ls", "extra");
  RUN_EXPECT(2, f, NULL, "--cache-dir", f->dir, "prune", "--fix");
  RUN_EXPECT(2, f, NULL, "--cache-dir", f->dir, "verify", "--max-size", "1G");
  RUN_EXPECT(2, f, NULL, "--cache-dir", f->dir, "prune", "--max-size", "lots");
  RUN_EXPECT(2, f, NULL, "--cache-dir", f->dir, "prune", "--max-entries", "1K");
  RUN_EXPECT(2, f, NULL, "--cache-dir", f->dir, "--bogus", "info");
  RUN_EXPECT(2, f, NULL, "--cache-dir", f->dir, "--json", "export", "-");
}

enum { N = 9 };
static size_t size_of(int id) { return 700 + (size_t)id * 97; }

static void fill(fixture *f, time_t base) {
  for (int i = 0; i < N; i++) {
    assert_int_equal(tc_store(&f->c, i, size_of(i)), CKJIT_SUCCESS);
    assert_int_equal(tc_set_mtime(f->dir, i, base + 100 * i), 0);
  }
}

static void test_export_clear_import_verify(void **state) {
  fixture *f = *state;
  fill(f, time(NULL) - 10000);
  char a1[CKJIT_PATH_MAX + 16], a2[CKJIT_PATH_MAX + 16], a3[CKJIT_PATH_MAX + 16];
  tu_fmt(a1, sizeof a1, "%s/one.ckjitar", f->base);
  tu_fmt(a2, sizeof a2, "%s/two.ckjitar", f->base);
  tu_fmt(a3, sizeof a3, "%s/three.ckjitar", f->base);
  RUN_EXPECT(0, f, NULL, "--cache-dir", f->dir, "export", a1);
  expect_out(f, "exported 9 entries");
  RUN_EXPECT(0, f, NULL, "--cache-dir", f->dir, "--json", "clear");
  expect_out(f, "\"removed_entries\": 9");
  assert_int_equal(tc_count(f->dir, NULL), 0);
  for (int i = 0; i < N; i++) assert_int_equal(tc_load(&f->c, i, size_of(i)), 0);
  RUN_EXPECT(0, f, NULL, "--cache-dir", f->dir, "import", a1);
  expect_out(f, "imported 9 entries");
  RUN_EXPECT(0, f, NULL, "--cache-dir", f->dir, "--json", "verify");
  expect_out(f, "\"ok\": 9");
  expect_out(f, "\"bad_count\": 0");
  for (int i = 0; i < N; i++) assert_int_equal(tc_load(&f->c, i, size_of(i)), 1);
  /* The same entries give the same archive. */
  RUN_EXPECT(0, f, NULL, "--cache-dir", f->dir, "export", a2);
  size_t n1, n2;
  uint8_t *d1 = tu_read_file(a1, &n1), *d2 = tu_read_file(a2, &n2);
  assert_int_equal(n1, n2);
  assert_memory_equal(d1, d2, n1);
  free(d2);
  /* stdout / stdin. */
  RUN_EXPECT(0, f, NULL, "--cache-dir", f->dir, "export", "-");
  size_t n3;
  uint8_t *d3 = tu_read_file(f->out_path, &n3);
  assert_int_equal(n3, n1);
  assert_memory_equal(d3, d1, n1);
  assert_int_equal(tu_write_file(a3, d3, n3), 0);
  free(d3);
  RUN_EXPECT(0, f, NULL, "--cache-dir", f->dir, "clear");
  RUN_EXPECT(0, f, a3, "--cache-dir", f->dir, "--json", "import", "-");
  expect_out(f, "\"ok\": 9");
  expect_out(f, "\"error\": null");
  RUN_EXPECT(0, f, NULL, "--cache-dir", f->dir, "verify");

  /* An archive with a bad record: reported, and the whole archive refused
   * (exit 1, nothing stored), from a file and from stdin. */
  d1[16 + 24 + 200] ^= 0x10; /* inside the first record's entry */
  assert_int_equal(tu_write_file(a1, d1, n1), 0);
  RUN_EXPECT(0, f, NULL, "--cache-dir", f->dir, "clear");
  RUN_EXPECT(1, f, NULL, "--cache-dir", f->dir, "--json", "import", a1);
  expect_out(f, "\"ok\": 0");
  expect_out(f, "\"bad_count\": 1");
  expect_out(f, "nothing was imported");
  assert_int_equal(tc_count(f->dir, NULL), 0);
  RUN_EXPECT(1, f, a1, "--cache-dir", f->dir, "--json", "import", "-");
  expect_out(f, "nothing was imported");
  assert_int_equal(tc_count(f->dir, NULL), 0);
  /* Truncated: exit 1 with an error, nothing stored. */
  assert_int_equal(tu_write_file(a1, d1, n1 / 2), 0);
  RUN_EXPECT(1, f, NULL, "--cache-dir", f->dir, "--json", "import", a1);
  expect_out(f, "truncated");
  assert_int_equal(tc_count(f->dir, NULL), 0);
  free(d1);
  /* Not there / not an archive. */
  char missing[CKJIT_PATH_MAX + 16];
  tu_fmt(missing, sizeof missing, "%s/missing.ckjitar", f->base);
  RUN_EXPECT(1, f, NULL, "--cache-dir", f->dir, "import", missing);
  RUN_EXPECT(1, f, NULL, "--cache-dir", f->out_path, "import", a2);
  /* Export of a bad cache: exit 1, the archive holds the good entries. */
  char p[CKJIT_ENTRY_PATH_MAX];
  tc_path(f->dir, 4, p, sizeof p);
  size_t n;
  uint8_t *b = tu_read_file(p, &n);
  if (b) {
    b[n - 1] ^= 1;
    assert_int_equal(tu_write_file(p, b, n), 0);
    free(b);
    RUN_EXPECT(1, f, NULL, "--cache-dir", f->dir, "--json", "export", a2);
    expect_out(f, "\"bad_count\": 1");
    assert_true(tu_path_exists(a2));
  }
  /* Export of a cache directory that does not exist. */
  char nodir[CKJIT_PATH_MAX + 16];
  tu_fmt(nodir, sizeof nodir, "%s/nodir", f->base);
  RUN_EXPECT(1, f, NULL, "--cache-dir", nodir, "export", a2);
}

static void test_prune(void **state) {
  fixture *f = *state;
  time_t base = time(NULL) - 100000;
  fill(f, base);
  /* Use 0 and 1: they become the most recent. */
  assert_int_equal(tc_load(&f->c, 0, size_of(0)), 1);
  assert_int_equal(tc_load(&f->c, 1, size_of(1)), 1);
  RUN_EXPECT(0, f, NULL, "--cache-dir", f->dir, "--json", "prune", "--max-entries", "5");
  expect_out(f, "\"removed_entries\": 4");
  expect_out(f, "\"entries\": 5");
  expect_out(f, "\"within_limits\": true");
  for (int i = 0; i < N; i++) assert_int_equal(tc_exists(f->dir, i), i < 2 || i >= 6);
  /* By size: keep 6, 7, 8's worth minus one -> 7 and 8 and the used ones
   * compete; the least recent (6) goes first. */
  uint64_t bytes;
  tc_count(f->dir, &bytes);
  char max[32];
  snprintf(max, sizeof max, "%llu", (unsigned long long)(bytes - 1));
  RUN_EXPECT(0, f, NULL, "--cache-dir", f->dir, "prune", "--max-size", max);
  expect_out(f, "removed 1 entry");
  assert_false(tc_exists(f->dir, 6));
  assert_true(tc_exists(f->dir, 7));
  /* Suffixes; the environment's limit when no flag is given. */
  RUN_EXPECT(0, f, NULL, "--cache-dir", f->dir, "prune", "--max-size", "1M");
  expect_out(f, "removed 0 entries");
  setenv("CKJIT_CACHE_MAX_ENTRIES", "2", 1);
  RUN_EXPECT(0, f, NULL, "--cache-dir", f->dir, "--json", "prune");
  unsetenv("CKJIT_CACHE_MAX_ENTRIES");
  expect_out(f, "\"max_entries\": 2");
  expect_out(f, "\"entries\": 2");
  assert_true(tc_exists(f->dir, 0));
  assert_true(tc_exists(f->dir, 1));
  /* A stale temporary file goes too. */
  char sub[CKJIT_ENTRY_PATH_MAX], tmp[CKJIT_ENTRY_PATH_MAX + 128];
  tc_path(f->dir, 0, sub, sizeof sub);
  *strrchr(sub, '/') = 0;
  tu_fmt(tmp, sizeof tmp, "%s/.tmp-%032d-12-ab-3", sub, 7);
  assert_int_equal(tu_write_file(tmp, "x", 1), 0);
  struct timespec old[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
  assert_int_equal(utimensat(AT_FDCWD, tmp, old, 0), 0);
  RUN_EXPECT(0, f, NULL, "--cache-dir", f->dir, "--json", "prune");
  expect_out(f, "\"removed_temp_files\": 1");
  assert_false(tu_path_exists(tmp));
  /* No cache at all: nothing to do, success. */
  char nodir[CKJIT_PATH_MAX + 16];
  tu_fmt(nodir, sizeof nodir, "%s/nodir", f->base);
  RUN_EXPECT(0, f, NULL, "--cache-dir", nodir, "prune");
}

static void test_info_and_ls(void **state) {
  fixture *f = *state;
  fill(f, time(NULL) - 3 * 86400);
  char layer[CKJIT_PATH_MAX + 16], list[3 * CKJIT_PATH_MAX];
  tu_fmt(layer, sizeof layer, "%s/layer", f->base);
  ckjit_disk_cache *l = malloc(sizeof *l);
  ckjit__disk_open(l, layer);
  for (int i = 100; i < 103; i++) assert_int_equal(tc_store(l, i, 100), CKJIT_SUCCESS);
  free(l);
  tu_fmt(list, sizeof list, "%s:relative/dir", layer);
  setenv("CKJIT_CACHE_PATH", list, 1);
  setenv("CKJIT_CACHE_MAX_SIZE", "5M", 1);
  RUN_EXPECT(0, f, NULL, "--cache-dir", f->dir, "--json", "info");
  expect_out(f, "\"entries\": 9");
  expect_out(f, "\"max_bytes\": 5242880");
  expect_out(f, "\"max_entries\": 50000");
  expect_out(f, "\"usable\": true");
  expect_out(f, "\"entries\": 3");
  expect_out(f, "\"usable\": false");
  expect_out(f, "absolute");
  RUN_EXPECT(0, f, NULL, "--cache-dir", f->dir, "info");
  expect_out(f, "limits:       5.0 MiB, 50000 entries");
  expect_out(f, "3 entries");
  expect_out(f, "read-only");
  unsetenv("CKJIT_CACHE_PATH");
  unsetenv("CKJIT_CACHE_MAX_SIZE");
  RUN_EXPECT(0, f, NULL, "--cache-dir", f->dir, "ls");
  expect_out(f, "LAST USE");
  expect_out(f, "kernel_3");
  expect_out(f, "3d ago");
  expect_out(f, "9 entries");
  RUN_EXPECT(0, f, NULL, "--cache-dir", f->dir, "--json", "ls");
  expect_out(f, "\"last_use\": ");
  expect_out(f, "\"last_use_s\": ");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PATH-OF-ckjit-cache\n", argv[0]);
    return 2;
  }
  g_tool = argv[1];
  if (access(g_tool, X_OK) != 0) {
    printf("SKIP: %s is not an executable\n", g_tool);
    return 77;
  }
  umask(022);
  unsetenv("CKJIT_CACHE_PATH");
  unsetenv("CKJIT_CACHE_MAX_SIZE");
  unsetenv("CKJIT_CACHE_MAX_ENTRIES");
  setenv("CKJIT_LOG", "error", 1);
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_help_and_usage_errors),
      T(test_export_clear_import_verify),
      T(test_prune),
      T(test_info_and_ls),
  };
#undef T
  return cmocka_run_group_tests_name("cache_tool", tests, NULL, NULL);
}
