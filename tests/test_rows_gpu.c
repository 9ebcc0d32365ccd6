/* GPU suite for the row-wise ops: reductions (ckjit_reduce_rows, ckjit_reduce),
 * softmax / log-softmax, layernorm2d, rmsnorm2d, rowwise dynamic quantization
 * (ckjit_rmsnorm2d_quant, ckjit_smoothquant) and MoE gating
 * (ckjit_topk_softmax), each against a CPU reference computed in double,
 * through the public API only.  Exits 77 (skip) when there is no GPU; the
 * reference self-checks run first, GPU or not.
 *
 * Also covered: padded row strides and base pointers misaligned by one
 * element (scalar paths), in-place softmax / layernorm (y = x), sum_out
 * aliasing residual or x, params = NULL, output buffers poisoned (0xFF)
 * before each call and checked outside the logical output (row padding,
 * tail guard), inputs' padding filled with NaN (a kernel reading it into a
 * result shows), inputs checked unchanged, and tensors past 2^31 elements.
 *
 * Environment: CKJIT_TEST_SEED (default: time), CKJIT_TEST_THREADS (worker
 * threads, default 8), CKJIT_TEST_SKIP_LARGE=1 (skip the > 2^31-element
 * cases), CKJIT_TEST_SOFTMAX_EXACT_ONLY=1 (run only the softmax exactness
 * and f32-bound checks, run_softmax_exact).
 *
 * Tolerances (u = 2^-24, the f32 unit roundoff; g(n) = 4*sqrt(n) + 8, the
 * growth allowed for an f32 accumulation of n terms; every f32-math bound
 * below carries a 2x safety factor unless it is exact):
 *   An f16/bf16 (or f32) output is accepted when it lies in
 *   [round(ref - err), round(ref + err)] widened by one ulp of the output
 *   dtype on each side, where ref is the f64 reference, err the f32-math
 *   error bound of the op and round() rounds to the output dtype: i.e. the
 *   f64 reference rounded to the dtype, +-1 ulp, + the f32 error.
 *   reduce sum:   err = g(n) * u * sum|x|           (mean: that / n + 2u|mean|)
 *   reduce max/min: exact (the result is an input, converted to y's dtype);
 *   argmax/argmin: exact index (ties: lowest; NaN: index of the first NaN).
 *   softmax:      err = 2 * (u*(|z_c| + 5|z_c - m|) + C) * p_c, with
 *                 C = u*(2 max|z| + |m| + 5 ln n + 16 + g(n)): z = scale*x is
 *                 rounded to f32 (u|z|), exp costs ~5u|z - m| (CUDA's __expf
 *                 is off by up to 2 + 1.16|arg| ulps), the sum's relative error
 *                 is its p-weighted average (<= ln n entropy term) + g(n) u.
 *   log-softmax:  err = 2 * (u*(|z_c| + |m| + 2|z_c - m| + |ln s|) + C), absolute.
 *                 Masked columns are exactly 0 / -inf (valid 0: the whole row);
 *                 a NaN or +inf, or only -inf, in the valid part makes the
 *                 valid part NaN; a -inf input gives exactly 0 / -inf.
 *   softmax exactly (check_softmax_one_valid, check_softmax_all_equal): the
 *                 kernels round z = scale*x to f32 once and every exponent is
 *                 z - max z, so the max's is exactly 0 and exp(0) = 1.  One
 *                 valid element: exactly 1 / 0.  n equal valid values: the
 *                 sum is exactly n, so softmax is exactly round_f32(1/n)
 *                 rounded to the dtype (torch: exp(0) / n), log-softmax
 *                 -log(n) within one f32 ulp (logf) of the f64 value, then
 *                 rounded to the dtype.  Every dtype, scale 1 / 0.7 / -1.3
 *                 (/ 0.125), masked or not, fused and split rows (n to 2^20).
 *   softmax f32 bound (check_softmax_f32_bound): against the f64 softmax of
 *                 the same f32 z, first order in u, 2x safety.  d_c = z_c - m
 *                 rounded: u|d_c|; __expf: 2 + 1.16|d_c| ulps <= E_c =
 *                 (4 + 2.32|d_c|) u; 1/s and the product: 2u.  The sum s:
 *                 S = u (10 ln n + 8 + g(6 D)): the p-weighted errors of d and
 *                 exp (sum p|d| <= ln n, the entropy, since s >= 1: 3.32 ln n
 *                 + 4), the partials' rescaling by __expf(max_k - max) (twice
 *                 that, <= 6.64 ln n), and D = 56 + n/1024 roundings on the
 *                 sum's longest path (<= 32 values per thread, one fold per
 *                 tile, <= 24 tree and partial-fold levels), each up to 6 with
 *                 a rescale (exp, difference, product).
 *                   softmax:     err_c = 2 (u |d_c| + E_c + 2u + S) p_c + 2^-146
 *                   log-softmax: err_c = 2 (u (|d_c| + |y_c| + 2|ln s|) + S)
 *                 (2^-146: subnormal exponentials).  Large magnitudes (+-3e4)
 *                 always run with an inexact scale: an exponent taken from
 *                 the exact product (an fma) while the max was taken from
 *                 rounded ones is off by up to |z| u there.
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
 *   topk weights: 2u (2 max|x| + |m| + 5|x_i - m| + 5 ln E + 16 + g(E)
 *                 [+ g(k) + 4 renormalized]) relative; indices exact (inputs
 *                 are on a grid so distinct logits give clearly distinct f32
 *                 probabilities, equal logits give bitwise-equal ones).
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckjit/ckjit.h"
#include "gpu_test_util.h"

#define REPORT_MAX 5 /* failures printed per task (the rest are counted) */
#define GUARD 19 /* poisoned elements after every output (and NaN after inputs) */

static const double U = 1.0 / 16777216.0; /* 2^-24 */
static const double Q_WINDOW = 32.0 / 16777216.0;

static double growth(double n) { return 4.0 * sqrt(n) + 8.0; }

/* ---- element tolerances ---------------------------------------------------- */

/* Spacing of the dtype's values at magnitude |a| (subnormals included). */
static double ulp_of(ckjit_dtype dt, double a) {
  a = fabs(a);
  if (isinf(a) || isnan(a)) return a;
  int mant = dt == CKJIT_F32 ? 23 : dt == CKJIT_F16 ? 10 : 7;
  int emin = dt == CKJIT_F16 ? -14 : -126;
  int ex = emin;
  if (a >= ldexp(1.0, emin)) {
    frexp(a, &ex);
    ex -= 1;
  }
  return ldexp(1.0, ex - mant);
}

/* got, an output of dtype dt, against the f64 reference ref whose f32
 * computation may be off by err: got must lie in [round(ref - err),
 * round(ref + err)] widened by one ulp of dt at each end. */
static int within(ckjit_dtype dt, double got, double ref, double err) {
  if (isnan(ref)) return isnan(got);
  if (isnan(got)) return 0;
  if (isinf(ref)) return got == ref;
  double lo = gt_round(dt, ref - err), hi = gt_round(dt, ref + err);
  if (!isinf(lo)) lo -= ulp_of(dt, lo);
  if (!isinf(hi)) hi += ulp_of(dt, hi);
  return got >= lo && got <= hi;
}

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

/* ---- references ------------------------------------------------------------ */

static const char *op_names[] = {"sum", "mean", "max", "min", "argmax", "argmin"};

typedef struct red_ref {
  double sum, sumabs, value;
  int64_t index;
  int has_nan;
} red_ref;

/* PyTorch semantics: NaN propagates; arg ops return the first NaN's index;
 * ties give the lowest index. */
static red_ref reduce_ref(int op, const double *v, int64_t n) {
  red_ref r = {0, 0, 0, 0, 0};
  int64_t first_nan = -1, imax = -1, imin = -1;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(v[i])) {
      if (first_nan < 0) first_nan = i;
      continue;
    }
    r.sum += v[i];
    r.sumabs += fabs(v[i]);
    if (imax < 0 || v[i] > v[imax]) imax = i;
    if (imin < 0 || v[i] < v[imin]) imin = i;
  }
  if (first_nan >= 0) {
    r.has_nan = 1;
    r.sum = r.value = NAN;
    r.index = first_nan;
    return r;
  }
  switch (op) {
    case CKJIT_REDUCE_SUM: r.value = r.sum; break;
    case CKJIT_REDUCE_MEAN: r.value = r.sum / (double)n; break;
    case CKJIT_REDUCE_MAX:
    case CKJIT_REDUCE_ARGMAX: r.value = v[imax], r.index = imax; break;
    default: r.value = v[imin], r.index = imin; break;
  }
  return r;
}

/* Allowed f32 error of a sum / mean reference (see the top comment). */
static double reduce_err(int op, const red_ref *r, int64_t n) {
  double e = growth((double)n) * U * r->sumabs;
  if (op == CKJIT_REDUCE_MEAN) e = e / (double)n + 2 * U * fabs(r->value);
  return e;
}

/* Softmax of one row: out[c] and its allowed error err[c]; err < 0 means an
 * exact value (masked 0 / -inf, NaN, the 0 / -inf of a -inf input).  A NaN
 * or +inf, or only -inf, among the valid columns makes them all NaN. */
