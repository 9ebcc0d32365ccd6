/* ckjit_gemm_fp8_moe (include/ckjit/gemm_fp8.h): the grouped FP8 GEMM of
 * mixture-of-experts layers.  Checks the MoE fields, resolves the strides
 * left 0, and runs the FP8 GEMM's path (gemm_fp8.c) with the experts. */
#include <stdint.h>
#include <string.h>

#include "base/error.h"
#include "base/int_math.h"
#include "gemm_fp8.h"

static const char api[] = "ckjit_gemm_fp8_moe";

void ckjit_gemm_fp8_moe_desc_init(ckjit_gemm_fp8_moe_desc *desc) {
  if (!desc) return;
  memset(desc, 0, sizeof *desc);
  ckjit_gemm_fp8_desc_init(&desc->gemm);
  desc->layout = CKJIT_MOE_CONTIGUOUS;
  desc->experts = 1;
}

/* A stride: at least `least` elements and a multiple of `align`, or 0 for
 * `fallback`. */
static ckjit_status stride(const char *name, int64_t given, int64_t fallback, int64_t least,
                           int64_t align, int64_t *out) {
  *out = given ? given : fallback;
  if (*out < least || *out % align)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: %s %lld must be 0 or at least %lld%s", api, name, (long long)given,
                       (long long)least, align > 1 ? " and a multiple of 16" : "");
  return CKJIT_SUCCESS;
}

/* The bytes `count` experts' operands span: (count - 1) strides and one
 * operand of `rows` rows, ld apart. */
static ckjit_status extent(const char *name, int64_t count, int64_t stride_, int64_t rows,
                           int64_t ld, int64_t *out) {
  int64_t last, whole;
  if (__builtin_mul_overflow(count - 1, stride_, &last) || __builtin_mul_overflow(rows, ld, &whole) ||
      __builtin_add_overflow(last, whole, out))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s's %lld experts overflow the address space",
                       api, name, (long long)count);
  return CKJIT_SUCCESS;
}

ckjit_status ckjit_gemm_fp8_moe(const ckjit_gemm_fp8_moe_desc *desc, void *stream) {
  if (!desc) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: desc is NULL", api);
  const ckjit_gemm_fp8_desc *g = &desc->gemm;
  if ((unsigned)desc->layout > CKJIT_MOE_MASKED)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: layout %d is not a ckjit_moe_layout", api,
                       (int)desc->layout);
  if (desc->experts < 1 || desc->experts > 65536)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: experts %d must be 1 .. 65536", api,
                       (int)desc->experts);
  const int masked = desc->layout == CKJIT_MOE_MASKED;
  if (masked ? !desc->counts : !desc->tile_experts)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s is NULL (layout %s)", api,
                       masked ? "counts" : "tile_experts", masked ? "MASKED" : "CONTIGUOUS");
  if (g->bias_mode == CKJIT_BIAS_PER_ROW)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                       "%s: bias_mode CKJIT_BIAS_PER_ROW: an expert's bias is per column", api);
  const int64_t kb = ckjit__ceil_div(g->k, 128), m = g->m > 0 ? g->m : 0, n = g->n > 0 ? g->n : 0;
  const int64_t lsa = g->ld_scale_a ? g->ld_scale_a : kb, lsb = g->ld_scale_b ? g->ld_scale_b : kb;
  ckjit__fp8_moe moe = {.api = api, .experts = desc->experts,
                        .layout = masked ? MOE_MASKED : MOE_CONTIGUOUS,
                        .tile_experts = masked ? NULL : desc->tile_experts,
                        .counts = masked ? desc->counts : NULL};
  const int64_t scale_b_default = g->scaling == CKJIT_FP8_SCALE_TENSOR ? 1
                                  : g->scaling == CKJIT_FP8_SCALE_ROW  ? n
                                                                       : ckjit__ceil_div(n, 128) * lsb;
  const int64_t scale_a_default = g->scaling == CKJIT_FP8_SCALE_TENSOR ? 0
                                  : g->scaling == CKJIT_FP8_SCALE_ROW  ? m
                                                                       : m * lsa;
  ckjit_status st;
  int64_t d_extent = 0; /* elements; only its overflow matters */
  if ((st = stride("stride_b", desc->stride_b, n * g->ldb, n * g->k, 16, &moe.stride_b)) ||
      (st = stride("stride_scale_b", desc->stride_scale_b, scale_b_default, 0, 1, &moe.stride_scale_b)) ||
      (st = stride("stride_bias", desc->stride_bias, n, 0, 1, &moe.stride_bias)) ||
      (st = extent("b", desc->experts, moe.stride_b, n, g->ldb, &moe.extent_b)))
    return st;
  if (masked &&
      ((st = stride("stride_a", desc->stride_a, m * g->lda, m * g->k, 16, &moe.stride_a)) ||
       (st = stride("stride_d", desc->stride_d, m * g->ldd, m * g->n, 1, &moe.stride_d)) ||
       (st = stride("stride_scale_a", desc->stride_scale_a, scale_a_default, 0, 1,
                    &moe.stride_scale_a)) ||
       (st = extent("a", desc->experts, moe.stride_a, m, g->lda, &moe.extent_a)) ||
       (st = extent("d", desc->experts, moe.stride_d, m, g->ldd, &d_extent))))
    return st;
  return ckjit__gemm_fp8_run(g, &moe, stream);
}
