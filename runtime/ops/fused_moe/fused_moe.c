/* ckjit_fused_moe (include/ckjit/moe.h): a mixture-of-experts MLP as a
 * chain of launches on one stream, its buffers carved from the caller's
 * workspace:
 *
 *   sort     ckjit_moe_sort: the (token, slot) entries grouped by expert,
 *            runs padded to the GEMM's 128-row tiles, each tile's expert;
 *   gather   x's rows in that order (moe_permute), e4m3 with scales for FP8
 *            weights;
 *   gate-up  the grouped GEMM (gemm_fp8, 16-bit or FP8 operands) with
 *            act(gate) * up in its epilogue: h [capacity][inter];
 *   (FP8)    h quantized (moe_permute, every row in place order);
 *   down     the grouped GEMM with each row's routing weight in its
 *            epilogue, written to its (token, slot) row of z;
 *   shared   (shared experts) x in token order (e4m3 for FP8 weights), and
 *            per shared expert the same two GEMMs on every token, ungrouped,
 *            the down product written to the token's row of zs; with
 *            shared_gate, ckjit_gemm's sigmoid(x shared_gate^T) into gates;
 *   combine  y[t] = the sum of z's k rows of t, in slot order, then of its
 *            zs rows (times their gates) (moe_permute).
 *
 * ckjit_fused_moe_router runs ckjit_topk_softmax on the router's logits
 * first, into the workspace's tail, and the same chain on that routing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/int_math.h"
#include "moe_permute.h"
#include "runtime/dispatch.h"
#include "runtime/ops/gemm_fp8/gemm_fp8.h"
#include "runtime/ops/moe_sort/moe_sort.h"
#include "runtime/ops/topk_softmax/topk_softmax.h"
#include "runtime/ops/op_frame.h"

static const char api[] = "ckjit_fused_moe";

enum { TILE_M = 128, ALIGN = 256, MAX_SHARED = 16 };

void ckjit_fused_moe_desc_init(ckjit_fused_moe_desc *desc) {
  if (!desc) return;
  memset(desc, 0, sizeof *desc);
  desc->dtype = desc->weight_dtype = CKJIT_BF16;
  desc->ids_dtype = CKJIT_I32;
  desc->weight_scaling = CKJIT_FP8_SCALE_BLOCK;
  desc->activation = CKJIT_UNARY_SILU;
}

/* ---- validate ------------------------------------------------------------------- */

static int is_fp8_weights(const ckjit_fused_moe_desc *d) { return d->weight_dtype == CKJIT_FP8_E4M3; }

