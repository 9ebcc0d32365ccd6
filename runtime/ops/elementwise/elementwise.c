/* Elementwise ops: validate, plan, arguments, run; and the unary / binary
 * front-ends (copy2d is in copy.c). */
#include "elementwise.h"

#include <stdint.h>

#include "abi/elementwise_args.h"
#include "base/error.h"
#include "base/int_math.h"
#include "runtime/ops/op_frame.h"

typedef struct elementwise_call {
  const char *api;
  int op;
  ckjit_dtype dtype;
  int64_t rows, cols;
  const void *a, *b;
  void *y;
  int64_t ld_a, ld_b, ld_y;
  const ckjit_epilogue *epilogue;
  void *stream;
} elementwise_call;

static int is_binary(const elementwise_call *c) { return c->op >= CKJIT_EW_BINARY_FIRST; }

static ckjit_status validate(const elementwise_call *c) {
  ckjit_status st = ckjit__check_dtype(c->api, c->dtype);
  if (st) return st;
  size_t es = ckjit_dtype_size(c->dtype);
  int binary = is_binary(c);
  if ((st = ckjit__check_matrix(c->api, binary ? "a" : "x", c->a, c->rows, c->cols, c->ld_a, es)))
    return st;
  if (binary && (st = ckjit__check_matrix(c->api, "b", c->b, c->rows, c->cols, c->ld_b, es)))
    return st;
  if ((st = ckjit__check_matrix(c->api, "y", c->y, c->rows, c->cols, c->ld_y, es))) return st;
  const void *const operands[] = {c->a, c->b, c->y};
  static const char *const operand_names[] = {"x", "b", "y"};
  return ckjit__check_pointers(c->stream, c->api, 3, operands, operand_names);
}

/* Reshapes the call where that is free: a unary op reads a as b, and
 * contiguous tensors are one long row (no per-row tails). */
static void normalize(elementwise_call *c) {
  if (!is_binary(c)) c->b = c->a, c->ld_b = c->ld_a;
  if (c->rows > 1 && c->ld_a == c->cols && c->ld_b == c->cols && c->ld_y == c->cols) {
    c->cols *= c->rows;
    c->rows = 1;
    c->ld_a = c->ld_b = c->ld_y = c->cols;
  }
}

/* Tile policy: the widest vector the pointers and strides allow, 256
 * threads, one vector per thread (bench/NOTES.md: unroll 2 and 4 were no
 * faster and slow the compile).  Blocks walk column chunks (x) and rows (y),
 * grid-stride past the grid limits. */
static void plan(const elementwise_call *c, ckjit_launch_plan *p) {
  const void *ptrs[3] = {c->a, c->b, c->y};
  const int64_t strides[3] = {c->ld_a, c->ld_b, c->ld_y};
  const int vec = ckjit__pick_vec(ckjit_dtype_size(c->dtype), ptrs, 3, strides, c->rows > 1 ? 3 : 0, 16);
  const int threads = 256, unroll = 1;
  ckjit__plan_init(p, CKJIT_FAMILY_ELEMENTWISE);
  int32_t *v = p->spec.value;
  v[EW_DTYPE] = ckjit__dtype_param_value(c->dtype);
  v[EW_OP] = c->op;
  v[EW_EPILOGUE] = c->epilogue != NULL;
  v[EW_VEC] = vec;
  v[EW_THREADS] = threads;
  v[EW_UNROLL] = unroll;
  p->grid[0] = ckjit__grid_x(ckjit__ceil_div(c->cols, (int64_t)threads * vec * unroll));
  p->grid[1] = ckjit__grid_yz(c->rows);
  p->block[0] = (unsigned)threads;
}

static ckjit_elementwise_args arguments(const elementwise_call *c) {
  const ckjit_epilogue *e = c->epilogue;
  return (ckjit_elementwise_args){
      .a = c->a, .lda = c->ld_a, .b = c->b, .ldb = c->ld_b, .y = c->y, .ldy = c->ld_y,
      .rows = c->rows, .cols = c->cols, .scale = e ? e->scale : 1.0f, .bias = e ? e->bias : 0.0f};
}

ckjit_status ckjit__elementwise(const char *api, int ew_op, ckjit_dtype dtype, int64_t rows,
                                int64_t cols, const void *a, int64_t ld_a, const void *b,
                                int64_t ld_b, void *y, int64_t ld_y,
                                const ckjit_epilogue *epilogue, void *stream) {
  elementwise_call c = {.api = api, .op = ew_op, .dtype = dtype, .rows = rows, .cols = cols,
                        .a = a, .b = b, .y = y, .ld_a = ld_a, .ld_b = ld_b, .ld_y = ld_y,
                        .epilogue = epilogue, .stream = stream};
  ckjit_gpu *gpu;
  ckjit_status st = validate(&c);
  if (st || (st = ckjit__stream_gpu(stream, &gpu))) return st;
  normalize(&c);
  ckjit_launch_plan p;
  plan(&c, &p);
  const ckjit_elementwise_args args = arguments(&c);
  return ckjit__op_run(gpu, &p, &args, &ckjit_elementwise_args_params, stream);
}

ckjit_status ckjit_unary(ckjit_unary_op op, ckjit_dtype dtype, int64_t rows, int64_t cols,
                         const void *x, int64_t ld_x, void *y, int64_t ld_y,
                         const ckjit_epilogue *epilogue, void *stream) {
  if ((unsigned)op >= CKJIT_EW_BINARY_FIRST)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_unary: op %d is not a ckjit_unary_op",
                       (int)op);
  return ckjit__elementwise("ckjit_unary", CKJIT_EW_UNARY_FIRST + (int)op, dtype, rows, cols, x,
                            ld_x, NULL, 0, y, ld_y, epilogue, stream);
}

ckjit_status ckjit_binary(ckjit_binary_op op, ckjit_dtype dtype, int64_t rows, int64_t cols,
                          const void *a, int64_t ld_a, const void *b, int64_t ld_b, void *y,
                          int64_t ld_y, const ckjit_epilogue *epilogue, void *stream) {
  if ((unsigned)op >= CKJIT_EW_OP_COUNT - CKJIT_EW_BINARY_FIRST)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_binary: op %d is not a ckjit_binary_op",
                       (int)op);
  return ckjit__elementwise("ckjit_binary", CKJIT_EW_BINARY_FIRST + (int)op, dtype, rows, cols, a,
                            ld_a, b, ld_b, y, ld_y, epilogue, stream);
}
