/* Helpers shared by the cache tests (tests/cache/, and
 * tests/tools/test_cache_tool.c): deterministic entries (key, payload) by
 * number, stores, verified loads, entry paths, mtimes. */
#ifndef CKJIT_TESTS_CACHE_TEST_UTIL_H
#define CKJIT_TESTS_CACHE_TEST_UTIL_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cache/disk_cache.h"
#include "cache/entry.h"
#include "cache/key.h"
#include "ckjit/ckjit.h"
#include "elf_payload.h"
#include "test_util.h"

#define TC_UNUSED TU_UNUSED

/* Entry `id`: a key spread over the 256 subdirectories like real keys, and a
 * payload of `size` bytes (+ `variant`, to make a second payload for one
 * key): a small ELF object defining the entry's kernel, which the cache's
 * payload check accepts (tests/common/elf_payload.h), so at least
 * ep_min_size(kernel) bytes.  Returns the payload's size. */
static TC_UNUSED size_t tc_entry(int id, size_t size, int variant, ckjit_entry_meta *m,
                                 uint8_t **payload) {
  memset(m, 0, sizeof *m);
  tu_rng r = {(uint64_t)id * 7919u + 17u};
  for (int i = 0; i < 16; i += 8) {
    uint64_t v = tu_rng_next(&r);
    memcpy(m->key.bytes + i, &v, 8);
  }
  tu_fmt(m->arch, sizeof m->arch, "sm_90");
  tu_fmt(m->kernel, sizeof m->kernel, "kernel_%d", id);
  size_t min = ep_min_size(m->kernel);
  uint8_t *p = malloc(size > min ? size : min);
  if (!p) abort();
  *payload = p;
  return ep_build(p, size, m->arch, m->kernel,
                  (uint64_t)id * 31u + (uint64_t)variant * 1000003u + 5u);
}

static TC_UNUSED ckjit_key tc_key(int id) {
  ckjit_entry_meta m;
  uint8_t *p;
  tc_entry(id, 0, 0, &m, &p);
  free(p);
  return m.key;
}

/* Stores entry `id` (payload `size`, `variant`); returns the status. */
static TC_UNUSED ckjit_status tc_store_variant(ckjit_disk_cache *c, int id, size_t size,
                                               int variant) {
  ckjit_entry_meta m;
  uint8_t *p;
  size_t n = tc_entry(id, size, variant, &m, &p);
  ckjit_status st = ckjit__disk_store(c, &m, p, n);
  free(p);
  return st;
}

static TC_UNUSED ckjit_status tc_store(ckjit_disk_cache *c, int id, size_t size) {
  return tc_store_variant(c, id, size, 0);
}

/* Loads entry `id`: 1 on a hit whose payload is entry (id, size, variant)'s,
 * 0 on a miss, -1 on a hit with other bytes. */
static TC_UNUSED int tc_load_variant(ckjit_disk_cache *c, int id, size_t size, int variant) {
  ckjit_entry_meta m, got;
  uint8_t *p;
  size = tc_entry(id, size, variant, &m, &p);
  void *payload = NULL;
  size_t n = 0;
  int rc = ckjit__disk_load(c, &m.key, &payload, &n, &got);
  if (rc == 1) {
    if (n != size || memcmp(payload, p, size) != 0 || strcmp(got.kernel, m.kernel) != 0) rc = -1;
    free(payload);
  }
  free(p);
  return rc;
}

static TC_UNUSED int tc_load(ckjit_disk_cache *c, int id, size_t size) {
  return tc_load_variant(c, id, size, 0);
}

/* <root>/xx/<hex>.ckjit of entry `id`. */
static TC_UNUSED void tc_path(const char *root, int id, char *out, size_t len) {
  ckjit_key k = tc_key(id);
  char hex[33];
  ckjit__key_hex(&k, hex);
  tu_fmt(out, len, "%s/%.2s/%s.ckjit", root, hex, hex);
}

static TC_UNUSED int tc_exists(const char *root, int id) {
  char path[CKJIT_ENTRY_PATH_MAX];
  tc_path(root, id, path, sizeof path);
  return tu_path_exists(path);
}

/* Sets entry `id`'s mtime (and atime) to `t` seconds since the epoch. */
static TC_UNUSED int tc_set_mtime(const char *root, int id, time_t t) {
  char path[CKJIT_ENTRY_PATH_MAX];
  tc_path(root, id, path, sizeof path);
  struct timespec ts[2] = {{t, 0}, {t, 0}};
  return utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW);
}

static TC_UNUSED int64_t tc_mtime(const char *root, int id) {
  char path[CKJIT_ENTRY_PATH_MAX];
  tc_path(root, id, path, sizeof path);
  struct stat st;
  return lstat(path, &st) == 0 ? (int64_t)st.st_mtime : -1;
}

/* Entry-named files under root/xx/ (any type), and their bytes. */
static TC_UNUSED int tc_count(const char *root, uint64_t *bytes) {
  int n = 0;
  if (bytes) *bytes = 0;
  for (int s = 0; s < 256; s++) {
    char sub[CKJIT_PATH_MAX + 8];
    tu_fmt(sub, sizeof sub, "%s/%02x", root, s);
    DIR *d = opendir(sub);
    if (!d) continue;
    struct dirent *de;
    while ((de = readdir(d))) {
      size_t len = strlen(de->d_name);
      if (len != 38 || strcmp(de->d_name + 32, ".ckjit") != 0) continue;
      n++;
      if (bytes) {
        char p[CKJIT_PATH_MAX + 64];
        tu_fmt(p, sizeof p, "%s/%s", sub, de->d_name);
        struct stat st;
        if (lstat(p, &st) == 0) *bytes += (uint64_t)st.st_size;
      }
    }
    closedir(d);
  }
  return n;
}

/* Size of the entry file that a payload of `size` bytes makes for entry `id`
 * (payloads smaller than the smallest ELF object are that size instead). */
static TC_UNUSED size_t tc_file_size(int id, size_t size) {
  ckjit_entry_meta m;
  uint8_t *p, *enc;
  size_t n = 0;
  size = tc_entry(id, size, 0, &m, &p);
  if (ckjit__entry_encode(&m, p, size, &enc, &n) == 0) free(enc);
  free(p);
  return n;
}

static TC_UNUSED uint64_t tc_rejects(void) {
  ckjit_stats s;
  ckjit_get_stats(&s);
  return s.disk_rejects;
}

#endif
