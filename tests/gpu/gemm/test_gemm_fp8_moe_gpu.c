/* GPU suite for ckjit_gemm_fp8_moe (ckjit/gemm_fp8.h) against an f64
 * reference of the header's definition: for every row r that an expert e
 * owns,
 *   D[r][j] = act(alpha * sum_kk deq(A)[r][kk] deq(B_e)[kk][j] + bias_e[j])
 * with the scales of the case's scaling at the expert's offsets.
 *
 * Routing, as serving engines produce it:
 *   CONTIGUOUS  experts' rows one after another, each padded to 128 rows;
 *               tile_experts names each 128-row tile's expert, -1 for the
 *               unused tiles at the end, and some cases plant a tile with
 *               an expert id past the last (its rows must not be written);
 *               empty experts own no tile.
 *   MASKED      counts per expert of [experts][m] buffers: 0, 1, m, odd
 *               ones, and in some cases one out of range (-1, m + 1): that
 *               expert's D must not be written.
 * Cases cover each scaling, e4m3 / e5m2, bf16 / f16 / f32 out, bias per
 * column of each expert, activations, explicit and default strides, a
 * decode-sized batch over 64 experts (most empty), and experts with more
 * than 4,096 rows (sampled entries, plus the first and last row of every
 * expert).  Inputs are FP8 codes of exponent up to bias + 1 (fp8_reference.h),
 * scales log-uniform in [0.25, 4].  Tolerance as test_gemm_fp8_gpu's:
 * 2^-9 of the products' absolute sum (the tensor cores' FP8 sums of one
 * 128-block) plus f32 and output rounding.  D starts as 0xFF bytes: rows no
 * expert owns, and the padding past n, must stay so.  Inputs must come back
 * unchanged (they are not written).
 *
 * Runs on an sm_90 device with an sm_90 compile arch; elsewhere one call
 * must return CKJIT_ERROR_UNSUPPORTED and the suite is skipped with the
 * reason (exit 77).  CKJIT_TEST_SKIP_LARGE=1 skips the > 4,096-row cases.
 *
 * 16-bit experts (bf16 x bf16, f16 x f16, unscaled, the scales passed as
 * NULL): values k / 64 rounded to the type, tolerance (k + 8) 2^-23 of the
 * products' absolute sum (f32 sums on the tensor cores). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "gpu_harness.h"

#include "fp8_reference.h"

enum { CONTIG = CKJIT_MOE_CONTIGUOUS, MASKED = CKJIT_MOE_MASKED };
enum { TEN = CKJIT_FP8_SCALE_TENSOR, ROW = CKJIT_FP8_SCALE_ROW, BLK = CKJIT_FP8_SCALE_BLOCK };
#define MAXE 64

typedef struct mcase {
  const char *name;
  int layout, sc, experts;
  ckjit_dtype at, bt, out;
  int64_t m, n, k;    /* m: CONTIGUOUS capacity (set from the routing), MASKED rows per expert */
  int rows[MAXE];     /* CONTIGUOUS: each expert's tokens; MASKED: counts (may be out of range) */
  int bad_tile;       /* CONTIGUOUS: one more tile with expert id `experts + 2` */
  int free_tiles;     /* CONTIGUOUS: unused tiles (-1) at the end */
  int act, bias, wide_strides, large;
  float alpha;
} mcase;

typedef struct moe_prob {
  const mcase *cs;
  int64_t m, lda, ldb, ldd, kb, lsa, lsb, sa_stride, sb_stride, b_stride, a_stride, d_stride;
  int64_t tiles;             /* CONTIGUOUS: ceil(m / 128) */
  int32_t *owner;            /* per row of D (all experts' rows, MASKED: e * m + r): expert or -1 */
  gt_buf a, b, d, sa, sb, bias, route;
  uint8_t *got;
  ckjit_gemm_fp8_moe_desc desc;
} moe_prob;

