/* CKJIT_RECORD (runtime/record.c), called directly: recording happens on
 * the launch path, which needs a GPU, so the hook's function is tested
 * here.  The line format, once per (spec, arch) per process, recording off
 * when the variable is unset or empty, an unwritable file (a warning, never
 * a failure of the caller), appending to what is there, and many processes
 * appending at once: every line intact, none lost. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/record.h"
#include "runtime/spec.h"
#include "test_util.h"
#include "tools/manifest.h"

static char *g_dir;

static int setup(void **state) {
  (void)state;
  g_dir = tu_mkdtemp("record");
  setenv("CKJIT_LOG", "off", 1); /* the expected warnings stay quiet */
  return g_dir ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  unsetenv("CKJIT_RECORD");
  if (!getenv("CKJIT_TEST_KEEP")) tu_rm_rf(g_dir);
  free(g_dir);
  return 0;
}

static ckjit_spec spec_of(const char *text) {
  ckjit_spec s;
  if (ckjit__spec_parse(text, &s) != CKJIT_SUCCESS) fail_msg("bad test spec %s", text);
  return s;
}

static char *read_text(const char *path) {
  size_t n;
  char *t = tu_read_file(path, &n);
  return t ? t : strdup("");
}

static size_t count_lines(const char *t) {
  size_t n = 0;
  for (; *t; t++) n += *t == '\n';
  return n;
}

static void test_line_format(void **state) {
  (void)state;
  ckjit_spec s = spec_of("transpose:dtype=f32");
  char line[512];
  int n = ckjit__record_line(&s, "sm_90", line, sizeof line);
  assert_true(n > 0);
  assert_string_equal(line, "ckjit-spec 1 sm_90 transpose:dtype=f32,tile=64,vec=4,threads=256\n");
  assert_int_equal(n, (int)strlen(line));
  /* The canonical text: the same spec written two ways gives one line. */
  ckjit_spec t = spec_of("transpose:threads=256,dtype=f32,vec=4");
  char line2[512];
  assert_int_equal(ckjit__record_line(&t, "sm_90", line2, sizeof line2), n);
  assert_string_equal(line, line2);
  /* Too small a buffer, a bad arch: -1. */
  assert_int_equal(ckjit__record_line(&s, "sm_90", line, 20), -1);
  assert_int_equal(ckjit__record_line(&s, "", line, sizeof line), -1);
  assert_int_equal(ckjit__record_line(&s, "sm 90", line, sizeof line), -1);
  assert_int_equal(ckjit__record_line(&s, NULL, line, sizeof line), -1);
}

static void test_once_per_process(void **state) {
  (void)state;
  char path[1024];
  tu_fmt(path, sizeof path, "%s/once.rec", g_dir);
  setenv("CKJIT_RECORD", path, 1);
  ckjit__record_reset();
  ckjit_spec a = spec_of("transpose:dtype=f32"), b = spec_of("elementwise:dtype=bf16,op=relu");
  assert_int_equal(ckjit__record(&a, "sm_90"), 0);
  assert_int_equal(ckjit__record(&a, "sm_90"), 0);   /* again: nothing */
  assert_int_equal(ckjit__record(&a, "gfx90a"), 0);  /* another arch: a line */
  assert_int_equal(ckjit__record(&b, "gfx90a"), 0);
  assert_int_equal(ckjit__record(&b, "gfx90a"), 0);
  char *t = read_text(path);
  assert_string_equal(t,
                      "ckjit-spec 1 sm_90 transpose:dtype=f32,tile=64,vec=4,threads=256\n"
                      "ckjit-spec 1 gfx90a transpose:dtype=f32,tile=64,vec=4,threads=256\n"
                      "ckjit-spec 1 gfx90a elementwise:dtype=bf16,op=relu,epilogue=none,vec=8,"
                      "threads=256,unroll=1\n");
  free(t);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_int_equal(st.st_mode & 0133, 0); /* 0644 at most (less the umask) */
}

static void test_off_when_unset_or_empty(void **state) {
  (void)state;
  char path[1024];
  tu_fmt(path, sizeof path, "%s/off.rec", g_dir);
  ckjit__record_reset();
  ckjit_spec a = spec_of("transpose:dtype=f16");
  unsetenv("CKJIT_RECORD");
  assert_int_equal(ckjit__record(&a, "sm_90"), 0);
  setenv("CKJIT_RECORD", "", 1);
  assert_int_equal(ckjit__record(&a, "sm_90"), 0);
  assert_false(tu_path_exists(path));
  /* Not remembered while off: recorded once turned on. */
  setenv("CKJIT_RECORD", path, 1);
  assert_int_equal(ckjit__record(&a, "sm_90"), 0);
  char *t = read_text(path);
  assert_int_equal(count_lines(t), 1);
  free(t);
}

static void test_appends_to_existing(void **state) {
  (void)state;
  char path[1024];
  tu_fmt(path, sizeof path, "%s/append.rec", g_dir);
  const char *before = "# recorded by an earlier run\nckjit-spec 1 sm_80 transpose\n";
  assert_int_equal(tu_write_file(path, before, strlen(before)), 0);
  setenv("CKJIT_RECORD", path, 1);
  ckjit__record_reset();
  ckjit_spec a = spec_of("transpose:dtype=bf16");
  assert_int_equal(ckjit__record(&a, "sm_90"), 0);
  char *t = read_text(path);
  assert_int_equal(strncmp(t, before, strlen(before)), 0);
  assert_string_equal(t + strlen(before),
                      "ckjit-spec 1 sm_90 transpose:dtype=bf16,tile=64,vec=8,threads=256\n");
  free(t);
}

