/*
 * ckjit — attention over a paged K/V cache (CK Tile's batch prefill), and
 * appending tokens to it.  Included by ckjit/ckjit.h; the semantics of the
 * attention itself are ckjit_attention's (ckjit/attention.h), with K and V read
 * through page tables instead of strides.
 *
 * The pool: K and V are arrays of pages, `page_size` slots each, and a slot
 * holds one token's K (or V) for every K/V head.  Token slot s of page p,
 * K/V head g, element d is at
 *     k_pages + p * k_strides.page + s * k_strides.slot + g * k_strides.head
 *             + d * k_strides.dim
 * (likewise V), so the NHD page layout [page][slot][head][dim] and HND
 * [page][head][slot][dim] are both strides, as is a pool shared by K and V
 * ([page][2][slot][head][dim]: v_pages = k_pages + one K half).
 *
 * A sequence's keys: key j of sequence b lives in slot j % page_size of
 * page id pages_b[j / page_size], given in one of two forms:
 *   padded  pages_b = block_table + b * max_pages_per_seq, with
 *           seqlens_k[b] keys (at most max_pages_per_seq * page_size);
 *   CSR     pages_b = kv_page_indices + kv_indptr[b], with n_b = kv_indptr[b+1]
 *           - kv_indptr[b] pages holding (n_b - 1) * page_size +
 *           kv_last_page_len[b] keys (0 when n_b is 0; the last page
 *           length in 1 .. page_size).
 * (kv_indptr non-NULL selects CSR.)  Pages may be shared between sequences
 * (a common prefix) and appear in any order.
 *
 * Integers: page ids, lengths, kv_indptr, cu_seqlens_q are device int32; a
 * sequence holds at most 2^30 keys and queries.  Every address is formed in
 * 64-bit arithmetic (page id * page stride, slot * slot stride, ...), so a
 * pool may pass 2^31 elements and 4 GiB, with pages anywhere in it.
 *
 * The tables are on the device, so the host cannot check them before a
 * launch.  The kernels check every page id against num_pages before they
 * read a page: an id outside [0, num_pages) is never read (its keys read
 * as zeros), and a length the table cannot hold is cut to what it holds,
 * or to 0 when negative.  Either way the call's result for that sequence
 * is undefined and, when `error` is non-NULL, *error (device int32) is set
 * to 1; ckjit_paged_kv_check finds and names the entry, synchronously.
 */
/* Outside the guard: whichever header comes first, ckjit.h's types precede ours. */
#include "ckjit/ckjit.h"

#ifndef CKJIT_PAGED_ATTENTION_H
#define CKJIT_PAGED_ATTENTION_H

