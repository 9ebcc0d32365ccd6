/* GPU suite for ckjit_gemm and ckjit_gemm_grouped against an f64 CPU
 * reference of the epilogue the header documents:
 *   v = alpha * sum_k A[i][k] B[k][j] + beta * C[i][j] + bias[i or j] + D0[i][j]
 *   v = activation(v) * D1[i][j], rounded to out_dtype.
 * Inputs are generated in double and rounded to their dtype first; the
 * reference reads the rounded values back, so it sees exactly what the GPU
 * sees.  Values are uniform in [-1, 1] (or, for the "exact" cases, multiples
 * of 1/8 in [-1, 1], whose products and sums are exact in f32 up to k = 2^17
 * whatever the summation order, tensor cores and split-k included: any
 * missing or doubled term shows, and the tolerance is only the epilogue's;
 * the activation cases and most split-k cases use them, since the worst-case
 * accumulation bound below is too wide at k = 4096 to see one wrong term or
 * gelu_tanh swapped for gelu_erf).  Exits 77 (skip) without a GPU (the driver:
 * tests/common/gpu_harness.c).
 *
 * Coverage: every (a_order, b_order) x ab_dtype {f16, bf16} x out_dtype {f16,
 * bf16, f32}, aligned and odd shapes; f32 inputs in SIMT and with
 * allow_tf32; each activation; bias per row / per column; beta * C
 * (separate and in place, c == d); D0; D1; all together; edge shapes (1x1x1,
 * k = 1, k = 0, m = 0, n = 0, m or n < 16, k not a multiple of 32 / 64);
 * padded odd leading dimensions; pointers misaligned by one element; random
 * shapes and options; batch 3 with gaps between entries and stride-0
 * broadcast of A, B or C; grouped GEMMs (mixed shapes, m = 1, k % 8 != 0,
 * empty problems, per-problem alpha / beta; 20 problems in several launches
 * of each wgmma path); split_k 2, 3, 7 and 0 (auto) on
 * decode shapes (m = 1, 16, k = 4096 and 4093); the decode tile (m <= 16)
 * with every order pair and epilogue, split and not; the wgmma 128 x 64
 * and 64 x 64 tiles (1024^3, 128 x 4096 x 4096, split, odd edges); Stream-K (decode shapes,
 * 1024^3, partial edge tiles with every epilogue, batch 3, a tail wave
 * beside whole tiles, tf32 in 32-deep steps); every case whose split_k is
 * not 1 runs a second time on the same inputs and must give the same bits
 * (split-k must not depend on scheduling); 4095 x 4097 x 1001 (a random sample
 * of 3000 entries plus the whole last row and last column are checked).
 * Every output buffer is poisoned (0xFF) and checked afterwards outside the
 * m x n matrices (padding past n, gaps between batch entries, the bytes
 * before a misaligned pointer, a guard after the end); every input buffer
 * holds NaN outside its matrices (a kernel reading padding into a result
 * shows) and is checked unchanged after the call.
 *
 * Tolerance of each output entry (S = sum_k |A[i][k] B[k][j]|
 * of the rounded inputs; L = |alpha acc| + |beta C| + |bias| + |D0|):
 *   e_lin = |alpha| S ((k + 8) 2^-21 [f32 accumulation: worst case ~ k ulps of
 *           2^-23 with round-toward-zero tensor-core adds, x4]; 0 for exact data)
 *         + |alpha| S 2^-9 [allow_tf32: both inputs cut to 10 mantissa bits;
 *           0 for exact data]
 *         + L 2^-21 [up to 4 f32 roundings in alpha, beta C, bias, D0, x2]
 *   e_act = slope e_lin + 2^-20 (1 + |v|) for gelu / silu / sigmoid
 *           (__expf-style approximations), slope 1 (identity, relu),
 *           1.2 (gelu_tanh, gelu_erf, silu: max |f'| = 1.13, 1.10), 0.25 (sigmoid)
 *   e_d1  = |D1| e_act + 2^-22 |result| [one f32 rounding, x2]
 *   |got - ref| <= 2 r_out |ref| + 1.01 e_d1 + atol, where r_out, the
 *   relative half-ulp of out_dtype, is 2^-11 (f16), 2^-8 (bf16), 2^-24 (f32),
 *   and atol is 2^-24 for f16 (subnormal spacing), 1e-37 otherwise (FTZ).
 *
 * Environment: CKJIT_TEST_SEED (default: time), CKJIT_TEST_SKIP_LARGE=1
 * (skip 4095 x 4097 x 1001 and the 65537 x 32768 x 24 case whose D is past
 * 2^31 elements).
 *
 * The cases are listed in gemm_cases.c; the driver is
 * tests/common/gpu_harness.c. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckjit/ckjit.h"
#include "gemm_gpu.h"
#include "gpu_harness.h"
#include "epilogue_reference.h"

static const char *const opnd_names[NOPS] = {"A", "B", "C", "D", "D0", "D1", "bias"};
static const char *const act_names[] = {"identity", "relu", "gelu_tanh", "gelu_erf", "silu", "sigmoid"};

typedef struct operand {
  int used;
  gt_buf buf;
  int64_t off, ld, stride, rows, cols, nb; /* storage: rows x cols, row stride ld; nb batch entries stored */
} operand;