static gt_buf *moe_bufs(moe_prob *p, int i) {
  gt_buf *const all[7] = {&p->a, &p->b, &p->d, &p->sa, &p->sb, &p->bias, &p->route};
  return all[i];
}

static int is16(ckjit_dtype t) { return t == CKJIT_BF16 || t == CKJIT_F16; }

/* Operand element i of an FP8 or 16-bit buffer, as a number. */
static double operand(ckjit_dtype t, const uint8_t *host, size_t i) {
  return is16(t) ? gt_get(t, host, i) : fp8_value(t, host[i]);
}

static float log_uniform(tu_rng *r) { return (float)exp2(tu_rng_range(r, -200, 200) / 100.0); }

/* Routing and buffers on the host, then on the device. */
static int make(gt_check *ck, moe_prob *p, const mcase *cs, tu_rng *r) {
  memset(p, 0, sizeof *p);
  p->cs = cs;
  const int E = cs->experts;
  const int64_t n = cs->n, k = cs->k;
  p->kb = (k + 127) / 128;
  p->lda = p->ldb = (k + 15) / 16 * 16;
  p->ldd = n + (cs->wide_strides ? 3 : 0);
  p->lsa = p->kb + (cs->wide_strides ? 1 : 0), p->lsb = p->kb + (cs->wide_strides ? 2 : 0);
  int64_t rows_total; /* rows of A and D over every expert */
  if (cs->layout == CONTIG) {
    int64_t tiles = cs->free_tiles + (cs->bad_tile ? 1 : 0);
    for (int e = 0; e < E; e++) tiles += (cs->rows[e] + 127) / 128;
    p->tiles = tiles;
    p->m = tiles * 128 - (cs->free_tiles ? 37 : 0); /* a partial last tile when one is free */
    rows_total = p->m;
  } else {
    p->m = cs->m;
    rows_total = p->m * E;
  }
  const int64_t m = p->m;
  p->a_stride = cs->layout == MASKED ? m * p->lda + (cs->wide_strides ? 32 : 0) : 0;
  p->d_stride = cs->layout == MASKED ? m * p->ldd + (cs->wide_strides ? 5 : 0) : 0;
  p->b_stride = n * p->ldb + (cs->wide_strides ? 48 : 0);
  const int64_t nb = (n + 127) / 128;
  p->sb_stride = cs->sc == TEN ? 1 : cs->sc == ROW ? n : nb * p->lsb;
  p->sb_stride += cs->wide_strides ? 2 : 0;
  p->sa_stride = cs->layout == CONTIG ? 0 : cs->sc == TEN ? 1 : cs->sc == ROW ? m : m * p->lsa;
  const size_t a_elems = cs->layout == MASKED ? (size_t)((E - 1) * p->a_stride + m * p->lda) : (size_t)(m * p->lda);
  const size_t d_elems = cs->layout == MASKED ? (size_t)((E - 1) * p->d_stride + m * p->ldd) : (size_t)(m * p->ldd);
  const size_t sa_elems = cs->sc == TEN ? (size_t)(cs->layout == MASKED ? E : 1)
                          : cs->layout == MASKED ? (size_t)((E - 1) * p->sa_stride + m * (cs->sc == ROW ? 1 : p->lsa))
                                                 : (size_t)(m * (cs->sc == ROW ? 1 : p->lsa));
  if (gt_buf_alloc(ck, &p->a, cs->at, a_elems) || gt_buf_alloc(ck, &p->b, cs->bt, (size_t)((E - 1) * p->b_stride + n * p->ldb)) ||
      gt_buf_alloc(ck, &p->d, cs->out, d_elems) || gt_buf_alloc(ck, &p->sa, CKJIT_F32, sa_elems) ||
      gt_buf_alloc(ck, &p->sb, CKJIT_F32, (size_t)((E - 1) * p->sb_stride + (cs->sc == TEN ? 1 : cs->sc == ROW ? n : nb * p->lsb))) ||
      gt_buf_alloc(ck, &p->bias, cs->out, (size_t)(E * n)) ||
      gt_buf_alloc(ck, &p->route, CKJIT_I32, (size_t)(cs->layout == CONTIG ? p->tiles : E)))
    return -1;
  for (size_t i = 0; i < p->a.elems; i++) {
    if (is16(cs->at)) gt_put(cs->at, p->a.host, i, tu_rng_range(r, -256, 256) / 64.0);
    else p->a.host[i] = gen_code(cs->at, GEN_NARROW, r);
  }
  for (size_t i = 0; i < p->b.elems; i++) {
    if (is16(cs->bt)) gt_put(cs->bt, p->b.host, i, tu_rng_range(r, -256, 256) / 64.0);
    else p->b.host[i] = gen_code(cs->bt, GEN_NARROW, r);
  }
  /* scales: NaN where no entry is (block scales' columns past ceil(k /
   * 128), the gaps of wide expert strides), so reading one there shows */
  for (size_t i = 0; i < p->sa.elems; i++) {
    const int64_t q = (int64_t)i % (p->sa_stride ? p->sa_stride : (int64_t)p->sa.elems) % (cs->sc == BLK ? p->lsa : 1 << 30);
    gt_put(CKJIT_F32, p->sa.host, i, cs->sc == BLK && q >= p->kb ? NAN : log_uniform(r));
  }
  const int64_t sb_used = cs->sc == TEN ? 1 : cs->sc == ROW ? n : nb * p->lsb;
  for (size_t i = 0; i < p->sb.elems; i++) {
    const int64_t q = (int64_t)i % p->sb_stride;
    const int hole = q >= sb_used || (cs->sc == BLK && q % p->lsb >= p->kb);
    gt_put(CKJIT_F32, p->sb.host, i, hole ? NAN : log_uniform(r));
  }
  for (size_t i = 0; i < p->bias.elems; i++) gt_put(cs->out, p->bias.host, i, tu_rng_range(r, -400, 400) / 100.0);
  memset(p->d.host, 0xFF, p->d.elems * gt_esize(cs->out));
  p->owner = malloc((size_t)rows_total * sizeof *p->owner);
  p->got = malloc(p->d.elems * gt_esize(cs->out));
  if (!p->owner || !p->got) return -1;
  int32_t *route = (int32_t *)p->route.host;
  if (cs->layout == CONTIG) {
    int64_t t = 0;
    for (int e = 0; e < E; e++)
      for (int i = 0; i < (cs->rows[e] + 127) / 128; i++) route[t++] = e;
    if (cs->bad_tile) route[t++] = E + 2;
    while (t < p->tiles) route[t++] = -1;
    for (int64_t row = 0; row < m; row++) {
      const int32_t e = route[row / 128];
      p->owner[row] = e >= 0 && e < E ? e : -1;
    }
  } else {
    for (int e = 0; e < E; e++) {
      route[e] = cs->rows[e];
      const int ok = cs->rows[e] >= 0 && cs->rows[e] <= m;
      for (int64_t row = 0; row < m; row++) p->owner[e * m + row] = ok && row < cs->rows[e] ? e : -1;
    }
  }
  for (int i = 0; i < 7; i++)
    if (gt_buf_upload(ck, moe_bufs(p, i))) return -1;
  ckjit_gemm_fp8_moe_desc *d = &p->desc;
  ckjit_gemm_fp8_moe_desc_init(d);
  ckjit_gemm_fp8_desc *g = &d->gemm;
  g->m = m, g->n = n, g->k = k, g->a_dtype = cs->at, g->b_dtype = cs->bt, g->out_dtype = cs->out;
  g->a = p->a.dev, g->lda = p->lda, g->b = p->b.dev, g->ldb = p->ldb, g->d = p->d.dev, g->ldd = p->ldd;
  g->scaling = (ckjit_fp8_scaling)cs->sc, g->scale_a = p->sa.dev, g->scale_b = p->sb.dev;
  if (is16(cs->at)) g->scale_a = g->scale_b = NULL; /* not read */
  g->ld_scale_a = cs->wide_strides ? p->lsa : 0, g->ld_scale_b = cs->wide_strides ? p->lsb : 0;
  g->alpha = cs->alpha, g->activation = cs->act;
  if (cs->bias) g->bias = p->bias.dev, g->bias_mode = CKJIT_BIAS_PER_COL;
  d->layout = cs->layout, d->experts = E;
  if (cs->layout == CONTIG) d->tile_experts = p->route.dev;
  else d->counts = p->route.dev;
  /* explicit strides where they differ from the defaults (and always in
   * wide cases); the MASKED tensor scale per expert is explicit too */
  if (cs->wide_strides) {
    d->stride_b = p->b_stride, d->stride_scale_b = p->sb_stride;
    if (cs->layout == MASKED) d->stride_a = p->a_stride, d->stride_d = p->d_stride;
  }
  if (cs->layout == MASKED) d->stride_scale_a = p->sa_stride;
  return 0;
}

