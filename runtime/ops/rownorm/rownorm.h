/* The rownorm op family: softmax, log-softmax, layernorm2d, rmsnorm2d,
 * rmsnorm2d_quant and smoothquant, one kernel (kernel_src/rows/rownorm.cu)
 * that reduces each row to a few statistics and then transforms it. */
#ifndef CKJIT_RUNTIME_OPS_ROWNORM_H
#define CKJIT_RUNTIME_OPS_ROWNORM_H

#include <stddef.h>
#include <stdint.h>

#include "abi/rownorm_args.h"
#include "runtime/spec.h"

/* Parameters of the rownorm kernel family, in spec order. */
enum {
  RN_DTYPE, RN_OP, RN_QTYPE, RN_RESIDUAL, RN_AFFINE, RN_THREADS, RN_ROW_THREADS, RN_VEC, RN_ITEMS,
  RN_PASS, RN_OCCUPANCY, RN_SMEM_TILE, RN_PARAM_COUNT
};

/* Values of the op, qtype, affine and pass parameters. */
enum { CKJIT_ROWNORM_OPS(CKJIT_ENUM_CONSTANT) };
enum { CKJIT_ROWNORM_QTYPES(CKJIT_ENUM_CONSTANT) };
enum { CKJIT_ROWNORM_AFFINES(CKJIT_ENUM_CONSTANT) };
enum { CKJIT_ROWNORM_PASSES(CKJIT_ENUM_CONSTANT) };

/* At most this many f32 values of a row per thread stay in registers
 * (vec * items). */
#define CKJIT_ROWNORM_MAX_VALUES_PER_THREAD 32

/* The quantizing ops write int8 / fp8 and a scale per row. */
static inline int ckjit__rownorm_is_quant(int op) {
  return op == OP_RMSNORM_QUANT || op == OP_SMOOTHQUANT;
}
/* The norms take a residual, weights and (layernorm) a bias. */
static inline int ckjit__rownorm_is_norm(int op) {
  return op == OP_LAYERNORM || op == OP_RMSNORM || op == OP_RMSNORM_QUANT;
}

/* What the tile policy looks at. */
typedef struct ckjit_rownorm_shape {
  int op;
  int64_t rows, cols;
  int vec;             /* elements per vector, from the operands' alignment */
  size_t elem_size;    /* bytes per element of x */
  int reread_operands; /* row operands the split passes read again: 1 (x), or 2 (x and the
                          residual, when their sum is not written) */
} ckjit_rownorm_shape;

/* The launch shape it picks. */
typedef struct ckjit_rownorm_policy {
  int threads, row_threads, items;
  int occupancy;          /* resident threads per SM to leave registers for */
  int smem_tile;          /* fused: the tile waits in shared memory */
  int split;              /* 0: fused, one group per row; 1: chunks over several passes */
  int64_t chunk_cols, n_chunks;
  int64_t batch_rows;     /* split: rows per round of passes */
} ckjit_rownorm_policy;

/* The tile policy (rownorm_policy.c) for a device with `multiprocessors`
 * and an L2 cache of `l2_bytes` (0: unknown). */
void ckjit__rownorm_policy(const ckjit_rownorm_shape *shape, int multiprocessors,
                           long long l2_bytes, ckjit_rownorm_policy *out);

#endif
