// The reduce family's op arithmetic, for rows/reduce.cu (included after its
// parameters and its i64): the identity of OP, and the merges that fold a
// (value, index) pair into a thread's state.
#pragma once

#define IS_ARG (OP >= OP_ARGMAX)
#define NO_INDEX 0x7fffffffffffffffLL // loses every tie

CKJIT_INLINE float identity() {
#if OP == OP_MAX || OP == OP_ARGMAX
  return __uint_as_float(0xff800000u); // -inf
#elif OP == OP_MIN || OP == OP_ARGMIN
  return __uint_as_float(0x7f800000u); // +inf
#else
  return 0.0f;
#endif
}

// (v, i) = OP((v, i), (bv, bi)).  Arg ops keep the element that comes first
// in PyTorch's order: a NaN before any number (the lower index among NaNs),
// then the larger (argmax) / smaller (argmin) value, ties to the lower index.
// Total and order-free, so any combining tree gives the same answer.
CKJIT_INLINE void merge(float &v, i64 &i, float bv, i64 bi) {
#if OP == OP_SUM || OP == OP_MEAN
  v += bv;
#elif OP == OP_MAX
  v = ckjit_nan_max(v, bv);
#elif OP == OP_MIN
  v = ckjit_nan_min(v, bv);
#else
  const bool an = v != v, bn = bv != bv;
#if OP == OP_ARGMAX
  const bool wins = bv > v;
#else
  const bool wins = bv < v;
#endif
  const bool tie = (bv == v) | (an & bn);
  const bool take = (bn & !an) | ((an == bn) & (wins | (tie & (bi < i)))); // no branches
  v = take ? bv : v;
  i = take ? bi : i;
#endif
}

// merge() for a thread's own scan, which visits indices in increasing order:
// only a strictly better value replaces the state, so ties keep the earlier
// index without comparing indices.  The state starts as (identity, the
// scan's first index), which covers a scan of identity values.  Values
// loaded past the end are the identity and never replace the state.
CKJIT_INLINE void merge_seq(float &v, i64 &i, float bv, i64 bi) {
#if IS_ARG
#if OP == OP_ARGMAX
  const bool take = !(bv <= v) && v == v; // bv larger, or the first NaN
#else
  const bool take = !(bv >= v) && v == v;
#endif
  if (take) {
    v = bv;
    i = bi;
  }
#else
  merge(v, i, bv, bi);
#endif
}
