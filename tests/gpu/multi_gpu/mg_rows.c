/* Multi-GPU test: one round of the elementwise, transpose and row-wise op
 * families on one device (multi_gpu.h), every result checked against an
 * f64 reference of the inputs as stored in their dtype.  The shapes are not
 * multiples of any tile (37 x 1000, padded leading dimensions) so every
 * kernel's edge handling runs; a wrong-device, wrong-module or stale result
 * is off by far more than these tolerances.
 *
 * Tolerances: f32-math error bounds as the per-family tests derive them
 * (tests/gpu/rows/), rounded up, plus the output dtype's rounding
 * (mg_rnd): copy2d and transpose are bit exact; elementwise 1e-5 (f32) /
 * 2^-8 (bf16) relative; row sums 2e-5 sum|x|; argmax exact; softmax 5e-5
 * relative; norms 5e-5 of the terms; int8 quantization within half a step
 * of v / row_scale (+ f32 noise), fp8 within half an ulp (2^-4 relative);
 * topk weights 4e-5 relative, indices exact (the logits are distinct
 * multiples of 1/16, so no two probabilities are close). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "multi_gpu.h"

enum { R = 37, C = 1000, LDX = C + 3, LDY = C + 5 };

/* ---- the helpers of multi_gpu.h --------------------------------------------------- */

void mg_begin(mg_dev *d, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  gt_check_begin(&d->ck, "GPU %d round %d: %s", d->ordinal, d->round, what);
  d->failures_at_begin = d->ck.failures;
}

void mg_end(mg_dev *d) {
  if (d->ck.failures == d->failures_at_begin) gt_pass(&d->ck);
  gt_check_end_as(&d->ck, "errors");
}

int mg_ran(mg_dev *d, ckjit_status st, const char *op) {
  if (st != CKJIT_SUCCESS) {
    gt_fail(&d->ck, "%s returned %s: %s", op, ckjit_status_string(st), ckjit_last_error());
    return -1;
  }
  d->calls++;
  if (d->round >= MG_WARM_ROUND) d->warm_calls++;
  if (d->current() != d->ctx) gt_fail(&d->ck, "%s changed the thread's current context", op);
  st = ckjit_synchronize(d->stream);
  if (st != CKJIT_SUCCESS) {
    gt_fail(&d->ck, "ckjit_synchronize after %s: %s: %s", op, ckjit_status_string(st), ckjit_last_error());
    return -1;
  }
  return 0;
}

void mg_expect(mg_dev *d, const char *what, int64_t i, int64_t j, double got, double want, double tol) {
  if (!gt_close(got, want, tol))
    gt_fail(&d->ck, "%s[%lld][%lld]: got %.9g, want %.9g (tolerance %.3g)", what, LL(i), LL(j), got, want, tol);
}

void mg_expect_padding(mg_dev *d, const gt_buf *b, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = cols; c < ld; c++)
      if (!gt_is_poison(b->dt, b->host, (size_t)(r * ld + c))) {
        gt_fail(&d->ck, "wrote padding element (%lld, %lld) past the %lld columns", LL(r), LL(c), LL(cols));
        return;
      }
}

/* ---- references ------------------------------------------------------------------- */

static double gelu_tanh(double x) { return 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x))); }

/* OCP e4m3fn: bias 7, no infinity, NaN S.1111.111, subnormals m 2^-9. */
static double fp8_decode(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return NAN;
  const double v = e == 0 ? ldexp((double)m, -9) : ldexp((double)(8 + m), e - 10);
  return s ? -v : v;
}

/* Row r of x (ld LDX) as doubles. */
static void row_of(const gt_buf *x, int64_t r, double *out) {
  for (int64_t c = 0; c < C; c++) out[c] = gt_get(x->dt, x->host, (size_t)(r * LDX + c));
}

/* An input buffer of `elems` random values in [lo, hi) rounded to its
 * dtype; as an R x C matrix of row stride LDX (elems R * LDX) its padding
 * is NaN, so a kernel that reads it into a result shows. */
static int input(mg_dev *d, gt_buf *b, ckjit_dtype dt, size_t elems, double lo, double hi) {
  if (gt_buf_alloc(&d->ck, b, dt, elems)) return -1;
  gt_fill_uniform(dt, b->host, 0, elems, &d->rng, lo, hi);
  if (elems == (size_t)R * LDX)
    for (size_t i = 0; i < elems; i++)
      if (i % LDX >= C) gt_put_nan(dt, b->host, i);
  return gt_buf_upload(&d->ck, b);
}

