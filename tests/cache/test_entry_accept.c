/* The acceptance rule of cache entries (cache/entry_accept.h,
 * cache/payload_check.h) as the library applies it, without a compiler:
 *
 *   - payloads: empty, not ELF (/etc/passwd), another ELF class, another
 *     machine, another AMD processor, no kernel symbol are refused, by the
 *     payload check itself, by a load (a reject, never a hit), by a store and
 *     by an archive import (issue 15 item 10); good ones of every vendor pass;
 *   - a subdirectory writable by group or others is repaired (chmod go-w) in
 *     the writable cache and the entry is a hit, while a read-only layer's is
 *     refused and left as it is; an entry file writable by group or others is
 *     a reject that the next store replaces (item 2);
 *   - one bad name (a directory at an entry's name, a symlink or a file in
 *     place of a subdirectory) fails the stores of its own entries only:
 *     an unrelated entry is stored, writes stay on, one warning, and the same
 *     handle stores the bad ones once the names are cleared (item 3);
 *   - as root: files and subdirectories of another user are refused;
 *   - real code objects (NVRTC sm_90, hipRTC gfx90a, where installed) pass,
 *     the same bytes under another arch or kernel name do not, and the check
 *     costs a few microseconds (printed).
 * The same cases through ckjit-cache verify are in test_cache_verify.c; the
 * same through real compiles in test_cache_heal.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "cache/archive.h"
#include "cache/entry_accept.h"
#include "cache/layers.h"
#include "cache/payload_check.h"
#include "entry_format.h"
#include "cache_test_util.h"

#define BIG 8192

typedef struct fixture {
  char *base;
  char dir[CKJIT_PATH_MAX];
  ckjit_disk_cache c;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || !(f->base = tu_mkdtemp("accept"))) return -1;
  tu_fmt(f->dir, sizeof f->dir, "%s/cache", f->base);
  ckjit__disk_open(&f->c, f->dir);
  if (!f->c.usable || !f->c.writable) return -1;
  f->c.max_bytes = f->c.max_entries = 0;
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

/* Writes entry `id`'s file with an arbitrary payload and correct checksums
 * (what a forger, or a tool that "fixes" checksums, would produce). */
static void forge(const char *root, int id, const char *arch, const void *payload, size_t n) {
  ckjit_entry_meta m;
  uint8_t *p, *buf;
  size_t size;
  tc_entry(id, 0, 0, &m, &p);
  free(p);
  tu_fmt(m.arch, sizeof m.arch, "%s", arch);
  assert_int_equal(ckjit__entry_encode(&m, payload, n, &buf, &size), 0);
  char path[CKJIT_ENTRY_PATH_MAX], sub[CKJIT_ENTRY_PATH_MAX];
  tc_path(root, id, path, sizeof path);
  tu_fmt(sub, sizeof sub, "%s", path);
  *strrchr(sub, '/') = '\0';
  mkdir(root, 0700);
  mkdir(sub, 0700);
  unlink(path);
  assert_int_equal(tu_write_file(path, buf, size), 0);
  assert_int_equal(chmod(path, 0600), 0);
  free(buf);
}

typedef struct bad_payload {
  const char *name, *arch;
  uint8_t bytes[BIG];
  size_t n;
  int not_elf; /* the reason must say "not an ELF object" */
} bad_payload;

