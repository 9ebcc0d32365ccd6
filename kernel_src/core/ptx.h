// Small PTX wrappers (NVIDIA) that several pipelines use: proxy fences,
// named barriers and register reallocation between warpgroups.
#pragma once
#include "core/prelude.h"
#if defined(CKJIT_NVIDIA)

// Shared-memory writes of the generic proxy (plain stores, cp.async) made
// visible to the async proxy (wgmma reads, TMA stores) of this block.
CKJIT_INLINE void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Named barrier `id` (1..15; 0 is __syncthreads) among `threads` threads,
// a multiple of 32: a subset of the block synchronizes without the others.
// (Template parameters are lower case: kernels define upper-case macros.)
template <int id, int threads> CKJIT_INLINE void named_barrier_sync() {
  asm volatile("bar.sync %0, %1;" ::"n"(id), "n"(threads) : "memory");
}

// The same with the id known only at run time, and its arrive-only half:
// the calling threads count towards barrier `id` without waiting for it.
CKJIT_INLINE void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
CKJIT_INLINE void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// sm_90a: this warpgroup gives registers back (dec) or takes them (inc),
// down or up to `regs` per thread; every warp of the warpgroup executes it.
template <int regs> CKJIT_INLINE void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(regs));
}
template <int regs> CKJIT_INLINE void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(regs));
}

// One 32-bit word of shared memory at a shared-space address.  Volatile:
// it stays after the mbarrier wait that made the data visible.
CKJIT_INLINE unsigned ld_shared_u32(unsigned addr) {
  unsigned v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr));
  return v;
}

// Four 8 x 8 matrices of 16-bit elements into shared memory, from the
// registers of the warp (matrix k from r_k: lane l holds row l / 4, columns
// 2 (l % 4) and + 1 of each, the mma.sync / wgmma accumulator layout);
// lane l gives the address of row l % 8 of matrix l / 8.
CKJIT_INLINE void stmatrix_x4(unsigned addr, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

#endif
