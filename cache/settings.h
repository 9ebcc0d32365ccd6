/* The disk cache's settings from the environment:
 *
 *   CKJIT_CACHE_MAX_SIZE     bound of the writable cache in bytes, 0: no bound.
 *                            Default 1 GiB.  The whole grammar (nothing else
 *                            is accepted: no blank, sign, exponent, "B" or
 *                            "GB"):
 *                              DIGITS                   bytes ("1073741824", "0")
 *                              DIGITS[.DIGITS]UNIT[iB]  UNIT K, M, G or T (either
 *                                                       case): powers of 1024
 *                                                       ("512M", "1.5G", "2GiB")
 *                            A fraction needs a unit and has at most 18
 *                            digits; bytes are rounded down, and a nonzero
 *                            value that rounds to 0 is refused (0 means no
 *                            bound).  At most 2^63-1 bytes.
 *   CKJIT_CACHE_MAX_ENTRIES  bound in entry files: digits only, at most
 *                            2^63-1; 0: no bound.  Default 50000.
 *   CKJIT_CACHE_PATH         read-only layers, "dir1:dir2" (cache/layers.h).
 *   CKJIT_REMOTE_CACHE*      the remote tier (cache/remote.h).
 *
 * An invalid value costs one warning, naming the value and what is wrong with
 * it, and leaves the default. */
#ifndef CKJIT_CACHE_SETTINGS_H
#define CKJIT_CACHE_SETTINGS_H

#include <stdint.h>

#include "disk_cache.h"

/* The size grammar in one line, for messages. */
#define CKJIT_SIZE_GRAMMAR \
  "digits (bytes), or a number with a K, M, G or T suffix, powers of 1024, optionally followed " \
  "by iB: 1073741824, 512M, 1.5G, 2GiB"
#define CKJIT_SIZE_MAX_FRACTION_DIGITS 18

/* Parses a size as described above, with integer arithmetic only.  Returns
 * 0, or -1 with *why (when `why` is not NULL) saying what is wrong. */
int ckjit__parse_size(const char *text, uint64_t *out, const char **why);
/* Parses a count (digits only, at most 2^63-1).  Returns 0, or -1 with *why. */
int ckjit__parse_count(const char *text, uint64_t *out, const char **why);

/* The bounds the environment asks for (the defaults when unset; invalid
 * values are warned about and ignored). */
void ckjit__disk_env_limits(uint64_t *max_bytes, uint64_t *max_entries);

/* Applies CKJIT_CACHE_MAX_SIZE, CKJIT_CACHE_MAX_ENTRIES, CKJIT_CACHE_PATH
 * and the CKJIT_REMOTE_CACHE settings to a handle from ckjit__disk_open (or a zeroed one, for layers only). */
void ckjit__disk_configure_env(ckjit_disk_cache *c);

#endif
