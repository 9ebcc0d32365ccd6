/* The gemm_fp8 kernel family (kernel_src/gemm/fp8.cu): parameters, spec
 * checks and the default (prewarm) set. */
#include <string.h>

#include "abi/gemm_args.h"
#include "base/error.h"
#include "gemm_fp8.h"
#include "runtime/arch.h"

CKJIT_ENUM_TABLES(fp8_type, CKJIT_FP8_TYPES)
CKJIT_ENUM_TABLES(scaling, CKJIT_FP8_SCALINGS)
CKJIT_ENUM_TABLES(fp8_bias, CKJIT_GEMM_BIASES)
CKJIT_ENUM_TABLES(fp8_act, CKJIT_GEMM_ACTIVATIONS)
CKJIT_ENUM_TABLES(moe, CKJIT_FP8_MOE_LAYOUTS)
CKJIT_ENUM_TABLES(epi, CKJIT_FP8_EPILOGUES)
_Static_assert(FP8_E4M3 == 0 && FP8_E5M2 == 1, "CKJIT_FP8_TYPES: e4m3, e5m2 first");
_Static_assert(SCALE_TENSOR == (int)CKJIT_FP8_SCALE_TENSOR && SCALE_ROW == (int)CKJIT_FP8_SCALE_ROW &&
                   SCALE_BLOCK == (int)CKJIT_FP8_SCALE_BLOCK && SCALE_NONE == 3,
               "CKJIT_FP8_SCALINGS: in the order of ckjit_fp8_scaling, then none");
_Static_assert(MOE_CONTIGUOUS == 1 + (int)CKJIT_MOE_CONTIGUOUS && MOE_MASKED == 1 + (int)CKJIT_MOE_MASKED,
               "CKJIT_FP8_MOE_LAYOUTS: none, then the order of ckjit_moe_layout");

#define DTYPE_F16 1
#define DTYPE_BF16 2
/* At most 227 KiB of shared memory with 1 KiB of alignment slack. */
#define MAX_SMEM (227 * 1024)

static const ckjit_param_desc params[G8_COUNT] = {
    [G8_A] = {.name = "a", .macro = "A_TYPE", .names = fp8_type_names, .symbols = fp8_type_symbols},
    [G8_B] = {.name = "b", .macro = "B_TYPE", .names = fp8_type_names, .symbols = fp8_type_symbols},
    [G8_OUT] = CKJIT_DTYPE_PARAM_NAMED("out", DTYPE_BF16),
    [G8_SCALING] = CKJIT_ENUM_PARAM("scaling", scaling, 0),
    [G8_BN] = CKJIT_INT_PARAM("bn", 64, 256, 128),
    [G8_STAGES] = CKJIT_INT_PARAM("stages", 2, 12, 6),
    [G8_PROMOTE] = CKJIT_INT_PARAM("promote", 0, 64, 1),
    [G8_BIAS] = CKJIT_ENUM_PARAM("bias", fp8_bias, 0),
    [G8_ACT] = CKJIT_ENUM_PARAM("act", fp8_act, 0),
    [G8_CLUSTER] = CKJIT_INT_PARAM("cluster", 1, 2, 1),
    [G8_MOE] = CKJIT_ENUM_PARAM("moe", moe, 0),
    [G8_EPI] = {.name = "epilogue", .macro = "EPI", .names = epi_names, .symbols = epi_symbols},
    [G8_C] = {.name = "c", .macro = "HAS_C", .max = 1},
    [G8_D0] = {.name = "d0", .macro = "HAS_D0", .max = 1},
    [G8_D1] = {.name = "d1", .macro = "HAS_D1", .max = 1},
};

