/* Size and count bounds of the writable cache: least-recently-used eviction
 * (ckjit__disk_evict, and automatically after stores), recency from the
 * entry file's mtime (set by verified hits), stale temporary files, entries
 * open in another reader, and the settings (CKJIT_CACHE_MAX_SIZE, ...). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "cache/eviction.h"
#include "cache/layout.h"
#include "cache/settings.h"
#include "runtime/runtime.h"
#include "cache_test_util.h"

typedef struct fixture {
  char *base;
  char dir[CKJIT_PATH_MAX];
  ckjit_disk_cache c;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || !(f->base = tu_mkdtemp("cache-evict"))) return -1;
  tu_fmt(f->dir, sizeof f->dir, "%s/cache", f->base);
  ckjit__disk_open(&f->c, f->dir);
  if (!f->c.usable || !f->c.writable) return -1;
  f->c.max_bytes = f->c.max_entries = 0; /* tests pick their bounds */
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  tu_rm_rf(f->base);
  free(f->base);
  free(f);
  return 0;
}

/* Stores ids [0, n) of `size` bytes with last uses base + 10 * id. */
static void store_aged(fixture *f, int n, size_t size, time_t base) {
  for (int i = 0; i < n; i++) {
    assert_int_equal(tc_store(&f->c, i, size), CKJIT_SUCCESS);
    assert_int_equal(tc_set_mtime(f->dir, i, base + 10 * i), 0);
  }
}

static void test_count_bound_lru_order(void **state) {
  fixture *f = *state;
  time_t base = time(NULL) - 100000;
  store_aged(f, 20, 300, base);
  /* Use the three oldest: verified hits make them the most recent. */
  for (int i = 0; i < 3; i++) assert_int_equal(tc_load(&f->c, i, 300), 1);
  for (int i = 0; i < 3; i++) assert_true(tc_mtime(f->dir, i) >= time(NULL) - 5);
  /* Under the bound: nothing happens. */
  ckjit_evict_report r;
  assert_int_equal(ckjit__disk_evict(f->dir, 0, 20, 100, &r), 0);
  assert_int_equal(r.entries_before, 20);
  assert_int_equal(r.removed, 0);
  assert_int_equal(tc_count(f->dir, NULL), 20);
  /* Bound 10: the ten least recently used go (3..12), the used ones stay. */
  assert_int_equal(ckjit__disk_evict(f->dir, 0, 10, 100, &r), 0);
  assert_int_equal(r.removed, 10);
  assert_int_equal(r.entries_after, 10);
  assert_int_equal(r.failed, 0);
  for (int i = 0; i < 20; i++) {
    int want = i < 3 || i >= 13;
    if (tc_exists(f->dir, i) != want) print_error("entry %d: exists=%d, want %d\n", i, !want, want);
    assert_int_equal(tc_exists(f->dir, i), want);
  }
  /* Low water: over a bound of 9, 90% keeps 8 (the two oldest left go). */
  assert_int_equal(ckjit__disk_evict(f->dir, 0, 9, 90, &r), 0);
  assert_int_equal(r.removed, 2);
  assert_false(tc_exists(f->dir, 13));
  assert_false(tc_exists(f->dir, 14));
  assert_true(tc_exists(f->dir, 15));
  for (int i = 0; i < 3; i++) assert_int_equal(tc_load(&f->c, i, 300), 1);
  /* Evicted entries are plain misses. */
  uint64_t r0 = tc_rejects();
  assert_int_equal(tc_load(&f->c, 5, 300), 0);
  assert_int_equal(tc_rejects(), r0);
}

