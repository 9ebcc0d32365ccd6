/* Row-ops GPU test, norms: ckjit_layernorm2d and ckjit_rmsnorm2d with every
 * option (eps, weight, bias, fused residual add with sum_out, sum_out
 * aliasing residual or x, mean / rstd outputs, in place, params = NULL),
 * and the normalization half of ckjit_rmsnorm2d_quant (its quantization is
 * checked by rows_quant.c), against an f64 reference.
 *
 * Tolerances (rows_gpu.h for u, g(n) and the window):
 *   layernorm:    dm = g(n) u mean|h| + u|mean| (mean error),
 *                 dvar = (g(n) + 4) u var + dm^2 (two-pass or Welford variance),
 *                 rel_r = dvar / (2 (var + eps)) + 4u (rstd, rsqrt 2 ulps),
 *                 err_c = 2 (|w_c| rstd (dm + |h_c - mean| (rel_r + 4u))
 *                          + 2u (|y_c - b_c| + |b_c|)) + FLT_MIN;
 *                 mean_out within 2 dm, rstd_out within 2 rel_r rstd.  Rows of
 *                 1000 + noise make E[x^2] - E[x]^2 in f32 fail these bounds
 *                 by orders of magnitude.
 *   rmsnorm:      rel_r = (g(n) + 2) u / 2 + 4u, err_c = 2 |h_c w_c| rstd (rel_r + 4u).
 *   sum_out:      exact: h = x + residual added in f32 and rounded to x's
 *                 dtype, which is also the h that is normalized.
 */
#include "rows_gpu.h"

/* ---- reference ------------------------------------------------------------- */

/* Row statistics of layernorm (ln = 1) or rmsnorm, with the error bounds of
 * an f32 implementation (see the top comment). */
norm_ref norm_stats(int ln, const double *h, int64_t n, double eps) {
  norm_ref s;
  memset(&s, 0, sizeof s);
  double g = growth((double)n), sum = 0, sabs = 0, sq = 0;
  for (int64_t i = 0; i < n; i++) sum += h[i], sabs += fabs(h[i]);
  s.mean = sum / (double)n;
  if (ln) {
    for (int64_t i = 0; i < n; i++) sq += (h[i] - s.mean) * (h[i] - s.mean);
    s.var = sq / (double)n;
    s.dm = g * U * sabs / (double)n + U * fabs(s.mean);
    double dvar = (g + 4) * U * s.var + s.dm * s.dm;
    s.rstd = 1.0 / sqrt(s.var + eps);
    s.rel_r = 0.5 * dvar / (s.var + eps) + 4 * U;
  } else {
    for (int64_t i = 0; i < n; i++) sq += h[i] * h[i];
    s.ms = sq / (double)n;
    s.rstd = 1.0 / sqrt(s.ms + eps);
    s.rel_r = 0.5 * (g + 2) * U * s.ms / (s.ms + eps) + 4 * U;
  }
  return s;
}

/* y_c of layernorm / rmsnorm and its allowed error. */
double norm_out(int ln, const norm_ref *s, double h, double w, double b, double *err) {
  if (ln) {
    double nw = (h - s->mean) * s->rstd * w;
    *err = 2 * (fabs(w) * s->rstd * (s->dm + fabs(h - s->mean) * (s->rel_r + 4 * U)) +
                2 * U * (fabs(nw) + fabs(b))) + FLT_MIN;
    return nw + b;
  }
  double y = h * s->rstd * w;
  *err = 2 * fabs(y) * (s->rel_r + 4 * U) + FLT_MIN;
  return y;
}

/* ---- checks ------------------------------------------------------------------ */

static int same_value(double got, double want) { return got == want || (isnan(got) && isnan(want)); }

/* layernorm2d, rmsnorm2d and rmsnorm2d_quant.  alias 1: sum_out is residual;
 * alias 2: sum_out is x; inplace: y is x (layernorm). */
