/* Fault injection into the disk cache's writer (cache/disk_cache.c), at the
 * level of ckjit__disk_store / ckjit__disk_load.  What
 * tests/cache/test_disk_cache_damage.c and test_disk_cache_dirs.c already
 * cover (damaged, foreign, symlinked entries, leftover temp files, unsafe
 * directories) is not repeated; this file covers what a store meets:
 *
 *   - the test hook ckjit__disk_fault_hook(stage, path), called at the stages
 *     "open-temp", "write", "fsync", "rename" of a store: every stage is
 *     reached, in that order, with a path in the entry's directory;
 *   - an error (ENOSPC, EROFS, EIO, EDQUOT) at each stage: the store fails
 *     with CKJIT_ERROR_CACHE, counts one disk_write_error, warns once, leaves
 *     no entry and no temporary file, keeps an older entry of the same key
 *     intact, and fails only itself: writes stay on, a later store tries
 *     again (and fails again while the fault lasts), and once the fault is
 *     gone the same handle stores again (the cache heals by itself);
 *   - a process killed with SIGKILL inside each stage (a crash mid-write): no
 *     entry, or the old one intact; a leftover temporary file at most; a later
 *     lookup is a clean miss (not a reject), then a store and a hit;
 *   - a real full file system (a 64 KiB tmpfs) and a real read-only one (a
 *     tmpfs remounted read-only, both before and after the cache was opened),
 *     when this process may mount (root); otherwise skipped with the reason:
 *     here too, stores resume by themselves once there is room / the file
 *     system is writable again.
 *
 * The hook is ckjit__disk_fault_hook (cache/disk_cache.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/disk_cache.h"
#include "cache/entry.h"
#include "cache/key.h"
#include "ckjit/ckjit.h"
#include "elf_payload.h"
#include "test_util.h"

static const char *const stages[] = {"open-temp", "write", "fsync", "rename"};
enum { NSTAGES = 4 };

#define PAYLOAD_MAX 24000

typedef struct fixture {
  char *base;
  char dir[CKJIT_PATH_MAX];
  ckjit_disk_cache c;
  char mnt[CKJIT_PATH_MAX]; /* a mount point to undo, or "" */
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f) return -1;
  f->base = tu_mkdtemp("faults");
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
  ckjit__disk_fault_hook = NULL;
  if (f->mnt[0]) umount2(f->mnt, MNT_DETACH);
  tu_rm_rf(f->base);
  free(f->base);
  free(f);
  return 0;
}

/* Meta and payload of test entry `id` (`size` bytes when > 0). */
static void make_entry(int id, size_t size, ckjit_entry_meta *m, uint8_t *payload, size_t *n) {
  memset(m, 0, sizeof *m);
  for (int i = 0; i < 16; i++) m->key.bytes[i] = (uint8_t)(id * 0x35 + i * 11 + 3);
  m->key.bytes[0] = (uint8_t)(0x10 * (id & 15) + 2);
  tu_fmt(m->arch, sizeof m->arch, "gfx90a");
  tu_fmt(m->kernel, sizeof m->kernel, "faulty_%d", id);
  *n = ep_build(payload, size ? size : 3000 + (size_t)id * 101, m->arch, m->kernel,
                (uint64_t)id * 7 + 1);
}

static ckjit_stats stats(void) {
  ckjit_stats s;
  ckjit_get_stats(&s);
  return s;
}

static ckjit_status store(ckjit_disk_cache *c, int id, size_t size) {
  ckjit_entry_meta m;
  static uint8_t p[PAYLOAD_MAX];
  size_t n;
  make_entry(id, size, &m, p, &n);
  return ckjit__disk_store(c, &m, p, n);
}

static void store_ok(ckjit_disk_cache *c, int id, size_t size) {
  ckjit_status st = store(c, id, size);
  if (st != CKJIT_SUCCESS) print_error("store %d: %s\n", id, ckjit_last_error());
  assert_int_equal(st, CKJIT_SUCCESS);
}

/* 1 hit with the right bytes, 0 miss; fails the test on a wrong payload. */
static int load(ckjit_disk_cache *c, int id, size_t size) {
  ckjit_entry_meta m, got;
  static uint8_t p[PAYLOAD_MAX];
  size_t n;
  make_entry(id, size, &m, p, &n);
  void *payload = NULL;
  size_t got_size = 0;
  int rc = ckjit__disk_load(c, &m.key, &payload, &got_size, &got);
  if (rc == 1) {
    assert_int_equal(got_size, n);
    assert_memory_equal(payload, p, n);
    assert_string_equal(got.kernel, m.kernel);
    free(payload);
  }
  return rc;
}

