/* Faults seen through the public API: ckjit_compile_spec with
 * CKJIT_CACHE_DIR pointing at a damaged, full, read-only, foreign or
 * crashed-into cache.  Whatever the disk does, the call builds the right
 * code object (same key and the very bytes a clean compile gives); it
 * succeeds when the entry is in the cache and fails with CKJIT_ERROR_CACHE,
 * naming the reason, when the entry could not be stored.  The statistics say
 * what happened (disk_rejects, disk_write_errors), a bad entry is replaced,
 * and nothing outside the cache is touched.
 *
 * Uses the first compiler present: NVRTC (sm_90), else hipRTC (gfx90a)
 * (CKJIT_TEST_FAULT_ARCH overrides); skips with a message when neither is.
 * Write failures and crashes are injected with ckjit__disk_fault_hook
 * (cache/disk_cache.h); the real tmpfs cases need mount permission (root)
 * and skip with the reason otherwise. */
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

#include "cache/disk_cache.h" /* ckjit__disk_fault_hook */
#include "cache/entry.h"
#include "cache/key.h"
#include "ckjit/ckjit.h"
#include "entry_format.h"
#include "test_util.h"


static const char *const stages[] = {"open-temp", "write", "fsync", "rename"};
enum { NSTAGES = 4, NSPEC = 2 };

/* Two specs of different families: their entries are swapped into each
 * other's place. */
static const char *const g_spec[NSPEC] = {"elementwise:dtype=f32,op=relu", "transpose:dtype=f32"};
static const char *g_arch;
static char g_key[NSPEC][33];
static uint8_t *g_entry[NSPEC]; /* the clean entry file of each spec */
static size_t g_entry_size[NSPEC];
static size_t g_code_size[NSPEC];
static char *g_root; /* mkdtemp for the whole program */

typedef struct fixture {
  char base[1024];
  char cache[1100];
  char mnt[1100]; /* a mount to undo, or "" */
} fixture;

static void use_cache_dir(const char *dir) {
  ckjit_shutdown();
  setenv("CKJIT_CACHE_DIR", dir, 1);
  ckjit_reset_stats();
}

static int setup(void **state) {
  static int n;
  fixture *f = calloc(1, sizeof *f);
  if (!f) return -1;
  tu_fmt(f->base, sizeof f->base, "%s/t%d", g_root, n++);
  if (mkdir(f->base, 0700)) return -1;
  tu_fmt(f->cache, sizeof f->cache, "%s/cache", f->base);
  use_cache_dir(f->cache);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  ckjit__disk_fault_hook = NULL;
  ckjit_shutdown();
  if (f->mnt[0]) umount2(f->mnt, MNT_DETACH);
  free(f);
  return 0;
}

static ckjit_stats stats(void) {
  ckjit_stats s;
  ckjit_get_stats(&s);
  return s;
}

static void entry_file(const char *cache, int s, char *out, size_t len) {
  tu_fmt(out, len, "%s/%.2s/%s.ckjit", cache, g_key[s], g_key[s]);
}

/* Compiles spec s: must succeed with the clean key and size. Returns cached. */
static int compile_ok(int s) {
  ckjit_compile_result r;
  ckjit_status st = ckjit_compile_spec(g_spec[s], g_arch, &r);
  if (st != CKJIT_SUCCESS)
    fail_msg("ckjit_compile_spec(%s, %s): %s: %s", g_spec[s], g_arch, ckjit_status_string(st),
             ckjit_last_error());
  assert_string_equal(r.key, g_key[s]);
  assert_int_equal(r.code_size, g_code_size[s]);
  return r.cached;
}

/* Compiles spec s where its entry cannot be stored: CKJIT_ERROR_CACHE
 * saying so, with the clean key and size.  Returns cached. */
static int compile_unstored(int s) {
  ckjit_compile_result r;
  ckjit_status st = ckjit_compile_spec(g_spec[s], g_arch, &r);
  if (st != CKJIT_ERROR_CACHE)
    fail_msg("ckjit_compile_spec(%s, %s): %s (%s), expected CKJIT_ERROR_CACHE", g_spec[s], g_arch,
             ckjit_status_string(st), ckjit_last_error());
  assert_non_null(strstr(ckjit_last_error(), "not stored in the disk cache"));
  assert_string_equal(r.key, g_key[s]);
  assert_int_equal(r.code_size, g_code_size[s]);
  assert_int_equal(r.stored, 0);
  return r.cached;
}

