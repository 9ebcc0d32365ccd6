/* Read-only cache layers (CKJIT_CACHE_PATH): searched after the writable
 * cache, in order; never written (no entries, no mtimes); verified like the
 * writable cache (a bad entry is a miss and a warning); the rules for which
 * directories are accepted; and the runtime reading CKJIT_CACHE_PATH. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/layers.h"
#include "cache/settings.h"
#include "runtime/runtime.h"
#include "cache_test_util.h"

typedef struct fixture {
  char *base;
  char dir[CKJIT_PATH_MAX];    /* writable cache */
  char layer1[CKJIT_PATH_MAX];
  char layer2[CKJIT_PATH_MAX];
  ckjit_disk_cache c;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || !(f->base = tu_mkdtemp("cache-layers"))) return -1;
  tu_fmt(f->dir, sizeof f->dir, "%s/user", f->base);
  tu_fmt(f->layer1, sizeof f->layer1, "%s/layer1", f->base);
  tu_fmt(f->layer2, sizeof f->layer2, "%s/layer2", f->base);
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

/* Fills `dir` as a cache with entries [from, to) of payload variant
 * `variant`, with last uses years ago. */
static void fill_layer(const char *dir, int from, int to, int variant) {
  ckjit_disk_cache *c = malloc(sizeof *c);
  assert_non_null(c);
  ckjit__disk_open(c, dir);
  assert_int_equal(c->usable, 1);
  for (int i = from; i < to; i++) {
    assert_int_equal(tc_store_variant(c, i, 500 + (size_t)i, variant), CKJIT_SUCCESS);
    assert_int_equal(tc_set_mtime(dir, i, 1000000000 + i), 0);
  }
  free(c);
}

/* A fingerprint of every file's path, mode, size, mtime and bytes. */
static uint64_t tree_fingerprint(const char *dir) {
  uint64_t h = 1469598103934665603ull;
  for (int s = -1; s < 256; s++) {
    char sub[CKJIT_PATH_MAX + 8];
    if (s < 0) tu_fmt(sub, sizeof sub, "%s", dir);
    else tu_fmt(sub, sizeof sub, "%s/%02x", dir, s);
    DIR *d = opendir(sub);
    if (!d) continue;
    struct dirent *de;
    while ((de = readdir(d))) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
      char p[CKJIT_PATH_MAX + 300];
      tu_fmt(p, sizeof p, "%s/%s", sub, de->d_name);
      struct stat st;
      if (lstat(p, &st) != 0) continue;
      uint64_t x = (uint64_t)st.st_mode * 31 + (uint64_t)st.st_size * 131 +
                   (uint64_t)st.st_mtim.tv_sec * 1000003 + (uint64_t)st.st_mtim.tv_nsec;
      for (const char *c = de->d_name; *c; c++) x = x * 33 + (uint8_t)*c;
      if (S_ISREG(st.st_mode)) {
        size_t n;
        uint8_t *b = tu_read_file(p, &n);
        for (size_t i = 0; b && i < n; i++) x = x * 1099511628211ull + b[i];
        free(b);
      }
      h ^= x * 0x9E3779B97F4A7C15ull; /* order-independent */
    }
    closedir(d);
  }
  return h;
}

static void open_with_layers(fixture *f, const char *list) {
  ckjit__disk_open(&f->c, f->dir);
  assert_int_equal(f->c.usable, 1);
  ckjit__disk_add_layers(&f->c, list);
}

