// FP8 GEMM on Hopper tensor cores (sm_90a): wgmma e4m3 / e5m2, f32
// accumulation, tensor / row / block scaling (include/ckjit/gemm_fp8.h).
// The same pipeline runs ckjit_fused_moe's grouped GEMMs, with 16-bit
// operands too (bf16 / f16, unscaled: a 128-byte row of K is 64 of them)
// and its two epilogues (EPI): gated, whose B tile is BN / 2 gate rows
// over the BN / 2 up rows n further down B, giving act(gate) * up; and
// scatter, which writes each row to its routing entry, times its weight.
//
// Problem:  D = act(alpha * deq(A) deq(B) + bias), A m x k and B k x n, both
//           K-major (A row-major, B column-major): FP8 wgmma reads no other
//           layout.  MOE: one such product per expert, the expert of each
//           128-row tile read on the device (CONTIGUOUS: tile_experts;
//           MASKED: A and D per expert, counts of their rows).
// Policy:   a persistent block (one per multiprocessor) of three
//           warpgroups walks 128 x BN tiles (BN 64 or 128: the promoted
//           accumulators take registers); warpgroup 0 produces, 1 and
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
//           Every PROMOTE steps (0: never) a consumer adds the tensor cores'
//           partial sum into f32 registers, with the step's block scales
//           under block scaling (PROMOTE 1): FP8 wgmma keeps fewer bits than
//           f32 while it accumulates, so this bounds the error by f32's
//           whatever k is.  PROMOTE 1 issues two steps an iteration into two
//           accumulators and promotes the first while the second's products
//           run; the other consumer's products fill the rest.
// Epilogue: alpha (and the tensor / row scales, read at the tile's start),
//           bias, activation, the cast to OUT (gemm/fp8_epilogue.h): 16-bit
//           outputs go through 2 KiB of shared memory per warp (stmatrix,
//           swizzled), so each global store is 16 bytes of one row; f32 is
//           stored from the registers; tiles inside D skip the bounds
//           checks.
//
// Kernel argument (abi/gemm_fp8_args.h), by value: A's and B's tensor maps,
// D, the scales, the sizes and the MoE routing.
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
#define BK 128 // bytes of K per step: FP8, 128 elements, one scale block
#define SIXTEEN_BIT (A_TYPE == OP_BF16 || A_TYPE == OP_F16)
#define K_ELEMS (SIXTEEN_BIT ? 64 : 128) // elements of K per step
#define A_BYTES (BM * BK)
#define STAGE_BYTES ((BM + BN) * BK)
#define ACC (BN / 2) // accumulators per thread
#define THREADS 384
// Each consumer warp's staging buffer for 16-bit outputs (16 rows x 64
// columns), after the stages.
#define STORE_STAGE_BYTES (sizeof(OUT) == 2 ? 2048 : 0)

static_assert(SCALING != SCALE_BLOCK || PROMOTE == 1, "block scales are applied at each step");
static_assert(BN == 64 || BN == 128 || (BN == 256 && SIXTEEN_BIT), "bn 64 or 128 (16-bit: or 256)");
static_assert(CLUSTER == 1 || CLUSTER == 2, "cluster 1 or 2");
static_assert(MOE == MOE_NONE || BIAS != BIAS_ROW, "MoE: bias per column of each expert");
static_assert(!SIXTEEN_BIT || (B_TYPE == A_TYPE && SCALING == SCALE_NONE && PROMOTE == 0),
              "16-bit operands: both alike, unscaled, one accumulator");
static_assert(EPI == EPI_PLAIN || (CLUSTER == 1 && BIAS == BIAS_NONE), "fused epilogues: no cluster, no bias");
static_assert(EPI != EPI_GATED || BN >= 128, "gated: BN / 2 gate and BN / 2 up columns a tile, a whole 64-column slab of D");
static_assert(EPI != EPI_SCATTER || MOE != MOE_MASKED, "scatter: rows of one list");
#define GATED (EPI == EPI_GATED)
#define OUT_COLS (GATED ? BN / 2 : BN) // D's columns a tile
#define A_SLICE (BM / CLUSTER) // rows of A each block of a cluster loads
// Promotion every step, two steps at a time into two accumulators (2 x 64
// registers and the f32 total at BN 128).
#define DOUBLE_ACC (PROMOTE == 1)

