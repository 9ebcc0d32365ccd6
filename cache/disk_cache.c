/* Crash- and race-safe disk cache.
 *
 * Writers never expose a partial entry: they write a private temporary file
 * in the entry's directory, fsync it and rename() it over the final name, so
 * a reader sees either no entry or a whole one.  Two writers of one key
 * write identical bytes, so whichever rename lands last is fine.  Readers
 * verify everything (cache/entry.c) and treat any doubt as a miss. */
#include "disk_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../runtime/error.h"
#include "../runtime/log.h"
#include "../runtime/stats.h"

int ckjit__disk_default_dir(const char *override, char *out, size_t len) {
  const char *env;
  int n;
  if (override && *override) n = snprintf(out, len, "%s", override);
  else if ((env = getenv("CKJIT_CACHE_DIR")) && *env) n = snprintf(out, len, "%s", env);
  else if ((env = getenv("XDG_CACHE_HOME")) && *env) n = snprintf(out, len, "%s/ckjit", env);
  else if ((env = getenv("HOME")) && *env) n = snprintf(out, len, "%s/.cache/ckjit", env);
  else return -1;
  return (n < 0 || (size_t)n >= len) ? -1 : 0;
}

/* mkdir -p with mode 0700 for every directory it creates. */
static int make_dirs(const char *dir) {
  char path[CKJIT_ENTRY_PATH_MAX];
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) return -1;
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0700) && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(path, 0700) && errno != EEXIST) return -1;
  return 0;
}

void ckjit__disk_open(ckjit_disk_cache *c, const char *dir) {
  memset(c, 0, sizeof *c);
  if (snprintf(c->dir, sizeof c->dir, "%s", dir) >= (int)sizeof c->dir) {
    CKJIT_WARN("cache directory path too long; using the in-memory cache only");
    return;
  }
  if (make_dirs(c->dir)) {
    CKJIT_WARN("cannot create cache directory %s (%s); using the in-memory cache only", c->dir,
               strerror(errno));
    return;
  }
  struct stat st;
  if (stat(c->dir, &st) || !S_ISDIR(st.st_mode)) {
    CKJIT_WARN("cache path %s is not a directory; using the in-memory cache only", c->dir);
    return;
  }
  if (st.st_uid != geteuid()) {
    CKJIT_WARN("cache directory %s belongs to another user (uid %u); refusing it and using the "
               "in-memory cache only",
               c->dir, (unsigned)st.st_uid);
    return;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    CKJIT_WARN("cache directory %s is writable by group or others (mode %03o); refusing it and "
               "using the in-memory cache only",
               c->dir, (unsigned)(st.st_mode & 0777));
    return;
  }
  c->usable = 1;
  c->writable = access(c->dir, W_OK) == 0;
  if (!c->writable)
    CKJIT_WARN("cache directory %s is read-only; compiled kernels will be kept in memory only",
               c->dir);
}

void ckjit__disk_entry_path(const ckjit_disk_cache *c, const ckjit_key *key, char *out,
                            size_t len) {
  char hex[33];
  ckjit__key_hex(key, hex);
  snprintf(out, len, "%s/%.2s/%s.ckjit", c->dir, hex, hex);
}

/* Opens the entry's two-hex-digit directory without following a symlink
 * there (a planted link could point anywhere). */
