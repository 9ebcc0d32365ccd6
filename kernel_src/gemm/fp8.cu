// FP8 GEMM on Hopper tensor cores (sm_90a): wgmma e4m3 / e5m2, f32
// accumulation, tensor / row / block scaling (include/ckjit/gemm_fp8.h).
//
// Problem:  D = act(alpha * deq(A) deq(B) + bias), A m x k and B k x n, both
//           K-major (A row-major, B column-major): FP8 wgmma reads no other
//           layout.
// Policy:   a persistent block (one per multiprocessor) of three
//           warpgroups walks 128 x BN tiles (BN 64 or 128: the promoted
//           accumulators double the registers); warpgroup 0 produces, 1 and
//           2 each compute a 64 x BN half.  K advances one
//           128-byte row per step: 128 FP8 elements, exactly one scale block.
// Pipeline: a producer thread fills STAGES shared-memory buffers through the
//           tensor memory accelerator (128-byte swizzle, zero fill past the
//           edges) and the consumers hand them back through mbarriers, as
//           gemm/tma_pipeline.h does for 16-bit types.  Every PROMOTE steps
//           (0: never) a consumer waits for its wgmma and adds the tensor
//           cores' partial sum into f32 registers, with the step's block
//           scales under block scaling (PROMOTE 1); FP8 wgmma keeps fewer
//           bits than f32 while it accumulates, so this bounds the error by
//           f32's whatever k is.  The other consumer's wgmma keep the tensor
//           cores busy meanwhile.
// Epilogue: alpha (and the tensor / row scales), bias, activation, the cast
//           to OUT, stored from the registers.
//
// Kernel argument (abi/gemm_fp8_args.h), by value: A's and B's tensor maps,
// D, the scales and the sizes.
#include "core/prelude.h"
#include "abi/gemm_fp8_args.h"
// @PARAMETERS@

typedef OUT TC;

#if defined(CKJIT_NVIDIA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "core/activations.h"
#include "core/async_copy.h"
#include "core/mbarrier.h"
#include "core/ptx.h"
#include "core/tma.h"
#include "core/wgmma.h"

#define BM 128
#define BK 128 // bytes and elements of K per step: one scale block
#define A_BYTES (BM * BK)
#define STAGE_BYTES ((BM + BN) * BK)
#define ACC (BN / 2) // accumulators per thread
#define THREADS 384

static_assert(SCALING != SCALE_BLOCK || PROMOTE == 1, "block scales are applied at each step");
static_assert(BN == 64 || BN == 128, "bn 64 or 128");

#if A_TYPE == FP8_E4M3
#define TA_NAME e4m3
#else
#define TA_NAME e5m2
#endif
#if B_TYPE == FP8_E4M3
#define TB_NAME e4m3
#else
#define TB_NAME e5m2
#endif
#define WG_FP8_(first, a, b, n) wgmma_fp8_##first##a##_##b##_n##n
#define WG_FP8(first, a, b, n) WG_FP8_(first, a, b, n)

// One K step on the stage at sa / sb: four wgmma of K 32 (32 bytes into
// each swizzled 128-byte row), rows 64 cw.. of A.  `first`: the step
// starts a new partial sum (overwrites acc).
CKJIT_INLINE void step(float (&acc)[ACC], unsigned sa, unsigned sb, int cw, bool first) {
#pragma unroll
  for (int kk = 0; kk < BK; kk += 32) {
    const ckjit_u64 da = wgmma_smem_desc(sa + cw * 64 * 128 + kk, 16, 1024);
    const ckjit_u64 db = wgmma_smem_desc(sb + kk, 16, 1024);
    if (kk == 0 && first) WG_FP8(first_, TA_NAME, TB_NAME, BN)(acc, da, db);
    else WG_FP8(, TA_NAME, TB_NAME, BN)(acc, da, db);
  }
}


