/* One paged case's host side (see paged_gpu.h), and the self-checks that
 * show the construction is what the cases say, without a GPU.
 *
 * Each sequence's keys are drawn as one contiguous [token][head][dim] copy
 * (kd, vd: what the reference reads); sequence share_b's first
 * share_pages pages of keys are share_a's.  Its pages get ids from a
 * shuffled permutation of the pool (a third more pages than used, never
 * referenced), shared pages once; the keys are then scattered into host
 * mirrors of the pool: `after` holds every key, `before` all but the last
 * n_new of each sequence (the append's tokens).  Everything else in the
 * pool is NaN, so a kernel that reads a wrong page or slot shows it.
 *
 * Tables: padded (max_pages = the most pages + 2; cells past a sequence's
 * pages hold garbage ids: -7, 2^31 - 1, num_pages, num_pages + 100,
 * INT32_MIN, -1) and CSR (compact, PG_CSR_TAIL garbage ids after the last
 * sequence; an empty sequence's kv_last_page_len 0, which must be ignored).
 *
 * FP8 pages: each key element is drawn as a value x in the case's dtype
 * (pg_fp8_draw: over the whole e4m3 range), stored in the pool as
 * e4m3(x / scale of its K/V head) (the append's rule, applied on the host
 * to the keys already there; the new tokens carry x), and the reference
 * sees scale * e4m3_value(code) in double: the attention over the
 * dequantized K and V, as paged_attention.h defines it.  The pool's NaN
 * elsewhere is the e4m3 NaN 0x7F. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paged_gpu.h"

static const int32_t garbage_ids[6] = {-7, INT32_MAX, 0 /* num_pages */, 100 /* num_pages + */, INT32_MIN, -1};

static int32_t garbage(const pg_problem *p, int64_t k) {
  const int g = (int)(k % 6);
  if (g == 2) return (int32_t)p->num_pages;
  if (g == 3) return (int32_t)p->num_pages + 100;
  return garbage_ids[g];
}

int64_t pg_pool_index(const pg_problem *p, int v, int64_t page, int64_t slot, int64_t head, int64_t dim) {
  const ckjit_paged_strides *s = v ? &p->vs : &p->ks;
  return (v ? p->v_off : 0) + page * s->page + slot * s->slot + head * s->head + dim * s->dim;
}

int64_t pg_o_index(const pg_problem *p, int64_t b, int64_t h, int64_t i, int64_t dim) {
  if (p->c->varlen_q) return p->o_off + h * p->o_st.head + (p->tok_q[b] + i) * p->o_st.seq + dim * p->o_st.dim;
  return p->o_off + b * p->o_st.batch + h * p->o_st.head + i * p->o_st.seq + dim * p->o_st.dim;
}

int64_t pg_lse_index(const pg_problem *p, int64_t b, int64_t h, int64_t i) {
  if (p->c->varlen_q) return p->lse_off + h * p->lse_st.head + (p->tok_q[b] + i) * p->lse_st.seq;
  return p->lse_off + b * p->lse_st.batch + h * p->lse_st.head + i * p->lse_st.seq;
}

static void *zalloc(size_t n) { return calloc(n ? n : 1, 1); }

ckjit_dtype pg_pool_dtype(const pg_case *c) { return c->fp8 ? CKJIT_FP8_E4M3 : c->dt; }

double pg_pool_get(const pg_case *c, const uint8_t *buf, size_t i) {
  return c->fp8 ? pg_e4m3_value(buf[i]) : gt_get(c->dt, buf, i);
}

static void pool_fill_nan(const pg_case *c, uint8_t *buf, size_t n) {
  if (c->fp8)
    memset(buf, 0x7F, n);
  else
    gt_fill_nan(c->dt, buf, n);
}

/* fp8: the scales of each K/V head as the device reads them (f32); one for
 * every head when the pool has one (scale_stride 0). */
