// FP8 GEMM on Hopper tensor cores (sm_90a): wgmma e4m3 / e5m2, f32
// accumulation, tensor / row / block scaling (include/ckjit/gemm_fp8.h).
//
// Problem:  D = act(alpha * deq(A) deq(B) + bias), A m x k and B k x n, both
//           K-major (A row-major, B column-major): FP8 wgmma reads no other
//           layout.
// Policy:   a persistent block (one per multiprocessor) of three
//           warpgroups walks 128 x BN tiles (BN 64, 128 or 192: the promoted
//           accumulators double the registers); warpgroup 0 produces, 1 and
//           2 each compute a 64 x BN half.  K advances one
//           128-byte row per step: 128 FP8 elements, exactly one scale block.
//           CLUSTER 2: blocks run in pairs on neighbouring tiles of one tile
//           row, and each loads half of their shared A tile for both
//           (multicast), so A's traffic from L2 halves (measured slower:
//           the policy runs it only when asked).
// Pipeline: a producer thread fills STAGES shared-memory buffers through the
//           tensor memory accelerator (128-byte swizzle, zero fill past the
//           edges) and the consumers hand them back through mbarriers, as
//           gemm/tma_pipeline.h does for 16-bit types; in a cluster a stage
//           is handed back to both blocks (either's multicast writes both).
//           Every PROMOTE steps
//           (0: never) a consumer waits for its wgmma and adds the tensor
//           cores' partial sum into f32 registers, with the step's block
//           scales under block scaling (PROMOTE 1); FP8 wgmma keeps fewer
//           bits than f32 while it accumulates, so this bounds the error by
//           f32's whatever k is.  The other consumer's wgmma keep the tensor
//           cores busy meanwhile.
// Epilogue: alpha (and the tensor / row scales, read at the tile's start),
//           bias, activation, the cast to OUT.  16-bit outputs go through 2
//           KiB of shared memory per warp (stmatrix, swizzled), so each
//           global store is 16 bytes of one row; f32 is stored from the
//           registers.
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
#include "core/cluster.h"
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
// Each consumer warp's staging buffer for 16-bit outputs (16 rows x 64
// columns), after the stages.
#define STORE_STAGE_BYTES (sizeof(OUT) == 2 ? 2048 : 0)

static_assert(SCALING != SCALE_BLOCK || PROMOTE == 1, "block scales are applied at each step");
static_assert(BN == 64 || BN == 128 || (BN == 192 && SCALING != SCALE_BLOCK),
              "bn 64 or 128, or 192 (one B scale block a tile: not with block scaling)");
static_assert(CLUSTER == 1 || CLUSTER == 2, "cluster 1 or 2");
#define A_SLICE (BM / CLUSTER) // rows of A each block of a cluster loads

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


// The tile of work unit `u` (a tile, or a cluster's row of CLUSTER
// tiles): groups of 8 tile rows walked down their columns, so that a wave
// of blocks shares A's and B's tiles in L2.
CKJIT_INLINE void tile_of(const ckjit_gemm_fp8_args &x, long long u, long long &tm, long long &tn) {
  const long long units_n = (x.tiles_n + CLUSTER - 1) / CLUSTER;
  const long long group = 8 * units_n, first = u / group * 8;
  const long long rows = x.tiles_m - first < 8 ? x.tiles_m - first : 8;
  tm = first + u % group % rows;
  tn = u % group / rows * CLUSTER + (CLUSTER > 1 ? cluster_rank() : 0);
}

// D's element (m, n) from its sum v and scale factor f: bias, activation.
// (m, n) must be inside D (the bias is read there).
CKJIT_INLINE float finish(const ckjit_gemm_fp8_args &x, long long m, long long n, float v, float f) {
  v *= f;
#if BIAS == BIAS_ROW
  v += ckjit_to_float(static_cast<const TC *>(x.bias)[m]);
#elif BIAS == BIAS_COL
  v += ckjit_to_float(static_cast<const TC *>(x.bias)[n]);
#endif
  (void)m, (void)n;
  return activation(v);
}

// Accumulator 4j + e of a thread is row r0 (+8 for e >= 2), column
// 8 j + 2 (lane % 4) + e % 2 of the warp's 16 x BN piece; its scale factor
// is row_f[e / 2] col_f[2 j + e % 2].

// f32 D: two adjacent columns a store, straight from the registers.
CKJIT_INLINE void store_direct(const ckjit_gemm_fp8_args &x, const float (&sum)[ACC],
                               const float (&row_f)[2], const float (&col_f)[BN / 4], long long r0,
                               long long n0) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const long long m = r0 + 8 * r;
    if (m >= x.m) continue;
    TC *row = static_cast<TC *>(x.d) + m * x.ldd;
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
      const long long n = n0 + j * 8 + 2 * (lane % 4);
      if (n >= x.n) continue;
      const TC o0 = ckjit_from_float<TC>(finish(x, m, n, sum[4 * j + 2 * r], row_f[r] * col_f[2 * j]));
      if (n + 1 < x.n && reinterpret_cast<unsigned long long>(row + n) % (2 * sizeof(TC)) == 0) {
        ckjit_vec<TC, 2> v;
        v.v[0] = o0;
        v.v[1] = ckjit_from_float<TC>(finish(x, m, n + 1, sum[4 * j + 2 * r + 1], row_f[r] * col_f[2 * j + 1]));
        ckjit_store<TC, 2>(row + n, v);
      } else {
        row[n] = o0;
        if (n + 1 < x.n)
          row[n + 1] = ckjit_from_float<TC>(finish(x, m, n + 1, sum[4 * j + 2 * r + 1], row_f[r] * col_f[2 * j + 1]));
      }
    }
  }
}

