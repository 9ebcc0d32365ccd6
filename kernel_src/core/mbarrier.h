// Shared-memory mbarriers (NVIDIA sm_90): a producer announces the bytes
// an asynchronous copy will bring (the TMA unit completes the transaction),
// consumers wait for the phase to flip, and hand a buffer back by arriving.
// `bar` is the barrier's shared-memory address (smem_addr).
#pragma once
#include "core/prelude.h"
#if defined(CKJIT_NVIDIA)

CKJIT_INLINE void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// After the initializations, before any other thread uses the barriers.
CKJIT_INLINE void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
CKJIT_INLINE void mbar_expect(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
CKJIT_INLINE void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Waits until the phase of parity `parity` has completed.  (No predicated
// branch in the asm: the at sign starts a placeholder in kernel templates.)
CKJIT_INLINE void mbar_wait(unsigned bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n"
                 "}"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
}

#endif
