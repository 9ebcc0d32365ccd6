/* Row-ops GPU test, softmax: ckjit_softmax and log-softmax on the regular
 * and long rows, every dtype, scale rotating, with and without the
 * per-row valid length (valid_cols), params = NULL, in place (y = x), data
 * with +-inf, NaN and large magnitudes, against an f64 reference.  The
 * exact rows and the f32 bound are in rows_softmax_exact.c.
 *
 * Tolerances (rows_gpu.h for u, g(n) and the window):
 *   softmax:      err = 2 * (u*(|z_c| + 5|z_c - m|) + C) * p_c, with
 *                 C = u*(2 max|z| + |m| + 5 ln n + 16 + g(n)): z = scale*x is
 *                 rounded to f32 (u|z|), exp costs ~5u|z - m| (CUDA's __expf
 *                 is off by up to 2 + 1.16|arg| ulps), the sum's relative error
 *                 is its p-weighted average (<= ln n entropy term) + g(n) u.
 *   log-softmax:  err = 2 * (u*(|z_c| + |m| + 2|z_c - m| + |ln s|) + C), absolute.
 *                 Masked columns are exactly 0 / -inf (valid 0: the whole row);
 *                 a NaN or +inf, or only -inf, in the valid part makes the
 *                 valid part NaN; a -inf input gives exactly 0 / -inf.
 */
#include "rows_gpu.h"

/* ---- reference ------------------------------------------------------------- */

/* Softmax of one row: out[c] and its allowed error err[c]; err < 0 means an
 * exact value (masked 0 / -inf, NaN, the 0 / -inf of a -inf input).  A NaN
 * or +inf, or only -inf, among the valid columns makes them all NaN. */
void softmax_ref(const double *x, int64_t n, int64_t valid, double scale, int logm,
                 double *out, double *err) {
  if (valid > n) valid = n;
  if (valid < 0) valid = 0;
  for (int64_t c = valid; c < n; c++) {
    out[c] = logm ? -INFINITY : 0.0;
    err[c] = -1;
  }
  if (!valid) return;
  int has_nan = 0;
  for (int64_t c = 0; c < valid; c++) has_nan |= isnan(x[c]);
  if (has_nan) {
    for (int64_t c = 0; c < valid; c++) out[c] = NAN, err[c] = -1;
    return;
  }
  double m = -INFINITY, maxabs = 0;
  for (int64_t c = 0; c < valid; c++) {
    double z = scale * x[c];
    if (z > m) m = z;
    if (isfinite(z) && fabs(z) > maxabs) maxabs = fabs(z);
  }
  if (m == INFINITY || m == -INFINITY) { /* +inf, or only -inf: NaN, as in PyTorch */
    for (int64_t c = 0; c < valid; c++) out[c] = NAN, err[c] = -1;
    return;
  }
  double s = 0;
  for (int64_t c = 0; c < valid; c++) s += exp(scale * x[c] - m);
  double ls = log(s);
  double common = U * (2 * maxabs + fabs(m) + 5 * log((double)valid) + 16 + growth((double)valid));
  for (int64_t c = 0; c < valid; c++) {
    double z = scale * x[c];
    if (z == -INFINITY) {
      out[c] = logm ? -INFINITY : 0.0;
      err[c] = -1;
      continue;
    }
    double d = z - m;
    if (!logm) {
      out[c] = exp(d) / s;
      err[c] = 2 * (U * (fabs(z) + 5 * fabs(d)) + common) * out[c] + FLT_MIN;
    } else {
      out[c] = d - ls;
      err[c] = 2 * (U * (fabs(z) + fabs(m) + 2 * fabs(d) + fabs(ls)) + common) + FLT_MIN;
    }
  }
}

/* ---- checks ------------------------------------------------------------------ */

static int32_t mask_value(int64_t r, int64_t C, tu_rng *g) {
  switch (r % 8) {
    case 0: return 0;
    case 1: return 1;
    case 2: return (int32_t)C;
    case 3: return (int32_t)(C + 3 < INT32_MAX ? C + 3 : INT32_MAX);
    case 4: return INT32_MAX;
    case 6: return (int32_t)(C > 1 ? C - 1 : 1);
    default: return (int32_t)(1 + (int64_t)(tu_rng_next(g) % (uint64_t)C));
  }
}

void check_softmax_row(gt_check *ck, ckjit_dtype dt, const double *ref, const double *err,
                       const gt_buf *y, int64_t base, int64_t C, int64_t r, int64_t valid,
                       const double *xr) {
  for (int64_t c = 0; c < C; c++) {
    double got = gt_get(dt, y->host, (size_t)(base + c));
    int ok;
    if (err[c] < 0)
      ok = isnan(ref[c]) ? isnan(got) : got == ref[c];
    else
      ok = within(dt, got, ref[c], err[c]);
    if (!ok) {
      gt_fail(ck, "(%lld,%lld): x=%.9g valid=%lld got %.9g, want %.9g (f64 %.12g, allowed %s%.3g)", LL(r), LL(c),
              xr[c], LL(valid), got, err[c] < 0 ? ref[c] : gt_round(dt, ref[c]), ref[c],
              err[c] < 0 ? "exact " : "f32 error + 1 ulp: ", err[c] < 0 ? 0.0 : err[c]);
      return; /* one line per row at most */
    }
  }
}

