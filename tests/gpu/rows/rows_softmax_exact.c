/* Row-ops GPU test, softmax exactness and the f32 error bound
 * (run_softmax_exact; CKJIT_TEST_SOFTMAX_EXACT_ONLY=1 runs only these):
 * rows of one valid element, all-equal rows and random f32 rows of 1 to
 * 2^20 columns, every dtype, both pipelines.
 *
 * Tolerances (rows_gpu.h for u, g(n) and the window):
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
 */
#include "rows_gpu.h"

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

int g_sm_calls; /* softmax problems set up by these checks (main thread only) */

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
int run_softmax_exact(uint64_t seed) {
  const int failed =
      check_softmax_one_valid(seed) + check_softmax_all_equal(seed) + check_softmax_f32_bound(seed);
  printf("%s softmax exactness and f32 bound (check_softmax_one_valid, check_softmax_all_equal, "
         "check_softmax_f32_bound): %d calls, %d failed\n", failed ? "FAIL" : "ok  ",
         g_sm_calls, failed);
  return failed;
}