typedef struct prob {
  int64_t m, n, k;
  float alpha, beta;
  operand o[NOPS];
  uint8_t *before, *got; /* D's bytes before the call (C values when in place) and after */
  ckjit_gemm_desc desc;
} prob;

/* ---- reference ------------------------------------------------------------------ */

/* act_ref, act_slope, out_round: epilogue_reference.h */

static size_t oidx(const operand *o, int64_t b, int64_t r, int64_t c) {
  return (size_t)(o->off + (o->stride ? b : 0) * o->stride + r * o->ld + c);
}

/* Reference and tolerance of D[i][j] of batch entry b; ar = row i of A,
 * bc = column j of B (k doubles each). */
static void ref_entry(const gcase *cs, const prob *p, const double *ar, const double *bc, int64_t b, int64_t i,
                      int64_t j, double *ref, double *tol) {
  double acc = 0, s = 0;
  for (int64_t q = 0; q < p->k; q++) {
    double t = ar[q] * bc[q];
    acc += t;
    s += fabs(t);
  }
  double v = (double)p->alpha * acc, mag = fabs(v);
  if (cs->ep & EP_C) {
    const operand *oc = (cs->ep & EP_INPLACE) ? &p->o[OD] : &p->o[OC];
    const uint8_t *src = (cs->ep & EP_INPLACE) ? p->before : oc->buf.host;
    double t = (double)p->beta * gt_get(cs->out, src, oidx(oc, b, i, j));
    v += t;
    mag += fabs(t);
  }
  if (cs->ep & (EP_BIAS_ROW | EP_BIAS_COL)) {
    double t = gt_get(cs->out, p->o[OBIAS].buf.host, oidx(&p->o[OBIAS], 0, 0, (cs->ep & EP_BIAS_ROW) ? i : j));
    v += t;
    mag += fabs(t);
  }
  if (cs->ep & EP_D0) {
    double t = gt_get(cs->out, p->o[OD0].buf.host, oidx(&p->o[OD0], b, i, j));
    v += t;
    mag += fabs(t);
  }
  double acc_coef = cs->exact ? 0.0 : (double)(p->k + 8) * 0x1p-21 + (cs->tf32 ? 0x1p-9 : 0.0);
  double e = fabs((double)p->alpha) * s * acc_coef + mag * 0x1p-21;
  double pre = v;
  v = act_ref(cs->act, pre);
  e = act_slope(cs->act) * e + (cs->act >= CKJIT_UNARY_GELU_TANH ? 0x1p-20 * (1.0 + fabs(pre)) : 0.0);
  if (cs->ep & EP_D1) {
    double d1 = gt_get(cs->out, p->o[OD1].buf.host, oidx(&p->o[OD1], b, i, j));
    v *= d1;
    e = fabs(d1) * e + 0x1p-22 * fabs(v);
  }
  *ref = v;
  *tol = 2.0 * out_round(cs->out) * fabs(v) + 1.01 * e + (cs->out == CKJIT_F16 ? 0x1p-24 : 1e-37);
}