// 16-bit D: the warp's rows packed into registers, then 64 columns at a
// time through its staging buffer `stage` (stmatrix: lane l addresses row
// l % 8 of 8 x 8 matrix l / 8; 16-byte pieces XOR-swizzled by row), read
// back a 16-byte piece of one row per lane and stored whole where D's
// alignment and edge allow, element by element where not.
CKJIT_INLINE void store_staged(const ckjit_gemm_fp8_args &x, const float (&sum)[ACC],
                               const float (&row_f)[2], const float (&col_f)[BN / 4], long long r0,
                               long long n0, unsigned stage) {
  const int lane = threadIdx.x % 32;
  unsigned v[2][BN / 8]; // rows r0 and r0 + 8, two columns a register
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const long long m = r0 + 8 * r;
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
      const long long n = n0 + j * 8 + 2 * (lane % 4);
      ckjit_vec<TC, 2> p;
      p.v[0] = ckjit_from_float<TC>(
          m < x.m && n < x.n ? finish(x, m, n, sum[4 * j + 2 * r], row_f[r] * col_f[2 * j]) : 0.0f);
      p.v[1] = ckjit_from_float<TC>(m < x.m && n + 1 < x.n ? finish(x, m, n + 1, sum[4 * j + 2 * r + 1],
                                                                     row_f[r] * col_f[2 * j + 1])
                                                           : 0.0f);
      v[r][j] = *reinterpret_cast<const unsigned *>(&p);
    }
  }
  const long long row0 = r0 - lane / 4; // the warp's first row
  const bool whole = x.ldd % 8 == 0 && reinterpret_cast<unsigned long long>(x.d) % 16 == 0;
  const int srow = 8 * (lane / 8 % 2) + lane % 8;
#pragma unroll
  for (int slab = 0; slab < BN / 64; slab++) {
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const int chunk = 2 * k + lane / 16;
      stmatrix_x4(stage + srow * 128 + ((chunk ^ (srow % 8)) << 4), v[0][8 * slab + 2 * k],
                  v[1][8 * slab + 2 * k], v[0][8 * slab + 2 * k + 1], v[1][8 * slab + 2 * k + 1]);
    }
    __syncwarp();
#pragma unroll
    for (int it = 0; it < 4; it++) { // 16 rows x 8 pieces over 32 lanes
      const int idx = lane + 32 * it, row = idx / 8, chunk = idx % 8;
      uint4 piece;
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(piece.x), "=r"(piece.y), "=r"(piece.z), "=r"(piece.w)
                   : "r"(stage + row * 128 + ((chunk ^ (row % 8)) << 4)));
      const long long m = row0 + row, n = n0 + 64 * slab + 8 * chunk;
      if (m >= x.m || n >= x.n) continue;
      TC *d = static_cast<TC *>(x.d) + m * x.ldd + n;
      if (whole && n + 8 <= x.n) {
        *reinterpret_cast<uint4 *>(d) = piece;
      } else {
        const TC *e = reinterpret_cast<const TC *>(&piece);
        for (int i = 0; i < 8 && n + i < x.n; i++) d[i] = e[i];
      }
    }
    __syncwarp();
  }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
ckjit_gemm_fp8(const __grid_constant__ ckjit_gemm_fp8_args x) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) ckjit_u64 full[STAGES], empty[STAGES];
  const unsigned raw = smem_addr(smem_raw), base = (raw + 1023) & ~1023u; // swizzle atoms: 1 KiB
  // Work units: tiles, or (CLUSTER 2) pairs of tiles, one per cluster.
  const long long units = x.tiles_m * ((x.tiles_n + CLUSTER - 1) / CLUSTER);
  const long long first_unit = blockIdx.x / CLUSTER, unit_stride = gridDim.x / CLUSTER;
  const int steps = (int)((x.k + BK - 1) / BK);
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; s++) {
      mbar_init(smem_addr(&full[s]), 1); // the producer's expect_tx
      // one arrival per consumer warpgroup of every block of the cluster
      mbar_init(smem_addr(&empty[s]), 2 * CLUSTER);
    }
    mbar_init_fence();
  }
#if CLUSTER > 1
  cluster_sync(); // the other block's barriers exist before anything arrives on them
  const unsigned rank = cluster_rank();
#else
  __syncthreads();
  const unsigned rank = 0;
