/* A paged problem on the device (see paged_gpu.h): its buffers, the
 * descriptors of both table forms, the output checks and the rows
 * compared with the reference.  FP8 pages: the pools are byte buffers
 * (CKJIT_FP8_E4M3) and the scales an f32 buffer, K's at 0 and V's at
 * PG_SCALE_V, NaN wherever the case's scale_stride says the kernels must
 * not look (with one scale for the pool: every element but the first). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paged_gpu.h"

static void put_i32(gt_buf *b, int64_t at, const int32_t *src, int64_t n) {
  memcpy(b->host + 4 * at, src, (size_t)n * 4);
}

static void fill_tables(pg_dev *v) {
  const pg_problem *p = v->p;
  gt_buf *t = &v->tab;
  put_i32(t, v->t_bt, p->block_table, p->batch * p->max_pages);
  put_i32(t, v->t_sl, p->seqlens, p->batch);
  put_i32(t, v->t_ip, p->indptr, p->batch + 1);
  put_i32(t, v->t_ix, p->indices, p->n_indices);
  put_i32(t, v->t_ll, p->last_len, p->batch);
  for (int64_t b = 0; b <= p->batch; b++) {
    const int32_t q = (int32_t)p->tok_q[b], n = (int32_t)p->tok_new[b];
    put_i32(t, v->t_cq + b, &q, 1);
    put_i32(t, v->t_cn + b, &n, 1);
  }
  const int32_t decoy_id = -3, decoy_len = 7;
  for (int64_t i = 0; i < p->batch * p->max_pages; i++) put_i32(t, v->t_decoy_bt + i, &decoy_id, 1);
  for (int64_t b = 0; b < p->batch; b++) put_i32(t, v->t_decoy_sl + b, &decoy_len, 1);
}

int pg_dev_upload_tables(gt_check *ck, pg_dev *v) {
  fill_tables(v);
  return gt_buf_upload(ck, &v->tab);
}

int pg_dev_upload_pool(gt_check *ck, pg_dev *v, int after) {
  for (int i = 0; i < 2; i++) {
    if (!v->pool[i].dev) continue;
    memcpy(v->pool[i].host, after ? v->p->after[i] : v->p->before[i], v->pool[i].elems * gt_esize(v->pool[i].dt));
    if (gt_buf_upload(ck, &v->pool[i])) return -1;
  }
  return 0;
}

int pg_dev_setup(gt_check *ck, pg_dev *v, pg_problem *p, int with_pool) {
  memset(v, 0, sizeof *v);
  v->p = p;
  const pg_case *c = p->c;
  const int64_t b = p->batch, cells = b * p->max_pages;
  v->t_bt = 0;
  v->t_sl = v->t_bt + cells;
  v->t_ip = v->t_sl + b;
  v->t_ix = v->t_ip + b + 1;
  v->t_ll = v->t_ix + p->n_indices;
  v->t_cq = v->t_ll + b;
  v->t_cn = v->t_cq + b + 1;
  v->t_decoy_bt = v->t_cn + b + 1;
  v->t_decoy_sl = v->t_decoy_bt + cells;
  const int64_t tab_elems = v->t_decoy_sl + b + GUARD;
  for (int i = 0; with_pool && i < 2; i++)
    if (p->pool_elems[i] && gt_buf_alloc(ck, &v->pool[i], pg_pool_dtype(c), (size_t)p->pool_elems[i])) return -1;
  if (c->fp8) {
    if (gt_buf_alloc(ck, &v->scale, CKJIT_F32, 2 * PG_SCALE_V + GUARD)) return -1;
    gt_fill_nan(CKJIT_F32, v->scale.host, v->scale.elems);
    for (int64_t g = 0; g < (c->per_head ? c->hk : 1); g++) {
      gt_put(CKJIT_F32, v->scale.host, (size_t)g, p->kscale[g]);
      gt_put(CKJIT_F32, v->scale.host, (size_t)(PG_SCALE_V + g), p->vscale[g]);
    }
    if (gt_buf_upload(ck, &v->scale)) return -1;
  }
  if (gt_buf_alloc(ck, &v->q, c->dt, (size_t)p->q_elems) || gt_buf_alloc(ck, &v->o, c->dt, (size_t)p->o_elems) ||
      (c->lse && gt_buf_alloc(ck, &v->lse, CKJIT_F32, (size_t)p->lse_elems)) ||
      gt_buf_alloc(ck, &v->newb, c->dt, (size_t)p->new_elems) || gt_buf_alloc(ck, &v->tab, CKJIT_I32, (size_t)tab_elems) ||
      gt_buf_alloc(ck, &v->err, CKJIT_I32, 1))
    return -1;
  memcpy(v->q.host, p->q_host, (size_t)p->q_elems * gt_esize(c->dt));
  memcpy(v->newb.host, p->new_host, (size_t)p->new_elems * gt_esize(c->dt));
  memset(v->tab.host, 0x5A, (size_t)tab_elems * 4); /* the guard: junk */
  if (gt_buf_upload(ck, &v->q) || gt_buf_upload(ck, &v->newb) || pg_dev_upload_tables(ck, v)) return -1;
  return with_pool ? pg_dev_upload_pool(ck, v, !c->append) : 0;
}