// The tile of block `b`: groups of 8 tile rows walked down their columns,
// so that a wave of blocks shares A's and B's tiles in L2.
CKJIT_INLINE void tile_of(const ckjit_gemm_fp8_args &x, long long b, long long &tm, long long &tn) {
  const long long group = 8 * x.tiles_n, first = b / group * 8;
  const long long rows = x.tiles_m - first < 8 ? x.tiles_m - first : 8;
  tm = first + b % group % rows;
  tn = b % group / rows;
}

// Element (m, n) and, when `two`, (m, n + 1) of D from their sums.
CKJIT_INLINE void store2(const ckjit_gemm_fp8_args &x, long long m, long long n, float v0, float v1,
                         float alpha) {
  if (m >= x.m || n >= x.n) return;
  const bool two = n + 1 < x.n;
#if SCALING == SCALE_ROW
  const float sa = alpha * x.scale_a[m];
  if (two && reinterpret_cast<unsigned long long>(x.scale_b + n) % 8 == 0) {
    const ckjit_vec<float, 2> sb = ckjit_load<float, 2>(x.scale_b + n);
    v0 *= sa * sb.v[0];
    v1 *= sa * sb.v[1];
  } else {
    v0 *= sa * x.scale_b[n];
    if (two) v1 *= sa * x.scale_b[n + 1];
  }
#else
  v0 *= alpha;
  v1 *= alpha;
#endif
#if BIAS == BIAS_ROW
  const float b = ckjit_to_float(static_cast<const TC *>(x.bias)[m]);
  v0 += b;
  v1 += b;
#elif BIAS == BIAS_COL
  v0 += ckjit_to_float(static_cast<const TC *>(x.bias)[n]);
  if (two) v1 += ckjit_to_float(static_cast<const TC *>(x.bias)[n + 1]);
#endif
  TC *d = static_cast<TC *>(x.d) + m * x.ldd + n;
  const TC o0 = ckjit_from_float<TC>(activation(v0)), o1 = ckjit_from_float<TC>(activation(v1));
  if (two && (reinterpret_cast<unsigned long long>(d) % (2 * sizeof(TC))) == 0) {
    ckjit_vec<TC, 2> v;
    v.v[0] = o0;
    v.v[1] = o1;
    ckjit_store<TC, 2>(d, v);
  } else {
    d[0] = o0;
    if (two) d[1] = o1;
  }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
ckjit_gemm_fp8(const __grid_constant__ ckjit_gemm_fp8_args x) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) ckjit_u64 full[STAGES], empty[STAGES];
  const unsigned raw = smem_addr(smem_raw), base = (raw + 1023) & ~1023u; // swizzle atoms: 1 KiB
  const long long tiles = x.tiles_m * x.tiles_n;
  const int steps = (int)((x.k + BK - 1) / BK);
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; s++) {
      mbar_init(smem_addr(&full[s]), 1);  // the producer's expect_tx
      mbar_init(smem_addr(&empty[s]), 2); // one arrival per consumer warpgroup
    }
    mbar_init_fence();
  }
  __syncthreads();

  // Persistent: block b takes tiles b, b + grid, ...; `it` counts K steps
  // across them, so stages and phases run on and the producer fills the
  // next tile's stages while the consumers store this one.
  if (threadIdx.x < 128) { // the producer
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      unsigned it = 0;
      for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        long long tm, tn;
        tile_of(x, t, tm, tn);
        for (int kb = 0; kb < steps; kb++, it++) {
          const int s = it % STAGES;
          if (it >= STAGES) mbar_wait(smem_addr(&empty[s]), (it / STAGES - 1) & 1);
          const unsigned bar = smem_addr(&full[s]), sa = base + (unsigned)(s * STAGE_BYTES);
          mbar_expect(bar, STAGE_BYTES);
          tma_load(sa, &x.map_a, kb * BK, (int)(tm * BM), 0, bar);
          tma_load(sa + A_BYTES, &x.map_b, kb * BK, (int)(tn * BN), 0, bar);
        }
      }
    }
    return;
  }

  setmaxnreg_inc<232>();
  const int cw = threadIdx.x / 128 - 1; // consumer warpgroup 0 or 1: rows 64 cw ..
  const bool leader = threadIdx.x % 128 == 0;
  const int w = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
