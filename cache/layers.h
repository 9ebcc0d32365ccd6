/* Read-only cache layers (CKJIT_CACHE_PATH="dir1:dir2"): directories
 * searched, in order, after the writable user cache, e.g. a prewarmed cache
 * shipped with an application.  Nothing is ever written to a layer: no
 * entries, no mtime updates, no eviction.
 *
 * Rules (a layer breaking one is skipped with one warning):
 *  - the path is absolute; the directory exists and is readable (the path
 *    itself may go through symbolic links, as the writable cache's may);
 *  - it may belong to any user (root-owned /opt/app/cache is the usual
 *    case): listing it is trusting its owner, like a directory on PATH;
 *  - it, and each "xx" subdirectory and entry file used from it, must not
 *    be writable by group or others (anyone could plant code there); an
 *    entry or subdirectory that is is refused at lookup (a miss + warning);
 *  - entries are verified exactly like the writable cache's, never through
 *    a symbolic link (cache/disk_cache.c);
 *  - the writable cache directory itself, a layer listed twice, or layers
 *    past CKJIT_DISK_MAX_LAYERS are skipped. */
#ifndef CKJIT_CACHE_LAYERS_H
#define CKJIT_CACHE_LAYERS_H

#include <stddef.h>

#include "disk_cache.h"

/* Checks `dir` against the rules above.  Returns 0, or -1 with the reason in
 * `why`. */
int ckjit__layer_check(const char *dir, char *why, size_t len);

/* Adds `dir` as the next layer when it passes the checks and is neither the
 * writable directory nor already a layer.  Returns 0 when added, -1 when
 * skipped (warned about, except for a duplicate). */
int ckjit__disk_add_layer(ckjit_disk_cache *c, const char *dir);

/* Adds every directory of a ':'-separated list (empty items are ignored). */
void ckjit__disk_add_layers(ckjit_disk_cache *c, const char *list);

#endif
