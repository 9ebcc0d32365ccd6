/* The fused-MoE suite's host problem and float64 reference
 * (fused_moe_reference.h; the definition, data and tolerance are stated in
 * test_fused_moe_gpu.c's opening comment).
 *
 * The reference of y[t][i] is an interval, carried stage by stage through
 * the chain the header defines, each stage's device error bounded and every
 * rounding to a dtype applied to the ends of its input's interval (rounding
 * is monotone, so the device's rounded value lies between the rounded
 * ends):
 *
 *   a    the activations the gate-up GEMM sees: x (16-bit), or x quantized
 *        per token / 1 x 128 block (quantize(), below) with a bound da[q]
 *        on how far the device's dequantized value can be from ours;
 *   g, u the gate and up dot products in f64 with S = sum |terms| and
 *        D = sum |w| da: the device's is within eg = c1 (S + D) + D, c1 its
 *        accumulation error (0 for exact data, see the test's comment);
 *   h    act(g) u, within E = dA (|u| + eu) + |act(g)| eu (+ f32 rounding),
 *        dA = 1.2 eg + 2^-18 (1 + |g|) (slope of silu / gelu, hardware exp);
 *        h's interval is [rnd(act(g) u - E), rnd(act(g) u + E)];
 *   b    h as the down GEMM sees it: h (16-bit) or h quantized (FP8), each
 *        with its bound db[j] (quantize(), from h's interval);
 *   d    the down dot product, within ed = c2 (S + D) + D;
 *   c    each slot's rnd(w d): [rnd(w d - |w| ed), rnd(w d + |w| ed)];
 *   y    rnd(the f32 sum of the slots' c): [rnd(sum c_lo - eps), rnd(sum
 *        c_hi + eps)], eps = slots 2^-23 sum max|c| (f32 sums); 0 when the
 *        token has no valid id. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fused_moe_reference.h"
#include "../gemm/epilogue_reference.h"

#define FP8(p) ((p)->c->wdt == CKJIT_FP8_E4M3)
#define QWIN 0x1p-20 /* relative: the device's x / scale vs ours (a few f32 roundings) */
#define SCALE_SLACK 0x1p-21 /* relative: the device's amax / 448 vs ours (e.g. amax * (1 / 448.f)) */

/* ---- the e4m3 codec ------------------------------------------------------------------- */

double fm_e4m3_value(uint8_t code) {
  const int field = (code >> 3) & 0xF, mant = code & 7;
  if (field == 0xF && mant == 7) return NAN;
  const double mag = field ? ldexp(8 + mant, field - 10) : ldexp(mant, -9);
  return code & 0x80 ? -mag : mag;
}

uint8_t fm_e4m3_encode(double t) {
  if (isnan(t)) return 0x7F;
  const uint8_t sign = signbit(t) ? 0x80 : 0;
  const double a = fabs(t);
  if (a >= 448.0) return sign | 0x7E; /* saturate (480 and up would be NaN) */
  int e = -6;                         /* binade 2^e; the subnormals share 2^-6's step 2^-9 */
  if (a >= 0x1p-6) {
    (void)frexp(a, &e);
    e -= 1; /* a in [2^e, 2^(e+1)) */
  }
  /* steps of 2^(e-3): 8 .. 16 in a normal binade (16 carries into the
   * next binade's first code, which is right), 0 .. 8 for subnormals */
  const int n = (int)nearbyint(ldexp(a, 3 - e)); /* exact scaling; ties to even */
  int code = (e + 6) * 8 + n;
  if (code > 0x7E) code = 0x7E;
  return (uint8_t)(sign | code);
}

static double dec8[256];

/* ---- data ------------------------------------------------------------------------------- */

static tu_rng stream_rng(uint64_t seed, uint64_t tag, uint64_t chunk) {
  tu_rng r = {seed ^ (tag * 0xD1B54A32D192ED03ull) ^ (chunk * 0x8CB92BA72F3D8DD7ull)};
  const uint64_t a = tu_rng_next(&r), b = tu_rng_next(&r);
  r.s = a ^ (b << 1);
  return r;
}

/* Exact gate-up data (16-bit): w_gate_up entries k 2^-(wb + 4), |k| <= 16. */
static int w1_exp(int64_t hidden) {
  int b = 0;
  while (b < 20 && ldexp(1.0, b + 1) <= sqrt((double)hidden) / 2) b++;
  return b;
}

