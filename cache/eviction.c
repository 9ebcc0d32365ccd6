#include "eviction.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/log.h"
#include "layout.h"
#include "scan.h"

/* Oldest use first; ties by key, so the order is deterministic. */
static int lru_cmp(const void *a, const void *b) {
  const ckjit_scan_entry *x = a, *y = b;
  if (x->mtime_s != y->mtime_s) return x->mtime_s < y->mtime_s ? -1 : 1;
  if (x->mtime_ns != y->mtime_ns) return x->mtime_ns < y->mtime_ns ? -1 : 1;
  return memcmp(x->key.bytes, y->key.bytes, 16);
}

static uint64_t low_water(uint64_t bound, unsigned percent) {
  if (!bound) return UINT64_MAX;
  if (percent >= 100) return bound;
  return bound / 100 * percent + bound % 100 * percent / 100;
}

/* Removes one scanned entry if it is still the file scanned, unused since.
 * Returns 1 removed, 0 left (used, replaced or already gone: *gone), -1
 * failed. */
static int remove_entry(int root, int subdirs[CKJIT_CACHE_SUBDIRS], const ckjit_scan_entry *e,
                        int *gone) {
  char hex[33], name[48];
  ckjit__key_hex(&e->key, hex);
  snprintf(name, sizeof name, "%s.ckjit", hex);
  unsigned idx = e->key.bytes[0];
  *gone = 0;
  if (subdirs[idx] < 0) {
    char sub[3];
    snprintf(sub, sizeof sub, "%.2s", hex);
    subdirs[idx] = openat(root, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (subdirs[idx] < 0) {
      *gone = errno == ENOENT;
      return *gone ? 0 : -1;
    }
  }
  struct stat st;
  if (fstatat(subdirs[idx], name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    *gone = errno == ENOENT;
    return *gone ? 0 : -1;
  }
  if ((uint64_t)st.st_dev != e->dev || (uint64_t)st.st_ino != e->ino ||
      (int64_t)st.st_mtim.tv_sec != e->mtime_s || st.st_mtim.tv_nsec != e->mtime_ns)
    return 0; /* replaced or used since the scan */
  if (unlinkat(subdirs[idx], name, 0) != 0) {
    *gone = errno == ENOENT;
    return *gone ? 0 : -1;
  }
  return 1;
}

int ckjit__disk_evict(const char *dir, uint64_t max_bytes, uint64_t max_entries, unsigned percent,
                      ckjit_evict_report *r) {
  memset(r, 0, sizeof *r);
  ckjit_scan s;
  if (ckjit__cache_scan(dir, CKJIT_EVICT_STALE_TEMP_S, &s) != 0) return -1;
  r->entries_before = r->entries_after = s.count;
  r->bytes_before = r->bytes_after = s.bytes;
  r->temps_removed = s.temps_removed;
  int over = (max_bytes && s.bytes > max_bytes) || (max_entries && s.count > max_entries);
  uint64_t keep_bytes = low_water(max_bytes, percent);
  uint64_t keep_entries = low_water(max_entries, percent);
  if (over && s.count) {
    qsort(s.entries, s.count, sizeof *s.entries, lru_cmp);
    int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int subdirs[CKJIT_CACHE_SUBDIRS];
    for (int i = 0; i < CKJIT_CACHE_SUBDIRS; i++) subdirs[i] = -1;
    for (size_t i = 0; root >= 0 && i < s.count; i++) {
      if (r->bytes_after <= keep_bytes && r->entries_after <= keep_entries) break;
      const ckjit_scan_entry *e = &s.entries[i];
      int gone;
      int rc = remove_entry(root, subdirs, e, &gone);
      if (rc > 0 || gone) {
        r->entries_after--;
        r->bytes_after -= e->size;
        if (rc > 0) {
          r->removed++;
          r->removed_bytes += e->size;
        }
      } else if (rc == 0) {
        r->skipped++;
      } else {
        if (!r->failed) r->first_errno = errno;
        r->failed++;
      }
    }
    for (int i = 0; i < CKJIT_CACHE_SUBDIRS; i++)
      if (subdirs[i] >= 0) close(subdirs[i]);
    if (root >= 0) close(root);
  }
  ckjit__cache_scan_free(&s);
  return 0;
}

static int over_bounds(const ckjit_disk_cache *c, uint64_t bytes, uint64_t entries) {
  return (c->max_bytes && bytes > c->max_bytes) || (c->max_entries && entries > c->max_entries);
}

void ckjit__disk_note_store(ckjit_disk_cache *c, const char *hex, uint64_t file_bytes) {
  if (!c->max_bytes && !c->max_entries) return;
  ckjit_disk_usage *u = &c->usage;
  uint32_t n = __atomic_add_fetch(&u->stores, 1, __ATOMIC_RELAXED);
  uint64_t bytes, entries;
  if (!__atomic_load_n(&u->sampled, __ATOMIC_RELAXED) || n >= CKJIT_EVICT_SAMPLE_EVERY) {
    /* Keys are uniform hashes, so a few subdirectories scaled up estimate
     * the whole directory (within a few percent once it is large enough to
     * matter) for 1/64 of the cost of a scan. */
    unsigned first = (unsigned)strtoul((char[3]){hex[0], hex[1], 0}, NULL, 16);
    bytes = entries = 0;
    for (unsigned i = 0; i < CKJIT_EVICT_SAMPLE_SUBDIRS; i++) {
      uint64_t b, e;
      ckjit__cache_subdir_usage(c->dir, (first + i) % CKJIT_CACHE_SUBDIRS, &b, &e);
      bytes += b;
      entries += e;
    }
    if (entries < CKJIT_EVICT_SAMPLE_MIN_ENTRIES) {
      /* Under ~4000 entries: too few to scale, and cheap to count. */
      ckjit__cache_usage(c->dir, &bytes, &entries);
    } else {
      bytes *= CKJIT_CACHE_SUBDIRS / CKJIT_EVICT_SAMPLE_SUBDIRS;
      entries *= CKJIT_CACHE_SUBDIRS / CKJIT_EVICT_SAMPLE_SUBDIRS;
    }
    __atomic_store_n(&u->bytes, bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&u->entries, entries, __ATOMIC_RELAXED);
    __atomic_store_n(&u->stores, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&u->sampled, 1, __ATOMIC_RELAXED);
  } else {
    bytes = __atomic_add_fetch(&u->bytes, file_bytes, __ATOMIC_RELAXED);
    entries = __atomic_add_fetch(&u->entries, 1, __ATOMIC_RELAXED);
  }
  if (!over_bounds(c, bytes, entries)) return;
  if (__atomic_exchange_n(&u->evicting, 1, __ATOMIC_ACQUIRE)) return; /* another thread is at it */
  ckjit_evict_report r;
  if (ckjit__disk_evict(c->dir, c->max_bytes, c->max_entries, CKJIT_EVICT_LOW_WATER_PERCENT, &r) ==
      0) {
    /* Still over (entries in use, removals failing): only the next sample
     * may try again, so a stuck cache costs one scan per
     * CKJIT_EVICT_SAMPLE_EVERY stores, not one per store. */
    int stuck = over_bounds(c, r.bytes_after, r.entries_after);
    __atomic_store_n(&u->bytes, stuck ? 0 : r.bytes_after, __ATOMIC_RELAXED);
    __atomic_store_n(&u->entries, stuck ? 0 : r.entries_after, __ATOMIC_RELAXED);
    __atomic_store_n(&u->stores, 0, __ATOMIC_RELAXED);
    if (r.removed || r.temps_removed)
      CKJIT_INFO("cache %s: evicted %llu least recently used entries (%llu bytes) and %llu stale "
                 "temporary files; %llu entries, %llu bytes remain",
                 c->dir, (unsigned long long)r.removed, (unsigned long long)r.removed_bytes,
                 (unsigned long long)r.temps_removed, (unsigned long long)r.entries_after,
                 (unsigned long long)r.bytes_after);
    if (r.failed)
      CKJIT_DEBUG("cache %s: %llu entries could not be evicted (%s)", c->dir,
                  (unsigned long long)r.failed, strerror(r.first_errno));
  } else {
    CKJIT_DEBUG("cache %s: cannot scan for eviction (%s)", c->dir, strerror(errno));
  }
  __atomic_store_n(&u->evicting, 0, __ATOMIC_RELEASE);
}
