/* Faults seen through the public API, part 1: what ckjit_compile_spec finds
 * in the cache (CKJIT_CACHE_DIR) is bad.  Damaged entries (truncated,
 * flipped, another format version, another spec's entry renamed into place,
 * trailing bytes, a symlink, a FIFO), a directory where the entry belongs,
 * and other writers' temporary files.  A cache directory outlives crashes and
 * can be shared, so the call must never use such a file: it builds the right
 * code object (same key and the very bytes a clean compile gives), counts one
 * disk_reject, replaces the bad entry, and touches nothing outside the cache;
 * when the entry cannot be stored it fails with CKJIT_ERROR_CACHE, naming the
 * reason.  Write failures, crashes and unwritable caches are in
 * test_faults_api_writes.c. */
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

#include "entry_format.h"
#include "faults_api_fixture.h"

/* Writes the clean entry of spec `s` at `path`. */
static void plant_entry(int s, const char *path) {
  char dir[1300];
  tu_fmt(dir, sizeof dir, "%s", path);
  *strrchr(dir, '/') = 0;
  mkdir(dir, 0700);
  assert_int_equal(tu_write_file(path, g_entry[s], g_entry_size[s]), 0);
}

/* ---- damaged entries ----------------------------------------------------- */

typedef enum damage {
  TRUNCATE_HALF,
  TRUNCATE_HEADER,
  ZERO_LENGTH,
  FLIP_PAYLOAD,
  FLIP_HEADER,
  FLIP_KEY,
  OTHER_VERSION,
  OTHER_KEY,
  TRAILING_BYTES,
  SYMLINK,
  FIFO,
  DAMAGE_COUNT
} damage;

static const char *const damage_names[] = {
    "truncated to half",   "truncated inside the header", "zero length",
    "payload byte flipped", "header byte flipped",         "key byte flipped",
    "other format version (checksums right)", "another spec's entry renamed into place",
    "trailing bytes",        "symlink to a valid entry",    "FIFO"};

static void apply_damage(const fixture *f, damage d, const char *path) {
  size_t cap = (g_entry_size[0] > g_entry_size[1] ? g_entry_size[0] : g_entry_size[1]) + 64;
  uint8_t *buf = malloc(cap);
  assert_non_null(buf);
  memcpy(buf, g_entry[0], g_entry_size[0]);
  size_t size = g_entry_size[0];
  size_t header = ef_get32(buf + EF_OFF_HEADER_SIZE);
  unlink(path);
  switch (d) {
    case TRUNCATE_HALF: size /= 2; break;
    case TRUNCATE_HEADER: size = 40; break;
    case ZERO_LENGTH: size = 0; break;
    case FLIP_PAYLOAD: buf[header + (size - header) / 2] ^= 0x01; break;
    case FLIP_HEADER: buf[CKJIT_ENTRY_FIXED_SIZE] ^= 0x01; break; /* first arch byte */
    case FLIP_KEY: buf[EF_OFF_KEY + 3] ^= 0x80; break;
    case OTHER_VERSION:
      ef_put32(buf + EF_OFF_VERSION, CKJIT_CACHE_FORMAT_VERSION + 1);
      ef_reseal(buf, size);
      break;
    case OTHER_KEY:
      memcpy(buf, g_entry[1], g_entry_size[1]);
      size = g_entry_size[1];
      break;
    case TRAILING_BYTES:
      memset(buf + size, 0, 16);
      size += 16;
      break;
    case SYMLINK: {
      char outside[1300];
      tu_fmt(outside, sizeof outside, "%s/outside.ckjit", f->base);
      plant_entry(0, outside);
      assert_int_equal(symlink(outside, path), 0);
      free(buf);
      return;
    }
    case FIFO:
      assert_int_equal(mkfifo(path, 0600), 0);
      free(buf);
      return;
    default: break;
  }
  assert_int_equal(tu_write_file(path, buf, size), 0);
  free(buf);
}

