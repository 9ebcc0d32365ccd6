/* fm_self_check (fused_moe_reference.h): runs before the suite, GPU or not.
 *
 *   - the e4m3 codec: every code round-trips, the values agree with
 *     fp8_reference.h's decoder, ties go to the even code, saturation;
 *   - the data premises the tolerance rests on (test_fused_moe_gpu.c): the
 *     exact 16-bit gate-up data are multiples of 1/8 and 2^-(wb + 4); the
 *     FP8 activations of x quantize, with scale amax / 448, to multiples of
 *     64 at least 1/8 step from any rounding boundary; w_gate_up's codes
 *     are 0, +-1/4, +-1/2;
 *   - the reference against a simulated device computing in f32 as a GPU
 *     would (sequential f32 sums; FP8 128-block sums cut to 13 bits, the
 *     way the tensor cores lose precision; hardware-style activations; the
 *     activation scale as amax * (1 / 448.f)): the honest device must land
 *     in every interval, and each planted bug (zeros, a wrong expert, a
 *     dropped slot, the routing weight ignored, another activation, gate
 *     and up swapped, invalid ids clamped into range, x's quantization
 *     truncating or per row under BLOCK, a transposed block scale) must
 *     fail somewhere. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fused_moe_reference.h"
#include "../gemm/fp8_reference.h"

enum { FMM_NONE, FMM_ZERO, FMM_EXPERT, FMM_DROP, FMM_WEIGHT, FMM_ACT, FMM_SWAP_GATE_UP, FMM_CLAMP,
       FMM_X_TRUNC, FMM_X_ROW, FMM_SCALE_T, FMM_COUNT };
static const char *const mut_names[] = {"none", "zeros", "wrong expert", "last slot dropped", "weight ignored",
                                        "other activation", "gate and up swapped", "invalid ids clamped",
                                        "x quantized by truncation", "x quantized per row (BLOCK)",
                                        "block scale transposed"};

#define SC_FAIL(...) (printf("FAIL fused_moe self-check: " __VA_ARGS__), printf("\n"), bad++)

/* ---- the simulated device ------------------------------------------------------------------- */

static float act_f(int act, float v) {
  if (act == CKJIT_UNARY_SILU) return v / (1.0f + expf(-v));
  if (act == CKJIT_UNARY_GELU_TANH) {
    const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    return v * (1.0f - 1.0f / (1.0f + expf(2.0f * u)));
  }
  return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
}

static float trunc13(float v) {
  if (v == 0.0f) return v;
  int e;
  const double m = frexp(v, &e);
  return (float)ldexp(trunc(ldexp(m, 13)), e - 13);
}

static uint8_t enc_trunc(double t) { /* toward zero: the largest code not past |t| */
  uint8_t c = fm_e4m3_encode(t);
  if (fabs(fm_e4m3_value(c)) > fabs(t) && (c & 0x7F)) c--;
  return c;
}

/* Quantizes n values in groups of gs: code values into q, scales per group into s. */
static void sim_quant(const float *v, int64_t n, int64_t gs, int trunc, float *q, float *s) {
  for (int64_t g0 = 0, g = 0; g0 < n; g0 += gs, g++) {
    const int64_t g1 = g0 + gs < n ? g0 + gs : n;
    float amax = 0;
    for (int64_t j = g0; j < g1; j++) amax = fmaxf(amax, fabsf(v[j]));
    s[g] = amax > 0 ? amax * (1.0f / 448.0f) : 1.0f;
    for (int64_t j = g0; j < g1; j++) {
      const float t = v[j] / s[g];
      q[j] = (float)fm_e4m3_value(trunc ? enc_trunc(t) : fm_e4m3_encode(t));
    }
  }
}

/* One weight row (n entries) times v (FP8: code values, vs their scales
 * per group of vg); sc: ROW one scale, BLOCK per 128-block. */
static float sim_dot(const fm_host *p, const uint8_t *w, const float *sc, int64_t n, const float *v, const float *vs,
                     int64_t vg) {
  if (p->c->wdt != CKJIT_FP8_E4M3) {
    const uint16_t *w16 = (const uint16_t *)(const void *)w;
    float acc = 0;
    for (int64_t q = 0; q < n; q++) acc += p->dec16[w16[q]] * v[q];
    return acc;
  }
  const int block = p->c->sc == CKJIT_FP8_SCALE_BLOCK;
  float acc = 0;
  for (int64_t q0 = 0, b = 0; q0 < n; q0 += 128, b++) {
    float bs = 0;
    for (int64_t q = q0; q < q0 + 128 && q < n; q++) bs += (float)fm_e4m3_value(w[q]) * v[q];
    bs = trunc13(bs);
    acc += block ? bs * vs[q0 / vg] * sc[b] : bs;
  }
  return block ? acc : acc * vs[0] * sc[0];
}