/* The sizes, types and options (what the workspace size depends on). */
static ckjit_status check_shape(const ckjit_fused_moe_desc *d) {
  if (!d) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: desc is NULL", api);
  if (d->tokens < 0 || d->k < 1 || d->k > MOE_SORT_MAX_K || d->experts < 1 ||
      d->experts > MOE_SORT_MAX_EXPERTS)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: tokens %lld, k %d, experts %d: need tokens >= 0, k 1..%d, experts 1..%d",
                       api, (long long)d->tokens, (int)d->k, (int)d->experts, MOE_SORT_MAX_K,
                       MOE_SORT_MAX_EXPERTS);
  if (d->hidden < 16 || d->inter < 16 || d->hidden % 16 || d->inter % 16 ||
      d->hidden > INT32_MAX / 2 || d->inter > INT32_MAX / 4)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: hidden %lld and inter %lld must be positive multiples of 16 (the tensor "
                       "memory accelerator's rows)",
                       api, (long long)d->hidden, (long long)d->inter);
  if (d->dtype != CKJIT_BF16 && d->dtype != CKJIT_F16)
    return ckjit__fail(ckjit_dtype_size(d->dtype) ? CKJIT_ERROR_UNSUPPORTED : CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: dtype %s must be CKJIT_BF16 or CKJIT_F16", api, ckjit_dtype_name(d->dtype));
  if (d->weight_dtype != d->dtype && d->weight_dtype != CKJIT_FP8_E4M3)
    return ckjit__fail(ckjit_dtype_size(d->weight_dtype) ? CKJIT_ERROR_UNSUPPORTED
                                                         : CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: weight_dtype %s must be dtype (%s) or CKJIT_FP8_E4M3", api,
                       ckjit_dtype_name(d->weight_dtype), ckjit_dtype_name(d->dtype));
  if (is_fp8_weights(d)) {
    if (d->weight_scaling != CKJIT_FP8_SCALE_ROW && d->weight_scaling != CKJIT_FP8_SCALE_BLOCK)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                         "%s: FP8 weights take weight_scaling CKJIT_FP8_SCALE_ROW or _BLOCK (got %d)", api,
                         (int)d->weight_scaling);
    if (d->weight_scaling == CKJIT_FP8_SCALE_BLOCK && d->inter % 64)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                         "%s: block-scaled FP8 weights need inter (%lld) a multiple of 64 (a tile's "
                         "gate and up columns each within one 128-column scale block)",
                         api, (long long)d->inter);
  }
  if (d->ids_dtype != CKJIT_I32 && d->ids_dtype != CKJIT_I64)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: ids_dtype %s must be CKJIT_I32 or CKJIT_I64",
                       api, ckjit_dtype_name(d->ids_dtype));
  if (d->activation != CKJIT_UNARY_SILU && d->activation != CKJIT_UNARY_GELU_TANH &&
      d->activation != CKJIT_UNARY_GELU_ERF)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: activation %d must be CKJIT_UNARY_SILU, GELU_TANH or GELU_ERF", api,
                       (int)d->activation);
  if (d->shared_experts < 0 || d->shared_experts > MAX_SHARED || d->shared_inter < 0 ||
      d->shared_inter % 16 || d->shared_inter > INT32_MAX / 4)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: shared_experts %d and shared_inter %lld: need 0..%d shared experts and "
                       "shared_inter 0 (inter) or a positive multiple of 16",
                       api, (int)d->shared_experts, (long long)d->shared_inter, MAX_SHARED);
  if (d->shared_gate && !d->shared_experts)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: shared_gate is given without shared experts", api);
  if (d->shared_experts && is_fp8_weights(d) && d->weight_scaling == CKJIT_FP8_SCALE_BLOCK &&
      d->shared_inter % 64)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: block-scaled FP8 weights need shared_inter (%lld) a multiple of 64", api,
                       (long long)d->shared_inter);
  if (!ckjit_moe_sort_capacity(d->tokens, d->k, d->experts, TILE_M))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: tokens %lld x k %d (plus the experts' padding) pass 2^31 - 1 rows", api,
                       (long long)d->tokens, (int)d->k);
  return CKJIT_SUCCESS;
}

/* ---- workspace ------------------------------------------------------------------- */

/* Where each buffer of the chain lives in the workspace (byte offsets,
 * each 256-byte aligned), and the total.  The shared experts' pass runs
 * after the routed GEMMs, so it reuses xs (for x in token order: capacity
 * >= tokens rows) and h, hq (sized for both); zs holds its products until
 * the combine. */
typedef struct moe_layout {
  int64_t capacity;                       /* rows of the expert-ordered list */
  size_t sorted, offsets, counts, tiles, invalid;
  size_t xs, xs_scales, h, hq, hq_scales, z, zs, gates, total;
} moe_layout;

static size_t take(size_t *at, uint64_t bytes) {
  const size_t here = *at;
  *at += (size_t)((bytes + ALIGN - 1) / ALIGN * ALIGN);
  return here;
}

/* 1 x 128 blocks (block scaling) or one scale (row) per row. */
static int64_t scales_per_row(const ckjit_fused_moe_desc *d, int64_t cols) {
  return d->weight_scaling == CKJIT_FP8_SCALE_BLOCK ? ckjit__ceil_div(cols, 128) : 1;
}

