/* The GEMM pipeline table: every choice of the kernel family that runs a
 * call is made here, by walking the rows in order (the way zstd picks a
 * block compressor from a table indexed by strategy, but with a predicate
 * per row since several conditions decide): the first row whose predicate
 * holds and whose planner takes the shape runs it.  A row gives
 *   its predicate  the matrix units it needs per input dtype, whether f32
 *                  needs allow_tf32, whether it runs one problem only (not
 *                  grouped), the narrowest copies it takes, and a further
 *                  check (TMA, K-major alignment);
 *   its planner    tile and automatic split (policy.c); it may still
 *                  decline a shape (wgmma: m <= 64 without Stream-K);
 *   its spec       the kernel family and its own parameters.
 * Adding a pipeline is adding a row (and its kernel family).
 *
 * Order matters: MFMA first (AMD GPUs, f16 / bf16); then tf32 for f32 with
 * allow_tf32 (wgmma where it can read through TMA, else mma.sync); then
 * f16 / bf16 on wgmma for aligned operands, on mma.sync otherwise; SIMT
 * for the rest (f32 without tf32, GPUs without matrix units). */
#include <string.h>

#include "plan.h"
#include "runtime/backend.h"
#include "tma.h"

typedef struct gemm_pipeline {
  int pipe; /* PIPE_*: the kernel family */
  /* Per input dtype (the dtype parameter's value: f32, f16, bf16): the
   * CKJIT_MATRIX_* units it needs, with TAKES set; 0: not for that dtype. */
  unsigned needs[3];
  int tf32;    /* f32 only with allow_tf32 */
  int single;  /* one problem only */
  int min_vec; /* A's and B's copies at least this many elements */
  int (*fits)(const gemm_shape *q);                               /* NULL: no further check */
  int (*plan)(const gemm_shape *q, gemm_plan *pl, int *auto_splits); /* 0: declines */
  ckjit_family_id family;
  void (*spec)(const gemm_plan *pl, const ckjit_gemm_desc *g, int32_t *v);
  int bias, split, grouped; /* parameter indices every GEMM family has */
} gemm_pipeline;

#define TAKES (1u << 31) /* no CKJIT_MATRIX_* bit */
enum { F32, F16, BF16 }; /* the dtype parameter's values */

/* ---- predicates and planners beyond the common fields -------------------------------- */

/* tf32 wgmma reads through TMA only, and K-major shared memory only (a
 * column-major A goes through registers): a row-major B is swapped into
 * A's place or transposed first, as is a column-major A that is not
 * 16-byte aligned (run.c); a row-major A must be aligned (4 f32) as it is. */
static int wgmma_tf32_fits(const gemm_shape *q) {
  const ckjit_gemm_desc *g = q->g;
  const int a_fit = g->a_order == CKJIT_COL_MAJOR || q->vec_a == 4;
  const int b_fit = g->b_order == CKJIT_ROW_MAJOR || q->vec_b == 4;
  return ckjit__gemm_tma_ok(q->gpu, g) && a_fit && b_fit;
}

static int plan_wgmma_tf32(const gemm_shape *q, gemm_plan *pl, int *auto_splits) {
  return ckjit__gemm_plan_wgmma(q, q->g->split_k == CKJIT_GEMM_STREAM_K, pl, auto_splits);
}

/* 16-bit wgmma: Stream-K only when asked (or chosen by CKJIT_TUNE): on the
 * H100 it measured slower than whole tiles and split-K on the under-filled
 * shapes it is meant for (bench/NOTES.md #49); it needs one problem and
 * TMA.  Otherwise the cp.async pipeline serves what TMA cannot. */
static int plan_wgmma_16bit(const gemm_shape *q, gemm_plan *pl, int *auto_splits) {
  const int stream_k =
      q->single && q->g->split_k == CKJIT_GEMM_STREAM_K && ckjit__gemm_tma_ok(q->gpu, q->g);
  if (!ckjit__gemm_plan_wgmma(q, stream_k, pl, auto_splits)) return 0;
  pl->vec_a = q->vec_a, pl->vec_b = q->vec_b;
  return 1;
}

/* ---- specs --------------------------------------------------------------------------- */

static int32_t a_order(const ckjit_gemm_desc *g) { return g->a_order == CKJIT_COL_MAJOR ? A_COL : A_ROW; }
static int32_t b_order(const ckjit_gemm_desc *g) { return g->b_order == CKJIT_COL_MAJOR ? B_COL : B_ROW; }
static int32_t dtype(ckjit_dtype t) { return ckjit__dtype_param_value(t); }

