/* GEMM front-end: validation, pipeline and tile policy, split-K, launch. */
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dispatch.h"
#include "../base/error.h"
#include "gemm.h"
#include "../base/int_math.h"
#include "op_elementwise.h"

/* The kernels' gemm_problem and gemm_groups (kernel_src/gemm_common.h),
 * field for field. */
typedef struct gemm_problem {
  const void *a, *b, *c, *d0, *d1, *bias;
  void *d;
  float *partials;
  long long lda, ldb, ldc, ldd, ldd0, ldd1;
  long long stride_a, stride_b, stride_c, stride_d, stride_d0, stride_d1;
  long long m, n, k, batch, k_slice, splits, tile_begin, tiles_m, tiles_n;
  float alpha, beta;
} gemm_problem;

enum { MAX_GROUPS = 16 };
typedef struct gemm_groups {
  gemm_problem g[MAX_GROUPS];
  long long count;
} gemm_groups;

_Static_assert(sizeof(gemm_problem) == 240, "gemm_problem must match kernel_src/gemm_common.h");

/* gemm_reduce's argument in its Stream-K form (sk_args in gemm_reduce.cu). */
typedef struct sk_args {
  gemm_problem p;
  ckjit_streamk sk;
} sk_args;

/* The TMA kernel's argument (tma_args in kernel_src/gemm_wgmma.cu): tensor
 * maps (CUtensorMap: 128 bytes, 64-byte aligned) and the problem, or up to
 * TMA_GROUPS problems with theirs. */
typedef struct tma_one {
  _Alignas(64) unsigned char a[128];
  unsigned char b[128], d[128];
  gemm_problem p;
  ckjit_streamk sk;
} tma_one;

enum { TMA_GROUPS = 8 };
typedef struct tma_grouped {
  _Alignas(64) unsigned char a[TMA_GROUPS][128];
  unsigned char b[TMA_GROUPS][128];
  gemm_problem g[TMA_GROUPS];
  long long count;
} tma_grouped;
/* The same with D's maps (tma=2): over 4 KiB, which CUDA 12.1+ allows. */
typedef struct tma_grouped_stores {
  _Alignas(64) unsigned char a[TMA_GROUPS][128];
  unsigned char b[TMA_GROUPS][128], d[TMA_GROUPS][128];
  gemm_problem g[TMA_GROUPS];
  long long count;
} tma_grouped_stores;

_Static_assert(offsetof(tma_one, p) == 384 && offsetof(tma_one, sk) == 624, "tma_args layout");
_Static_assert(sizeof(tma_grouped) <= 4096, "kernel parameters are limited to 4 KiB before CUDA 12.1");
_Static_assert(sizeof(tma_grouped_stores) <= 32764, "kernel parameters are limited to 32764 bytes");
_Static_assert(offsetof(tma_grouped, g) == 2048 && offsetof(tma_grouped_stores, g) == 3072,
               "tma_args layout (grouped)");
_Static_assert(sizeof(gemm_groups) <= 4096, "kernel parameters are limited to 4 KiB");

void ckjit_gemm_desc_init(ckjit_gemm_desc *desc) {
  if (!desc) return;
  memset(desc, 0, sizeof *desc);
  desc->alpha = 1.0f;
  desc->batch = 1;
  desc->ab_dtype = CKJIT_BF16;
  desc->out_dtype = CKJIT_BF16;
  desc->a_order = CKJIT_ROW_MAJOR;
  desc->b_order = CKJIT_ROW_MAJOR;
  desc->activation = CKJIT_UNARY_IDENTITY;
}

/* ---- validation ----------------------------------------------------------------- */

static int float_dtype(ckjit_dtype t) { return t == CKJIT_F32 || t == CKJIT_F16 || t == CKJIT_BF16; }

/* A rows x cols matrix with leading dimension ld, given and addressable
 * (ckjit__check_matrix), in every one of `batch` entries `stride` elements
 * apart. */
static ckjit_status check_operand(const char *api, const char *name, const void *ptr, int64_t rows,
                                  int64_t cols, int64_t ld, int64_t stride, int64_t batch, size_t es) {
  if (rows == 0 || cols == 0) return CKJIT_SUCCESS;
  ckjit_status st = ckjit__check_matrix(api, name, ptr, rows, cols, ld, es);
  if (st || batch == 1) return st;
  if (stride < 0)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: the batch stride of %s is negative (%lld)",
                       api, name, (long long)stride);
  int64_t last;
  if (__builtin_mul_overflow(batch - 1, stride, &last) || __builtin_mul_overflow(last, (int64_t)es, &last) ||
      (uintptr_t)ptr + (uint64_t)last < (uintptr_t)ptr)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s's %lld batch entries overflow the address space",
                       api, name, (long long)batch);
  return ckjit__check_matrix(api, name, (const void *)((uintptr_t)ptr + (uint64_t)last), rows, cols, ld, es);
}

/* `g` is a valid descriptor; ckjit_gemm_grouped adds which problem fails. */
static ckjit_status check_desc(const char *api, const ckjit_gemm_desc *g) {
  if (!g) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: desc is NULL", api);
  if (g->m < 0 || g->n < 0 || g->k < 0)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: m, n, k = %lld, %lld, %lld; must be >= 0",
                       api, (long long)g->m, (long long)g->n, (long long)g->k);
  if (g->batch < 1)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: batch is %lld; must be >= 1", api,
                       (long long)g->batch);
  if (!float_dtype(g->ab_dtype))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: ab_dtype %s (%d) must be f32, f16 or bf16",
                       api, ckjit_dtype_name(g->ab_dtype), (int)g->ab_dtype);
  if (!float_dtype(g->out_dtype))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: out_dtype %s (%d) must be f32, f16 or bf16",
                       api, ckjit_dtype_name(g->out_dtype), (int)g->out_dtype);
  if ((g->a_order != CKJIT_ROW_MAJOR && g->a_order != CKJIT_COL_MAJOR) ||
      (g->b_order != CKJIT_ROW_MAJOR && g->b_order != CKJIT_COL_MAJOR))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: a_order %d / b_order %d must be CKJIT_ROW_MAJOR or CKJIT_COL_MAJOR", api,
                       (int)g->a_order, (int)g->b_order);
  if ((unsigned)g->bias_mode > CKJIT_BIAS_PER_COL)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: bias_mode %d is not a ckjit_bias_mode", api,
                       (int)g->bias_mode);
  if ((g->bias_mode != CKJIT_BIAS_NONE) != (g->bias != NULL))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: bias is %s but bias_mode is %d (a bias needs a mode and a mode a bias)",
                       api, g->bias ? "given" : "NULL", (int)g->bias_mode);
  if ((unsigned)g->activation > CKJIT_UNARY_SIGMOID)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: activation %d is not a ckjit_unary_op", api,
                       (int)g->activation);
  if (g->split_k < CKJIT_GEMM_STREAM_K)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: split_k is %d; must be >= 0 or CKJIT_GEMM_STREAM_K (-1)", api, g->split_k);
  if (g->allow_tf32 && g->ab_dtype != CKJIT_F32)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: allow_tf32 is for f32 inputs, not %s", api,
                       ckjit_dtype_name(g->ab_dtype));
  const int64_t m = g->m, n = g->n, k = g->k, b = g->batch;
  if (m == 0 || n == 0) return CKJIT_SUCCESS; /* nothing to write */
  const int a_row = g->a_order == CKJIT_ROW_MAJOR, b_row = g->b_order == CKJIT_ROW_MAJOR;
  const size_t ea = ckjit_dtype_size(g->ab_dtype), eo = ckjit_dtype_size(g->out_dtype);
  ckjit_status st;
  if ((st = check_operand(api, "a", g->a, a_row ? m : k, a_row ? k : m, g->lda, g->stride_a, b, ea)) ||
      (st = check_operand(api, "b", g->b, b_row ? k : n, b_row ? n : k, g->ldb, g->stride_b, b, ea)) ||
      (st = check_operand(api, "d", g->d, m, n, g->ldd, g->stride_d, b, eo)))
    return st;
  if (g->c == g->d && (g->ldc != g->ldd || g->stride_c != g->stride_d))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: c is d (in place) but ldc / stride_c (%lld / %lld) differ from ldd / "
                       "stride_d (%lld / %lld)",
                       api, (long long)g->ldc, (long long)g->stride_c, (long long)g->ldd,
                       (long long)g->stride_d);
  if ((g->c && (st = check_operand(api, "c", g->c, m, n, g->ldc, g->stride_c, b, eo))) ||
      (g->d0 && (st = check_operand(api, "d0", g->d0, m, n, g->ldd0, g->stride_d0, b, eo))) ||
      (g->d1 && (st = check_operand(api, "d1", g->d1, m, n, g->ldd1, g->stride_d1, b, eo))))
    return st;
  const void *const operands[] = {g->a, g->b, g->c, g->d, g->bias, g->d0, g->d1};
  static const char *const operand_names[] = {"a", "b", "c", "d", "bias", "d0", "d1"};
  return ckjit__check_pointers(api, 7, operands, operand_names);
}

