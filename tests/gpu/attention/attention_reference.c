/* The float64 reference of ckjit_attention (ckjit.h, section "attention"),
 * its tolerances, and the self-checks that show both are right and that
 * the comparison can fail.
 *
 * The reference computes, for batch entry b, query head h and query row i
 * (sq, sk: the entry's lengths; diag = sk - sq, the bottom-right diagonal):
 *   g = h / (heads_q / heads_kv);  s[j] = scale * sum_d Q[b,h,i,d] K[b,g,j,d]
 *   s[j] = cap * tanh(s[j] / cap)                 (softcap > 0)
 *   s[j] += bias[b,h,i,j];  s[j] -= slope[b,h] * |i + diag - j|
 *   s[j] = -inf for a masked key; p = exp(s - max s); O = sum p V / sum p,
 *   LSE = max s + log(sum p); no visible key: O = 0, LSE = -inf,
 * in double from the inputs as stored in their dtype, so it sees exactly
 * what the GPU sees.
 *
 * Tolerances.  u is the dtype's unit roundoff (half an ulp, relative):
 * 2^-9 for bf16, 2^-11 for f16.  Per row, with n the visible keys, V the
 * largest |V| among them and delta a bound on the error of any one score:
 *
 *   delta = |scale| max_j sum_d |q k| (dqk + 8) 2^-21   (f16, bf16)
 *             f32 accumulation of q.k on tensor cores: at worst about dqk
 *             ulps of 2^-23 with their truncating adds, x4 (as the GEMM
 *             test); the soft-cap's slope is <= 1, so it passes this on
 *         | |scale| max_j sum_d |q k| (dqk + 8) 2^-23   (f32: SIMT FMAs
 *             rounding to nearest, dqk ulps of 2^-24 at worst, x2)
 *         + softcap 2^-10      tanh.approx.f32 (relative error <= 2^-10.99), x2
 *         + max |s| 2^-20      the f32 roundings of scale * log2(e), the bias
 *                              and ALiBi terms and x - max (a few ulps of 2^-24), x4
 *
 *   O:   |got - ref| <= V (c + 4 delta + (n + 16) 2^-22)  (+ 2^-24 for f16)
 *        c = 6u for f16 / bf16: p is rounded to the dtype before p V (each p
 *          within u: the numerator within u V l, and l within u too if it
 *          sums the rounded p), and O is rounded once (u |O| <= u V): 3u, x2.
 *          bf16: 0.0117 V, f16: 0.0029 V.
 *        c = 2^-20 for f32 (exp2 approximations and the f32 rounding of O, x2).
 *        4 delta: a score error delta moves a weight by e^delta relative
 *          to the others (2 delta V at most), x2.
 *        (n + 16) 2^-22: f32 sums of n terms for l and O (n 2^-24), x4.
 *        2^-24: the f16 subnormal spacing.
 *   LSE: |got - ref| <= 2 (delta + n 2^-24 + |LSE| 2^-22) + 2^-10
 *        score errors move LSE by delta at most; the sum l and the final
 *        (m + log2 l) ln 2 are f32; 2^-10 (~1e-3) covers the kernels'
 *        approximate exp2 / log2 and the rounding of the p's an l may be
 *        summed from, with a wide margin.  It still catches a key too many
 *        or too few in a row of 500 equal keys (log(501/500) = 2e-3).
 * A row without visible keys must be exactly O = 0 (either sign) and
 * LSE = -inf.  att_reference_self_check proves each mistake of enum
 * att_wrong fails these bounds, for every dtype. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_gpu.h"

/* ---- the reference ---------------------------------------------------------------------- */

static const double *row_ptr(const att_view *v, const int64_t *tok, int64_t b, int64_t h, int64_t i) {
  return tok ? v->p + h * v->sh + (tok[b] + i) * v->ss : v->p + b * v->sb + h * v->sh + i * v->ss;
}

/* Whether query row i sees key j (diag = sk - sq). */
static int visible_key(const att_problem *p, int64_t i, int64_t j, int64_t diag) {
  const int64_t right_extra = p->wrong == WRONG_WINDOW_RIGHT;
  switch (p->mask) {
    case CKJIT_ATTENTION_MASK_CAUSAL: return j <= i + diag + right_extra;
    case CKJIT_ATTENTION_MASK_WINDOW:
      return (p->wl < 0 || j >= i + diag - p->wl) && (p->wr < 0 || j <= i + diag + p->wr + right_extra);
    default: return 1;
  }
}

