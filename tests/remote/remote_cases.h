/* What the two sources of test_remote share: the specs the cases compile,
 * the redis-server of the case and the entries in it (their names, their
 * files, their check), and the cases test_remote_fleet.c defines for the
 * case table in test_remote.c.  One executable, so that every case keeps
 * its meson test name and `test_remote CASE ...` command line.
 * Header-only, static, except g_srv (defined in test_remote.c). */
#ifndef CKJIT_TESTS_REMOTE_CASES_H
#define CKJIT_TESTS_REMOTE_CASES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/entry.h"
#include "cache/entry_accept.h"
#include "cache/key.h"
#include "cache/remote.h"
#include "remote_test_util.h"

/* Quick compiles (elementwise and transpose), all portable. */
static const char *const SPECS[] = {
    "elementwise:dtype=f32,op=relu",  "elementwise:dtype=f32,op=silu",
    "elementwise:dtype=f16,op=relu",  "elementwise:dtype=f16,op=silu",
    "elementwise:dtype=bf16,op=relu", "elementwise:dtype=bf16,op=silu",
    "transpose:dtype=f32",            "transpose:dtype=f16",
};

/* Static storage (rs_start's exit handler stops it), shared by the
 * sources; defined in test_remote.c. */
extern rs_server g_srv;

static TU_UNUSED void start_server(int tcp, const char *password) {
  CHECK(rs_start(&g_srv, tcp, password, NULL) == 0, "cannot start redis-server");
}

static TU_UNUSED void entry_name(const char *hex, char *out, size_t len) {
  tu_fmt(out, len, "%s%s", CKJIT_REMOTE_PREFIX, hex);
}

static TU_UNUSED void entry_file(const char *dir, const char *hex, char *out, size_t len) {
  tu_fmt(out, len, "%s/%.2s/%s.ckjit", dir, hex, hex);
}

/* The value of `hex` in Redis passes the library's rule for that key. */
static TU_UNUSED int value_ok(const char *hex, uint8_t **value, size_t *len) {
  char name[CKJIT_REMOTE_NAME_MAX];
  entry_name(hex, name, sizeof name);
  *value = rs_get(&g_srv, name, len);
  if (!*value) return 0;
  ckjit_key key;
  ckjit__key_parse(hex, &key);
  const char *why = "";
  ckjit_entry_meta meta;
  const uint8_t *payload;
  size_t psize;
  if (ckjit__entry_accept_bytes(*value, *len, &key, &meta, &payload, &psize, &why) != 0) {
    fprintf(stderr, "value %s refused: %s\n", hex, why);
    return 0;
  }
  return strcmp(meta.arch, g_arch) == 0;
}

/* `ckjit-cache --cache-dir DIR verify` exits 0. */
static TU_UNUSED void verify_cache(const char *dir) {
  const char *argv[] = {g_cache_tool, "--cache-dir", dir, "verify", NULL};
  proc p;
  tool_run_env(&p, argv, NULL);
  CHECK(p.status == 0, "ckjit-cache verify %s: exit %d\n%s%s", dir, p.status, p.out, p.err);
  proc_free(&p);
}

static TU_UNUSED int same_file_bytes(const char *path, const uint8_t *bytes, size_t len) {
  size_t n;
  uint8_t *f = tu_read_file(path, &n);
  int same = f && n == len && !memcmp(f, bytes, len);
  free(f);
  return same;
}

/* The cases of test_remote_fleet.c: several processes and the tools on one
 * server. */
void case_lease(void);
void case_fleet(void);
void case_tools(void);

#endif