/* ---- case description -------------------------------------------------------------- */

static void describe(const gcase *cs, uint64_t seed, char *buf, size_t len) {
  int n = snprintf(buf, len, "[%s] %s->%s %c%c", cs->name, ckjit_dtype_name(cs->ab), ckjit_dtype_name(cs->out),
                   cs->ao ? 'C' : 'R', cs->bo ? 'C' : 'R');
  for (int p = 0; p < cs->np && n < (int)len; p++)
    n += snprintf(buf + n, len - (size_t)n, "%s%lldx%lldx%lld", p ? "," : " mnk=", LL(cs->mnk[p][0]),
                  LL(cs->mnk[p][1]), LL(cs->mnk[p][2]));
  if (n < (int)len)
    snprintf(buf + n, len - (size_t)n,
             " batch=%lld bcast=0x%x pad=%d off=%d ep=%s%s%s%s%s%s act=%s alpha=%g beta=%g split_k=%d tf32=%d "
             "exact=%d seed=%llu",
             LL(cs->batch), cs->bcast, cs->pad, cs->off, (cs->ep & EP_C) ? "C" : "", (cs->ep & EP_INPLACE) ? "(inplace)" : "",
             (cs->ep & EP_BIAS_ROW) ? "+bias_row" : "", (cs->ep & EP_BIAS_COL) ? "+bias_col" : "",
             (cs->ep & EP_D0) ? "+D0" : "", (cs->ep & EP_D1) ? "+D1" : "", act_names[cs->act], (double)cs->alpha,
             (double)cs->beta, cs->split_k, cs->tf32, cs->exact, (unsigned long long)seed);
}

/* ---- set-up --------------------------------------------------------------------------- */

static void layout(operand *o, int64_t rows, int64_t cols, int64_t pad, int64_t off, int64_t batch, int bcast) {
  o->used = 1;
  o->rows = rows;
  o->cols = cols;
  o->off = off;
  o->ld = (cols > 0 ? cols : 1) + pad;
  o->stride = batch > 1 && !bcast ? rows * o->ld + (pad ? 3 : 0) : 0;
  o->nb = o->stride ? batch : 1;
}

static size_t op_elems(const operand *o) {
  int64_t ext = o->rows > 0 && o->cols > 0 ? (o->rows - 1) * o->ld + o->cols : 0;
  return (size_t)(o->off + (o->nb - 1) * o->stride + ext + GUARD);
}

static double gen(const gcase *cs, tu_rng *r) {
  return cs->exact ? (double)tu_rng_range(r, -8, 8) / 8.0 : gt_uniform(r, -1.0, 1.0);
}

/* Values in every matrix of o (all nb entries); everything else is left. */
static void fill_matrices(const gcase *cs, operand *o, ckjit_dtype dt, uint8_t *host, tu_rng *r) {
  for (int64_t b = 0; b < o->nb; b++)
    for (int64_t i = 0; i < o->rows; i++)
      for (int64_t j = 0; j < o->cols; j++) gt_put(dt, host, oidx(o, b, i, j), gen(cs, r));
}

static void *dptr(const operand *o) { return gt_buf_ptr(&o->buf, o->off); }