/* The payloads the rule must refuse, for the kernel name `kernel`. */
static size_t bad_payloads(bad_payload *b, const char *kernel) {
  size_t k = 0;
  memset(b, 0, sizeof *b * 10);
  b[k].name = "empty", b[k].arch = "sm_90", b[k].n = 0, b[k++].not_elf = 1;
  b[k].name = "/etc/passwd", b[k].arch = "sm_90", b[k].not_elf = 1;
  uint8_t *pw = tu_read_file("/etc/passwd", &b[k].n);
  assert_non_null(pw);
  if (b[k].n > BIG) b[k].n = BIG;
  memcpy(b[k].bytes, pw, b[k].n);
  k++;
  free(pw);
  b[k].name = "ELF magic then garbage", b[k].arch = "gfx90a", b[k].not_elf = 1;
  b[k].n = 300;
  memset(b[k].bytes, 0xA5, b[k].n);
  memcpy(b[k++].bytes, ELFMAG, SELFMAG);
  b[k].name = "x86-64 ELF for sm_90", b[k].arch = "sm_90";
  b[k].n = ep_build_raw(b[k].bytes, 0, EM_X86_64, 0, kernel, 1), k++;
  b[k].name = "AMDGPU ELF for sm_90", b[k].arch = "sm_90";
  b[k].n = ep_build_raw(b[k].bytes, 0, EM_AMDGPU, 0x3f, kernel, 1), k++;
  b[k].name = "cubin for gfx90a", b[k].arch = "gfx90a";
  b[k].n = ep_build_raw(b[k].bytes, 0, EM_CUDA, 0, kernel, 1), k++;
  b[k].name = "gfx906 code object for gfx90a:xnack-", b[k].arch = "gfx90a:xnack-";
  b[k].n = ep_build_raw(b[k].bytes, 0, EM_AMDGPU, 0x2f, kernel, 1), k++;
  b[k].name = "cubin without the kernel", b[k].arch = "sm_90";
  b[k].n = ep_build(b[k].bytes, 0, "sm_90", "some_other_kernel", 1), k++;
  b[k].name = "32-bit ELF", b[k].arch = "sm_90";
  b[k].n = ep_build(b[k].bytes, 0, "sm_90", kernel, 1);
  b[k++].bytes[EI_CLASS] = ELFCLASS32;
  b[k].name = "unknown vendor", b[k].arch = "riscv64";
  b[k].n = ep_build(b[k].bytes, 0, "sm_90", kernel, 1), k++;
  return k;
}

static void test_payload_check(void **state) {
  (void)state;
  static bad_payload b[10];
  size_t n = bad_payloads(b, "kern");
  ckjit_entry_meta m;
  memset(&m, 0, sizeof m);
  tu_fmt(m.kernel, sizeof m.kernel, "kern");
  for (size_t i = 0; i < n; i++) {
    tu_fmt(m.arch, sizeof m.arch, "%s", b[i].arch);
    const char *why = NULL;
    int rc = ckjit__entry_accept_payload(&m, b[i].bytes, b[i].n, &why);
    printf("%-40s -> %s\n", b[i].name, rc ? why : "ACCEPTED");
    if (rc == 0) fail_msg("payload check accepted: %s", b[i].name);
    assert_non_null(why);
    if (b[i].not_elf && strncmp(why, "not an ELF object", 17) != 0)
      fail_msg("%s: reason \"%s\" does not say \"not an ELF object\"", b[i].name, why);
  }
  /* Every vendor and processor form, and any size from the minimum up. */
  const char *good[] = {"sm_70", "sm_90", "sm_90a", "sm_100", "gfx906", "gfx90a",
                        "gfx90a:sramecc+:xnack-", "gfx942", "gfx1100", "gfx1201"};
  static uint8_t p[BIG];
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    tu_fmt(m.arch, sizeof m.arch, "%s", good[i]);
    size_t sz = ep_build(p, i * 500, good[i], "kern", i);
    const char *why = NULL;
    if (ckjit__entry_accept_payload(&m, p, sz, &why) != 0)
      fail_msg("a good payload for %s refused: %s", good[i], why);
  }
  /* A processor missing from the table is checked by machine only, so that
   * a new arch never makes its own entries unloadable. */
  tu_fmt(m.arch, sizeof m.arch, "gfx1250");
  assert_int_equal(ckjit__amdgpu_mach("gfx1250"), -1);
  size_t sz = ep_build_raw(p, 0, EM_AMDGPU, 0x99, "kern", 3);
  const char *why = NULL;
  assert_int_equal(ckjit__entry_accept_payload(&m, p, sz, &why), 0);
  /* Known processors: the gfx9 family the compile tests use. */
  assert_int_equal(ckjit__amdgpu_mach("gfx90a"), 0x3f);
  assert_int_equal(ckjit__amdgpu_mach("gfx90a:xnack+"), 0x3f);
  assert_int_equal(ckjit__amdgpu_mach("gfx908"), 0x30);
  assert_int_equal(ckjit__amdgpu_mach("gfx942"), 0x4c);
  assert_int_equal(ckjit__amdgpu_mach("gfx1100"), 0x41);
}

