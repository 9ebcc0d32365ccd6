/* Multi-GPU test: one round of GEMM, grouped GEMM, attention and paged K/V
 * append + attention on one device (multi_gpu.h), against f64 references.
 *
 * GEMM inputs are multiples of 1/8 in [-1, 1] (as test_gemm_gpu's "exact"
 * cases): every product and partial sum is exact in f32 whatever the
 * summation order, so D must equal the f64 reference rounded to the output
 * dtype, bit for bit.  Attention and paged attention use the documented
 * bounds of tests/gpu/attention/attention_reference.c (bf16: u = 2^-9):
 *   delta = |scale| max_j sum_d |q k| (d + 8) 2^-21 + max|s| 2^-20
 *   O:   |got - ref| <= V (6u + 4 delta + (n + 16) 2^-22)   (V = max |v| seen)
 *   LSE: |got - ref| <= 2 (delta + n 2^-24 + |LSE| 2^-22) + 2^-10
 * The paged pool after the append must hold the new tokens bit for bit and
 * be unchanged elsewhere. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/paged_attention.h"
#include "multi_gpu.h"

/* Random multiples of 1/8 in [-1, 1] everywhere in b (exact in every dtype). */
static int exact_input(mg_dev *d, gt_buf *b, ckjit_dtype dt, size_t elems) {
  if (gt_buf_alloc(&d->ck, b, dt, elems)) return -1;
  for (size_t i = 0; i < elems; i++) gt_put(dt, b->host, i, (double)tu_rng_range(&d->rng, -8, 8) / 8.0);
  return gt_buf_upload(&d->ck, b);
}

/* sum_k A[i][k] B[k][j]; A row-major (or column-major: a_col), B row-major. */
static double dot(const gt_buf *a, int64_t lda, int a_col, const gt_buf *b, int64_t ldb, int64_t i, int64_t j,
                  int64_t k) {
  double s = 0;
  for (int64_t q = 0; q < k; q++)
    s += gt_get(a->dt, a->host, (size_t)(a_col ? q * lda + i : i * lda + q)) * gt_get(b->dt, b->host, (size_t)(q * ldb + j));
  return s;
}

/* ---- ckjit_gemm: bf16 (bias per column, relu) and f32 (column-major A) ------------------------ */

static void gemm(mg_dev *d) {
  enum { M = 130, N = 120, K = 96, LDA = K + 8, LDD = N + 8, M2 = 70, N2 = 50, K2 = 33 };
  gt_buf a = {0}, b = {0}, bias = {0}, o = {0}, a2 = {0}, b2 = {0}, o2 = {0};
  mg_begin(d, "gemm bf16 %dx%dx%d (+bias per column, relu) and f32 %dx%dx%d (A column-major)", M, N, K, M2, N2, K2);
  if (exact_input(d, &a, CKJIT_BF16, (size_t)M * LDA) || exact_input(d, &b, CKJIT_BF16, (size_t)K * N) ||
      exact_input(d, &bias, CKJIT_BF16, N) || gt_buf_alloc(&d->ck, &o, CKJIT_BF16, (size_t)M * LDD) ||
      exact_input(d, &a2, CKJIT_F32, (size_t)K2 * M2) || exact_input(d, &b2, CKJIT_F32, (size_t)K2 * N2) ||
      gt_buf_alloc(&d->ck, &o2, CKJIT_F32, (size_t)M2 * N2) || gt_buf_poison(&d->ck, &o) || gt_buf_poison(&d->ck, &o2))
    goto done;
  ckjit_gemm_desc g;
  ckjit_gemm_desc_init(&g); /* bf16 in and out, row-major, alpha 1 */
  g.m = M, g.n = N, g.k = K;
  g.a = a.dev, g.lda = LDA, g.b = b.dev, g.ldb = N, g.d = o.dev, g.ldd = LDD;
  g.bias = bias.dev, g.bias_mode = CKJIT_BIAS_PER_COL, g.activation = CKJIT_UNARY_RELU;
  ckjit_gemm_desc g2;
  ckjit_gemm_desc_init(&g2);
  g2.m = M2, g2.n = N2, g2.k = K2, g2.ab_dtype = g2.out_dtype = CKJIT_F32;
  g2.a = a2.dev, g2.lda = M2, g2.a_order = CKJIT_COL_MAJOR, g2.b = b2.dev, g2.ldb = N2, g2.d = o2.dev, g2.ldd = N2;
  if (mg_ran(d, ckjit_gemm(&g, d->stream), "ckjit_gemm bf16") || mg_ran(d, ckjit_gemm(&g2, d->stream), "ckjit_gemm f32") ||
      gt_buf_download(&d->ck, &o, NULL) || gt_buf_download(&d->ck, &o2, NULL))
    goto done;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      const double v = dot(&a, LDA, 0, &b, N, i, j, K) + gt_get(CKJIT_BF16, bias.host, (size_t)j);
      mg_expect(d, "gemm bf16 D", i, j, gt_get(CKJIT_BF16, o.host, (size_t)(i * LDD + j)), gt_round(CKJIT_BF16, v > 0 ? v : 0), 0);
    }
  mg_expect_padding(d, &o, M, N, LDD);
  for (int64_t i = 0; i < M2; i++)
    for (int64_t j = 0; j < N2; j++)
      mg_expect(d, "gemm f32 D", i, j, gt_get(CKJIT_F32, o2.host, (size_t)(i * N2 + j)), dot(&a2, M2, 1, &b2, N2, i, j, K2), 0);
