/* The one file writer (cache/atomic_file.c): whole files through a
 * temporary file and rename (contents, permissions, replacing rather than
 * truncating, nothing left behind, every step failing cleanly through the
 * test hook, readers never seeing a torn file while processes rewrite it),
 * appended records (one write, the torn-line newline, the PIPE_BUF bound,
 * processes appending at once) and directories.  Errors: the path functions
 * record "cannot <step> <path>: <reason>" through ckjit__fail, the _at one
 * records nothing.  Self-contained (libc and cmocka only). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.h"
#include "cache/atomic_file.h"

static char g_dir[256];

static int setup(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/ckjit-test-atomic-file-XXXXXX");
  setenv("CKJIT_LOG", "off", 1);
  return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[320];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  if (!getenv("CKJIT_TEST_KEEP") && system(cmd) != 0) return -1;
  return 0;
}

static void path_of(char *out, size_t len, const char *name) {
  snprintf(out, len, "%s/%s", g_dir, name);
}

/* A fresh subdirectory of g_dir for one test. */
static void fresh_dir(char *out, size_t len, const char *name) {
  path_of(out, len, name);
  assert_int_equal(mkdir(out, 0700), 0);
}

static char *read_all(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap + 1);
  size_t k;
  while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
    n += k;
    if (n == cap) {
      char *b = realloc(buf, 2 * cap + 1);
      if (!b) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = b;
      cap *= 2;
    }
  }
  fclose(f);
  if (buf) buf[n] = '\0';
  if (size) *size = n;
  return buf;
}

static void assert_contents(const char *path, const char *expected) {
  char *t = read_all(path, NULL);
  assert_non_null(t);
  assert_string_equal(t, expected);
  free(t);
}

/* Entries of `dir` other than "." and "..". */
static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static mode_t current_umask(void) {
  mode_t m = umask(0);
  umask(m);
  return m;
}

static void write_plain(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

/* ---- whole files ------------------------------------------------------------ */
static void test_write_whole_file(void **state) {
  (void)state;
  char dir[512], path[600];
  fresh_dir(dir, sizeof dir, "whole");
  snprintf(path, sizeof path, "%s/a.txt", dir);
  ckjit_file_error e = {-1, "x"};
  assert_int_equal(ckjit__file_write(path, "hello\n", 6, 0644, 0, &e), CKJIT_SUCCESS);
  assert_contents(path, "hello\n");
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0644 & ~current_umask());
  assert_int_equal(count_entries(dir), 1); /* no temporary file left */

  /* Empty contents, durable, another mode. */
  snprintf(path, sizeof path, "%s/empty", dir);
  assert_int_equal(ckjit__file_write(path, "", 0, 0600, CKJIT_FILE_SYNC, NULL), CKJIT_SUCCESS);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_size, 0);
  assert_int_equal(st.st_mode & 0777, 0600 & ~current_umask());
  assert_int_equal(count_entries(dir), 2);

  /* A path without a directory part is relative to the working directory. */
  char cwd[PATH_MAX];
  assert_non_null(getcwd(cwd, sizeof cwd));
  assert_int_equal(chdir(dir), 0);
  assert_int_equal(ckjit__file_write("rel.txt", "r", 1, 0644, 0, NULL), CKJIT_SUCCESS);
  assert_int_equal(chdir(cwd), 0);
  snprintf(path, sizeof path, "%s/rel.txt", dir);
  assert_contents(path, "r");
  assert_int_equal(count_entries(dir), 3);
}

/* The new file replaces the old one (rename), it does not overwrite it in
 * place: a reader holding the old file (here a hard link) keeps the old
 * bytes, and a symlink at the name is replaced, its target untouched. */