/* An archive of one record: the entry file's bytes under `key`. */
static void write_archive(const char *path, const ckjit_key *key, const uint8_t *entry, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  uint8_t head[16] = "CKJITARC", rec[24], end[16];
  ef_put32(head + 8, CKJIT_ARCHIVE_VERSION);
  ef_put32(head + 12, 0);
  ef_put64(rec, n);
  memcpy(rec + 8, key->bytes, 16);
  ef_put64(end, 0);
  ef_put64(end + 8, 1);
  assert_int_equal(fwrite(head, 1, 16, f), 16);
  assert_int_equal(fwrite(rec, 1, 24, f), 24);
  assert_int_equal(fwrite(entry, 1, n, f), n);
  assert_int_equal(fwrite(end, 1, 16, f), 16);
  assert_int_equal(fclose(f), 0);
}

/* Each bad payload, forged with correct checksums: a load rejects it (a
 * reject, not a hit), a store refuses it, an import of it stores nothing. */
static void test_forged_payloads_refused_everywhere(void **state) {
  fixture *f = *state;
  static bad_payload b[10];
  size_t n = bad_payloads(b, "kernel_7");
  for (size_t i = 0; i < n; i++) {
    forge(f->dir, 7, b[i].arch, b[i].bytes, b[i].n);
    ckjit_key key = tc_key(7);
    uint8_t *file;
    size_t size;
    const char *why = NULL;
    int rc = ckjit__disk_read_entry(f->dir, &key, 0, &file, &size, NULL, NULL, &why);
    if (rc != -1) fail_msg("%s: ckjit__disk_read_entry returned %d, want -1 (refused)", b[i].name, rc);
    /* The lookup: a reject, and a miss. */
    uint64_t rejects = tc_rejects();
    void *payload = NULL;
    ckjit_entry_meta got;
    assert_int_equal(ckjit__disk_load(&f->c, &key, &payload, &size, &got), 0);
    assert_int_equal(tc_rejects(), rejects + 1);
    /* The entry's bytes: refused by the rule import uses. */
    char path[CKJIT_ENTRY_PATH_MAX];
    tc_path(f->dir, 7, path, sizeof path);
    uint8_t *bytes = tu_read_file(path, &size);
    assert_non_null(bytes);
    assert_int_equal(ckjit__entry_decode(bytes, size, &key, NULL, NULL, NULL, NULL), 0);
    assert_int_equal(ckjit__entry_accept_bytes(bytes, size, &key, NULL, NULL, NULL, &why), -1);
    /* An import of it stores nothing into an empty cache. */
    char archive[CKJIT_PATH_MAX + 32], other[CKJIT_PATH_MAX + 32];
    tu_fmt(archive, sizeof archive, "%s/one.ckjitar", f->base);
    tu_fmt(other, sizeof other, "%s/imported", f->base);
    write_archive(archive, &key, bytes, size);
    free(bytes);
    ckjit_disk_cache *c2 = malloc(sizeof *c2);
    assert_non_null(c2);
    ckjit__disk_open(c2, other);
    FILE *in = fopen(archive, "rb");
    ckjit_archive_summary s;
    int irc = ckjit__archive_import(c2, in, NULL, NULL, &s);
    fclose(in);
    if (irc == 0 || s.ok != 0 || s.bad != 1)
      fail_msg("%s: import returned %d (ok %llu, bad %llu)", b[i].name, irc,
               (unsigned long long)s.ok, (unsigned long long)s.bad);
    assert_int_equal(tc_count(other, NULL), 0);
    free(c2);
    /* A store of it is refused too: nothing the readers refuse is written. */
    ckjit_entry_meta m;
    uint8_t *p;
    tc_entry(7, 0, 0, &m, &p);
    free(p);
    tu_fmt(m.arch, sizeof m.arch, "%s", b[i].arch);
    unlink(path);
    assert_int_equal(ckjit__disk_store(&f->c, &m, b[i].bytes, b[i].n), CKJIT_ERROR_CACHE);
    assert_false(tu_path_exists(path));
  }
  /* The control: a valid forged payload is a hit. */
  uint8_t p[BIG];
  size_t sz = ep_build(p, 2000, "sm_90", "kernel_7", 9);
  forge(f->dir, 7, "sm_90", p, sz);
  ckjit_key key = tc_key(7);
  void *payload = NULL;
  size_t size = 0;
  ckjit_entry_meta got;
  assert_int_equal(ckjit__disk_load(&f->c, &key, &payload, &size, &got), 1);
  assert_int_equal(size, sz);
  free(payload);
}

