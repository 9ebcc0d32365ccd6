/* The fixture and helpers shared by the public-API fault tests
 * (test_faults_api*.c).  Each program compiles two specs once, cleanly, in
 * its group set-up and keeps their keys and entry files, so every test can
 * check that whatever the disk did, ckjit_compile_spec built the very same
 * code object (same key, same bytes) and that a bad entry was replaced by
 * the clean one.  Uses the first compiler present: NVRTC (sm_90), else
 * hipRTC (gfx90a) (CKJIT_TEST_FAULT_ARCH overrides); every test skips with a
 * message when neither is.  Each test gets its own cache directory and
 * re-initialized library (statistics from zero).  Header-only and static:
 * each test program is one translation unit. */
#ifndef CKJIT_TESTS_CACHE_FAULTS_API_FIXTURE_H
#define CKJIT_TESTS_CACHE_FAULTS_API_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "cache/disk_cache.h" /* ckjit__disk_fault_hook */
#include "cache/entry.h"
#include "cache/key.h"
#include "ckjit/ckjit.h"
#include "test_util.h"

enum { NSPEC = 2 };

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

static TU_UNUSED void use_cache_dir(const char *dir) {
  ckjit_shutdown();
  setenv("CKJIT_CACHE_DIR", dir, 1);
  ckjit_reset_stats();
}

static TU_UNUSED int setup(void **state) {
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

static TU_UNUSED int teardown(void **state) {
  fixture *f = *state;
  ckjit__disk_fault_hook = NULL;
  ckjit_shutdown();
  if (f->mnt[0]) umount2(f->mnt, MNT_DETACH);
  free(f);
  return 0;
}

static TU_UNUSED ckjit_stats stats(void) {
  ckjit_stats s;
  ckjit_get_stats(&s);
  return s;
}

static TU_UNUSED void entry_file(const char *cache, int s, char *out, size_t len) {
  tu_fmt(out, len, "%s/%.2s/%s.ckjit", cache, g_key[s], g_key[s]);
}

/* Compiles spec s: must succeed with the clean key and size. Returns cached. */
static TU_UNUSED int compile_ok(int s) {
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
static TU_UNUSED int compile_unstored(int s) {
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
static TU_UNUSED void entry_is_clean(const char *cache, int s) {
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

static TU_UNUSED int count_temps(const char *cache) {
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

/* ---- set-up -------------------------------------------------------------- */

static TU_UNUSED int group_setup(void **state) {
  (void)state;
  g_root = tu_mkdtemp("faults-api");
  if (!g_root) return -1;
  tu_unset_cache_settings();
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

static TU_UNUSED int group_teardown(void **state) {
  (void)state;
  ckjit_shutdown();
  if (!getenv("CKJIT_TEST_KEEP")) tu_rm_rf(g_root);
  free(g_root);
  for (int s = 0; s < NSPEC; s++) free(g_entry[s]);
  return 0;
}

static TU_UNUSED int setup_or_skip(void **state) {
  if (!g_arch) return 0;
  return setup(state);
}

static TU_UNUSED int teardown_if(void **state) {
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

#endif
