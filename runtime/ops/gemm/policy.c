/* GEMM tile policies: each pipeline's block tile and automatic split-K
 * factor for a shape (which pipeline runs it is the table's choice,
 * pipelines.c). */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/int_math.h"
#include "plan.h"
#include "tma.h"

int ckjit__gemm_sm_count(const ckjit_gpu *gpu) {
  return gpu->device.multiprocessors > 0 ? gpu->device.multiprocessors : 1;
}

/* Split-K factor: when the tiles cannot fill the multiprocessors, enough
 * slices for about one wave, each at least four K steps deep, and no more
 * than keeps the f32 partials (written and read back: 8 bytes per output
 * per slice) under half the operand traffic. */
int ckjit__gemm_auto_split(int64_t m, int64_t n, int64_t k, int64_t tiles, int bk, int sms) {
  if (sms < 1) sms = 1;
  if (tiles >= sms) return 1;
  int64_t s = ckjit__ceil_div(sms, tiles);
  const int64_t by_depth = k / (4 * (int64_t)bk), by_traffic = (m * k + k * n) / (8 * m * n);
  if (s > by_depth) s = by_depth;
  if (s > by_traffic) s = by_traffic;
  if (s > 32) s = 32;
  return s < 1 ? 1 : (int)s;
}

/* Wave split (decode tiles, the persistent wgmma kernel): slices per tile
 * so that the blocks fill whole waves of the `slots` blocks the GPU runs at
 * once (an idle slot is lost bandwidth, and a second partial wave costs a
 * whole one), each slice at least two K steps deep.  A split must promise
 * 10% over the unsplit run: the partials' traffic and the reduce launch
 * cost about that much, and a near-full wave split 32 ways only looks
 * cheaper by rounding (bench/NOTES.md #58). */
static int wave_split(int64_t tiles, int64_t k, int bk, int64_t slots) {
  int64_t most = k / (2 * (int64_t)bk);
  if (most > 32) most = 32;
  int best = 1;
  double best_cost = 0;
  for (int64_t s = 1; s <= (most > 1 ? most : 1); s++) {
    const double waves = (double)ckjit__ceil_div(tiles * s, slots);
    const double cost = waves / (double)s * (s > 1 ? 1.10 : 1.0);
    if (s == 1 || cost < best_cost) best = (int)s, best_cost = cost;
  }
  return best;
}

/* Whether `tiles` blocks would leave over a third of `sms` multiprocessors idle. */
static int idle_third(int64_t tiles, int sms) { return 3 * tiles < 2 * (int64_t)sms; }

/* MFMA: 128 x 128 x 32 tiles of four wave64s. */
int ckjit__gemm_plan_mfma(const gemm_shape *q, gemm_plan *pl, int *auto_splits) {
  const int sms = ckjit__gemm_sm_count(q->gpu);
  pl->tile = (gemm_block_tile){128, 128, 32, 0, 0, 0, 0};
  *auto_splits = ckjit__gemm_auto_split(
      q->m, q->n, q->k, ckjit__ceil_div(q->m, 128) * ckjit__ceil_div(q->n, 128) * q->batch, 32, sms);
  return 1;
}

/* The wgmma tile for an m x n x k problem, K steps of one 128-byte row (64
 * 16-bit or 32 f32 elements): 128 x 256 tiles; 128 x 128 when that
 * is what fills the GPU; 128 x 64 when 128-wide tiles would leave a third
 * of it idle (1024^3: the tile cuBLAS picks there, bench/NOTES.md #54);
 * 64 x 64 when even those would, and 64-row tiles add some (128 x 4096 x
 * 4096, #55).  Too few tiles even then: split K into whole waves.  Returns
 * 0 (plan unchanged) for m <= 64 without Stream-K. */
int ckjit__gemm_plan_wgmma(const gemm_shape *q, int stream_k, gemm_plan *pl, int *auto_splits) {
  const int64_t m = q->m, n = q->n, k = q->k, batch = q->batch;
  const int sms = ckjit__gemm_sm_count(q->gpu), bk = 128 / (int)ckjit_dtype_size(q->g->ab_dtype);
  if (m <= 64 && !stream_k) return 0;
  const int64_t rows = ckjit__ceil_div(m, 128) * batch;
  int bm = 128, bn = n > 128 && rows * ckjit__ceil_div(n, 256) >= sms ? 256 : 128;
  if (bn == 128 && n > 64 && idle_third(rows * ckjit__ceil_div(n, 128), sms) && !stream_k) bn = 64;
  if (bn == 64 && idle_third(rows * ckjit__ceil_div(n, 64), sms) && ckjit__ceil_div(m, 64) * batch > rows &&
      q->single && ckjit__gemm_tma_ok(q->gpu, q->g))
    bm = 64;
  const int64_t tiles = ckjit__ceil_div(m, bm) * batch * ckjit__ceil_div(n, bn);
  pl->tile = (gemm_block_tile){bm, bn, bk, 0, 0, ckjit__gemm_wgmma_stages(bm, bn), 0};
  if (stream_k) {
    *auto_splits = CKJIT_GEMM_STREAM_K;
  } else if (tiles < sms) {
    const int s = wave_split(tiles, k, bk, sms), cap = ckjit__gemm_auto_split(m, n, k, tiles, bk, sms);
    *auto_splits = s < cap ? s : cap; /* auto_split's cap: partials under half the operand traffic */
  } else {
    *auto_splits = 1;
  }
  return 1;
}