static void test_size_bound_lru_order(void **state) {
  fixture *f = *state;
  time_t base = time(NULL) - 100000;
  enum { N = 12, SIZE = 2000 };
  store_aged(f, N, SIZE, base);
  uint64_t total;
  assert_int_equal(tc_count(f->dir, &total), N);
  uint64_t file = tc_file_size(0, SIZE);
  assert_true(total >= N * (uint64_t)SIZE && total <= N * file + N * 16);
  /* Touch 0 and 1 through hits. */
  assert_int_equal(tc_load(&f->c, 1, SIZE), 1);
  assert_int_equal(tc_load(&f->c, 0, SIZE), 1);
  /* Room for about 5.5 entries: 7 of them go, oldest use first (2..8). */
  uint64_t bound = total * 55 / 120;
  ckjit_evict_report r;
  assert_int_equal(ckjit__disk_evict(f->dir, bound, 0, 100, &r), 0);
  assert_true(r.bytes_after <= bound);
  assert_int_equal(r.bytes_before, total);
  assert_int_equal(r.bytes_before - r.removed_bytes, r.bytes_after);
  uint64_t left;
  assert_int_equal(tc_count(f->dir, &left), (int)r.entries_after);
  assert_int_equal(left, r.bytes_after);
  for (int i = 2; i < 2 + (int)r.removed; i++) assert_false(tc_exists(f->dir, i));
  for (int i = 2 + (int)r.removed; i < N; i++) assert_true(tc_exists(f->dir, i));
  assert_true(tc_exists(f->dir, 0));
  assert_true(tc_exists(f->dir, 1));
  /* The remaining ones still verify. */
  assert_int_equal(tc_load(&f->c, N - 1, SIZE), 1);
  /* 0 means no bound. */
  assert_int_equal(ckjit__disk_evict(f->dir, 0, 0, 100, &r), 0);
  assert_int_equal(r.removed, 0);
}

/* Stores through ckjit__disk_store with bounds set keep the directory within
 * them, evicting the least recently used; a hot entry survives. */
static void test_automatic_eviction_on_store(void **state) {
  fixture *f = *state;
  f->c.max_entries = 20;
  time_t base = time(NULL) - 100000;
  for (int i = 1; i <= 120; i++) {
    assert_int_equal(tc_store(&f->c, i, 200), CKJIT_SUCCESS);
    assert_int_equal(tc_set_mtime(f->dir, i, base + i), 0); /* time passes */
    if (i % 7 == 0) assert_int_equal(tc_load(&f->c, 1, 200), 1); /* keeps 1 hot */
    int n = tc_count(f->dir, NULL);
    if (n > 20) print_error("after store %d: %d entries > bound 20\n", i, n);
    assert_true(n <= 20);
  }
  assert_int_equal(f->c.writable, 1);
  /* The survivors are the hot one and the most recent stores, contiguous. */
  assert_true(tc_exists(f->dir, 1));
  int n = tc_count(f->dir, NULL);
  assert_true(n >= 18 && n <= 20);
  for (int i = 120; i > 120 - (n - 1); i--) assert_true(tc_exists(f->dir, i));
  for (int i = 2; i <= 120 - (n - 1); i++) assert_false(tc_exists(f->dir, i));

  /* By size: entries of ~1 KiB under a 16 KiB bound. */
  f->c.max_entries = 0;
  f->c.max_bytes = 16 * 1024;
  for (int i = 200; i < 260; i++) {
    assert_int_equal(tc_store(&f->c, i, 1000), CKJIT_SUCCESS);
    assert_int_equal(tc_set_mtime(f->dir, i, base + i), 0);
    uint64_t bytes;
    tc_count(f->dir, &bytes);
    if (bytes > f->c.max_bytes) print_error("after store %d: %llu bytes\n", i, (unsigned long long)bytes);
    assert_true(bytes <= f->c.max_bytes);
  }
  assert_true(tc_exists(f->dir, 259));
  assert_int_equal(tc_load(&f->c, 259, 1000), 1);
}

/* The per-process estimate samples a few subdirectories, not the whole
 * directory: a cache far under its bounds is never fully scanned (proved
 * here by a stale temporary file that only a full scan would remove). */
