/*
 * ckjit — the fused attention forward (CK Tile's fmha): softmax(Q K^T
 * scale + mask) V with GQA, varlen, masks, bias, ALiBi, soft-cap and LSE.
 * Included by ckjit/ckjit.h, whose status codes, dtypes and error rules
 * apply.
 */
/* Outside the guard: whichever header comes first, ckjit.h's types precede ours. */
#include "ckjit/ckjit.h"

#ifndef CKJIT_ATTENTION_H
#define CKJIT_ATTENTION_H

#ifdef __cplusplus
extern "C" {
#endif

/* Fused attention forward (FlashAttention-style; CK Tile's fmha), per batch
 * entry b, query head h and query row i < sq (sq, sk: the entry's lengths):
 *   g        = h / (num_heads_q / num_heads_kv)     (the K/V head: MHA, GQA, MQA)
 *   s[j]     = softmax_scale * sum_d Q[b,h,i,d] K[b,g,j,d]      (f32 accumulation)
 *   s[j]     = softcap * tanh(s[j] / softcap)                  (when softcap > 0)
 *   s[j]    += bias[b,h,i,j]                                   (when bias != NULL)
 *   s[j]    -= alibi_slopes[b,h] * |i + sk - sq - j|            (when alibi_slopes != NULL)
 *   s[j]     = -inf for a masked key j (below)
 *   p[j]     = exp(s[j] - max_j s), l = sum_j p[j]
 *   O[b,h,i,:] = sum_j p[j] V[b,g,j,:] / l,  LSE[b,h,i] = max_j s + log(l)
 * Masks, with the diagonal bottom-right aligned as FlashAttention 2 defines
 * it for sq != sk (query i sees the keys up to i + sk - sq):
 *   CKJIT_ATTENTION_MASK_NONE    every key j < sk;
 *   CKJIT_ATTENTION_MASK_CAUSAL  j <= i + sk - sq;
 *   CKJIT_ATTENTION_MASK_WINDOW  i + sk - sq - window_left <= j <= i + sk - sq + window_right,
 *                                a negative bound being unbounded on that side
 *                                (left < 0, right 0 is CAUSAL; both < 0 is NONE).
 * A row whose keys are all masked (or all -inf after the bias) gives O = 0
 * and LSE = -inf, as FlashAttention, not NaN.  A NaN or +inf score makes
 * its row NaN; a NaN or infinity in V makes NaN the rows that see its key
 * and, on the tensor-core kernels, possibly other rows of the same tiles
 * (they multiply p = 0 by it, as FlashAttention does; the SIMT kernel
 * skips p = 0).
 *
 * Precision: the scores, the running max and sum and O are f32; the
 * tensor-core kernels (f16, bf16) round p to the input dtype before the
 * p V product, as FlashAttention and cuDNN do; O is rounded to the dtype
 * (nearest even) once, at the end.  dtype CKJIT_F32 runs a SIMT kernel.
 *
 * Layout: every tensor has strides in elements for batch, head, sequence
 * and head dimension (any order, so BSHD, BHSD and a packed QKV need no
 * copy; a zero batch or head stride repeats the tensor).  The tensor-core
 * kernels read rows whose head-dimension stride is 1, with 16-byte aligned
 * pointers and other strides multiples of 8 elements; anything else runs
 * on the SIMT kernel.  Head dimensions 64, 96, 128, 192 and 256; head_dim_v
 * may differ from head_dim_qk (MLA's 192 / 128).
 *
 * Varlen: with cu_seqlens_q and cu_seqlens_k (device int32 arrays of batch
 * + 1 non-decreasing entries, both or neither), entry b's rows are the
 * tokens cu_seqlens_q[b] .. cu_seqlens_q[b+1] - 1 of a packed sequence
 * dimension (Q, O, LSE; likewise K and V with cu_seqlens_k): token t of
 * head h is at base + h * stride_head + t * stride_seq, and stride_batch
 * is not used.  seqlen_q and seqlen_k are then the largest lengths (the
 * grid is sized by them; rows past seqlen_q are not computed).  Empty
 * sequences are allowed.  The bias and ALiBi keep their batch index b and
 * local positions i, j.
 *
 * O must not overlap Q, K, V, the bias or LSE.  Sizes: seqlen_q, seqlen_k
 * <= 2^30; offsets are 64-bit, so a tensor may exceed 2^31 elements. */
typedef enum ckjit_attention_mask {
  CKJIT_ATTENTION_MASK_NONE = 0,
  CKJIT_ATTENTION_MASK_CAUSAL = 1,
  CKJIT_ATTENTION_MASK_WINDOW = 2
} ckjit_attention_mask;

/* Strides of an attention tensor, in elements. */
typedef struct ckjit_attention_strides {
  int64_t batch, head, seq, dim;
} ckjit_attention_strides;

typedef struct ckjit_attention_desc {
  ckjit_dtype dtype;            /* Q, K, V and O: CKJIT_F16, CKJIT_BF16 or CKJIT_F32 */
  int64_t batch;                /* >= 0 (0: nothing to do) */
  int64_t num_heads_q, num_heads_kv; /* num_heads_q % num_heads_kv == 0 */
  int64_t seqlen_q, seqlen_k;   /* >= 0; varlen: the largest lengths */
  int64_t head_dim_qk, head_dim_v;
  const void *q;
  ckjit_attention_strides q_strides;
  const void *k;
  ckjit_attention_strides k_strides;
  const void *v;
  ckjit_attention_strides v_strides;
  void *o;
  ckjit_attention_strides o_strides;
  float *lse;                   /* NULL: none; f32 [batch][heads_q][seqlen_q] */
  ckjit_attention_strides lse_strides; /* dim is not used */
  const int32_t *cu_seqlens_q, *cu_seqlens_k; /* NULL: dense */
  float softmax_scale;          /* 0: 1 / sqrt(head_dim_qk) */
  ckjit_attention_mask mask;
  int64_t window_left, window_right; /* MASK_WINDOW only; < 0: unbounded */
  const void *bias;             /* NULL: none; [batch][heads_q][seqlen_q][seqlen_k] */
  ckjit_dtype bias_dtype;       /* CKJIT_F32 or dtype */
  ckjit_attention_strides bias_strides; /* batch, head, seq = query row, dim = key column */
  const float *alibi_slopes;    /* NULL: none; [batch][heads_q] f32 */
  int64_t alibi_stride_batch;   /* 0: one [heads_q] row for every entry */
  float softcap;                /* > 0: logit soft-cap; 0: none */
} ckjit_attention_desc;

/* Zeroes `desc`, then sets dtype and bias_dtype CKJIT_BF16, batch and the
 * head counts 1, window_left and window_right -1.  Strides stay 0: set
 * them (ckjit_attention_strides_bshd / _bhsd fill the common layouts). */
CKJIT_API void ckjit_attention_desc_init(ckjit_attention_desc *desc);

/* Contiguous strides of a [batch][seq][heads][dim] (BSHD) or
 * [batch][heads][seq][dim] (BHSD) tensor. */
CKJIT_API ckjit_attention_strides ckjit_attention_strides_bshd(int64_t seq, int64_t heads,
                                                               int64_t dim);
CKJIT_API ckjit_attention_strides ckjit_attention_strides_bhsd(int64_t seq, int64_t heads,
                                                               int64_t dim);

/* One attention forward.  batch 0, seqlen_q 0 or num_heads_q 0 does
 * nothing (after the descriptor's checks: a bad dtype, head dim or option
 * still fails); seqlen_k 0 gives O = 0 and LSE = -inf.  A stride whose
 * extent is one entry (varlen's batch stride, LSE's dim) is not read. */
CKJIT_API ckjit_status ckjit_attention(const ckjit_attention_desc *desc, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CKJIT_ATTENTION_H */
