/* One GEMM (ckjit_gemm): validate, plan (the pipeline table), tune, then
 * run the plan: the main kernel and, for split-K or Stream-K, the reduce
 * kernel over its partials. */
#include "run.h"

#include <stdint.h>
#include <string.h>

#include "base/error.h"
#include "base/int_math.h"
#include "runtime/dispatch.h"
#include "runtime/ops/op_frame.h"
#include "tma.h"
#include "tune.h"
#include "validate.h"

void ckjit__gemm_problem_of(const ckjit_gemm_desc *g, const gemm_plan *pl, ckjit_gemm_problem *p) {
  memset(p, 0, sizeof *p);
  p->a = g->a, p->b = g->b, p->d0 = g->d0, p->d1 = g->d1, p->bias = g->bias;
  p->c = g->beta != 0.0f ? g->c : NULL;
  p->d = g->d;
  p->lda = g->lda, p->ldb = g->ldb, p->ldc = g->ldc, p->ldd = g->ldd;
  p->ldd0 = g->ldd0, p->ldd1 = g->ldd1;
  p->stride_a = g->stride_a, p->stride_b = g->stride_b, p->stride_c = g->stride_c;
  p->stride_d = g->stride_d, p->stride_d0 = g->stride_d0, p->stride_d1 = g->stride_d1;
  p->m = g->m, p->n = g->n, p->k = g->k, p->batch = g->batch;
  p->k_slice = g->k > 0 ? g->k : 1, p->splits = 1;
  p->tiles_m = ckjit__ceil_div(g->m, pl->tile.bm), p->tiles_n = ckjit__ceil_div(g->n, pl->tile.bn);
  p->alpha = g->alpha, p->beta = g->beta;
}

ckjit_status ckjit__gemm_launch(ckjit_gpu *gpu, const ckjit_spec *spec, int64_t blocks, const void *args,
                                void *stream) {
  ckjit_kernel *k;
  ckjit_status st = ckjit__kernel_get(gpu, spec, &k);
  if (st) return st;
  unsigned threads, smem, cluster;
  ckjit__gemm_launch_shape(spec, &threads, &smem, &cluster);
  if ((int)smem > gpu->device.max_shared_bytes)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                       "ckjit_gemm: the tile needs %u bytes of shared memory; the GPU allows %d", smem,
                       gpu->device.max_shared_bytes);
  if (blocks > (int64_t)CKJIT_GRID_X_MAX)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "ckjit_gemm: %lld tiles are too many for one launch",
                       (long long)blocks);
  unsigned grid[3] = {(unsigned)blocks, 1, 1}, block[3] = {threads, 1, 1};
  return ckjit__kernel_launch(gpu, k, grid, block, cluster, smem, stream, args, &ckjit_abi_by_value);
}

void ckjit__gemm_operand_vecs(const ckjit_gemm_desc *g, int *vec_a, int *vec_b) {
  const int64_t sa[2] = {g->lda, g->stride_a}, sb[2] = {g->ldb, g->stride_b};
  const void *pa[1] = {g->a}, *pb[1] = {g->b};
  const size_t es = ckjit_dtype_size(g->ab_dtype);
  /* At most 16 bytes: ckjit__pick_vec's own cap. */
  *vec_a = ckjit__pick_vec(es, pa, 1, sa, g->batch > 1 && g->stride_a ? 2 : 1, 16);
  *vec_b = ckjit__pick_vec(es, pb, 1, sb, g->batch > 1 && g->stride_b ? 2 : 1, 16);
}

/* The split the caller asked for: split_k, or the plan's automatic one. */
static int splits_wanted(const ckjit_gemm_desc *g, int auto_splits) {
  return g->split_k == 0 ? auto_splits : g->split_k;
}

