/* Cache archives (cache/archive.h) through the internal API: export ->
 * clear -> import -> verify gives back byte-identical entries, from a file
 * or a pipe.  Import is all or nothing: every truncation, damaged framing
 * (trailing bytes, a wrong record count, a length out of range) and a bad
 * record anywhere (every one is reported) writes no file at all; a store
 * that fails midway removes what the import had stored. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <unistd.h>

#include "cache/archive.h"
#include "cache/scan.h"
#include "cache_test_util.h"

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

/* Files of any kind but directories under `root` (0 when it is missing):
 * what an import left behind, temporary files included. */
static int g_files;
static int count_file(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)path;
  (void)st;
  (void)ftw;
  if (flag != FTW_D && flag != FTW_DP) g_files++;
  return 0;
}
static int files_under(const char *root) {
  g_files = 0;
  if (tu_path_exists(root)) assert_int_equal(nftw(root, count_file, 16, FTW_PHYS), 0);
  return g_files;
}

/* Asserts that a refused import wrote nothing and left an explanation. */
static void assert_nothing_imported(fixture *f, const ckjit_archive_summary *s, const char *what) {
  int left = files_under(f->dst);
  if (left || s->ok) print_error("%s: %d files left, %llu reported imported\n", what, left,
                                 (unsigned long long)s->ok);
  assert_int_equal(left, 0);
  assert_int_equal(s->ok, 0);
  assert_true(s->error[0] != '\0');
}

/* Writes `n` bytes into a pipe from a thread, for an import from a stream
 * that cannot be rewound (like stdin). */
typedef struct pipe_writer {
  int fd;
  const uint8_t *data;
  size_t n;
} pipe_writer;

static void *write_pipe(void *p) {
  pipe_writer *w = p;
  for (size_t done = 0; done < w->n;) {
    ssize_t k = write(w->fd, w->data + done, w->n - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    done += (size_t)k;
  }
  close(w->fd);
  return NULL;
}

/* Like import_bytes, through a pipe. */
static int import_piped(fixture *f, const uint8_t *data, size_t n, ckjit_archive_summary *s,
                        reports *rep) {
  tu_rm_rf(f->dst);
  ckjit_disk_cache *c = malloc(sizeof *c);
  assert_non_null(c);
  ckjit__disk_open(c, f->dst);
  assert_int_equal(c->usable, 1);
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pipe_writer w = {fds[1], data, n};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, write_pipe, &w), 0);
  FILE *in = fdopen(fds[0], "rb");
  assert_non_null(in);
  memset(rep, 0, sizeof *rep);
  int rc = ckjit__archive_import(c, in, on_entry, rep, s);
  fclose(in); /* a refused archive may be left unread: the writer then gets EPIPE */
  pthread_join(t, NULL);
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

/* Structurally sound archives with bad records: every bad record is
 * reported, and the archive is refused whole (rc 1, nothing written). */
static void test_bad_record_refuses_whole_archive(void **state) {
  fixture *f = *state;
  fill(f);
  size_t n;
  reports rep;
  uint8_t *arc = export_src(f, &n, 0, &rep);
  size_t off[N];
  assert_int_equal(record_offsets(arc, n, off, N), N);
  ckjit_archive_summary s;
  /* One bad record in the middle: a payload byte flipped. */
  arc[off[3] + 24 + 100] ^= 0x40;
  assert_int_equal(import_bytes(f, arc, n, &s, &rep), 1);
  assert_nothing_imported(f, &s, "a flipped payload byte in record 3");
  assert_int_equal(s.bad, 1);
  assert_int_equal(rep.bad, 1);
  assert_int_equal(rep.ok, 0);
  assert_non_null(strstr(s.error, "nothing was imported"));
  /* Two: also the record's key is not its entry's (the entry itself is
   * valid); both are reported. */
  arc[off[N - 1] + 8] ^= 0x01;
  assert_int_equal(import_bytes(f, arc, n, &s, &rep), 1);
  assert_nothing_imported(f, &s, "two bad records");
  assert_int_equal(s.bad, 2);
  assert_int_equal(rep.bad, 2);
  assert_non_null(strstr(rep.last_problem, "another key"));
  /* The same through a pipe. */
  assert_int_equal(import_piped(f, arc, n, &s, &rep), 1);
  assert_nothing_imported(f, &s, "two bad records, piped");
  assert_int_equal(rep.bad, 2);
  free(arc);
}

/* Every truncation is a clean error that writes nothing, from a file and
 * (a sample of them) from a pipe. */