static void entry_path(const ckjit_disk_cache *c, int id, char *out, size_t len) {
  ckjit_entry_meta m;
  static uint8_t p[PAYLOAD_MAX];
  size_t n;
  make_entry(id, 0, &m, p, &n);
  ckjit__disk_entry_path(c, &m.key, out, len);
}

/* Counts the files below the cache directory: entries and temporary
 * (".tmp-") files; anything else fails the test. */
static void count_files(const char *dir, int *entries, int *temps) {
  *entries = *temps = 0;
  DIR *root = opendir(dir);
  if (!root) return;
  struct dirent *de;
  while ((de = readdir(root))) {
    if (de->d_name[0] == '.' && (!de->d_name[1] || !strcmp(de->d_name, ".."))) continue;
    char sub[CKJIT_PATH_MAX + 300];
    tu_fmt(sub, sizeof sub, "%s/%s", dir, de->d_name);
    DIR *d = opendir(sub);
    if (!d) {
      if (!strncmp(de->d_name, ".tmp-", 5)) (*temps)++;
      else if (strcmp(de->d_name, "filler")) fail_msg("unexpected file in the cache root: %s", sub);
      continue;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      if (!strncmp(e->d_name, ".tmp-", 5)) (*temps)++;
      else if (strlen(e->d_name) == 38 && !strcmp(e->d_name + 32, ".ckjit")) (*entries)++;
      else fail_msg("unexpected file in the cache: %s/%s", sub, e->d_name);
    }
    closedir(d);
  }
  closedir(root);
}

/* Removes the temporary files below the cache directory. */
static void remove_temps(const char *dir) {
  DIR *root = opendir(dir);
  if (!root) return;
  struct dirent *de;
  while ((de = readdir(root))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    char sub[CKJIT_PATH_MAX + 300];
    tu_fmt(sub, sizeof sub, "%s/%s", dir, de->d_name);
    DIR *d = opendir(sub);
    if (!d) continue;
    struct dirent *e;
    while ((e = readdir(d))) {
      if (strncmp(e->d_name, ".tmp-", 5)) continue;
      char path[CKJIT_PATH_MAX + 600];
      tu_fmt(path, sizeof path, "%s/%s", sub, e->d_name);
      unlink(path);
    }
    closedir(d);
  }
  closedir(root);
}

/* ---- the hook ------------------------------------------------------------ */

static struct {
  char stage[16];      /* stage to act on ("" none) */
  int err;             /* errno to return there, or 0 */
  int kill;            /* raise(SIGKILL) there */
  int calls;           /* hook calls */
  char seen[16][16];   /* stages in call order (first 16) */
  char paths[16][CKJIT_ENTRY_PATH_MAX];
} hk;

static int hook(const char *stage, const char *path) {
  if (hk.calls < 16) {
    tu_fmt(hk.seen[hk.calls], sizeof hk.seen[0], "%s", stage ? stage : "(null)");
    tu_fmt(hk.paths[hk.calls], sizeof hk.paths[0], "%s", path ? path : "(null)");
  }
  hk.calls++;
  if (stage && !strcmp(stage, hk.stage)) {
    if (hk.kill) raise(SIGKILL);
    return hk.err;
  }
  return 0;
}

static void hook_set(const char *stage, int err, int kill) {
  memset(&hk, 0, sizeof hk);
  tu_fmt(hk.stage, sizeof hk.stage, "%s", stage ? stage : "");
  hk.err = err;
  hk.kill = kill;
  ckjit__disk_fault_hook = hook;
}

/* ---- tests --------------------------------------------------------------- */

/* The hook sees the four stages of a store, in order, in the entry's
 * directory (several "write" calls are fine). */