#if SIXTEEN_BIT
#define WG_16_(t, n) wgmma_##t##_n##n<0, 0>
#define WG_16(t, n) WG_16_(t, n)
#if A_TYPE == OP_BF16
#define WG_STEP WG_16(bf16, BN)
#else
#define WG_STEP WG_16(f16, BN)
#endif
#else
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
#endif

// One K step: four wgmma of 32 bytes of K (FP8: 32 elements, 16-bit: 16)
// into each swizzled 128-byte row, from the descriptors of A's rows and
// B's at the step's stage.  `first`: the step starts a new partial sum
// (FP8: overwrites acc; 16-bit operands never promote, and their one sum
// starts zeroed).  A descriptor's low bits are the address / 16, so moving
// 32 bytes along K adds 2.
CKJIT_INLINE void step(float (&acc)[ACC], ckjit_u64 da, ckjit_u64 db, bool first) {
#pragma unroll
  for (int kk = 0; kk < BK / 16; kk += 2) {
#if SIXTEEN_BIT
    (void)first;
    WG_STEP(acc, da + kk, db + kk);
#else
    if (kk == 0 && first) WG_FP8(first_, TA_NAME, TB_NAME, BN)(acc, da + kk, db + kk);
    else WG_FP8(, TA_NAME, TB_NAME, BN)(acc, da + kk, db + kk);
#endif
  }
}


// A work unit's tile: tile row and column, expert, D's rows that exist
// for it, and whether it runs at all (a MoE tile no expert owns does not).
struct unit_tile {
  long long tm, tn, rows;
  long long b_col; // B's first row read (D's column): a cluster's tile past N (odd tiles_n) reads
                   // the last real tile's, loads and block scales alike, and stores nothing
  int e;
  bool on;
};

// The tile of work unit `u` (a tile, or a cluster's row of CLUSTER tiles):
// groups of 8 tile rows walked down their columns, so that a wave of blocks
// shares A's and B's tiles in L2; MASKED walks the experts one after
// another.  The producer and the consumers read the same routing, so they
// skip the same units.
CKJIT_INLINE unit_tile tile_of(const ckjit_gemm_fp8_args &x, long long u) {
  const long long units_n = (x.tiles_n + CLUSTER - 1) / CLUSTER;
  unit_tile r;
  r.e = 0, r.rows = x.m, r.on = true;
#if MOE == MOE_MASKED
  const long long per_expert = x.tiles_m * units_n;
  r.e = (int)(u / per_expert);
  u %= per_expert;
#endif
  const long long group = 8 * units_n, first = u / group * 8;
  const long long rows = x.tiles_m - first < 8 ? x.tiles_m - first : 8;
  r.tm = first + u % group % rows;
  r.tn = u % group / rows * CLUSTER + (CLUSTER > 1 ? cluster_rank() : 0);
  r.b_col = (r.tn < x.tiles_n ? r.tn : x.tiles_n - 1) * OUT_COLS;
#if MOE == MOE_CONTIGUOUS
  r.e = x.tile_experts[r.tm];
  r.on = r.e >= 0 && r.e < x.experts;
#elif MOE == MOE_MASKED
  const int count = x.counts[r.e];
  r.on = count >= 0 && count <= x.m && r.tm * BM < count;
  r.rows = count;
#endif
  return r;
}

#include "gemm/fp8_epilogue.h"

extern "C" __global__ void __launch_bounds__(THREADS, 1)
ckjit_gemm_fp8(const __grid_constant__ ckjit_gemm_fp8_args x) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) ckjit_u64 full[STAGES], empty[STAGES];
#if SCALING == SCALE_ROW
  // Each consumer warpgroup's column scales of its tile, in two buffers
  // (tile parity), so a tile's are written while the last tile's are read.
  __shared__ __align__(16) float col_scale[2][2][BN];