/* ---- copy2d, unary, binary, transpose ------------------------------------------------ */

static void elementwise(mg_dev *d) {
  const ckjit_dtype dt = mg_dtype(d);
  const ckjit_epilogue epi = {1.5f, -0.25f};
  const double rel = dt == CKJIT_F32 ? 1e-5 : 0x1p-8 + 1e-5;
  gt_buf a = {0}, b = {0}, y = {0}, t = {0};
  mg_begin(d, "copy2d / unary gelu_tanh / binary mul / transpose %s %dx%d", ckjit_dtype_name(dt), R, C);
  if (input(d, &a, dt, (size_t)R * LDX, -5, 5) || input(d, &b, dt, (size_t)R * LDX, -3, 3) ||
      gt_buf_alloc(&d->ck, &y, dt, (size_t)R * LDY) || gt_buf_alloc(&d->ck, &t, dt, (size_t)2 * C * (R + 3) + 5))
    goto done;

  if (!gt_buf_poison(&d->ck, &y) && !mg_ran(d, ckjit_copy2d(dt, R, C, a.dev, LDX, y.dev, LDY, d->stream), "ckjit_copy2d") &&
      !gt_buf_download(&d->ck, &y, NULL)) {
    for (int64_t r = 0; r < R; r++)
      for (int64_t c = 0; c < C; c++)
        mg_expect(d, "copy2d", r, c, gt_get(dt, y.host, (size_t)(r * LDY + c)), gt_get(dt, a.host, (size_t)(r * LDX + c)), 0);
    mg_expect_padding(d, &y, R, C, LDY);
  }
  if (!gt_buf_poison(&d->ck, &y) &&
      !mg_ran(d, ckjit_unary(CKJIT_UNARY_GELU_TANH, dt, R, C, a.dev, LDX, y.dev, LDY, &epi, d->stream), "ckjit_unary") &&
      !gt_buf_download(&d->ck, &y, NULL)) {
    for (int64_t r = 0; r < R; r++)
      for (int64_t c = 0; c < C; c++) {
        const double f = gelu_tanh(gt_get(dt, a.host, (size_t)(r * LDX + c)));
        mg_expect(d, "unary", r, c, gt_get(dt, y.host, (size_t)(r * LDY + c)), 1.5 * f - 0.25,
                  1e-5 + rel * (fabs(1.5 * f) + 0.25));
      }
    mg_expect_padding(d, &y, R, C, LDY);
  }
  if (!gt_buf_poison(&d->ck, &y) &&
      !mg_ran(d, ckjit_binary(CKJIT_BINARY_MUL, dt, R, C, a.dev, LDX, b.dev, LDX, y.dev, LDY, NULL, d->stream),
              "ckjit_binary") &&
      !gt_buf_download(&d->ck, &y, NULL)) {
    for (int64_t r = 0; r < R; r++)
      for (int64_t c = 0; c < C; c++) {
        const size_t i = (size_t)(r * LDX + c);
        const double want = gt_get(dt, a.host, i) * gt_get(dt, b.host, i);
        mg_expect(d, "binary", r, c, gt_get(dt, y.host, (size_t)(r * LDY + c)), want, rel * fabs(want));
      }
  }
  /* Two batch entries of 37 x 1000 -> 1000 x 37 (ld 40, entries 5 apart). */
  const int64_t ldo = R + 3, bso = C * ldo + 5, bsi = R * LDX / 2;
  if (!gt_buf_poison(&d->ck, &t) &&
      !mg_ran(d, ckjit_transpose(dt, 2, R / 2, C, a.dev, LDX, bsi, t.dev, ldo, bso, d->stream), "ckjit_transpose") &&
      !gt_buf_download(&d->ck, &t, NULL)) {
    for (int64_t e = 0; e < 2; e++)
      for (int64_t c = 0; c < C; c++)
        for (int64_t r = 0; r < R / 2; r++)
          mg_expect(d, "transpose", c, r, gt_get(dt, t.host, (size_t)(e * bso + c * ldo + r)),
                    gt_get(dt, a.host, (size_t)(e * bsi + r * LDX + c)), 0);
  }
done:
  gt_buf_free(&a), gt_buf_free(&b), gt_buf_free(&y), gt_buf_free(&t);
  mg_end(d);
}