static int64_t shared_inter(const ckjit_fused_moe_desc *d) {
  return d->shared_inter ? d->shared_inter : d->inter;
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static void layout_of(const ckjit_fused_moe_desc *d, moe_layout *l) {
  const int64_t c = ckjit_moe_sort_capacity(d->tokens, d->k, d->experts, TILE_M);
  const uint64_t es = ckjit_dtype_size(d->dtype), fp8 = (uint64_t)is_fp8_weights(d);
  /* h's elements: the routed rows', or one shared expert's over every token */
  const uint64_t t = (uint64_t)d->tokens, si = d->shared_experts ? (uint64_t)shared_inter(d) : 0;
  const uint64_t h_elems = max_u64((uint64_t)c * (uint64_t)d->inter, t * si);
  const uint64_t h_scales = max_u64((uint64_t)c * (uint64_t)scales_per_row(d, d->inter),
                                    si ? t * (uint64_t)scales_per_row(d, (int64_t)si) : 0);
  size_t at = 0;
  l->capacity = c;
  l->sorted = take(&at, 4 * (uint64_t)c);
  l->offsets = take(&at, 4 * ((uint64_t)d->experts + 1));
  l->counts = take(&at, 4 * (uint64_t)d->experts);
  l->tiles = take(&at, 4 * (uint64_t)(c / TILE_M));
  l->invalid = take(&at, 4);
  l->xs = take(&at, (uint64_t)c * (uint64_t)d->hidden * (fp8 ? 1 : es));
  l->xs_scales = take(&at, fp8 * 4 * (uint64_t)c * (uint64_t)scales_per_row(d, d->hidden));
  l->h = take(&at, h_elems * es);
  l->hq = take(&at, fp8 * h_elems);
  l->hq_scales = take(&at, fp8 * 4 * h_scales);
  l->z = take(&at, t * (uint64_t)d->k * (uint64_t)d->hidden * es);
  l->zs = take(&at, t * (uint64_t)d->shared_experts * (uint64_t)d->hidden * es);
  l->gates = take(&at, d->shared_gate ? 4 * t * (uint64_t)d->shared_experts : 0); /* f32 [tokens][shared] */
  l->total = at;
}

size_t ckjit_fused_moe_workspace_size(const ckjit_fused_moe_desc *d) {
  if (check_shape(d)) return 0;
  moe_layout l;
  layout_of(d, &l);
  return l.total;
}

/* The pointers and strides (after check_shape). */
static ckjit_status check_operands(const ckjit_fused_moe_desc *d, const moe_layout *l) {
  if (d->ldx < d->hidden || d->ldy < d->hidden || d->ldx % 8 || d->ldy % 8)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: ldx %lld and ldy %lld must be >= hidden %lld and multiples of 8 (rows "
                       "move in 16-byte pieces)",
                       api, (long long)d->ldx, (long long)d->ldy, (long long)d->hidden);
  ckjit_status st = ckjit__moe_check_map(api, d->expert_map, d->global_experts);
  if (st) return st;
  const int fp8 = is_fp8_weights(d);
  const void *const need[] = {d->x, d->y, d->topk_ids, d->topk_weights, d->w_gate_up, d->w_down,
                              d->workspace};
  static const char *const names[] = {"x", "y", "topk_ids", "topk_weights", "w_gate_up", "w_down",
                                      "workspace"};
  for (int i = 0; i < 7; i++)
    if (!need[i] && (d->tokens || i >= 4))
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", api, names[i]);
  if (fp8 && (!d->scale_gate_up || !d->scale_down))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: FP8 weights need scale_gate_up and scale_down",
                       api);
  if (d->shared_experts &&
      (!d->w_shared_gate_up || !d->w_shared_down || (fp8 && (!d->scale_shared_gate_up || !d->scale_shared_down))))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: %d shared experts need w_shared_gate_up and w_shared_down%s", api,
                       (int)d->shared_experts, fp8 ? ", scale_shared_gate_up and scale_shared_down" : "");
  if (d->shared_experts &&
      ((uintptr_t)d->w_shared_gate_up % 16 || (uintptr_t)d->w_shared_down % 16 ||
       (fp8 && ((uintptr_t)d->scale_shared_gate_up % 4 || (uintptr_t)d->scale_shared_down % 4)) ||
       (uintptr_t)d->shared_gate % 16))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: the shared experts' weights and gate must be 16-byte aligned, their scales "
                       "4-byte aligned",
                       api);
  if ((uintptr_t)d->x % 16 || (uintptr_t)d->y % 16 || (uintptr_t)d->w_gate_up % 16 ||
      (uintptr_t)d->w_down % 16 || (uintptr_t)d->workspace % ALIGN ||
      (uintptr_t)d->topk_ids % ckjit_dtype_size(d->ids_dtype) || (uintptr_t)d->topk_weights % 4 ||
      (uintptr_t)d->scale_gate_up % 4 || (uintptr_t)d->scale_down % 4 || (uintptr_t)d->invalid % 4)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: x, y and the weights must be 16-byte aligned, the workspace 256-byte "
                       "aligned, the rest aligned to their elements",
                       api);
  if (d->workspace_bytes < l->total)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: workspace_bytes %zu is less than the %zu bytes "
                       "ckjit_fused_moe_workspace_size asks for",
                       api, d->workspace_bytes, l->total);
  return CKJIT_SUCCESS;
}