static void test_hit_from_layer_never_written(void **state) {
  fixture *f = *state;
  fill_layer(f->layer1, 0, 10, 0);
  uint64_t before = tree_fingerprint(f->layer1);
  char list[3 * CKJIT_PATH_MAX];
  tu_fmt(list, sizeof list, "%s", f->layer1);
  open_with_layers(f, list);
  assert_int_equal(f->c.n_layers, 1);
  ckjit_stats s0, s1;
  ckjit_get_stats(&s0);
  for (int i = 0; i < 10; i++) assert_int_equal(tc_load(&f->c, i, 500 + (size_t)i), 1);
  ckjit_get_stats(&s1);
  assert_int_equal(s1.disk_hits - s0.disk_hits, 10);
  assert_int_equal(s1.disk_misses, s0.disk_misses);
  /* Nothing was copied to the writable cache, nothing in the layer changed
   * (the mtimes are years old: a writable cache's hits would touch them). */
  assert_int_equal(tc_count(f->dir, NULL), 0);
  assert_true(tree_fingerprint(f->layer1) == before);
  /* Stores go to the writable cache, never to the layer. */
  assert_int_equal(tc_store(&f->c, 50, 100), CKJIT_SUCCESS);
  assert_true(tc_exists(f->dir, 50));
  assert_false(tc_exists(f->layer1, 50));
  assert_int_equal(tc_load(&f->c, 50, 100), 1);
  /* Eviction of the writable cache leaves the layer alone. */
  f->c.max_entries = 1;
  for (int i = 60; i < 70; i++) assert_int_equal(tc_store(&f->c, i, 100), CKJIT_SUCCESS);
  assert_true(tc_count(f->dir, NULL) <= 1);
  assert_true(tree_fingerprint(f->layer1) == before);
  assert_int_equal(tc_load(&f->c, 3, 503), 1);
  /* A key in no directory is one miss. */
  ckjit_get_stats(&s0);
  assert_int_equal(tc_load(&f->c, 99, 10), 0);
  ckjit_get_stats(&s1);
  assert_int_equal(s1.disk_misses - s0.disk_misses, 1);
}

static void test_search_order(void **state) {
  fixture *f = *state;
  /* Key 1 in both layers with different (valid) payloads; key 2 only in
   * layer 2; key 3 in the writable cache and layer 1. */
  fill_layer(f->layer1, 1, 2, 1);
  fill_layer(f->layer2, 1, 3, 2);
  fill_layer(f->layer1, 3, 4, 1);
  char list[3 * CKJIT_PATH_MAX];
  tu_fmt(list, sizeof list, "%s:%s", f->layer1, f->layer2);
  open_with_layers(f, list);
  assert_int_equal(f->c.n_layers, 2);
  assert_int_equal(tc_store_variant(&f->c, 3, 503, 0), CKJIT_SUCCESS);
  assert_int_equal(tc_load_variant(&f->c, 1, 501, 1), 1); /* layer 1 first */
  assert_int_equal(tc_load_variant(&f->c, 2, 502, 2), 1); /* then layer 2 */
  assert_int_equal(tc_load_variant(&f->c, 3, 503, 0), 1); /* writable cache first */
  /* Reversed order. */
  tu_fmt(list, sizeof list, "%s:%s", f->layer2, f->layer1);
  open_with_layers(f, list);
  assert_int_equal(tc_load_variant(&f->c, 1, 501, 2), 1);
}

static void corrupt(const char *path) {
  size_t n;
  uint8_t *b = tu_read_file(path, &n);
  assert_non_null(b);
  b[n - 1] ^= 0x5A;
  chmod(path, 0600);
  assert_int_equal(tu_write_file(path, b, n), 0);
  free(b);
}

