/* The on-disk cache: ckjit__disk_open / _store / _load against every kind of
 * damaged, hostile or unusable cache directory, each in a fresh temp dir. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/disk_cache.h"
#include "cache/entry.h"
#include "cache/key.h"
#include "ckjit/ckjit.h"
#include "elf_payload.h"
#include "entry_format.h"
#include "test_util.h"

#define PAYLOAD_MAX 5000

typedef struct fixture {
  char *base;           /* mkdtemp */
  char dir[CKJIT_PATH_MAX]; /* base/cache */
  ckjit_disk_cache c;
} fixture;

static int setup(void **state) {
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

static int teardown(void **state) {
  fixture *f = *state;
  tu_rm_rf(f->base);
  free(f->base);
  free(f);
  return 0;
}

/* Meta + payload for a test entry; `id` selects the key (and its first byte,
 * hence its subdirectory). */
static void make_entry(int id, ckjit_entry_meta *m, uint8_t *payload, size_t *size) {
  memset(m, 0, sizeof *m);
  for (int i = 0; i < 16; i++) m->key.bytes[i] = (uint8_t)(id * 0x11 + i * 7 + 1);
  m->key.bytes[0] = (uint8_t)(id * 0x10 + 1); /* distinct subdir per id < 16 */
  tu_fmt(m->arch, sizeof m->arch, "sm_90");
  tu_fmt(m->kernel, sizeof m->kernel, "kernel_%d", id);
  *size = ep_build(payload, 1000 + (size_t)id * 37, m->arch, m->kernel, (uint64_t)id + 100);
}

static uint64_t rejects(void) {
  ckjit_stats s;
  ckjit_get_stats(&s);
  return s.disk_rejects;
}

static void entry_path(const ckjit_disk_cache *c, int id, char *out, size_t len) {
  ckjit_entry_meta m;
  uint8_t p[PAYLOAD_MAX];
  size_t n;
  make_entry(id, &m, p, &n);
  ckjit__disk_entry_path(c, &m.key, out, len);
}

static void store_ok(ckjit_disk_cache *c, int id) {
  ckjit_entry_meta m;
  uint8_t p[PAYLOAD_MAX];
  size_t n;
  make_entry(id, &m, p, &n);
  ckjit_status st = ckjit__disk_store(c, &m, p, n);
  if (st != CKJIT_SUCCESS) print_error("store %d failed: %s\n", id, ckjit_last_error());
  assert_int_equal(st, CKJIT_SUCCESS);
}

static void load_hit(ckjit_disk_cache *c, int id) {
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

static void load_miss(ckjit_disk_cache *c, int id) {
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
static void miss_then_recover(ckjit_disk_cache *c, int id, int reject) {
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

static void open_usable(fixture *f) {
  ckjit__disk_open(&f->c, f->dir);
  assert_int_equal(f->c.usable, 1);
  assert_int_equal(f->c.writable, 1);
}

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

static void truncate_file(const char *path, size_t keep) {
  size_t size = 0;
  uint8_t *data = tu_read_file(path, &size);
  assert_non_null(data);
  assert_true(keep <= size);
  assert_int_equal(tu_write_file(path, data, keep), 0);
  free(data);
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

static void test_truncated_file(void **state) {
  fixture *f = *state;
  open_usable(f);
  char path[CKJIT_PATH_MAX];
  entry_path(&f->c, 3, path, sizeof path);
  size_t size;
  store_ok(&f->c, 3);
  free(tu_read_file(path, &size));
  const size_t keeps[] = {size / 2, size - 1, 10, 56, 1};
  for (size_t i = 0; i < sizeof keeps / sizeof keeps[0]; i++) {
    truncate_file(path, keeps[i]);
    miss_then_recover(&f->c, 3, 1);
  }
}

static void test_zero_length_file(void **state) {
  fixture *f = *state;
  open_usable(f);
  char path[CKJIT_PATH_MAX];
  entry_path(&f->c, 4, path, sizeof path);
  store_ok(&f->c, 4);
  assert_int_equal(tu_write_file(path, "", 0), 0);
  miss_then_recover(&f->c, 4, 1);
}

static void flip_byte(const char *path, long offset) {
  size_t size = 0;
  uint8_t *data = tu_read_file(path, &size);
  assert_non_null(data);
  size_t at = offset < 0 ? size + (size_t)offset : (size_t)offset;
  assert_true(at < size);
  data[at] ^= 0x20;
  assert_int_equal(tu_write_file(path, data, size), 0);
  free(data);
}

static void test_flipped_bytes(void **state) {
  fixture *f = *state;
  open_usable(f);
  char path[CKJIT_PATH_MAX];
  entry_path(&f->c, 5, path, sizeof path);
  store_ok(&f->c, 5);
  const long offsets[] = {-1, -500, 0, 9, 20, 33, 45, 50, 53, 60};
  for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
    flip_byte(path, offsets[i]);
    miss_then_recover(&f->c, 5, 1);
  }
}

static void test_wrong_format_version(void **state) {
  fixture *f = *state;
  open_usable(f);
  char path[CKJIT_PATH_MAX];
  entry_path(&f->c, 6, path, sizeof path);
  store_ok(&f->c, 6);
  size_t size = 0;
  uint8_t *data = tu_read_file(path, &size);
  assert_non_null(data);
  ef_put32(data + EF_OFF_VERSION, CKJIT_CACHE_FORMAT_VERSION + 1);
  ef_reseal(data, size);
  assert_int_equal(tu_write_file(path, data, size), 0);
  free(data);
  miss_then_recover(&f->c, 6, 1);
}

static void test_other_key_renamed_in(void **state) {
  fixture *f = *state;
  open_usable(f);
  char pa[CKJIT_PATH_MAX], pb[CKJIT_PATH_MAX];
  entry_path(&f->c, 7, pa, sizeof pa);
  entry_path(&f->c, 8, pb, sizeof pb);
  store_ok(&f->c, 7);
  store_ok(&f->c, 8);
  /* Entry 8 (valid, checksums right) moved to 7's place. */
  assert_int_equal(rename(pb, pa), 0);
  miss_then_recover(&f->c, 7, 1);
  load_miss(&f->c, 8);
  store_ok(&f->c, 8);
  load_hit(&f->c, 8);
  load_hit(&f->c, 7);
}

static int is_entry_name(const char *name) {
  size_t n = strlen(name);
  if (n != 32 + 6 || strcmp(name + 32, ".ckjit") != 0) return 0;
  for (int i = 0; i < 32; i++)
    if (!strchr("0123456789abcdefABCDEF", name[i])) return 0;
  return 1;
}

static void test_leftover_temp_files(void **state) {
  fixture *f = *state;
  open_usable(f);
  store_ok(&f->c, 9);
  char p9[CKJIT_PATH_MAX], p10[CKJIT_PATH_MAX], sub[CKJIT_PATH_MAX];
  entry_path(&f->c, 9, p9, sizeof p9);
  entry_path(&f->c, 10, p10, sizeof p10);
  /* Plant temp-looking files next to where entry 10 will go (its subdir),
   * some holding a complete valid entry of key 10. */
  tu_fmt(sub, sizeof sub, "%s", p10);
  *strrchr(sub, '/') = 0;
  mkdir(sub, 0700);
  const char *base10 = strrchr(p10, '/') + 1;
  ckjit_entry_meta m;
  uint8_t p[PAYLOAD_MAX];
  size_t n;
  make_entry(10, &m, p, &n);
  uint8_t *enc;
  size_t enc_size;
  assert_int_equal(ckjit__entry_encode(&m, p, n, &enc, &enc_size), 0);
  const char *suffixes[] = {".tmp", ".tmp.12345", ".XXXXXX", "~", ".partial"};
  char planted[16][CKJIT_PATH_MAX];
  int nplanted = 0;
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    tu_fmt(planted[nplanted], CKJIT_PATH_MAX, "%s/%s%s", sub, base10, suffixes[i]);
    assert_int_equal(tu_write_file(planted[nplanted], enc, i % 2 ? enc_size : enc_size / 2), 0);
    nplanted++;
  }
  tu_fmt(planted[nplanted], CKJIT_PATH_MAX, "%s/.%s.tmp", sub, base10);
  assert_int_equal(tu_write_file(planted[nplanted++], enc, enc_size), 0);
  tu_fmt(planted[nplanted], CKJIT_PATH_MAX, "%s/tmp.Ab12Cd", f->dir);
  assert_int_equal(tu_write_file(planted[nplanted++], "garbage", 7), 0);
  tu_fmt(planted[nplanted], CKJIT_PATH_MAX, "%s/.tmp-%s", f->dir, base10);
  assert_int_equal(tu_write_file(planted[nplanted++], enc, enc_size), 0);
  free(enc);

  /* None of them is taken for the entry. */
  load_miss(&f->c, 10);
  load_hit(&f->c, 9);
  store_ok(&f->c, 10);
  load_hit(&f->c, 10);
  load_hit(&f->c, 9);
  for (int i = 0; i < nplanted; i++) assert_true(tu_path_exists(planted[i]));

  /* The stores themselves left no temporary file behind: every file in an
   * entry subdirectory is an entry or one we planted, and the root holds no
   * temp-looking file but ours. */
  DIR *root = opendir(f->dir);
  assert_non_null(root);
  struct dirent *de;
  int entries = 0;
  while ((de = readdir(root))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    char full[CKJIT_PATH_MAX];
    tu_fmt(full, sizeof full, "%s/%s", f->dir, de->d_name);
    struct stat st;
    assert_int_equal(lstat(full, &st), 0);
    int ours = 0;
    for (int i = 0; i < nplanted; i++) ours |= !strcmp(full, planted[i]);
    if (!S_ISDIR(st.st_mode)) {
      if (!ours && (strstr(de->d_name, "tmp") || strstr(de->d_name, "temp"))) {
        print_error("leftover temp file in the cache root: %s\n", de->d_name);
        fail();
      }
      continue;
    }
    DIR *d = opendir(full);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char file[CKJIT_PATH_MAX * 2];
      tu_fmt(file, sizeof file, "%s/%s", full, e->d_name);
      int planted_here = 0;
      for (int i = 0; i < nplanted; i++) planted_here |= !strcmp(file, planted[i]);
      if (planted_here) continue;
      if (!is_entry_name(e->d_name)) {
        print_error("unexpected file in the cache: %s\n", file);
        fail();
      }
      entries++;
    }
    closedir(d);
  }
  closedir(root);
  assert_int_equal(entries, 2);
}

static void test_symlinked_entry(void **state) {
  fixture *f = *state;
  open_usable(f);
  store_ok(&f->c, 11); /* creates the directory tree */
  char path[CKJIT_PATH_MAX], outside[CKJIT_PATH_MAX], sub[CKJIT_PATH_MAX];
  entry_path(&f->c, 11, path, sizeof path);
  tu_fmt(sub, sizeof sub, "%s", path);
  *strrchr(sub, '/') = 0;
  /* A perfectly valid entry of key 11, outside the cache, linked in. */
  tu_fmt(outside, sizeof outside, "%s/outside.ckjit", f->base);
  assert_int_equal(rename(path, outside), 0);
  size_t outside_size;
  uint8_t *outside_before = tu_read_file(outside, &outside_size);
  assert_non_null(outside_before);
  assert_int_equal(symlink(outside, path), 0);
  miss_then_recover(&f->c, 11, 0);
  /* The store replaced the link itself and did not write through it. */
  size_t after_size;
  uint8_t *outside_after = tu_read_file(outside, &after_size);
  assert_non_null(outside_after);
  assert_int_equal(after_size, outside_size);
  assert_memory_equal(outside_after, outside_before, outside_size);
  free(outside_after);

  /* Dangling link. */
  assert_int_equal(unlink(path), 0);
  char dangling[CKJIT_PATH_MAX + 16];
  tu_fmt(dangling, sizeof dangling, "%s/nowhere", f->base);
  assert_int_equal(symlink(dangling, path), 0);
  miss_then_recover(&f->c, 11, 0);
  assert_false(tu_path_exists(dangling));

  /* Relative link to a valid entry inside the cache. */
  store_ok(&f->c, 12);
  char p12[CKJIT_PATH_MAX];
  entry_path(&f->c, 12, p12, sizeof p12);
  char copy[CKJIT_PATH_MAX + 16];
  tu_fmt(copy, sizeof copy, "%s/copy-of-11", sub);
  assert_int_equal(rename(path, copy), 0);
  assert_int_equal(symlink("copy-of-11", path), 0);
  miss_then_recover(&f->c, 11, 0);
  free(outside_before);
}

/* Runs load_miss(id) in a child process; 0 when the child returned a miss
 * within `seconds`, 1 when it hung (killed), 2 when it failed otherwise. */
static int load_miss_in_child(ckjit_disk_cache *c, int id, int seconds) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    ckjit_entry_meta m, got;
    uint8_t p[PAYLOAD_MAX];
    size_t n;
    make_entry(id, &m, p, &n);
    void *payload = NULL;
    size_t size = 0;
    _exit(ckjit__disk_load(c, &m.key, &payload, &size, &got) == 0 ? 0 : 1);
  }
  int status = 0;
  for (int waited = 0; waited < seconds * 10; waited++) {
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 2;
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return 1;
}

static void test_special_files_at_entry_path(void **state) {
  fixture *f = *state;
  open_usable(f);
  store_ok(&f->c, 13);
  char path[CKJIT_PATH_MAX];
  entry_path(&f->c, 13, path, sizeof path);
  /* A FIFO must not block the lookup. */
  assert_int_equal(unlink(path), 0);
  assert_int_equal(mkfifo(path, 0600), 0);
  int rc = load_miss_in_child(&f->c, 13, 10);
  if (rc == 1) print_error("ckjit__disk_load blocked (> 10 s) opening a FIFO at the entry path\n");
  if (rc == 2) print_error("ckjit__disk_load of a FIFO entry did not return a miss\n");
  assert_int_equal(rc, 0);
  store_ok(&f->c, 13);
  load_hit(&f->c, 13);
  /* A directory where the entry should be: a miss, and a store that cannot
   * replace it fails without crashing. */
  assert_int_equal(unlink(path), 0);
  assert_int_equal(mkdir(path, 0700), 0);
  load_miss(&f->c, 13);
  ckjit_entry_meta m;
  uint8_t p[PAYLOAD_MAX];
  size_t n;
  make_entry(13, &m, p, &n);
  (void)ckjit__disk_store(&f->c, &m, p, n);
  load_miss(&f->c, 13);
  assert_int_equal(rmdir(path), 0);
  /* Reopened, the cache works again. */
  open_usable(f);
  store_ok(&f->c, 13);
  load_hit(&f->c, 13);
}

/* Read-only directory checks.  Returns NULL on success, "PRIVILEGED" when
 * the process can write into a 0500 directory anyway, or what failed. */
static const char *readonly_checks(const char *dir) {
  ckjit_disk_cache c;
  ckjit__disk_open(&c, dir);
  if (!c.usable || !c.writable) return "a fresh directory is not usable";
  ckjit_entry_meta m;
  uint8_t p[PAYLOAD_MAX];
  size_t n;
  make_entry(14, &m, p, &n);
  if (ckjit__disk_store(&c, &m, p, n) != CKJIT_SUCCESS) return "store into a fresh directory failed";
  if (chmod(dir, 0500) != 0) return "chmod 0500 failed";
  char probe[CKJIT_PATH_MAX + 16];
  tu_fmt(probe, sizeof probe, "%s/probe", dir);
  int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd >= 0) {
    close(fd);
    unlink(probe);
    chmod(dir, 0700);
    return "PRIVILEGED";
  }
  ckjit__disk_open(&c, dir);
  if (!c.usable) return "a read-only (0500) directory of ours is not usable for reads";
  void *payload = NULL;
  size_t size = 0;
  ckjit_entry_meta got;
  if (ckjit__disk_load(&c, &m.key, &payload, &size, &got) != 1) return "no hit in a read-only directory";
  if (size != n || memcmp(payload, p, n) != 0) return "wrong payload from a read-only directory";
  free(payload);
  /* Entry 15 lives in a subdirectory that does not exist yet. */
  ckjit_entry_meta m2;
  uint8_t p2[PAYLOAD_MAX];
  size_t n2;
  make_entry(15, &m2, p2, &n2);
  ckjit_status st = ckjit__disk_store(&c, &m2, p2, n2);
  if (st == CKJIT_SUCCESS && c.writable) {
    /* Claimed success: then it must really be there. */
    if (ckjit__disk_load(&c, &m2.key, &payload, &size, &got) == 1) {
      free(payload);
      return "stored into a read-only directory?!";
    }
    return "store into a read-only directory reported success";
  }
  if (c.writable) return "writable still set after a store into a read-only directory";
  if (ckjit__disk_load(&c, &m2.key, &payload, &size, &got) != 0) return "hit after a failed store";
  /* A second store also fails quietly (writes are off: read-only when opened). */
  (void)ckjit__disk_store(&c, &m2, p2, n2);
  /* Writable again: a reopened cache stores and loads. */
  if (chmod(dir, 0700) != 0) return "chmod 0700 failed";
  ckjit__disk_open(&c, dir);
  if (!c.usable || !c.writable) return "not usable after chmod 0700";
  if (ckjit__disk_store(&c, &m2, p2, n2) != CKJIT_SUCCESS) return "store after chmod 0700 failed";
  if (ckjit__disk_load(&c, &m2.key, &payload, &size, &got) != 1) return "no hit after chmod 0700";
  if (size != n2 || memcmp(payload, p2, n2) != 0) return "wrong payload after chmod 0700";
  free(payload);
  return NULL;
}