void att_ref_row(const att_problem *p, att_rowid id, double *o, att_row *r) {
  const int64_t b = id.b, h = id.h, i = id.i, sq = p->len_q[b], sk = p->len_k[b];
  const int64_t diag = p->wrong == WRONG_TOP_LEFT ? 0 : sk - sq;
  const int64_t g = p->wrong == WRONG_GQA_MODULO ? h % p->hk : h / (p->hq / p->hk);
  memset(r, 0, sizeof *r);
  r->lse = -INFINITY;
  for (int64_t c = 0; c < p->dv; c++) o[c] = 0.0;
  double *s = malloc((size_t)(sk + 1) * sizeof *s);
  if (!s) abort(); /* a few KB: the test cannot go on without it */
  const double *q = row_ptr(&p->q, p->tok_q, b, h, i);
  double m = -INFINITY;
  for (int64_t j = 0; j < sk; j++) {
    s[j] = -INFINITY;
    if (!visible_key(p, i, j, diag)) continue;
    const double *k = row_ptr(&p->k, p->tok_k, b, g, j);
    double dot = 0.0, mag = 0.0;
    for (int64_t c = 0; c < p->dqk; c++) {
      const double t = q[c * p->q.sd] * k[c * p->k.sd];
      dot += t;
      mag += fabs(t);
    }
    double x = p->scale * dot;
    if (p->softcap > 0.0 && p->wrong != WRONG_NO_SOFTCAP) x = p->softcap * tanh(x / p->softcap);
    if (p->bias.p) {
      const int64_t hb = p->wrong == WRONG_BIAS_NO_HEAD ? 0 : h;
      x += p->bias.p[b * p->bias.sb + hb * p->bias.sh + i * p->bias.ss + j * p->bias.sd];
    }
    if (p->slopes) {
      const double dist = (double)(i + diag - j);
      x -= p->slopes[b * p->slope_sb + h] * (p->wrong == WRONG_ALIBI_NO_ABS ? dist : fabs(dist));
    }
    s[j] = x;
    if (x == -INFINITY) continue; /* a -inf bias masks the key */
    r->visible++;
    r->dotmax = fmax(r->dotmax, fabs(p->scale) * mag);
    r->smax = fmax(r->smax, fabs(x));
    m = fmax(m, x);
  }
  if (r->visible) {
    double l = 0.0;
    for (int64_t j = 0; j < sk; j++) {
      if (s[j] == -INFINITY) continue;
      const double pj = exp(s[j] - m);
      const double *v = row_ptr(&p->v, p->tok_k, b, g, j);
      l += pj;
      for (int64_t c = 0; c < p->dv; c++) {
        o[c] += pj * v[c * p->v.sd];
        r->vmax = fmax(r->vmax, fabs(v[c * p->v.sd]));
      }
    }
    for (int64_t c = 0; c < p->dv; c++) o[c] /= l;
    r->lse = m + log(l);
  }
  free(s);
}

typedef struct ref_job {
  const att_problem *p;
  const att_rowid *ids;
  int64_t lo, hi;
  double *o;
  att_row *rows;
} ref_job;

static void *ref_thread(void *arg) {
  const ref_job *j = arg;
  for (int64_t n = j->lo; n < j->hi; n++) att_ref_row(j->p, j->ids[n], j->o + n * j->p->dv, &j->rows[n]);
  return NULL;
}

void att_ref_rows(const att_problem *p, const att_rowid *ids, int64_t n, double *o, att_row *rows,
                  int threads) {
  enum { MAX_THREADS = 64 };
  if (threads < 1 || n < 64) threads = 1; /* a few rows: not worth a thread */
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  pthread_t th[MAX_THREADS];
  ref_job jobs[MAX_THREADS];
  int started[MAX_THREADS] = {0};
  for (int t = 0; t < threads; t++) jobs[t] = (ref_job){p, ids, n * t / threads, n * (t + 1) / threads, o, rows};
  for (int t = 1; t < threads; t++) started[t] = pthread_create(&th[t], NULL, ref_thread, &jobs[t]) == 0;
  ref_thread(&jobs[0]);
  for (int t = 1; t < threads; t++) {
    if (started[t])
      pthread_join(th[t], NULL);
    else
      ref_thread(&jobs[t]); /* no thread could be started: its share here */
  }
}

