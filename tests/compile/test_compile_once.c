/* "Each kernel compiled at most once per process", under every disk fault,
 * and ckjit_compile_spec's report of whether the entry reached the disk
 * (issue 15, items 4 and 5):
 *
 *   - stores failing with ENOSPC or EROFS (ckjit__disk_fault_hook): N specs
 *     asked twice each compile N times; every call returns
 *     CKJIT_ERROR_CACHE naming the reason, with the result filled in;
 *   - an entry removed after it was stored is written again from memory,
 *     without a compile;
 *   - a directory at an entry's path: that entry fails, compiled once;
 *   - an unusable cache directory: CKJIT_ERROR_CACHE naming it;
 *   - the disk cache turned off: success with stored = 0, compiled once;
 *   - the in-memory bound (CKJIT_CACHE_MAX_ENTRIES): least recently used out;
 *   - threads asking for the same specs under a full disk;
 *   - the code-object cache itself (runtime/code_cache.h): hits, the bound,
 *     the newest kept, waiters woken by put and by abandon.
 *
 * Uses NVRTC (sm_90), else hipRTC (gfx90a); the compile parts skip with a
 * message when neither is present. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/disk_cache.h" /* ckjit__disk_fault_hook */
#include "cache/entry.h"
#include "cache/key.h"
#include "ckjit/ckjit.h"
#include "runtime/code_cache.h"
#include "test_util.h"

enum { NSPEC = 3 };
static const char *const g_spec[NSPEC] = {"transpose:dtype=f32", "transpose:dtype=f16",
                                          "elementwise:dtype=f32,op=relu"};
static const char *g_arch;
static char g_key[NSPEC][33];
static char *g_root;
static int g_dirs;

/* A fresh cache directory and a fresh "process" (runtime, memory, stats),
 * with nothing left over from a test that failed half way. */
static void new_process(char *dir, size_t len) {
  tu_fmt(dir, len, "%s/c%d", g_root, g_dirs++);
  ckjit_shutdown();
  ckjit__disk_fault_hook = NULL;
  unsetenv("CKJIT_CACHE_DISABLE");
  unsetenv("CKJIT_CACHE_MAX_ENTRIES");
  setenv("CKJIT_CACHE_DIR", dir, 1);
  ckjit_reset_stats();
}

static uint64_t compiles(void) {
  ckjit_stats s;
  ckjit_get_stats(&s);
  return s.compiles;
}

static void entry_path(const char *dir, int s, char *out, size_t len) {
  tu_fmt(out, len, "%s/%.2s/%s.ckjit", dir, g_key[s], g_key[s]);
}

/* ckjit_compile_spec of spec s: `want` status, the clean key, a code
 * object, and `stored` as the status implies.  Returns `cached`. */
static int compile_expect(int s, ckjit_status want) {
  ckjit_compile_result r;
  ckjit_status st = ckjit_compile_spec(g_spec[s], g_arch, &r);
  if (st != want)
    fail_msg("ckjit_compile_spec(%s, %s): %s (%s), expected %s", g_spec[s], g_arch,
             ckjit_status_string(st), ckjit_last_error(), ckjit_status_string(want));
  assert_string_equal(r.key, g_key[s]);
  assert_true(r.code_size > 0);
  if (want == CKJIT_ERROR_CACHE) {
    assert_int_equal(r.stored, 0);
    assert_non_null(strstr(ckjit_last_error(), "not stored in the disk cache"));
  }
  return r.cached;
}

/* ---- stores that fail ---------------------------------------------------- */

static struct {
  const char *stage;
  int err;
} hk;

static int hook(const char *stage, const char *path) {
  (void)path;
  return hk.stage && !strcmp(stage, hk.stage) ? hk.err : 0;
}

static int count_entries(const char *dir) {
  int n = 0;
  for (int s = 0; s < NSPEC; s++) {
    char p[1400];
    entry_path(dir, s, p, sizeof p);
    n += tu_path_exists(p);
  }
  return n;
}

