/* Row-ops GPU test, rowwise dynamic quantization to int8 and fp8 e4m3:
 * ckjit_rmsnorm2d_quant (its normalization is run and checked by run_norm,
 * rows_norm.c; the quantized row by check_rmsquant_row here) and
 * ckjit_smoothquant, NaN-holding and all-zero rows included, checked
 * exactly against the reference rounding of an fp8 / int8 codec that is
 * itself checked on all 256 codes.
 *
 * Tolerances (rows_gpu.h for u, g(n) and the window):
 *   row_scale:    smoothquant 8u relative (product, division: 4u, x2);
 *                 rmsnorm2d_quant 2 (rel_r + 4u) + 8u (it carries rstd's error).
 *   (a row of rmsnorm2d_quant / smoothquant holding a NaN: scale NaN, q 0
 *   for int8 or a NaN code for e4m3; an all-zero row: scale 1, q 0.)
 *   q:            exact: convert(t) with t = v / row_scale_gpu (smoothquant,
 *                 the header's v * (QMAX / amax) with the GPU's own amax) or
 *                 t = QMAX * (h_c w_c) / max|h w| (rmsnorm2d_quant: the per-row
 *                 rstd cancels in q exactly, so its f32 error, which
 *                 row_scale carries, does not widen the window).  The GPU's t
 *                 differs from ours by ~6 roundings (v: 2, amax: 2, QMAX/amax,
 *                 v * that), ~10u with approximate division, so one int8 step
 *                 / one fp8 ulp is tolerated only where t lies within 32u =
 *                 1.9e-6 relative of a rounding boundary; such cases are
 *                 counted and printed.
 */
#include "rows_gpu.h"

/* ---- fp8 e4m3 (OCP e4m3fn) and int8 ----------------------------------------- */
/* bias 7, no infinity, NaN = S.1111.111, max 448 = S.1111.110, subnormals
 * m * 2^-9. */
static double fp8_decode(uint8_t b) {
  int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return s ? -NAN : NAN;
  double v = e == 0 ? ldexp((double)m, -9) : ldexp((double)(8 + m), e - 10);
  return s ? -v : v;
}

/* Round to nearest even, saturating to +-448 (infinity too); NaN -> NaN. */
static int fp8_encode(double t) {
  if (isnan(t)) return signbit(t) ? 0xFF : 0x7F;
  int sign = signbit(t) ? 0x80 : 0;
  double a = fabs(t);
  if (a >= 448.0) return sign | 0x7E;
  int code;
  if (a < ldexp(1.0, -6)) {
    code = (int)rint(a * 512.0); /* units of 2^-9; 8 is the smallest normal, 0x08 */
  } else {
    int ex;
    frexp(a, &ex);
    int e = ex - 1; /* a in [2^e, 2^(e+1)), e >= -6 */
    double m = rint((ldexp(a, -e) - 1.0) * 8.0); /* 0..8; 8 carries into the exponent */
    code = ((e + 7) << 3) + (int)m;
  }
  if (code > 0x7E) code = 0x7E; /* 480 would be the NaN code: saturate */
  return sign | code;
}

static int int8_encode(double t) {
  if (isnan(t)) return 0;
  double r = rint(t);
  if (r > 127) r = 127;
  if (r < -127) r = -127;
  return (int)r;
}

static double qmax_of(ckjit_dtype q) { return q == CKJIT_I8 ? 127.0 : 448.0; }

static int q_code(ckjit_dtype q, double t) { return q == CKJIT_I8 ? int8_encode(t) : fp8_encode(t); }

static int q_read(ckjit_dtype q, const uint8_t *buf, size_t i) {
  return q == CKJIT_I8 ? (int)(int8_t)buf[i] : (int)buf[i];
}

static double q_value(ckjit_dtype q, int code) {
  return q == CKJIT_I8 ? (double)code : fp8_decode((uint8_t)code);
}

/* Whether the GPU's code `got` is convert(t); where t lies within `win`
 * (relative) of a rounding boundary the neighbour across it is accepted too,
 * and counted in *tolerated.  +0 and -0 are the same fp8 value. */
