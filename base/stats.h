/* Process-wide counters behind ckjit_get_stats(). */
#ifndef CKJIT_RUNTIME_BASE_STATS_H
#define CKJIT_RUNTIME_BASE_STATS_H

#include <stdint.h>

typedef enum ckjit_counter {
  CKJIT_STAT_RETIRED_MEMORY_HITS, /* of GPUs closed by ckjit_shutdown (live ones count their own) */
  CKJIT_STAT_DISK_HITS, CKJIT_STAT_DISK_MISSES,
  CKJIT_STAT_DISK_REJECTS, CKJIT_STAT_DISK_WRITES, CKJIT_STAT_DISK_WRITE_ERRORS,
  CKJIT_STAT_COMPILES, CKJIT_STAT_COMPILE_FAILURES, CKJIT_STAT_LOADS,
  CKJIT_STAT_LOAD_FAILURES,
  /* the remote tier (cache/remote.h) */
  CKJIT_STAT_REMOTE_HITS, CKJIT_STAT_REMOTE_MISSES, CKJIT_STAT_REMOTE_REJECTS,
  CKJIT_STAT_REMOTE_WRITES, CKJIT_STAT_REMOTE_ERRORS, CKJIT_STAT_REMOTE_LEASE_WAITS,
  CKJIT_STAT_COUNT_
} ckjit_counter;

void ckjit__stat_add(ckjit_counter c, uint64_t n);
void ckjit__stat_add_compile_ms(double ms);
void ckjit__stat_add_load_ms(double ms);
void ckjit__stat_add_remote_ms(double ms);

/* The counters above (memory hits are counted per GPU instead: the
 * runtime adds them, runtime/counters.c). */
struct ckjit_stats;
void ckjit__stats_read(struct ckjit_stats *s);
void ckjit__stats_reset(void);

#endif