int run_softmax(const task *t) {
  gt_check ck;
  check_begin(&ck, t);
  tu_rng rng = {t->seed};
  const int64_t R = t->rows, C = t->cols, ldx = C + t->pad_x;
  /* in place: y is x, same ld */
  const int64_t ldy = t->inplace ? ldx : C + t->pad_y, off_y = t->inplace ? t->off_x : t->off_y;
  gt_buf x = {0}, y = {0}, vc = {0};
  uint8_t *xorig = NULL;
  double *xr = NULL, *ref = NULL, *err = NULL;
  if (gt_buf_alloc(&ck, &x, t->dt, gt_extent(t->off_x, R, C, ldx, GUARD)) ||
      (!t->inplace && gt_buf_alloc(&ck, &y, t->dt, gt_extent(off_y, R, C, ldy, GUARD))) ||
      (t->mask && gt_buf_alloc(&ck, &vc, CKJIT_I32, (size_t)R)))
    goto done;
  fill_matrix(t, &x, &rng, t->off_x, R, C, ldx, t->data, t->nan, 0);
  xorig = dup_host(&x);
  if (t->mask) {
    int64_t rot = (int64_t)(t->seed % 8);
    for (int64_t r = 0; r < R; r++) {
      int32_t m = mask_value(r + rot, C, &rng);
      memcpy(vc.host + 4 * r, &m, 4);
    }
  }
  if (gt_buf_upload(&ck, &x) || (t->mask && gt_buf_upload(&ck, &vc)) || (!t->inplace && gt_buf_poison(&ck, &y)))
    goto done;
  gt_buf *out = t->inplace ? &x : &y;
  ckjit_softmax_params p;
  ckjit_softmax_params_init(&p);
  p.scale = t->scale;
  p.log = t->log;
  p.valid_cols = t->mask ? (const int32_t *)vc.dev : NULL;
  ckjit_status st;
  if (t->prepared) {
    /* The prepared path must give the op's own result: the same checks
     * follow.  Misaligned operands (off_x, off_y) and split shapes take its
     * fallback to ckjit_softmax, aligned fused ones its own launch. */
    ckjit_prepared *pp = NULL;
    st = ckjit_softmax_prepare(t->dt, R, C, ldx, ldy, t->null_params ? NULL : &p, -1, &pp);
    if (st == CKJIT_SUCCESS)
      st = ckjit_prepared_run(pp, gt_buf_ptr(&x, t->off_x), gt_buf_ptr(out, off_y), NULL);
    ckjit_prepared_free(pp);
  } else {
    st = ckjit_softmax(t->dt, R, C, gt_buf_ptr(&x, t->off_x), ldx, gt_buf_ptr(out, off_y), ldy,
                       t->null_params ? NULL : &p, NULL);
  }
  if (st != CKJIT_SUCCESS) {
    gt_fail(&ck, "%s returned %s: %s", t->prepared ? "ckjit_softmax_prepare / ckjit_prepared_run"
            : "ckjit_softmax", ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  if (gt_sync(&ck) || gt_buf_download(&ck, out, NULL)) goto done;
  if (t->inplace)
    check_outside_unchanged(&ck, &x, xorig, t->off_x, R, C, ldx, "y (= x)");
  else
    check_outside(&ck, &y, off_y, R, C, ldy, "y");
  xr = malloc((size_t)C * sizeof *xr);
  ref = malloc((size_t)C * sizeof *ref);
  err = malloc((size_t)C * sizeof *err);
  if (!xr || !ref || !err) abort();
  for (int64_t r = 0; r < R; r++) {
    int64_t valid = C;
    if (t->mask) {
      int32_t m;
      memcpy(&m, vc.host + 4 * r, 4);
      valid = m;
    }
    gather_row(t->dt, xorig, t->off_x + r * ldx, C, xr);
    softmax_ref(xr, C, valid, (double)t->scale, t->log, ref, err);
    check_softmax_row(&ck, t->dt, ref, err, out, off_y + r * ldy, C, r, valid, xr);
  }
done:
  free(xorig);
  free(xr);
  free(ref);
  free(err);
  gt_buf_free(&x);
  gt_buf_free(&y);
  gt_buf_free(&vc);
  finish(&ck);
  return (int)ck.failures;
}

/* ---- reference self-checks ----------------------------------------------------- */

void self_check_softmax(void) {
  double x3[3] = {0, log(3.0), 0}, o[3], e[3];
  softmax_ref(x3, 2, 2, 1.0, 0, o, e);
  self_check(close_to(o[0], 0.25) && close_to(o[1], 0.75), "softmax [0, ln 3]");
  softmax_ref(x3, 2, 2, 1.0, 1, o, e);
  self_check(close_to(o[0], log(0.25)) && close_to(o[1], log(0.75)), "log-softmax [0, ln 3]");
  softmax_ref(x3, 2, 1, 1.0, 0, o, e);
  self_check(o[0] == 1.0 && o[1] == 0.0 && e[1] < 0, "softmax valid 1");
  softmax_ref(x3, 2, 1, 1.0, 1, o, e);
  self_check(o[0] == 0.0 && o[1] == -INFINITY, "log-softmax valid 1");
  softmax_ref(x3, 2, 0, 1.0, 0, o, e);
  self_check(o[0] == 0.0 && o[1] == 0.0 && e[0] < 0, "softmax valid 0");
  softmax_ref(x3, 2, 99, 2.0, 0, o, e);
  self_check(close_to(o[0], 0.1) && close_to(o[1], 0.9), "softmax scale 2, valid past cols");
  double xi[3] = {0, -INFINITY, 0};
  softmax_ref(xi, 3, 3, 1.0, 0, o, e);
  self_check(close_to(o[0], 0.5) && o[1] == 0 && close_to(o[2], 0.5), "softmax with -inf");
  softmax_ref(xi, 3, 3, 1.0, 1, o, e);
  self_check(o[1] == -INFINITY && close_to(o[0], log(0.5)), "log-softmax with -inf");
  double xn[3] = {0, NAN, 1};
  softmax_ref(xn, 3, 3, 1.0, 0, o, e);
  self_check(isnan(o[0]) && isnan(o[2]), "softmax NaN row");
  softmax_ref(xn, 3, 1, 1.0, 0, o, e);
  self_check(o[0] == 1.0 && o[1] == 0 && o[2] == 0, "softmax NaN in the masked part");
  const double xp[3] = {0, INFINITY, 1}, xm[3] = {-INFINITY, -INFINITY, 2};
  softmax_ref(xp, 3, 3, 1.0, 1, o, e);
  self_check(isnan(o[0]) && isnan(o[1]) && isnan(o[2]), "log-softmax +inf row");
  softmax_ref(xp, 3, 1, 1.0, 1, o, e);
  self_check(o[0] == 0.0 && o[1] == -INFINITY && o[2] == -INFINITY, "log-softmax +inf in the masked part");
  softmax_ref(xm, 3, 2, 1.0, 0, o, e);
  self_check(isnan(o[0]) && isnan(o[1]) && o[2] == 0.0, "softmax only -inf valid");
  softmax_ref(xm, 3, 3, 1.0, 0, o, e);
  self_check(o[0] == 0.0 && o[1] == 0.0 && o[2] == 1.0, "softmax -inf but the last");
  softmax_ref(xm, 3, 0, 1.0, 1, o, e);
  self_check(o[0] == -INFINITY && o[2] == -INFINITY && e[0] < 0, "log-softmax valid 0 stays -inf");
}

/* ---- tasks ------------------------------------------------------------------------ */

/* The long rows. */
void add_softmax_long_tasks(void) {
  task t = mk(K_SOFTMAX, CKJIT_F32, g_big[2].rows, g_big[2].cols);
  t.data = D_WIDE;
  t.prepared = 1; /* split rows: the prepared call's fallback */
  add(t);
  t = mk(K_SOFTMAX, CKJIT_BF16, g_big[1].rows, g_big[1].cols);
  t.log = 1, t.mask = 1, t.scale = 0.5f, t.data = D_UNIFORM;
  apply_variant(&t, 2);
  add(t);
  t = mk(K_SOFTMAX, CKJIT_F16, g_big[0].rows, g_big[0].cols);
  t.data = D_EXTREME, t.scale = 1.7f;
  apply_variant(&t, 3);
  add(t);
}

void add_softmax_tasks(void) {
  const ckjit_dtype dts[3] = {CKJIT_F32, CKJIT_F16, CKJIT_BF16};
  static const float scales[4] = {1.0f, 0.5f, 1.7f, 0.125f};
  static const int sm_data[4] = {D_UNIFORM, D_EXTREME, D_WIDE, D_TIES};
  int combo = 0;
  for (int d = 0; d < 3; d++)
    for (int lg = 0; lg < 2; lg++)
      for (int mask = 0; mask < 2; mask++, combo++)
        for (int s = 0; s < NREG; s++) {
          task t = mk(K_SOFTMAX, dts[d], g_reg[s].rows, g_reg[s].cols);
          t.log = lg;
          t.mask = mask;
          t.scale = scales[(s + combo) % 4];
          t.data = sm_data[(s + combo) % 4];
          t.nan = (s + combo) % 3 == 0;
          t.null_params = !lg && !mask && t.scale == 1.0f && s % 2 == 0;
          t.inplace = (s + combo) % 4 == 2;
          t.prepared = !mask && (s + combo) % 3 == 1;
          apply_variant(&t, s + combo);
          add(t);
        }
}
