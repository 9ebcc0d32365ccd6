// GEMM, the problem every pipeline shares: the descriptor (one problem or
// the groups of a grouped GEMM) and the mapping of a block to its output
// tile.  The epilogue is in gemm/epilogue.h.
//
// A pipeline (gemm/mma.cu, gemm/simt.cu, ...) defines before including this:
//   BM, BN            block tile
//   GROUPED           0 or 1
// and gets:
//   gemm_problem, gemm_tile (tile_of, group_of), streamk (sk_owner), and
//   GEMM_PARAMS / GEMM_PARAM_LIST / GEMM_PROBLEM: the kernel's parameter,
//   its abi list and its tile.
#pragma once
#include "core/prelude.h"
#include "abi/gemm_args.h"

// The argument structs (abi/gemm_args.h: one definition, the host's too).
typedef ckjit_gemm_problem gemm_problem;
typedef ckjit_gemm_groups gemm_groups;
typedef ckjit_streamk streamk;

// Whether the inputs are bf16 (the matrix instructions differ from f16's).
template <typename T> struct is_bf16 { static const bool value = false; };
template <> struct is_bf16<ckjit_bf16> { static const bool value = true; };

struct gemm_tile {
  long long m0, n0;       // first output row / column
  long long k0, k1;       // K range of this slice
  long long batch, slice;
};

// Linear block index -> tile.  Tiles are ordered (batch, slice, then a
// supertile of GROUP_M tile rows walked column by column) so that blocks
// running together share A rows and B columns in L2.  16: the wgmma
// kernel's persistent blocks run as many consecutive tiles as there are
// multiprocessors, and 16 rows measured faster than 8 at 4096^3
// (bench/NOTES.md #68).  One value for every kernel: gemm_reduce finds
// Stream-K tiles with the same walk.
#define GROUP_M 16
CKJIT_INLINE gemm_tile tile_of(const gemm_problem &p, long long t) {
  gemm_tile r;
  const long long per_mat = p.tiles_m * p.tiles_n;
  const long long per_batch = per_mat * p.splits;
  r.batch = t / per_batch;
  t -= r.batch * per_batch;
  r.slice = t / per_mat;
  t -= r.slice * per_mat;
  const long long group = t / (GROUP_M * p.tiles_n);
  const long long first_m = group * GROUP_M;
  const long long rows = p.tiles_m - first_m < GROUP_M ? p.tiles_m - first_m : GROUP_M;
  const long long in_group = t - group * GROUP_M * p.tiles_n;
  r.m0 = (first_m + in_group % rows) * BM;
  r.n0 = (in_group / rows) * BN;
  r.k0 = r.slice * p.k_slice;
  r.k1 = r.k0 + p.k_slice < p.k ? r.k0 + p.k_slice : p.k;
  return r;
}

// Stream-K (the split: abi/gemm_args.h, planned by
// runtime/ops/gemm/streamk.c): the block whose run holds K step i of the
// Stream-K steps (base >= 1: the host never plans more blocks than steps).
CKJIT_INLINE long long sk_owner(const streamk &s, long long i) {
  const long long big = s.extra * (s.base + 1);
  return i < big ? i / (s.base + 1) : s.extra + (i - big) / s.base;
}

// The group owning linear tile t (groups are in tile order).
CKJIT_INLINE const gemm_problem &group_of(const gemm_groups &gs, long long t) {
  int lo = 0, hi = (int)gs.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (gs.g[mid].tile_begin <= t) lo = mid;
    else hi = mid - 1;
  }
  return gs.g[lo];
}

// The kernel's parameter: one problem, or the groups read in place
// (__grid_constant__: no per-thread copy of the array); GEMM_PARAM_LIST
// names it for CKJIT_ABI_KERNEL.
#if GROUPED
#define GEMM_PARAMS const CKJIT_GRID_CONSTANT gemm_groups gs
#define GEMM_PARAM_LIST CKJIT_GEMM_GROUPS_PARAM
#define GEMM_PROBLEM(p, t)                                  \
  const gemm_problem &p = group_of(gs, blockIdx.x);         \
  const gemm_tile t = tile_of(p, blockIdx.x - p.tile_begin)
#else
#define GEMM_PARAMS const gemm_problem p
#define GEMM_PARAM_LIST CKJIT_GEMM_PROBLEM_PARAM
#define GEMM_PROBLEM(p, t) const gemm_tile t = tile_of(p, blockIdx.x)
#endif
