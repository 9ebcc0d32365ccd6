/* The fused-MoE GPU suite's device side (fused_moe_device.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fused_moe_device.h"

static gt_buf *dev_buf(fm_dev *v, int i) {
  gt_buf *const all[10] = {&v->x, &v->y, &v->ids, &v->tw, &v->w1, &v->w2, &v->s1, &v->s2, &v->ws, &v->inv};
  return all[i];
}

void fm_dev_free(fm_dev *v) {
  for (int i = 0; i < 10; i++) gt_buf_free(dev_buf(v, i));
}

/* A device buffer of elems `dt` elements holding src (its host mirror, a
 * calloc, stays untouched: large weights are not copied twice). */
int fm_dev_put(gt_check *ck, gt_buf *b, ckjit_dtype dt, const void *src, size_t elems) {
  if (gt_buf_alloc(ck, b, dt, elems)) return -1;
  if (!elems) return 0;
  const ckjit_status st = ckjit_memcpy(b->dev, src, elems * gt_esize(dt), CKJIT_HOST_TO_DEVICE);
  if (st != CKJIT_SUCCESS) gt_fail(ck, "upload: %s: %s", ckjit_status_string(st), ckjit_last_error());
  return st == CKJIT_SUCCESS ? 0 : -1;
}

/* The routing into the device's ids and weights. */
int fm_upload_routing(gt_check *ck, fm_dev *v, const fm_host *p) {
  const size_t n = (size_t)(p->c->tokens * p->c->k);
  for (size_t i = 0; i < n; i++) {
    if (p->c->ids == CKJIT_I32) ((int32_t *)(void *)v->ids.host)[i] = (int32_t)p->ids[i];
    else ((int64_t *)(void *)v->ids.host)[i] = p->ids[i];
  }
  memcpy(v->tw.host, p->tw, n * sizeof(float));
  return n && (gt_buf_upload(ck, &v->ids) || gt_buf_upload(ck, &v->tw)) ? -1 : 0;
}

/* Buffers, the descriptor and the workspace for p. */
int fm_dev_make(gt_check *ck, fm_dev *v, const fm_host *p) {
  const fm_case *c = p->c;
  const int fp8 = c->wdt == CKJIT_FP8_E4M3;
  memset(v, 0, sizeof *v);
  v->ldy = c->hidden + c->ldy_pad;
  const size_t n = (size_t)(c->tokens * c->k);
  if (fm_dev_put(ck, &v->x, c->dtype, p->x, (size_t)(c->tokens * p->ldx)) ||
      gt_buf_alloc(ck, &v->y, c->dtype, (size_t)(c->tokens * v->ldy) + YGUARD) || gt_buf_poison(ck, &v->y) ||
      gt_buf_alloc(ck, &v->ids, c->ids, n) || gt_buf_alloc(ck, &v->tw, CKJIT_F32, n) ||
      fm_upload_routing(ck, v, p) || fm_dev_put(ck, &v->w1, c->wdt, p->w1, p->w1_elems) ||
      fm_dev_put(ck, &v->w2, c->wdt, p->w2, p->w2_elems) ||
      (fp8 && (fm_dev_put(ck, &v->s1, CKJIT_F32, p->s1, p->s1_elems) || fm_dev_put(ck, &v->s2, CKJIT_F32, p->s2, p->s2_elems))) ||
      gt_buf_alloc(ck, &v->inv, CKJIT_I32, 1))
    return -1;
  ckjit_fused_moe_desc *d = &v->d;
  ckjit_fused_moe_desc_init(d);
  d->tokens = c->tokens, d->hidden = c->hidden, d->inter = c->inter, d->experts = c->experts, d->k = c->k;
  d->dtype = c->dtype, d->x = v->x.dev, d->ldx = p->ldx, d->y = v->y.dev, d->ldy = v->ldy;
  d->ids_dtype = c->ids, d->topk_ids = v->ids.dev, d->topk_weights = v->tw.dev;
  d->weight_dtype = c->wdt, d->w_gate_up = v->w1.dev, d->w_down = v->w2.dev;
  if (fp8) d->weight_scaling = c->sc, d->scale_gate_up = v->s1.dev, d->scale_down = v->s2.dev;
  d->activation = c->act;
  d->invalid = c->no_invalid ? NULL : v->inv.dev;
  v->ws_bytes = ckjit_fused_moe_workspace_size(d);
  if (!v->ws_bytes && c->tokens > 0) {
    gt_fail(ck, "ckjit_fused_moe_workspace_size returned 0: %s", ckjit_last_error());
    return -1;
  }
  if (gt_buf_alloc(ck, &v->ws, CKJIT_I8, v->ws_bytes)) return -1; /* exactly the size asked for */
  d->workspace = v->ws.dev, d->workspace_bytes = v->ws_bytes;
  return 0;
}

