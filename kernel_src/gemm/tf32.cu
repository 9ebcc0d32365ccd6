// GEMM on NVIDIA tensor cores (sm_80+) for f32 inputs: mma.sync m16n8k8
// tf32, f32 accumulation (the caller allowed tf32: inputs keep 10 mantissa
// bits, rounded to nearest).
//
// Problem:  D = epilogue(alpha * A B) per batch entry / group (gemm/problem.h).
// Policy:   a block of WM x WN warps owns a BM x BN output tile; each warp a
//           (BM / WM) x (BN / WN) piece of it, as MT x NT mma fragments.
//           K advances BK columns per step.
// Pipeline: STAGES shared-memory buffers of f32 filled by cp.async (VEC
//           elements per copy: 4, 8 or 16 bytes; zero-filled past the
//           matrix edges), one barrier per K step.  Fragments are read with
//           plain 32-bit loads (ldmatrix cannot transpose 32-bit elements)
//           and rounded to tf32 with cvt.rna.  Within each 8-deep K slice a
//           lane takes K indices 2q and 2q + 1 as the fragment's k = q and
//           k = q + 4 (the same permutation for A and B, so the sum is
//           unchanged): a K-contiguous operand's pair is one 8-byte load.
//           Shared rows are XOR-swizzled in 16-byte chunks so that these
//           loads and the cp.async stores hit distinct banks.
// Epilogue: alpha, beta * C, bias, D0, activation, D1, cast (gemm/epilogue.h),
//           or raw f32 partials for a split-K slice, from a copy of the
//           tile in shared memory (gemm/staged_epilogue.h).
//
// Kernel argument: gemm_problem p, or (GROUPED) gemm_groups gs, by value
// (abi/gemm_args.h).
#include "core/prelude.h"
#include "abi/gemm_args.h"
// @PARAMETERS@

typedef float TA;
typedef OUT TC;
#define A_KCONTIG (A_ORDER == A_ROW)  // A row-major: K is A's contiguous dimension
#define B_KCONTIG (B_ORDER == B_COL)  // B column-major: K is B's contiguous dimension
// VEC_A: f32 elements per global -> shared copy (4: 16 bytes)

#include "gemm/problem.h"
#include "gemm/epilogue.h"

#if defined(CKJIT_NVIDIA) // the whole pipeline is PTX; AMD builds an empty kernel

#define THREADS (WM * WN * 32)

#include "gemm/mma_tiles.h"
#include "gemm/tile_copy.h" // smem_addr, copy_async, copy_commit, copy_wait
#include "gemm/cp_async_pipeline.h"
#include "gemm/staged_epilogue.h"
#include "core/mma_sync.h"

// Element offset of (row, col) in a tile whose rows are COLS f32 (at least
// 32: eight 16-byte chunks).  KC: rows are M/N, columns K; a half-warp reads
// rows g..g+3 at one chunk pair, so the chunk is XORed with 2 (row % 4).
// Otherwise rows are K, columns M/N; a warp reads rows 2q (or 2q + 1) at
// one chunk pair, so the chunk is XORed with row & 6.  Either way the
// chunks read at once fall in eight different bank groups.
template <int COLS, bool KC> CKJIT_INLINE int swz32(int row, int col) {
  const int chunk = (col / 4) ^ (KC ? (row & 3) << 1 : row & 6);
  return row * COLS + chunk * 4 + col % 4;
}

// Loads rows [r0, r0 + ROWS) x cols [c0, c0 + COLS) of an f32 matrix with
// leading dimension ld (row r at src + r * ld) into a swizzled tile; rows
// >= r_end and columns >= c_end read as zero.  VEC 1, 2 or 4 elements per
// cp.async.  Copy `it` of a thread is THREADS * it chunks past its first
// (row r_t, column c_t): a compile-time step from one base pointer, with
// one row and one column bound for all of them.
template <int ROWS, int COLS, int VEC, bool KC>
CKJIT_INLINE void load_tile32(float *tile, const float *src, long long ld, long long r0,
                              long long c0, long long r_end, long long c_end) {
  constexpr int per_row = COLS / VEC, total = ROWS * per_row;
  static_assert(total % THREADS == 0, "whole copies per thread");
  const int r_t = threadIdx.x / per_row, c_t = (threadIdx.x % per_row) * VEC;
  const long long rows_left = r_end - r0 - r_t, cols_left = c_end - c0 - c_t;
  const float *base = src + (r0 + r_t) * ld + c0 + c_t;
#pragma unroll
  for (int it = 0; it < total / THREADS; it++) {
    const int dr = it * THREADS / per_row, dc = it * THREADS % per_row * VEC;
    long long left = dr < rows_left ? cols_left - dc : 0;
    left = left < 0 ? 0 : left > VEC ? VEC : left;
    const float *g = left > 0 ? base + dr * ld + dc : src;
    copy_async<VEC * 4>(smem_addr(tile + swz32<COLS, KC>(r_t + dr, c_t + dc)), g, (int)left * 4);
  }
}