static void sim_token(const fm_host *p, int64_t t, int mut, float *y, float *buf) {
  const fm_case *c = p->c;
  const int64_t H = c->hidden, I = c->inter, E = c->experts;
  const int fp8 = c->wdt == CKJIT_FP8_E4M3, block = c->sc == CKJIT_FP8_SCALE_BLOCK;
  float *x = buf, *xq = x + H, *xs = xq + H, *h = xs + H, *hq = h + I, *hs = hq + I, *acc = hs + I;
  const uint16_t *x16 = (const uint16_t *)(const void *)(p->x + (size_t)(t * p->ldx) * 2);
  for (int64_t q = 0; q < H; q++) x[q] = p->dec16[x16[q]];
  const int64_t xg = block && mut != FMM_X_ROW ? 128 : H, hg = block ? 128 : I;
  if (fp8) sim_quant(x, H, xg, mut == FMM_X_TRUNC, xq, xs);
  else memcpy(xq, x, sizeof(float) * (size_t)H);
  for (int64_t i = 0; i < H; i++) acc[i] = 0;
  const size_t es = fp8 ? 1 : 2;
  for (int slot = 0; slot < c->k; slot++) {
    int64_t e = p->ids[t * c->k + slot];
    if (mut == FMM_CLAMP) e = e < 0 ? 0 : e >= E ? E - 1 : e;
    if (e < 0 || e >= E || (mut == FMM_DROP && slot == c->k - 1)) continue;
    if (mut == FMM_EXPERT && slot == 0) e = (e + 1) % E;
    const float w = mut == FMM_WEIGHT ? 1.0f : p->tw[t * c->k + slot];
    for (int64_t j = 0; j < I; j++) {
      float gu[2], sc[64];
      for (int half = 0; half < 2; half++) {
        const int64_t row = (half ^ (mut == FMM_SWAP_GATE_UP)) * I + j;
        for (int64_t b = 0; fp8 && b < (block ? p->kb1 : 1); b++) /* the transposed mistake: (K block, N block) */
          sc[b] = !block               ? p->s1[e * 2 * I + row]
                  : mut == FMM_SCALE_T ? p->s1[(e * p->nb1 + b % p->nb1) * p->kb1 + (row / 128) % p->kb1]
                                       : p->s1[(e * p->nb1 + row / 128) * p->kb1 + b];
        gu[half] = sim_dot(p, p->w1 + (size_t)((e * 2 * I + row) * H) * es, sc, H, xq, xs, xg);
      }
      const int act = mut == FMM_ACT ? (c->act == CKJIT_UNARY_SILU ? CKJIT_UNARY_GELU_ERF : CKJIT_UNARY_SILU) : c->act;
      h[j] = (float)gt_round(c->dtype, act_f(act, gu[0]) * gu[1]);
    }
    if (fp8) sim_quant(h, I, hg, 0, hq, hs);
    else memcpy(hq, h, sizeof(float) * (size_t)I);
    for (int64_t i = 0; i < H; i++) {
      const float *sc = !fp8 ? NULL : !block ? p->s2 + e * H + i : p->s2 + (e * p->nb2 + i / 128) * p->kb2;
      const float d = sim_dot(p, p->w2 + (size_t)((e * H + i) * I) * es, sc, I, hq, hs, hg);
      acc[i] += (float)gt_round(c->dtype, w * d);
    }
  }
  for (int64_t i = 0; i < H; i++) y[i] = mut == FMM_ZERO ? 0.0f : (float)gt_round(c->dtype, acc[i]);
}

/* ---- the checks ------------------------------------------------------------------------------ */