/* ---- the chain ------------------------------------------------------------------- */

/* A moe_permute launch: one block per row (gather) or per unit of a row
 * (combine), grid-stride past 2^20 of them. */
static ckjit_status permute(ckjit_gpu *gpu, int dir, const ckjit_fused_moe_desc *d, int quant,
                            const ckjit_moe_permute_args *x, void *stream) {
  if (!x->rows) return CKJIT_SUCCESS;
  ckjit_launch_plan p;
  ckjit__plan_init(&p, CKJIT_FAMILY_MOE_PERMUTE);
  p.spec.value[MP_DIR] = dir;
  p.spec.value[MP_DTYPE] = ckjit__dtype_param_value(d->dtype);
  p.spec.value[MP_QUANT] = quant;
  p.spec.value[MP_IDS] = dir == DIR_COMBINE && d->ids_dtype == CKJIT_I64 ? PIDS_I64 : PIDS_I32;
  p.spec.value[MP_SHARED] = dir != DIR_COMBINE || !x->shared ? CKJIT_MOE_SHARED_NONE
                             : x->shared_gate                 ? CKJIT_MOE_SHARED_GATED
                                                              : CKJIT_MOE_SHARED_PLAIN;
  const int64_t blocks =
      dir == DIR_COMBINE ? x->rows * ckjit__ceil_div(x->cols, CKJIT_MOE_PERMUTE_PASS) : x->rows;
  p.grid[0] = (unsigned)(blocks < (1 << 20) ? blocks : (1 << 20));
  p.block[0] = 128;
  return ckjit__op_run(gpu, &p, x, &ckjit_abi_by_value, stream);
}

/* One of the GEMMs: A [m][k_dim] (rows lda apart) times the weights B
 * [experts][rows_b][k_dim] (rows_b: n, gated 2 n).  CONTIGUOUS: A's rows
 * in expert order, each 128-row tile's expert from the sort (the routed
 * experts); NONE: one expert (a shared one) on every row. */
typedef struct moe_gemm {
  const void *a, *b;
  const float *scale_a, *scale_b;
  void *d;
  int64_t m, lda, n, k_dim, ldd;
  int experts, layout, epilogue;
} moe_gemm;

/* Elements of one expert's scales of B (rows_b x k_dim weights). */
static int64_t scales_per_expert(const ckjit_fused_moe_desc *d, int64_t rows_b, int64_t k_dim) {
  if (!is_fp8_weights(d)) return 0;
  return d->weight_scaling == CKJIT_FP8_SCALE_BLOCK ? ckjit__ceil_div(rows_b, 128) * ckjit__ceil_div(k_dim, 128)
                                                    : rows_b;
}

