// GEMM family, the parts every pipeline shares: the problem descriptor, the
// mapping of a block to its output tile, and the epilogue.
//
// A pipeline (gemm_mma.cu, gemm_simt.cu, ...) defines before including this:
//   TA, TC            A/B element type and output element type
//   BM, BN            block tile
//   BIAS              0 none, 1 per row (bias[m]), 2 per column (bias[n])
//   ACT               0 identity, 1 relu, 2 gelu_tanh, 3 gelu_erf, 4 silu, 5 sigmoid
//   HAS_C, HAS_D0, HAS_D1, SPLIT, GROUPED   0 or 1
// and gets:
//   gemm_problem, gemm_tile (tile_of, group_of), epilogue(), and
//   store_pair() / store_one(), which route to the epilogue or, with SPLIT,
//   to the f32 partials.
#pragma once

// One GEMM (or one group of a grouped GEMM).  The host builds the same
// layout (runtime/op_gemm.c): eight pointers, then 8-byte integers, then
// two floats.  Strides are per batch entry; m, n, k are the full problem.
struct gemm_problem {
  const void *a, *b, *c, *d0, *d1, *bias;
  void *d;
  float *partials;        // SPLIT: [splits][batch][m][n] f32
  long long lda, ldb, ldc, ldd, ldd0, ldd1;
  long long stride_a, stride_b, stride_c, stride_d, stride_d0, stride_d1;
  long long m, n, k, batch;
  long long k_slice;      // K columns per split slice (a multiple of the K tile)
  long long splits;
  long long tile_begin;   // grouped: first linear tile of this group
  long long tiles_m, tiles_n;
  float alpha, beta;
};

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
// kernel's 132 persistent blocks run 132 consecutive tiles; 16 rows beat 8
// by 0.5-1.3% at 4096^3 (bench/NOTES.md #68).  One value for every kernel:
// gemm_reduce finds Stream-K tiles with the same walk.
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

// Stream-K: the last sk_tiles tiles (in tile_of order) are cut into
// equal runs of K steps, one run per block, across tile boundaries, so
// every block gets the same work however the tiles divide among the
// multiprocessors.  A run's part of a tile goes to its own f32 partial
// slot; gemm_reduce sums a tile's slots in block order (deterministic) and
// applies the epilogue.  The host (runtime/op_gemm.c) builds the same layout.
struct streamk {
  long long dp_tiles;    // tiles [0, dp_tiles): whole, block b takes b, b + grid, ...
  long long sk_tiles;    // the next sk_tiles tiles: in runs (0: no Stream-K)
  long long iters;       // K steps per tile
  long long base, extra; // block b's run: base K steps, one more when b < extra
  long long slots;       // partial slots per Stream-K tile (BM x BN f32 each)
};

// The block whose run holds K step i of the Stream-K steps (base >= 1:
// the host never plans more blocks than steps).
CKJIT_INLINE long long sk_owner(const streamk &s, long long i) {
  const long long big = s.extra * (s.base + 1);
  return i < big ? i / (s.base + 1) : s.extra + (i - big) / s.base;
}

// Grouped: up to MAX_GROUPS problems travel by value as the kernel
// argument (no device copy, so a launch can be captured into a graph);
// the host launches larger counts in several parts.
#define MAX_GROUPS 16
struct gemm_groups {
  gemm_problem g[MAX_GROUPS];
  long long count;
};

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
// (__grid_constant__: no per-thread copy of the array).
#if GROUPED
#define GEMM_PARAMS const CKJIT_GRID_CONSTANT gemm_groups gs
#define GEMM_PROBLEM(p, t)                                  \
  const gemm_problem &p = group_of(gs, blockIdx.x);         \
  const gemm_tile t = tile_of(p, blockIdx.x - p.tile_begin)
#else
#define GEMM_PARAMS const gemm_problem p
#define GEMM_PROBLEM(p, t) const gemm_tile t = tile_of(p, blockIdx.x)
#endif

CKJIT_INLINE float activation(float v) {
#if ACT == 1
  return v < 0.0f ? 0.0f : v; // NaN stays NaN, as torch.relu
#elif ACT == 2
  return ckjit_gelu_tanh(v);
#elif ACT == 3
  return ckjit_gelu_erf(v);
#elif ACT == 4
  return v * ckjit_sigmoid(v);
#elif ACT == 5
  return ckjit_sigmoid(v);
#else
  return v;
#endif
}

