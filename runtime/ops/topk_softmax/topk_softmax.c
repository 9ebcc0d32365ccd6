/* topk_softmax (MoE gating): validate, plan, arguments, run; and the public
 * front-end. */
#include <stdint.h>

#include "abi/topk_softmax_args.h"
#include "base/error.h"
#include "base/int_math.h"
#include "runtime/dispatch.h"
#include "runtime/ops/op_frame.h"
#include "topk_softmax.h"

typedef struct topk_call {
  const char *api;
  ckjit_dtype dtype;
  int64_t tokens, experts;
  const void *x;
  int64_t ld_x;
  int k, renormalize;
  float *weights;
  ckjit_dtype index_dtype;
  void *indices;
  void *stream;
} topk_call;

static ckjit_status validate(const topk_call *c) {
  ckjit_status st = ckjit__check_dtype(c->api, c->dtype);
  if (st) return st;
  if (c->index_dtype != CKJIT_I32 && c->index_dtype != CKJIT_I64)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: index_dtype %s (%d) must be CKJIT_I32 or CKJIT_I64", c->api,
                       ckjit_dtype_name(c->index_dtype), (int)c->index_dtype);
  if (c->tokens < 1)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: tokens is %lld; must be >= 1", c->api,
                       (long long)c->tokens);
  if (c->experts < 1 || c->experts > TOPK_MAX_EXPERTS)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: experts is %lld; must be in 1..%d",
                       c->api, (long long)c->experts, TOPK_MAX_EXPERTS);
  int max_k = c->experts < TOPK_MAX_K ? (int)c->experts : TOPK_MAX_K;
  if (c->k < 1 || c->k > max_k)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: k is %d; must be in 1..%d (min(8, experts))", c->api, c->k, max_k);
  size_t es = ckjit_dtype_size(c->dtype), is = ckjit_dtype_size(c->index_dtype);
  if ((st = ckjit__check_matrix(c->api, "x", c->x, c->tokens, c->experts, c->ld_x, es))) return st;
  /* The outputs are tokens x k, contiguous. */
  if ((st = ckjit__check_matrix(c->api, "weights", c->weights, c->tokens, c->k, c->k,
                                sizeof(float))) ||
      (st = ckjit__check_matrix(c->api, "indices", c->indices, c->tokens, c->k, c->k, is)))
    return st;
  if ((uintptr_t)c->x % es || (uintptr_t)c->weights % sizeof(float) || (uintptr_t)c->indices % is)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: x, weights and indices must be aligned to their element size", c->api);
  const void *const operands[] = {c->x, c->weights, c->indices};
  static const char *const operand_names[] = {"x", "weights", "indices"};
  return ckjit__check_pointers(c->stream, c->api, 3, operands, operand_names);
}

/* Tile policy: the experts' power-of-two class, topk_policy_lanes lanes per
 * token, 256 threads, and the widest vector that also divides experts and
 * ld_x, so a vector never straddles the row end (the kernel masks whole
 * vectors only).  One block per THREADS/LANES tokens; past 2^20 blocks the
 * kernel's grid-stride loop takes the rest (and blocks * threads stays
 * below 2^32, which HIP requires). */
static void plan(const topk_call *c, ckjit_launch_plan *p) {
  const int dtype = ckjit__dtype_param_value(c->dtype);
  const int experts_class =
      (int)ckjit__pow2_ceil(c->experts < TOPK_MIN_CLASS ? TOPK_MIN_CLASS : c->experts);
  const int lanes = topk_policy_lanes(experts_class), threads = 256;
  const void *ptrs[1] = {c->x};
  const int64_t strides[2] = {c->experts, c->ld_x};
  const int vec = ckjit__pick_vec(ckjit_dtype_size(c->dtype), ptrs, 1, strides,
                                  c->tokens > 1 ? 2 : 1, topk_widest_vec(dtype, experts_class, lanes));
  ckjit__plan_init(p, CKJIT_FAMILY_TOPK_SOFTMAX);
  int32_t *v = p->spec.value;
  v[TOPK_DTYPE] = dtype;
  v[TOPK_EXPERTS] = experts_class;
  v[TOPK_LANES] = lanes;
  v[TOPK_VEC] = vec;
  v[TOPK_THREADS] = threads;
  int64_t blocks = ckjit__ceil_div(c->tokens, threads / lanes);
  if (blocks > (1 << 20)) blocks = 1 << 20;
  p->grid[0] = (unsigned)blocks;
  p->block[0] = (unsigned)threads;
}

static ckjit_topk_softmax_args arguments(const topk_call *c) {
  return (ckjit_topk_softmax_args){
      .x = c->x, .ld_x = c->ld_x, .tokens = c->tokens, .experts = (int)c->experts, .k = c->k,
      .renormalize = c->renormalize != 0, .weights = c->weights, .indices = c->indices,
      .index_i64 = c->index_dtype == CKJIT_I64};
}

ckjit_status ckjit_topk_softmax(ckjit_dtype dtype, int64_t tokens, int64_t experts, const void *x,
                                int64_t ld_x, int k, int renormalize, float *weights,
                                ckjit_dtype index_dtype, void *indices, void *stream) {
  const topk_call c = {.api = "ckjit_topk_softmax", .dtype = dtype, .tokens = tokens,
                       .experts = experts, .x = x, .ld_x = ld_x, .k = k,
                       .renormalize = renormalize, .weights = weights,
                       .index_dtype = index_dtype, .indices = indices, .stream = stream};
  ckjit_gpu *gpu;
  ckjit_status st = validate(&c);
  if (st || (st = ckjit__stream_gpu(stream, &gpu))) return st;
  ckjit_launch_plan p;
  plan(&c, &p);
  const ckjit_topk_softmax_args args = arguments(&c);
  return ckjit__op_run(gpu, &p, &args, &ckjit_topk_softmax_args_params, stream);
}
