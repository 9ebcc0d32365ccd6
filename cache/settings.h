/* The disk cache's settings from the environment:
 *
 *   CKJIT_CACHE_MAX_SIZE     bound of the writable cache in bytes: "1073741824",
 *                            "512M", "2G", "1.5G" (K/M/G/T = powers of 1024, an
 *                            optional "B" or "iB" after the suffix, any case);
 *                            0: no bound.  Default 1 GiB.
 *   CKJIT_CACHE_MAX_ENTRIES  bound in entry files (decimal); 0: no bound.
 *                            Default 50000.
 *   CKJIT_CACHE_PATH         read-only layers, "dir1:dir2" (cache/layers.h).
 *
 * An invalid value costs one warning and leaves the default. */
#ifndef CKJIT_CACHE_SETTINGS_H
#define CKJIT_CACHE_SETTINGS_H

#include <stdint.h>

#include "disk_cache.h"

/* Parses a size as described above.  Returns 0, or -1 (not a size, or more
 * than 2^63). */
int ckjit__parse_size(const char *text, uint64_t *out);
/* Parses a plain decimal count.  Returns 0 or -1. */
int ckjit__parse_count(const char *text, uint64_t *out);

/* The bounds the environment asks for (the defaults when unset; invalid
 * values are warned about and ignored). */
void ckjit__disk_env_limits(uint64_t *max_bytes, uint64_t *max_entries);

/* Applies CKJIT_CACHE_MAX_SIZE, CKJIT_CACHE_MAX_ENTRIES and CKJIT_CACHE_PATH
 * to a handle from ckjit__disk_open (or a zeroed one, for layers only). */
void ckjit__disk_configure_env(ckjit_disk_cache *c);

#endif
