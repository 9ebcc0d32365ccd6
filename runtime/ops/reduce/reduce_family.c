/* The reduce kernel family (kernel_src/rows/reduce.cu): parameters, spec
 * checks and the default set.
 *
 * One kernel template with three modes: `row` (the reduced dim is
 * contiguous or the innermost), `col` (it is strided: threads run along the
 * kept dim of smallest stride) and `combine` (pass 2 of a reduction split
 * over blocks).  See the top of reduce.cu for the problem. */
#include <string.h>

#include "abi/reduce_args.h"
#include "base/error.h"
#include "base/int_math.h"
#include "reduce.h"
#include "runtime/ops/op_frame.h"
#include "runtime/spec.h"

CKJIT_ENUM_TABLES(op, CKJIT_REDUCE_OPS)
CKJIT_ENUM_TABLES(mode, CKJIT_REDUCE_MODES)
static const char *const ydtype_names[] = {CKJIT_REDUCE_OUT_DTYPES(CKJIT_TYPE_NAME) NULL};
static const char *const ydtype_types[] = {CKJIT_REDUCE_OUT_DTYPES(CKJIT_TYPE_CXX) NULL};
_Static_assert(OP_SUM == (int)CKJIT_REDUCE_SUM && OP_MEAN == (int)CKJIT_REDUCE_MEAN &&
                   OP_MAX == (int)CKJIT_REDUCE_MAX && OP_MIN == (int)CKJIT_REDUCE_MIN &&
                   OP_ARGMAX == (int)CKJIT_REDUCE_ARGMAX && OP_ARGMIN == (int)CKJIT_REDUCE_ARGMIN &&
                   REDUCE_OP_COUNT == (int)CKJIT_REDUCE_ARGMIN + 1,
               "CKJIT_REDUCE_OPS: in the order of ckjit_reduce_op, as in ckjit.h");
_Static_assert(sizeof ydtype_names / sizeof ydtype_names[0] == REDUCE_YDTYPE_COUNT + 1,
               "Y_F32 ... Y_I64: one per CKJIT_REDUCE_OUT_DTYPES");

static const ckjit_param_desc params[REDUCE_PARAM_COUNT] = {
    [REDUCE_DTYPE] = CKJIT_DTYPE_PARAM,
    [REDUCE_OP] = CKJIT_ENUM_PARAM("op", op, 0),
    [REDUCE_YDTYPE] = {.name = "ydtype", .names = ydtype_names, .types = ydtype_types},
    [REDUCE_MODE] = CKJIT_ENUM_PARAM("mode", mode, 0),
    [REDUCE_VEC] = CKJIT_INT_PARAM("vec", 1, 16, 4),
    [REDUCE_THREADS] = CKJIT_INT_PARAM("threads", 32, 1024, 256),
    [REDUCE_TPR] = CKJIT_INT_PARAM("tpr", 1, 1024, 256),
    [REDUCE_UNROLL] = CKJIT_INT_PARAM("unroll", 1, 8, 4),
};

static ckjit_status check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  const int arg = reduce_is_arg_op(v[REDUCE_OP]), mode = v[REDUCE_MODE];
  if (arg != (v[REDUCE_YDTYPE] >= Y_I32))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: reduce op=%s needs ydtype=%s",
                       op_names[v[REDUCE_OP]], arg ? "i32|i64" : "f32|f16|bf16");
  if (!ckjit__is_pow2(v[REDUCE_VEC]) ||
      (size_t)v[REDUCE_VEC] * ckjit__dtype_param_size(v[REDUCE_DTYPE]) > 16)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: reduce vec=%d must be a power of two of at most 16 bytes",
                       v[REDUCE_VEC]);
  if (!ckjit__is_pow2(v[REDUCE_THREADS]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: reduce threads=%d is not a power of two",
                       v[REDUCE_THREADS]);
  if (!ckjit__is_pow2(v[REDUCE_TPR]) || v[REDUCE_TPR] > v[REDUCE_THREADS])
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: reduce tpr=%d must be a power of two of at most threads=%d",
                       v[REDUCE_TPR], v[REDUCE_THREADS]);
  /* col and combine choose their thread layout at run time: tpr is fixed to
   * `threads` so that each kernel has one spelling. */
  if (mode != MODE_ROW && v[REDUCE_TPR] != v[REDUCE_THREADS])
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: reduce mode=%s needs tpr=threads",
                       mode_names[mode]);
  if (mode == MODE_COMBINE && (v[REDUCE_DTYPE] != 0 || v[REDUCE_VEC] != 1))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: reduce mode=combine reads f32 partials: needs dtype=f32,vec=1");
  if (mode == MODE_COL &&
      (size_t)v[REDUCE_THREADS] * (size_t)v[REDUCE_VEC] * (arg ? 12u : 4u) > 48 * 1024)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: reduce mode=col with threads=%d vec=%d needs more than 48 KiB of "
                       "shared memory",
                       v[REDUCE_THREADS], v[REDUCE_VEC]);
  return CKJIT_SUCCESS;
}