static void test_hook_stages(void **state) {
  fixture *f = *state;
  ckjit__disk_open(&f->c, f->dir);
  assert_int_equal(f->c.writable, 1);
  hook_set(NULL, 0, 0);
  store_ok(&f->c, 1, 0);
  ckjit__disk_fault_hook = NULL;
  int next = 0;
  char sub[CKJIT_ENTRY_PATH_MAX];
  entry_path(&f->c, 1, sub, sizeof sub);
  *strrchr(sub, '/') = 0;
  for (int i = 0; i < hk.calls && i < 16; i++) {
    printf("hook: %s %s\n", hk.seen[i], hk.paths[i]);
    if (strncmp(hk.paths[i], sub, strlen(sub)))
      fail_msg("hook path %s is not in the entry's directory %s", hk.paths[i], sub);
    if (next < NSTAGES && !strcmp(hk.seen[i], stages[next])) next++;
    else if (!(next > 0 && !strcmp(hk.seen[i], stages[next - 1])))
      fail_msg("hook stage %s out of order (after %s)", hk.seen[i], next ? stages[next - 1] : "-");
  }
  if (next != NSTAGES) fail_msg("the hook never saw stage %s", stages[next]);
  assert_int_equal(load(&f->c, 1, 0), 1);
}

static void check_failed_store(fixture *f, const char *stage, int err) {
  ckjit_stats s0 = stats();
  hook_set(stage, err, 0);
  ckjit_status st = store(&f->c, 2, 0);
  int calls = hk.calls;
  if (st != CKJIT_ERROR_CACHE)
    fail_msg("%s at %s: store returned %s, expected CKJIT_ERROR_CACHE", strerror(err), stage,
             ckjit_status_string(st));
  if (!strstr(ckjit_last_error(), strerror(err)))
    printf("note: the error does not name %s: %s\n", strerror(err), ckjit_last_error());
  ckjit_stats s1 = stats();
  assert_int_equal(s1.disk_write_errors, s0.disk_write_errors + 1);
  assert_int_equal(s1.disk_writes, s0.disk_writes);
  /* It failed only itself: writes stay on.  The handle has warned, once for
   * its life (an earlier case may have set the flag), as a directory-wide
   * failure, not one of this entry's name. */
  assert_int_equal(f->c.writable, 1);
  assert_int_equal(f->c.warned_dir_errors, 1);
  assert_int_equal(f->c.warned_entry_errors, 0);
  /* While the fault lasts, the next store tries again and fails again. */
  st = store(&f->c, 3, 0);
  assert_int_equal(st, CKJIT_ERROR_CACHE);
  if (hk.calls == calls) fail_msg("the store after a failed one did not try again");
  assert_int_equal(stats().disk_write_errors, s0.disk_write_errors + 2);
  ckjit__disk_fault_hook = NULL;
  /* No entry, no temporary file; the older entry is intact. */
  uint64_t rejects = stats().disk_rejects;
  assert_int_equal(load(&f->c, 2, 0), 0);
  assert_int_equal(load(&f->c, 3, 0), 0);
  assert_int_equal(load(&f->c, 1, 0), 1);
  assert_int_equal(stats().disk_rejects, rejects);
  int entries, temps;
  count_files(f->dir, &entries, &temps);
  if (temps) fail_msg("%s at %s left %d temporary file(s)", strerror(err), stage, temps);
  assert_int_equal(entries, 1);
  /* The fault is gone: the same handle stores again, without a reopen. */
  store_ok(&f->c, 2, 0);
  assert_int_equal(load(&f->c, 2, 0), 1);
  assert_int_equal(load(&f->c, 1, 0), 1);
  char p2[CKJIT_ENTRY_PATH_MAX];
  entry_path(&f->c, 2, p2, sizeof p2);
  assert_int_equal(unlink(p2), 0);
}

static void test_errors_at_every_stage(void **state) {
  fixture *f = *state;
  const int errs[] = {ENOSPC, EROFS, EIO, EDQUOT};
  ckjit__disk_open(&f->c, f->dir);
  store_ok(&f->c, 1, 0);
  for (int s = 0; s < NSTAGES; s++)
    for (size_t e = 0; e < sizeof errs / sizeof errs[0]; e++) check_failed_store(f, stages[s], errs[e]);
}

/* A failure while replacing an existing entry of the same key keeps the old
 * (valid) entry. */
static void test_failed_replace_keeps_old_entry(void **state) {
  fixture *f = *state;
  ckjit__disk_open(&f->c, f->dir);
  store_ok(&f->c, 4, 0);
  for (int s = 0; s < NSTAGES; s++) {
    hook_set(stages[s], ENOSPC, 0);
    assert_int_equal(store(&f->c, 4, 0), CKJIT_ERROR_CACHE);
    ckjit__disk_fault_hook = NULL;
    assert_int_equal(load(&f->c, 4, 0), 1);
    int entries, temps;
    count_files(f->dir, &entries, &temps);
    assert_int_equal(entries, 1);
    assert_int_equal(temps, 0);
    ckjit__disk_open(&f->c, f->dir);
  }
}