static ckjit_status moe_gemm_run(const ckjit_fused_moe_desc *d, const moe_layout *l, const char *ws,
                                 const moe_gemm *m, void *stream) {
  const int64_t rows_b = m->epilogue == EPI_GATED ? 2 * m->n : m->n;
  ckjit_gemm_fp8_desc g;
  ckjit_gemm_fp8_desc_init(&g);
  g.m = m->m, g.n = m->n, g.k = m->k_dim;
  g.a_dtype = g.b_dtype = d->weight_dtype;
  g.out_dtype = d->dtype;
  g.a = m->a, g.lda = m->lda;
  g.b = m->b, g.ldb = m->k_dim;
  g.d = m->d, g.ldd = m->ldd;
  g.scaling = is_fp8_weights(d) ? d->weight_scaling : CKJIT_FP8_SCALE_TENSOR;
  g.scale_a = m->scale_a, g.scale_b = m->scale_b;
  g.activation = m->epilogue == EPI_GATED ? d->activation : CKJIT_UNARY_IDENTITY;
  int64_t extent_b; /* elements of all the experts' B */
  if (__builtin_mul_overflow(rows_b * m->k_dim, (int64_t)m->experts, &extent_b))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %d experts' weights overflow the address space",
                       api, m->experts);
  const int grouped = m->layout == MOE_CONTIGUOUS;
  ckjit__fp8_moe moe = {
      .api = api, .layout = m->layout, .experts = m->experts,
      .tile_experts = grouped ? (const int32_t *)(ws + l->tiles) : NULL,
      .stride_b = rows_b * m->k_dim,
      .stride_scale_b = scales_per_expert(d, rows_b, m->k_dim),
      .extent_b = extent_b,
      .epilogue = m->epilogue,
      .row_ids = (const int32_t *)(ws + l->sorted), .row_weights = d->topk_weights,
      .route_entries = d->tokens * d->k,
  };
  return ckjit__gemm_fp8_run(&g, &moe, stream);
}

/* CKJIT_MOE_CHECK=1: wait for the call and report ids out of range. */
static ckjit_status debug_check(const int32_t *invalid, void *stream) {
  const char *on = getenv("CKJIT_MOE_CHECK");
  if (!on || strcmp(on, "1")) return CKJIT_SUCCESS;
  int32_t bad = 0;
  ckjit_status st = ckjit_synchronize(stream);
  if (st || (st = ckjit_memcpy(&bad, invalid, sizeof bad, CKJIT_DEVICE_TO_HOST))) return st;
  if (bad)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: %d topk_ids entries are outside 0 .. experts - 1 (CKJIT_MOE_CHECK=1); they "
                       "contributed nothing",
                       api, (int)bad);
  return CKJIT_SUCCESS;
}

/* Everything a call checks before it launches anything; the layout and
 * the stream's GPU on success. */
static ckjit_status prepare(const ckjit_fused_moe_desc *d, moe_layout *l, void *stream, ckjit_gpu **gpu) {
  ckjit_status st = check_shape(d);
  if (st) return st;
  layout_of(d, l);
  if ((st = check_operands(d, l))) return st;
  /* the shared experts' pointers are read only with shared experts (their
   * scales only for FP8) */
  const int shared = d->shared_experts > 0, shared_scales = shared && is_fp8_weights(d);
  const void *const operands[] = {d->x,          d->y,          d->topk_ids,   d->topk_weights,
                                  d->w_gate_up,  d->w_down,     d->scale_gate_up, d->scale_down,
                                  d->workspace,  d->invalid,    d->expert_map,
                                  shared ? d->w_shared_gate_up : NULL, shared ? d->w_shared_down : NULL,
                                  shared_scales ? d->scale_shared_gate_up : NULL,
                                  shared_scales ? d->scale_shared_down : NULL};
  static const char *const names[] = {"x",         "y",          "topk_ids",      "topk_weights",
                                      "w_gate_up", "w_down",     "scale_gate_up", "scale_down",
                                      "workspace", "invalid",    "expert_map",
                                      "w_shared_gate_up", "w_shared_down",
                                      "scale_shared_gate_up", "scale_shared_down"};
  if ((st = ckjit__check_pointers(stream, api, 15, operands, names))) return st;
  if ((st = ckjit__stream_gpu(stream, gpu))) return st;
  if (!ckjit__arch_has_wgmma((*gpu)->arch) || !(*gpu)->device.tensor_map_encode)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                       "%s: runs on sm_90 (wgmma and TMA); this GPU compiles for %s", api, (*gpu)->arch);
  return CKJIT_SUCCESS;
}

/* The shared experts' pass (after the routed GEMMs, whose xs and h it
 * reuses): x in token order as the GEMMs' A (x itself for 16-bit weights
 * when its rows suit the tensor memory accelerator, else a copy or the
 * FP8 quantization into xs), then per shared expert j its gate-up GEMM
 * into h, (FP8) h quantized into hq, and its down GEMM into column block j
 * of zs [tokens][shared_experts][hidden]. */