static void plan_scales(pg_problem *p) {
  const pg_case *c = p->c;
  for (int64_t g = 0; c->fp8 && g < c->hk && g < PG_FP8_MAX_HK; g++) {
    p->kscale[g] = (double)c->k_scale[c->per_head ? g : 0];
    p->vscale[g] = (double)c->v_scale[c->per_head ? g : 0];
  }
}

double pg_fp8_dequant(const pg_problem *p, int v, int64_t g, uint8_t code) {
  return (v ? p->vscale[g] : p->kscale[g]) * pg_e4m3_value(code);
}

/* Lengths, queries, new tokens and their offsets. */
static void plan_lengths(pg_problem *p) {
  const pg_case *c = p->c;
  p->batch = c->batch;
  int64_t longest_q = 0;
  p->tok_k[0] = p->tok_q[0] = p->tok_new[0] = 0;
  for (int64_t b = 0; b < p->batch; b++) {
    p->len_k[b] = c->len_k[b];
    p->len_q[b] = c->varlen_q ? (c->nq < p->len_k[b] ? c->nq : p->len_k[b]) : c->nq;
    p->n_new[b] = c->append ? (p->len_q[b] < p->len_k[b] ? p->len_q[b] : p->len_k[b]) : 0;
    if (p->len_q[b] > longest_q) longest_q = p->len_q[b];
    p->tok_k[b + 1] = p->tok_k[b] + p->len_k[b];
    p->tok_q[b + 1] = p->tok_q[b] + p->len_q[b];
    p->tok_new[b + 1] = p->tok_new[b] + p->n_new[b];
  }
  p->max_q = c->varlen_q ? longest_q + c->max_q_extra : c->nq;
  p->rows_q = c->varlen_q ? p->tok_q[p->batch] : p->batch * p->max_q;
}