/* ---- reduce_rows (sum, argmax), softmax ------------------------------------------------- */

static void reduce_softmax(mg_dev *d) {
  const ckjit_dtype dt = mg_dtype(d);
  gt_buf x = {0}, s = {0}, ix = {0}, y = {0};
  double row[C];
  mg_begin(d, "reduce_rows sum / argmax, softmax %s %dx%d", ckjit_dtype_name(dt), R, C);
  if (input(d, &x, dt, (size_t)R * LDX, -5, 5) || gt_buf_alloc(&d->ck, &s, CKJIT_F32, R) ||
      gt_buf_alloc(&d->ck, &ix, CKJIT_I64, R) || gt_buf_alloc(&d->ck, &y, dt, (size_t)R * LDY))
    goto done;
  if (gt_buf_poison(&d->ck, &s) || gt_buf_poison(&d->ck, &ix) || gt_buf_poison(&d->ck, &y) ||
      mg_ran(d, ckjit_reduce_rows(CKJIT_REDUCE_SUM, dt, R, C, x.dev, LDX, CKJIT_F32, s.dev, d->stream), "reduce sum") ||
      mg_ran(d, ckjit_reduce_rows(CKJIT_REDUCE_ARGMAX, dt, R, C, x.dev, LDX, CKJIT_I64, ix.dev, d->stream),
             "reduce argmax"))
    goto done;
  ckjit_softmax_params sp;
  ckjit_softmax_params_init(&sp);
  sp.scale = 0.5f;
  if (mg_ran(d, ckjit_softmax(dt, R, C, x.dev, LDX, y.dev, LDY, &sp, d->stream), "ckjit_softmax") ||
      gt_buf_download(&d->ck, &s, NULL) || gt_buf_download(&d->ck, &ix, NULL) || gt_buf_download(&d->ck, &y, NULL))
    goto done;
  for (int64_t r = 0; r < R; r++) {
    row_of(&x, r, row);
    double sum = 0, sabs = 0, m = -INFINITY, z = 0;
    int64_t arg = 0;
    for (int64_t c = 0; c < C; c++) {
      sum += row[c], sabs += fabs(row[c]);
      if (row[c] > row[arg]) arg = c; /* ties: the lowest index */
      m = fmax(m, 0.5 * row[c]);
    }
    mg_expect(d, "sum", r, 0, gt_get(CKJIT_F32, s.host, (size_t)r), sum, 2e-5 * sabs);
    mg_expect(d, "argmax", r, 0, (double)gt_get_int(CKJIT_I64, ix.host, (size_t)r), (double)arg, 0);
    for (int64_t c = 0; c < C; c++) z += exp(0.5 * row[c] - m);
    for (int64_t c = 0; c < C; c++) {
      const double p = exp(0.5 * row[c] - m) / z;
      mg_expect(d, "softmax", r, c, gt_get(dt, y.host, (size_t)(r * LDY + c)), p, (5e-5 + mg_rnd(dt)) * p);
    }
  }
  mg_expect_padding(d, &y, R, C, LDY);
done:
  gt_buf_free(&x), gt_buf_free(&s), gt_buf_free(&ix), gt_buf_free(&y);
  mg_end(d);
}

/* ---- layernorm2d, rmsnorm2d, rmsnorm2d_quant (int8), smoothquant (fp8) ----------------------- */

