/* GPU suite for ckjit_fused_moe (ckjit/moe.h), through the public API, against
 * a float64 reference of the header's definition:
 *   y[t] = rnd(sum_s rnd(w[t][s] down_e(b)))   (f32 sum in slot order),
 *   b    = rnd(act(gate_e(a)) up_e(a)), quantized again under FP8,
 *   a    = x (16-bit weights) or x quantized per token / 1 x 128 block (FP8),
 * an id outside 0 .. experts - 1 contributing nothing (a token with no valid
 * id reads 0) and counted into *invalid.
 *
 * Data.  The gate-up GEMM's operands are chosen so that its f32 sums are
 * exact in any order, so that its outputs, hence h, are the reference's up
 * to the activation's f32 error and every test failure is a real one:
 *   - 16-bit: x = k / 8 (|k| <= 8), w_gate_up = k 2^-(wb + 4) (|k| <= 16,
 *     2^wb ~ sqrt(hidden) / 2): products are multiples of 2^-(wb + 7), and
 *     every partial sum is at most hidden 2^7 of those units (2^19 at
 *     hidden 4096: exact in f32); one case ("random data") uses uniform x
 *     and weights instead;
 *   - FP8: every quantization group of x has scale r 2^-m (r 1 or 3/2) and
 *     quantizes exactly to codes 64 k (|k| <= 7), x moved off the codes by
 *     up to 3/8 of a step where r = 1 (a correct quantizer rounds it back,
 *     a truncating one does not; r = 3/2 catches another group's scale);
 *     w_gate_up's codes are 0, +-1/4, +-1/2: products are multiples of 16
 *     up to 224, a 128-block's sum within 11 bits (as test_gemm_fp8_gpu's
 *     exact data), then scaled in f32.
 * w_down is uniform (16-bit) or random e4m3 codes up to 3.75 (FP8); scales
 * are log-uniform over [1/2, 2] x a size factor; routing weights uniform in
 * [0.05, 1).  The data generators' premises are checked on the host
 * (fm_self_check, before the device check).
 *
 * Tolerance (fused_moe_reference.c derives it): each element's reference is
 * an interval [lo, hi] carried through the chain, every rounding to dtype
 * applied to its input's interval ends (rounding is monotone):
 *   - gate-up error c1 (S + D) + D, S = sum |terms|, D = sum |w| da (the
 *     activations' quantization uncertainty); c1 = 0 for exact data,
 *     (hidden + 8) 2^-21 for random 16-bit data (test_gemm_gpu's f32
 *     tensor-core bound), (kb + 4) 2^-23 for FP8 (the f32 block scaling);
 *   - act: 1.2 x its input's error + 2^-18 (1 + |g|) (hardware exp / erf);
 *   - each FP8 quantization (x, h): the device's scale within 2^-21 of
 *     amax / 448 for any amax its inputs allow, its quotients within 2^-20:
 *     an element near a rounding boundary, or whose input interval spans
 *     one, may take either code, so the bound is per element (one e4m3
 *     step times |weight| only where the codes can differ, not everywhere:
 *     a step everywhere would be ~10% of sum |terms|, wider than y itself
 *     at inter 1408, and the test could not fail);
 *   - the down GEMM: (inter + 8) 2^-21 of sum |terms| (16-bit), or
 *     2^-9 + (kb + 4) 2^-23 (FP8: the tensor cores' shortened 128-block
 *     sums, as test_gemm_fp8_gpu), plus sum |w_down| db for h's uncertainty;
 *   - each slot's rnd(w d) and the f32 combine (slots 2^-23 sum |c|);
 *   - an f16 subnormal step (2^-24) of slack.
 * On simulated devices (fm_self_check) the honest one stays inside and
 * zeros, a wrong expert, a dropped slot, the weight ignored, another
 * activation, gate / up swapped, clamped invalid ids, truncating or per-row
 * (BLOCK) quantization of x and a transposed block scale each fail, also
 * at hidden 4096 / inter 1408 / k 8 (the intervals' half-width averages
 * ~4% of |y| there in bf16, ~14% with FP8).
 *
 * Each case: y starts as 0xFF bytes (NaN) and its padding (ldy > hidden)
 * and a guard after it must stay so; x's padding holds NaN; the workspace
 * is exactly ckjit_fused_moe_workspace_size() bytes, filled with 0xFF
 * before every call, and one byte less is refused (INVALID_ARGUMENT);
 * every y element is written, all-invalid tokens read 0, *invalid is the
 * count; the reference checks every token (small cases) or the first, the
 * last, the forced-invalid ones and a random sample (large ones); x, the
 * ids and the routing weights come back unchanged; `twice` cases rerun and
 * must give identical bits.  Then a CUDA graph capture of one call on a
 * non-default stream replayed over four routings (bf16 weights, then FP8
 * block-scaled ones), and CKJIT_MOE_CHECK=1.
 *
 * Runs on sm_90 with an sm_90 compile arch; elsewhere one call must return
 * CKJIT_ERROR_UNSUPPORTED and the suite is skipped with the reason.
 * CKJIT_TEST_SKIP_LARGE=1 skips the 16384-token and 4096 x 1408 cases. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "gpu_harness.h"
#include "fused_moe_reference.h"
#include "../gemm/fp8_reference.h"

#define YGUARD 64
#define INV_SENTINEL 0x7F7F7F7F

typedef struct fm_dev {
  gt_buf x, y, ids, tw, w1, w2, s1, s2, ws, inv;
  int64_t ldy;
  size_t ws_bytes;
  ckjit_fused_moe_desc d;
} fm_dev;

static gt_buf *dev_buf(fm_dev *v, int i) {
  gt_buf *const all[10] = {&v->x, &v->y, &v->ids, &v->tw, &v->w1, &v->w2, &v->s1, &v->s2, &v->ws, &v->inv};
  return all[i];
}

static void dev_free(fm_dev *v) {
  for (int i = 0; i < 10; i++) gt_buf_free(dev_buf(v, i));
}

/* A device buffer of elems `dt` elements holding src (its host mirror, a
 * calloc, stays untouched: large weights are not copied twice). */