static const uint8_t w1_fp8_codes[5] = {0x00, 0x28, 0x30, 0xA8, 0xB0}; /* 0, 1/4, 1/2, -1/4, -1/2 */

/* Weights n from `first`, from bytes of random draws: FP8 w_gate_up a code
 * of w1_fp8_codes, FP8 w_down sign, exponent field 0 .. 8 and mantissa
 * (values up to 3.75, never NaN); 16-bit exact w_gate_up k 2^-(wb + 4)
 * (|k| <= 16, table exact1); otherwise 16 random bits index a table
 * (uni1, uni2) of 65536 uniform values in [-r, r) rounded to dtype. */
static void fill_weights(fm_host *p, int which, size_t first, size_t n, tu_rng *r) {
  const fm_case *c = p->c;
  const size_t end = first + n;
  if (FP8(p)) {
    uint8_t *w = which == 1 ? p->w1 : p->w2;
    for (size_t i = first; i < end;) {
      const uint64_t bits = tu_rng_next(r);
      for (int b = 0; b < 8 && i < end; b++, i++) {
        const unsigned byte = (unsigned)(bits >> (8 * b)) & 255;
        w[i] = which == 1 ? w1_fp8_codes[byte * 5 >> 8] : (uint8_t)((byte & 0x87) | ((((byte >> 3) & 15) * 9 >> 4) << 3));
      }
    }
    return;
  }
  uint16_t *w = (uint16_t *)(void *)(which == 1 ? p->w1 : p->w2);
  const int exact = which == 1 && !c->random_data;
  const uint16_t *uni = which == 1 ? p->gen_tab : p->gen_tab + 65536, *exact1 = p->gen_tab + 2 * 65536;
  for (size_t i = first; i < end;) {
    const uint64_t bits = tu_rng_next(r);
    if (exact)
      for (int b = 0; b < 8 && i < end; b++, i++) w[i] = exact1[((bits >> (8 * b)) & 255) * 33 >> 8];
    else
      for (int b = 0; b < 4 && i < end; b++, i++) w[i] = uni[(bits >> (16 * b)) & 0xFFFF];
  }
}

static uint16_t bits16(ckjit_dtype dt, double v) { return dt == CKJIT_F16 ? f32_to_f16((float)v) : f32_to_bf16((float)v); }

/* The 16-bit generators' tables (fill_weights). */
static void make_tables(fm_host *p) {
  const fm_case *c = p->c;
  const double r1 = 2.1 / sqrt((double)c->hidden), r2 = 2.0 / sqrt((double)c->inter);
  for (size_t u = 0; u < 65536; u++) {
    const double unit = 2.0 * ((double)u + 0.5) / 65536 - 1.0; /* in (-1, 1), symmetric */
    p->gen_tab[u] = bits16(c->dtype, r1 * unit), p->gen_tab[65536 + u] = bits16(c->dtype, r2 * unit);
  }
  for (int k = 0; k < 33; k++) p->gen_tab[2 * 65536 + k] = bits16(c->dtype, ldexp(k - 16, -(w1_exp(c->hidden) + 4)));
}

enum { CHUNK = 1 << 20 };

typedef struct fill_job {
  fm_host *p;
  uint64_t seed;
  int tid, nth;
} fill_job;

static void *fill_thread(void *arg) {
  fill_job *j = arg;
  for (int which = 1; which <= 2; which++) {
    const size_t elems = which == 1 ? j->p->w1_elems : j->p->w2_elems;
    for (size_t ch = (size_t)j->tid; ch * CHUNK < elems; ch += (size_t)j->nth) {
      tu_rng r = stream_rng(j->seed, (uint64_t)which, ch);
      const size_t first = ch * CHUNK;
      fill_weights(j->p, which, first, elems - first < CHUNK ? elems - first : CHUNK, &r);
    }
  }
  return NULL;
}

/* e4m3's smaller step beside code value c (> 0, a multiple of 64). */
static double e4m3_step_below(double c) {
  int e;
  (void)frexp(c * (1.0 - 0x1p-10), &e);
  return ldexp(1.0, e - 1 - 3);
}