static void test_bad_entry_in_layer(void **state) {
  fixture *f = *state;
  fill_layer(f->layer1, 0, 3, 0);
  fill_layer(f->layer2, 0, 3, 0);
  char p[CKJIT_ENTRY_PATH_MAX];
  tc_path(f->layer1, 0, p, sizeof p);
  corrupt(p);
  tc_path(f->layer2, 1, p, sizeof p);
  corrupt(p);
  /* Layer 1's entry 2 replaced by a valid entry of another key. */
  char p2[CKJIT_ENTRY_PATH_MAX], other[CKJIT_ENTRY_PATH_MAX];
  tc_path(f->layer1, 2, p2, sizeof p2);
  fill_layer(f->layer2, 7, 8, 0);
  tc_path(f->layer2, 7, other, sizeof other);
  size_t n;
  uint8_t *b = tu_read_file(other, &n);
  assert_int_equal(tu_write_file(p2, b, n), 0);
  free(b);
  uint64_t l1 = tree_fingerprint(f->layer1);

  /* Only layer 1: bad entries are misses, counted as rejects. */
  open_with_layers(f, f->layer1);
  uint64_t r0 = tc_rejects();
  assert_int_equal(tc_load(&f->c, 0, 500), 0);
  assert_int_equal(tc_rejects(), r0 + 1);
  assert_int_equal(tc_load(&f->c, 2, 502), 0);
  assert_int_equal(tc_rejects(), r0 + 2);
  assert_int_equal(tc_load(&f->c, 1, 501), 1);
  /* Layer 1 then 2: a bad entry in one, a good one in the other is a hit. */
  char list[3 * CKJIT_PATH_MAX];
  tu_fmt(list, sizeof list, "%s:%s", f->layer1, f->layer2);
  open_with_layers(f, list);
  assert_int_equal(tc_load(&f->c, 0, 500), 1);
  assert_int_equal(tc_load(&f->c, 1, 501), 1);
  assert_int_equal(tc_load(&f->c, 2, 502), 1);
  /* The bad entries were not removed or repaired: layers are read-only. */
  assert_true(tree_fingerprint(f->layer1) == l1);
  /* A compile would store into the writable cache, which then wins. */
  assert_int_equal(tc_store(&f->c, 0, 500), CKJIT_SUCCESS);
  r0 = tc_rejects();
  assert_int_equal(tc_load(&f->c, 0, 500), 1);
  assert_int_equal(tc_rejects(), r0);
}

/* Permission and type rules for what is used from a layer. */
static void test_unsafe_items_in_layer(void **state) {
  fixture *f = *state;
  fill_layer(f->layer1, 0, 6, 0);
  open_with_layers(f, f->layer1);
  assert_int_equal(f->c.n_layers, 1);
  char p[CKJIT_ENTRY_PATH_MAX], sub[CKJIT_ENTRY_PATH_MAX];
  /* An entry writable by others or group. */
  tc_path(f->layer1, 0, p, sizeof p);
  assert_int_equal(chmod(p, 0666), 0);
  assert_int_equal(tc_load(&f->c, 0, 500), 0);
  assert_int_equal(chmod(p, 0620), 0);
  assert_int_equal(tc_load(&f->c, 0, 500), 0);
  assert_int_equal(chmod(p, 0644), 0);
  assert_int_equal(tc_load(&f->c, 0, 500), 1);
  /* A subdirectory writable by others. */
  tc_path(f->layer1, 1, sub, sizeof sub);
  *strrchr(sub, '/') = 0;
  assert_int_equal(chmod(sub, 0777), 0);
  assert_int_equal(tc_load(&f->c, 1, 501), 0);
  assert_int_equal(chmod(sub, 0755), 0);
  assert_int_equal(tc_load(&f->c, 1, 501), 1);
  /* A symlinked entry (to a valid entry outside): a miss, target unread. */
  char outside[CKJIT_PATH_MAX + 32];
  tu_fmt(outside, sizeof outside, "%s/outside.ckjit", f->base);
  tc_path(f->layer1, 2, p, sizeof p);
  assert_int_equal(rename(p, outside), 0);
  assert_int_equal(symlink(outside, p), 0);
  assert_int_equal(tc_load(&f->c, 2, 502), 0);
  /* A symlinked subdirectory. */
  tc_path(f->layer1, 3, p, sizeof p);
  tu_fmt(sub, sizeof sub, "%s", p);
  *strrchr(sub, '/') = 0;
  char moved[CKJIT_PATH_MAX + 32];
  tu_fmt(moved, sizeof moved, "%s/moved-subdir", f->base);
  assert_int_equal(rename(sub, moved), 0);
  assert_int_equal(symlink(moved, sub), 0);
  assert_int_equal(tc_load(&f->c, 3, 503), 0);
  /* A FIFO at an entry's name does not block. */
  tc_path(f->layer1, 4, p, sizeof p);
  assert_int_equal(unlink(p), 0);
  assert_int_equal(mkfifo(p, 0644), 0);
  assert_int_equal(tc_load(&f->c, 4, 504), 0);
  /* Owned by another user (root-owned /opt/app/cache is the usual case) is
   * fine when not writable by group or others. */
  if (geteuid() == 0) {
    tc_path(f->layer1, 5, p, sizeof p);
    tu_fmt(sub, sizeof sub, "%s", p);
    *strrchr(sub, '/') = 0;
    assert_int_equal(chown(f->layer1, 65534, 65534), 0);
    assert_int_equal(chown(sub, 65534, 65534), 0);
    assert_int_equal(chown(p, 65534, 65534), 0);
    assert_int_equal(chmod(f->layer1, 0755), 0);
    assert_int_equal(chmod(sub, 0755), 0);
    assert_int_equal(chmod(p, 0644), 0);
    open_with_layers(f, f->layer1);
    assert_int_equal(f->c.n_layers, 1);
    assert_int_equal(tc_load(&f->c, 5, 505), 1);
  } else {
    printf("note: not root; another owner's layer is covered by the check tests only\n");
  }
}

