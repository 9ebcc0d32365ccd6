/* The on-disk cache doing its job: ckjit__disk_open / _store / _load round
 * trips in a fresh temp dir, the documented entry layout, the first writer
 * winning, which stores fsync, threads storing and loading one directory at
 * once, and where the cache lives by default.  Damaged entries are in
 * test_disk_cache_damage.c, unsafe or unusable directories in
 * test_disk_cache_dirs.c: one concept per program, so a failure names it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk_cache_fixture.h"

/* ------------------------------------------------------------------------ */

static void test_open_creates_private_dir(void **state) {
  fixture *f = *state;
  assert_false(tu_path_exists(f->dir));
  open_usable(f);
  assert_string_equal(f->c.dir, f->dir);
  struct stat st;
  assert_int_equal(stat(f->dir, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(st.st_mode & 07777, 0700);
  /* Opening an existing good directory again is fine. */
  open_usable(f);
}

static void test_store_then_load(void **state) {
  fixture *f = *state;
  open_usable(f);
  load_miss(&f->c, 1);
  store_ok(&f->c, 1);
  load_hit(&f->c, 1);
  load_miss(&f->c, 2);
  store_ok(&f->c, 2);
  load_hit(&f->c, 2);
  load_hit(&f->c, 1);
  /* Storing again (same key) replaces the entry in place. */
  store_ok(&f->c, 1);
  load_hit(&f->c, 1);

  /* Documented layout: dir/xx/<32 hex>.ckjit where xx = first two digits. */
  ckjit_entry_meta m;
  uint8_t p[PAYLOAD_MAX];
  size_t n;
  make_entry(1, &m, p, &n);
  char hex[33], want[CKJIT_PATH_MAX], path[CKJIT_PATH_MAX];
  ckjit__key_hex(&m.key, hex);
  tu_fmt(want, sizeof want, "%s/%.2s/%s.ckjit", f->dir, hex, hex);
  ckjit__disk_entry_path(&f->c, &m.key, path, sizeof path);
  assert_string_equal(path, want);

  /* The file is a valid encoded entry. */
  size_t size = 0;
  uint8_t *file = tu_read_file(path, &size);
  assert_non_null(file);
  ckjit_entry_meta got;
  const uint8_t *payload;
  size_t psize;
  const char *why = NULL;
  assert_int_equal(ckjit__entry_decode(file, size, &m.key, &got, &payload, &psize, &why), 0);
  assert_int_equal(psize, n);
  assert_memory_equal(payload, p, n);
  free(file);

  /* Persistent: a new handle on the same directory finds it. */
  ckjit_disk_cache c2;
  ckjit__disk_open(&c2, f->dir);
  assert_int_equal(c2.usable, 1);
  load_hit(&c2, 1);
  load_hit(&c2, 2);
}

/* ckjit__disk_store_first: a key's first verified entry stays and is
 * handed back to a later writer with other bytes (a compiler that is not
 * deterministic); a damaged entry is replaced, not handed back. */
static void test_store_first_writer_wins(void **state) {
  fixture *f = *state;
  open_usable(f);
  ckjit_entry_meta m;
  uint8_t first[PAYLOAD_MAX], second[PAYLOAD_MAX];
  size_t n1, n2;
  make_entry(4, &m, first, &n1);
  n2 = ep_build(second, n1 + 64, m.arch, m.kernel, 999); /* same key, other bytes */
  void *kept = (void *)1;
  size_t kept_size = 0;
  assert_int_equal(ckjit__disk_store_first(&f->c, &m, first, n1, 1, &kept, &kept_size), CKJIT_SUCCESS);
  assert_null(kept); /* nothing there: ours stored */
  assert_int_equal(ckjit__disk_store_first(&f->c, &m, second, n2, 1, &kept, &kept_size), CKJIT_SUCCESS);
  assert_non_null(kept); /* the first entry is the one */
  assert_int_equal(kept_size, n1);
  assert_memory_equal(kept, first, n1);
  free(kept);
  load_hit(&f->c, 4); /* still the first bytes on disk */

  char path[CKJIT_PATH_MAX];
  entry_path(&f->c, 4, path, sizeof path);
  const uint64_t before = rejects();
  truncate_file(path, 10); /* damaged: replaced by the new writer */
  assert_int_equal(ckjit__disk_store_first(&f->c, &m, second, n2, 1, &kept, &kept_size), CKJIT_SUCCESS);
  assert_null(kept);
  assert_int_equal(rejects(), before); /* the writer's look is not a reader's reject */
  void *payload = NULL;
  size_t size = 0;
  ckjit_entry_meta got;
  assert_int_equal(ckjit__disk_load(&f->c, &m.key, &payload, &size, &got), 1);
  assert_int_equal(size, n2);
  assert_memory_equal(payload, second, n2);
  free(payload);
}


/* durable 0 (a copy of a remote hit) stores the entry without the fsync;
 * every other store fsyncs before its rename. */
static int g_fsyncs;
static int count_fsyncs(const char *stage, const char *path) {
  (void)path;
  if (!strcmp(stage, "fsync")) g_fsyncs++;
  return 0;
}

static void test_store_without_fsync(void **state) {
  fixture *f = *state;
  open_usable(f);
  ckjit_entry_meta m;
  uint8_t p[PAYLOAD_MAX];
  size_t n;
  make_entry(6, &m, p, &n);
  void *kept = NULL;
  size_t kept_size = 0;
  g_fsyncs = 0;
  ckjit__disk_fault_hook = count_fsyncs;
  ckjit_status st = ckjit__disk_store_first(&f->c, &m, p, n, 0, &kept, &kept_size);
  int fsyncs_copy = g_fsyncs;
  make_entry(7, &m, p, &n);
  ckjit_status st2 = ckjit__disk_store_first(&f->c, &m, p, n, 1, &kept, &kept_size);
  ckjit__disk_fault_hook = NULL;
  assert_int_equal(st, CKJIT_SUCCESS);
  assert_int_equal(st2, CKJIT_SUCCESS);
  assert_null(kept);
  assert_int_equal(fsyncs_copy, 0);
  assert_int_equal(g_fsyncs, 1);
  load_hit(&f->c, 6);
  load_hit(&f->c, 7);
}

typedef struct race_arg {
  ckjit_disk_cache *c;
  int id;
  int bad; /* loads that returned a wrong payload */
  int failed_stores;
} race_arg;

static void *race_thread(void *p) {
  race_arg *a = p;
  ckjit_entry_meta m;
  uint8_t pay[PAYLOAD_MAX];
  size_t n;
  make_entry(a->id % 3, &m, pay, &n);
  for (int it = 0; it < 40; it++) {
    if (ckjit__disk_store(a->c, &m, pay, n) != CKJIT_SUCCESS) a->failed_stores++;
    void *got = NULL;
    size_t size = 0;
    ckjit_entry_meta meta;
    int rc = ckjit__disk_load(a->c, &m.key, &got, &size, &meta);
    if (rc != 1 || size != n || memcmp(got, pay, n) != 0) a->bad++;
    free(got);
  }
  return NULL;
}

static void test_concurrent_store_load(void **state) {
  fixture *f = *state;
  open_usable(f);
  uint64_t r0 = rejects();
  enum { T = 8 };
  pthread_t t[T];
  race_arg a[T];
  for (int i = 0; i < T; i++) {
    a[i] = (race_arg){&f->c, i, 0, 0};
    assert_int_equal(pthread_create(&t[i], NULL, race_thread, &a[i]), 0);
  }
  for (int i = 0; i < T; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(a[i].failed_stores, 0);
    assert_int_equal(a[i].bad, 0);
  }
  assert_int_equal(rejects(), r0);
  assert_int_equal(f->c.writable, 1);
  for (int id = 0; id < 3; id++) load_hit(&f->c, id);
}

static void test_default_dir(void **state) {
  (void)state;
  char *saved[3];
  const char *vars[3] = {"CKJIT_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
  for (int i = 0; i < 3; i++) saved[i] = getenv(vars[i]) ? strdup(getenv(vars[i])) : NULL;
  char out[CKJIT_PATH_MAX];

  setenv("CKJIT_CACHE_DIR", "/env/ckjit-cache", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("HOME", "/home/someone", 1);
  assert_int_equal(ckjit__disk_default_dir("/explicit/dir", out, sizeof out), 0);
  assert_string_equal(out, "/explicit/dir");
  assert_int_equal(ckjit__disk_default_dir(NULL, out, sizeof out), 0);
  assert_string_equal(out, "/env/ckjit-cache");
  unsetenv("CKJIT_CACHE_DIR");
  assert_int_equal(ckjit__disk_default_dir(NULL, out, sizeof out), 0);
  assert_string_equal(out, "/xdg/ckjit");
  unsetenv("XDG_CACHE_HOME");
  assert_int_equal(ckjit__disk_default_dir(NULL, out, sizeof out), 0);
  assert_string_equal(out, "/home/someone/.cache/ckjit");
  unsetenv("HOME");
  assert_int_equal(ckjit__disk_default_dir(NULL, out, sizeof out), -1);
  assert_int_equal(ckjit__disk_default_dir("/explicit/dir", out, sizeof out), 0);
  assert_string_equal(out, "/explicit/dir");

  for (int i = 0; i < 3; i++) {
    if (saved[i]) setenv(vars[i], saved[i], 1);
    else unsetenv(vars[i]);
    free(saved[i]);
  }
}

int main(void) {
  /* Stores by this process must not depend on the caller's umask. */
  umask(022);
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_open_creates_private_dir),
      T(test_store_then_load),
      T(test_store_first_writer_wins),
      T(test_store_without_fsync),
      T(test_concurrent_store_load),
      cmocka_unit_test(test_default_dir),
  };
#undef T
  return cmocka_run_group_tests_name("disk_cache", tests, NULL, NULL);
}