static void test_readonly_dir(void **state) {
  fixture *f = *state;
  if (geteuid() != 0) {
    const char *why = readonly_checks(f->dir);
    if (why && !strcmp(why, "PRIVILEGED")) {
      printf("SKIP read-only directory: this process can write into a 0500 directory "
             "(CAP_DAC_OVERRIDE?)\n");
      skip();
    }
    if (why) print_error("read-only directory: %s\n", why);
    assert_null(why);
    return;
  }
  /* Root ignores directory permissions, so do the check as 'nobody' in a
   * child process, in a directory nobody owns. */
  char ro[CKJIT_PATH_MAX];
  tu_fmt(ro, sizeof ro, "%s/ro", f->base);
  assert_int_equal(mkdir(ro, 0700), 0);
  assert_int_equal(chown(ro, 65534, 65534), 0);
  assert_int_equal(chmod(f->base, 0711), 0);
  tu_fmt(f->dir, sizeof f->dir, "%s/cache", ro);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(77);
    const char *why = readonly_checks(f->dir);
    if (why && !strcmp(why, "PRIVILEGED")) _exit(78);
    if (why) {
      fprintf(stderr, "read-only directory (as uid 65534): %s\n", why);
      _exit(1);
    }
    _exit(0);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  chmod(f->base, 0700);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77 || WEXITSTATUS(status) == 78) {
    printf("SKIP read-only directory: running as root and %s\n",
           WEXITSTATUS(status) == 77 ? "cannot switch to uid 65534"
                                     : "uid 65534 can still write into a 0500 directory");
    skip();
  }
  assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_group_world_writable_refused(void **state) {
  fixture *f = *state;
  const mode_t modes[] = {0770, 0707, 0777, 01777, 0720, 0702, 02770};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    open_usable(f);
    store_ok(&f->c, 1);
    assert_int_equal(chmod(f->dir, modes[i]), 0);
    ckjit__disk_open(&f->c, f->dir);
    if (f->c.usable || f->c.writable)
      print_error("mode %04o accepted (usable=%d writable=%d)\n", (unsigned)modes[i], f->c.usable,
                  f->c.writable);
    assert_int_equal(f->c.usable, 0);
    assert_int_equal(f->c.writable, 0);
    /* Nothing is read from or written to it. */
    load_miss(&f->c, 1);
    char p2[CKJIT_PATH_MAX];
    entry_path(&f->c, 2, p2, sizeof p2);
    unlink(p2);
    ckjit_entry_meta m;
    uint8_t p[PAYLOAD_MAX];
    size_t n;
    make_entry(2, &m, p, &n);
    (void)ckjit__disk_store(&f->c, &m, p, n);
    assert_false(tu_path_exists(p2));
    /* Fixed permissions: usable again, and the old entry is still good. */
    assert_int_equal(chmod(f->dir, 0700), 0);
    open_usable(f);
    load_hit(&f->c, 1);
    store_ok(&f->c, 2);
    load_hit(&f->c, 2);
  }
}