template <typename S> CKJIT_INLINE float load_elem(const void *base, long long i) {
  return ckjit_to_float(static_cast<const S *>(base)[i]);
}

// The epilogue's values of (m, n) and, when `two`, (m, n + 1) from their
// dot products, in place (the caller checked m < p.m and n < p.n).
CKJIT_INLINE void epilogue_values(const gemm_problem &p, long long batch, long long m, long long n,
                                  float (&v)[2], bool two) {
  v[0] *= p.alpha;
  v[1] *= p.alpha;
#if HAS_C
  if (p.c) { // grouped: a problem without a beta term has none
    const long long i = batch * p.stride_c + m * p.ldc + n;
    v[0] += p.beta * load_elem<TC>(p.c, i);
    if (two) v[1] += p.beta * load_elem<TC>(p.c, i + 1);
  }
#endif
#if BIAS == 1
  {
    const float b = load_elem<TC>(p.bias, m);
    v[0] += b;
    v[1] += b;
  }
#elif BIAS == 2
  v[0] += load_elem<TC>(p.bias, n);
  if (two) v[1] += load_elem<TC>(p.bias, n + 1);
#endif
#if HAS_D0
  {
    const long long i = batch * p.stride_d0 + m * p.ldd0 + n;
    v[0] += load_elem<TC>(p.d0, i);
    if (two) v[1] += load_elem<TC>(p.d0, i + 1);
  }
#endif
  v[0] = activation(v[0]);
  v[1] = activation(v[1]);
#if HAS_D1
  {
    const long long i = batch * p.stride_d1 + m * p.ldd1 + n;
    v[0] *= load_elem<TC>(p.d1, i);
    if (two) v[1] *= load_elem<TC>(p.d1, i + 1);
  }
#endif
}

// Writes the outputs (m, n) and, when `two`, (m, n + 1) of batch entry
// `batch` from their dot products (the caller checked n + 1 < p.n for
// `two`).  Two adjacent elements move as one access when the row pointer
// allows it.
CKJIT_INLINE void epilogue(const gemm_problem &p, long long batch, long long m, long long n,
                           float acc0, float acc1, bool two) {
  if (m >= p.m || n >= p.n) return;
  float v[2] = {acc0, acc1};
  epilogue_values(p, batch, m, n, v, two);
  TC *out = static_cast<TC *>(p.d) + batch * p.stride_d + m * p.ldd + n;
  if (two && ((ckjit_u64)out & (2 * sizeof(TC) - 1)) == 0) {
    ckjit_vec<TC, 2> o;
    o.v[0] = ckjit_from_float<TC>(v[0]);
    o.v[1] = ckjit_from_float<TC>(v[1]);
    ckjit_store<TC, 2>(out, o);
  } else {
    out[0] = ckjit_from_float<TC>(v[0]);
    if (two) out[1] = ckjit_from_float<TC>(v[1]);
  }
}

// SPLIT: the raw sums of slice `slice` go to the f32 partials, laid out
// [slice][batch][m][n] with rows of n floats, so the reduction reads them
// 16 bytes at a time.
CKJIT_INLINE void partial(const gemm_problem &p, long long batch, long long slice, long long m,
                          long long n, float acc0, float acc1, bool two) {
  if (m >= p.m || n >= p.n) return;
  float *out = p.partials + ((slice * p.batch + batch) * p.m + m) * p.n + n;
  if (two && ((ckjit_u64)out & 7) == 0) {
    ckjit_vec<float, 2> o;
    o.v[0] = acc0;
    o.v[1] = acc1;
    ckjit_store<float, 2>(out, o);
  } else {
    out[0] = acc0;
    if (two) out[1] = acc1;
  }
}

// The accumulators of (m, n) and (m, n + 1) of tile t: to the output, or
// to the partials of a split slice.
CKJIT_INLINE void store_pair(const gemm_problem &p, const gemm_tile &t, long long m, long long n,
                             float acc0, float acc1) {
#if SPLIT
  partial(p, t.batch, t.slice, m, n, acc0, acc1, n + 1 < p.n);
#else
  epilogue(p, t.batch, m, n, acc0, acc1, n + 1 < p.n);
#endif
}

CKJIT_INLINE void store_one(const gemm_problem &p, const gemm_tile &t, long long m, long long n,
                            float acc) {
#if SPLIT
  partial(p, t.batch, t.slice, m, n, acc, 0.0f, false);
#else
  epilogue(p, t.batch, m, n, acc, 0.0f, false);
#endif
}