/* ---- tolerances ---------------------------------------------------------------------------- */

static double unit_roundoff(ckjit_dtype dt) {
  return dt == CKJIT_BF16 ? 0x1p-9 : dt == CKJIT_F16 ? 0x1p-11 : 0x1p-24;
}

static double score_error(const att_problem *p, const att_row *r) {
  const double dot_ulps = p->dt == CKJIT_F32 ? 0x1p-23 : 0x1p-21;
  return r->dotmax * (double)(p->dqk + 8) * dot_ulps + (p->softcap > 0.0 ? p->softcap * 0x1p-10 : 0.0) +
         r->smax * 0x1p-20;
}

double att_tol_o(const att_problem *p, const att_row *r) {
  const double c = p->dt == CKJIT_F32 ? 0x1p-20 : 6.0 * unit_roundoff(p->dt);
  return r->vmax * (c + 4.0 * score_error(p, r) + (double)(r->visible + 16) * 0x1p-22) +
         (p->dt == CKJIT_F16 ? 0x1p-24 : 0.0);
}

double att_tol_lse(const att_problem *p, const att_row *r) {
  return 2.0 * (score_error(p, r) + (double)r->visible * 0x1p-24 + fabs(r->lse) * 0x1p-22) + 0x1p-10;
}

int att_compare_row(const att_problem *p, const double *got_o, const double *got_lse,
                    const double *ref_o, const att_row *r, char *why, size_t len) {
  int bad = 0;
  if (!r->visible) { /* every key masked: exactly 0 and -inf, never NaN */
    for (int64_t c = 0; c < p->dv; c++)
      if (got_o[c] != 0.0 && !bad++)
        snprintf(why, len, "O[%lld] = %.9g, want 0 (every key of the row is masked)", LL(c), got_o[c]);
    if (got_lse && !(isinf(*got_lse) && *got_lse < 0) && !bad++)
      snprintf(why, len, "LSE = %.9g, want -inf (every key of the row is masked)", *got_lse);
    return bad;
  }
  const double tol = att_tol_o(p, r);
  for (int64_t c = 0; c < p->dv; c++)
    if (!gt_close(got_o[c], ref_o[c], tol) && !bad++)
      snprintf(why, len, "O[%lld] = %.9g, want %.9g (|diff| %.3g > tol %.3g; %lld visible keys)", LL(c),
               got_o[c], ref_o[c], fabs(got_o[c] - ref_o[c]), tol, LL(r->visible));
  if (got_lse) {
    const double tl = att_tol_lse(p, r);
    if (!gt_close(*got_lse, r->lse, tl) && !bad++)
      snprintf(why, len, "LSE = %.9g, want %.9g (|diff| %.3g > tol %.3g; %lld visible keys)", *got_lse,
               r->lse, fabs(*got_lse - r->lse), tl, LL(r->visible));
  }
  return bad;
}

/* ---- self-checks ---------------------------------------------------------------------------- */

/* A dense BSHD problem in host memory, inputs rounded to dt. */
typedef struct sc_problem {
  att_problem p;
  int64_t len_q[2], len_k[2];
  double *q, *k, *v, *bias, *slopes;
} sc_problem;

static void sc_free(sc_problem *s) {
  free(s->q);
  free(s->k);
  free(s->v);
  free(s->bias);
  free(s->slopes);
}

static double *sc_fill(ckjit_dtype dt, size_t n, tu_rng *r, double lo, double hi) {
  double *a = malloc((n ? n : 1) * sizeof *a);
  if (!a) abort();
  for (size_t e = 0; e < n; e++) a[e] = gt_round(dt, gt_uniform(r, lo, hi));
  return a;
}

/* batch 2 x (hq, hk) heads x (sq, sk) x d, BSHD, uniform inputs. */
static void sc_make(sc_problem *s, ckjit_dtype dt, int64_t hq, int64_t hk, int64_t sq, int64_t sk, int64_t d,
                    tu_rng *r) {
  memset(s, 0, sizeof *s);
  att_problem *p = &s->p;
  p->dt = dt, p->batch = 2, p->hq = hq, p->hk = hk, p->dqk = p->dv = d;
  s->len_q[0] = s->len_q[1] = sq;
  s->len_k[0] = s->len_k[1] = sk;
  p->len_q = s->len_q, p->len_k = s->len_k;
  s->q = sc_fill(dt, (size_t)(2 * sq * hq * d), r, -1, 1);
  s->k = sc_fill(dt, (size_t)(2 * sk * hk * d), r, -1, 1);
  s->v = sc_fill(dt, (size_t)(2 * sk * hk * d), r, -1, 1);
  p->q = (att_view){s->q, sq * hq * d, d, hq * d, 1};
  p->k = (att_view){s->k, sk * hk * d, d, hk * d, 1};
  p->v = (att_view){s->v, sk * hk * d, d, hk * d, 1};
  p->scale = 0.5;
}

