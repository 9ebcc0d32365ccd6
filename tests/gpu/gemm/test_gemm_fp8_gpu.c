/* GPU suite for ckjit_gemm_fp8 (ckjit/gemm_fp8.h) against an f64 reference
 * of the header's definition, computed from the dequantized inputs:
 *   D[i][j] = act(alpha * sum_kk deq(A)[i][kk] deq(B)[kk][j] + beta C[i][j]
 *                 + bias[i or j] + D0[i][j]) * D1[i][j]
 * (TENSOR / ROW / BLOCK scales; A row-major, B column-major, D row-major;
 * C, D0, D1 where a case passes them, C also in place as D; with beta 0
 * C holds NaN and must not be read).
 *
 * Inputs are random valid FP8 codes (never NaN, never e5m2 inf; one case
 * plants a NaN on purpose), decoded by fp8_value(), so the reference sees
 * what the GPU sees:  narrow: exponent field 0 .. bias + 1 (subnormals up to
 * ~3.75); full: every finite code (up to 448 / 57344; f32 / bf16 out only);
 * exact: values k / 4 in [-1, 1] with power-of-two scales, where every
 * partial sum of a K block is a multiple of 2^-4 below 2^7 (12 bits: exact
 * on any tensor-core adder of 13 bits or more; Hopper keeps about 14) and
 * the scaled block sums are exact in f32, so only the epilogue's rounding
 * is tolerated (gelu_tanh vs gelu_erf shows).  Scales are log-uniform in
 * [0.25, 4], block scales differ per block: self_checks() shows on the host
 * that a simulated device with a wrong scale index, the partial last block
 * on its neighbour's scale, ld_scale_a ignored, A read one code late or
 * gelu_erf for gelu_tanh fails the check, and the correct one passes.
 *
 * Tolerance of D[i][j] (S = sum_kk |deq(A)[i][kk] deq(B)[kk][j]|,
 * kb = ceil(k / 128), L = |alpha acc| + |beta C| + |bias| + |D0|):
 *   e = |alpha| S (b 2^-9 + (kb + 2) 2^-24)  [header: each 128-block summed
 *       on the tensor cores with fewer bits than f32, at most 2^-9 of its
 *       magnitude, b blocks a sum (1; more with CKJIT_GEMM_FP8_PROMOTE);
 *       kb f32 adds and the scaling; 0 for exact data]
 *     + L 2^-21                            [alpha, scales, bias: f32, x2]
 *   e_act = slope e + 2^-20 (1 + |v|) for the transcendental activations
 *           (slope 1 identity / relu, 1.2 gelu / silu, 0.25 sigmoid),
 *           then times |D1| plus 2^-23 |ref| (D1's f32 product)
 *   |got - ref| <= 2 r_out |ref| + 1.01 e_act + atol: r_out the relative
 *   half-ulp of out_dtype (2^-11 f16, 2^-8 bf16, 2^-24 f32: one ulp at ref),
 *   atol 2^-24 for f16 (subnormal spacing), else 1e-37.
 *
 * Poison: A's and B's padding (lda, ldb: k rounded up to 16, some wider)
 * and a guard after them are 0xFF (NaN in both formats); scales and bias
 * are NaN past their entries (and in unused ld_scale columns), so reading
 * any of it gives NaN.  D is 0xFF and must stay so outside its m x n
 * entries (ldd padding, a guard; all of it when m or n is 0); the inputs
 * must come back unchanged.  Calls run on the default stream (NULL), then
 * the test synchronizes.
 *
 * Runs on an sm_90 device with an sm_90 compile arch; elsewhere one small
 * call must return CKJIT_ERROR_UNSUPPORTED and the suite is skipped with
 * the reason (exit 77).  CKJIT_TEST_SKIP_LARGE=1 skips 1024 x 1024 x 4096
 * and 4096 x 4096 x 256.
 *
 * Clusters: calls run as the policy plans them (no clusters); every third
 * case and the edge cases (odd tile counts along N, a pair's second tile
 * past N) run again with CKJIT_GEMM_FP8_CLUSTER=2 (pairs of blocks, each
 * loading half of their shared A tile for both), which must give the same
 * bits (same tile, same K order).
 *
 * Promotion: every fifth case with tensor or row scales (and one with ~8
 * tiles a block, more than the stages) runs again with
 * CKJIT_GEMM_FP8_PROMOTE=0 (one tensor-core sum over all of K) and =3, its
 * D checked like the first (the tolerance bounds the tensor cores' sums
 * relative to S, however K is grouped). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "gpu_harness.h"

#include "fp8_cases.h"

static const char *const gen_names[] = {"narrow", "full", "exact"};
static const char *const act_names[] = {"identity", "relu", "gelu_tanh", "gelu_erf", "silu", "sigmoid"};
static const char *const sc_names[] = {"tensor", "row", "block"};
static const char *const bias_names[] = {"none", "row", "col"};

/* ---- set-up ------------------------------------------------------------------------ */

