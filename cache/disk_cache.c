/* Crash- and race-safe disk cache.
 *
 * Writers never expose a partial entry: they write a private temporary file
 * in the entry's directory, fsync it and rename() it over the final name
 * (ckjit__file_write_at, cache/atomic_file.c, the one file writer), so a
 * reader sees either no entry or a whole one.  Two writers of one key
 * write the same entry (the key hashes everything that goes into it), so
 * whichever rename lands last is fine; where a compiler is not
 * deterministic, ckjit__disk_store_first keeps the first one.  Readers
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

#include "../base/error.h"
#include "../base/log.h"
#include "../base/stats.h"
#include "atomic_file.h"
#include "entry_accept.h"
#include "eviction.h"
#include "layout.h"
#include "payload_check.h"

int (*ckjit__disk_fault_hook)(const char *stage, const char *path) = NULL;

static int fault(const char *stage, const char *path) {
  int (*hook)(const char *, const char *) = __atomic_load_n(&ckjit__disk_fault_hook, __ATOMIC_ACQUIRE);
  return hook ? hook(stage, path) : 0;
}

int ckjit__disk_default_dir(const char *override, char *out, size_t len) {
  /* The first setting present decides; a later one is never used in place
   * of one that is wrong, so the message names the setting to fix. */
  const char *value, *name, *suffix = "";
  if (override && *override) {
    value = override, name = "the cache directory given (--cache-dir / ckjit_options.cache_dir)";
  } else if ((value = getenv("CKJIT_CACHE_DIR")) && *value) {
    name = "CKJIT_CACHE_DIR";
  } else if ((value = getenv("XDG_CACHE_HOME")) && *value) {
    name = "XDG_CACHE_HOME", suffix = "/ckjit";
  } else if ((value = getenv("HOME")) && *value) {
    name = "HOME", suffix = "/.cache/ckjit";
  } else {
    if (len) out[0] = '\0';
    ckjit__fail(CKJIT_ERROR_CACHE, "no cache directory: CKJIT_CACHE_DIR, XDG_CACHE_HOME and HOME "
                "are all unset or empty (set one, or pass a cache directory)");
    return -1;
  }
  int n = snprintf(out, len, "%s%s", value, suffix);
  if (n >= 0 && (size_t)n < len) return 0;
  if (len) out[0] = '\0';
  ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
              "%s is %zu bytes long%s%s%s; a cache directory path may have at most %zu bytes", name,
              strlen(value), *suffix ? " (with \"" : "", suffix, *suffix ? "\" appended)" : "",
              len ? len - 1 : 0);
  return -1;
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
  if (ckjit__file_make_dir(c->dir, 0700, 1)) {
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

/* Opens the cache directory `root` itself (following links: a configured
 * path may go through them) and reports its owner, whom rule 1 and 2 of
 * cache/entry_accept.h trust.  -1 with errno set. */
static int open_root(const char *root, uid_t *owner) {
  int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct stat st;
  if (fd < 0) return -1;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  *owner = st.st_uid;
  return fd;
}

/* Opens the entry's two-hex-digit directory (creating it, mode 0700, when
 * `create`) without following a symlink there (a planted link could point
 * anywhere), and applies rule 1 of cache/entry_accept.h.
 *
 * With `repair` (the writable cache, which this process owns), a
 * subdirectory of ours that is writable by group or others loses those
 * write bits instead of being refused: refusing it would make every process
 * recompile its entries forever, since new ones land in the same directory.
 * That is safe because rule 2 still refuses any file in it that others
 * could have planted or changed (theirs, or writable by them).
 *
 * Returns the descriptor, or -1: errno ENOENT when it does not exist (*why
 * NULL), else *why says why (thread-local or static text). */
static int open_subdir(const char *root, int root_fd, uid_t owner, const char *hex, int create,
                       int repair, const char **why) {
  static _Thread_local char reason[160];
  char sub[3] = {hex[0], hex[1], '\0'};
  *why = NULL;
  if (create && mkdirat(root_fd, sub, 0700) != 0 && errno != EEXIST) {
    int e = errno;
    snprintf(reason, sizeof reason, "cannot create the subdirectory: %s", strerror(e));
    *why = reason;
    errno = e;
    return -1;
  }
  int fd = openat(root_fd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT) return -1;
    struct stat st;
    if (e == ELOOP || e == ENOTDIR) {
      /* Name what is there, with the same words as the rule. */
      if (fstatat(root_fd, sub, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
          ckjit__subdir_check(&st, owner, why) == CKJIT_REFUSAL_NONE)
        *why = "subdirectory is a symbolic link or not a directory";
    } else {
      snprintf(reason, sizeof reason, "subdirectory unusable: %s", strerror(e));
      *why = reason;
    }
    errno = e;
    return -1;
  }
  struct stat st;
  ckjit_refusal r = CKJIT_REFUSAL_CONTENT;
  if (fstat(fd, &st) == 0) r = ckjit__subdir_check(&st, owner, why);
  else *why = "cannot stat the subdirectory";
  if (r == CKJIT_REFUSAL_MODE && repair && st.st_uid == geteuid() &&
      fchmod(fd, (st.st_mode & 0777) & ~(mode_t)(S_IWGRP | S_IWOTH)) == 0) {
    CKJIT_WARN("cache subdirectory %s/%s was writable by group or others (mode %03o); removed "
               "that permission (chmod go-w) so that its entries can be used",
               root, sub, (unsigned)(st.st_mode & 0777));
    r = CKJIT_REFUSAL_NONE;
  }
  if (r != CKJIT_REFUSAL_NONE) {
    close(fd);
    errno = EACCES;
    return -1;
  }
  return fd;
}

/* ckjit__disk_read_entry, and the writable cache's repairs (`repair`). */
static int read_entry(const char *root, const ckjit_key *key, int touch, int repair,
                      uint8_t **file, size_t *file_size, ckjit_entry_meta *meta,
                      size_t *payload_offset, const char **why) {
  static _Thread_local char reason[160];
  char hex[33], name[48];
  ckjit__key_hex(key, hex);
  snprintf(name, sizeof name, "%s.ckjit", hex);
  *file = NULL;
  *why = NULL;
  uid_t owner;
  int root_fd = open_root(root, &owner);
  if (root_fd < 0) {
    if (errno == ENOENT) return 0;
    snprintf(reason, sizeof reason, "cache directory unusable: %s", strerror(errno));
    *why = reason;
    return -1;
  }
  int dir = open_subdir(root, root_fd, owner, hex, 0, repair, why);
  close(root_fd);
  if (dir < 0) return *why ? -1 : 0;
  ckjit_entry_read r;
  int rc = ckjit__entry_read_at(dir, name, key, owner, touch, &r);
  close(dir);
  if (rc < 0) *why = r.why;
  if (rc != 1) return rc;
  *file = r.file;
  *file_size = r.file_size;
  if (meta) *meta = r.meta;
  if (payload_offset) *payload_offset = r.payload_offset;
  return 1;
}

int ckjit__disk_read_entry(const char *root, const ckjit_key *key, int touch, uint8_t **file,
                           size_t *file_size, ckjit_entry_meta *meta, size_t *payload_offset,
                           const char **why) {
  return read_entry(root, key, touch, 0, file, file_size, meta, payload_offset, why);
}

/* One directory's lookup: 1 hit, 0 miss (warned and counted when rejected).
 * `layer`: a read-only layer (never repaired, never touched). */
static int load_from(const char *root, int layer, const ckjit_key *key, int writable,
                     void **payload, size_t *size, ckjit_entry_meta *meta) {
  uint8_t *file;
  size_t file_size, offset;
  const char *why;
  int rc = read_entry(root, key, !layer && writable, !layer && writable, &file, &file_size, meta,
                      &offset, &why);
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
      CKJIT_WARN("cache entry %s rejected (%s); recompiling it", path, why);
    ckjit__stat_add(CKJIT_STAT_DISK_REJECTS, 1);
  }
  return 0;
}

