/* The FP8 GEMM GPU suite's cases and its float64 reference (included by
 * test_gemm_fp8_gpu.c, whose opening comment states the definition, the
 * generators and the tolerance): a case (fcase), its host and device
 * buffers (prob), FP8 decoding, the reference of one entry with its
 * tolerance, and a simulated device with planted bugs (mutations) that the
 * self-checks show the reference catches. */
#ifndef CKJIT_TESTS_GPU_GEMM_FP8_REFERENCE_H
#define CKJIT_TESTS_GPU_GEMM_FP8_REFERENCE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "gpu_harness.h"
#include "epilogue_reference.h"

#define GUARD 48 /* poisoned elements after every buffer */
#define LL(x) ((long long)(x))
#define E4 CKJIT_FP8_E4M3
#define E5 CKJIT_FP8_E5M2

enum { GEN_NARROW, GEN_FULL, GEN_EXACT };
/* The epilogue's terms a case passes (fcase.terms): beta C, D0, D1; C as D
 * (in place, ldc = ldd). */
enum { T_C = 1, T_D0 = 2, T_D1 = 4, T_IN_PLACE = 8 };

typedef struct fcase {
  char name[40];
  ckjit_dtype at, bt, out;
  ckjit_fp8_scaling sc;
  int64_t m, n, k;
  int lda_extra, ldb_extra; /* lda = 16-rounded k + 16 * extra (same for ldb) */
  int ldd_pad;              /* ldd = n + ldd_pad */
  int lsa_extra, lsb_extra; /* BLOCK: -1 passes 0 (the default), else ceil(k / 128) + extra */
  ckjit_bias_mode bias;
  int act, gen, nan_a;      /* nan_a: one NaN code in A's row m / 2 */
  float alpha;
  int sample;               /* > 0: that many random entries + last row and column */
  int same_bits;            /* rerun with CKJIT_GEMM_FP8_CLUSTER=2: D must be bit-identical */
  int promote;              /* rerun with other promotion intervals (also every fifth case) */
  int terms;                /* T_* */
  float beta;
} fcase;

typedef struct prob {
  const fcase *cs;
  int64_t lda, ldb, ldd, kb, lsa, lsb; /* lsa / lsb: the scale strides in effect */
  int64_t ldc, ldd0, ldd1;
  int64_t tc_blocks;                    /* 128-blocks of K a tensor-core sum spans (promotion) */
  gt_buf a, b, d, sa, sb, bias, c, d0, d1; /* c: unused (D holds C) in place */
  uint8_t *before, *got; /* D's bytes before and after the call */
  ckjit_gemm_fp8_desc desc;
} prob;

/* ---- FP8 codes and the reference ----------------------------------------------- */

/* The value of an FP8 code: e4m3fn (bias 7, 3 mantissa bits, S.1111.111 NaN,
 * no infinity) or e5m2 (bias 15, 2 mantissa bits, exponent 31: inf / NaN). */
static inline double fp8_value(ckjit_dtype dt, uint8_t c) {
  const int e4 = dt == E4, mb = e4 ? 3 : 2, bias = e4 ? 7 : 15;
  const int e = (c & 0x7F) >> mb, mant = c & ((1 << mb) - 1);
  const double sign = (c & 0x80) ? -1.0 : 1.0;
  if (e4 && (c & 0x7F) == 0x7F) return NAN;
  if (!e4 && e == 31) return mant ? NAN : sign * INFINITY;
  if (e == 0) return sign * ldexp(mant, 1 - bias - mb); /* subnormal */
  return sign * ldexp((1 << mb) + mant, e - bias - mb);
}

static inline uint8_t gen_code(ckjit_dtype dt, int gen, tu_rng *r) {
  const int mb = dt == E4 ? 3 : 2, bias = dt == E4 ? 7 : 15;
  for (;;) {
    uint8_t c = (uint8_t)tu_rng_next(r);
    if (gen == GEN_NARROW) /* keep sign and mantissa, exponent field 0 .. bias + 1 */
      c = (uint8_t)((c & 0x80) | (tu_rng_range(r, 0, bias + 1) << mb) | (c & ((1 << mb) - 1)));
    const double v = fp8_value(dt, c);
    if (!isfinite(v)) continue;
    if (gen == GEN_EXACT && (fabs(v) > 1.0 || v * 4 != floor(v * 4))) continue;
    return c;
  }
}


static inline float f32_at(const gt_buf *b, size_t i) { return (float)gt_get(CKJIT_F32, b->host, i); }

/* Mutations a simulated device may carry (self_checks): each must fail. */
enum { MUT_NONE, MUT_B_BLOCK0, MUT_LAST_BLOCK, MUT_A_LD_DEFAULT, MUT_A_SHIFT, MUT_ERF };

/* deq(A) as rows (m x k) and deq(B) as columns (n x k), scales applied as
 * the header says (or as the mutation `mut` gets them wrong). */