/* One call on `stream` with the workspace and *invalid refilled first. */
ckjit_status fm_call(gt_check *ck, fm_dev *v, void *stream) {
  const int32_t sentinel = INV_SENTINEL;
  if ((v->ws_bytes && ckjit_memset(v->ws.dev, 0xFF, v->ws_bytes) != CKJIT_SUCCESS) ||
      ckjit_memcpy(v->inv.dev, &sentinel, 4, CKJIT_HOST_TO_DEVICE) != CKJIT_SUCCESS) {
    gt_fail(ck, "workspace / invalid fill: %s", ckjit_last_error());
    return CKJIT_ERROR_INTERNAL;
  }
  const ckjit_status st = ckjit_fused_moe(&v->d, stream);
  if (st != CKJIT_SUCCESS) gt_fail(ck, "ckjit_fused_moe returned %s: %s", ckjit_status_string(st), ckjit_last_error());
  return st;
}

int fm_download(gt_check *ck, fm_dev *v, int32_t *inv) {
  if (gt_buf_download(ck, &v->y, NULL) || gt_buf_download(ck, &v->inv, NULL)) return -1;
  memcpy(inv, v->inv.host, 4);
  return 0;
}

/* The tokens the reference checks: all, or the first, the last, INVALID's
 * forced ones (1, tokens / 2) and `sample` more at random. */
static int64_t pick(const fm_case *c, tu_rng *r, int64_t **out) {
  const int64_t T = c->tokens, want = c->sample && c->sample + 4 < T ? c->sample + 4 : T;
  int64_t *tok = malloc(sizeof(int64_t) * (size_t)(want ? want : 1)), n = 0;
  uint8_t *seen = calloc((size_t)(T ? T : 1), 1);
  if (!tok || !seen) abort();
  const int64_t fixed[4] = {0, T - 1, 1, T / 2};
  for (int i = 0; i < 4 && want < T; i++)
    if (!seen[fixed[i]]) seen[fixed[i]] = 1, tok[n++] = fixed[i];
  while (n < want) {
    const int64_t t = want == T ? n : tu_rng_range(r, 0, T - 1);
    if (want == T || !seen[t]) seen[t] = 1, tok[n++] = t;
  }
  free(seen);
  *out = tok;
  return n;
}

/* Checks y (downloaded) and *invalid against p's routing (see
 * test_fused_moe_gpu.c's opening comment). */