/* x's row t.  FP8 (exact design, see the test): each quantization group
 * (the row, or a 1 x 128 block) has scale r 2^-m (amax / 448, exact in
 * f32), one entry +-448 r 2^-m and the others 64 k r 2^-m, |k| <= 6, so a
 * correct quantizer gives exactly the code 64 k.  r = 1: the others are
 * moved by p, |p| <= 3/8 of the step beside 64 k, which a correct
 * quantizer rounds away (truncation would not); r = 3/2 (unmoved, to stay
 * exact in bf16) makes quantizing with another group's scale inexact. */
static void fill_x_row(fm_host *p, int64_t t, tu_rng *r) {
  const fm_case *c = p->c;
  uint8_t *row = p->x + (size_t)(t * p->ldx) * 2;
  for (int64_t q = c->hidden; q < p->ldx; q++) gt_put_nan(c->dtype, row, (size_t)q);
  if (!FP8(p)) {
    for (int64_t q = 0; q < c->hidden; q++)
      gt_put(c->dtype, row, (size_t)q, c->random_data ? gt_uniform(r, -1.0, 1.0) : (double)tu_rng_range(r, -8, 8) / 8);
    return;
  }
  const int64_t gs = c->sc == CKJIT_FP8_SCALE_ROW ? c->hidden : 128;
  const int start = (int)tu_rng_range(r, 0, 4);
  for (int64_t g0 = 0, gi = 0; g0 < c->hidden; g0 += gs, gi++) {
    const int64_t gn = c->hidden - g0 < gs ? c->hidden - g0 : gs;
    const int zero = c->zero_groups && (c->sc == CKJIT_FP8_SCALE_ROW ? t % 11 == 3 : tu_rng_range(r, 0, 8) == 0);
    const int m = 6 + (int)((start + gi) % 5), moved = (start + gi) % 2 == 0;
    const double scale = ldexp(moved ? 1.0 : 1.5, -m);
    const int64_t at = tu_rng_range(r, 0, gn - 1);
    for (int64_t q = 0; q < gn; q++) {
      double v = 0;
      if (zero) v = 0;
      else if (q == at) v = tu_rng_range(r, 0, 1) ? 448.0 : -448.0;
      else {
        const int k = (int)tu_rng_range(r, -6, 6);
        if (k) {
          const double cv = 64.0 * abs(k), pert = moved ? (double)tu_rng_range(r, -3, 3) * e4m3_step_below(cv) / 8 : 0;
          v = (k < 0 ? -1.0 : 1.0) * (cv + pert);
        }
      }
      gt_put(c->dtype, row, (size_t)(g0 + q), v * scale);
    }
  }
}

const char *fm_routing_name(int routing) {
  static const char *const names[] = {"uniform", "one expert", "3 experts", "with invalid ids"};
  return routing >= 0 && routing < FM_ROUTINGS ? names[routing] : "?";
}

/* A new routing; FM_INVALID also makes token 1's ids (or token 0's) all
 * out of range and the middle token's first, so that both are seen. */
void fm_route(fm_host *p, int routing, tu_rng *r) {
  const fm_case *c = p->c;
  const int E = c->experts, k = c->k;
  const int64_t few[3] = {0, E / 2, E - 1};
  const int64_t bad32[4] = {-1, E, INT32_MAX, INT32_MIN}, bad64[4] = {-1, E, (int64_t)1 << 40, -((int64_t)1 << 33) + 5};
  for (int64_t t = 0; t < c->tokens; t++)
    for (int s = 0; s < k; s++) {
      int64_t *id = &p->ids[t * k + s];
      p->tw[t * k + s] = (float)gt_uniform(r, 0.05, 1.0);
      if (routing == FM_ONE_EXPERT) {
        *id = E / 2;
        continue;
      }
      if (routing == FM_INVALID && tu_rng_range(r, 0, 7) == 0) {
        *id = (c->ids == CKJIT_I64 ? bad64 : bad32)[tu_rng_range(r, 0, 3)];
        continue;
      }
      const int distinct = routing == FM_FEW ? k <= 3 : k <= E;
      int again;
      do {
        *id = routing == FM_FEW ? few[tu_rng_range(r, 0, 2)] : tu_rng_range(r, 0, E - 1);
        again = 0;
        for (int q = 0; q < s && distinct; q++) again |= p->ids[t * k + q] == *id;
      } while (again);
    }
  if (routing == FM_INVALID && c->tokens > 0) {
    const int64_t all = c->tokens > 1 ? 1 : 0, *bad = c->ids == CKJIT_I64 ? bad64 : bad32;
    for (int s = 0; s < k; s++) p->ids[all * k + s] = bad[s % 4];
    p->ids[c->tokens / 2 * k] = bad[(c->tokens / 2) % 4];
  }
}

