#include "scan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "layout.h"

static int add(ckjit_scan *s, const char *hex, const struct stat *st) {
  if (s->count == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 256;
    ckjit_scan_entry *e = realloc(s->entries, cap * sizeof *e);
    if (!e) return -1;
    s->entries = e;
    s->cap = cap;
  }
  ckjit_scan_entry *e = &s->entries[s->count++];
  memset(e, 0, sizeof *e);
  (void)ckjit__key_parse(hex, &e->key);
  e->size = st->st_size > 0 ? (uint64_t)st->st_size : 0;
  e->mtime_s = (int64_t)st->st_mtim.tv_sec;
  e->mtime_ns = st->st_mtim.tv_nsec;
  e->dev = (uint64_t)st->st_dev;
  e->ino = (uint64_t)st->st_ino;
  s->bytes += e->size;
  return 0;
}

/* Walks one open subdirectory; calls add() for its entries when `s` is not
 * NULL, else only counts them.  Returns 0 or -1 (out of memory). */
/* A directory stream over its own copy of the open directory `fd` (the
 * caller keeps fd for openat / fstatat); NULL when it cannot be read. */
static DIR *dir_stream(int fd) {
  int dfd = dup(fd);
  DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
  if (!d && dfd >= 0) close(dfd);
  return d;
}

static int walk_subdir(int sub, const char *subname, ckjit_scan *s, int64_t stale_before,
                       uint64_t *bytes, uint64_t *entries, uint64_t *temps_removed) {
  DIR *d = dir_stream(sub);
  if (!d) return 0;
  int rc = 0;
  struct dirent *de;
  while (rc == 0 && (de = readdir(d)) != NULL) {
    const char *name = de->d_name;
    char hex[33];
    struct stat st;
    if (ckjit__cache_name_is_entry(name, hex)) {
      if (strncmp(hex, subname, 2) != 0) continue; /* misplaced: never loaded, left to verify */
      if (fstatat(sub, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
      if (s) rc = add(s, hex, &st);
      if (bytes) *bytes += st.st_size > 0 ? (uint64_t)st.st_size : 0;
      if (entries) (*entries)++;
    } else if (stale_before && ckjit__cache_name_is_temp(name)) {
      if (fstatat(sub, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(st.st_mode)) continue;
      if ((int64_t)st.st_mtime < stale_before && unlinkat(sub, name, 0) == 0 && temps_removed)
        (*temps_removed)++;
    }
  }
  closedir(d);
  return rc;
}

/* Walks every subdirectory of the open cache root: those its listing
 * names (two lowercase hex digits), so a young cache with a few
 * subdirectories costs a few opens, not 256 (a remote hit's first store
 * counts the whole directory).  Returns 0 or -1 (out of memory). */
static int walk_root(int root, ckjit_scan *s, int64_t stale_before, uint64_t *bytes,
                     uint64_t *entries, uint64_t *temps_removed) {
  DIR *d = dir_stream(root);
  if (!d) return 0;
  int rc = 0;
  struct dirent *de;
  while (rc == 0 && (de = readdir(d)) != NULL) {
    const char *name = de->d_name;
    if (!ckjit__cache_name_is_subdir(name)) continue;
    int sub = openat(root, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) continue;
    rc = walk_subdir(sub, name, s, stale_before, bytes, entries, temps_removed);
    close(sub);
  }
  closedir(d);
  return rc;
}

static int key_cmp(const void *a, const void *b) {
  return memcmp(((const ckjit_scan_entry *)a)->key.bytes, ((const ckjit_scan_entry *)b)->key.bytes,
                16);
}

int ckjit__cache_scan(const char *dir, int64_t stale_temp_s, ckjit_scan *out) {
  memset(out, 0, sizeof *out);
  /* The root is followed like ckjit__disk_open follows it; nothing below. */
  int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return errno == ENOENT ? 0 : -1;
  int64_t stale_before = stale_temp_s > 0 ? (int64_t)time(NULL) - stale_temp_s : 0;
  int rc = walk_root(root, out, stale_before, NULL, NULL, &out->temps_removed);
  close(root);
  if (rc) {
    ckjit__cache_scan_free(out);
    errno = ENOMEM;
    return -1;
  }
  if (out->count > 1) qsort(out->entries, out->count, sizeof *out->entries, key_cmp);
  return 0;
}

void ckjit__cache_scan_free(ckjit_scan *s) {
  free(s->entries);
  memset(s, 0, sizeof *s);
}

void ckjit__cache_subdir_usage(const char *dir, unsigned index, uint64_t *bytes,
                               uint64_t *entries) {
  *bytes = *entries = 0;
  char path[1200], name[3];
  snprintf(name, sizeof name, "%02x", index & 0xFFu);
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return;
  int sub = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sub < 0) return;
  (void)walk_subdir(sub, name, NULL, 0, bytes, entries, NULL);
  close(sub);
}

void ckjit__cache_usage(const char *dir, uint64_t *bytes, uint64_t *entries) {
  *bytes = *entries = 0;
  int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return;
  (void)walk_root(root, NULL, 0, bytes, entries, NULL);
  close(root);
}
