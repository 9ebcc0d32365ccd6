/* Attention kernel families: attention_decode (split-KV decode on NVIDIA
 * tensor cores), attention_wgmma (Hopper tensor cores),
 * attention_mma (NVIDIA tensor cores, sm_80+), attention_mfma (AMD matrix
 * cores) and attention_simt (portable, f32 included).  Parameters, their
 * checks and the default (prewarm) set. */
#include <string.h>

#include "attention.h"
#include "base/error.h"
#include "runtime/arch.h"

CKJIT_ENUM_TABLES(mask, CKJIT_ATTENTION_MASKS)
CKJIT_ENUM_TABLES(bias, CKJIT_ATTENTION_BIASES)
_Static_assert(MASK_NONE == (int)CKJIT_ATTENTION_MASK_NONE &&
                   MASK_CAUSAL == (int)CKJIT_ATTENTION_MASK_CAUSAL &&
                   MASK_WINDOW == (int)CKJIT_ATTENTION_MASK_WINDOW && CKJIT_ATTENTION_MASK_COUNT == 3,
               "CKJIT_ATTENTION_MASKS: in the order of ckjit_attention_mask");

#define DTYPE_BF16 2
#define ATTENTION_PARAMS(DTYPE_DEF, BM, BN, STAGES, WARPS)                   \
  {                                                                           \
    [AT_DTYPE] = CKJIT_DTYPE_PARAM_NAMED("dtype", DTYPE_DEF),                 \
    [AT_HDIM] = CKJIT_INT_PARAM("hdim", 64, 256, 128),                        \
    [AT_HDIM_V] = CKJIT_INT_PARAM("hdim_v", 64, 256, 128),                    \
    [AT_MASK] = CKJIT_ENUM_PARAM("mask", mask, 0),                            \
    [AT_BIAS] = CKJIT_ENUM_PARAM("bias", bias, 0),                            \
    [AT_ALIBI] = CKJIT_INT_PARAM("alibi", 0, 1, 0),                           \
    [AT_SOFTCAP] = CKJIT_INT_PARAM("softcap", 0, 1, 0),                       \
    [AT_BM] = CKJIT_INT_PARAM("bm", 16, 256, BM),                             \
    [AT_BN] = CKJIT_INT_PARAM("bn", 16, 256, BN),                             \
    [AT_STAGES] = CKJIT_INT_PARAM("stages", 1, 4, STAGES),                    \
    [AT_WARPS] = CKJIT_INT_PARAM("warps", 1, 16, WARPS),                      \
    [AT_PAGE] = CKJIT_INT_PARAM("page", 0, 1024, 0),                          \
    [AT_KV8] = CKJIT_INT_PARAM("kv8", 0, 1, 0),                               \
  }

/* Defaults: each pipeline's hdim 128 tile (pipelines.c keeps the policy). */
static const ckjit_param_desc decode_params[AT_COUNT] = ATTENTION_PARAMS(DTYPE_BF16, 16, 64, 3, 4);
static const ckjit_param_desc wgmma_params[AT_COUNT] = ATTENTION_PARAMS(DTYPE_BF16, 128, 176, 2, 12);
static const ckjit_param_desc mma_params[AT_COUNT] = ATTENTION_PARAMS(DTYPE_BF16, 128, 64, 2, 8);
static const ckjit_param_desc mfma_params[AT_COUNT] = ATTENTION_PARAMS(DTYPE_BF16, 64, 64, 1, 4);
static const ckjit_param_desc simt_params[AT_COUNT] = ATTENTION_PARAMS(0, 32, 32, 1, 8);

const ckjit_family_id ckjit__attention_families[ATTENTION_PIPELINE_COUNT] = {
    [ATTENTION_DECODE] = CKJIT_FAMILY_ATTENTION_DECODE,
    [ATTENTION_WGMMA] = CKJIT_FAMILY_ATTENTION_WGMMA,
    [ATTENTION_MMA] = CKJIT_FAMILY_ATTENTION_MMA,
    [ATTENTION_MFMA] = CKJIT_FAMILY_ATTENTION_MFMA,
    [ATTENTION_SIMT] = CKJIT_FAMILY_ATTENTION_SIMT,
};

static attention_pipeline pipeline_of(const ckjit_spec *s) {
  for (int p = 0; p < ATTENTION_PIPELINE_COUNT; p++)
    if ((uint32_t)ckjit__attention_families[p] == s->family) return (attention_pipeline)p;
  return ATTENTION_SIMT;
}

