// GEMM on wgmma with TMA >= 1 (gemm/wgmma.cu): the persistent block's
// work.  One block per multiprocessor walks the tiles blockIdx.x,
// blockIdx.x + gridDim.x, ...; with Stream-K (one problem), after its
// whole tiles, an equal run of K steps across tile boundaries whose part
// of each tile goes to an f32 slot.  Here: the kernel's argument, the
// tile context of a linear tile, the units of a block's work and a run's
// partial slot.
//
// Clusters (CLUSTER_M x CLUSTER_N blocks, one problem, no Stream-K): a
// unit is a cluster's block of neighbouring tiles, and every block of the
// cluster walks the same units, each on its own tile of them.
//
// Needs BM, BN, GROUPED, TMA, STREAMK, CLUSTER_M, CLUSTER_N (and what
// gemm/wgmma_tile.h needs).
#pragma once
#include "core/cluster.h"
#include "gemm/problem.h"
#include "gemm/wgmma_tile.h"

#define CLUSTER (CLUSTER_M * CLUSTER_N)
static_assert(CLUSTER == 1 || (!GROUPED && !STREAMK && TMA), "clusters: one problem, TMA, no Stream-K");

typedef ckjit_tensor_map tensor_map; // CUtensorMap (abi/gemm_args.h)

