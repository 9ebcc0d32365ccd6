#pragma GCC diagnostic ignored "-Wunused-parameter" /* stub */
/* rownorm family: stub being written. */
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

const ckjit_family ckjit__family_rownorm = {
    .name = "rownorm",
    .source = "rownorm.cu",
    .kernel = "ckjit_rownorm",
    .n_params = P_COUNT,
    .params = params,
    .default_spec = default_spec,
};

void ckjit_softmax_params_init(ckjit_softmax_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->scale = 1.0f;
}

void ckjit_norm_params_init(ckjit_norm_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->eps = 1e-5f;
}

ckjit_status ckjit_softmax(ckjit_dtype dtype, int64_t rows, int64_t cols, const void *x, int64_t ld_x, void *y, int64_t ld_y, const ckjit_softmax_params *params, void *stream) {
  return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "ckjit_softmax: not implemented yet");
}

ckjit_status ckjit_layernorm2d(ckjit_dtype dtype, int64_t rows, int64_t cols, const void *x, int64_t ld_x, void *y, int64_t ld_y, const ckjit_norm_params *params, void *stream) {
  return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "ckjit_layernorm2d: not implemented yet");
}

ckjit_status ckjit_rmsnorm2d(ckjit_dtype dtype, int64_t rows, int64_t cols, const void *x, int64_t ld_x, void *y, int64_t ld_y, const ckjit_norm_params *params, void *stream) {
  return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "ckjit_rmsnorm2d: not implemented yet");
}

ckjit_status ckjit_rmsnorm2d_quant(ckjit_dtype dtype, int64_t rows, int64_t cols, const void *x, int64_t ld_x, const ckjit_norm_params *params, ckjit_dtype q_dtype, void *q, int64_t ld_q, float *row_scale, void *stream) {
  return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "ckjit_rmsnorm2d_quant: not implemented yet");
}

ckjit_status ckjit_smoothquant(ckjit_dtype dtype, int64_t rows, int64_t cols, const void *x, int64_t ld_x, const float *smooth_scale, ckjit_dtype q_dtype, void *q, int64_t ld_q, float *row_scale, void *stream) {
  return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "ckjit_smoothquant: not implemented yet");
}
