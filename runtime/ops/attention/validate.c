/* ckjit_attention's descriptor: defaults and checks. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attention.h"
#include "base/error.h"
#include "runtime/ops/op_frame.h"

#define MAX_SEQLEN (1 << 30)

void ckjit_attention_desc_init(ckjit_attention_desc *d) {
  if (!d) return;
  memset(d, 0, sizeof *d);
  d->dtype = d->bias_dtype = CKJIT_BF16;
  d->batch = d->num_heads_q = d->num_heads_kv = 1;
  d->window_left = d->window_right = -1;
}

ckjit_attention_strides ckjit_attention_strides_bshd(int64_t seq, int64_t heads, int64_t dim) {
  return (ckjit_attention_strides){.batch = seq * heads * dim, .head = dim, .seq = heads * dim, .dim = 1};
}

ckjit_attention_strides ckjit_attention_strides_bhsd(int64_t seq, int64_t heads, int64_t dim) {
  return (ckjit_attention_strides){.batch = heads * seq * dim, .head = seq * dim, .seq = dim, .dim = 1};
}

/* One tensor: non-NULL, aligned to its element, strides >= 0, and its
 * largest offset (extents - 1 times the strides) inside the address space.
 * Varlen passes batch 1 and the largest length as `seq`: the packed
 * tokens' extent is on the device. */
ckjit_status ckjit__attention_check_tensor(const char *api, const char *name, const void *p, size_t es,
                                 const ckjit_attention_strides *st, int64_t batch, int64_t heads,
                                 int64_t seq, int64_t dim) {
  if (!p) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", api, name);
  if ((uintptr_t)p % es)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: %s (%p) is not aligned to its %zu-byte elements", api, name, p, es);
  const int64_t s[4] = {st->batch, st->head, st->seq, st->dim}, n[4] = {batch, heads, seq, dim};
  int64_t last = 0;
  for (int i = 0; i < 4; i++) {
    int64_t term;
    if (n[i] <= 1) continue; /* an unused stride (one entry): any value */
    if (s[i] < 0)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s has a negative stride (%lld)", api,
                         name, (long long)s[i]);
    if (__builtin_mul_overflow(n[i] - 1, s[i], &term) || __builtin_add_overflow(last, term, &last))
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s's extent overflows 64 bits", api,
                         name);
  }
  uint64_t bytes;
  if (__builtin_mul_overflow((uint64_t)last + 1, (uint64_t)es, &bytes) ||
      (uintptr_t)p + bytes < (uintptr_t)p)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s's extent overflows the address space",
                       api, name);
  return CKJIT_SUCCESS;
}

/* The tensor-core kernels read 16-byte row pieces: head-dim stride 1,
 * 16-byte aligned base and the other strides multiples of 16 bytes; a
 * stride over one entry is never read (as check_tensor's rule). */
int ckjit__attention_rows_aligned(const void *p, const ckjit_attention_strides *st, size_t es, int64_t batch,
                        int64_t heads, int64_t seq) {
  const uint64_t v = 16 / es;
  return st->dim == 1 && (uintptr_t)p % 16 == 0 && (heads <= 1 || (uint64_t)st->head % v == 0) &&
         (seq <= 1 || (uint64_t)st->seq % v == 0) && (batch <= 1 || (uint64_t)st->batch % v == 0);
}

