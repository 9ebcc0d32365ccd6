/* The attention pipeline table and tile policy: which kernel family runs a
 * call, and at which tile.  The rows are tried in order (fastest first, as
 * the GEMM table): the first whose matrix units the device has, whose
 * layout needs the call meets and whose tile fits the device's shared
 * memory runs it.  SIMT takes every call.  CKJIT_ATTENTION_PIPELINE (decode,
 * wgmma, mma, mfma, simt) forces a row, for tests and benchmarks; a forced row
 * that cannot run the call is an error, not a silent fallback. */
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "base/error.h"
#include "runtime/backend.h"
#include "runtime/runtime.h"

typedef struct attention_row {
  const char *name;
  unsigned units[3];  /* per dtype parameter value (f32, f16, bf16): the CKJIT_MATRIX_* needed, with TAKES */
  int rows_aligned;   /* needs head-dim stride 1, 16-byte rows (validate.c) */
  int decode;         /* only few queries (CKJIT_ATTENTION_DECODE_ROWS), no bias or ALiBi */
  int fp8_pages;      /* reads fp8 pools (kv8: converts them) */
} attention_row;

#define TAKES (1u << 31)
static const attention_row rows[ATTENTION_PIPELINE_COUNT] = {
    [ATTENTION_DECODE] = {"decode", {0, TAKES | CKJIT_MATRIX_MMA_SYNC, TAKES | CKJIT_MATRIX_MMA_SYNC}, 1, 1, 1},
    [ATTENTION_WGMMA] = {"wgmma", {0, TAKES | CKJIT_MATRIX_WGMMA, TAKES | CKJIT_MATRIX_WGMMA}, 1, 0, 0},
    [ATTENTION_MMA] = {"mma", {0, TAKES | CKJIT_MATRIX_MMA_SYNC, TAKES | CKJIT_MATRIX_MMA_SYNC}, 1, 0, 0},
    [ATTENTION_MFMA] = {"mfma", {0, TAKES | CKJIT_MATRIX_MFMA_F16, TAKES | CKJIT_MATRIX_MFMA_BF16}, 1, 0, 0},
    [ATTENTION_SIMT] = {"simt", {TAKES, TAKES, TAKES}, 0, 0, 1},
};

/* Tiles (bench/NOTES.md has the measurements behind them), per pipeline,
 * head dims, mask kind and whether the scores are `plain` (no bias, ALiBi
 * or soft-cap, whose score transform needs registers of its own):
 *   wgmma  128 query rows (two consumer warpgroups + the producer), two
 *          stages; keys a step: 176 without a mask and with plain scores
 *          up to head dim 128 (the per-step softmax and barrier costs
 *          spread over more keys; with a bias or ALiBi 176 spilled 330-400
 *          bytes of registers) unless the sequence is short enough that
 *          128 costs less (unmasked_step), 128 with a mask (its diagonal
 *          tiles are cheaper narrow), 80 beyond head dim 128 (the K and V
 *          stages and the Q tile then fill the 227 KiB); head dim 64: 192
 *          rows (three consumers: the products are short next to the
 *          softmax, so a third warpgroup keeps the tensor cores busy);
 *          paged K / V: 128 keys (64 beyond head dim 128), which pages of
 *          8 slots and more tile exactly, so whole pages go through TMA;
 *   decode 16 rows (query heads x queries of one K/V head), a warp per
 *          16 keys of a step: 4 warps up to head dim 128, 2 beyond (O's
 *          registers); two stages up to head dim 128 (about 74 KiB and
 *          at most 168 registers a thread: three blocks an SM, which
 *          measured faster than two of three stages), three beyond;
 *   mma    one warp per 16 rows: 8 warps on 128 rows up to head dim 128,
 *          4 on 64 beyond (the O accumulators of 256 columns fill the
 *          registers); 64 or 32 keys a step, two stages (96 KiB: sm_86's
 *          99 KiB holds it too);
 *   mfma   4 wave64s on 64 rows, 64 keys (32 beyond head dim 128) in the
 *          64 KiB LDS;
 *   simt   32 rows of 8 warps, 32 keys (16 when the head dims add up past
 *          256) of f32: at most 32 KiB, so two blocks share an AMD CU's
 *          LDS and sm_90 runs four (64 registers up to head dim 128). */
/* Keys a step of the unmasked wgmma tile with plain scores for `keys`
 * keys (0: not known, taken as long): 176 or 128, whichever costs less
 * when a step costs its keys plus ~35 keys' worth of fixed work (softmax,
 * barriers, hand-offs) and a partial last step ~73 more (the element
 * mask), figures fitted to the s1024 and s4096 measurements (bench/NOTES.md
 * #89, #167).  It picks 128 where 128 tiles the keys in few whole steps
 * (1024 keys: 8 against 6 with a masked last one) and below ~600 keys,
 * 176 for long or ragged sequences (4096: 24 steps against 32). */
static int unmasked_step(int64_t keys) {
  if (keys <= 0) return 176;
  int64_t best_cost = 0;
  int best = 176;
  for (int bn = 176; bn >= 128; bn -= 48) {
    const int64_t steps = (keys + bn - 1) / bn, cost = steps * (bn + 35) + (keys % bn ? 73 : 0);
    if (bn == 176 || cost < best_cost) best_cost = cost, best = bn;
  }
  return best;
}