static void subdir_of(const char *root, int id, char *out, size_t len) {
  tc_path(root, id, out, len);
  *strrchr(out, '/') = '\0';
}

static mode_t mode_of(const char *path) {
  struct stat st;
  assert_int_equal(lstat(path, &st), 0);
  return st.st_mode & 07777;
}

/* Item 2: a group/other-writable subdirectory of the writable cache is
 * repaired, not refused forever; a layer's is refused and left alone. */
static void test_group_writable_subdir_repaired(void **state) {
  fixture *f = *state;
  const mode_t modes[] = {0777, 0770, 0707, 0720};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    assert_int_equal(tc_store(&f->c, 1, 1000), CKJIT_SUCCESS);
    char sub[CKJIT_ENTRY_PATH_MAX];
    subdir_of(f->dir, 1, sub, sizeof sub);
    assert_int_equal(chmod(sub, modes[i]), 0);
    /* The rule itself refuses it (no repair when only reading). */
    ckjit_key key = tc_key(1);
    uint8_t *file;
    size_t size;
    const char *why = NULL;
    assert_int_equal(ckjit__disk_read_entry(f->dir, &key, 0, &file, &size, NULL, NULL, &why), -1);
    assert_non_null(strstr(why, "writable by group or others"));
    /* The library's lookup repairs it: a hit, no reject, twice. */
    uint64_t rejects = tc_rejects();
    assert_int_equal(tc_load(&f->c, 1, 1000), 1);
    assert_int_equal(tc_load(&f->c, 1, 1000), 1);
    assert_int_equal(tc_rejects(), rejects);
    assert_int_equal(mode_of(sub), modes[i] & 0755);
    /* So does a store into it (what lands there must be usable). */
    assert_int_equal(chmod(sub, modes[i]), 0);
    assert_int_equal(tc_store(&f->c, 1, 1000), CKJIT_SUCCESS);
    assert_int_equal(mode_of(sub), modes[i] & 0755);
  }
  /* A read-only layer is never modified: refused, mode unchanged. */
  char layer[CKJIT_PATH_MAX + 16], other[CKJIT_PATH_MAX + 16], sub[CKJIT_ENTRY_PATH_MAX];
  tu_fmt(layer, sizeof layer, "%s/layer", f->base);
  tu_fmt(other, sizeof other, "%s/other", f->base);
  ckjit_disk_cache *l = malloc(sizeof *l);
  assert_non_null(l);
  ckjit__disk_open(l, layer);
  assert_int_equal(tc_store(l, 2, 1000), CKJIT_SUCCESS);
  ckjit__disk_open(l, other);
  assert_int_equal(ckjit__disk_add_layer(l, layer), 0);
  subdir_of(layer, 2, sub, sizeof sub);
  assert_int_equal(chmod(sub, 0777), 0);
  uint64_t rejects = tc_rejects();
  assert_int_equal(tc_load(l, 2, 1000), 0);
  assert_int_equal(tc_rejects(), rejects + 1);
  assert_int_equal(mode_of(sub), 0777);
  free(l);
}