static ckjit_status check_shape(const char *api, const ckjit_attention_desc *d, int paged) {
  ckjit_status st = ckjit__check_dtype(api, d->dtype);
  if (st) return st;
  if (d->batch < 0 || d->batch > INT32_MAX - 1 || d->num_heads_q < 0 || d->num_heads_q > INT32_MAX)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: batch (%lld) must be in 0 .. 2^31 - 2 and num_heads_q (%lld) in 0 .. "
                       "2^31 - 1",
                       api, (long long)d->batch, (long long)d->num_heads_q);
  if (d->num_heads_kv < 1 || d->num_heads_kv > d->num_heads_q ||
      d->num_heads_q % d->num_heads_kv)
    if (d->num_heads_q > 0)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                         "%s: num_heads_q (%lld) must be a multiple of num_heads_kv (%lld >= 1)",
                         api, (long long)d->num_heads_q, (long long)d->num_heads_kv);
  if (d->seqlen_q < 0 || d->seqlen_q > MAX_SEQLEN || d->seqlen_k < 0 || d->seqlen_k > MAX_SEQLEN)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: seqlen_q (%lld) and seqlen_k (%lld) must be in 0 .. 2^30", api,
                       (long long)d->seqlen_q, (long long)d->seqlen_k);
  if (!ckjit__attention_is_head_dim(d->head_dim_qk) || !ckjit__attention_is_head_dim(d->head_dim_v))
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                       "%s: head_dim_qk %lld, head_dim_v %lld: each must be 64, 96, 128, 192 or 256",
                       api, (long long)d->head_dim_qk, (long long)d->head_dim_v);
  if (!paged && !d->cu_seqlens_q != !d->cu_seqlens_k)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: give both cu_seqlens_q and cu_seqlens_k, or neither", api);
  if ((uintptr_t)d->cu_seqlens_q % 4 || (uintptr_t)d->cu_seqlens_k % 4)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: cu_seqlens must be 4-byte aligned", api);
  return CKJIT_SUCCESS;
}

static ckjit_status check_options(const char *api, const ckjit_attention_desc *d, attention_call *c) {
  if (!isfinite(d->softmax_scale))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: softmax_scale is %g; must be finite",
                       api, (double)d->softmax_scale);
  if (!(d->softcap >= 0.0f) || isinf(d->softcap))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: softcap is %g; must be 0 (none) or a positive finite cap", api,
                       (double)d->softcap);
  if ((unsigned)d->mask > CKJIT_ATTENTION_MASK_WINDOW)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: mask %d is not a ckjit_attention_mask",
                       api, (int)d->mask);
  c->scale = d->softmax_scale != 0.0f ? d->softmax_scale : (float)(1.0 / sqrt((double)d->head_dim_qk));
  c->window_left = c->window_right = CKJIT_ATTENTION_UNBOUNDED;
  c->mask = (int)d->mask;
  if (d->mask == CKJIT_ATTENTION_MASK_CAUSAL) c->window_right = 0;
  if (d->mask == CKJIT_ATTENTION_MASK_WINDOW) {
    if (d->window_left >= 0 && d->window_left < CKJIT_ATTENTION_UNBOUNDED) c->window_left = (int)d->window_left;
    if (d->window_right >= 0 && d->window_right < CKJIT_ATTENTION_UNBOUNDED) c->window_right = (int)d->window_right;
    if (c->window_left == CKJIT_ATTENTION_UNBOUNDED)
      c->mask = c->window_right == 0 ? MASK_CAUSAL : c->window_right == CKJIT_ATTENTION_UNBOUNDED ? MASK_NONE : MASK_WINDOW;
  }
  c->bias = BIAS_NONE;
  if (d->bias) {
    if (d->bias_dtype != CKJIT_F32 && d->bias_dtype != d->dtype)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                         "%s: bias_dtype %s must be f32 or the dtype (%s)", api,
                         ckjit_dtype_name(d->bias_dtype), ckjit_dtype_name(d->dtype));
    c->bias = d->bias_dtype == CKJIT_F32 ? BIAS_F32 : BIAS_DTYPE;
  }
  int64_t alibi_last;
  if (d->alibi_slopes &&
      ((uintptr_t)d->alibi_slopes % 4 || d->alibi_stride_batch < 0 ||
       __builtin_mul_overflow(d->batch > 0 ? d->batch - 1 : 0, d->alibi_stride_batch, &alibi_last) ||
       __builtin_add_overflow(alibi_last, d->num_heads_q, &alibi_last) ||
       __builtin_mul_overflow(alibi_last, (int64_t)sizeof(float), &alibi_last) ||
       (uintptr_t)d->alibi_slopes + (uint64_t)alibi_last < (uintptr_t)d->alibi_slopes))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: alibi_slopes must be 4-byte aligned, alibi_stride_batch >= 0, and "
                       "[batch][num_heads_q] slopes inside the address space",
                       api);
  return CKJIT_SUCCESS;
}

