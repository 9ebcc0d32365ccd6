/* ckjit-prewarm end to end (the tool's path is argv[1]): --json parsed;
 * a second run compiles nothing and says so; -j 1 and -j 2 give the same
 * entries; a bad spec and a bad arch fail only their own items; a worker
 * that crashes (the test-only CKJIT_PREWARM_TEST_CRASH hook, honored in
 * worker mode only) or hangs past --timeout fails its item, is replaced,
 * and the rest go on; --manifest with comments, records, duplicates
 * (compiled once) and a malformed line (reported with its number); a file
 * written by CKJIT_RECORD's writer replayed; usage errors.
 *
 * Uses sm_90 (NVRTC) and gfx90a (hipRTC), each when its compiler is
 * present; skips when neither is. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/record.h"
#include "runtime/spec.h"
#include "tool_run.h"

static const char *g_tool;
static char *g_work;
static char g_archs[64];   /* "sm_90,gfx90a", or the one available */
static int g_n_archs;
static char g_first_arch[16];

static const char *const SPECS[] = {"transpose:dtype=f32", "elementwise:dtype=f16,op=relu",
                                    "elementwise:dtype=bf16,op=add"};
#define N_SPECS 3

static int setup(void **state) {
  (void)state;
  g_work = tu_mkdtemp("prewarm-tool");
  if (!g_work) return -1;
  setenv("CKJIT_LOG", "error", 1);
  unsetenv("CKJIT_RECORD");
  unsetenv("CKJIT_PREWARM_TEST_CRASH");
  unsetenv("CKJIT_PREWARM_TEST_HANG");
  const char *cands[] = {"sm_90", "gfx90a"};
  for (int i = 0; i < 2; i++) {
    if (!can_compile(g_work, cands[i])) continue;
    if (g_n_archs++) strcat(g_archs, ",");
    else snprintf(g_first_arch, sizeof g_first_arch, "%s", cands[i]);
    strcat(g_archs, cands[i]);
  }
  printf("# archs: %s\n", g_n_archs ? g_archs : "(none)");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  if (!getenv("CKJIT_TEST_KEEP")) tu_rm_rf(g_work);
  free(g_work);
  return 0;
}

static void need_compiler(void) {
  if (!g_n_archs) {
    printf("# SKIP: neither NVRTC nor hipRTC is available\n");
    skip();
  }
}

static char *cache_dir(const char *name) {
  static char buf[8][1024];
  static int i;
  char *b = buf[i++ % 8];
  tu_fmt(b, 1024, "%s/%s", g_work, name);
  return b;
}

/* ckjit-prewarm --cache-dir DIR [args...] */
static tool_run prewarm(const char *dir, const char *const *args, const char *const *env) {
  const char *argv[64] = {g_tool, "--cache-dir", dir};
  int n = 3;
  for (int i = 0; args && args[i] && n < 63; i++) argv[n++] = args[i];
  argv[n] = NULL;
  return run_tool(g_work, argv, env);
}

static void show(const tool_run *r) {
  printf("# exit %d\n# stdout:\n%s\n# stderr:\n%s\n", r->status, r->out, r->err);
}

#define SUMMARY(r, name) json_num_after((r).out, "\"summary\"", name)

static void test_usage(void **state) {
  (void)state;
  const char *help[] = {g_tool, "--help", NULL};
  tool_run r = run_tool(g_work, help, NULL);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, "--manifest"));
  assert_non_null(strstr(r.out, "-j"));
  assert_non_null(strstr(r.out, "--timeout"));
  assert_null(strstr(r.out, "--worker")); /* hidden */
  tool_run_free(&r);
  const char *none[] = {g_tool, NULL};
  r = run_tool(g_work, none, NULL);
  assert_int_equal(r.status, 2);
  tool_run_free(&r);
  const char *bad[][4] = {{g_tool, "--bogus", "transpose", NULL},
                          {g_tool, "-j", "0", NULL},
                          {g_tool, "-j", "x", NULL},
                          {g_tool, "--timeout", "-1", NULL},
                          {g_tool, "--manifest", NULL, NULL}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    r = run_tool(g_work, bad[i], NULL);
    if (r.status != 2) show(&r);
    assert_int_equal(r.status, 2);
    tool_run_free(&r);
  }
}

