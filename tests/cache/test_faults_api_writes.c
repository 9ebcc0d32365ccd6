/* Faults seen through the public API, part 2: the cache (CKJIT_CACHE_DIR)
 * cannot take the entry.  A write that fails (ENOSPC, EROFS) or a process
 * killed at each stage of a store, a real full or read-only file system, a
 * cache directory of another user.  Whatever the disk does, the call builds
 * the right code object (same key and the very bytes a clean compile gives):
 * it fails with CKJIT_ERROR_CACHE, naming the reason, when the entry could not
 * be stored, counts the disk_write_error, leaves no temporary file, and a
 * later process stores the entry again.  Damaged entries are in
 * test_faults_api.c.
 *
 * Write failures and crashes are injected with ckjit__disk_fault_hook
 * (cache/disk_cache.h); the real tmpfs cases need mount permission (root)
 * and skip with the reason otherwise. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "faults_api_fixture.h"

static const char *const stages[] = {"open-temp", "write", "fsync", "rename"};
enum { NSTAGES = 4 };

/* ---- write failures (hook) ----------------------------------------------- */

static struct {
  const char *stage;
  int err, kill, calls;
} hk;

static int hook(const char *stage, const char *path) {
  (void)path;
  hk.calls++;
  if (stage && hk.stage && !strcmp(stage, hk.stage)) {
    if (hk.kill) raise(SIGKILL);
    return hk.err;
  }
  return 0;
}

static void test_write_errors(void **state) {
  fixture *f = *state;
  const int errs[] = {ENOSPC, EROFS};
  for (int st = 0; st < NSTAGES; st++)
    for (int e = 0; e < 2; e++) {
      char dir[1300];
      tu_fmt(dir, sizeof dir, "%s/%s-%d", f->base, stages[st], errs[e]);
      use_cache_dir(dir);
      hk.stage = stages[st];
      hk.err = errs[e];
      hk.kill = 0;
      hk.calls = 0;
      ckjit__disk_fault_hook = hook;
      /* Both calls build their kernel and fail with CKJIT_ERROR_CACHE: each
       * write fails (a failure never turns writes off: the second tries
       * again); both name the error. */
      ckjit_device_info info; /* initializes (on a GPU-less host that records why) */
      assert_int_equal(ckjit_get_device_info(&info), CKJIT_SUCCESS);
      assert_int_equal(compile_unstored(0), 0);
      assert_non_null(strstr(ckjit_last_error(), strerror(errs[e])));
      assert_int_equal(compile_unstored(1), 0);
      assert_non_null(strstr(ckjit_last_error(), strerror(errs[e])));
      ckjit__disk_fault_hook = NULL;
      ckjit_stats s = stats();
      printf("%s at %s: compiles %llu, write errors %llu, writes %llu\n", strerror(errs[e]),
             stages[st], (unsigned long long)s.compiles,
             (unsigned long long)s.disk_write_errors, (unsigned long long)s.disk_writes);
      if (!hk.calls) fail_msg("the hook was never called");
      assert_int_equal(s.compiles, 2);
      assert_int_equal(s.disk_write_errors, 2);
      assert_int_equal(s.disk_writes, 0);
      char path[1300];
      entry_file(dir, 0, path, sizeof path);
      assert_false(tu_path_exists(path));
      assert_int_equal(count_temps(dir), 0);
      /* A later process (here: re-initialized) writes again. */
      use_cache_dir(dir);
      assert_int_equal(compile_ok(0), 0);
      assert_int_equal(stats().disk_writes, 1);
      entry_is_clean(dir, 0);
      assert_int_equal(compile_ok(0), 1);
    }
}

static void test_sigkill_mid_write(void **state) {
  fixture *f = *state;
  for (int st = 0; st < NSTAGES; st++) {
    char dir[1300];
    tu_fmt(dir, sizeof dir, "%s/kill-%s", f->base, stages[st]);
    use_cache_dir(dir);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      hk.stage = stages[st];
      hk.kill = 1;
      ckjit__disk_fault_hook = hook;
      ckjit_compile_result r;
      ckjit_status s = ckjit_compile_spec(g_spec[0], g_arch, &r);
      _exit(s == CKJIT_SUCCESS ? 3 : 4);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
      fail_msg("the child was not killed at %s (status %#x)", stages[st], status);
    int temps = count_temps(dir);
    printf("killed at %s: %d temporary file(s) left\n", stages[st], temps);
    assert_true(temps <= 1);
    char path[1300];
    entry_file(dir, 0, path, sizeof path);
    assert_false(tu_path_exists(path));
    /* A clean miss, a compile, a good entry. */
    use_cache_dir(dir);
    assert_int_equal(compile_ok(0), 0);
    ckjit_stats s = stats();
    assert_int_equal(s.disk_rejects, 0);
    assert_int_equal(s.compiles, 1);
    assert_int_equal(s.disk_writes, 1);
    entry_is_clean(dir, 0);
    assert_int_equal(compile_ok(0), 1);
  }
}

/* ---- real file systems --------------------------------------------------- */

static int mount_tmpfs(fixture *f, const char *opts, char *why, size_t len) {
  tu_fmt(f->mnt, sizeof f->mnt, "%s/mnt", f->base);
  if (mkdir(f->mnt, 0700)) {
    snprintf(why, len, "mkdir: %s", strerror(errno));
    f->mnt[0] = 0;
    return -1;
  }
  if (mount("tmpfs", f->mnt, "tmpfs", 0, opts)) {
    snprintf(why, len, "mount -t tmpfs -o %s: %s", opts, strerror(errno));
    f->mnt[0] = 0;
    return -1;
  }
  return 0;
}