/* Forks a child that stores entry `id` with the hook raising SIGKILL at
 * `stage`; returns the child's wait status. */
static int store_killed(fixture *f, int id, const char *stage) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    ckjit_disk_cache c;
    ckjit__disk_open(&c, f->dir);
    hook_set(stage, 0, 1);
    (void)store(&c, id, 20000);
    _exit(hk.calls ? 3 : 4); /* not killed: the stage was never reached */
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return status;
}

static void test_sigkill_mid_write(void **state) {
  fixture *f = *state;
  ckjit__disk_open(&f->c, f->dir);
  for (int s = 0; s < NSTAGES; s++) {
    for (int replace = 0; replace < 2; replace++) {
      int id = 5 + s; /* one key per stage */
      if (replace) store_ok(&f->c, id, 20000);
      int status = store_killed(f, id, stages[s]);
      if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
        fail_msg("child storing with SIGKILL at %s: not killed (status %#x; %s)", stages[s],
                 status,
                 WIFEXITED(status) && WEXITSTATUS(status) == 4 ? "hook never called"
                                                                : "stage never reached");
      int entries, temps;
      count_files(f->dir, &entries, &temps);
      printf("killed at %s%s: %d entries, %d temporary files left\n", stages[s],
             replace ? " (replacing)" : "", entries, temps);
      /* A half entry is never visible: no entry (or the old one, intact). */
      uint64_t rejects = stats().disk_rejects;
      int hit = load(&f->c, id, 20000);
      if (stats().disk_rejects != rejects)
        fail_msg("killed at %s: the lookup rejected an entry (a partial entry became visible)",
                 stages[s]);
      assert_int_equal(hit, replace);
      assert_true(temps <= 1);
      /* Then a store and a hit, the temp file notwithstanding. */
      store_ok(&f->c, id, 20000);
      assert_int_equal(load(&f->c, id, 20000), 1);
      char p[CKJIT_ENTRY_PATH_MAX];
      entry_path(&f->c, id, p, sizeof p);
      assert_int_equal(unlink(p), 0);
      remove_temps(f->dir);
    }
  }
}

/* Mounts a tmpfs of `size` at base/name; "" when not permitted (reason in
 * why). */
static int mount_tmpfs(fixture *f, const char *name, const char *opts, char *why, size_t len) {
  tu_fmt(f->mnt, sizeof f->mnt, "%s/%s", f->base, name);
  if (mkdir(f->mnt, 0700)) {
    snprintf(why, len, "mkdir: %s", strerror(errno));
    f->mnt[0] = 0;
    return -1;
  }
  if (mount("tmpfs", f->mnt, "tmpfs", 0, opts)) {
    snprintf(why, len, "mount -t tmpfs -o %s: %s", opts, strerror(errno));
    rmdir(f->mnt);
    f->mnt[0] = 0;
    return -1;
  }
  return 0;
}

static void test_real_full_tmpfs(void **state) {
  fixture *f = *state;
  char why[1500];
  if (mount_tmpfs(f, "small", "size=64k,mode=0700", why, sizeof why)) {
    printf("SKIP real full disk: %s\n", why);
    skip();
  }
  tu_fmt(f->dir, sizeof f->dir, "%s/cache", f->mnt);
  ckjit__disk_open(&f->c, f->dir);
  assert_int_equal(f->c.writable, 1);
  ckjit_stats s0 = stats();
  int stored = 0;
  ckjit_status st = CKJIT_SUCCESS;
  for (int id = 0; id < 8 && st == CKJIT_SUCCESS; id++) {
    st = store(&f->c, id, 20000);
    if (st == CKJIT_SUCCESS) stored++;
  }
  printf("64 KiB tmpfs: %d entries of 20000 bytes stored, then: %s\n", stored, ckjit_last_error());
  assert_int_equal(st, CKJIT_ERROR_CACHE);
  assert_true(stored >= 1);
  ckjit_stats s1 = stats();
  assert_int_equal(s1.disk_write_errors, s0.disk_write_errors + 1);
  assert_int_equal(f->c.writable, 1);
  /* Still full: another store fails too, and cleans up after itself. */
  assert_int_equal(store(&f->c, stored + 1, 20000), CKJIT_ERROR_CACHE);
  assert_int_equal(stats().disk_write_errors, s0.disk_write_errors + 2);
  /* What was stored is intact; the failed one is a miss, not a reject; the
   * failed write's temporary file is gone (it would hold the space). */
  for (int id = 0; id < stored; id++) assert_int_equal(load(&f->c, id, 20000), 1);
  assert_int_equal(load(&f->c, stored, 20000), 0);
  assert_int_equal(stats().disk_rejects, s0.disk_rejects);
  int entries, temps;
  count_files(f->dir, &entries, &temps);
  assert_int_equal(entries, stored);
  assert_int_equal(temps, 0);
  /* Room again: the same handle stores (nothing latched writes off). */
  char p0[CKJIT_ENTRY_PATH_MAX];
  entry_path(&f->c, 0, p0, sizeof p0);
  assert_int_equal(unlink(p0), 0);
  store_ok(&f->c, stored, 20000);
  assert_int_equal(load(&f->c, stored, 20000), 1);
}

