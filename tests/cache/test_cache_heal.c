/* Caches that heal (issue 15, items 2, 3 and 10), end to end through the
 * public API with a real compiler (NVRTC for sm_90, else hipRTC for gfx90a;
 * skipped when neither is installed).  Every step runs in a fresh child
 * process, as separate application runs would, so a hit can only come from
 * the disk:
 *
 *   - a subdirectory made writable by group or others (chmod 0777): the next
 *     run is a disk hit (the library removes the write bits), and so is the
 *     one after; before, every run rejected the entry and compiled again;
 *   - an entry file made writable by group or others: one recompile replaces
 *     it (mode 0600), then disk hits;
 *   - a directory planted at one entry's name, and a symlink in place of
 *     another entry's subdirectory: a run that builds that kernel and an
 *     unrelated one still stores the unrelated one; before, the first failed
 *     store turned disk writes off for the whole process;
 *   - an entry whose payload was replaced by /etc/passwd (or emptied) and its
 *     checksums recomputed: never served; the run recompiles and replaces it.
 * Only the public API and the documented entry layout are used, so this
 * program also builds against an older libckjit (to show the defects). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckjit/ckjit.h"
#include "entry_format.h"
#include "test_util.h"

static const char *g_arch; /* the arch whose compiler is present */

static const char *const specs[] = {
    "transpose:dtype=f16",
    "transpose:dtype=f32",
    "transpose:dtype=bf16",
    "elementwise:dtype=f32,op=relu",
};
enum { NSPECS = 4 };

typedef struct run_result {
  int ok[NSPECS];     /* ckjit_compile_spec returned CKJIT_SUCCESS */
  int not_stored[NSPECS]; /* it returned CKJIT_ERROR_CACHE: compiled, but not stored */
  int cached[NSPECS]; /* nothing was compiled for it */
  char key[NSPECS][33];
  uint64_t compiles, disk_hits, disk_rejects;
  char error[256];
} run_result;

/* Runs ckjit_compile_spec for the specs selected by `mask`, in order, in a
 * child process whose cache directory is `dir` (a fresh application run).
 * The specs in `may_not_store` may fail with CKJIT_ERROR_CACHE (their entry
 * could not be stored), the others must succeed. */
static run_result run_some(const char *dir, unsigned mask, unsigned may_not_store) {
  run_result r;
  memset(&r, 0, sizeof r);
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    setenv("CKJIT_CACHE_DIR", dir, 1);
    for (int i = 0; i < NSPECS; i++) {
      if (!(mask & (1u << i))) continue;
      ckjit_compile_result cr;
      memset(&cr, 0, sizeof cr);
      ckjit_status st = ckjit_compile_spec(specs[i], g_arch, &cr);
      r.ok[i] = st == CKJIT_SUCCESS;
      r.not_stored[i] = st == CKJIT_ERROR_CACHE;
      r.cached[i] = cr.cached;
      memcpy(r.key[i], cr.key, sizeof r.key[i]);
      r.key[i][32] = '\0';
      if (st != CKJIT_SUCCESS)
        snprintf(r.error, sizeof r.error, "%s: %s", ckjit_status_string(st), ckjit_last_error());
    }
    ckjit_stats s;
    ckjit_get_stats(&s);
    r.compiles = s.compiles;
    r.disk_hits = s.disk_hits;
    r.disk_rejects = s.disk_rejects;
    ssize_t w = write(fds[1], &r, sizeof r);
    _exit(w == (ssize_t)sizeof r ? 0 : 1);
  }
  close(fds[1]);
  size_t got = 0;
  while (got < sizeof r) {
    ssize_t n = read(fds[0], (char *)&r + got, sizeof r - got);
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fds[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || got != sizeof r)
    fail_msg("child run failed (status %#x)", status);
  for (int i = 0; i < NSPECS; i++)
    if ((mask & (1u << i)) && !r.ok[i] && !((may_not_store & (1u << i)) && r.not_stored[i]))
      fail_msg("%s for %s: %s", specs[i], g_arch, r.error);
  return r;
}

static run_result run(const char *dir, unsigned mask) { return run_some(dir, mask, 0); }

static void entry_path(const char *dir, const char *key, char *out, size_t len) {
  tu_fmt(out, len, "%s/%.2s/%s.ckjit", dir, key, key);
}

