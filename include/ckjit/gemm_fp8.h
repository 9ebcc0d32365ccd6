/*
 * ckjit — FP8 GEMM with scaling (Hopper's FP8 tensor cores).  Included by
 * ckjit/ckjit.h.
 *
 *   v = alpha * sum_kk deq(A)[i][kk] deq(B)[kk][j]   (f32 accumulation)
 *     + beta * C[i][j]       (when c != NULL and beta != 0; beta 0 never reads C)
 *     + bias[i] or bias[j]   (bias_mode)
 *     + D0[i][j]             (when d0 != NULL)
 *   v = act(v) * D1[i][j]    (D1 when d1 != NULL)
 *   D[i][j] = v rounded to out_dtype
 *
 * the epilogue of ckjit_gemm (ckjit/gemm.h), with C, D0, D1 and the bias in
 * out_dtype, row-major with leading dimensions ldc, ldd0, ldd1 (>= n).
 * A is m x k and B is k x n, each in FP8 (CKJIT_FP8_E4M3: OCP e4m3fn, or
 * CKJIT_FP8_E5M2, chosen per operand); D is f16, bf16 or f32.  deq() applies
 * the scales (device f32 arrays) of `scaling`:
 *
 *   CKJIT_FP8_SCALE_TENSOR  deq(A) = A * scale_a[0], deq(B) = B * scale_b[0]
 *   CKJIT_FP8_SCALE_ROW     row i of A times scale_a[i] (m entries), column j
 *                           of B times scale_b[j] (n entries)
 *   CKJIT_FP8_SCALE_BLOCK   DeepSeek-V3 style: A in 1 x 128 blocks along K,
 *                           A[i][kk] * scale_a[i * ld_scale_a + kk / 128];
 *                           B in 128 x 128 blocks,
 *                           B[kk][j] * scale_b[(j / 128) * ld_scale_b + kk / 128]
 *                           (ld_scale_a, ld_scale_b >= ceil(k / 128); 0 means
 *                           exactly that).  A last block shorter than 128
 *                           (k not a multiple of 128) has its own scale.
 *
 * Layout: both operands K-major, the only layout the FP8 tensor cores read:
 * A row-major (A[i][kk] at a[i * lda + kk]) and B column-major (B[kk][j] at
 * b[j * ldb + kk]), which is torch._scaled_mm's second operand (the
 * transpose of a row-major n x k tensor).  There is no order field: other
 * layouts must be transposed by the caller.  a and b must be 16-byte
 * aligned and lda, ldb multiples of 16 (the tensor memory accelerator's
 * rule); D is row-major with any ldd >= n.
 *
 * Accumulation: products are exact in f32; the tensor cores sum them over
 * one K block of 128 with fewer bits than f32 (as on every Hopper FP8 GEMM),
 * and every block's sum is added to an f32 accumulator in the registers
 * (with its block scales in CKJIT_FP8_SCALE_BLOCK), so the error does not
 * grow with k beyond f32's.  The epilogue, in f32: alpha (then, TENSOR and
 * ROW, the scales), beta C, bias (out_dtype, m entries per row or n per
 * column), D0, activation, D1, rounding to out_dtype (round to nearest
 * even).  NaN and inf propagate as
 * in f32 arithmetic (e4m3fn has no infinity; its NaN encodings give NaN).
 *
 * ld_scale_a and ld_scale_b are read under CKJIT_FP8_SCALE_BLOCK only.  D
 * needs only element alignment.  m, n and k are below 2^31 - 512
 * (CKJIT_ERROR_UNSUPPORTED past it: the tensor memory accelerator's
 * coordinates are 32-bit).  Scales may be any f32 (a NaN scale gives NaN).
 *
 * m = 0 or n = 0 does nothing; k = 0 gives D = the epilogue of 0.  Runs
 * on NVIDIA sm_90 (CKJIT_ERROR_UNSUPPORTED elsewhere, and for a compile
 * arch that is not sm_90).  D must not overlap A, B, the scales, the bias,
 * D0 or D1; d may be c (in place) when ldc equals ldd.  c, d0 and d1 need
 * element alignment.  ckjit_gemm_fp8_moe takes none of c, d0, d1
 * (CKJIT_ERROR_UNSUPPORTED).
 */
/* Outside the guard: whichever header comes first, ckjit.h's types precede ours. */
#include "ckjit/ckjit.h"

#ifndef CKJIT_GEMM_FP8_H
#define CKJIT_GEMM_FP8_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ckjit_fp8_scaling {
  CKJIT_FP8_SCALE_TENSOR = 0,
  CKJIT_FP8_SCALE_ROW = 1,
  CKJIT_FP8_SCALE_BLOCK = 2
} ckjit_fp8_scaling;

