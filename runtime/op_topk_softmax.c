#pragma GCC diagnostic ignored "-Wunused-parameter" /* stub */
/* topk_softmax family: descriptor, tile policy and launch.  (stub: being written) */
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

const ckjit_family ckjit__family_topk_softmax = {
    .name = "topk_softmax",
    .source = "topk_softmax.cu",
    .kernel = "ckjit_topk_softmax",
    .n_params = P_COUNT,
    .params = params,
    .default_spec = default_spec,
};

ckjit_status ckjit_topk_softmax(ckjit_dtype dtype, int64_t tokens, int64_t experts, const void *x,
                                int64_t ld_x, int k, int renormalize, float *weights,
                                ckjit_dtype index_dtype, void *indices, void *stream) {
  return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "ckjit_topk_softmax: not implemented yet");
}