#if SCALING == SCALE_TENSOR
  const float alpha = x.alpha * x.scale_a[0] * x.scale_b[0];
#else
  const float alpha = x.alpha;
#endif
  unsigned it = 0, released = 0; // K steps begun, and handed back, across tiles
  for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
    long long tm, tn;
    tile_of(x, t, tm, tn);
    const long long m0 = tm * BM, n0 = tn * BN;
    const long long r0 = m0 + cw * 64 + w * 16 + lane / 4; // this thread's rows: r0, r0 + 8
    float acc[ACC];
#if PROMOTE
    float total[ACC];
#pragma unroll
    for (int i = 0; i < ACC; i++) total[i] = 0.0f;
#else
#pragma unroll
    for (int i = 0; i < ACC; i++) acc[i] = 0.0f;
#endif
#if SCALING == SCALE_BLOCK
    // Block scales one step ahead: their loads are in flight while the
    // step before runs, not on the promotion's path.
    float next0 = 0.0f, next1 = 0.0f, next_b = 0.0f;
    auto load_scales = [&](int kb) {
      if (kb >= steps) return;
      next_b = x.scale_b[(n0 / 128) * x.ld_scale_b + kb];
      next0 = r0 < x.m ? x.scale_a[r0 * x.ld_scale_a + kb] : 0.0f;
      next1 = r0 + 8 < x.m ? x.scale_a[(r0 + 8) * x.ld_scale_a + kb] : 0.0f;
    };
    load_scales(0);
#endif
    for (int kb = 0; kb < steps; kb++, it++) {
      const int s = it % STAGES;
      mbar_wait(smem_addr(&full[s]), (it / STAGES) & 1);
      const unsigned sa = base + (unsigned)(s * STAGE_BYTES);
      wgmma_fence();
      step(acc, sa, sa + A_BYTES, cw, PROMOTE ? kb % (PROMOTE ? PROMOTE : 1) == 0 : kb == 0);
      wgmma_commit();
#if PROMOTE
      if ((kb + 1) % PROMOTE == 0 || kb + 1 == steps) {
#if SCALING == SCALE_BLOCK
        const float s0 = next0 * next_b, s1 = next1 * next_b;
        load_scales(kb + 1);
#else
        const float s0 = 1.0f, s1 = 1.0f;
#endif
        wgmma_wait<0>();
        if (leader)
          for (; released <= it; released++) mbar_arrive(smem_addr(&empty[released % STAGES]));
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
          total[4 * j] += acc[4 * j] * s0;
          total[4 * j + 1] += acc[4 * j + 1] * s0;
          total[4 * j + 2] += acc[4 * j + 2] * s1;
          total[4 * j + 3] += acc[4 * j + 3] * s1;
        }
        continue;
      }
#endif
      wgmma_wait<1>(); // step it - 1 is done: hand its stage back
      if (leader)
        for (; released < it; released++) mbar_arrive(smem_addr(&empty[released % STAGES]));
    }
#if PROMOTE
    const float(&sum)[ACC] = total;
#else
    wgmma_wait<0>();
    if (leader)
      for (; released < it; released++) mbar_arrive(smem_addr(&empty[released % STAGES]));
    const float(&sum)[ACC] = acc;
#endif
    // Accumulator 4j + e: row r0 (+8 for e >= 2), columns 8 j + 2 (lane % 4) + {0, 1}.
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
      const long long n = n0 + j * 8 + 2 * (lane % 4);
      store2(x, r0, n, sum[4 * j], sum[4 * j + 1], alpha);
      store2(x, r0 + 8, n, sum[4 * j + 2], sum[4 * j + 3], alpha);
    }
  }
}
CKJIT_ABI_KERNEL(ckjit_gemm_fp8, CKJIT_GEMM_FP8_PARAM);

#else
// FP8 wgmma needs the arch-specific target (NVRTC's sm_90a); anything else
// builds an empty kernel, which the front-end never picks.
extern "C" __global__ void ckjit_gemm_fp8() {}
#endif