static void softmax_ref(const double *x, int64_t n, int64_t valid, double scale, int logm,
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

typedef struct norm_ref {
  double mean, var, ms, rstd, dm, rel_r;
} norm_ref;

/* Row statistics of layernorm (ln = 1) or rmsnorm, with the error bounds of
 * an f32 implementation (see the top comment). */
static norm_ref norm_stats(int ln, const double *h, int64_t n, double eps) {
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
static double norm_out(int ln, const norm_ref *s, double h, double w, double b, double *err) {
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

/* ---- reference self-checks (run first, GPU or not) --------------------------- */

static int g_self_fail;

static void self_check(int ok, const char *what) {
  if (!ok) {
    printf("FAIL self-check: %s\n", what);
    g_self_fail++;
  }
}

static int close_to(double a, double b) { return fabs(a - b) <= 1e-12 * (fabs(b) + 1e-300); }

static int self_checks(void) {
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
  /* ulp / within */
  self_check(ulp_of(CKJIT_F16, 1.0) == ldexp(1, -10) && ulp_of(CKJIT_BF16, 1.0) == ldexp(1, -7) &&
                 ulp_of(CKJIT_F32, 1.0) == ldexp(1, -23) && ulp_of(CKJIT_F16, 1e-7) == ldexp(1, -24) &&
                 ulp_of(CKJIT_F16, 65504) == 32 && ulp_of(CKJIT_BF16, 3.0) == ldexp(1, -6) &&
                 ulp_of(CKJIT_F32, 0) == ldexp(1, -149),
             "ulp_of");
  self_check(within(CKJIT_BF16, 1.0 + ldexp(1, -7), 1.0, 0) && !within(CKJIT_BF16, 1.0 + ldexp(1, -6), 1.0, 0) &&
                 within(CKJIT_F32, 1.0, 1.0 + 1e-3, 2e-3) && !within(CKJIT_F32, 1.0, 1.0 + 1e-3, 1e-4) &&
                 within(CKJIT_F16, INFINITY, 70000.0, 0) && !within(CKJIT_F16, NAN, 1.0, 1) &&
                 within(CKJIT_F16, NAN, NAN, 0),
             "within");
  /* reduce */
  const double a[4] = {3, NAN, 5, NAN}, b[4] = {1, 5, 5, 2}, c2[2] = {-1, -1};
  red_ref r = reduce_ref(CKJIT_REDUCE_ARGMAX, a, 4);
  self_check(r.has_nan && r.index == 1 && isnan(r.value), "reduce: NaN, first NaN index");
  r = reduce_ref(CKJIT_REDUCE_ARGMIN, a, 4);
  self_check(r.index == 1, "reduce: argmin of a NaN row");
  self_check(reduce_ref(CKJIT_REDUCE_ARGMAX, b, 4).index == 1 && reduce_ref(CKJIT_REDUCE_ARGMIN, b, 4).index == 0 &&
                 reduce_ref(CKJIT_REDUCE_SUM, b, 4).value == 13 && reduce_ref(CKJIT_REDUCE_MEAN, b, 4).value == 3.25 &&
                 reduce_ref(CKJIT_REDUCE_MAX, b, 4).value == 5 && reduce_ref(CKJIT_REDUCE_MIN, b, 4).value == 1 &&
                 reduce_ref(CKJIT_REDUCE_ARGMAX, c2, 2).index == 0 && reduce_ref(CKJIT_REDUCE_ARGMIN, c2, 2).index == 0,
             "reduce: values and lowest-index ties");
  /* softmax */
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
  /* norms */
  const double h4[4] = {1, 2, 3, 4}, h2[2] = {3, 4};
  norm_ref s = norm_stats(1, h4, 4, 0.0);
  double er;
  self_check(s.mean == 2.5 && s.var == 1.25 && close_to(s.rstd, 1 / sqrt(1.25)) &&
                 close_to(norm_out(1, &s, 1.0, 2.0, 0.5, &er), -1.5 / sqrt(1.25) * 2 + 0.5),
             "layernorm [1,2,3,4]");
  s = norm_stats(0, h2, 2, 0.0);
  self_check(close_to(s.rstd, 1 / sqrt(12.5)) && close_to(norm_out(0, &s, 4.0, 1.0, 0, &er), 4 / sqrt(12.5)),
             "rmsnorm [3,4]");
  /* topk */
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
  return g_self_fail;
}

/* ---- tasks ----------------------------------------------------------------- */

enum kind { K_REDUCE_ROWS, K_REDUCE_ND, K_SOFTMAX, K_LAYERNORM, K_RMSNORM, K_RMSQUANT, K_SMOOTHQUANT, K_TOPK };
static const char *kind_names[] = {"reduce_rows", "reduce", "softmax", "layernorm2d",
                                   "rmsnorm2d", "rmsnorm2d_quant", "smoothquant", "topk_softmax"};

enum data { D_UNIFORM, D_NEG, D_POS, D_TIES, D_OFFSET, D_WIDE, D_EXACT, D_EXTREME, D_GRID, D_HASHED };
static const char *data_names[] = {"uniform", "negative", "positive", "ties", "offset1000",
                                   "wide", "exact16", "extreme", "grid", "hashed"};

typedef struct task {
  enum kind kind;
  int op;               /* reduce op */
  ckjit_dtype dt;       /* input dtype */
  ckjit_dtype odt;      /* reduce: y dtype; quant: q dtype; topk: index dtype */
  int64_t rows, cols;   /* topk: tokens x experts */
  int64_t pad_x, pad_y, pad_r, pad_s; /* ld = cols + pad (y: also q) */
  int64_t off_x, off_y, off_r, off_s, off_w; /* misalignment in elements */
  int data, nan, zero_rows;
  float scale;          /* softmax */
  int log, mask, null_params;
  int inplace;          /* softmax, layernorm: y is x */
  float eps;            /* norms */
  int weight, bias, residual, sum_out, stats;
  int alias;            /* sum_out is 1: residual, 2: x */
  int k, renorm;        /* topk */
  ckjit_tensor_layout layout; /* reduce */
  int dim;
  uint64_t seed;
} task;

static void app(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void app(char *buf, size_t len, const char *fmt, ...) {
  size_t n = strlen(buf);
  if (n + 1 >= len) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + n, len - n, fmt, ap);
  va_end(ap);
}

#define LL(v) ((long long)(v))

static void describe(const task *t, char *buf, size_t len) {
  buf[0] = 0;
  const char *dn = ckjit_dtype_name(t->dt), *on = ckjit_dtype_name(t->odt);
  switch (t->kind) {
    case K_REDUCE_ROWS:
      app(buf, len, "reduce_rows:%s %s->%s %lldx%lld ld_x=%lld off(x,y)=(%lld,%lld)", op_names[t->op], dn,
          on, LL(t->rows), LL(t->cols), LL(t->cols + t->pad_x), LL(t->off_x), LL(t->off_y));
      break;
    case K_REDUCE_ND: {
      const ckjit_tensor_layout *L = &t->layout;
      app(buf, len, "reduce:%s %s->%s rank=%d shape=[", op_names[t->op], dn, on, L->rank);
      for (int d = 0; d < L->rank; d++) app(buf, len, "%s%lld", d ? "," : "", LL(L->shape[d]));
      app(buf, len, "] strides=[");
      for (int d = 0; d < L->rank; d++) app(buf, len, "%s%lld", d ? "," : "", LL(L->strides[d]));
      app(buf, len, "] dim=%d off(x,y)=(%lld,%lld)", t->dim, LL(t->off_x), LL(t->off_y));
      break;
    }
    case K_SOFTMAX:
      app(buf, len, "softmax%s %s %lldx%lld scale=%g%s%s%s ld(x,y)=(%lld,%lld) off(x,y)=(%lld,%lld)",
          t->log ? "(log)" : "", dn, LL(t->rows), LL(t->cols), (double)t->scale,
          t->mask ? " valid_cols" : "", t->null_params ? " params=NULL" : "", t->inplace ? " in-place(y=x)" : "",
          LL(t->cols + t->pad_x), LL(t->inplace ? t->cols + t->pad_x : t->cols + t->pad_y), LL(t->off_x),
          LL(t->inplace ? t->off_x : t->off_y));
      break;
    case K_LAYERNORM:
    case K_RMSNORM:
    case K_RMSQUANT:
      app(buf, len, "%s %s", kind_names[t->kind], dn);
      if (t->kind == K_RMSQUANT) app(buf, len, "->%s", on);
      app(buf, len, " %lldx%lld eps=%g%s%s%s%s%s%s%s%s ld(x,%s,res,sum)=(%lld,%lld,%lld,%lld) "
          "off(x,%s,res,sum,w)=(%lld,%lld,%lld,%lld,%lld)",
          LL(t->rows), LL(t->cols), (double)t->eps, t->weight ? " +weight" : "", t->bias ? " +bias" : "",
          t->residual ? " +residual" : "", t->sum_out ? " +sum_out" : "",
          t->alias == 1 ? "(=residual)" : t->alias == 2 ? "(=x)" : "", t->stats ? " +mean/rstd_out" : "",
          t->zero_rows ? " zero-rows" : "", t->inplace ? " in-place(y=x)" : "",
          t->kind == K_RMSQUANT ? "q" : "y", LL(t->cols + t->pad_x),
          LL(t->inplace ? t->cols + t->pad_x : t->cols + t->pad_y), LL(t->cols + t->pad_r),
          LL(t->alias == 1 ? t->cols + t->pad_r : t->alias == 2 ? t->cols + t->pad_x : t->cols + t->pad_s),
          t->kind == K_RMSQUANT ? "q" : "y", LL(t->off_x), LL(t->inplace ? t->off_x : t->off_y), LL(t->off_r),
          LL(t->alias == 1 ? t->off_r : t->alias == 2 ? t->off_x : t->off_s), LL(t->off_w));
      break;
    case K_SMOOTHQUANT:
      app(buf, len, "smoothquant %s->%s %lldx%lld%s ld(x,q)=(%lld,%lld) off(x,q,scale)=(%lld,%lld,%lld)", dn,
          on, LL(t->rows), LL(t->cols), t->zero_rows ? " zero-rows" : "", LL(t->cols + t->pad_x),
          LL(t->cols + t->pad_y), LL(t->off_x), LL(t->off_y), LL(t->off_w));
      break;
    case K_TOPK:
      app(buf, len, "topk_softmax %s tokens=%lld experts=%lld k=%d renormalize=%d indices=%s ld_x=%lld "
          "off(x,out)=(%lld,%lld)", dn, LL(t->rows), LL(t->cols), t->k, t->renorm, on,
          LL(t->cols + t->pad_x), LL(t->off_x), LL(t->off_y));
      break;
  }
  app(buf, len, " data=%s%s seed=%llu", data_names[t->data], t->nan ? "+NaN" : "",
      (unsigned long long)t->seed);
}

static atomic_long g_tolerated;  /* q values accepted at a rounding boundary */
static atomic_long g_q_checked;  /* q values checked */

/* A fresh gt_check whose context is the task's description. */
static void check_begin(gt_check *ck, const task *t) {
  char d[768];
  describe(t, d, sizeof d);
  memset(ck, 0, sizeof *ck);
  ck->max_report = REPORT_MAX;
  gt_check_begin(ck, "%s", d);
}

/* Closes it: the count of the failures not printed. */
static void finish(gt_check *ck) { gt_check_end_as(ck, "errors"); }

/* ---- device buffers ------------------------------------------------------- */

/* Every element of b outside the rows x cols matrix at off (row stride ld)
 * must still be poison. */
static void check_outside(gt_check *ck, const gt_buf *b, int64_t off, int64_t rows, int64_t cols,
                          int64_t ld, const char *name) {
  for (size_t i = 0; i < b->elems; i++)
    if (!gt_in_matrix(i, off, rows, cols, ld) && !gt_is_poison(b->dt, b->host, i)) {
      gt_fail(ck, "%s: wrote outside the output at element %zu (off %lld, %lldx%lld, ld %lld)", name, i,
              LL(off), LL(rows), LL(cols), LL(ld));
      return;
    }
}

/* ---- input data ------------------------------------------------------------ */

static double offset_amp(ckjit_dtype dt) { return dt == CKJIT_F32 ? 1.0 : dt == CKJIT_F16 ? 4.0 : 32.0; }
static double extreme_amp(ckjit_dtype dt) { return dt == CKJIT_F32 ? 5.0 : dt == CKJIT_F16 ? 40.0 : 300.0; }

/* topk grid: multiples of step below K*step, exact in the dtype, 1/256 or
 * more apart (p ratios >= e^(1/256): clearly distinct in f32). */
static double grid_step(ckjit_dtype dt) { return dt == CKJIT_F32 ? 1.0 / 256 : dt == CKJIT_F16 ? 1.0 / 64 : 1.0 / 32; }
static int64_t grid_k(ckjit_dtype dt) { return dt == CKJIT_F32 ? 2048 : dt == CKJIT_F16 ? 1023 : 255; }

static double gen_value(int mode, ckjit_dtype dt, tu_rng *g, int64_t r, int64_t c, int64_t n) {
  double u = tu_rng_unit(g);
  switch (mode) {
    case D_UNIFORM: return 2 * u - 1;
    case D_NEG: return -(0.5 + 1.5 * u);
    case D_POS: return 0.5 + 1.5 * u;
    case D_TIES: return (double)((int)(u * 7) - 3);
    case D_OFFSET: return 1000.0 + offset_amp(dt) * (2 * u - 1);
    case D_WIDE: return 16 * u - 8;
    case D_EXACT: return (double)((int)(u * 255) - 127) / 16.0;
    case D_EXTREME:
      /* max subtraction: rows around +-1e4, rows spread over +-1e4, -inf
       * entries (never all of a row's first columns but in rows 5 and 6);
       * +inf (row 4), all -inf but the last (5), all -inf (6) */
      switch (r % 7) {
        case 0:
        case 3:
          if (c >= 1 && c % 11 == 5) return -INFINITY;
          return (r % 7 ? -1e4 : 1e4) + extreme_amp(dt) * (2 * u - 1);
        case 1: return c >= 1 && c % 11 == 5 ? -INFINITY : 1e4 * (2 * u - 1);
        case 2: return c >= 1 && (c % 7 == 3 || c % 11 == 5) ? -INFINITY : 2 * u - 1;
        case 4: return c == (r * 7919) % n ? INFINITY : 2 * u - 1;
        case 5: return c < n - 1 ? -INFINITY : 2 * u - 1;
        default: return -INFINITY;
      }
    case D_GRID: {
      int64_t K = grid_k(dt);
      return (double)((int64_t)(u * (double)(2 * K + 1)) - K) * grid_step(dt);
    }
  }
  return 0;
}

/* Fills a whole input buffer: NaN everywhere (padding, misalignment, guard,
 * so a kernel reading outside the matrix into a result is caught), then the
 * matrix.  Optional NaNs in some rows, optional all-zero rows (r % 7 == 3). */
static void fill_matrix(const task *t, gt_buf *b, tu_rng *g, int64_t off, int64_t rows, int64_t cols,
                        int64_t ld, int mode, int nan, int zero_rows) {
  gt_fill_nan(b->dt, b->host, b->elems);
  for (int64_t r = 0; r < rows; r++) {
    int zero = zero_rows && r % 7 == 3;
    for (int64_t c = 0; c < cols; c++)
      gt_put(b->dt, b->host, (size_t)(off + r * ld + c), zero ? 0.0 : gen_value(mode, b->dt, g, r, c, cols));
    if (!nan) continue;
    if (r % 3 == 1 || rows == 1)
      gt_put_nan(b->dt, b->host, (size_t)(off + r * ld + (int64_t)(tu_rng_next(g) % (uint64_t)cols)));
    if (r % 6 == 4) { /* a second NaN: the first one's index must win */
      gt_put_nan(b->dt, b->host, (size_t)(off + r * ld + (int64_t)(tu_rng_next(g) % (uint64_t)cols)));
      gt_put_nan(b->dt, b->host, (size_t)(off + r * ld + cols - 1));
    }
  }
  (void)t;
}

static void gather_row(ckjit_dtype dt, const uint8_t *host, int64_t base, int64_t n, double *out) {
  for (int64_t c = 0; c < n; c++) out[c] = gt_get(dt, host, (size_t)(base + c));
}

/* Every element of b outside the matrix must still hold its bytes in orig
 * (an in-place output: the input's NaN padding stays). */
static void check_outside_unchanged(gt_check *ck, const gt_buf *b, const uint8_t *orig, int64_t off, int64_t rows,
                                    int64_t cols, int64_t ld, const char *name) {
  const size_t s = gt_esize(b->dt);
  for (size_t i = 0; i < b->elems; i++)
    if (!gt_in_matrix(i, off, rows, cols, ld) && memcmp(b->host + i * s, orig + i * s, s) != 0) {
      gt_fail(ck, "%s: wrote outside the matrix at element %zu (off %lld, %lldx%lld, ld %lld)", name, i, LL(off),
              LL(rows), LL(cols), LL(ld));
      return;
    }
}

static uint8_t *dup_host(const gt_buf *b) {
  uint8_t *p = malloc(b->elems * gt_esize(b->dt));
  if (!p) abort();
  memcpy(p, b->host, b->elems * gt_esize(b->dt));
  return p;
}

/* ---- reductions -------------------------------------------------------------- */

static void check_reduce_out(gt_check *ck, int op, const gt_buf *y, size_t yi, const double *v, int64_t n,
                             const char *where) {
  red_ref rf = reduce_ref(op, v, n);
  if (op >= CKJIT_REDUCE_ARGMAX) {
    int64_t got = gt_get_int(y->dt, y->host, yi);
    if (got != rf.index)
      gt_fail(ck, "%s: got index %lld, want %lld (x[want]=%.9g%s, x[got]=%.9g)", where, LL(got), LL(rf.index),
              v[rf.index], rf.has_nan ? ", the first NaN" : "", got >= 0 && got < n ? v[got] : NAN);
    return;
  }
  double got = gt_get(y->dt, y->host, yi);
  if (op == CKJIT_REDUCE_MAX || op == CKJIT_REDUCE_MIN) {
    double want = gt_round(y->dt, rf.value);
    if (!(got == want || (isnan(got) && isnan(want))))
      gt_fail(ck, "%s: got %.9g, want %.9g exactly", where, got, want);
    return;
  }
  double err = rf.has_nan ? 0 : reduce_err(op, &rf, n);
  if (!within(y->dt, got, rf.value, err))
    gt_fail(ck, "%s: got %.9g, want %.9g (f64 %.12g; allowed f32 error %.3g + 1 ulp of %s)", where, got,
            gt_round(y->dt, rf.value), rf.value, err, ckjit_dtype_name(y->dt));
}

static int run_reduce_rows(const task *t) {
  gt_check ck;
  check_begin(&ck, t);
  tu_rng rng = {t->seed};
  const int64_t R = t->rows, C = t->cols, ldx = C + t->pad_x;
  gt_buf x = {0}, y = {0};
  double *v = NULL;
  if (gt_buf_alloc(&ck, &x, t->dt, gt_extent(t->off_x, R, C, ldx, GUARD)) ||
      gt_buf_alloc(&ck, &y, t->odt, (size_t)(t->off_y + R) + GUARD))
    goto done;
  fill_matrix(t, &x, &rng, t->off_x, R, C, ldx, t->data, t->nan, 0);
  if (gt_buf_upload(&ck, &x) || gt_buf_poison(&ck, &y)) goto done;
  ckjit_status st = ckjit_reduce_rows((ckjit_reduce_op)t->op, t->dt, R, C, gt_buf_ptr(&x, t->off_x), ldx,
                                      t->odt, gt_buf_ptr(&y, t->off_y), NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(&ck, "ckjit_reduce_rows returned %s: %s", ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  if (gt_sync(&ck) || gt_buf_download(&ck, &y, NULL)) goto done;
  check_outside(&ck, &y, t->off_y, 1, R, R, "y");
  v = malloc((size_t)C * sizeof *v);
  if (!v) abort();
  for (int64_t r = 0; r < R; r++) {
    gather_row(t->dt, x.host, t->off_x + r * ldx, C, v);
    char where[64];
    snprintf(where, sizeof where, "row %lld", LL(r));
    check_reduce_out(&ck, t->op, &y, (size_t)(t->off_y + r), v, C, where);
  }
done:
  free(v);
  gt_buf_free(&x);
  gt_buf_free(&y);
  finish(&ck);
  return (int)ck.failures;
}

/* Row-major multi-index of `lin` over the dims of L other than `skip`
 * (-1: all dims); idx[skip] = 0. */
static void unravel(int64_t lin, const ckjit_tensor_layout *L, int skip, int64_t *idx) {
  for (int d = L->rank - 1; d >= 0; d--) {
    if (d == skip) {
      idx[d] = 0;
      continue;
    }
    idx[d] = lin % L->shape[d];
    lin /= L->shape[d];
  }
}

static int64_t offset_of(const ckjit_tensor_layout *L, const int64_t *idx) {
  int64_t o = 0;
  for (int d = 0; d < L->rank; d++) o += idx[d] * L->strides[d];
  return o;
}

static int run_reduce_nd(const task *t) {
  gt_check ck;
  check_begin(&ck, t);
  tu_rng rng = {t->seed};
  const ckjit_tensor_layout *L = &t->layout;
  int64_t span = 1, total = 1, outer = 1;
  for (int d = 0; d < L->rank; d++) {
    span += (L->shape[d] - 1) * L->strides[d];
    total *= L->shape[d];
    if (d != t->dim) outer *= L->shape[d];
  }
  const int64_t n = L->shape[t->dim];
  gt_buf x = {0}, y = {0};
  double *v = NULL;
  if (gt_buf_alloc(&ck, &x, t->dt, (size_t)(t->off_x + span) + GUARD) ||
      gt_buf_alloc(&ck, &y, t->odt, (size_t)(t->off_y + outer) + GUARD))
    goto done;
  gt_fill_nan(t->dt, x.host, x.elems);
  int64_t idx[4];
  for (int64_t i = 0; i < total; i++) {
    unravel(i, L, -1, idx);
    gt_put(t->dt, x.host, (size_t)(t->off_x + offset_of(L, idx)), gen_value(t->data, t->dt, &rng, i, i, total));
  }
  if (t->nan)
    for (int j = 0; j < 3; j++) {
      unravel((int64_t)(tu_rng_next(&rng) % (uint64_t)total), L, -1, idx);
      gt_put_nan(t->dt, x.host, (size_t)(t->off_x + offset_of(L, idx)));
    }
  if (gt_buf_upload(&ck, &x) || gt_buf_poison(&ck, &y)) goto done;
  ckjit_status st = ckjit_reduce((ckjit_reduce_op)t->op, t->dt, L, gt_buf_ptr(&x, t->off_x), t->dim, t->odt,
                                 gt_buf_ptr(&y, t->off_y), NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(&ck, "ckjit_reduce returned %s: %s", ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  if (gt_sync(&ck) || gt_buf_download(&ck, &y, NULL)) goto done;
  check_outside(&ck, &y, t->off_y, 1, outer, outer, "y");
  v = malloc((size_t)n * sizeof *v);
  if (!v) abort();
  for (int64_t o = 0; o < outer; o++) {
    unravel(o, L, t->dim, idx);
    int64_t base = t->off_x + offset_of(L, idx);
    for (int64_t j = 0; j < n; j++)
      v[j] = gt_get(t->dt, x.host, (size_t)(base + j * L->strides[t->dim]));
    char where[128];
    snprintf(where, sizeof where, "y[%lld] (index [%lld,%lld,%lld,%lld] with dim %d free)", LL(o), LL(idx[0]),
             LL(L->rank > 1 ? idx[1] : 0), LL(L->rank > 2 ? idx[2] : 0), LL(L->rank > 3 ? idx[3] : 0), t->dim);
    check_reduce_out(&ck, t->op, &y, (size_t)(t->off_y + o), v, n, where);
  }
done:
  free(v);
  gt_buf_free(&x);
  gt_buf_free(&y);
  finish(&ck);
  return (int)ck.failures;
}

/* ---- softmax ------------------------------------------------------------------ */

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

static void check_softmax_row(gt_check *ck, ckjit_dtype dt, const double *ref, const double *err,
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

static int run_softmax(const task *t) {
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
  ckjit_status st = ckjit_softmax(t->dt, R, C, gt_buf_ptr(&x, t->off_x), ldx, gt_buf_ptr(out, off_y), ldy,
                                  t->null_params ? NULL : &p, NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(&ck, "ckjit_softmax returned %s: %s", ckjit_status_string(st), ckjit_last_error());
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

/* ---- softmax: exact rows and the f32 error bound ------------------------------ */
/* Single-element and all-equal rows must come out exact, and f32 rows must
 * stay within the bound derived at the top of the file, on both pipelines
 * (fused, and split for the rows of 8192 columns and more, which are few
 * here) and every dtype.  Each check prints one line per failing call. */

/* A packed rows x cols softmax problem: x (NaN after the matrix), y
 * (poisoned), the optional mask, and the host side of each. */
typedef struct sm_problem {
  ckjit_dtype dt;
  int64_t rows, cols;
  gt_buf x, y, vc;
  int masked;
} sm_problem;

static int g_sm_calls; /* softmax problems set up by these checks (main thread only) */

static int sm_alloc(gt_check *ck, sm_problem *p, ckjit_dtype dt, int64_t rows, int64_t cols, int masked) {
  g_sm_calls++;
  memset(p, 0, sizeof *p);
  p->dt = dt;
  p->rows = rows;
  p->cols = cols;
  p->masked = masked;
  if (gt_buf_alloc(ck, &p->x, dt, gt_extent(0, rows, cols, cols, GUARD)) ||
      gt_buf_alloc(ck, &p->y, dt, gt_extent(0, rows, cols, cols, GUARD)) ||
      (masked && gt_buf_alloc(ck, &p->vc, CKJIT_I32, (size_t)rows)))
    return -1;
  gt_fill_nan(dt, p->x.host, p->x.elems);
  return 0;
}

static void sm_free(sm_problem *p) {
  gt_buf_free(&p->x);
  gt_buf_free(&p->y);
  gt_buf_free(&p->vc);
}

static void sm_set_valid(sm_problem *p, int64_t r, int32_t valid) { memcpy(p->vc.host + 4 * r, &valid, 4); }

static int64_t sm_valid(const sm_problem *p, int64_t r) {
  if (!p->masked) return p->cols;
  int32_t v;
  memcpy(&v, p->vc.host + 4 * r, 4);
  return v < p->cols ? v : p->cols;
}

/* Uploads x (and the mask), runs the softmax, downloads y and checks that
 * nothing outside the matrix was written; 0 on success. */
static int sm_run(gt_check *ck, sm_problem *p, float scale, int logm) {
  if (gt_buf_upload(ck, &p->x) || (p->masked && gt_buf_upload(ck, &p->vc)) || gt_buf_poison(ck, &p->y)) return -1;
  ckjit_softmax_params prm;
  ckjit_softmax_params_init(&prm);
  prm.scale = scale;
  prm.log = logm;
  prm.valid_cols = p->masked ? (const int32_t *)p->vc.dev : NULL;
  ckjit_status st = ckjit_softmax(p->dt, p->rows, p->cols, p->x.dev, p->cols, p->y.dev, p->cols, &prm, NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(ck, "ckjit_softmax returned %s: %s", ckjit_status_string(st), ckjit_last_error());
    return -1;
  }
  if (gt_sync(ck) || gt_buf_download(ck, &p->y, NULL)) return -1;
  const long before = ck->failures;
  check_outside(ck, &p->y, 0, p->rows, p->cols, p->cols, "y");
  return ck->failures == before ? 0 : -1;
}

/* Columns past a row's valid length: values that would change the result if
 * they took part (large ones, and a NaN every fifth column). */
static void sm_fill_masked_tail(sm_problem *p, int64_t r, int64_t from, tu_rng *g) {
  for (int64_t c = from; c < p->cols; c++) {
    const size_t i = (size_t)(r * p->cols + c);
    if (c % 5 == 3)
      gt_put_nan(p->dt, p->x.host, i);
    else
      gt_put(p->dt, p->x.host, i, 3e4 * (2 * tu_rng_unit(g) - 1));
  }
}

/* A finite value of any magnitude in [1e-3, 1e4), either sign (f16 keeps it). */
static double sm_any_value(tu_rng *g) {
  const double mag = pow(10.0, -3.0 + 7.0 * tu_rng_unit(g));
  return tu_rng_next(g) & 1 ? mag : -mag;
}

/* Whether y's masked columns of row r are exactly 0 (softmax) / -inf (log). */
static int sm_masked_ok(gt_check *ck, const sm_problem *p, int64_t r, int64_t valid, int logm) {
  const double want = logm ? -INFINITY : 0.0;
  for (int64_t c = valid; c < p->cols; c++) {
    const double got = gt_get(p->dt, p->y.host, (size_t)(r * p->cols + c));
    if (got != want) {
      gt_fail(ck, "(%lld,%lld) masked (valid %lld): got %.9g, want exactly %g", LL(r), LL(c), LL(valid), got, want);
      return 0;
    }
  }
  return 1;
}

static const float sm_scales[4] = {1.0f, 0.7f, -1.3f, 0.125f}; /* 0.7 and -1.3: products rarely exact */
static const ckjit_dtype sm_dtypes[3] = {CKJIT_F32, CKJIT_F16, CKJIT_BF16};

/* A row with one valid element (cols 1, or a mask of 1) is exactly 1 / 0
 * there, whatever the value, scale, dtype or pipeline. */
static int check_softmax_one_valid(uint64_t seed) {
  static const int64_t lens[] = {1, 2, 7, 1000, 4097, 8192, 1 << 20};
  tu_rng g = {seed ^ 0x51u};
  int failed = 0;
  for (int d = 0; d < 3; d++)
    for (int lg = 0; lg < 2; lg++)
      for (int s = 0; s < 4; s++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
          for (int masked = 0; masked < 2; masked++) {
            const int64_t C = lens[li], R = C >= 8192 ? 2 : 64;
            if (!masked && C > 1) continue; /* unmasked, only cols = 1 has one valid element */
            gt_check ck;
            memset(&ck, 0, sizeof ck);
            ck.max_report = REPORT_MAX;
            gt_check_begin(&ck, "softmax%s one valid element: %s %lldx%lld%s scale=%g", lg ? "(log)" : "",
                           ckjit_dtype_name(sm_dtypes[d]), LL(R), LL(C), masked ? " valid_cols=1" : "",
                           (double)sm_scales[s]);
            sm_problem p;
            if (!sm_alloc(&ck, &p, sm_dtypes[d], R, C, masked)) {
              for (int64_t r = 0; r < R; r++) {
                gt_put(p.dt, p.x.host, (size_t)(r * C), r == 0 ? 0.0 : sm_any_value(&g));
                sm_fill_masked_tail(&p, r, 1, &g);
                if (masked) sm_set_valid(&p, r, 1);
              }
              if (!sm_run(&ck, &p, sm_scales[s], lg))
                for (int64_t r = 0; r < R; r++) {
                  const double got = gt_get(p.dt, p.y.host, (size_t)(r * C)), want = lg ? 0.0 : 1.0;
                  if (got != want) {
                    gt_fail(&ck, "row %lld: x=%.9g got %.9g (%+.3g off), want exactly %g", LL(r),
                            gt_get(p.dt, p.x.host, (size_t)(r * C)), got, got - want, want);
                    continue;
                  }
                  sm_masked_ok(&ck, &p, r, 1, lg);
                }
            }
            sm_free(&p);
            finish(&ck);
            if (ck.failures) failed++;
          }
  return failed;
}

/* n equal valid values: softmax exactly round(1/n) in f32, then rounded to
 * the dtype (torch's exp(0) / n); log-softmax -log(n) within one f32 ulp of
 * the f64 value (then rounded to the dtype).  With and without a masked
 * tail after the n values. */
static int check_softmax_all_equal(uint64_t seed) {
  static const int64_t lens[] = {1, 2, 3, 7, 32, 1000, 4097, 8192, 65537, 1 << 20};
  tu_rng g = {seed ^ 0xE9u};
  int failed = 0;
  for (int d = 0; d < 3; d++)
    for (int lg = 0; lg < 2; lg++)
      for (int s = 0; s < 3; s++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
          for (int masked = 0; masked < 2; masked++) {
            const int64_t L = lens[li], C = masked ? L + (L < 8 ? 3 : L / 3 + 1) : L, R = L >= 8192 ? 2 : 5;
            const ckjit_dtype dt = sm_dtypes[d];
            gt_check ck;
            memset(&ck, 0, sizeof ck);
            ck.max_report = REPORT_MAX;
            gt_check_begin(&ck, "softmax%s all equal: %s %lldx%lld%s scale=%g", lg ? "(log)" : "",
                           ckjit_dtype_name(dt), LL(R), LL(C), masked ? " valid_cols" : "", (double)sm_scales[s]);
            const float inv_n = 1.0f / (float)L; /* IEEE f32 division: correctly rounded */
            const double ref_log = -log((double)L), ulp32 = ulp_of(CKJIT_F32, ref_log);
            const double lo = gt_round(dt, ref_log - ulp32), hi = gt_round(dt, ref_log + ulp32);
            sm_problem p;
            if (!sm_alloc(&ck, &p, dt, R, C, masked)) {
              for (int64_t r = 0; r < R; r++) {
                const double v = r == 0 ? 0.0 : sm_any_value(&g);
                for (int64_t c = 0; c < L; c++) gt_put(dt, p.x.host, (size_t)(r * C + c), v);
                sm_fill_masked_tail(&p, r, L, &g);
                if (masked) sm_set_valid(&p, r, (int32_t)L);
              }
              if (!sm_run(&ck, &p, sm_scales[s], lg))
                for (int64_t r = 0; r < R; r++) {
                  for (int64_t c = 0; c < L; c++) {
                    const double got = gt_get(dt, p.y.host, (size_t)(r * C + c));
                    const int ok = !lg ? got == gt_round(dt, (double)inv_n)
                                   : L == 1 ? got == 0.0
                                   : dt == CKJIT_F32 ? fabs(got - ref_log) <= ulp32
                                                     : got >= lo && got <= hi;
                    if (!ok) {
                      if (lg)
                        gt_fail(&ck, "(%lld,%lld) of %lld equal x=%.9g: got %.9g, want -log(n) = %.12g within one "
                                "f32 ulp (%.3g)", LL(r), LL(c), LL(L), gt_get(dt, p.x.host, (size_t)(r * C)), got,
                                ref_log, ulp32);
                      else
                        gt_fail(&ck, "(%lld,%lld) of %lld equal x=%.9g: got %.9g, want exactly %.9g (1/n in f32 "
                                "%.9g)", LL(r), LL(c), LL(L), gt_get(dt, p.x.host, (size_t)(r * C)), got,
                                gt_round(dt, (double)inv_n), (double)inv_n);
                      break;
                    }
                  }
                  sm_masked_ok(&ck, &p, r, L, lg);
                }
            }
            sm_free(&p);
            finish(&ck);
            if (ck.failures) failed++;
          }
  return failed;
}

/* The kernels' f32 error bound for one row (top comment): out[c] is the f64
 * softmax of z = f32(scale * x) over the first `valid` of n columns,
 * err[c] its allowed error (< 0: exact, the masked columns).  Finite x. */
static void softmax_f32_ref(const double *x, int64_t n, int64_t valid, float scale, int logm, double *out,
                            double *err) {
  for (int64_t c = valid; c < n; c++) out[c] = logm ? -INFINITY : 0.0, err[c] = -1;
  double m = -INFINITY;
  for (int64_t c = 0; c < valid; c++) {
    const float z = (float)x[c] * scale; /* rounded to f32 once, as the kernels do */
    out[c] = z;
    if (z > m) m = z;
  }
  double s = 0;
  for (int64_t c = 0; c < valid; c++) s += exp(out[c] - m);
  const double ls = log(s), depth = 56.0 + ceil((double)n / 1024.0);
  const double sum_err = U * (10.0 * log((double)valid) + 8.0 + growth(6.0 * depth));
  for (int64_t c = 0; c < valid; c++) {
    const double dc = out[c] - m;
    if (logm) {
      out[c] = dc - ls;
      err[c] = 2.0 * (U * (fabs(dc) + fabs(out[c]) + 2.0 * fabs(ls)) + sum_err);
    } else {
      out[c] = exp(dc) / s;
      err[c] = 2.0 * (U * (fabs(dc) + 4.0 + 2.32 * fabs(dc) + 2.0) + sum_err) * out[c] + ldexp(1.0, -146);
    }
  }
}

enum { SMB_UNIFORM, SMB_WIDE, SMB_OFFSET, SMB_SPREAD, SMB_KINDS };
static const char *smb_names[] = {"uniform[-1,1]", "wide[-50,50]", "offset+-3e4", "spread[-1e4,1e4]"};

static double smb_value(int kind, int64_t r, tu_rng *g) {
  const double u = 2 * tu_rng_unit(g) - 1;
  switch (kind) {
    case SMB_UNIFORM: return u;
    case SMB_WIDE: return 50 * u; /* exponents down to -100: subnormal and zero probabilities */
    case SMB_OFFSET: return (r % 2 ? -3e4 : 3e4) + 10 * u; /* large magnitude, narrow spread */
    default: return 1e4 * u;
  }
}

/* Random f32 rows of many lengths against softmax_f32_ref's bound. */
static int check_softmax_f32_bound(uint64_t seed) {
  static const int64_t lens[] = {1, 2, 3, 7, 32, 33, 1000, 4097, 8192, 65537, 1 << 20};
  tu_rng g = {seed ^ 0xB0u};
  int failed = 0;
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
    for (int kind = 0; kind < SMB_KINDS; kind++)
      for (int lg = 0; lg < 2; lg++) {
        const int64_t C = lens[li], R = C >= 8192 ? 2 : 4;
        /* large magnitudes always with an inexact scale: there a product
         * kept exact in the exponent (an fma) but rounded in the max shows */
        const float scale = kind == SMB_OFFSET ? sm_scales[1 + li % 2] : sm_scales[(li + (size_t)kind) % 4];
        const int masked = (li + (size_t)kind + (size_t)lg) % 2 == 1;
        gt_check ck;
        memset(&ck, 0, sizeof ck);
        ck.max_report = REPORT_MAX;
        gt_check_begin(&ck, "softmax%s f32 bound: %lldx%lld%s scale=%g data=%s", lg ? "(log)" : "", LL(R), LL(C),
                       masked ? " valid_cols" : "", (double)scale, smb_names[kind]);
        sm_problem p;
        double *xr = malloc((size_t)C * sizeof *xr), *ref = malloc((size_t)C * sizeof *ref),
               *err = malloc((size_t)C * sizeof *err);
        if (!xr || !ref || !err) abort();
        if (!sm_alloc(&ck, &p, CKJIT_F32, R, C, masked)) {
          for (int64_t r = 0; r < R; r++) {
            for (int64_t c = 0; c < C; c++) gt_put(CKJIT_F32, p.x.host, (size_t)(r * C + c), smb_value(kind, r, &g));
            if (masked) sm_set_valid(&p, r, (int32_t)(r % 2 ? C : tu_rng_range(&g, 1, C)));
          }
          if (!sm_run(&ck, &p, scale, lg))
            for (int64_t r = 0; r < R; r++) {
              const int64_t valid = sm_valid(&p, r);
              gather_row(CKJIT_F32, p.x.host, r * C, C, xr);
              softmax_f32_ref(xr, C, valid, scale, lg, ref, err);
              check_softmax_row(&ck, CKJIT_F32, ref, err, &p.y, r * C, C, r, valid, xr);
            }
        }
        sm_free(&p);
        free(xr);
        free(ref);
        free(err);
        finish(&ck);
        if (ck.failures) failed++;
      }
  return failed;
}

/* The three checks above; the number of failed calls. */
static int run_softmax_exact(uint64_t seed) {
  const int failed =
      check_softmax_one_valid(seed) + check_softmax_all_equal(seed) + check_softmax_f32_bound(seed);
  printf("%s softmax exactness and f32 bound (check_softmax_one_valid, check_softmax_all_equal, "
         "check_softmax_f32_bound): %d calls, %d failed\n", failed ? "FAIL" : "ok  ",
         g_sm_calls, failed);
  return failed;
}

/* ---- layernorm2d / rmsnorm2d / rmsnorm2d_quant / smoothquant --------------------- */

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

static int same_value(double got, double want) { return got == want || (isnan(got) && isnan(want)); }

/* layernorm2d, rmsnorm2d and rmsnorm2d_quant.  alias 1: sum_out is residual;
 * alias 2: sum_out is x; inplace: y is x (layernorm). */
static int run_norm(const task *t) {
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
      for (int64_t c = 0; c < C; c++)
        hw[c] = h[c] * (t->weight ? gt_get(t->dt, w.host, (size_t)(t->off_w + c)) : 1.0);
      double amax = 0;
      for (int64_t c = 0; c < C; c++) amax = fmax(amax, fabs(hw[c]));
      double scale_ref = s.rstd * amax / qmax_of(t->odt);
      float gs;
      memcpy(&gs, rs.host + 4 * (size_t)(t->off_y + r), 4);
      check_quant_row(&ck, t->odt, yb, off_y + r * ldy, C, r, hw, scale_ref,
                      (2 * (s.rel_r + 4 * U) + 8 * U) * scale_ref, gs, 0);
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

static int run_smoothquant(const task *t) {
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

/* ---- topk_softmax ---------------------------------------------------------------- */

static int run_topk(const task *t) {
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

/* ---- task list ------------------------------------------------------------------- */

static task *g_tasks;
static size_t g_ntasks, g_cap;
static uint64_t g_seed, g_counter;

static void add(task t) {
  if (g_ntasks == g_cap) {
    g_cap = g_cap ? 2 * g_cap : 512;
    g_tasks = realloc(g_tasks, g_cap * sizeof *g_tasks);
    if (!g_tasks) abort();
  }
  t.seed = g_seed * 1000003u + (++g_counter);
  g_tasks[g_ntasks++] = t;
}

static task mk(enum kind kind, ckjit_dtype dt, int64_t rows, int64_t cols) {
  task t;
  memset(&t, 0, sizeof t);
  t.kind = kind;
  t.dt = dt;
  t.rows = rows;
  t.cols = cols;
  t.scale = 1.0f;
  t.eps = 1e-5f;
  t.k = 1;
  t.odt = dt;
  return t;
}

/* Layout variants: 0 aligned and packed; the others pad the row strides
 * (odd ld) and misalign base pointers by one element, forcing scalar paths. */
static void apply_variant(task *t, int v) {
  switch (v % 4) {
    case 0: break;
    case 1: t->pad_x = 1; t->pad_y = 5; t->pad_r = 3; t->pad_s = 2; break;
    case 2: t->off_x = 1; t->pad_y = 1; t->off_r = 1; t->off_w = 1; t->pad_s = 7; break;
    case 3: t->off_y = 1; t->off_s = 1; t->pad_x = 17; t->pad_y = 3; t->pad_r = 1; break;
  }
}

typedef struct shape {
  int64_t rows, cols;
} shape;

#define NREG 13
static shape g_reg[NREG]; /* regular shapes */
static const shape g_big[3] = {{1, 1048577}, {3, 1200000}, {1, 1 << 24}};

/* A strided layout: dims listed innermost first in `order`, each taking
 * shape + pad elements of the next one's stride; dims in `zero` broadcast. */
static ckjit_tensor_layout mk_layout(int rank, const int64_t *shape, const int *order, const int64_t *pad,
                                     unsigned zero, int64_t inner) {
  ckjit_tensor_layout L;
  memset(&L, 0, sizeof L);
  L.rank = rank;
  int64_t s = inner;
  for (int k = 0; k < rank; k++) {
    int d = order[k];
    L.shape[d] = shape[d];
    if (zero >> d & 1) {
      L.strides[d] = 0;
      continue;
    }
    L.strides[d] = s;
    s *= shape[d] + pad[d];
  }
  return L;
}

static const struct nd_spec {
  int rank;
  int64_t shape[4];
  int order[4];
  int64_t pad[4];
  unsigned zero;
  int64_t inner;
} nd_specs[] = {
    {1, {1000}, {0}, {0}, 0, 3},                                  /* rank 1, stride 3 */
    {2, {33, 65}, {0, 1}, {0, 0}, 0, 1},                          /* column-major */
    {3, {6, 5, 33}, {2, 1, 0}, {0, 0, 0}, 0, 1},                  /* contiguous */
    {3, {6, 5, 33}, {0, 1, 2}, {0, 0, 0}, 0, 1},                  /* reversed strides */
    {3, {7, 1, 129}, {1, 2, 0}, {0, 3, 2}, 0, 1},                 /* permuted, padded, size-1 dim */
    {3, {4, 9, 17}, {2, 1, 0}, {1, 0, 0}, 1u << 1, 1},            /* broadcast middle dim */
    {3, {3, 16, 8}, {2, 0, 1}, {0, 0, 0}, 1u << 2, 1},            /* broadcast innermost-listed dim */
    {3, {2, 4097, 3}, {2, 1, 0}, {0, 0, 1}, 0, 1},                /* long strided middle dim */
    {3, {1000, 2, 3}, {1, 2, 0}, {0, 0, 0}, 0, 1},                /* long outermost dim */
    {4, {3, 1, 4, 129}, {3, 2, 1, 0}, {0, 0, 1, 3}, 0, 1},        /* rank 4, padded */
    {4, {2, 3, 5, 7}, {1, 3, 0, 2}, {1, 0, 2, 1}, 0, 2},          /* permuted, padded, inner stride 2 */
    {4, {5, 1, 1, 1000}, {0, 1, 2, 3}, {0, 0, 0, 0}, 0, 1},       /* size-1 dims, last dim stride 5 */
    {4, {1, 1, 1, 1}, {3, 2, 1, 0}, {0, 0, 0, 0}, 0, 1},          /* one element */
    {4, {2, 3, 4, 5}, {3, 2, 1, 0}, {0, 0, 0, 0}, 1u | 1u << 3, 1}, /* two broadcast dims */
};

static void build_tasks(uint64_t seed) {
  tu_rng r = {seed};
  g_seed = seed;
  const shape fixed[] = {{1, 1},   {1, 7},    {7, 1},     {3, 33},   {77, 1000}, {1025, 7},
                         {5, 4097}, {2, 65537}, {1025, 33}, {1, 4097}};
  int ns = 0;
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) g_reg[ns++] = fixed[i];
  while (ns < NREG) g_reg[ns++] = (shape){tu_rng_range(&r, 1, 300), tu_rng_range(&r, 1, 5000)};
  const ckjit_dtype dts[3] = {CKJIT_F32, CKJIT_F16, CKJIT_BF16};
  static const int red_data[4] = {D_UNIFORM, D_NEG, D_POS, D_TIES};

  /* The big shapes first, so they do not end up as the tail of the run. */
  {
    static const struct { int op; int dt, odt; int shape; } big[] = {
        {CKJIT_REDUCE_SUM, CKJIT_F32, CKJIT_F32, 2},    {CKJIT_REDUCE_SUM, CKJIT_BF16, CKJIT_F32, 1},
        {CKJIT_REDUCE_MAX, CKJIT_BF16, CKJIT_BF16, 0},  {CKJIT_REDUCE_ARGMAX, CKJIT_F16, CKJIT_I64, 2},
        {CKJIT_REDUCE_MEAN, CKJIT_F16, CKJIT_F16, 1},   {CKJIT_REDUCE_ARGMIN, CKJIT_F32, CKJIT_I32, 0},
        {CKJIT_REDUCE_MIN, CKJIT_F32, CKJIT_F32, 1},
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
      task t = mk(K_REDUCE_ROWS, (ckjit_dtype)big[i].dt, g_big[big[i].shape].rows, g_big[big[i].shape].cols);
      t.op = big[i].op;
      t.odt = (ckjit_dtype)big[i].odt;
      t.data = i % 2 ? D_UNIFORM : D_POS;
      t.nan = i == 6;
      apply_variant(&t, (int)i);
      add(t);
    }
    task t = mk(K_SOFTMAX, CKJIT_F32, g_big[2].rows, g_big[2].cols);
    t.data = D_WIDE;
    add(t);
    t = mk(K_SOFTMAX, CKJIT_BF16, g_big[1].rows, g_big[1].cols);
    t.log = 1, t.mask = 1, t.scale = 0.5f, t.data = D_UNIFORM;
    apply_variant(&t, 2);
    add(t);
    t = mk(K_SOFTMAX, CKJIT_F16, g_big[0].rows, g_big[0].cols);
    t.data = D_EXTREME, t.scale = 1.7f;
    apply_variant(&t, 3);
    add(t);
    t = mk(K_LAYERNORM, CKJIT_F32, g_big[0].rows, g_big[0].cols);
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
    t = mk(K_RMSQUANT, CKJIT_BF16, g_big[0].rows, g_big[0].cols);
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

  /* reduce_rows: every op x dtype x output dtype over the regular shapes,
   * layouts and data rotating, NaNs in a third of the tasks. */
  int combo = 0;
  for (int d = 0; d < 3; d++)
    for (int op = 0; op < 6; op++)
      for (int yv = 0; yv < 2; yv++, combo++) {
        ckjit_dtype odt = op >= CKJIT_REDUCE_ARGMAX ? (yv ? CKJIT_I64 : CKJIT_I32) : (yv ? dts[d] : CKJIT_F32);
        for (int s = 0; s < NREG; s++) {
          task t = mk(K_REDUCE_ROWS, dts[d], g_reg[s].rows, g_reg[s].cols);
          t.op = op;
          t.odt = odt;
          t.data = red_data[(s + op + yv) % 4];
          /* keep f16 sums finite: one-signed data would pass 65504 on long rows */
          if (odt == CKJIT_F16 && op == CKJIT_REDUCE_SUM && (t.data == D_POS || t.data == D_NEG))
            t.data = D_UNIFORM;
          t.nan = (s + combo) % 3 == 0;
          apply_variant(&t, s + combo);
          add(t);
        }
      }
  /* Cross output dtypes (y's dtype is any of f32/f16/bf16). */
  for (int op = 0; op < 4; op++)
    for (int i = 0; i < 3; i++) {
      static const ckjit_dtype in[3] = {CKJIT_F16, CKJIT_BF16, CKJIT_F32};
      static const ckjit_dtype out[3] = {CKJIT_BF16, CKJIT_F16, CKJIT_BF16};
      shape sh = g_reg[(4 + op + i) % NREG];
      task t = mk(K_REDUCE_ROWS, in[i], sh.rows, sh.cols);
      t.op = op;
      t.odt = out[i];
      t.data = D_UNIFORM;
      t.nan = i == 1;
      apply_variant(&t, op + i);
      add(t);
    }

  /* ckjit_reduce: every layout, every dim, every op; dtypes rotate, SUM in all three. */
  for (size_t l = 0; l < sizeof nd_specs / sizeof nd_specs[0]; l++) {
    const struct nd_spec *sp = &nd_specs[l];
    ckjit_tensor_layout L = mk_layout(sp->rank, sp->shape, sp->order, sp->pad, sp->zero, sp->inner);
    for (int dim = 0; dim < sp->rank; dim++)
      for (int op = 0; op < 6; op++)
        for (int d = 0; d < 3; d++) {
          if (op != CKJIT_REDUCE_SUM && d != (int)((l + (size_t)dim + (size_t)op) % 3)) continue;
          task t = mk(K_REDUCE_ND, dts[d], 0, 0);
          t.layout = L;
          t.dim = dim;
          t.op = op;
          int alt = (int)((l + (size_t)dim + (size_t)op) % 2);
          t.odt = op >= CKJIT_REDUCE_ARGMAX ? (alt ? CKJIT_I64 : CKJIT_I32) : (alt ? dts[d] : CKJIT_F32);
          t.data = red_data[(l + (size_t)op) % 4];
          t.nan = (l + (size_t)dim + (size_t)op) % 4 == 1;
          t.off_x = (int64_t)((l + (size_t)dim) % 2);
          t.off_y = (int64_t)((l + (size_t)op) % 2);
          add(t);
        }
  }

  /* softmax / log-softmax, with and without the mask, scale rotating. */
  static const float scales[4] = {1.0f, 0.5f, 1.7f, 0.125f};
  static const int sm_data[4] = {D_UNIFORM, D_EXTREME, D_WIDE, D_TIES};
  combo = 0;
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
          apply_variant(&t, s + combo);
          add(t);
        }

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

static atomic_size_t g_next;
static atomic_int g_failed_tasks;

static int run_task(const task *t) {
  switch (t->kind) {
    case K_REDUCE_ROWS: return run_reduce_rows(t);
    case K_REDUCE_ND: return run_reduce_nd(t);
    case K_SOFTMAX: return run_softmax(t);
    case K_LAYERNORM:
    case K_RMSNORM:
    case K_RMSQUANT: return run_norm(t);
    case K_SMOOTHQUANT: return run_smoothquant(t);
    case K_TOPK: return run_topk(t);
  }
  return 1;
}

static void *worker(void *p) {
  (void)p;
  for (;;) {
    size_t i = atomic_fetch_add(&g_next, 1);
    if (i >= g_ntasks) break;
    if (run_task(&g_tasks[i])) atomic_fetch_add(&g_failed_tasks, 1);
  }
  return NULL;
}

/* ---- the > 2^31-element cases ---------------------------------------------------- */

/* Cheap deterministic finite bf16: |v| in [2^-8, 2), any mantissa, random sign. */
static uint16_t big_bf16(size_t i) {
  uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull;
  z ^= z >> 29;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 32;
  uint16_t sign = (uint16_t)((z & 1) << 15);
  uint16_t ex = (uint16_t)(119 + (z >> 1) % 9);
  uint16_t man = (uint16_t)((z >> 8) & 0x7F);
  return (uint16_t)(sign | ex << 7 | man);
}

typedef struct fill_job {
  uint16_t *h;
  size_t lo, hi, n; /* [lo, hi) of a buffer whose first n elements are data, the rest NaN */
} fill_job;

static void *fill_thread(void *p) {
  fill_job *j = p;
  for (size_t i = j->lo; i < j->hi; i++) j->h[i] = i < j->n ? big_bf16(i) : 0x7FC0u;
  return NULL;
}

static void parallel_fill(uint16_t *h, size_t total, size_t n, int nthreads) {
  pthread_t th[64];
  fill_job jobs[64];
  for (int i = 0; i < nthreads; i++) {
    jobs[i] = (fill_job){h, total * (size_t)i / (size_t)nthreads, total * (size_t)(i + 1) / (size_t)nthreads, n};
    pthread_create(&th[i], NULL, fill_thread, &jobs[i]);
  }
  for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
}

static int large_report(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int large_report(const char *what, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("FAIL large %s: %s\n", what, msg);
  return 1;
}

/* Runs the large cases: a bf16 65536 x 32771 input (2^31 + 196608 elements):
 * reduce_rows sum and argmax, softmax and rmsnorm (y with row stride 32772),
 * checking sampled rows, the rows around element 2^31, and every padding
 * and guard element.  Returns failures; *run counts the checks done. */
static int run_large(int nthreads, uint64_t seed, int *run) {
  const int64_t R = 65536, C = 32771, ldy = C + 1;
  const size_t nx = (size_t)R * (size_t)C, ny = (size_t)(R - 1) * (size_t)ldy + (size_t)C;
  const size_t bx = (nx + GUARD) * 2, by = (ny + GUARD) * 2;
  void *dx = NULL, *dy = NULL, *dr = NULL;
  uint16_t *hx = NULL, *hy = NULL;
  uint8_t *hr = NULL;
  int failures = 0;
  ckjit_status st = ckjit_malloc(&dx, bx);
  if (st != CKJIT_SUCCESS) {
    dx = NULL;
    if (st == CKJIT_ERROR_OUT_OF_MEMORY) {
      printf("SKIP large cases: cannot allocate %.2f GB on the device (%s)\n", bx / 1e9, ckjit_last_error());
      return 0;
    }
    return large_report("alloc", "ckjit_malloc(%zu): %s", bx, ckjit_last_error());
  }
  hx = malloc(bx);
  hr = malloc((size_t)(R + GUARD) * 8);
  if (!hx || !hr) {
    printf("SKIP large cases: cannot allocate %.2f GB on the host\n", bx / 1e9);
    goto done;
  }
  parallel_fill(hx, nx + GUARD, nx, nthreads);
  if ((st = ckjit_memcpy(dx, hx, bx, CKJIT_HOST_TO_DEVICE)) != CKJIT_SUCCESS) {
    failures += large_report("upload", "%s", ckjit_last_error());
    goto done;
  }
  if ((st = ckjit_malloc(&dr, (size_t)(R + GUARD) * 8)) != CKJIT_SUCCESS) {
    dr = NULL;
    failures += large_report("alloc", "%s", ckjit_last_error());
    goto done;
  }
  /* sampled rows: the ends, the rows around element 2^31 of x and of y, random rows */
  int64_t sample[160];
  int ns = 0;
  const int64_t fixed[] = {0, 1, 2, 65526, 65527, 65528, 65529, 65530, 65531, 65532, R - 2, R - 1};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) sample[ns++] = fixed[i];
  tu_rng rng = {seed ^ 0x5A5A5A5Aull};
  while (ns < 160) sample[ns++] = tu_rng_range(&rng, 0, R - 1);
  double *v = malloc((size_t)C * sizeof *v), *ref = malloc((size_t)C * sizeof *ref),
         *err = malloc((size_t)C * sizeof *err);
  if (!v || !ref || !err) abort();

  /* reduce_rows sum (f32) and argmax (i64) */
  for (int which = 0; which < 2; which++) {
    const int op = which ? CKJIT_REDUCE_ARGMAX : CKJIT_REDUCE_SUM;
    const ckjit_dtype ydt = which ? CKJIT_I64 : CKJIT_F32;
    char what[128];
    snprintf(what, sizeof what, "reduce_rows:%s bf16->%s %lldx%lld", op_names[op], ckjit_dtype_name(ydt), LL(R), LL(C));
    (*run)++;
    st = ckjit_memset(dr, 0xFF, (size_t)(R + GUARD) * 8);
    if (st == CKJIT_SUCCESS) st = ckjit_reduce_rows((ckjit_reduce_op)op, CKJIT_BF16, R, C, dx, C, ydt, dr, NULL);
    if (st == CKJIT_SUCCESS) st = ckjit_synchronize(NULL);
    if (st == CKJIT_SUCCESS) st = ckjit_memcpy(hr, dr, (size_t)(R + GUARD) * gt_esize(ydt), CKJIT_DEVICE_TO_HOST);
    if (st != CKJIT_SUCCESS) {
      failures += large_report(what, "%s: %s", ckjit_status_string(st), ckjit_last_error());
      continue;
    }
    task dummy = mk(K_REDUCE_ROWS, CKJIT_BF16, R, C);
    dummy.op = op, dummy.odt = ydt, dummy.seed = seed, dummy.data = D_HASHED;
    gt_check ck;
    check_begin(&ck, &dummy);
    gt_buf yb = {NULL, hr, (size_t)(R + GUARD), ydt};
    check_outside(&ck, &yb, 0, 1, R, R, "y");
    for (int i = 0; i < ns; i++) {
      int64_t r = sample[i];
      for (int64_t c = 0; c < C; c++) v[c] = bf16_to_f32(hx[(size_t)r * (size_t)C + (size_t)c]);
      char where[64];
      snprintf(where, sizeof where, "row %lld", LL(r));
      check_reduce_out(&ck, op, &yb, (size_t)r, v, C, where);
    }
    finish(&ck);
    if (ck.failures) failures++;
    else printf("ok   large %s (%d sampled rows)\n", what, ns);
  }

  /* softmax and rmsnorm, bf16, y with row stride C + 1 */
  st = ckjit_malloc(&dy, by);
  if (st != CKJIT_SUCCESS) {
    dy = NULL;
    if (st == CKJIT_ERROR_OUT_OF_MEMORY)
      printf("SKIP large softmax/rmsnorm: cannot allocate %.2f GB more on the device (%s)\n", by / 1e9,
             ckjit_last_error());
    else
      failures += large_report("alloc", "%s", ckjit_last_error());
    goto free_ref;
  }
  hy = malloc(by);
  if (!hy) {
    printf("SKIP large softmax/rmsnorm: cannot allocate %.2f GB more on the host\n", by / 1e9);
    goto free_ref;
  }
  for (int which = 0; which < 2; which++) {
    char what[128];
    snprintf(what, sizeof what, "%s bf16 %lldx%lld ld_y=%lld", which ? "rmsnorm2d(+rstd_out)" : "softmax", LL(R),
             LL(C), LL(ldy));
    (*run)++;
    st = ckjit_memset(dy, 0xFF, by);
    if (st == CKJIT_SUCCESS) st = ckjit_memset(dr, 0xFF, (size_t)(R + GUARD) * 4);
    if (st == CKJIT_SUCCESS) {
      if (!which) {
        st = ckjit_softmax(CKJIT_BF16, R, C, dx, C, dy, ldy, NULL, NULL);
      } else {
        ckjit_norm_params p;
        ckjit_norm_params_init(&p);
        p.rstd_out = dr;
        st = ckjit_rmsnorm2d(CKJIT_BF16, R, C, dx, C, dy, ldy, &p, NULL);
      }
    }
    if (st == CKJIT_SUCCESS) st = ckjit_synchronize(NULL);
    if (st == CKJIT_SUCCESS) st = ckjit_memcpy(hy, dy, by, CKJIT_DEVICE_TO_HOST);
    if (st == CKJIT_SUCCESS) st = ckjit_memcpy(hr, dr, (size_t)(R + GUARD) * 4, CKJIT_DEVICE_TO_HOST);
    if (st != CKJIT_SUCCESS) {
      failures += large_report(what, "%s: %s", ckjit_status_string(st), ckjit_last_error());
      continue;
    }
    task dummy = mk(which ? K_RMSNORM : K_SOFTMAX, CKJIT_BF16, R, C);
    dummy.pad_y = 1, dummy.stats = which, dummy.seed = seed, dummy.data = D_HASHED;
    gt_check ck;
    check_begin(&ck, &dummy);
    /* padding column of every row and the guard */
    for (int64_t r = 0; r < R - 1 && ck.failures == 0; r++)
      if (hy[(size_t)r * (size_t)ldy + (size_t)C] != 0xFFFFu)
        gt_fail(&ck, "wrote the padding after row %lld", LL(r));
    for (size_t i = ny; i < ny + GUARD; i++)
      if (hy[i] != 0xFFFFu) {
        gt_fail(&ck, "wrote past the last row (element %zu)", i);
        break;
      }
    if (which) {
      gt_buf rb = {NULL, hr, (size_t)(R + GUARD), CKJIT_F32};
      check_outside(&ck, &rb, 0, 1, R, R, "rstd_out");
    }
    gt_buf yb = {NULL, (uint8_t *)hy, ny + GUARD, CKJIT_BF16};
    for (int i = 0; i < ns; i++) {
      int64_t r = sample[i];
      for (int64_t c = 0; c < C; c++) v[c] = bf16_to_f32(hx[(size_t)r * (size_t)C + (size_t)c]);
      if (!which) {
        softmax_ref(v, C, C, 1.0, 0, ref, err);
        check_softmax_row(&ck, CKJIT_BF16, ref, err, &yb, r * ldy, C, r, C, v);
        continue;
      }
      norm_ref s = norm_stats(0, v, C, 1e-5);
      double got_r = gt_get(CKJIT_F32, hr, (size_t)r);
      if (!within(CKJIT_F32, got_r, s.rstd, 2 * s.rel_r * s.rstd))
        gt_fail(&ck, "rstd_out[%lld]: got %.9g, want %.12g", LL(r), got_r, s.rstd);
      for (int64_t c = 0; c < C; c++) {
        double e, want = norm_out(0, &s, v[c], 1.0, 0.0, &e);
        double got = gt_get(CKJIT_BF16, yb.host, (size_t)(r * ldy + c));
        if (!within(CKJIT_BF16, got, want, e)) {
          gt_fail(&ck, "(%lld,%lld): got %.9g, want %.9g", LL(r), LL(c), got, gt_round(CKJIT_BF16, want));
          break;
        }
      }
    }
    finish(&ck);
    if (ck.failures) failures++;
    else printf("ok   large %s (%d sampled rows)\n", what, ns);
  }
free_ref:
  free(v);
  free(ref);
  free(err);
done:
  free(hx);
  free(hy);
  free(hr);
  ckjit_free(dx);
  ckjit_free(dy);
  ckjit_free(dr);
  return failures;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (self_checks()) {
    printf("FAIL: %d reference self-checks failed (the test itself is wrong)\n", g_self_fail);
    return 1;
  }
  printf("reference self-checks passed (fp8 e4m3 codec on all 256 codes, int8, references)\n");
  char *tmp = NULL;
  if (!getenv("CKJIT_CACHE_DIR")) {
    tmp = tu_mkdtemp("rows-gpu");
    if (tmp) setenv("CKJIT_CACHE_DIR", tmp, 1);
  }
  ckjit_device_info info;
  char why[1024];
  if (!gt_have_device(&info, why, sizeof why)) {
    printf("SKIP: no GPU (%s)\n", why);
    if (tmp) tu_rm_rf(tmp);
    free(tmp);
    return GT_SKIP_CODE;
  }
  const uint64_t seed = gt_seed(&info);
  const char *only = getenv("CKJIT_TEST_SOFTMAX_EXACT_ONLY");
  if (only && atoi(only)) {
    const int f = run_softmax_exact(seed);
    ckjit_shutdown();
    if (tmp) tu_rm_rf(tmp);
    free(tmp);
    return f ? 1 : 0;
  }

  build_tasks(seed);
  int nthreads = getenv("CKJIT_TEST_THREADS") ? atoi(getenv("CKJIT_TEST_THREADS")) : 8;
  if (nthreads < 1) nthreads = 1;
  if (nthreads > 64) nthreads = 64;
  pthread_t th[64];
  for (int i = 0; i < nthreads; i++) pthread_create(&th[i], NULL, worker, NULL);
  for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
  int failed = atomic_load(&g_failed_tasks);
  size_t per_kind[8] = {0};
  for (size_t i = 0; i < g_ntasks; i++) per_kind[g_tasks[i].kind]++;
  printf("%zu op checks (", g_ntasks);
  for (int k = 0; k < 8; k++) printf("%s%zu %s", k ? ", " : "", per_kind[k], kind_names[k]);
  printf("): %zu passed, %d failed\n", g_ntasks - (size_t)failed, failed);
  printf("quantization: %ld q values checked, %ld within %.2g relative of a rounding boundary accepted "
         "either neighbour\n", atomic_load(&g_q_checked), atomic_load(&g_tolerated), Q_WINDOW);

  failed += run_softmax_exact(seed);

  int large_failed = 0, large_run = 0;
  if (getenv("CKJIT_TEST_SKIP_LARGE") && atoi(getenv("CKJIT_TEST_SKIP_LARGE"))) {
    printf("SKIP large cases: CKJIT_TEST_SKIP_LARGE is set\n");
  } else {
    large_failed = run_large(nthreads, seed, &large_run);
  }

  ckjit_stats s;
  ckjit_get_stats(&s);
  printf("stats: %llu compiles (%.0f ms), %llu loads, %llu memory hits, %llu disk hits\n",
         (unsigned long long)s.compiles, s.compile_ms, (unsigned long long)s.loads,
         (unsigned long long)s.memory_hits, (unsigned long long)s.disk_hits);
  if (s.compile_failures || s.load_failures) {
    printf("FAIL: %llu compile failures, %llu load failures\n", (unsigned long long)s.compile_failures,
           (unsigned long long)s.load_failures);
    failed++;
  }
  ckjit_shutdown();
  if (tmp) tu_rm_rf(tmp);
  free(tmp);
  free(g_tasks);
  int total_failed = failed + large_failed;
  printf("%d passed, %d failed\n", (int)g_ntasks + large_run + g_sm_calls - total_failed, total_failed);
  return total_failed ? 1 : 0;
}
