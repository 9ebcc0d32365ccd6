// Tensor memory accelerator (NVIDIA sm_90): 3-D boxes between global
// memory, described by a tensor map (the driver's CUtensorMap, 128 bytes,
// 64-byte aligned, passed as a __grid_constant__ kernel parameter), and
// shared memory.  Coordinates are innermost first.
#pragma once
#include "core/prelude.h"
#if defined(CKJIT_NVIDIA)

// One box into shared memory at `dst`; its bytes complete a transaction on
// the mbarrier at `bar` (core/mbarrier.h).
CKJIT_INLINE void tma_load(unsigned dst, const void *map, int c0, int c1, int c2, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst),
               "l"(reinterpret_cast<ckjit_u64>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
               : "memory");
}

// The same for a 4-D map.
CKJIT_INLINE void tma_load_4d(unsigned dst, const void *map, int c0, int c1, int c2, int c3,
                              unsigned bar) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(dst),
               "l"(reinterpret_cast<ckjit_u64>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
               : "memory");
}

// The same for a 5-D map.
CKJIT_INLINE void tma_load_5d(unsigned dst, const void *map, int c0, int c1, int c2, int c3, int c4,
                              unsigned bar) {
  asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];" ::"r"(dst),
               "l"(reinterpret_cast<ckjit_u64>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4),
               "r"(bar)
               : "memory");
}

// One box from shared memory at `src` to global memory, asynchronously: a
// store belongs to the bulk group committed after it.
CKJIT_INLINE void tma_store(const void *map, unsigned src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];" ::"l"(
                   reinterpret_cast<ckjit_u64>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(src)
               : "memory");
}
CKJIT_INLINE void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// All but the `pending` most recent groups of stores have read their
// shared memory (which may then be written again).
template <int pending> CKJIT_INLINE void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(pending) : "memory");
}

#endif