unsigned ckjit__attention_smem(const ckjit_spec *s) {
  const int32_t *v = s->value;
  const int bm = v[AT_BM], bn = v[AT_BN], st = v[AT_STAGES], hd = v[AT_HDIM], hdv = v[AT_HDIM_V];
  const int es = (int)ckjit__dtype_param_size(v[AT_DTYPE]);
  switch (pipeline_of(s)) {
  case ATTENTION_DECODE:
    return v[AT_KV8] ? CKJIT_ATTENTION_DECODE8_SMEM(bm, bn, st, hd, hdv, es)
                     : CKJIT_ATTENTION_DECODE_SMEM(bm, bn, st, hd, hdv, es);
  case ATTENTION_WGMMA: return CKJIT_ATTENTION_WGMMA_SMEM(bm, bn, st, hd, hdv, es);
  case ATTENTION_MMA: return CKJIT_ATTENTION_MMA_SMEM(bm, bn, st, hd, hdv, es);
  case ATTENTION_MFMA: return CKJIT_ATTENTION_MFMA_SMEM(bm, bn, st, hd, hdv, es);
  default: return CKJIT_ATTENTION_SIMT_SMEM(bm, bn, st, hd, hdv, es);
  }
}

unsigned ckjit__attention_threads(const ckjit_spec *s) {
  return (unsigned)s->value[AT_WARPS] * (pipeline_of(s) == ATTENTION_MFMA ? 64u : 32u);
}

/* Checks every family shares: head dims, the tensor-core dtypes, the
 * shared-memory budget (sm_90's 227 KiB; AMD's 64 KiB LDS). */
static ckjit_status check_common(const ckjit_spec *s, const char *family, int tensor_cores,
                                 unsigned smem_max, int takes_kv8) {
  const int32_t *v = s->value;
  if (!ckjit__attention_is_head_dim(v[AT_HDIM]) || !ckjit__attention_is_head_dim(v[AT_HDIM_V]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: %s hdim=%d, hdim_v=%d: each must be 64, 96, 128, 192 or 256", family,
                       v[AT_HDIM], v[AT_HDIM_V]);
  if (tensor_cores && v[AT_DTYPE] == 0)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: %s dtype must be f16 or bf16", family);
  if (v[AT_PAGE] & (v[AT_PAGE] - 1))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: %s page=%d must be 0 (dense) or a power of two up to 1024", family,
                       v[AT_PAGE]);
  if (v[AT_KV8] && (!v[AT_PAGE] || !takes_kv8))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: %s kv8=1: fp8 pages are read by attention_decode and attention_simt "
                       "only, and only paged (page > 0)",
                       family);
  if (v[AT_BM] % 16 || v[AT_BN] % 16)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: %s bm=%d and bn=%d must be multiples of 16", family, v[AT_BM], v[AT_BN]);
  if (ckjit__attention_smem(s) > smem_max)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: %s needs %u bytes of shared memory (at most %u)", family,
                       ckjit__attention_smem(s), smem_max);
  return CKJIT_SUCCESS;
}

/* Two or three consumer warpgroups of 64 query rows each, plus the
 * producer warpgroup; BN is the N of the QK^T wgmma and the K of the PV
 * one. */
static int wgmma_rows_ok(int bm, int warps) {
  return (bm == 128 || bm == 192) && warps == ckjit__attention_wgmma_warps(bm);
}
static int wgmma_keys_ok(int bn, int stages) {
  return (bn == 64 || bn == 80 || bn == 128 || bn == 176) && stages >= 2;
}

int ckjit__attention_wgmma_tile_ok(const attention_tile *t) {
  return wgmma_rows_ok(t->bm, t->warps) && wgmma_keys_ok(t->bn, t->stages);
}

static ckjit_status wgmma_check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  ckjit_status st = check_common(s, "attention_wgmma", 1, CKJIT_ATTENTION_SM90_SMEM, 0);
  if (st) return st;
  /* Two or three consumer warpgroups: the kernel's register split is theirs. */
  if (!wgmma_rows_ok(v[AT_BM], v[AT_WARPS]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: attention_wgmma bm=%d, warps=%d: bm must be 128 or 192 and warps 4 * "
                       "(bm / 64 + 1) (the consumer warpgroups and the producer)",
                       v[AT_BM], v[AT_WARPS]);
  /* The S product's N: the wgmma shapes core/wgmma.h spells out. */
  if (!wgmma_keys_ok(v[AT_BN], v[AT_STAGES]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: attention_wgmma bn=%d must be 64, 80, 128 or 176, stages=%d >= 2",
                       v[AT_BN], v[AT_STAGES]);
  return CKJIT_SUCCESS;
}

/* 16 rows; each warp 16 keys of a step; no bias or ALiBi; the ring holds
 * the warps' f32 O rows for their merge. */
static ckjit_status decode_check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  ckjit_status st = check_common(s, "attention_decode", 1, CKJIT_ATTENTION_SM90_SMEM, 1);
  if (st) return st;
  if (v[AT_BM] != CKJIT_ATTENTION_DECODE_ROWS || (v[AT_WARPS] != 2 && v[AT_WARPS] != 4) ||
      v[AT_BN] != 16 * v[AT_WARPS] || v[AT_STAGES] < 2)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: attention_decode bm=%d must be 16, warps=%d 2 or 4, bn=%d 16 * warps, "
                       "stages=%d at least 2",
                       v[AT_BM], v[AT_WARPS], v[AT_BN], v[AT_STAGES]);
  if (v[AT_BIAS] != BIAS_NONE || v[AT_ALIBI])
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: attention_decode takes no bias or ALiBi");
  if ((int64_t)v[AT_STAGES] * v[AT_BN] * (v[AT_HDIM] + v[AT_HDIM_V]) * 2 < (int64_t)v[AT_WARPS] * 16 * v[AT_HDIM_V] * 4)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: attention_decode's ring is too small to merge the warps' rows");
  return CKJIT_SUCCESS;
}