static int valid_id(const fm_host *p, int64_t id) { return id >= 0 && id < p->c->experts; }

int64_t fm_invalid_count(const fm_host *p) {
  int64_t n = 0;
  for (int64_t i = 0; i < p->c->tokens * p->c->k; i++) n += !valid_id(p, p->ids[i]);
  return n;
}

int fm_all_invalid(const fm_host *p, int64_t t) {
  for (int s = 0; s < p->c->k; s++)
    if (valid_id(p, p->ids[t * p->c->k + s])) return 0;
  return 1;
}

static void *xmalloc(size_t n) { return malloc(n ? n : 1); }

int fm_host_make(fm_host *p, const fm_case *c, uint64_t seed, int threads) {
  memset(p, 0, sizeof *p);
  p->c = c;
  for (int i = 0; i < 256; i++) dec8[i] = fm_e4m3_value((uint8_t)i);
  const int64_t H = c->hidden, I = c->inter, E = c->experts;
  p->ldx = H + c->ldx_pad;
  p->kb1 = (H + 127) / 128, p->kb2 = (I + 127) / 128, p->nb1 = (2 * I + 127) / 128, p->nb2 = (H + 127) / 128;
  p->w1_elems = (size_t)(E * 2 * I * H), p->w2_elems = (size_t)(E * H * I);
  const size_t es = FP8(p) ? 1 : 2;
  if (FP8(p)) {
    const int row = c->sc == CKJIT_FP8_SCALE_ROW;
    p->s1_elems = (size_t)(row ? E * 2 * I : E * p->nb1 * p->kb1);
    p->s2_elems = (size_t)(row ? E * H : E * p->nb2 * p->kb2);
    p->s1 = xmalloc(p->s1_elems * 4), p->s2 = xmalloc(p->s2_elems * 4);
  }
  p->x = xmalloc((size_t)(c->tokens * p->ldx) * 2);
  p->ids = xmalloc(sizeof(int64_t) * (size_t)(c->tokens * c->k));
  p->tw = xmalloc(sizeof(float) * (size_t)(c->tokens * c->k));
  p->w1 = xmalloc(p->w1_elems * es), p->w2 = xmalloc(p->w2_elems * es);
  p->dec16 = xmalloc(sizeof(float) * 65536);
  p->gen_tab = xmalloc(sizeof(uint16_t) * (2 * 65536 + 33));
  if (!p->x || !p->ids || !p->tw || !p->w1 || !p->w2 || !p->dec16 || !p->gen_tab || (FP8(p) && (!p->s1 || !p->s2)))
    return -1;
  make_tables(p);
  for (uint32_t h = 0; h < 65536; h++)
    p->dec16[h] = c->dtype == CKJIT_F16 ? f16_to_f32((uint16_t)h) : bf16_to_f32((uint16_t)h);
  tu_rng r = stream_rng(seed, 3, 0);
  for (int64_t t = 0; t < c->tokens; t++) fill_x_row(p, t, &r);
  if (FP8(p)) { /* log-uniform around what keeps g and d near 1 */
    const double base1 = 1.46 / sqrt((double)H), base2 = 1.7 / sqrt((double)I);
    for (size_t i = 0; i < p->s1_elems; i++) p->s1[i] = (float)(base1 * exp2(gt_uniform(&r, -1, 1)));
    for (size_t i = 0; i < p->s2_elems; i++) p->s2[i] = (float)(base2 * exp2(gt_uniform(&r, -1, 1)));
  }
  enum { MAXT = 64 };
  if (threads < 1) threads = 1;
  if (threads > MAXT) threads = MAXT;
  pthread_t th[MAXT];
  fill_job jobs[MAXT];
  int started[MAXT] = {0};
  for (int i = 0; i < threads; i++) jobs[i] = (fill_job){p, seed, i, threads};
  for (int i = 1; i < threads; i++) started[i] = pthread_create(&th[i], NULL, fill_thread, &jobs[i]) == 0;
  fill_thread(&jobs[0]);
  for (int i = 1; i < threads; i++) {
    if (started[i]) pthread_join(th[i], NULL);
    else fill_thread(&jobs[i]);
  }
  tu_rng rr = stream_rng(seed, 4, 0);
  fm_route(p, c->routing, &rr);
  return 0;
}