/* Page ids and both table forms. */
static int plan_pages(pg_problem *p, tu_rng *rng) {
  const pg_case *c = p->c;
  int64_t used = 0, most = 0;
  for (int64_t b = 0; b < p->batch; b++) {
    p->npages[b] = (p->len_k[b] + c->page - 1) / c->page;
    used += p->npages[b];
    if (p->npages[b] > most) most = p->npages[b];
  }
  const int64_t unique = used - c->share_pages;
  p->num_pages = unique + unique / 3 + 3;
  int32_t *perm = malloc((size_t)p->num_pages * sizeof *perm);
  p->ids_store = zalloc((size_t)used * sizeof *p->ids_store);
  p->max_pages = most + 2;
  p->block_table = zalloc((size_t)(p->batch * p->max_pages) * sizeof *p->block_table);
  p->n_indices = used + PG_CSR_TAIL;
  p->indices = zalloc((size_t)p->n_indices * sizeof *p->indices);
  if (!perm || !p->ids_store || !p->block_table || !p->indices) {
    free(perm);
    return -1;
  }
  for (int64_t i = 0; i < p->num_pages; i++) perm[i] = (int32_t)i;
  for (int64_t i = p->num_pages - 1; i > 0; i--) { /* Fisher-Yates */
    const int64_t j = tu_rng_range(rng, 0, i);
    const int32_t t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  int64_t next = 0, at = 0;
  for (int64_t b = 0; b < p->batch; b++) {
    p->pages[b] = p->ids_store + at;
    at += p->npages[b];
    for (int64_t i = 0; i < p->npages[b]; i++)
      p->pages[b][i] = c->share_pages && b == c->share_b && i < c->share_pages ? p->pages[c->share_a][i]
                                                                                : perm[next++];
  }
  free(perm);
  p->indptr[0] = 0;
  for (int64_t b = 0; b < p->batch; b++) {
    for (int64_t i = 0; i < p->max_pages; i++)
      p->block_table[b * p->max_pages + i] = i < p->npages[b] ? p->pages[b][i] : garbage(p, b + i);
    p->seqlens[b] = (int32_t)p->len_k[b];
    p->indptr[b + 1] = p->indptr[b] + (int32_t)p->npages[b];
    memcpy(p->indices + p->indptr[b], p->pages[b], (size_t)p->npages[b] * sizeof *p->indices);
    p->last_len[b] = p->npages[b] ? (int32_t)(p->len_k[b] - (p->npages[b] - 1) * c->page) : 0;
  }
  for (int k = 0; k < PG_CSR_TAIL; k++) p->indices[used + k] = garbage(p, k + 1);
  return 0;
}

static void plan_pool(pg_problem *p) {
  const pg_case *c = p->c;
  const int64_t ps = c->page, hk = c->hk, d = c->d, half = ps * hk * d;
  p->v_off = 0;
  switch (c->layout) {
    case PL_HND: p->ks = p->vs = ckjit_paged_strides_hnd(ps, hk, d); break;
    case PL_KV:
      p->ks = p->vs = (ckjit_paged_strides){.page = 2 * half, .slot = hk * d, .head = d, .dim = 1};
      p->v_off = half;
      break;
    default: p->ks = p->vs = ckjit_paged_strides_nhd(ps, hk, d); break;
  }
  if (c->layout == PL_KV) {
    p->pool_elems[PB_K] = p->num_pages * 2 * half + GUARD;
    p->pool_elems[PB_V] = 0;
  } else {
    p->pool_elems[PB_K] = p->pool_elems[PB_V] = p->num_pages * half + GUARD;
  }
}

/* The new tokens, Q, O and LSE: shapes, strides, offsets (pad_out: padded
 * rows and offsets).  The new tokens are packed [token][head][dim], V after
 * K (PL_KV: [token][2][head][dim], K and V of a token side by side); with
 * odd_new each token's row is 3 elements longer (not 16-byte rows). */
static void plan_qo(pg_problem *p) {
  const pg_case *c = p->c;
  const int64_t hq = c->hq, d = c->d, pad = c->pad_out, kv_row = c->hk * d, new_tokens = p->tok_new[p->batch];
  const int64_t new_seq = (c->layout == PL_KV ? 2 * kv_row : kv_row) + (c->odd_new ? 3 : 0);
  p->knew_st = (ckjit_attention_strides){0, d, new_seq, 1};
  p->vnew_off = c->layout == PL_KV ? kv_row : new_tokens * new_seq;
  p->new_elems = 2 * new_tokens * new_seq + GUARD;
  const int64_t row = hq * d + (pad ? 8 : 0);
  p->q_elems = p->rows_q * hq * d + GUARD;
  p->o_off = pad ? 8 : 0;
  p->lse_off = pad ? 5 : 0;
  const int64_t hs = (c->varlen_q ? p->rows_q : p->max_q) + (pad ? 3 : 0);
  if (c->varlen_q) {
    p->q_st = (ckjit_attention_strides){0, d, hq * d, 1};
    p->o_st = (ckjit_attention_strides){0, d, row, 1};
    p->lse_st = (ckjit_attention_strides){0, hs, 1, 0};
    p->o_elems = p->o_off + p->rows_q * row + GUARD;
    p->lse_elems = p->lse_off + hq * hs + GUARD;
  } else {
    p->q_st = ckjit_attention_strides_bshd(p->max_q, hq, d);
    p->o_st = (ckjit_attention_strides){p->max_q * row + (pad ? 16 : 0), d, row, 1};
    p->lse_st = (ckjit_attention_strides){hq * hs, hs, 1, 0};
    p->o_elems = p->o_off + p->batch * p->o_st.batch + GUARD;
    p->lse_elems = p->lse_off + p->batch * p->lse_st.batch + GUARD;
  }
}

/* fp8: every key element's value x (in dt), its code e4m3(x / scale) and
 * the dequantized value the reference sees. */
static void fill_fp8_keys(pg_problem *p, tu_rng *rng) {
  const pg_case *c = p->c;
  const int64_t d = c->d, row = c->hk * d, n = p->tok_k[p->batch] * row;
  for (int64_t e = 0; e < n; e++) {
    const int64_t g = e % row / d;
    p->kx[e] = pg_fp8_draw(rng, c->dt, p->kscale[g]);
    p->vx[e] = pg_fp8_draw(rng, c->dt, p->vscale[g]);
    p->kcode[e] = pg_e4m3_encode(p->kx[e] / p->kscale[g]);
    p->vcode[e] = pg_e4m3_encode(p->vx[e] / p->vscale[g]);
    p->kd[e] = pg_fp8_dequant(p, 0, g, p->kcode[e]);
    p->vd[e] = pg_fp8_dequant(p, 1, g, p->vcode[e]);
  }
}

/* Sequence share_b's first share_pages pages of keys become share_a's. */
static void copy_shared(pg_problem *p, void *base, size_t es) {
  const pg_case *c = p->c;
  const int64_t row = c->hk * c->d, n = c->share_pages * c->page * row;
  uint8_t *b = base;
  memcpy(b + (size_t)(p->tok_k[c->share_b] * row) * es, b + (size_t)(p->tok_k[c->share_a] * row) * es, (size_t)n * es);
}

/* The data: keys (shared prefix copied), the pool mirrors, new tokens, Q. */
static int fill_data(pg_problem *p, tu_rng *rng) {
  const pg_case *c = p->c;
  const ckjit_dtype dt = c->dt;
  const int64_t hk = c->hk, d = c->d, keys = p->tok_k[p->batch], row = hk * d;
  const size_t es = gt_esize(dt), pes = gt_esize(pg_pool_dtype(c));
  p->kd = zalloc((size_t)(keys * row) * sizeof(double));
  p->vd = zalloc((size_t)(keys * row) * sizeof(double));
  for (int i = 0; i < 2; i++) {
    p->before[i] = p->pool_elems[i] ? malloc((size_t)p->pool_elems[i] * pes) : NULL;
    p->after[i] = p->pool_elems[i] ? malloc((size_t)p->pool_elems[i] * pes) : NULL;
    if (p->pool_elems[i] && (!p->before[i] || !p->after[i])) return -1;
  }
  p->new_host = malloc((size_t)p->new_elems * es);
  p->q_host = malloc((size_t)p->q_elems * es);
  p->qd = malloc((size_t)p->q_elems * sizeof(double));
  if (!p->kd || !p->vd || !p->new_host || !p->q_host || !p->qd) return -1;
  if (c->fp8) {
    p->kx = zalloc((size_t)(keys * row) * sizeof(double));
    p->vx = zalloc((size_t)(keys * row) * sizeof(double));
    p->kcode = zalloc((size_t)(keys * row));
    p->vcode = zalloc((size_t)(keys * row));
    if (!p->kx || !p->vx || !p->kcode || !p->vcode) return -1;
    fill_fp8_keys(p, rng);
  } else {
    for (int64_t e = 0; e < keys * row; e++) {
      p->kd[e] = gt_round(dt, gt_uniform(rng, -1.0, 1.0));
      p->vd[e] = gt_round(dt, gt_uniform(rng, -1.0, 1.0));
    }
  }
  if (c->share_pages) {
    copy_shared(p, p->kd, sizeof(double));
    copy_shared(p, p->vd, sizeof(double));
    if (c->fp8) {
      copy_shared(p, p->kx, sizeof(double));
      copy_shared(p, p->vx, sizeof(double));
      copy_shared(p, p->kcode, 1);
      copy_shared(p, p->vcode, 1);
    }
  }
  for (int i = 0; i < 2; i++)
    if (p->pool_elems[i]) {
      pool_fill_nan(c, p->before[i], (size_t)p->pool_elems[i]);
      pool_fill_nan(c, p->after[i], (size_t)p->pool_elems[i]);
    }
  const int kv_buf = c->layout == PL_KV ? PB_K : PB_V;
  for (int64_t b = 0; b < p->batch; b++)
    for (int64_t j = 0; j < p->len_k[b]; j++) {
      const int64_t page = p->pages[b][j / c->page], slot = j % c->page, first_new = p->len_k[b] - p->n_new[b];
      for (int64_t g = 0; g < hk; g++)
        for (int64_t x = 0; x < d; x++) {
          const int64_t src = (p->tok_k[b] + j) * row + g * d + x;
          const int64_t ki = pg_pool_index(p, 0, page, slot, g, x), vi = pg_pool_index(p, 1, page, slot, g, x);
          for (int m = 0; m < 1 + (j < first_new); m++) { /* after; before too when not new */
            uint8_t *const *mirror = m ? p->before : p->after;
            if (c->fp8) {
              mirror[PB_K][ki] = p->kcode[src];
              mirror[kv_buf][vi] = p->vcode[src];
            } else {
              gt_put(dt, mirror[PB_K], (size_t)ki, p->kd[src]);
              gt_put(dt, mirror[kv_buf], (size_t)vi, p->vd[src]);
            }
          }
        }
    }
  gt_fill_nan(dt, p->new_host, (size_t)p->new_elems);
  for (int64_t b = 0; b < p->batch; b++)
    for (int64_t i = 0; i < p->n_new[b]; i++)
      for (int64_t g = 0; g < hk; g++)
        for (int64_t x = 0; x < d; x++) {
          const int64_t src = (p->tok_k[b] + p->len_k[b] - p->n_new[b] + i) * row + g * d + x;
          const int64_t dst = (p->tok_new[b] + i) * p->knew_st.seq + g * d + x;
          gt_put(dt, p->new_host, (size_t)dst, c->fp8 ? p->kx[src] : p->kd[src]);
          gt_put(dt, p->new_host, (size_t)(dst + p->vnew_off), c->fp8 ? p->vx[src] : p->vd[src]);
        }
  gt_fill_nan(dt, p->q_host, (size_t)p->q_elems);
  for (int64_t e = 0; e < p->q_elems - GUARD; e++) gt_put(dt, p->q_host, (size_t)e, gt_uniform(rng, -1.0, 1.0));
  for (int64_t e = 0; e < p->q_elems; e++) p->qd[e] = gt_get(dt, p->q_host, (size_t)e);
  return 0;
}

static void plan_reference(pg_problem *p) {
  const pg_case *c = p->c;
  att_problem *r = &p->ref;
  memset(r, 0, sizeof *r);
  r->dt = c->dt, r->batch = p->batch, r->hq = c->hq, r->hk = c->hk, r->dqk = r->dv = c->d;
  r->len_q = p->len_q, r->len_k = p->len_k;
  r->tok_q = c->varlen_q ? p->tok_q : NULL;
  r->tok_k = p->tok_k;
  r->q = (att_view){p->qd, p->q_st.batch, p->q_st.head, p->q_st.seq, p->q_st.dim};
  r->k = (att_view){p->kd, 0, c->d, c->hk * c->d, 1};
  r->v = (att_view){p->vd, 0, c->d, c->hk * c->d, 1};
  /* the scale ckjit uses: the float given, or (float)(1 / sqrt(d)) */
  r->scale = c->scale != 0.0f ? (double)c->scale : (double)(float)(1.0 / sqrt((double)c->d));
  r->softcap = c->softcap, r->mask = c->mask, r->wl = c->wl, r->wr = c->wr;
}

static int plan(pg_problem *p, const pg_case *c, tu_rng *rng) {
  memset(p, 0, sizeof *p);
  p->c = c;
  plan_lengths(p);
  plan_scales(p);
  if (plan_pages(p, rng)) return -1;
  plan_pool(p);
  plan_qo(p);
  return 0;
}

int pg_problem_plan(pg_problem *p, const pg_case *c, uint64_t seed) {
  tu_rng rng = {seed};
  return plan(p, c, &rng);
}

int pg_problem_build(pg_problem *p, const pg_case *c, uint64_t seed) {
  tu_rng rng = {seed};
  if (plan(p, c, &rng) || fill_data(p, &rng)) return -1;
  plan_reference(p);
  return 0;
}

void pg_problem_free(pg_problem *p) {
  free(p->ids_store);
  free(p->block_table);
  free(p->indices);
  for (int i = 0; i < 2; i++) {
    free(p->before[i]);
    free(p->after[i]);
  }
  free(p->kd);
  free(p->vd);
  free(p->kx);
  free(p->vx);
  free(p->kcode);
  free(p->vcode);
  free(p->new_host);
  free(p->q_host);
  free(p->qd);
  memset(p, 0, sizeof *p);
}

/* ---- self-checks ---------------------------------------------------------------------- */

static int sc_fail(const char *name, const char *what, long long a, long long b) {
  printf("FAIL paged self-check [%s]: %s (%lld, %lld)\n", name, what, a, b);
  return 1;
}

static int in_pool(const pg_problem *p, int64_t id) { return id >= 0 && id < p->num_pages; }

/* The tables: used cells inside the pool, garbage outside it, the forms
 * agree on ids and lengths, no page of two sequences except the shared ones. */
static int check_tables(const pg_problem *p) {
  const pg_case *c = p->c;
  int bad = 0;
  uint8_t *owner = zalloc((size_t)p->num_pages);
  if (!owner) return 1;
  for (int64_t b = 0; b < p->batch; b++) {
    const int64_t csr_pages = p->indptr[b + 1] - p->indptr[b];
    const int64_t csr_len = csr_pages ? (csr_pages - 1) * c->page + p->last_len[b] : 0;
    if (csr_len != p->len_k[b] || p->seqlens[b] != p->len_k[b]) bad += sc_fail(c->name, "lengths", b, csr_len);
    if (csr_pages && (p->last_len[b] < 1 || p->last_len[b] > c->page)) bad += sc_fail(c->name, "last page", b, p->last_len[b]);
    for (int64_t i = 0; i < p->max_pages; i++) {
      const int32_t id = p->block_table[b * p->max_pages + i];
      if (i < p->npages[b]) {
        const int shared = c->share_pages && b == c->share_b && i < c->share_pages;
        if (!in_pool(p, id) || id != p->indices[p->indptr[b] + i]) bad += sc_fail(c->name, "page id", b, i);
        else if (!shared && owner[id]++) bad += sc_fail(c->name, "a page used twice", b, id);
        if (shared && id != p->pages[c->share_a][i]) bad += sc_fail(c->name, "shared page", b, i);
      } else if (in_pool(p, id)) {
        bad += sc_fail(c->name, "a garbage cell inside the pool", b, i);
      }
    }
  }
  for (int k = 0; k < PG_CSR_TAIL; k++)
    if (in_pool(p, p->indices[p->indptr[p->batch] + k])) bad += sc_fail(c->name, "CSR tail inside the pool", k, 0);
  free(owner);
  return bad;
}

/* Key element (K: v 0, V: v 1) of head g as the reference sees it, read
 * from pool buffer `buf` at element i (fp8: dequantized). */
static double key_in_pool(const pg_problem *p, int v, int64_t g, const uint8_t *buf, size_t i) {
  return p->c->fp8 ? pg_fp8_dequant(p, v, g, buf[i]) : gt_get(p->c->dt, buf, i);
}

/* Whether new-token element ni (V: at vnew_off) is what the pool holds at
 * i: the value itself, or for fp8 pages its code e4m3(x / scale), which
 * the append stores; and is the key's own value (kx / kd at src). */
static int new_token_ok(const pg_problem *p, int v, int64_t g, size_t ni, const uint8_t *buf, size_t i, int64_t src) {
  const pg_case *c = p->c;
  const double x = gt_get(c->dt, p->new_host, ni + (v ? (size_t)p->vnew_off : 0));
  if (!c->fp8) return x == (v ? p->vd : p->kd)[src] && x == gt_get(c->dt, buf, i);
  const double scale = v ? p->vscale[g] : p->kscale[g];
  return x == (v ? p->vx : p->kx)[src] && pg_e4m3_encode(x / scale) == buf[i];
}

/* Gathers every key back through the padded table (the CSR one agrees,
 * above) from the `after` mirror; the `before` mirror differs exactly in
 * the new tokens' slots; nothing else of the pool holds a number. */
static int check_pool(const pg_problem *p) {
  const pg_case *c = p->c;
  const int64_t hk = c->hk, d = c->d, row = hk * d;
  const int kv_buf = c->layout == PL_KV ? PB_K : PB_V;
  const size_t pes = gt_esize(pg_pool_dtype(c));
  int bad = 0;
  int64_t numbers = 0, differ = 0, want_numbers = 0, want_differ = 0;
  for (int64_t b = 0; b < p->batch && !bad; b++) {
    want_numbers += p->len_k[b] * row * 2;
    want_differ += p->n_new[b] * row * 2;
    for (int64_t j = 0; j < p->len_k[b] && !bad; j++) {
      const int64_t page = p->block_table[b * p->max_pages + j / c->page], slot = j % c->page;
      const int is_new = j >= p->len_k[b] - p->n_new[b];
      for (int64_t g = 0; g < hk; g++)
        for (int64_t x = 0; x < d; x++) {
          const int64_t src = (p->tok_k[b] + j) * row + g * d + x;
          const size_t ki = (size_t)pg_pool_index(p, 0, page, slot, g, x), vi = (size_t)pg_pool_index(p, 1, page, slot, g, x);
          if (key_in_pool(p, 0, g, p->after[PB_K], ki) != p->kd[src] ||
              key_in_pool(p, 1, g, p->after[kv_buf], vi) != p->vd[src]) {
            bad += sc_fail(c->name, "key gathered through the table", b, j);
            break;
          }
          if (is_new != isnan(pg_pool_get(c, p->before[PB_K], ki)) || is_new != isnan(pg_pool_get(c, p->before[kv_buf], vi))) {
            bad += sc_fail(c->name, "before-append mirror at a key", b, j);
            break;
          }
          if (is_new) {
            const int64_t t = p->tok_new[b] + j - (p->len_k[b] - p->n_new[b]);
            const size_t ni = (size_t)(t * p->knew_st.seq + g * d + x);
            if (!new_token_ok(p, 0, g, ni, p->after[PB_K], ki, src) || !new_token_ok(p, 1, g, ni, p->after[kv_buf], vi, src)) {
              bad += sc_fail(c->name, "new token", b, j);
              break;
            }
          }
        }
    }
  }
  if (c->share_pages) want_numbers -= c->share_pages * c->page * row * 2;
  for (int i = 0; i < 2; i++)
    for (int64_t e = 0; p->pool_elems[i] && e < p->pool_elems[i]; e++) {
      numbers += !isnan(pg_pool_get(c, p->after[i], (size_t)e));
      differ += memcmp(p->after[i] + e * (int64_t)pes, p->before[i] + e * (int64_t)pes, pes) != 0;
    }
  if (numbers != want_numbers) bad += sc_fail(c->name, "numbers in the pool (stray writes or overlaps)", numbers, want_numbers);
  if (differ != want_differ) bad += sc_fail(c->name, "elements the append changes", differ, want_differ);
  return bad;
}

/* The reference of one row through pg_problem's views equals a direct
 * float64 sum over the sequence's contiguous keys (no mask). */
static int check_reference(const pg_problem *p) {
  const pg_case *c = p->c;
  int64_t b = 0;
  for (int64_t e = 0; e < p->batch; e++)
    if (p->len_q[e] && p->len_k[e] > p->len_k[b]) b = e;
  if (!p->len_q[b] || !p->len_k[b]) return 0;
  const int64_t h = c->hq - 1, g = h / (c->hq / c->hk), i = p->len_q[b] - 1, d = c->d, row = c->hk * d;
  double *o = malloc((size_t)d * sizeof *o), *want = calloc((size_t)d, sizeof *want);
  if (!o || !want) abort();
  att_row r;
  att_ref_row(&p->ref, (att_rowid){b, h, i}, o, &r);
  const int64_t qi = c->varlen_q ? (p->tok_q[b] + i) * p->q_st.seq + h * d : b * p->q_st.batch + i * p->q_st.seq + h * d;
  double m = -INFINITY, l = 0.0;
  for (int pass = 0; pass < 2; pass++)
    for (int64_t j = 0; j < p->len_k[b]; j++) {
      double s = 0.0;
      for (int64_t x = 0; x < d; x++) s += p->qd[qi + x] * p->kd[(p->tok_k[b] + j) * row + g * d + x];
      s *= p->ref.scale;
      if (pass == 0) {
        m = fmax(m, s);
        continue;
      }
      const double w = exp(s - m);
      l += w;
      for (int64_t x = 0; x < d; x++) want[x] += w * p->vd[(p->tok_k[b] + j) * row + g * d + x];
    }
  int bad = 0;
  for (int64_t x = 0; x < d && !bad; x++)
    if (fabs(o[x] - want[x] / l) > 1e-12) bad = sc_fail(c->name, "reference row against a direct sum", b, x);
  if (fabs(r.lse - (m + log(l))) > 1e-9) bad += sc_fail(c->name, "reference LSE against a direct sum", b, i);
  free(o);
  free(want);
  return bad;
}

int pg_problem_self_check(void) {
  /* small problems of each layout, page sizes 1, 4 and 16, the shared
   * prefix, the append, both query forms */
  static const pg_case cases[] = {
      {.name = "self-check NHD page 1", .dt = CKJIT_BF16, .page = 1, .layout = PL_NHD, .hq = 4, .hk = 2, .d = 64,
       .batch = 4, .len_k = {3, 0, 1, 9}, .nq = 2, .varlen_q = 1, .append = 1, .mask = CKJIT_ATTENTION_MASK_NONE,
       .wl = -1, .wr = -1, .lse = 1},
      {.name = "self-check HND page 16 shared", .dt = CKJIT_F16, .page = 16, .layout = PL_HND, .hq = 8, .hk = 2,
       .d = 64, .batch = 5, .len_k = {15, 40, 16, 0, 47}, .nq = 5, .varlen_q = 1, .append = 1, .share_a = 1,
       .share_b = 4, .share_pages = 2, .mask = CKJIT_ATTENTION_MASK_NONE, .wl = -1, .wr = -1, .pad_out = 1,
       .odd_new = 1},
      {.name = "self-check KV page 4 dense", .dt = CKJIT_F32, .page = 4, .layout = PL_KV, .hq = 2, .hk = 1,
       .d = 64, .batch = 3, .len_k = {5, 4, 13}, .nq = 3, .varlen_q = 0, .append = 1,
       .mask = CKJIT_ATTENTION_MASK_NONE, .wl = -1, .wr = -1, .lse = 1, .pad_out = 1, .odd_new = 1},
      {.name = "self-check fp8 NHD page 1, per-head scales", .dt = CKJIT_BF16, .page = 1, .layout = PL_NHD, .hq = 4,
       .hk = 2, .d = 64, .batch = 4, .len_k = {3, 0, 1, 9}, .nq = 2, .varlen_q = 1, .append = 1,
       .mask = CKJIT_ATTENTION_MASK_NONE, .wl = -1, .wr = -1, .lse = 1, .fp8 = 1, .per_head = 1,
       .k_scale = {0.0234f, 0.0625f}, .v_scale = {0.3f, 0.5f}},
      {.name = "self-check fp8 K/V interleaved page 4 shared, one scale", .dt = CKJIT_F16, .page = 4, .layout = PL_KV,
       .hq = 8, .hk = 4, .d = 64, .batch = 4, .len_k = {13, 4, 0, 11}, .nq = 3, .varlen_q = 1, .append = 1,
       .share_a = 0, .share_b = 3, .share_pages = 2, .mask = CKJIT_ATTENTION_MASK_NONE, .wl = -1, .wr = -1,
       .odd_new = 1, .fp8 = 1, .k_scale = {0.03125f}, .v_scale = {0.25f}},
  };
  int bad = 0;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    pg_problem p;
    if (pg_problem_build(&p, &cases[k], 1234 + k)) {
      printf("FAIL paged self-check: host memory\n");
      pg_problem_free(&p);
      return bad + 1;
    }
    bad += check_tables(&p) + check_pool(&p) + check_reference(&p);
    pg_problem_free(&p);
  }
  return bad;
}
