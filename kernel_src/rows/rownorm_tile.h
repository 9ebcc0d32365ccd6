// The on-chip tile of the rownorm kernel (rows/rownorm.cu, included after
// its parameters): a thread's part of a tile is ITEMS vectors of VEC
// elements.  They wait in registers or, with SMEM_TILE, in shared memory
// (filled by cp.async on sm_80+), which frees the registers that otherwise
// limit occupancy (layernorm spilled above 1024 threads/SM: bench/NOTES.md
// #27).  The tile itself is in rows/rownorm_loop_tile.h.
#pragma once

// Calls f(i, k) for element k of each vector i of this thread's part of a
// tile (fully unrolled: the tile's arrays stay in registers).
template <class F> CKJIT_INLINE void each(F f) {
#pragma unroll
  for (int i = 0; i < ITEMS; i++)
#pragma unroll
    for (int k = 0; k < VEC; k++) f(i, k);
}

// 16 bytes global -> shared without passing through registers (sm_80+).
CKJIT_INLINE void copy_async16(void *smem, const void *gmem) {
#if defined(CKJIT_NVIDIA) && __CUDA_ARCH__ >= 800
  unsigned s;
  ckjit_u64 g;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(s) : "l"(smem));
  asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(gmem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g) : "memory");
#else
  *(uint4 *)smem = *(const uint4 *)gmem;
#endif
}

CKJIT_INLINE void copy_async_wait() {
#if defined(CKJIT_NVIDIA) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// Waits for the copies into the shared-memory tile (none for a register
// tile).
CKJIT_INLINE void tile_wait() {
#if SMEM_TILE
  copy_async_wait();
#endif
}
