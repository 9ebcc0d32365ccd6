/* attention_wgmma's tensor maps: Q, K and V as 4-D tensors (head dim,
 * sequence, head, batch entry) read in boxes of 64 head-dim columns (128
 * bytes, the swizzle's line) by the tile's rows. */
#include <stdint.h>
#include <string.h>

#include "attention.h"
#include "base/error.h"
#include "runtime/backend.h"
#include "runtime/runtime.h"

/* TMA takes strides that are multiples of 16 bytes, below 2^40, and not
 * zero (a broadcast batch or head is read with cp.async instead). */
static int stride_ok(int64_t elements, size_t es, int used) {
  const uint64_t bytes = (uint64_t)elements * es;
  return !used || (elements > 0 && bytes % 16 == 0 && bytes < (1ull << 40));
}

/* Varlen: the sequence dimension is the packed tokens and the batch
 * dimension has one entry.  How many tokens there are is on the device,
 * so the map claims 2^31 - 1; the kernel reads through it only whole tiles
 * inside a sequence (a sequence's partial last tile goes through cp.async),
 * so no row past the packed tensor is ever read. */
static int encode(const ckjit_gpu *gpu, ckjit_tensor_map *map, const ckjit_attention_desc *d,
                  const void *ptr, const ckjit_attention_strides *st, int64_t heads, int64_t seq,
                  int64_t dim, unsigned rows) {
  const size_t es = ckjit_dtype_size(d->dtype);
  const int varlen = d->cu_seqlens_q != NULL;
  const int64_t batch = varlen ? 1 : d->batch;
  if (varlen) seq = INT32_MAX;
  if (!stride_ok(st->seq, es, seq > 1) || !stride_ok(st->head, es, heads > 1) ||
      !stride_ok(st->batch, es, batch > 1))
    return 0;
  /* Unused strides (an extent of 1) still go to the driver: any valid one. */
  const uint64_t s_seq = seq > 1 ? (uint64_t)st->seq * es : 16,
                 s_head = heads > 1 ? (uint64_t)st->head * es : 16,
                 s_batch = batch > 1 ? (uint64_t)st->batch * es : 16;
  const unsigned long long dims[4] = {(unsigned long long)dim, (unsigned long long)seq,
                                      (unsigned long long)heads, (unsigned long long)batch};
  const unsigned long long strides[3] = {s_seq, s_head, s_batch};
  const unsigned box[4] = {64, rows, 1, 1};
  return gpu->device.tensor_map_encode(&gpu->device, map, d->dtype, 4, ptr, dims, strides, box) == CKJIT_SUCCESS;
}

/* A paged pool: head dim, slot, head, page; boxes of min(page, bn) slots
 * of one page (the kernel issues one per page of a key step).  `v_pages`:
 * V laid out page-major in the kernel (CKJIT_ATTENTION_V_PAGE_MAJOR): the
 * head dim is split into its 64-column panels, a dimension of its own
 * (columns, slot, panel, head, page), and one box takes all of a page's
 * panels. */
static int encode_pool(const ckjit_gpu *gpu, ckjit_tensor_map *map, ckjit_dtype dtype,
                       const void *pool, const ckjit_paged_strides *st, const ckjit_paged_kv *kv,
                       int64_t heads, int64_t dim, unsigned bn, int v_pages) {
  const size_t es = ckjit_dtype_size(dtype);
  const int64_t page = kv->page_size;
  if (!CKJIT_ATTENTION_PAGED_TMA(page, (int64_t)bn) || !stride_ok(st->slot, es, page > 1) ||
      !stride_ok(st->head, es, heads > 1) || !stride_ok(st->page, es, kv->num_pages > 1))
    return 0;
  const unsigned long long slot_b = page > 1 ? (uint64_t)st->slot * es : 16,
                           head_b = heads > 1 ? (uint64_t)st->head * es : 16,
                           page_b = kv->num_pages > 1 ? (uint64_t)st->page * es : 16;
  const unsigned rows = page < bn ? (unsigned)page : bn;
  if (v_pages) {
    const unsigned long long dims[5] = {64, (unsigned long long)page, (unsigned long long)(dim / 64),
                                        (unsigned long long)heads, (unsigned long long)kv->num_pages};
    const unsigned long long strides[4] = {slot_b, 64 * es, head_b, page_b};
    const unsigned box[5] = {64, rows, (unsigned)(dim / 64), 1, 1};
    return gpu->device.tensor_map_encode(&gpu->device, map, dtype, 5, pool, dims, strides, box) ==
           CKJIT_SUCCESS;
  }
  const unsigned long long dims[4] = {(unsigned long long)dim, (unsigned long long)page,
                                      (unsigned long long)heads,
                                      (unsigned long long)kv->num_pages};
  const unsigned long long strides[3] = {slot_b, head_b, page_b};
  const unsigned box[4] = {64, rows, 1, 1};
  return gpu->device.tensor_map_encode(&gpu->device, map, dtype, 4, pool, dims, strides, box) == CKJIT_SUCCESS;
}

int ckjit__attention_encode_maps(const ckjit_gpu *gpu, const attention_call *c,
                                 const ckjit_spec *spec, ckjit_attention_tma_args *x) {
  const ckjit_attention_desc *d = c->desc;
  if (!gpu->device.tensor_map_encode || d->seqlen_k == 0) return 0;
  const unsigned bm = (unsigned)spec->value[AT_BM], bn = (unsigned)spec->value[AT_BN];
  /* A refused map is not an error: the cp.async copies take the call. */
  const int quiet = ckjit__error_quiet(1);
  const ckjit_paged_kv *kv = c->paged;
  int ok = encode(gpu, &x->q_map, d, d->q, &d->q_strides, d->num_heads_q, d->seqlen_q,
                  d->head_dim_qk, bm);
  if (kv)
    ok = ok &&
         encode_pool(gpu, &x->k_map, d->dtype, kv->k_pages, &kv->k_strides, kv, d->num_heads_kv,
                     d->head_dim_qk, bn, 0) &&
         encode_pool(gpu, &x->v_map, d->dtype, kv->v_pages, &kv->v_strides, kv, d->num_heads_kv,
                     d->head_dim_v, bn,
                     CKJIT_ATTENTION_V_PAGE_MAJOR(spec->value[AT_PAGE], (int32_t)bn, d->head_dim_v,
                                                  spec->value[AT_KV8]));
  else
    ok = ok &&
         encode(gpu, &x->k_map, d, d->k, &d->k_strides, d->num_heads_kv, d->seqlen_k,
                d->head_dim_qk, bn) &&
         encode(gpu, &x->v_map, d, d->v, &d->v_strides, d->num_heads_kv, d->seqlen_k,
                d->head_dim_v, bn);
  ckjit__error_quiet(quiet);
  return ok;
}
