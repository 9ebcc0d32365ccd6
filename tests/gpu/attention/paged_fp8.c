/* FP8 e4m3 pages of the paged attention GPU test (paged_gpu.h): the codec
 * the host side uses, the values drawn for fp8 keys, and the self-checks
 * that show both are right and that a wrong scale cannot pass.
 *
 * The codec is the OCP e4m3fn format paged_attention.h names: sign, 4
 * exponent bits (bias 7), 3 mantissa bits; exponent field 0 holds the
 * subnormals m 2^-9; the largest finite value is 448 (S.1111.110); there is
 * no infinity and S.1111.111 is NaN.  The append stores e4m3(x / scale):
 * round to nearest, ties to even, saturating to +-448; NaN stays NaN.  The
 * test's reference rounds the exact quotient (x / scale in double: x has at
 * most 11 significant bits and the scale 24, so a quotient off a tie is
 * off it by far more than a double's rounding).  The data (pg_fp8_draw)
 * hold exact ties, which the rule sends to the even code and which a
 * correctly rounded f32 quotient leaves exact, and keep clear (2^-16,
 * relative) of the boundaries otherwise, where an f32 quotient's own
 * rounding (x / scale, or x * (1 / scale)) could legitimately cross one.
 * (x * (1 / scale) in f32 is not the rule at every exact tie: with scale
 * 7/16 it rounds some ties of bf16 / f16 values away from the even code.)
 *
 * Tolerances.  The reference sees K and V as scale * e4m3_value(code) in
 * double; the kernels read e4m3_value(code) (exact in f32 and, on the
 * decode kernel's tensor cores, in f16 and bf16: 4 significant bits,
 * exponents 2^-9 .. 2^8), multiply K's scale into the softmax scale and
 * V's into 1 / l, in f32.  Against the dense derivation
 * (attention_reference.c) that adds one f32 rounding to every score
 * (|s| 2^-24: inside its max |s| 2^-20 term, 4 such roundings x4) and one
 * to every O element (|O| 2^-24 <= V 2^-24: inside its (n + 16) 2^-22 V
 * term); the products q.x sum unscaled codes, but their error relative to
 * |scale| sum |q k| is the same as for 16-bit K.  So att_tol_o and
 * att_tol_lse stand as they are, with V and the scores those of the
 * dequantized values; the self-check below shows that they still catch a
 * scale applied wrongly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paged_gpu.h"

/* ---- the codec ---------------------------------------------------------------------------- */

double pg_e4m3_value(uint8_t code) {
  const int negative = code & 0x80, field = (code >> 3) & 0xF, mant = code & 0x7;
  double mag;
  if (field == 0xF && mant == 0x7) return negative ? -NAN : NAN;
  if (field == 0)
    mag = mant / 512.0; /* m 2^-9 */
  else
    mag = ldexp(1.0 + mant / 8.0, field - 7);
  return negative ? -mag : mag;
}

uint8_t pg_e4m3_encode(double q) {
  if (isnan(q)) return signbit(q) ? 0xFF : 0x7F;
  const uint8_t sign = signbit(q) ? 0x80 : 0x00;
  const double a = fabs(q);
  if (a >= 448.0) return sign | 0x7E; /* saturate (infinity too) */
  /* The binade's exponent, the subnormals sharing 2^-6's: the step between
   * codes there is 2^(e - 3), and code (e + 6) 8 + n holds n steps (n in
   * 0 .. 16; 16 is the next binade's first code, so a carry is right). */
  int e = -6;
  if (a >= 0x1p-6) {
    (void)frexp(a, &e);
    e -= 1; /* a in [2^e, 2^(e+1)) */
  }
  const double n = nearbyint(ldexp(a, 3 - e)); /* exact scaling; ties to even */
  int code = (e + 6) * 8 + (int)n;
  if (code > 0x7E) code = 0x7E;
  return (uint8_t)(sign | code);
}

/* ---- the values drawn for fp8 keys ----------------------------------------------------------- */

/* Whether q is a rounding boundary of the codec (a tie). */
static int on_tie(double q) {
  return q != 0.0 && fabs(q) < 448.0 && pg_e4m3_encode(nextafter(q, 0.0)) != pg_e4m3_encode(nextafter(q, 2.0 * q));
}

/* Whether q lies within 2^-16 (relative) of a rounding boundary of the codec. */
static int near_boundary(double q) {
  const double w = 0x1p-16;
  return pg_e4m3_encode(q * (1.0 - w)) != pg_e4m3_encode(q * (1.0 + w));
}

