/* Where a case's tensors lie in its buffers, and its descriptor: shared by
 * the GPU test (real buffers) and the spec list (attention_specs.c, fake
 * addresses), so both describe the same calls.
 *
 * Every layout leaves gaps the kernels must neither read into a result
 * (the test fills them with NaN) nor write (poison): padded rows, heads
 * and entries, a misaligned start.  Varlen tensors get a wrong batch
 * stride, which ckjit.h says is not used. */
#include <string.h>

#include "attention_gpu.h"

int case_tensor_core_layout(const att_case *c) {
  return c->dt != CKJIT_F32 && c->layout != LAY_SEQ_PAD_ODD && c->layout != LAY_MISALIGNED &&
         c->layout != LAY_DIM_STRIDE2;
}

/* Strides of a [nb][ns][nh][nd] tensor in layout `lay` (one of the
 * per-tensor kinds: BSHD, BHSD, the padded ones, head-dim stride 2). */
static ckjit_attention_strides layout_strides(int lay, int64_t ns, int64_t nh, int64_t nd) {
  ckjit_attention_strides s = ckjit_attention_strides_bshd(ns, nh, nd);
  switch (lay) {
    case LAY_BHSD: return ckjit_attention_strides_bhsd(ns, nh, nd);
    case LAY_SEQ_PAD8: s.seq += 8, s.batch = ns * s.seq + 16; break;
    case LAY_SEQ_PAD_ODD: s.seq += 3, s.batch = ns * s.seq + 5; break;
    case LAY_DIM_STRIDE2: s.dim = 2, s.head *= 2, s.seq *= 2, s.batch *= 2; break;
    default: break;
  }
  return s;
}

/* O with gaps between rows, heads and entries (strides still multiples of
 * 8, so the tensor-core layout is kept). */
static void pad_output(ckjit_attention_strides *s, int64_t ns, int64_t nh) {
  const int head_major = s->head > s->seq;
  s->seq += 8;
  if (head_major) s->head = ns * s->seq + 16;
  s->batch = head_major ? nh * s->head + 24 : ns * s->seq + 24;
}

int64_t view_index(const tview *t, int64_t b, int64_t h, int64_t s, int64_t d) {
  return t->off + b * t->st.batch + h * t->st.head + s * t->st.seq + d * t->st.dim;
}

/* Elements a buffer needs to hold the view. */
static int64_t view_extent(const tview *t) {
  if (!t->nb || !t->nh || !t->ns || !t->nd) return t->off;
  return view_index(t, t->nb - 1, t->nh - 1, t->ns - 1, t->nd - 1) + 1;
}

static void set_view(tview *t, int buf, int64_t off, ckjit_attention_strides st, int64_t nb, int64_t nh, int64_t ns,
                     int64_t nd) {
  *t = (tview){buf, off, st, nb, nh, ns, nd};
}

static void plan_views(const att_case *c, att_plan *p) {
  const int64_t nb = c->varlen ? 1 : c->batch;
  const int64_t nq = c->varlen ? p->tok_q[c->batch] : c->sq, nk = c->varlen ? p->tok_k[c->batch] : c->sk;
  const int lay = c->layout;
  const int64_t mis = lay == LAY_MISALIGNED; /* one element past a 16-byte boundary */
  if (lay == LAY_QKV_PACKED) { /* [b][s][hq Q heads, hk K heads, hk V heads][d] */
    const int64_t row = c->hq * c->dqk + c->hk * (c->dqk + c->dv);
    const ckjit_attention_strides sq = {nq * row, c->dqk, row, 1}, sv = {nq * row, c->dv, row, 1};
    set_view(&p->q, B_Q, 0, sq, nb, c->hq, nq, c->dqk);
    set_view(&p->k, B_Q, c->hq * c->dqk, sq, nb, c->hk, nk, c->dqk);
    set_view(&p->v, B_Q, (c->hq + c->hk) * c->dqk, sv, nb, c->hk, nk, c->dv);
  } else {
    const int lq = lay == LAY_MIXED ? LAY_BHSD : lay, lk = lay == LAY_MIXED ? LAY_BSHD : lay;
    const int lv = lay == LAY_MIXED ? LAY_BHSD : lay;
    const int64_t kv_entries = lay == LAY_KV_BCAST ? 1 : nb;
    set_view(&p->q, B_Q, mis, layout_strides(lq, nq, c->hq, c->dqk), nb, c->hq, nq, c->dqk);
    set_view(&p->k, B_K, mis, layout_strides(lk, nk, c->hk, c->dqk), kv_entries, c->hk, nk, c->dqk);
    set_view(&p->v, B_V, mis, layout_strides(lv, nk, c->hk, c->dv), kv_entries, c->hk, nk, c->dv);
    if (lay == LAY_KV_BCAST) p->k.st.batch = p->v.st.batch = 0;
  }
  const int lo = lay == LAY_MIXED || lay == LAY_QKV_PACKED || lay == LAY_KV_BCAST ? LAY_BSHD : lay;
  ckjit_attention_strides so = layout_strides(lo, nq, c->hq, c->dv);
  if (c->pad_out) pad_output(&so, nq, c->hq);
  set_view(&p->o, B_O, (c->pad_out ? 8 : 0) + mis, so, nb, c->hq, nq, c->dv);
  if (c->lse) { /* [b][h][s], rows and entries padded with pad_out */
    const int64_t rows = nq + (c->pad_out ? 3 : 0);
    const ckjit_attention_strides sl = {c->hq * rows + (c->pad_out ? 5 : 0), rows, 1, 0};
    set_view(&p->lse, B_LSE, c->pad_out ? 2 : 0, sl, nb, c->hq, nq, 1);
  }
  /* Varlen: "stride_batch is not used", so give a wrong one (entry b > 0
   * would read the wrong rows through it).  A multiple of 8 elements keeps
   * the layout wgmma's tensor maps take; an odd one (odd_batch_stride)
   * must not change the layout rule either. */
  if (c->varlen)
    p->q.st.batch = p->k.st.batch = p->v.st.batch = p->o.st.batch = p->lse.st.batch =
        c->odd_batch_stride ? 12345 : 12344;
  if (c->bias) { /* [b][h][i][j], rows padded; a broadcast dimension has stride 0 */
    const int64_t ss = c->sk + 3, sh = c->sq * ss + 5, nh = c->bias_bcast & BB_HEAD ? 1 : c->hq;
    const ckjit_attention_strides sb = {c->bias_bcast & BB_BATCH ? 0 : nh * sh + 7,
                                        c->bias_bcast & BB_HEAD ? 0 : sh, ss, 1};
    set_view(&p->bias, B_BIAS, 1, sb, c->bias_bcast & BB_BATCH ? 1 : c->batch, nh, c->sq, c->sk);
  }
}