static void free_moe(moe_prob *p) {
  for (int i = 0; i < 7; i++) gt_buf_free(moe_bufs(p, i));
  free(p->owner);
  free(p->got);
}

/* Reference of D's row `row` (of all experts' rows), column j. */
static void reference(const moe_prob *p, int64_t row, int64_t j, double *ref, double *tol) {
  const mcase *cs = p->cs;
  const int e = p->owner[row];
  const int64_t r = cs->layout == MASKED ? row % p->m : row; /* the row within its expert's A */
  const size_t ar = (size_t)((cs->layout == MASKED ? e * p->a_stride : 0) + r * p->lda),
               bc = (size_t)(e * p->b_stride + j * p->ldb);
  const float *sa = (const float *)p->sa.host + e * p->sa_stride, *sb = (const float *)p->sb.host + e * p->sb_stride;
  double acc = 0, s = 0;
  for (int64_t q = 0; q < cs->k; q++) {
    double a = operand(cs->at, p->a.host, ar + (size_t)q), b = operand(cs->bt, p->b.host, bc + (size_t)q);
    if (is16(cs->at)) { /* unscaled */
    } else if (cs->sc == TEN) a *= sa[0], b *= sb[0];
    else if (cs->sc == ROW) a *= sa[r], b *= sb[j];
    else a *= sa[r * p->lsa + q / 128], b *= sb[(j / 128) * p->lsb + q / 128];
    acc += a * b;
    s += fabs(a * b);
  }
  const double bias = cs->bias ? gt_get(cs->out, p->bias.host, (size_t)(e * cs->n + j)) : 0.0;
  const double pre = cs->alpha * acc + bias;
  const double sum_err = is16(cs->at) ? (double)(cs->k + 8) * 0x1p-23 : 0x1p-9 + (double)(p->kb + 2) * 0x1p-24;
  double err = fabs(cs->alpha) * s * sum_err + (fabs(cs->alpha * acc) + fabs(bias)) * 0x1p-21;
  err = act_slope(cs->act) * err + (cs->act >= CKJIT_UNARY_GELU_TANH ? 0x1p-20 * (1.0 + fabs(pre)) : 0.0);
  *ref = act_ref(cs->act, pre);
  *tol = 2.0 * out_round(cs->out) * fabs(*ref) + 1.01 * err + (cs->out == CKJIT_F16 ? 0x1p-24 : 1e-37);
}

