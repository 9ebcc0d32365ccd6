/* The FP8 GEMM kernel family (kernel_src/gemm/fp8.cu): its parameters,
 * shared by the family descriptor (gemm_fp8_family.c) and the front-end
 * (gemm_fp8.c). */
#ifndef CKJIT_RUNTIME_OPS_GEMM_FP8_H
#define CKJIT_RUNTIME_OPS_GEMM_FP8_H

#include "abi/gemm_fp8_args.h"
#include "runtime/spec.h"

/* a, b: the operands' FP8 types; out: D's dtype; scaling; bn: the tile's
 * columns (rows: 128); stages; promote: K steps (of 128) between additions
 * of the tensor cores' partial sums into f32 registers (0: never; block
 * scaling: 1); bias, act: the epilogue; cluster: blocks per cluster (2:
 * neighbouring tiles along N share A's loads, multicast); moe: none, or
 * the grouped layout (ckjit_gemm_fp8_moe); epilogue: none, or one of
 * ckjit_fused_moe's (gated: act(gate) * up; scatter: rows to their routing
 * entries, times their weights); c, d0, d1: the epilogue's beta C, D0 and
 * D1 terms (plain GEMMs only). */
enum {
  G8_A, G8_B, G8_OUT, G8_SCALING, G8_BN, G8_STAGES, G8_PROMOTE, G8_BIAS, G8_ACT, G8_CLUSTER,
  G8_MOE, G8_EPI, G8_C, G8_D0, G8_D1, G8_COUNT
};

enum { CKJIT_FP8_TYPES(CKJIT_ENUM_CONSTANT) };
enum { CKJIT_FP8_SCALINGS(CKJIT_ENUM_CONSTANT) CKJIT_FP8_SCALING_COUNT };
enum { CKJIT_FP8_MOE_LAYOUTS(CKJIT_ENUM_CONSTANT) };
enum { CKJIT_FP8_EPILOGUES(CKJIT_ENUM_CONSTANT) };

/* The MoE part of a ckjit_gemm_fp8_moe call, its defaults resolved
 * (gemm_fp8_moe.c); a plain ckjit_gemm_fp8 has none (NULL). */
typedef struct ckjit__fp8_moe {
  const char *api;            /* for messages */
  int layout;                 /* MOE_CONTIGUOUS or MOE_MASKED */
  int experts;
  const int32_t *tile_experts, *counts;
  int64_t stride_a, stride_b, stride_d, stride_scale_a, stride_scale_b, stride_bias; /* elements */
  int64_t extent_a, extent_b; /* elements the call may read from a (MASKED) and b */
  /* ckjit_fused_moe's GEMMs only: the epilogue (EPI_*); the scatter's
   * routing: D row row_ids[m] (below route_entries) times row_weights. */
  int epilogue;
  const int32_t *row_ids;
  const float *row_weights;
  int64_t route_entries;
} ckjit__fp8_moe;

/* Validates, plans and launches a plain (moe NULL) or grouped FP8 GEMM. */
ckjit_status ckjit__gemm_fp8_run(const ckjit_gemm_fp8_desc *g, const ckjit__fp8_moe *moe,
                                 void *stream);

/* The stages the policy and the default set give a bn. */
int ckjit__gemm_fp8_stages(int bn);

/* Dynamic shared memory of a spec's launch (its parameter values): the
 * stages, 1 KiB of slack for the swizzle atoms' alignment, and for 16-bit
 * outputs 2 KiB per consumer warp to stage D's rows in. */
static inline unsigned ckjit__gemm_fp8_smem(const int32_t *v) {
  const int staged = ckjit__dtype_param_size(v[G8_OUT]) == 2;
  return (unsigned)((128 + v[G8_BN]) * 128 * v[G8_STAGES] + 1024 + (staged ? 8 * 2048 : 0));
}

#endif
