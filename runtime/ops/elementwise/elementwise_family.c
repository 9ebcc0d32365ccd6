/* The elementwise kernel family (kernel_src/elementwise/elementwise.cu): parameters,
 * spec checks and the default set. */
#include <string.h>

#include "abi/elementwise_args.h"
#include "base/error.h"
#include "base/int_math.h"
#include "elementwise.h"
#include "runtime/ops/op_frame.h"
#include "runtime/spec.h"

CKJIT_ENUM_TABLES(op, CKJIT_ELEMENTWISE_OPS)
CKJIT_ENUM_TABLES(epilogue, CKJIT_ELEMENTWISE_EPILOGUES)
_Static_assert((int)OP_SIGMOID - (int)OP_IDENTITY == (int)CKJIT_UNARY_SIGMOID &&
                   (int)OP_MIN - (int)OP_ADD == (int)CKJIT_BINARY_MIN && OP_MIN + 1 == CKJIT_EW_OP_COUNT,
               "CKJIT_ELEMENTWISE_OPS: the unary ops, then the binary ones, as in ckjit.h");

static const ckjit_param_desc params[EW_PARAM_COUNT] = {
    [EW_DTYPE] = CKJIT_DTYPE_PARAM,
    [EW_OP] = CKJIT_ENUM_PARAM("op", op, 0),
    [EW_EPILOGUE] = CKJIT_ENUM_PARAM("epilogue", epilogue, 0),
    [EW_VEC] = CKJIT_INT_PARAM("vec", 1, 16, 4),
    [EW_THREADS] = CKJIT_INT_PARAM("threads", 32, 1024, 256),
    [EW_UNROLL] = CKJIT_INT_PARAM("unroll", 1, 8, 1),
};

static ckjit_status check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  if (!ckjit__is_pow2(v[EW_VEC]) || (size_t)v[EW_VEC] * ckjit__dtype_param_size(v[EW_DTYPE]) > 16)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: elementwise vec=%d must be a power of two of at most 16 bytes",
                       v[EW_VEC]);
  if (v[EW_THREADS] % 32)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: threads=%d is not a multiple of 32",
                       v[EW_THREADS]);
  if (!ckjit__is_pow2(v[EW_UNROLL]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: unroll=%d is not a power of two",
                       v[EW_UNROLL]);
  return CKJIT_SUCCESS;
}

/* Default set: every op for every dtype on the vectorized fast path. */
static int default_spec(size_t index, ckjit_spec *out) {
  if (index >= 3 * CKJIT_EW_OP_COUNT) return 0;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_ELEMENTWISE;
  int dtype = (int)(index / CKJIT_EW_OP_COUNT), op = (int)(index % CKJIT_EW_OP_COUNT);
  out->value[EW_DTYPE] = dtype;
  out->value[EW_OP] = op;
  out->value[EW_EPILOGUE] = 0;
  out->value[EW_VEC] = ckjit__widest_vec(ckjit__dtype_param_size(dtype), 16);
  out->value[EW_THREADS] = 256;
  out->value[EW_UNROLL] = 1;
  return 1;
}

/* An omitted vec is the widest 16-byte vector of the dtype, as the policy picks. */
static void complete(ckjit_spec *s, unsigned given) {
  if (!(given & (1u << EW_VEC)))
    s->value[EW_VEC] = ckjit__widest_vec(ckjit__dtype_param_size(s->value[EW_DTYPE]), 16);
}

const ckjit_family ckjit__family_elementwise = {
    .name = "elementwise",
    .source = "elementwise/elementwise.cu",
    .kernel = "ckjit_elementwise",
    .n_params = EW_PARAM_COUNT,
    .params = params,
    .check = check,
    .default_spec = default_spec,
    .complete = complete,
};