/* Element index in D of row `row` (of all experts' rows), column j. */
static size_t d_index(const moe_prob *p, int64_t row, int64_t j) {
  if (p->cs->layout == MASKED) return (size_t)((row / p->m) * p->d_stride + (row % p->m) * p->ldd + j);
  return (size_t)(row * p->ldd + j);
}

static void check_entry(gt_check *ck, const moe_prob *p, int64_t row, int64_t j) {
  double ref, tol;
  reference(p, row, j, &ref, &tol);
  const double got = gt_get(p->cs->out, p->got, d_index(p, row, j));
  if (gt_close(got, ref, tol)) gt_pass(ck);
  else gt_fail(ck, "row %lld (expert %d) col %lld = %.9g, want %.9g (tol %.3g)", (long long)row, p->owner[row],
               (long long)j, got, ref, tol);
}

/* Every owned row's entries (sampled in large cases, plus each expert's
 * first and last row); every element no row owns still 0xFF. */
static void check_d(gt_check *ck, const moe_prob *p, tu_rng *r) {
  const mcase *cs = p->cs;
  const int64_t all = cs->layout == MASKED ? p->m * cs->experts : p->m;
  const size_t es = gt_esize(cs->out);
  long untouched_bad = 0;
  for (size_t i = 0; i < p->d.elems; i++) {
    int owned = 0;
    if (cs->layout == MASKED) {
      const int64_t e = (int64_t)i / p->d_stride, rem = (int64_t)i % p->d_stride;
      owned = e < cs->experts && rem / p->ldd < p->m && rem % p->ldd < cs->n && p->owner[e * p->m + rem / p->ldd] >= 0;
    } else {
      owned = (int64_t)i / p->ldd < p->m && (int64_t)i % p->ldd < cs->n && p->owner[(int64_t)i / p->ldd] >= 0;
    }
    if (owned) continue;
    for (size_t b = 0; b < es; b++) untouched_bad += p->got[i * es + b] != 0xFF;
  }
  if (untouched_bad) gt_fail(ck, "%ld bytes of D outside the experts' rows were written", untouched_bad);
  else gt_pass(ck);
  if (!cs->large) {
    for (int64_t row = 0; row < all; row++)
      if (p->owner[row] >= 0)
        for (int64_t j = 0; j < cs->n; j++) check_entry(ck, p, row, j);
    return;
  }
  for (int s = 0; s < 3000; s++) {
    const int64_t row = tu_rng_range(r, 0, all - 1);
    if (p->owner[row] >= 0) check_entry(ck, p, row, tu_rng_range(r, 0, cs->n - 1));
  }
  for (int64_t row = 0; row < all; row++) /* each expert's first and last rows */
    if (p->owner[row] >= 0 && (row == 0 || p->owner[row - 1] != p->owner[row] || row + 1 == all ||
                               p->owner[row + 1] != p->owner[row]))
      for (int64_t j = 0; j < cs->n; j += 7) check_entry(ck, p, row, j);
}

