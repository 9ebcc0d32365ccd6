/* Cache archives (cache/archive.h) through the internal API: export ->
 * clear -> import -> verify gives back byte-identical entries; every bad
 * record is reported and skipped; every truncation and damaged framing is
 * a clean error; a record whose key differs from its entry's is refused. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cache/archive.h"
#include "cache/scan.h"
#include "test_cache_common.h"

typedef struct fixture {
  char *base;
  char src[CKJIT_PATH_MAX];
  char dst[CKJIT_PATH_MAX];
  ckjit_disk_cache c;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || !(f->base = tu_mkdtemp("cache-archive"))) return -1;
  tu_fmt(f->src, sizeof f->src, "%s/src", f->base);
  tu_fmt(f->dst, sizeof f->dst, "%s/dst", f->base);
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

typedef struct reports {
  int ok, bad;
  char last_problem[256];
} reports;

static void on_entry(void *ctx, const char *key_hex, const ckjit_entry_meta *meta, uint64_t size,
                     const char *problem) {
  reports *r = ctx;
  (void)meta;
  (void)size;
  assert_int_equal(strlen(key_hex), 32);
  if (problem) {
    r->bad++;
    tu_fmt(r->last_problem, sizeof r->last_problem, "%s", problem);
  } else {
    r->ok++;
  }
}

enum { N = 7 };
static size_t size_of(int id) { return 300 + (size_t)id * 211; }

static void fill(fixture *f) {
  ckjit__disk_open(&f->c, f->src);
  assert_int_equal(f->c.usable, 1);
  for (int i = 0; i < N; i++) assert_int_equal(tc_store(&f->c, i, size_of(i)), CKJIT_SUCCESS);
}

/* Exports src into a malloc'ed buffer. */
static uint8_t *export_src(fixture *f, size_t *n, int want_rc, reports *rep) {
  char *buf = NULL;
  FILE *m = open_memstream(&buf, n);
  assert_non_null(m);
  ckjit_archive_summary s;
  memset(rep, 0, sizeof *rep);
  int rc = ckjit__archive_export(f->src, m, on_entry, rep, &s);
  fclose(m);
  if (rc != want_rc) print_error("export returned %d (%s)\n", rc, s.error);
  assert_int_equal(rc, want_rc);
  assert_int_equal(s.ok, (uint64_t)rep->ok);
  assert_int_equal(s.bad, (uint64_t)rep->bad);
  return (uint8_t *)buf;
}

/* Imports `n` bytes into a fresh dst; returns the import's result. */
static int import_bytes(fixture *f, const uint8_t *data, size_t n, ckjit_archive_summary *s,
                        reports *rep) {
  tu_rm_rf(f->dst);
  ckjit_disk_cache *c = malloc(sizeof *c);
  assert_non_null(c);
  ckjit__disk_open(c, f->dst);
  assert_int_equal(c->usable, 1);
  FILE *in = fmemopen((void *)data, n ? n : 1, "rb");
  assert_non_null(in);
  if (!n) fgetc(in); /* an empty stream */
  memset(rep, 0, sizeof *rep);
  int rc = ckjit__archive_import(c, in, on_entry, rep, s);
  fclose(in);
  free(c);
  return rc;
}

static void assert_same_tree(const char *a, const char *b) {
  ckjit_scan sa, sb;
  assert_int_equal(ckjit__cache_scan(a, 0, &sa), 0);
  assert_int_equal(ckjit__cache_scan(b, 0, &sb), 0);
  assert_int_equal(sa.count, sb.count);
  for (size_t i = 0; i < sa.count; i++) {
    assert_memory_equal(sa.entries[i].key.bytes, sb.entries[i].key.bytes, 16);
    char hex[33], pa[CKJIT_ENTRY_PATH_MAX], pb[CKJIT_ENTRY_PATH_MAX];
    ckjit__key_hex(&sa.entries[i].key, hex);
    tu_fmt(pa, sizeof pa, "%s/%.2s/%s.ckjit", a, hex, hex);
    tu_fmt(pb, sizeof pb, "%s/%.2s/%s.ckjit", b, hex, hex);
    size_t na, nb;
    uint8_t *da = tu_read_file(pa, &na), *db = tu_read_file(pb, &nb);
    assert_non_null(da);
    assert_non_null(db);
    assert_int_equal(na, nb);
    assert_memory_equal(da, db, na);
    free(da);
    free(db);
  }
  ckjit__cache_scan_free(&sa);
  ckjit__cache_scan_free(&sb);
}

