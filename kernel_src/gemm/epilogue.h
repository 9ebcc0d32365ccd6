// GEMM epilogue, shared by every pipeline: alpha, beta * C, bias, D0,
// activation, D1 and the cast to TC; or, with SPLIT, the raw f32 partials
// of a split-K slice (gemm/reduce.cu applies the epilogue to their sum).
//
// A pipeline defines before including this:
//   TC                output element type
//   BIAS, ACT         a BIAS_* and an ACT_* constant (abi/gemm_args.h)
//   HAS_C, HAS_D0, HAS_D1, SPLIT   0 or 1
// and gets epilogue_values(), epilogue(), and store_pair() / store_one(),
// which route to the epilogue or, with SPLIT, to the f32 partials.
#pragma once
#include "core/activations.h"
#include "gemm/problem.h"

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
