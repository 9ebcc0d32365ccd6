/* Repairing what a cache listing found bad (`ckjit-cache verify --fix`).
 *
 * Only the cache's own names are touched: entry names, "xx" subdirectories
 * and the writer's temporary files; a foreign name is left alone.  Whatever
 * sits at one of those names and fails the library's acceptance rule
 * (cache/entry_accept.h) is removed, or, for a subdirectory that is merely
 * writable by group or others, fixed in place by removing those write bits
 * (its good entries stay; run as root, a subdirectory of another user is
 * also given to the cache directory's owner).  A directory planted at an entry's name is
 * removed with its contents.  Every step works relative to directory
 * descriptors opened with O_NOFOLLOW, so a symbolic link is removed itself,
 * never followed; an item replaced since it was listed is left alone. */
#ifndef CKJIT_TOOLS_CACHE_REPAIR_H
#define CKJIT_TOOLS_CACHE_REPAIR_H

#include <stddef.h>

#include "cache_listing.h"

typedef enum cache_repair_result {
  CACHE_REPAIR_FAILED = -1, /* could not be repaired; `action` says why */
  CACHE_REPAIR_LEFT = 0,    /* not the cache's own name: left alone */
  CACHE_REPAIR_REMOVED = 1, /* removed (a directory with its contents) */
  CACHE_REPAIR_FIXED = 2,   /* repaired in place (a subdirectory's mode) */
} cache_repair_result;

/* Repairs the bad item `it` of the cache directory `dir` and describes what
 * was done in `action` ("removed", ...). */
cache_repair_result cache_repair_item(const char *dir, const cache_item *it, char *action,
                                      size_t len);

#endif
