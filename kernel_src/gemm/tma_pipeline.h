// GEMM on wgmma with TMA >= 1 (gemm/wgmma.cu): the warp-specialized
// pipeline.  A producer thread fills the STAGES shared-memory buffers with
// the tensor memory accelerator (zero-filled past the edges); the consumer
// warpgroups run wgmma on each as it fills and hand it back, through a
// `full` and an `empty` mbarrier per stage.
//
// Needs TA, BM, BN, BK, STAGES, CONSUMERS, A_KCONTIG, B_KCONTIG, TMA,
// STREAMK, CLUSTER_M, CLUSTER_N (and gemm/wgmma_tile.h,
// gemm/persistent_units.h).
#pragma once
#include "core/mbarrier.h"
#include "core/ptx.h"
#include "core/tma.h"
#include "core/wgmma.h"
#include "gemm/persistent_units.h"
#include "gemm/wgmma_tile.h"
#if TMA == 2
#include "gemm/tma_store_epilogue.h"
#endif

// Both roles walk the block's units (gemm/persistent_units.h); `it`
// counts K steps across them, so stage and phase continue, and the
// producer loads the next tile while the consumers store this one.
//
// Clusters (CLUSTER_N 2: the two blocks of a tile row share A's tile;
// CLUSTER_M 2: those of a tile column share B's): each block loads its
// share of a shared tile's rows of 128 bytes (M or N rows when K is
// contiguous, K rows of each panel otherwise) into every sharing block at
// the same offset (multicast), so the tile leaves L2 once.  A stage then
// goes back to every block that writes it: its `empty` barrier counts the
// consumers of the sharing blocks too.
#define A_SHARERS CLUSTER_N
#define B_SHARERS CLUSTER_M
#define EMPTY_ARRIVALS (CONSUMERS * (1 + (A_SHARERS > 1) + (B_SHARERS > 1)))

// One operand's box of `rows` rows of 128 bytes (rows along c1) into `dst`:
// whole, or (sharers 2) this block's half of the rows into the blocks of `mask`.
template <int sharers, int rows>
CKJIT_INLINE void load_rows(unsigned dst, const void *map, int c0, int c1, int b, unsigned bar,
                            unsigned part, unsigned short mask) {
#if CLUSTER > 1
  if (sharers > 1) {
    const int share = rows / sharers;
    tma_load_multicast(dst + part * share * 128, map, c0, c1 + (int)part * share, b, bar, mask);
    return;
  }
#endif
  (void)part, (void)mask;
  tma_load(dst, map, c0, c1, b, bar);
}

// Hands stage `s` back to its producer and to each block that writes it.
CKJIT_INLINE void hand_back(ckjit_u64 *empty, unsigned s) {
  const unsigned bar = smem_addr(&empty[s]);
  mbar_arrive(bar);
#if CLUSTER > 1
  if (A_SHARERS > 1) mbar_arrive_cluster(bar, cluster_rank() ^ CLUSTER_M); // the other tile column
  if (B_SHARERS > 1) mbar_arrive_cluster(bar, cluster_rank() ^ 1);         // the other tile row
#endif
}

// The producer (one thread): fills stage after stage with the K steps of
// this block's units, waiting for each stage to be handed back.
CKJIT_INLINE void producer(const tma_args &x, unsigned base, ckjit_u64 *full, ckjit_u64 *empty) {
  unsigned it = 0; // K steps so far, across units: the stage and its phase
#if CLUSTER > 1
  const unsigned rm = rank_m(), rn = rank_n();
  // the blocks sharing A (this tile row) and B (this tile column)
  const unsigned short mask_a = (unsigned short)((1u << rm) | (1u << (rm + CLUSTER_M * (CLUSTER_N - 1))));
  const unsigned short mask_b = (unsigned short)(((1u << CLUSTER_M) - 1) << (CLUSTER_M * rn));
#else
  const unsigned rm = 0, rn = 0;
  const unsigned short mask_a = 0, mask_b = 0;
#endif
  work w;
  for (long long u = 0; unit_of(x, u, w); u++) {
    TILE_CONTEXT(w.tile);
    // A tile past D's edge (clusters) loads the last one's operands.
    const int m0 = (int)(t.m0 < p.tiles_m * BM ? t.m0 : (p.tiles_m - 1) * BM);
    const int n0 = (int)(t.n0 < p.tiles_n * BN ? t.n0 : (p.tiles_n - 1) * BN);
    const int kt1 = w.kt1 >= 0 ? w.kt1 : (int)((t.k1 - t.k0 + BK - 1) / BK);
    for (int kt = w.kt0; kt < kt1; kt++, it++) {
      const int s = it % STAGES;
      if (it >= STAGES) mbar_wait(smem_addr(&empty[s]), (it / STAGES - 1) & 1);
      const unsigned bar = smem_addr(&full[s]);
      const unsigned sa = base + (unsigned)(s * STAGE_BYTES), sb = sa + A_BYTES;
      const int k = (int)(t.k0 + (long long)kt * BK), b = (int)t.batch;
      mbar_expect(bar, STAGE_BYTES); // its whole stage, whichever block loads each part
#if A_KCONTIG
      load_rows<A_SHARERS, BM>(sa, &map_a, k, m0, b, bar, rn, mask_a);
#else
#pragma unroll // panels of BK columns: one 128-byte row each
      for (int q = 0; q < BM / BK; q++)
        load_rows<A_SHARERS, BK>(sa + q * BK * 128, &map_a, m0 + BK * q, k, b, bar, rn, mask_a);
#endif
#if B_KCONTIG
      load_rows<B_SHARERS, BN>(sb, &map_b, k, n0, b, bar, rm, mask_b);
#else
#pragma unroll
      for (int q = 0; q < BN / BK; q++)
        load_rows<B_SHARERS, BK>(sb + q * BK * 128, &map_b, n0 + BK * q, k, b, bar, rm, mask_b);
#endif
    }
  }
}

