/* The reduce op family (kernel_src/rows/reduce.cu): parameters, enum
 * constants, and the tile policy's interface. */
#ifndef CKJIT_RUNTIME_OPS_REDUCE_H
#define CKJIT_RUNTIME_OPS_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "abi/reduce_args.h"
#include "ckjit/ckjit.h"
#include "runtime/spec.h"

/* Parameters of the reduce kernel family, in spec order. */
enum {
  REDUCE_DTYPE, REDUCE_OP, REDUCE_YDTYPE, REDUCE_MODE, REDUCE_VEC, REDUCE_THREADS, REDUCE_TPR,
  REDUCE_UNROLL, REDUCE_PARAM_COUNT
};

/* Values of the `op` parameter (OP_SUM ... OP_ARGMIN, in the order of
 * ckjit_reduce_op) and of `mode` (MODE_ROW, MODE_COL, MODE_COMBINE). */
enum { CKJIT_REDUCE_OPS(CKJIT_ENUM_CONSTANT) REDUCE_OP_COUNT };
enum { CKJIT_REDUCE_MODES(CKJIT_ENUM_CONSTANT) REDUCE_MODE_COUNT };
/* Values of `ydtype`, in the order of CKJIT_REDUCE_OUT_DTYPES; the float
 * ones equal the dtype parameter's values. */
enum { Y_F32, Y_F16, Y_BF16, Y_I32, Y_I64, REDUCE_YDTYPE_COUNT };

static inline int reduce_is_arg_op(int op) { return op == OP_ARGMAX || op == OP_ARGMIN; }

/* Tile policy constants (see ckjit__reduce_policy). */
enum {
  REDUCE_BLOCK_THREADS = 256,
  REDUCE_MAX_SPLIT = 1024,   /* partials per output: the combine reads them in one pass */
  REDUCE_MAX_GRID = 1 << 21, /* grid-stride beyond; keeps grid.x * block < 2^32 (HIP) */
  REDUCE_COMBINE_WIDE = 128  /* more partials than this: a whole block per output */
};

/* The reduction as the kernel sees it: outputs o < n_out over up to three
 * kept dims (dim 0 fastest along o), each with its x and y stride; the
 * reduced dim of `len` elements with x stride `rstride`. */
typedef struct reduce_problem {
  int nk;             /* kept dims (0..3) */
  int64_t n[3], xs[3], ys[3];
  int64_t n_out, len, rstride;
} reduce_problem;

/* Launch configuration chosen by the tile policy. */
typedef struct reduce_policy {
  int mode, vec, threads, tpr, unroll;
  unsigned block[3];
  int64_t work;   /* blocks' worth of work items (grid-stride beyond REDUCE_MAX_GRID) */
  int64_t nsplit; /* > 1: pass 1 writes partials, then a combine pass */
  int64_t chunk;  /* reduced elements per split */
  int combine_group; /* threads per output in the combine pass */
} reduce_policy;

/* The tile policy of a call on x (elements of `elem_size` bytes) on a GPU of
 * `sms` multiprocessors: the mode, the vector and the launch shape.  For
 * the col mode it reorders pb's kept dims (see reduce_policy.c). */
void ckjit__reduce_policy(reduce_problem *pb, const void *x, size_t elem_size, int sms,
                          reduce_policy *p);

#endif
