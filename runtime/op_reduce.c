#pragma GCC diagnostic ignored "-Wunused-parameter" /* stub */
/* reduce family: descriptor, tile policy and launch.  (stub: being written) */
#include <string.h>

#include "dispatch.h"
#include "error.h"
#include "op_elementwise.h"
#include "spec.h"

enum { P_DTYPE, P_COUNT };
static const ckjit_param_desc params[P_COUNT] = {[P_DTYPE] = CKJIT_DTYPE_PARAM};

static int default_spec(size_t index, ckjit_spec *out) {
  (void)index;
  (void)out;
  return 0;
}

const ckjit_family ckjit__family_reduce = {
    .name = "reduce",
    .source = "reduce.cu",
    .kernel = "ckjit_reduce",
    .n_params = P_COUNT,
    .params = params,
    .default_spec = default_spec,
};

ckjit_status ckjit_reduce(ckjit_reduce_op op, ckjit_dtype dtype, const ckjit_tensor_layout *x_layout,
                          const void *x, int dim, ckjit_dtype y_dtype, void *y, void *stream) {
  return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "ckjit_reduce: not implemented yet");
}

ckjit_status ckjit_reduce_rows(ckjit_reduce_op op, ckjit_dtype dtype, int64_t rows, int64_t cols,
                               const void *x, int64_t ld_x, ckjit_dtype y_dtype, void *y,
                               void *stream) {
  return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "ckjit_reduce_rows: not implemented yet");
}
