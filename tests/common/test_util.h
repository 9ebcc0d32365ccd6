/* Small helpers shared by the ckjit test programs (header-only, static). */
#ifndef CKJIT_TESTS_TEST_UTIL_H
#define CKJIT_TESTS_TEST_UTIL_H

#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#if defined(__GNUC__)
#define TU_UNUSED __attribute__((unused))
#else
#define TU_UNUSED
#endif

/* snprintf that fails loudly instead of truncating (paths in tests). */
static TU_UNUSED __attribute__((format(printf, 3, 4))) void tu_fmt(char *out, size_t len,
                                                                    const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out, len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= len) {
    fprintf(stderr, "test bug: formatted text too long for its buffer (%d >= %zu)\n", n, len);
    abort();
  }
}

/* Unsets the settings that would point the library's disk cache or its
 * compiles elsewhere than a test asks (cache off, layers, limits, arch,
 * dumps, records), so that a test sees only what it sets itself. */
static TU_UNUSED void tu_unset_cache_settings(void) {
  static const char *const names[] = {"CKJIT_CACHE_DISABLE", "CKJIT_DUMP_DIR", "CKJIT_ARCH",
                                      "CKJIT_CACHE_PATH", "CKJIT_CACHE_MAX_SIZE",
                                      "CKJIT_CACHE_MAX_ENTRIES", "CKJIT_RECORD"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unsetenv(names[i]);
}

/* Creates a fresh directory "<TMPDIR or /tmp>/ckjit-<tag>-XXXXXX"; returns a
 * malloc'ed path or NULL. */
static TU_UNUSED char *tu_mkdtemp(const char *tag) {
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  size_t n = strlen(base) + strlen(tag) + 32;
  char *p = malloc(n);
  if (!p) return NULL;
  snprintf(p, n, "%s/ckjit-%s-XXXXXX", base, tag);
  if (!mkdtemp(p)) {
    free(p);
    return NULL;
  }
  return p;
}

static int tu_rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  if (flag == FTW_DP || flag == FTW_D) {
    rmdir(path);
    return 0;
  }
  unlink(path);
  return 0;
}

/* rm -rf `path` (never follows symlinks). */
static TU_UNUSED void tu_rm_rf(const char *path) {
  if (!path) return;
  /* Make every directory searchable/writable first, so nftw can descend. */
  chmod(path, 0700);
  nftw(path, tu_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* Writes `n` bytes to `path` (created/truncated, mode 0600); 0 on success. */
static TU_UNUSED int tu_write_file(const char *path, const void *data, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return -1;
  const char *p = data;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) {
      close(fd);
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return close(fd);
}

/* Reads a whole file into a malloc'ed buffer (NUL-terminated, size excludes
 * the NUL).  NULL on failure. */
static TU_UNUSED void *tu_read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap + 1);
  if (!buf) {
    fclose(f);
    return NULL;
  }
  for (;;) {
    if (n == cap) {
      char *nb = realloc(buf, cap * 2 + 1);
      if (!nb) {
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = nb;
      cap *= 2;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    if (r == 0) break;
    n += r;
  }
  fclose(f);
  buf[n] = 0;
  if (size) *size = n;
  return buf;
}

static TU_UNUSED int tu_path_exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

/* Runs fn(arg) on a brand-new thread and waits for it.  Used where a check
 * needs a thread whose thread-local ckjit error state is pristine. */
static TU_UNUSED int tu_run_in_thread(void *(*fn)(void *), void *arg) {
  pthread_t t;
  if (pthread_create(&t, NULL, fn, arg) != 0) return -1;
  return pthread_join(t, NULL);
}

/* splitmix64: a tiny deterministic PRNG. */
typedef struct tu_rng {
  uint64_t s;
} tu_rng;

static TU_UNUSED uint64_t tu_rng_next(tu_rng *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform double in [0, 1). */
static TU_UNUSED double tu_rng_unit(tu_rng *r) {
  return (double)(tu_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [lo, hi]. */
static TU_UNUSED int64_t tu_rng_range(tu_rng *r, int64_t lo, int64_t hi) {
  return lo + (int64_t)(tu_rng_next(r) % (uint64_t)(hi - lo + 1));
}

#endif
