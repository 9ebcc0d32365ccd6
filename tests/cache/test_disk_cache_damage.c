/* The on-disk cache against damaged or hostile entries, each in a fresh temp
 * dir: truncated, zero-length, flipped, of another format version, another
 * key's entry renamed in, leftover temporary files, symlinks, a FIFO or a
 * directory at the entry path.  A cache directory is shared and outlives
 * crashes, so any of these can be found there: each must be a miss (never a
 * wrong payload, never a hang), and the next store must replace it, so one bad
 * file never keeps a kernel out of the cache for good. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "disk_cache_fixture.h"
#include "entry_format.h"

/* ------------------------------------------------------------------------ */

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

int main(void) {
  /* Stores by this process must not depend on the caller's umask. */
  umask(022);
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_truncated_file),
      T(test_zero_length_file),
      T(test_flipped_bytes),
      T(test_wrong_format_version),
      T(test_other_key_renamed_in),
      T(test_leftover_temp_files),
      T(test_symlinked_entry),
      T(test_special_files_at_entry_path),
  };
#undef T
  return cmocka_run_group_tests_name("disk_cache_damage", tests, NULL, NULL);
}