#endif
  const unsigned raw = smem_addr(smem_raw), base = (raw + 1023) & ~1023u; // swizzle atoms: 1 KiB
  // Work units: tiles, or (CLUSTER 2) pairs of tiles, one per cluster;
  // MASKED: of every expert.
  const long long units = x.tiles_m * ((x.tiles_n + CLUSTER - 1) / CLUSTER) *
                          (MOE == MOE_MASKED ? x.experts : 1);
  const long long first_unit = blockIdx.x / CLUSTER, unit_stride = gridDim.x / CLUSTER;
  const int steps = (int)((x.k + K_ELEMS - 1) / K_ELEMS);
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
  // ...; the stages and their phases run on across them, so the producer
  // fills the next tile's stages while the consumers store this one.  Both
  // blocks of a cluster walk the same units, step for step.
  if (threadIdx.x < 128) { // the producer
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      unsigned fill = 0, phase = 1; // the next stage to fill; its empty barrier's phase
      bool first_round = true;      // the stages start empty
      for (long long u = first_unit; u < units; u += unit_stride) {
        const unit_tile ut = tile_of(x, u);
        if (!ut.on) continue;
        const long long tm = ut.tm;
        const int e_a = MOE == MOE_MASKED ? ut.e : 0;
        // A pair's second tile past N still loads (its loads complete A's
        // transaction count): the last real tile's B (ut.b_col).
        for (int kb = 0; kb < steps; kb++) {
          const unsigned s = fill;
          if (!first_round) mbar_wait(smem_addr(&empty[s]), phase);
          if (++fill == STAGES) fill = 0, phase ^= 1, first_round = false;
          const unsigned bar = smem_addr(&full[s]), sa = base + s * STAGE_BYTES;
          mbar_expect(bar, STAGE_BYTES);
#if CLUSTER > 1
          tma_load_multicast(sa + rank * A_SLICE * BK, &x.map_a, kb * K_ELEMS,
                             (int)(tm * BM + rank * A_SLICE), e_a, bar, (1u << CLUSTER) - 1);
#else
          tma_load(sa, &x.map_a, kb * K_ELEMS, (int)(tm * BM), e_a, bar);
#endif
          tma_load(sa + A_BYTES, &x.map_b, kb * K_ELEMS, (int)ut.b_col, ut.e, bar);
#if GATED // the up rows, n further down B, under the gate rows (boxes of BN / 2 rows)
          tma_load(sa + A_BYTES + (BN / 2) * BK, &x.map_b, kb * K_ELEMS, (int)(ut.b_col + x.n), ut.e, bar);
#endif
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
  const int t = threadIdx.x % 128, w = t / 32, lane = t % 32;
  const bool leader = t == 0;
  // Stages are taken (full) and handed back (empty) in order; the next of
  // each, with the full barrier's phase, and how many are taken and not
  // yet handed back.  Counted across tiles.
  unsigned take = 0, phase = 0, give = 0, held = 0;
  // After a wait that leaves `in_flight` K steps' products running: every
  // other stage taken goes back to its producer, and in a cluster to the
  // other block's (whose multicast writes this block's copy too).
  auto release = [&](unsigned in_flight) {
    for (; held > in_flight; held--) {
      if (leader) {
        const unsigned bar = smem_addr(&empty[give]);
        mbar_arrive(bar);
#if CLUSTER > 1
        mbar_arrive_cluster(bar, rank ^ 1);
#endif
      }
      give = give + 1 == STAGES ? 0 : give + 1;
    }
  };
  // The descriptors of stage 0 (A: this warpgroup's 64 rows); stage s is
  // s * STAGE_BYTES / 16 on.
  const ckjit_u64 da0 = wgmma_smem_desc(base + cw * 64 * 128, 16, 1024),
                  db0 = wgmma_smem_desc(base + A_BYTES, 16, 1024);
  // Waits for the next stage and issues its K step into acc.
  auto issue = [&](float (&acc)[ACC], bool first) {
    mbar_wait(smem_addr(&full[take]), phase);
    const unsigned off = take * (STAGE_BYTES / 16);
    take = take + 1 == STAGES ? 0 : take + 1;
    phase ^= take == 0;
    held++;
    wgmma_fence();
    step(acc, da0 + off, db0 + off, first);
    wgmma_commit();
  };
  unsigned parity = 0; // of this block's tiles: which col_scale buffer
  for (long long u = first_unit; u < units; u += unit_stride) {
    const unit_tile ut = tile_of(x, u);
    if (!ut.on) continue;
    parity ^= 1;
    const long long m0 = ut.tm * BM, n0 = ut.tn * OUT_COLS; // D's first row and column
    const long long r0 = m0 + cw * 64 + w * 16 + lane / 4; // this thread's rows: r0, r0 + 8
    // This tile's expert's D, scales and bias (MoE; the plain GEMM's
    // strides are 0).
    fp8_out out;
    out.d = static_cast<TC *>(x.d) + ut.e * x.stride_d;
    out.bias = static_cast<const TC *>(x.bias) + ut.e * x.stride_bias;
    out.rows = ut.rows;
    const float *const scale_a = x.scale_a + ut.e * x.stride_scale_a,
                       *const scale_b = x.scale_b + ut.e * x.stride_scale_b;
    // The scale factors of this thread's outputs: row r0 (+ 8) in
    // registers, the tile's columns in shared memory (the registers go to
    // the accumulators), both read now, so the loads are done by the
    // epilogue.
    float row_f[2];
#if SCALING == SCALE_ROW
    float *const col_f = col_scale[parity][cw];
    static_assert(BN <= 128, "one column scale a consumer thread");
    // Into shared memory only before the epilogue: a store now would wait
    // for the load, ahead of the tile's first products.
    // (gated: the gate half's columns, then the up half's, n further on)
    const long long my_n = n0 + t % OUT_COLS;
    const float my_col = t < BN && my_n < x.n ? scale_b[my_n + (t < OUT_COLS ? 0 : x.n)] : 0.0f;
#pragma unroll
    for (int i = 0; i < 2; i++) row_f[i] = r0 + 8 * i < out.rows ? scale_a[r0 + 8 * i] : 0.0f; // times alpha below
#elif SCALING == SCALE_TENSOR
    const float *const col_f = nullptr;
    row_f[0] = scale_a[0], row_f[1] = scale_b[0]; // multiplied below
#else
    const float *const col_f = nullptr;
    row_f[0] = row_f[1] = x.alpha;
#endif
#if EPI == EPI_SCATTER
    // Each row's routing weight (0 for padding rows, which are not stored).
    float row_w[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
      const int id = r0 + 8 * i < out.rows ? x.row_ids[r0 + 8 * i] : -1;
      row_w[i] = id >= 0 && id < x.route_entries ? x.row_weights[id] : 0.0f;
    }
#endif
    // Partial sums: the f32 total, and the tensor cores' accumulators.
    float total[ACC];
#pragma unroll
    for (int i = 0; i < ACC; i++) total[i] = 0.0f;
    // Block scales of steps kb and kb + 1 as loaded (B's, then A's rows r0
    // and r0 + 8), read an iteration ahead and multiplied only when used:
    // their loads are in flight while products run, not on the
    // promotion's path (a multiply right after a load waits for it).
    // Gated: the up half's B scale (of its own 128-column block) fourth.
    float raw[2][4] = {{1.0f, 1.0f, 1.0f, 1.0f}, {1.0f, 1.0f, 1.0f, 1.0f}};
    auto load_scales = [&](int kb) {
#if SCALING == SCALE_BLOCK
#pragma unroll
      for (int i = 0; i < 2; i++) {
        if (kb + i >= steps) break;
        raw[i][0] = scale_b[(ut.b_col / 128) * x.ld_scale_b + kb + i];
        if (GATED) raw[i][3] = scale_b[((x.n + ut.b_col) / 128) * x.ld_scale_b + kb + i];
        raw[i][1] = r0 < out.rows ? scale_a[r0 * x.ld_scale_a + kb + i] : 0.0f;
        raw[i][2] = r0 + 8 < out.rows ? scale_a[(r0 + 8) * x.ld_scale_a + kb + i] : 0.0f;
      }
#else
      (void)kb;
#endif
    };
    // A step's factors of rows r0 and r0 + 8: f[0], f[1] (gated: of the
    // gate half), f[2], f[3] (the up half).
    auto factors = [&](int i, float (&f)[4]) {
#if SCALING == SCALE_BLOCK
      f[0] = raw[i][0] * raw[i][1], f[1] = raw[i][0] * raw[i][2];
      f[2] = raw[i][3] * raw[i][1], f[3] = raw[i][3] * raw[i][2];
#else
      (void)i;
      f[0] = f[1] = f[2] = f[3] = 1.0f;
#endif
    };
    (void)scale_a, (void)scale_b, (void)raw, (void)factors; // unused by some variants
    auto promote = [&](const float (&acc)[ACC], const float (&f)[4]) {
#pragma unroll
      for (int j = 0; j < BN / 8; j++) {
        const int h = GATED && j >= BN / 16 ? 2 : 0;
        total[4 * j] += acc[4 * j] * f[h];
        total[4 * j + 1] += acc[4 * j + 1] * f[h];
        total[4 * j + 2] += acc[4 * j + 2] * f[h + 1];
        total[4 * j + 3] += acc[4 * j + 3] * f[h + 1];
      }
    };
    load_scales(0);
#if DOUBLE_ACC
    // Two steps an iteration into two accumulators: the first is promoted
    // while the second's products run, so the tensor cores wait for this
    // warpgroup's promotion once every two steps.  No group is in flight
    // across the loop's back edge: otherwise ptxas cannot tell which
    // accumulator is being written and serializes the products (C7514).
    float acc0[ACC], acc1[ACC];
    int kb = 0;
    for (; kb + 1 < steps; kb += 2) {
      issue(acc0, true);
      issue(acc1, true);
      wgmma_wait<1>();
      fence_regs(acc0);
      release(1);
      float f0[4], f1[4];
      factors(0, f0);
      factors(1, f1);
      load_scales(kb + 2);
      promote(acc0, f0);
      wgmma_wait<0>();
      fence_regs(acc1);
      release(0);
      promote(acc1, f1);
    }
    if (kb < steps) { // an odd last step
      issue(acc0, true);
      wgmma_wait<0>();
      fence_regs(acc0);
      release(0);
      float f[4];
      factors(0, f);
      promote(acc0, f);
    }
#else
    // Promotion every PROMOTE steps or never (no block scales here).
    static_assert(SCALING != SCALE_BLOCK, "block scaling promotes every step");
    const float unscaled[4] = {1.0f, 1.0f, 1.0f, 1.0f};
#if SIXTEEN_BIT
    // Unscaled: the tensor cores sum straight into the (zeroed) total, which
    // leaves the registers for a 128 x 256 tile.
    float (&acc)[ACC] = total;
#else
    float acc[ACC];
#endif
    for (int kb = 0; kb < steps; kb++) {
      issue(acc, PROMOTE ? kb % (PROMOTE ? PROMOTE : 1) == 0 : kb == 0);
      if (PROMOTE && ((kb + 1) % (PROMOTE ? PROMOTE : 1) == 0 || kb + 1 == steps)) {
        wgmma_wait<0>();
        release(0);
        promote(acc, unscaled);
        continue;
      }
      wgmma_wait<1>(); // every step before kb is done: hand their stages back
      release(1);
    }
    if (!PROMOTE) {
      // Unconditional: a wait on every path out of the loop keeps ptxas
      // from inserting its own before the next tile zeroes acc (C7517).
      wgmma_wait<0>();
      release(0);
      if (!SIXTEEN_BIT && steps) promote(acc, unscaled);
    }
#endif
#if SCALING == SCALE_ROW
    row_f[0] *= x.alpha, row_f[1] *= x.alpha;
    if (t < BN) col_f[t] = my_col;
    named_barrier_sync(1 + cw, 128); // the warpgroup's col_f written
#elif SCALING == SCALE_TENSOR
    row_f[0] = row_f[1] = x.alpha * row_f[0] * row_f[1];
#endif
#if EPI == EPI_SCATTER
    row_f[0] *= row_w[0], row_f[1] *= row_w[1];
#endif
    store_tile(x, out, total, row_f, col_f, m0, n0, r0,
               base + STAGES * STAGE_BYTES + (threadIdx.x / 32 - 4) * STORE_STAGE_BYTES);
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