static void subdir_path(const char *dir, const char *key, char *out, size_t len) {
  tu_fmt(out, len, "%s/%.2s", dir, key);
}

static mode_t mode_of(const char *path) {
  struct stat st;
  assert_int_equal(lstat(path, &st), 0);
  return st.st_mode & 07777;
}

typedef struct fixture {
  char *base;
  char dir[1024];
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || !(f->base = tu_mkdtemp("heal"))) return -1;
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

static void test_group_writable_subdir_heals(void **state) {
  fixture *f = *state;
  run_result a = run(f->dir, 1u);
  assert_int_equal(a.cached[0], 0); /* the prewarm: compiled and stored */
  char sub[1200], path[1200];
  subdir_path(f->dir, a.key[0], sub, sizeof sub);
  entry_path(f->dir, a.key[0], path, sizeof path);
  assert_true(tu_path_exists(path));
  assert_int_equal(chmod(sub, 0777), 0);
  for (int i = 0; i < 2; i++) {
    run_result b = run(f->dir, 1u);
    printf("run %d after chmod 0777: cached %d, compiles %llu, disk hits %llu, rejects %llu\n",
           i + 1, b.cached[0], (unsigned long long)b.compiles,
           (unsigned long long)b.disk_hits, (unsigned long long)b.disk_rejects);
    assert_int_equal(b.cached[0], 1);
    assert_int_equal(b.compiles, 0);
    assert_int_equal(b.disk_hits, 1);
    assert_int_equal(b.disk_rejects, 0);
  }
  assert_int_equal(mode_of(sub) & 022, 0);
}

static void test_group_writable_entry_heals(void **state) {
  fixture *f = *state;
  run_result a = run(f->dir, 1u);
  char path[1200];
  entry_path(f->dir, a.key[0], path, sizeof path);
  assert_int_equal(chmod(path, 0666), 0);
  run_result b = run(f->dir, 1u); /* refused (others may have changed it), replaced */
  assert_int_equal(b.cached[0], 0);
  assert_int_equal(b.disk_rejects, 1);
  assert_int_equal(mode_of(path), 0600);
  run_result c = run(f->dir, 1u);
  assert_int_equal(c.cached[0], 1);
  assert_int_equal(c.compiles, 0);
}

/* A directory at spec 0's entry name, a symlink in place of spec 2's
 * subdirectory: one run building specs 0..3 still stores 1 and 3. */
static void test_bad_names_fail_their_entries_only(void **state) {
  fixture *f = *state;
  run_result a = run(f->dir, 0x5u); /* learn the keys of specs 0 and 2 */
  char path[1200], sub[1200], outside[1200], inner[1300];
  entry_path(f->dir, a.key[0], path, sizeof path);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(mkdir(path, 0700), 0);
  tu_fmt(inner, sizeof inner, "%s/planted", path);
  assert_int_equal(tu_write_file(inner, "x", 1), 0);
  tu_fmt(outside, sizeof outside, "%s/outside", f->base);
  assert_int_equal(mkdir(outside, 0700), 0);
  subdir_path(f->dir, a.key[2], sub, sizeof sub);
  tu_rm_rf(sub);
  assert_int_equal(symlink(outside, sub), 0);

  /* 1 and 3 may not be stored either: a key of theirs can share the bad
   * subdirectory's two hex digits with spec 2's (keys hash every embedded
   * kernel source, so any edit there can make them collide); the checks
   * below ask for their entries only where the names differ. */
  run_result b = run_some(f->dir, 0xFu, 0xFu);
  int stored[NSPECS], shares[NSPECS];
  for (int i = 0; i < NSPECS; i++) {
    entry_path(f->dir, b.key[i], path, sizeof path);
    struct stat st;
    stored[i] = lstat(path, &st) == 0 && S_ISREG(st.st_mode);
    printf("%-32s key %s stored %d%s\n", specs[i], b.key[i], stored[i],
           b.not_stored[i] ? " (reported CKJIT_ERROR_CACHE)" : "");
  }
  /* Specs 1 and 3 are stored unless they share a bad name with 0 or 2. */
  for (int i = 1; i < NSPECS; i += 2) {
    shares[i] = !strncmp(b.key[i], b.key[2], 2) || !strcmp(b.key[i], b.key[0]);
    if (!b.ok[i] && !shares[i]) fail_msg("%s for %s: %s", specs[i], g_arch, b.error);
    if (!shares[i] && !stored[i])
      fail_msg("%s was compiled but not stored: one bad name turned disk writes off", specs[i]);
  }
  /* Nothing was written through the symlink. */
  char probe[1300];
  tu_fmt(probe, sizeof probe, "%s/%s.ckjit", outside, b.key[2]);
  assert_false(tu_path_exists(probe));
  /* A later run finds the unrelated ones on disk. */
  run_result c = run_some(f->dir, 0xAu, 0xAu);
  for (int i = 1; i < NSPECS; i += 2)
    if (!shares[i]) assert_int_equal(c.cached[i], 1);
}

