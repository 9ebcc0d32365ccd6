/* The topk_softmax kernel family (kernel_src/rows/topk_softmax.cu):
 * parameters, spec checks and the default set. */
#include <string.h>

#include "base/error.h"
#include "base/int_math.h"
#include "runtime/spec.h"
#include "topk_softmax.h"

static const ckjit_param_desc params[TOPK_PARAM_COUNT] = {
    [TOPK_DTYPE] = CKJIT_DTYPE_PARAM,
    /* power-of-two class >= the experts of a call; the tail is masked */
    [TOPK_EXPERTS] = CKJIT_INT_PARAM("experts", TOPK_MIN_CLASS, TOPK_MAX_EXPERTS, 64),
    /* lanes per token (>= 8: lane r keeps the r-th result, k <= 8) */
    [TOPK_LANES] = CKJIT_INT_PARAM("lanes", 8, 32, 8),
    /* elements per load; the front-end makes it divide experts and ld_x */
    [TOPK_VEC] = CKJIT_INT_PARAM("vec", 1, 8, 4),
    [TOPK_THREADS] = CKJIT_INT_PARAM("threads", 64, 1024, 256),
};

static ckjit_status check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  if (!ckjit__is_pow2(v[TOPK_EXPERTS]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: topk_softmax experts=%d must be a power of two", v[TOPK_EXPERTS]);
  if (!ckjit__is_pow2(v[TOPK_LANES]) || v[TOPK_LANES] > v[TOPK_EXPERTS])
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: topk_softmax lanes=%d must be 8, 16 or 32 and at most experts=%d",
                       v[TOPK_LANES], v[TOPK_EXPERTS]);
  int vpl = v[TOPK_EXPERTS] / v[TOPK_LANES];
  if (!ckjit__is_pow2(v[TOPK_VEC]) ||
      (size_t)v[TOPK_VEC] * ckjit__dtype_param_size(v[TOPK_DTYPE]) > 16 || v[TOPK_VEC] > vpl)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: topk_softmax vec=%d must be a power of two of at most 16 bytes and "
                       "at most experts/lanes=%d",
                       v[TOPK_VEC], vpl);
  /* Whole 64-lane waves, so every lane of a wave runs the shuffles. */
  if (v[TOPK_THREADS] % 64)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: threads=%d is not a multiple of 64",
                       v[TOPK_THREADS]);
  return CKJIT_SUCCESS;
}

/* Default set: per dtype, the common expert counts (8 .. 256) on the
 * aligned fast path. */
static const int default_classes[] = {8, 16, 32, 64, 128, 256};
enum { N_DEFAULT_CLASSES = sizeof default_classes / sizeof default_classes[0] };

static int default_spec(size_t index, ckjit_spec *out) {
  if (index >= 3 * N_DEFAULT_CLASSES) return 0;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_TOPK_SOFTMAX;
  int dtype = (int)(index / N_DEFAULT_CLASSES), cls = default_classes[index % N_DEFAULT_CLASSES];
  out->value[TOPK_DTYPE] = dtype;
  out->value[TOPK_EXPERTS] = cls;
  out->value[TOPK_LANES] = topk_policy_lanes(cls);
  out->value[TOPK_VEC] = topk_widest_vec(dtype, cls, topk_policy_lanes(cls));
  out->value[TOPK_THREADS] = 256;
  return 1;
}

/* An omitted vec is the widest the policy would pick for the dtype and class. */
static void complete(ckjit_spec *s, unsigned given) {
  int32_t *v = s->value;
  if (!(given & (1u << TOPK_VEC)) && v[TOPK_LANES] > 0 && v[TOPK_LANES] <= v[TOPK_EXPERTS])
    v[TOPK_VEC] = topk_widest_vec(v[TOPK_DTYPE], v[TOPK_EXPERTS], v[TOPK_LANES]);
}

const ckjit_family ckjit__family_topk_softmax = {
    .name = "topk_softmax",
    .source = "rows/topk_softmax.cu",
    .kernel = "ckjit_topk_softmax",
    .n_params = TOPK_PARAM_COUNT,
    .params = params,
    .check = check,
    .default_spec = default_spec,
    .complete = complete,
};