done:
  gt_buf_free(&a), gt_buf_free(&b), gt_buf_free(&bias), gt_buf_free(&o);
  gt_buf_free(&a2), gt_buf_free(&b2), gt_buf_free(&o2);
  mg_end(d);
}

/* ---- ckjit_gemm_grouped: three bf16 problems of different shapes ----------------------------- */

static void gemm_grouped(mg_dev *d) {
  enum { P = 3 };
  static const int64_t mnk[P][3] = {{64, 48, 32}, {17, 130, 40}, {1, 77, 96}};
  gt_buf a[P] = {{0}}, b[P] = {{0}}, o[P] = {{0}};
  ckjit_gemm_desc g[P];
  mg_begin(d, "gemm_grouped bf16 64x48x32, 17x130x40, 1x77x96");
  for (int p = 0; p < P; p++) {
    const int64_t m = mnk[p][0], n = mnk[p][1], k = mnk[p][2];
    if (exact_input(d, &a[p], CKJIT_BF16, (size_t)(m * k)) || exact_input(d, &b[p], CKJIT_BF16, (size_t)(k * n)) ||
        gt_buf_alloc(&d->ck, &o[p], CKJIT_BF16, (size_t)(m * n)) || gt_buf_poison(&d->ck, &o[p]))
      goto done;
    ckjit_gemm_desc_init(&g[p]);
    g[p].m = m, g[p].n = n, g[p].k = k;
    g[p].a = a[p].dev, g[p].lda = k, g[p].b = b[p].dev, g[p].ldb = n, g[p].d = o[p].dev, g[p].ldd = n;
  }
  if (mg_ran(d, ckjit_gemm_grouped(g, P, d->stream), "ckjit_gemm_grouped")) goto done;
  for (int p = 0; p < P; p++) {
    if (gt_buf_download(&d->ck, &o[p], NULL)) goto done;
    for (int64_t i = 0; i < mnk[p][0]; i++)
      for (int64_t j = 0; j < mnk[p][1]; j++)
        mg_expect(d, p == 0 ? "problem 0 D" : p == 1 ? "problem 1 D" : "problem 2 D", i, j,
                  gt_get(CKJIT_BF16, o[p].host, (size_t)(i * mnk[p][1] + j)),
                  gt_round(CKJIT_BF16, dot(&a[p], mnk[p][2], 0, &b[p], mnk[p][1], i, j, mnk[p][2])), 0);
  }
done:
  for (int p = 0; p < P; p++) gt_buf_free(&a[p]), gt_buf_free(&b[p]), gt_buf_free(&o[p]);
  mg_end(d);
}

/* ---- the attention reference ----------------------------------------------------------------- */

enum { HQ = 4, HK = 2, DH = 64 };