/* The pipeline table's plan of one problem `g`, without the rows in `skip`. */
static void plan_one(ckjit_gpu *gpu, const ckjit_gemm_desc *g, unsigned skip, gemm_plan *pl,
                     int *auto_splits) {
  gemm_shape q = {.gpu = gpu, .g = g, .m = g->m, .n = g->n, .k = g->k, .batch = g->batch, .single = 1};
  ckjit__gemm_operand_vecs(g, &q.vec_a, &q.vec_b);
  ckjit__gemm_plan(&q, skip, pl, auto_splits);
}

/* `g` (f32, allow_tf32) where the tf32 wgmma pipeline cannot take it after
 * all (no tensor map, no scratch for a transpose): the plan of the table's
 * next row, tf32 mma.sync. */
static ckjit_status run_without_wgmma_tf32(ckjit_gpu *gpu, const ckjit_gemm_desc *g, void *stream) {
  gemm_plan pl;
  int splits;
  plan_one(gpu, g, 1u << PIPELINE_WGMMA_TF32, &pl, &splits);
  return ckjit__gemm_run_plan(gpu, g, &pl, splits_wanted(g, splits), stream);
}

ckjit_status ckjit__gemm_run_plan(ckjit_gpu *gpu, const ckjit_gemm_desc *g, const gemm_plan *plan,
                                  int want, void *stream) {
  gemm_plan pl = *plan;
  ckjit_status st;
  ckjit_gemm_problem p;
  ckjit_spec spec;
  const int64_t sms = ckjit__gemm_sm_count(gpu);
  /* wgmma reads its operands (and, unsplit, writes D) through TMA
   * descriptors when it can; 0 also when the driver refused: the cp.async
   * pipeline then. */
  ckjit_gemm_tma_args x;
  memset(&x.sk, 0, sizeof x.sk);
  if (pl.pipe == PIPE_WGMMA && pl.tile.bm == 64 && want == CKJIT_GEMM_STREAM_K) ckjit__gemm_use_128_rows(&pl);
  const int tma_ok = pl.pipe == PIPE_WGMMA && ckjit__gemm_tma_ok(gpu, g);
  /* Clusters run through TMA on whole tiles (not Stream-K's runs), where the
   * GPU launches clusters. */
  if (!tma_ok || !gpu->device.clusters || want == CKJIT_GEMM_STREAM_K) pl.cluster_m = pl.cluster_n = 1;
  /* A refusal is not the call's error (the cp.async pipeline serves it):
   * logged at debug level, not left in ckjit_last_error(). */
  const int quiet = ckjit__error_quiet(1);
  const int tma = tma_ok ? ckjit__gemm_encode_maps(gpu, g, &pl, &x.a, &x.b,
                                                   want <= 1 && pl.tile.bm == 128 && !pl.d_col ? &x.d : NULL)
                         : 0;
  ckjit__error_quiet(quiet);
  if (!tma) pl.cluster_m = pl.cluster_n = 1; /* the cp.async pipeline runs no clusters */
  /* tf32 wgmma reads only through TMA; a swapped problem (d_col) goes back
   * to run_wgmma_tf32, which transposes instead. */
  if (pl.pipe == PIPE_WGMMA && !tma && g->ab_dtype == CKJIT_F32)
    return pl.d_col ? ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "ckjit_gemm: the swapped tf32 problem's tensor maps "
                                                           "were refused")
                    : run_without_wgmma_tf32(gpu, g, stream);
  if (pl.pipe == PIPE_WGMMA && pl.tile.bm == 64 && !tma) ckjit__gemm_use_128_rows(&pl);
  ckjit__gemm_problem_of(g, &pl, &p);
  const int64_t tiles = p.tiles_m * p.tiles_n * g->batch;
  if (want == CKJIT_GEMM_STREAM_K && !tma)
    want = ckjit__gemm_auto_split(g->m, g->n, g->k, tiles, pl.tile.bk, (int)sms);
  int64_t k_slice, splits;
  ckjit__gemm_slice_k(g->k, pl.tile.bk, want, &k_slice, &splits);
  ckjit__gemm_spec(&pl, g, splits > 1, 0, &spec);
  if (tma) spec.value[GW_TMA] = splits > 1 ? 1 : tma; /* 1 for 64-row tiles: no D map */
  if (tma && want == CKJIT_GEMM_STREAM_K) spec.value[GW_STREAMK] = 1;
  size_t bytes;
  int64_t grid = ckjit__gemm_split_grid(g, &pl, tiles, splits, want, sms, &x.sk, &bytes);
  /* The TMA pipeline is persistent: one block per multiprocessor at most;
   * in clusters, one cluster per unit of a cluster's tiles at most. */
  const int64_t cluster = pl.cluster_m * pl.cluster_n;
  if (cluster > 1) {
    const int64_t units = ckjit__ceil_div(p.tiles_m, pl.cluster_m) * ckjit__ceil_div(p.tiles_n, pl.cluster_n) *
                          splits * g->batch;
    grid = (units < sms / cluster ? units : sms / cluster) * cluster;
  }
  if (tma && grid > sms) grid = sms;
  void *scratch = NULL;
  if (bytes) {
    if ((st = ckjit__scratch_alloc(gpu, bytes, stream, &scratch))) {
      /* No stream-ordered allocation here (HIP before 5.3): the same
       * result without splitting. */
      if (st == CKJIT_ERROR_UNSUPPORTED) return ckjit__gemm_run_plan(gpu, g, plan, 1, stream);
      return st;
    }
    p.partials = scratch, p.k_slice = k_slice, p.splits = splits;
  }
  x.p = p;
  st = tma ? ckjit__gemm_launch(gpu, &spec, grid, &x, stream)
           : ckjit__gemm_launch(gpu, &spec, grid, &p, stream);
  if (!st && bytes)
    st = ckjit__gemm_launch_reduce(gpu, g, &pl, &p, want == CKJIT_GEMM_STREAM_K ? &x.sk : NULL, stream);
  ckjit_status fst = scratch ? ckjit__scratch_free(gpu, scratch, stream) : CKJIT_SUCCESS;
  return st ? st : fst;
}