static int dev_put(gt_check *ck, gt_buf *b, ckjit_dtype dt, const void *src, size_t elems) {
  if (gt_buf_alloc(ck, b, dt, elems)) return -1;
  if (!elems) return 0;
  const ckjit_status st = ckjit_memcpy(b->dev, src, elems * gt_esize(dt), CKJIT_HOST_TO_DEVICE);
  if (st != CKJIT_SUCCESS) gt_fail(ck, "upload: %s: %s", ckjit_status_string(st), ckjit_last_error());
  return st == CKJIT_SUCCESS ? 0 : -1;
}

/* The routing into the device's ids and weights. */
static int upload_routing(gt_check *ck, fm_dev *v, const fm_host *p) {
  const size_t n = (size_t)(p->c->tokens * p->c->k);
  for (size_t i = 0; i < n; i++) {
    if (p->c->ids == CKJIT_I32) ((int32_t *)(void *)v->ids.host)[i] = (int32_t)p->ids[i];
    else ((int64_t *)(void *)v->ids.host)[i] = p->ids[i];
  }
  memcpy(v->tw.host, p->tw, n * sizeof(float));
  return n && (gt_buf_upload(ck, &v->ids) || gt_buf_upload(ck, &v->tw)) ? -1 : 0;
}

/* Buffers, the descriptor and the workspace for p. */
static int dev_make(gt_check *ck, fm_dev *v, const fm_host *p) {
  const fm_case *c = p->c;
  const int fp8 = c->wdt == CKJIT_FP8_E4M3;
  memset(v, 0, sizeof *v);
  v->ldy = c->hidden + c->ldy_pad;
  const size_t n = (size_t)(c->tokens * c->k);
  if (dev_put(ck, &v->x, c->dtype, p->x, (size_t)(c->tokens * p->ldx)) ||
      gt_buf_alloc(ck, &v->y, c->dtype, (size_t)(c->tokens * v->ldy) + YGUARD) || gt_buf_poison(ck, &v->y) ||
      gt_buf_alloc(ck, &v->ids, c->ids, n) || gt_buf_alloc(ck, &v->tw, CKJIT_F32, n) ||
      upload_routing(ck, v, p) || dev_put(ck, &v->w1, c->wdt, p->w1, p->w1_elems) ||
      dev_put(ck, &v->w2, c->wdt, p->w2, p->w2_elems) ||
      (fp8 && (dev_put(ck, &v->s1, CKJIT_F32, p->s1, p->s1_elems) || dev_put(ck, &v->s2, CKJIT_F32, p->s2, p->s2_elems))) ||
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
static ckjit_status call(gt_check *ck, fm_dev *v, void *stream) {
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

static int download(gt_check *ck, fm_dev *v, int32_t *inv) {
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

/* Checks y (downloaded) and *invalid against p's routing (see the top). */
static void check_output(gt_check *ck, const gt_ctx *ctx, const fm_host *p, fm_dev *v, int32_t inv, tu_rng *r) {
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

static void begin(gt_check *ck, const char *what, size_t index, const fm_case *c, uint64_t seed) {
  gt_check_begin(ck,
                 "%s %zu [%s] tokens %lld experts %d k %d hidden %lld inter %lld %s, %s%s weights, %s, %s ids, %s, "
                 "seed %llu",
                 what, index, c->name, (long long)c->tokens, c->experts, c->k, (long long)c->hidden, (long long)c->inter,
                 ckjit_dtype_name(c->dtype), ckjit_dtype_name(c->wdt),
                 c->wdt != CKJIT_FP8_E4M3 ? "" : c->sc == CKJIT_FP8_SCALE_ROW ? " row-scaled" : " block-scaled",
                 act_name(c->act), ckjit_dtype_name(c->ids), fm_routing_name(c->routing), (unsigned long long)seed);
}

static long run_case(gt_ctx *ctx, size_t index, const fm_case *c, uint64_t seed) {
  gt_check *ck = ctx->ck;
  const long f0 = ck->failures;
  tu_rng r = {seed ^ 0xC0FFEEull};
  fm_host p;
  fm_dev v;
  memset(&v, 0, sizeof v);
  uint8_t *first = NULL, *back = NULL;
  int32_t inv = 0;
  begin(ck, "case", index, c, seed);
  if (fm_host_make(&p, c, seed, ctx->threads)) {
    gt_fail(ck, "host allocation failed");
    goto done;
  }
  if (dev_make(ck, &v, &p)) goto done;
  if (v.ws_bytes) { /* one byte short: refused before any device work */
    ckjit_fused_moe_desc small = v.d;
    small.workspace_bytes = v.ws_bytes - 1;
    const ckjit_status st = ckjit_fused_moe(&small, NULL);
    if (st != CKJIT_ERROR_INVALID_ARGUMENT)
      gt_fail(ck, "workspace_bytes %zu (one short) gave %s, want CKJIT_ERROR_INVALID_ARGUMENT", v.ws_bytes - 1,
              ckjit_status_string(st));
    else gt_pass(ck);
  }
  if (call(ck, &v, NULL) || gt_sync(ck) || download(ck, &v, &inv)) goto done;
  check_output(ck, ctx, &p, &v, inv, &r);
  const size_t ybytes = v.y.elems * gt_esize(c->dtype);
  if (c->twice) {
    first = malloc(ybytes);
    if (!first) abort();
    memcpy(first, v.y.host, ybytes);
    if (gt_buf_poison(ck, &v.y) || call(ck, &v, NULL) || gt_sync(ck) || download(ck, &v, &inv)) goto done;
    if (memcmp(first, v.y.host, ybytes)) gt_fail(ck, "a second run gave other bits");
    else gt_pass(ck);
  }
  /* the inputs are not written */
  const size_t xb = v.x.elems * gt_esize(c->dtype), ib = v.ids.elems * gt_esize(c->ids), wb = v.tw.elems * 4;
  back = malloc(xb + ib + wb + 1);
  if (!back) abort();
  if (!gt_buf_download(ck, &v.x, back) && !gt_buf_download(ck, &v.ids, back + xb) &&
      !gt_buf_download(ck, &v.tw, back + xb + ib)) {
    if (memcmp(back, p.x, xb) || memcmp(back + xb, v.ids.host, ib) || memcmp(back + xb + ib, v.tw.host, wb))
      gt_fail(ck, "x, topk_ids or topk_weights changed");
    else gt_pass(ck);
  }
done:
  free(first), free(back);
  dev_free(&v);
  fm_host_free(&p);
  gt_check_end(ck);
  return ck->failures - f0;
}

/* ---- the cases ---------------------------------------------------------------------------- */

static fm_case mk(const char *name, int64_t tokens, int E, int k, int64_t H, int64_t I, ckjit_dtype dt, ckjit_dtype wdt,
                  ckjit_unary_op act, ckjit_dtype ids, int routing) {
  fm_case c;
  memset(&c, 0, sizeof c);
  c.name = name, c.tokens = tokens, c.experts = E, c.k = k, c.hidden = H, c.inter = I, c.dtype = dt, c.wdt = wdt;
  c.sc = CKJIT_FP8_SCALE_BLOCK, c.act = act, c.ids = ids, c.routing = routing;
  return c;
}

static size_t build(fm_case *cs, int skip_large) {
  const ckjit_dtype B = CKJIT_BF16, F = CKJIT_F16, Q = CKJIT_FP8_E4M3, I32 = CKJIT_I32, I64 = CKJIT_I64;
  const ckjit_unary_op SILU = CKJIT_UNARY_SILU, TANH = CKJIT_UNARY_GELU_TANH, ERF = CKJIT_UNARY_GELU_ERF;
  size_t n = 0;
  fm_case c;
  cs[n++] = mk("no tokens", 0, 8, 2, 272, 144, B, B, SILU, I32, FM_UNIFORM);
  cs[n++] = mk("one token", 1, 8, 2, 272, 144, B, B, SILU, I32, FM_UNIFORM);
  cs[n++] = mk("7 tokens, k 8 of 64 experts", 7, 64, 8, 272, 144, F, F, TANH, I64, FM_UNIFORM);
  cs[n++] = mk("k 1, invalid ids", 300, 64, 1, 272, 144, B, B, SILU, I32, FM_INVALID);
  c = mk("every slot on one expert (twice each token)", 1000, 8, 2, 272, 144, B, B, ERF, I32, FM_ONE_EXPERT);
  c.twice = 1, cs[n++] = c;
  cs[n++] = mk("3 of 256 experts used", 500, 256, 8, 272, 144, F, F, TANH, I64, FM_FEW);
  /* k 16: two rounds of the combine's 8 slots in flight; hidden 1168: a
   * row of two combine units, the second partial */
  cs[n++] = mk("k 16 of 64 experts, hidden 1168", 33, 64, 16, 1168, 144, B, B, SILU, I32, FM_UNIFORM);
  cs[n++] = mk("invalid ids of 512 experts", 700, 512, 2, 272, 144, B, B, SILU, I64, FM_INVALID);
  c = mk("random data, ldx / ldy padded, invalid NULL", 100, 8, 2, 272, 144, B, B, SILU, I32, FM_UNIFORM);
  c.random_data = 1, c.ldx_pad = 40, c.ldy_pad = 24, c.no_invalid = 1, cs[n++] = c;
  c = mk("fp8 row", 77, 8, 2, 272, 144, B, Q, SILU, I32, FM_UNIFORM);
  c.sc = CKJIT_FP8_SCALE_ROW, c.zero_groups = 1, cs[n++] = c;
  c = mk("fp8 row, k 1, invalid ids", 200, 64, 1, 272, 144, F, Q, ERF, I64, FM_INVALID);
  c.sc = CKJIT_FP8_SCALE_ROW, c.ldy_pad = 8, cs[n++] = c;
  c = mk("fp8 block, inter 192", 77, 8, 2, 272, 192, B, Q, SILU, I32, FM_UNIFORM);
  c.zero_groups = 1, cs[n++] = c;
  c = mk("fp8 block, k 8, padded", 300, 64, 8, 528, 320, F, Q, TANH, I64, FM_FEW);
  c.ldx_pad = 8, c.ldy_pad = 16, c.zero_groups = 1, c.twice = 1, cs[n++] = c;
  c = mk("fp8 row, 512 experts, 7 tokens", 7, 512, 8, 272, 144, B, Q, SILU, I32, FM_UNIFORM);
  c.sc = CKJIT_FP8_SCALE_ROW, cs[n++] = c;
  if (skip_large) return n;
  c = mk("16384 tokens, k 8 of 256 experts", 16384, 256, 8, 272, 144, B, B, SILU, I32, FM_UNIFORM);
  c.sample = 24, c.large = 1, cs[n++] = c;
  c = mk("16384 tokens of 512 experts, invalid ids", 16384, 512, 2, 528, 208, F, F, TANH, I64, FM_INVALID);
  c.sample = 24, c.ldy_pad = 8, c.large = 1, cs[n++] = c;
  c = mk("16384 tokens, fp8 block", 16384, 256, 8, 272, 192, B, Q, SILU, I32, FM_INVALID);
  c.sample = 16, c.large = 1, cs[n++] = c;
  c = mk("realistic bf16", 4096, 64, 8, 4096, 1408, B, B, SILU, I32, FM_UNIFORM);
  c.sample = 16, c.large = 1, cs[n++] = c;
  c = mk("realistic fp8 block", 4096, 64, 8, 4096, 1408, B, Q, SILU, I32, FM_UNIFORM);
  c.sample = 16, c.large = 1, cs[n++] = c;
  return n;
}

/* ---- a CUDA graph replayed over routings ------------------------------------------------------ */

static struct {
  int (*stream_create)(void **, unsigned);
  int (*begin)(void *, int);
  int (*end)(void *, void **);
  int (*instantiate)(void **, void *, unsigned long long);
  int (*launch)(void *, void *);
  int (*sync)(void *);
  int (*device_get)(int *, int);
  int (*retain)(void **, int);
  int (*set_current)(void *);
  int (*exec_destroy)(void *);
  int (*graph_destroy)(void *);
  int (*stream_destroy)(void *);
} cu;

/* The CUDA driver's graph API (dlopen: no CUDA headers needed); 0 with the reason. */
static int load_cuda(const gt_ctx *ctx, char *why, size_t len) {
  if (ctx->info.backend != CKJIT_BACKEND_CUDA) {
    snprintf(why, len, "the graph replay uses the CUDA driver; device %s", ctx->info.device_arch);
    return 0;
  }
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(why, len, "dlopen libcuda.so.1: %s", dlerror());
    return 0;
  }
#define SYM(field, name) cu.field = (__typeof__(cu.field))dlsym(lib, name)
  SYM(stream_create, "cuStreamCreate"), SYM(begin, "cuStreamBeginCapture_v2"), SYM(end, "cuStreamEndCapture");
  SYM(instantiate, "cuGraphInstantiateWithFlags"), SYM(launch, "cuGraphLaunch"), SYM(sync, "cuStreamSynchronize");
  SYM(device_get, "cuDeviceGet"), SYM(retain, "cuDevicePrimaryCtxRetain"), SYM(set_current, "cuCtxSetCurrent");
  SYM(exec_destroy, "cuGraphExecDestroy"), SYM(graph_destroy, "cuGraphDestroy"), SYM(stream_destroy, "cuStreamDestroy_v2");
#undef SYM
  if (!cu.stream_create || !cu.begin || !cu.end || !cu.instantiate || !cu.launch || !cu.sync || !cu.device_get ||
      !cu.retain || !cu.set_current || !cu.exec_destroy || !cu.graph_destroy || !cu.stream_destroy) {
    snprintf(why, len, "this CUDA driver lacks the graph API");
    return 0;
  }
  return 1;
}

/* One call captured on a non-default stream, then replayed with the
 * routing (ids and weights on the device) changed between replays; y, the
 * workspace and *invalid are refilled before each. */
static long graph_replay(gt_ctx *ctx, size_t index, uint64_t seed, ckjit_dtype wdt) {
  gt_check *ck = ctx->ck;
  const long f0 = ck->failures;
  fm_case c = mk("CUDA graph replay", 256, 64, 8, 272, 192, CKJIT_BF16, wdt, CKJIT_UNARY_SILU, CKJIT_I32, FM_UNIFORM);
  char why[256];
  if (!load_cuda(ctx, why, sizeof why)) {
    printf("SKIP the CUDA graph replay: %s\n", why);
    return 0;
  }
  tu_rng r = {seed ^ 0x6A09E667ull};
  fm_host p;
  fm_dev v;
  memset(&v, 0, sizeof v);
  void *primary = NULL, *stream = NULL, *graph = NULL, *exec = NULL;
  int32_t inv;
  int dev;
  begin(ck, "case", index, &c, seed);
  if (fm_host_make(&p, &c, seed, ctx->threads)) {
    gt_fail(ck, "host allocation failed");
    goto done;
  }
  if (dev_make(ck, &v, &p)) goto done;
  /* the stream in the device's primary context, made current here (ckjit
   * leaves the caller's context alone) */
  if (cu.device_get(&dev, ctx->info.device) || cu.retain(&primary, dev) || cu.set_current(primary) ||
      cu.stream_create(&stream, 0)) {
    gt_fail(ck, "primary context / cuStreamCreate failed");
    goto done;
  }
  /* eager first: kernels are compiled and loaded outside the capture */
  if (call(ck, &v, stream) || cu.sync(stream) || download(ck, &v, &inv)) goto done;
  check_output(ck, ctx, &p, &v, inv, &r);
  int rc = cu.begin(stream, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */);
  const ckjit_status st = rc ? CKJIT_ERROR_INTERNAL : ckjit_fused_moe(&v.d, stream);
  if (!rc) rc = cu.end(stream, &graph);
  if (rc || st != CKJIT_SUCCESS || !graph || cu.instantiate(&exec, graph, 0)) {
    gt_fail(ck, "capture: driver status %d, ckjit_fused_moe %s: %s", rc, ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  static const int routings[4] = {FM_FEW, FM_ONE_EXPERT, FM_INVALID, FM_UNIFORM};
  for (int i = 0; i < 4; i++) {
    const int32_t sentinel = INV_SENTINEL;
    fm_route(&p, routings[i], &r);
    if (upload_routing(ck, &v, &p) || gt_buf_poison(ck, &v.y) || ckjit_memset(v.ws.dev, 0xFF, v.ws_bytes) ||
        ckjit_memcpy(v.inv.dev, &sentinel, 4, CKJIT_HOST_TO_DEVICE))
      goto done;
    if (cu.launch(exec, stream) || cu.sync(stream)) {
      gt_fail(ck, "replay %d (%s): cuGraphLaunch / cuStreamSynchronize failed", i, fm_routing_name(routings[i]));
      goto done;
    }
    if (download(ck, &v, &inv)) goto done;
    const long before = ck->failures;
    check_output(ck, ctx, &p, &v, inv, &r);
    if (ck->failures != before) printf("  (in replay %d, routing %s)\n", i, fm_routing_name(routings[i]));
  }
done:
  if (exec) cu.exec_destroy(exec);
  if (graph) cu.graph_destroy(graph);
  if (stream) cu.stream_destroy(stream);
  dev_free(&v);
  fm_host_free(&p);
  gt_check_end(ck);
  return ck->failures - f0;
}

/* ---- CKJIT_MOE_CHECK=1 ----------------------------------------------------------------------- */

/* An out-of-range id fails the call with INVALID_ARGUMENT; a routing
 * without one passes (and is right). */
static long moe_check(gt_ctx *ctx, size_t index, uint64_t seed) {
  gt_check *ck = ctx->ck;
  const long f0 = ck->failures;
  fm_case c = mk("CKJIT_MOE_CHECK=1", 16, 8, 2, 272, 144, CKJIT_BF16, CKJIT_BF16, CKJIT_UNARY_SILU, CKJIT_I32, FM_UNIFORM);
  tu_rng r = {seed ^ 0xBB67AE85ull};
  fm_host p;
  fm_dev v;
  memset(&v, 0, sizeof v);
  int32_t inv;
  begin(ck, "case", index, &c, seed);
  setenv("CKJIT_MOE_CHECK", "1", 1);
  if (fm_host_make(&p, &c, seed, ctx->threads)) {
    gt_fail(ck, "host allocation failed");
    goto done;
  }
  const int64_t good = p.ids[5];
  p.ids[5] = -1;
  if (dev_make(ck, &v, &p)) goto done;
  ckjit_status st = ckjit_fused_moe(&v.d, NULL);
  if (st != CKJIT_ERROR_INVALID_ARGUMENT || !strstr(ckjit_last_error(), "ckjit_fused_moe"))
    gt_fail(ck, "an id -1 gave %s (%s), want CKJIT_ERROR_INVALID_ARGUMENT naming ckjit_fused_moe", ckjit_status_string(st),
            ckjit_last_error());
  else gt_pass(ck);
  p.ids[5] = good;
  if (gt_sync(ck) || upload_routing(ck, &v, &p) || gt_buf_poison(ck, &v.y)) goto done;
  if (call(ck, &v, NULL) || gt_sync(ck) || download(ck, &v, &inv)) goto done;
  check_output(ck, ctx, &p, &v, inv, &r);
done:
  unsetenv("CKJIT_MOE_CHECK");
  dev_free(&v);
  fm_host_free(&p);
  gt_check_end(ck);
  return ck->failures - f0;
}

/* Expert parallelism against its definition: the layer with an expert_map
 * (16 local of 48 global experts, ids naming global experts) gives the same
 * y bytes as the layer on the local ids with every slot routed elsewhere
 * given id -1 (nothing is read for either); *invalid counts only the ids
 * outside the routing (the one planted), not the slots routed elsewhere. */
static long ep_check(gt_ctx *ctx, size_t index, uint64_t seed) {
  gt_check *ck = ctx->ck;
  const long f0 = ck->failures;
  enum { LOCAL = 16, GLOBAL = 48 };
  fm_case c = mk("expert parallel", 300, LOCAL, 4, 272, 144, CKJIT_BF16, CKJIT_BF16, CKJIT_UNARY_SILU, CKJIT_I32, FM_UNIFORM);
  tu_rng r = {seed ^ 0xA54FF53Aull};
  fm_host p;
  fm_dev v;
  gt_buf map;
  memset(&v, 0, sizeof v), memset(&map, 0, sizeof map);
  uint8_t *first = NULL;
  int64_t *global = NULL;
  begin(ck, "expert parallel", index, &c, seed);
  if (fm_host_make(&p, &c, seed, ctx->threads)) {
    gt_fail(ck, "host allocation failed");
    goto done;
  }
  /* global g holds local expert g % 16 for g < 32 (two global names each),
   * the rest live elsewhere */
  if (gt_buf_alloc(ck, &map, CKJIT_I32, GLOBAL)) goto done;
  for (int g = 0; g < GLOBAL; g++) ((int32_t *)(void *)map.host)[g] = g < 2 * LOCAL ? g % LOCAL : -1;
  if (gt_buf_upload(ck, &map)) goto done;
  const int64_t n = c.tokens * c.k;
  if (!(global = malloc(sizeof(int64_t) * (size_t)n))) abort();
  int64_t elsewhere = 0;
  for (int64_t i = 0; i < n; i++) {
    const int64_t e = p.ids[i]; /* a local expert */
    if (tu_rng_range(&r, 0, 2) == 0) { /* routed elsewhere: the local run reads id -1 */
      global[i] = 2 * LOCAL + tu_rng_range(&r, 0, GLOBAL - 2 * LOCAL - 1), p.ids[i] = -1, elsewhere++;
    } else {
      global[i] = e + LOCAL * tu_rng_range(&r, 0, 1);
    }
  }
  /* slot 7 is outside the routing: invalid in both runs, and no longer a
   * slot routed elsewhere if the draw above made it one */
  if (p.ids[7] == -1) elsewhere--;
  global[7] = GLOBAL + 3, p.ids[7] = -1;
  if (dev_make(ck, &v, &p)) goto done; /* the local ids */
  int32_t inv_local, inv_ep;
  if (call(ck, &v, NULL) || gt_sync(ck) || download(ck, &v, &inv_local)) goto done;
  check_output(ck, ctx, &p, &v, inv_local, &r); /* the local run against the reference */
  const size_t ybytes = v.y.elems * gt_esize(c.dtype);
  if (!(first = malloc(ybytes))) abort();
  memcpy(first, v.y.host, ybytes);
  for (int64_t i = 0; i < n; i++) ((int32_t *)(void *)v.ids.host)[i] = (int32_t)global[i];
  if (gt_buf_upload(ck, &v.ids) || gt_buf_poison(ck, &v.y)) goto done;
  v.d.expert_map = map.dev, v.d.global_experts = GLOBAL;
  if (call(ck, &v, NULL) || gt_sync(ck) || download(ck, &v, &inv_ep)) goto done;
  size_t differ = 0, at = 0;
  for (size_t i = 0; i < ybytes; i++)
    if (v.y.host[i] != first[i] && !differ++) at = i;
  if (differ) gt_fail(ck, "y: %zu of %zu bytes differ from the local run (first at byte %zu)", differ, ybytes, at);
  else gt_pass(ck);
  if (inv_ep != 1 || inv_local != 1 + (int32_t)elsewhere)
    gt_fail(ck, "*invalid %d with the map, %d without: want 1 and 1 + %lld", inv_ep, inv_local, (long long)elsewhere);
  else gt_pass(ck);
done:
  free(first);
  free(global);
  gt_buf_free(&map);
  dev_free(&v);
  fm_host_free(&p);
  gt_check_end(ck);
  return ck->failures - f0;
}

/* ckjit_fused_moe_router against its definition, ckjit_topk_softmax then
 * ckjit_fused_moe: y the same bytes (its padding and guard included), for
 * random logits (sometimes tied, so the tie rule shows), `dt` logits with a
 * row wider than experts, plain or renormalized weights.  The layer alone
 * is checked against the reference by the cases above, topk_softmax by
 * rows_gpu. */
static long router_check(gt_ctx *ctx, size_t index, uint64_t seed, int64_t tokens, ckjit_dtype dt, int renormalize) {
  gt_check *ck = ctx->ck;
  const long f0 = ck->failures;
  fm_case c = mk("router", tokens, 64, 8, 272, 144, CKJIT_BF16, CKJIT_BF16, CKJIT_UNARY_GELU_TANH, CKJIT_I32, FM_UNIFORM);
  tu_rng r = {seed ^ 0x3C6EF372ull};
  fm_host p;
  fm_dev v;
  gt_buf logits, rws;
  memset(&v, 0, sizeof v), memset(&logits, 0, sizeof logits), memset(&rws, 0, sizeof rws);
  uint8_t *first = NULL;
  begin(ck, "router", index, &c, seed);
  printf("  logits %s, renormalize %d\n", ckjit_dtype_name(dt), renormalize);
  const int64_t ld = c.experts + 8;
  if (fm_host_make(&p, &c, seed, ctx->threads)) {
    gt_fail(ck, "host allocation failed");
    goto done;
  }
  if (dev_make(ck, &v, &p) || gt_buf_alloc(ck, &logits, dt, (size_t)(tokens * ld))) goto done;
  for (int64_t i = 0; i < tokens * ld; i++) /* a coarse grid: ties happen */
    gt_put(dt, logits.host, (size_t)i, (double)tu_rng_range(&r, -16, 16) / 4);
  if (gt_buf_upload(ck, &logits)) goto done;
  /* the definition: the router into the layer's ids and weights, then the layer */
  ckjit_status st = ckjit_topk_softmax(dt, tokens, c.experts, logits.dev, ld, c.k, renormalize, v.tw.dev, CKJIT_I32,
                                       v.ids.dev, NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(ck, "ckjit_topk_softmax returned %s: %s", ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  int32_t inv;
  if (call(ck, &v, NULL) || gt_sync(ck) || download(ck, &v, &inv)) goto done;
  const size_t ybytes = v.y.elems * gt_esize(c.dtype);
  if (!(first = malloc(ybytes))) abort();
  memcpy(first, v.y.host, ybytes);
  /* the call, with exactly the workspace its query asks for */
  ckjit_fused_moe_desc d = v.d;
  d.topk_ids = NULL, d.topk_weights = NULL, d.ids_dtype = CKJIT_I64; /* not read */
  d.workspace_bytes = ckjit_fused_moe_router_workspace_size(&d);
  if (d.workspace_bytes < v.ws_bytes + 2 * 4 * (size_t)(tokens * c.k)) {
    gt_fail(ck, "ckjit_fused_moe_router_workspace_size %zu: less than the layer's %zu plus the routing", d.workspace_bytes,
            v.ws_bytes);
    goto done;
  }
  if (gt_buf_alloc(ck, &rws, CKJIT_I8, d.workspace_bytes) || gt_buf_poison(ck, &rws) || gt_buf_poison(ck, &v.y)) goto done;
  d.workspace = rws.dev;
  d.workspace_bytes -= 1;
  st = ckjit_fused_moe_router(&d, dt, logits.dev, ld, renormalize, NULL);
  if (st != CKJIT_ERROR_INVALID_ARGUMENT) gt_fail(ck, "a workspace one byte short gave %s", ckjit_status_string(st));
  else gt_pass(ck);
  d.workspace_bytes += 1;
  st = ckjit_fused_moe_router(&d, dt, logits.dev, ld, renormalize, NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(ck, "ckjit_fused_moe_router returned %s: %s", ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  if (gt_sync(ck) || gt_buf_download(ck, &v.y, NULL)) goto done;
  size_t differ = 0, at = 0;
  for (size_t i = 0; i < ybytes; i++)
    if (v.y.host[i] != first[i] && !differ++) at = i;
  if (differ) gt_fail(ck, "y: %zu of %zu bytes differ from topk_softmax + fused_moe (first at byte %zu)", differ, ybytes, at);
  else gt_pass(ck);
done:
  free(first);
  gt_buf_free(&logits);
  gt_buf_free(&rws);
  dev_free(&v);
  fm_host_free(&p);
  gt_check_end(ck);
  return ck->failures - f0;
}

/* ---- the suite --------------------------------------------------------------------------------- */

static int requires(gt_ctx *ctx, char *why, size_t len) {
  if (is_sm90(ctx->info.device_arch) && is_sm90(ctx->info.arch)) return 1;
  fm_case c = mk("probe", 4, 2, 1, 16, 16, CKJIT_BF16, CKJIT_BF16, CKJIT_UNARY_SILU, CKJIT_I32, FM_UNIFORM);
  fm_host p;
  fm_dev v;
  memset(&v, 0, sizeof v);
  ckjit_status st = CKJIT_ERROR_INTERNAL;
  gt_check_begin(ctx->ck, "unsupported-device probe");
  if (fm_host_make(&p, &c, 1, 1) == 0 && dev_make(ctx->ck, &v, &p) == 0) st = ckjit_fused_moe(&v.d, NULL);
  dev_free(&v);
  fm_host_free(&p);
  gt_check_end(ctx->ck);
  if (st == CKJIT_ERROR_UNSUPPORTED) {
    snprintf(why, len, "ckjit_fused_moe needs sm_90; device %s (%s), compile arch %s: CKJIT_ERROR_UNSUPPORTED (%s)",
             ctx->info.name, ctx->info.device_arch, ctx->info.arch, ckjit_last_error());
    return 0;
  }
  printf("note: device %s, compile arch %s is not sm_90, yet ckjit_fused_moe returned %s: running the cases\n",
         ctx->info.device_arch, ctx->info.arch, ckjit_status_string(st));
  return 1;
}

static gt_result run(gt_ctx *ctx) {
  if (ctx->skip_large) printf("SKIP the 16384-token and 4096 x 1408 cases: CKJIT_TEST_SKIP_LARGE is set\n");
  static fm_case cases[24];
  const size_t count = build(cases, ctx->skip_large);
  int failed = 0;
  for (size_t i = 0; i < count; i++)
    failed += run_case(ctx, i, &cases[i], ctx->seed ^ (0x9E3779B97F4A7C15ull * (i + 1))) != 0;
  uint64_t s = ctx->seed ^ (0x9E3779B97F4A7C15ull * (count + 1));
  failed += graph_replay(ctx, count, s, CKJIT_BF16) != 0;
  failed += graph_replay(ctx, count + 1, s ^ 1, CKJIT_FP8_E4M3) != 0; /* block-scaled (mk's default) */
  failed += moe_check(ctx, count + 2, ctx->seed ^ (0x9E3779B97F4A7C15ull * (count + 3))) != 0;
  s = ctx->seed ^ (0x9E3779B97F4A7C15ull * (count + 4));
  failed += router_check(ctx, count + 3, s, 1, CKJIT_F32, 0) != 0;
  failed += router_check(ctx, count + 4, s ^ 1, 77, CKJIT_BF16, 1) != 0;
  failed += router_check(ctx, count + 5, s ^ 2, 700, CKJIT_F16, 0) != 0;
  failed += ep_check(ctx, count + 6, s ^ 3) != 0;
  printf("fused_moe: %zu cases (%d failed), %ld checks, %ld failures\n", count + 7, failed, ctx->ck->checks,
         ctx->ck->failures);
  return (gt_result){(long)count + 7, failed};
}

static const gt_suite suite = {
    .name = "fused_moe_gpu",
    .cache_tag = "fused-moe-gpu",
    .self_check = fm_self_check,
    .requires = requires,
    .run = run,
    .check_stats = 1,
};

GT_MAIN(suite)