static void test_write_faults_compile_once(void **state) {
  (void)state;
  const char *stages[] = {"open-temp", "rename"};
  const int errs[] = {ENOSPC, EROFS};
  for (int st = 0; st < 2; st++)
    for (int e = 0; e < 2; e++) {
      char dir[1100];
      new_process(dir, sizeof dir);
      hk.stage = stages[st];
      hk.err = errs[e];
      ckjit__disk_fault_hook = hook;
      for (int round = 0; round < 2; round++)
        for (int s = 0; s < NSPEC; s++) {
          assert_int_equal(compile_expect(s, CKJIT_ERROR_CACHE), round == 1);
          if (!strstr(ckjit_last_error(), strerror(errs[e])))
            fail_msg("the reason (%s) is not named: %s", strerror(errs[e]), ckjit_last_error());
        }
      ckjit__disk_fault_hook = NULL;
      printf("%s at %s: %llu compiles for %d specs asked twice\n", strerror(errs[e]), stages[st],
             (unsigned long long)compiles(), NSPEC);
      assert_int_equal(compiles(), NSPEC);
      assert_int_equal(count_entries(dir), 0);
      /* A later process with room stores them. */
      ckjit_shutdown();
      ckjit_reset_stats();
      for (int s = 0; s < NSPEC; s++) assert_int_equal(compile_expect(s, CKJIT_SUCCESS), 0);
      assert_int_equal(count_entries(dir), NSPEC);
    }
}

/* An entry removed after it was stored (ckjit-cache clear, eviction by
 * another process) is written again from memory, not compiled again. */
static void test_removed_entry_written_again(void **state) {
  (void)state;
  char dir[1100], path[1400];
  new_process(dir, sizeof dir);
  assert_int_equal(compile_expect(0, CKJIT_SUCCESS), 0);
  entry_path(dir, 0, path, sizeof path);
  assert_int_equal(unlink(path), 0);
  ckjit_compile_result r;
  assert_int_equal(ckjit_compile_spec(g_spec[0], g_arch, &r), CKJIT_SUCCESS);
  assert_int_equal(r.cached, 1);
  assert_int_equal(r.stored, 1);
  assert_true(tu_path_exists(path));
  ckjit_stats s;
  ckjit_get_stats(&s);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.disk_writes, 2);
  /* And it is a valid entry: a fresh process hits it. */
  ckjit_shutdown();
  ckjit_reset_stats();
  assert_int_equal(compile_expect(0, CKJIT_SUCCESS), 1);
  assert_int_equal(compiles(), 0);
}

/* A directory where spec 0's entry belongs: spec 0 fails, compiled once;
 * spec 1 compiles once too, stored or not (whether one bad name turns
 * writes off for the process is the disk cache's business). */
static void test_bad_entry_name(void **state) {
  (void)state;
  char dir[1100], path[1400], sub[1400];
  new_process(dir, sizeof dir);
  entry_path(dir, 0, path, sizeof path);
  tu_fmt(sub, sizeof sub, "%s", path);
  *strrchr(sub, '/') = '\0';
  assert_int_equal(mkdir(dir, 0700), 0);
  assert_int_equal(mkdir(sub, 0700), 0);
  assert_int_equal(mkdir(path, 0700), 0);
  assert_int_equal(compile_expect(0, CKJIT_ERROR_CACHE), 0);
  assert_int_equal(compile_expect(0, CKJIT_ERROR_CACHE), 1);
  for (int round = 0; round < 2; round++) {
    ckjit_compile_result r;
    ckjit_status st = ckjit_compile_spec(g_spec[1], g_arch, &r);
    assert_true(st == CKJIT_SUCCESS || st == CKJIT_ERROR_CACHE);
    assert_int_equal(r.stored, st == CKJIT_SUCCESS);
    assert_string_equal(r.key, g_key[1]);
  }
  assert_int_equal(compiles(), 2);
}

/* A cache directory that cannot be used (a file is in the way). */
static void test_unusable_directory(void **state) {
  (void)state;
  char dir[1100];
  new_process(dir, sizeof dir);
  assert_int_equal(tu_write_file(dir, "x", 1), 0);
  assert_int_equal(compile_expect(0, CKJIT_ERROR_CACHE), 0);
  assert_non_null(strstr(ckjit_last_error(), dir));
  assert_int_equal(compile_expect(0, CKJIT_ERROR_CACHE), 1);
  assert_int_equal(compiles(), 1);
}

/* The disk cache turned off: nothing is missing, so success; still one
 * compile per kernel. */
static void test_disk_cache_off(void **state) {
  (void)state;
  char dir[1100];
  new_process(dir, sizeof dir);
  setenv("CKJIT_CACHE_DISABLE", "1", 1);
  for (int round = 0; round < 2; round++) {
    ckjit_compile_result r;
    assert_int_equal(ckjit_compile_spec(g_spec[0], g_arch, &r), CKJIT_SUCCESS);
    assert_int_equal(r.stored, 0);
    assert_int_equal(r.cached, round);
    assert_string_equal(r.key, g_key[0]);
  }
  assert_int_equal(compiles(), 1);
  assert_false(tu_path_exists(dir));
  ckjit_shutdown();
  unsetenv("CKJIT_CACHE_DISABLE");
}