/* The checks of both front-ends: `d` is the caller's descriptor or, for
 * ckjit_paged_attention, the one paged.c derived (K and V the pools,
 * checked there). */
ckjit_status ckjit__attention_validate_as(const char *api, const ckjit_attention_desc *d,
                                          const ckjit_paged_kv *paged, void *stream,
                                          attention_call *c) {
  memset(c, 0, sizeof *c);
  c->desc = d;
  c->paged = paged;
  ckjit_status st;
  if ((st = check_shape(api, d, paged != NULL)) || (st = check_options(api, d, c))) return st;
  c->empty = d->batch == 0 || d->num_heads_q == 0 || d->seqlen_q == 0;
  if (c->empty) return CKJIT_SUCCESS;
  const size_t es = ckjit_dtype_size(d->dtype);
  const int varlen = d->cu_seqlens_q != NULL;
  /* Varlen: the packed sequence dimension's extent is on the device; the
   * largest lengths bound the rows of one entry only. */
  const int64_t b = varlen ? 1 : d->batch, hq = d->num_heads_q, hk = d->num_heads_kv;
  const int64_t sq = d->seqlen_q, sk = paged ? 0 : d->seqlen_k;
  if ((st = ckjit__attention_check_tensor(api, "q", d->q, es, &d->q_strides, b, hq, sq, d->head_dim_qk)) ||
      (st = ckjit__attention_check_tensor(api, "o", d->o, es, &d->o_strides, b, hq, sq, d->head_dim_v)))
    return st;
  if (sk > 0 && ((st = ckjit__attention_check_tensor(api, "k", d->k, es, &d->k_strides, b, hk, sk, d->head_dim_qk)) ||
                 (st = ckjit__attention_check_tensor(api, "v", d->v, es, &d->v_strides, b, hk, sk, d->head_dim_v))))
    return st;
  if (d->lse && (st = ckjit__attention_check_tensor(api, "lse", d->lse, 4, &d->lse_strides, b, hq, sq, 1))) return st;
  if (d->bias && sk > 0 &&
      (st = ckjit__attention_check_tensor(api, "bias", d->bias, ckjit_dtype_size(d->bias_dtype), &d->bias_strides,
                         d->batch, hq, sq, sk)))
    return st;
  c->rows_aligned = ckjit__attention_rows_aligned(d->q, &d->q_strides, es, b, hq, sq) &&
                    (sk == 0 || (ckjit__attention_rows_aligned(d->k, &d->k_strides, es, b, hk, sk) &&
                                 ckjit__attention_rows_aligned(d->v, &d->v_strides, es, b, hk, sk))) &&
                    ckjit__attention_rows_aligned(d->o, &d->o_strides, es, b, hq, sq);
  const void *ptrs[] = {d->q, d->o, d->k, d->v, d->lse, d->bias, d->alibi_slopes, d->cu_seqlens_q,
                        d->cu_seqlens_k};
  static const char *const names[] = {"q", "o", "k", "v", "lse", "bias", "alibi_slopes",
                                      "cu_seqlens_q", "cu_seqlens_k"};
  const void *given[9];
  const char *given_names[9];
  int n = 0;
  for (int i = 0; i < 9; i++)
    if (ptrs[i] && (i < 2 || sk > 0 || i >= 4)) given[n] = ptrs[i], given_names[n++] = names[i];
  return ckjit__check_pointers(stream, api, n, given, given_names);
}

ckjit_status ckjit__attention_validate(const ckjit_attention_desc *d, void *stream,
                                       attention_call *c) {
  if (!d) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_attention: desc is NULL");
  return ckjit__attention_validate_as("ckjit_attention", d, NULL, stream, c);
}