static ckjit_status check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  const int sixteen = v[G8_A] >= OP_BF16 || v[G8_B] >= OP_BF16;
  if (v[G8_BN] != 64 && v[G8_BN] != 128 && (v[G8_BN] != 256 || !sixteen))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: gemm_fp8 bn=%d must be 64 or 128 (or 256 with 16-bit operands)", v[G8_BN]);
  if (v[G8_SCALING] == SCALE_BLOCK && v[G8_PROMOTE] != 1)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: gemm_fp8 scaling=block applies its scales at every K step: promote=1");
  if (sixteen && (v[G8_A] != v[G8_B] || v[G8_SCALING] != SCALE_NONE || v[G8_PROMOTE] != 0))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: gemm_fp8 with 16-bit operands takes a = b, scaling=none and promote=0");
  if (!sixteen && v[G8_SCALING] == SCALE_NONE)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: gemm_fp8 scaling=none is for 16-bit operands");
  if (v[G8_EPI] != EPI_PLAIN && (v[G8_BIAS] != 0 || v[G8_CLUSTER] != 1 || v[G8_MOE] == MOE_MASKED ||
                                 (v[G8_EPI] == EPI_GATED && v[G8_BN] < 128)))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: gemm_fp8 epilogue=%s takes bias=none, cluster=1, moe none or contiguous%s",
                       epi_names[v[G8_EPI]], v[G8_EPI] == EPI_GATED ? " and bn >= 128" : "");
  if ((v[G8_C] || v[G8_D0] || v[G8_D1]) && (v[G8_MOE] != MOE_NONE || v[G8_EPI] != EPI_PLAIN))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: gemm_fp8 c, d0 and d1 take moe=none and epilogue=none");
  if (v[G8_MOE] != MOE_NONE && v[G8_BIAS] == (int32_t)CKJIT_BIAS_PER_ROW)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: gemm_fp8 moe=%s takes a bias per column of each expert, not bias=row",
                       moe_names[v[G8_MOE]]);
  if (ckjit__gemm_fp8_smem(v) > MAX_SMEM)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: gemm_fp8 bn=%d with stages=%d needs %u bytes of shared memory (at "
                       "most %d)",
                       v[G8_BN], v[G8_STAGES], ckjit__gemm_fp8_smem(v),
                       MAX_SMEM);
  return CKJIT_SUCCESS;
}

/* The stages a bn fits in shared memory (as many as fit: the K loop waits
 * on memory less with every stage). */
int ckjit__gemm_fp8_stages(int bn) { return bn == 64 ? 8 : bn == 128 ? 6 : 4; }

/* Default set: e4m3 x e4m3 into bf16 with each scaling, on both tiles, no
 * epilogue (what serving engines call); f16 and f32 outputs of the large
 * tile; one kernel in clusters of two (compiled by CI like the rest;
 * CKJIT_GEMM_FP8_CLUSTER=2); the MoE layouts with block and tensor scales
 * (DeepSeek-style block-scaled experts, per-tensor ones); ckjit_fused_moe's
 * gate-up (gated, silu) and down (scatter) GEMMs for its weight types, and
 * its shared experts' ungrouped ones, for bf16 and f16 activations. */