static int host_buf(gt_buf *b, ckjit_dtype dt, size_t elems) {
  memset(b, 0, sizeof *b);
  b->dt = dt;
  b->elems = elems + GUARD;
  b->host = malloc(b->elems * gt_esize(dt));
  return b->host ? 0 : -1;
}

static int to_device(gt_check *ck, gt_buf *b) {
  const size_t bytes = b->elems * gt_esize(b->dt);
  const ckjit_status st = ckjit_malloc(&b->dev, bytes);
  if (st != CKJIT_SUCCESS) {
    b->dev = NULL;
    gt_fail(ck, "ckjit_malloc(%zu): %s: %s", bytes, ckjit_status_string(st), ckjit_last_error());
    return -1;
  }
  return gt_buf_upload(ck, b);
}

static float gen_scale(const fcase *cs, tu_rng *r) {
  return cs->gen == GEN_EXACT ? ldexpf(1.0f, (int)tu_rng_range(r, -2, 2)) : (float)exp2(gt_uniform(r, -2.0, 2.0));
}

/* Fills the scale entries in use (`rows` rows of `used` entries, row stride
 * ld) and leaves NaN elsewhere. */
static void fill_scales(const fcase *cs, gt_buf *s, int64_t rows, int64_t used, int64_t ld, tu_rng *r) {
  gt_fill_nan(CKJIT_F32, s->host, s->elems);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t q = 0; q < used; q++) gt_put(CKJIT_F32, s->host, (size_t)(i * ld + q), gen_scale(cs, r));
}

/* The host side of case cs: operands, scales, bias, poisoned D, the
 * descriptor without device pointers. */