int ckjit__disk_load(ckjit_disk_cache *c, const ckjit_key *key, void **payload, size_t *size,
                     ckjit_entry_meta *meta) {
  int hit = 0;
  if (c->usable)
    hit = load_from(c->dir, 0, key, c->writable, payload,
                    size, meta);
  for (int i = 0; !hit && i < c->n_layers; i++)
    hit = load_from(c->layers[i], 1, key, 0, payload, size, meta);
  if (!c->usable && !c->n_layers) return 0;
  ckjit__stat_add(hit ? CKJIT_STAT_DISK_HITS : CKJIT_STAT_DISK_MISSES, 1);
  return hit;
}

/* Errors that every store into the directory will meet, as opposed to ones
 * that belong to one entry's name (EISDIR: a directory planted there; ELOOP,
 * ENOTDIR: a symlink or file in place of its subdirectory; EACCES: a
 * subdirectory refused or not ours; ...). */
static int directory_wide(int err) {
  return err == ENOSPC || err == EDQUOT || err == EROFS || err == EIO;
}

/* A failed store fails that one entry, never the process's later stores.
 *
 * A name-bound error must not stop unrelated entries from being stored: one
 * planted directory would otherwise turn the cache off for every process
 * that meets it.  Even a directory-wide error (a full or read-only disk) is
 * not latched: each later store tries again, so the cache heals as soon as
 * there is room (eviction, another process, the user), and a caller always
 * learns whether *its* entry was stored.  What that costs is one failed
 * create or write per compile, microseconds against a compile's hundreds of
 * milliseconds.  Each class is warned about once per handle (per process),
 * the rest at debug level. */
