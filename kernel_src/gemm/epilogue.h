// GEMM epilogue, shared by every pipeline: alpha, beta * C, bias, D0,
// activation, D1 and the cast to TC; or, with SPLIT, the raw f32 partials
// of a split-K slice (gemm/reduce.cu applies the epilogue to their sum).
//
// A pipeline defines before including this:
//   TC                output element type
//   BIAS, ACT         a BIAS_* and an ACT_* constant (abi/gemm_args.h)
//   HAS_C, HAS_D0, HAS_D1, SPLIT   0 or 1
//   D_COL             optional, 0 or 1: C, D, D0 and D1 are column-major
//                     (element (m, n) at n * ld + m; not with SPLIT)
// and gets epilogue_values(), epilogue(), and store_pair() / store_one(),
// which route to the epilogue or, with SPLIT, to the f32 partials; and for
// the accumulator fragments of mma.sync and wgmma, epilogue_values_frag()
// and store_frag(), the same epilogue as straight-line code (below).
#pragma once
#include "core/activations.h"
#include "gemm/problem.h"

#ifndef D_COL
#define D_COL 0
#endif
#if D_COL && SPLIT
#error "D_COL: the partials of a split are row-major"
#endif
// Offset of (m, n) in an m x n output-shaped matrix of leading dimension
// ld, and the step from (m, n) to (m, n + 1).
CKJIT_INLINE long long mn_at(long long ld, long long m, long long n) { return D_COL ? n * ld + m : m * ld + n; }
#define NEXT_N(ld) (D_COL ? (ld) : 1)

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
    const long long i = batch * p.stride_c + mn_at(p.ldc, m, n);
    v[0] += p.beta * load_elem<TC>(p.c, i);
    if (two) v[1] += p.beta * load_elem<TC>(p.c, i + NEXT_N(p.ldc));
  }
#endif
#if BIAS == BIAS_ROW
  {
    const float b = load_elem<TC>(p.bias, m);
    v[0] += b;
    v[1] += b;
  }
#elif BIAS == BIAS_COL
  v[0] += load_elem<TC>(p.bias, n);
  if (two) v[1] += load_elem<TC>(p.bias, n + 1);
#endif
#if HAS_D0
  {
    const long long i = batch * p.stride_d0 + mn_at(p.ldd0, m, n);
    v[0] += load_elem<TC>(p.d0, i);
    if (two) v[1] += load_elem<TC>(p.d0, i + NEXT_N(p.ldd0));
  }
#endif
  v[0] = activation(v[0]);
  v[1] = activation(v[1]);
