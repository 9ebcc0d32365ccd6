/* Reductions over one dim: validate, plan, arguments, run (with the split's
 * scratch memory and combine pass); and the public front-ends. */
#include <stdint.h>
#include <string.h>

#include "abi/reduce_args.h"
#include "base/error.h"
#include "base/int_math.h"
#include "reduce.h"
#include "runtime/dispatch.h"
#include "runtime/ops/op_frame.h"
#include "runtime/runtime.h"

static const char *const op_names[] = {CKJIT_REDUCE_OPS(CKJIT_ENUM_NAME) NULL};

typedef struct reduce_call {
  const char *api;
  ckjit_reduce_op op;
  ckjit_dtype dtype, y_dtype;
  const ckjit_tensor_layout *x_layout;
  const void *x;
  int dim;
  void *y;
  void *stream;
} reduce_call;

/* ---- validate ---------------------------------------------------------------- */

static ckjit_status check_ops(const char *api, ckjit_reduce_op op, ckjit_dtype dtype,
                              ckjit_dtype y_dtype) {
  if ((unsigned)op > CKJIT_REDUCE_ARGMIN)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: op %d is not a ckjit_reduce_op", api,
                       (int)op);
  ckjit_status st = ckjit__check_dtype(api, dtype);
  if (st) return st;
  if (!ckjit_dtype_size(y_dtype))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: y_dtype %d is not a ckjit_dtype", api,
                       (int)y_dtype);
  if (reduce_is_arg_op(op)) {
    if (y_dtype != CKJIT_I32 && y_dtype != CKJIT_I64)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                         "%s: %s writes indices: y_dtype must be i32 or i64, not %s", api,
                         op_names[op], ckjit_dtype_name(y_dtype));
  } else if (y_dtype != CKJIT_F32 && y_dtype != CKJIT_F16 && y_dtype != CKJIT_BF16) {
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: %s writes values: y_dtype must be f32, f16 or bf16, not %s", api,
                       op_names[op], ckjit_dtype_name(y_dtype));
  }
  return CKJIT_SUCCESS;
}

static ckjit_status validate(const reduce_call *c) {
  const char *api = c->api;
  const ckjit_tensor_layout *xl = c->x_layout;
  const int dim = c->dim;
  ckjit_status st = check_ops(api, c->op, c->dtype, c->y_dtype);
  if (st) return st;
  if (!xl) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: x_layout is NULL", api);
  if (!c->x) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: x is NULL", api);
  if (!c->y) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: y is NULL", api);
  if (xl->rank < 1 || xl->rank > 4)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: rank %d is not in 1..4", api, xl->rank);
  if (dim < 0 || dim >= xl->rank)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: dim %d is not in 0..%d (rank %d)", api,
                       dim, xl->rank - 1, xl->rank);
  size_t es = ckjit_dtype_size(c->dtype), ys = ckjit_dtype_size(c->y_dtype);
  int64_t extent = 0, n_out = 1, total;
  for (int d = 0; d < xl->rank; d++) {
    int64_t n = xl->shape[d], s = xl->strides[d], e;
    if (n < 1)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: shape[%d] is %lld; sizes must be >= 1",
                         api, d, (long long)n);
    if (s < 0)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: strides[%d] is %lld; strides must be "
                         ">= 0", api, d, (long long)s);
    if (__builtin_mul_overflow(n - 1, s, &e) || __builtin_add_overflow(extent, e, &extent))
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: x's extent overflows (shape[%d] %lld, "
                         "stride %lld)", api, d, (long long)n, (long long)s);
    if (d != dim && __builtin_mul_overflow(n_out, n, &n_out))
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: y has too many elements", api);
  }
  int64_t xbytes, ybytes;
  if (__builtin_add_overflow(extent, 1, &extent) ||
      __builtin_mul_overflow(extent, (int64_t)es, &xbytes) || (uint64_t)xbytes > SIZE_MAX ||
      (uintptr_t)c->x + (uint64_t)xbytes < (uintptr_t)c->x)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: x overflows the address space", api);
  if (__builtin_mul_overflow(n_out, (int64_t)ys, &ybytes) || (uint64_t)ybytes > SIZE_MAX ||
      (uintptr_t)c->y + (uint64_t)ybytes < (uintptr_t)c->y)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: y (%lld elements of %s) overflows the "
                       "address space", api, (long long)n_out, ckjit_dtype_name(c->y_dtype));
  if (__builtin_mul_overflow(n_out, xl->shape[dim], &total))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: x has more than 2^63 elements", api);
  if (c->y_dtype == CKJIT_I32 && xl->shape[dim] - 1 > INT32_MAX)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: dim %d has %lld elements: its indices "
                       "do not fit y_dtype i32 (use i64)", api, dim, (long long)xl->shape[dim]);
  const void *const operands[] = {c->x, c->y};
  static const char *const operand_names[] = {"x", "y"};
  return ckjit__check_pointers(c->stream, api, 2, operands, operand_names);
}