/* The code objects in memory are bounded like the disk cache: with room for
 * two, A B A C A compiles A, B and C once each (B, the least recently used,
 * goes for C); B then compiles again. */
static void test_memory_bound(void **state) {
  (void)state;
  char dir[1100];
  new_process(dir, sizeof dir);
  setenv("CKJIT_CACHE_MAX_ENTRIES", "2", 1);
  hk.stage = "open-temp";
  hk.err = ENOSPC;
  ckjit__disk_fault_hook = hook;
  const int order[] = {0, 1, 0, 2, 0};
  const int cached[] = {0, 0, 1, 0, 1};
  for (int i = 0; i < 5; i++) assert_int_equal(compile_expect(order[i], CKJIT_ERROR_CACHE), cached[i]);
  assert_int_equal(compiles(), 3);
  assert_int_equal(compile_expect(1, CKJIT_ERROR_CACHE), 0);
  assert_int_equal(compiles(), 4);
  ckjit__disk_fault_hook = NULL;
  unsetenv("CKJIT_CACHE_MAX_ENTRIES");
  ckjit_shutdown();
}

/* Threads asking for the same specs, twice each, under a full disk. */
static void *thread_main(void *arg) {
  (void)arg;
  for (int round = 0; round < 2; round++)
    for (int s = 0; s < NSPEC; s++)
      if (ckjit_compile_spec(g_spec[s], g_arch, NULL) != CKJIT_ERROR_CACHE) return (void *)1;
  return NULL;
}

static void test_threads_full_disk(void **state) {
  (void)state;
  char dir[1100];
  new_process(dir, sizeof dir);
  hk.stage = "write";
  hk.err = ENOSPC;
  ckjit__disk_fault_hook = hook;
  enum { THREADS = 4 };
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, thread_main, NULL), 0);
  int bad = 0;
  for (int i = 0; i < THREADS; i++) {
    void *r;
    pthread_join(t[i], &r);
    bad += r != NULL;
  }
  ckjit__disk_fault_hook = NULL;
  assert_int_equal(bad, 0);
  assert_int_equal(compiles(), NSPEC);
  ckjit_shutdown();
}

/* ---- the code-object cache itself ---------------------------------------- */

static ckjit_key key_n(int n) {
  ckjit_key k;
  memset(&k, 0, sizeof k);
  k.bytes[0] = (uint8_t)n;
  k.bytes[15] = 0xA5;
  return k;
}

static ckjit_code_claim claim(int n, ckjit_buffer *b) {
  ckjit_key k = key_n(n);
  return ckjit__code_cache_claim(&k, b);
}

static void put(int n, size_t size, uint64_t max_bytes, uint64_t max_entries) {
  ckjit_key k = key_n(n);
  char data[64];
  memset(data, n, sizeof data);
  ckjit__code_cache_put(&k, data, size, max_bytes, max_entries);
}

/* Claims key n and expects a hit of `size` bytes of value n. */
static void expect_hit(int n, size_t size) {
  ckjit_buffer b;
  assert_int_equal(claim(n, &b), CKJIT_CODE_HIT);
  assert_int_equal(b.size, size);
  for (size_t i = 0; i < size; i++) assert_int_equal((unsigned char)b.data[i], n);
  ckjit__buf_free(&b);
}

static void expect_build(int n) {
  ckjit_buffer b;
  assert_int_equal(claim(n, &b), CKJIT_CODE_BUILD);
  assert_null(b.data);
}

typedef struct waiter {
  int key;
  ckjit_code_claim got;
  size_t size;
} waiter;

static void *waiter_main(void *arg) {
  waiter *w = arg;
  ckjit_buffer b;
  w->got = claim(w->key, &b);
  w->size = b.size;
  ckjit__buf_free(&b);
  return NULL;
}

