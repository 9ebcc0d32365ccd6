/* The GEMM kernel families: their parameters, the enum constants that
 * cross to the kernels, and the block tiles; shared by the family
 * descriptors (gemm_family.c) and the front-end (the rest of this folder).
 *
 * The front-end, one concept a file:
 *   validate.c   the descriptors' defaults and checks
 *   pipelines.c  the pipeline table: which kernel family runs a call, and
 *                its spec
 *   policy.c     the tile policies: each pipeline's tile and split-K factor
 *   tma.c        the wgmma pipeline's tensor maps
 *   split_k.c    split-K slices and the reduce kernel's launch
 *   streamk.c    the Stream-K split
 *   run.c        one GEMM: plan, tune, launch (ckjit_gemm)
 *   grouped.c    ckjit_gemm_grouped
 *   tune.c       CKJIT_TUNE's measurements; tune_record.c its record */
#ifndef CKJIT_RUNTIME_OPS_GEMM_H
#define CKJIT_RUNTIME_OPS_GEMM_H

#include <stdint.h>

#include "abi/gemm_args.h"
#include "runtime/spec.h"

/* gemm_mma (tensor cores, sm_80+) parameters. */
enum {
  GM_DTYPE, GM_OUT, GM_A, GM_B, GM_BM, GM_BN, GM_BK, GM_WM, GM_WN, GM_STAGES, GM_VEC_A, GM_VEC_B,
  GM_BIAS, GM_ACT, GM_C, GM_D0, GM_D1, GM_SPLIT, GM_GROUPED, GM_WK, GM_COUNT
};
/* gemm_wgmma (Hopper tensor cores, sm_90a; BM (128 or 64) x BN tiles, K steps
 * of 128 bytes: 64 f16/bf16 or 32 tf32) parameters. */
enum {
  GW_DTYPE, GW_OUT, GW_A, GW_B, GW_BN, GW_STAGES,
  GW_BIAS, GW_ACT, GW_C, GW_D0, GW_D1, GW_SPLIT, GW_GROUPED, GW_TMA, GW_BM, GW_STREAMK, GW_DCOL,
  GW_CLUSTER_M, GW_CLUSTER_N, GW_COUNT
};
/* gemm_mfma (AMD matrix cores; 128 x 128 x 32 tiles of four wave64s) parameters. */
enum {
  GF_DTYPE, GF_OUT, GF_A, GF_B, GF_BIAS, GF_ACT, GF_C, GF_D0, GF_D1, GF_SPLIT, GF_GROUPED, GF_COUNT
};
/* gemm_simt (portable; 8 x 8 outputs per thread) parameters. */
enum {
  GS_DTYPE, GS_OUT, GS_A, GS_B, GS_BM, GS_BN, GS_BK, GS_VEC,
  GS_BIAS, GS_ACT, GS_C, GS_D0, GS_D1, GS_SPLIT, GS_GROUPED, GS_COUNT
};
/* gemm_tf32 (tensor cores, sm_80+, f32 inputs rounded to tf32) parameters. */
enum {
  GT_OUT, GT_A, GT_B, GT_BM, GT_BN, GT_BK, GT_WM, GT_WN, GT_STAGES, GT_VEC_A, GT_VEC_B,
  GT_BIAS, GT_ACT, GT_C, GT_D0, GT_D1, GT_SPLIT, GT_GROUPED, GT_COUNT
};
/* gemm_reduce (split-K or Stream-K sum + epilogue) parameters; GR_BN: 0
 * for split-K partials, the wgmma tile's BN for Stream-K slots. */
enum { GR_OUT, GR_VEC, GR_BIAS, GR_ACT, GR_C, GR_D0, GR_D1, GR_BN, GR_COUNT };

/* Values of the order, bias and activation parameters (abi/gemm_args.h):
 * A_ROW / A_COL, B_ROW / B_COL, BIAS_NONE ..., ACT_IDENTITY ...; bias and
 * activation in the order of the public ckjit_bias_mode and
 * ckjit_unary_op (checked in gemm_family.c). */
enum { CKJIT_GEMM_A_ORDERS(CKJIT_ENUM_CONSTANT) };
enum { CKJIT_GEMM_B_ORDERS(CKJIT_ENUM_CONSTANT) };
enum { CKJIT_GEMM_BIASES(CKJIT_ENUM_CONSTANT) CKJIT_GEMM_BIAS_COUNT };
enum { CKJIT_GEMM_ACTIVATIONS(CKJIT_ENUM_CONSTANT) CKJIT_GEMM_ACT_COUNT };

/* A block tile: bm x bn outputs, bk deep per step; warps (wm x wn, and
 * wk along K: mma.sync only, 0 meaning 1) and pipeline stages where the
 * pipeline has them (0 elsewhere). */
typedef struct gemm_block_tile {
  int bm, bn, bk, wm, wn, stages, wk;
} gemm_block_tile;

/* The mma.sync tiles the policy (policy.c), the default specs and
 * CKJIT_TUNE choose from (gemm_family.c): 128 x 128 for large problems,
 * 64 x 128 for m <= 64, 16 x 64 x 256 of 1 x 2 x 4 warps (four along K)
 * for decode shapes (m <= 16), 64 x 64 for operands
 * whose copies are narrower than 8 bytes. */
enum { MMA_LARGE, MMA_SMALL, MMA_DECODE, MMA_NARROW, MMA_TILES };
extern const gemm_block_tile ckjit__gemm_block_tiles[MMA_TILES];

/* The tf32 tiles the policy (policy.c) and the default specs choose from:
 * 256 x 128 x 32 (f32 elements) of 4 x 2 warps for large problems (the
 * fastest of a sweep, bench/NOTES.md #50), 128 x 128 of 2 x 2 warps where
 * those leave multiprocessors idle, 64 x 128 for m <= 64. */
enum { TF32_LARGE, TF32_MID, TF32_SMALL, TF32_TILES };
extern const gemm_block_tile ckjit__gemm_tf32_tiles[TF32_TILES];

/* wgmma stages for a BM x BN tile: as many as fit in 227 KiB beside the
 * TMA-store buffer (bm 128) or alone (bm 64, which has no TMA stores): the
 * skinny shapes wait on memory, and every stage more measured faster there
 * (bench/NOTES.md #58, #77). */
#define CKJIT_GEMM_WGMMA_MAX_STAGES 14 /* the gemm_wgmma spec's range and the 64 x 64 tile's */
static inline int ckjit__gemm_wgmma_stages(int bm, int bn) {
  if (bm == 64) return bn == 256 ? 5 : bn == 128 ? 9 : CKJIT_GEMM_WGMMA_MAX_STAGES;
  return bn == 256 ? 4 : bn == 128 ? 6 : 8;
}

/* Block size, dynamic shared memory (bytes) and blocks per cluster of a
 * GEMM family spec's launch. */
void ckjit__gemm_launch_shape(const ckjit_spec *spec, unsigned *threads, unsigned *smem, unsigned *cluster);

#endif