#ifdef __cplusplus
extern "C" {
#endif

/* Strides of a page pool, in elements. */
typedef struct ckjit_paged_strides {
  int64_t page, slot, head, dim;
} ckjit_paged_strides;

/* A paged K/V cache: the pools and each sequence's pages. */
typedef struct ckjit_paged_kv {
  int64_t num_pages;           /* pages in each pool: ids 0 .. num_pages - 1 (<= 2^31 - 1) */
  int64_t page_size;           /* slots per page: 1, 2, 4, ... 1024 */
  void *k_pages, *v_pages;     /* the pools (dtype: the call's) */
  ckjit_paged_strides k_strides, v_strides;
  const int32_t *block_table;  /* padded form: [batch][max_pages_per_seq] */
  int64_t max_pages_per_seq;
  const int32_t *seqlens_k;    /* padded form: [batch] keys of each sequence */
  const int32_t *kv_indptr;    /* CSR form: [batch + 1] */
  const int32_t *kv_page_indices;
  const int32_t *kv_last_page_len; /* CSR form: [batch] */
  int32_t *error;              /* NULL, or a device int32 set to 1 on a bad table entry */
  int64_t max_seqlen_k;        /* a hint: the most keys a sequence has, 0: unknown (the
                                  padded table's capacity); plans how decode splits the keys
                                  over blocks, a wrong hint costs speed, never correctness */
  /* FP8 pages: page_dtype CKJIT_FP8_E4M3 (OCP e4m3fn bytes; strides still
   * in elements) with f32 dequantization scales on the device, K/V head g's
   * element x read as k_scale[g * scale_stride] * x (V: v_scale); the
   * scores, softmax and O are then computed as for 16-bit pages.
   * scale_stride 0: one scale for the whole pool, 1: one per K/V head.
   * 0 (CKJIT_F32, the default): the pages hold the call's dtype. */
  ckjit_dtype page_dtype;
  const float *k_scale, *v_scale;
  int64_t scale_stride;
} ckjit_paged_kv;

/* Contiguous strides of an NHD ([page][slot][head][dim]) or HND
 * ([page][head][slot][dim]) pool. */
CKJIT_API ckjit_paged_strides ckjit_paged_strides_nhd(int64_t page_size, int64_t heads,
                                                      int64_t dim);
CKJIT_API ckjit_paged_strides ckjit_paged_strides_hnd(int64_t page_size, int64_t heads,
                                                      int64_t dim);

/* Attention of each sequence's new queries over its paged keys.  Sequence
 * b's queries are the last sq_b of its sk_b positions (sq_b <= sk_b is
 * usual, not required), so the causal and window masks are bottom-right
 * aligned exactly as ckjit_attention's.  Queries, O and LSE are varlen
 * with cu_seqlens_q (device int32 [batch + 1]; their batch strides unused),
 * or, when it is NULL, max_seqlen_q queries per sequence at batch stride.
 * Options as ckjit_attention's: softmax scale, masks (none, causal,
 * window), soft-cap, GQA / MQA, LSE.  head_dim_qk and head_dim_v: 64, 96,
 * 128, 192 or 256.  The tensor-core kernels need head-dim stride 1,
 * 16-byte aligned pools and strides multiples of 8 elements (else SIMT).
 * FP8 pages (kv.page_dtype) run on the decode kernel (at most 16 queries a
 * sequence, sm_80+) and on the SIMT kernel otherwise (slow: prefill over
 * FP8 pages has no tensor-core kernel yet).
 * O must not overlap Q, the pools or LSE. */
typedef struct ckjit_paged_attention_desc {
  ckjit_dtype dtype;           /* Q, O and the pools: CKJIT_F16, CKJIT_BF16 or CKJIT_F32 */
  int64_t batch;               /* sequences, >= 0 */
  int64_t num_heads_q, num_heads_kv;
  int64_t head_dim_qk, head_dim_v;
  int64_t max_seqlen_q;        /* the largest query count (<= 2^30) */
  const int32_t *cu_seqlens_q; /* NULL: max_seqlen_q queries per sequence */
  const void *q;
  ckjit_attention_strides q_strides;
  void *o;
  ckjit_attention_strides o_strides;
  float *lse;                  /* NULL: none; f32 per (sequence, head, query) */
  ckjit_attention_strides lse_strides;
  ckjit_paged_kv kv;
  float softmax_scale;         /* 0: 1 / sqrt(head_dim_qk) */
  ckjit_attention_mask mask;
  int64_t window_left, window_right; /* MASK_WINDOW only; < 0: unbounded */
  float softcap;               /* > 0: logit soft-cap; 0: none */
} ckjit_paged_attention_desc;

/* Zeroes `desc`, then sets dtype CKJIT_BF16, batch and the head counts 1,
 * window_left and window_right -1. */
CKJIT_API void ckjit_paged_attention_desc_init(ckjit_paged_attention_desc *desc);

CKJIT_API ckjit_status ckjit_paged_attention(const ckjit_paged_attention_desc *desc, void *stream);

/* Writes each sequence's new tokens' K and V into their slots: new token i
 * (0 <= i < n_b = cu_seqlens_new[b + 1] - cu_seqlens_new[b]) of sequence b
 * goes to position sk_b - n_b + i, where sk_b is the sequence's length
 * *after* the append as the kv tables give it (so run it before the
 * attention of the same step, with the same tables).  k_new / v_new are
 * packed tokens: token t of head g at base + t * strides.seq + g *
 * strides.head (strides.batch unused).  A token whose position falls
 * outside its sequence's pages, or whose page id is outside the pool, is
 * not written (the page is never touched) and sets *kv.error.  Pages of
 * different sequences must not share a written slot.  FP8 pages: each new
 * element x is stored as e4m3(x / scale) of its head (round to nearest
 * even, saturating at +-448; NaN stays NaN). */
typedef struct ckjit_paged_kv_append_desc {
  ckjit_dtype dtype;
  int64_t batch, num_heads_kv, head_dim_qk, head_dim_v;
  int64_t max_seqlen_new;      /* the largest n_b (the grid is sized by it) */
  const int32_t *cu_seqlens_new; /* device int32 [batch + 1] */
  const void *k_new, *v_new;
  ckjit_attention_strides k_new_strides, v_new_strides;
  ckjit_paged_kv kv;
} ckjit_paged_kv_append_desc;

CKJIT_API void ckjit_paged_kv_append_desc_init(ckjit_paged_kv_append_desc *desc);
CKJIT_API ckjit_status ckjit_paged_kv_append(const ckjit_paged_kv_append_desc *desc, void *stream);

/* Checks the tables of `kv` for `batch` sequences on the device and waits
 * for the answer: CKJIT_ERROR_INVALID_ARGUMENT naming the first bad entry
 * (a page id outside the pool, a length past the table or negative, a CSR
 * last-page length outside 1 .. page_size, a decreasing kv_indptr).  For
 * debugging and for callers who can afford the synchronization. */
CKJIT_API ckjit_status ckjit_paged_kv_check(const ckjit_paged_kv *kv, int64_t batch, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CKJIT_PAGED_ATTENTION_H */