void pg_dev_free(pg_dev *v) {
  gt_buf *all[] = {&v->pool[0], &v->pool[1], &v->q, &v->o, &v->lse, &v->newb, &v->tab, &v->err, &v->scale};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]->host || all[i]->dev) gt_buf_free(all[i]);
}

static const int32_t *tab_ptr(const pg_dev *v, int64_t at) { return (const int32_t *)gt_buf_ptr(&v->tab, at); }

ckjit_paged_kv pg_dev_kv(const pg_dev *v, int csr) {
  const pg_problem *p = v->p;
  ckjit_paged_kv kv;
  memset(&kv, 0, sizeof kv);
  kv.num_pages = p->num_pages;
  kv.page_size = p->c->page;
  kv.k_pages = v->pool[PB_K].dev;
  kv.v_pages = p->c->layout == PL_KV ? gt_buf_ptr(&v->pool[PB_K], p->v_off) : v->pool[PB_V].dev;
  kv.k_strides = p->ks, kv.v_strides = p->vs;
  kv.max_pages_per_seq = p->max_pages;
  if (csr) {
    kv.kv_indptr = tab_ptr(v, v->t_ip);
    kv.kv_page_indices = tab_ptr(v, v->t_ix);
    kv.kv_last_page_len = tab_ptr(v, v->t_ll);
    kv.block_table = tab_ptr(v, v->t_decoy_bt); /* must be ignored: kv_indptr selects CSR */
    kv.seqlens_k = tab_ptr(v, v->t_decoy_sl);
  } else {
    kv.block_table = tab_ptr(v, v->t_bt);
    kv.seqlens_k = tab_ptr(v, v->t_sl);
  }
  kv.error = (int32_t *)v->err.dev;
  if (p->c->fp8) {
    kv.page_dtype = CKJIT_FP8_E4M3;
    kv.k_scale = (const float *)v->scale.dev;
    kv.v_scale = (const float *)gt_buf_ptr(&v->scale, PG_SCALE_V);
    kv.scale_stride = p->c->per_head ? 1 : 0;
  }
  if (p->c->hint == PG_HINT_LOW) kv.max_seqlen_k = 7; /* wrong: costs speed, never correctness */
  for (int64_t b = 0; p->c->hint == PG_HINT_EXACT && b < p->batch; b++)
    if (p->len_k[b] > kv.max_seqlen_k) kv.max_seqlen_k = p->len_k[b];
  return kv;
}