static void test_other_owner_refused(void **state) {
  fixture *f = *state;
  open_usable(f);
  store_ok(&f->c, 3);
  if (geteuid() != 0) {
    /* Without root we cannot give a directory away; a directory that
     * another user (root) owns serves instead. */
    ckjit_disk_cache c;
    ckjit__disk_open(&c, "/");
    assert_int_equal(c.usable, 0);
    assert_int_equal(c.writable, 0);
    printf("note: not root; tested a root-owned directory instead of chown\n");
    return;
  }
  assert_int_equal(chown(f->dir, 65534, 65534), 0);
  ckjit__disk_open(&f->c, f->dir);
  assert_int_equal(f->c.usable, 0);
  assert_int_equal(f->c.writable, 0);
  load_miss(&f->c, 3);
  char p4[CKJIT_PATH_MAX];
  entry_path(&f->c, 4, p4, sizeof p4);
  ckjit_entry_meta m;
  uint8_t p[PAYLOAD_MAX];
  size_t n;
  make_entry(4, &m, p, &n);
  (void)ckjit__disk_store(&f->c, &m, p, n);
  assert_false(tu_path_exists(p4));
  /* Owned by us again: usable. */
  assert_int_equal(chown(f->dir, geteuid(), getegid()), 0);
  open_usable(f);
  load_hit(&f->c, 3);
  store_ok(&f->c, 4);
  load_hit(&f->c, 4);
}