#endif

  // Persistent: a block (cluster) takes units first_unit, + unit_stride,
  // ...; `it` counts K steps across them, so stages and phases run on and
  // the producer fills the next tile's stages while the consumers store
  // this one.  Both blocks of a cluster walk the same units, step for step.
  if (threadIdx.x < 128) { // the producer
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      unsigned it = 0;
      for (long long u = first_unit; u < units; u += unit_stride) {
        long long tm, tn;
        tile_of(x, u, tm, tn);
        // A pair's second tile past N (odd tiles_n) reads the last real
        // tile's B: its loads must still come (they complete A's
        // transaction count) and its results are not stored.
        const int b_row = (int)((tn < x.tiles_n ? tn : x.tiles_n - 1) * BN);
        for (int kb = 0; kb < steps; kb++, it++) {
          const int s = it % STAGES;
          if (it >= STAGES) mbar_wait(smem_addr(&empty[s]), (it / STAGES - 1) & 1);
          const unsigned bar = smem_addr(&full[s]), sa = base + (unsigned)(s * STAGE_BYTES);
          mbar_expect(bar, STAGE_BYTES);
#if CLUSTER > 1
          tma_load_multicast(sa + rank * A_SLICE * BK, &x.map_a, kb * BK,
                             (int)(tm * BM + rank * A_SLICE), 0, bar, (1u << CLUSTER) - 1);
#else
          tma_load(sa, &x.map_a, kb * BK, (int)(tm * BM), 0, bar);
#endif
          tma_load(sa + A_BYTES, &x.map_b, kb * BK, b_row, 0, bar);
        }
      }
    }
#if CLUSTER > 1
    cluster_sync(); // the other block may still arrive on this one's barriers
#endif
    return;
  }

  setmaxnreg_inc<232>();
  const int cw = threadIdx.x / 128 - 1; // consumer warpgroup 0 or 1: rows 64 cw ..
  const bool leader = threadIdx.x % 128 == 0;
  const int w = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  static_assert(BN % 64 == 0 || STORE_STAGE_BYTES == 0, "the staged store moves 64 columns at a time");
  // A stage back to its producer, and in a cluster to the other block's
  // (whose multicast writes this block's copy too).
  auto release = [&](unsigned step) {
    const unsigned bar = smem_addr(&empty[step % STAGES]);
#if CLUSTER > 1
    mbar_arrive(bar);
    mbar_arrive_cluster(bar, rank ^ 1);
#else
    mbar_arrive(bar);
#endif
  };
#if SCALING == SCALE_TENSOR
  const float alpha = x.alpha * x.scale_a[0] * x.scale_b[0];
#else
  const float alpha = x.alpha;
#endif
  unsigned it = 0, released = 0; // K steps begun, and handed back, across tiles
  for (long long u = first_unit; u < units; u += unit_stride) {
    long long tm, tn;
    tile_of(x, u, tm, tn);
    const long long m0 = tm * BM, n0 = tn * BN;
    const long long r0 = m0 + cw * 64 + w * 16 + lane / 4; // this thread's rows: r0, r0 + 8
    // The scale factors of this thread's outputs: row r0 + 8 i times column
    // 8 j + 2 (lane % 4) + e.  Read now, so the loads are done by the
    // epilogue (not one dependent load per store).
    float row_f[2], col_f[BN / 4];
    auto load_factors = [&]() {
#if SCALING == SCALE_ROW
#pragma unroll
      for (int i = 0; i < 2; i++) row_f[i] = r0 + 8 * i < x.m ? alpha * x.scale_a[r0 + 8 * i] : 0.0f;
#pragma unroll
      for (int j = 0; j < BN / 4; j++) {
        const long long n = n0 + (j / 2) * 8 + 2 * (lane % 4) + j % 2;
        col_f[j] = n < x.n ? x.scale_b[n] : 0.0f;
      }
#else
      row_f[0] = row_f[1] = alpha;
#pragma unroll
      for (int j = 0; j < BN / 4; j++) col_f[j] = 1.0f;
#endif
    };
    // The widest tile has no registers to hold them through the K loop.
    if (BN <= 128) load_factors();
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
          for (; released <= it; released++) release(released);
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
        for (; released < it; released++) release(released);
    }
#if PROMOTE
    const float(&sum)[ACC] = total;
#else
    wgmma_wait<0>();
    if (leader)
      for (; released < it; released++) release(released);
    const float(&sum)[ACC] = acc;
#endif
    if (BN > 128) load_factors();
    if constexpr (STORE_STAGE_BYTES > 0)
      store_staged(x, sum, row_f, col_f, r0, n0,
                   base + STAGES * STAGE_BYTES + (threadIdx.x / 32 - 4) * STORE_STAGE_BYTES);
    else
      store_direct(x, sum, row_f, col_f, r0, n0);
  }
#if CLUSTER > 1
  cluster_sync(); // see the producer's
#endif
}
CKJIT_ABI_KERNEL(ckjit_gemm_fp8, CKJIT_GEMM_FP8_PARAM);

#else
// FP8 wgmma needs the arch-specific target (NVRTC's sm_90a); anything else
// builds an empty kernel, which the front-end never picks.
extern "C" __global__ void ckjit_gemm_fp8() {}
#endif