ckjit_status ckjit__gemm_cluster_knob(int *cluster_m, int *cluster_n) {
  *cluster_m = *cluster_n = 1;
  const char *v = getenv("CKJIT_GEMM_CLUSTER");
  if (!v || !*v) return CKJIT_SUCCESS;
  if (strcmp(v, "1x1") && strcmp(v, "2x1") && strcmp(v, "1x2"))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "ckjit_gemm: CKJIT_GEMM_CLUSTER=%s: 1x1 (no clusters), 2x1 (two tiles along M "
                       "share B's tile) or 1x2 (two along N share A's)",
                       v);
  *cluster_m = v[0] - '0', *cluster_n = v[2] - '0';
  return CKJIT_SUCCESS;
}

void ckjit__gemm_use_128_rows(gemm_plan *pl) {
  pl->tile.bm = 128, pl->tile.stages = ckjit__gemm_wgmma_stages(128, pl->tile.bn);
}

/* tf32 on mma.sync: 256 x 128 x 32 f32 tiles, 128 x 128 when those leave
 * SMs idle, 64 x 128 for m <= 64; copies up to 16 bytes. */
int ckjit__gemm_plan_tf32(const gemm_shape *q, gemm_plan *pl, int *auto_splits) {
  const int64_t m = q->m, n = q->n, k = q->k, batch = q->batch;
  const int sms = ckjit__gemm_sm_count(q->gpu);
  const int64_t big = ckjit__ceil_div(m, 256) * ckjit__ceil_div(n, 128) * batch;
  pl->tile = ckjit__gemm_tf32_tiles[m <= 64 ? TF32_SMALL : big < sms ? TF32_MID : TF32_LARGE];
  pl->vec_a = q->vec_a > 4 ? 4 : q->vec_a, pl->vec_b = q->vec_b > 4 ? 4 : q->vec_b;
  const int64_t tiles = ckjit__ceil_div(m, pl->tile.bm) * ckjit__ceil_div(n, pl->tile.bn) * batch;
  *auto_splits = ckjit__gemm_auto_split(m, n, k, tiles, pl->tile.bk, sms);
  return 1;
}

/* mma.sync: the large tile, the small one for m <= 64, the decode tile for
 * m <= 16 (memory-bound: its warps along K keep more loads in flight, and
 * the split fills whole waves), the narrow one for operands whose copies are
 * under 8 bytes (their per-element loads cost registers). */
int ckjit__gemm_plan_mma(const gemm_shape *q, gemm_plan *pl, int *auto_splits) {
  const int64_t m = q->m, n = q->n, k = q->k, batch = q->batch;
  const int sms = ckjit__gemm_sm_count(q->gpu), max_smem = q->gpu->device.max_shared_bytes;
  pl->vec_a = q->vec_a, pl->vec_b = q->vec_b;
  gemm_block_tile *t = &pl->tile;
  *t = ckjit__gemm_block_tiles[q->vec_a < 4 || q->vec_b < 4 ? MMA_NARROW
                               : m <= 16                   ? MMA_DECODE
                               : m <= 64                   ? MMA_SMALL
                                                           : MMA_LARGE];
  const int64_t tiles = ckjit__ceil_div(m, t->bm) * ckjit__ceil_div(n, t->bn) * batch;
  if (t->bm == 16) {
    /* fewer stages where the GPU has less shared memory than the H100 */
    const int stage = (t->bm + t->bn) * t->bk * 2;
    while (t->stages > 2 && t->stages * stage > max_smem) t->stages--;
    const int64_t per_sm = max_smem > t->stages * stage ? max_smem / (t->stages * stage) : 1;
    *auto_splits = wave_split(tiles, k, t->bk, per_sm * sms);
    return 1;
  }
  *auto_splits = ckjit__gemm_auto_split(m, n, k, tiles, t->bk, sms);
  return 1;
}

/* SIMT: 128 x 128 tiles, 64 x 64 when those would leave SMs idle; loads
 * as wide as A's and B's alignment allows (up to 4 elements). */
int ckjit__gemm_plan_simt(const gemm_shape *q, gemm_plan *pl, int *auto_splits) {
  const int64_t m = q->m, n = q->n, k = q->k, batch = q->batch;
  const int sms = ckjit__gemm_sm_count(q->gpu);
  const int64_t big = ckjit__ceil_div(m, 128) * ckjit__ceil_div(n, 128) * batch;
  const int b = big >= sms ? 128 : 64;
  pl->tile = (gemm_block_tile){b, b, 8, 0, 0, 0, 0};
  pl->vec_a = q->vec_a, pl->vec_b = q->vec_b;
  if (pl->vec_a > 4) pl->vec_a = 4;
  if (pl->vec_b > 4) pl->vec_b = 4;
  const int64_t tiles = ckjit__ceil_div(m, b) * ckjit__ceil_div(n, b) * batch;
  *auto_splits = ckjit__gemm_auto_split(m, n, k, tiles, 64, sms);
  return 1;
}
