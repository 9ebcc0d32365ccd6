/* GEMM plans: which pipeline runs a call (the pipeline table,
 * pipelines.c), with which tile and split-K factor (the tile policies,
 * policy.c), and the spec of its kernel. */
#ifndef CKJIT_RUNTIME_OPS_GEMM_PLAN_H
#define CKJIT_RUNTIME_OPS_GEMM_PLAN_H

#include <stdint.h>

#include "ckjit/ckjit.h"
#include "gemm.h"
#include "runtime/runtime.h"
#include "runtime/spec.h"

/* The kernel family a plan runs.  CKJIT_TUNE's record file holds the
 * first three numbers (tune_record.c): they must not change. */
enum { PIPE_SIMT, PIPE_MMA, PIPE_WGMMA, PIPE_MFMA, PIPE_TF32 };

typedef struct gemm_plan {
  int pipe;             /* PIPE_* */
  gemm_block_tile tile; /* block tile (bm, bn, bk) of every pipeline; warps and stages: mma, tf32, wgmma */
  int vec_a, vec_b;     /* copy widths (elements) of A and B: mma, tf32, simt */
  int d_col;            /* wgmma: C, D, D0 and D1 column-major (tf32's swapped problem, run.c) */
  int cluster_m, cluster_n; /* wgmma through TMA: blocks of a cluster along M and N (1 x 1: none) */
} gemm_plan;

/* What the pipeline table decides from: the call and its shape. */
typedef struct gemm_shape {
  ckjit_gpu *gpu;
  const ckjit_gemm_desc *g; /* dtypes, orders, split_k, allow_tf32 (grouped: problem 0's) */
  int64_t m, n, k, batch;   /* grouped: the largest extents, batch 1 */
  int vec_a, vec_b;         /* the widest copies A's and B's alignment allows (grouped: the narrowest) */
  int single;               /* one problem (not grouped): Stream-K, 64-row wgmma tiles, tf32 wgmma */
} gemm_shape;

/* The rows of the pipeline table, in the order they are tried (see
 * pipelines.c).  A row that cannot run a call after all (a refused tensor
 * map, no scratch for a transpose) is skipped in the plan of the rest. */
enum {
  PIPELINE_MFMA,       /* AMD matrix cores, f16 / bf16 */
  PIPELINE_WGMMA_TF32, /* Hopper wgmma for f32 with allow_tf32, through TMA */
  PIPELINE_TF32,       /* mma.sync m16n8k8 tf32 */
  PIPELINE_WGMMA,      /* Hopper wgmma, f16 / bf16, 16-byte aligned operands */
  PIPELINE_MMA,        /* mma.sync m16n8k16, f16 / bf16 */
  PIPELINE_SIMT,       /* everything else */
  PIPELINE_COUNT
};

/* The plan of the first row of the table (not in `skip`, a mask of
 * 1 << PIPELINE_*) that takes `q`, and its automatic split-K factor
 * (CKJIT_GEMM_STREAM_K for Stream-K). */
void ckjit__gemm_plan(const gemm_shape *q, unsigned skip, gemm_plan *pl, int *auto_splits);

/* The spec of plan `pl`'s kernel for `g`: with `split`, partials only (the
 * epilogue is gemm_reduce's); `grouped`: the kernel takes gemm_groups. */
void ckjit__gemm_spec(const gemm_plan *pl, const ckjit_gemm_desc *g, int split, int grouped,
                      ckjit_spec *s);

/* g's epilogue into the five parameters from v[bias] on (bias, act, c, d0,
 * d1: consecutive in every GEMM family). */
void ckjit__gemm_fill_epilogue(int32_t *v, const ckjit_gemm_desc *g, int bias);

/* ---- tile policies (policy.c) ---------------------------------------------------- */

/* The device's multiprocessors (1 when it reports none). */
int ckjit__gemm_sm_count(const ckjit_gpu *gpu);

/* Split-K factor of `tiles` tiles on `sms` multiprocessors, K steps of bk. */
int ckjit__gemm_auto_split(int64_t m, int64_t n, int64_t k, int64_t tiles, int bk, int sms);

/* Each pipeline's tile and automatic split for `q` (PIPE_* is the table's
 * to set).  The wgmma one returns 0, leaving the plan alone, for m <= 64
 * without Stream-K; the others take every shape. */
int ckjit__gemm_plan_mfma(const gemm_shape *q, gemm_plan *pl, int *auto_splits);
int ckjit__gemm_plan_wgmma(const gemm_shape *q, int stream_k, gemm_plan *pl, int *auto_splits);
int ckjit__gemm_plan_tf32(const gemm_shape *q, gemm_plan *pl, int *auto_splits);
int ckjit__gemm_plan_mma(const gemm_shape *q, gemm_plan *pl, int *auto_splits);
int ckjit__gemm_plan_simt(const gemm_shape *q, gemm_plan *pl, int *auto_splits);

/* CKJIT_GEMM_CLUSTER, read on every ckjit_gemm call before any device
 * work: the clusters asked for (1 x 1 when unset), or
 * CKJIT_ERROR_INVALID_ARGUMENT.  The policy itself picks none (bench/NOTES.md
 * #192); the run keeps them only where they can run (run.c). */
ckjit_status ckjit__gemm_cluster_knob(int *cluster_m, int *cluster_n);

/* The wgmma plan back to 128-row tiles (the 64-row ones read only
 * through TMA and have no Stream-K slots). */
void ckjit__gemm_use_128_rows(gemm_plan *pl);

#endif