void fm_host_free(fm_host *p) {
  free(p->x), free(p->ids), free(p->tw), free(p->w1), free(p->w2), free(p->s1), free(p->s2), free(p->dec16);
  free(p->gen_tab);
  memset(p, 0, sizeof *p);
}

/* ---- the reference ------------------------------------------------------------------------ */

/* Quantization of n activations in groups of gs (scale amax / 448, 1 for a
 * zero group, e4m3 round to nearest even) as the device does it: out = our
 * dequantized values (from vr), dout = how far the device's can be, given
 * that its inputs lie in [vl, vh], its scale within SCALE_SLACK of
 * amax / 448 for an amax of those inputs, and its v / scale within QWIN of
 * exact.  enc is monotone, so the device's code lies between the codes of
 * the extreme quotients; the bound is the farthest corner (code x scale). */
static void quantize(const double *vr, const double *vl, const double *vh, int64_t n, int64_t gs, double *out,
                     double *dout) {
  for (int64_t g0 = 0; g0 < n; g0 += gs) {
    const int64_t g1 = g0 + gs < n ? g0 + gs : n;
    double ar = 0, alo = 0, ahi = 0;
    for (int64_t j = g0; j < g1; j++) {
      ar = fmax(ar, fabs(vr[j]));
      ahi = fmax(ahi, fmax(fabs(vl[j]), fabs(vh[j])));
      alo = fmax(alo, vl[j] > 0 ? vl[j] : vh[j] < 0 ? -vh[j] : 0.0);
    }
    const double sr = ar > 0 ? (double)(float)(ar / 448.0) : 1.0;
    for (int64_t j = g0; j < g1; j++) out[j] = dec8[fm_e4m3_encode(vr[j] / sr)] * sr;
    if (ahi == 0) { /* every input 0: scale 1, codes 0 */
      for (int64_t j = g0; j < g1; j++) dout[j] = 0;
      continue;
    }
    if (alo == 0) { /* the device's amax may be 0 (scale 1): crude but sound */
      for (int64_t j = g0; j < g1; j++) dout[j] = fabs(out[j]) + 1.01 * ahi + 0x1p-10;
      continue;
    }
    const double sl = (double)(float)(alo / 448.0) * (1 - SCALE_SLACK);
    const double sh = (double)(float)(ahi / 448.0) * (1 + SCALE_SLACK);
    for (int64_t j = g0; j < g1; j++) {
      const double t4[4] = {vl[j] / sl, vl[j] / sh, vh[j] / sl, vh[j] / sh};
      double tmin = t4[0], tmax = t4[0], tabs = 0;
      for (int i = 0; i < 4; i++) tmin = fmin(tmin, t4[i]), tmax = fmax(tmax, t4[i]), tabs = fmax(tabs, fabs(t4[i]));
      const double cmin = dec8[fm_e4m3_encode(tmin - QWIN * tabs)], cmax = dec8[fm_e4m3_encode(tmax + QWIN * tabs)];
      const double corner[4] = {cmin * sl, cmin * sh, cmax * sl, cmax * sh};
      double d = 0;
      for (int i = 0; i < 4; i++) d = fmax(d, fabs(corner[i] - out[j]));
      dout[j] = d;
    }
  }
}

typedef struct dotr {
  double s, a, d; /* sum of w v, sum of |w v|, sum of |w| dv */
} dotr;

/* A weight row (n entries at w) times v (dv: its bound, or NULL); FP8: the
 * codes' values times sc[b] per 128-block (BLOCK) or sc[0] (ROW). */
static dotr dot_row(const fm_host *p, const uint8_t *w, const float *sc, int64_t n, const double *v, const double *dv) {
  dotr r = {0, 0, 0};
  if (!FP8(p)) {
    const uint16_t *w16 = (const uint16_t *)(const void *)w;
    for (int64_t q = 0; q < n; q++) {
      const double wv = p->dec16[w16[q]], t = wv * v[q];
      r.s += t, r.a += fabs(t);
      if (dv) r.d += fabs(wv) * dv[q];
    }
    return r;
  }
  const int block = p->c->sc == CKJIT_FP8_SCALE_BLOCK;
  for (int64_t q0 = 0, b = 0; q0 < n; q0 += 128, b++) {
    double bs = 0, ba = 0, bd = 0;
    for (int64_t q = q0; q < q0 + 128 && q < n; q++) {
      const double wv = dec8[w[q]], t = wv * v[q];
      bs += t, ba += fabs(t), bd += fabs(wv) * dv[q];
    }
    const double s = block ? sc[b] : 1.0;
    r.s += s * bs, r.a += fabs(s) * ba, r.d += fabs(s) * bd;
  }
  if (!block) r.s *= sc[0], r.a *= fabs(sc[0]), r.d *= fabs(sc[0]);
  return r;
}