static void test_replaces_not_truncates(void **state) {
  (void)state;
  char dir[512], path[600], link_path[600], target[600];
  fresh_dir(dir, sizeof dir, "replace");
  snprintf(path, sizeof path, "%s/f", dir);
  snprintf(link_path, sizeof link_path, "%s/old", dir);
  write_plain(path, "old contents\n");
  assert_int_equal(link(path, link_path), 0);
  assert_int_equal(ckjit__file_write(path, "new\n", 4, 0644, CKJIT_FILE_SYNC, NULL),
                   CKJIT_SUCCESS);
  assert_contents(path, "new\n");
  assert_contents(link_path, "old contents\n");

  snprintf(target, sizeof target, "%s/target", dir);
  snprintf(path, sizeof path, "%s/sym", dir);
  write_plain(target, "target\n");
  assert_int_equal(symlink(target, path), 0);
  assert_int_equal(ckjit__file_write(path, "file\n", 5, 0644, 0, NULL), CKJIT_SUCCESS);
  struct stat st;
  assert_int_equal(lstat(path, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_contents(path, "file\n");
  assert_contents(target, "target\n");
  assert_int_equal(count_entries(dir), 4); /* f, old, target, sym */
}

static void test_write_errors(void **state) {
  (void)state;
  char dir[512], path[600];
  fresh_dir(dir, sizeof dir, "errors");
  ckjit_file_error e;

  /* No such directory: the temporary file cannot be created. */
  snprintf(path, sizeof path, "%s/no/such/dir/f", dir);
  assert_int_equal(ckjit__file_write(path, "x", 1, 0644, 0, &e), CKJIT_ERROR_CACHE);
  assert_int_equal(e.err, ENOENT);
  assert_string_equal(e.step, "create a temporary file for");
  assert_int_equal(ckjit_last_status(), CKJIT_ERROR_CACHE);
  char expected[800];
  snprintf(expected, sizeof expected, "cannot create a temporary file for %s: %s", path,
           strerror(ENOENT));
  assert_string_equal(ckjit_last_error(), expected);

  /* A directory at the name: the rename fails, nothing is left behind and
   * the directory is untouched. */
  snprintf(path, sizeof path, "%s/d", dir);
  assert_int_equal(mkdir(path, 0700), 0);
  assert_int_equal(ckjit__file_write(path, "x", 1, 0644, CKJIT_FILE_SYNC, &e), CKJIT_ERROR_CACHE);
  assert_true(e.err == EISDIR || e.err == ENOTEMPTY || e.err == EEXIST);
  assert_string_equal(e.step, "write");
  assert_non_null(strstr(ckjit_last_error(), "cannot write "));
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(count_entries(dir), 1);

  /* A path naming no file. */
  snprintf(path, sizeof path, "%s/", dir);
  assert_int_equal(ckjit__file_write(path, "x", 1, 0644, 0, &e), CKJIT_ERROR_CACHE);
  assert_int_equal(e.err, EISDIR);
  assert_int_equal(count_entries(dir), 1);

  /* Quiet (best-effort callers): the thread's error stays as it was. */
  ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "earlier");
  int was = ckjit__error_quiet(1);
  snprintf(path, sizeof path, "%s/no/f", dir);
  assert_int_equal(ckjit__file_write(path, "x", 1, 0644, 0, &e), CKJIT_ERROR_CACHE);
  assert_int_equal(ckjit__error_quiet(was), 1);
  assert_int_equal(ckjit_last_status(), CKJIT_ERROR_INVALID_ARGUMENT);
  assert_string_equal(ckjit_last_error(), "earlier");
}

/* ---- the hook (ckjit__file_write_at) -------------------------------------- */
static char g_stages[128];
static const char *g_fail_stage;
static int g_fail_err;
static char g_hook_path[700];

static int hook(const char *stage, const char *tmp_path) {
  strcat(g_stages, stage);
  strcat(g_stages, " ");
  snprintf(g_hook_path, sizeof g_hook_path, "%s", tmp_path);
  /* The temporary file exists from "write" on. */
  if (strcmp(stage, "open-temp") != 0 && access(tmp_path, F_OK) != 0) return EFAULT;
  return g_fail_stage && !strcmp(stage, g_fail_stage) ? g_fail_err : 0;
}

static void test_write_at_steps(void **state) {
  (void)state;
  char dir[512], path[600];
  fresh_dir(dir, sizeof dir, "steps");
  snprintf(path, sizeof path, "%s/entry", dir);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(fd >= 0);

  /* Every step, in order; the hook sees the temporary file's path. */
  g_stages[0] = '\0';
  g_fail_stage = NULL;
  ckjit_file_error e;
  ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "untouched");
  assert_int_equal(ckjit__file_write_at(fd, dir, "entry", ".tmp-1", "0123456789", 10, 0600,
                                        CKJIT_FILE_SYNC, hook, &e),
                   0);
  assert_string_equal(g_stages, "open-temp write fsync rename ");
  char expected[700];
  snprintf(expected, sizeof expected, "%s/.tmp-1", dir);
  assert_string_equal(g_hook_path, expected);
  assert_contents(path, "0123456789");
  /* Without CKJIT_FILE_SYNC there is no fsync step. */
  g_stages[0] = '\0';
  assert_int_equal(ckjit__file_write_at(fd, dir, "entry", ".tmp-2", "abc", 3, 0600, 0, hook, &e),
                   0);
  assert_string_equal(g_stages, "open-temp write rename ");
  assert_contents(path, "abc");

  /* A failure at any step: that errno, the step's name, the temporary file
   * removed, the file as it was, and nothing recorded in the thread's
   * error (the caller words it). */
  static const struct {
    const char *stage;
    int err;
    const char *step;
  } cases[] = {{"open-temp", ENOSPC, "create a temporary file for"},
               {"write", EIO, "write"},
               {"fsync", EROFS, "write"},
               {"rename", EDQUOT, "write"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    g_stages[0] = '\0';
    g_fail_stage = cases[i].stage;
    g_fail_err = cases[i].err;
    assert_int_equal(ckjit__file_write_at(fd, dir, "entry", ".tmp-3", "zzzzzz", 6, 0600,
                                          CKJIT_FILE_SYNC, hook, &e),
                     cases[i].err);
    assert_int_equal(e.err, cases[i].err);
    assert_string_equal(e.step, cases[i].step);
    assert_contents(path, "abc");
    assert_int_equal(count_entries(dir), 1);
  }
  g_fail_stage = NULL;
  assert_int_equal(ckjit_last_status(), CKJIT_ERROR_INVALID_ARGUMENT);
  assert_string_equal(ckjit_last_error(), "untouched");

  /* An existing temporary name is never reused or followed (O_EXCL). */
  snprintf(expected, sizeof expected, "%s/.tmp-4", dir);
  write_plain(expected, "someone else's\n");
  assert_int_equal(ckjit__file_write_at(fd, dir, "entry", ".tmp-4", "q", 1, 0600, 0, NULL, &e),
                   EEXIST);
  assert_string_equal(e.step, "create a temporary file for");
  assert_contents(expected, "someone else's\n");
  assert_contents(path, "abc");
  close(fd);
}

/* Processes rewriting one file while this one reads it: every read sees
 * one writer's whole file, never a mixture or a short one. */
static void test_concurrent_writers_never_torn(void **state) {
  (void)state;
  enum { WRITERS = 4, ROUNDS = 150, SIZE = 64 * 1024 };
  char dir[512], path[600];
  fresh_dir(dir, sizeof dir, "concurrent");
  snprintf(path, sizeof path, "%s/shared", dir);
  char *first = malloc(SIZE);
  assert_non_null(first);
  memset(first, 'A', SIZE);
  assert_int_equal(ckjit__file_write(path, first, SIZE, 0644, 0, NULL), CKJIT_SUCCESS);
  free(first);
  pid_t pids[WRITERS];
  for (int w = 0; w < WRITERS; w++) {
    pids[w] = fork();
    assert_true(pids[w] >= 0);
    if (pids[w] == 0) {
      char *buf = malloc(SIZE);
      if (!buf) _exit(2);
      memset(buf, 'a' + w, SIZE);
      int bad = 0;
      for (int r = 0; r < ROUNDS; r++)
        bad |= ckjit__file_write(path, buf, SIZE, 0644, r % 8 == 0 ? CKJIT_FILE_SYNC : 0, NULL) !=
               CKJIT_SUCCESS;
      _exit(bad);
    }
  }
  int reads = 0, running = WRITERS;
  while (running > 0) {
    size_t n;
    char *t = read_all(path, &n);
    assert_non_null(t);
    assert_int_equal(n, SIZE);
    for (size_t i = 1; i < n; i++)
      if (t[i] != t[0]) fail_msg("a torn file: byte %zu is '%c', byte 0 '%c'", i, t[i], t[0]);
    free(t);
    reads++;
    running = 0;
    for (int w = 0; w < WRITERS; w++) {
      if (!pids[w]) continue;
      int status;
      pid_t p = waitpid(pids[w], &status, WNOHANG);
      assert_true(p >= 0);
      if (p == 0) {
        running++;
        continue;
      }
      assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      pids[w] = 0;
    }
  }
  printf("# %d reads while %d processes rewrote the file %d times each\n", reads, WRITERS,
         ROUNDS);
  assert_int_equal(count_entries(dir), 1); /* no temporary file left */
}

/* ---- appended records --------------------------------------------------------- */
static void test_append(void **state) {
  (void)state;
  char dir[512], path[600];
  fresh_dir(dir, sizeof dir, "append");
  snprintf(path, sizeof path, "%s/log", dir);
  ckjit_file_error e;
  assert_int_equal(ckjit__file_append(path, "one\n", 4, 0600, 0, &e), CKJIT_SUCCESS);
  assert_int_equal(ckjit__file_append(path, "two\n", 4, 0600, 0, &e), CKJIT_SUCCESS);
  assert_contents(path, "one\ntwo\n");
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600 & ~current_umask());
  /* The mode is for a new file only. */
  assert_int_equal(chmod(path, 0640), 0);
  assert_int_equal(ckjit__file_append(path, "three\n", 6, 0600, 0, &e), CKJIT_SUCCESS);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0640);

  /* CKJIT_FILE_NEW_LINE: after a torn last line, the record starts on a
   * new line; an empty file or a whole last line needs none. */
  snprintf(path, sizeof path, "%s/tune", dir);
  assert_int_equal(ckjit__file_append(path, "a\n", 2, 0600, CKJIT_FILE_NEW_LINE, &e),
                   CKJIT_SUCCESS);
  assert_int_equal(ckjit__file_append(path, "b\n", 2, 0600, CKJIT_FILE_NEW_LINE, &e),
                   CKJIT_SUCCESS);
  assert_contents(path, "a\nb\n");
  write_plain(path, "a\nto");
  assert_int_equal(ckjit__file_append(path, "c\n", 2, 0600, CKJIT_FILE_NEW_LINE, &e),
                   CKJIT_SUCCESS);
  assert_contents(path, "a\nto\nc\n");
  /* Without the flag the bytes go as they are. */
  write_plain(path, "to");
  assert_int_equal(ckjit__file_append(path, "d\n", 2, 0600, 0, &e), CKJIT_SUCCESS);
  assert_contents(path, "tod\n");
}