static int codec_checks(void) {
  int bad = 0;
  for (int code = 0; code < 256; code++) {
    const double v = fm_e4m3_value((uint8_t)code), w = fp8_value(CKJIT_FP8_E4M3, (uint8_t)code);
    if ((code & 0x7F) == 0x7F) {
      if (!isnan(v) || fm_e4m3_encode(v) != 0x7F) SC_FAIL("code 0x%02X is not NaN", code);
      continue;
    }
    if (v != w) SC_FAIL("code 0x%02X: %.9g, fp8_reference.h says %.9g", code, v, w);
    if (fm_e4m3_encode(v) != code) SC_FAIL("encode(%.9g) = 0x%02X, want 0x%02X", v, fm_e4m3_encode(v), code);
    if (code < 0x7E && code != 0x7F) { /* ties to even; just off a tie to the nearer */
      const double next = fm_e4m3_value((uint8_t)(code + 1)), mid = (v + next) / 2;
      const int neg = code >= 0x80, lo = code, hi = code + 1;
      if (neg) continue; /* the negative half mirrors (checked below) */
      if (fm_e4m3_encode(mid) != ((lo & 1) ? hi : lo)) SC_FAIL("tie %.9g -> 0x%02X", mid, fm_e4m3_encode(mid));
      if (fm_e4m3_encode(nextafter(mid, 0)) != lo || fm_e4m3_encode(nextafter(mid, 1e9)) != hi)
        SC_FAIL("near the tie %.9g", mid);
      if (fm_e4m3_encode(-mid) != (0x80 | ((lo & 1) ? hi : lo))) SC_FAIL("tie -%.9g", mid);
    }
  }
  const struct { double t; int code; } edge[] = {{448, 0x7E}, {463.9, 0x7E}, {464, 0x7E}, {1e30, 0x7E},
                                                 {INFINITY, 0x7E}, {-500, 0xFE}, {0x1p-10, 0x00},
                                                 {3 * 0x1p-10, 0x02}, {0x1p-9, 0x01}, {-0.0, 0x80}, {0x1p-12, 0}};
  for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
    if (fm_e4m3_encode(edge[i].t) != edge[i].code)
      SC_FAIL("encode(%g) = 0x%02X, want 0x%02X", edge[i].t, fm_e4m3_encode(edge[i].t), edge[i].code);
  return bad;
}

/* The exactness premises of the generated data (see the file comment). */
static int data_checks(const fm_host *p) {
  const fm_case *c = p->c;
  int bad = 0;
  const int64_t H = c->hidden;
  for (int64_t t = 0; t < c->tokens && !bad; t++) {
    const uint16_t *x16 = (const uint16_t *)(const void *)(p->x + (size_t)(t * p->ldx) * 2);
    if (c->wdt != CKJIT_FP8_E4M3) {
      for (int64_t q = 0; q < H && !c->random_data; q++) {
        const double v = p->dec16[x16[q]];
        if (v * 8 != nearbyint(v * 8) || fabs(v) > 1) SC_FAIL("x %.9g is not k / 8", v);
      }
      continue;
    }
    const int64_t gs = c->sc == CKJIT_FP8_SCALE_ROW ? H : 128;
    for (int64_t g0 = 0; g0 < H; g0 += gs) {
      double amax = 0;
      for (int64_t q = g0; q < g0 + gs && q < H; q++) amax = fmax(amax, fabs(p->dec16[x16[q]]));
      if (amax == 0) continue;
      const double s = amax / 448, r = s / ldexp(1.0, ilogb(s));
      if (r != 1 && r != 1.5) SC_FAIL("token %lld: scale %.9g is not 2^-m or 1.5 2^-m", (long long)t, s);
      for (int64_t q = g0; q < g0 + gs && q < H; q++) {
        const double tq = p->dec16[x16[q]] / s, code = fm_e4m3_value(fm_e4m3_encode(tq));
        int ex;
        (void)frexp(fabs(code) * (1 - 0x1p-10), &ex); /* the step below code: 2^(ex - 4) */
        const double room = code == 0 ? 0 : 0.375 * ldexp(1.0, ex - 4);
        if (fmod(code, 64) != 0 || fabs(tq - code) > room + 1e-9)
          SC_FAIL("token %lld: x / scale %.9g quantizes to %g (not a multiple of 64 with room)", (long long)t, tq, code);
      }
    }
  }
  if (c->wdt == CKJIT_FP8_E4M3)
    for (size_t i = 0; i < p->w1_elems && !bad; i++)
      if (!memchr("\x00\x28\x30\xA8\xB0", p->w1[i], 5)) SC_FAIL("w_gate_up code 0x%02X", p->w1[i]);
  return bad;
}

/* The reference of every token against the simulated device with mut:
 * the number of elements outside [lo, hi]. */
static long run_sim(const fm_host *p, const double *lo, const double *hi, int mut, double *worst) {
  const fm_case *c = p->c;
  const int64_t H = c->hidden;
  float *buf = malloc(sizeof(float) * (size_t)(4 * H + 3 * c->inter)), *y = malloc(sizeof(float) * (size_t)H);
  long out = 0;
  *worst = 0;
  if (!buf || !y) abort();
  for (int64_t t = 0; t < c->tokens; t++) {
    sim_token(p, t, mut, y, buf);
    for (int64_t i = 0; i < H; i++) {
      const double l = lo[t * H + i] - fm_atol(c->dtype), h = hi[t * H + i] + fm_atol(c->dtype);
      out += !(y[i] >= l && y[i] <= h);
      const double mid = (lo[t * H + i] + hi[t * H + i]) / 2, half = (hi[t * H + i] - lo[t * H + i]) / 2;
      if (half > 0) *worst = fmax(*worst, fabs(y[i] - mid) / half);
    }
  }
  free(buf), free(y);
  return out;
}