static dotr gate_up_row(const fm_host *p, int64_t e, int64_t row, const double *a, const double *da) {
  const fm_case *c = p->c;
  const int64_t H = c->hidden, I = c->inter;
  const uint8_t *w = p->w1 + (size_t)((e * 2 * I + row) * H) * (FP8(p) ? 1 : 2);
  const float *sc = !FP8(p) ? NULL
                    : c->sc == CKJIT_FP8_SCALE_ROW ? p->s1 + e * 2 * I + row
                                                   : p->s1 + (e * p->nb1 + row / 128) * p->kb1;
  return dot_row(p, w, sc, H, a, da);
}

static dotr down_row(const fm_host *p, int64_t e, int64_t i, const double *b, const double *db) {
  const fm_case *c = p->c;
  const int64_t H = c->hidden, I = c->inter;
  const uint8_t *w = p->w2 + (size_t)((e * H + i) * I) * (FP8(p) ? 1 : 2);
  const float *sc = !FP8(p) ? NULL
                    : c->sc == CKJIT_FP8_SCALE_ROW ? p->s2 + e * H + i
                                                   : p->s2 + (e * p->nb2 + i / 128) * p->kb2;
  return dot_row(p, w, sc, I, b, db);
}

typedef struct scratch {
  double *xr, *a, *da, *hr, *hl, *hh, *b, *db, *sl, *sh, *sr, *mag;
} scratch;

static void ref_token(const fm_host *p, int64_t t, scratch *s, double *lo, double *hi, double *ref) {
  const fm_case *c = p->c;
  const ckjit_dtype dt = c->dtype;
  const int64_t H = c->hidden, I = c->inter;
  const int fp8 = FP8(p), row_sc = c->sc == CKJIT_FP8_SCALE_ROW;
  const uint16_t *x16 = (const uint16_t *)(const void *)(p->x + (size_t)(t * p->ldx) * 2);
  for (int64_t q = 0; q < H; q++) s->xr[q] = p->dec16[x16[q]];
  if (fp8) quantize(s->xr, s->xr, s->xr, H, row_sc ? H : 128, s->a, s->da);
  else memcpy(s->a, s->xr, sizeof(double) * (size_t)H);
  const double *da = fp8 ? s->da : NULL;
  /* accumulation errors relative to sum |terms| (the test's comment) */
  const double c1 = fp8 ? (double)(p->kb1 + 4) * 0x1p-23 : c->random_data ? (double)(H + 8) * 0x1p-21 : 0.0;
  const double c2 = fp8 ? 0x1p-9 + (double)(p->kb2 + 4) * 0x1p-23 : (double)(I + 8) * 0x1p-21;
  const double slope = act_slope(c->act);
  for (int64_t i = 0; i < H; i++) s->sl[i] = s->sh[i] = s->sr[i] = s->mag[i] = 0;
  int valid = 0;
  for (int slot = 0; slot < c->k; slot++) {
    const int64_t e = p->ids[t * c->k + slot];
    if (!valid_id(p, e)) continue;
    valid++;
    const double w = p->tw[t * c->k + slot];
    for (int64_t j = 0; j < I; j++) {
      const dotr g = gate_up_row(p, e, j, s->a, da), u = gate_up_row(p, e, I + j, s->a, da);
      const double eg = c1 * (g.a + g.d) + g.d, eu = c1 * (u.a + u.d) + u.d;
      const double A = act_ref(c->act, g.s), dA = slope * eg + 0x1p-18 * (1 + fabs(g.s) + eg);
      const double P = A * u.s;
      double E = dA * (fabs(u.s) + eu) + fabs(A) * eu;
      E += 0x1p-22 * (fabs(P) + E);
      s->hr[j] = gt_round(dt, P), s->hl[j] = gt_round(dt, P - E), s->hh[j] = gt_round(dt, P + E);
    }
    if (fp8) quantize(s->hr, s->hl, s->hh, I, row_sc ? I : 128, s->b, s->db);
    else
      for (int64_t j = 0; j < I; j++) s->b[j] = s->hr[j], s->db[j] = fmax(s->hh[j] - s->hr[j], s->hr[j] - s->hl[j]);
    const double werr = p->tw_err ? p->tw_err[t * c->k + slot] : 0.0;
    for (int64_t i = 0; i < H; i++) {
      const dotr d = down_row(p, e, i, s->b, s->db);
      const double ed = c2 * (d.a + d.d) + d.d;
      double clo, chi, cr;
      if (p->tw_err) { /* g (within w +- werr) times the product rounded to dtype, in f32 */
        const double E = ed + 0x1p-22 * (fabs(d.s) + ed);
        const double rl = gt_round(dt, d.s - E), rh = gt_round(dt, d.s + E);
        clo = fmin((w - werr) * rl, (w + werr) * rl), chi = fmax((w - werr) * rh, (w + werr) * rh);
        clo -= 0x1p-23 * fabs(clo), chi += 0x1p-23 * fabs(chi);
        cr = w * gt_round(dt, d.s);
      } else {
        const double v = w * d.s;
        double E = fabs(w) * ed;
        E += 0x1p-22 * (fabs(v) + E);
        clo = gt_round(dt, v - E), chi = gt_round(dt, v + E), cr = gt_round(dt, v);
      }
      s->sl[i] += clo, s->sh[i] += chi, s->sr[i] += cr, s->mag[i] += fmax(fabs(clo), fabs(chi));
    }
  }
  for (int64_t i = 0; i < H; i++) {
    const double eps = valid * 0x1p-23 * s->mag[i];
    lo[i] = valid ? gt_round(dt, s->sl[i] - eps) : 0.0;
    hi[i] = valid ? gt_round(dt, s->sh[i] + eps) : 0.0;
    ref[i] = valid ? gt_round(dt, s->sr[i]) : 0.0;
  }
}