attention_tile ckjit__attention_tile(attention_pipeline p, int hdim, int hdim_v, int mask,
                                     int plain, int page, int64_t keys) {
  const int wide = hdim > 128 || hdim_v > 128;
  switch (p) {
  case ATTENTION_DECODE:
    (void)page;
    return (attention_tile){.bm = CKJIT_ATTENTION_DECODE_ROWS, .bn = wide ? 32 : 64, .stages = wide ? 3 : 2,
                            .warps = wide ? 2 : 4};
  case ATTENTION_WGMMA:
    if (hdim <= 64 && hdim_v <= 64) return (attention_tile){.bm = 192, .bn = 128, .stages = 2, .warps = 16};
    if (wide) return (attention_tile){.bm = 128, .bn = page ? 64 : 80, .stages = 2, .warps = 12};
    if (page) return (attention_tile){.bm = 128, .bn = 128, .stages = 2, .warps = 12};
    return (attention_tile){.bm = 128, .bn = mask == MASK_NONE && plain ? unmasked_step(keys) : 128,
                            .stages = 2, .warps = 12};
  case ATTENTION_MMA:
    return wide ? (attention_tile){.bm = 64, .bn = 32, .stages = 2, .warps = 4}
                : (attention_tile){.bm = 128, .bn = 64, .stages = 2, .warps = 8};
  case ATTENTION_MFMA: return (attention_tile){.bm = 64, .bn = wide ? 32 : 64, .stages = 1, .warps = 4};
  default: return (attention_tile){.bm = 32, .bn = hdim + hdim_v <= 256 ? 32 : 16, .stages = 1, .warps = 8};
  }
}

static void fill_spec(attention_pipeline p, const attention_call *c, ckjit_spec *s) {
  const ckjit_attention_desc *d = c->desc;
  memset(s, 0, sizeof *s);
  s->family = (uint32_t)ckjit__attention_families[p];
  int32_t *v = s->value;
  v[AT_DTYPE] = ckjit__dtype_param_value(d->dtype);
  v[AT_HDIM] = (int32_t)d->head_dim_qk;
  v[AT_HDIM_V] = (int32_t)d->head_dim_v;
  v[AT_MASK] = c->mask;
  v[AT_BIAS] = c->bias;
  v[AT_ALIBI] = d->alibi_slopes != NULL;
  v[AT_SOFTCAP] = d->softcap > 0.0f;
  v[AT_PAGE] = c->paged ? (int32_t)c->paged->page_size : 0;
  v[AT_KV8] = c->kv8;
  const int plain = c->bias == BIAS_NONE && !v[AT_ALIBI] && !v[AT_SOFTCAP];
  const attention_tile t =
      ckjit__attention_tile(p, v[AT_HDIM], v[AT_HDIM_V], c->mask, plain, v[AT_PAGE], d->seqlen_k);
  v[AT_BM] = t.bm, v[AT_BN] = t.bn, v[AT_STAGES] = t.stages, v[AT_WARPS] = t.warps;
}

/* What the call alone decides (before a spec is filled): the row's layout,
 * shape and fp8 rules. */
static int row_takes_call(attention_pipeline p, const attention_call *c) {
  const attention_row *row = &rows[p];
  const ckjit_attention_desc *d = c->desc;
  if (row->decode && (d->seqlen_q > CKJIT_ATTENTION_DECODE_ROWS || c->bias != BIAS_NONE ||
                      d->alibi_slopes))
    return 0;
  return (!c->kv8 || row->fp8_pages) && (!row->rows_aligned || c->rows_aligned);
}

/* And what the device decides for the row's spec: its matrix units, its
 * shared memory. */
static int row_takes_spec(const ckjit_gpu *gpu, attention_pipeline p, const ckjit_spec *s) {
  const unsigned needs = rows[p].units[s->value[AT_DTYPE]], units = needs & ~TAKES;
  return needs && (gpu->device.matrix_units & units) == units &&
         ckjit__attention_smem(s) <= (unsigned)gpu->device.max_shared_bytes;
}

ckjit_status ckjit__attention_pick(const ckjit_gpu *gpu, const attention_call *c,
                                   ckjit_spec *spec) {
  const char *forced = getenv("CKJIT_ATTENTION_PIPELINE");
  if (forced && *forced) {
    for (int p = 0; p < ATTENTION_PIPELINE_COUNT; p++) {
      if (strcmp(forced, rows[p].name)) continue;
      fill_spec((attention_pipeline)p, c, spec);
      if (row_takes_call((attention_pipeline)p, c) && row_takes_spec(gpu, (attention_pipeline)p, spec))
        return CKJIT_SUCCESS;
      return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                         "ckjit_attention: CKJIT_ATTENTION_PIPELINE=%s cannot run this call (the "
                         "device's matrix units, the dtype, the layout or shared memory)",
                         forced);
    }
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "ckjit_attention: CKJIT_ATTENTION_PIPELINE=%s is not decode, wgmma, mma, mfma or simt",
                       forced);
  }
  for (int p = 0; p < ATTENTION_PIPELINE_COUNT; p++) {
    if (!row_takes_call((attention_pipeline)p, c)) continue; /* no spec to fill */
    fill_spec((attention_pipeline)p, c, spec);
    if (row_takes_spec(gpu, (attention_pipeline)p, spec)) return CKJIT_SUCCESS;
  }
  return ckjit__fail(CKJIT_ERROR_INTERNAL, "ckjit_attention: no pipeline takes the call");
}