static void norms(mg_dev *d) {
  const ckjit_dtype dt = mg_dtype(d);
  gt_buf x = {0}, w = {0}, bias = {0}, yl = {0}, yr = {0}, q8 = {0}, qf = {0}, s8 = {0}, sf = {0}, sm = {0};
  gt_buf *outs[] = {&yl, &yr, &q8, &qf, &s8, &sf};
  double row[C];
  mg_begin(d, "layernorm2d / rmsnorm2d / rmsnorm2d_quant i8 / smoothquant fp8 %s %dx%d", ckjit_dtype_name(dt), R, C);
  if (input(d, &x, dt, (size_t)R * LDX, -5, 5) || input(d, &w, dt, C, -2, 2) || input(d, &bias, dt, C, -1, 1) ||
      input(d, &sm, CKJIT_F32, C, 0.5, 2) || gt_buf_alloc(&d->ck, &yl, dt, (size_t)R * LDY) ||
      gt_buf_alloc(&d->ck, &yr, dt, (size_t)R * LDY) || gt_buf_alloc(&d->ck, &q8, CKJIT_I8, (size_t)R * LDY) ||
      gt_buf_alloc(&d->ck, &qf, CKJIT_FP8_E4M3, (size_t)R * LDY) || gt_buf_alloc(&d->ck, &s8, CKJIT_F32, R) ||
      gt_buf_alloc(&d->ck, &sf, CKJIT_F32, R))
    goto done;
  for (int i = 0; i < 6; i++)
    if (gt_buf_poison(&d->ck, outs[i])) goto done;
  ckjit_norm_params p;
  ckjit_norm_params_init(&p);
  p.weight = w.dev;
  if (mg_ran(d, ckjit_rmsnorm2d(dt, R, C, x.dev, LDX, yr.dev, LDY, &p, d->stream), "ckjit_rmsnorm2d") ||
      mg_ran(d, ckjit_rmsnorm2d_quant(dt, R, C, x.dev, LDX, &p, CKJIT_I8, q8.dev, LDY, s8.dev, d->stream),
             "ckjit_rmsnorm2d_quant") ||
      mg_ran(d, ckjit_smoothquant(dt, R, C, x.dev, LDX, sm.dev, CKJIT_FP8_E4M3, qf.dev, LDY, sf.dev, d->stream),
             "ckjit_smoothquant"))
    goto done;
  p.bias = bias.dev;
  if (mg_ran(d, ckjit_layernorm2d(dt, R, C, x.dev, LDX, yl.dev, LDY, &p, d->stream), "ckjit_layernorm2d"))
    goto done;
  for (int i = 0; i < 6; i++)
    if (gt_buf_download(&d->ck, outs[i], NULL)) goto done;
  const double eps = p.eps, rel = 5e-5 + mg_rnd(dt);
  for (int64_t r = 0; r < R; r++) {
    row_of(&x, r, row);
    double mean = 0, var = 0, ms = 0, amax8 = 0, amaxf = 0;
    for (int64_t c = 0; c < C; c++) mean += row[c] / C, ms += row[c] * row[c] / C;
    for (int64_t c = 0; c < C; c++) var += (row[c] - mean) * (row[c] - mean) / C;
    const double rstd_l = 1 / sqrt(var + eps), rstd_r = 1 / sqrt(ms + eps);
    for (int64_t c = 0; c < C; c++) {
      const double wc = gt_get(dt, w.host, (size_t)c), bc = gt_get(dt, bias.host, (size_t)c);
      const double ln = (row[c] - mean) * rstd_l * wc, rms = row[c] * rstd_r * wc;
      const size_t o = (size_t)(r * LDY + c);
      mg_expect(d, "layernorm", r, c, gt_get(dt, yl.host, o), ln + bc, rel * (fabs(ln) + fabs(bc)) + 1e-6);
      mg_expect(d, "rmsnorm", r, c, gt_get(dt, yr.host, o), rms, rel * fabs(rms) + 1e-6);
      amax8 = fmax(amax8, fabs(rms));
      amaxf = fmax(amaxf, fabs(row[c] * gt_get(CKJIT_F32, sm.host, (size_t)c)));
    }
    /* The row scales against the reference; each q against v / the GPU's
     * own scale (so the scale's f32 error does not move the rounding). */
    const double sc8 = gt_get(CKJIT_F32, s8.host, (size_t)r), scf = gt_get(CKJIT_F32, sf.host, (size_t)r);
    mg_expect(d, "rmsnorm2d_quant row_scale", r, 0, sc8, amax8 / 127, 1e-4 * amax8 / 127);
    mg_expect(d, "smoothquant row_scale", r, 0, scf, amaxf / 448, 1e-4 * amaxf / 448);
    for (int64_t c = 0; c < C; c++) {
      const size_t o = (size_t)(r * LDY + c);
      const double t8 = row[c] * rstd_r * gt_get(dt, w.host, (size_t)c) / sc8;
      const double tf = row[c] * gt_get(CKJIT_F32, sm.host, (size_t)c) / scf;
      mg_expect(d, "rmsnorm2d_quant q", r, c, (double)(int8_t)q8.host[o], t8, 0.5 + 1e-4 * fabs(t8) + 1e-4);
      mg_expect(d, "smoothquant q", r, c, fp8_decode(qf.host[o]), tf, (0x1p-4 + 1e-4) * fabs(tf) + 0x1p-10);
    }
  }
  mg_expect_padding(d, &yl, R, C, LDY);
  mg_expect_padding(d, &q8, R, C, LDY);
done:
  gt_buf_free(&x), gt_buf_free(&w), gt_buf_free(&bias), gt_buf_free(&sm);
  for (int i = 0; i < 6; i++) gt_buf_free(outs[i]);
  mg_end(d);
}