static void test_layer_rules(void **state) {
  fixture *f = *state;
  fill_layer(f->layer1, 0, 1, 0);
  fill_layer(f->layer2, 0, 1, 0);
  char why[256];
  assert_int_equal(ckjit__layer_check(f->layer1, why, sizeof why), 0);
  assert_int_equal(ckjit__layer_check("relative/dir", why, sizeof why), -1);
  assert_non_null(strstr(why, "absolute"));
  char missing[CKJIT_PATH_MAX + 16], file[CKJIT_PATH_MAX + 16], link[CKJIT_PATH_MAX + 16];
  tu_fmt(missing, sizeof missing, "%s/missing", f->base);
  assert_int_equal(ckjit__layer_check(missing, why, sizeof why), -1);
  tu_fmt(file, sizeof file, "%s/file", f->base);
  assert_int_equal(tu_write_file(file, "x", 1), 0);
  assert_int_equal(ckjit__layer_check(file, why, sizeof why), -1);
  /* Writable by group or others: anyone could plant code there. */
  const mode_t bad_modes[] = {0775, 0757, 0777, 01777, 0730};
  for (size_t i = 0; i < sizeof bad_modes / sizeof bad_modes[0]; i++) {
    assert_int_equal(chmod(f->layer2, bad_modes[i]), 0);
    assert_int_equal(ckjit__layer_check(f->layer2, why, sizeof why), -1);
    open_with_layers(f, f->layer2);
    assert_int_equal(f->c.n_layers, 0);
    assert_int_equal(tc_load(&f->c, 0, 500), 0);
  }
  assert_int_equal(chmod(f->layer2, 0755), 0);
  /* A symlink to a layer is followed for the layer itself. */
  tu_fmt(link, sizeof link, "%s/link-to-layer1", f->base);
  assert_int_equal(symlink(f->layer1, link), 0);
  assert_int_equal(ckjit__layer_check(link, why, sizeof why), 0);

  /* The list: empty items ignored, bad ones skipped, duplicates (also via a
   * link) and the writable directory itself skipped. */
  char list[8 * CKJIT_PATH_MAX];
  tu_fmt(list, sizeof list, "::%s:relative:%s::%s:%s:%s:%s:", f->layer1, missing, link, f->dir,
         f->layer2, f->layer1);
  open_with_layers(f, list);
  assert_int_equal(f->c.n_layers, 2);
  assert_string_equal(f->c.layers[0], f->layer1);
  assert_string_equal(f->c.layers[1], f->layer2);
  /* At most CKJIT_DISK_MAX_LAYERS. */
  ckjit__disk_open(&f->c, f->dir);
  for (int i = 0; i < CKJIT_DISK_MAX_LAYERS + 3; i++) {
    char d[CKJIT_PATH_MAX + 16];
    tu_fmt(d, sizeof d, "%s/many%d", f->base, i);
    assert_int_equal(mkdir(d, 0755), 0);
    int rc = ckjit__disk_add_layer(&f->c, d);
    assert_int_equal(rc, i < CKJIT_DISK_MAX_LAYERS ? 0 : -1);
  }
  assert_int_equal(f->c.n_layers, CKJIT_DISK_MAX_LAYERS);
}