/* The problem of a valid call: kept dims in y's (row-major) order, size-1
 * dims dropped, neighbours merged where x walks them as one (the outer
 * stride is the inner span). */
static void problem_of(const reduce_call *c, reduce_problem *pb) {
  const ckjit_tensor_layout *xl = c->x_layout;
  memset(pb, 0, sizeof *pb);
  int64_t kn[3], ks[3], n_out = 1;
  int nk = 0;
  for (int d = 0; d < xl->rank; d++) {
    if (d == c->dim) continue;
    n_out *= xl->shape[d];
    if (xl->shape[d] == 1) continue;
    int64_t span;
    if (nk && !__builtin_mul_overflow(xl->shape[d], xl->strides[d], &span) && ks[nk - 1] == span) {
      kn[nk - 1] *= xl->shape[d];
      ks[nk - 1] = xl->strides[d];
    } else {
      kn[nk] = xl->shape[d];
      ks[nk] = xl->strides[d];
      nk++;
    }
  }
  /* Kernel order: dim 0 fastest, i.e. y's innermost first. */
  int64_t ystride = 1;
  for (int k = 0; k < nk; k++) {
    pb->n[k] = kn[nk - 1 - k];
    pb->xs[k] = ks[nk - 1 - k];
    pb->ys[k] = ystride;
    ystride *= pb->n[k];
  }
  for (int k = nk; k < 3; k++) pb->n[k] = 1;
  pb->nk = nk;
  pb->n_out = n_out;
  pb->len = xl->shape[c->dim];
  pb->rstride = xl->shape[c->dim] == 1 ? 1 : xl->strides[c->dim];
}

/* ---- plan ---------------------------------------------------------------------- */

static int32_t ydtype_param(ckjit_dtype y_dtype) {
  switch (y_dtype) {
    case CKJIT_F16: return Y_F16;
    case CKJIT_BF16: return Y_BF16;
    case CKJIT_I32: return Y_I32;
    case CKJIT_I64: return Y_I64;
    default: return Y_F32;
  }
}

static unsigned grid_of(int64_t work) {
  return (unsigned)(work < 1 ? 1 : work < REDUCE_MAX_GRID ? work : REDUCE_MAX_GRID);
}

/* Pass 1 (the row or col kernel) as the policy chose it, and the combine
 * pass that finishes a split (used only when pol->nsplit > 1). */
static void plan(const reduce_call *c, const reduce_problem *pb, const reduce_policy *pol,
                 ckjit_launch_plan *pass1, ckjit_launch_plan *combine) {
  ckjit__plan_init(pass1, CKJIT_FAMILY_REDUCE);
  int32_t *v = pass1->spec.value;
  v[REDUCE_DTYPE] = ckjit__dtype_param_value(c->dtype);
  v[REDUCE_OP] = (int32_t)c->op;
  v[REDUCE_YDTYPE] = ydtype_param(c->y_dtype);
  v[REDUCE_MODE] = pol->mode;
  v[REDUCE_VEC] = pol->vec;
  v[REDUCE_THREADS] = pol->threads;
  v[REDUCE_TPR] = pol->tpr;
  v[REDUCE_UNROLL] = pol->unroll;
  pass1->grid[0] = grid_of(pol->work);
  for (int i = 0; i < 3; i++) pass1->block[i] = pol->block[i];

  *combine = *pass1;
  v = combine->spec.value;
  v[REDUCE_DTYPE] = 0;
  v[REDUCE_MODE] = MODE_COMBINE;
  v[REDUCE_VEC] = 1;
  v[REDUCE_THREADS] = REDUCE_BLOCK_THREADS;
  v[REDUCE_TPR] = REDUCE_BLOCK_THREADS;
  v[REDUCE_UNROLL] = 4;
  combine->grid[0] = grid_of(ckjit__ceil_div(pb->n_out, REDUCE_BLOCK_THREADS / pol->combine_group));
  combine->block[0] = REDUCE_BLOCK_THREADS;
  combine->block[1] = combine->block[2] = 1;
}

/* ---- arguments ------------------------------------------------------------------- */

/* Pass 1: x into y, or into the partials pval/pidx when split. */
static ckjit_reduce_args arguments(const reduce_call *c, const reduce_problem *pb,
                                   const reduce_policy *pol, float *pval, long long *pidx) {
  return (ckjit_reduce_args){
      .x = c->x, .y = c->y, .pval = pval, .pidx = pidx, .n_out = pb->n_out, .len = pb->len,
      .rstride = pb->rstride, .count = pb->len, .n0 = pb->n[0], .n1 = pb->n[1],
      .s0 = pb->xs[0], .s1 = pb->xs[1], .s2 = pb->xs[2], .o0 = pb->ys[0], .o1 = pb->ys[1],
      .o2 = pb->ys[2], .chunk = pol->chunk, .nsplit = pol->nsplit, .group = pol->tpr};
}