static ckjit_status run_shared(const ckjit_fused_moe_desc *d, const moe_layout *l, ckjit_gpu *gpu,
                               int quant, void *stream) {
  char *const ws = (char *)d->workspace;
  const int fp8 = is_fp8_weights(d);
  const int64_t t = d->tokens, si = shared_inter(d), wes = (int64_t)ckjit_dtype_size(d->weight_dtype);
  const int direct = !fp8 && d->ldx % 16 == 0;
  ckjit_status st;
  if (!direct) {
    const ckjit_moe_permute_args xt = {
        .src = d->x, .dst = ws + l->xs, .scales = (float *)(ws + l->xs_scales), .row_ids = NULL,
        .ld_src = d->ldx, .ld_dst = d->hidden, .ld_scales = scales_per_row(d, d->hidden), .rows = t,
        .cols = d->hidden, .entries = t, .k = 1, .experts = 1};
    if ((st = permute(gpu, DIR_GATHER, d, quant, &xt, stream))) return st;
  }
  const int64_t per_up = scales_per_expert(d, 2 * si, d->hidden), per_down = scales_per_expert(d, d->hidden, si);
  for (int j = 0; j < d->shared_experts; j++) {
    const moe_gemm up = {
        .a = direct ? d->x : ws + l->xs, .b = (const char *)d->w_shared_gate_up + j * 2 * si * d->hidden * wes,
        .scale_a = (const float *)(ws + l->xs_scales),
        .scale_b = fp8 ? d->scale_shared_gate_up + j * per_up : NULL, .d = ws + l->h, .m = t,
        .lda = direct ? d->ldx : d->hidden, .n = si, .k_dim = d->hidden, .ldd = si, .experts = 1,
        .layout = MOE_NONE, .epilogue = EPI_GATED};
    if ((st = moe_gemm_run(d, l, ws, &up, stream))) return st;
    if (fp8) {
      const ckjit_moe_permute_args hq = {
          .src = ws + l->h, .dst = ws + l->hq, .scales = (float *)(ws + l->hq_scales), .row_ids = NULL,
          .ld_src = si, .ld_dst = si, .ld_scales = scales_per_row(d, si), .rows = t, .cols = si,
          .entries = t, .k = 1, .experts = 1};
      if ((st = permute(gpu, DIR_GATHER, d, quant, &hq, stream))) return st;
    }
    const moe_gemm down = {
        .a = ws + (fp8 ? l->hq : l->h), .b = (const char *)d->w_shared_down + j * d->hidden * si * wes,
        .scale_a = (const float *)(ws + l->hq_scales),
        .scale_b = fp8 ? d->scale_shared_down + j * per_down : NULL,
        .d = ws + l->zs + (size_t)j * (size_t)d->hidden * ckjit_dtype_size(d->dtype), .m = t, .lda = si,
        .n = d->hidden, .k_dim = si, .ldd = d->shared_experts * d->hidden, .experts = 1,
        .layout = MOE_NONE, .epilogue = EPI_PLAIN};
    if ((st = moe_gemm_run(d, l, ws, &down, stream))) return st;
  }
  if (!d->shared_gate) return CKJIT_SUCCESS;
  /* gates [tokens][shared] = sigmoid(x shared_gate^T): shared_gate's rows
   * are B's columns; unsplit, so nothing is allocated */
  ckjit_gemm_desc g;
  ckjit_gemm_desc_init(&g);
  g.m = t, g.n = d->shared_experts, g.k = d->hidden, g.ab_dtype = d->dtype, g.out_dtype = CKJIT_F32;
  g.a = d->x, g.lda = d->ldx, g.b = d->shared_gate, g.ldb = d->hidden, g.b_order = CKJIT_COL_MAJOR;
  g.d = ws + l->gates, g.ldd = d->shared_experts, g.activation = CKJIT_UNARY_SIGMOID, g.split_k = 1;
  return ckjit_gemm(&g, stream);
}