static void mfma_spec(const gemm_plan *pl, const ckjit_gemm_desc *g, int32_t *v) {
  (void)pl;
  v[GF_DTYPE] = dtype(g->ab_dtype), v[GF_OUT] = dtype(g->out_dtype);
  v[GF_A] = a_order(g), v[GF_B] = b_order(g);
}

static void wgmma_spec(const gemm_plan *pl, const ckjit_gemm_desc *g, int32_t *v) {
  v[GW_DTYPE] = dtype(g->ab_dtype), v[GW_OUT] = dtype(g->out_dtype);
  v[GW_A] = a_order(g), v[GW_B] = b_order(g);
  v[GW_BM] = pl->tile.bm, v[GW_BN] = pl->tile.bn, v[GW_STAGES] = pl->tile.stages;
  v[GW_DCOL] = pl->d_col;
  v[GW_CLUSTER_M] = pl->cluster_m, v[GW_CLUSTER_N] = pl->cluster_n;
}

static void tf32_spec(const gemm_plan *pl, const ckjit_gemm_desc *g, int32_t *v) {
  v[GT_OUT] = dtype(g->out_dtype), v[GT_A] = a_order(g), v[GT_B] = b_order(g);
  v[GT_BM] = pl->tile.bm, v[GT_BN] = pl->tile.bn, v[GT_BK] = pl->tile.bk;
  v[GT_WM] = pl->tile.wm, v[GT_WN] = pl->tile.wn, v[GT_STAGES] = pl->tile.stages;
  v[GT_VEC_A] = pl->vec_a, v[GT_VEC_B] = pl->vec_b;
}

static void mma_spec(const gemm_plan *pl, const ckjit_gemm_desc *g, int32_t *v) {
  v[GM_DTYPE] = dtype(g->ab_dtype), v[GM_OUT] = dtype(g->out_dtype);
  v[GM_A] = a_order(g), v[GM_B] = b_order(g);
  v[GM_BM] = pl->tile.bm, v[GM_BN] = pl->tile.bn, v[GM_BK] = pl->tile.bk;
  v[GM_WM] = pl->tile.wm, v[GM_WN] = pl->tile.wn, v[GM_STAGES] = pl->tile.stages;
  v[GM_VEC_A] = pl->vec_a, v[GM_VEC_B] = pl->vec_b, v[GM_WK] = pl->tile.wk ? pl->tile.wk : 1;
}

static void simt_spec(const gemm_plan *pl, const ckjit_gemm_desc *g, int32_t *v) {
  v[GS_DTYPE] = dtype(g->ab_dtype), v[GS_OUT] = dtype(g->out_dtype);
  v[GS_A] = a_order(g), v[GS_B] = b_order(g);
  v[GS_BM] = pl->tile.bm, v[GS_BN] = pl->tile.bn, v[GS_BK] = pl->tile.bk;
  v[GS_VEC] = pl->vec_a < pl->vec_b ? pl->vec_a : pl->vec_b; /* one width for both */
  if (v[GS_VEC] > 4) v[GS_VEC] = 4;
}

/* ---- the table ----------------------------------------------------------------------- */

#define MMA_SYNC CKJIT_MATRIX_MMA_SYNC
#define WGMMA (CKJIT_MATRIX_MMA_SYNC | CKJIT_MATRIX_WGMMA)