static void test_append_errors(void **state) {
  (void)state;
  char dir[512], path[600], expected[800];
  fresh_dir(dir, sizeof dir, "append-errors");
  ckjit_file_error e;
  /* A directory: the open fails. */
  assert_int_equal(ckjit__file_append(dir, "x\n", 2, 0644, 0, &e), CKJIT_ERROR_CACHE);
  assert_string_equal(e.step, "open");
  assert_int_equal(e.err, EISDIR);
  snprintf(expected, sizeof expected, "cannot open %s: %s", dir, strerror(EISDIR));
  assert_string_equal(ckjit_last_error(), expected);
  /* No such directory. */
  snprintf(path, sizeof path, "%s/no/such/file", dir);
  assert_int_equal(ckjit__file_append(path, "x\n", 2, 0644, 0, &e), CKJIT_ERROR_CACHE);
  assert_string_equal(e.step, "open");
  assert_int_equal(e.err, ENOENT);
  /* Longer than PIPE_BUF (with the newline it may need): refused before
   * the file is even created. */
  static char big[PIPE_BUF + 1];
  memset(big, 'x', sizeof big);
  snprintf(path, sizeof path, "%s/big", dir);
  assert_int_equal(ckjit__file_append(path, big, PIPE_BUF + 1, 0644, 0, &e), CKJIT_ERROR_CACHE);
  assert_string_equal(e.step, "append to");
  assert_int_equal(e.err, EINVAL);
  assert_int_equal(ckjit__file_append(path, big, PIPE_BUF, 0644, CKJIT_FILE_NEW_LINE, &e),
                   CKJIT_ERROR_CACHE);
  assert_int_equal(e.err, EINVAL);
  assert_int_equal(access(path, F_OK), -1);
  /* PIPE_BUF itself is fine. */
  assert_int_equal(ckjit__file_append(path, big, PIPE_BUF, 0644, 0, &e), CKJIT_SUCCESS);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_size, PIPE_BUF);
  assert_int_equal(count_entries(dir), 1);
}

