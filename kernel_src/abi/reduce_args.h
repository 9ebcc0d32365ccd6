/* The reduce family across the host/kernel boundary (see abi.h). */
#ifndef CKJIT_KERNEL_ABI_REDUCE_ARGS_H
#define CKJIT_KERNEL_ABI_REDUCE_ARGS_H

#include "abi/abi.h"

/* In the order of the public ckjit_reduce_op. */
#define CKJIT_REDUCE_OPS(X)                                                    \
  X(OP_SUM, sum) X(OP_MEAN, mean) X(OP_MAX, max) X(OP_MIN, min)                \
  X(OP_ARGMAX, argmax) X(OP_ARGMIN, argmin)

/* row: the reduced dim is contiguous (or innermost); col: it is strided;
 * combine: pass 2 of a reduction split over blocks. */
#define CKJIT_REDUCE_MODES(X) X(MODE_ROW, row) X(MODE_COL, col) X(MODE_COMBINE, combine)

/* Output types (C++ type, name): the float dtypes, or indices for arg ops. */
#define CKJIT_REDUCE_OUT_DTYPES(X)                                             \
  X(float, f32) X(ckjit_half, f16) X(ckjit_bf16, bf16) X(int, i32) X(long long, i64)

/* One parameter list for every mode (rows/reduce.cu explains the problem).
 * Output o < n_out sits at x offset i0*s0 + i1*s1 + i2*s2 and y offset
 * i0*o0 + i1*o1 + i2*o2 (elements), i0 = o % n0, i1 = o / n0 % n1,
 * i2 = o / (n0*n1); the reduced dim has `len` elements of x stride
 * `rstride`; `count` is mean's divisor.  With nsplit > 1 pass 1 reduces
 * chunks of `chunk` elements into the f32 partials pval (indices in pidx)
 * and the combine pass reads them as its x; `group` is the combine pass's
 * threads per output (ignored by the other modes). */
#define CKJIT_REDUCE_ARGS(X)  \
  X(const void *, x, 0)       \
  X(void *, y, 8)             \
  X(float *, pval, 16)        \
  X(long long *, pidx, 24)    \
  X(long long, n_out, 32)     \
  X(long long, len, 40)       \
  X(long long, rstride, 48)   \
  X(long long, count, 56)     \
  X(long long, n0, 64)        \
  X(long long, n1, 72)        \
  X(long long, s0, 80)        \
  X(long long, s1, 88)        \
  X(long long, s2, 96)        \
  X(long long, o0, 104)       \
  X(long long, o1, 112)       \
  X(long long, o2, 120)       \
  X(long long, chunk, 128)    \
  X(long long, nsplit, 136)   \
  X(long long, group, 144)
CKJIT_ABI_STRUCT(ckjit_reduce_args, CKJIT_REDUCE_ARGS, 152)

#endif