static void test_code_cache_unit(void **state) {
  (void)state;
  ckjit__code_cache_clear();
  /* Miss, build, hit. */
  expect_build(1);
  put(1, 10, 0, 0);
  expect_hit(1, 10);
  /* Bound by entries: 1 and 2 fit, 3 pushes out the least recently used. */
  expect_build(2);
  put(2, 10, 0, 2);
  expect_hit(1, 10); /* 1 is now the most recent */
  expect_build(3);
  put(3, 10, 0, 2);
  expect_hit(1, 10);
  expect_hit(3, 10);
  expect_build(2);
  ckjit__code_cache_abandon(&(ckjit_key){0}); /* a key nobody holds: nothing happens */
  {
    ckjit_key k2 = key_n(2);
    ckjit__code_cache_abandon(&k2);
  }
  /* Bound by bytes: the newest stays even when it alone is over. */
  expect_build(4);
  put(4, 64, 32, 0);
  expect_hit(4, 64);
  expect_build(1); /* pushed out by 4 */
  {
    ckjit_key k1 = key_n(1);
    ckjit__code_cache_abandon(&k1);
  }
  /* A waiter gets the builder's result... */
  expect_build(5);
  waiter w = {5, CKJIT_CODE_NO_MEMORY, 0};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
  usleep(50 * 1000);
  put(5, 7, 0, 0);
  pthread_join(t, NULL);
  assert_int_equal(w.got, CKJIT_CODE_HIT);
  assert_int_equal(w.size, 7);
  /* ...or, when the build failed, builds it itself. */
  expect_build(6);
  waiter w2 = {6, CKJIT_CODE_NO_MEMORY, 0};
  assert_int_equal(pthread_create(&t, NULL, waiter_main, &w2), 0);
  usleep(50 * 1000);
  {
    ckjit_key k6 = key_n(6);
    ckjit__code_cache_abandon(&k6);
  }
  pthread_join(t, NULL);
  assert_int_equal(w2.got, CKJIT_CODE_BUILD);
  {
    ckjit_key k6 = key_n(6);
    ckjit__code_cache_abandon(&k6);
  }
  ckjit__code_cache_clear();
  expect_build(4); /* cleared */
  ckjit__code_cache_clear();
}

/* ---- set-up -------------------------------------------------------------- */

static int group_setup(void **state) {
  (void)state;
  g_root = tu_mkdtemp("compile-once");
  if (!g_root) return -1;
  tu_unset_cache_settings();
  setenv("CKJIT_LOG", "error", 1);
  const char *archs[] = {"sm_90", "gfx90a"};
  char dir[1100];
  for (int a = 0; a < 2 && !g_arch; a++) {
    new_process(dir, sizeof dir);
    ckjit_compile_result r;
    ckjit_status st = ckjit_compile_spec(g_spec[0], archs[a], &r);
    if (st == CKJIT_SUCCESS) g_arch = archs[a];
    else printf("note: %s: %s: %s\n", archs[a], ckjit_status_string(st), ckjit_last_error());
  }
  if (!g_arch) return 0;
  printf("compiling for %s\n", g_arch);
  for (int s = 0; s < NSPEC; s++) {
    ckjit_compile_result r;
    if (ckjit_compile_spec(g_spec[s], g_arch, &r) != CKJIT_SUCCESS) return -1;
    tu_fmt(g_key[s], sizeof g_key[s], "%s", r.key);
  }
  ckjit_shutdown();
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  ckjit__disk_fault_hook = NULL;
  ckjit_shutdown();
  if (!getenv("CKJIT_TEST_KEEP")) tu_rm_rf(g_root);
  free(g_root);
  return 0;
}

#define NEED_ARCH(fn)                                                                      \
  static void w_##fn(void **state) {                                                       \
    if (!g_arch) {                                                                         \
      printf("SKIP: neither NVRTC (sm_90) nor hipRTC (gfx90a) can compile here\n");        \
      skip();                                                                              \
    }                                                                                      \
    fn(state);                                                                             \
  }
NEED_ARCH(test_write_faults_compile_once)
NEED_ARCH(test_removed_entry_written_again)
NEED_ARCH(test_bad_entry_name)
NEED_ARCH(test_unusable_directory)
NEED_ARCH(test_disk_cache_off)
NEED_ARCH(test_memory_bound)
NEED_ARCH(test_threads_full_disk)

int main(void) {
  umask(022);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_code_cache_unit),
      cmocka_unit_test(w_test_write_faults_compile_once),
      cmocka_unit_test(w_test_removed_entry_written_again),
      cmocka_unit_test(w_test_bad_entry_name),
      cmocka_unit_test(w_test_unusable_directory),
      cmocka_unit_test(w_test_disk_cache_off),
      cmocka_unit_test(w_test_memory_bound),
      cmocka_unit_test(w_test_threads_full_disk),
  };
  return cmocka_run_group_tests_name("compile_once", tests, group_setup, group_teardown);
}