static int open_subdir(const ckjit_disk_cache *c, const char *hex, int create) {
  char sub[CKJIT_ENTRY_PATH_MAX];
  snprintf(sub, sizeof sub, "%s/%.2s", c->dir, hex);
  if (create && mkdir(sub, 0700) && errno != EEXIST) return -1;
  return open(sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Opens an entry file, never through a symlink (O_NOFOLLOW on both parts). */
static int open_entry(const ckjit_disk_cache *c, const ckjit_key *key, int flags, mode_t mode) {
  char hex[33], name[48];
  ckjit__key_hex(key, hex);
  snprintf(name, sizeof name, "%s.ckjit", hex);
  int dir = open_subdir(c, hex, 0);
  if (dir < 0) return -1;
  int fd = openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
  int err = errno;
  close(dir);
  errno = err;
  return fd;
}

static int read_all(int fd, uint8_t *buf, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = read(fd, buf + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    done += (size_t)n;
  }
  return 0;
}

int ckjit__disk_load(ckjit_disk_cache *c, const ckjit_key *key, void **payload, size_t *size,
                     ckjit_entry_meta *meta) {
  if (!c->usable) return 0;
  char path[CKJIT_ENTRY_PATH_MAX];
  ckjit__disk_entry_path(c, key, path, sizeof path);
  /* O_NONBLOCK: a FIFO planted at the entry's name must not block the open. */
  int fd = open_entry(c, key, O_RDONLY | O_NONBLOCK, 0);
  if (fd < 0) {
    if (errno != ENOENT) {
      CKJIT_WARN("cache entry %s unreadable (%s); recompiling", path, strerror(errno));
      ckjit__stat_add(CKJIT_STAT_DISK_REJECTS, 1);
    }
    ckjit__stat_add(CKJIT_STAT_DISK_MISSES, 1);
    return 0;
  }
  struct stat st;
  uint8_t *buf = NULL;
  const char *why = NULL;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    why = "not a regular file";
  } else if ((uint64_t)st.st_size > CKJIT_ENTRY_MAX_PAYLOAD + 4096u) {
    why = "file too large";
  } else if (!(buf = malloc((size_t)st.st_size + 1))) {
    why = "out of memory";
  } else if (read_all(fd, buf, (size_t)st.st_size)) {
    why = "short read";
  }
  close(fd);
  const uint8_t *data;
  size_t data_size;
  if (!why && ckjit__entry_decode(buf, (size_t)st.st_size, key, meta, &data, &data_size, &why) == 0) {
    memmove(buf, data, data_size);
    *payload = buf;
    *size = data_size;
    ckjit__stat_add(CKJIT_STAT_DISK_HITS, 1);
    return 1;
  }
  free(buf);
  CKJIT_WARN("cache entry %s rejected (%s); recompiling and replacing it", path, why);
  ckjit__stat_add(CKJIT_STAT_DISK_REJECTS, 1);
  ckjit__stat_add(CKJIT_STAT_DISK_MISSES, 1);
  return 0;
}

static int write_all(int fd, const uint8_t *buf, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, buf + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return -1;
    }
    done += (size_t)n;
  }
  return 0;
}

/* Turns writes off after the first failure so a full or read-only disk
 * costs one warning, not one per kernel. */
static ckjit_status write_failed(ckjit_disk_cache *c, const char *what, const char *path, int err) {
  ckjit__stat_add(CKJIT_STAT_DISK_WRITE_ERRORS, 1);
  int was = __atomic_exchange_n(&c->writable, 0, __ATOMIC_RELAXED);
  if (was)
    CKJIT_WARN("cannot %s %s (%s); disk cache writes are off for this process, kernels are kept "
               "in memory",
               what, path, strerror(err));
  return ckjit__fail(CKJIT_ERROR_CACHE, "cache: cannot %s %s: %s", what, path, strerror(err));
}

ckjit_status ckjit__disk_store(ckjit_disk_cache *c, const ckjit_entry_meta *meta,
                               const void *payload, size_t size) {
  if (!c->usable || !__atomic_load_n(&c->writable, __ATOMIC_RELAXED))
    return ckjit__fail(CKJIT_ERROR_CACHE, "cache: disk cache not writable");
  char hex[33], path[CKJIT_ENTRY_PATH_MAX], name[48], tmp[128];
  ckjit__key_hex(&meta->key, hex);
  ckjit__disk_entry_path(c, &meta->key, path, sizeof path);
  snprintf(name, sizeof name, "%s.ckjit", hex);
  int dir = open_subdir(c, hex, 1);
  if (dir < 0) return write_failed(c, "open the directory of", path, errno);

  uint8_t *buf;
  size_t buf_size;
  if (ckjit__entry_encode(meta, payload, size, &buf, &buf_size)) {
    close(dir);
    return ckjit__fail(CKJIT_ERROR_OUT_OF_MEMORY, "cache: cannot encode entry %s", hex);
  }
  /* Unique per process, thread and call: concurrent writers never share one. */
  static _Atomic unsigned counter;
  snprintf(tmp, sizeof tmp, ".tmp-%s-%ld-%lx-%u", hex, (long)getpid(),
           (unsigned long)pthread_self(), atomic_fetch_add(&counter, 1));
  int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = errno;
    free(buf);
    close(dir);
    return write_failed(c, "create a temporary file for", path, err);
  }
  int err = 0;
  if (write_all(fd, buf, buf_size) || fsync(fd)) err = errno;
  if (close(fd) && !err) err = errno;
  free(buf);
  if (!err && renameat(dir, tmp, dir, name)) err = errno;
  if (err) unlinkat(dir, tmp, 0);
  close(dir);
  if (err) return write_failed(c, "write", path, err);
  ckjit__stat_add(CKJIT_STAT_DISK_WRITES, 1);
  return CKJIT_SUCCESS;
}