/* Item 2: an entry file writable by group or others is refused (others may
 * have changed it) and replaced by the next store, with mode 0600. */
static void test_group_writable_entry_replaced(void **state) {
  fixture *f = *state;
  assert_int_equal(tc_store(&f->c, 3, 1000), CKJIT_SUCCESS);
  char path[CKJIT_ENTRY_PATH_MAX];
  tc_path(f->dir, 3, path, sizeof path);
  assert_int_equal(chmod(path, 0666), 0);
  uint64_t rejects = tc_rejects();
  assert_int_equal(tc_load(&f->c, 3, 1000), 0);
  assert_int_equal(tc_rejects(), rejects + 1);
  assert_int_equal(tc_store(&f->c, 3, 1000), CKJIT_SUCCESS);
  assert_int_equal(mode_of(path), 0600);
  assert_int_equal(tc_load(&f->c, 3, 1000), 1);
}

/* Ids of test entries whose keys lie in `n` distinct subdirectories. */
static void distinct_ids(int *ids, int n) {
  char seen[64][3];
  int found = 0;
  for (int id = 10; found < n; id++) {
    ckjit_key k = tc_key(id);
    char hex[33];
    ckjit__key_hex(&k, hex);
    int dup = 0;
    for (int j = 0; j < found; j++) dup |= !strncmp(seen[j], hex, 2);
    if (dup) continue;
    memcpy(seen[found], hex, 2);
    seen[found][2] = '\0';
    ids[found++] = id;
  }
}

/* Item 3: one bad name fails its own entry only. */
static void test_bad_name_fails_one_entry(void **state) {
  fixture *f = *state;
  int ids[5];
  distinct_ids(ids, 5);
  int dir_at_entry = ids[0], link_subdir = ids[1], file_subdir = ids[2], fifo = ids[3],
      unrelated = ids[4];
  char path[CKJIT_ENTRY_PATH_MAX], sub[CKJIT_ENTRY_PATH_MAX], outside[CKJIT_PATH_MAX + 16];
  /* A directory (not empty) where an entry belongs. */
  tc_path(f->dir, dir_at_entry, path, sizeof path);
  subdir_of(f->dir, dir_at_entry, sub, sizeof sub);
  assert_int_equal(mkdir(sub, 0700), 0);
  assert_int_equal(mkdir(path, 0700), 0);
  char inner[CKJIT_ENTRY_PATH_MAX + 8];
  tu_fmt(inner, sizeof inner, "%s/x", path);
  assert_int_equal(tu_write_file(inner, "x", 1), 0);
  /* A symlink to a directory outside in place of a subdirectory. */
  tu_fmt(outside, sizeof outside, "%s/outside", f->base);
  assert_int_equal(mkdir(outside, 0700), 0);
  subdir_of(f->dir, link_subdir, sub, sizeof sub);
  assert_int_equal(symlink(outside, sub), 0);
  /* A regular file in place of a subdirectory. */
  subdir_of(f->dir, file_subdir, sub, sizeof sub);
  assert_int_equal(tu_write_file(sub, "not a directory", 15), 0);
  /* A FIFO at an entry's name: the store's rename replaces it. */
  tc_path(f->dir, fifo, path, sizeof path);
  subdir_of(f->dir, fifo, sub, sizeof sub);
  assert_int_equal(mkdir(sub, 0700), 0);
  assert_int_equal(mkfifo(path, 0600), 0);

  ckjit_stats s0;
  ckjit_get_stats(&s0);
  assert_int_equal(tc_store(&f->c, dir_at_entry, 1000), CKJIT_ERROR_CACHE);
  assert_int_equal(tc_store(&f->c, link_subdir, 1000), CKJIT_ERROR_CACHE);
  assert_int_equal(tc_store(&f->c, file_subdir, 1000), CKJIT_ERROR_CACHE);
  assert_int_equal(tc_store(&f->c, fifo, 1000), CKJIT_SUCCESS);
  assert_int_equal(tc_store(&f->c, unrelated, 1000), CKJIT_SUCCESS);
  ckjit_stats s1;
  ckjit_get_stats(&s1);
  assert_int_equal(s1.disk_write_errors, s0.disk_write_errors + 3);
  assert_int_equal(s1.disk_writes, s0.disk_writes + 2);
  /* Writes stay on, one warning for the three. */
  assert_int_equal(f->c.writable, 1);
  assert_int_equal(f->c.warned_entry_errors, 1);
  assert_int_equal(f->c.warned_dir_errors, 0);
  assert_int_equal(tc_load(&f->c, unrelated, 1000), 1);
  assert_int_equal(tc_load(&f->c, fifo, 1000), 1);
  /* Nothing was written through the link. */
  assert_int_equal(tc_count(outside, NULL), 0);
  char probe[CKJIT_PATH_MAX + 32];
  tu_fmt(probe, sizeof probe, "%s/%s", outside, "x");
  assert_false(tu_path_exists(probe));
  /* Names cleared: the same handle stores them (nothing was latched). */
  tc_path(f->dir, dir_at_entry, path, sizeof path);
  tu_rm_rf(path);
  subdir_of(f->dir, link_subdir, sub, sizeof sub);
  assert_int_equal(unlink(sub), 0);
  subdir_of(f->dir, file_subdir, sub, sizeof sub);
  assert_int_equal(unlink(sub), 0);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(tc_store(&f->c, ids[i], 1000), CKJIT_SUCCESS);
    assert_int_equal(tc_load(&f->c, ids[i], 1000), 1);
  }
}