/* Replaces the payload of the entry file at `path` by `payload` and
 * recomputes both checksums (what a forger would do). */
static void reseal_with(const char *path, const void *payload, size_t n) {
  size_t size;
  uint8_t *buf = tu_read_file(path, &size);
  assert_non_null(buf);
  size_t header = ef_get32(buf + EF_OFF_HEADER_SIZE);
  assert_true(header < size);
  uint8_t *out = malloc(header + n + 1);
  assert_non_null(out);
  memcpy(out, buf, header);
  if (n) memcpy(out + header, payload, n);
  ef_put64(out + EF_OFF_PAYLOAD_SIZE, n);
  ef_reseal_at(out, header, n);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(tu_write_file(path, out, header + n), 0);
  assert_int_equal(chmod(path, 0600), 0);
  free(buf);
  free(out);
}

static void test_forged_payload_never_served(void **state) {
  fixture *f = *state;
  size_t pw_size;
  uint8_t *pw = tu_read_file("/etc/passwd", &pw_size);
  assert_non_null(pw);
  for (int empty = 0; empty < 2; empty++) {
    run_result a = run(f->dir, 1u);
    char path[1200];
    entry_path(f->dir, a.key[0], path, sizeof path);
    reseal_with(path, pw, empty ? 0 : pw_size);
    run_result b = run(f->dir, 1u);
    printf("%s payload: cached %d, rejects %llu\n", empty ? "empty" : "/etc/passwd",
           b.cached[0], (unsigned long long)b.disk_rejects);
    assert_int_equal(b.cached[0], 0);
    assert_int_equal(b.disk_rejects, 1);
    /* Replaced by the real code object. */
    size_t size;
    uint8_t *buf = tu_read_file(path, &size);
    assert_non_null(buf);
    size_t header = ef_get32(buf + EF_OFF_HEADER_SIZE);
    assert_true(size > header + 4 && !memcmp(buf + header, "\177ELF", 4));
    free(buf);
  }
  free(pw);
}

/* The arch of an installed compiler, or NULL. */
static const char *find_arch(const char *dir) {
  static const char *const archs[] = {"sm_90", "gfx90a"};
  for (size_t i = 0; i < 2; i++) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      setenv("CKJIT_CACHE_DIR", dir, 1);
      ckjit_compile_result cr;
      _exit(ckjit_compile_spec(specs[0], archs[i], &cr) == CKJIT_SUCCESS ? 0 : 1);
    }
    int status = 0;
    if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
        WEXITSTATUS(status) == 0)
      return archs[i];
  }
  return NULL;
}

int main(void) {
  umask(022);
  unsetenv("CKJIT_CACHE_PATH");
  unsetenv("CKJIT_CACHE_DISABLE");
  unsetenv("CKJIT_ARCH");
  setenv("CKJIT_LOG", "error", 1);
  char *probe = tu_mkdtemp("heal-probe");
  g_arch = probe ? find_arch(probe) : NULL;
  if (probe) {
    tu_rm_rf(probe);
    free(probe);
  }
  if (!g_arch) {
    printf("SKIP: neither NVRTC (sm_90) nor hipRTC (gfx90a) compiles here\n");
    return 77;
  }
  printf("compiling for %s\n", g_arch);
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_group_writable_subdir_heals),
      T(test_group_writable_entry_heals),
      T(test_bad_names_fail_their_entries_only),
      T(test_forged_payload_never_served),
  };
#undef T
  return cmocka_run_group_tests_name("cache_heal", tests, NULL, NULL);
}
