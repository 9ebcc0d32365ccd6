/* The fixture and helpers shared by the disk cache tests
 * (test_disk_cache*.c): a fresh temp dir per test, deterministic entries by
 * number, and stores and loads that assert what they get, so every test
 * program checks a hit, a miss and a recovery the same way.  Header-only and
 * static: each test program is one translation unit. */
#ifndef CKJIT_TESTS_CACHE_DISK_CACHE_FIXTURE_H
#define CKJIT_TESTS_CACHE_DISK_CACHE_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache/disk_cache.h"
#include "cache/entry.h"
#include "cache/key.h"
#include "ckjit/ckjit.h"
#include "elf_payload.h"
#include "test_util.h"

#define PAYLOAD_MAX 5000

typedef struct fixture {
  char *base;           /* mkdtemp */
  char dir[CKJIT_PATH_MAX]; /* base/cache */
  ckjit_disk_cache c;
} fixture;

static TU_UNUSED int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f) return -1;
  f->base = tu_mkdtemp("disk");
  if (!f->base) {
    free(f);
    return -1;
  }
  tu_fmt(f->dir, sizeof f->dir, "%s/cache", f->base);
  *state = f;
  return 0;
}

static TU_UNUSED int teardown(void **state) {
  fixture *f = *state;
  tu_rm_rf(f->base);
  free(f->base);
  free(f);
  return 0;
}

/* Meta + payload for a test entry; `id` selects the key (and its first byte,
 * hence its subdirectory). */
static TU_UNUSED void make_entry(int id, ckjit_entry_meta *m, uint8_t *payload, size_t *size) {
  memset(m, 0, sizeof *m);
  for (int i = 0; i < 16; i++) m->key.bytes[i] = (uint8_t)(id * 0x11 + i * 7 + 1);
  m->key.bytes[0] = (uint8_t)(id * 0x10 + 1); /* distinct subdir per id < 16 */
  tu_fmt(m->arch, sizeof m->arch, "sm_90");
  tu_fmt(m->kernel, sizeof m->kernel, "kernel_%d", id);
  *size = ep_build(payload, 1000 + (size_t)id * 37, m->arch, m->kernel, (uint64_t)id + 100);
}

static TU_UNUSED uint64_t rejects(void) {
  ckjit_stats s;
  ckjit_get_stats(&s);
  return s.disk_rejects;
}

static TU_UNUSED void entry_path(const ckjit_disk_cache *c, int id, char *out, size_t len) {
  ckjit_entry_meta m;
  uint8_t p[PAYLOAD_MAX];
  size_t n;
  make_entry(id, &m, p, &n);
  ckjit__disk_entry_path(c, &m.key, out, len);
}

static TU_UNUSED void store_ok(ckjit_disk_cache *c, int id) {
  ckjit_entry_meta m;
  uint8_t p[PAYLOAD_MAX];
  size_t n;
  make_entry(id, &m, p, &n);
  ckjit_status st = ckjit__disk_store(c, &m, p, n);
  if (st != CKJIT_SUCCESS) print_error("store %d failed: %s\n", id, ckjit_last_error());
  assert_int_equal(st, CKJIT_SUCCESS);
}

static TU_UNUSED void load_hit(ckjit_disk_cache *c, int id) {
  ckjit_entry_meta m, got;
  uint8_t p[PAYLOAD_MAX];
  size_t n;
  make_entry(id, &m, p, &n);
  void *payload = NULL;
  size_t size = 0;
  memset(&got, 0, sizeof got);
  int rc = ckjit__disk_load(c, &m.key, &payload, &size, &got);
  if (rc != 1) print_error("load %d: expected a hit\n", id);
  assert_int_equal(rc, 1);
  assert_non_null(payload);
  assert_int_equal(size, n);
  assert_memory_equal(payload, p, n);
  assert_true(ckjit__key_equal(&got.key, &m.key));
  assert_string_equal(got.arch, m.arch);
  assert_string_equal(got.kernel, m.kernel);
  free(payload);
}

static TU_UNUSED void load_miss(ckjit_disk_cache *c, int id) {
  ckjit_entry_meta m, got;
  uint8_t p[PAYLOAD_MAX];
  size_t n;
  make_entry(id, &m, p, &n);
  void *payload = (void *)0x1;
  size_t size = 12345;
  int rc = ckjit__disk_load(c, &m.key, &payload, &size, &got);
  if (rc != 0) print_error("load %d: expected a miss, got %d\n", id, rc);
  assert_int_equal(rc, 0);
}

/* After damaging entry `id`: a miss (counted as a reject when `reject`),
 * then a store replaces the bad entry and it loads. */
static TU_UNUSED void miss_then_recover(ckjit_disk_cache *c, int id, int reject) {
  uint64_t r0 = rejects();
  load_miss(c, id);
  if (reject) assert_int_equal(rejects(), r0 + 1);
  /* The bad entry stays a miss on a second look. */
  load_miss(c, id);
  store_ok(c, id);
  load_hit(c, id);
  char path[CKJIT_PATH_MAX];
  entry_path(c, id, path, sizeof path);
  struct stat st;
  assert_int_equal(lstat(path, &st), 0);
  assert_true(S_ISREG(st.st_mode));
}

static TU_UNUSED void open_usable(fixture *f) {
  ckjit__disk_open(&f->c, f->dir);
  assert_int_equal(f->c.usable, 1);
  assert_int_equal(f->c.writable, 1);
}

static TU_UNUSED void truncate_file(const char *path, size_t keep) {
  size_t size = 0;
  uint8_t *data = tu_read_file(path, &size);
  assert_non_null(data);
  assert_true(keep <= size);
  assert_int_equal(tu_write_file(path, data, keep), 0);
  free(data);
}

#endif