static void test_round_trip(void **state) {
  fixture *f = *state;
  fill(f);
  size_t n;
  reports rep;
  uint8_t *arc = export_src(f, &n, 0, &rep);
  assert_int_equal(rep.ok, N);
  assert_memory_equal(arc, CKJIT_ARCHIVE_MAGIC, 8);
  ckjit_archive_summary s;
  assert_int_equal(import_bytes(f, arc, n, &s, &rep), 0);
  assert_int_equal(s.ok, N);
  assert_int_equal(s.bad, 0);
  assert_int_equal(rep.ok, N);
  assert_same_tree(f->src, f->dst);
  ckjit_disk_cache *c = malloc(sizeof *c);
  ckjit__disk_open(c, f->dst);
  for (int i = 0; i < N; i++) assert_int_equal(tc_load(c, i, size_of(i)), 1);
  /* Importing again over the same entries is fine (same bytes). */
  FILE *in = fmemopen(arc, n, "rb");
  assert_int_equal(ckjit__archive_import(c, in, NULL, NULL, &s), 0);
  fclose(in);
  assert_int_equal(s.ok, N);
  free(c);
  assert_same_tree(f->src, f->dst);
  /* Exporting twice gives the same archive (key order, no timestamps). */
  size_t n2;
  uint8_t *arc2 = export_src(f, &n2, 0, &rep);
  assert_int_equal(n2, n);
  assert_memory_equal(arc2, arc, n);
  free(arc2);
  free(arc);

  /* An empty (or missing) cache exports an empty, valid archive. */
  tu_rm_rf(f->src);
  arc = export_src(f, &n, 0, &rep);
  assert_int_equal(n, 16 + 16);
  assert_int_equal(import_bytes(f, arc, n, &s, &rep), 0);
  assert_int_equal(s.ok, 0);
  free(arc);
}

/* A bad entry in the cache is left out of the export (reported, rc 1). */
static void test_export_skips_bad_entries(void **state) {
  fixture *f = *state;
  fill(f);
  char p[CKJIT_ENTRY_PATH_MAX];
  tc_path(f->src, 3, p, sizeof p);
  size_t n;
  uint8_t *b = tu_read_file(p, &n);
  b[n / 2] ^= 1;
  assert_int_equal(tu_write_file(p, b, n), 0);
  free(b);
  reports rep;
  uint8_t *arc = export_src(f, &n, 1, &rep);
  assert_int_equal(rep.ok, N - 1);
  assert_int_equal(rep.bad, 1);
  ckjit_archive_summary s;
  assert_int_equal(import_bytes(f, arc, n, &s, &rep), 0);
  assert_int_equal(s.ok, N - 1);
  assert_false(tc_exists(f->dst, 3));
  free(arc);
}

/* Offsets of the records in an archive: start of each record's length. */
static int record_offsets(const uint8_t *arc, size_t n, size_t *out, int max) {
  size_t at = 16;
  int k = 0;
  while (at + 8 <= n && k < max) {
    uint64_t len = 0;
    for (int i = 7; i >= 0; i--) len = len << 8 | arc[at + (size_t)i];
    if (len == 0) break;
    out[k++] = at;
    at += 24 + (size_t)len;
  }
  return k;
}