void plan_case(const att_case *c, att_plan *p) {
  memset(p, 0, sizeof *p);
  for (int64_t b = 0; b < c->batch; b++) {
    p->len_q[b] = c->varlen ? c->lens_q[b] : c->sq;
    p->len_k[b] = c->varlen ? c->lens_k[b] : c->sk;
    p->tok_q[b + 1] = p->tok_q[b] + p->len_q[b];
    p->tok_k[b + 1] = p->tok_k[b] + p->len_k[b];
  }
  plan_views(c, p);
  const int packed = c->layout == LAY_QKV_PACKED;
  p->dt[B_Q] = p->dt[B_K] = p->dt[B_V] = p->dt[B_O] = c->dt;
  p->elems[B_Q] = packed ? view_extent(&p->v) : view_extent(&p->q);
  /* K and V exist (all NaN) even without keys: a kernel that reads them
   * then gets NaN into O, not a fault that ends the whole suite */
  p->elems[B_K] = packed ? 0 : view_extent(&p->k) + 1;
  p->elems[B_V] = packed ? 0 : view_extent(&p->v) + 1;
  p->elems[B_O] = view_extent(&p->o);
  p->dt[B_LSE] = p->dt[B_ALIBI] = CKJIT_F32;
  p->elems[B_LSE] = c->lse ? view_extent(&p->lse) : 0;
  p->dt[B_BIAS] = c->bias == ATB_F32 ? CKJIT_F32 : c->dt;
  p->elems[B_BIAS] = c->bias ? view_extent(&p->bias) : 0;
  p->alibi_sb = c->alibi == ALIBI_PER_BATCH ? c->hq + 1 : 0; /* a NaN pad between entries */
  p->elems[B_ALIBI] = c->alibi ? (c->alibi == ALIBI_PER_BATCH ? c->batch : 1) * (c->hq + 1) : 0;
  p->dt[B_CUQ] = p->dt[B_CUK] = CKJIT_I32;
  p->elems[B_CUQ] = p->elems[B_CUK] = c->varlen ? c->batch + 1 : 0;
}

static void *at(void *const base[NBUF], const att_plan *p, const tview *t) {
  return (uint8_t *)base[t->buf] + (size_t)t->off * gt_esize(p->dt[t->buf]);
}

void plan_desc(const att_case *c, const att_plan *p, void *const base[NBUF], ckjit_attention_desc *d) {
  ckjit_attention_desc_init(d);
  d->dtype = c->dt, d->batch = c->batch, d->num_heads_q = c->hq, d->num_heads_kv = c->hk;
  d->seqlen_q = c->sq, d->seqlen_k = c->sk, d->head_dim_qk = c->dqk, d->head_dim_v = c->dv;
  d->q = at(base, p, &p->q), d->q_strides = p->q.st;
  d->k = at(base, p, &p->k), d->k_strides = p->k.st;
  d->v = at(base, p, &p->v), d->v_strides = p->v.st;
  d->o = at(base, p, &p->o), d->o_strides = p->o.st;
  if (c->lse) d->lse = at(base, p, &p->lse), d->lse_strides = p->lse.st;
  if (c->varlen) d->cu_seqlens_q = base[B_CUQ], d->cu_seqlens_k = base[B_CUK];
  d->softmax_scale = c->scale, d->softcap = c->softcap;
  d->mask = c->mask, d->window_left = c->wl, d->window_right = c->wr;
  if (c->bias) d->bias = at(base, p, &p->bias), d->bias_strides = p->bias.st, d->bias_dtype = p->dt[B_BIAS];
  if (c->alibi) d->alibi_slopes = base[B_ALIBI], d->alibi_stride_batch = p->alibi_sb;
}