static int default_spec(size_t index, ckjit_spec *out) {
  static const struct { int out, scaling, bn, cluster, moe, epi, a; } set[] = {
      {DTYPE_BF16, SCALE_TENSOR, 128, 1, 0, EPI_PLAIN, FP8_E4M3},
      {DTYPE_BF16, SCALE_ROW, 128, 1, 0, EPI_PLAIN, FP8_E4M3},
      {DTYPE_BF16, SCALE_BLOCK, 128, 1, 0, EPI_PLAIN, FP8_E4M3},
      {DTYPE_BF16, SCALE_TENSOR, 64, 1, 0, EPI_PLAIN, FP8_E4M3},
      {DTYPE_BF16, SCALE_ROW, 64, 1, 0, EPI_PLAIN, FP8_E4M3},
      {DTYPE_BF16, SCALE_BLOCK, 64, 1, 0, EPI_PLAIN, FP8_E4M3},
      {DTYPE_F16, SCALE_ROW, 128, 1, 0, EPI_PLAIN, FP8_E4M3},
      {0, SCALE_BLOCK, 128, 1, 0, EPI_PLAIN, FP8_E4M3},
      {DTYPE_BF16, SCALE_ROW, 128, 2, 0, EPI_PLAIN, FP8_E4M3},
      {DTYPE_BF16, SCALE_BLOCK, 128, 1, MOE_CONTIGUOUS, EPI_PLAIN, FP8_E4M3},
      {DTYPE_BF16, SCALE_BLOCK, 128, 1, MOE_MASKED, EPI_PLAIN, FP8_E4M3},
      {DTYPE_BF16, SCALE_TENSOR, 128, 1, MOE_CONTIGUOUS, EPI_PLAIN, FP8_E4M3},
      {DTYPE_BF16, SCALE_TENSOR, 128, 1, MOE_MASKED, EPI_PLAIN, FP8_E4M3},
      /* ckjit_fused_moe's two GEMMs: bf16 / f16 weights, FP8 block and row */
      {DTYPE_BF16, SCALE_NONE, 256, 1, MOE_CONTIGUOUS, EPI_GATED, OP_BF16},
      {DTYPE_BF16, SCALE_NONE, 256, 1, MOE_CONTIGUOUS, EPI_SCATTER, OP_BF16},
      {DTYPE_BF16, SCALE_NONE, 128, 1, MOE_CONTIGUOUS, EPI_GATED, OP_BF16},
      {DTYPE_BF16, SCALE_NONE, 128, 1, MOE_CONTIGUOUS, EPI_SCATTER, OP_BF16},
      {1, SCALE_NONE, 256, 1, MOE_CONTIGUOUS, EPI_GATED, OP_F16},
      {1, SCALE_NONE, 256, 1, MOE_CONTIGUOUS, EPI_SCATTER, OP_F16},
      {DTYPE_BF16, SCALE_BLOCK, 128, 1, MOE_CONTIGUOUS, EPI_GATED, FP8_E4M3},
      {DTYPE_BF16, SCALE_BLOCK, 128, 1, MOE_CONTIGUOUS, EPI_SCATTER, FP8_E4M3},
      {DTYPE_BF16, SCALE_ROW, 128, 1, MOE_CONTIGUOUS, EPI_GATED, FP8_E4M3},
      {DTYPE_BF16, SCALE_ROW, 128, 1, MOE_CONTIGUOUS, EPI_SCATTER, FP8_E4M3},
      {DTYPE_F16, SCALE_BLOCK, 128, 1, MOE_CONTIGUOUS, EPI_GATED, FP8_E4M3},
      {DTYPE_F16, SCALE_BLOCK, 128, 1, MOE_CONTIGUOUS, EPI_SCATTER, FP8_E4M3},
      {DTYPE_F16, SCALE_ROW, 128, 1, MOE_CONTIGUOUS, EPI_GATED, FP8_E4M3},
      {DTYPE_F16, SCALE_ROW, 128, 1, MOE_CONTIGUOUS, EPI_SCATTER, FP8_E4M3},
      /* its shared experts' GEMMs (ungrouped; the FP8 down GEMM is a plain
       * one: bf16 above, f16 here) */
      {DTYPE_BF16, SCALE_NONE, 256, 1, 0, EPI_GATED, OP_BF16},
      {DTYPE_BF16, SCALE_NONE, 256, 1, 0, EPI_PLAIN, OP_BF16},
      {DTYPE_BF16, SCALE_NONE, 128, 1, 0, EPI_GATED, OP_BF16},
      {DTYPE_BF16, SCALE_NONE, 128, 1, 0, EPI_PLAIN, OP_BF16},
      {DTYPE_BF16, SCALE_BLOCK, 128, 1, 0, EPI_GATED, FP8_E4M3},
      {DTYPE_BF16, SCALE_ROW, 128, 1, 0, EPI_GATED, FP8_E4M3},
      {DTYPE_F16, SCALE_NONE, 256, 1, 0, EPI_GATED, OP_F16},
      {DTYPE_F16, SCALE_NONE, 256, 1, 0, EPI_PLAIN, OP_F16},
      {DTYPE_F16, SCALE_NONE, 128, 1, 0, EPI_GATED, OP_F16},
      {DTYPE_F16, SCALE_NONE, 128, 1, 0, EPI_PLAIN, OP_F16},
      {DTYPE_F16, SCALE_BLOCK, 128, 1, 0, EPI_GATED, FP8_E4M3},
      {DTYPE_F16, SCALE_ROW, 128, 1, 0, EPI_GATED, FP8_E4M3},
      {DTYPE_F16, SCALE_BLOCK, 128, 1, 0, EPI_PLAIN, FP8_E4M3},
  };
  if (index >= sizeof set / sizeof set[0]) return 0;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_GEMM_FP8;
  int32_t *v = out->value;
  v[G8_A] = v[G8_B] = set[index].a;
  v[G8_OUT] = set[index].out;
  v[G8_SCALING] = set[index].scaling;
  v[G8_BN] = set[index].bn;
  v[G8_STAGES] = ckjit__gemm_fp8_stages(set[index].bn);
  v[G8_PROMOTE] = set[index].a >= OP_BF16 ? 0 : 1;
  v[G8_ACT] = set[index].epi == EPI_GATED ? (int32_t)CKJIT_UNARY_SILU : 0;
  v[G8_EPI] = set[index].epi;
  v[G8_CLUSTER] = set[index].cluster;
  v[G8_MOE] = set[index].moe;
  return 1;
}

const ckjit_family ckjit__family_gemm_fp8 = {
    .name = "gemm_fp8",
    .source = "gemm/fp8.cu",
    .kernel = "ckjit_gemm_fp8",
    .n_params = G8_COUNT,
    .params = params,
    .check = check,
    .default_spec = default_spec,
    .targets = ckjit__arch_has_wgmma,
    .targets_text = "sm_90 / sm_90a (FP8 wgmma)",
};