/* ---- tile policy ------------------------------------------------------------------ */

/* Split-K factor: when the tiles cannot fill the multiprocessors, enough
 * slices for about one wave, each at least four K steps deep, and no more
 * than keeps the f32 partials (written and read back: 8 bytes per output
 * per slice) under half the operand traffic. */
static int auto_split(int64_t m, int64_t n, int64_t k, int64_t tiles, int bk, int sms) {
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
 * cheaper by rounding (128 x 4032 x 4096: 126 tiles on 132 SMs measured
 * 31.7 us split 2, 25.4 us unsplit; bench/NOTES.md #58). */
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

/* mma.sync: the large tile, the small one for m <= 64, the decode tile for
 * m <= 16 (memory-bound: its warps along K keep more loads in flight, and
 * the split fills whole waves), the narrow one for operands whose copies are
 * under 8 bytes (their per-element loads cost registers). */
static void pick_mma(int64_t m, int64_t n, int64_t k, int64_t batch, int sms, int max_smem,
                     int vec_a, int vec_b, gemm_block_tile *t, int *splits) {
  *t = ckjit__gemm_block_tiles[vec_a < 4 || vec_b < 4 ? MMA_NARROW
                             : m <= 16              ? MMA_DECODE
                             : m <= 64              ? MMA_SMALL
                                                    : MMA_LARGE];
  const int64_t tiles = ckjit__ceil_div(m, t->bm) * ckjit__ceil_div(n, t->bn) * batch;
  if (t->bm == 16) {
    /* fewer stages where the GPU has less shared memory than the H100 */
    const int stage = (t->bm + t->bn) * t->bk * 2;
    while (t->stages > 2 && t->stages * stage > max_smem) t->stages--;
    const int64_t per_sm = max_smem > t->stages * stage ? max_smem / (t->stages * stage) : 1;
    *splits = wave_split(tiles, k, t->bk, per_sm * sms);
    return;
  }
  *splits = auto_split(m, n, k, tiles, t->bk, sms);
}

/* K per slice, a whole number of K steps; then the number of non-empty slices. */
static void slice_k(int64_t k, int bk, int want, int64_t *k_slice, int64_t *splits) {
  if (want <= 1 || k == 0) {
    *k_slice = k > 0 ? k : 1, *splits = 1;
    return;
  }
  int64_t per = ckjit__ceil_div(ckjit__ceil_div(k, want), bk) * bk;
  *k_slice = per;
  *splits = ckjit__ceil_div(k, per);
}

/* ---- launch ------------------------------------------------------------------------ */

enum { PIPE_SIMT, PIPE_MMA, PIPE_WGMMA, PIPE_MFMA, PIPE_TF32 };

typedef struct gemm_plan {
  int pipe;           /* PIPE_* */
  gemm_block_tile tile; /* block tile (bm, bn, bk) of every pipeline; warps and stages: mma, tf32, wgmma */
  int vec_a, vec_b;
} gemm_plan;

static int dtype_value(ckjit_dtype t) { return ckjit__dtype_param_value(t); }

static void fill_epilogue(int32_t *v, const ckjit_gemm_desc *g, int bias, int act, int c, int d0,
                          int d1) {
  v[bias] = (int32_t)g->bias_mode;
  v[act] = (int32_t)g->activation;
  v[c] = g->c != NULL && g->beta != 0.0f; /* beta 0 never reads C (BLAS) */
  v[d0] = g->d0 != NULL;
  v[d1] = g->d1 != NULL;
}

/* The main kernel's spec: with split, partials only (no epilogue). */
static void main_spec(const gemm_plan *pl, const ckjit_gemm_desc *g, int split, int grouped,
                      ckjit_spec *s) {
  memset(s, 0, sizeof *s);
  int32_t *v = s->value;
  const int dt = dtype_value(g->ab_dtype), out = dtype_value(g->out_dtype);
  const int a_col = g->a_order == CKJIT_COL_MAJOR, b_col = g->b_order == CKJIT_COL_MAJOR;
  if (pl->pipe == PIPE_MFMA) {
    s->family = CKJIT_FAMILY_GEMM_MFMA;
    v[GF_DTYPE] = dt, v[GF_OUT] = out, v[GF_A] = a_col, v[GF_B] = b_col;
    if (!split) fill_epilogue(v, g, GF_BIAS, GF_ACT, GF_C, GF_D0, GF_D1);
    v[GF_SPLIT] = split, v[GF_GROUPED] = grouped;
  } else if (pl->pipe == PIPE_WGMMA) {
    s->family = CKJIT_FAMILY_GEMM_WGMMA;
    v[GW_DTYPE] = dt, v[GW_OUT] = out, v[GW_A] = a_col, v[GW_B] = b_col;
    v[GW_BM] = pl->tile.bm, v[GW_BN] = pl->tile.bn, v[GW_STAGES] = pl->tile.stages;
    if (!split) fill_epilogue(v, g, GW_BIAS, GW_ACT, GW_C, GW_D0, GW_D1);
    v[GW_SPLIT] = split, v[GW_GROUPED] = grouped;
  } else if (pl->pipe == PIPE_TF32) {
    s->family = CKJIT_FAMILY_GEMM_TF32;
    v[GT_OUT] = out, v[GT_A] = a_col, v[GT_B] = b_col;
    v[GT_BM] = pl->tile.bm, v[GT_BN] = pl->tile.bn, v[GT_BK] = pl->tile.bk;
    v[GT_WM] = pl->tile.wm, v[GT_WN] = pl->tile.wn, v[GT_STAGES] = pl->tile.stages;
    v[GT_VEC_A] = pl->vec_a, v[GT_VEC_B] = pl->vec_b;
    if (!split) fill_epilogue(v, g, GT_BIAS, GT_ACT, GT_C, GT_D0, GT_D1);
    v[GT_SPLIT] = split, v[GT_GROUPED] = grouped;
  } else if (pl->pipe == PIPE_MMA) {
    s->family = CKJIT_FAMILY_GEMM_MMA;
    v[GM_DTYPE] = dt, v[GM_OUT] = out, v[GM_A] = a_col, v[GM_B] = b_col;
    v[GM_BM] = pl->tile.bm, v[GM_BN] = pl->tile.bn, v[GM_BK] = pl->tile.bk;
    v[GM_WM] = pl->tile.wm, v[GM_WN] = pl->tile.wn, v[GM_STAGES] = pl->tile.stages;
    v[GM_VEC_A] = pl->vec_a, v[GM_VEC_B] = pl->vec_b, v[GM_WK] = pl->tile.wk ? pl->tile.wk : 1;
    if (!split) fill_epilogue(v, g, GM_BIAS, GM_ACT, GM_C, GM_D0, GM_D1);
    v[GM_SPLIT] = split, v[GM_GROUPED] = grouped;
  } else {
    s->family = CKJIT_FAMILY_GEMM_SIMT;
    v[GS_DTYPE] = dt, v[GS_OUT] = out, v[GS_A] = a_col, v[GS_B] = b_col;
    v[GS_BM] = pl->tile.bm, v[GS_BN] = pl->tile.bn, v[GS_BK] = pl->tile.bk;
    v[GS_VEC] = pl->vec_a < pl->vec_b ? pl->vec_a : pl->vec_b;
    if (v[GS_VEC] > 4) v[GS_VEC] = 4;
    if (!split) fill_epilogue(v, g, GS_BIAS, GS_ACT, GS_C, GS_D0, GS_D1);
    v[GS_SPLIT] = split, v[GS_GROUPED] = grouped;
  }
}

static void problem_of(const ckjit_gemm_desc *g, const gemm_plan *pl, gemm_problem *p) {
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

static ckjit_status launch(ckjit_spec *spec, int64_t blocks, void **args, void *stream) {
  ckjit_runtime *r;
  ckjit_kernel *k;
  ckjit_status st = ckjit__kernel_get(spec, &r, &k);
  if (st) return st;
  unsigned threads, smem;
  ckjit__gemm_launch_shape(spec, &threads, &smem);
  if ((int)smem > r->device.max_shared_bytes)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                       "ckjit_gemm: the tile needs %u bytes of shared memory; the GPU allows %d", smem,
                       r->device.max_shared_bytes);
  if (blocks > 0x7fffffff)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "ckjit_gemm: %lld tiles are too many for one launch",
                       (long long)blocks);
  unsigned grid[3] = {(unsigned)blocks, 1, 1}, block[3] = {threads, 1, 1};
  return ckjit__kernel_launch(r, k, grid, block, smem, stream, args);
}

/* Widest copies (elements, up to 16 bytes) A's and B's pointers, leading
 * dimensions and batch strides allow. */
static void operand_vecs(const ckjit_gemm_desc *g, int *vec_a, int *vec_b) {
  const int64_t sa[2] = {g->lda, g->stride_a}, sb[2] = {g->ldb, g->stride_b};
  const void *pa[1] = {g->a}, *pb[1] = {g->b};
  const size_t es = ckjit_dtype_size(g->ab_dtype);
  const int max = (int)(16 / es);
  *vec_a = ckjit__pick_vec(es, pa, 1, sa, g->batch > 1 && g->stride_a ? 2 : 1, max);
  *vec_b = ckjit__pick_vec(es, pb, 1, sb, g->batch > 1 && g->stride_b ? 2 : 1, max);
}

/* Whether A and B of `g` can be read through TMA descriptors: a driver that
 * makes them, no broadcast batch (a zero stride), k > 0, and extents whose
 * box coordinates fit 32 bits.  (16-byte alignment is the plan's vec 8.) */
static int tma_ok(const ckjit_runtime *rt, const ckjit_gemm_desc *g) {
  const int64_t limit = INT32_MAX - 512;
  return rt->device.tensor_map_encode && g->k > 0 && g->m <= limit && g->n <= limit &&
         g->k <= limit && g->batch <= limit &&
         !(g->batch > 1 && (g->stride_a == 0 || g->stride_b == 0));
}

/* The device's multiprocessors (1 when it reports none). */
static int sm_count(const ckjit_runtime *rt) {
  return rt->device.multiprocessors > 0 ? rt->device.multiprocessors : 1;
}

/* Whether `tiles` blocks would leave over a third of `sms` multiprocessors idle. */
static int idle_third(int64_t tiles, int sms) { return 3 * tiles < 2 * (int64_t)sms; }

/* The wgmma tile for an m x n x k problem, K steps of one 128-byte row (64
 * 16-bit or 32 f32 elements): 128 x 256 tiles; 128 x 128 when that
 * is what fills the GPU; 128 x 64 when 128-wide tiles would leave a third
 * of it idle (1024^3: the tile cuBLAS picks there, bench/NOTES.md #54);
 * 64 x 64 when even those would, and 64-row tiles add some (128 x 4096 x
 * 4096, #55).  Too few tiles even then: split K into whole waves.  Returns
 * 0 (plan unchanged) for m <= 64 without Stream-K. */
static int plan_wgmma(ckjit_runtime *rt, const ckjit_gemm_desc *g, int64_t m, int64_t n, int64_t k,
                      int64_t batch, int single, int stream_k, gemm_plan *pl, int *auto_splits) {
  const int sms = sm_count(rt), bk = 128 / (int)ckjit_dtype_size(g->ab_dtype);
  if (m <= 64 && !stream_k) return 0;
  const int64_t rows = ckjit__ceil_div(m, 128) * batch;
  int bm = 128, bn = n > 128 && rows * ckjit__ceil_div(n, 256) >= sms ? 256 : 128;
  if (bn == 128 && n > 64 && idle_third(rows * ckjit__ceil_div(n, 128), sms) && !stream_k) bn = 64;
  if (bn == 64 && idle_third(rows * ckjit__ceil_div(n, 64), sms) && ckjit__ceil_div(m, 64) * batch > rows &&
      single && tma_ok(rt, g))
    bm = 64;
  const int64_t tiles = ckjit__ceil_div(m, bm) * batch * ckjit__ceil_div(n, bn);
  pl->pipe = PIPE_WGMMA;
  pl->tile = (gemm_block_tile){bm, bn, bk, 0, 0, ckjit__gemm_wgmma_stages(bm, bn), 0};
  if (stream_k) {
    *auto_splits = CKJIT_GEMM_STREAM_K;
  } else if (tiles < sms) {
    const int s = wave_split(tiles, k, bk, sms), cap = auto_split(m, n, k, tiles, bk, sms);
    *auto_splits = s < cap ? s : cap; /* auto_split's cap: partials under half the operand traffic */
  } else {
    *auto_splits = 1;
  }
  return 1;
}

/* tf32 on mma.sync: 256 x 128 x 32 f32 tiles, 128 x 128 when those leave
 * SMs idle, 64 x 128 for m <= 64; copies up to 16 bytes. */
static void plan_tf32_mma(int64_t m, int64_t n, int64_t k, int64_t batch, int vec_a, int vec_b, int sms,
                          gemm_plan *pl, int *auto_splits) {
  pl->pipe = PIPE_TF32;
  const int64_t big = ckjit__ceil_div(m, 256) * ckjit__ceil_div(n, 128) * batch;
  pl->tile = ckjit__gemm_tf32_tiles[m <= 64 ? TF32_SMALL : big < sms ? TF32_MID : TF32_LARGE];
  pl->vec_a = vec_a > 4 ? 4 : vec_a, pl->vec_b = vec_b > 4 ? 4 : vec_b;
  const int64_t tiles = ckjit__ceil_div(m, pl->tile.bm) * ckjit__ceil_div(n, pl->tile.bn) * batch;
  *auto_splits = auto_split(m, n, k, tiles, pl->tile.bk, sms);
}

/* Pipeline: wgmma on 9.0 devices for f16/bf16 with 16-byte aligned
 * operands and m > 64 (its tiles are 128 or 64 rows), or any m when
 * Stream-K is asked for (`single`: one problem, not grouped, which also
 * allows the 64-row tiles; both need TMA); mma.sync on other
 * sm_80+ devices and the other f16/bf16 cases; MFMA on AMD GPUs that have
 * it; for f32 with allow_tf32, wgmma tf32 (one problem, m > 64, TMA) or
 * tf32 mma.sync on sm_80+; SIMT for other f32
 * and elsewhere.  Then the pipeline's tile and the
 * automatic split-K factor (CKJIT_GEMM_STREAM_K for Stream-K). */
static void plan_for(ckjit_runtime *rt, const ckjit_gemm_desc *g, int64_t m, int64_t n, int64_t k,
                     int64_t batch, int vec_a, int vec_b, int single, gemm_plan *pl,
                     int *auto_splits) {
  memset(pl, 0, sizeof *pl);
  const unsigned units = rt->device.matrix_units;
  const int sms = sm_count(rt);
  pl->pipe = (units & CKJIT_MATRIX_MMA_SYNC) && g->ab_dtype != CKJIT_F32 ? PIPE_MMA : PIPE_SIMT;
  if ((g->ab_dtype == CKJIT_F16 && (units & CKJIT_MATRIX_MFMA_F16)) ||
      (g->ab_dtype == CKJIT_BF16 && (units & CKJIT_MATRIX_MFMA_BF16))) {
    pl->pipe = PIPE_MFMA;
    pl->tile = (gemm_block_tile){128, 128, 32, 0, 0, 0, 0};
    *auto_splits = auto_split(m, n, k, ckjit__ceil_div(m, 128) * ckjit__ceil_div(n, 128) * batch, 32, sms);
    return;
  }
  if (g->ab_dtype == CKJIT_F32 && g->allow_tf32 && (units & CKJIT_MATRIX_MMA_SYNC)) {
    /* wgmma for one problem with m > 64 (any m for Stream-K) read
     * through TMA; it reads K-major operands only, so run_wgmma_tf32
     * transposes the others first; a K-major one must be 16-byte aligned.
     * mma.sync otherwise. */
    const int a_fit = g->a_order == CKJIT_COL_MAJOR || vec_a == 4;
    const int b_fit = g->b_order == CKJIT_ROW_MAJOR || vec_b == 4;
    const int stream_k = g->split_k == CKJIT_GEMM_STREAM_K;
    if ((units & CKJIT_MATRIX_WGMMA) && single && tma_ok(rt, g) && a_fit && b_fit &&
        plan_wgmma(rt, g, m, n, k, batch, single, stream_k, pl, auto_splits))
      return;
    plan_tf32_mma(m, n, k, batch, vec_a, vec_b, sms, pl, auto_splits);
    return;
  }
  if (pl->pipe == PIPE_SIMT) {
    /* 128 x 128 tiles, 64 x 64 when those would leave SMs idle; loads as
     * wide as A's and B's alignment allows (up to 4 elements). */
    const int64_t big = ckjit__ceil_div(m, 128) * ckjit__ceil_div(n, 128) * batch;
    const int b = big >= sms ? 128 : 64;
    pl->tile = (gemm_block_tile){b, b, 8, 0, 0, 0, 0};
    pl->vec_a = vec_a, pl->vec_b = vec_b;
    if (pl->vec_a > 4) pl->vec_a = 4;
    if (pl->vec_b > 4) pl->vec_b = 4;
    const int64_t tiles = ckjit__ceil_div(m, b) * ckjit__ceil_div(n, b) * batch;
    *auto_splits = auto_split(m, n, k, tiles, 64, sms);
    return;
  }
  pl->vec_a = vec_a, pl->vec_b = vec_b;
  pick_mma(m, n, k, batch, sms, rt->device.max_shared_bytes, pl->vec_a, pl->vec_b, &pl->tile, auto_splits);
  if ((units & CKJIT_MATRIX_WGMMA) && pl->vec_a == 8 && pl->vec_b == 8) {
    /* Stream-K only when asked (or chosen by CKJIT_TUNE): on the H100 it
     * measured slower than whole tiles and split-K on the under-filled
     * shapes it is meant for (bench/NOTES.md #49). */
    const int stream_k = single && g->split_k == CKJIT_GEMM_STREAM_K && tma_ok(rt, g);
    plan_wgmma(rt, g, m, n, k, batch, single, stream_k, pl, auto_splits);
  }
}

/* TMA descriptors for the wgmma pipeline, 3-D (the batch is the outer
 * dimension), in the boxes its stages take: 128 bytes of K (64 16-bit or
 * 32 f32 elements) x BM rows of a K-contiguous A (x BN of B), or 64 x 64
 * panels of an M/N-contiguous (16-bit) one; and (when map_d is given) D's, in boxes of 128 bytes x 128 rows.
 * For a `g` that passed tma_ok.  Returns the tma parameter: 1 (A and B) or
 * 2 (A, B and D: D's rows and batch entries 16-byte aligned), or 0 when
 * the driver refused A's or B's descriptor (with its status and message). */
static int encode_maps(ckjit_runtime *rt, const ckjit_gemm_desc *g, const gemm_plan *pl,
                       unsigned char *map_a, unsigned char *map_b, unsigned char *map_d) {
  const int a_k = g->a_order == CKJIT_ROW_MAJOR, b_k = g->b_order == CKJIT_COL_MAJOR;
  const unsigned long long m = (unsigned long long)g->m, n = (unsigned long long)g->n,
                           k = (unsigned long long)g->k, b = (unsigned long long)g->batch;
  const unsigned long long es = ckjit_dtype_size(g->ab_dtype);
  const unsigned long long lda = (unsigned long long)g->lda * es, ldb = (unsigned long long)g->ldb * es;
  const unsigned long long sa = g->batch > 1 ? (unsigned long long)g->stride_a * es : lda * (a_k ? m : k);
  const unsigned long long sb = g->batch > 1 ? (unsigned long long)g->stride_b * es : ldb * (b_k ? n : k);
  const unsigned long long dims_a[3] = {a_k ? k : m, a_k ? m : k, b}, str_a[2] = {lda, sa};
  const unsigned long long dims_b[3] = {b_k ? k : n, b_k ? n : k, b}, str_b[2] = {ldb, sb};
  /* A K step is one 128-byte row: 64 16-bit or 32 f32 elements. */
  const unsigned bk = (unsigned)(128 / es);
  const unsigned box_a[3] = {a_k ? bk : 64u, a_k ? (unsigned)pl->tile.bm : bk, 1};
  const unsigned box_b[3] = {b_k ? bk : 64u, b_k ? (unsigned)pl->tile.bn : bk, 1};
  if (rt->device.tensor_map_encode(map_a, g->ab_dtype, 3, g->a, dims_a, str_a, box_a) ||
      rt->device.tensor_map_encode(map_b, g->ab_dtype, 3, g->b, dims_b, str_b, box_b))
    return 0;
  /* D through TMA stores: 16-byte aligned rows and batch entries. */
  const unsigned long long es_d = ckjit_dtype_size(g->out_dtype), ldd = (unsigned long long)g->ldd * es_d;
  const unsigned long long sd = g->batch > 1 ? (unsigned long long)g->stride_d * es_d : ldd * m;
  if (!map_d || (uintptr_t)g->d % 16 || ldd % 16 || sd % 16 || sd == 0) return 1;
  const unsigned long long dims_d[3] = {n, m, b}, str_d[2] = {ldd, sd};
  const unsigned box_d[3] = {(unsigned)(128 / es_d), 128, 1};
  return rt->device.tensor_map_encode(map_d, g->out_dtype, 3, g->d, dims_d, str_d, box_d) ? 1 : 2;
}

/* The second kernel: the fixed-order sum of the partials with the
 * epilogue; Stream-K's form when `sk` is given. */
static ckjit_status launch_reduce(ckjit_runtime *rt, const ckjit_gemm_desc *g, const gemm_plan *pl,
                                  gemm_problem *p, const ckjit_streamk *sk, void *stream) {
  ckjit_spec red;
  memset(&red, 0, sizeof red);
  red.family = CKJIT_FAMILY_GEMM_REDUCE;
  red.value[GR_OUT] = dtype_value(g->out_dtype);
  fill_epilogue(red.value, g, GR_BIAS, GR_ACT, GR_C, GR_D0, GR_D1);
  if (sk) { /* 8 blocks of 16 rows per Stream-K tile */
    red.value[GR_VEC] = 4, red.value[GR_BN] = pl->tile.bn;
    sk_args x = {*p, *sk};
    void *args[] = {&x};
    return launch(&red, sk->sk_tiles * 8, args, stream);
  }
  red.value[GR_VEC] = g->n % 4 == 0 ? 4 : g->n % 2 == 0 ? 2 : 1;
  const int64_t vecs = g->batch * g->m * (g->n / red.value[GR_VEC]);
  int64_t blocks = ckjit__ceil_div(vecs, 256);
  const int64_t cap = 8 * (int64_t)sm_count(rt);
  if (blocks > cap) blocks = cap;
  void *args[] = {p};
  return launch(&red, blocks, args, stream);
}

/* The wgmma plan back to 128-row tiles (the 64-row ones read only
 * through TMA and have no Stream-K slots). */
static void use_128_rows(gemm_plan *pl) {
  pl->tile.bm = 128, pl->tile.stages = ckjit__gemm_wgmma_stages(128, pl->tile.bn);
}

static ckjit_status run_plan(ckjit_runtime *rt, const ckjit_gemm_desc *g, const gemm_plan *plan,
                             int want, void *stream);

/* `g` (f32, allow_tf32) on the tf32 mma.sync pipeline: where the wgmma one
 * cannot take it after all (no tensor map, no scratch for a transpose). */
static ckjit_status run_tf32_mma(ckjit_runtime *rt, const ckjit_gemm_desc *g, void *stream) {
  gemm_plan pl;
  int vec_a, vec_b, splits;
  operand_vecs(g, &vec_a, &vec_b);
  plan_tf32_mma(g->m, g->n, g->k, g->batch, vec_a, vec_b, sm_count(rt), &pl, &splits);
  return run_plan(rt, g, &pl, g->split_k == 0 ? splits : g->split_k, stream);
}

/* Runs `g` with plan `pl` and `want` split-K slices (CKJIT_GEMM_STREAM_K:
 * Stream-K, where the pipeline reads through TMA; otherwise the automatic
 * split). */
static ckjit_status run_plan(ckjit_runtime *rt, const ckjit_gemm_desc *g, const gemm_plan *plan,
                             int want, void *stream) {
  gemm_plan pl = *plan;
  ckjit_status st;
  gemm_problem p;
  ckjit_spec spec;
  const int64_t sms = sm_count(rt);
  /* wgmma reads its operands (and, unsplit, writes D) through TMA
   * descriptors when it can; 0 also when the driver refused: the cp.async
   * pipeline then. */
  tma_one x;
  memset(&x.sk, 0, sizeof x.sk);
  if (pl.pipe == PIPE_WGMMA && pl.tile.bm == 64 && want == CKJIT_GEMM_STREAM_K) use_128_rows(&pl);
  /* A refusal is not the call's error (the cp.async pipeline serves it):
   * logged at debug level, not left in ckjit_last_error(). */
  const int quiet = ckjit__error_quiet(1);
  const int tma = pl.pipe == PIPE_WGMMA && tma_ok(rt, g)
                      ? encode_maps(rt, g, &pl, x.a, x.b, want <= 1 && pl.tile.bm == 128 ? x.d : NULL)
                      : 0;
  ckjit__error_quiet(quiet);
  if (pl.pipe == PIPE_WGMMA && !tma && g->ab_dtype == CKJIT_F32)
    return run_tf32_mma(rt, g, stream); /* tf32 wgmma reads only through TMA */
  if (pl.pipe == PIPE_WGMMA && pl.tile.bm == 64 && !tma) use_128_rows(&pl);
  problem_of(g, &pl, &p);
  const int64_t tiles = p.tiles_m * p.tiles_n * g->batch;
  if (want == CKJIT_GEMM_STREAM_K && !tma) want = auto_split(g->m, g->n, g->k, tiles, pl.tile.bk, (int)sms);
  void *args_one[] = {&p}, *args_tma[] = {&x};
  void **args = tma ? args_tma : args_one;
  int64_t k_slice, splits;
  slice_k(g->k, pl.tile.bk, want, &k_slice, &splits);
  main_spec(&pl, g, splits > 1, 0, &spec);
  if (tma) spec.value[GW_TMA] = splits > 1 ? 1 : tma; /* 1 for 64-row tiles: no D map */
  if (tma && want == CKJIT_GEMM_STREAM_K) spec.value[GW_STREAMK] = 1;
  int64_t grid = tiles * splits;
  void *scratch = NULL;
  size_t bytes = 0;
  if (want == CKJIT_GEMM_STREAM_K) {
    /* Stream-K: whole tiles through the epilogue, runs into partial slots. */
    grid = ckjit__gemm_plan_streamk(tiles, ckjit__ceil_div(g->k, pl.tile.bk), sms, &x.sk);
    bytes = (size_t)x.sk.sk_tiles * (size_t)x.sk.slots * (size_t)(pl.tile.bm * pl.tile.bn) * sizeof(float);
  } else {
    x.sk.dp_tiles = grid; /* every unit (tile, K slice) whole */
    /* Split-K: partials, then their fixed-order sum with the epilogue. */
    if (splits > 1) bytes = (size_t)splits * (size_t)g->batch * (size_t)g->m * (size_t)g->n * sizeof(float);
  }
  /* The TMA pipeline is persistent: one block per multiprocessor at most. */
  if (tma && grid > sms) grid = sms;
  if (bytes) {
    if ((st = ckjit__scratch_alloc(rt, bytes, stream, &scratch))) {
      /* No stream-ordered allocation here (HIP before 5.3): the same
       * result without splitting. */
      if (st == CKJIT_ERROR_UNSUPPORTED) return run_plan(rt, g, plan, 1, stream);
      return st;
    }
    p.partials = scratch, p.k_slice = k_slice, p.splits = splits;
  }
  x.p = p;
  st = launch(&spec, grid, args, stream);
  if (!st && bytes) st = launch_reduce(rt, g, &pl, &p, want == CKJIT_GEMM_STREAM_K ? &x.sk : NULL, stream);
  ckjit_status fst = scratch ? ckjit__scratch_free(rt, scratch, stream) : CKJIT_SUCCESS;
  return st ? st : fst;
}

/* ---- CKJIT_TUNE ---------------------------------------------------------------------- */

static int ceil_log2(int64_t x) {
  int r = 0;
  while (((int64_t)1 << r) < x) r++;
  return r;
}

/* Shape class: arch, dtypes, orders, batched or not, alignment class, and
 * m, n, k rounded up to powers of two. */
static void class_of(const ckjit_runtime *rt, const ckjit_gemm_desc *g, const gemm_plan *pl,
                     char *out, size_t len) {
  snprintf(out, len, "%s/%s/%s/%c%c/m%dn%dk%d/b%d/v%d%d", rt->device.arch,
           ckjit_dtype_name(g->ab_dtype), ckjit_dtype_name(g->out_dtype),
           g->a_order == CKJIT_ROW_MAJOR ? 'r' : 'c', g->b_order == CKJIT_ROW_MAJOR ? 'r' : 'c',
           ceil_log2(g->m), ceil_log2(g->n), ceil_log2(g->k), g->batch > 1, pl->vec_a, pl->vec_b);
}

/* A recorded choice into the plan, whole or (a choice this build does not
 * make: an older or edited record) not at all.  wgmma: `tile` is BN, and
 * the stage count tells the 64 x 64 tiles (bm 64, no Stream-K) from the
 * 128 x 64 ones. */
static void apply_choice(const gemm_choice *c, gemm_plan *pl, int *splits) {
  const int bm = c->tile == 64 && c->stages == ckjit__gemm_wgmma_stages(64, 64) ? 64 : 128;
  if (c->pipe == PIPE_WGMMA && (c->tile == 64 || c->tile == 128 || c->tile == 256) &&
      c->stages == ckjit__gemm_wgmma_stages(bm, c->tile) && !(bm == 64 && c->splits < 1)) {
    pl->pipe = PIPE_WGMMA;
    pl->tile = (gemm_block_tile){bm, c->tile, 64, 0, 0, c->stages, 0};
  } else if (c->pipe == PIPE_MMA && c->tile < MMA_TILES && c->splits >= 1) {
    pl->pipe = PIPE_MMA;
    pl->tile = ckjit__gemm_block_tiles[c->tile];
  } else {
    return;
  }
  *splits = c->splits;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Times each candidate into a scratch D, so the caller's C (even when it
 * is D) is only read: one run to compile and warm up, then the best of
 * three trials of TRIAL_RUNS back-to-back runs (one synchronization per
 * trial, so launch and sync latency do not swamp a kernel of a few
 * microseconds).  The automatic plan goes first, and another candidate
 * must beat the best so far by 3% to replace it: timing noise must not
 * record a slower choice.  Returns 1 with the winner in *best. */
enum { TRIAL_RUNS = 5 };
static int measure(ckjit_runtime *rt, const ckjit_gemm_desc *g, const gemm_plan *base, int auto_splits,
                   void *stream, gemm_choice *best) {
  gemm_choice cand[16];
  int n = 0;
  if (base->pipe == PIPE_WGMMA) {
    cand[n++] = (gemm_choice){PIPE_WGMMA, base->tile.bn, base->tile.stages, auto_splits};
  } else {
    for (int t = 0; t < MMA_TILES && n == 0; t++)
      if (!memcmp(&ckjit__gemm_block_tiles[t], &base->tile, sizeof base->tile))
        cand[n++] = (gemm_choice){PIPE_MMA, t, 0, auto_splits};
  }
  /* Then the automatic split, none, twice as many slices, and (wgmma) Stream-K. */
  const int twice = auto_splits > 1 ? (auto_splits * 2 <= 32 ? auto_splits * 2 : 32) : 2;
  const int splits[3] = {auto_splits, 1, base->pipe == PIPE_WGMMA ? CKJIT_GEMM_STREAM_K : twice};
  for (int si = 0; si < 3; si++) {
    if (si > 0 && splits[si] == auto_splits) continue;
    gemm_choice more[4];
    int k = 0;
    if (base->pipe == PIPE_WGMMA) {
      more[k++] = (gemm_choice){PIPE_WGMMA, 256, ckjit__gemm_wgmma_stages(128, 256), splits[si]};
      more[k++] = (gemm_choice){PIPE_WGMMA, 128, ckjit__gemm_wgmma_stages(128, 128), splits[si]};
      more[k++] = (gemm_choice){PIPE_WGMMA, 64, ckjit__gemm_wgmma_stages(128, 64), splits[si]};
      if (base->tile.bm == 64 && splits[si] != CKJIT_GEMM_STREAM_K) /* the policy's 64 x 64 tiles */
        more[k++] = (gemm_choice){PIPE_WGMMA, 64, ckjit__gemm_wgmma_stages(64, 64), splits[si]};
    } else {
      for (int t = 0; t < MMA_TILES; t++)
        if ((t == MMA_NARROW) == (base->vec_a < 4 || base->vec_b < 4))
          more[k++] = (gemm_choice){PIPE_MMA, t, 0, splits[si]};
    }
    for (int j = 0; j < k && n < 16; j++)
      if (!(n > 0 && !memcmp(&more[j], &cand[0], sizeof more[j]))) cand[n++] = more[j];
  }
  const size_t es = ckjit_dtype_size(g->out_dtype);
  const size_t bytes = (size_t)g->batch * (size_t)g->m * (size_t)g->n * es;
  void *scratch;
  if (ckjit__scratch_alloc(rt, bytes, stream, &scratch)) return 0;
  ckjit_gemm_desc t = *g;
  t.d = scratch, t.ldd = g->n, t.stride_d = g->m * g->n;
  double best_s = 0;
  for (int i = 0; i < n; i++) {
    gemm_plan pl = *base;
    int want = auto_splits;
    apply_choice(&cand[i], &pl, &want);
    if (run_plan(rt, &t, &pl, want, stream) || ckjit_synchronize(stream)) continue;
    double s = 1e30;
    int ok = 1;
    for (int r = 0; r < 3 && ok; r++) {
      const double t0 = now_s();
      for (int k = 0; k < TRIAL_RUNS && ok; k++) ok = run_plan(rt, &t, &pl, want, stream) == CKJIT_SUCCESS;
      ok = ok && ckjit_synchronize(stream) == CKJIT_SUCCESS;
      const double dt = (now_s() - t0) / TRIAL_RUNS;
      if (ok && dt < s) s = dt;
    }
    if (ok && (best_s == 0 || s < 0.97 * best_s)) best_s = s, *best = cand[i];
  }
  ckjit__scratch_free(rt, scratch, stream);
  ckjit_synchronize(stream);
  return best_s > 0;
}

/* The recorded winner for g's shape class, measuring it first under
 * CKJIT_TUNE=1.  Leaves the plan alone for explicit split_k, SIMT, MFMA,
 * tf32 (either pipeline), or when nothing is known. */
static void tune(ckjit_runtime *rt, const ckjit_gemm_desc *g, gemm_plan *pl, int *splits,
                 void *stream) {
  static _Atomic int mode_plus_2; /* CKJIT_TUNE, read on the first call (0: not yet) */
  int mode = atomic_load_explicit(&mode_plus_2, memory_order_relaxed) - 2;
  if (mode == -2) atomic_store(&mode_plus_2, (mode = ckjit__gemm_tune_mode()) + 2);
  if (mode < 0 || g->split_k != 0 || pl->pipe == PIPE_SIMT || pl->pipe == PIPE_MFMA ||
      g->ab_dtype == CKJIT_F32)
    return;
  const char *dir = rt->disk_enabled && rt->disk.usable ? rt->disk.dir : NULL;
  /* Without recorded winners and without tuning, the call costs no more. */
  if (mode == 0 && !ckjit__gemm_tune_any(dir)) return;
  char cls[128];
  class_of(rt, g, pl, cls, sizeof cls);
  gemm_choice c;
  if (ckjit__gemm_tune_lookup(dir, cls, &c)) {
    apply_choice(&c, pl, splits);
    return;
  }
  if (mode <= 0) return;
  /* A candidate that fails (or no scratch for the timing) is not the
   * call's error: the call itself runs after. */
  const int quiet = ckjit__error_quiet(1);
  const int measured = measure(rt, g, pl, *splits, stream, &c);
  ckjit__error_quiet(quiet);
  if (measured) {
    ckjit__gemm_tune_store(rt->disk_enabled && rt->disk.writable ? dir : NULL, cls, &c);
    apply_choice(&c, pl, splits);
  }
}

/* tf32 on wgmma, which reads K-major operands only: a column-major A or
 * a row-major B is first transposed into scratch, in rows of k rounded up
 * to 4 elements (16-byte aligned for TMA).  Without scratch, mma.sync. */
static ckjit_status run_wgmma_tf32(ckjit_runtime *rt, const ckjit_gemm_desc *g, const gemm_plan *pl,
                                   int want, void *stream) {
  const int ta = g->a_order == CKJIT_COL_MAJOR, tb = g->b_order == CKJIT_ROW_MAJOR;
  const int64_t ld = (g->k + 3) / 4 * 4, per_a = g->m * ld, per_b = g->n * ld;
  const size_t a_bytes = ta ? (size_t)(g->batch * per_a) * 4 : 0;
  const size_t b_bytes = tb ? (size_t)(g->batch * per_b) * 4 : 0;
  if (!a_bytes && !b_bytes) return run_plan(rt, g, pl, want, stream);
  void *scratch = NULL;
  const int quiet = ckjit__error_quiet(1);
  ckjit_status st = ckjit__scratch_alloc(rt, a_bytes + b_bytes, stream, &scratch);
  ckjit__error_quiet(quiet);
  if (st) return run_tf32_mma(rt, g, stream);
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
  if (!st) st = run_plan(rt, &t, pl, want, stream);
  const ckjit_status fst = ckjit__scratch_free(rt, scratch, stream);
  return st ? st : fst;
}

static ckjit_status run_one(ckjit_runtime *rt, const ckjit_gemm_desc *g, void *stream) {
  gemm_plan pl;
  int auto_splits = 1, vec_a, vec_b;
  operand_vecs(g, &vec_a, &vec_b);
  plan_for(rt, g, g->m, g->n, g->k, g->batch, vec_a, vec_b, 1, &pl, &auto_splits);
  tune(rt, g, &pl, &auto_splits, stream);
  const int want = g->split_k == 0 ? auto_splits : g->split_k;
  if (pl.pipe == PIPE_WGMMA && g->ab_dtype == CKJIT_F32) return run_wgmma_tf32(rt, g, &pl, want, stream);
  return run_plan(rt, g, &pl, want, stream);
}

ckjit_status ckjit_gemm(const ckjit_gemm_desc *desc, void *stream) {
  ckjit_status st = check_desc("ckjit_gemm", desc);
  if (st) return st;
  if (desc->m == 0 || desc->n == 0) return CKJIT_SUCCESS;
  ckjit_runtime *rt;
  if ((st = ckjit__runtime_device(&rt))) return st;
  return run_one(rt, desc, stream);
}

/* Whether the kernel may take D's maps: its 5 KB argument needs CUDA
 * 12.1+, which NVRTC 13 implies (its cubins need a 13.0 driver).  Asked
 * once: the compiler's identity is fixed for the process. */
static int large_arguments_ok(void) {
  static atomic_int known; /* 0 unknown, 1 no, 2 yes */
  int v = atomic_load_explicit(&known, memory_order_relaxed);
  if (!v) {
    const ckjit_compiler *c;
    const int quiet = ckjit__error_quiet(1);
    v = ckjit__compiler_get(CKJIT_BACKEND_CUDA, &c) || c->major < 13 ? 1 : 2;
    ckjit__error_quiet(quiet);
    atomic_store_explicit(&known, v, memory_order_relaxed);
  }
  return v == 2;
}

/* Whether every problem's D can go out through TMA stores (16-byte
 * aligned pointer and rows; empty problems do not launch) and the kernel
 * may take D's maps. */
static int grouped_stores_ok(const ckjit_gemm_desc *descs, int count) {
  for (int i = 0; i < count; i++) {
    const ckjit_gemm_desc *g = &descs[i];
    if (g->m && g->n && ((uintptr_t)g->d % 16 || (g->ldd * (int64_t)ckjit_dtype_size(g->out_dtype)) % 16))
      return 0;
  }
  return large_arguments_ok();
}

/* Grouped on the persistent TMA pipeline: TMA_GROUPS problems a launch,
 * each with its tensor maps (and D's with `stores`, spec tma=2).  *done:
 * how many leading descs it ran, all of them unless the driver refused a
 * tensor map (quietly: the caller runs the rest, from the first problem of
 * the launch the refusal fell in, so every problem runs exactly once). */
static ckjit_status grouped_tma(ckjit_runtime *rt, const ckjit_gemm_desc *descs, int count,
                                const gemm_plan *pl, ckjit_spec *spec, int stores, void *stream,
                                int *done) {
  /* The kernel argument itself: 4 KiB, 5 KB with D's maps. */
  union {
    tma_grouped loads;
    tma_grouped_stores stores;
  } x;
  unsigned char(*map_a)[128] = stores ? x.stores.a : x.loads.a;
  unsigned char(*map_b)[128] = stores ? x.stores.b : x.loads.b;
  gemm_problem *g = stores ? x.stores.g : x.loads.g;
  long long *n = stores ? &x.stores.count : &x.loads.count;
  spec->value[GW_TMA] = stores ? 2 : 1;
  const int64_t sms = sm_count(rt);
  ckjit_status st = CKJIT_SUCCESS;
  for (int i = 0; i < count && !st;) {
    const int first = i;
    int64_t tiles = 0;
    *n = 0;
    for (; i < count && *n < TMA_GROUPS; i++) {
      if (descs[i].m == 0 || descs[i].n == 0) continue;
      const int j = (int)(*n)++;
      const int quiet = ckjit__error_quiet(1);
      const int made = encode_maps(rt, &descs[i], pl, map_a[j], map_b[j], stores ? x.stores.d[j] : NULL);
      ckjit__error_quiet(quiet);
      if (made != (stores ? 2 : 1)) {
        *done = first;
        return CKJIT_SUCCESS;
      }
      problem_of(&descs[i], pl, &g[j]);
      g[j].tile_begin = tiles;
      tiles += g[j].tiles_m * g[j].tiles_n;
    }
    void *args[] = {&x};
    if (*n) st = launch(spec, tiles < sms ? tiles : sms, args, stream);
  }
  *done = count;
  return st;
}

ckjit_status ckjit_gemm_grouped(const ckjit_gemm_desc *descs, int count, void *stream) {
  const char *api = "ckjit_gemm_grouped";
  if (!descs) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: descs is NULL", api);
  if (count < 1)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: count is %d; must be >= 1", api, count);
  const ckjit_gemm_desc *g0 = &descs[0];
  int64_t max_m = 0, max_n = 0, max_k = 0;
  for (int i = 0; i < count; i++) {
    const ckjit_gemm_desc *g = &descs[i];
    ckjit_status st = check_desc(api, g);
    if (st) {
      ckjit__error_append(" (problem %d)", i);
      return st;
    }
    if (g->batch != 1 || g->split_k > 1 || g->split_k < 0)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                         "%s: problem %d has batch %lld and split_k %d; grouped problems take batch 1 "
                         "and split_k 0 or 1",
                         api, i, (long long)g->batch, g->split_k);
    if (g->ab_dtype != g0->ab_dtype || g->out_dtype != g0->out_dtype || g->a_order != g0->a_order ||
        g->b_order != g0->b_order || g->activation != g0->activation ||
        g->bias_mode != g0->bias_mode || g->allow_tf32 != g0->allow_tf32 ||
        !g->d0 != !g0->d0 || !g->d1 != !g0->d1)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                         "%s: problem %d differs from problem 0 in dtypes, orders, activation, bias "
                         "mode, allow_tf32 or which of d0 / d1 are given",
                         api, i);
    if (g->m > max_m) max_m = g->m;
    if (g->n > max_n) max_n = g->n;
    if (g->k > max_k) max_k = g->k;
  }
  if (max_m == 0 || max_n == 0) return CKJIT_SUCCESS;
  ckjit_runtime *rt;
  ckjit_status st = ckjit__runtime_device(&rt);
  if (st) return st;
  /* One tile for all, from the largest extents and the narrowest alignment. */
  int vec_a = 8, vec_b = 8, unused;
  for (int i = 0; i < count; i++) {
    int va, vb;
    operand_vecs(&descs[i], &va, &vb);
    if (va < vec_a) vec_a = va;
    if (vb < vec_b) vec_b = vb;
  }
  gemm_plan pl;
  plan_for(rt, g0, max_m, max_n, max_k, 1, vec_a, vec_b, 0, &pl, &unused);
  /* The kernel's epilogue: a beta term if any problem has one (the others
   * pass C = NULL). */
  ckjit_gemm_desc kind = *g0;
  kind.c = NULL;
  for (int i = 0; i < count; i++)
    if (descs[i].c && descs[i].beta != 0.0f) kind.c = descs[i].c, kind.beta = 1.0f;
  ckjit_spec spec;
  main_spec(&pl, &kind, 0, 1, &spec);
  int tma = pl.pipe == PIPE_WGMMA;
  for (int i = 0; i < count && tma; i++) tma = descs[i].m == 0 || descs[i].n == 0 || tma_ok(rt, &descs[i]);
  int done = 0;
  if (tma && grouped_stores_ok(descs, count)) {
    /* D through TMA stores; a refused map sends the rest to loads only. */
    st = grouped_tma(rt, descs, count, &pl, &spec, 1, stream, &done);
    if (st || done == count) return st;
  }
  if (tma) {
    int rest = 0;
    st = grouped_tma(rt, descs + done, count - done, &pl, &spec, 0, stream, &rest);
    done += rest;
    if (st || done == count) return st;
    spec.value[GW_TMA] = 0; /* the rest on the cp.async pipeline: the same spec without TMA */
  }
  /* Up to MAX_GROUPS non-empty problems per launch. */
  gemm_groups gs;
  for (int i = done; i < count && !st;) {
    int64_t tiles = 0;
    gs.count = 0;
    for (; i < count && gs.count < MAX_GROUPS; i++) {
      if (descs[i].m == 0 || descs[i].n == 0) continue;
      gemm_problem *p = &gs.g[gs.count++];
      problem_of(&descs[i], &pl, p);
      p->tile_begin = tiles;
      tiles += p->tiles_m * p->tiles_n;
    }
    void *args[] = {&gs};
    if (gs.count) st = launch(&spec, tiles, args, stream);
  }
  return st;
}
