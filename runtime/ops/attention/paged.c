/* ckjit_paged_attention: the attention kernels with K and V read from a
 * paged pool (their PAGE spec parameter; kernel_src/attention/problem.h
 * finds each key's page).  The front-end checks the pool and the tables'
 * shapes, derives the dense descriptor the attention front-end checks
 * (queries, O, LSE, options) and runs it. */
#include <string.h>

#include "attention.h"
#include "base/error.h"
#include "runtime/ops/op_frame.h"

#define API "ckjit_paged_attention"

void ckjit_paged_attention_desc_init(ckjit_paged_attention_desc *d) {
  if (!d) return;
  memset(d, 0, sizeof *d);
  d->dtype = CKJIT_BF16;
  d->batch = d->num_heads_q = d->num_heads_kv = 1;
  d->window_left = d->window_right = -1;
}

ckjit_paged_strides ckjit_paged_strides_nhd(int64_t page_size, int64_t heads, int64_t dim) {
  return (ckjit_paged_strides){.page = page_size * heads * dim, .slot = heads * dim, .head = dim, .dim = 1};
}

ckjit_paged_strides ckjit_paged_strides_hnd(int64_t page_size, int64_t heads, int64_t dim) {
  return (ckjit_paged_strides){.page = heads * page_size * dim, .slot = dim, .head = page_size * dim, .dim = 1};
}

/* A pool's strides as an attention tensor's: page for batch, slot for seq. */
static ckjit_attention_strides as_tensor(const ckjit_paged_strides *s) {
  return (ckjit_attention_strides){.batch = s->page, .head = s->head, .seq = s->slot, .dim = s->dim};
}

ckjit_attention_paging ckjit__paging_args(const ckjit_paged_kv *kv) {
  return (ckjit_attention_paging){
      .page_table = kv->kv_indptr ? kv->kv_page_indices : kv->block_table,
      .seqlens_k = kv->seqlens_k,
      .kv_indptr = kv->kv_indptr,
      .kv_last_page_len = kv->kv_last_page_len,
      .error = kv->error,
      .table_stride = kv->max_pages_per_seq,
      .k_page = kv->k_strides.page,
      .v_page = kv->v_strides.page,
      .num_pages = (int)kv->num_pages,
      .k_scale = kv->k_scale,
      .v_scale = kv->v_scale,
      .scale_stride = kv->scale_stride};
}

ckjit_status ckjit__paged_kv_validate_sizes(const char *api, const ckjit_paged_kv *kv) {
  const int64_t ps = kv->page_size;
  if (ps < 1 || ps > 1024 || (ps & (ps - 1)))
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                       "%s: kv.page_size %lld must be a power of two from 1 to 1024", api,
                       (long long)ps);
  if (kv->num_pages < 1 || kv->num_pages > INT32_MAX)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: kv.num_pages %lld must be in 1 .. 2^31 - 1 (page ids are int32)", api,
                       (long long)kv->num_pages);
  if (kv->max_seqlen_k < 0)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: kv.max_seqlen_k %lld must be >= 0 (0: unknown)", api,
                       (long long)kv->max_seqlen_k);
  return CKJIT_SUCCESS;
}

ckjit_status ckjit__paged_kv_validate(const char *api, const ckjit_paged_kv *kv, ckjit_dtype dtype,
                                      int64_t heads_kv, int64_t hd, int64_t hdv, void *stream,
                                      int *rows_aligned) {
  const int64_t ps = kv->page_size;
  ckjit_status st = ckjit__paged_kv_validate_sizes(api, kv);
  if (st) return st;
  const int fp8 = kv->page_dtype == CKJIT_FP8_E4M3;
  if (kv->page_dtype != 0 && kv->page_dtype != dtype && !fp8)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                       "%s: kv.page_dtype %s: the pages hold the call's dtype (%s; 0 says so) or "
                       "fp8 e4m3",
                       api, ckjit_dtype_name(kv->page_dtype), ckjit_dtype_name(dtype));
  if (fp8 && (!kv->k_scale || !kv->v_scale || (uintptr_t)kv->k_scale % 4 ||
              (uintptr_t)kv->v_scale % 4 || (kv->scale_stride != 0 && kv->scale_stride != 1)))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: fp8 pages need kv.k_scale and kv.v_scale (device f32, 4-byte aligned) "
                       "and kv.scale_stride 0 (one scale) or 1 (one per K/V head); got %p, %p, "
                       "%lld",
                       api, (const void *)kv->k_scale, (const void *)kv->v_scale,
                       (long long)kv->scale_stride);
  const size_t es = fp8 ? 1 : ckjit_dtype_size(dtype);
  const ckjit_attention_strides ks = as_tensor(&kv->k_strides), vs = as_tensor(&kv->v_strides);
  if ((st = ckjit__attention_check_tensor(api, "kv.k_pages", kv->k_pages, es, &ks, kv->num_pages,
                                          heads_kv, ps, hd)) ||
      (st = ckjit__attention_check_tensor(api, "kv.v_pages", kv->v_pages, es, &vs, kv->num_pages,
                                          heads_kv, ps, hdv)))
    return st;
  /* The kernels multiply page ids and slots by these in 32-bit factors
   * (64-bit products): a page or slot of 2^31 elements or more is refused. */
  const int64_t strides[6] = {kv->k_strides.page, kv->k_strides.slot, kv->k_strides.head,
                              kv->v_strides.page, kv->v_strides.slot, kv->v_strides.head};
  for (int i = 0; i < 6; i++)
    if (strides[i] > INT32_MAX)
      return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                         "%s: a pool stride of %lld elements: page, slot and head strides must be "
                         "below 2^31 elements",
                         api, (long long)strides[i]);
  const int csr = kv->kv_indptr != NULL;
  if (csr ? !kv->kv_page_indices || !kv->kv_last_page_len : !kv->block_table || !kv->seqlens_k)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: give kv.block_table and kv.seqlens_k (padded form), or kv.kv_indptr, "
                       "kv.kv_page_indices and kv.kv_last_page_len (CSR form)",
                       api);
  if (!csr && (kv->max_pages_per_seq < 1 || kv->max_pages_per_seq > INT32_MAX))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: kv.max_pages_per_seq %lld must be in 1 .. 2^31 - 1", api,
                       (long long)kv->max_pages_per_seq);
  const void *ptrs[] = {kv->k_pages, kv->v_pages, kv->block_table, kv->seqlens_k, kv->kv_indptr,
                        kv->kv_page_indices, kv->kv_last_page_len, kv->error,
                        fp8 ? kv->k_scale : NULL, fp8 ? kv->v_scale : NULL};
  static const char *const names[] = {"kv.k_pages", "kv.v_pages", "kv.block_table",
                                      "kv.seqlens_k", "kv.kv_indptr", "kv.kv_page_indices",
                                      "kv.kv_last_page_len", "kv.error", "kv.k_scale",
                                      "kv.v_scale"};
  const void *given[10];
  const char *given_names[10];
  int n = 0;
  for (int i = 0; i < 10; i++) {
    if (!ptrs[i] || (i >= 2 && i <= 3 && csr) || (i >= 4 && i <= 6 && !csr)) continue;
    if (i >= 2 && (uintptr_t)ptrs[i] % 4)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s must be 4-byte aligned (int32)",
                         api, names[i]);
    given[n] = ptrs[i], given_names[n++] = names[i];
  }
  *rows_aligned = ckjit__attention_rows_aligned(kv->k_pages, &ks, es, kv->num_pages, heads_kv, ps) &&
                  ckjit__attention_rows_aligned(kv->v_pages, &vs, es, kv->num_pages, heads_kv, ps);
  return ckjit__check_pointers(stream, api, n, given, given_names);
}

