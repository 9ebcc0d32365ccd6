/* The on-disk cache against cache directories it must not use or can only
 * read, each in a fresh temp dir: read-only, writable by group or others,
 * owned by another user, a regular file, below a file, a path too long.
 * Entries in a directory others can write could be planted, so an unsafe
 * directory is neither read nor written; an unusable one turns every call
 * into a quiet miss or a failed store (never a crash); fixed, it works
 * again. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "disk_cache_fixture.h"

/* ------------------------------------------------------------------------ */

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

int main(void) {
  /* Stores by this process must not depend on the caller's umask. */
  umask(022);
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_readonly_dir),
      T(test_group_world_writable_refused),
      T(test_other_owner_refused),
      T(test_unusable_paths),
  };
#undef T
  return cmocka_run_group_tests_name("disk_cache_dirs", tests, NULL, NULL);
}
