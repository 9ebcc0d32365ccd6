/* Crash- and race-safe disk cache.
 *
 * Writers never expose a partial entry: they write a private temporary file
 * in the entry's directory, fsync it and rename() it over the final name, so
 * a reader sees either no entry or a whole one.  Two writers of one key
 * write identical bytes, so whichever rename lands last is fine.  Readers
 * verify everything (cache/entry.c) and treat any doubt as a miss.  Nothing
 * here takes a lock: eviction (cache/eviction.c) only unlinks, and a reader
 * that has an entry open keeps reading it. */
#include "disk_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../runtime/error.h"
#include "../runtime/log.h"
#include "../runtime/stats.h"
#include "eviction.h"
#include "layout.h"

int (*ckjit__disk_fault_hook)(const char *stage, const char *path) = NULL;

static int fault(const char *stage, const char *path) {
  int (*hook)(const char *, const char *) = __atomic_load_n(&ckjit__disk_fault_hook, __ATOMIC_ACQUIRE);
  return hook ? hook(stage, path) : 0;
}

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
  c->max_bytes = CKJIT_DISK_DEFAULT_MAX_BYTES;
  c->max_entries = CKJIT_DISK_DEFAULT_MAX_ENTRIES;
  if (snprintf(c->dir, sizeof c->dir, "%s", dir) >= (int)sizeof c->dir) {
    CKJIT_WARN("cache directory path too long; using the in-memory cache only");
    c->dir[0] = '\0';
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

static void entry_path(const char *root, const char *hex, char *out, size_t len) {
  snprintf(out, len, "%s/%.2s/%s.ckjit", root, hex, hex);
}

void ckjit__disk_entry_path(const ckjit_disk_cache *c, const ckjit_key *key, char *out,
                            size_t len) {
  char hex[33];
  ckjit__key_hex(key, hex);
  entry_path(c->dir, hex, out, len);
}

/* Opens the entry's two-hex-digit directory without following a symlink
 * there (a planted link could point anywhere). */
static int open_subdir(const char *root, const char *hex, int create) {
  char sub[CKJIT_ENTRY_PATH_MAX];
  snprintf(sub, sizeof sub, "%s/%.2s", root, hex);
  if (create && mkdir(sub, 0700) && errno != EEXIST) return -1;
  return open(sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
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

int ckjit__disk_read_entry(const char *root, const ckjit_key *key, int touch, uint8_t **file,
                           size_t *file_size, ckjit_entry_meta *meta, size_t *payload_offset,
                           const char **why) {
  static _Thread_local char reason[96];
  char hex[33], name[48];
  ckjit__key_hex(key, hex);
  snprintf(name, sizeof name, "%s.ckjit", hex);
  *file = NULL;
  *why = NULL;
  int dir = open_subdir(root, hex, 0);
  if (dir < 0) {
    if (errno == ENOENT) return 0;
    snprintf(reason, sizeof reason, "subdirectory unusable: %s", strerror(errno));
    *why = errno == ELOOP || errno == ENOTDIR ? "subdirectory is a symlink or not a directory"
                                              : reason;
    return -1;
  }
  struct stat st;
  if (fstat(dir, &st) || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    close(dir);
    *why = "subdirectory writable by group or others";
    return -1;
  }
  /* O_NONBLOCK: a FIFO planted at the entry's name must not block the open. */
  int fd = openat(dir, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  int err = errno;
  close(dir);
  if (fd < 0) {
    if (err == ENOENT) return 0;
    snprintf(reason, sizeof reason, "unreadable: %s", strerror(err));
    *why = err == ELOOP ? "symbolic link (never followed)" : reason;
    return -1;
  }
  uint8_t *buf = NULL;
  const char *bad = NULL;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    bad = "not a regular file";
  } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    bad = "writable by group or others";
  } else if ((uint64_t)st.st_size > CKJIT_ENTRY_MAX_PAYLOAD + 4096u) {
    bad = "file too large";
  } else if (!(buf = malloc((size_t)st.st_size + 1))) {
    bad = "out of memory";
  } else if (read_all(fd, buf, (size_t)st.st_size)) {
    bad = "short read";
  }
  const uint8_t *payload;
  if (!bad && ckjit__entry_decode(buf, (size_t)st.st_size, key, meta, &payload, NULL, &bad) == 0) {
    /* The mtime is the entry's last use (eviction order).  Best effort; a
     * recent one is left alone so repeated hits cost no inode writes. */
    if (touch && st.st_mtime + CKJIT_DISK_TOUCH_GRANULARITY_S <= time(NULL))
      (void)futimens(fd, NULL);
    close(fd);
    *file = buf;
    *file_size = (size_t)st.st_size;
    if (payload_offset) *payload_offset = (size_t)(payload - buf);
    return 1;
  }
  close(fd);
  free(buf);
  *why = bad;
  return -1;
}

/* One directory's lookup: 1 hit, 0 miss (warned and counted when rejected).
 * `layer`: a read-only layer (never repaired). */
static int load_from(const char *root, int layer, const ckjit_key *key, int touch, void **payload,
                     size_t *size, ckjit_entry_meta *meta) {
  uint8_t *file;
  size_t file_size, offset;
  const char *why;
  int rc = ckjit__disk_read_entry(root, key, touch, &file, &file_size, meta, &offset, &why);
  if (rc == 1) {
    memmove(file, file + offset, file_size - offset);
    *payload = file;
    *size = file_size - offset;
    return 1;
  }
  if (rc < 0) {
    char hex[33], path[CKJIT_ENTRY_PATH_MAX];
    ckjit__key_hex(key, hex);
    entry_path(root, hex, path, sizeof path);
    if (layer)
      CKJIT_WARN("cache entry %s of a read-only layer rejected (%s); not used", path, why);
    else
      CKJIT_WARN("cache entry %s rejected (%s); recompiling and replacing it", path, why);
    ckjit__stat_add(CKJIT_STAT_DISK_REJECTS, 1);
  }
  return 0;
}

int ckjit__disk_load(ckjit_disk_cache *c, const ckjit_key *key, void **payload, size_t *size,
                     ckjit_entry_meta *meta) {
  int hit = 0;
  if (c->usable)
    hit = load_from(c->dir, 0, key, __atomic_load_n(&c->writable, __ATOMIC_RELAXED), payload,
                    size, meta);
  for (int i = 0; !hit && i < c->n_layers; i++)
    hit = load_from(c->layers[i], 1, key, 0, payload, size, meta);
  if (!c->usable && !c->n_layers) return 0;
  ckjit__stat_add(hit ? CKJIT_STAT_DISK_HITS : CKJIT_STAT_DISK_MISSES, 1);
  return hit;
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

/* One attempt at writing `buf` as the entry `hex`: 0, or the errno of the
 * step that failed (*what names it). */
static int store_once(const char *root, const char *hex, const uint8_t *buf, size_t n,
                      const char **what) {
  char name[48], tmp[128], tmp_path[CKJIT_ENTRY_PATH_MAX];
  snprintf(name, sizeof name, "%s.ckjit", hex);
  *what = "open the directory of";
  int dir = open_subdir(root, hex, 1);
  if (dir < 0) return errno;
  ckjit__cache_temp_name(hex, tmp, sizeof tmp);
  snprintf(tmp_path, sizeof tmp_path, "%s/%.2s/%s", root, hex, tmp);
  *what = "create a temporary file for";
  int err = fault("open-temp", tmp_path);
  int fd = -1;
  if (!err && (fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
    err = errno;
  if (err) {
    close(dir);
    return err;
  }
  *what = "write";
  size_t half = n / 2;
  if (write_all(fd, buf, half)) err = errno;
  if (!err) err = fault("write", tmp_path);
  if (!err && write_all(fd, buf + half, n - half)) err = errno;
  if (!err && !(err = fault("fsync", tmp_path)) && fsync(fd)) err = errno;
  if (close(fd) && !err) err = errno;
  if (!err && !(err = fault("rename", tmp_path)) && renameat(dir, tmp, dir, name)) err = errno;
  if (err) unlinkat(dir, tmp, 0);
  close(dir);
  return err;
}

ckjit_status ckjit__disk_store(ckjit_disk_cache *c, const ckjit_entry_meta *meta,
                               const void *payload, size_t size) {
  if (!c->usable || !__atomic_load_n(&c->writable, __ATOMIC_RELAXED))
    return ckjit__fail(CKJIT_ERROR_CACHE, "cache: disk cache not writable");
  char hex[33], path[CKJIT_ENTRY_PATH_MAX];
  ckjit__key_hex(&meta->key, hex);
  entry_path(c->dir, hex, path, sizeof path);

  uint8_t *buf;
  size_t buf_size;
  if (ckjit__entry_encode(meta, payload, size, &buf, &buf_size))
    return ckjit__fail(CKJIT_ERROR_OUT_OF_MEMORY, "cache: cannot encode entry %s", hex);
  const char *what = "write";
  int err = store_once(c->dir, hex, buf, buf_size, &what);
  /* ENOENT: the subdirectory (or our temporary file) was removed under us,
   * e.g. by a concurrent `ckjit-cache clear`; once more from the start. */
  if (err == ENOENT) err = store_once(c->dir, hex, buf, buf_size, &what);
  free(buf);
  if (err) return write_failed(c, what, path, err);
  ckjit__stat_add(CKJIT_STAT_DISK_WRITES, 1);
  ckjit__disk_note_store(c, hex, buf_size);
  return CKJIT_SUCCESS;
}
