/* Row-ops GPU test, MoE gating: ckjit_topk_softmax over 1 to 256 experts,
 * k 1 / 2 / 8, renormalized or not, i32 and i64 indices, with all-equal
 * logits, repeated maxima and few distinct values (ties: the lower index
 * first), against an f64 reference.
 *
 * Tolerances (rows_gpu.h for u, g(n) and the window):
 *   topk weights: 2u (2 max|x| + |m| + 5|x_i - m| + 5 ln E + 16 + g(E)
 *                 [+ g(k) + 4 renormalized]) relative; indices exact (inputs
 *                 are on a grid so distinct logits give clearly distinct f32
 *                 probabilities, equal logits give bitwise-equal ones).
 */
#include "rows_gpu.h"

/* ---- reference ------------------------------------------------------------- */

/* Top-k of softmax(x) (ties: lower index first), weights and their errors. */
static void topk_ref(const double *x, int64_t E, int k, int renorm, double *w, int64_t *idx,
                     double *err) {
  unsigned char used[256];
  memset(used, 0, sizeof used);
  double m = -INFINITY, maxabs = 0, s = 0;
  for (int64_t e = 0; e < E; e++) {
    if (x[e] > m) m = x[e];
    if (fabs(x[e]) > maxabs) maxabs = fabs(x[e]);
  }
  for (int64_t e = 0; e < E; e++) s += exp(x[e] - m);
  double ws = 0;
  for (int i = 0; i < k; i++) {
    int64_t best = -1;
    for (int64_t e = 0; e < E; e++)
      if (!used[e] && (best < 0 || x[e] > x[best])) best = e;
    used[best] = 1;
    idx[i] = best;
    w[i] = exp(x[best] - m) / s;
    ws += w[i];
  }
  for (int i = 0; i < k; i++) {
    if (renorm) w[i] /= ws;
    err[i] = 2 * U *
                 (2 * maxabs + fabs(m) + 5 * fabs(x[idx[i]] - m) + 5 * log((double)E) + 16 +
                  growth((double)E) + (renorm ? growth(k) + 4 : 0)) *
                 w[i] + FLT_MIN;
  }
}

/* ---- checks ------------------------------------------------------------------ */