/* g (A row-major, B row-major) as D^T = B^T A^T: A' = B^T and B' = A^T
 * are both column-major, and D^T is D read column-major (the kernel's
 * dcol).  The bias runs along the other dimension. */
static ckjit_gemm_desc swapped(const ckjit_gemm_desc *g) {
  ckjit_gemm_desc t = *g;
  t.m = g->n, t.n = g->m;
  t.a = g->b, t.lda = g->ldb, t.stride_a = g->stride_b, t.a_order = CKJIT_COL_MAJOR;
  t.b = g->a, t.ldb = g->lda, t.stride_b = g->stride_a, t.b_order = CKJIT_COL_MAJOR;
  if (g->bias_mode != CKJIT_BIAS_NONE)
    t.bias_mode = g->bias_mode == CKJIT_BIAS_PER_ROW ? CKJIT_BIAS_PER_COL : CKJIT_BIAS_PER_ROW;
  return t;
}

/* tf32 on wgmma, which reads K-major shared memory only: B column-major,
 * A row-major or column-major (through registers), each 16-byte aligned
 * for TMA.  A row-major B swaps the problem (swapped()) when it runs
 * unsplit; otherwise B, and a column-major A that is not aligned, are
 * transposed into stream-ordered scratch first, in rows of k rounded up
 * to 4 elements.  Without scratch, mma.sync. */