static long run_case(gt_check *ck, size_t index, const mcase *cs, uint64_t seed) {
  const long f0 = ck->failures;
  tu_rng r = {seed};
  moe_prob p;
  gt_check_begin(ck, "case %zu [%s] %s %s experts=%d n=%lld k=%lld seed=%llu", index, cs->name,
                 cs->layout == CONTIG ? "contiguous" : "masked", cs->sc == TEN ? "tensor" : cs->sc == ROW ? "row" : "block",
                 cs->experts, (long long)cs->n, (long long)cs->k, (unsigned long long)seed);
  if (make(ck, &p, cs, &r)) goto done;
  const ckjit_status st = ckjit_gemm_fp8_moe(&p.desc, NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(ck, "ckjit_gemm_fp8_moe returned %s: %s", ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  if (gt_sync(ck) || gt_buf_download(ck, &p.d, p.got)) goto done;
  check_d(ck, &p, &r);
  const size_t a_bytes = p.a.elems * gt_esize(cs->at), b_bytes = p.b.elems * gt_esize(cs->bt);
  uint8_t *back = malloc(a_bytes + b_bytes);
  if (back && !gt_buf_download(ck, &p.a, back) && !gt_buf_download(ck, &p.b, back + a_bytes)) {
    if (memcmp(back, p.a.host, a_bytes) || memcmp(back + a_bytes, p.b.host, b_bytes))
      gt_fail(ck, "A or B changed");
    else gt_pass(ck);
  }
  free(back);
done:
  free_moe(&p);
  gt_check_end(ck);
  return ck->failures - f0;
}

static mcase mk(const char *name, int layout, int sc, ckjit_dtype out, int experts, int64_t n, int64_t k) {
  mcase c;
  memset(&c, 0, sizeof c);
  c.name = name, c.layout = layout, c.sc = sc, c.out = out, c.experts = experts, c.n = n, c.k = k;
  c.at = c.bt = CKJIT_FP8_E4M3, c.alpha = 1.0f;
  return c;
}

static size_t build(mcase *cs, int skip_large) {
  size_t i = 0;
  mcase c;
  c = mk("two tiles, an empty expert, a bad id", CONTIG, TEN, CKJIT_BF16, 3, 200, 300);
  c.rows[0] = 130, c.rows[1] = 0, c.rows[2] = 5, c.bad_tile = 1, c.free_tiles = 2, cs[i++] = c;
  c = mk("row scales, bias, relu", CONTIG, ROW, CKJIT_F32, 8, 129, 129);
  for (int e = 0; e < 8; e++) c.rows[e] = (int[]){17, 0, 200, 1, 128, 0, 255, 3}[e];
  c.bias = 1, c.act = CKJIT_UNARY_RELU, c.at = CKJIT_FP8_E5M2, c.free_tiles = 1, cs[i++] = c;
  c = mk("block scales", CONTIG, BLK, CKJIT_BF16, 4, 333, 1000);
  for (int e = 0; e < 4; e++) c.rows[e] = (int[]){40, 300, 0, 129}[e];
  c.alpha = 0.5f, c.bt = CKJIT_FP8_E5M2, cs[i++] = c;
  c = mk("block, wide strides", CONTIG, BLK, CKJIT_F16, 3, 200, 300);
  for (int e = 0; e < 3; e++) c.rows[e] = (int[]){7, 129, 64}[e];
  c.wide_strides = 1, c.bias = 1, c.act = CKJIT_UNARY_SILU, cs[i++] = c;
  c = mk("decode: 16 tokens over 64 experts", CONTIG, BLK, CKJIT_BF16, 64, 256, 512);
  for (int e = 0; e < 64; e += 4) c.rows[e] = 1;
  cs[i++] = c;
  c = mk("masked counts 0, 1, m, odd", MASKED, TEN, CKJIT_BF16, 5, 200, 256);
  c.m = 300;
  for (int e = 0; e < 5; e++) c.rows[e] = (int[]){0, 1, 300, 129, 77}[e];
  cs[i++] = c;
  c = mk("masked row, a count out of range", MASKED, ROW, CKJIT_F16, 4, 257, 100);
  c.m = 130;
  for (int e = 0; e < 4; e++) c.rows[e] = (int[]){130, -1, 64, 131}[e];
  c.bias = 1, c.act = CKJIT_UNARY_GELU_TANH, cs[i++] = c;
  c = mk("masked block, wide strides", MASKED, BLK, CKJIT_F32, 2, 384, 640);
  c.m = 256, c.rows[0] = 256, c.rows[1] = 200, c.wide_strides = 1, c.alpha = -1.5f, cs[i++] = c;
  c = mk("bf16 experts, bias, silu", CONTIG, TEN, CKJIT_BF16, 5, 300, 272);
  for (int e = 0; e < 5; e++) c.rows[e] = (int[]){129, 0, 1, 300, 64}[e];
  c.at = c.bt = CKJIT_BF16, c.bias = 1, c.act = CKJIT_UNARY_SILU, c.bad_tile = 1, c.free_tiles = 1, cs[i++] = c;
  c = mk("bf16 experts, 128 x 256 tiles (sampled)", CONTIG, TEN, CKJIT_BF16, 8, 1040, 520);
  for (int e = 0; e < 8; e++) c.rows[e] = (int[]){700, 129, 0, 513, 1, 900, 256, 77}[e];
  c.at = c.bt = CKJIT_BF16, c.alpha = 0.75f, c.large = 1, cs[i++] = c;
  c = mk("f16 experts masked, wide strides", MASKED, TEN, CKJIT_F32, 3, 200, 144);
  c.m = 150, c.rows[0] = 150, c.rows[1] = 0, c.rows[2] = 61, c.wide_strides = 1;
  c.at = c.bt = CKJIT_F16, c.bias = 1, c.act = CKJIT_UNARY_GELU_ERF, cs[i++] = c;
  c = mk("masked tensor, wide strides", MASKED, TEN, CKJIT_BF16, 3, 136, 48);
  c.m = 70, c.rows[0] = 70, c.rows[1] = 0, c.rows[2] = 33, c.wide_strides = 1, c.at = CKJIT_FP8_E5M2, cs[i++] = c;
  if (!skip_large) {
    c = mk("an expert past 4096 rows", CONTIG, BLK, CKJIT_BF16, 3, 256, 512);
    c.rows[0] = 4500, c.rows[1] = 1, c.rows[2] = 0, c.large = 1, cs[i++] = c;
    c = mk("masked past 4096 rows", MASKED, ROW, CKJIT_BF16, 2, 300, 256);
    c.m = 4352, c.rows[0] = 4352, c.rows[1] = 4100, c.large = 1, cs[i++] = c;
  }
  return i;
}

static int requires(gt_ctx *ctx, char *why, size_t len) {
  if (is_sm90(ctx->info.device_arch) && is_sm90(ctx->info.arch)) return 1;
  mcase c = mk("probe", CONTIG, TEN, CKJIT_BF16, 1, 16, 32);
  c.rows[0] = 16;
  tu_rng r = {1};
  moe_prob p;
  gt_check_begin(ctx->ck, "unsupported-device probe");
  ckjit_status st = CKJIT_ERROR_INTERNAL;
  if (make(ctx->ck, &p, &c, &r) == 0) st = ckjit_gemm_fp8_moe(&p.desc, NULL);
  free_moe(&p);
  gt_check_end(ctx->ck);
  if (st == CKJIT_ERROR_UNSUPPORTED) {
    snprintf(why, len, "ckjit_gemm_fp8_moe needs sm_90; device %s (%s), compile arch %s: CKJIT_ERROR_UNSUPPORTED (%s)",
             ctx->info.name, ctx->info.device_arch, ctx->info.arch, ckjit_last_error());
    return 0;
  }
  printf("note: device %s, compile arch %s is not sm_90, yet ckjit_gemm_fp8_moe returned %s: running the cases\n",
         ctx->info.device_arch, ctx->info.arch, ckjit_status_string(st));
  return 1;
}

static gt_result run(gt_ctx *ctx) {
  if (ctx->skip_large) printf("SKIP the > 4096-row cases: CKJIT_TEST_SKIP_LARGE is set\n");
  static mcase cases[16];
  const size_t count = build(cases, ctx->skip_large);
  int failed = 0;
  for (size_t i = 0; i < count; i++)
    failed += run_case(ctx->ck, i, &cases[i], ctx->seed ^ (0x9E3779B97F4A7C15ull * (i + 1))) != 0;
  printf("gemm_fp8_moe: %zu cases (%d failed), %ld checks, %ld failures\n", count, failed, ctx->ck->checks,
         ctx->ck->failures);
  return (gt_result){(long)count, failed};
}

static const gt_suite suite = {
    .name = "gemm_fp8_moe_gpu",
    .cache_tag = "gemm-fp8-moe-gpu",
    .requires = requires,
    .run = run,
    .check_stats = 1,
};

GT_MAIN(suite)