/* Pass 2: output o reduces the nsplit partials at pval + o * nsplit. */
static ckjit_reduce_args combine_arguments(const reduce_call *c, const reduce_problem *pb,
                                           const reduce_policy *pol, float *pval,
                                           long long *pidx) {
  return (ckjit_reduce_args){
      .x = pval, .y = c->y, .pval = pval, .pidx = pidx, .n_out = pb->n_out, .len = pol->nsplit,
      .rstride = 1, .count = pb->len, .n0 = pb->n_out, .n1 = 1, .s0 = pol->nsplit, .s1 = 0,
      .s2 = 0, .o0 = 1, .o1 = 0, .o2 = 0, .chunk = pol->nsplit, .nsplit = 1,
      .group = pol->combine_group};
}

/* ---- run ---------------------------------------------------------------------- */

static ckjit_status reduce_run(const reduce_call *c) {
  void *stream = c->stream;
  ckjit_gpu *gpu;
  ckjit_status st = validate(c);
  if (st || (st = ckjit__stream_gpu(stream, &gpu))) return st;
  reduce_problem pb;
  problem_of(c, &pb);
  reduce_policy pol;
  ckjit__reduce_policy(&pb, c->x, ckjit_dtype_size(c->dtype), gpu->device.multiprocessors, &pol);
  ckjit_launch_plan pass1, combine;
  plan(c, &pb, &pol, &pass1, &combine);

  /* Both kernels before any allocation or launch. */
  ckjit_kernel *k1, *k2 = NULL;
  if ((st = ckjit__kernel_get(gpu, &pass1.spec, &k1))) return st;
  if (pol.nsplit > 1 && (st = ckjit__kernel_get(gpu, &combine.spec, &k2))) return st;

  void *scratch = NULL;
  float *pval = NULL;
  long long *pidx = NULL;
  const int arg = reduce_is_arg_op(c->op);
  if (pol.nsplit > 1) {
    size_t n = (size_t)pb.n_out * (size_t)pol.nsplit, vbytes = (n * sizeof(float) + 15) & ~(size_t)15;
    if ((st = ckjit__scratch_alloc(gpu, vbytes + (arg ? n * sizeof(long long) : 0), stream, &scratch)))
      return st;
    pval = scratch;
    pidx = arg ? (long long *)((char *)scratch + vbytes) : NULL;
  }

  const ckjit_reduce_args args = arguments(c, &pb, &pol, pval, pidx);
  st = ckjit__kernel_launch(gpu, k1, pass1.grid, pass1.block, 1, pass1.shared_bytes, stream, &args,
                            &ckjit_reduce_args_params);
  if (pol.nsplit > 1) {
    if (st == CKJIT_SUCCESS) {
      const ckjit_reduce_args cargs = combine_arguments(c, &pb, &pol, pval, pidx);
      st = ckjit__kernel_launch(gpu, k2, combine.grid, combine.block, 1, combine.shared_bytes, stream,
                                &cargs, &ckjit_reduce_args_params);
    }
    /* Stream-ordered: freed after the kernels that use it. */
    ckjit_status fst = ckjit__scratch_free(gpu, scratch, stream);
    if (st == CKJIT_SUCCESS) st = fst;
  }
  return st;
}

/* ---- front-ends ---------------------------------------------------------------- */

ckjit_status ckjit_reduce(ckjit_reduce_op op, ckjit_dtype dtype, const ckjit_tensor_layout *x_layout,
                          const void *x, int dim, ckjit_dtype y_dtype, void *y, void *stream) {
  const reduce_call c = {.api = "ckjit_reduce", .op = op, .dtype = dtype, .y_dtype = y_dtype,
                         .x_layout = x_layout, .x = x, .dim = dim, .y = y, .stream = stream};
  return reduce_run(&c);
}

ckjit_status ckjit_reduce_rows(ckjit_reduce_op op, ckjit_dtype dtype, int64_t rows, int64_t cols,
                               const void *x, int64_t ld_x, ckjit_dtype y_dtype, void *y,
                               void *stream) {
  const char *api = "ckjit_reduce_rows";
  ckjit_status st = check_ops(api, op, dtype, y_dtype);
  if (st) return st;
  if ((st = ckjit__check_matrix(api, "x", x, rows, cols, ld_x, ckjit_dtype_size(dtype)))) return st;
  ckjit_tensor_layout xl;
  memset(&xl, 0, sizeof xl);
  xl.rank = 2;
  xl.shape[0] = rows;
  xl.shape[1] = cols;
  xl.strides[0] = ld_x;
  xl.strides[1] = 1;
  const reduce_call c = {.api = api, .op = op, .dtype = dtype, .y_dtype = y_dtype,
                         .x_layout = &xl, .x = x, .dim = 1, .y = y, .stream = stream};
  return reduce_run(&c);
}