static int q_match(ckjit_dtype q, int got, double t, double win, int *tolerated) {
  int c0 = q_code(q, t);
  if (got == c0) return 1;
  if (q == CKJIT_FP8_E4M3 && (got & 0x7F) == 0 && (c0 & 0x7F) == 0) return 1;
  int c1 = q_code(q, t * (1 - win)), c2 = q_code(q, t * (1 + win));
  if (got == c1 || got == c2 ||
      (q == CKJIT_FP8_E4M3 && (got & 0x7F) == 0 && ((c1 & 0x7F) == 0 || (c2 & 0x7F) == 0))) {
    ++*tolerated;
    return 1;
  }
  return 0;
}

/* ---- checks ------------------------------------------------------------------ */

static atomic_long g_tolerated;  /* q values accepted at a rounding boundary */
static atomic_long g_q_checked;  /* q values checked */

/* Checks one row of q (at base) and its row_scale.  ratio[c] is v[r][c] up to
 * a per-row factor (rmsnorm2d_quant: h*w, rstd left out; smoothquant: v
 * itself); t_c = ratio[c] * QMAX / max|ratio| (use_gpu_scale: v[c] /
 * row_scale_gpu, the header's formula with the GPU's own amax).  row_scale
 * must be within scale_err of scale_ref.  A zero row: scale 1, q 0; a NaN
 * row: scale NaN, q 0 (int8) or NaN (e4m3). */
static void check_quant_row(gt_check *ck, ckjit_dtype qdt, const gt_buf *q, int64_t base, int64_t C, int64_t r,
                            const double *ratio, double scale_ref, double scale_err, float gpu_scale,
                            int use_gpu_scale) {
  const double QMAX = qmax_of(qdt);
  double amax = 0;
  int has_nan = 0;
  for (int64_t c = 0; c < C; c++) {
    has_nan |= isnan(ratio[c]);
    amax = fmax(amax, fabs(ratio[c]));
  }
  if (has_nan || amax == 0) {
    if (has_nan ? !isnan(gpu_scale) : gpu_scale != 1.0f)
      gt_fail(ck, "row %lld (%s): row_scale %.9g, want %s", LL(r), has_nan ? "holds a NaN" : "all zero",
              (double)gpu_scale, has_nan ? "NaN" : "1");
    for (int64_t c = 0; c < C; c++) {
      int got = q_read(qdt, q->host, (size_t)(base + c));
      int ok = has_nan && qdt == CKJIT_FP8_E4M3 ? (got & 0x7F) == 0x7F : q_value(qdt, got) == 0;
      if (!ok) {
        gt_fail(ck, "(%lld,%lld) of an %s row: q code %d (%g), want %s", LL(r), LL(c),
                has_nan ? "NaN-holding" : "all-zero", got, q_value(qdt, got),
                has_nan && qdt == CKJIT_FP8_E4M3 ? "NaN" : "0");
        return;
      }
    }
    return;
  }
  if (!within(CKJIT_F32, (double)gpu_scale, scale_ref, scale_err))
    gt_fail(ck, "row %lld: row_scale %.9g, want %.9g (allowed %.3g)", LL(r), (double)gpu_scale, scale_ref,
            scale_err);
  if (use_gpu_scale && !(gpu_scale > 0 && isfinite(gpu_scale))) return;
  int tolerated = 0;
  for (int64_t c = 0; c < C; c++) {
    double tv = use_gpu_scale ? ratio[c] / (double)gpu_scale : ratio[c] * (QMAX / amax);
    int got = q_read(qdt, q->host, (size_t)(base + c));
    if (!q_match(qdt, got, tv, Q_WINDOW, &tolerated)) {
      gt_fail(ck, "(%lld,%lld): q code %d (%g), want %d (%g) = convert(%.9g)", LL(r), LL(c), got,
              q_value(qdt, got), q_code(qdt, tv), q_value(qdt, q_code(qdt, tv)), tv);
      break;
    }
  }
  atomic_fetch_add(&g_tolerated, tolerated);
  atomic_fetch_add(&g_q_checked, (long)C);
}

