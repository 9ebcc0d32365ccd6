/* ckjit__library_identity: the compiler's identity in the cache key.  With
 * a GNU build-id the name's stem, the size and the build-id (so copies of
 * one build installed under other names give one identity); without one
 * the whole name, the size and the mtime; never a crash on a torn file. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/library_path.h"

static char dir[PATH_MAX];

/* This program's build-id as the loader mapped it (not read from its file:
 * an independent source), as hex; "" when it has none. */
static int note_of_self(struct dl_phdr_info *info, size_t size, void *out) {
  (void)size;
  char *hex = out;
  if (!hex || (info->dlpi_name && info->dlpi_name[0])) return 0; /* the main program only */
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
    for (size_t off = 0; off + sizeof(ElfW(Nhdr)) <= ph->p_memsz;) {
      const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(p + off);
      const size_t name_at = off + sizeof *nh, desc_at = name_at + ((nh->n_namesz + 3) & ~3u);
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(p + name_at, "GNU", 4)) {
        for (size_t k = 0; k < nh->n_descsz && k < 32; k++)
          snprintf(hex + 2 * k, 3, "%02x", p[desc_at + k]);
        return 1;
      }
      off = desc_at + ((nh->n_descsz + 3) & ~3u);
    }
  }
  return 0;
}

static void self_path(char *out, size_t len) {
  const ssize_t n = readlink("/proc/self/exe", out, len - 1);
  assert_true(n > 0);
  out[n] = '\0';
}

/* Copies `n` bytes (all: 0) of file `from` to dir/name; returns its path. */
static const char *copy_to(const char *from, const char *name, long n) {
  static char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *in = fopen(from, "rb"), *out = fopen(path, "wb");
  assert_non_null(in);
  assert_non_null(out);
  char buf[65536];
  size_t got;
  long left = n ? n : LONG_MAX;
  while (left > 0 &&
         (got = fread(buf, 1, left < (long)sizeof buf ? (size_t)left : sizeof buf, in)) > 0) {
    assert_int_equal(fwrite(buf, 1, got, out), got);
    left -= (long)got;
  }
  fclose(in);
  fclose(out);
  return path;
}

static void test_build_id(void **state) {
  (void)state;
  char self[PATH_MAX], id[65] = "", got[512], want[600];
  self_path(self, sizeof self);
  dl_iterate_phdr(note_of_self, id);
  ckjit__library_identity(self, got, sizeof got);
  if (!id[0]) { /* a toolchain without build-ids: the mtime form */
    assert_non_null(strstr(got, " mtime="));
    return;
  }
  snprintf(want, sizeof want, " build-id=%s", id);
  assert_non_null(strstr(got, want));
}

/* Two installs of one build (libx.so.1 here, libx.so.1.2.3 there) are one
 * compiler: the same identity, naming the stem. */
static void test_names_of_one_build(void **state) {
  (void)state;
  char self[PATH_MAX], id[65] = "", a[512], b[512];
  self_path(self, sizeof self);
  dl_iterate_phdr(note_of_self, id);
  if (!id[0]) skip();
  ckjit__library_identity(copy_to(self, "libx.so.1", 0), a, sizeof a);
  ckjit__library_identity(copy_to(self, "libx.so.1.2.3", 0), b, sizeof b);
  assert_string_equal(a, b);
  assert_true(!strncmp(a, "libx size=", 10));
}

/* Not ELF, a torn ELF, no file: the name (and size and mtime), no crash. */
static void test_without_build_id(void **state) {
  (void)state;
  char self[PATH_MAX], got[512], path[PATH_MAX + 64];
  self_path(self, sizeof self);
  snprintf(path, sizeof path, "%s/libtext.so.1", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("not an ELF file\n", f);
  fclose(f);
  ckjit__library_identity(path, got, sizeof got);
  assert_true(!strncmp(got, "libtext.so.1 size=16 mtime=", 27));
  ckjit__library_identity(copy_to(self, "libtorn.so.1", 100), got, sizeof got);
  assert_true(!strncmp(got, "libtorn.so.1 size=100 mtime=", 28));
  snprintf(path, sizeof path, "%s/libnone.so.1", dir);
  ckjit__library_identity(path, got, sizeof got);
  assert_string_equal(got, "libnone.so.1");
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/ckjit-identity-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  const char *names[] = {"libx.so.1", "libx.so.1.2.3", "libtext.so.1", "libtorn.so.1"};
  char path[PATH_MAX + 64];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    unlink(path);
  }
  rmdir(dir);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_build_id),
      cmocka_unit_test(test_names_of_one_build),
      cmocka_unit_test(test_without_build_id),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