static int make_host(prob *p, const fcase *cs, tu_rng *r) {
  memset(p, 0, sizeof *p);
  p->cs = cs;
  const int64_t m = cs->m, n = cs->n, k = cs->k;
  p->kb = (k + 127) / 128;
  const int64_t k16 = k > 0 ? (k + 15) / 16 * 16 : 16; /* lda >= k, a multiple of 16 */
  p->lda = k16 + 16 * cs->lda_extra;
  p->ldb = k16 + 16 * cs->ldb_extra;
  p->ldd = n + cs->ldd_pad > 0 ? n + cs->ldd_pad : 1;
  const int64_t nbb = (n + 127) / 128; /* B's 128-column blocks */
  int64_t ra = 1, ua = 1, rb = 1, ub = 1; /* scale rows x entries used, TENSOR */
  p->lsa = p->lsb = 1;
  if (cs->sc == CKJIT_FP8_SCALE_ROW) ra = m, rb = n;
  if (cs->sc == CKJIT_FP8_SCALE_BLOCK) {
    p->lsa = cs->lsa_extra < 0 ? p->kb : p->kb + cs->lsa_extra;
    p->lsb = cs->lsb_extra < 0 ? p->kb : p->kb + cs->lsb_extra;
    ra = m, ua = p->kb, rb = nbb, ub = p->kb;
  }
  p->ldc = n + 3, p->ldd0 = n + 1, p->ldd1 = n > 0 ? n : 1; /* each its own */
  if (host_buf(&p->a, cs->at, (size_t)(m * p->lda)) || host_buf(&p->b, cs->bt, (size_t)(n * p->ldb)) ||
      host_buf(&p->d, cs->out, (size_t)(m * p->ldd)) || host_buf(&p->sa, CKJIT_F32, (size_t)(ra * p->lsa)) ||
      host_buf(&p->sb, CKJIT_F32, (size_t)(rb * p->lsb)) ||
      host_buf(&p->bias, cs->out, (size_t)(cs->bias == CKJIT_BIAS_PER_ROW ? m : n)) ||
      host_buf(&p->c, cs->out, (size_t)(m * p->ldc)) || host_buf(&p->d0, cs->out, (size_t)(m * p->ldd0)) ||
      host_buf(&p->d1, cs->out, (size_t)(m * p->ldd1)))
    return -1;
  memset(p->a.host, 0xFF, p->a.elems); /* NaN padding */
  memset(p->b.host, 0xFF, p->b.elems);
  for (int64_t i = 0; i < m; i++)
    for (int64_t q = 0; q < k; q++) p->a.host[i * p->lda + q] = gen_code(cs->at, cs->gen, r);
  for (int64_t j = 0; j < n; j++)
    for (int64_t q = 0; q < k; q++) p->b.host[j * p->ldb + q] = gen_code(cs->bt, cs->gen, r);
  if (cs->nan_a && m > 0 && k > 0) p->a.host[(m / 2) * p->lda + k / 3] = cs->at == E4 ? 0x7F : 0x7E;
  fill_scales(cs, &p->sa, ra, ua, p->lsa, r);
  fill_scales(cs, &p->sb, rb, ub, p->lsb, r);
  gt_fill_nan(cs->out, p->bias.host, p->bias.elems);
  for (size_t i = 0; i + GUARD < p->bias.elems && cs->bias != CKJIT_BIAS_NONE; i++)
    gt_put(cs->out, p->bias.host, i, gt_uniform(r, -4.0, 4.0));
  memset(p->d.host, 0xFF, p->d.elems * gt_esize(cs->out));
  /* C, D0, D1: NaN outside their m x n entries (and C everywhere when beta
   * is 0: never read); in place, D's entries hold C */
  gt_buf *const terms[3] = {&p->c, &p->d0, &p->d1};
  const int64_t lds[3] = {p->ldc, p->ldd0, p->ldd1};
  for (int t = 0; t < 3; t++) {
    gt_fill_nan(cs->out, terms[t]->host, terms[t]->elems);
    const int used = (cs->terms & (1 << t)) && (t || cs->beta != 0.0f);
    gt_buf *into = t == 0 && (cs->terms & T_IN_PLACE) ? &p->d : terms[t];
    const int64_t ld = into == &p->d ? p->ldd : lds[t];
    for (int64_t i = 0; used && i < m; i++)
      for (int64_t j = 0; j < n; j++)
        gt_put(cs->out, into->host, (size_t)(i * ld + j), t == 2 ? gt_uniform(r, -2.0, 2.0) : gt_uniform(r, -4.0, 4.0));
  }
  const size_t dbytes = p->d.elems * gt_esize(cs->out);
  p->before = malloc(dbytes);
  p->got = malloc(dbytes);
  if (!p->before || !p->got) return -1;
  memcpy(p->before, p->d.host, dbytes);

  ckjit_gemm_fp8_desc *d = &p->desc;
  ckjit_gemm_fp8_desc_init(d);
  d->m = m, d->n = n, d->k = k;
  d->a_dtype = cs->at, d->b_dtype = cs->bt, d->out_dtype = cs->out;
  d->lda = p->lda, d->ldb = p->ldb, d->ldd = p->ldd;
  d->scaling = cs->sc;
  if (cs->sc == CKJIT_FP8_SCALE_BLOCK) {
    d->ld_scale_a = cs->lsa_extra < 0 ? 0 : p->lsa;
    d->ld_scale_b = cs->lsb_extra < 0 ? 0 : p->lsb;
  }
  d->alpha = cs->alpha;
  d->bias_mode = cs->bias;
  d->activation = (ckjit_unary_op)cs->act;
  d->beta = cs->beta;
  d->ldc = cs->terms & T_IN_PLACE ? p->ldd : p->ldc, d->ldd0 = p->ldd0, d->ldd1 = p->ldd1;
  return 0;
}

