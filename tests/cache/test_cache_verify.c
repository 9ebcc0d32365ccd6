/* `ckjit-cache verify` and `verify --fix` against the library's own
 * acceptance rule (issue 15, items 2, 3 and 10); the tool's path is argv[1].
 *
 * For each way an entry can go bad, in a fresh cache holding it and one good
 * control entry:
 *   1. the library refuses it (ckjit__disk_read_entry: -1) and verify
 *      reports it (exit 1, its path among the bad items), the control being
 *      good for both: one rule, one verdict;
 *   2. verify --fix exits 0, leaves the control and whatever a link pointed
 *      at alone (links are never followed);
 *   3. verify then passes, and the library stores and loads the entry.
 * The damage: a subdirectory or entry writable by group or others, a
 * directory (with a file and a link inside), a FIFO or a symlink at an
 * entry's name, a symlink or a regular file in place of a subdirectory,
 * payloads that are not code for the entry (/etc/passwd, empty, another
 * machine, no kernel symbol) with correct checksums, and as root a file or
 * subdirectory of another user. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/entry_accept.h"
#include "cache_test_util.h"

static const char *g_tool;

enum { VICTIM = 0, CONTROL = 1 };

typedef struct fixture {
  char *base;
  char dir[CKJIT_PATH_MAX];
  char outside[CKJIT_PATH_MAX + 16]; /* a directory outside the cache */
  char out_path[CKJIT_PATH_MAX + 16];
  char *out;
  ckjit_disk_cache c;
  int ids[2]; /* victim and control, in different subdirectories */
} fixture;

/* Two test entry ids whose keys lie in different subdirectories. */
static void pick_ids(int ids[2]) {
  ckjit_key a = tc_key(1);
  for (int id = 2;; id++) {
    ckjit_key b = tc_key(id);
    if (a.bytes[0] != b.bytes[0]) {
      ids[VICTIM] = 1;
      ids[CONTROL] = id;
      return;
    }
  }
}

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || !(f->base = tu_mkdtemp("verify"))) return -1;
  tu_fmt(f->dir, sizeof f->dir, "%s/cache", f->base);
  tu_fmt(f->outside, sizeof f->outside, "%s/outside", f->base);
  tu_fmt(f->out_path, sizeof f->out_path, "%s/stdout", f->base);
  if (mkdir(f->outside, 0700) != 0) return -1;
  ckjit__disk_open(&f->c, f->dir);
  if (!f->c.usable) return -1;
  f->c.max_bytes = f->c.max_entries = 0;
  pick_ids(f->ids);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  tu_rm_rf(f->base);
  free(f->base);
  free(f->out);
  free(f);
  return 0;
}

/* Runs the tool on the fixture's cache with `args` (NULL-terminated);
 * returns its exit status (-1 on a signal), f->out = its stdout. */