// The kernel's one argument (abi/gemm_args.h, the host's struct too): the
// tensor maps and the problem, or (GROUPED) up to CKJIT_GEMM_TMA_GROUPS
// problems with theirs, ordered by first tile.  With D's maps (TMA = 2) the
// grouped argument is over the 4 KiB of older toolchains, so the front-end
// asks for it only from NVRTC 13 (whose cubins need a 13.0 driver).
#if GROUPED
#if TMA == 2
typedef ckjit_gemm_tma_grouped_store_args tma_args;
#define TMA_PARAM_LIST CKJIT_GEMM_TMA_GROUPED_STORE_PARAM
#else
typedef ckjit_gemm_tma_grouped_args tma_args;
#define TMA_PARAM_LIST CKJIT_GEMM_TMA_GROUPED_PARAM
#endif
CKJIT_INLINE long long all_tiles(const tma_args &x) {
  const gemm_problem &last = x.g[x.count - 1];
  return last.tile_begin + last.tiles_m * last.tiles_n;
}
CKJIT_INLINE int group_at(const tma_args &x, long long tile) {
  int lo = 0, hi = (int)x.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (x.g[mid].tile_begin <= tile) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
// The problem, tensor maps and tile of linear tile `tile`; TILE_MAP_D,
// after it, D's map (TMA = 2).
#define TILE_CONTEXT(tile)                                                  \
  const int gi_ = group_at(x, tile);                                       \
  const gemm_problem &p = x.g[gi_];                                         \
  const tensor_map &map_a = x.a[gi_], &map_b = x.b[gi_];                    \
  const gemm_tile t = tile_of(p, tile - p.tile_begin)
#define TILE_MAP_D x.d[gi_]
#else
typedef ckjit_gemm_tma_args tma_args; // d: TMA = 2 only
#define TMA_PARAM_LIST CKJIT_GEMM_TMA_PARAM
#if CLUSTER > 1
#define TILE_OF cluster_tile_of
#else
#define TILE_OF tile_of
#endif
#define TILE_CONTEXT(tile)                                                  \
  const gemm_problem &p = x.p;                                              \
  const tensor_map &map_a = x.a, &map_b = x.b;                              \
  const gemm_tile t = TILE_OF(p, tile)
#define TILE_MAP_D x.d
#endif

#if CLUSTER > 1
// This block's place in its cluster: rank = rm + CLUSTER_M rn, on tile row
// rm and tile column rn of the cluster's CLUSTER_M x CLUSTER_N tiles.  The
// blocks of a tile column share B's tile, those of a tile row A's.
CKJIT_INLINE unsigned rank_m() { return cluster_rank() % CLUSTER_M; }
CKJIT_INLINE unsigned rank_n() { return cluster_rank() / CLUSTER_M; }

// The units of a problem: clusters' blocks of tiles, per K slice and batch
// entry.
CKJIT_INLINE long long cluster_units(const gemm_problem &p) {
  const long long cm = (p.tiles_m + CLUSTER_M - 1) / CLUSTER_M, cn = (p.tiles_n + CLUSTER_N - 1) / CLUSTER_N;
  return cm * cn * p.splits * p.batch;
}

// This block's tile of unit q: tile_of's walk (batch, slice, then groups of
// tile rows walked column by column) over the clusters' blocks of tiles.
// At an edge with an odd count of tiles a block may get a tile past D: it
// still loads (its partner needs its share of the multicast) but stores
// nothing (tile_stored).
CKJIT_INLINE gemm_tile cluster_tile_of(const gemm_problem &p, long long q) {
  const long long cm = (p.tiles_m + CLUSTER_M - 1) / CLUSTER_M, cn = (p.tiles_n + CLUSTER_N - 1) / CLUSTER_N;
  const long long per_mat = cm * cn, per_batch = per_mat * p.splits;
  gemm_tile r;
  r.batch = q / per_batch;
  q -= r.batch * per_batch;
  r.slice = q / per_mat;
  q -= r.slice * per_mat;
  const long long g_rows = GROUP_M / CLUSTER_M, group = q / (g_rows * cn), first = group * g_rows;
  const long long rows = cm - first < g_rows ? cm - first : g_rows, in_group = q - group * g_rows * cn;
  r.m0 = ((first + in_group % rows) * CLUSTER_M + rank_m()) * BM;
  r.n0 = ((in_group / rows) * CLUSTER_N + rank_n()) * BN;
  r.k0 = r.slice * p.k_slice;
  r.k1 = r.k0 + p.k_slice < p.k ? r.k0 + p.k_slice : p.k;
  return r;
}
#endif

// Whether a unit's tile is D's (not a cluster's tile past the edge).
CKJIT_INLINE bool tile_stored(const gemm_problem &p, const gemm_tile &t) {
  return CLUSTER == 1 || (t.m0 < p.tiles_m * BM && t.n0 < p.tiles_n * BN);
}

// One unit of a block's work: K steps [kt0, kt1) of a tile (kt1 < 0: to
// its end), summed into the epilogue (slot < 0) or, for a Stream-K run,
// into partial slot `slot`.
struct work {
  long long tile, slot;
  int kt0, kt1;
};

// Unit u of this block; false past its last.  The producer and the
// consumers walk the same units.
CKJIT_INLINE bool unit_of(const tma_args &x, long long u, work &w) {
  const long long b = blockIdx.x, grid = gridDim.x;
  w.slot = -1, w.kt0 = 0, w.kt1 = -1;
#if GROUPED
  w.tile = b + u * grid;
  return w.tile < all_tiles(x);
#elif CLUSTER > 1
  w.tile = b / CLUSTER + u * (grid / CLUSTER); // the cluster's unit
  return w.tile < cluster_units(x.p);
#else
  const streamk &s = x.sk;
  const long long whole = s.dp_tiles > b ? (s.dp_tiles - b + grid - 1) / grid : 0;
  if (u < whole) {
    w.tile = b + u * grid;
    return true;
  }
#if !STREAMK
  return false;
#else
  if (s.sk_tiles == 0) return false;
  // The run [r0, r1) of the Stream-K steps, one tile's part per unit.
  const long long r0 = b * s.base + (b < s.extra ? b : s.extra);
  const long long r1 = r0 + s.base + (b < s.extra ? 1 : 0);
  const long long tr = r0 / s.iters + (u - whole), first = tr * s.iters;
  const long long start = r0 > first ? r0 : first;
  const long long end = r1 < first + s.iters ? r1 : first + s.iters;
  if (start >= end) return false;
  w.tile = s.dp_tiles + tr;
  w.kt0 = (int)(start - first), w.kt1 = (int)(end - first);
  w.slot = tr * s.slots + (b - sk_owner(s, first));
  return true;
#endif
#endif
}

// A Stream-K run's raw sums to partial slot `slot` (BM x BN f32 in rows of
// BN; gemm_reduce reads them 16 bytes at a time), skipping rows and
// columns past the matrix.
CKJIT_INLINE void store_acc_slot(const gemm_problem &p, const gemm_tile &t, const float (&acc)[ACC],
                                 int cw, long long slot) {
  const int tid = threadIdx.x - 128, w = (tid / 32) % 4, lane = tid % 32;
  const int r = cw * 64 + w * 16 + lane / 4;
  float *dst = p.partials + slot * (BM * BN);
#pragma unroll
  for (int j = 0; j < BN / 8; j++) {
    const int c = j * 8 + 2 * (lane % 4);
#pragma unroll
    for (int h = 0; h < 2; h++)
      if (t.m0 + r + 8 * h < p.m && t.n0 + c < p.n) {
        ckjit_vec<float, 2> o;
        o.v[0] = acc[4 * j + 2 * h];
        o.v[1] = acc[4 * j + 2 * h + 1];
        ckjit_store<float, 2>(dst + (r + 8 * h) * BN + c, o);
      }
  }
}
