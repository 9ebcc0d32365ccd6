/* The transpose family across the host/kernel boundary (see abi.h). */
#ifndef CKJIT_KERNEL_ABI_TRANSPOSE_ARGS_H
#define CKJIT_KERNEL_ABI_TRANSPOSE_ARGS_H

#include "abi/abi.h"

/* out_b[c][r] = in_b[r][c] for b < batch: in_b is rows x cols (row stride
 * ld_in), out_b cols x rows (row stride ld_out); batch strides bs_in,
 * bs_out; all in elements. */
#define CKJIT_TRANSPOSE_ARGS(X) \
  X(const void *, in, 0)        \
  X(long long, ld_in, 8)        \
  X(long long, bs_in, 16)       \
  X(void *, out, 24)            \
  X(long long, ld_out, 32)      \
  X(long long, bs_out, 40)      \
  X(long long, rows, 48)        \
  X(long long, cols, 56)        \
  X(long long, batch, 64)
CKJIT_ABI_STRUCT(ckjit_transpose_args, CKJIT_TRANSPOSE_ARGS, 72)

#endif