static void test_twice_second_compiles_nothing(void **state) {
  (void)state;
  need_compiler();
  const char *dir = cache_dir("twice");
  const char *args[] = {"--arch", g_archs, "--json", "-j", "2", SPECS[0], SPECS[1], SPECS[2], NULL};
  size_t n = (size_t)N_SPECS * (size_t)g_n_archs;
  tool_run r = prewarm(dir, args, NULL);
  if (r.status != 0) show(&r);
  assert_int_equal(r.status, 0);
  assert_int_equal((size_t)SUMMARY(r, "compiled"), n);
  assert_int_equal((size_t)SUMMARY(r, "failed"), 0);
  assert_int_equal((size_t)SUMMARY(r, "workers"), 2);
  assert_int_equal(count_of(r.out, "\"result\": \"compiled\""), n);
  char *keys1 = json_strings_sorted(r.out, "key");
  tool_run_free(&r);

  r = prewarm(dir, args, NULL);
  assert_int_equal(r.status, 0);
  assert_int_equal((size_t)SUMMARY(r, "compiled"), 0);
  assert_int_equal((size_t)SUMMARY(r, "cached"), n);
  char *keys2 = json_strings_sorted(r.out, "key");
  assert_string_equal(keys1, keys2);
  tool_run_free(&r);

  /* The text output says so. */
  const char *text_args[] = {"--arch", g_archs, SPECS[0], SPECS[1], SPECS[2], NULL};
  r = prewarm(dir, text_args, NULL);
  assert_int_equal(r.status, 0);
  if (!strstr(r.out, "nothing to compile")) show(&r);
  assert_non_null(strstr(r.out, "nothing to compile"));
  assert_non_null(strstr(r.out, "worker"));
  tool_run_free(&r);
  free(keys1);
  free(keys2);
}

static void test_j1_and_j2_agree(void **state) {
  (void)state;
  need_compiler();
  char *keys[2];
  const char *jobs[2] = {"1", "2"};
  for (int i = 0; i < 2; i++) {
    char name[32];
    tu_fmt(name, sizeof name, "j%s", jobs[i]);
    const char *args[] = {"--arch", g_archs, "--json", "-j", jobs[i], SPECS[0], SPECS[1], NULL};
    tool_run r = prewarm(cache_dir(name), args, NULL);
    if (r.status != 0) show(&r);
    assert_int_equal(r.status, 0);
    assert_int_equal((size_t)SUMMARY(r, "compiled"), 2 * (size_t)g_n_archs);
    assert_int_equal((int)SUMMARY(r, "workers"), i + 1);
    keys[i] = json_strings_sorted(r.out, "key");
    tool_run_free(&r);
  }
  assert_string_equal(keys[0], keys[1]);
  free(keys[0]);
  free(keys[1]);
}

static void test_bad_spec_and_arch(void **state) {
  (void)state;
  need_compiler();
  char archs[96];
  tu_fmt(archs, sizeof archs, "%s,sm_5x", g_first_arch);
  const char *args[] = {"--arch", archs, "--json", "-j", "2", SPECS[0],
                        "elementwise:dtype=f32,op=no_such_op", NULL};
  tool_run r = prewarm(cache_dir("bad"), args, NULL);
  if (r.status != 1) show(&r);
  assert_int_equal(r.status, 1);
  /* 2 specs x 2 archs: the good pair compiled, three failed. */
  assert_int_equal((int)SUMMARY(r, "compiled"), 1);
  assert_int_equal((int)SUMMARY(r, "failed"), 3);
  assert_int_equal((int)SUMMARY(r, "total"), 4);
  assert_non_null(strstr(r.err, "no_such_op"));
  assert_non_null(strstr(r.err, "sm_5x"));
  assert_non_null(strstr(r.out, "CKJIT_ERROR_INVALID_ARGUMENT"));
  assert_non_null(strstr(r.out, "CKJIT_ERROR_UNSUPPORTED"));
  tool_run_free(&r);
}