static ckjit_status store_failed(ckjit_disk_cache *c, const char *what, const char *path, int err,
                                 const char *why) {
  ckjit__stat_add(CKJIT_STAT_DISK_WRITE_ERRORS, 1);
  char cause[200];
  snprintf(cause, sizeof cause, "%s", why ? why : strerror(err));
  int wide = directory_wide(err);
  int *warned = wide ? &c->warned_dir_errors : &c->warned_entry_errors;
  if (!__atomic_exchange_n(warned, 1, __ATOMIC_RELAXED)) {
    if (wide)
      CKJIT_WARN("cannot %s %s (%s); kernels that cannot be stored are kept in memory, and "
                 "later stores keep trying",
                 what, path, cause);
    else
      CKJIT_WARN("cannot %s %s (%s); only this entry is affected (it is kept in memory); "
                 "'ckjit-cache verify --fix' repairs the cache",
                 what, path, cause);
  } else {
    CKJIT_DEBUG("cannot %s %s (%s)", what, path, cause);
  }
  return ckjit__fail(CKJIT_ERROR_CACHE, "cache: cannot %s %s: %s", what, path, cause);
}

/* One attempt at writing `buf` as the entry `hex`: 0, or the errno of the
 * step that failed (*what names it; *why, when set, says more than errno).
 * The write itself is the one atomic writer's (cache/atomic_file.h). */
static int store_once(const char *root, const char *hex, const uint8_t *buf, size_t n,
                      unsigned flags, const char **what, const char **why) {
  char name[48], tmp[128], sub_path[CKJIT_ENTRY_PATH_MAX];
  snprintf(name, sizeof name, "%s.ckjit", hex);
  *what = "open the directory of";
  *why = NULL;
  uid_t owner;
  int root_fd = open_root(root, &owner);
  if (root_fd < 0) return errno;
  int dir = open_subdir(root, root_fd, owner, hex, 1, 1, why);
  int err = errno;
  close(root_fd);
  if (dir < 0) return err ? err : EACCES;
  *why = NULL;
  ckjit__cache_temp_name(hex, tmp, sizeof tmp);
  snprintf(sub_path, sizeof sub_path, "%s/%.2s", root, hex);
  ckjit_file_error e;
  err = ckjit__file_write_at(dir, sub_path, name, tmp, buf, n, 0600, flags, fault, &e);
  if (err) *what = e.step;
  close(dir);
  return err;
}