static void test_no_full_scan_under_bounds(void **state) {
  fixture *f = *state;
  f->c.max_entries = 50000;
  f->c.max_bytes = 1ull << 30;
  assert_int_equal(tc_store(&f->c, 1, 100), CKJIT_SUCCESS);
  char stale[CKJIT_PATH_MAX + 128];
  tu_fmt(stale, sizeof stale, "%s/ff/.tmp-%032d-1-a-0", f->dir, 0);
  char ff[CKJIT_PATH_MAX + 8];
  tu_fmt(ff, sizeof ff, "%s/ff", f->dir);
  mkdir(ff, 0700);
  assert_int_equal(tu_write_file(stale, "x", 1), 0);
  struct timespec old[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
  assert_int_equal(utimensat(AT_FDCWD, stale, old, 0), 0);
  for (int i = 2; i < 200; i++) assert_int_equal(tc_store(&f->c, i, 100), CKJIT_SUCCESS);
  assert_true(tu_path_exists(stale));
  assert_int_equal(f->c.usage.sampled, 1);
  assert_true(f->c.usage.entries < 2000);
  /* A full scan (eviction) removes it. */
  ckjit_evict_report r;
  assert_int_equal(ckjit__disk_evict(f->dir, 0, 0, 100, &r), 0);
  assert_int_equal(r.temps_removed, 1);
  assert_false(tu_path_exists(stale));
}

static void test_stale_temp_files(void **state) {
  fixture *f = *state;
  assert_int_equal(tc_store(&f->c, 1, 100), CKJIT_SUCCESS);
  char p1[CKJIT_ENTRY_PATH_MAX], sub[CKJIT_ENTRY_PATH_MAX];
  tc_path(f->dir, 1, p1, sizeof p1);
  tu_fmt(sub, sizeof sub, "%s", p1);
  *strrchr(sub, '/') = 0;
  ckjit_key k = tc_key(1);
  char hex[33], name[128];
  ckjit__key_hex(&k, hex);
  struct {
    char path[CKJIT_ENTRY_PATH_MAX + 128];
    int age_s;
    int removed;
  } files[6];
  int n = 0;
  ckjit__cache_temp_name(hex, name, sizeof name);
  tu_fmt(files[n].path, sizeof files[n].path, "%s/%s", sub, name);
  files[n].age_s = 2 * 3600, files[n++].removed = 1;  /* a crashed writer's */
  ckjit__cache_temp_name(hex, name, sizeof name);
  tu_fmt(files[n].path, sizeof files[n].path, "%s/%s", sub, name);
  files[n].age_s = 60, files[n++].removed = 0;        /* a writer at work */
  tu_fmt(files[n].path, sizeof files[n].path, "%s/.tmp-foreign", sub);
  files[n].age_s = 2 * 3600, files[n++].removed = 0;  /* not our name */
  tu_fmt(files[n].path, sizeof files[n].path, "%s/notes.txt", sub);
  files[n].age_s = 9 * 3600, files[n++].removed = 0;
  tu_fmt(files[n].path, sizeof files[n].path, "%s/.tmp-%s-1-1-1", f->dir, hex);
  files[n].age_s = 9 * 3600, files[n++].removed = 0;  /* not in a subdirectory */
  for (int i = 0; i < n; i++) {
    assert_int_equal(tu_write_file(files[i].path, "partial", 7), 0);
    time_t t = time(NULL) - files[i].age_s;
    struct timespec ts[2] = {{t, 0}, {t, 0}};
    assert_int_equal(utimensat(AT_FDCWD, files[i].path, ts, 0), 0);
  }
  ckjit_evict_report r;
  assert_int_equal(ckjit__disk_evict(f->dir, 0, 0, 100, &r), 0);
  assert_int_equal(r.temps_removed, 1);
  for (int i = 0; i < n; i++) assert_int_equal(tu_path_exists(files[i].path), !files[i].removed);
  assert_int_equal(tc_load(&f->c, 1, 100), 1);
}

/* A reader that has an entry open keeps reading it after eviction removed
 * it; afterwards the key is a plain miss and can be stored again. */
static void test_evicted_while_open(void **state) {
  fixture *f = *state;
  assert_int_equal(tc_store(&f->c, 1, 4000), CKJIT_SUCCESS);
  assert_int_equal(tc_store(&f->c, 2, 4000), CKJIT_SUCCESS);
  assert_int_equal(tc_set_mtime(f->dir, 1, time(NULL) - 5000), 0);
  char path[CKJIT_ENTRY_PATH_MAX];
  tc_path(f->dir, 1, path, sizeof path);
  size_t before_size;
  uint8_t *before = tu_read_file(path, &before_size);
  assert_non_null(before);
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  uint8_t head[100];
  assert_int_equal(read(fd, head, sizeof head), (ssize_t)sizeof head);
  ckjit_evict_report r;
  assert_int_equal(ckjit__disk_evict(f->dir, 0, 1, 100, &r), 0);
  assert_int_equal(r.removed, 1);
  assert_false(tu_path_exists(path));
  /* The open reader still gets every byte. */
  uint8_t *rest = malloc(before_size);
  assert_non_null(rest);
  memcpy(rest, head, sizeof head);
  size_t got = sizeof head;
  ssize_t k;
  while ((k = read(fd, rest + got, before_size - got)) > 0) got += (size_t)k;
  close(fd);
  assert_int_equal(got, before_size);
  assert_memory_equal(rest, before, before_size);
  const uint8_t *payload;
  size_t psize;
  ckjit_key key = tc_key(1);
  assert_int_equal(ckjit__entry_decode(rest, got, &key, NULL, &payload, &psize, NULL), 0);
  free(rest);
  free(before);
  uint64_t r0 = tc_rejects();
  assert_int_equal(tc_load(&f->c, 1, 4000), 0);
  assert_int_equal(tc_rejects(), r0);
  assert_int_equal(tc_load(&f->c, 2, 4000), 1);
  assert_int_equal(tc_store(&f->c, 1, 4000), CKJIT_SUCCESS);
  assert_int_equal(tc_load(&f->c, 1, 4000), 1);
}

/* Eviction never touches what is not an entry of its own: foreign files,
 * misplaced entries, symlinks, subdirectories. */
static void test_evict_leaves_foreign_items(void **state) {
  fixture *f = *state;
  time_t base = time(NULL) - 100000;
  store_aged(f, 4, 100, base);
  char p0[CKJIT_ENTRY_PATH_MAX], link[CKJIT_ENTRY_PATH_MAX + 16], foreign[CKJIT_PATH_MAX + 32],
      outside[CKJIT_PATH_MAX + 32], misplaced[CKJIT_PATH_MAX + 64];
  tc_path(f->dir, 0, p0, sizeof p0);
  tu_fmt(outside, sizeof outside, "%s/outside.ckjit", f->base);
  assert_int_equal(tu_write_file(outside, "keep", 4), 0);
  /* A symlink with another entry's name, pointing outside. */
  tc_path(f->dir, 9, link, sizeof link);
  char linkdir[CKJIT_ENTRY_PATH_MAX + 16];
  tu_fmt(linkdir, sizeof linkdir, "%s", link);
  *strrchr(linkdir, '/') = 0;
  mkdir(linkdir, 0700);
  assert_int_equal(symlink(outside, link), 0);
  tu_fmt(foreign, sizeof foreign, "%s/README", f->dir);
  assert_int_equal(tu_write_file(foreign, "hi", 2), 0);
  /* Entry 0's file copied into a subdirectory it does not belong to. */
  ckjit_key k0 = tc_key(0);
  char hex[33];
  ckjit__key_hex(&k0, hex);
  char wrong[3];
  snprintf(wrong, sizeof wrong, "%02x", (unsigned)(k0.bytes[0] ^ 0x80));
  tu_fmt(misplaced, sizeof misplaced, "%s/%s", f->dir, wrong);
  mkdir(misplaced, 0700);
  tu_fmt(misplaced, sizeof misplaced, "%s/%s/%s.ckjit", f->dir, wrong, hex);
  size_t n;
  uint8_t *bytes = tu_read_file(p0, &n);
  assert_int_equal(tu_write_file(misplaced, bytes, n), 0);
  free(bytes);
  ckjit_evict_report r;
  assert_int_equal(ckjit__disk_evict(f->dir, 1, 1, 100, &r), 0);
  assert_int_equal(r.entries_before, 4);
  assert_int_equal(r.removed, 4);
  assert_true(tu_path_exists(link));
  assert_true(tu_path_exists(outside));
  assert_true(tu_path_exists(foreign));
  assert_true(tu_path_exists(misplaced));
}

/* The size and count grammars are tested in tests/unit/test_settings.c. */

static void test_env_limits(void **state) {
  fixture *f = *state;
  unsetenv("CKJIT_CACHE_MAX_SIZE");
  unsetenv("CKJIT_CACHE_MAX_ENTRIES");
  unsetenv("CKJIT_CACHE_PATH");
  ckjit_disk_cache *c = malloc(sizeof *c);
  assert_non_null(c);
  ckjit__disk_open(c, f->dir);
  assert_int_equal(c->max_bytes, CKJIT_DISK_DEFAULT_MAX_BYTES);
  assert_int_equal(c->max_bytes, 1ull << 30);
  assert_int_equal(c->max_entries, CKJIT_DISK_DEFAULT_MAX_ENTRIES);
  ckjit__disk_configure_env(c);
  assert_int_equal(c->max_bytes, 1ull << 30);
  assert_int_equal(c->max_entries, 50000);
  assert_int_equal(c->n_layers, 0);
  setenv("CKJIT_CACHE_MAX_SIZE", "256M", 1);
  setenv("CKJIT_CACHE_MAX_ENTRIES", "1234", 1);
  ckjit__disk_configure_env(c);
  assert_int_equal(c->max_bytes, 256ull << 20);
  assert_int_equal(c->max_entries, 1234);
  setenv("CKJIT_CACHE_MAX_SIZE", "0", 1);
  setenv("CKJIT_CACHE_MAX_ENTRIES", "0", 1);
  ckjit__disk_configure_env(c);
  assert_int_equal(c->max_bytes, 0);
  assert_int_equal(c->max_entries, 0);
  /* Invalid: a warning and the defaults. */
  setenv("CKJIT_CACHE_MAX_SIZE", "lots", 1);
  setenv("CKJIT_CACHE_MAX_ENTRIES", "many", 1);
  ckjit__disk_configure_env(c);
  assert_int_equal(c->max_bytes, 1ull << 30);
  assert_int_equal(c->max_entries, 50000);
  unsetenv("CKJIT_CACHE_MAX_SIZE");
  unsetenv("CKJIT_CACHE_MAX_ENTRIES");
  free(c);
}

/* End to end through the runtime: ckjit_init reads CKJIT_CACHE_MAX_SIZE and
 * CKJIT_CACHE_MAX_ENTRIES into the library's cache. */
static void test_runtime_reads_limits(void **state) {
  fixture *f = *state;
  setenv("CKJIT_CACHE_MAX_SIZE", "3M", 1);
  setenv("CKJIT_CACHE_MAX_ENTRIES", "77", 1);
  ckjit_options o;
  ckjit_options_init(&o);
  o.cache_dir = f->dir;
  o.disk_cache = 1;
  o.arch = "sm_90";
  ckjit_status st = ckjit_init(&o);
  unsetenv("CKJIT_CACHE_MAX_SIZE");
  unsetenv("CKJIT_CACHE_MAX_ENTRIES");
  assert_int_equal(st, CKJIT_SUCCESS);
  ckjit_runtime *rt;
  assert_int_equal(ckjit__runtime_get(&rt), CKJIT_SUCCESS);
  assert_int_equal(rt->disk_enabled, 1);
  assert_int_equal(rt->disk.max_bytes, 3ull << 20);
  assert_int_equal(rt->disk.max_entries, 77);
  ckjit_device_info info;
  assert_int_equal(ckjit_get_device_info(&info), CKJIT_SUCCESS);
  assert_string_equal(info.cache_dir, f->dir);
  ckjit_shutdown();
}

int main(void) {
  umask(022);
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_count_bound_lru_order),
      T(test_size_bound_lru_order),
      T(test_automatic_eviction_on_store),
      T(test_no_full_scan_under_bounds),
      T(test_stale_temp_files),
      T(test_evicted_while_open),
      T(test_evict_leaves_foreign_items),
      T(test_env_limits),
      T(test_runtime_reads_limits),
  };
#undef T
  return cmocka_run_group_tests_name("cache_eviction", tests, NULL, NULL);
}