int run_topk(const task *t) {
  gt_check ck;
  check_begin(&ck, t);
  tu_rng rng = {t->seed};
  const int64_t T = t->rows, E = t->cols, ldx = E + t->pad_x;
  const int k = t->k;
  gt_buf x = {0}, w = {0}, ix = {0};
  double xr[256], wr[8], er[8];
  int64_t ir[8];
  if (gt_buf_alloc(&ck, &x, t->dt, gt_extent(t->off_x, T, E, ldx, GUARD)) ||
      gt_buf_alloc(&ck, &w, CKJIT_F32, (size_t)(t->off_y + T * k) + GUARD) ||
      gt_buf_alloc(&ck, &ix, t->odt, (size_t)(t->off_y + T * k) + GUARD))
    goto done;
  gt_fill_nan(t->dt, x.host, x.elems);
  const int64_t rot = (int64_t)(t->seed % 5);
  const double step = grid_step(t->dt);
  for (int64_t tk = 0; tk < T; tk++) {
    size_t base = (size_t)(t->off_x + tk * ldx);
    int kind = (int)((tk + rot) % 5);
    double cst = gen_value(D_GRID, t->dt, &rng, tk, 0, E);
    for (int64_t e = 0; e < E; e++) {
      double val;
      if (kind == 0) val = cst; /* all equal: indices 0..k-1 */
      else if (kind == 2) val = (double)(tu_rng_next(&rng) % 3) * 64 * step * (t->dt == CKJIT_F32 ? 1 : 0.25);
      else val = gen_value(D_GRID, t->dt, &rng, tk, e, E);
      gt_put(t->dt, x.host, base + (size_t)e, val);
    }
    if (kind == 1) { /* the max, repeated at random (also high) positions */
      double mx = -INFINITY;
      for (int64_t e = 0; e < E; e++) mx = fmax(mx, gt_get(t->dt, x.host, base + (size_t)e));
      for (int j = 0; j < 3; j++) gt_put(t->dt, x.host, base + (size_t)(tu_rng_next(&rng) % (uint64_t)E), mx);
      gt_put(t->dt, x.host, base + (size_t)(E - 1), mx);
    }
  }
  if (gt_buf_upload(&ck, &x) || gt_buf_poison(&ck, &w) || gt_buf_poison(&ck, &ix)) goto done;
  ckjit_status st = ckjit_topk_softmax(t->dt, T, E, gt_buf_ptr(&x, t->off_x), ldx, k, t->renorm,
                                       (float *)gt_buf_ptr(&w, t->off_y), t->odt, gt_buf_ptr(&ix, t->off_y), NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(&ck, "ckjit_topk_softmax returned %s: %s", ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  if (gt_sync(&ck) || gt_buf_download(&ck, &w, NULL) || gt_buf_download(&ck, &ix, NULL)) goto done;
  check_outside(&ck, &w, t->off_y, 1, T * k, T * k, "weights");
  check_outside(&ck, &ix, t->off_y, 1, T * k, T * k, "indices");
  for (int64_t tk = 0; tk < T; tk++) {
    gather_row(t->dt, x.host, t->off_x + tk * ldx, E, xr);
    topk_ref(xr, E, k, t->renorm, wr, ir, er);
    for (int i = 0; i < k; i++) {
      size_t o = (size_t)(t->off_y + tk * k + i);
      int64_t gi = gt_get_int(t->odt, ix.host, o);
      double gw = gt_get(CKJIT_F32, w.host, o);
      if (gi != ir[i]) {
        gt_fail(&ck, "token %lld rank %d: index %lld (x=%.9g), want %lld (x=%.9g)", LL(tk), i, LL(gi),
                gi >= 0 && gi < E ? xr[gi] : NAN, LL(ir[i]), xr[ir[i]]);
        break;
      }
      if (!within(CKJIT_F32, gw, wr[i], er[i])) {
        gt_fail(&ck, "token %lld rank %d (expert %lld): weight %.9g, want %.9g (allowed %.3g)", LL(tk), i,
                LL(ir[i]), gw, wr[i], er[i]);
        break;
      }
    }
  }
done:
  gt_buf_free(&x);
  gt_buf_free(&w);
  gt_buf_free(&ix);
  finish(&ck);
  return (int)ck.failures;
}

/* ---- reference self-checks ----------------------------------------------------- */

void self_check_topk(void) {
  const double xt[4] = {1, 3, 3, 2};
  double w[3], te[3];
  int64_t ix[3];
  topk_ref(xt, 4, 3, 0, w, ix, te);
  double den = exp(-2.0) + 2 + exp(-1.0);
  self_check(ix[0] == 1 && ix[1] == 2 && ix[2] == 3 && close_to(w[0], 1 / den) && w[0] == w[1] &&
                 close_to(w[2], exp(-1.0) / den),
             "topk [1,3,3,2] k=3");
  topk_ref(xt, 4, 2, 1, w, ix, te);
  self_check(ix[0] == 1 && ix[1] == 2 && close_to(w[0], 0.5), "topk renormalized");
}

/* ---- tasks ------------------------------------------------------------------------ */

void add_topk_tasks(void) {
  const ckjit_dtype dts[3] = {CKJIT_F32, CKJIT_F16, CKJIT_BF16};
  /* topk_softmax: experts x k x renormalize x dtype, index dtypes and token counts rotating. */
  static const int64_t experts[] = {1, 3, 8, 64, 100, 128, 256};
  static const int ks[] = {1, 2, 8};
  static const int64_t tokens[] = {1, 77, 1025, 3, 300};
  int n = 0;
  for (size_t e = 0; e < sizeof experts / sizeof experts[0]; e++)
    for (size_t ki = 0; ki < 3; ki++) {
      if (ks[ki] > experts[e]) continue;
      for (int rn = 0; rn < 2; rn++)
        for (int d = 0; d < 3; d++, n++) {
          task t = mk(K_TOPK, dts[d], tokens[n % 5], experts[e]);
          t.k = ks[ki];
          t.renorm = rn;
          t.odt = n % 2 ? CKJIT_I64 : CKJIT_I32;
          t.data = D_GRID;
          apply_variant(&t, n % 4 == 1 ? 1 : n % 4 == 3 ? 2 : 0);
          t.pad_y = 0; /* outputs are packed t*k + i */
          add(t);
        }
    }
}