static void test_worker_crash_and_timeout(void **state) {
  (void)state;
  need_compiler();
  const char *dir = cache_dir("crash");
  const char *args[] = {"--arch", g_first_arch, "--json", "-j", "2", "--timeout", "2",
                        "transpose:dtype=f32", "transpose:dtype=f16", "transpose:dtype=bf16",
                        "elementwise:dtype=f32,op=relu", "elementwise:dtype=f32,op=silu", NULL};
  const char *env[] = {"CKJIT_PREWARM_TEST_CRASH=dtype=f16", "CKJIT_PREWARM_TEST_HANG=op=silu",
                       NULL};
  tool_run r = prewarm(dir, args, env);
  if (r.status != 1 || SUMMARY(r, "compiled") != 3) show(&r);
  assert_int_equal(r.status, 1);
  assert_int_equal((int)SUMMARY(r, "compiled"), 3);
  assert_int_equal((int)SUMMARY(r, "failed"), 2);
  assert_int_equal((int)SUMMARY(r, "crashed"), 1);
  assert_int_equal((int)SUMMARY(r, "timed_out"), 1);
  assert_int_equal((int)json_num_after(r.out, NULL, "signal"), 11);
  assert_non_null(strstr(r.out, "\"timed_out\": true"));
  assert_non_null(strstr(r.err, "signal 11"));
  assert_non_null(strstr(r.err, "timed out"));
  /* Both lost workers were replaced. */
  assert_true(json_num_after(r.out, NULL, "workers_replaced") >= 1);
  tool_run_free(&r);

  /* -j 1: the one worker crashes on the first item; a replacement does the rest. */
  const char *args1[] = {"--arch", g_first_arch, "--json", "-j", "1", "transpose:dtype=f16",
                         "transpose:dtype=f32", "elementwise:dtype=f32,op=relu", NULL};
  r = prewarm(cache_dir("crash1"), args1, env);
  if (r.status != 1) show(&r);
  assert_int_equal(r.status, 1);
  assert_int_equal((int)SUMMARY(r, "compiled"), 2);
  assert_int_equal((int)SUMMARY(r, "crashed"), 1);
  assert_int_equal((int)json_num_after(r.out, NULL, "workers_started"), 2);
  tool_run_free(&r);
}

static void write_text(const char *path, const char *text) {
  assert_int_equal(tu_write_file(path, text, strlen(text)), 0);
}