/* The chain of launches (after prepare). */
static ckjit_status run_layer(const ckjit_fused_moe_desc *d, const moe_layout l, ckjit_gpu *gpu,
                              void *stream) {
  ckjit_status st;
  char *const ws = (char *)d->workspace;
  int32_t *const invalid = d->invalid ? d->invalid : (int32_t *)(ws + l.invalid);
  const int fp8 = is_fp8_weights(d);
  const int quant = !fp8 ? QUANT_NONE : d->weight_scaling == CKJIT_FP8_SCALE_BLOCK ? QUANT_BLOCK : QUANT_ROW;

  ckjit_moe_sort_desc sort;
  ckjit_moe_sort_desc_init(&sort);
  sort.tokens = d->tokens, sort.k = d->k, sort.experts = d->experts, sort.tile_m = TILE_M;
  sort.ids_dtype = d->ids_dtype, sort.topk_ids = d->topk_ids;
  sort.sorted_ids = (int32_t *)(ws + l.sorted);
  sort.expert_offsets = (int32_t *)(ws + l.offsets);
  sort.expert_counts = (int32_t *)(ws + l.counts);
  sort.tile_experts = (int32_t *)(ws + l.tiles);
  sort.invalid = invalid;
  sort.expert_map = d->expert_map, sort.global_experts = d->global_experts;
  if ((st = ckjit_moe_sort(&sort, stream))) return st;

  const int64_t entries = d->tokens * d->k;
  const ckjit_moe_permute_args gather = {
      .src = d->x, .dst = ws + l.xs, .scales = (float *)(ws + l.xs_scales),
      .row_ids = sort.sorted_ids, .ld_src = d->ldx, .ld_dst = d->hidden,
      .ld_scales = scales_per_row(d, d->hidden), .rows = l.capacity, .cols = d->hidden,
      .entries = entries, .k = d->k, .experts = d->experts};
  if ((st = permute(gpu, DIR_GATHER, d, quant, &gather, stream))) return st;

  const moe_gemm up = {.a = ws + l.xs, .b = d->w_gate_up, .scale_a = (const float *)(ws + l.xs_scales),
                       .scale_b = d->scale_gate_up, .d = ws + l.h, .m = l.capacity, .lda = d->hidden,
                       .n = d->inter, .k_dim = d->hidden, .ldd = d->inter, .experts = d->experts,
                       .layout = MOE_CONTIGUOUS, .epilogue = EPI_GATED};
  if ((st = moe_gemm_run(d, &l, ws, &up, stream))) return st;

  if (fp8) { /* h quantized as the down GEMM's A: every row, in place order */
    const ckjit_moe_permute_args hq = {
        .src = ws + l.h, .dst = ws + l.hq, .scales = (float *)(ws + l.hq_scales), .row_ids = NULL,
        .ld_src = d->inter, .ld_dst = d->inter, .ld_scales = scales_per_row(d, d->inter),
        .rows = l.capacity, .cols = d->inter, .entries = entries, .k = d->k, .experts = d->experts};
    if ((st = permute(gpu, DIR_GATHER, d, quant, &hq, stream))) return st;
  }

  const moe_gemm down = {.a = ws + (fp8 ? l.hq : l.h), .b = d->w_down,
                         .scale_a = (const float *)(ws + l.hq_scales), .scale_b = d->scale_down,
                         .d = ws + l.z, .m = l.capacity, .lda = d->inter, .n = d->hidden,
                         .k_dim = d->inter, .ldd = d->hidden, .experts = d->experts,
                         .layout = MOE_CONTIGUOUS, .epilogue = EPI_SCATTER};
  if ((st = moe_gemm_run(d, &l, ws, &down, stream))) return st;

  if (d->shared_experts && (st = run_shared(d, &l, gpu, quant, stream))) return st;

  const ckjit_moe_permute_args combine = {
      .src = ws + l.z, .dst = d->y, .topk_ids = d->topk_ids, .ld_src = d->hidden, .ld_dst = d->ldy,
      .rows = d->tokens, .cols = d->hidden, .entries = entries, .k = d->k, .experts = d->experts,
      .expert_map = d->expert_map, .global_experts = d->global_experts,
      .shared = d->shared_experts, .shared_src = ws + l.zs,
      .shared_gate = d->shared_gate ? (const float *)(ws + l.gates) : NULL};
  if ((st = permute(gpu, DIR_COMBINE, d, QUANT_NONE, &combine, stream))) return st;
  return debug_check(invalid, stream);
}