/* Processes appending records of different lengths at once: every record
 * is there, whole, once. */
static void test_concurrent_appenders(void **state) {
  (void)state;
  enum { PROCS = 6, PER = 200 };
  char dir[512], path[600];
  fresh_dir(dir, sizeof dir, "append-concurrent");
  snprintf(path, sizeof path, "%s/log", dir);
  pid_t pids[PROCS];
  for (int p = 0; p < PROCS; p++) {
    pids[p] = fork();
    assert_true(pids[p] >= 0);
    if (pids[p] == 0) {
      int bad = 0;
      char line[1200];
      for (int i = 0; i < PER; i++) {
        int pad = (p * 97 + i * 31) % 1000;
        int n = snprintf(line, sizeof line, "p%d i%d %0*d\n", p, i, pad + 1, 0);
        bad |= ckjit__file_append(path, line, (size_t)n, 0644, p % 2 ? CKJIT_FILE_NEW_LINE : 0,
                                  NULL) != CKJIT_SUCCESS;
      }
      _exit(bad);
    }
  }
  for (int p = 0; p < PROCS; p++) {
    int status;
    assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  size_t n;
  char *t = read_all(path, &n);
  assert_non_null(t);
  static int seen[PROCS][PER];
  memset(seen, 0, sizeof seen);
  int lines = 0;
  int blank = 0;
  for (char *line = t; *line;) {
    char *nl = strchr(line, '\n');
    assert_non_null(nl);
    *nl = '\0';
    if (!*line) { /* CKJIT_FILE_NEW_LINE saw a record in progress (see atomic_file.h) */
      blank++;
      line = nl + 1;
      continue;
    }
    int p, i, used = 0;
    if (sscanf(line, "p%d i%d %*d%n", &p, &i, &used) != 2 || line[used] != '\0' || p < 0 ||
        p >= PROCS || i < 0 || i >= PER)
      fail_msg("a torn or unexpected line: '%.80s'", line);
    int pad = (p * 97 + i * 31) % 1000;
    char expected[1200];
    snprintf(expected, sizeof expected, "p%d i%d %0*d", p, i, pad + 1, 0);
    assert_string_equal(line, expected);
    assert_int_equal(seen[p][i], 0);
    seen[p][i] = 1;
    lines++;
    line = nl + 1;
  }
  assert_int_equal(lines, PROCS * PER);
  if (blank) printf("# %d blank lines from CKJIT_FILE_NEW_LINE\n", blank);
  free(t);
}

/* ---- directories ---------------------------------------------------------------- */
static void test_make_dir(void **state) {
  (void)state;
  char path[600], file[600];
  path_of(path, sizeof path, "mk/a/b");
  assert_int_equal(ckjit__file_make_dir(path, 0700, 0), -1); /* parents missing */
  assert_int_equal(errno, ENOENT);
  assert_int_equal(ckjit__file_make_dir(path, 0700, 1), 0);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0700 & ~current_umask());
  assert_int_equal(ckjit__file_make_dir(path, 0700, 0), 0); /* exists: fine */
  assert_int_equal(ckjit__file_make_dir(path, 0700, 1), 0);
  /* A file in the way of a parent. */
  path_of(file, sizeof file, "mk/file");
  write_plain(file, "x");
  path_of(path, sizeof path, "mk/file/sub");
  assert_int_equal(ckjit__file_make_dir(path, 0700, 1), -1);
  assert_int_equal(errno, ENOTDIR);
  assert_int_equal(ckjit__file_make_dir("", 0700, 1), -1);
  assert_int_equal(errno, ENOENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_write_whole_file),
      cmocka_unit_test(test_replaces_not_truncates),
      cmocka_unit_test(test_write_errors),
      cmocka_unit_test(test_write_at_steps),
      cmocka_unit_test(test_concurrent_writers_never_torn),
      cmocka_unit_test(test_append),
      cmocka_unit_test(test_append_errors),
      cmocka_unit_test(test_concurrent_appenders),
      cmocka_unit_test(test_make_dir),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
