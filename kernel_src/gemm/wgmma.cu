// GEMM on Hopper tensor cores (sm_90a): wgmma, f16/bf16 in, or f32 in
// read as tf32 (the caller allowed tf32: the low 13 mantissa bits are
// ignored; B column-major, A row-major or, column-major, from registers
// (gemm/wgmma_tile.h): the front-end swaps a row-major B's problem into
// D^T = B^T A^T with a column-major D (D_COL)), f32 accumulation.  For
// large problems with 16-byte aligned operands.
//
// Problem:  D = epilogue(alpha * A B) per batch entry / group (gemm/problem.h).
// Policy:   a block of two warpgroups owns a BM x BN tile (BM 128 or 64, BN
//           64, 128 or 256).  BM 128: each warpgroup a 64 x BN half, as one
//           wgmma accumulator.  BM 64 (skinny problems that 128-row tiles
//           leave too few tiles for; TMA only): the first warpgroup takes
//           the whole tile and the second has no work (splitting each K step
//           between the two and summing after measured slower,
//           bench/NOTES.md #76).  K advances one 128-byte row (BK elements)
//           per step.  The math of a tile: gemm/wgmma_tile.h.
// Pipeline: STAGES shared-memory buffers in the 128-byte swizzled layout
//           wgmma reads (K-contiguous operands as rows of 128 bytes of K:
//           BK = 64 16-bit or 32 f32 elements; M/N-contiguous ones, 16-bit
//           only, as panels of 64 columns, read transposed).
//           TMA >= 1 (gemm/tma_pipeline.h): a persistent block per
//           multiprocessor; a producer warp fills the stages with the
//           tensor memory accelerator (zero-filled past the edges) and the
//           two consumer warpgroups hand them back through mbarriers.
//           TMA = 2 (gemm/tma_store_epilogue.h): the consumers also write D
//           through a 32 KiB shared buffer and TMA stores, which finish
//           while the next tile's K loop runs.  Stream-K (split_k
//           CKJIT_GEMM_STREAM_K, TMA >= 1, one problem): after its whole
//           tiles, each block takes an equal run of K steps across tile
//           boundaries and writes each tile's part to an f32 slot
//           (gemm/persistent_units.h; gemm_reduce sums the slots).
//           Clusters (CLUSTER_M x CLUSTER_N blocks, TMA >= 1, one
//           problem, no Stream-K): neighbouring tiles that share A's or
//           B's tile load it once, multicast (gemm/tma_pipeline.h).
//           TMA = 0 (broadcast batches, a group with a k = 0 problem, a
//           tensor map the driver refused): every thread copies with
//           cp.async, STAGES - 2 steps ahead (gemm/cp_async_pipeline.h).
//           wgmma runs asynchronously, one step in flight.
// Epilogue: as the other pipelines (gemm/epilogue.h).
//
// Kernel argument (abi/gemm_args.h), by value: TMA >= 1: tma_args (tensor
// maps and problems; grouped: up to CKJIT_GEMM_TMA_GROUPS problems a
// launch); otherwise gemm_problem p, or (GROUPED) gemm_groups gs.
#include "core/prelude.h"
#include "abi/gemm_args.h"
// @PARAMETERS@

typedef DTYPE TA;
typedef OUT TC;
#define A_KCONTIG (A_ORDER == A_ROW)  // A row-major: K is A's contiguous dimension
#define B_KCONTIG (B_ORDER == B_COL)  // B column-major: K is B's contiguous dimension
// BM: 128, or 64 (TMA, one problem): one consumer warpgroup
#define BK (128 / (int)sizeof(TA)) // a 128-byte row of K per step
// STREAMK: Stream-K runs after the whole tiles (TMA, BM 128, one problem, unsplit)

#include "gemm/problem.h"
#include "gemm/epilogue.h"

// wgmma needs the arch-specific target (NVRTC's sm_90a); anything else
// builds an empty kernel, which the front-end never picks.
#if defined(CKJIT_NVIDIA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)

#define THREADS (TMA ? 384 : 256) // TMA: warpgroup 0 produces, 1 and 2 consume
#define CONSUMERS (BM == 64 ? 1 : 2)  // TMA: 64-row tiles leave warpgroup 2 without work