ckjit_status ckjit_fused_moe(const ckjit_fused_moe_desc *d, void *stream) {
  moe_layout l;
  ckjit_gpu *gpu;
  ckjit_status st = prepare(d, &l, stream, &gpu);
  if (st || !d->tokens) return st;
  return run_layer(d, l, gpu, stream);
}

/* ---- with the router ------------------------------------------------------------- */

/* ckjit_fused_moe_router's workspace: the layer's, then topk_ids (int32)
 * and topk_weights (f32), [tokens][k] each. */
typedef struct router_layout {
  moe_layout layer;
  size_t ids, weights, total;
} router_layout;

static ckjit_status router_shape(const ckjit_fused_moe_desc *d, router_layout *r) {
  memset(r, 0, sizeof *r);
  if (!d) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s_router: desc is NULL", api);
  if (d->experts > TOPK_MAX_EXPERTS || d->k > TOPK_MAX_K || d->k > d->experts)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s_router: experts %d, k %d: the router (ckjit_topk_softmax) takes experts "
                       "<= %d and k <= min(%d, experts)",
                       api, (int)d->experts, (int)d->k, TOPK_MAX_EXPERTS, TOPK_MAX_K);
  ckjit_fused_moe_desc layer = *d;
  layer.ids_dtype = CKJIT_I32;
  ckjit_status st = check_shape(&layer);
  if (st) return st;
  layout_of(&layer, &r->layer);
  size_t at = r->layer.total;
  r->ids = take(&at, 4 * (uint64_t)d->tokens * (uint64_t)d->k);
  r->weights = take(&at, 4 * (uint64_t)d->tokens * (uint64_t)d->k);
  r->total = at;
  return CKJIT_SUCCESS;
}

size_t ckjit_fused_moe_router_workspace_size(const ckjit_fused_moe_desc *d) {
  router_layout r;
  return router_shape(d, &r) ? 0 : r.total;
}

ckjit_status ckjit_fused_moe_router(const ckjit_fused_moe_desc *d, ckjit_dtype logits_dtype,
                                    const void *logits, int64_t ld_logits, int renormalize,
                                    void *stream) {
  router_layout r;
  ckjit_status st = router_shape(d, &r);
  if (st) return st;
  if (d->workspace_bytes < r.total)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s_router: workspace_bytes %zu is less than the %zu bytes "
                       "ckjit_fused_moe_router_workspace_size asks for",
                       api, d->workspace_bytes, r.total);
  /* The router's own arguments, checked here too: before the device is
   * looked up (a bad call fails the same with or without a GPU). */
  if (logits_dtype != CKJIT_F32 && logits_dtype != CKJIT_BF16 && logits_dtype != CKJIT_F16)
    return ckjit__fail(ckjit_dtype_size(logits_dtype) ? CKJIT_ERROR_UNSUPPORTED : CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s_router: logits_dtype %s must be CKJIT_F32, CKJIT_BF16 or CKJIT_F16", api,
                       ckjit_dtype_name(logits_dtype));
  if (d->tokens && (!logits || (uintptr_t)logits % ckjit_dtype_size(logits_dtype) || ld_logits < d->experts))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s_router: logits %p must be non-NULL and aligned to its element, ld_logits %lld "
                       ">= experts %d",
                       api, logits, (long long)ld_logits, (int)d->experts);
  /* The layer reads the routing from the workspace's tail. */
  char *const ws = (char *)d->workspace;
  ckjit_fused_moe_desc layer = *d;
  layer.ids_dtype = CKJIT_I32;
  layer.topk_ids = ws ? ws + r.ids : NULL;
  layer.topk_weights = ws ? (const float *)(ws + r.weights) : NULL;
  layer.workspace_bytes = r.layer.total;
  moe_layout l;
  ckjit_gpu *gpu;
  if ((st = prepare(&layer, &l, stream, &gpu)) || !d->tokens) return st;
  if ((st = ckjit_topk_softmax(logits_dtype, d->tokens, d->experts, logits, ld_logits, d->k, renormalize,
                               (float *)(ws + r.weights), CKJIT_I32, ws + r.ids, stream)))
    return st;
  return run_layer(&layer, l, gpu, stream);
}