/* Every row of s: the reference's O rounded to the dtype and its LSE to
 * f32 (what a perfect kernel returns), compared with the reference of
 * variant `wrong`.  Returns the rows that mismatch. */
static int64_t sc_mismatches(const sc_problem *s, int wrong) {
  att_problem good = s->p, bad = s->p;
  bad.wrong = wrong;
  const int64_t dv = good.dv;
  double *og = malloc((size_t)dv * sizeof *og), *ob = malloc((size_t)dv * sizeof *ob);
  double *got = malloc((size_t)dv * sizeof *got);
  if (!og || !ob || !got) abort();
  int64_t rows = 0;
  char why[256];
  for (int64_t b = 0; b < good.batch; b++)
    for (int64_t h = 0; h < good.hq; h++)
      for (int64_t i = 0; i < good.len_q[b]; i++) {
        att_row rg, rb;
        att_ref_row(&good, (att_rowid){b, h, i}, og, &rg);
        att_ref_row(&bad, (att_rowid){b, h, i}, ob, &rb);
        for (int64_t c = 0; c < dv; c++) got[c] = gt_round(good.dt, og[c]);
        const double lse = (float)rg.lse;
        rows += att_compare_row(&bad, got, &lse, ob, &rb, why, sizeof why) != 0;
      }
  free(og);
  free(ob);
  free(got);
  return rows;
}

static int sc_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sc_fail(const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("FAIL reference self-check: %s\n", msg);
  return 1;
}

/* Closed forms: Q = 0 gives every visible key the same weight, so O is
 * the mean of the visible V rows and LSE = log(visible) (+ bias); the
 * bottom-right diagonal decides which rows see nothing. */
static int closed_forms(void) {
  int bad = 0;
  tu_rng r = {12345};
  sc_problem s;
  sc_make(&s, CKJIT_F32, 2, 1, 4, 2, 64, &r); /* sq 4 > sk 2: diag -2 */
  memset(s.q, 0, (size_t)(2 * 4 * 2 * 64) * sizeof *s.q);
  s.p.mask = CKJIT_ATTENTION_MASK_CAUSAL;
  double o[64];
  att_row row;
  for (int64_t i = 0; i < 4; i++) {
    att_ref_row(&s.p, (att_rowid){1, 1, i}, o, &row);
    const int64_t want = i < 2 ? 0 : i - 1; /* row i sees keys j <= i - 2 */
    if (row.visible != want) bad += sc_fail("causal sq 4 sk 2 row %lld sees %lld keys, want %lld", LL(i), LL(row.visible), LL(want));
    const double want_lse = want ? log((double)want) : -INFINITY;
    if (!(row.lse == want_lse || fabs(row.lse - want_lse) < 1e-12)) bad += sc_fail("row %lld: LSE %g, want %g", LL(i), row.lse, want_lse);
    for (int64_t c = 0; c < 64; c++) {
      double mean = 0;
      for (int64_t j = 0; j < want; j++) mean += s.v[(1 * 2 + j) * 64 + c] / (double)want; /* b 1, g 0 */
      if (fabs(o[c] - mean) > 1e-12) {
        bad += sc_fail("causal row %lld: O[%lld] = %g, want the mean %g", LL(i), LL(c), o[c], mean);
        break;
      }
    }
  }
  /* window left 1, right 0 on sq = sk = 2: row 0 sees key 0, row 1 keys 0 and 1 */
  s.p.mask = CKJIT_ATTENTION_MASK_WINDOW, s.p.wl = 1, s.p.wr = 0;
  s.len_q[0] = s.len_k[0] = 2;
  for (int64_t i = 0; i < 2; i++) {
    att_ref_row(&s.p, (att_rowid){0, 0, i}, o, &row);
    if (row.visible != i + 1 || fabs(row.lse - log((double)(i + 1))) > 1e-12)
      bad += sc_fail("window 1/0 row %lld: %lld keys, LSE %g", LL(i), LL(row.visible), row.lse);
  }
  /* ALiBi with Q = 0: weights exp(-slope |i + diag - j|) */
  double slope = 0.75;
  s.p.mask = CKJIT_ATTENTION_MASK_NONE, s.p.slopes = &slope, s.p.slope_sb = 0, s.p.hq = 1, s.p.hk = 1;
  s.len_q[0] = 1, s.len_k[0] = 2; /* diag 1: distances 1 and 0 */
  att_ref_row(&s.p, (att_rowid){0, 0, 0}, o, &row);
  const double want = log(exp(-0.75) + 1.0);
  if (fabs(row.lse - want) > 1e-12) bad += sc_fail("ALiBi: LSE %g, want %g", row.lse, want);
  sc_free(&s);
  return bad;
}