static int applies(const fm_case *c, int mut) {
  const int block = c->wdt == CKJIT_FP8_E4M3 && c->sc == CKJIT_FP8_SCALE_BLOCK;
  switch (mut) {
    case FMM_DROP: return c->k > 1;
    case FMM_CLAMP: return c->routing == FM_INVALID;
    case FMM_X_TRUNC: return c->wdt == CKJIT_FP8_E4M3;
    case FMM_X_ROW: return block;
    case FMM_SCALE_T: return block;
    default: return 1;
  }
}

static fm_case sc_case(const char *name, int64_t tokens, int E, int k, int64_t H, int64_t I, ckjit_dtype dt,
                       ckjit_dtype wdt, ckjit_fp8_scaling sc, ckjit_unary_op act, int routing) {
  fm_case c;
  memset(&c, 0, sizeof c);
  c.name = name, c.tokens = tokens, c.experts = E, c.k = k, c.hidden = H, c.inter = I, c.dtype = dt, c.wdt = wdt;
  c.sc = sc, c.act = act, c.routing = routing, c.ids = CKJIT_I32;
  return c;
}

int fm_self_check(void) {
  int bad = codec_checks();
  const ckjit_dtype B = CKJIT_BF16, F = CKJIT_F16, Q = CKJIT_FP8_E4M3;
  const ckjit_fp8_scaling R = CKJIT_FP8_SCALE_ROW, K = CKJIT_FP8_SCALE_BLOCK;
  fm_case cs[] = {
      sc_case("bf16 exact, invalid ids", 16, 4, 2, 272, 144, B, B, R, CKJIT_UNARY_SILU, FM_INVALID),
      sc_case("f16 random data", 6, 4, 3, 160, 144, F, F, R, CKJIT_UNARY_GELU_TANH, FM_UNIFORM),
      sc_case("bf16 k 1, invalid ids", 12, 4, 1, 272, 144, B, B, R, CKJIT_UNARY_GELU_ERF, FM_INVALID),
      sc_case("fp8 row", 12, 4, 2, 272, 144, B, Q, R, CKJIT_UNARY_GELU_ERF, FM_INVALID),
      sc_case("fp8 block, inter 192", 6, 4, 2, 272, 192, F, Q, K, CKJIT_UNARY_SILU, FM_UNIFORM),
      sc_case("fp8 block, 1024 x 640", 3, 3, 2, 1024, 640, B, Q, K, CKJIT_UNARY_SILU, FM_UNIFORM),
      sc_case("bf16 exact, 1024 x 640", 3, 3, 2, 1024, 640, B, B, R, CKJIT_UNARY_GELU_TANH, FM_ONE_EXPERT),
  };
  cs[1].random_data = 1;
  cs[3].zero_groups = cs[4].zero_groups = 1;
  for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++) {
    const fm_case *c = &cs[ci];
    fm_host p;
    const int64_t n = c->tokens, H = c->hidden;
    int64_t *tok = malloc(sizeof(int64_t) * (size_t)n);
    double *lo = malloc(sizeof(double) * (size_t)(n * H)), *hi = malloc(sizeof(double) * (size_t)(n * H));
    double *ref = malloc(sizeof(double) * (size_t)(n * H));
    if (!tok || !lo || !hi || !ref || fm_host_make(&p, c, 0x5EEDull + ci, 2)) abort();
    for (int64_t t = 0; t < n; t++) tok[t] = t;
    bad += data_checks(&p);
    fm_reference(&p, tok, n, lo, hi, ref, 2);
    for (int mut = 0; mut < FMM_COUNT; mut++) {
      if (!applies(c, mut)) continue;
      double worst;
      const long out = run_sim(&p, lo, hi, mut, &worst);
      if (getenv("FM_SELF_CHECK_VERBOSE"))
        printf("self-check [%s] %s: %ld of %lld outside, worst |y - mid| / half-width %.3f\n", c->name,
               mut_names[mut], out, (long long)(n * H), worst);
      if (mut == FMM_NONE && out) SC_FAIL("[%s]: the honest simulated device is outside %ld intervals", c->name, out);
      if (mut != FMM_NONE && !out) SC_FAIL("[%s]: the bug \"%s\" passes", c->name, mut_names[mut]);
    }
    fm_host_free(&p);
    free(tok), free(lo), free(hi), free(ref);
  }
  return bad;
}