static void test_bad_records_reported_and_skipped(void **state) {
  fixture *f = *state;
  fill(f);
  size_t n;
  reports rep;
  uint8_t *arc = export_src(f, &n, 0, &rep);
  size_t off[N];
  assert_int_equal(record_offsets(arc, n, off, N), N);
  /* Record 1: a payload byte flipped.  Record 4: the record's key is not
   * its entry's (the entry itself is valid). */
  arc[off[1] + 24 + 100] ^= 0x40;
  arc[off[4] + 8] ^= 0x01;
  ckjit_archive_summary s;
  assert_int_equal(import_bytes(f, arc, n, &s, &rep), 1);
  assert_int_equal(s.ok, N - 2);
  assert_int_equal(s.bad, 2);
  assert_int_equal(rep.bad, 2);
  assert_non_null(strstr(rep.last_problem, "another key"));
  assert_int_equal(tc_count(f->dst, NULL), N - 2);
  ckjit_disk_cache *c = malloc(sizeof *c);
  ckjit__disk_open(c, f->dst);
  int hits = 0;
  for (int i = 0; i < N; i++) hits += tc_load(c, i, size_of(i)) == 1;
  assert_int_equal(hits, N - 2);
  free(c);
  free(arc);
}

/* Every truncation is a fatal, clean error; the records before it are kept. */
static void test_every_truncation(void **state) {
  fixture *f = *state;
  fill(f);
  size_t n;
  reports rep;
  uint8_t *arc = export_src(f, &n, 0, &rep);
  size_t off[N];
  assert_int_equal(record_offsets(arc, n, off, N), N);
  for (size_t keep = 0; keep < n; keep += (keep < 64 || n - keep < 64) ? 1 : 97) {
    ckjit_archive_summary s;
    int rc = import_bytes(f, arc, keep, &s, &rep);
    if (rc != -1) print_error("truncated to %zu of %zu: rc %d\n", keep, n, rc);
    assert_int_equal(rc, -1);
    assert_true(s.error[0] != '\0');
    /* Records wholly before the cut were imported. */
    uint64_t whole = 0;
    for (int i = 0; i < N; i++) {
      size_t end = i + 1 < N ? off[i + 1] : n - 16;
      if (end <= keep) whole++;
    }
    assert_int_equal(s.ok, whole);
  }
  free(arc);
}

static void test_damaged_framing(void **state) {
  fixture *f = *state;
  fill(f);
  size_t n;
  reports rep;
  uint8_t *arc = export_src(f, &n, 0, &rep);
  uint8_t *bad = malloc(n + 1);
  ckjit_archive_summary s;
  struct {
    size_t at;
    uint8_t xor;
    const char *what;
  } cases[] = {
      {0, 0x01, "magic"},
      {8, 0x02, "version"},
      {12, 0x01, "reserved"},
      {16 + 7, 0x80, "huge first length"},
      {n - 8, 0x01, "record count"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memcpy(bad, arc, n);
    bad[cases[i].at] ^= cases[i].xor;
    int rc = import_bytes(f, bad, n, &s, &rep);
    if (rc != -1) print_error("%s: rc %d\n", cases[i].what, rc);
    assert_int_equal(rc, -1);
  }
  /* Trailing bytes after the end marker. */
  memcpy(bad, arc, n);
  bad[n] = 0;
  assert_int_equal(import_bytes(f, bad, n + 1, &s, &rep), -1);
  /* Not an archive at all. */
  assert_int_equal(import_bytes(f, (const uint8_t *)"hello, world, not an archive", 28, &s, &rep),
                   -1);
  free(bad);
  free(arc);
}

/* Import into a read-only destination: fails cleanly, stops at the first
 * store failure. */
static void test_import_store_failure(void **state) {
  fixture *f = *state;
  fill(f);
  size_t n;
  reports rep;
  uint8_t *arc = export_src(f, &n, 0, &rep);
  ckjit_disk_cache *c = malloc(sizeof *c);
  ckjit__disk_open(c, f->dst);
  c->writable = 0; /* as after a failed write */
  FILE *in = fmemopen(arc, n, "rb");
  ckjit_archive_summary s;
  int rc = ckjit__archive_import(c, in, on_entry, &rep, &s);
  fclose(in);
  assert_true(rc != 0);
  assert_int_equal(s.ok, 0);
  assert_true(s.failed >= 1);
  free(c);
  free(arc);
}

int main(void) {
  umask(022);
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_round_trip),
      T(test_export_skips_bad_entries),
      T(test_bad_records_reported_and_skipped),
      T(test_every_truncation),
      T(test_damaged_framing),
      T(test_import_store_failure),
  };
#undef T
  return cmocka_run_group_tests_name("cache_archive", tests, NULL, NULL);
}
