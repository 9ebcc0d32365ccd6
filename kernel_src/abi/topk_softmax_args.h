/* The topk_softmax family across the host/kernel boundary (see abi.h). */
#ifndef CKJIT_KERNEL_ABI_TOPK_SOFTMAX_ARGS_H
#define CKJIT_KERNEL_ABI_TOPK_SOFTMAX_ARGS_H

#include "abi/abi.h"

/* For each token t < tokens (row stride ld_x, elements): the k largest of
 * softmax(x[t][0 .. experts)) into weights[t*k + i] (f32, renormalized to
 * sum 1 when `renormalize`) and indices[t*k + i] (int64 when index_i64,
 * else int32). */
#define CKJIT_TOPK_SOFTMAX_ARGS(X) \
  X(const void *, x, 0)            \
  X(long long, ld_x, 8)            \
  X(long long, tokens, 16)         \
  X(int, experts, 24)              \
  X(int, k, 28)                    \
  X(int, renormalize, 32)          \
  X(float *, weights, 40)          \
  X(void *, indices, 48)           \
  X(int, index_i64, 56)
/* The list ends at byte 60, the struct (4 bytes of tail padding) at 64. */
CKJIT_ABI_STRUCT(ckjit_topk_softmax_args, CKJIT_TOPK_SOFTMAX_ARGS, 64)

#endif
