/* The GEMM families across the host/kernel boundary (see abi.h).
 *
 * Every GEMM kernel takes one of the structs below by value, as its only
 * parameter; the host fills the same struct and hands the driver its
 * S_bytes.  A parameter taken by value is the whole struct, tail padding
 * included, so the TMA arguments (64-byte aligned) name theirs as a last
 * field: S_bytes is their sizeof, and the kernel's parameter list. */
#ifndef CKJIT_KERNEL_ABI_GEMM_ARGS_H
#define CKJIT_KERNEL_ABI_GEMM_ARGS_H

#include "abi/abi.h"
#include "abi/tensor_map.h"

/* Storage order of A and of B.  The kernels ask "is K the contiguous
 * dimension": A row-major, B column-major. */
#define CKJIT_GEMM_A_ORDERS(X) X(A_ROW, row) X(A_COL, col)
#define CKJIT_GEMM_B_ORDERS(X) X(B_ROW, row) X(B_COL, col)

/* Epilogue bias: none, bias[m] (one per row of D) or bias[n] (one per column). */
#define CKJIT_GEMM_BIASES(X) X(BIAS_NONE, none) X(BIAS_ROW, row) X(BIAS_COL, col)

/* In the order of the public ckjit_activation. */
#define CKJIT_GEMM_ACTIVATIONS(X)                                              \
  X(ACT_IDENTITY, identity) X(ACT_RELU, relu) X(ACT_GELU_TANH, gelu_tanh)       \
  X(ACT_GELU_ERF, gelu_erf) X(ACT_SILU, silu) X(ACT_SIGMOID, sigmoid)

/* One GEMM (or one group of a grouped GEMM): D = epilogue(alpha * A B).
 * Eight pointers, then 8-byte integers, then two floats.  Leading
 * dimensions and strides (per batch entry) are in elements; m, n, k are the
 * full problem.
 *   partials    split-K: [splits][batch][m][n] f32; Stream-K: the slots
 *   k_slice     K columns per split slice (a multiple of the K tile)
 *   tile_begin  grouped: the first linear tile of this group
 *   tiles_m/_n  the problem's tiles along M and N */
#define CKJIT_GEMM_PROBLEM_FIELDS(X)                                           \
  X(const void *, a, 0)                                                        \
  X(const void *, b, 8)                                                        \
  X(const void *, c, 16)                                                       \
  X(const void *, d0, 24)                                                      \
  X(const void *, d1, 32)                                                      \
  X(const void *, bias, 40)                                                    \
  X(void *, d, 48)                                                             \
  X(float *, partials, 56)                                                     \
  X(long long, lda, 64)                                                        \
  X(long long, ldb, 72)                                                        \
  X(long long, ldc, 80)                                                        \
  X(long long, ldd, 88)                                                        \
  X(long long, ldd0, 96)                                                       \
  X(long long, ldd1, 104)                                                      \
  X(long long, stride_a, 112)                                                  \
  X(long long, stride_b, 120)                                                  \
  X(long long, stride_c, 128)                                                  \
  X(long long, stride_d, 136)                                                  \
  X(long long, stride_d0, 144)                                                 \
  X(long long, stride_d1, 152)                                                 \
  X(long long, m, 160)                                                         \
  X(long long, n, 168)                                                         \
  X(long long, k, 176)                                                         \
  X(long long, batch, 184)                                                     \
  X(long long, k_slice, 192)                                                   \
  X(long long, splits, 200)                                                    \
  X(long long, tile_begin, 208)                                                \
  X(long long, tiles_m, 216)                                                   \
  X(long long, tiles_n, 224)                                                   \
  X(float, alpha, 232)                                                         \
  X(float, beta, 236)
CKJIT_ABI_STRUCT(ckjit_gemm_problem, CKJIT_GEMM_PROBLEM_FIELDS, 240)

/* Grouped: up to CKJIT_GEMM_MAX_GROUPS problems travel by value as the
 * kernel argument (no device copy, so a launch can be captured into a
 * graph; under the 4 KiB every toolchain allows); the host launches larger
 * counts in several parts.  Groups are in tile order. */
#define CKJIT_GEMM_MAX_GROUPS 16

/* The mma.sync pipelines' epilogue runs from a BM x (BN + pad) f32 copy of
 * the block's tile in shared memory (gemm/staged_epilogue.h): its bytes,
 * for the host's shared-memory size too.  The pad of 8 columns keeps the
 * fragments' writes to two wavefronts a warp. */
#define CKJIT_GEMM_STAGED_PAD 8
#define CKJIT_GEMM_STAGED_BYTES(bm, bn) ((bm) * ((bn) + CKJIT_GEMM_STAGED_PAD) * 4)
typedef ckjit_gemm_problem ckjit_gemm_group_problems[CKJIT_GEMM_MAX_GROUPS];
#define CKJIT_GEMM_GROUPS_FIELDS(X)                                            \
  X(ckjit_gemm_group_problems, g, 0)                                           \
  X(long long, count, 3840)
CKJIT_ABI_STRUCT(ckjit_gemm_groups, CKJIT_GEMM_GROUPS_FIELDS, 3848)