static int setup_prob(gt_check *ck, const gcase *cs, int pi, prob *p, tu_rng *r) {
  memset(p, 0, sizeof *p);
  p->m = cs->mnk[pi][0];
  p->n = cs->mnk[pi][1];
  p->k = cs->mnk[pi][2];
  p->alpha = cs->alpha * (1.0f + 0.25f * (float)pi); /* grouped: alpha and beta differ per problem */
  p->beta = cs->beta - 0.125f * (float)pi;
  const int64_t m = p->m, n = p->n, k = p->k, B = cs->batch, pad = cs->pad, off = cs->off;
  layout(&p->o[OA], cs->ao ? k : m, cs->ao ? m : k, pad, off, B, cs->bcast & (1u << OA));
  layout(&p->o[OB], cs->bo ? n : k, cs->bo ? k : n, pad ? pad + 1 : 0, off, B, cs->bcast & (1u << OB));
  layout(&p->o[OD], m, n, pad ? pad + 3 : cs->d_pad, off, B, 0);
  if ((cs->ep & EP_C) && !(cs->ep & EP_INPLACE)) layout(&p->o[OC], m, n, pad ? pad + 2 : 0, off, B, cs->bcast & (1u << OC));
  if (cs->ep & EP_D0) layout(&p->o[OD0], m, n, pad ? pad + 4 : 0, off, B, 0);
  if (cs->ep & EP_D1) layout(&p->o[OD1], m, n, pad ? pad + 5 : 0, off, B, 0);
  if (cs->ep & (EP_BIAS_ROW | EP_BIAS_COL)) layout(&p->o[OBIAS], 1, (cs->ep & EP_BIAS_ROW) ? m : n, 0, off, 1, 1);
  for (int o = 0; o < NOPS; o++) {
    operand *x = &p->o[o];
    if (!x->used) continue;
    ckjit_dtype dt = o <= OB ? cs->ab : cs->out;
    if (gt_buf_alloc(ck, &x->buf, dt, op_elems(x))) return -1;
    if (o == OD) {
      memset(x->buf.host, 0xFF, x->buf.elems * gt_esize(dt)); /* poison */
      if (cs->ep & EP_INPLACE) fill_matrices(cs, x, dt, x->buf.host, r); /* C's values */
    } else {
      gt_fill_nan(dt, x->buf.host, x->buf.elems);
      fill_matrices(cs, x, dt, x->buf.host, r);
    }
    if (gt_buf_upload(ck, &x->buf)) return -1;
  }
  const size_t dbytes = p->o[OD].buf.elems * gt_esize(cs->out);
  p->before = malloc(dbytes);
  p->got = malloc(dbytes);
  if (!p->before || !p->got) {
    gt_fail(ck, "host malloc failed");
    return -1;
  }
  memcpy(p->before, p->o[OD].buf.host, dbytes);

  ckjit_gemm_desc *d = &p->desc;
  ckjit_gemm_desc_init(d);
  d->m = m, d->n = n, d->k = k;
  d->ab_dtype = cs->ab, d->out_dtype = cs->out;
  d->a = dptr(&p->o[OA]), d->lda = p->o[OA].ld, d->a_order = cs->ao;
  d->b = dptr(&p->o[OB]), d->ldb = p->o[OB].ld, d->b_order = cs->bo;
  d->d = dptr(&p->o[OD]), d->ldd = p->o[OD].ld;
  if (cs->ep & EP_C) {
    const operand *oc = (cs->ep & EP_INPLACE) ? &p->o[OD] : &p->o[OC];
    d->c = dptr(oc), d->ldc = oc->ld, d->stride_c = oc->stride;
  }
  d->alpha = p->alpha, d->beta = p->beta;
  if (cs->ep & (EP_BIAS_ROW | EP_BIAS_COL)) {
    d->bias = dptr(&p->o[OBIAS]);
    d->bias_mode = (cs->ep & EP_BIAS_ROW) ? CKJIT_BIAS_PER_ROW : CKJIT_BIAS_PER_COL;
  }
  d->activation = (ckjit_unary_op)cs->act;
  if (cs->ep & EP_D0) d->d0 = dptr(&p->o[OD0]), d->ldd0 = p->o[OD0].ld, d->stride_d0 = p->o[OD0].stride;
  if (cs->ep & EP_D1) d->d1 = dptr(&p->o[OD1]), d->ldd1 = p->o[OD1].ld, d->stride_d1 = p->o[OD1].stride;
  d->batch = B;
  d->stride_a = p->o[OA].stride, d->stride_b = p->o[OB].stride, d->stride_d = p->o[OD].stride;
  d->split_k = cs->split_k;
  d->allow_tf32 = cs->tf32;
  return 0;
}

static void free_prob(prob *p) {
  for (int o = 0; o < NOPS; o++)
    if (p->o[o].used) gt_buf_free(&p->o[o].buf);
  free(p->before);
  free(p->got);
}

/* ---- checks ---------------------------------------------------------------------------- */