void fm_check_output(gt_check *ck, const gt_ctx *ctx, const fm_host *p, fm_dev *v, int32_t inv, tu_rng *r) {
  const fm_case *c = p->c;
  const int64_t H = c->hidden, T = c->tokens, ldy = v->ldy;
  const uint8_t *y = v->y.host;
  long pad_bad = 0, unwritten = 0, nonzero = 0;
  for (size_t i = 0; i < v->y.elems; i++) {
    const int64_t t = (int64_t)i / ldy, col = (int64_t)i % ldy;
    if (t >= T || col >= H) pad_bad += !gt_is_poison(c->dtype, y, i);
    else if (fm_all_invalid(p, t)) nonzero += gt_get(c->dtype, y, i) != 0.0;
    else unwritten += !isfinite(gt_get(c->dtype, y, i));
  }
  if (pad_bad)
    gt_fail(ck, "%ld elements of y's padding (ldy %lld) or the guard after it were written", pad_bad, (long long)ldy);
  else gt_pass(ck);
  if (nonzero) gt_fail(ck, "%ld elements of tokens without a valid id are not 0", nonzero);
  else gt_pass(ck);
  if (unwritten) gt_fail(ck, "%ld elements of y are NaN / inf (not written?)", unwritten);
  else gt_pass(ck);
  const int64_t want_inv = fm_invalid_count(p);
  if (c->no_invalid) {
    /* desc.invalid NULL: nothing to read back */
  } else if (T == 0 ? inv != 0 && inv != INV_SENTINEL : inv != want_inv) { /* T 0: "does nothing" or writes 0 */
    gt_fail(ck, "*invalid = %d, want %lld", inv, (long long)want_inv);
  } else {
    gt_pass(ck);
  }
  if (T == 0) return;
  int64_t *tok;
  const int64_t n = pick(c, r, &tok);
  double *lo = malloc(sizeof(double) * (size_t)(n * H)), *hi = malloc(sizeof(double) * (size_t)(n * H));
  double *ref = malloc(sizeof(double) * (size_t)(n * H));
  if (!lo || !hi || !ref) abort();
  fm_reference(p, tok, n, lo, hi, ref, ctx->threads);
  const double atol = fm_atol(c->dtype);
  long bad = 0;
  for (int64_t k = 0; k < n; k++)
    for (int64_t i = 0; i < H; i++) {
      const int64_t t = tok[k];
      const double got = gt_get(c->dtype, y, (size_t)(t * ldy + i)), l = lo[k * H + i], h = hi[k * H + i];
      if (got >= l - atol && got <= h + atol) continue;
      bad++;
      gt_fail(ck, "y[%lld][%lld] = %.9g, want %.9g in [%.9g, %.9g] (ids %lld %lld ...)", (long long)t, (long long)i, got,
              ref[k * H + i], l, h, (long long)p->ids[t * c->k], (long long)p->ids[t * c->k + (c->k > 1)]);
    }
  if (!bad) gt_pass(ck);
  free(tok), free(lo), free(hi), free(ref);
}

static const char *act_name(int act) {
  return act == CKJIT_UNARY_SILU ? "silu" : act == CKJIT_UNARY_GELU_TANH ? "gelu_tanh" : "gelu_erf";
}

void fm_begin(gt_check *ck, const char *what, size_t index, const fm_case *c, uint64_t seed) {
  gt_check_begin(ck,
                 "%s %zu [%s] tokens %lld experts %d k %d hidden %lld inter %lld %s, %s%s weights, %s, %s ids, %s, "
                 "seed %llu",
                 what, index, c->name, (long long)c->tokens, c->experts, c->k, (long long)c->hidden, (long long)c->inter,
                 ckjit_dtype_name(c->dtype), ckjit_dtype_name(c->wdt),
                 c->wdt != CKJIT_FP8_E4M3 ? "" : c->sc == CKJIT_FP8_SCALE_ROW ? " row-scaled" : " block-scaled",
                 act_name(c->act), ckjit_dtype_name(c->ids), fm_routing_name(c->routing), (unsigned long long)seed);
}

fm_case fm_mk(const char *name, int64_t tokens, int E, int k, int64_t H, int64_t I, ckjit_dtype dt, ckjit_dtype wdt,
              ckjit_unary_op act, ckjit_dtype ids, int routing) {
  fm_case c;
  memset(&c, 0, sizeof c);
  c.name = name, c.tokens = tokens, c.experts = E, c.k = k, c.hidden = H, c.inter = I, c.dtype = dt, c.wdt = wdt;
  c.sc = CKJIT_FP8_SCALE_BLOCK, c.act = act, c.ids = ids, c.routing = routing;
  return c;
}


void fm_check_same_y(gt_check *ck, const fm_dev *v, const uint8_t *want, const char *from) {
  const size_t bytes = v->y.elems * gt_esize(v->y.dt);
  size_t differ = 0, at = 0;
  for (size_t i = 0; i < bytes; i++)
    if (v->y.host[i] != want[i] && !differ++) at = i;
  if (differ) gt_fail(ck, "y: %zu of %zu bytes differ from %s (first at byte %zu)", differ, bytes, from, at);
  else gt_pass(ck);
}