/* The entry of spec s in `cache` is the clean one, byte for byte. */
static void entry_is_clean(const char *cache, int s) {
  char path[1300];
  entry_file(cache, s, path, sizeof path);
  struct stat st;
  if (lstat(path, &st) || !S_ISREG(st.st_mode)) fail_msg("%s: not a regular file", path);
  size_t size = 0;
  uint8_t *buf = tu_read_file(path, &size);
  assert_non_null(buf);
  ckjit_key key;
  assert_int_equal(ckjit__key_parse(g_key[s], &key), 0);
  const char *why = NULL;
  ckjit_entry_meta meta;
  if (ckjit__entry_decode(buf, size, &key, &meta, NULL, NULL, &why))
    fail_msg("%s does not decode: %s", path, why);
  assert_string_equal(meta.arch, g_arch);
  if (size != g_entry_size[s] || memcmp(buf, g_entry[s], size))
    fail_msg("%s differs from a clean compile's entry (%zu vs %zu bytes)", path, size,
             g_entry_size[s]);
  free(buf);
}

static int count_temps(const char *cache) {
  int temps = 0;
  DIR *root = opendir(cache);
  if (!root) return 0;
  struct dirent *de;
  while ((de = readdir(root))) {
    if (strlen(de->d_name) != 2 || de->d_name[0] == '.') continue;
    char sub[1400];
    tu_fmt(sub, sizeof sub, "%s/%s", cache, de->d_name);
    DIR *d = opendir(sub);
    if (!d) continue;
    struct dirent *e;
    while ((e = readdir(d))) temps += !strncmp(e->d_name, ".tmp-", 5);
    closedir(d);
  }
  closedir(root);
  return temps;
}

/* Writes the clean entry of spec `s` at `path`. */
static void plant_entry(int s, const char *path) {
  char dir[1300];
  tu_fmt(dir, sizeof dir, "%s", path);
  *strrchr(dir, '/') = 0;
  mkdir(dir, 0700);
  assert_int_equal(tu_write_file(path, g_entry[s], g_entry_size[s]), 0);
}

/* ---- damaged entries ----------------------------------------------------- */

typedef enum damage {
  TRUNCATE_HALF,
  TRUNCATE_HEADER,
  ZERO_LENGTH,
  FLIP_PAYLOAD,
  FLIP_HEADER,
  FLIP_KEY,
  OTHER_VERSION,
  OTHER_KEY,
  TRAILING_BYTES,
  SYMLINK,
  FIFO,
  DAMAGE_COUNT
} damage;

static const char *const damage_names[] = {
    "truncated to half",   "truncated inside the header", "zero length",
    "payload byte flipped", "header byte flipped",         "key byte flipped",
    "other format version (checksums right)", "another spec's entry renamed into place",
    "trailing bytes",        "symlink to a valid entry",    "FIFO"};

static void apply_damage(const fixture *f, damage d, const char *path) {
  size_t cap = (g_entry_size[0] > g_entry_size[1] ? g_entry_size[0] : g_entry_size[1]) + 64;
  uint8_t *buf = malloc(cap);
  assert_non_null(buf);
  memcpy(buf, g_entry[0], g_entry_size[0]);
  size_t size = g_entry_size[0];
  size_t header = ef_get32(buf + EF_OFF_HEADER_SIZE);
  unlink(path);
  switch (d) {
    case TRUNCATE_HALF: size /= 2; break;
    case TRUNCATE_HEADER: size = 40; break;
    case ZERO_LENGTH: size = 0; break;
    case FLIP_PAYLOAD: buf[header + (size - header) / 2] ^= 0x01; break;
    case FLIP_HEADER: buf[CKJIT_ENTRY_FIXED_SIZE] ^= 0x01; break; /* first arch byte */
    case FLIP_KEY: buf[EF_OFF_KEY + 3] ^= 0x80; break;
    case OTHER_VERSION:
      ef_put32(buf + EF_OFF_VERSION, CKJIT_CACHE_FORMAT_VERSION + 1);
      ef_reseal(buf, size);
      break;
    case OTHER_KEY:
      memcpy(buf, g_entry[1], g_entry_size[1]);
      size = g_entry_size[1];
      break;
    case TRAILING_BYTES:
      memset(buf + size, 0, 16);
      size += 16;
      break;
    case SYMLINK: {
      char outside[1300];
      tu_fmt(outside, sizeof outside, "%s/outside.ckjit", f->base);
      plant_entry(0, outside);
      assert_int_equal(symlink(outside, path), 0);
      free(buf);
      return;
    }
    case FIFO:
      assert_int_equal(mkfifo(path, 0600), 0);
      free(buf);
      return;
    default: break;
  }
  assert_int_equal(tu_write_file(path, buf, size), 0);
  free(buf);
}

