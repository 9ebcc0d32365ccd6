/* 8 threads compile the same 4 specs for sm_90 at once, into an empty cache:
 * every call succeeds with the same key per spec, and the cache entries
 * verify afterwards. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/disk_cache.h"
#include "cache/key.h"
#include "ckjit/ckjit.h"
#include "portable_specs.h"
#include "test_util.h"

enum { NTHREADS = 8, NSPECS = 4 };

static char *g_base;
static char g_cache[1024];
static char g_specs[NSPECS][256];

typedef struct job {
  int index;
  pthread_barrier_t *barrier;
  ckjit_status status[NSPECS];
  ckjit_compile_result result[NSPECS];
  char message[512];
} job;

static void *compile_thread(void *p) {
  job *j = p;
  pthread_barrier_wait(j->barrier);
  for (int k = 0; k < NSPECS; k++) {
    int s = (k + j->index) % NSPECS; /* overlapping orders */
    j->status[s] = ckjit_compile_spec(g_specs[s], "sm_90", &j->result[s]);
    if (j->status[s] != CKJIT_SUCCESS && !j->message[0])
      snprintf(j->message, sizeof j->message, "%s", ckjit_last_error());
  }
  return NULL;
}

static void test_concurrent_compile(void **state) {
  (void)state;
  size_t n = ckjit_default_spec_count();
  assert_true(n >= 1);
  /* Four specs spread over the default set (ones with a kernel on every arch). */
  for (int k = 0; k < NSPECS; k++)
    assert_int_equal(ps_pick((size_t)k, NSPECS, g_specs[k], 256), 0);

  /* Is NVRTC there at all?  (One compile, then the cache is emptied.) */
  ckjit_compile_result probe;
  ckjit_status st = ckjit_compile_spec(g_specs[0], "sm_90", &probe);
  if (st == CKJIT_ERROR_BACKEND_UNAVAILABLE) {
    printf("SKIP: NVRTC not available: %s\n", ckjit_last_error());
    skip();
  }
  assert_int_equal(st, CKJIT_SUCCESS);
  /* Start again from an empty cache. */
  ckjit_shutdown();
  tu_rm_rf(g_cache);
  ckjit_reset_stats();

  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, NTHREADS);
  pthread_t t[NTHREADS];
  job *jobs = calloc(NTHREADS, sizeof *jobs);
  assert_non_null(jobs);
  for (int i = 0; i < NTHREADS; i++) {
    jobs[i].index = i;
    jobs[i].barrier = &barrier;
    assert_int_equal(pthread_create(&t[i], NULL, compile_thread, &jobs[i]), 0);
  }
  for (int i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&barrier);

  int cached = 0;
  for (int i = 0; i < NTHREADS; i++) {
    for (int s = 0; s < NSPECS; s++) {
      if (jobs[i].status[s] != CKJIT_SUCCESS)
        print_error("thread %d spec %s: %s (%s)\n", i, g_specs[s],
                    ckjit_status_string(jobs[i].status[s]), jobs[i].message);
      assert_int_equal(jobs[i].status[s], CKJIT_SUCCESS);
      assert_true(jobs[i].result[s].code_size > 0);
      assert_string_equal(jobs[i].result[s].key, jobs[0].result[s].key);
      assert_int_equal(jobs[i].result[s].code_size, jobs[0].result[s].code_size);
      cached += jobs[i].result[s].cached;
    }
  }
  ckjit_stats stats;
  ckjit_get_stats(&stats);
  printf("%d calls: %llu compiles, %llu disk hits, %d reported cached\n", NTHREADS * NSPECS,
         (unsigned long long)stats.compiles, (unsigned long long)stats.disk_hits, cached);
  /* Single flight: each distinct spec was compiled exactly once in this
   * process (the cache was empty); every other call reports "cached". */
  assert_int_equal(stats.compiles, NSPECS);
  assert_int_equal(stats.compile_failures, 0);
  assert_int_equal(stats.disk_rejects, 0);
  assert_int_equal(stats.disk_write_errors, 0);
  assert_int_equal((uint64_t)cached, (uint64_t)(NTHREADS * NSPECS) - stats.compiles);

  /* The entries on disk verify. */
  ckjit_disk_cache c;
  ckjit__disk_open(&c, g_cache);
  assert_int_equal(c.usable, 1);
  for (int s = 0; s < NSPECS; s++) {
    ckjit_key key;
    assert_int_equal(ckjit__key_parse(jobs[0].result[s].key, &key), 0);
    void *payload = NULL;
    size_t size = 0;
    ckjit_entry_meta meta;
    assert_int_equal(ckjit__disk_load(&c, &key, &payload, &size, &meta), 1);
    assert_int_equal(size, jobs[0].result[s].code_size);
    assert_string_equal(meta.arch, "sm_90");
    assert_string_equal(meta.kernel, jobs[0].result[s].kernel);
    assert_memory_equal(payload, "\177ELF", 4);
    free(payload);
  }
  free(jobs);
}

static int group_setup(void **state) {
  (void)state;
  g_base = tu_mkdtemp("concurrent");
  if (!g_base) return -1;
  snprintf(g_cache, sizeof g_cache, "%s/cache", g_base);
  setenv("CKJIT_CACHE_DIR", g_cache, 1);
  unsetenv("CKJIT_DUMP_DIR");
  unsetenv("CKJIT_CACHE_DISABLE");
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  ckjit_shutdown();
  tu_rm_rf(g_base);
  free(g_base);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_concurrent_compile),
  };
  return cmocka_run_group_tests_name("compile_concurrent", tests, group_setup, group_teardown);
}