/* One query row q over keys 0 .. n-1 (key j's K at k + j * ks, V at
 * v + j * ks, DH doubles each), every one visible: O into o, the LSE and
 * both tolerances (top comment). */
static double attn_row(const double *q, const double *k, const double *v, int64_t ks, int64_t n, double *o,
                       double *tol_o, double *tol_lse) {
  const double scale = 1.0 / sqrt((double)DH);
  double *s = malloc((size_t)n * sizeof *s), m = -INFINITY, dotmax = 0, smax = 0, vmax = 0, l = 0;
  if (!s) abort(); /* a few hundred bytes: the test cannot go on without them */
  for (int64_t j = 0; j < n; j++) {
    double dotv = 0, mag = 0;
    for (int x = 0; x < DH; x++) dotv += q[x] * k[j * ks + x], mag += fabs(q[x] * k[j * ks + x]);
    s[j] = scale * dotv;
    m = fmax(m, s[j]), smax = fmax(smax, fabs(s[j])), dotmax = fmax(dotmax, scale * mag);
  }
  for (int x = 0; x < DH; x++) o[x] = 0;
  for (int64_t j = 0; j < n; j++) {
    const double p = exp(s[j] - m);
    l += p;
    for (int x = 0; x < DH; x++) o[x] += p * v[j * ks + x], vmax = fmax(vmax, fabs(v[j * ks + x]));
  }
  for (int x = 0; x < DH; x++) o[x] /= l;
  free(s);
  const double lse = m + log(l), delta = dotmax * (DH + 8) * 0x1p-21 + smax * 0x1p-20;
  *tol_o = vmax * (6 * 0x1p-9 + 4 * delta + (double)(n + 16) * 0x1p-22);
  *tol_lse = 2 * (delta + (double)n * 0x1p-24 + fabs(lse) * 0x1p-22) + 0x1p-10;
  return lse;
}

/* Elements of a bf16 host buffer as doubles (malloc'ed). */
static double *to_doubles(const gt_buf *b) {
  double *out = malloc(b->elems * sizeof *out);
  if (!out) abort();
  for (size_t i = 0; i < b->elems; i++) out[i] = gt_get(b->dt, b->host, i);
  return out;
}

/* ---- ckjit_attention: b 2, heads 4 / 2 (GQA), s 70, d 64, causal, bf16, BSHD --------------- */

static void attention(mg_dev *d) {
  enum { B = 2, S = 70 };
  gt_buf q = {0}, k = {0}, v = {0}, o = {0}, lse = {0};
  double *qd = NULL, *kd = NULL, *vd = NULL, ref[DH], tol_o, tol_l;
  mg_begin(d, "attention bf16 b%d h%d/%d s%d d%d causal", B, HQ, HK, S, DH);
  if (gt_buf_alloc(&d->ck, &q, CKJIT_BF16, B * S * HQ * DH) || gt_buf_alloc(&d->ck, &k, CKJIT_BF16, B * S * HK * DH) ||
      gt_buf_alloc(&d->ck, &v, CKJIT_BF16, B * S * HK * DH) || gt_buf_alloc(&d->ck, &o, CKJIT_BF16, B * S * HQ * DH) ||
      gt_buf_alloc(&d->ck, &lse, CKJIT_F32, B * HQ * S))
    goto done;
  gt_buf *in[3] = {&q, &k, &v};
  for (int i = 0; i < 3; i++) {
    gt_fill_uniform(CKJIT_BF16, in[i]->host, 0, in[i]->elems, &d->rng, -1, 1);
    if (gt_buf_upload(&d->ck, in[i])) goto done;
  }
  if (gt_buf_poison(&d->ck, &o) || gt_buf_poison(&d->ck, &lse)) goto done;
  ckjit_attention_desc a;
  ckjit_attention_desc_init(&a);
  a.batch = B, a.num_heads_q = HQ, a.num_heads_kv = HK, a.seqlen_q = a.seqlen_k = S;
  a.head_dim_qk = a.head_dim_v = DH, a.mask = CKJIT_ATTENTION_MASK_CAUSAL;
  a.q = q.dev, a.q_strides = ckjit_attention_strides_bshd(S, HQ, DH);
  a.k = k.dev, a.k_strides = ckjit_attention_strides_bshd(S, HK, DH);
  a.v = v.dev, a.v_strides = a.k_strides;
  a.o = o.dev, a.o_strides = a.q_strides;
  a.lse = lse.dev, a.lse_strides = (ckjit_attention_strides){HQ * S, S, 1, 0};
  if (mg_ran(d, ckjit_attention(&a, d->stream), "ckjit_attention") || gt_buf_download(&d->ck, &o, NULL) ||
      gt_buf_download(&d->ck, &lse, NULL))
    goto done;
  qd = to_doubles(&q), kd = to_doubles(&k), vd = to_doubles(&v);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < HQ; h++)
      for (int64_t i = 0; i < S; i++) { /* causal, sq == sk: keys 0 .. i */
        const int64_t kv0 = (b * S * HK + h / (HQ / HK)) * DH, qo = ((b * S + i) * HQ + h) * DH;
        const double want_lse = attn_row(qd + qo, kd + kv0, vd + kv0, HK * DH, i + 1, ref, &tol_o, &tol_l);
        for (int x = 0; x < DH; x++)
          mg_expect(d, "attention O", (b * HQ + h) * S + i, x, gt_get(CKJIT_BF16, o.host, (size_t)(qo + x)), ref[x], tol_o);
        mg_expect(d, "attention LSE", b * HQ + h, i, gt_get(CKJIT_F32, lse.host, (size_t)((b * HQ + h) * S + i)),
                  want_lse, tol_l);
      }