#if HAS_D1
  {
    const long long i = batch * p.stride_d1 + mn_at(p.ldd1, m, n);
    v[0] *= load_elem<TC>(p.d1, i);
    if (two) v[1] *= load_elem<TC>(p.d1, i + NEXT_N(p.ldd1));
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
  TC *out = static_cast<TC *>(p.d) + batch * p.stride_d + mn_at(p.ldd, m, n);
  if (two && !D_COL && ((ckjit_u64)out & (2 * sizeof(TC) - 1)) == 0) {
    ckjit_vec<TC, 2> o;
    o.v[0] = ckjit_from_float<TC>(v[0]);
    o.v[1] = ckjit_from_float<TC>(v[1]);
    ckjit_store<TC, 2>(out, o);
  } else {
    out[0] = ckjit_from_float<TC>(v[0]);
    if (two) out[NEXT_N(p.ldd)] = ckjit_from_float<TC>(v[1]);
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

// ---- accumulator fragments: the epilogue as straight-line code ---------------------
// Why: the wgmma tiles store 64-128 values per thread (the mma.sync and
// tf32 ones go through shared memory instead, gemm/staged_epilogue.h),
// and with a bounds and an alignment branch around each pair those stores
// were most of the large tiles' compile time (NVVM and ptxas over hundreds
// of basic blocks with 128+ accumulators live across them; bench/NOTES.md,
// cold compile).  So here an element outside D still gets its values
// computed (from loads at indices clamped into D: always in bounds, never
// used) and its stores are predicated off, not branched around.  An element
// inside D executes the same loads, math and store as with branches, and
// no branch.  The pair path above keeps its branches: it serves the
// memory-bound split-K reduction, where the predicated form costs registers
// (occupancy), and kernels whose compile time is not in question.

// A global store of one word (2, 4 or 8 bytes) that happens when `pred`
// holds: a predicated st.global on NVIDIA, no branch.  The caller
// guarantees the pointer's alignment when pred holds.
template <typename W> CKJIT_INLINE void store_if(W *ptr, W v, bool pred);
#if defined(CKJIT_NVIDIA)
template <> CKJIT_INLINE void store_if<unsigned short>(unsigned short *ptr, unsigned short v, bool pred) {
  asm volatile("{ .reg .pred q; setp.ne.b32 q, %2, 0; @q st.global.b16 [%0], %1; }" ::"l"(ptr), "h"(v),
               "r"((int)pred));
}
template <> CKJIT_INLINE void store_if<unsigned>(unsigned *ptr, unsigned v, bool pred) {
  asm volatile("{ .reg .pred q; setp.ne.b32 q, %2, 0; @q st.global.b32 [%0], %1; }" ::"l"(ptr), "r"(v),
               "r"((int)pred));
}
template <> CKJIT_INLINE void store_if<uint2>(uint2 *ptr, uint2 v, bool pred) {
  asm volatile("{ .reg .pred q; setp.ne.b32 q, %3, 0; @q st.global.v2.b32 [%0], {%1, %2}; }" ::"l"(ptr),
               "r"(v.x), "r"(v.y), "r"((int)pred));
}
#else
template <typename W> CKJIT_INLINE void store_if(W *ptr, W v, bool pred) {
  if (pred) *ptr = v;
}
#endif

// Elements (m, n) and (m, n + 1) of a T matrix at `out` (row m's element n):
// as one 2 * sizeof(T)-byte store when both are inside (ok0, ok1) and the
// pair is aligned, else each alone; nothing outside.
template <typename T>
CKJIT_INLINE void store_two(T *out, const ckjit_vec<T, 2> &o, bool ok0, bool ok1) {
  typedef typename ckjit_word<sizeof(T)>::type W1;
  typedef typename ckjit_word<2 * sizeof(T)>::type W2;
  const bool pair = ok1 && ((ckjit_u64)out & (2 * sizeof(T) - 1)) == 0;
  union { W2 w; ckjit_vec<T, 2> v; } u2;
  union { W1 w; T v; } e0, e1;
  u2.v = o, e0.v = o.v[0], e1.v = o.v[1];
  store_if<W2>(reinterpret_cast<W2 *>(out), u2.w, pair);
  store_if<W1>(reinterpret_cast<W1 *>(out), e0.w, ok0 && !pair);
  store_if<W1>(reinterpret_cast<W1 *>(out + 1), e1.w, ok1 && !pair);
}

// The activation of N values.  gelu (tanh or erf form) is a dozen or more
// instructions per value around special-function ops; inlined into every
// element of a tile (128 copies per thread) it made the fused kernels the
// slowest to compile.  So on NVIDIA it is one __noinline__ call per
// fragment of N values (4: an mma / wgmma accumulator fragment): the N
// evaluations are independent, so they still overlap each other's latency
// inside the call, and the call adds a few instructions per fragment.  The
// cheap activations stay inline.
#if defined(CKJIT_NVIDIA) && (ACT == ACT_GELU_TANH || ACT == ACT_GELU_ERF)
#define ACT_CALL 1
template <int N> struct act_values {
  float v[N];
};
template <int N> static __device__ __noinline__ act_values<N> activation_call(act_values<N> x) {
#pragma unroll
  for (int e = 0; e < N; e++) x.v[e] = activation(x.v[e]);
  return x;
}
#else
#define ACT_CALL 0
#endif
template <int N> CKJIT_INLINE void activations(float (&v)[N]) {
#if ACT_CALL
  act_values<N> x;
#pragma unroll
  for (int e = 0; e < N; e++) x.v[e] = v[e];
  x = activation_call<N>(x);
#pragma unroll
  for (int e = 0; e < N; e++) v[e] = x.v[e];
#else
#pragma unroll
  for (int e = 0; e < N; e++) v[e] = activation(v[e]);
#endif
}

// The epilogue of (m, n) and (m, n + 1) before the activation (alpha,
// beta * C, bias, D0) and after it (D1), in place.  Any (m, n) is safe:
// the operands are read at m and n clamped into D.
struct clamped {
  long long m, n0, n1; // m, n and n + 1, each clamped into D
};
CKJIT_INLINE clamped clamp_into(const gemm_problem &p, long long m, long long n) {
  clamped c;
  c.m = m < p.m ? m : p.m - 1;
  c.n0 = n < p.n ? n : p.n - 1;
  c.n1 = n + 1 < p.n ? n + 1 : p.n - 1;
  return c;
}
CKJIT_INLINE void epilogue_pre(const gemm_problem &p, long long batch, long long m, long long n,
                               float (&v)[2]) {
  v[0] *= p.alpha;
  v[1] *= p.alpha;
  const clamped c = clamp_into(p, m, n);
  (void)c;
#if HAS_C
  if (p.c) { // grouped: a problem without a beta term has none
    const long long i = batch * p.stride_c;
    v[0] += p.beta * load_elem<TC>(p.c, i + mn_at(p.ldc, c.m, c.n0));
    v[1] += p.beta * load_elem<TC>(p.c, i + mn_at(p.ldc, c.m, c.n1));
  }
#endif
#if BIAS == BIAS_ROW
  {
    const float b = load_elem<TC>(p.bias, c.m);
    v[0] += b;
    v[1] += b;
  }
#elif BIAS == BIAS_COL
  v[0] += load_elem<TC>(p.bias, c.n0);
  v[1] += load_elem<TC>(p.bias, c.n1);
#endif
#if HAS_D0
  {
    const long long i = batch * p.stride_d0;
    v[0] += load_elem<TC>(p.d0, i + mn_at(p.ldd0, c.m, c.n0));
    v[1] += load_elem<TC>(p.d0, i + mn_at(p.ldd0, c.m, c.n1));
  }
#endif
}
CKJIT_INLINE void epilogue_post(const gemm_problem &p, long long batch, long long m, long long n,
                                float (&v)[2]) {
#if HAS_D1
  const clamped c = clamp_into(p, m, n);
  const long long i = batch * p.stride_d1;
  v[0] *= load_elem<TC>(p.d1, i + mn_at(p.ldd1, c.m, c.n0));
  v[1] *= load_elem<TC>(p.d1, i + mn_at(p.ldd1, c.m, c.n1));
#else
  (void)p, (void)batch, (void)m, (void)n, (void)v;
#endif
}

// The epilogue's values of an accumulator fragment of mma.sync and wgmma,
// in place: v[0], v[1] at (m, n), (m, n + 1) and v[2], v[3] at (m + 8, n),
// (m + 8, n + 1).  Any (m, n): outside D the values are meaningless.
CKJIT_INLINE void epilogue_values_frag(const gemm_problem &p, long long batch, long long m, long long n,
                                       float (&v)[4]) {
  float lo[2] = {v[0], v[1]}, hi[2] = {v[2], v[3]};
  epilogue_pre(p, batch, m, n, lo);
  epilogue_pre(p, batch, m + 8, n, hi);
  float a[4] = {lo[0], lo[1], hi[0], hi[1]};
  activations<4>(a);
  lo[0] = a[0], lo[1] = a[1], hi[0] = a[2], hi[1] = a[3];
  epilogue_post(p, batch, m, n, lo);
  epilogue_post(p, batch, m + 8, n, hi);
  v[0] = lo[0], v[1] = lo[1], v[2] = hi[0], v[3] = hi[1];
}

// An accumulator fragment of tile t (epilogue_values_frag's layout: rows m
// and m + 8, columns n and n + 1): to the output, or to the partials of a
// split slice; nothing for an element outside D.
CKJIT_INLINE void store_frag(const gemm_problem &p, const gemm_tile &t, long long m, long long n,
                             const float (&acc)[4]) {
  const bool in_n = n < p.n, two = n + 1 < p.n;
#if SPLIT
  float *out = p.partials + ((t.slice * p.batch + t.batch) * p.m + m) * p.n + n;
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const bool ok = m + 8 * h < p.m && in_n;
    ckjit_vec<float, 2> o;
    o.v[0] = acc[2 * h];
    o.v[1] = acc[2 * h + 1];
    store_two<float>(out + 8 * h * p.n, o, ok, ok && two);
  }
#else
  float v[4] = {acc[0], acc[1], acc[2], acc[3]};
  epilogue_values_frag(p, t.batch, m, n, v);
  TC *out = static_cast<TC *>(p.d) + t.batch * p.stride_d + mn_at(p.ldd, m, n);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const bool ok = m + 8 * h < p.m && in_n;
#if D_COL // (m, n) and (m, n + 1) are a column apart: one element each
    typedef typename ckjit_word<sizeof(TC)>::type W1;
    union { W1 w; TC v; } e0, e1;
    e0.v = ckjit_from_float<TC>(v[2 * h]), e1.v = ckjit_from_float<TC>(v[2 * h + 1]);
    store_if<W1>(reinterpret_cast<W1 *>(out + 8 * h), e0.w, ok);
    store_if<W1>(reinterpret_cast<W1 *>(out + 8 * h + p.ldd), e1.w, ok && two);
#else
    ckjit_vec<TC, 2> o;
    o.v[0] = ckjit_from_float<TC>(v[2 * h]);
    o.v[1] = ckjit_from_float<TC>(v[2 * h + 1]);
    store_two<TC>(out + 8 * h * p.ldd, o, ok, ok && two);
#endif
  }
#endif
}