// tf32 wgmma reads K-major shared memory only: B column-major, and A
// row-major or from registers (A_REGS); it needs TMA (the cp.async copies
// are 16-bit).
static_assert(sizeof(TA) == 2 || (B_KCONTIG && TMA), "f32 (tf32): b=col, tma >= 1");
#include "gemm/wgmma_tile.h"

#if TMA
// ---- TMA: warp-specialized, persistent (gemm/tma_pipeline.h) -------------------------
#include "gemm/tma_pipeline.h"

extern "C" __global__ void __launch_bounds__(THREADS, 1)
ckjit_gemm_wgmma(const __grid_constant__ tma_args x) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) ckjit_u64 full[STAGES], empty[STAGES];
  TA *smem;
  const unsigned base = align_1k(smem_raw, smem);
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; s++) {
      mbar_init(smem_addr(&full[s]), 1);  // the producer's expect_tx
      // one arrival per consumer warpgroup of each block writing the stage
      mbar_init(smem_addr(&empty[s]), EMPTY_ARRIVALS);
    }
    mbar_init_fence();
  }
#if CLUSTER > 1
  cluster_sync(); // the other blocks' barriers exist before anything arrives on them
#else
  __syncthreads();
#endif
  if (threadIdx.x / 128 == 0) {
    // The producer needs few registers; the consumers take them (their
    // accumulators and the epilogue would spill at 168).
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) producer(x, base, full, empty);
  } else {
    setmaxnreg_inc<232>();
    consumers(x, base, smem, full, empty);
  }
#if CLUSTER > 1
  cluster_sync(); // the other blocks may still arrive on this one's barriers
#endif
}
CKJIT_ABI_KERNEL(ckjit_gemm_wgmma, TMA_PARAM_LIST);

#else
// ---- cp.async: every thread copies, STAGES - 2 steps ahead ---------------------------
#include "gemm/tile_copy.h"
#include "gemm/cp_async_pipeline.h"

extern "C" __global__ void __launch_bounds__(THREADS, 1) ckjit_gemm_wgmma(GEMM_PARAMS) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  TA *smem;
  const unsigned base = align_1k(smem_raw, smem);
  GEMM_PROBLEM(p, t);
  const TA *a = static_cast<const TA *>(p.a) + t.batch * p.stride_a;
  const TA *b = static_cast<const TA *>(p.b) + t.batch * p.stride_b;
  const int k_tiles = (int)((t.k1 - t.k0 + BK - 1) / BK);

  // The copies of K step `kt` into stage `s`.
  auto load = [&](int kt, int s) {
    TA *sa = smem + s * STAGE_ELEMS, *sb = sa + A_TILE;
    const long long k = t.k0 + (long long)kt * BK;
#if A_KCONTIG
    load_tile<BM, BK, 8>(sa, a, p.lda, t.m0, k, p.m, t.k1);
#else
    load_tile_panels<BK, BM>(sa, a, p.lda, k, t.m0, t.k1, p.m);
#endif
#if B_KCONTIG
    load_tile<BN, BK, 8>(sb, b, p.ldb, t.n0, k, p.n, t.k1);
#else
    load_tile_panels<BK, BN>(sb, b, p.ldb, k, t.n0, t.k1, p.n);
#endif
  };
  const cp_async_issue<decltype(load)> issue{k_tiles, load};

  const int wg = threadIdx.x / 128;
  float acc[ACC];
#pragma unroll
  for (int i = 0; i < ACC; i++) acc[i] = 0.0f;

  // Two stages busy: step kt's, and step kt - 1's, whose wgmma may still run.
  cp_async_prologue<STAGES, 2>(issue);
  for (int kt = 0; kt < k_tiles; kt++) {
    cp_async_step<STAGES, 2, true>(issue, kt + STAGES - 2, (kt + STAGES - 2) % STAGES); // step kt - 2's wgmma are done
    const unsigned sa = base + (unsigned)((kt % STAGES) * STAGE_BYTES);
    wgmma_fence();
    step(acc, sa, sa + A_BYTES, wg);
    wgmma_commit();
    wgmma_wait<1>(); // step kt - 1 done; step kt may still run
  }
  wgmma_wait<0>();
  copy_wait<0>();
  store_acc(p, t, acc, wg);
}
CKJIT_ABI_KERNEL(ckjit_gemm_wgmma, GEMM_PARAM_LIST);
#endif

#else
extern "C" __global__ void ckjit_gemm_wgmma() {}
#endif