static int tool(fixture *f, const char *a1, const char *a2, const char *a3) {
  const char *argv[] = {g_tool, "--cache-dir", f->dir, a1, a2, a3, NULL};
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int o = open(f->out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int n = open("/dev/null", O_RDWR);
    if (o < 0 || n < 0) _exit(126);
    dup2(n, 0);
    dup2(o, 1);
    dup2(n, 2);
    execv(g_tool, (char *const *)argv);
    _exit(127);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  free(f->out);
  f->out = tu_read_file(f->out_path, NULL);
  if (!f->out) f->out = strdup("");
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void entry_rel(int id, char *out, size_t len) {
  ckjit_key k = tc_key(id);
  char hex[33];
  ckjit__key_hex(&k, hex);
  tu_fmt(out, len, "%.2s/%s.ckjit", hex, hex);
}

static void abs_path(fixture *f, const char *rel, char *out, size_t len) {
  tu_fmt(out, len, "%s/%s", f->dir, rel);
}

/* 1 accepted, -1 refused, 0 absent: the library's verdict. */
static int library_verdict(fixture *f, int id) {
  ckjit_key key = tc_key(id);
  uint8_t *file = NULL;
  size_t size;
  const char *why = NULL;
  int rc = ckjit__disk_read_entry(f->dir, &key, 0, &file, &size, NULL, NULL, &why);
  free(file);
  return rc;
}

/* Writes entry `id`'s file with `payload` and correct checksums. */
static void forge(fixture *f, int id, const void *payload, size_t n) {
  ckjit_entry_meta m;
  uint8_t *p, *buf;
  size_t size;
  tc_entry(id, 0, 0, &m, &p);
  free(p);
  assert_int_equal(ckjit__entry_encode(&m, payload, n, &buf, &size), 0);
  char rel[64], path[CKJIT_ENTRY_PATH_MAX];
  entry_rel(id, rel, sizeof rel);
  abs_path(f, rel, path, sizeof path);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(tu_write_file(path, buf, size), 0);
  assert_int_equal(chmod(path, 0600), 0);
  free(buf);
}

typedef enum damage {
  SUBDIR_0777, SUBDIR_0770, ENTRY_0666, ENTRY_0620, DIR_AT_ENTRY, FIFO_AT_ENTRY,
  LINK_AT_ENTRY, LINK_AS_SUBDIR, FILE_AS_SUBDIR, PAYLOAD_PASSWD, PAYLOAD_EMPTY,
  PAYLOAD_OTHER_MACHINE, PAYLOAD_NO_KERNEL, ENTRY_OTHER_OWNER, SUBDIR_OTHER_OWNER, NDAMAGE
} damage;

static const char *const damage_names[] = {
    "subdirectory 0777", "subdirectory 0770", "entry 0666", "entry 0620",
    "directory at the entry's name", "FIFO at the entry's name", "symlink at the entry's name",
    "symlink as the subdirectory", "regular file as the subdirectory", "payload /etc/passwd",
    "payload empty", "payload for another machine", "payload without the kernel",
    "entry of another user", "subdirectory of another user",
};

/* Applies `d` to the victim; returns the path (relative to the cache) that
 * verify must report, in `bad`. */
static void apply(fixture *f, damage d, char *bad, size_t len) {
  char rel[64], path[CKJIT_ENTRY_PATH_MAX], sub[CKJIT_ENTRY_PATH_MAX], tmp[CKJIT_ENTRY_PATH_MAX + 32];
  entry_rel(f->ids[VICTIM], rel, sizeof rel);
  abs_path(f, rel, path, sizeof path);
  tu_fmt(sub, sizeof sub, "%s", path);
  *strrchr(sub, '/') = '\0';
  tu_fmt(bad, len, "%s", rel);
  static uint8_t p[4096];
  switch (d) {
    case SUBDIR_0777:
    case SUBDIR_0770:
      assert_int_equal(chmod(sub, d == SUBDIR_0777 ? 0777 : 0770), 0);
      tu_fmt(bad, len, "%.2s", rel);
      break;
    case ENTRY_0666:
    case ENTRY_0620:
      assert_int_equal(chmod(path, d == ENTRY_0666 ? 0666 : 0620), 0);
      break;
    case DIR_AT_ENTRY:
      assert_int_equal(unlink(path), 0);
      assert_int_equal(mkdir(path, 0700), 0);
      tu_fmt(tmp, sizeof tmp, "%s/inner", path);
      assert_int_equal(mkdir(tmp, 0700), 0);
      tu_fmt(tmp, sizeof tmp, "%s/inner/file", path);
      assert_int_equal(tu_write_file(tmp, "x", 1), 0);
      tu_fmt(tmp, sizeof tmp, "%s/inner/link", path);
      assert_int_equal(symlink(f->outside, tmp), 0);
      break;
    case FIFO_AT_ENTRY:
      assert_int_equal(unlink(path), 0);
      assert_int_equal(mkfifo(path, 0600), 0);
      break;
    case LINK_AT_ENTRY:
      tu_fmt(tmp, sizeof tmp, "%s/valid.ckjit", f->outside);
      assert_int_equal(rename(path, tmp), 0);
      assert_int_equal(symlink(tmp, path), 0);
      break;
    case LINK_AS_SUBDIR:
      tu_fmt(tmp, sizeof tmp, "%s/%.2s", f->outside, rel);
      assert_int_equal(rename(sub, tmp), 0);
      assert_int_equal(symlink(tmp, sub), 0);
      tu_fmt(bad, len, "%.2s", rel);
      break;
    case FILE_AS_SUBDIR:
      tu_rm_rf(sub);
      assert_int_equal(tu_write_file(sub, "not a directory", 15), 0);
      tu_fmt(bad, len, "%.2s", rel);
      break;
    case PAYLOAD_PASSWD: {
      size_t n;
      uint8_t *pw = tu_read_file("/etc/passwd", &n);
      assert_non_null(pw);
      forge(f, f->ids[VICTIM], pw, n);
      free(pw);
      break;
    }
    case PAYLOAD_EMPTY:
      forge(f, f->ids[VICTIM], p, 0);
      break;
    case PAYLOAD_OTHER_MACHINE: {
      ckjit_entry_meta m;
      uint8_t *q;
      tc_entry(f->ids[VICTIM], 0, 0, &m, &q);
      free(q);
      forge(f, f->ids[VICTIM], p, ep_build_raw(p, 900, EM_AMDGPU, 0x3f, m.kernel, 5));
      break;
    }
    case PAYLOAD_NO_KERNEL:
      forge(f, f->ids[VICTIM], p, ep_build(p, 900, "sm_90", "not_the_kernel", 5));
      break;
    case ENTRY_OTHER_OWNER:
      assert_int_equal(chown(path, 65534, 65534), 0);
      break;
    case SUBDIR_OTHER_OWNER:
      assert_int_equal(chown(sub, 65534, 65534), 0);
      tu_fmt(bad, len, "%.2s", rel);
      break;
    default:
      fail();
  }
}

static void expect_reported(fixture *f, const char *bad, int want) {
  char needle[128];
  tu_fmt(needle, sizeof needle, "\"path\": \"%s\"", bad);
  int got = strstr(f->out, needle) != NULL;
  if (got != want)
    fail_msg("verify %s %s:\n%s", want ? "does not report" : "reports", bad, f->out);
}

static void check_damage(fixture *f, damage d) {
  printf("-- %s\n", damage_names[d]);
  for (int i = 0; i < 2; i++) assert_int_equal(tc_store(&f->c, f->ids[i], 800), CKJIT_SUCCESS);
  char bad[64], control[64], outside_before[64] = "";
  entry_rel(f->ids[CONTROL], control, sizeof control);
  apply(f, d, bad, sizeof bad);
  int outside_entries = tc_count(f->outside, NULL);
  /* 1. One verdict: the library refuses it, verify reports it. */
  if (library_verdict(f, f->ids[VICTIM]) != -1)
    fail_msg("%s: the library does not refuse it", damage_names[d]);
  assert_int_equal(library_verdict(f, f->ids[CONTROL]), 1);
  int rc = tool(f, "--json", "verify", NULL);
  if (rc != 1) fail_msg("%s: verify exit %d, want 1:\n%s", damage_names[d], rc, f->out);
  expect_reported(f, bad, 1);
  expect_reported(f, control, 0);
  /* 2. --fix repairs it, without following links. */
  rc = tool(f, "--json", "verify", "--fix");
  if (rc != 0) fail_msg("%s: verify --fix exit %d, want 0:\n%s", damage_names[d], rc, f->out);
  printf("%s\n", strstr(f->out, "\"action\"") ? strstr(f->out, "\"action\"") : f->out);
  assert_int_equal(tc_count(f->outside, NULL), outside_entries);
  (void)outside_before;
  /* 3. verify passes, the library stores and loads it, the control stays. */
  rc = tool(f, "--json", "verify", NULL);
  if (rc != 0) fail_msg("%s: verify after --fix exit %d:\n%s", damage_names[d], rc, f->out);
  assert_non_null(strstr(f->out, "\"bad_count\": 0"));
  assert_int_equal(tc_load(&f->c, f->ids[CONTROL], 800), 1);
  assert_int_equal(tc_store(&f->c, f->ids[VICTIM], 800), CKJIT_SUCCESS);
  assert_int_equal(library_verdict(f, f->ids[VICTIM]), 1);
  rc = tool(f, "--json", "verify", NULL);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(f->out, "\"ok\": 2"));
}

static void test_one_rule_and_fix(void **state) {
  fixture *f = *state;
  for (int d = 0; d < NDAMAGE; d++) {
    if ((d == ENTRY_OTHER_OWNER || d == SUBDIR_OTHER_OWNER) && geteuid() != 0) {
      printf("-- %s: skipped (needs root to chown)\n", damage_names[d]);
      continue;
    }
    tu_rm_rf(f->dir);
    tu_rm_rf(f->outside);
    assert_int_equal(mkdir(f->outside, 0700), 0);
    ckjit__disk_open(&f->c, f->dir);
    f->c.max_bytes = f->c.max_entries = 0;
    check_damage(f, (damage)d);
  }
}

/* A foreign name is never touched by --fix (and a foreign symlink stays a
 * problem that --fix cannot clear, so it exits 1). */
static void test_foreign_names_left_alone(void **state) {
  fixture *f = *state;
  assert_int_equal(tc_store(&f->c, f->ids[CONTROL], 800), CKJIT_SUCCESS);
  char foreign[CKJIT_PATH_MAX + 32], link[CKJIT_PATH_MAX + 32];
  tu_fmt(foreign, sizeof foreign, "%s/notes.txt", f->dir);
  tu_fmt(link, sizeof link, "%s/link-elsewhere", f->dir);
  assert_int_equal(tu_write_file(foreign, "mine", 4), 0);
  assert_int_equal(symlink(f->outside, link), 0);
  assert_int_equal(tool(f, "verify", "--fix", NULL), 1);
  assert_true(tu_path_exists(foreign));
  struct stat st;
  assert_int_equal(lstat(link, &st), 0);
  assert_int_equal(tc_load(&f->c, f->ids[CONTROL], 800), 1);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PATH-OF-ckjit-cache\n", argv[0]);
    return 2;
  }
  g_tool = argv[1];
  if (access(g_tool, X_OK) != 0) {
    printf("SKIP: %s is not an executable\n", g_tool);
    return 77;
  }
  umask(022);
  unsetenv("CKJIT_CACHE_PATH");
  setenv("CKJIT_LOG", "error", 1);
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_one_rule_and_fix),
      T(test_foreign_names_left_alone),
  };
#undef T
  return cmocka_run_group_tests_name("cache_verify", tests, NULL, NULL);
}