/* The inputs (A, B, scales, bias, C, D0, D1), then D. */
enum { BUFS = 9 };
static gt_buf *bufs(prob *p, int i) {
  gt_buf *const all[BUFS] = {&p->a, &p->b, &p->sa, &p->sb, &p->bias, &p->c, &p->d0, &p->d1, &p->d};
  return all[i];
}

static int upload(gt_check *ck, prob *p) {
  for (int i = 0; i < BUFS; i++)
    if (to_device(ck, bufs(p, i))) return -1;
  ckjit_gemm_fp8_desc *d = &p->desc;
  const int terms = p->cs->terms;
  d->a = p->a.dev, d->b = p->b.dev, d->d = p->d.dev;
  d->scale_a = p->sa.dev, d->scale_b = p->sb.dev;
  d->bias = p->cs->bias != CKJIT_BIAS_NONE ? p->bias.dev : NULL;
  d->c = !(terms & T_C) ? NULL : terms & T_IN_PLACE ? p->d.dev : p->c.dev;
  d->d0 = terms & T_D0 ? p->d0.dev : NULL;
  d->d1 = terms & T_D1 ? p->d1.dev : NULL;
  return 0;
}

static void free_prob(prob *p) {
  for (int i = 0; i < BUFS; i++) gt_buf_free(bufs(p, i));
  free(p->before);
  free(p->got);
}

/* ---- checks -------------------------------------------------------------------------- */

static void check_outside(gt_check *ck, const prob *p) {
  const size_t s = gt_esize(p->cs->out);
  for (size_t e = 0; e < p->d.elems; e++) {
    const int in = (int64_t)e / p->ldd < p->cs->m && (int64_t)e % p->ldd < p->cs->n;
    if (!in && memcmp(p->got + e * s, p->before + e * s, s) != 0) {
      gt_fail(ck, "D written outside its m x n entries at element %zu (row %lld, col %lld; ldd %lld, %zu elements)",
              e, LL((int64_t)e / p->ldd), LL((int64_t)e % p->ldd), LL(p->ldd), p->d.elems);
      return;
    }
  }
  gt_pass(ck);
}

static void check_inputs(gt_check *ck, prob *p) {
  static const char *const names[BUFS - 1] = {"A", "B", "scale_a", "scale_b", "bias", "C", "D0", "D1"};
  for (int i = 0; i < BUFS - 1; i++) {
    gt_buf *b = bufs(p, i);
    const size_t bytes = b->elems * gt_esize(b->dt);
    uint8_t *tmp = bytes <= (16u << 20) ? malloc(bytes) : NULL;
    if (!tmp) continue;
    if (gt_buf_download(ck, b, tmp) == 0) {
      if (memcmp(tmp, b->host, bytes) != 0)
        gt_fail(ck, "input %s was modified", names[i]);
      else
        gt_pass(ck);
    }
    free(tmp);
  }
}

static void check_entry(gt_check *ck, const prob *p, const double *dA, const double *dB, int64_t i, int64_t j) {
  double ref, tol;
  ref_entry(p, dA + i * p->cs->k, dB + j * p->cs->k, i, j, &ref, &tol);
  const double got = gt_get(p->cs->out, p->got, (size_t)(i * p->ldd + j));
  if (gt_close(got, ref, tol))
    gt_pass(ck);
  else
    gt_fail(ck, "D[%lld][%lld] = %.9g, want %.9g (|diff| %.3g > tol %.3g)", LL(i), LL(j), got, ref,
            fabs(got - ref), tol);
}

static void check_values(gt_check *ck, const prob *p, tu_rng *r) {
  const fcase *cs = p->cs;
  const int64_t m = cs->m, n = cs->n, k = cs->k;
  if (m == 0 || n == 0) return;
  double *dA = malloc((size_t)((m + n) * k + 1) * sizeof(double)), *dB = dA + m * k;
  if (!dA) {
    gt_fail(ck, "host malloc failed");
    return;
  }
  dequant(p, MUT_NONE, dA, dB);
  if (cs->sample <= 0) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) check_entry(ck, p, dA, dB, i, j);
  } else {
    for (int s = 0; s < cs->sample; s++) check_entry(ck, p, dA, dB, tu_rng_range(r, 0, m - 1), tu_rng_range(r, 0, n - 1));
    for (int64_t j = 0; j < n; j++) check_entry(ck, p, dA, dB, m - 1, j);
    for (int64_t i = 0; i + 1 < m; i++) check_entry(ck, p, dA, dB, i, n - 1);
  }
  free(dA);
}

