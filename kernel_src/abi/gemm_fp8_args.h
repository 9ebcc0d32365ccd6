/* The FP8 GEMM (gemm_fp8, kernel_src/gemm/fp8.cu) across the host/kernel
 * boundary (see abi.h).  The kernel takes the struct by value as its only
 * parameter: A's and B's tensor maps (64-byte aligned) first. */
#ifndef CKJIT_KERNEL_ABI_GEMM_FP8_ARGS_H
#define CKJIT_KERNEL_ABI_GEMM_FP8_ARGS_H

#include "abi/abi.h"
#include "abi/tensor_map.h"

/* The operands' types: the FP8 formats (the public CKJIT_FP8_E4M3 /
 * _E5M2), or 16-bit ones (both operands alike, unscaled: the bf16 / f16
 * grouped GEMM of ckjit_fused_moe). */
#define CKJIT_FP8_TYPES(X) X(FP8_E4M3, e4m3) X(FP8_E5M2, e5m2) X(OP_BF16, bf16) X(OP_F16, f16)
/* Scaling modes, in the order of the public ckjit_fp8_scaling, then none
 * (16-bit operands: alpha alone). */
#define CKJIT_FP8_SCALINGS(X) X(SCALE_TENSOR, tensor) X(SCALE_ROW, row) X(SCALE_BLOCK, block) X(SCALE_NONE, none)

/* Grouped (mixture-of-experts) layouts, in the order of the public
 * ckjit_moe_layout after NONE (the plain GEMM). */
#define CKJIT_FP8_MOE_LAYOUTS(X) X(MOE_NONE, none) X(MOE_CONTIGUOUS, contiguous) X(MOE_MASKED, masked)

/* The fused-MoE epilogues (ckjit_fused_moe):
 *   none     D = the product, as above;
 *   gated    B holds two halves, gate rows 0 .. n - 1 and up rows n ..
 *            2n - 1; D (n columns) = act(gate) * up;
 *   scatter  D's row for the product's row m is row_ids[m] (skipped
 *            outside 0 .. route_entries - 1), scaled by row_weights of
 *            that row. */
#define CKJIT_FP8_EPILOGUES(X) X(EPI_PLAIN, none) X(EPI_GATED, gated) X(EPI_SCATTER, scatter)

/* D = act(alpha * deq(A) deq(B) + beta C + bias + D0) * D1
 * (include/ckjit/gemm_fp8.h), per expert under a MoE layout (which has no
 * C, D0 or D1).
 *   map_a, map_b  K-major boxes of 128 K bytes x BM rows of A / BN rows of
 *                 B; the third dimension is the expert (A: MASKED only)
 *   ld_scale_a/b  block scaling: entries between rows of the scale arrays
 *   tiles_m/_n    the grid's tiles along M (per expert when MASKED) and N
 *   experts       MoE: the experts; tile_experts (CONTIGUOUS) the expert
 *                 of each 128-row tile, counts (MASKED) each expert's rows
 *   stride_*      MoE: elements between experts' D, A scales, B scales
 *                 and bias
 *   row_ids, row_weights, route_entries  the scatter epilogue's routing */
#define CKJIT_GEMM_FP8_FIELDS(X)                                               \
  X(ckjit_tensor_map, map_a, 0)                                                \
  X(ckjit_tensor_map, map_b, 128)                                              \
  X(void *, d, 256)                                                            \
  X(const void *, bias, 264)                                                   \
  X(const float *, scale_a, 272)                                               \
  X(const float *, scale_b, 280)                                               \
  X(long long, ldd, 288)                                                       \
  X(long long, m, 296)                                                         \
  X(long long, n, 304)                                                         \
  X(long long, k, 312)                                                         \
  X(long long, ld_scale_a, 320)                                                \
  X(long long, ld_scale_b, 328)                                                \
  X(long long, tiles_m, 336)                                                   \
  X(long long, tiles_n, 344)                                                   \
  X(float, alpha, 352)                                                         \
  X(int, experts, 356)                                                         \
  X(const int *, tile_experts, 360)                                            \
  X(const int *, counts, 368)                                                  \
  X(long long, stride_d, 376)                                                  \
  X(long long, stride_scale_a, 384)                                            \
  X(long long, stride_scale_b, 392)                                            \
  X(long long, stride_bias, 400)                                               \
  X(const int *, row_ids, 408)                                                 \
  X(const float *, row_weights, 416)                                           \
  X(long long, route_entries, 424)                                             \
  X(const void *, c, 432)                                                      \
  X(const void *, d0, 440)                                                     \
  X(const void *, d1, 448)                                                     \
  X(long long, ldc, 456)                                                       \
  X(long long, ldd0, 464)                                                      \
  X(long long, ldd1, 472)                                                      \
  X(float, beta, 480)
CKJIT_ABI_STRUCT(ckjit_gemm_fp8_args, CKJIT_GEMM_FP8_FIELDS, 512)
/* The kernel's one parameter (the host launches with ckjit_abi_by_value). */
#define CKJIT_GEMM_FP8_PARAM(X) X(ckjit_gemm_fp8_args, x, 0)

#endif