ckjit_status ckjit__disk_store(ckjit_disk_cache *c, const ckjit_entry_meta *meta,
                               const void *payload, size_t size) {
  return ckjit__disk_store_first(c, meta, payload, size, 1, NULL, NULL);
}

ckjit_status ckjit__disk_store_first(ckjit_disk_cache *c, const ckjit_entry_meta *meta,
                                     const void *payload, size_t size, int durable, void **kept,
                                     size_t *kept_size) {
  if (kept) *kept = NULL;
  if (!c->usable || !c->writable)
    return ckjit__fail(CKJIT_ERROR_CACHE, "cache: disk cache not writable");
  char hex[33], path[CKJIT_ENTRY_PATH_MAX];
  ckjit__key_hex(&meta->key, hex);
  entry_path(c->dir, hex, path, sizeof path);
  /* What is stored must pass the rule every reader applies; an entry that
   * readers refuse would be recompiled and stored again by every process. */
  const char *why = NULL;
  if (ckjit__entry_accept_payload(meta, payload, size, &why) != 0) {
    ckjit__stat_add(CKJIT_STAT_DISK_WRITE_ERRORS, 1);
    CKJIT_WARN("not storing %s: its code object fails the cache's payload check (%s); kept in "
               "memory (a compiler output the check does not know: please report it)",
               path, why);
    return ckjit__fail(CKJIT_ERROR_CACHE, "cache: not storing %s: %s", path, why);
  }

  uint8_t *buf;
  size_t buf_size;
  if (ckjit__entry_encode(meta, payload, size, &buf, &buf_size))
    return ckjit__fail(CKJIT_ERROR_OUT_OF_MEMORY, "cache: cannot encode entry %s", hex);
  const char *what = "write";
  const unsigned flags = (kept ? CKJIT_FILE_NO_REPLACE : 0) | (durable ? CKJIT_FILE_SYNC : 0);
  int err = store_once(c->dir, hex, buf, buf_size, flags, &what, &why);
  /* ENOENT: the subdirectory (or our temporary file) was removed under us,
   * e.g. by a concurrent `ckjit-cache clear`; once more from the start. */
  if (err == ENOENT) err = store_once(c->dir, hex, buf, buf_size, flags, &what, &why);
  if (err == EEXIST) {
    /* Another writer was first: its entry, when it passes every reader's
     * checks, is the one everybody uses; a refused one is replaced. */
    ckjit_entry_meta theirs;
    uint8_t *file = NULL;
    size_t file_size = 0, at = 0;
    const char *refused = NULL;
    if (ckjit__disk_read_entry(c->dir, &meta->key, 0, &file, &file_size, &theirs, &at, &refused) == 1 &&
        !strcmp(theirs.arch, meta->arch) && !strcmp(theirs.kernel, meta->kernel) &&
        (*kept = malloc(file_size - at ? file_size - at : 1))) {
      memcpy(*kept, file + at, file_size - at);
      *kept_size = file_size - at;
      free(file);
      free(buf);
      return CKJIT_SUCCESS;
    }
    free(file);
    err = store_once(c->dir, hex, buf, buf_size, flags & ~CKJIT_FILE_NO_REPLACE, &what, &why);
  }
  free(buf);
  if (err) return store_failed(c, what, path, err, why);
  ckjit__stat_add(CKJIT_STAT_DISK_WRITES, 1);
  ckjit__disk_note_store(c, hex, buf_size);
  return CKJIT_SUCCESS;
}
