/* GEMM family: the kernel families' parameters and the tile policy, shared
 * by the family descriptors (gemm_family.c) and the front-end (op_gemm.c). */
#ifndef CKJIT_RUNTIME_GEMM_H
#define CKJIT_RUNTIME_GEMM_H

#include <stdint.h>
#include "spec.h"

/* gemm_mma (tensor cores, sm_80+) parameters. */
enum {
  GM_DTYPE, GM_OUT, GM_A, GM_B, GM_BM, GM_BN, GM_BK, GM_WM, GM_WN, GM_STAGES, GM_VEC_A, GM_VEC_B,
  GM_BIAS, GM_ACT, GM_C, GM_D0, GM_D1, GM_SPLIT, GM_GROUPED, GM_COUNT
};
/* gemm_wgmma (Hopper tensor cores, sm_90a; 128 x BN tiles, BK 64) parameters. */
enum {
  GW_DTYPE, GW_OUT, GW_A, GW_B, GW_BN, GW_STAGES,
  GW_BIAS, GW_ACT, GW_C, GW_D0, GW_D1, GW_SPLIT, GW_GROUPED, GW_TMA, GW_COUNT
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
/* gemm_reduce (split-K sum + epilogue) parameters. */
enum { GR_OUT, GR_VEC, GR_BIAS, GR_ACT, GR_C, GR_D0, GR_D1, GR_COUNT };

/* Values of the order parameters: row-major / column-major. */
enum { GEMM_ROW = 0, GEMM_COL = 1 };

/* What a call fuses: the epilogue part of every GEMM spec. */
typedef struct gemm_epilogue_kind {
  int bias, act, c, d0, d1; /* ckjit_bias_mode, ckjit_unary_op, 0/1 ... */
} gemm_epilogue_kind;

/* Block tile of the tensor-core pipeline. */
typedef struct gemm_mma_tile {
  int bm, bn, bk, wm, wn, stages;
} gemm_mma_tile;

/* The tile for an m x n x k problem (per batch entry) on `sms`
 * multiprocessors with `vec_a`/`vec_b`-element copies; also the split-K
 * factor when split_k is 0 (automatic). */
void ckjit__gemm_pick_mma(int64_t m, int64_t n, int64_t k, int64_t batch, int sms, int vec_a,
                          int vec_b, gemm_mma_tile *tile, int *splits);

/* Shared memory (bytes) a gemm_mma or gemm_wgmma spec's pipeline needs. */
int ckjit__gemm_mma_smem(const ckjit_spec *spec);
int ckjit__gemm_wgmma_smem(const ckjit_spec *spec);

/* ---- CKJIT_TUNE (gemm_tune.c) ---------------------------------------------------- */
/* A measured configuration: pipeline (0 SIMT, 1 mma.sync, 2 wgmma; MFMA is
 * not tuned), tile
 * (mma: index of the front-end's tile table; wgmma: BN), stages (wgmma),
 * split-K slices. */
typedef struct gemm_choice {
  int pipe, tile, stages, splits;
} gemm_choice;

/* CKJIT_TUNE: -1 ("0": ignore recorded winners), 0 (unset: use them), 1
 * (also measure unknown shape classes). */
int ckjit__gemm_tune_mode(void);
/* The recorded winner of shape class `cls` (memory, then `dir`'s file, read
 * once); `dir` NULL: memory only.  Returns 1 when found. */
int ckjit__gemm_tune_lookup(const char *dir, const char *cls, gemm_choice *out);
/* Records a winner in memory and, when `dir` is not NULL, appends it to
 * the file. */
void ckjit__gemm_tune_store(const char *dir, const char *cls, const gemm_choice *c);

#endif
