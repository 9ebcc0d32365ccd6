/* fused_moe_gpu's checks of shared experts (see fused_moe_shared_checks.h
 * and test_fused_moe_gpu.c's opening comment). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "gpu_harness.h"
#include "fused_moe_device.h"
#include "fused_moe_reference.h"
#include "fused_moe_shared_checks.h"

/* Shared experts against their definition: a shared expert is a routed
 * expert that every token names in one more slot with weight 1, so
 *   - "as slots": the layer with E routed experts, k slots and S shared
 *     experts (the last S experts' weights of a problem with E + S experts
 *     and k + S slots, the last S slots of every token naming them with
 *     weight 1) gives the bytes of that problem's layer, itself checked
 *     against the reference;
 *   - "alone": with every routed id -1 (and routed experts of another
 *     inter), y is the shared experts' sum alone: the bytes of the layer
 *     with S experts, each token naming all S in order with weight 1,
 *     checked against the reference; *invalid counts the routed ids.
 * Both read x through the copy path when ldx is not a multiple of 16. */
long fm_shared_check(gt_ctx *ctx, size_t index, uint64_t seed, fm_case c, int S, int alone) {
  gt_check *ck = ctx->ck;
  const long f0 = ck->failures;
  const int E = c.experts, k = c.k;
  const int64_t I = c.inter, T = c.tokens, H = c.hidden, n_routed = T * k;
  int64_t si = I; /* the shared experts' inter */
  if (alone) si = 2 * I + 64, c.experts = S, c.k = S, c.inter = si;
  else c.experts = E + S, c.k = k + S;
  tu_rng r = {seed ^ 0x5A17EDull};
  fm_host p;
  fm_dev v;
  gt_buf ids, tw, w1, w2, s1, s2, ws;
  memset(&v, 0, sizeof v);
  gt_buf *const mine[] = {&ids, &tw, &w1, &w2, &s1, &s2, &ws};
  for (int i = 0; i < 7; i++) memset(mine[i], 0, sizeof *mine[i]);
  uint8_t *first = NULL;
  fm_begin(ck, alone ? "shared experts alone" : "shared experts as slots", index, &c, seed);
  if (fm_host_make(&p, &c, seed, ctx->threads)) {
    gt_fail(ck, "host allocation failed");
    goto done;
  }
  /* the shared slots: experts E .. E + S - 1 (alone: 0 .. S - 1), weight
   * 1; the routed slots drawn among E + S experts keep to the first E */
  for (int64_t t = 0; t < T; t++) {
    for (int s = 0; s < c.k - S; s++)
      if (p.ids[t * c.k + s] >= E && p.ids[t * c.k + s] < E + S) p.ids[t * c.k + s] -= S;
    for (int j = 0; j < S; j++) p.ids[t * c.k + (c.k - S) + j] = (alone ? 0 : E) + j, p.tw[t * c.k + (c.k - S) + j] = 1.0f;
  }
  int32_t inv_ref, inv;
  if (fm_dev_make(ck, &v, &p) || fm_call(ck, &v, NULL) || gt_sync(ck) || fm_download(ck, &v, &inv_ref)) goto done;
  fm_check_output(ck, ctx, &p, &v, inv_ref, &r); /* the problem with the shared slots routed */
  const size_t ybytes = v.y.elems * gt_esize(c.dtype);
  if (!(first = malloc(ybytes))) abort();
  memcpy(first, v.y.host, ybytes);

  /* the layer with shared experts: the first k slots routed (alone: ids
   * -1), the shared experts' weights where the problem keeps the last S */
  const int fp8 = c.wdt == CKJIT_FP8_E4M3, block = c.sc == CKJIT_FP8_SCALE_BLOCK;
  const size_t wes = gt_esize(c.wdt);
  ckjit_fused_moe_desc d = v.d;
  d.experts = alone ? 4 : E, d.k = k, d.inter = I;
  if (gt_buf_alloc(ck, &ids, CKJIT_I32, (size_t)n_routed) || gt_buf_alloc(ck, &tw, CKJIT_F32, (size_t)n_routed))
    goto done;
  for (int64_t t = 0; t < T; t++)
    for (int s = 0; s < k; s++) {
      ((int32_t *)(void *)ids.host)[t * k + s] = alone ? -1 : (int32_t)p.ids[t * c.k + s];
      ((float *)(void *)tw.host)[t * k + s] = alone ? 0.5f : p.tw[t * c.k + s];
    }
  if ((n_routed && (gt_buf_upload(ck, &ids) || gt_buf_upload(ck, &tw)))) goto done;
  d.ids_dtype = CKJIT_I32, d.topk_ids = ids.dev, d.topk_weights = tw.dev;
  const int64_t up_scales = block ? (2 * si + 127) / 128 * ((H + 127) / 128) : 2 * si;
  const int64_t down_scales = block ? (H + 127) / 128 * ((si + 127) / 128) : H;
  const int first_shared = alone ? 0 : E;
  d.shared_experts = S, d.shared_inter = alone ? si : 0;
  d.w_shared_gate_up = (const char *)v.w1.dev + (size_t)first_shared * (size_t)(2 * si * H) * wes;
  d.w_shared_down = (const char *)v.w2.dev + (size_t)first_shared * (size_t)(H * si) * wes;
  if (fp8)
    d.scale_shared_gate_up = (const float *)v.s1.dev + first_shared * up_scales,
    d.scale_shared_down = (const float *)v.s2.dev + first_shared * down_scales;
  if (alone) { /* routed experts of inter I that no token reaches */
    if (gt_buf_alloc(ck, &w1, c.wdt, (size_t)(4 * 2 * I * H)) || gt_buf_alloc(ck, &w2, c.wdt, (size_t)(4 * H * I)) ||
        gt_buf_alloc(ck, &s1, CKJIT_F32, (size_t)(4 * 2 * I * H)) || gt_buf_alloc(ck, &s2, CKJIT_F32, (size_t)(4 * H * I)))
      goto done;
    d.w_gate_up = w1.dev, d.w_down = w2.dev;
    if (fp8) d.scale_gate_up = s1.dev, d.scale_down = s2.dev;
  }
  const size_t ws_bytes = ckjit_fused_moe_workspace_size(&d);
  if (!ws_bytes) {
    gt_fail(ck, "ckjit_fused_moe_workspace_size with shared experts: 0 (%s)", ckjit_last_error());
    goto done;
  }
  if (gt_buf_alloc(ck, &ws, CKJIT_I8, ws_bytes) || gt_buf_poison(ck, &ws) || gt_buf_poison(ck, &v.y)) goto done;
  d.workspace = ws.dev, d.workspace_bytes = ws_bytes;
  const int32_t sentinel = INV_SENTINEL;
  if (ckjit_memcpy(v.inv.dev, &sentinel, 4, CKJIT_HOST_TO_DEVICE)) {
    gt_fail(ck, "invalid fill: %s", ckjit_last_error());
    goto done;
  }
  const ckjit_status st = ckjit_fused_moe(&d, NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(ck, "ckjit_fused_moe with %d shared experts: %s: %s", S, ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  if (gt_sync(ck) || fm_download(ck, &v, &inv)) goto done;
  fm_check_same_y(ck, &v, first, "the problem with the shared experts routed");
  const int32_t want = alone ? (int32_t)n_routed : inv_ref;
  if (inv != want) gt_fail(ck, "*invalid %d, want %d", inv, want);
  else gt_pass(ck);
done:
  free(first);
  for (int i = 0; i < 7; i++) gt_buf_free(mine[i]);
  fm_dev_free(&v);
  fm_host_free(&p);
  gt_check_end(ck);
  return ck->failures - f0;
}

/* Gated shared experts (Qwen2-MoE) against the reference: every routed id
 * -1 (four routed experts of inter 64 that no token reaches), S shared
 * experts, y[t] = sum_j g[t][j] * shared_j(x[t]) rounded, g = sigmoid(x[t]
 * . gate[j]).  The reference is the problem of S experts that every token
 * names in order, its weights the host's gates (known to the device's f32
 * error, multiplying each product after its rounding: fm_host.tw_err). */
long fm_gated_check(gt_ctx *ctx, size_t index, uint64_t seed, fm_case c, int S) {
  gt_check *ck = ctx->ck;
  const long f0 = ck->failures;
  const int64_t T = c.tokens, H = c.hidden, k = c.k, n_routed = T * k, si = c.inter;
  c.experts = S, c.k = S, c.no_invalid = 1; /* the reference problem */
  tu_rng r = {seed ^ 0x6A7EDull};
  fm_host p;
  fm_dev v;
  gt_buf ids, tw, w1, w2, s1, s2, gate, ws;
  memset(&v, 0, sizeof v);
  gt_buf *const mine[] = {&ids, &tw, &w1, &w2, &s1, &s2, &gate, &ws};
  for (int i = 0; i < 8; i++) memset(mine[i], 0, sizeof *mine[i]);
  double *err = NULL;
  fm_begin(ck, "gated shared experts", index, &c, seed);
  if (fm_host_make(&p, &c, seed, ctx->threads) || !(err = malloc(sizeof(double) * (size_t)(T * S)))) {
    gt_fail(ck, "host allocation failed");
    goto done;
  }
  /* the gates [S][H], uniform in +-a so that the logits are O(1) */
  if (gt_buf_alloc(ck, &gate, c.dtype, (size_t)(S * H))) goto done;
  double ss = 0.0;
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < H; h++) ss += pow(gt_get(c.dtype, p.x, (size_t)(t * p.ldx + h)), 2);
  const double a = 2.0 / sqrt(ss / (double)T + 1e-30);
  gt_fill_uniform(c.dtype, gate.host, 0, (size_t)(S * H), &r, -a, a);
  for (int64_t t = 0; t < T; t++)
    for (int j = 0; j < S; j++) {
      double dot = 0.0, mag = 0.0;
      for (int64_t h = 0; h < H; h++) {
        const double term = gt_get(c.dtype, p.x, (size_t)(t * p.ldx + h)) * gt_get(c.dtype, gate.host, (size_t)(j * H + h));
        dot += term, mag += fabs(term);
      }
      const double g = 1.0 / (1.0 + exp(-dot));
      p.ids[t * S + j] = j, p.tw[t * S + j] = (float)g;
      /* f32 accumulation over H terms, through the sigmoid (slope <= 1/4), and the f32 sigmoid itself */
      err[t * S + j] = 0.25 * (double)(H + 8) * 0x1p-23 * mag + 0x1p-20 * g;
    }
  p.tw_err = err;
  if (fm_dev_make(ck, &v, &p) || gt_buf_upload(ck, &gate)) goto done;

  const int fp8 = c.wdt == CKJIT_FP8_E4M3;
  ckjit_fused_moe_desc d = v.d;
  d.experts = 4, d.k = (int)k, d.inter = 64;
  if (gt_buf_alloc(ck, &ids, CKJIT_I32, (size_t)n_routed) || gt_buf_alloc(ck, &tw, CKJIT_F32, (size_t)n_routed) ||
      gt_buf_alloc(ck, &w1, c.wdt, (size_t)(4 * 2 * 64 * H)) || gt_buf_alloc(ck, &w2, c.wdt, (size_t)(4 * H * 64)) ||
      gt_buf_alloc(ck, &s1, CKJIT_F32, (size_t)(4 * 2 * 64 * H)) || gt_buf_alloc(ck, &s2, CKJIT_F32, (size_t)(4 * H * 64)))
    goto done;
  for (int64_t i = 0; i < n_routed; i++) ((int32_t *)(void *)ids.host)[i] = -1, ((float *)(void *)tw.host)[i] = 0.5f;
  if (n_routed && (gt_buf_upload(ck, &ids) || gt_buf_upload(ck, &tw))) goto done;
  d.topk_ids = ids.dev, d.topk_weights = tw.dev, d.w_gate_up = w1.dev, d.w_down = w2.dev;
  if (fp8) d.scale_gate_up = s1.dev, d.scale_down = s2.dev;
  d.shared_experts = S, d.shared_inter = si, d.shared_gate = gate.dev;
  d.w_shared_gate_up = v.w1.dev, d.w_shared_down = v.w2.dev;
  if (fp8) d.scale_shared_gate_up = v.s1.dev, d.scale_shared_down = v.s2.dev;
  const size_t ws_bytes = ckjit_fused_moe_workspace_size(&d);
  if (!ws_bytes) {
    gt_fail(ck, "ckjit_fused_moe_workspace_size with gated shared experts: 0 (%s)", ckjit_last_error());
    goto done;
  }
  if (gt_buf_alloc(ck, &ws, CKJIT_I8, ws_bytes) || gt_buf_poison(ck, &ws) || gt_buf_poison(ck, &v.y)) goto done;
  d.workspace = ws.dev, d.workspace_bytes = ws_bytes;
  const ckjit_status st = ckjit_fused_moe(&d, NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(ck, "ckjit_fused_moe with %d gated shared experts: %s: %s", S, ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  int32_t inv;
  if (gt_sync(ck) || fm_download(ck, &v, &inv)) goto done;
  fm_check_output(ck, ctx, &p, &v, inv, &r);
done:
  free(err);
  p.tw_err = NULL;
  for (int i = 0; i < 8; i++) gt_buf_free(mine[i]);
  fm_dev_free(&v);
  fm_host_free(&p);
  gt_check_end(ck);
  return ck->failures - f0;
}