/* As root: a file or subdirectory of another user is refused (its owner
 * could rewrite it whatever its mode), and the store of that one entry
 * fails while others go on. */
static void test_other_owner_refused(void **state) {
  fixture *f = *state;
  if (geteuid() != 0) {
    printf("SKIP other owners: needs root to chown\n");
    skip();
  }
  int ids[2];
  distinct_ids(ids, 2);
  assert_int_equal(tc_store(&f->c, ids[0], 1000), CKJIT_SUCCESS);
  char path[CKJIT_ENTRY_PATH_MAX], sub[CKJIT_ENTRY_PATH_MAX];
  tc_path(f->dir, ids[0], path, sizeof path);
  assert_int_equal(chown(path, 65534, 65534), 0);
  ckjit_key key = tc_key(ids[0]);
  uint8_t *file;
  size_t size;
  const char *why = NULL;
  assert_int_equal(ckjit__disk_read_entry(f->dir, &key, 0, &file, &size, NULL, NULL, &why), -1);
  assert_non_null(strstr(why, "owned by another user"));
  assert_int_equal(tc_load(&f->c, ids[0], 1000), 0);
  /* The store replaces it with our own file. */
  assert_int_equal(tc_store(&f->c, ids[0], 1000), CKJIT_SUCCESS);
  assert_int_equal(tc_load(&f->c, ids[0], 1000), 1);
  /* A subdirectory of another user: refused, and not stored into. */
  subdir_of(f->dir, ids[0], sub, sizeof sub);
  assert_int_equal(chown(sub, 65534, 65534), 0);
  assert_int_equal(tc_load(&f->c, ids[0], 1000), 0);
  assert_int_equal(ckjit__disk_read_entry(f->dir, &key, 0, &file, &size, NULL, NULL, &why), -1);
  assert_non_null(strstr(why, "subdirectory owned by another user"));
  assert_int_equal(tc_store(&f->c, ids[0], 1000), CKJIT_ERROR_CACHE);
  assert_int_equal(tc_store(&f->c, ids[1], 1000), CKJIT_SUCCESS);
  assert_int_equal(f->c.writable, 1);
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Compiles a real kernel per vendor into the fixture's cache and applies the
 * rule to what the compiler made. */
static void test_real_code_objects(void **state) {
  fixture *f = *state;
  static const char *const archs[] = {"sm_90", "gfx90a"};
  int tested = 0;
  ckjit_shutdown();
  setenv("CKJIT_CACHE_DIR", f->dir, 1);
  for (size_t a = 0; a < 2; a++) {
    ckjit_compile_result r;
    ckjit_status st = ckjit_compile_spec("transpose:dtype=f16", archs[a], &r);
    if (st != CKJIT_SUCCESS) {
      printf("SKIP %s: %s: %s\n", archs[a], ckjit_status_string(st), ckjit_last_error());
      continue;
    }
    tested++;
    ckjit_key key;
    assert_int_equal(ckjit__key_parse(r.key, &key), 0);
    uint8_t *file;
    size_t size, offset;
    ckjit_entry_meta meta;
    const char *why = NULL;
    assert_int_equal(ckjit__disk_read_entry(f->dir, &key, 0, &file, &size, &meta, &offset, &why), 1);
    const uint8_t *payload = file + offset;
    size_t n = size - offset;
    assert_int_equal(ckjit__entry_accept_payload(&meta, payload, n, &why), 0);
    /* The cost: the check alone, and a whole verified read from disk. */
    enum { CHECKS = 2000, READS = 300 };
    double t0 = now_us();
    for (int i = 0; i < CHECKS; i++) assert_int_equal(ckjit__entry_accept_payload(&meta, payload, n, &why), 0);
    double check_us = (now_us() - t0) / CHECKS;
    t0 = now_us();
    for (int i = 0; i < READS; i++) {
      uint8_t *again;
      size_t again_size;
      assert_int_equal(ckjit__disk_read_entry(f->dir, &key, 0, &again, &again_size, NULL, NULL, &why), 1);
      free(again);
    }
    double read_us = (now_us() - t0) / READS;
    printf("%s: %zu-byte code object: payload check %.1f us, whole verified read %.1f us\n",
           archs[a], n, check_us, read_us);
    assert_true(check_us < 500.0); /* a warm start must stay well under a millisecond */
    /* The same bytes for another vendor's arch, or another kernel: refused. */
    ckjit_entry_meta other = meta;
    tu_fmt(other.arch, sizeof other.arch, "%s", a == 0 ? "gfx90a" : "sm_90");
    assert_int_equal(ckjit__entry_accept_payload(&other, payload, n, &why), -1);
    printf("  as %s: %s\n", other.arch, why);
    if (a == 1) {
      tu_fmt(other.arch, sizeof other.arch, "gfx908");
      assert_int_equal(ckjit__entry_accept_payload(&other, payload, n, &why), -1);
      printf("  as %s: %s\n", other.arch, why);
    }
    other = meta;
    tu_fmt(other.kernel, sizeof other.kernel, "ckjit_not_this_one");
    assert_int_equal(ckjit__entry_accept_payload(&other, payload, n, &why), -1);
    printf("  as kernel %s: %s\n", other.kernel, why);
    free(file);
  }
  ckjit_shutdown();
  unsetenv("CKJIT_CACHE_DIR");
  if (!tested) {
    printf("SKIP real code objects: neither NVRTC nor hipRTC compiles here\n");
    skip();
  }
}

int main(void) {
  umask(022);
  unsetenv("CKJIT_CACHE_PATH");
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_payload_check),
      T(test_forged_payloads_refused_everywhere),
      T(test_group_writable_subdir_repaired),
      T(test_group_writable_entry_replaced),
      T(test_bad_name_fails_one_entry),
      T(test_other_owner_refused),
      T(test_real_code_objects),
  };
#undef T
  return cmocka_run_group_tests_name("entry_accept", tests, NULL, NULL);
}