static void test_manifest(void **state) {
  (void)state;
  need_compiler();
  char man[1024], text[2048];
  tu_fmt(man, sizeof man, "%s/specs.manifest", g_work);
  tu_fmt(text, sizeof text,
         "# specs for the service\n"
         "\n"
         "%s transpose:dtype=f32\n"                                         /* 3 */
         "ckjit-spec 1 %s transpose:dtype=f32,tile=64,vec=4,threads=256\n" /* 4 duplicate of 3 */
         "elementwise:dtype=f16,op=relu   # for --arch\n"                   /* 5 */
         "ckjit-spec 9 %s transpose:dtype=f16\n"                            /* 6 malformed */
         "%s elementwise:dtype=f32,op=no_such_op\n"                         /* 7 bad spec */
         "%s transpose:dtype=f32\n",                                        /* 8 duplicate */
         g_first_arch, g_first_arch, g_first_arch, g_first_arch, g_first_arch);
  write_text(man, text);
  const char *args[] = {"--arch", g_first_arch, "--json", "--manifest", man, NULL};
  tool_run r = prewarm(cache_dir("manifest"), args, NULL);
  if (r.status != 1) show(&r);
  assert_int_equal(r.status, 1);
  assert_int_equal((int)SUMMARY(r, "compiled"), 2); /* lines 3 and 5 */
  assert_int_equal((int)SUMMARY(r, "duplicates"), 2);
  assert_int_equal((int)SUMMARY(r, "failed"), 2);
  char at6[1100], at7[1100];
  tu_fmt(at6, sizeof at6, "specs.manifest:6");
  tu_fmt(at7, sizeof at7, "specs.manifest:7");
  assert_non_null(strstr(r.err, at6));
  assert_non_null(strstr(r.err, at7));
  assert_non_null(strstr(r.out, "\"origin\""));
  tool_run_free(&r);

  /* A missing manifest is a failure, not a crash. */
  char missing[1100];
  tu_fmt(missing, sizeof missing, "%s/no-such.manifest", g_work);
  const char *args2[] = {"--arch", g_first_arch, "--manifest", missing, SPECS[0], NULL};
  r = prewarm(cache_dir("manifest"), args2, NULL);
  assert_int_equal(r.status, 1);
  assert_non_null(strstr(r.err, "no-such.manifest"));
  tool_run_free(&r);
}

/* CKJIT_RECORD's writer (called directly: the launch path needs a GPU)
 * from several processes, then the file replayed. */
static void test_record_replay(void **state) {
  (void)state;
  need_compiler();
  char rec[1024];
  tu_fmt(rec, sizeof rec, "%s/app.rec", g_work);
  setenv("CKJIT_RECORD", rec, 1);
  for (int proc = 0; proc < 3; proc++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      /* Each "process of the application" uses two kernels. */
      ckjit_spec a, b;
      if (ckjit__spec_parse(SPECS[proc % N_SPECS], &a) ||
          ckjit__spec_parse(SPECS[(proc + 1) % N_SPECS], &b))
        _exit(2);
      int bad = ckjit__record(&a, g_first_arch) | ckjit__record(&b, g_first_arch) |
                ckjit__record(&a, g_first_arch);
      _exit(bad ? 1 : 0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  unsetenv("CKJIT_RECORD");
  /* 3 processes x 2 distinct kernels = 6 lines, 3 distinct. */
  size_t n;
  char *t = tu_read_file(rec, &n);
  assert_non_null(t);
  assert_int_equal(count_of(t, "\n"), 6);
  assert_int_equal(count_of(t, "ckjit-spec 1 "), 6);
  free(t);
  const char *args[] = {"--json", "-j", "2", "--manifest", rec, NULL};
  tool_run r = prewarm(cache_dir("replay"), args, NULL);
  if (r.status != 0) show(&r);
  assert_int_equal(r.status, 0);
  assert_int_equal((int)SUMMARY(r, "compiled"), 3);
  assert_int_equal((int)SUMMARY(r, "duplicates"), 3);
  tool_run_free(&r);
}

static void test_list(void **state) {
  (void)state;
  need_compiler();
  const char *args[] = {"--arch", g_archs, "--list", SPECS[0], "transpose:dtype=f32,tile=64", NULL};
  tool_run r = prewarm(cache_dir("list"), args, NULL);
  assert_int_equal(r.status, 0);
  /* The two spellings are one spec: listed once per arch. */
  assert_int_equal(count_of(r.out, "\n"), (size_t)g_n_archs);
  tool_run_free(&r);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PATH-OF-ckjit-prewarm\n", argv[0]);
    return 2;
  }
  g_tool = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_usage),
      cmocka_unit_test(test_twice_second_compiles_nothing),
      cmocka_unit_test(test_j1_and_j2_agree),
      cmocka_unit_test(test_bad_spec_and_arch),
      cmocka_unit_test(test_worker_crash_and_timeout),
      cmocka_unit_test(test_manifest),
      cmocka_unit_test(test_record_replay),
      cmocka_unit_test(test_list),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