double pg_fp8_draw(tu_rng *rng, ckjit_dtype dt, double scale) {
  for (;;) {
    const double u = tu_rng_unit(rng), sign = tu_rng_unit(rng) < 0.5 ? -1.0 : 1.0;
    double x;
    if (u < 0.01) {
      x = sign * 0.0;
    } else if (u < 0.02) {
      x = sign * INFINITY; /* saturates: +-448 */
    } else if (u < 0.04) {
      x = gt_round(dt, sign * scale * gt_uniform(rng, 448.0, 600.0)); /* past 448: saturates */
    } else if (u < 0.10) { /* a tie: scale times the midpoint of two neighbouring codes, where the dtype holds it */
      const int c = (int)tu_rng_range(rng, 0, 0x7D);
      x = sign * scale * 0.5 * (pg_e4m3_value((uint8_t)c) + pg_e4m3_value((uint8_t)(c + 1)));
      if (gt_round(dt, x) != x) continue;
    } else { /* a code over the whole range (1/16 of them subnormal), moved up to 6% */
      const double t = pg_e4m3_value((uint8_t)tu_rng_range(rng, 0, 0x7E));
      x = gt_round(dt, sign * scale * t * (1.0 + gt_uniform(rng, -0.06, 0.06)));
    }
    if (near_boundary(x / scale) && !on_tie(x / scale)) continue; /* near a tie, not on it */
    return x;
  }
}

/* ---- self-checks -------------------------------------------------------------------------------- */

static int fail8(const char *what, double a, double b) {
  printf("FAIL fp8 self-check: %s (%.17g, %.17g)\n", what, a, b);
  return 1;
}

/* The code nearest q among the finite ones (ties: the even code), by search. */
static uint8_t nearest_code(double q) {
  if (isnan(q)) return 0x7F;
  int best = 0;
  double best_d = INFINITY;
  const double a = fabs(q);
  for (int c = 0; c <= 0x7E; c++) {
    const double d = fabs(a - pg_e4m3_value((uint8_t)c));
    if (d < best_d || (d == best_d && !(c & 1))) best = c, best_d = d;
  }
  return (uint8_t)((signbit(q) ? 0x80 : 0) | best);
}

static int check_codec(void) {
  int bad = 0;
  static const struct {
    uint8_t code;
    double value;
  } anchors[] = {{0x00, 0.0},          {0x01, 0x1p-9},  {0x07, 7 * 0x1p-9}, {0x08, 0x1p-6}, {0x09, 0x1.2p-6},
                 {0x38, 1.0},          {0x39, 1.125},   {0x3F, 1.875},      {0x40, 2.0},    {0x78, 256.0},
                 {0x7D, 416.0},        {0x7E, 448.0},   {0xB8, -1.0},       {0xFE, -448.0}, {0x81, -0x1p-9}};
  for (size_t i = 0; i < sizeof anchors / sizeof anchors[0]; i++)
    if (pg_e4m3_value(anchors[i].code) != anchors[i].value) bad += fail8("decoded anchor", anchors[i].code, pg_e4m3_value(anchors[i].code));
  if (!signbit(pg_e4m3_value(0x80)) || pg_e4m3_value(0x80) != 0.0) bad += fail8("0x80 is -0", 0x80, pg_e4m3_value(0x80));
  if (!isnan(pg_e4m3_value(0x7F)) || !isnan(pg_e4m3_value(0xFF))) bad += fail8("0x7F and 0xFF are NaN", 0, 0);
  for (int c = 0; c < 256; c++) {
    const double v = pg_e4m3_value((uint8_t)c);
    if ((c & 0x7F) == 0x7F) {
      if (!isnan(v) || (pg_e4m3_encode(v) & 0x7F) != 0x7F) bad += fail8("NaN code round trip", c, pg_e4m3_encode(v));
      continue;
    }
    if (isnan(v) || pg_e4m3_encode(v) != c) bad += fail8("round trip of a code", c, pg_e4m3_encode(v));
    if (c >= 0x80 && v != -pg_e4m3_value((uint8_t)(c - 0x80))) bad += fail8("a negative code", c, v);
    if ((c & 0x7F) && (c & 0x7F) < 0x7E) { /* neighbours: increasing, the midpoint to the even one */
      const double next = pg_e4m3_value((uint8_t)(c + 1)), mid = 0.5 * (v + next), sgn = c & 0x80 ? -1.0 : 1.0;
      if (!(fabs(next) > fabs(v))) bad += fail8("codes not increasing", c, next);
      const uint8_t even = (uint8_t)(c & 1 ? c + 1 : c);
      if (pg_e4m3_encode(mid) != even) bad += fail8("a tie not to the even code", c, pg_e4m3_encode(mid));
      if (pg_e4m3_encode(nextafter(mid, 0.0)) != c || pg_e4m3_encode(nextafter(mid, sgn * 1000.0)) != c + 1)
        bad += fail8("either side of a midpoint", c, mid);
    }
  }
  static const struct {
    double q;
    uint8_t code;
  } edges[] = {{448.0001, 0x7E}, {463.99, 0x7E}, {464.0, 0x7E}, {480.0, 0x7E},  {1e300, 0x7E}, {INFINITY, 0x7E},
               {-INFINITY, 0xFE}, {-500.0, 0xFE}, {0x1p-10, 0x00}, {0x1.0000001p-10, 0x01}, {-0x1p-11, 0x80},
               {-0.0, 0x80},     {0x1p-30, 0x00}, {3 * 0x1p-10, 0x02}, {3 * 0x1p-11, 0x01}, {0x1.1p-6, 0x08}, {0x1.3p-6, 0x0A}};
  for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
    if (pg_e4m3_encode(edges[i].q) != edges[i].code) bad += fail8("an edge value", edges[i].q, pg_e4m3_encode(edges[i].q));
  if ((pg_e4m3_encode(NAN) & 0x7F) != 0x7F || (pg_e4m3_encode(-NAN) & 0x7F) != 0x7F) bad += fail8("NaN encodes to NaN", 0, 0);
  tu_rng r = {0xF8F8};
  for (int i = 0; i < 200000 && bad < 10; i++) { /* log-uniform over 2^-13 .. 2^10, both signs */
    const double q = (tu_rng_unit(&r) < 0.5 ? -1.0 : 1.0) * exp2(gt_uniform(&r, -13.0, 10.0));
    if (pg_e4m3_encode(q) != nearest_code(q)) bad += fail8("encode against the nearest-code search", q, pg_e4m3_encode(q));
  }
  return bad;
}

