/* CKJIT_TUNE: GEMM configurations measured per shape class (tune.c) and
 * their record, in memory and in the cache directory (tune_record.c: the
 * GEMM's values in the record every tuned family shares,
 * runtime/ops/tune_record.h). */
#ifndef CKJIT_RUNTIME_OPS_GEMM_TUNE_H
#define CKJIT_RUNTIME_OPS_GEMM_TUNE_H

#include "plan.h"

/* A measured configuration: pipeline (PIPE_SIMT 0, PIPE_MMA 1, PIPE_WGMMA
 * 2; MFMA is not tuned), tile (mma: index of ckjit__gemm_block_tiles;
 * wgmma: BN), stages (wgmma: ckjit__gemm_wgmma_stages(bm, BN), which also
 * tells 64-row tiles from 128-row ones), split-K slices (-1: Stream-K). */
typedef struct gemm_choice {
  int pipe, tile, stages, splits;
} gemm_choice;

/* ---- the record (tune_record.c) -------------------------------------------------- */

/* CKJIT_TUNE: -1 ("0": ignore recorded winners), 0 (unset: use them), 1
 * (also measure unknown shape classes). */
int ckjit__gemm_tune_mode(void);
/* Whether any winner is recorded (memory or `dir`'s file, read once):
 * without one a call skips the lookup.  Lock-free after the first call. */
int ckjit__gemm_tune_any(const char *dir);
/* The recorded winner of shape class `cls` (memory, then `dir`'s file, read
 * once); `dir` NULL: memory only.  Returns 1 when found. */
int ckjit__gemm_tune_lookup(const char *dir, const char *cls, gemm_choice *out);
/* Records a winner in memory and, when `dir` is not NULL, appends it to
 * the file. */
void ckjit__gemm_tune_store(const char *dir, const char *cls, const gemm_choice *c);

/* ---- the measurements (tune.c) --------------------------------------------------- */

/* The recorded winner for g's shape class into *pl and *splits, measuring
 * it first under CKJIT_TUNE=1.  Leaves the plan alone for explicit
 * split_k, SIMT, MFMA, tf32 (either pipeline), or when nothing is known. */
void ckjit__gemm_tune(ckjit_gpu *gpu, const ckjit_gemm_desc *g, gemm_plan *pl, int *splits,
                      void *stream);

#endif