/* Whether element e of o's buffer lies in one of its matrices. */
static int in_matrices(const operand *o, size_t e) {
  int64_t rel = (int64_t)e - o->off;
  if (rel < 0 || o->rows == 0 || o->cols == 0) return 0;
  int64_t b = o->stride ? rel / o->stride : 0;
  if (b >= o->nb) b = o->nb - 1;
  rel -= b * o->stride;
  return rel / o->ld < o->rows && rel % o->ld < o->cols;
}

static void check_outside(gt_check *ck, const gcase *cs, const prob *p, int pi) {
  const operand *o = &p->o[OD];
  const size_t s = gt_esize(cs->out);
  for (size_t e = 0; e < o->buf.elems; e++)
    if (!in_matrices(o, e) && memcmp(p->got + e * s, p->before + e * s, s) != 0) {
      gt_fail(ck, "problem %d: D written outside its m x n matrices at element %zu (off %lld, ld %lld, stride %lld, "
              "%zu elements)", pi, e, LL(o->off), LL(o->ld), LL(o->stride), o->buf.elems);
      return;
    }
  gt_pass(ck);
}

/* Inputs must come back unchanged (skipped for buffers over 4M elements). */
static void check_inputs(gt_check *ck, const prob *p, int pi) {
  for (int o = 0; o < NOPS; o++) {
    const operand *x = &p->o[o];
    if (!x->used || o == OD || x->buf.elems > (1u << 22)) continue;
    size_t bytes = x->buf.elems * gt_esize(x->buf.dt);
    uint8_t *tmp = malloc(bytes);
    if (!tmp) continue;
    gt_buf tb = x->buf;
    if (gt_buf_download(ck, &tb, tmp) == 0) {
      if (memcmp(tmp, x->buf.host, bytes) != 0)
        gt_fail(ck, "problem %d: input %s was modified", pi, opnd_names[o]);
      else
        gt_pass(ck);
    }
    free(tmp);
  }
}

/* Rows of A / columns of B of batch entry b as doubles (k each). */
static void gather_ab(const gcase *cs, const prob *p, int64_t b, double *Ad, double *Bd) {
  const operand *a = &p->o[OA], *bb = &p->o[OB];
  for (int64_t i = 0; i < p->m; i++)
    for (int64_t q = 0; q < p->k; q++)
      Ad[i * p->k + q] = gt_get(cs->ab, a->buf.host, cs->ao ? oidx(a, b, q, i) : oidx(a, b, i, q));
  for (int64_t j = 0; j < p->n; j++)
    for (int64_t q = 0; q < p->k; q++)
      Bd[j * p->k + q] = gt_get(cs->ab, bb->buf.host, cs->bo ? oidx(bb, b, j, q) : oidx(bb, b, q, j));
}

static void check_entry(gt_check *ck, const gcase *cs, const prob *p, int pi, const double *Ad, const double *Bd,
                        int64_t b, int64_t i, int64_t j) {
  double ref, tol;
  ref_entry(cs, p, Ad + i * p->k, Bd + j * p->k, b, i, j, &ref, &tol);
  double got = gt_get(cs->out, p->got, oidx(&p->o[OD], b, i, j));
  if (gt_close(got, ref, tol))
    gt_pass(ck);
  else
    gt_fail(ck, "problem %d batch %lld D[%lld][%lld] = %.9g, want %.9g (|diff| %.3g > tol %.3g)", pi, LL(b), LL(i),
            LL(j), got, ref, fabs(got - ref), tol);
}

static void check_values(gt_check *ck, const gcase *cs, const prob *p, int pi, tu_rng *r) {
  const int64_t m = p->m, n = p->n, k = p->k;
  if (m == 0 || n == 0) return;
  double *Ad = malloc((size_t)(m * k + 1) * sizeof(double)), *Bd = malloc((size_t)(n * k + 1) * sizeof(double));
  if (!Ad || !Bd) {
    gt_fail(ck, "host malloc failed");
    free(Ad);
    free(Bd);
    return;
  }
  for (int64_t b = 0; b < cs->batch; b++) {
    if (b == 0 || (p->o[OA].stride | p->o[OB].stride)) gather_ab(cs, p, b, Ad, Bd);
    if (cs->sample <= 0) {
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) check_entry(ck, cs, p, pi, Ad, Bd, b, i, j);
      continue;
    }
    for (int s = 0; s < cs->sample; s++)
      check_entry(ck, cs, p, pi, Ad, Bd, b, tu_rng_range(r, 0, m - 1), tu_rng_range(r, 0, n - 1));
    for (int64_t j = 0; j < n; j++) check_entry(ck, cs, p, pi, Ad, Bd, b, m - 1, j);
    for (int64_t i = 0; i + 1 < m; i++) check_entry(ck, cs, p, pi, Ad, Bd, b, i, n - 1);
  }
  free(Ad);
  free(Bd);
}