/* Each mistake must fail the comparison somewhere, for every dtype's
 * tolerance, and the reference rounded as a kernel returns it must pass. */
static int teeth(void) {
  static const ckjit_dtype dts[3] = {CKJIT_BF16, CKJIT_F16, CKJIT_F32};
  static const char *const names[WRONG_COUNT] = {"none", "top-left diagonal", "window right + 1",
                                                 "ALiBi without |.|", "no softcap", "GQA h % heads_kv",
                                                 "bias without its head"};
  int bad = 0;
  for (int t = 0; t < 3; t++)
    for (int w = 0; w < WRONG_COUNT; w++) {
      tu_rng r = {777 + (uint64_t)w};
      sc_problem s;
      sc_make(&s, dts[t], 4, 2, 20, 50, 64, &r);
      att_problem *p = &s.p;
      switch (w) {
        case WRONG_NONE:
          p->mask = CKJIT_ATTENTION_MASK_CAUSAL;
          break;
        case WRONG_TOP_LEFT: p->mask = CKJIT_ATTENTION_MASK_CAUSAL; break;
        case WRONG_WINDOW_RIGHT: p->mask = CKJIT_ATTENTION_MASK_WINDOW, p->wl = 8, p->wr = 4; break;
        case WRONG_ALIBI_NO_ABS:
          s.slopes = sc_fill(CKJIT_F32, 4, &r, 0.05, 0.5);
          p->slopes = s.slopes;
          break;
        case WRONG_NO_SOFTCAP: p->softcap = 2.0; break;
        case WRONG_GQA_MODULO: break;
        case WRONG_BIAS_NO_HEAD:
          s.bias = sc_fill(dts[t] == CKJIT_F32 ? CKJIT_F32 : dts[t], (size_t)(4 * 20 * 50), &r, -2, 2);
          p->bias = (att_view){s.bias, 0, 20 * 50, 50, 1};
          break;
        default: break;
      }
      const int64_t rows = sc_mismatches(&s, w);
      if (w == WRONG_NONE && rows)
        bad += sc_fail("%s: the exact answer rounded to the dtype fails %lld rows (tolerance too tight)",
                       ckjit_dtype_name(dts[t]), LL(rows));
      if (w != WRONG_NONE && !rows)
        bad += sc_fail("%s: a reference with \"%s\" passes the comparison (no teeth)", ckjit_dtype_name(dts[t]),
                       names[w]);
      sc_free(&s);
    }
  return bad;
}

/* The tolerances stay in the ranges the header of this file states (a
 * bound that grew by mistake would make the test blind). */
static int tolerance_ranges(void) {
  att_problem p;
  memset(&p, 0, sizeof p);
  p.dqk = p.dv = 128;
  att_row r = {.lse = 5.0, .visible = 257, .vmax = 1.0, .smax = 4.0, .dotmax = 3.0};
  int bad = 0;
  p.dt = CKJIT_BF16;
  bad += att_tol_o(&p, &r) > 0.02 || att_tol_o(&p, &r) < 0.0117;
  p.dt = CKJIT_F16;
  bad += att_tol_o(&p, &r) > 0.005;
  p.dt = CKJIT_F32;
  bad += att_tol_o(&p, &r) > 4e-4;
  bad += att_tol_lse(&p, &r) > 2e-3;
  if (bad) printf("FAIL reference self-check: tolerances out of their stated ranges\n");
  return bad;
}

int att_reference_self_check(void) { return closed_forms() + teeth() + tolerance_ranges(); }