static void test_damaged_entries(void **state) {
  fixture *f = *state;
  char path[1300];
  entry_file(f->cache, 0, path, sizeof path);
  assert_int_equal(compile_ok(0), 0);
  entry_is_clean(f->cache, 0);
  for (damage d = 0; d < DAMAGE_COUNT; d++) {
    apply_damage(f, d, path);
    use_cache_dir(f->cache);
    int cached = compile_ok(0);
    ckjit_stats s = stats();
    printf("%-40s cached %d, compiles %llu, rejects %llu, writes %llu\n", damage_names[d], cached,
           (unsigned long long)s.compiles, (unsigned long long)s.disk_rejects,
           (unsigned long long)s.disk_writes);
    if (cached || s.compiles != 1) fail_msg("%s: the damaged entry was used", damage_names[d]);
    if (s.disk_rejects != 1) fail_msg("%s: %llu rejects, expected 1", damage_names[d],
                                      (unsigned long long)s.disk_rejects);
    if (s.disk_writes != 1 || s.disk_write_errors)
      fail_msg("%s: the entry was not replaced (%llu writes, %llu write errors)", damage_names[d],
               (unsigned long long)s.disk_writes, (unsigned long long)s.disk_write_errors);
    entry_is_clean(f->cache, 0);
    /* And it is used now. */
    assert_int_equal(compile_ok(0), 1);
    assert_int_equal(stats().compiles, 1);
  }
  /* The symlink's target was never written through. */
  char outside[1300];
  tu_fmt(outside, sizeof outside, "%s/outside.ckjit", f->base);
  size_t size = 0;
  uint8_t *buf = tu_read_file(outside, &size);
  assert_non_null(buf);
  assert_int_equal(size, g_entry_size[0]);
  assert_memory_equal(buf, g_entry[0], size);
  free(buf);
  assert_int_equal(count_temps(f->cache), 0);
}

/* A directory where the entry belongs cannot be replaced: the call
 * compiles and says the entry was not stored.  (Whether that one bad name
 * also keeps spec 1 off the disk is the disk cache's business: either way
 * spec 1 is compiled once.) */