static void test_damaged_entries(void **state) {
  fixture *f = *state;
  char path[1300];
  entry_file(f->cache, 0, path, sizeof path);
  assert_int_equal(compile_ok(0), 0);
  entry_is_clean(f->cache, 0);
  for (damage d = 0; d < DAMAGE_COUNT; d++) {
    apply_damage(f, d, path);
    use_cache_dir(f->cache);
    int cached = compile_ok(0);
    ckjit_stats s = stats();
    printf("%-40s cached %d, compiles %llu, rejects %llu, writes %llu\n", damage_names[d], cached,
           (unsigned long long)s.compiles, (unsigned long long)s.disk_rejects,
           (unsigned long long)s.disk_writes);
    if (cached || s.compiles != 1) fail_msg("%s: the damaged entry was used", damage_names[d]);
    if (s.disk_rejects != 1) fail_msg("%s: %llu rejects, expected 1", damage_names[d],
                                      (unsigned long long)s.disk_rejects);
    if (s.disk_writes != 1 || s.disk_write_errors)
      fail_msg("%s: the entry was not replaced (%llu writes, %llu write errors)", damage_names[d],
               (unsigned long long)s.disk_writes, (unsigned long long)s.disk_write_errors);
    entry_is_clean(f->cache, 0);
    /* And it is used now. */
    assert_int_equal(compile_ok(0), 1);
    assert_int_equal(stats().compiles, 1);
  }
  /* The symlink's target was never written through. */
  char outside[1300];
  tu_fmt(outside, sizeof outside, "%s/outside.ckjit", f->base);
  size_t size = 0;
  uint8_t *buf = tu_read_file(outside, &size);
  assert_non_null(buf);
  assert_int_equal(size, g_entry_size[0]);
  assert_memory_equal(buf, g_entry[0], size);
  free(buf);
  assert_int_equal(count_temps(f->cache), 0);
}

/* A directory where the entry belongs cannot be replaced: the call
 * compiles and says the entry was not stored.  (Whether that one bad name
 * also keeps spec 1 off the disk is the disk cache's business: either way
 * spec 1 is compiled once.) */
static void test_directory_in_the_way(void **state) {
  fixture *f = *state;
  char path[1300], sub[1300];
  entry_file(f->cache, 0, path, sizeof path);
  tu_fmt(sub, sizeof sub, "%s", path);
  *strrchr(sub, '/') = 0;
  assert_int_equal(mkdir(f->cache, 0700), 0);
  assert_int_equal(mkdir(sub, 0700), 0);
  assert_int_equal(mkdir(path, 0700), 0);
  assert_int_equal(compile_unstored(0), 0);
  ckjit_compile_result r1;
  ckjit_status st1 = ckjit_compile_spec(g_spec[1], g_arch, &r1);
  assert_true(st1 == CKJIT_SUCCESS || st1 == CKJIT_ERROR_CACHE);
  assert_string_equal(r1.key, g_key[1]);
  assert_int_equal(r1.stored, st1 == CKJIT_SUCCESS);
  ckjit_stats s = stats();
  assert_int_equal(s.compiles, 2);
  assert_true(s.disk_write_errors >= 1);
  struct stat st;
  assert_int_equal(lstat(path, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(count_temps(f->cache), 0);
}

/* Temporary files of another writer (complete or not) are never taken for
 * the entry and never disturb it. */
static void test_leftover_temps(void **state) {
  fixture *f = *state;
  char path[1300], t1[1400], t2[1400];
  entry_file(f->cache, 0, path, sizeof path);
  assert_int_equal(mkdir(f->cache, 0700), 0);
  tu_fmt(t1, sizeof t1, "%s", path);
  *strrchr(t1, '/') = 0;
  assert_int_equal(mkdir(t1, 0700), 0);
  tu_fmt(t1, sizeof t1, "%.*s/.tmp-%s-1-1-0", (int)(strrchr(path, '/') - path), path, g_key[0]);
  tu_fmt(t2, sizeof t2, "%.*s/.tmp-%s-2-2-0", (int)(strrchr(path, '/') - path), path, g_key[0]);
  plant_entry(0, t1);
  assert_int_equal(tu_write_file(t2, g_entry[0], g_entry_size[0] / 2), 0);
  assert_int_equal(compile_ok(0), 0);
  ckjit_stats s = stats();
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.disk_rejects, 0);
  assert_int_equal(s.disk_writes, 1);
  entry_is_clean(f->cache, 0);
  assert_int_equal(compile_ok(0), 1);
}

WRAP(test_damaged_entries)
WRAP(test_directory_in_the_way)
WRAP(test_leftover_temps)

int main(void) {
  umask(022);
#define T(fn) cmocka_unit_test_setup_teardown(w_##fn, setup_or_skip, teardown_if)
  const struct CMUnitTest tests[] = {
      T(test_damaged_entries),
      T(test_directory_in_the_way),
      T(test_leftover_temps),
  };
#undef T
  return cmocka_run_group_tests_name("faults_api", tests, group_setup, group_teardown);
}