/* The values drawn: in the dtype, over the range (subnormal codes, +-448,
 * signed zeros, saturation), exact ties where the dtype holds them (scales
 * of few significant bits: 2^-5, 7/16), and never near a boundary
 * otherwise. */
static int check_draw(void) {
  static const ckjit_dtype dts[2] = {CKJIT_BF16, CKJIT_F16};
  static const double scales[3] = {0.03125, 0.0234, 0.4375};
  static const int with_ties[3] = {1, 0, 1};
  int bad = 0;
  for (int t = 0; t < 2; t++)
    for (int k = 0; k < 3; k++) {
      const double s = (float)scales[k];
      tu_rng r = {99 + (uint64_t)(3 * t + k)};
      int seen[256] = {0};
      long ties = 0, near = 0, saturated = 0;
      for (int i = 0; i < 20000; i++) {
        const double x = pg_fp8_draw(&r, dts[t], s);
        if (!isinf(x) && gt_round(dts[t], x) != x) bad += fail8("a drawn value not in the dtype", x, gt_round(dts[t], x));
        const double q = x / s;
        const uint8_t code = pg_e4m3_encode(q);
        seen[code]++;
        saturated += fabs(q) > 448.0;
        near += near_boundary(q);
        ties += on_tie(q);
      }
      int subnormal = 0, distinct = 0;
      for (int c = 0; c < 256; c++) {
        distinct += seen[c] > 0;
        subnormal += seen[c] && (c & 0x78) == 0 && (c & 7);
      }
      if (distinct < 240 || subnormal < 10 || !seen[0x7E] || !seen[0xFE] || !seen[0x00] || !seen[0x80] || !saturated ||
          near != ties || (with_ties[k] ? ties < 100 : ties != 0))
        printf("FAIL fp8 self-check: draws for %s scale %g: %d codes, %d subnormal, %ld saturated, %ld ties, %ld near "
               "a boundary\n",
               ckjit_dtype_name(dts[t]), s, distinct, subnormal, saturated, ties, near),
            bad++;
    }
  return bad;
}

/* What a mistaken kernel would compute: the dequantized K and V with a
 * scale applied wrongly. */
enum fp8_wrong { W8_V_BY_K, W8_K_BY_V, W8_K_UNSCALED, W8_V_UNSCALED, W8_HEAD0, W8_COUNT };
static const char *const wrong_names[W8_COUNT] = {"V scaled by k_scale", "K scaled by v_scale", "K's scale left out",
                                                  "V's scale left out", "every head with head 0's scales"};