typedef struct ref_job {
  const fm_host *p;
  const int64_t *tok;
  int64_t first, end;
  double *lo, *hi, *ref;
} ref_job;

static void *ref_thread(void *arg) {
  ref_job *j = arg;
  const int64_t H = j->p->c->hidden, I = j->p->c->inter;
  double *mem = malloc(sizeof(double) * (size_t)(7 * H + 5 * I));
  if (!mem) {
    for (int64_t n = j->first; n < j->end; n++) /* no memory: an impossible interval fails the check */
      for (int64_t i = 0; i < H; i++) j->lo[n * H + i] = INFINITY, j->hi[n * H + i] = -INFINITY, j->ref[n * H + i] = NAN;
    return NULL;
  }
  scratch s = {mem, mem + H, mem + 2 * H, mem + 3 * H, mem + 3 * H + I, mem + 3 * H + 2 * I,
               mem + 3 * H + 3 * I, mem + 3 * H + 4 * I, mem + 3 * H + 5 * I, mem + 4 * H + 5 * I,
               mem + 5 * H + 5 * I, mem + 6 * H + 5 * I};
  for (int64_t n = j->first; n < j->end; n++) ref_token(j->p, j->tok[n], &s, j->lo + n * H, j->hi + n * H, j->ref + n * H);
  free(mem);
  return NULL;
}

void fm_reference(const fm_host *p, const int64_t *tok, int64_t n, double *lo, double *hi, double *ref, int threads) {
  enum { MAXT = 64 };
  if (threads < 1) threads = 1;
  if (threads > MAXT) threads = MAXT;
  if (threads > n) threads = n > 0 ? (int)n : 1;
  pthread_t th[MAXT];
  ref_job jobs[MAXT];
  int started[MAXT] = {0};
  for (int i = 0; i < threads; i++) jobs[i] = (ref_job){p, tok, n * i / threads, n * (i + 1) / threads, lo, hi, ref};
  for (int i = 1; i < threads; i++) started[i] = pthread_create(&th[i], NULL, ref_thread, &jobs[i]) == 0;
  ref_thread(&jobs[0]);
  for (int i = 1; i < threads; i++) {
    if (started[i]) pthread_join(th[i], NULL);
    else ref_thread(&jobs[i]);
  }
}