void pg_dev_desc(const pg_dev *v, int csr, ckjit_paged_attention_desc *d) {
  const pg_problem *p = v->p;
  const pg_case *c = p->c;
  ckjit_paged_attention_desc_init(d);
  d->dtype = c->dt;
  d->batch = p->batch;
  d->num_heads_q = c->hq, d->num_heads_kv = c->hk;
  d->head_dim_qk = d->head_dim_v = c->d;
  d->max_seqlen_q = p->max_q;
  d->cu_seqlens_q = c->varlen_q ? tab_ptr(v, v->t_cq) : NULL;
  d->q = v->q.dev, d->q_strides = p->q_st;
  d->o = gt_buf_ptr(&v->o, p->o_off), d->o_strides = p->o_st;
  if (c->lse) d->lse = gt_buf_ptr(&v->lse, p->lse_off), d->lse_strides = p->lse_st;
  d->kv = pg_dev_kv(v, csr);
  d->softmax_scale = c->scale;
  d->mask = c->mask, d->window_left = c->wl, d->window_right = c->wr;
  d->softcap = c->softcap;
}

void pg_dev_append_desc(const pg_dev *v, int csr, ckjit_paged_kv_append_desc *a) {
  const pg_problem *p = v->p;
  const pg_case *c = p->c;
  ckjit_paged_kv_append_desc_init(a);
  a->dtype = c->dt;
  a->batch = p->batch, a->num_heads_kv = c->hk, a->head_dim_qk = a->head_dim_v = c->d;
  for (int64_t b = 0; b < p->batch; b++)
    if (p->n_new[b] > a->max_seqlen_new) a->max_seqlen_new = p->n_new[b];
  a->cu_seqlens_new = tab_ptr(v, v->t_cn);
  a->k_new = v->newb.dev, a->v_new = gt_buf_ptr(&v->newb, p->vnew_off);
  a->k_new_strides = a->v_new_strides = p->knew_st;
  a->kv = pg_dev_kv(v, csr);
}

int pg_dev_set_error(gt_check *ck, pg_dev *v, int32_t value) {
  memcpy(v->err.host, &value, 4);
  return gt_buf_upload(ck, &v->err);
}

int32_t pg_dev_get_error(gt_check *ck, pg_dev *v) {
  int32_t e;
  if (gt_sync(ck) || gt_buf_download(ck, &v->err, NULL)) return -1000;
  memcpy(&e, v->err.host, 4);
  return e;
}

int pg_dev_poison_out(gt_check *ck, pg_dev *v) {
  return gt_buf_poison(ck, &v->o) || (v->lse.dev && gt_buf_poison(ck, &v->lse));
}

int pg_dev_download_out(gt_check *ck, pg_dev *v) {
  return gt_sync(ck) || gt_buf_download(ck, &v->o, NULL) || (v->lse.dev && gt_buf_download(ck, &v->lse, NULL));
}

/* ---- output checks ------------------------------------------------------------------------ */

int pg_marks_make(pg_marks *m, const pg_dev *v) {
  const pg_problem *p = v->p;
  const pg_case *c = p->c;
  m->o_in = calloc((size_t)p->o_elems, 1);
  m->lse_in = c->lse ? calloc((size_t)p->lse_elems, 1) : NULL;
  if (!m->o_in || (c->lse && !m->lse_in)) return -1;
  for (int64_t b = 0; b < p->batch; b++)
    for (int64_t h = 0; h < c->hq; h++)
      for (int64_t i = 0; i < p->len_q[b]; i++) {
        for (int64_t x = 0; x < c->d; x++) m->o_in[pg_o_index(p, b, h, i, x)] = 1;
        if (c->lse) m->lse_in[pg_lse_index(p, b, h, i)] = 1;
      }
  return 0;
}

void pg_marks_free(pg_marks *m) {
  free(m->o_in);
  free(m->lse_in);
  m->o_in = m->lse_in = NULL;
}