/* ---- the runner ----------------------------------------------------------------------------- */

static ckjit_status launch(const gcase *cs, prob *ps) {
  if (cs->np == 1) return ckjit_gemm(&ps[0].desc, NULL);
  ckjit_gemm_desc descs[MAXP];
  for (int i = 0; i < cs->np; i++) descs[i] = ps[i].desc;
  return ckjit_gemm_grouped(descs, cs->np, NULL);
}

/* Runs one case; returns its failures. */
static long run_case(gt_check *ck, size_t index, const gcase *cs, uint64_t seed) {
  char d[700];
  describe(cs, seed, d, sizeof d);
  gt_check_begin(ck, "case %zu %s", index, d);
  long fails0 = ck->failures;
  tu_rng r = {seed};
  prob ps[MAXP];
  memset(ps, 0, sizeof ps);
  for (int i = 0; i < cs->np; i++)
    if (setup_prob(ck, cs, i, &ps[i], &r)) goto done;
  if (cs->cluster) setenv("CKJIT_GEMM_CLUSTER", cs->cluster, 1);
  ckjit_status st = launch(cs, ps);
  if (st != CKJIT_SUCCESS) {
    gt_fail(ck, "%s returned %s: %s", cs->np > 1 ? "ckjit_gemm_grouped" : "ckjit_gemm", ckjit_status_string(st),
            ckjit_last_error());
    goto done;
  }
  if (gt_sync(ck)) goto done;
  for (int i = 0; i < cs->np; i++) {
    if (gt_buf_download(ck, &ps[i].o[OD].buf, ps[i].got)) goto done;
    check_outside(ck, cs, &ps[i], i);
    check_values(ck, cs, &ps[i], i, &r);
    check_inputs(ck, &ps[i], i);
  }
  /* Split-K is deterministic, and clusters change where tiles are loaded,
   * not the sums: a second run (without clusters) gives the same bits. */
  if ((cs->split_k != 1 || cs->cluster) && cs->np == 1) {
    prob *p = &ps[0];
    memcpy(p->o[OD].buf.host, p->before, p->o[OD].buf.elems * gt_esize(cs->out));
    for (int o = 0; o < NOPS; o++) /* the same inputs again, even if the first call clobbered one */
      if (p->o[o].used && gt_buf_upload(ck, &p->o[o].buf)) goto done;
    if (cs->cluster) setenv("CKJIT_GEMM_CLUSTER", "1x1", 1);
    st = launch(cs, ps);
    if (st != CKJIT_SUCCESS) {
      gt_fail(ck, "second ckjit_gemm returned %s: %s", ckjit_status_string(st), ckjit_last_error());
      goto done;
    }
    if (gt_sync(ck) || gt_buf_download(ck, &p->o[OD].buf, NULL)) goto done;
    if (memcmp(p->o[OD].buf.host, p->got, p->o[OD].buf.elems * gt_esize(cs->out)) != 0)
      gt_fail(ck, cs->cluster ? "the call without clusters gave different bits"
                              : "a second identical call gave different bits (split-k must be deterministic)");
    else
      gt_pass(ck);
  }
done:
  unsetenv("CKJIT_GEMM_CLUSTER");
  for (int i = 0; i < cs->np; i++) free_prob(&ps[i]);
  gt_check_end(ck);
  return ck->failures - fails0;
}
/* On sm_90 the cluster cases must have built both kinds of cluster
 * kernel (CKJIT_RECORD's lines); elsewhere the variable only asks. */
