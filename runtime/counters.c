/* ckjit_get_stats and ckjit_reset_stats: the process-wide counters
 * (base/stats.h) and each open GPU's memory hits, kept per GPU so that
 * threads driving different GPUs share no counter on the hot path (a GPU
 * closed by ckjit_shutdown leaves its count in the process-wide ones). */
#include "ckjit/ckjit.h"

#include <stdatomic.h>

#include "../base/stats.h"
#include "runtime.h"

void ckjit_get_stats(ckjit_stats *s) {
  if (!s) return;
  ckjit__stats_read(s);
  ckjit_runtime *rt = ckjit__runtime_if_ready();
  if (!rt) return;
  for (int i = 0; i < CKJIT_MAX_DEVICES; i++) {
    const ckjit_gpu *gpu = atomic_load_explicit(&rt->gpus[i], memory_order_acquire);
    if (gpu) s->memory_hits += atomic_load_explicit(&gpu->memory_hits, memory_order_relaxed);
  }
}

void ckjit_reset_stats(void) {
  ckjit__stats_reset();
  ckjit_runtime *rt = ckjit__runtime_if_ready();
  if (!rt) return;
  for (int i = 0; i < CKJIT_MAX_DEVICES; i++) {
    ckjit_gpu *gpu = atomic_load_explicit(&rt->gpus[i], memory_order_acquire);
    if (gpu) atomic_store_explicit(&gpu->memory_hits, 0, memory_order_relaxed);
  }
}