static void test_unwritable_is_not_fatal(void **state) {
  (void)state;
  ckjit_spec a = spec_of("transpose:dtype=f32");
  char path[1024];
  /* A directory, then a file in a directory that does not exist. */
  setenv("CKJIT_RECORD", g_dir, 1);
  ckjit__record_reset();
  assert_int_equal(ckjit__record(&a, "sm_90"), -1);
  assert_int_equal(ckjit__record(&a, "sm_90"), -1); /* tried again, warned once */
  tu_fmt(path, sizeof path, "%s/no/such/dir/x.rec", g_dir);
  setenv("CKJIT_RECORD", path, 1);
  assert_int_equal(ckjit__record(&a, "sm_90"), -1);
  assert_false(tu_path_exists(path));
  /* errno is left as it was. */
  errno = 1234;
  ckjit__record(&a, "sm_90");
  assert_int_equal(errno, 1234);
}

/* Every line written by N processes appending M lines each at once: all
 * there, each intact (one of the expected lines), none twice. */
static void test_concurrent_appenders(void **state) {
  (void)state;
  enum { PROCS = 8, PER = 150 };
  static const char *archs[PROCS] = {"sm_75", "sm_80", "sm_86", "sm_89",
                                     "sm_90", "sm_90a", "sm_100", "gfx90a:sramecc+:xnack-"};
  static const char *dtypes[] = {"f32", "f16", "bf16"};
  static const char *ops[] = {"identity", "relu", "gelu_tanh", "gelu_erf", "silu", "sigmoid",
                              "add", "sub", "mul", "div", "max", "min"};
  char path[1024];
  tu_fmt(path, sizeof path, "%s/concurrent.rec", g_dir);
  setenv("CKJIT_RECORD", path, 1);
  ckjit__record_reset();
  /* PER distinct specs: dtype x op x threads. */
  static ckjit_spec specs[PER];
  for (int i = 0; i < PER; i++) {
    char text[200];
    tu_fmt(text, sizeof text, "elementwise:dtype=%s,op=%s,threads=%d", dtypes[i % 3],
           ops[(i / 3) % 12], 32 * (1 + i / 36));
    specs[i] = spec_of(text);
  }
  pid_t pids[PROCS];
  for (int p = 0; p < PROCS; p++) {
    pids[p] = fork();
    assert_true(pids[p] >= 0);
    if (pids[p] == 0) {
      int bad = 0;
      for (int i = 0; i < PER; i++) bad |= ckjit__record(&specs[i], archs[p]) != 0;
      _exit(bad);
    }
  }
  for (int p = 0; p < PROCS; p++) {
    int status;
    assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  /* The expected lines, each once. */
  size_t n_expected = (size_t)PROCS * PER;
  char (*expected)[300] = calloc(n_expected, sizeof *expected);
  int *found = calloc(n_expected, sizeof *found);
  assert_non_null(expected);
  assert_non_null(found);
  for (int p = 0; p < PROCS; p++)
    for (int i = 0; i < PER; i++)
      assert_true(ckjit__record_line(&specs[i], archs[p], expected[p * PER + i], 300) > 0);
  char *t = read_text(path);
  assert_int_equal(count_lines(t), n_expected);
  assert_int_equal(t[strlen(t) - 1], '\n');
  for (char *line = t; *line;) {
    char *nl = strchr(line, '\n');
    assert_non_null(nl);
    size_t len = (size_t)(nl - line) + 1;
    size_t k = 0;
    for (; k < n_expected; k++)
      if (strlen(expected[k]) == len && !memcmp(expected[k], line, len)) break;
    if (k == n_expected) fail_msg("a torn or unexpected line: '%.*s'", (int)len - 1, line);
    assert_int_equal(found[k], 0);
    found[k] = 1;
    line = nl + 1;
  }
  free(t);
  free(expected);
  free(found);
}

/* A recorded file is a manifest: every line parses as a record. */
static int check_record(void *ctx, const manifest_entry *e) {
  (void)ctx;
  assert_null(e->error);
  assert_true(e->record);
  assert_non_null(e->arch);
  return 0;
}

static void test_record_file_is_a_manifest(void **state) {
  (void)state;
  char path[1024];
  tu_fmt(path, sizeof path, "%s/concurrent.rec", g_dir);
  size_t n = 0;
  char *t = tu_read_file(path, &n);
  assert_non_null(t);
  assert_int_equal(manifest_parse(t, n, check_record, NULL), 0);
  free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_line_format),
      cmocka_unit_test(test_once_per_process),
      cmocka_unit_test(test_off_when_unset_or_empty),
      cmocka_unit_test(test_appends_to_existing),
      cmocka_unit_test(test_unwritable_is_not_fatal),
      cmocka_unit_test(test_concurrent_appenders),
      cmocka_unit_test(test_record_file_is_a_manifest),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
