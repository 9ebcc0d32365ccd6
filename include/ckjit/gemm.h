/*
 * ckjit — GEMM (bf16, f16, tf32 and f32 inputs): D = epilogue(alpha * A B),
 * batched, grouped and split-K.
 * Included by ckjit/ckjit.h, whose status codes, dtypes and error rules
 * apply.
 */
/* Outside the guard: whichever header comes first, ckjit.h's types precede ours. */
#include "ckjit/ckjit.h"

#ifndef CKJIT_GEMM_H
#define CKJIT_GEMM_H

#ifdef __cplusplus
extern "C" {
#endif

/* D = epilogue(alpha * A B), per batch entry:
 *   v = alpha * sum_k A[m][k] B[k][n]          (f32 accumulation)
 *     + beta * C[m][n]                         (when c != NULL and beta != 0;
 *                                               beta 0 never reads C, as in BLAS)
 *     + bias[m] or bias[n]                     (bias_mode)
 *     + D0[m][n]                               (when d0 != NULL)
 *   v = activation(v)                          (CKJIT_UNARY_* of ckjit_unary)
 *   v = v * D1[m][n]                           (when d1 != NULL)
 *   D[m][n] = v rounded to out_dtype (nearest even)
 * A is m x k and B is k x n, each row-major (element [i][j] at i * ld + j)
 * or column-major (at j * ld + i).  C, D, D0 and D1 are m x n row-major in
 * out_dtype; the bias vector is out_dtype too.  A column-major D is the
 * row-major D^T = B^T A^T: swap the operands and flip both orders.
 *
 * ab_dtype CKJIT_F16 or CKJIT_BF16 runs on tensor cores where the GPU has
 * them (wgmma on sm_90, mma.sync on other sm_80+; a SIMT kernel elsewhere);
 * CKJIT_F32 runs in f32 SIMT.  allow_tf32 permits tf32 tensor cores for f32
 * inputs, f32 accumulation: on sm_90 wgmma for one problem with m > 64
 * (inputs cut to 10 mantissa bits; no copies when A and B are 16-byte
 * aligned with leading dimensions multiples of 4, except for a column-major
 * A with a row-major B, or a row-major B with split-K / Stream-K, whose B
 * is first transposed into stream-ordered scratch memory; a misaligned
 * column-major A is too), otherwise mma.sync
 * on sm_80+ (inputs rounded to 10 mantissa bits); without tensor cores it
 * changes nothing.  Any m, n,
 * k >= 0 (k = 0 gives alpha * 0 and the epilogue), any leading dimensions
 * (>= the contiguous extent) and any element-aligned pointers; 16-byte
 * aligned pointers and leading dimensions that are multiples of 8 elements
 * take the fastest paths.  d may be c (then ldc and stride_c must equal
 * ldd and stride_d: in place); otherwise outputs must not overlap inputs.
 *
 * split_k > 1 cuts K into that many slices whose f32 partials are summed in a
 * fixed order by a second kernel (results do not depend on scheduling).
 * CKJIT_GEMM_STREAM_K asks for Stream-K: the tiles that do not fill whole
 * waves of the GPU are cut into equal runs of K steps, one per block,
 * across tile boundaries, and their f32 partials summed in a fixed order by
 * a second kernel (deterministic too); it runs on sm_90 with operands read
 * through TMA (16-byte aligned pointers, leading dimensions multiples of 8,
 * no zero batch stride) and elsewhere falls back to the automatic choice.
 * 0 lets ckjit choose (it splits small-m or small-n, large-k problems;
 * Stream-K only where CKJIT_TUNE measured it fastest). */
#define CKJIT_GEMM_STREAM_K (-1)

typedef enum ckjit_order {
  CKJIT_ROW_MAJOR = 0,
  CKJIT_COL_MAJOR = 1
} ckjit_order;

typedef enum ckjit_bias_mode {
  CKJIT_BIAS_NONE = 0,
  CKJIT_BIAS_PER_ROW = 1, /* bias[m], m entries */
  CKJIT_BIAS_PER_COL = 2  /* bias[n], n entries */
} ckjit_bias_mode;

typedef struct ckjit_gemm_desc {
  int64_t m, n, k;
  ckjit_dtype ab_dtype;      /* A and B: CKJIT_F16, CKJIT_BF16 or CKJIT_F32 */
  ckjit_dtype out_dtype;     /* C, D, D0, D1 and bias: CKJIT_F16, CKJIT_BF16 or CKJIT_F32 */
  const void *a;
  int64_t lda;
  ckjit_order a_order;
  const void *b;
  int64_t ldb;
  ckjit_order b_order;
  void *d;
  int64_t ldd;
  const void *c;             /* NULL: no beta term */
  int64_t ldc;
  float alpha, beta;
  const void *bias;          /* given exactly when bias_mode != CKJIT_BIAS_NONE; shared by every batch entry */
  ckjit_bias_mode bias_mode;
  ckjit_unary_op activation; /* IDENTITY, RELU, GELU_TANH, GELU_ERF, SILU or SIGMOID */
  const void *d0;            /* NULL: none */
  int64_t ldd0;
  const void *d1;            /* NULL: none */
  int64_t ldd1;
  /* Strided batch: entry i uses a + i * stride_a, ... (elements; 0 repeats
   * the same matrix for every entry). */
  int64_t batch;
  int64_t stride_a, stride_b, stride_c, stride_d, stride_d0, stride_d1;
  int split_k;               /* 0: automatic, 1: no split, > 1: that many slices, CKJIT_GEMM_STREAM_K */
  int allow_tf32;            /* f32 inputs only: tf32 tensor cores */
} ckjit_gemm_desc;

/* Zeroes `desc`, then sets alpha 1, batch 1, ab_dtype and out_dtype
 * CKJIT_BF16, both orders row-major and activation IDENTITY. */
CKJIT_API void ckjit_gemm_desc_init(ckjit_gemm_desc *desc);

/* One (possibly batched) GEMM. */
CKJIT_API ckjit_status ckjit_gemm(const ckjit_gemm_desc *desc, void *stream);

/* Grouped GEMM: `count` independent problems of different shapes and
 * pointers in one launch.  They share ab_dtype, out_dtype, orders,
 * activation, bias_mode, allow_tf32, and which of d0 / d1 are given;
 * each has batch 1 and split_k 0 or 1.  The descriptors are read before
 * the call returns. */
CKJIT_API ckjit_status ckjit_gemm_grouped(const ckjit_gemm_desc *descs, int count,
                                          void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CKJIT_GEMM_H */