typedef struct ckjit_gemm_fp8_desc {
  int64_t m, n, k;
  ckjit_dtype a_dtype, b_dtype; /* CKJIT_FP8_E4M3 or CKJIT_FP8_E5M2 each */
  ckjit_dtype out_dtype;        /* D and bias: CKJIT_F16, CKJIT_BF16 or CKJIT_F32 */
  const void *a;
  int64_t lda;                  /* >= k, a multiple of 16 */
  const void *b;
  int64_t ldb;                  /* >= k, a multiple of 16 (B column-major) */
  void *d;
  int64_t ldd;                  /* >= n */
  ckjit_fp8_scaling scaling;
  const float *scale_a, *scale_b; /* device f32, never NULL */
  int64_t ld_scale_a, ld_scale_b; /* CKJIT_FP8_SCALE_BLOCK only; 0: ceil(k / 128) */
  float alpha;
  const void *bias;             /* given exactly when bias_mode != CKJIT_BIAS_NONE */
  ckjit_bias_mode bias_mode;
  ckjit_unary_op activation;    /* IDENTITY, RELU, GELU_TANH, GELU_ERF, SILU or SIGMOID */
  const void *c;                /* NULL: no beta term */
  int64_t ldc;
  float beta;
  const void *d0;               /* NULL: none */
  int64_t ldd0;
  const void *d1;               /* NULL: none */
  int64_t ldd1;
} ckjit_gemm_fp8_desc;

/* Zeroes `desc`, then sets alpha 1, a_dtype and b_dtype CKJIT_FP8_E4M3,
 * out_dtype CKJIT_BF16, CKJIT_FP8_SCALE_TENSOR and activation IDENTITY. */
CKJIT_API void ckjit_gemm_fp8_desc_init(ckjit_gemm_fp8_desc *desc);

/* One FP8 GEMM (above). */
CKJIT_API ckjit_status ckjit_gemm_fp8(const ckjit_gemm_fp8_desc *desc, void *stream);

/* ---- grouped, for mixture-of-experts layers ---------------------------------------
 *
 * ckjit_gemm_fp8_moe: for every expert e, the GEMM above with expert e's
 * rows of A, expert e's B, its scales and its bias, in one launch.  Which
 * rows belong to which expert is read on the device (no host
 * synchronization: a CUDA graph replays the call for any routing).  Every
 * expert has the same n and k; B_e = b + e * stride_b (K-major, ldb; a
 * multiple of 16), its scales at scale_b + e * stride_scale_b (the layout
 * of ckjit_gemm_fp8's scale_b), its bias (CKJIT_BIAS_PER_COL or none) at
 * bias + e * stride_bias.  Two layouts of A and D:
 *
 *   CKJIT_MOE_CONTIGUOUS  A and D have m rows (the capacity), grouped by
 *       expert, each expert's rows padded to a multiple of 128:
 *       tile_experts[t] (device int32, ceil(m / 128) entries) is the expert
 *       of rows 128 t .. 128 t + 127, -1 (or any id outside 0 .. experts -
 *       1) where no expert owns them: those rows of D are not written.
 *       Tensor scales: scale_a[0] for all of A; row and block scales of A
 *       per row of A (as ckjit_gemm_fp8).
 *   CKJIT_MOE_MASKED      A is [experts][m][k]: expert e's at a + e *
 *       stride_a (a multiple of 16); D [experts][m][n] at d + e * stride_d.
 *       counts[e] (device int32) of expert e's m rows are computed, the
 *       rest of its D is not written (a count outside 0 .. m: none).  A's
 *       scales per expert at scale_a + e * stride_scale_a.
 *
 * Strides left 0 take: stride_b n * ldb; stride_scale_b 1 (tensor), n
 * (row), ceil(n / 128) * ld_scale_b (block); stride_bias n; stride_a m *
 * lda; stride_d m * ldd; stride_scale_a 0 (tensor: one scale for every
 * expert), m (row), m * ld_scale_a (block).  An expert id or count out of
 * range never makes the kernel read out of range.  gemm.m, n, k and the
 * other fields are as in ckjit_gemm_fp8; bias_mode CKJIT_BIAS_PER_ROW is
 * refused.
 *
 * 16-bit experts: gemm.a_dtype and gemm.b_dtype may also both be CKJIT_BF16
 * or both CKJIT_F16: D = act(alpha * A B + bias) per expert, unscaled
 * (scaling, the scales and their strides are not read and may be NULL / 0),
 * with f32 accumulation (products exact, sums in f32 on the tensor cores);
 * lda, ldb and the A / B strides are in elements, multiples of 16, and the
 * operands 16-byte aligned, as for FP8. */
typedef enum ckjit_moe_layout { CKJIT_MOE_CONTIGUOUS = 0, CKJIT_MOE_MASKED = 1 } ckjit_moe_layout;

typedef struct ckjit_gemm_fp8_moe_desc {
  ckjit_gemm_fp8_desc gemm;     /* b, scale_b, bias: expert 0's */
  ckjit_moe_layout layout;
  int32_t experts;              /* 1 .. 65536 */
  const int32_t *tile_experts;  /* CONTIGUOUS: device, ceil(m / 128) entries */
  const int32_t *counts;        /* MASKED: device, experts entries */
  int64_t stride_a, stride_d;   /* MASKED */
  int64_t stride_b;
  int64_t stride_scale_a;       /* MASKED */
  int64_t stride_scale_b;
  int64_t stride_bias;
} ckjit_gemm_fp8_moe_desc;

/* ckjit_gemm_fp8_desc_init on gemm, then layout CONTIGUOUS, experts 1,
 * every stride 0 (the defaults above). */
CKJIT_API void ckjit_gemm_fp8_moe_desc_init(ckjit_gemm_fp8_moe_desc *desc);

/* The grouped MoE FP8 GEMM (above). */
CKJIT_API ckjit_status ckjit_gemm_fp8_moe(const ckjit_gemm_fp8_moe_desc *desc, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CKJIT_GEMM_FP8_H */