/* The writable cache unusable (refused): layers still serve hits. */
static void test_layers_without_writable_cache(void **state) {
  fixture *f = *state;
  fill_layer(f->layer1, 0, 2, 0);
  assert_int_equal(mkdir(f->dir, 0777), 0);
  assert_int_equal(chmod(f->dir, 0777), 0);
  ckjit__disk_open(&f->c, f->dir);
  assert_int_equal(f->c.usable, 0);
  ckjit__disk_add_layers(&f->c, f->layer1);
  assert_int_equal(f->c.n_layers, 1);
  assert_int_equal(tc_load(&f->c, 1, 501), 1);
  assert_int_equal(tc_load(&f->c, 5, 505), 0);
  assert_int_not_equal(tc_store(&f->c, 5, 505), CKJIT_SUCCESS);
  assert_false(tc_exists(f->layer1, 5));
  assert_int_equal(tc_count(f->dir, NULL), 0);
}

/* CKJIT_CACHE_PATH through ckjit_init: a real compile (NVRTC) fills a cache
 * that then serves, as a layer, another process-like init whose writable
 * cache is empty; nothing is written. */
static void test_runtime_layer_end_to_end(void **state) {
  fixture *f = *state;
  unsetenv("CKJIT_CACHE_PATH");
  ckjit_options o;
  ckjit_options_init(&o);
  o.cache_dir = f->layer1;
  o.disk_cache = 1;
  o.arch = "sm_90";
  assert_int_equal(ckjit_init(&o), CKJIT_SUCCESS);
  char spec[256];
  assert_int_equal(ckjit_default_spec(0, spec, sizeof spec), CKJIT_SUCCESS);
  ckjit_compile_result r1;
  ckjit_status st = ckjit_compile_spec(spec, "sm_90", &r1);
  ckjit_shutdown();
  if (st == CKJIT_ERROR_BACKEND_UNAVAILABLE) {
    printf("SKIP runtime layer test: NVRTC not available (%s)\n", ckjit_last_error());
    skip();
  }
  assert_int_equal(st, CKJIT_SUCCESS);
  uint64_t before = tree_fingerprint(f->layer1);

  setenv("CKJIT_CACHE_PATH", f->layer1, 1);
  o.cache_dir = f->dir;
  assert_int_equal(ckjit_init(&o), CKJIT_SUCCESS);
  ckjit_runtime *rt;
  assert_int_equal(ckjit__runtime_get(&rt), CKJIT_SUCCESS);
  assert_int_equal(rt->disk.n_layers, 1);
  ckjit_reset_stats();
  ckjit_compile_result r2;
  assert_int_equal(ckjit_compile_spec(spec, "sm_90", &r2), CKJIT_SUCCESS);
  ckjit_stats s;
  ckjit_get_stats(&s);
  ckjit_shutdown();
  unsetenv("CKJIT_CACHE_PATH");
  assert_int_equal(r2.cached, 1);
  assert_string_equal(r2.key, r1.key);
  assert_int_equal(s.compiles, 0);
  assert_int_equal(s.disk_hits, 1);
  assert_int_equal(tc_count(f->dir, NULL), 0);
  assert_true(tree_fingerprint(f->layer1) == before);

  /* Writable cache refused (group-writable): the layer still serves. */
  assert_int_equal(chmod(f->dir, 0777), 0);
  setenv("CKJIT_CACHE_PATH", f->layer1, 1);
  assert_int_equal(ckjit_init(&o), CKJIT_SUCCESS);
  ckjit_device_info info;
  assert_int_equal(ckjit_get_device_info(&info), CKJIT_SUCCESS);
  assert_string_equal(info.cache_dir, ""); /* no writable cache */
  ckjit_compile_result r3;
  assert_int_equal(ckjit_compile_spec(spec, "sm_90", &r3), CKJIT_SUCCESS);
  ckjit_shutdown();
  unsetenv("CKJIT_CACHE_PATH");
  assert_int_equal(r3.cached, 1);
  assert_int_equal(chmod(f->dir, 0700), 0);
}

int main(void) {
  umask(022);
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_hit_from_layer_never_written),
      T(test_search_order),
      T(test_bad_entry_in_layer),
      T(test_unsafe_items_in_layer),
      T(test_layer_rules),
      T(test_layers_without_writable_cache),
      T(test_runtime_layer_end_to_end),
  };
#undef T
  return cmocka_run_group_tests_name("cache_layers", tests, NULL, NULL);
}