static inline void dequant(const prob *p, int mut, double *dA, double *dB) {
  const fcase *cs = p->cs;
  const int64_t k = cs->k, kb = p->kb;
  for (int64_t i = 0; i < cs->m; i++)
    for (int64_t q = 0; q < k; q++) {
      int64_t qb = q / 128, ld = mut == MUT_A_LD_DEFAULT ? kb : p->lsa;
      if (mut == MUT_LAST_BLOCK && qb == kb - 1 && k % 128 && qb > 0) qb--;
      size_t si = cs->sc == CKJIT_FP8_SCALE_TENSOR ? 0 : cs->sc == CKJIT_FP8_SCALE_ROW ? (size_t)i : (size_t)(i * ld + qb);
      size_t ai = (size_t)(i * p->lda + q + (mut == MUT_A_SHIFT));
      dA[i * k + q] = fp8_value(cs->at, p->a.host[ai]) * f32_at(&p->sa, si);
    }
  for (int64_t j = 0; j < cs->n; j++)
    for (int64_t q = 0; q < k; q++) {
      int64_t qb = mut == MUT_B_BLOCK0 ? 0 : q / 128;
      if (mut == MUT_LAST_BLOCK && qb == kb - 1 && k % 128 && qb > 0) qb--;
      size_t si = cs->sc == CKJIT_FP8_SCALE_TENSOR ? 0 : cs->sc == CKJIT_FP8_SCALE_ROW ? (size_t)j
                                                                                     : (size_t)((j / 128) * p->lsb + qb);
      dB[j * k + q] = fp8_value(cs->bt, p->b.host[(size_t)(j * p->ldb + q)]) * f32_at(&p->sb, si);
    }
}

static inline double bias_at(const prob *p, int64_t i, int64_t j) {
  if (p->cs->bias == CKJIT_BIAS_NONE) return 0.0;
  return gt_get(p->cs->out, p->bias.host, (size_t)(p->cs->bias == CKJIT_BIAS_PER_ROW ? i : j));
}

/* The epilogue's terms at (i, j): beta C (0 when beta is 0: C is never
 * read), D0 (0 without), D1 (1 without). */
static inline void terms_at(const prob *p, int64_t i, int64_t j, double *bc, double *d0, double *d1) {
  const fcase *cs = p->cs;
  *bc = 0.0, *d0 = 0.0, *d1 = 1.0;
  if ((cs->terms & T_C) && cs->beta != 0.0f)
    *bc = cs->beta * (cs->terms & T_IN_PLACE ? gt_get(cs->out, p->d.host, (size_t)(i * p->ldd + j))
                                             : gt_get(cs->out, p->c.host, (size_t)(i * p->ldc + j)));
  if (cs->terms & T_D0) *d0 = gt_get(cs->out, p->d0.host, (size_t)(i * p->ldd0 + j));
  if (cs->terms & T_D1) *d1 = gt_get(cs->out, p->d1.host, (size_t)(i * p->ldd1 + j));
}

/* Reference and tolerance of D[i][j]; ar = deq row i of A, bc = deq column j of B. */
static inline void ref_entry(const prob *p, const double *ar, const double *bc, int64_t i, int64_t j, double *ref,
                      double *tol) {
  const fcase *cs = p->cs;
  double acc = 0, s = 0;
  for (int64_t q = 0; q < cs->k; q++) {
    const double t = ar[q] * bc[q];
    acc += t;
    s += fabs(t);
  }
  const double alpha = cs->alpha, bias = bias_at(p, i, j);
  double cterm, d0, d1;
  terms_at(p, i, j, &cterm, &d0, &d1);
  const double pre = alpha * acc + cterm + bias + d0;
  const double blocks = (double)(p->tc_blocks > 1 ? p->tc_blocks : 1);
  const double coef = cs->gen == GEN_EXACT ? 0.0 : blocks * 0x1p-9 + (double)(p->kb + 2) * 0x1p-24;
  /* f32 sums of up to four terms: 2^-21 of their magnitudes covers them */
  double e = fabs(alpha) * s * coef + (fabs(alpha * acc) + fabs(cterm) + fabs(bias) + fabs(d0)) * 0x1p-21;
  e = act_slope(cs->act) * e + (cs->act >= CKJIT_UNARY_GELU_TANH ? 0x1p-20 * (1.0 + fabs(pre)) : 0.0);
  const double post = act_ref(cs->act, pre);
  *ref = post * d1;
  e = e * fabs(d1) + fabs(*ref) * 0x1p-23; /* D1's f32 product */
  *tol = 2.0 * out_round(cs->out) * fabs(*ref) + 1.01 * e + (cs->out == CKJIT_F16 ? 0x1p-24 : 1e-37);
}

/* What a device with bug `mut` would store (self_checks): f32 block sums,
 * an f32 epilogue, rounded to out_dtype. */
static inline double simulate(const prob *p, const double *ar, const double *bc, int64_t i, int64_t j, int mut) {
  const fcase *cs = p->cs;
  float acc = 0;
  for (int64_t q0 = 0; q0 < cs->k; q0 += 128) {
    float blk = 0;
    for (int64_t q = q0; q < q0 + 128 && q < cs->k; q++) blk += (float)(ar[q] * bc[q]);
    acc += blk;
  }
  double cterm, d0, d1;
  terms_at(p, i, j, &cterm, &d0, &d1);
  const float v = cs->alpha * acc + (float)cterm + (float)bias_at(p, i, j) + (float)d0;
  const int act = mut == MUT_ERF && cs->act == CKJIT_UNARY_GELU_TANH ? CKJIT_UNARY_GELU_ERF : cs->act;
  return gt_round(cs->out, (float)act_ref(act, v) * (float)d1);
}

/* sm_90 or sm_90a: where the FP8 tensor cores (and these suites) run. */
static inline int is_sm90(const char *a) { return strncmp(a, "sm_90", 5) == 0 && (!a[5] || !strcmp(a + 5, "a")); }

#endif