ckjit_status ckjit__paged_attention_call(const ckjit_paged_attention_desc *pd, void *stream,
                                         ckjit_attention_desc *d, attention_call *c) {
  if (!pd) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: desc is NULL", API);
  const ckjit_paged_kv *kv = &pd->kv;
  /* (In the paged descriptor's own words; the dense checks below would
   * name seqlen_q and seqlen_k.) */
  if (pd->max_seqlen_q < 0 || pd->max_seqlen_q > CKJIT_ATTENTION_UNBOUNDED)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: max_seqlen_q %lld must be in 0 .. 2^30", API,
                       (long long)pd->max_seqlen_q);
  /* The dense descriptor of the same problem: K and V are the pools at
   * their head and slot strides; entries' lengths come from the tables. */
  ckjit_attention_desc_init(d);
  d->dtype = pd->dtype;
  d->batch = pd->batch;
  d->num_heads_q = pd->num_heads_q;
  d->num_heads_kv = pd->num_heads_kv;
  d->seqlen_q = pd->max_seqlen_q;
  d->seqlen_k = CKJIT_ATTENTION_UNBOUNDED; /* on the device; no dense check uses it */
  d->head_dim_qk = pd->head_dim_qk;
  d->head_dim_v = pd->head_dim_v;
  d->q = pd->q, d->q_strides = pd->q_strides;
  d->o = pd->o, d->o_strides = pd->o_strides;
  d->lse = pd->lse, d->lse_strides = pd->lse_strides;
  d->cu_seqlens_q = pd->cu_seqlens_q;
  d->k = kv->k_pages, d->v = kv->v_pages;
  d->k_strides = (ckjit_attention_strides){.head = kv->k_strides.head, .seq = kv->k_strides.slot,
                                           .dim = kv->k_strides.dim};
  d->v_strides = (ckjit_attention_strides){.head = kv->v_strides.head, .seq = kv->v_strides.slot,
                                           .dim = kv->v_strides.dim};
  d->softmax_scale = pd->softmax_scale;
  d->mask = pd->mask;
  d->window_left = pd->window_left, d->window_right = pd->window_right;
  d->softcap = pd->softcap;
  ckjit_status st = ckjit__attention_validate_as(API, d, kv, stream, c);
  if (st || (st = ckjit__paged_kv_validate_sizes(API, kv))) return st;
  /* An empty problem reads nothing: its pools and tables are not checked
   * (as ckjit_attention's tensors). */
  if (c->empty) return CKJIT_SUCCESS;
  int pool_aligned;
  if ((st = ckjit__paged_kv_validate(API, kv, pd->dtype, pd->num_heads_kv, pd->head_dim_qk,
                                     pd->head_dim_v, stream, &pool_aligned)))
    return st;
  c->rows_aligned = c->rows_aligned && pool_aligned;
  c->kv8 = kv->page_dtype == CKJIT_FP8_E4M3;
  return CKJIT_SUCCESS;
}

ckjit_status ckjit_paged_attention(const ckjit_paged_attention_desc *pd, void *stream) {
  ckjit_attention_desc d;
  attention_call c;
  const ckjit_status st = ckjit__paged_attention_call(pd, stream, &d, &c);
  if (st || c.empty) return st;
  return ckjit__attention_run(&c, stream);
}