int run_norm(const task *t) {
  gt_check ck;
  check_begin(&ck, t);
  tu_rng rng = {t->seed};
  const int ln = t->kind == K_LAYERNORM, quant = t->kind == K_RMSQUANT;
  const int64_t R = t->rows, C = t->cols, ldx = C + t->pad_x, ldr = C + t->pad_r;
  const int64_t ldy = t->inplace ? ldx : C + t->pad_y, off_y = t->inplace ? t->off_x : t->off_y;
  const int64_t lds = t->alias == 1 ? ldr : t->alias == 2 ? ldx : C + t->pad_s;
  const int64_t off_s = t->alias == 1 ? t->off_r : t->alias == 2 ? t->off_x : t->off_s;
  const int sep_sum = t->sum_out && !t->alias;
  gt_buf x = {0}, y = {0}, res = {0}, so = {0}, w = {0}, b = {0}, mo = {0}, ro = {0}, rs = {0};
  uint8_t *x_orig = NULL, *res_orig = NULL;
  double *h = NULL, *hw = NULL;
  const ckjit_dtype ydt = quant ? t->odt : t->dt;
  if (gt_buf_alloc(&ck, &x, t->dt, gt_extent(t->off_x, R, C, ldx, GUARD)) ||
      (!t->inplace && gt_buf_alloc(&ck, &y, ydt, gt_extent(off_y, R, C, ldy, GUARD))) ||
      (t->residual && gt_buf_alloc(&ck, &res, t->dt, gt_extent(t->off_r, R, C, ldr, GUARD))) ||
      (sep_sum && gt_buf_alloc(&ck, &so, t->dt, gt_extent(off_s, R, C, lds, GUARD))) ||
      (t->weight && gt_buf_alloc(&ck, &w, t->dt, (size_t)(t->off_w + C) + GUARD)) ||
      (t->bias && gt_buf_alloc(&ck, &b, t->dt, (size_t)(t->off_w + C) + GUARD)) ||
      (t->stats && ln && gt_buf_alloc(&ck, &mo, CKJIT_F32, (size_t)(t->off_y + R) + GUARD)) ||
      (t->stats && gt_buf_alloc(&ck, &ro, CKJIT_F32, (size_t)(t->off_y + R) + GUARD)) ||
      (quant && gt_buf_alloc(&ck, &rs, CKJIT_F32, (size_t)(t->off_y + R) + GUARD)))
    goto done;
  fill_matrix(t, &x, &rng, t->off_x, R, C, ldx, t->data, t->nan, t->zero_rows);
  x_orig = dup_host(&x);
  if (t->residual) {
    fill_matrix(t, &res, &rng, t->off_r, R, C, ldr, t->data, 0, t->zero_rows);
    res_orig = dup_host(&res);
  }
  if (t->weight) {
    gt_fill_nan(t->dt, w.host, w.elems);
    for (int64_t c = 0; c < C; c++)
      gt_put(t->dt, w.host, (size_t)(t->off_w + c), quant && c % 13 == 7 ? 0.0 : 4 * tu_rng_unit(&rng) - 2);
  }
  if (t->bias) {
    gt_fill_nan(t->dt, b.host, b.elems);
    for (int64_t c = 0; c < C; c++) gt_put(t->dt, b.host, (size_t)(t->off_w + c), 2 * tu_rng_unit(&rng) - 1);
  }
  if (gt_buf_upload(&ck, &x) || (t->residual && gt_buf_upload(&ck, &res)) ||
      (t->weight && gt_buf_upload(&ck, &w)) || (t->bias && gt_buf_upload(&ck, &b)) ||
      (y.dev && gt_buf_poison(&ck, &y)) || (sep_sum && gt_buf_poison(&ck, &so)) ||
      (mo.dev && gt_buf_poison(&ck, &mo)) || (ro.dev && gt_buf_poison(&ck, &ro)) ||
      (rs.dev && gt_buf_poison(&ck, &rs)))
    goto done;
  gt_buf *yb = t->inplace ? &x : &y;
  const gt_buf *sb = t->alias == 1 ? &res : t->alias == 2 ? &x : &so;
  ckjit_norm_params p;
  ckjit_norm_params_init(&p);
  p.eps = t->eps;
  p.weight = t->weight ? gt_buf_ptr(&w, t->off_w) : NULL;
  p.bias = t->bias ? gt_buf_ptr(&b, t->off_w) : NULL;
  if (t->residual) {
    p.residual = gt_buf_ptr(&res, t->off_r);
    p.ld_residual = ldr;
  }
  if (t->sum_out) {
    p.sum_out = gt_buf_ptr(sb, off_s);
    p.ld_sum_out = lds;
  }
  p.mean_out = mo.dev ? (float *)gt_buf_ptr(&mo, t->off_y) : NULL;
  p.rstd_out = ro.dev ? (float *)gt_buf_ptr(&ro, t->off_y) : NULL;
  /* The defaults-only case goes through params = NULL where the op allows it. */
  int null_params = !quant && !t->weight && !t->bias && !t->residual && !t->stats && t->eps == 1e-5f &&
                    t->seed % 2 == 0;
  ckjit_status st;
  const void *xp = gt_buf_ptr(&x, t->off_x);
  if (ln)
    st = ckjit_layernorm2d(t->dt, R, C, xp, ldx, gt_buf_ptr(yb, off_y), ldy, null_params ? NULL : &p, NULL);
  else if (!quant)
    st = ckjit_rmsnorm2d(t->dt, R, C, xp, ldx, gt_buf_ptr(yb, off_y), ldy, null_params ? NULL : &p, NULL);
  else
    st = ckjit_rmsnorm2d_quant(t->dt, R, C, xp, ldx, &p, t->odt, gt_buf_ptr(yb, off_y), ldy,
                               (float *)gt_buf_ptr(&rs, t->off_y), NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(&ck, "%s returned %s: %s", ln ? "ckjit_layernorm2d" : quant ? "ckjit_rmsnorm2d_quant" : "ckjit_rmsnorm2d",
            ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  if (gt_sync(&ck) || gt_buf_download(&ck, &x, NULL) || (y.dev && gt_buf_download(&ck, &y, NULL)) ||
      (t->residual && gt_buf_download(&ck, &res, NULL)) || (sep_sum && gt_buf_download(&ck, &so, NULL)) ||
      (mo.dev && gt_buf_download(&ck, &mo, NULL)) || (ro.dev && gt_buf_download(&ck, &ro, NULL)) ||
      (rs.dev && gt_buf_download(&ck, &rs, NULL)))
    goto done;
  if (y.dev) check_outside(&ck, &y, off_y, R, C, ldy, quant ? "q" : "y");
  if (sep_sum) check_outside(&ck, &so, off_s, R, C, lds, "sum_out");
  if (mo.dev) check_outside(&ck, &mo, t->off_y, 1, R, R, "mean_out");
  if (ro.dev) check_outside(&ck, &ro, t->off_y, 1, R, R, "rstd_out");
  if (rs.dev) check_outside(&ck, &rs, t->off_y, 1, R, R, "row_scale");
  /* Inputs: unchanged, except where they are an output (y = x, sum_out = x or residual). */
  if (t->inplace || t->alias == 2)
    check_outside_unchanged(&ck, &x, x_orig, t->off_x, R, C, ldx, "x");
  else if (memcmp(x.host, x_orig, x.elems * gt_esize(x.dt)) != 0)
    gt_fail(&ck, "x was modified");
  if (t->alias == 1)
    check_outside_unchanged(&ck, &res, res_orig, t->off_r, R, C, ldr, "residual");
  else if (t->residual && memcmp(res.host, res_orig, res.elems * gt_esize(res.dt)) != 0)
    gt_fail(&ck, "residual was modified");
  h = malloc((size_t)C * sizeof *h);
  hw = malloc((size_t)C * sizeof *hw);
  if (!h || !hw) abort();
  for (int64_t r = 0; r < R; r++) {
    /* h = x + residual: an f32 add rounded to x's dtype, as a separate add would store it */
    for (int64_t c = 0; c < C; c++) {
      double xv = gt_get(t->dt, x_orig, (size_t)(t->off_x + r * ldx + c));
      if (t->residual) xv = gt_round(t->dt, (double)(float)(xv + gt_get(t->dt, res_orig, (size_t)(t->off_r + r * ldr + c))));
      h[c] = xv;
    }
    if (t->sum_out)
      for (int64_t c = 0; c < C; c++) {
        double got = gt_get(t->dt, sb->host, (size_t)(off_s + r * lds + c));
        if (!same_value(got, h[c])) {
          gt_fail(&ck, "sum_out(%lld,%lld): got %.9g, want %.9g exactly (x + residual)", LL(r), LL(c), got, h[c]);
          break;
        }
      }
    norm_ref s = norm_stats(ln, h, C, (double)t->eps);
    if (mo.dev) {
      double got = gt_get(CKJIT_F32, mo.host, (size_t)(t->off_y + r));
      if (!within(CKJIT_F32, got, s.mean, 2 * s.dm + FLT_MIN))
        gt_fail(&ck, "mean_out[%lld]: got %.9g, want %.12g (allowed %.3g)", LL(r), got, s.mean, 2 * s.dm);
    }
    if (ro.dev) {
      double got = gt_get(CKJIT_F32, ro.host, (size_t)(t->off_y + r));
      if (!within(CKJIT_F32, got, s.rstd, 2 * s.rel_r * s.rstd))
        gt_fail(&ck, "rstd_out[%lld]: got %.9g, want %.12g (allowed relative %.3g; var %.9g mean %.9g)", LL(r), got,
                s.rstd, 2 * s.rel_r, ln ? s.var : s.ms, s.mean);
    }
    if (quant) {
      check_rmsquant_row(&ck, t, &s, h, &w, yb, off_y + r * ldy, &rs, r, hw);
      continue;
    }
    for (int64_t c = 0; c < C; c++) {
      double wv = t->weight ? gt_get(t->dt, w.host, (size_t)(t->off_w + c)) : 1.0;
      double bv = t->bias ? gt_get(t->dt, b.host, (size_t)(t->off_w + c)) : 0.0;
      double err, want = norm_out(ln, &s, h[c], wv, bv, &err);
      double got = gt_get(t->dt, yb->host, (size_t)(off_y + r * ldy + c));
      if (!within(t->dt, got, want, err)) {
        gt_fail(&ck, "(%lld,%lld): h=%.9g got %.9g, want %.9g (f64 %.12g, allowed f32 error %.3g + 1 ulp; "
                "mean %.9g rstd %.9g)", LL(r), LL(c), h[c], got, gt_round(t->dt, want), want, err, s.mean, s.rstd);
        break;
      }
    }
  }
done:
  free(h);
  free(hw);
  free(x_orig);
  free(res_orig);
  gt_buf_free(&x);
  gt_buf_free(&y);
  gt_buf_free(&res);
  gt_buf_free(&so);
  gt_buf_free(&w);
  gt_buf_free(&b);
  gt_buf_free(&mo);
  gt_buf_free(&ro);
  gt_buf_free(&rs);
  finish(&ck);
  return (int)ck.failures;
}

/* ---- reference self-checks ----------------------------------------------------- */

void self_check_norm(void) {
  const double h4[4] = {1, 2, 3, 4}, h2[2] = {3, 4};
  norm_ref s = norm_stats(1, h4, 4, 0.0);
  double er;
  self_check(s.mean == 2.5 && s.var == 1.25 && close_to(s.rstd, 1 / sqrt(1.25)) &&
                 close_to(norm_out(1, &s, 1.0, 2.0, 0.5, &er), -1.5 / sqrt(1.25) * 2 + 0.5),
             "layernorm [1,2,3,4]");
  s = norm_stats(0, h2, 2, 0.0);
  self_check(close_to(s.rstd, 1 / sqrt(12.5)) && close_to(norm_out(0, &s, 4.0, 1.0, 0, &er), 4 / sqrt(12.5)),
             "rmsnorm [3,4]");
}

/* ---- tasks ------------------------------------------------------------------------ */

/* The long rows. */
void add_norm_long_tasks(void) {
  task t = mk(K_LAYERNORM, CKJIT_F32, g_big[0].rows, g_big[0].cols);
  t.data = D_OFFSET, t.weight = 1, t.bias = 1, t.stats = 1;
  add(t);
  t = mk(K_LAYERNORM, CKJIT_BF16, g_big[1].rows, g_big[1].cols);
  t.data = D_UNIFORM, t.weight = 1, t.bias = 1, t.residual = 1, t.sum_out = 1, t.alias = 1, t.stats = 1;
  apply_variant(&t, 1);
  add(t);
  t = mk(K_RMSNORM, CKJIT_BF16, g_big[2].rows, g_big[2].cols);
  t.data = D_UNIFORM, t.weight = 1, t.stats = 1;
  add(t);
  t = mk(K_RMSNORM, CKJIT_F16, g_big[1].rows, g_big[1].cols);
  t.data = D_WIDE, t.weight = 1, t.residual = 1, t.sum_out = 1, t.stats = 1;
  apply_variant(&t, 3);
  add(t);
}

void add_norm_tasks(void) {
  const ckjit_dtype dts[3] = {CKJIT_F32, CKJIT_F16, CKJIT_BF16};
  /* layernorm2d / rmsnorm2d: option sets x dtype, five shapes each.  (A
   * bias needs a weight, sum_out a residual; only layernorm may run in place.) */
  static const float epss[4] = {1e-5f, 1e-6f, 0.1f, 1e-12f};
  for (int kind = K_LAYERNORM; kind <= K_RMSNORM; kind++)
    for (int cfg = 0; cfg < 8; cfg++)
      for (int d = 0; d < 3; d++)
        for (int j = 0; j < 5; j++) {
          int s = (cfg * 5 + d * 3 + j * 3) % NREG;
          task t = mk((enum kind)kind, dts[d], g_reg[s].rows, g_reg[s].cols);
          int ln = kind == K_LAYERNORM;
          t.eps = epss[(cfg + j) % 4];
          t.data = j % 3 == 0 ? D_UNIFORM : j % 3 == 1 ? D_WIDE : D_TIES;
          switch (cfg) {
            case 0: t.eps = 1e-5f; break;
            case 1: t.weight = 1, t.bias = ln; break;
            case 2: t.weight = 1, t.stats = 1; break;
            case 3: t.residual = 1, t.weight = 1, t.bias = ln; break;
            case 4: t.residual = 1, t.sum_out = 1, t.stats = 1; break;
            case 5: t.residual = 1, t.sum_out = 1, t.alias = 1 + j % 2, t.weight = 1, t.bias = ln, t.stats = 1; break;
            case 6: t.weight = 1, t.bias = ln, t.stats = 1, t.eps = 0.5f, t.inplace = ln; break;
            case 7: t.weight = 1, t.bias = ln, t.stats = 1, t.data = D_OFFSET, t.inplace = ln && j % 2; break;
          }
          if (t.residual && j >= 3) t.data = j == 3 ? D_EXACT : D_OFFSET;
          if (ln && cfg == 3 && j % 2) t.inplace = 1; /* y = x with a residual */
          t.zero_rows = !ln && j == 2;
          apply_variant(&t, cfg + j);
          add(t);
        }
}