static const gemm_pipeline pipelines[PIPELINE_COUNT] = {
    [PIPELINE_MFMA] = {.pipe = PIPE_MFMA,
                       .needs = {[F16] = TAKES | CKJIT_MATRIX_MFMA_F16,
                                 [BF16] = TAKES | CKJIT_MATRIX_MFMA_BF16},
                       .plan = ckjit__gemm_plan_mfma,
                       .family = CKJIT_FAMILY_GEMM_MFMA, .spec = mfma_spec,
                       .bias = GF_BIAS, .split = GF_SPLIT, .grouped = GF_GROUPED},
    [PIPELINE_WGMMA_TF32] = {.pipe = PIPE_WGMMA,
                             .needs = {[F32] = TAKES | WGMMA},
                             .tf32 = 1, .single = 1, .fits = wgmma_tf32_fits,
                             .plan = plan_wgmma_tf32,
                             .family = CKJIT_FAMILY_GEMM_WGMMA, .spec = wgmma_spec,
                             .bias = GW_BIAS, .split = GW_SPLIT, .grouped = GW_GROUPED},
    [PIPELINE_TF32] = {.pipe = PIPE_TF32,
                       .needs = {[F32] = TAKES | MMA_SYNC},
                       .tf32 = 1,
                       .plan = ckjit__gemm_plan_tf32,
                       .family = CKJIT_FAMILY_GEMM_TF32, .spec = tf32_spec,
                       .bias = GT_BIAS, .split = GT_SPLIT, .grouped = GT_GROUPED},
    [PIPELINE_WGMMA] = {.pipe = PIPE_WGMMA,
                        .needs = {[F16] = TAKES | WGMMA, [BF16] = TAKES | WGMMA},
                        .min_vec = 8, /* 16 bytes: TMA boxes and the cp.async copies */
                        .plan = plan_wgmma_16bit,
                        .family = CKJIT_FAMILY_GEMM_WGMMA, .spec = wgmma_spec,
                        .bias = GW_BIAS, .split = GW_SPLIT, .grouped = GW_GROUPED},
    [PIPELINE_MMA] = {.pipe = PIPE_MMA,
                      .needs = {[F16] = TAKES | MMA_SYNC, [BF16] = TAKES | MMA_SYNC},
                      .plan = ckjit__gemm_plan_mma,
                      .family = CKJIT_FAMILY_GEMM_MMA, .spec = mma_spec,
                      .bias = GM_BIAS, .split = GM_SPLIT, .grouped = GM_GROUPED},
    [PIPELINE_SIMT] = {.pipe = PIPE_SIMT,
                       .needs = {[F32] = TAKES, [F16] = TAKES, [BF16] = TAKES},
                       .plan = ckjit__gemm_plan_simt,
                       .family = CKJIT_FAMILY_GEMM_SIMT, .spec = simt_spec,
                       .bias = GS_BIAS, .split = GS_SPLIT, .grouped = GS_GROUPED},
};

static int takes(const gemm_pipeline *row, const gemm_shape *q) {
  const ckjit_gemm_desc *g = q->g;
  const unsigned needs = row->needs[dtype(g->ab_dtype)], units = needs & ~TAKES;
  return needs && (q->gpu->device.matrix_units & units) == units && (!row->tf32 || g->allow_tf32) &&
         (!row->single || q->single) && q->vec_a >= row->min_vec && q->vec_b >= row->min_vec &&
         (!row->fits || row->fits(q));
}

void ckjit__gemm_plan(const gemm_shape *q, unsigned skip, gemm_plan *pl, int *auto_splits) {
  memset(pl, 0, sizeof *pl);
  pl->cluster_m = pl->cluster_n = 1;
  for (int i = 0; i < PIPELINE_COUNT; i++) {
    const gemm_pipeline *row = &pipelines[i];
    if (!(skip & 1u << i) && takes(row, q) && row->plan(q, pl, auto_splits)) {
      pl->pipe = row->pipe;
      return;
    }
  }
  /* unreachable: the SIMT row takes every call */
}

void ckjit__gemm_fill_epilogue(int32_t *v, const ckjit_gemm_desc *g, int bias) {
  v[bias] = (int32_t)g->bias_mode;
  v[bias + 1] = (int32_t)g->activation;
  v[bias + 2] = g->c != NULL && g->beta != 0.0f; /* beta 0 never reads C (BLAS) */
  v[bias + 3] = g->d0 != NULL;
  v[bias + 4] = g->d1 != NULL;
}

void ckjit__gemm_spec(const gemm_plan *pl, const ckjit_gemm_desc *g, int split, int grouped,
                      ckjit_spec *s) {
  memset(s, 0, sizeof *s);
  /* The kernel family of the plan (a tuned plan may have another pipeline
   * than its row's): the first row of that family has its spec. */
  const gemm_pipeline *row = &pipelines[PIPELINE_SIMT];
  for (int i = 0; i < PIPELINE_COUNT; i++)
    if (pipelines[i].pipe == pl->pipe) {
      row = &pipelines[i];
      break;
    }
  s->family = (uint32_t)row->family;
  row->spec(pl, g, s->value);
  if (!split) ckjit__gemm_fill_epilogue(s->value, g, row->bias);
  s->value[row->split] = split, s->value[row->grouped] = grouped;
}