static void check_buffer(gt_check *ck, const gt_buf *b, const uint8_t *in, int is_lse, const char *what) {
  for (size_t e = 0; e < b->elems; e++) {
    const double x = gt_get(b->dt, b->host, e);
    if (in && in[e] == PG_MARK_ANY) continue;
    if (!(in && in[e])) {
      if (!gt_is_poison(b->dt, b->host, e)) {
        gt_fail(ck, "%s: buffer element %zu, outside the tensor, was written (%g)", what, e, x);
        return;
      }
    } else if (isnan(x) || (isinf(x) && !(is_lse && x < 0))) {
      gt_fail(ck, "%s: element %zu is %g (not written, or not finite)", what, e, x);
      return;
    }
  }
  gt_pass(ck);
}

void pg_check_out(gt_check *ck, const pg_dev *v, const pg_marks *m) {
  check_buffer(ck, &v->o, m ? m->o_in : NULL, 0, m ? "O" : "O after a refused call");
  if (v->lse.dev) check_buffer(ck, &v->lse, m ? m->lse_in : NULL, 1, m ? "LSE" : "LSE after a refused call");
}

/* ---- rows against the reference ------------------------------------------------------------- */

int pg_rows_make(pg_rows *r, const pg_problem *p, int sample, uint64_t seed, int threads, int64_t skip_b) {
  const pg_case *c = p->c;
  memset(r, 0, sizeof *r);
  int64_t rows = 0;
  for (int64_t b = 0; b < p->batch; b++) rows += c->hq * p->len_q[b];
  const int64_t cap = sample > 0 ? sample + 2 * p->batch * c->hq : rows;
  r->ids = malloc((size_t)(cap + 1) * sizeof *r->ids);
  r->ref_o = malloc((size_t)(cap + 1) * (size_t)c->d * sizeof *r->ref_o);
  r->ref = malloc((size_t)(cap + 1) * sizeof *r->ref);
  if (!r->ids || !r->ref_o || !r->ref) return -1;
  for (int64_t b = 0; b < p->batch; b++)
    for (int64_t h = 0; h < c->hq && b != skip_b; h++)
      for (int64_t i = 0; i < p->len_q[b]; i++)
        if (sample <= 0 || i == 0 || i == p->len_q[b] - 1) r->ids[r->n++] = (att_rowid){b, h, i};
  tu_rng rng = {seed};
  for (int s = 0; s < sample; s++) {
    const int64_t b = tu_rng_range(&rng, 0, p->batch - 1), h = tu_rng_range(&rng, 0, c->hq - 1);
    if (p->len_q[b] && b != skip_b) r->ids[r->n++] = (att_rowid){b, h, tu_rng_range(&rng, 0, p->len_q[b] - 1)};
  }
  att_ref_rows(&p->ref, r->ids, r->n, r->ref_o, r->ref, threads);
  return 0;
}

void pg_rows_free(pg_rows *r) {
  free(r->ids);
  free(r->ref_o);
  free(r->ref);
  memset(r, 0, sizeof *r);
}

void pg_rows_compare(gt_check *ck, const pg_rows *r, const pg_dev *v) {
  const pg_problem *p = v->p;
  const pg_case *c = p->c;
  double *got = malloc((size_t)c->d * sizeof *got);
  if (!got) {
    gt_fail(ck, "host malloc failed");
    return;
  }
  char why[512];
  for (int64_t n = 0; n < r->n; n++) {
    const att_rowid id = r->ids[n];
    for (int64_t x = 0; x < c->d; x++) got[x] = gt_get(c->dt, v->o.host, (size_t)pg_o_index(p, id.b, id.h, id.i, x));
    double lse = 0.0;
    if (c->lse) lse = gt_get(CKJIT_F32, v->lse.host, (size_t)pg_lse_index(p, id.b, id.h, id.i));
    if (att_compare_row(&p->ref, got, c->lse ? &lse : NULL, r->ref_o + n * c->d, &r->ref[n], why, sizeof why))
      gt_fail(ck, "row b %lld h %lld i %lld (%lld keys, %lld queries): %s", LL(id.b), LL(id.h), LL(id.i),
              LL(p->len_k[id.b]), LL(p->len_q[id.b]), why);
    else
      gt_pass(ck);
  }
  free(got);
}
