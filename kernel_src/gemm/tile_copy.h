// GEMM pipelines on NVIDIA sm_80+: global -> shared copies of operand
// tiles with cp.async, into XOR-swizzled rows (gemm/mma.cu, gemm/wgmma.cu).
// Needs TA and THREADS.
#pragma once
#include "core/async_copy.h"
#if defined(CKJIT_NVIDIA)

// Element offset of (row, col) in a tile with COLS columns: the 16-byte
// chunk index is XORed with the row so that eight consecutive rows at the
// same column fall in eight different bank groups.
template <int COLS> CKJIT_INLINE int swz(int row, int col) {
  const int chunks = COLS / 8;
  const int span = chunks >= 8 ? 1 : 8 / chunks; // rows sharing one 128-byte line
  const int mask = chunks >= 8 ? 7 : chunks - 1;
  const int chunk = (col / 8) ^ ((row / span) & mask);
  return row * COLS + chunk * 8 + col % 8;
}

// Loads rows [r0, r0 + ROWS) x cols [c0, c0 + COLS) of a matrix with
// leading dimension ld (row r at src + r * ld) into a swizzled tile; rows
// >= r_end and columns >= c_end read as zero.
template <int ROWS, int COLS, int VEC>
CKJIT_INLINE void load_tile(TA *tile, const TA *src, long long ld, long long r0, long long c0,
                            long long r_end, long long c_end) {
  constexpr int per_row = COLS / VEC, total = ROWS * per_row;
#pragma unroll
  for (int it = 0; it < (total + THREADS - 1) / THREADS; it++) {
    const int i = it * THREADS + threadIdx.x;
    if (total % THREADS != 0 && i >= total) break;
    const int r = i / per_row, c = (i % per_row) * VEC;
    const long long gr = r0 + r, gc = c0 + c;
    TA *dst = tile + swz<COLS>(r, c);
    long long left = gr < r_end ? c_end - gc : 0;
    left = left < 0 ? 0 : left > VEC ? VEC : left;
    const TA *g = left > 0 ? src + gr * ld + gc : src;
    if (VEC >= 2) {
      copy_async<VEC * 2>(smem_addr(dst), g, (int)left * 2);
    } else { // odd leading dimension or pointer: a plain load and store
      *dst = left > 0 ? *g : TA{};
    }
  }
}

// As load_tile, into PANELS panels of 64 columns each (the layout wgmma
// reads for an operand whose contiguous dimension is M or N): column c of
// row r lives in panel c / 64 at swz<64>(r, c % 64).
template <int ROWS, int COLS>
CKJIT_INLINE void load_tile_panels(TA *tile, const TA *src, long long ld, long long r0,
                                   long long c0, long long r_end, long long c_end) {
#pragma unroll
  for (int p = 0; p < COLS / 64; p++)
    load_tile<ROWS, 64, 8>(tile + p * ROWS * 64, src, ld, r0, c0 + p * 64, r_end, c_end);
}

#endif