/* One warp per 16 query rows (the m of mma.sync m16n8k16). */
static ckjit_status mma_check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  ckjit_status st = check_common(s, "attention_mma", 1, CKJIT_ATTENTION_SM90_SMEM, 0);
  if (st) return st;
  if (v[AT_BM] != 16 * v[AT_WARPS] || v[AT_WARPS] > 8 || v[AT_STAGES] > 3)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: attention_mma bm=%d must be 16 * warps (warps=%d, at most 8), stages=%d "
                       "at most 3",
                       v[AT_BM], v[AT_WARPS], v[AT_STAGES]);
  return CKJIT_SUCCESS;
}

static ckjit_status mfma_check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  ckjit_status st = check_common(s, "attention_mfma", 1, 64 * 1024, 0);
  if (st) return st;
  if (v[AT_BM] % (16 * v[AT_WARPS]) || v[AT_WARPS] > 8)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: attention_mfma bm=%d must be a multiple of 16 * warps (warps=%d, at most 8)",
                       v[AT_BM], v[AT_WARPS]);
  return CKJIT_SUCCESS;
}

static ckjit_status simt_check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  ckjit_status st = check_common(s, "attention_simt", 0, 64 * 1024, 1);
  if (st) return st;
  if (v[AT_WARPS] > 8 || v[AT_BM] % v[AT_WARPS])
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: attention_simt bm=%d must be a multiple of warps=%d (at most 8)", v[AT_BM],
                       v[AT_WARPS]);
  return CKJIT_SUCCESS;
}

/* Default sets: the common configurations of issue 17 (head dims 64, 128
 * and 256 x no mask / causal x f16, bf16; GQA is a runtime argument) on
 * each tensor-core pipeline at its policy tile; f32 on SIMT.  Then the
 * paged ones (issue 18): head dim 128 x no mask / causal x pages of 1, 16
 * and 128 slots x the same dtypes. */
static const int default_hdims[] = {64, 128, 256};
static const int default_pages[] = {1, 16, 128};
enum { N_HDIMS = 3, N_PAGES = 3 };

static int fill_default(attention_pipeline p, size_t i, int n_dtypes, int first_dtype,
                        ckjit_spec *out) {
  const size_t dense = (size_t)n_dtypes * N_HDIMS * 2, paged = (size_t)n_dtypes * N_PAGES * 2;
  if (i >= dense + paged) return 0;
  memset(out, 0, sizeof *out);
  out->family = (uint32_t)ckjit__attention_families[p];
  int32_t *v = out->value;
  int hd, mask, page = 0;
  if (i < dense) {
    hd = default_hdims[i % N_HDIMS], mask = (int)(i / N_HDIMS) % 2;
    v[AT_DTYPE] = first_dtype + (int)(i / (2 * N_HDIMS));
  } else {
    i -= dense;
    hd = 128, page = default_pages[i % N_PAGES], mask = (int)(i / N_PAGES) % 2;
    v[AT_DTYPE] = first_dtype + (int)(i / (2 * N_PAGES));
  }
  v[AT_HDIM] = v[AT_HDIM_V] = hd;
  v[AT_MASK] = mask;
  v[AT_PAGE] = page;
  const attention_tile t = ckjit__attention_tile(p, hd, hd, mask, 1, page, 0);
  v[AT_BM] = t.bm, v[AT_BN] = t.bn, v[AT_STAGES] = t.stages, v[AT_WARPS] = t.warps;
  return 1;
}
/* Decode: head dims 64, 128, 256 x dense / pages of 1 and 16 slots / fp8
 * pages of 16 x f16, bf16, no mask (one query a sequence sees every key). */
