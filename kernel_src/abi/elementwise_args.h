/* The elementwise family across the host/kernel boundary (see abi.h). */
#ifndef CKJIT_KERNEL_ABI_ELEMENTWISE_ARGS_H
#define CKJIT_KERNEL_ABI_ELEMENTWISE_ARGS_H

#include "abi/abi.h"

/* Ops: unary ones first, then binary ones (the kernel reads b only for
 * these). */
#define CKJIT_ELEMENTWISE_OPS(X)                                               \
  X(OP_IDENTITY, identity) X(OP_RELU, relu) X(OP_GELU_TANH, gelu_tanh)          \
  X(OP_GELU_ERF, gelu_erf) X(OP_SILU, silu) X(OP_SIGMOID, sigmoid)              \
  X(OP_ADD, add) X(OP_SUB, sub) X(OP_MUL, mul) X(OP_DIV, div) X(OP_MAX, max)    \
  X(OP_MIN, min)

#define CKJIT_ELEMENTWISE_EPILOGUES(X) X(EPILOGUE_NONE, none) X(EPILOGUE_SCALE_BIAS, scale_bias)

/* y[r][c] = epilogue(op(a[r][c], b[r][c])); strides in elements. */
#define CKJIT_ELEMENTWISE_ARGS(X) \
  X(const void *, a, 0)           \
  X(long long, lda, 8)            \
  X(const void *, b, 16)          \
  X(long long, ldb, 24)           \
  X(void *, y, 32)                \
  X(long long, ldy, 40)           \
  X(long long, rows, 48)          \
  X(long long, cols, 56)          \
  X(float, scale, 64)             \
  X(float, bias, 68)
CKJIT_ABI_STRUCT(ckjit_elementwise_args, CKJIT_ELEMENTWISE_ARGS, 72)

#endif