// Fragments of one 8-deep K slice at k (g = lane / 4, q = lane % 4).
// A (rows m..m+15): a0 (g, q), a1 (g + 8, q), a2 (g, q + 4), a3 (g + 8,
// q + 4); B (columns n..n+7): b0 (k q, n g), b1 (k q + 4, n g); fragment
// k = q and q + 4 are K indices k + 2q and k + 2q + 1 here.
CKJIT_INLINE void load_a_frag(unsigned (&a)[4], const float *tile, int m, int k, int g, int q) {
#if A_KCONTIG
  const float2 lo = *reinterpret_cast<const float2 *>(tile + swz32<A_COLS, true>(m + g, k + 2 * q));
  const float2 hi = *reinterpret_cast<const float2 *>(tile + swz32<A_COLS, true>(m + g + 8, k + 2 * q));
  a[0] = to_tf32(lo.x), a[1] = to_tf32(hi.x), a[2] = to_tf32(lo.y), a[3] = to_tf32(hi.y);
#else
  a[0] = to_tf32(tile[swz32<A_COLS, false>(k + 2 * q, m + g)]);
  a[1] = to_tf32(tile[swz32<A_COLS, false>(k + 2 * q, m + g + 8)]);
  a[2] = to_tf32(tile[swz32<A_COLS, false>(k + 2 * q + 1, m + g)]);
  a[3] = to_tf32(tile[swz32<A_COLS, false>(k + 2 * q + 1, m + g + 8)]);
#endif
}
CKJIT_INLINE void load_b_frag(unsigned (&b)[2], const float *tile, int n, int k, int g, int q) {
#if B_KCONTIG
  const float2 v = *reinterpret_cast<const float2 *>(tile + swz32<B_COLS, true>(n + g, k + 2 * q));
  b[0] = to_tf32(v.x), b[1] = to_tf32(v.y);
#else
  b[0] = to_tf32(tile[swz32<B_COLS, false>(k + 2 * q, n + g)]);
  b[1] = to_tf32(tile[swz32<B_COLS, false>(k + 2 * q + 1, n + g)]);
#endif
}

extern "C" __global__ void __launch_bounds__(THREADS)
ckjit_gemm_tf32(GEMM_PARAMS) {
#if __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) unsigned char smem_raw[];
  float *smem = reinterpret_cast<float *>(smem_raw);
  GEMM_PROBLEM(p, t);
  const float *a = static_cast<const float *>(p.a) + t.batch * p.stride_a;
  const float *b = static_cast<const float *>(p.b) + t.batch * p.stride_b;
  const int k_tiles = (int)((t.k1 - t.k0 + BK - 1) / BK);

  // The copies of K step `kt` into stage `s`.
  auto load = [&](int kt, int s) {
    float *sa = smem + s * STAGE_ELEMS, *sb = sa + A_TILE;
    const long long k = t.k0 + (long long)kt * BK;
#if A_KCONTIG
    load_tile32<BM, BK, VEC_A, true>(sa, a, p.lda, t.m0, k, p.m, t.k1);
#else
    load_tile32<BK, BM, VEC_A, false>(sa, a, p.lda, k, t.m0, t.k1, p.m);
#endif
#if B_KCONTIG
    load_tile32<BN, BK, VEC_B, true>(sb, b, p.ldb, t.n0, k, p.n, t.k1);
#else
    load_tile32<BK, BN, VEC_B, false>(sb, b, p.ldb, k, t.n0, t.k1, p.n);
#endif
  };
  const cp_async_issue<decltype(load)> issue{k_tiles, load};

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, q = lane % 4;
  const int wm0 = (warp / WN) * WTM, wn0 = (warp % WN) * WTN;
  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; i++)
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

  cp_async_prologue<STAGES, 1>(issue);
  for (int kt = 0; kt < k_tiles; kt++) {
    cp_async_step<STAGES, 1, false>(issue, kt + STAGES - 1, (kt + STAGES - 1) % STAGES);
    const float *sa = smem + (kt % STAGES) * STAGE_ELEMS, *sb = sa + A_TILE;
#pragma unroll 1 // (unrolled, the K slices were a quarter of the cold compile time)
    for (int kk = 0; kk < BK; kk += 8) {
      unsigned af[MT][4], bf[NT][2];
#pragma unroll
      for (int i = 0; i < MT; i++) load_a_frag(af[i], sa, wm0 + i * 16, kk, g, q);
#pragma unroll
      for (int j = 0; j < NT; j++) load_b_frag(bf[j], sb, wn0 + j * 8, kk, g, q);
#pragma unroll
      for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++) mma_m16n8k8_tf32(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
  }
  copy_wait<0>();
  __syncthreads(); // the epilogue's copy of the tile overlays the stages
  store_tile_staged<MT, NT>(p, t, acc, smem, wm0, wn0, true);
#endif // sm_80+: the front-end never picks this kernel below
}

#else
extern "C" __global__ void ckjit_gemm_tf32(GEMM_PARAMS) {}
#endif
CKJIT_ABI_KERNEL(ckjit_gemm_tf32, GEMM_PARAM_LIST);