static void test_every_truncation(void **state) {
  fixture *f = *state;
  fill(f);
  size_t n;
  reports rep;
  uint8_t *arc = export_src(f, &n, 0, &rep);
  int step = 0;
  for (size_t keep = 0; keep < n; keep += (keep < 64 || n - keep < 64) ? 1 : 97, step++) {
    ckjit_archive_summary s;
    int rc = import_bytes(f, arc, keep, &s, &rep);
    if (rc != -1) print_error("truncated to %zu of %zu: rc %d\n", keep, n, rc);
    assert_int_equal(rc, -1);
    assert_nothing_imported(f, &s, "truncated");
    if (step % 16 == 0 || n - keep < 17) {
      assert_int_equal(import_piped(f, arc, keep, &s, &rep), -1);
      assert_nothing_imported(f, &s, "truncated, piped");
    }
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
    assert_nothing_imported(f, &s, cases[i].what);
    assert_int_equal(import_piped(f, bad, n, &s, &rep), -1);
    assert_nothing_imported(f, &s, cases[i].what);
  }
  /* A length out of range in a middle record. */
  size_t off[N];
  assert_int_equal(record_offsets(arc, n, off, N), N);
  memcpy(bad, arc, n);
  bad[off[N / 2] + 7] = 0x40;
  assert_int_equal(import_bytes(f, bad, n, &s, &rep), -1);
  assert_nothing_imported(f, &s, "a middle record's length out of range");
  assert_non_null(strstr(s.error, "out of range"));
  /* A record count one off either way (the end marker's last word). */
  for (int delta = -1; delta <= 1; delta += 2) {
    memcpy(bad, arc, n);
    bad[n - 8] = (uint8_t)(bad[n - 8] + delta);
    assert_int_equal(import_bytes(f, bad, n, &s, &rep), -1);
    assert_nothing_imported(f, &s, "record count off by one");
    assert_non_null(strstr(s.error, "end marker says"));
  }
  /* Trailing bytes after the end marker. */
  memcpy(bad, arc, n);
  bad[n] = 0;
  assert_int_equal(import_bytes(f, bad, n + 1, &s, &rep), -1);
  assert_nothing_imported(f, &s, "a trailing byte");
  assert_non_null(strstr(s.error, "trailing bytes"));
  assert_int_equal(import_piped(f, bad, n + 1, &s, &rep), -1);
  assert_nothing_imported(f, &s, "a trailing byte, piped");
  /* Not an archive at all. */
  assert_int_equal(import_bytes(f, (const uint8_t *)"hello, world, not an archive", 28, &s, &rep),
                   -1);
  free(bad);
  free(arc);
}

/* Import into a destination whose writes are off: fails cleanly, stores
 * nothing. */
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
  memset(&rep, 0, sizeof rep);
  int rc = ckjit__archive_import(c, in, on_entry, &rep, &s);
  fclose(in);
  assert_int_equal(rc, -1);
  assert_int_equal(s.failed, 1);
  assert_nothing_imported(f, &s, "writes off");
  free(c);
  free(arc);
}

/* A store that fails midway (ENOSPC on the 4th entry, injected): the
 * entries this import created are removed again; entries that were in the
 * cache before stay. */
static int g_stores_before_fault;
static int fail_a_later_store(const char *stage, const char *path) {
  (void)path;
  if (strcmp(stage, "open-temp") != 0) return 0;
  return g_stores_before_fault-- > 0 ? 0 : ENOSPC;
}

static void test_failed_store_rolls_back(void **state) {
  fixture *f = *state;
  fill(f);
  size_t n;
  reports rep;
  uint8_t *arc = export_src(f, &n, 0, &rep);
  ckjit_disk_cache *c = malloc(sizeof *c);
  assert_non_null(c);
  ckjit__disk_open(c, f->dst);
  c->max_bytes = c->max_entries = 0;
  /* Two entries there already, one of them also in the archive. */
  assert_int_equal(tc_store(c, 2, size_of(2)), CKJIT_SUCCESS);
  assert_int_equal(tc_store(c, 100, 4000), CKJIT_SUCCESS);
  g_stores_before_fault = 3;
  ckjit__disk_fault_hook = fail_a_later_store;
  FILE *in = fmemopen(arc, n, "rb");
  ckjit_archive_summary s;
  memset(&rep, 0, sizeof rep);
  int rc = ckjit__archive_import(c, in, on_entry, &rep, &s);
  fclose(in);
  ckjit__disk_fault_hook = NULL;
  free(c);
  if (rc != -1) print_error("rc %d: %s\n", rc, s.error);
  assert_int_equal(rc, -1);
  assert_int_equal(s.ok, 0);
  assert_int_equal(s.failed, 1);
  assert_non_null(strstr(s.error, "nothing was imported"));
  assert_int_equal(tc_count(f->dst, NULL), 2);
  assert_true(tc_exists(f->dst, 2));
  assert_true(tc_exists(f->dst, 100));
  assert_int_equal(files_under(f->dst), 2); /* no temporary file either */
  free(arc);
}

/* A pipe (stdin) imports like a file, and its copy leaves no file behind. */
static void test_import_from_pipe(void **state) {
  fixture *f = *state;
  fill(f);
  size_t n;
  reports rep;
  uint8_t *arc = export_src(f, &n, 0, &rep);
  ckjit_archive_summary s;
  assert_int_equal(import_piped(f, arc, n, &s, &rep), 0);
  assert_int_equal(s.ok, N);
  assert_int_equal(rep.ok, N);
  assert_same_tree(f->src, f->dst);
  assert_int_equal(files_under(f->dst), N);
  free(arc);
}

int main(void) {
  umask(022);
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_round_trip),
      T(test_export_skips_bad_entries),
      T(test_bad_record_refuses_whole_archive),
      T(test_every_truncation),
      T(test_damaged_framing),
      T(test_import_store_failure),
      T(test_failed_store_rolls_back),
      T(test_import_from_pipe),
  };
#undef T
  return cmocka_run_group_tests_name("cache_archive", tests, NULL, NULL);
}