static void describe(const fcase *cs, const prob *p, uint64_t seed, char *buf, size_t len) {
  snprintf(buf, len,
           "[%s] %s x %s -> %s %s mnk=%lldx%lldx%lld lda=%lld ldb=%lld ldd=%lld ld_scale=%lld,%lld bias=%s act=%s "
           "alpha=%g%s%s%s%s beta=%g data=%s%s seed=%llu",
           cs->name, ckjit_dtype_name(cs->at), ckjit_dtype_name(cs->bt), ckjit_dtype_name(cs->out), sc_names[cs->sc],
           LL(cs->m), LL(cs->n), LL(cs->k), LL(p->lda), LL(p->ldb), LL(p->ldd), LL(p->desc.ld_scale_a),
           LL(p->desc.ld_scale_b), bias_names[cs->bias], act_names[cs->act], (double)cs->alpha,
           cs->terms & T_C ? " C" : "", cs->terms & T_IN_PLACE ? " (in place)" : "", cs->terms & T_D0 ? " D0" : "",
           cs->terms & T_D1 ? " D1" : "", (double)cs->beta, gen_names[cs->gen],
           cs->nan_a ? " +NaN" : "", (unsigned long long)seed);
}

/* D again in clusters of two: the same bits, padding included. */
static void check_in_clusters(gt_check *ck, prob *p) {
  const size_t bytes = p->d.elems * gt_esize(p->d.dt);
  uint8_t *again = malloc(bytes);
  if (!again) {
    gt_fail(ck, "host malloc failed");
    return;
  }
  setenv("CKJIT_GEMM_FP8_CLUSTER", "2", 1);
  const ckjit_status st = ckjit_gemm_fp8(&p->desc, NULL);
  unsetenv("CKJIT_GEMM_FP8_CLUSTER");
  if (st != CKJIT_SUCCESS)
    gt_fail(ck, "in clusters: ckjit_gemm_fp8 returned %s: %s", ckjit_status_string(st), ckjit_last_error());
  else if (!gt_sync(ck) && !gt_buf_download(ck, &p->d, again)) {
    size_t i = 0;
    while (i < bytes && again[i] == p->got[i]) i++;
    if (i < bytes)
      gt_fail(ck, "in clusters: D differs first at byte %zu (%02x vs %02x without)", i, again[i], p->got[i]);
  }
  free(again);
}

/* D again with other promotion intervals, checked against the reference. */
static void check_promotion_intervals(gt_check *ck, prob *p, tu_rng *r) {
  static const char *const intervals[2] = {"0", "3"};
  const int64_t blocks[2] = {p->kb, 3};
  for (int i = 0; i < 2; i++) {
    p->tc_blocks = blocks[i];
    setenv("CKJIT_GEMM_FP8_PROMOTE", intervals[i], 1);
    const ckjit_status st = ckjit_gemm_fp8(&p->desc, NULL);
    unsetenv("CKJIT_GEMM_FP8_PROMOTE");
    if (st != CKJIT_SUCCESS) {
      gt_fail(ck, "promote=%s: ckjit_gemm_fp8 returned %s: %s", intervals[i], ckjit_status_string(st),
              ckjit_last_error());
      return;
    }
    if (gt_sync(ck) || gt_buf_download(ck, &p->d, p->got)) return;
    const long f0 = ck->failures;
    check_outside(ck, p);
    check_values(ck, p, r);
    if (ck->failures != f0) printf("  (the failures above: CKJIT_GEMM_FP8_PROMOTE=%s)\n", intervals[i]);
  }
  p->tc_blocks = 1;
}

/* ---- the runner ----------------------------------------------------------------------------- */

