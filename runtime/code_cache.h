/* Code objects this process compiled, kept in memory by cache key.
 *
 * The disk cache can fail to keep an entry: a full or read-only disk, a bad
 * name at the entry's path, an entry removed by another process.  Without a
 * copy in memory, every later request for that kernel would compile it
 * again.  With it, a kernel is compiled at most once per process whatever
 * the disk does: a later request that misses the disk is served (and the
 * disk entry written again) from here.
 *
 * Bounded like the disk cache (its max_bytes / max_entries, or their
 * defaults when a bound is 0 or the disk cache is off); the least recently
 * used code objects go first.  Single flight: while one thread builds a
 * key, others asking for it wait and then share the result. */
#ifndef CKJIT_RUNTIME_CODE_CACHE_H
#define CKJIT_RUNTIME_CODE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "../cache/key.h"
#include "../base/buffer.h"

typedef enum ckjit_code_claim {
  CKJIT_CODE_HIT,   /* *code holds a copy of the code object (caller frees) */
  CKJIT_CODE_BUILD, /* the caller builds it and must then call put or abandon */
  CKJIT_CODE_NO_MEMORY,
} ckjit_code_claim;

/* Looks `key` up, waiting while another thread builds it.  On a miss the
 * caller holds the key until ckjit__code_cache_put or _abandon. */
ckjit_code_claim ckjit__code_cache_claim(const ckjit_key *key, ckjit_buffer *code);

/* Publishes the code object of a claimed key (copied), evicting least
 * recently used ones past the bounds (0: the disk cache's defaults), and
 * wakes the waiters.  Out of memory, the key is abandoned instead. */
void ckjit__code_cache_put(const ckjit_key *key, const void *code, size_t size, uint64_t max_bytes,
                           uint64_t max_entries);

/* Gives up a claimed key (its build failed); a waiter claims it next. */
void ckjit__code_cache_abandon(const ckjit_key *key);

/* Frees every code object (ckjit_shutdown; no build may be running). */
void ckjit__code_cache_clear(void);

#endif