/* Stream-K: the last sk_tiles tiles (in tile order) are cut into equal runs
 * of K steps, one run per block, across tile boundaries, so every block
 * gets the same work however the tiles divide among the multiprocessors.
 * A run's part of a tile goes to its own f32 partial slot; gemm_reduce sums
 * a tile's slots in block order (deterministic) and applies the epilogue.
 *   dp_tiles     tiles [0, dp_tiles): whole, block b takes b, b + grid, ...
 *   sk_tiles     the next sk_tiles tiles: in runs (0: no Stream-K)
 *   iters        K steps per tile
 *   base, extra  block b's run: base K steps, one more when b < extra
 *   slots        partial slots per Stream-K tile (BM x BN f32 each) */
#define CKJIT_GEMM_STREAMK_FIELDS(X)                                           \
  X(long long, dp_tiles, 0)                                                    \
  X(long long, sk_tiles, 8)                                                    \
  X(long long, iters, 16)                                                      \
  X(long long, base, 24)                                                       \
  X(long long, extra, 32)                                                      \
  X(long long, slots, 40)
CKJIT_ABI_STRUCT(ckjit_streamk, CKJIT_GEMM_STREAMK_FIELDS, 48)

/* gemm_reduce in its Stream-K form (bn > 0): the problem and the split. */
#define CKJIT_GEMM_REDUCE_SK_FIELDS(X)                                         \
  X(ckjit_gemm_problem, p, 0)                                                  \
  X(ckjit_streamk, sk, 240)
CKJIT_ABI_STRUCT(ckjit_gemm_reduce_sk_args, CKJIT_GEMM_REDUCE_SK_FIELDS, 288)



/* gemm_wgmma with tma >= 1, one problem: A's, B's and (tma = 2) D's maps,
 * the problem and its Stream-K split (sk.dp_tiles: every tile when
 * sk.sk_tiles is 0). */
typedef unsigned char ckjit_gemm_tma_padding[32];
#define CKJIT_GEMM_TMA_FIELDS(X)                                               \
  X(ckjit_tensor_map, a, 0)                                                    \
  X(ckjit_tensor_map, b, 128)                                                  \
  X(ckjit_tensor_map, d, 256)                                                  \
  X(ckjit_gemm_problem, p, 384)                                                \
  X(ckjit_streamk, sk, 624)                                                    \
  X(ckjit_gemm_tma_padding, tail_padding, 672)
CKJIT_ABI_STRUCT(ckjit_gemm_tma_args, CKJIT_GEMM_TMA_FIELDS, 704)

/* gemm_wgmma with tma >= 1, grouped: up to CKJIT_GEMM_TMA_GROUPS problems a
 * launch, each with its maps, ordered by first tile.  With D's maps (tma =
 * 2) the argument is over 4 KiB, which needs CUDA 12.1+ (the front-end
 * asks for it only from NVRTC 13, whose cubins need a 13.0 driver). */
#define CKJIT_GEMM_TMA_GROUPS 8
typedef ckjit_tensor_map ckjit_gemm_tma_maps[CKJIT_GEMM_TMA_GROUPS];
typedef ckjit_gemm_problem ckjit_gemm_tma_problems[CKJIT_GEMM_TMA_GROUPS];
typedef unsigned char ckjit_gemm_tma_grouped_padding[56];
#define CKJIT_GEMM_TMA_GROUPED_FIELDS(X)                                       \
  X(ckjit_gemm_tma_maps, a, 0)                                                 \
  X(ckjit_gemm_tma_maps, b, 1024)                                              \
  X(ckjit_gemm_tma_problems, g, 2048)                                          \
  X(long long, count, 3968)                                                    \
  X(ckjit_gemm_tma_grouped_padding, tail_padding, 3976)
CKJIT_ABI_STRUCT(ckjit_gemm_tma_grouped_args, CKJIT_GEMM_TMA_GROUPED_FIELDS, 4032)
#define CKJIT_GEMM_TMA_GROUPED_STORE_FIELDS(X)                                 \
  X(ckjit_gemm_tma_maps, a, 0)                                                 \
  X(ckjit_gemm_tma_maps, b, 1024)                                              \
  X(ckjit_gemm_tma_maps, d, 2048)                                              \
  X(ckjit_gemm_tma_problems, g, 3072)                                          \
  X(long long, count, 4992)                                                    \
  X(ckjit_gemm_tma_grouped_padding, tail_padding, 5000)
CKJIT_ABI_STRUCT(ckjit_gemm_tma_grouped_store_args, CKJIT_GEMM_TMA_GROUPED_STORE_FIELDS, 5056)

/* The kernels' parameter lists, for CKJIT_ABI_KERNEL: one of the structs
 * above, by value. */
#define CKJIT_GEMM_PROBLEM_PARAM(X) X(ckjit_gemm_problem, p, 0)
#define CKJIT_GEMM_GROUPS_PARAM(X) X(ckjit_gemm_groups, gs, 0)
#define CKJIT_GEMM_REDUCE_SK_PARAM(X) X(ckjit_gemm_reduce_sk_args, x, 0)
#define CKJIT_GEMM_TMA_PARAM(X) X(ckjit_gemm_tma_args, x, 0)
#define CKJIT_GEMM_TMA_GROUPED_PARAM(X) X(ckjit_gemm_tma_grouped_args, x, 0)
#define CKJIT_GEMM_TMA_GROUPED_STORE_PARAM(X) X(ckjit_gemm_tma_grouped_store_args, x, 0)

#endif