done:
  free(qd), free(kd), free(vd);
  gt_buf_free(&q), gt_buf_free(&k), gt_buf_free(&v), gt_buf_free(&o), gt_buf_free(&lse);
  mg_end(d);
}

/* ---- ckjit_paged_kv_append then ckjit_paged_attention ----------------------------------------
 * Two sequences of 45 and 70 keys after appending 5 and 3 new tokens; pages
 * of 16 slots (NHD), 11 in the pool, the block table a shuffle of them (the
 * cells past a sequence's pages hold valid ids it must not use); the new
 * tokens are the queries (varlen, causal: bottom-right aligned). */

static void paged(mg_dev *d) {
  enum { B = 2, PAGE = 16, PAGES = 11, MAXP = 5, NEW = 8, TOK = HK * DH, POOL = PAGES * PAGE * TOK };
  static const int32_t len_k[B] = {45, 70}, cu_new[B + 1] = {0, 5, 8};
  gt_buf kp = {0}, vp = {0}, kn = {0}, vn = {0}, q = {0}, o = {0}, lse = {0}, tab = {0}, lens = {0}, cu = {0}, err = {0};
  uint8_t *want_k = NULL, *want_v = NULL;
  double *seq_k = NULL, *seq_v = NULL, *qd = NULL, ref[DH], tol_o, tol_l;
  mg_begin(d, "paged_kv_append + paged_attention bf16 pages of %d, keys 45 / 70, new 5 / 3, h%d/%d d%d causal", PAGE,
           HQ, HK, DH);
  if (gt_buf_alloc(&d->ck, &kp, CKJIT_BF16, POOL) || gt_buf_alloc(&d->ck, &vp, CKJIT_BF16, POOL) ||
      gt_buf_alloc(&d->ck, &kn, CKJIT_BF16, NEW * TOK) || gt_buf_alloc(&d->ck, &vn, CKJIT_BF16, NEW * TOK) ||
      gt_buf_alloc(&d->ck, &q, CKJIT_BF16, NEW * HQ * DH) || gt_buf_alloc(&d->ck, &o, CKJIT_BF16, NEW * HQ * DH) ||
      gt_buf_alloc(&d->ck, &lse, CKJIT_F32, HQ * NEW) || gt_buf_alloc(&d->ck, &tab, CKJIT_I32, B * MAXP) ||
      gt_buf_alloc(&d->ck, &lens, CKJIT_I32, B) || gt_buf_alloc(&d->ck, &cu, CKJIT_I32, B + 1) ||
      gt_buf_alloc(&d->ck, &err, CKJIT_I32, 1))
    goto done;
  int32_t perm[PAGES], table[B * MAXP];
  for (int p = 0; p < PAGES; p++) perm[p] = p;
  for (int p = PAGES - 1; p > 0; p--) {
    const int j = (int)tu_rng_range(&d->rng, 0, p);
    const int32_t t = perm[p];
    perm[p] = perm[j], perm[j] = t;
  }
  /* Sequence 0: 3 pages (perm 0..2), then 2 cells it must not use; sequence 1: 5 pages. */
  for (int c = 0; c < MAXP; c++) table[c] = perm[c < 3 ? c : 6 + c], table[MAXP + c] = perm[3 + c];
  memcpy(tab.host, table, sizeof table), memcpy(lens.host, len_k, sizeof len_k), memcpy(cu.host, cu_new, sizeof cu_new);
  /* Every key of each sequence (contiguous [key][head][dim]), the pool
   * holding the old ones (random bytes elsewhere), the new ones packed. */
  gt_fill_uniform(CKJIT_BF16, kp.host, 0, POOL, &d->rng, -1, 1);
  gt_fill_uniform(CKJIT_BF16, vp.host, 0, POOL, &d->rng, -1, 1);
  gt_fill_uniform(CKJIT_BF16, q.host, 0, q.elems, &d->rng, -1, 1);
  want_k = malloc(POOL * 2), want_v = malloc(POOL * 2);
  seq_k = malloc((size_t)(len_k[0] + len_k[1]) * TOK * sizeof *seq_k);
  seq_v = malloc((size_t)(len_k[0] + len_k[1]) * TOK * sizeof *seq_v);
  if (!want_k || !want_v || !seq_k || !seq_v) abort();
  memcpy(want_k, kp.host, POOL * 2), memcpy(want_v, vp.host, POOL * 2);
  for (int b = 0, first = 0; b < B; first += len_k[b], b++)
    for (int j = 0; j < len_k[b]; j++) {
      const int64_t slot = (int64_t)table[b * MAXP + j / PAGE] * PAGE * TOK + (j % PAGE) * TOK;
      const int fresh = j - (len_k[b] - (cu_new[b + 1] - cu_new[b])); /* >= 0: a new token */
      for (int x = 0; x < TOK; x++) {
        const double kv = gt_put(CKJIT_BF16, want_k, (size_t)(slot + x), gt_uniform(&d->rng, -1, 1));
        const double vv = gt_put(CKJIT_BF16, want_v, (size_t)(slot + x), gt_uniform(&d->rng, -1, 1));
        seq_k[(first + j) * TOK + x] = kv, seq_v[(first + j) * TOK + x] = vv;
        uint8_t *dk = fresh >= 0 ? kn.host + (size_t)((cu_new[b] + fresh) * TOK + x) * 2 : kp.host + (size_t)(slot + x) * 2;
        uint8_t *dv = fresh >= 0 ? vn.host + (size_t)((cu_new[b] + fresh) * TOK + x) * 2 : vp.host + (size_t)(slot + x) * 2;
        memcpy(dk, want_k + (size_t)(slot + x) * 2, 2), memcpy(dv, want_v + (size_t)(slot + x) * 2, 2);
      }
    }
  gt_buf *up[] = {&kp, &vp, &kn, &vn, &q, &tab, &lens, &cu, &err};
  for (int i = 0; i < 9; i++)
    if (gt_buf_upload(&d->ck, up[i])) goto done;
  if (gt_buf_poison(&d->ck, &o) || gt_buf_poison(&d->ck, &lse)) goto done;

  ckjit_paged_kv kv = {0};
  kv.num_pages = PAGES, kv.page_size = PAGE, kv.k_pages = kp.dev, kv.v_pages = vp.dev;
  kv.k_strides = kv.v_strides = ckjit_paged_strides_nhd(PAGE, HK, DH);
  kv.block_table = tab.dev, kv.max_pages_per_seq = MAXP, kv.seqlens_k = lens.dev, kv.error = err.dev;
  ckjit_paged_kv_append_desc ap;
  ckjit_paged_kv_append_desc_init(&ap);
  ap.dtype = CKJIT_BF16, ap.batch = B, ap.num_heads_kv = HK, ap.head_dim_qk = ap.head_dim_v = DH;
  ap.max_seqlen_new = 5, ap.cu_seqlens_new = cu.dev, ap.k_new = kn.dev, ap.v_new = vn.dev;
  ap.k_new_strides = ap.v_new_strides = (ckjit_attention_strides){0, DH, TOK, 1};
  ap.kv = kv;
  ckjit_paged_attention_desc pa;
  ckjit_paged_attention_desc_init(&pa);
  pa.dtype = CKJIT_BF16, pa.batch = B, pa.num_heads_q = HQ, pa.num_heads_kv = HK, pa.head_dim_qk = pa.head_dim_v = DH;
  pa.max_seqlen_q = 5, pa.cu_seqlens_q = cu.dev, pa.mask = CKJIT_ATTENTION_MASK_CAUSAL;
  pa.q = q.dev, pa.q_strides = (ckjit_attention_strides){0, DH, HQ * DH, 1};
  pa.o = o.dev, pa.o_strides = pa.q_strides;
  pa.lse = lse.dev, pa.lse_strides = (ckjit_attention_strides){0, NEW, 1, 0};
  pa.kv = kv;
  if (mg_ran(d, ckjit_paged_kv_append(&ap, d->stream), "ckjit_paged_kv_append") ||
      mg_ran(d, ckjit_paged_attention(&pa, d->stream), "ckjit_paged_attention"))
    goto done;
  gt_buf *down[] = {&kp, &vp, &o, &lse, &err};
  for (int i = 0; i < 5; i++)
    if (gt_buf_download(&d->ck, down[i], NULL)) goto done;
  int32_t e;
  memcpy(&e, err.host, 4);
  mg_expect(d, "kv.error", 0, 0, e, 0, 0);
  for (size_t i = 0; i < POOL; i++)
    if (memcmp(kp.host + 2 * i, want_k + 2 * i, 2) || memcmp(vp.host + 2 * i, want_v + 2 * i, 2)) {
      gt_fail(&d->ck, "pool element %zu (page %zu slot %zu) after the append: K %g V %g, want %g %g", i, i / (PAGE * TOK),
              i / TOK % PAGE, gt_get(CKJIT_BF16, kp.host, i), gt_get(CKJIT_BF16, vp.host, i),
              gt_get(CKJIT_BF16, want_k, i), gt_get(CKJIT_BF16, want_v, i));
      break;
    }
  qd = to_doubles(&q);
  for (int b = 0, first = 0; b < B; first += len_k[b], b++)
    for (int i = 0; i < cu_new[b + 1] - cu_new[b]; i++) { /* query i sees keys 0 .. len - new + i */
      const int t = cu_new[b] + i, n = len_k[b] - (cu_new[b + 1] - cu_new[b]) + i + 1;
      for (int h = 0; h < HQ; h++) {
        const double *kh = seq_k + (size_t)first * TOK + h / (HQ / HK) * DH, *vh = seq_v + (size_t)first * TOK + h / (HQ / HK) * DH;
        const double want_lse = attn_row(qd + (t * HQ + h) * DH, kh, vh, TOK, n, ref, &tol_o, &tol_l);
        for (int x = 0; x < DH; x++)
          mg_expect(d, "paged O", t * HQ + h, x, gt_get(CKJIT_BF16, o.host, (size_t)((t * HQ + h) * DH + x)), ref[x], tol_o);
        mg_expect(d, "paged LSE", h, t, gt_get(CKJIT_F32, lse.host, (size_t)(h * NEW + t)), want_lse, tol_l);
      }
    }
done:
  free(want_k), free(want_v), free(seq_k), free(seq_v), free(qd);
  gt_buf *all[] = {&kp, &vp, &kn, &vn, &q, &o, &lse, &tab, &lens, &cu, &err};
  for (int i = 0; i < 11; i++) gt_buf_free(all[i]);
  mg_end(d);
}

void mg_matmul_round(mg_dev *d) {
  gemm(d);
  gemm_grouped(d);
  attention(d);
  paged(d);
}
