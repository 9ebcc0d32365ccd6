/* Counters are relaxed atomics: cheap on the hot path, exact in total. */
#include "stats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "ckjit/ckjit.h"

static _Atomic uint64_t counters[CKJIT_STAT_COUNT_];
static double compile_ms, load_ms, remote_ms;
static pthread_mutex_t ms_lock = PTHREAD_MUTEX_INITIALIZER;

void ckjit__stat_add(ckjit_counter c, uint64_t n) {
  atomic_fetch_add_explicit(&counters[c], n, memory_order_relaxed);
}

void ckjit__stat_add_compile_ms(double ms) {
  pthread_mutex_lock(&ms_lock);
  compile_ms += ms;
  pthread_mutex_unlock(&ms_lock);
}

void ckjit__stat_add_load_ms(double ms) {
  pthread_mutex_lock(&ms_lock);
  load_ms += ms;
  pthread_mutex_unlock(&ms_lock);
}

void ckjit__stat_add_remote_ms(double ms) {
  pthread_mutex_lock(&ms_lock);
  remote_ms += ms;
  pthread_mutex_unlock(&ms_lock);
}

void ckjit__stats_read(ckjit_stats *s) {
  memset(s, 0, sizeof *s);
  s->memory_hits = atomic_load(&counters[CKJIT_STAT_RETIRED_MEMORY_HITS]);
  s->disk_hits = atomic_load(&counters[CKJIT_STAT_DISK_HITS]);
  s->disk_misses = atomic_load(&counters[CKJIT_STAT_DISK_MISSES]);
  s->disk_rejects = atomic_load(&counters[CKJIT_STAT_DISK_REJECTS]);
  s->disk_writes = atomic_load(&counters[CKJIT_STAT_DISK_WRITES]);
  s->disk_write_errors = atomic_load(&counters[CKJIT_STAT_DISK_WRITE_ERRORS]);
  s->compiles = atomic_load(&counters[CKJIT_STAT_COMPILES]);
  s->compile_failures = atomic_load(&counters[CKJIT_STAT_COMPILE_FAILURES]);
  s->loads = atomic_load(&counters[CKJIT_STAT_LOADS]);
  s->load_failures = atomic_load(&counters[CKJIT_STAT_LOAD_FAILURES]);
  s->remote_hits = atomic_load(&counters[CKJIT_STAT_REMOTE_HITS]);
  s->remote_misses = atomic_load(&counters[CKJIT_STAT_REMOTE_MISSES]);
  s->remote_rejects = atomic_load(&counters[CKJIT_STAT_REMOTE_REJECTS]);
  s->remote_writes = atomic_load(&counters[CKJIT_STAT_REMOTE_WRITES]);
  s->remote_errors = atomic_load(&counters[CKJIT_STAT_REMOTE_ERRORS]);
  s->remote_lease_waits = atomic_load(&counters[CKJIT_STAT_REMOTE_LEASE_WAITS]);
  pthread_mutex_lock(&ms_lock);
  s->compile_ms = compile_ms;
  s->load_ms = load_ms;
  s->remote_ms = remote_ms;
  pthread_mutex_unlock(&ms_lock);
}

void ckjit__stats_reset(void) {
  for (int i = 0; i < CKJIT_STAT_COUNT_; i++) atomic_store(&counters[i], 0);
  pthread_mutex_lock(&ms_lock);
  compile_ms = load_ms = remote_ms = 0;
  pthread_mutex_unlock(&ms_lock);
}