static void test_directory_in_the_way(void **state) {
  fixture *f = *state;
  char path[1300], sub[1300];
  entry_file(f->cache, 0, path, sizeof path);
  tu_fmt(sub, sizeof sub, "%s", path);
  *strrchr(sub, '/') = 0;
  assert_int_equal(mkdir(f->cache, 0700), 0);
  assert_int_equal(mkdir(sub, 0700), 0);
  assert_int_equal(mkdir(path, 0700), 0);
  assert_int_equal(compile_unstored(0), 0);
  ckjit_compile_result r1;
  ckjit_status st1 = ckjit_compile_spec(g_spec[1], g_arch, &r1);
  assert_true(st1 == CKJIT_SUCCESS || st1 == CKJIT_ERROR_CACHE);
  assert_string_equal(r1.key, g_key[1]);
  assert_int_equal(r1.stored, st1 == CKJIT_SUCCESS);
  ckjit_stats s = stats();
  assert_int_equal(s.compiles, 2);
  assert_true(s.disk_write_errors >= 1);
  struct stat st;
  assert_int_equal(lstat(path, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(count_temps(f->cache), 0);
}

/* Temporary files of another writer (complete or not) are never taken for
 * the entry and never disturb it. */
static void test_leftover_temps(void **state) {
  fixture *f = *state;
  char path[1300], t1[1400], t2[1400];
  entry_file(f->cache, 0, path, sizeof path);
  assert_int_equal(mkdir(f->cache, 0700), 0);
  tu_fmt(t1, sizeof t1, "%s", path);
  *strrchr(t1, '/') = 0;
  assert_int_equal(mkdir(t1, 0700), 0);
  tu_fmt(t1, sizeof t1, "%.*s/.tmp-%s-1-1-0", (int)(strrchr(path, '/') - path), path, g_key[0]);
  tu_fmt(t2, sizeof t2, "%.*s/.tmp-%s-2-2-0", (int)(strrchr(path, '/') - path), path, g_key[0]);
  plant_entry(0, t1);
  assert_int_equal(tu_write_file(t2, g_entry[0], g_entry_size[0] / 2), 0);
  assert_int_equal(compile_ok(0), 0);
  ckjit_stats s = stats();
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.disk_rejects, 0);
  assert_int_equal(s.disk_writes, 1);
  entry_is_clean(f->cache, 0);
  assert_int_equal(compile_ok(0), 1);
}

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

/* ---- set-up -------------------------------------------------------------- */

static int group_setup(void **state) {
  (void)state;
  g_root = tu_mkdtemp("faults-api");
  if (!g_root) return -1;
  unsetenv("CKJIT_CACHE_DISABLE");
  unsetenv("CKJIT_DUMP_DIR");
  unsetenv("CKJIT_ARCH");
  unsetenv("CKJIT_CACHE_PATH");
  unsetenv("CKJIT_CACHE_MAX_SIZE");
  unsetenv("CKJIT_CACHE_MAX_ENTRIES");
  unsetenv("CKJIT_RECORD");
  const char *forced = getenv("CKJIT_TEST_FAULT_ARCH");
  const char *archs[] = {"sm_90", "gfx90a"};
  char clean[1100];
  tu_fmt(clean, sizeof clean, "%s/clean", g_root);
  for (int a = 0; a < 2 && !g_arch; a++) {
    const char *arch = forced && *forced ? forced : archs[a];
    use_cache_dir(clean);
    ckjit_compile_result r;
    ckjit_status st = ckjit_compile_spec(g_spec[0], arch, &r);
    if (st == CKJIT_SUCCESS) {
      g_arch = arch;
    } else {
      printf("note: %s: %s: %s\n", arch, ckjit_status_string(st), ckjit_last_error());
      if (forced && *forced) break;
    }
  }
  if (!g_arch) return 0;
  printf("compiling for %s\n", g_arch);
  for (int s = 0; s < NSPEC; s++) {
    ckjit_compile_result r;
    if (ckjit_compile_spec(g_spec[s], g_arch, &r) != CKJIT_SUCCESS) return -1;
    tu_fmt(g_key[s], sizeof g_key[s], "%s", r.key);
    g_code_size[s] = r.code_size;
    char path[1300];
    entry_file(clean, s, path, sizeof path);
    g_entry[s] = tu_read_file(path, &g_entry_size[s]);
    if (!g_entry[s]) return -1;
  }
  /* A second clean compile gives the same bytes (the tests compare entries
   * byte for byte). */
  char again[1100];
  tu_fmt(again, sizeof again, "%s/again", g_root);
  use_cache_dir(again);
  ckjit_compile_result r;
  if (ckjit_compile_spec(g_spec[0], g_arch, &r) != CKJIT_SUCCESS) return -1;
  char path[1300];
  entry_file(again, 0, path, sizeof path);
  size_t size = 0;
  uint8_t *buf = tu_read_file(path, &size);
  int same = buf && size == g_entry_size[0] && !memcmp(buf, g_entry[0], size);
  free(buf);
  if (!same) {
    fprintf(stderr, "two clean compiles of %s for %s gave different entries\n", g_spec[0], g_arch);
    return -1;
  }
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  ckjit_shutdown();
  if (!getenv("CKJIT_TEST_KEEP")) tu_rm_rf(g_root);
  free(g_root);
  for (int s = 0; s < NSPEC; s++) free(g_entry[s]);
  return 0;
}

static int setup_or_skip(void **state) {
  if (!g_arch) return 0;
  return setup(state);
}

static int teardown_if(void **state) {
  if (!g_arch) return 0;
  return teardown(state);
}

#define NEED_ARCH()                                                              \
  do {                                                                           \
    if (!g_arch) {                                                               \
      printf("SKIP: neither NVRTC (sm_90) nor hipRTC (gfx90a) can compile here\n"); \
      skip();                                                                    \
    }                                                                            \
  } while (0)

#define WRAP(fn)                          \
  static void w_##fn(void **state) {      \
    NEED_ARCH();                          \
    fn(state);                            \
  }
WRAP(test_damaged_entries)
WRAP(test_directory_in_the_way)
WRAP(test_leftover_temps)
WRAP(test_write_errors)
WRAP(test_sigkill_mid_write)
WRAP(test_real_full_disk)
WRAP(test_real_readonly_fs)
WRAP(test_other_owner)

int main(void) {
  umask(022);
#define T(fn) cmocka_unit_test_setup_teardown(w_##fn, setup_or_skip, teardown_if)
  const struct CMUnitTest tests[] = {
      T(test_damaged_entries),   T(test_directory_in_the_way), T(test_leftover_temps),
      T(test_write_errors),      T(test_sigkill_mid_write),    T(test_real_full_disk),
      T(test_real_readonly_fs),  T(test_other_owner),
  };
#undef T
  return cmocka_run_group_tests_name("faults_api", tests, group_setup, group_teardown);
}
