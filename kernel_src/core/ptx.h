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

#endif
