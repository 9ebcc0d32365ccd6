/* The rownorm family across the host/kernel boundary (see abi.h). */
#ifndef CKJIT_KERNEL_ABI_ROWNORM_ARGS_H
#define CKJIT_KERNEL_ABI_ROWNORM_ARGS_H

#include "abi/abi.h"

#define CKJIT_ROWNORM_OPS(X)                                                   \
  X(OP_SOFTMAX, softmax) X(OP_LOG_SOFTMAX, log_softmax) X(OP_LAYERNORM, layernorm) \
  X(OP_RMSNORM, rmsnorm) X(OP_RMSNORM_QUANT, rmsnorm_quant) X(OP_SMOOTHQUANT, smoothquant)

/* The quantized output of rmsnorm_quant and smoothquant. */
#define CKJIT_ROWNORM_QTYPES(X) X(Q_NONE, none) X(Q_I8, i8) X(Q_FP8_E4M3, fp8_e4m3)

#define CKJIT_ROWNORM_AFFINES(X)                                               \
  X(AFFINE_NONE, none) X(AFFINE_WEIGHT, weight) X(AFFINE_WEIGHT_BIAS, weight_bias)

/* fused: one pass with the row on chip; the others split a row in chunks. */
#define CKJIT_ROWNORM_PASSES(X)                                                \
  X(PASS_FUSED, fused) X(PASS_STATS, stats) X(PASS_AMAX, amax) X(PASS_APPLY, apply)

/* One parameter list for every op and pass (rows/rownorm.cu explains the
 * problem).  Strides in elements.  x (+ res when non-NULL, the sum written
 * to sum_out when that is non-NULL) is the row input; weight, bias (norms)
 * and smooth (smoothquant, f32) are per column; y is the output, of the
 * input type or the quantized one; mean_out, rstd_out and row_scale take
 * one float per row when non-NULL; valid_cols (softmax, one per row, may be
 * NULL) masks the columns at and past it.  alpha is the softmax scale or
 * the norms' eps.  The split passes fold `partials` (scratch memory: 2
 * floats per chunk, then one max |y| per chunk for rmsnorm_quant) over
 * n_chunks chunks of chunk_cols columns. */
#define CKJIT_ROWNORM_ARGS(X)       \
  X(const void *, x, 0)             \
  X(long long, ld_x, 8)             \
  X(const void *, res, 16)          \
  X(long long, ld_res, 24)          \
  X(void *, sum_out, 32)            \
  X(long long, ld_sum, 40)          \
  X(const void *, weight, 48)       \
  X(const void *, bias, 56)         \
  X(const float *, smooth, 64)      \
  X(void *, y, 72)                  \
  X(long long, ld_y, 80)            \
  X(float *, mean_out, 88)          \
  X(float *, rstd_out, 96)          \
  X(float *, row_scale, 104)        \
  X(const int *, valid_cols, 112)   \
  X(float, alpha, 120)              \
  X(float *, partials, 128)         \
  X(long long, rows, 136)           \
  X(long long, cols, 144)           \
  X(long long, chunk_cols, 152)     \
  X(long long, n_chunks, 160)
/* alpha is followed by 4 bytes of padding (partials is 8-byte aligned), as
 * in the kernel's parameter list; the list ends on an 8-byte field, so the
 * struct has no tail padding. */
CKJIT_ABI_STRUCT(ckjit_rownorm_args, CKJIT_ROWNORM_ARGS, 168)

#endif
