// GEMM on NVIDIA tensor cores (sm_80+): mma.sync m16n8k16, f16/bf16 in,
// f32 accumulation.
//
// Problem:  D = epilogue(alpha * A B) per batch entry / group (gemm/problem.h).
// Policy:   a block of WM x WN x WK warps owns a BM x BN output tile; each
//           warp a (BM / WM) x (BN / WN) piece of it, as MT x NT mma
//           fragments, over its 1 / WK share of every K step.  K advances
//           BK columns per step.  WK > 1 is for thin (decode) tiles: more
//           warps keep more bytes in flight without widening the tile; their
//           sums meet in shared memory, in a fixed order, before the epilogue.
// Pipeline: STAGES shared-memory buffers filled by cp.async (zero-filled
//           past the matrix edges), one barrier per K step; fragments are
//           read with ldmatrix (.trans for the operand whose contiguous
//           dimension is M or N).  Shared rows are XOR-swizzled in 16-byte
//           chunks so that ldmatrix and cp.async hit distinct banks.
// Epilogue: alpha, beta * C, bias, D0, activation, D1, cast (gemm/epilogue.h),
//           or raw f32 partials for a split-K slice, from a copy of the
//           tile in shared memory (gemm/staged_epilogue.h).
//
// Kernel argument: gemm_problem p, or (GROUPED) gemm_groups gs, by value
// (abi/gemm_args.h).
#include "core/prelude.h"
#include "abi/gemm_args.h"
// @PARAMETERS@

typedef DTYPE TA;
typedef OUT TC;
#define A_KCONTIG (A_ORDER == A_ROW)  // A row-major: K is A's contiguous dimension
#define B_KCONTIG (B_ORDER == B_COL)  // B column-major: K is B's contiguous dimension
// VEC_A: elements per global -> shared copy (8: 16 bytes)

#include "gemm/problem.h"
#include "gemm/epilogue.h"

#if defined(CKJIT_NVIDIA) // the whole pipeline is PTX; AMD builds an empty kernel

#define THREADS (WM * WN * WK * 32)

#include "gemm/mma_tiles.h"
#include "gemm/tile_copy.h"
#include "gemm/cp_async_pipeline.h"
#include "gemm/staged_epilogue.h"
#include "core/mma_sync.h"

// Fragments of one 16-wide K step: A for rows [m, m + 16), B for columns
// [n, n + 16) (two n8 fragments: {b[0], b[1]} and {b[2], b[3]}).
CKJIT_INLINE void load_a_frag(unsigned (&a)[4], const TA *tile, int m, int k) {
  const int lane = threadIdx.x % 32, mat = lane / 8, r = lane % 8;
#if A_KCONTIG
  ldmatrix_x4(a, tile + swz<A_COLS>(m + r + (mat & 1) * 8, k + (mat >> 1) * 8));
#else
  ldmatrix_x4_trans(a, tile + swz<A_COLS>(k + r + (mat >> 1) * 8, m + (mat & 1) * 8));
#endif
}
CKJIT_INLINE void load_b_frag(unsigned (&b)[4], const TA *tile, int n, int k) {
  const int lane = threadIdx.x % 32, mat = lane / 8, r = lane % 8;
#if B_KCONTIG
  ldmatrix_x4(b, tile + swz<B_COLS>(n + r + (mat >> 1) * 8, k + (mat & 1) * 8));
#else
  ldmatrix_x4_trans(b, tile + swz<B_COLS>(k + r + (mat & 1) * 8, n + (mat >> 1) * 8));
#endif
}

extern "C" __global__ void __launch_bounds__(THREADS)
ckjit_gemm_mma(GEMM_PARAMS) {
#if __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) unsigned char smem_raw[];
  TA *smem = reinterpret_cast<TA *>(smem_raw);
  GEMM_PROBLEM(p, t);
  const TA *a = static_cast<const TA *>(p.a) + t.batch * p.stride_a;
  const TA *b = static_cast<const TA *>(p.b) + t.batch * p.stride_b;
  const int k_tiles = (int)((t.k1 - t.k0 + BK - 1) / BK);

  // The copies of K step `kt` into stage `s`.
  auto load = [&](int kt, int s) {
    TA *sa = smem + s * STAGE_ELEMS, *sb = sa + A_TILE;
    const long long k = t.k0 + (long long)kt * BK;
#if A_KCONTIG
    load_tile<BM, BK, VEC_A>(sa, a, p.lda, t.m0, k, p.m, t.k1);
#else
    load_tile<BK, BM, VEC_A>(sa, a, p.lda, k, t.m0, t.k1, p.m);
#endif
#if B_KCONTIG
    load_tile<BN, BK, VEC_B>(sb, b, p.ldb, t.n0, k, p.n, t.k1);
#else
    load_tile<BK, BN, VEC_B>(sb, b, p.ldb, k, t.n0, t.k1, p.n);
#endif
  };
  const cp_async_issue<decltype(load)> issue{k_tiles, load};

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tile_warp = warp % (WM * WN), kw = warp / (WM * WN); // kw: this warp's K share
  const int wm0 = (tile_warp / WN) * WTM, wn0 = (tile_warp % WN) * WTN;
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
    const TA *sa = smem + (kt % STAGES) * STAGE_ELEMS, *sb = sa + A_TILE;
#pragma unroll
    for (int step = 0; step < BK / WK; step += 16) {
      const int kk = kw * (BK / WK) + step;
      unsigned af[MT][4], bf[NT / 2][4];
#pragma unroll
      for (int i = 0; i < MT; i++) load_a_frag(af[i], sa, wm0 + i * 16, kk);
#pragma unroll
      for (int j = 0; j < NT / 2; j++) load_b_frag(bf[j], sb, wn0 + j * 16, kk);
#pragma unroll
      for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
          mma_m16n8k16<is_bf16<TA>::value>(acc[i][j], af[i], bf[j / 2][(j % 2) * 2], bf[j / 2][(j % 2) * 2 + 1]);
    }
  }
  copy_wait<0>();
#if WK > 1
  // Warps kw > 0 leave their sums in shared memory (lane-minor: no bank
  // conflicts); the kw = 0 warps add them in kw order and store.
  __syncthreads(); // every warp is done with the stages
  float *sums = reinterpret_cast<float *>(smem_raw);
  constexpr int PER_WARP = MT * NT * 4 * 32;
  if (kw > 0) {
    float *mine = sums + ((kw - 1) * WM * WN + tile_warp) * PER_WARP + lane;
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
      for (int j = 0; j < NT; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) mine[((i * NT + j) * 4 + e) * 32] = acc[i][j][e];
  }
  __syncthreads();
  if (kw == 0) {
#pragma unroll 1
    for (int w = 1; w < WK; w++) {
      const float *theirs = sums + ((w - 1) * WM * WN + tile_warp) * PER_WARP + lane;
#pragma unroll
      for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
          for (int e = 0; e < 4; e++) acc[i][j][e] += theirs[((i * NT + j) * 4 + e) * 32];
    }
  }
#endif
  __syncthreads(); // the epilogue's copy of the tile overlays the stages (and the K warps' sums)
  store_tile_staged<MT, NT>(p, t, acc, reinterpret_cast<float *>(smem_raw), wm0, wn0, kw == 0);
#endif // sm_80+: the front-end never picks this kernel below
}

#else
extern "C" __global__ void ckjit_gemm_mma(GEMM_PARAMS) {}
#endif
CKJIT_ABI_KERNEL(ckjit_gemm_mma, GEMM_PARAM_LIST);
