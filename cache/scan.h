/* Listing the entries of a cache directory: the entry-named regular files
 * in their own "xx" subdirectory, never through a symbolic link below the
 * directory itself.  Used by eviction, export and the size estimate. */
#ifndef CKJIT_CACHE_SCAN_H
#define CKJIT_CACHE_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "key.h"

typedef struct ckjit_scan_entry {
  ckjit_key key; /* from the file name */
  uint64_t size; /* st_size */
  int64_t mtime_s; /* last use (cache/disk_cache.h) */
  long mtime_ns;
  uint64_t dev, ino; /* identity when scanned, checked again before a removal */
} ckjit_scan_entry;

typedef struct ckjit_scan {
  ckjit_scan_entry *entries; /* sorted by key */
  size_t count, cap;
  uint64_t bytes;            /* sum of their sizes */
  uint64_t temps_removed;    /* stale temporary files removed */
} ckjit_scan;

/* Scans `dir`.  With stale_temp_s > 0, removes the writer's temporary files
 * (cache/layout.h) last modified more than that many seconds ago: a store
 * lives for milliseconds, so those are left over from crashes.  A missing
 * directory is an empty scan.  Returns 0, or -1 with errno set (the
 * directory is a symlink or unreadable, out of memory). */
int ckjit__cache_scan(const char *dir, int64_t stale_temp_s, ckjit_scan *out);
void ckjit__cache_scan_free(ckjit_scan *s);

/* Entry files and their bytes in all of `dir` (counting only: no list, no
 * removal). */
void ckjit__cache_usage(const char *dir, uint64_t *bytes, uint64_t *entries);

/* Entry files and their bytes in the subdirectory numbered `index` (0-255)
 * of `dir` (0 and 0 when it is missing or unusable). */
void ckjit__cache_subdir_usage(const char *dir, unsigned index, uint64_t *bytes,
                               uint64_t *entries);

#endif