/* Real read-only file system: a tmpfs remounted read-only. */
static int remount_ro(fixture *f, int ro, char *why, size_t len) {
  if (mount(NULL, f->mnt, NULL, MS_REMOUNT | (ro ? MS_RDONLY : 0), NULL)) {
    snprintf(why, len, "remount %s: %s", ro ? "ro" : "rw", strerror(errno));
    return -1;
  }
  return 0;
}

static void test_real_readonly_fs(void **state) {
  fixture *f = *state;
  char why[1500];
  if (mount_tmpfs(f, "ro", "size=1m,mode=0700", why, sizeof why)) {
    printf("SKIP real read-only file system: %s\n", why);
    skip();
  }
  tu_fmt(f->dir, sizeof f->dir, "%s/cache", f->mnt);
  ckjit__disk_open(&f->c, f->dir);
  store_ok(&f->c, 1, 0);
  /* Turned read-only after the cache was opened: the store fails (EROFS),
   * once, and the library goes on. */
  if (remount_ro(f, 1, why, sizeof why)) {
    printf("SKIP real read-only file system: %s\n", why);
    skip();
  }
  ckjit_stats s0 = stats();
  assert_int_equal(store(&f->c, 2, 0), CKJIT_ERROR_CACHE);
  assert_int_equal(stats().disk_write_errors, s0.disk_write_errors + 1);
  assert_int_equal(f->c.writable, 1); /* a failure fails its own entry only */
  assert_int_equal(store(&f->c, 3, 0), CKJIT_ERROR_CACHE);
  assert_int_equal(load(&f->c, 1, 0), 1);
  assert_int_equal(load(&f->c, 2, 0), 0);
  /* Writable again: the same handle stores, without a reopen. */
  if (remount_ro(f, 0, why, sizeof why)) fail_msg("%s", why);
  store_ok(&f->c, 2, 0);
  assert_int_equal(load(&f->c, 2, 0), 1);
  char p2[CKJIT_ENTRY_PATH_MAX];
  entry_path(&f->c, 2, p2, sizeof p2);
  assert_int_equal(unlink(p2), 0);
  if (remount_ro(f, 1, why, sizeof why)) fail_msg("%s", why);
  /* Opened read-only: reads work, writes are off from the start. */
  ckjit__disk_open(&f->c, f->dir);
  assert_int_equal(f->c.usable, 1);
  assert_int_equal(f->c.writable, 0);
  assert_int_equal(load(&f->c, 1, 0), 1);
  assert_int_equal(store(&f->c, 2, 0), CKJIT_ERROR_CACHE);
  /* A cache directory that does not exist on a read-only file system. */
  ckjit_disk_cache c2;
  char missing[CKJIT_PATH_MAX + 16];
  tu_fmt(missing, sizeof missing, "%s/missing", f->mnt);
  ckjit__disk_open(&c2, missing);
  assert_int_equal(c2.writable, 0);
  assert_int_equal(store(&c2, 2, 0), CKJIT_ERROR_CACHE);
  int entries, temps;
  assert_int_equal(remount_ro(f, 0, why, sizeof why), 0);
  count_files(f->dir, &entries, &temps);
  assert_int_equal(entries, 1);
  assert_int_equal(temps, 0);
}

int main(void) {
  umask(022);
  unsetenv("CKJIT_CACHE_PATH");
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_hook_stages),
      T(test_errors_at_every_stage),
      T(test_failed_replace_keeps_old_entry),
      T(test_sigkill_mid_write),
      T(test_real_full_tmpfs),
      T(test_real_readonly_fs),
  };
#undef T
  return cmocka_run_group_tests_name("faults_disk", tests, NULL, NULL);
}