static int decode_default(size_t i, ckjit_spec *out) {
  static const int pages[] = {0, 1, 16, 16}, fp8[] = {0, 0, 0, 1};
  if (i >= 2 * N_HDIMS * 4) return 0;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_ATTENTION_DECODE;
  int32_t *v = out->value;
  const int hd = default_hdims[i % N_HDIMS];
  v[AT_DTYPE] = 1 + (int)(i / (N_HDIMS * 4));
  v[AT_HDIM] = v[AT_HDIM_V] = hd;
  v[AT_PAGE] = pages[i / N_HDIMS % 4];
  v[AT_KV8] = fp8[i / N_HDIMS % 4];
  const attention_tile t = ckjit__attention_tile(ATTENTION_DECODE, hd, hd, MASK_NONE, 1, v[AT_PAGE], 0);
  v[AT_BM] = t.bm, v[AT_BN] = t.bn, v[AT_STAGES] = t.stages, v[AT_WARPS] = t.warps;
  return 1;
}
/* wgmma: also head dim 128 without a mask for short sequences (2k keys
 * and fewer: 128 keys a step, pipelines.c's unmasked_step). */
static int wgmma_default(size_t i, ckjit_spec *out) {
  if (fill_default(ATTENTION_WGMMA, i, 2, 1, out)) return 1;
  const size_t extra = i - (size_t)(2 * (N_HDIMS * 2 + N_PAGES * 2));
  if (extra >= 2) return 0;
  fill_default(ATTENTION_WGMMA, 2 * N_HDIMS * extra + 1, 2, 1, out); /* head dim 128, no mask, dtype `extra` */
  const attention_tile t = ckjit__attention_tile(ATTENTION_WGMMA, 128, 128, 0, 1, 0, 1024);
  out->value[AT_BN] = t.bn;
  return 1;
}
static int mma_default(size_t i, ckjit_spec *out) { return fill_default(ATTENTION_MMA, i, 2, 1, out); }
static int mfma_default(size_t i, ckjit_spec *out) { return fill_default(ATTENTION_MFMA, i, 2, 1, out); }
/* SIMT: f32 as the others, and prefill over fp8 pages of 16 slots (head
 * dim 128, causal, f16 and bf16), which only it runs. */
static int simt_default(size_t i, ckjit_spec *out) {
  if (fill_default(ATTENTION_SIMT, i, 1, 0, out)) return 1;
  const size_t fp8 = i - (size_t)(N_HDIMS * 2 + N_PAGES * 2);
  if (fp8 >= 2) return 0;
  fill_default(ATTENTION_SIMT, N_HDIMS * 2 + N_PAGES + 1, 1, 0, out); /* f32, page 16, causal */
  out->value[AT_DTYPE] = 1 + (int32_t)fp8;
  out->value[AT_KV8] = 1;
  return 1;
}

const ckjit_family ckjit__family_attention_decode = {
    .name = "attention_decode",
    .source = "attention/decode.cu",
    .kernel = "ckjit_attention_decode",
    .n_params = AT_COUNT,
    .params = decode_params,
    .check = decode_check,
    .default_spec = decode_default,
    .targets = ckjit__arch_has_mma_sync,
    .targets_text = "sm_80 and newer (mma.sync)",
};

const ckjit_family ckjit__family_attention_wgmma = {
    .name = "attention_wgmma",
    .source = "attention/wgmma.cu",
    .kernel = "ckjit_attention",
    .n_params = AT_COUNT,
    .params = wgmma_params,
    .check = wgmma_check,
    .default_spec = wgmma_default,
    .targets = ckjit__arch_has_wgmma,
    .targets_text = "sm_90 / sm_90a (wgmma)",
};

const ckjit_family ckjit__family_attention_mma = {
    .name = "attention_mma",
    .source = "attention/mma.cu",
    .kernel = "ckjit_attention",
    .n_params = AT_COUNT,
    .params = mma_params,
    .check = mma_check,
    .default_spec = mma_default,
    .targets = ckjit__arch_has_mma_sync,
    .targets_text = "sm_80 and newer (mma.sync)",
};

const ckjit_family ckjit__family_attention_mfma = {
    .name = "attention_mfma",
    .source = "attention/mfma.cu",
    .kernel = "ckjit_attention",
    .n_params = AT_COUNT,
    .params = mfma_params,
    .check = mfma_check,
    .default_spec = mfma_default,
    .targets = ckjit__arch_has_mfma,
    .targets_text = "gfx908, gfx90a, gfx940, gfx941 and gfx942 (MFMA)",
};

const ckjit_family ckjit__family_attention_simt = {
    .name = "attention_simt",
    .source = "attention/simt.cu",
    .kernel = "ckjit_attention",
    .n_params = AT_COUNT,
    .params = simt_params,
    .check = simt_check,
    .default_spec = simt_default,
};