static int32_t widest_vec(int32_t dtype) {
  return ckjit__widest_vec(ckjit__dtype_param_size(dtype), 16);
}

/* Default set: the row kernel of the long-row class (a block per row, which
 * the split uses too) per op and dtype, with torch's output dtype (the
 * input's; i64 indices); then the combine pass per op and those outputs;
 * then the column kernel (a strided reduced dim) per op and dtype, scalar
 * and widest vector. */
enum { N_DEFAULT_ROW = 3 * 6, N_DEFAULT_COMBINE = 4 * 3 + 2, N_DEFAULT_COL = 3 * 6 * 2 };

static int default_spec(size_t index, ckjit_spec *out) {
  if (index >= N_DEFAULT_ROW + N_DEFAULT_COMBINE + N_DEFAULT_COL) return 0;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_REDUCE;
  int32_t *v = out->value;
  v[REDUCE_THREADS] = REDUCE_BLOCK_THREADS;
  v[REDUCE_TPR] = REDUCE_BLOCK_THREADS;
  v[REDUCE_UNROLL] = 4;
  if (index < N_DEFAULT_ROW) {
    int32_t dtype = (int32_t)(index / 6), op = (int32_t)(index % 6);
    v[REDUCE_DTYPE] = dtype;
    v[REDUCE_OP] = op;
    v[REDUCE_YDTYPE] = reduce_is_arg_op(op) ? Y_I64 : dtype;
    v[REDUCE_MODE] = MODE_ROW;
    v[REDUCE_VEC] = widest_vec(dtype);
  } else if (index >= N_DEFAULT_ROW + N_DEFAULT_COMBINE) {
    size_t i = index - N_DEFAULT_ROW - N_DEFAULT_COMBINE;
    int32_t dtype = (int32_t)(i / 12), op = (int32_t)(i % 12 / 2);
    v[REDUCE_DTYPE] = dtype;
    v[REDUCE_OP] = op;
    v[REDUCE_YDTYPE] = reduce_is_arg_op(op) ? Y_I64 : dtype;
    v[REDUCE_MODE] = MODE_COL;
    v[REDUCE_VEC] = i % 2 ? widest_vec(dtype) : 1;
  } else {
    size_t i = index - N_DEFAULT_ROW;
    v[REDUCE_DTYPE] = 0;
    v[REDUCE_MODE] = MODE_COMBINE;
    v[REDUCE_VEC] = 1;
    if (i < 12) {
      v[REDUCE_OP] = (int32_t)(i / 3);
      v[REDUCE_YDTYPE] = (int32_t)(i % 3);
    } else {
      v[REDUCE_OP] = i == 12 ? OP_ARGMAX : OP_ARGMIN;
      v[REDUCE_YDTYPE] = Y_I64;
    }
  }
  return 1;
}

/* An omitted vec is the widest 16-byte vector of the dtype, as the policy
 * picks for aligned data (1 for combine, which reads scalars). */
static void complete(ckjit_spec *s, unsigned given) {
  if (!(given & (1u << REDUCE_VEC)))
    s->value[REDUCE_VEC] =
        s->value[REDUCE_MODE] == MODE_COMBINE ? 1 : widest_vec(s->value[REDUCE_DTYPE]);
}

const ckjit_family ckjit__family_reduce = {
    .name = "reduce",
    .source = "rows/reduce.cu",
    .kernel = "ckjit_reduce",
    .n_params = REDUCE_PARAM_COUNT,
    .params = params,
    .check = check,
    .default_spec = default_spec,
    .complete = complete,
};
