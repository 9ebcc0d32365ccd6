// Asynchronous global -> shared copies (cp.async, NVIDIA sm_80+) and the
// shared-memory address of a pointer, for the pipelines that stage operand
// tiles in shared memory.
#pragma once
#include "core/prelude.h"
#if defined(CKJIT_NVIDIA)

CKJIT_INLINE unsigned smem_addr(const void *p) {
  unsigned s;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(s) : "l"(p));
  return s;
}

// Copies BYTES (4, 8 or 16) from global to shared; only the first `valid`
// bytes are read, the rest of the destination is zeroed.
template <int BYTES> CKJIT_INLINE void copy_async(unsigned dst, const void *src, int valid) {
  if (BYTES == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(dst), "l"(src), "n"(BYTES),
                 "r"(valid)
                 : "memory");
}

CKJIT_INLINE void copy_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> CKJIT_INLINE void copy_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

#endif
