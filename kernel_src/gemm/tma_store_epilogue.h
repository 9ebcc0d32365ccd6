// GEMM on wgmma, TMA = 2 (gemm/wgmma.cu): the consumers' epilogue through
// TMA stores.
//
// Needs TC, CONSUMERS (and what gemm/persistent_units.h needs).
#pragma once
#include "core/ptx.h"
#include "core/tma.h"
#include "gemm/epilogue.h"
#include "gemm/persistent_units.h"
#include "gemm/wgmma_tile.h"

// D goes out in boxes of 128 rows x 128 bytes (64 16-bit or 32 f32
// columns), one at a time through the two 16 KiB halves of a buffer in
// turn, in the 128-byte swizzle (conflict-free writes of the fragments).
// The stores are asynchronous: a box waits only for the store two boxes
// back, which used the same half (bench/NOTES.md #65).
#define OUT_COLS (128 / (int)sizeof(TC)) // columns of one box
#define OUT_BOX (128 * 128)               // bytes of one box

// The consumer warpgroups' own barrier (the producer never joins it).
CKJIT_INLINE void consumers_barrier() { named_barrier_sync<1, CONSUMERS * 128>(); }

CKJIT_INLINE void store_acc_tma(const gemm_problem &p, const gemm_tile &t, float (&acc)[ACC], int cw,
                                const tensor_map &map_d, unsigned char *buf, unsigned buf_addr,
                                unsigned &chunks) { // chunks: boxes so far (which half is next)
  const int tid = threadIdx.x - 128, w = (tid / 32) % 4, lane = tid % 32; // tid: 0..255
  const int r0 = cw * 64 + w * 16 + lane / 4;                               // row in the tile
  const bool issuer = tid == 0;
#pragma unroll
  for (int c0 = 0; c0 < BN; c0 += OUT_COLS, chunks++) {
    const int half = chunks % 2;
    if (issuer) tma_store_wait_read<1>(); // the store two chunks back has left this half
    consumers_barrier();
#pragma unroll
    for (int jj = 0; jj < OUT_COLS / 8; jj++) {
      const int j = c0 / 8 + jj, col = jj * 8 + 2 * (lane % 4); // column in the box
      const int cb = col * (int)sizeof(TC);
      // Every element gets values, those outside D too (the TMA store
      // clips them): no branch per element (gemm/epilogue.h says why).
      float v[4] = {acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]};
      epilogue_values_frag(p, t.batch, t.m0 + r0, t.n0 + c0 + col, v);
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int r = r0 + 8 * h;
        ckjit_vec<TC, 2> o;
        o.v[0] = ckjit_from_float<TC>(v[2 * h]);
        o.v[1] = ckjit_from_float<TC>(v[2 * h + 1]);
        const int off = half * OUT_BOX + r * 128 + (((cb / 16) ^ (r % 8)) * 16) + cb % 16;
        ckjit_store<TC, 2>(reinterpret_cast<TC *>(buf + off), o);
      }
    }
    fence_async_shared(); // visible to the TMA unit
    consumers_barrier();
    if (issuer) {
      tma_store(&map_d, buf_addr + half * OUT_BOX, (int)t.n0 + c0, (int)t.m0, (int)t.batch);
      tma_store_commit();
    }
  }
}