// The consumer warpgroups (two, one for 64-row tiles): wgmma over each
// stage as it fills, hand it back, then the unit's epilogue.
CKJIT_INLINE void consumers(const tma_args &x, unsigned base, TA *smem, ckjit_u64 *full, ckjit_u64 *empty) {
  const int cw = threadIdx.x / 128 - 1; // consumer warpgroup 0 or 1
  if (cw >= CONSUMERS) return;
  const bool leader = threadIdx.x % 128 == 0;
  unsigned it = 0; // as the producer's
  unsigned chunks = 0; // TMA-store boxes so far (store_acc_tma)
  work w;
  for (long long u = 0; unit_of(x, u, w); u++) {
    TILE_CONTEXT(w.tile);
    (void)map_a, (void)map_b;
    const int steps = (w.kt1 >= 0 ? w.kt1 : (int)((t.k1 - t.k0 + BK - 1) / BK)) - w.kt0;
    float acc[ACC];
#pragma unroll
    for (int i = 0; i < ACC; i++) acc[i] = 0.0f;
    if (A_REGS) { // (a constant: one of the two loops is compiled)
      // wgmma reads its register operands while it runs, and the compiler
      // does not know it: the fragments are rewritten only after the wait
      // for the step that read them (fence_regs keeps them live to it).
      // The step's products then start after its loads, not during the
      // last step's: the other consumer warpgroup keeps the tensor cores
      // busy meanwhile (two register sets, the loads overlapped, measured
      // the same and compiled 30% slower: bench/NOTES.md #171).
      unsigned frag[K_SLICES][4];
      for (int kt = 0; kt < steps; kt++, it++) {
        const int s = it % STAGES;
        mbar_wait(smem_addr(&full[s]), (it / STAGES) & 1);
        const unsigned sa = base + (unsigned)(s * STAGE_BYTES);
        wgmma_wait<0>(); // step it - 1 is done: its fragments are free, its stage goes back
#pragma unroll
        for (int i = 0; i < K_SLICES; i++) fence_regs(frag[i]);
        if (kt > 0 && leader) hand_back(empty, (it - 1) % STAGES);
        load_a_regs(frag, sa, cw);
        wgmma_fence();
        step_regs(acc, frag, sa + A_BYTES);
        wgmma_commit();
      }
    } else {
      for (int kt = 0; kt < steps; kt++, it++) {
        const int s = it % STAGES;
        mbar_wait(smem_addr(&full[s]), (it / STAGES) & 1);
        const unsigned sa = base + (unsigned)(s * STAGE_BYTES);
        wgmma_fence();
        step(acc, sa, sa + A_BYTES, cw);
        wgmma_commit();
        wgmma_wait<1>(); // step it - 1 is done: hand its stage back
        if (kt > 0 && leader) hand_back(empty, (it - 1) % STAGES);
      }
    }
    wgmma_wait<0>();
    if (steps > 0 && leader) hand_back(empty, (it - 1) % STAGES);
    if (!tile_stored(p, t)) continue;
#if STREAMK // its code only where it can run: smaller kernels, faster compiles
    if (w.slot >= 0) {
      store_acc_slot(p, t, acc, cw, w.slot);
      continue;
    }
#endif
#if TMA == 2
    store_acc_tma(p, t, acc, cw, TILE_MAP_D, reinterpret_cast<unsigned char *>(smem + STAGES * STAGE_ELEMS),
                  base + STAGES * STAGE_BYTES, chunks);
#else
    store_acc(p, t, acc, cw);
#endif
  }
#if TMA == 2
  if (threadIdx.x == 128) tma_store_wait_read<0>(); // the buffer must outlive the stores
#endif
}