/* Runs one case; returns its failures. */
static long run_case(gt_check *ck, size_t index, const fcase *cs, uint64_t seed) {
  const long f0 = ck->failures;
  tu_rng r = {seed};
  prob p;
  char d[600];
  const int made = make_host(&p, cs, &r);
  describe(cs, &p, seed, d, sizeof d);
  gt_check_begin(ck, "case %zu %s", index, d);
  if (made) gt_fail(ck, "host malloc failed");
  if (made || upload(ck, &p)) goto done;
  const ckjit_status st = ckjit_gemm_fp8(&p.desc, NULL); /* the default stream */
  if (st != CKJIT_SUCCESS) {
    gt_fail(ck, "ckjit_gemm_fp8 returned %s: %s", ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  gt_pass(ck);
  if (gt_sync(ck) || gt_buf_download(ck, &p.d, p.got)) goto done;
  check_outside(ck, &p);
  check_values(ck, &p, &r);
  check_inputs(ck, &p);
  if (cs->terms & T_IN_PLACE) goto done; /* D now holds the result, not C: no second call */
  if (cs->same_bits || index % 3 == 0) check_in_clusters(ck, &p);
  if (cs->sc != CKJIT_FP8_SCALE_BLOCK && (cs->promote || index % 5 == 1)) check_promotion_intervals(ck, &p, &r);
done:
  free_prob(&p);
  gt_check_end(ck);
  return ck->failures - f0;
}

/* ---- self-checks and the device requirement --------------------------------------------------- */

/* The reference against a simulated device on the host: the correct one
 * passes every entry, each bug (block 0's B scale everywhere, the partial
 * last block with its neighbour's scale, A's scale rows at ceil(k / 128)
 * instead of ld_scale_a, A read one code late, gelu_erf for gelu_tanh on
 * exact data) fails at least one.  Returns the wrong outcomes. */
static int mutation_checks(const fcase *cs, int first_mut, int last_mut) {
  int bad = 0;
  tu_rng r = {12345};
  prob p;
  const size_t na = (size_t)(cs->m * cs->k), nb = (size_t)(cs->n * cs->k);
  double *tA = malloc(2 * (na + nb) * sizeof(double)), *tB = tA + na, *dA = tB + nb, *dB = dA + na;
  if (!tA || make_host(&p, cs, &r)) return 1; /* tiny: not reached */
  dequant(&p, MUT_NONE, tA, tB);
  for (int mut = first_mut; mut <= last_mut; mut++) {
    dequant(&p, mut == MUT_ERF ? MUT_NONE : mut, dA, dB);
    long fails = 0;
    for (int64_t i = 0; i < cs->m; i++)
      for (int64_t j = 0; j < cs->n; j++) {
        double ref, tol;
        ref_entry(&p, tA + i * cs->k, tB + j * cs->k, i, j, &ref, &tol);
        fails += !gt_close(simulate(&p, dA + i * cs->k, dB + j * cs->k, i, j, mut), ref, tol);
      }
    if ((mut == MUT_NONE) != (fails == 0)) {
      printf("self-check [%s] mutation %d: %ld of %lld entries fail\n", cs->name, mut, fails, LL(cs->m * cs->n));
      bad++;
    }
  }
  free_prob(&p);
  free(tA);
  return bad;
}

static int self_checks(void) {
  int bad = 0;
  bad += fp8_value(E4, 0x7E) != 448.0 || fp8_value(E4, 0x01) != 0x1p-9 || fp8_value(E4, 0x08) != 0x1p-6;
  bad += fp8_value(E4, 0x38) != 1.0 || fp8_value(E4, 0xB4) != -0.75 || !isnan(fp8_value(E4, 0xFF));
  bad += fp8_value(E5, 0x7B) != 57344.0 || fp8_value(E5, 0x01) != 0x1p-16 || fp8_value(E5, 0x3C) != 1.0;
  bad += fp8_value(E5, 0x7C) != INFINITY || !isnan(fp8_value(E5, 0x7D)) || fp8_value(E5, 0xBA) != -0.75;
  bad += fabs(act_ref(CKJIT_UNARY_GELU_TANH, 1.0) - 0.8411919906) > 1e-9;
  tu_rng r = {7};
  for (int g = 0; g < 3; g++) /* the generators never make NaN / inf, narrow stays below 4 */
    for (int i = 0; i < 20000; i++) {
      const ckjit_dtype dt = i % 2 ? E5 : E4;
      const double v = fp8_value(dt, gen_code(dt, g, &r));
      bad += !isfinite(v) || (g == GEN_NARROW && fabs(v) >= 4.0) || (g == GEN_EXACT && v * 4 != floor(v * 4));
    }
  fcase c = mk("mutations block", E4, E5, CKJIT_BF16, BLK, 5, 260, 300);
  c.lsa_extra = 2, c.lsb_extra = 1, c.bias = CKJIT_BIAS_PER_COL, c.alpha = 0.5f;
  bad += mutation_checks(&c, MUT_NONE, MUT_A_SHIFT);
  c = mk("mutations k=256", E5, E4, CKJIT_F32, BLK, 3, 130, 256); /* lda == k: the shift reads the next row */
  c.lsa_extra = 1;
  bad += mutation_checks(&c, MUT_NONE, MUT_B_BLOCK0) + mutation_checks(&c, MUT_A_LD_DEFAULT, MUT_A_SHIFT);
  c = mk("mutations exact gelu", E4, E4, CKJIT_F32, ROW, 16, 40, 300);
  c.gen = GEN_EXACT, c.act = CKJIT_UNARY_GELU_TANH, c.bias = CKJIT_BIAS_PER_ROW, c.alpha = 0.75f;
  bad += mutation_checks(&c, MUT_NONE, MUT_NONE) + mutation_checks(&c, MUT_ERF, MUT_ERF);
  return bad;
}

/* sm_90 device and compile arch; elsewhere one small call must return
 * CKJIT_ERROR_UNSUPPORTED, and the suite is skipped.  (Any other answer
 * there runs the suite, which then checks it.) */
static int requires(gt_ctx *ctx, char *why, size_t len) {
  if (is_sm90(ctx->info.device_arch) && is_sm90(ctx->info.arch)) return 1;
  const fcase c = mk("probe", E4, E4, CKJIT_BF16, TEN, 16, 16, 32);
  tu_rng r = {1};
  prob p;
  gt_check_begin(ctx->ck, "unsupported-device probe");
  ckjit_status st = CKJIT_ERROR_INTERNAL;
  if (make_host(&p, &c, &r) == 0 && upload(ctx->ck, &p) == 0) st = ckjit_gemm_fp8(&p.desc, NULL);
  free_prob(&p);
  if (st == CKJIT_ERROR_UNSUPPORTED) {
    snprintf(why, len, "ckjit_gemm_fp8 needs sm_90; device %s (%s), compile arch %s: CKJIT_ERROR_UNSUPPORTED (%s)",
             ctx->info.name, ctx->info.device_arch, ctx->info.arch, ckjit_last_error());
    return 0;
  }
  printf("note: device %s, compile arch %s is not sm_90, yet ckjit_gemm_fp8 returned %s: running the cases\n",
         ctx->info.device_arch, ctx->info.arch, ckjit_status_string(st));
  return 1;
}

static gt_result run(gt_ctx *ctx) {
  if (ctx->skip_large)
    printf("SKIP large cases (1024x1024x4096, 4096x4096x256): CKJIT_TEST_SKIP_LARGE is set\n");
  build_cases(ctx->skip_large);
  int failed = 0;
  for (size_t i = 0; i < g_ncases; i++)
    failed += run_case(ctx->ck, i, &g_cases[i], ctx->seed ^ (0x9E3779B97F4A7C15ull * (i + 1))) != 0;
  printf("gemm_fp8: %zu cases (%d failed), %ld checks, %ld failures\n", g_ncases, failed, ctx->ck->checks,
         ctx->ck->failures);
  free(g_cases);
  return (gt_result){(long)g_ncases, failed};
}

static const gt_suite suite = {
    .name = "gemm_fp8_gpu",
    .cache_tag = "gemm-fp8-gpu",
    .self_check = self_checks,
    .requires = requires,
    .run = run,
    .check_stats = 1,
};

GT_MAIN(suite)
