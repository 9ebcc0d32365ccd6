/* The transpose kernel family (kernel_src/elementwise/transpose.cu):
 * parameters, spec checks and the default set. */
#include <string.h>

#include "base/error.h"
#include "base/int_math.h"
#include "runtime/ops/op_frame.h"
#include "runtime/spec.h"
#include "transpose.h"

static const ckjit_param_desc params[TRANSPOSE_PARAM_COUNT] = {
    [TRANSPOSE_DTYPE] = CKJIT_DTYPE_PARAM,
    [TRANSPOSE_TILE] = CKJIT_INT_PARAM("tile", 16, 128, 64),
    [TRANSPOSE_VEC] = CKJIT_INT_PARAM("vec", 1, 8, 4),
    [TRANSPOSE_THREADS] = CKJIT_INT_PARAM("threads", 32, 1024, 256),
};

static ckjit_status check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  int vec = v[TRANSPOSE_VEC], tile = v[TRANSPOSE_TILE];
  if (!ckjit__is_pow2(vec) || (size_t)vec * ckjit__dtype_param_size(v[TRANSPOSE_DTYPE]) > 16 ||
      tile % vec)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: transpose vec=%d must be a power of two of at most 16 bytes dividing "
                       "tile=%d",
                       vec, tile);
  if (v[TRANSPOSE_THREADS] % 32)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: threads=%d is not a multiple of 32",
                       v[TRANSPOSE_THREADS]);
  if ((size_t)tile * (size_t)(tile + 1) * ckjit__dtype_param_size(v[TRANSPOSE_DTYPE]) > 48 * 1024)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: transpose tile=%d needs more than 48 KiB "
                       "of shared memory", tile);
  return CKJIT_SUCCESS;
}

/* Default set: the vectorized and the scalar (misaligned) path per dtype. */
static int default_spec(size_t index, ckjit_spec *out) {
  if (index >= 6) return 0;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_TRANSPOSE;
  int dtype = (int)(index / 2);
  out->value[TRANSPOSE_DTYPE] = dtype;
  out->value[TRANSPOSE_TILE] = 64;
  out->value[TRANSPOSE_VEC] =
      index % 2 ? 1 : ckjit__widest_vec(ckjit__dtype_param_size(dtype), TRANSPOSE_MAX_VEC);
  out->value[TRANSPOSE_THREADS] = 256;
  return 1;
}

/* An omitted vec is the widest the policy would pick. */
static void complete(ckjit_spec *s, unsigned given) {
  if (!(given & (1u << TRANSPOSE_VEC)))
    s->value[TRANSPOSE_VEC] =
        ckjit__widest_vec(ckjit__dtype_param_size(s->value[TRANSPOSE_DTYPE]), TRANSPOSE_MAX_VEC);
}

const ckjit_family ckjit__family_transpose = {
    .name = "transpose",
    .source = "elementwise/transpose.cu",
    .kernel = "ckjit_transpose",
    .n_params = TRANSPOSE_PARAM_COUNT,
    .params = params,
    .check = check,
    .default_spec = default_spec,
    .complete = complete,
};