/* ---- topk_softmax ------------------------------------------------------------------------- */

static void topk(mg_dev *d) {
  enum { T = 37, E = 100, K = 4, LDE = E + 4 };
  const ckjit_dtype dt = mg_dtype(d);
  const int renorm = d->round % 4 >= 2;
  gt_buf x = {0}, w = {0}, ix = {0};
  mg_begin(d, "topk_softmax %s %d tokens x %d experts, k %d%s", ckjit_dtype_name(dt), T, E, K,
           renorm ? ", renormalized" : "");
  if (gt_buf_alloc(&d->ck, &x, dt, (size_t)T * LDE) || gt_buf_alloc(&d->ck, &w, CKJIT_F32, T * K) ||
      gt_buf_alloc(&d->ck, &ix, CKJIT_I32, T * K))
    goto done;
  /* Each token's logits: a shuffle of (0 .. 99 - 50) / 16, exact in bf16. */
  for (int64_t t = 0; t < T; t++) {
    int perm[E];
    for (int e = 0; e < E; e++) perm[e] = e;
    for (int e = E - 1; e > 0; e--) {
      const int j = (int)tu_rng_range(&d->rng, 0, e), tmp = perm[e];
      perm[e] = perm[j], perm[j] = tmp;
    }
    for (int e = 0; e < LDE; e++) gt_put(dt, x.host, (size_t)(t * LDE + e), e < E ? (perm[e] - 50) / 16.0 : NAN);
  }
  if (gt_buf_upload(&d->ck, &x) || gt_buf_poison(&d->ck, &w) || gt_buf_poison(&d->ck, &ix) ||
      mg_ran(d, ckjit_topk_softmax(dt, T, E, x.dev, LDE, K, renorm, w.dev, CKJIT_I32, ix.dev, d->stream),
             "ckjit_topk_softmax") ||
      gt_buf_download(&d->ck, &w, NULL) || gt_buf_download(&d->ck, &ix, NULL))
    goto done;
  for (int64_t t = 0; t < T; t++) {
    double xs[E], m = -INFINITY, z = 0, picked = 0, wk[K];
    int64_t best[K];
    for (int e = 0; e < E; e++) xs[e] = gt_get(dt, x.host, (size_t)(t * LDE + e)), m = fmax(m, xs[e]);
    for (int e = 0; e < E; e++) z += exp(xs[e] - m);
    for (int k = 0; k < K; k++) { /* the k-th largest: below the (k-1)-th, values are distinct */
      best[k] = -1;
      for (int e = 0; e < E; e++)
        if ((k == 0 || xs[e] < xs[best[k - 1]]) && (best[k] < 0 || xs[e] > xs[best[k]])) best[k] = e;
      wk[k] = exp(xs[best[k]] - m) / z;
      picked += wk[k];
    }
    for (int k = 0; k < K; k++) {
      const double want = renorm ? wk[k] / picked : wk[k];
      mg_expect(d, "topk index", t, k, (double)gt_get_int(CKJIT_I32, ix.host, (size_t)(t * K + k)), (double)best[k], 0);
      mg_expect(d, "topk weight", t, k, gt_get(CKJIT_F32, w.host, (size_t)(t * K + k)), want, 4e-5 * want);
    }
  }
done:
  gt_buf_free(&x), gt_buf_free(&w), gt_buf_free(&ix);
  mg_end(d);
}

void mg_rows_round(mg_dev *d) {
  elementwise(d);
  reduce_softmax(d);
  norms(d);
  topk(d);
}