static void test_unusable_paths(void **state) {
  fixture *f = *state;
  ckjit_disk_cache c;
  /* A regular file. */
  char file[CKJIT_PATH_MAX + 16];
  tu_fmt(file, sizeof file, "%s/file", f->base);
  assert_int_equal(tu_write_file(file, "x", 1), 0);
  ckjit__disk_open(&c, file);
  assert_int_equal(c.usable, 0);
  assert_int_equal(c.writable, 0);
  load_miss(&c, 1);
  ckjit_entry_meta m;
  uint8_t p[PAYLOAD_MAX];
  size_t n;
  make_entry(1, &m, p, &n);
  (void)ckjit__disk_store(&c, &m, p, n);
  /* Below a regular file. */
  char below[CKJIT_PATH_MAX + 32];
  tu_fmt(below, sizeof below, "%s/file/cache", f->base);
  ckjit__disk_open(&c, below);
  assert_int_equal(c.usable, 0);
  load_miss(&c, 1);
  (void)ckjit__disk_store(&c, &m, p, n);
  /* Longer than CKJIT_PATH_MAX. */
  char *longp = malloc(CKJIT_PATH_MAX * 3);
  assert_non_null(longp);
  tu_fmt(longp, CKJIT_PATH_MAX * 3, "%s/", f->base);
  size_t k = strlen(longp);
  memset(longp + k, 'd', CKJIT_PATH_MAX * 2);
  longp[k + CKJIT_PATH_MAX * 2] = 0;
  ckjit__disk_open(&c, longp);
  assert_int_equal(c.usable, 0);
  assert_int_equal(c.writable, 0);
  load_miss(&c, 1);
  (void)ckjit__disk_store(&c, &m, p, n);
  free(longp);
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
      T(test_truncated_file),
      T(test_zero_length_file),
      T(test_flipped_bytes),
      T(test_wrong_format_version),
      T(test_other_key_renamed_in),
      T(test_leftover_temp_files),
      T(test_symlinked_entry),
      T(test_special_files_at_entry_path),
      T(test_readonly_dir),
      T(test_group_world_writable_refused),
      T(test_other_owner_refused),
      T(test_unusable_paths),
      T(test_concurrent_store_load),
      cmocka_unit_test(test_default_dir),
  };
#undef T
  return cmocka_run_group_tests_name("disk_cache", tests, NULL, NULL);
}