static void check_clusters_ran(gt_check *ck, const ckjit_device_info *info, const char *record) {
  gt_check_begin(ck, "cluster kernels in %s", record);
  if (strncmp(info->arch, "sm_90", 5) != 0) {
    printf("SKIP cluster kernels: %s has no thread-block clusters with multicast (sm_90 only)\n", info->arch);
  } else {
    FILE *f = fopen(record, "r");
    char line[512];
    int m = 0, n = 0;
    while (f && fgets(line, sizeof line, f)) {
      m += strstr(line, "gemm_wgmma:") && strstr(line, "cluster_m=2") != NULL;
      n += strstr(line, "gemm_wgmma:") && strstr(line, "cluster_n=2") != NULL;
    }
    if (f) fclose(f);
    printf("cluster kernels built: %d with cluster_m=2, %d with cluster_n=2\n", m, n);
    if (!m || !n)
      gt_fail(ck, "the cluster cases built %d kernels with cluster_m=2 and %d with cluster_n=2", m, n);
    else
      gt_pass(ck);
  }
  gt_check_end(ck);
}

/* ---- main -------------------------------------------------------------------------------------------- */

static int self_checks(void) {
  int bad = 0;
  bad += fabs(act_ref(CKJIT_UNARY_GELU_TANH, 1.0) - 0.8411919906) > 1e-9;
  bad += fabs(act_ref(CKJIT_UNARY_GELU_ERF, 1.0) - 0.8413447461) > 1e-9;
  bad += fabs(act_ref(CKJIT_UNARY_SILU, 1.0) - 0.7310585786) > 1e-9;
  bad += fabs(act_ref(CKJIT_UNARY_SIGMOID, -2.0) - 0.1192029220) > 1e-9;
  bad += act_ref(CKJIT_UNARY_RELU, -0.5) != 0.0 || act_ref(CKJIT_UNARY_RELU, 0.5) != 0.5;
  operand o = {0};
  layout(&o, 3, 4, 2, 1, 2, 0); /* ld 6, stride 3*6+3 = 21 */
  bad += o.ld != 6 || o.stride != 21 || op_elems(&o) != (size_t)(1 + 21 + 2 * 6 + 4 + GUARD);
  bad += in_matrices(&o, 0) || !in_matrices(&o, 1) || in_matrices(&o, 5) || !in_matrices(&o, 1 + 21 + 15);
  bad += in_matrices(&o, 1 + 21 + 16) || in_matrices(&o, 1 + 18);
  return bad;
}

static gt_result run(gt_ctx *ctx) {
  const uint64_t seed = ctx->seed;
  const int skip_large = ctx->skip_large;
  if (skip_large) printf("SKIP large cases (4095x4097x1001, 65537x32768x24): CKJIT_TEST_SKIP_LARGE is set\n");
  g_rng.s = seed;
  build_cases(skip_large);

  gt_check *ck = ctx->ck;
  /* The kernels the cases build, to show the cluster cases ran clusters. */
  char *dir = tu_mkdtemp("gemm-gpu-record"), record[512];
  snprintf(record, sizeof record, "%s/record.txt", dir ? dir : ".");
  if (dir) setenv("CKJIT_RECORD", record, 1);
  int failed_cases = 0;
  for (size_t i = 0; i < g_ncases; i++)
    failed_cases += run_case(ck, i, &g_cases[i], seed ^ (0x9E3779B97F4A7C15ull * (i + 1))) != 0;
  unsetenv("CKJIT_RECORD");
  if (dir) {
    check_clusters_ran(ck, &ctx->info, record);
    tu_rm_rf(dir);
    free(dir);
  } else {
    gt_check_begin(ck, "cluster kernels");
    gt_fail(ck, "no temporary directory for CKJIT_RECORD");
    gt_check_end(ck);
  }
  printf("gemm: %zu cases (%d failed), %ld checks, %ld failures\n", g_ncases, failed_cases, ck->checks, ck->failures);
  free(g_cases);
  return (gt_result){(long)g_ncases, failed_cases};
}

static const gt_suite suite = {
    .name = "gemm_gpu",
    .cache_tag = "gemm-gpu",
    .self_check = self_checks,
    .run = run,
    .check_stats = 1,
};

GT_MAIN(suite)
