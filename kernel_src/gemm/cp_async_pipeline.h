// GEMM pipelines on NVIDIA sm_80+: the K loop of a cp.async pipeline, one
// for gemm/mma.cu, gemm/tf32.cu and the cp.async form of gemm/wgmma.cu.
//
// `stages` shared-memory buffers in a ring: K step kt lives in stage
// kt % stages.  `busy` stages are not refilled while step kt runs: the one
// it reads, and with wgmma (one step left in flight) the one before; so
// the copies of a step are issued stages - busy steps before its math.
// (Template parameters are lower case: the kernels define STAGES and
// friends as macros.)
//
// A kernel's K loop:
//   auto load = [&](int kt, int s) { ... };   // copies of step kt -> stage s
//   const cp_async_issue<decltype(load)> issue{k_tiles, load};
//   cp_async_prologue<STAGES, BUSY>(issue);
//   for (int kt = 0; kt < k_tiles; kt++) {
//     cp_async_step<STAGES, BUSY, ASYNC_PROXY>(issue, kt + STAGES - BUSY,
//                                              (kt + STAGES - BUSY) % STAGES);
//     ... the math of step kt, in stage kt % STAGES ...
//   }
//   copy_wait<0>(); // the last (empty) groups, once the math is done
// The loop, the math and the next step's index stay in the kernel, and the
// issuer is a plain functor, not a function taking the math: code in a
// helper is optimized before it is inlined, and a loop (or a modulo of the
// loop counter) moved into one does not compile to the same code.
#pragma once
#include "core/async_copy.h"
#include "core/ptx.h"
#if defined(CKJIT_NVIDIA)

// Issues the copies of K step `kt` into stage `s` (nothing past the end,
// but a group is committed regardless so the wait counts stay uniform).
template <typename Load> struct cp_async_issue {
  int k_tiles;
  const Load &load; // load(kt, s): the copies of step kt into stage s
  __device__ void operator()(int kt, int s) const {
    if (kt < k_tiles) load(kt, s);
    copy_commit();
  }
};

// Before the loop: the first stages - busy steps.  Not unrolled: each
// step's copies are a whole tile's worth of address and bounds code, so
// unrolled copies were a large share of the mma.sync and tf32 kernels'
// instructions and compile time (bench/NOTES.md, cold compile), for a loop
// that runs once a tile and indexes no registers.
template <int stages, int busy, typename Issue>
CKJIT_INLINE void cp_async_prologue(const Issue &issue) {
#pragma unroll 1
  for (int s = 0; s < stages - busy; s++) issue(s, s);
}

// The head of K step kt: wait for this thread's copies of step kt, then
// one barrier (step kt is visible to all; stage (kt - busy) % stages is
// free: every thread is past the math that read it), then the copies of
// step `next` = kt + stages - busy into that stage, `stage`.  async_proxy:
// the math reads shared memory through the async proxy (wgmma), which the
// copies must be made visible to before the barrier.
template <int stages, int busy, bool async_proxy, typename Issue>
CKJIT_INLINE void cp_async_step(const Issue &issue, int next, int stage) {
  copy_wait<stages - busy - 1>();
  if (async_proxy) fence_async_shared();
  __syncthreads();
  issue(next, stage);
}

#endif