static ckjit_status run_wgmma_tf32(ckjit_gpu *gpu, const ckjit_gemm_desc *g, const gemm_plan *pl,
                                   int want, void *stream) {
  int vec_a, vec_b;
  ckjit__gemm_operand_vecs(g, &vec_a, &vec_b);
  const int a_col = g->a_order == CKJIT_COL_MAJOR, b_row = g->b_order == CKJIT_ROW_MAJOR;
  if (b_row && !a_col && vec_b == 4) { /* (a row-major A is aligned: wgmma_tf32_fits) */
    const ckjit_gemm_desc t = swapped(g);
    gemm_plan pt;
    int auto_t;
    plan_one(gpu, &t, 0, &pt, &auto_t);
    if (pt.pipe == PIPE_WGMMA && splits_wanted(g, auto_t) == 1) {
      pt.d_col = 1;
      pt.cluster_m = pl->cluster_m, pt.cluster_n = pl->cluster_n;
      /* Quiet: a refused tensor map (UNSUPPORTED) only sends the call to the
       * transposing path, and must not show in ckjit_last_error() when that
       * succeeds; any other failure is recorded again. */
      const int quiet = ckjit__error_quiet(1);
      const ckjit_status st = ckjit__gemm_run_plan(gpu, &t, &pt, 1, stream);
      ckjit__error_quiet(quiet);
      if (st == CKJIT_SUCCESS) return st;
      if (st != CKJIT_ERROR_UNSUPPORTED) return ckjit__fail(st, "%s", ckjit__error_latest());
    }
  }
  const int ta = a_col && vec_a != 4, tb = b_row;
  const int64_t ld = (g->k + 3) / 4 * 4, per_a = g->m * ld, per_b = g->n * ld;
  const size_t a_bytes = ta ? (size_t)(g->batch * per_a) * 4 : 0;
  const size_t b_bytes = tb ? (size_t)(g->batch * per_b) * 4 : 0;
  if (!a_bytes && !b_bytes) return ckjit__gemm_run_plan(gpu, g, pl, want, stream);
  void *scratch = NULL;
  const int quiet = ckjit__error_quiet(1);
  ckjit_status st = ckjit__scratch_alloc(gpu, a_bytes + b_bytes, stream, &scratch);
  ckjit__error_quiet(quiet);
  if (st) return run_without_wgmma_tf32(gpu, g, stream);
  ckjit_gemm_desc t = *g;
  if (ta) { /* A: k x m rows of lda -> m x k */
    st = ckjit_transpose(CKJIT_F32, g->batch, g->k, g->m, g->a, g->lda, g->stride_a, scratch, ld, per_a,
                         stream);
    t.a = scratch, t.lda = ld, t.stride_a = per_a, t.a_order = CKJIT_ROW_MAJOR;
  }
  if (!st && tb) { /* B: k x n rows of ldb -> n x k, i.e. column-major */
    void *bt = (char *)scratch + a_bytes;
    st = ckjit_transpose(CKJIT_F32, g->batch, g->k, g->n, g->b, g->ldb, g->stride_b, bt, ld, per_b, stream);
    t.b = bt, t.ldb = ld, t.stride_b = per_b, t.b_order = CKJIT_COL_MAJOR;
  }
  if (!st) st = ckjit__gemm_run_plan(gpu, &t, pl, want, stream);
  const ckjit_status fst = ckjit__scratch_free(gpu, scratch, stream);
  return st ? st : fst;
}

ckjit_status ckjit_gemm(const ckjit_gemm_desc *desc, void *stream) {
  ckjit_status st = ckjit__gemm_check_desc("ckjit_gemm", desc, stream);
  if (st) return st;
  int cluster_m, cluster_n;
  if ((st = ckjit__gemm_cluster_knob(&cluster_m, &cluster_n))) return st;
  if (desc->m == 0 || desc->n == 0) return CKJIT_SUCCESS;
  ckjit_gpu *gpu;
  if ((st = ckjit__stream_gpu(stream, &gpu))) return st;
  gemm_plan pl;
  int auto_splits = 1;
  plan_one(gpu, desc, 0, &pl, &auto_splits);
  ckjit__gemm_tune(gpu, desc, &pl, &auto_splits, stream);
  pl.cluster_m = cluster_m, pl.cluster_n = cluster_n; /* kept only where they can run (run_plan) */
  const int want = splits_wanted(desc, auto_splits);
  if (pl.pipe == PIPE_WGMMA && desc->ab_dtype == CKJIT_F32) /* the wgmma-tf32 row's plan */
    return run_wgmma_tf32(gpu, desc, &pl, want, stream);
  return ckjit__gemm_run_plan(gpu, desc, &pl, want, stream);
}