static void test_real_full_disk(void **state) {
  fixture *f = *state;
  char why[1500];
  if (mount_tmpfs(f, "size=64k,mode=0700", why, sizeof why)) {
    printf("SKIP real full disk: %s\n", why);
    skip();
  }
  char cache[1300], filler[1300];
  tu_fmt(cache, sizeof cache, "%s/cache", f->mnt);
  tu_fmt(filler, sizeof filler, "%s/filler", f->mnt);
  assert_int_equal(mkdir(cache, 0700), 0);
  /* Fill the file system. */
  FILE *fp = fopen(filler, "w");
  assert_non_null(fp);
  static char block[4096];
  while (fwrite(block, 1, sizeof block, fp) == sizeof block) {
  }
  fclose(fp);
  use_cache_dir(cache);
  assert_int_equal(compile_unstored(0), 0);
  assert_int_equal(compile_unstored(1), 0);
  ckjit_stats s = stats();
  assert_int_equal(s.compiles, 2);
  assert_int_equal(s.disk_write_errors, 2); /* each store tried (and failed) */
  assert_int_equal(s.disk_writes, 0);
  assert_int_equal(count_temps(cache), 0);
  /* Room again: a new process stores it. */
  assert_int_equal(unlink(filler), 0);
  use_cache_dir(cache);
  assert_int_equal(compile_ok(0), 0);
  entry_is_clean(cache, 0);
  assert_int_equal(compile_ok(0), 1);
}

static void test_real_readonly_fs(void **state) {
  fixture *f = *state;
  char why[1500];
  if (mount_tmpfs(f, "size=1m,mode=0700", why, sizeof why)) {
    printf("SKIP real read-only file system: %s\n", why);
    skip();
  }
  char cache[1300], missing[1300];
  tu_fmt(cache, sizeof cache, "%s/cache", f->mnt);
  tu_fmt(missing, sizeof missing, "%s/missing", f->mnt);
  use_cache_dir(cache);
  assert_int_equal(compile_ok(0), 0);
  if (mount(NULL, f->mnt, NULL, MS_REMOUNT | MS_RDONLY, NULL)) {
    printf("SKIP real read-only file system: remount ro: %s\n", strerror(errno));
    skip();
  }
  /* Opened read-only: a hit for what is there, compiles (not stored) for
   * the rest. */
  use_cache_dir(cache);
  assert_int_equal(compile_ok(0), 1);
  assert_int_equal(compile_unstored(1), 0);
  ckjit_stats s = stats();
  assert_int_equal(s.disk_hits, 1);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.disk_writes, 0);
  /* A cache directory that cannot be created. */
  use_cache_dir(missing);
  assert_int_equal(compile_unstored(0), 0);
  ckjit_device_info info;
  assert_int_equal(ckjit_get_device_info(&info), CKJIT_SUCCESS);
  assert_string_equal(info.cache_dir, "");
  /* Read-only after the first write: the next write fails, once. */
  assert_int_equal(mount(NULL, f->mnt, NULL, MS_REMOUNT, NULL), 0);
  char cache2[1300];
  tu_fmt(cache2, sizeof cache2, "%s/cache2", f->mnt);
  use_cache_dir(cache2);
  assert_int_equal(compile_ok(0), 0);
  assert_int_equal(mount(NULL, f->mnt, NULL, MS_REMOUNT | MS_RDONLY, NULL), 0);
  assert_int_equal(compile_unstored(1), 0);
  s = stats();
  assert_int_equal(s.disk_writes, 1);
  assert_int_equal(s.disk_write_errors, 1);
  assert_int_equal(compile_ok(0), 1);
  assert_int_equal(mount(NULL, f->mnt, NULL, MS_REMOUNT, NULL), 0);
  entry_is_clean(cache2, 0);
}

/* A cache directory of another user is neither read nor written. */
static void test_other_owner(void **state) {
  fixture *f = *state;
  if (geteuid() != 0) {
    printf("SKIP directory owned by another user: not root (cannot chown)\n");
    skip();
  }
  assert_int_equal(compile_ok(0), 0);
  assert_int_equal(chown(f->cache, 65534, 65534), 0);
  use_cache_dir(f->cache);
  assert_int_equal(compile_unstored(0), 0); /* the valid entry there is not used */
  assert_int_equal(compile_unstored(1), 0);
  ckjit_stats s = stats();
  assert_int_equal(s.disk_hits, 0);
  assert_int_equal(s.disk_writes, 0);
  assert_int_equal(s.compiles, 2);
  ckjit_device_info info;
  assert_int_equal(ckjit_get_device_info(&info), CKJIT_SUCCESS);
  assert_string_equal(info.cache_dir, "");
  char p1[1300];
  entry_file(f->cache, 1, p1, sizeof p1);
  assert_false(tu_path_exists(p1));
  assert_int_equal(chown(f->cache, 0, 0), 0);
}

WRAP(test_write_errors)
WRAP(test_sigkill_mid_write)
WRAP(test_real_full_disk)
WRAP(test_real_readonly_fs)
WRAP(test_other_owner)

int main(void) {
  umask(022);
#define T(fn) cmocka_unit_test_setup_teardown(w_##fn, setup_or_skip, teardown_if)
  const struct CMUnitTest tests[] = {
      T(test_write_errors),
      T(test_sigkill_mid_write),
      T(test_real_full_disk),
      T(test_real_readonly_fs),
      T(test_other_owner),
  };
#undef T
  return cmocka_run_group_tests_name("faults_api_writes", tests, group_setup, group_teardown);
}