void check_rmsquant_row(gt_check *ck, const task *t, const norm_ref *s, const double *h, const gt_buf *w,
                        const gt_buf *q, int64_t q_base, const gt_buf *rs, int64_t r, double *hw) {
  const int64_t C = t->cols;
  for (int64_t c = 0; c < C; c++)
    hw[c] = h[c] * (t->weight ? gt_get(t->dt, w->host, (size_t)(t->off_w + c)) : 1.0);
  double amax = 0;
  for (int64_t c = 0; c < C; c++) amax = fmax(amax, fabs(hw[c]));
  double scale_ref = s->rstd * amax / qmax_of(t->odt);
  float gs;
  memcpy(&gs, rs->host + 4 * (size_t)(t->off_y + r), 4);
  check_quant_row(ck, t->odt, q, q_base, C, r, hw, scale_ref, (2 * (s->rel_r + 4 * U) + 8 * U) * scale_ref, gs, 0);
}

int run_smoothquant(const task *t) {
  gt_check ck;
  check_begin(&ck, t);
  tu_rng rng = {t->seed};
  const int64_t R = t->rows, C = t->cols, ldx = C + t->pad_x, ldq = C + t->pad_y;
  gt_buf x = {0}, q = {0}, sc = {0}, rs = {0};
  double *v = NULL;
  if (gt_buf_alloc(&ck, &x, t->dt, gt_extent(t->off_x, R, C, ldx, GUARD)) ||
      gt_buf_alloc(&ck, &q, t->odt, gt_extent(t->off_y, R, C, ldq, GUARD)) ||
      gt_buf_alloc(&ck, &sc, CKJIT_F32, (size_t)(t->off_w + C) + GUARD) ||
      gt_buf_alloc(&ck, &rs, CKJIT_F32, (size_t)(t->off_y + R) + GUARD))
    goto done;
  fill_matrix(t, &x, &rng, t->off_x, R, C, ldx, t->data, t->nan, t->zero_rows);
  gt_fill_nan(CKJIT_F32, sc.host, sc.elems);
  for (int64_t c = 0; c < C; c++) gt_put(CKJIT_F32, sc.host, (size_t)(t->off_w + c), 0.25 + 1.75 * tu_rng_unit(&rng));
  if (gt_buf_upload(&ck, &x) || gt_buf_upload(&ck, &sc) || gt_buf_poison(&ck, &q) || gt_buf_poison(&ck, &rs)) goto done;
  ckjit_status st = ckjit_smoothquant(t->dt, R, C, gt_buf_ptr(&x, t->off_x), ldx,
                                      (const float *)gt_buf_ptr(&sc, t->off_w), t->odt, gt_buf_ptr(&q, t->off_y),
                                      ldq, (float *)gt_buf_ptr(&rs, t->off_y), NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(&ck, "ckjit_smoothquant returned %s: %s", ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  if (gt_sync(&ck) || gt_buf_download(&ck, &q, NULL) || gt_buf_download(&ck, &rs, NULL)) goto done;
  check_outside(&ck, &q, t->off_y, R, C, ldq, "q");
  check_outside(&ck, &rs, t->off_y, 1, R, R, "row_scale");
  v = malloc((size_t)C * sizeof *v);
  if (!v) abort();
  for (int64_t r = 0; r < R; r++) {
    double amax = 0;
    for (int64_t c = 0; c < C; c++) {
      /* exact: a 24-bit by 24-bit product */
      v[c] = gt_get(t->dt, x.host, (size_t)(t->off_x + r * ldx + c)) * gt_get(CKJIT_F32, sc.host, (size_t)(t->off_w + c));
      amax = fmax(amax, fabs(v[c]));
    }
    float gs;
    memcpy(&gs, rs.host + 4 * (size_t)(t->off_y + r), 4);
    double scale_ref = amax / qmax_of(t->odt);
    check_quant_row(&ck, t->odt, &q, t->off_y + r * ldq, C, r, v, scale_ref, 8 * U * scale_ref, gs, 1);
  }
done:
  free(v);
  gt_buf_free(&x);
  gt_buf_free(&q);
  gt_buf_free(&sc);
  gt_buf_free(&rs);
  finish(&ck);
  return (int)ck.failures;
}

void report_quant(void) {
  printf("quantization: %ld q values checked, %ld within %.2g relative of a rounding boundary accepted "
         "either neighbour\n", atomic_load(&g_q_checked), atomic_load(&g_tolerated), Q_WINDOW);
}

/* ---- reference self-checks ----------------------------------------------------- */

void self_check_quant(void) {
  char msg[256];
  /* fp8: every code decodes and re-encodes to itself; two NaN codes. */
  int nans = 0;
  for (int c = 0; c < 256; c++) {
    double d = fp8_decode((uint8_t)c);
    if (isnan(d)) {
      nans++;
      self_check(c == 0x7F || c == 0xFF, "fp8: only 0x7F and 0xFF are NaN");
      self_check(fp8_encode(d) == (c & 0x80 ? 0xFF : 0x7F), "fp8: NaN round trip");
      continue;
    }
    snprintf(msg, sizeof msg, "fp8 round trip of code 0x%02X (%g) gives 0x%02X", c, d,
             fp8_encode(d));
    self_check(fp8_encode(d) == c, msg);
  }
  self_check(nans == 2, "fp8: two NaN codes");
  self_check(fp8_decode(0x7E) == 448.0 && fp8_decode(0xFE) == -448.0, "fp8: max 448");
  self_check(fp8_decode(0x38) == 1.0, "fp8: 0x38 is 1");
  self_check(fp8_decode(0x08) == ldexp(1, -6) && fp8_decode(0x01) == ldexp(1, -9) &&
                 fp8_decode(0x07) == 7 * ldexp(1, -9),
             "fp8: subnormals and the smallest normal");
  self_check(fp8_decode(0x76) == 224.0 && fp8_decode(0x6E) == 112.0, "fp8: 224, 112");
  /* Midpoints between neighbours round to the even code; just off them, to the nearer. */
  for (int c = 0; c < 0x7E; c++) {
    double a = fp8_decode((uint8_t)c), b = fp8_decode((uint8_t)(c + 1)), mid = (a + b) / 2;
    int even = (c & 1) ? c + 1 : c;
    snprintf(msg, sizeof msg, "fp8 midpoint of 0x%02X/0x%02X (%g)", c, c + 1, mid);
    self_check(fp8_encode(mid) == even && fp8_encode(-mid) == (0x80 | even), msg);
    self_check(fp8_encode(nextafter(mid, INFINITY)) == c + 1 && fp8_encode(nextafter(mid, 0)) == c, msg);
  }
  self_check(fp8_encode(449) == 0x7E && fp8_encode(464) == 0x7E && fp8_encode(470) == 0x7E &&
                 fp8_encode(1e30) == 0x7E && fp8_encode(INFINITY) == 0x7E &&
                 fp8_encode(-INFINITY) == 0xFE && fp8_encode(-1e9) == 0xFE,
             "fp8: saturation to +-448");
  self_check(fp8_encode(ldexp(1, -11)) == 0 && fp8_encode(ldexp(1, -10)) == 0 &&
                 fp8_encode(1.5 * ldexp(1, -10)) == 1 && fp8_encode(-ldexp(1, -12)) == 0x80,
             "fp8: underflow to (signed) zero, half the smallest subnormal ties to 0");
  self_check(fp8_encode(NAN) == 0x7F, "fp8: NaN");
  /* int8 */
  self_check(int8_encode(2.5) == 2 && int8_encode(3.5) == 4 && int8_encode(-2.5) == -2 &&
                 int8_encode(126.5) == 126 && int8_encode(127.49) == 127 && int8_encode(200) == 127 &&
                 int8_encode(-128) == -127 && int8_encode(-0.4) == 0,
             "int8: round half even, saturate to [-127, 127]");
  /* quant: v = {1, -2, 0.5}: int8 t = {63.5, -127, 31.75}, fp8 t = {224, -448, 112} */
  int tol = 0;
  self_check(q_match(CKJIT_I8, 64, 63.5, 0, &tol) && !q_match(CKJIT_I8, 63, 63.5, 0, &tol) &&
                 q_match(CKJIT_I8, -127, -127.0, 0, &tol) && q_match(CKJIT_I8, 32, 31.75, 0, &tol) &&
                 q_match(CKJIT_FP8_E4M3, 0x76, 224, 0, &tol) && q_match(CKJIT_FP8_E4M3, 0xFE, -448, 0, &tol) &&
                 q_match(CKJIT_FP8_E4M3, 0x6E, 112, 0, &tol) && tol == 0,
             "quant codes");
  self_check(q_match(CKJIT_I8, 63, 63.5 * (1 + 1e-7), Q_WINDOW, &tol) && tol == 1 &&
                 !q_match(CKJIT_I8, 63, 63.6, Q_WINDOW, &tol) &&
                 q_match(CKJIT_FP8_E4M3, 0x00, -1e-6, 0, &tol),
             "quant boundary window");
}

/* ---- tasks ------------------------------------------------------------------------ */

/* The long rows. */
void add_quant_long_tasks(void) {
  task t = mk(K_RMSQUANT, CKJIT_BF16, g_big[0].rows, g_big[0].cols);
  t.odt = CKJIT_FP8_E4M3, t.data = D_UNIFORM, t.weight = 1;
  add(t);
  t = mk(K_RMSQUANT, CKJIT_F32, g_big[1].rows, g_big[1].cols);
  t.odt = CKJIT_I8, t.data = D_WIDE, t.weight = 1, t.residual = 1, t.stats = 1, t.nan = 1;
  apply_variant(&t, 2);
  add(t);
  t = mk(K_SMOOTHQUANT, CKJIT_F16, g_big[2].rows, g_big[2].cols);
  t.odt = CKJIT_I8, t.data = D_UNIFORM;
  add(t);
  t = mk(K_SMOOTHQUANT, CKJIT_F32, g_big[1].rows, g_big[1].cols);
  t.odt = CKJIT_FP8_E4M3, t.data = D_WIDE, t.nan = 1;
  apply_variant(&t, 1);
  add(t);
}

void add_quant_tasks(void) {
  const ckjit_dtype dts[3] = {CKJIT_F32, CKJIT_F16, CKJIT_BF16};
  static const float epss[4] = {1e-5f, 1e-6f, 0.1f, 1e-12f};
  /* rmsnorm2d_quant: q dtype x dtype x option sets, four shapes each. */
  for (int qd = 0; qd < 2; qd++)
    for (int d = 0; d < 3; d++)
      for (int cfg = 0; cfg < 4; cfg++)
        for (int j = 0; j < 4; j++) {
          int s = (qd * 7 + d * 5 + cfg * 3 + j * 4) % NREG;
          task t = mk(K_RMSQUANT, dts[d], g_reg[s].rows, g_reg[s].cols);
          t.odt = qd ? CKJIT_FP8_E4M3 : CKJIT_I8;
          t.data = j % 2 ? D_WIDE : D_UNIFORM;
          t.zero_rows = j == 1;
          t.eps = epss[j];
          t.nan = j == 3;
          switch (cfg) {
            case 0: break;
            case 1: t.weight = 1; break;
            case 2: t.weight = 1, t.residual = 1, t.sum_out = 1, t.stats = 1; break;
            case 3: t.weight = 1, t.residual = 1, t.sum_out = 1, t.alias = 1 + j % 2; break;
          }
          apply_variant(&t, cfg + j + qd);
          add(t);
        }

  /* smoothquant: q dtype x dtype over the regular shapes. */
  for (int qd = 0; qd < 2; qd++)
    for (int d = 0; d < 3; d++)
      for (int s = 0; s < NREG; s++) {
        task t = mk(K_SMOOTHQUANT, dts[d], g_reg[s].rows, g_reg[s].cols);
        t.odt = qd ? CKJIT_FP8_E4M3 : CKJIT_I8;
        t.data = s % 3 == 0 ? D_WIDE : s % 3 == 1 ? D_UNIFORM : D_TIES;
        t.zero_rows = s % 4 == 1;
        t.nan = s % 4 == 2;
        apply_variant(&t, s + d + qd);
        add(t);
      }
}