static void wrong_values(const pg_problem *p, int w, double *kd, double *vd) {
  const int64_t d = p->c->d, row = p->c->hk * d, n = p->tok_k[p->batch] * row;
  for (int64_t e = 0; e < n; e++) {
    const int64_t g = e % row / d, h0 = w == W8_HEAD0 ? 0 : g;
    const double kv = pg_e4m3_value(p->kcode[e]), vv = pg_e4m3_value(p->vcode[e]);
    kd[e] = (w == W8_K_UNSCALED ? 1.0 : w == W8_K_BY_V ? p->vscale[h0] : p->kscale[h0]) * kv;
    vd[e] = (w == W8_V_UNSCALED ? 1.0 : w == W8_V_BY_K ? p->kscale[h0] : p->vscale[h0]) * vv;
  }
}

/* Rows of `wrong` (NULL: the right reference) that fail against the right
 * reference's O rounded to the dtype and LSE to f32 (a perfect kernel's answer). */
static int64_t mismatches(const pg_problem *p, const att_problem *wrong) {
  const att_problem *ref = wrong ? wrong : &p->ref;
  const int64_t dv = p->c->d;
  double *o = malloc((size_t)dv * sizeof *o), *ow = malloc((size_t)dv * sizeof *ow), *got = malloc((size_t)dv * sizeof *got);
  if (!o || !ow || !got) abort();
  int64_t rows = 0;
  char why[256];
  for (int64_t b = 0; b < p->batch; b++)
    for (int64_t h = 0; h < p->c->hq; h++)
      for (int64_t i = 0; i < p->len_q[b]; i++) {
        att_row r, rw;
        att_ref_row(&p->ref, (att_rowid){b, h, i}, o, &r);
        att_ref_row(ref, (att_rowid){b, h, i}, ow, &rw);
        for (int64_t x = 0; x < dv; x++) got[x] = gt_round(p->c->dt, o[x]);
        const double lse = (float)r.lse;
        rows += att_compare_row(ref, got, &lse, ow, &rw, why, sizeof why) != 0;
      }
  free(o);
  free(ow);
  free(got);
  return rows;
}

static int check_wrong_scales(void) {
  pg_case c;
  memset(&c, 0, sizeof c);
  int bad = 0;
  for (int t = 0; t < 2; t++) {
    snprintf(c.name, sizeof c.name, "fp8 wrong scales %d", t);
    c.dt = t ? CKJIT_F16 : CKJIT_BF16, c.page = 16, c.layout = PL_NHD, c.hq = 8, c.hk = 2, c.d = 64;
    c.batch = 4, c.len_k[0] = 70, c.len_k[1] = 1, c.len_k[2] = 33, c.len_k[3] = 200;
    c.nq = 5, c.varlen_q = 1, c.mask = CKJIT_ATTENTION_MASK_CAUSAL, c.wl = c.wr = -1, c.lse = 1;
    c.fp8 = 1, c.per_head = 1;
    c.k_scale[0] = 0.0234f, c.k_scale[1] = 0.0625f, c.v_scale[0] = 0.43f, c.v_scale[1] = 0.125f;
    pg_problem p;
    if (pg_problem_build(&p, &c, 4242 + (uint64_t)t)) {
      pg_problem_free(&p);
      return bad + fail8("host memory", 0, 0);
    }
    const int64_t n = p.tok_k[p.batch] * c.hk * c.d;
    double *kd = malloc((size_t)n * sizeof *kd), *vd = malloc((size_t)n * sizeof *vd);
    if (!kd || !vd) abort();
    const int64_t right = mismatches(&p, NULL);
    if (right) bad += fail8("the right answer fails rows (tolerance too tight for fp8)", (double)right, t);
    for (int w = 0; w < W8_COUNT; w++) {
      wrong_values(&p, w, kd, vd);
      att_problem wr = p.ref;
      wr.k.p = kd, wr.v.p = vd;
      if (!mismatches(&p, &wr)) {
        printf("FAIL fp8 self-check: %s: a reference with \"%s\" passes the comparison (no teeth)\n",
               ckjit_dtype_name(c.dt), wrong_names[w]);
        bad++;
      }
    }
    free(kd);
    free(vd);
    pg_problem_free(&p);
  }
  return bad;
}

int pg_fp8_self_check(void) { return check_codec() + check_draw() + check_wrong_scales(); }
