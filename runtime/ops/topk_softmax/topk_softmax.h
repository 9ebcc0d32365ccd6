/* The topk_softmax op family (MoE gating; kernel_src/rows/topk_softmax.cu):
 * the parameters, and the pieces of the tile policy that the default set
 * shares. */
#ifndef CKJIT_RUNTIME_OPS_TOPK_SOFTMAX_H
#define CKJIT_RUNTIME_OPS_TOPK_SOFTMAX_H

#include <stdint.h>

#include "runtime/ops/op_frame.h"
#include "runtime/spec.h"

/* Parameters of the topk_softmax kernel family, in spec order.  k,
 * renormalize and the index dtype are kernel arguments, not parameters:
 * each (dtype, experts class, vec) compiles once and serves them all. */
enum { TOPK_DTYPE, TOPK_EXPERTS, TOPK_LANES, TOPK_VEC, TOPK_THREADS, TOPK_PARAM_COUNT };

/* Experts are rounded up to a power-of-two class of at least
 * TOPK_MIN_CLASS (the tail is masked); k <= TOPK_MAX_K. */
enum { TOPK_MAX_EXPERTS = 256, TOPK_MAX_K = 8, TOPK_MIN_CLASS = 8 };

/* Eight lanes per token for every class: the work of the selection rounds
 * scales with the values scanned (the same for any split) plus
 * lanes * log2(lanes) for the shuffles, so the narrowest group that can
 * keep the k <= 8 results one per lane is the cheapest; 8 lanes of 16-byte
 * vectors also read one 128-byte line per load.  256 experts give 32 values
 * per lane, well inside the register budget. */
static inline int topk_policy_lanes(int experts_class) {
  (void)experts_class;
  return 8;
}

/* The widest vector for the dtype: 16 bytes, at most the values per lane. */
static inline int topk_widest_vec(int32_t dtype_value, int experts_class, int lanes) {
  return ckjit__widest_vec(ckjit__dtype_param_size(dtype_value), experts_class / lanes);
}

#endif
