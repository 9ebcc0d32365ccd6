/* Keeping the writable cache directory within CKJIT_CACHE_MAX_SIZE bytes and
 * CKJIT_CACHE_MAX_ENTRIES entry files, least recently used first.
 *
 * Recency is the entry file's mtime: a store creates the file, a verified
 * hit sets it to now (cache/disk_cache.c).  No lock is needed: eviction only
 * unlinks, a process that has an entry open keeps reading it (POSIX), and a
 * removed entry is a miss.  Two processes evicting at once may both remove
 * entries, leaving the cache somewhat below its low-water mark. */
#ifndef CKJIT_CACHE_EVICTION_H
#define CKJIT_CACHE_EVICTION_H

#include <stdint.h>

#include "disk_cache.h"

/* Automatic eviction goes down to this percentage of the bound, so it does
 * not run again on the next store. */
#define CKJIT_EVICT_LOW_WATER_PERCENT 90
/* Temporary files older than this (seconds) are removed by eviction scans. */
#define CKJIT_EVICT_STALE_TEMP_S 3600
/* The estimate is sampled again after this many stores of one process. */
#define CKJIT_EVICT_SAMPLE_EVERY 32
/* Subdirectories read for one sample (of 256, filled uniformly by key). */
#define CKJIT_EVICT_SAMPLE_SUBDIRS 4
/* A sample with fewer entries than this is too coarse to scale (a small
 * cache): everything is counted instead, which is then cheap. */
#define CKJIT_EVICT_SAMPLE_MIN_ENTRIES 64

typedef struct ckjit_evict_report {
  uint64_t entries_before, bytes_before; /* what the scan found */
  uint64_t entries_after, bytes_after;   /* what is left */
  uint64_t removed, removed_bytes;       /* entries this call removed */
  uint64_t skipped;       /* used or replaced since the scan: left in place */
  uint64_t failed;        /* could not be removed */
  uint64_t temps_removed; /* stale temporary files removed */
  int first_errno;        /* of the first failed removal */
} ckjit_evict_report;

/* Scans `dir` (removing stale temporary files).  When it holds more than
 * max_bytes or max_entries (0: no bound), removes entries in order of last
 * use, oldest first, until at most `percent`% of each bound is left.  An
 * entry used or replaced since the scan is skipped.  Returns 0, or -1 with
 * errno when `dir` cannot be scanned. */
int ckjit__disk_evict(const char *dir, uint64_t max_bytes, uint64_t max_entries, unsigned percent,
                      ckjit_evict_report *report);

/* Called by ckjit__disk_store after it stored `file_bytes` as entry `hex`.
 * Keeps this process's estimate of the directory's totals: on the first
 * store and every CKJIT_EVICT_SAMPLE_EVERY stores it reads the entry's
 * subdirectory and the next ones (CKJIT_EVICT_SAMPLE_SUBDIRS) and scales
 * by 256/CKJIT_EVICT_SAMPLE_SUBDIRS (or, for a small cache whose sample is
 * under CKJIT_EVICT_SAMPLE_MIN_ENTRIES, counts every subdirectory), else it
 * adds the store.  Only when the
 * estimate exceeds a bound does it scan everything and evict down to
 * CKJIT_EVICT_LOW_WATER_PERCENT (one eviction at a time per process). */
void ckjit__disk_note_store(ckjit_disk_cache *c, const char *hex, uint64_t file_bytes);

#endif
