/* GEMM kernel families: gemm_mma (NVIDIA tensor cores, sm_80+),
 * gemm_wgmma (Hopper tensor cores), gemm_mfma (AMD matrix cores), gemm_simt
 * (portable), gemm_tf32 (f32 on tensor cores, sm_80+) and gemm_reduce
 * (split-K sum + epilogue).  Parameters, their
 * checks and the default (prewarm) set. */
#include <string.h>

#include "abi/gemm_args.h"
#include "base/error.h"
#include "base/int_math.h"
#include "gemm.h"
#include "runtime/arch.h"

CKJIT_ENUM_TABLES(a_order, CKJIT_GEMM_A_ORDERS)
CKJIT_ENUM_TABLES(b_order, CKJIT_GEMM_B_ORDERS)
CKJIT_ENUM_TABLES(bias, CKJIT_GEMM_BIASES)
CKJIT_ENUM_TABLES(act, CKJIT_GEMM_ACTIVATIONS)
/* The kernels' constants are the public enums' values: the front-end
 * passes ckjit_gemm_desc's bias_mode and activation through. */
_Static_assert(BIAS_NONE == (int)CKJIT_BIAS_NONE && BIAS_ROW == (int)CKJIT_BIAS_PER_ROW &&
                   BIAS_COL == (int)CKJIT_BIAS_PER_COL && CKJIT_GEMM_BIAS_COUNT == 3,
               "CKJIT_GEMM_BIASES: in the order of ckjit_bias_mode");
_Static_assert(ACT_IDENTITY == (int)CKJIT_UNARY_IDENTITY && ACT_RELU == (int)CKJIT_UNARY_RELU &&
                   ACT_GELU_TANH == (int)CKJIT_UNARY_GELU_TANH &&
                   ACT_GELU_ERF == (int)CKJIT_UNARY_GELU_ERF && ACT_SILU == (int)CKJIT_UNARY_SILU &&
                   ACT_SIGMOID == (int)CKJIT_UNARY_SIGMOID && CKJIT_GEMM_ACT_COUNT == 6,
               "CKJIT_GEMM_ACTIVATIONS: in the order of ckjit_unary_op");
_Static_assert(A_ROW == (int)CKJIT_ROW_MAJOR && A_COL == (int)CKJIT_COL_MAJOR &&
                   B_ROW == (int)CKJIT_ROW_MAJOR && B_COL == (int)CKJIT_COL_MAJOR,
               "CKJIT_GEMM_A_ORDERS / _B_ORDERS: in the order of ckjit_order");

#define DTYPE_BF16 2
#define OUT_PARAM(name) CKJIT_DTYPE_PARAM_NAMED(name, DTYPE_BF16)
/* The kernels ask "is K the contiguous dimension" (A_KCONTIG, B_KCONTIG). */
#define ORDER_PARAMS(P)                                                                        \
  [P##_A] = {.name = "a", .macro = "A_ORDER", .names = a_order_names, .symbols = a_order_symbols}, \
  [P##_B] = {.name = "b", .macro = "B_ORDER", .names = b_order_names, .symbols = b_order_symbols}
#define EPILOGUE_PARAMS(P)                                              \
  [P##_BIAS] = CKJIT_ENUM_PARAM("bias", bias, 0),                       \
  [P##_ACT] = CKJIT_ENUM_PARAM("act", act, 0),                          \
  [P##_C] = {.name = "c", .macro = "HAS_C", .max = 1},                  \
  [P##_D0] = {.name = "d0", .macro = "HAS_D0", .max = 1},               \
  [P##_D1] = {.name = "d1", .macro = "HAS_D1", .max = 1}

static const ckjit_param_desc mma_params[GM_COUNT] = {
    [GM_DTYPE] = OUT_PARAM("dtype"), /* f16 or bf16 */
    [GM_OUT] = OUT_PARAM("out"),
    ORDER_PARAMS(GM),
    [GM_BM] = CKJIT_INT_PARAM("bm", 16, 256, 128),
    [GM_BN] = CKJIT_INT_PARAM("bn", 16, 256, 128),
    [GM_BK] = CKJIT_INT_PARAM("bk", 16, 256, 32),
    [GM_WM] = CKJIT_INT_PARAM("wm", 1, 8, 2),
    [GM_WN] = CKJIT_INT_PARAM("wn", 1, 8, 2),
    [GM_STAGES] = CKJIT_INT_PARAM("stages", 2, 6, 4),
    [GM_VEC_A] = CKJIT_INT_PARAM("vec_a", 1, 8, 8),
    [GM_VEC_B] = CKJIT_INT_PARAM("vec_b", 1, 8, 8),
    EPILOGUE_PARAMS(GM),
    [GM_SPLIT] = CKJIT_INT_PARAM("split", 0, 1, 0),
    [GM_GROUPED] = CKJIT_INT_PARAM("grouped", 0, 1, 0),
    /* warps along K: each sums its share of a K step; their sums meet in
     * shared memory at the end (decode shapes, where the tile is thin) */
    [GM_WK] = CKJIT_INT_PARAM("wk", 1, 8, 1),
};

static const ckjit_param_desc wgmma_params[GW_COUNT] = {
    [GW_DTYPE] = OUT_PARAM("dtype"), /* f16 or bf16; f32 read as tf32 (b=col, tma >= 1; a=col from registers) */
    [GW_OUT] = OUT_PARAM("out"),
    ORDER_PARAMS(GW),
    [GW_BN] = CKJIT_INT_PARAM("bn", 64, 256, 256),
    [GW_STAGES] = CKJIT_INT_PARAM("stages", 3, CKJIT_GEMM_WGMMA_MAX_STAGES, 4),
    EPILOGUE_PARAMS(GW),
    [GW_SPLIT] = CKJIT_INT_PARAM("split", 0, 1, 0),
    [GW_GROUPED] = CKJIT_INT_PARAM("grouped", 0, 1, 0),
    /* 1: loads by the tensor memory accelerator; 2: stores of D too (grouped:
     * a 5 KB kernel argument, NVRTC 13 and a 13.0 driver) */
    [GW_TMA] = CKJIT_INT_PARAM("tma", 0, 2, 1),
    /* 64: one consumer warpgroup on 64 rows (tma=1, one problem) */
    [GW_BM] = CKJIT_INT_PARAM("bm", 64, 128, 128),
    /* 1: Stream-K runs after the whole tiles (bm=128, tma>=1, one problem,
     * unsplit); the kernels without it skip that code */
    [GW_STREAMK] = CKJIT_INT_PARAM("streamk", 0, 1, 0),
    /* 1: C, D, D0 and D1 are column-major (tf32's D^T = B^T A^T for a
     * row-major B; tma <= 1, split=0, streamk=0, one problem) */
    [GW_DCOL] = {.name = "dcol", .macro = "D_COL", .max = 1},
    /* blocks of a cluster along M (sharing B's tile) and along N (sharing
     * A's), multicast (tma >= 1, one problem, streamk=0; clusters of two) */
    [GW_CLUSTER_M] = CKJIT_INT_PARAM("cluster_m", 1, 2, 1),
    [GW_CLUSTER_N] = CKJIT_INT_PARAM("cluster_n", 1, 2, 1),
};

static const ckjit_param_desc mfma_params[GF_COUNT] = {
    [GF_DTYPE] = OUT_PARAM("dtype"), /* f16, or bf16 on gfx90a and later */
    [GF_OUT] = OUT_PARAM("out"),
    ORDER_PARAMS(GF),
    EPILOGUE_PARAMS(GF),
    [GF_SPLIT] = CKJIT_INT_PARAM("split", 0, 1, 0),
    [GF_GROUPED] = CKJIT_INT_PARAM("grouped", 0, 1, 0),
};

static const ckjit_param_desc simt_params[GS_COUNT] = {
    [GS_DTYPE] = CKJIT_DTYPE_PARAM,
    [GS_OUT] = CKJIT_DTYPE_PARAM_NAMED("out", 0),
    ORDER_PARAMS(GS),
    [GS_BM] = CKJIT_INT_PARAM("bm", 16, 256, 128),
    [GS_BN] = CKJIT_INT_PARAM("bn", 16, 256, 128),
    [GS_BK] = CKJIT_INT_PARAM("bk", 4, 64, 8),
    [GS_VEC] = CKJIT_INT_PARAM("vec", 1, 4, 4),
    EPILOGUE_PARAMS(GS),
    [GS_SPLIT] = CKJIT_INT_PARAM("split", 0, 1, 0),
    [GS_GROUPED] = CKJIT_INT_PARAM("grouped", 0, 1, 0),
};

static const ckjit_param_desc reduce_params[GR_COUNT] = {
    [GR_OUT] = OUT_PARAM("out"),
    [GR_VEC] = CKJIT_INT_PARAM("vec", 1, 4, 4),
    EPILOGUE_PARAMS(GR),
    [GR_BN] = {.name = "bn", .macro = "SK_BN", .max = 256}, /* 0: split-K; 64, 128 or 256: Stream-K */
};

/* A split=1 kernel writes raw f32 partials: its epilogue is gemm_reduce's.
 * `bias` indexes the first of the five epilogue parameters (EPILOGUE_PARAMS). */
_Static_assert(GM_D1 == GM_BIAS + 4 && GW_D1 == GW_BIAS + 4 && GF_D1 == GF_BIAS + 4 &&
                   GS_D1 == GS_BIAS + 4 && GT_D1 == GT_BIAS + 4 && GR_D1 == GR_BIAS + 4,
               "the epilogue parameters are consecutive");
static ckjit_status check_split_epilogue(const char *family, const int32_t *v, int split, int bias) {
  for (int i = bias; i < bias + 5; i++)
    if (v[split] && v[i])
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                         "spec: %s split=1 writes partials; its epilogue is gemm_reduce's", family);
  return CKJIT_SUCCESS;
}

static int max3(int a, int b, int c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

/* Stages, then in the same bytes the K warps' f32 sums and the staged
 * epilogue's copy of the tile (abi/gemm_args.h). */
static int mma_smem(const ckjit_spec *s) {
  const int32_t *v = s->value;
  const int stages = v[GM_STAGES] * (v[GM_BM] + v[GM_BN]) * v[GM_BK] * 2;
  const int sums = (v[GM_WK] - 1) * v[GM_BM] * v[GM_BN] * 4;
  return max3(stages, sums, CKJIT_GEMM_STAGED_BYTES(v[GM_BM], v[GM_BN]));
}

static ckjit_status mma_check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  if (v[GM_DTYPE] == 0) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_mma dtype must be f16 or bf16");
  if (v[GM_BM] % (16 * v[GM_WM]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_mma bm=%d must be a multiple of 16 * wm=%d", v[GM_BM], v[GM_WM]);
  if (v[GM_BN] % (16 * v[GM_WN]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_mma bn=%d must be a multiple of 16 * wn=%d", v[GM_BN], v[GM_WN]);
  if (!ckjit__is_pow2(v[GM_BK]) || !ckjit__is_pow2(v[GM_WK]) || v[GM_BK] % (16 * v[GM_WK]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: gemm_mma bk=%d and wk=%d must be powers of two, bk a multiple of 16 * wk",
                       v[GM_BK], v[GM_WK]);
  if (!ckjit__is_pow2(v[GM_BM]) || !ckjit__is_pow2(v[GM_BN]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_mma bm=%d and bn=%d must be powers of two", v[GM_BM], v[GM_BN]);
  if (v[GM_WM] * v[GM_WN] * v[GM_WK] > 8)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_mma wm=%d x wn=%d x wk=%d: at most 8 warps",
                       v[GM_WM], v[GM_WN], v[GM_WK]);
  if (!ckjit__is_pow2(v[GM_VEC_A]) || !ckjit__is_pow2(v[GM_VEC_B]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_mma vec_a=%d and vec_b=%d must be 1, 2, 4 or 8", v[GM_VEC_A],
               v[GM_VEC_B]);
  if (mma_smem(s) > 227 * 1024)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_mma needs %d bytes of shared memory (at most %d)",
               mma_smem(s), 227 * 1024);
  return check_split_epilogue("gemm_mma", v, GM_SPLIT, GM_BIAS);
}

/* Stages of BM + BN rows of 128 bytes of K (64 16-bit or 32 f32 elements),
 * 1 KiB to align the swizzled atoms, with tma=2 the 32 KiB buffer of the
 * TMA-store epilogue. */
static int wgmma_smem(const ckjit_spec *s) {
  const int32_t *v = s->value;
  return v[GW_STAGES] * (v[GW_BM] + v[GW_BN]) * 128 + 1024 + (v[GW_TMA] == 2 ? 32768 : 0);
}

static ckjit_status wgmma_check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  if (v[GW_DTYPE] == 0 && (v[GW_B] != B_COL || v[GW_TMA] == 0))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: gemm_wgmma dtype=f32 (tf32) reads B K-major through TMA only: "
                       "b=col, tma=1 or 2");
  if (v[GW_DCOL] && (v[GW_TMA] == 2 || v[GW_SPLIT] || v[GW_STREAMK] || v[GW_GROUPED]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: gemm_wgmma dcol=1 stores D column-major itself: tma=0 or 1, split=0, "
                       "streamk=0, grouped=0");
  if (v[GW_BN] != 64 && v[GW_BN] != 128 && v[GW_BN] != 256)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_wgmma bn=%d must be 64, 128 or 256", v[GW_BN]);
  if (v[GW_BM] != 64 && v[GW_BM] != 128)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_wgmma bm=%d must be 64 or 128", v[GW_BM]);
  if (v[GW_BM] == 64 && (v[GW_TMA] != 1 || v[GW_GROUPED]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: gemm_wgmma bm=64 takes tma=1 and one problem (grouped=0)");
  if (wgmma_smem(s) > 227 * 1024)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_wgmma needs %d bytes of shared memory (at most %d)",
                       wgmma_smem(s), 227 * 1024);
  if (v[GW_TMA] == 2 && v[GW_SPLIT])
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_wgmma tma=2 stores D; split=1 stores partials");
  if (v[GW_STREAMK] && (v[GW_TMA] == 0 || v[GW_BM] != 128 || v[GW_GROUPED] || v[GW_SPLIT]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: gemm_wgmma streamk=1 takes tma=1 or 2, bm=128, one problem and split=0");
  if (v[GW_CLUSTER_M] * v[GW_CLUSTER_N] > 1 &&
      (v[GW_TMA] == 0 || v[GW_GROUPED] || v[GW_STREAMK] || v[GW_CLUSTER_M] * v[GW_CLUSTER_N] > 2))
    /* four-block clusters: a persistent grid of them needs the driver's
     * count of co-resident clusters, which the launch does not ask yet */
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: gemm_wgmma clusters (cluster_m=%d, cluster_n=%d) take tma=1 or 2, one problem "
                       "(grouped=0), streamk=0, and two blocks at most",
                       v[GW_CLUSTER_M], v[GW_CLUSTER_N]);
  return check_split_epilogue("gemm_wgmma", v, GW_SPLIT, GW_BIAS);
}

static ckjit_status mfma_check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  if (v[GF_DTYPE] == 0)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_mfma dtype must be f16 or bf16");
  return check_split_epilogue("gemm_mfma", v, GF_SPLIT, GF_BIAS);
}

static ckjit_status simt_check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  const int bm = v[GS_BM], bn = v[GS_BN], bk = v[GS_BK], vec = v[GS_VEC];
  const int threads = (bm / 8) * (bn / 8);
  if (bm % 16 || bn % 16)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: gemm_simt bm=%d and bn=%d must be multiples of 16 (8 x 8 per thread)", bm, bn);
  if (threads < 32 || threads > 1024)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_simt has %d threads per block (32 .. 1024)",
                       threads);
  if (!ckjit__is_pow2(vec) || bk % vec || (bm * bk) % (vec * threads) || (bn * bk) % (vec * threads))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: gemm_simt vec=%d must divide bk=%d and share the tiles evenly among %d threads",
                       vec, bk, threads);
  return check_split_epilogue("gemm_simt", v, GS_SPLIT, GS_BIAS);
}

static ckjit_status reduce_check(const ckjit_spec *s) {
  if (!ckjit__is_pow2(s->value[GR_VEC]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_reduce vec=%d must be 1, 2 or 4", s->value[GR_VEC]);
  if (s->value[GR_BN] != 0 && s->value[GR_BN] != 64 && s->value[GR_BN] != 128 && s->value[GR_BN] != 256)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: gemm_reduce bn=%d must be 0 (split-K) or a wgmma tile's 64, 128 or 256 (Stream-K)",
                       s->value[GR_BN]);
  return CKJIT_SUCCESS;
}

/* ---- default (prewarm) sets ----------------------------------------------------- */
const gemm_block_tile ckjit__gemm_block_tiles[MMA_TILES] = {
    [MMA_LARGE] = {.bm = 128, .bn = 128, .bk = 32, .wm = 2, .wn = 2, .stages = 4},
    [MMA_SMALL] = {.bm = 64, .bn = 128, .bk = 32, .wm = 2, .wn = 2, .stages = 4},
    [MMA_DECODE] = {.bm = 16, .bn = 64, .bk = 256, .wm = 1, .wn = 2, .stages = 4, .wk = 4},
    [MMA_NARROW] = {.bm = 64, .bn = 64, .bk = 32, .wm = 2, .wn = 2, .stages = 3},
};

/* gemm_mma: f16 and bf16 (output in the same type), every order pair, at
 * the three tiles the policy picks for large, small-m and decode shapes
 * (aligned operands; decode as split-K partials), plus the fused bias +
 * gelu_tanh and the f32-output forms of the bf16 row-major large tile. */
enum { N_TILES = MMA_DECODE + 1, N_MMA_MAIN = 2 * 4 * N_TILES, N_MMA_DEFAULTS = N_MMA_MAIN + 2 };

static void mma_fill(ckjit_spec *out, int dtype, int a, int b, const gemm_block_tile *t) {
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_GEMM_MMA;
  int32_t *v = out->value;
  v[GM_DTYPE] = dtype, v[GM_OUT] = dtype, v[GM_A] = a, v[GM_B] = b;
  v[GM_BM] = t->bm, v[GM_BN] = t->bn, v[GM_BK] = t->bk, v[GM_WM] = t->wm, v[GM_WN] = t->wn;
  v[GM_STAGES] = t->stages, v[GM_VEC_A] = 8, v[GM_VEC_B] = 8, v[GM_WK] = t->wk ? t->wk : 1;
}

static int mma_default(size_t i, ckjit_spec *out) {
  if (i >= N_MMA_DEFAULTS) return 0;
  if (i < N_MMA_MAIN) {
    const int tile = (int)(i % N_TILES), orders = (int)(i / N_TILES) % 4, dtype = 1 + (int)(i / (4 * N_TILES));
    mma_fill(out, dtype, orders / 2, orders % 2, &ckjit__gemm_block_tiles[tile]);
    out->value[GM_SPLIT] = tile == MMA_DECODE;
    return 1;
  }
  mma_fill(out, DTYPE_BF16, A_ROW, B_ROW, &ckjit__gemm_block_tiles[MMA_LARGE]);
  if (i == N_MMA_MAIN) out->value[GM_BIAS] = BIAS_COL, out->value[GM_ACT] = ACT_GELU_TANH;
  else out->value[GM_OUT] = 0; /* f32 output */
  return 1;
}

/* gemm_wgmma: f16 and bf16 (output in the same type), every order pair,
 * the 128 x 256 tile; plus bf16 row-major with the fused bias + gelu_tanh
 * and with f32 output; f16 and bf16 row-major at 128 x 64 (mid-size
 * problems, 1024^3); grouped bf16 row-major with TMA stores (its 5 KB
 * argument); and tf32 (f32) with B column-major: A row-major, A
 * column-major (from registers), and the latter with a column-major D (a
 * row-major B's swapped problem, run.c). */
static int wgmma_default(size_t i, ckjit_spec *out) {
  if (i >= 16) return 0;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_GEMM_WGMMA;
  int32_t *v = out->value;
  v[GW_DTYPE] = v[GW_OUT] = i < 8 ? 1 + (int)(i / 4) : DTYPE_BF16;
  v[GW_A] = i < 8 ? (int)(i % 4) / 2 : A_ROW, v[GW_B] = i < 8 ? (int)(i % 4) % 2 : B_ROW;
  v[GW_BM] = 128, v[GW_BN] = 256, v[GW_STAGES] = ckjit__gemm_wgmma_stages(128, 256), v[GW_TMA] = 2;
  v[GW_CLUSTER_M] = v[GW_CLUSTER_N] = 1;
  if (i == 8) v[GW_BIAS] = BIAS_COL, v[GW_ACT] = ACT_GELU_TANH;
  if (i == 9) v[GW_OUT] = 0;
  if (i == 10 || i == 11) {
    v[GW_DTYPE] = v[GW_OUT] = 1 + (int)(i - 10);
    v[GW_BN] = 64, v[GW_STAGES] = ckjit__gemm_wgmma_stages(128, 64);
  }
  if (i == 12) v[GW_DTYPE] = v[GW_OUT] = 0, v[GW_B] = B_COL;
  if (i == 13) v[GW_GROUPED] = 1;
  if (i >= 14) v[GW_DTYPE] = v[GW_OUT] = 0, v[GW_A] = A_COL, v[GW_B] = B_COL;
  if (i == 15) v[GW_TMA] = 1, v[GW_DCOL] = 1;
  return 1;
}

/* gemm_mfma: f16 and bf16 (output in the same type), every order pair. */
static int mfma_default(size_t i, ckjit_spec *out) {
  if (i >= 8) return 0;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_GEMM_MFMA;
  int32_t *v = out->value;
  v[GF_DTYPE] = v[GF_OUT] = 1 + (int)(i / 4);
  v[GF_A] = (int)(i % 4) / 2, v[GF_B] = (int)(i % 4) % 2;
  return 1;
}

/* gemm_simt: f32 in every order pair, and its split-K form for row-major. */
static int simt_default(size_t i, ckjit_spec *out) {
  if (i > 4) return 0;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_GEMM_SIMT;
  int32_t *v = out->value;
  v[GS_BM] = 128, v[GS_BN] = 128, v[GS_BK] = 8, v[GS_VEC] = 4;
  v[GS_A] = (int)(i % 4) / 2, v[GS_B] = (int)(i % 4) % 2, v[GS_SPLIT] = i == 4;
  return 1;
}

/* gemm_reduce: each output dtype, no epilogue, 16-byte reads; split-K and
 * Stream-K (BN 128). */
static int reduce_default(size_t i, ckjit_spec *out) {
  if (i >= 6) return 0;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_GEMM_REDUCE;
  out->value[GR_OUT] = (int)(i % 3), out->value[GR_VEC] = 4;
  out->value[GR_BN] = i < 3 ? 0 : 128; /* then the Stream-K form of the 128-wide tile */
  return 1;
}

const ckjit_family ckjit__family_gemm_mma = {
    .name = "gemm_mma",
    .source = "gemm/mma.cu",
    .kernel = "ckjit_gemm_mma",
    .n_params = GM_COUNT,
    .params = mma_params,
    .check = mma_check,
    .default_spec = mma_default,
    .targets = ckjit__arch_has_mma_sync,
    .targets_text = "sm_80 and newer (mma.sync)",
};

const ckjit_family ckjit__family_gemm_wgmma = {
    .name = "gemm_wgmma",
    .source = "gemm/wgmma.cu",
    .kernel = "ckjit_gemm_wgmma",
    .n_params = GW_COUNT,
    .params = wgmma_params,
    .check = wgmma_check,
    .default_spec = wgmma_default,
    .targets = ckjit__arch_has_wgmma,
    .targets_text = "sm_90 / sm_90a (wgmma)",
};

const ckjit_family ckjit__family_gemm_mfma = {
    .name = "gemm_mfma",
    .source = "gemm/mfma.cu",
    .kernel = "ckjit_gemm_mfma",
    .n_params = GF_COUNT,
    .params = mfma_params,
    .check = mfma_check,
    .default_spec = mfma_default,
    .targets = ckjit__arch_has_mfma,
    .targets_text = "gfx908, gfx90a, gfx940, gfx941 and gfx942 (MFMA)",
};

const ckjit_family ckjit__family_gemm_simt = {
    .name = "gemm_simt",
    .source = "gemm/simt.cu",
    .kernel = "ckjit_gemm_simt",
    .n_params = GS_COUNT,
    .params = simt_params,
    .check = simt_check,
    .default_spec = simt_default,
};

const ckjit_family ckjit__family_gemm_reduce = {
    .name = "gemm_reduce",
    .source = "gemm/reduce.cu",
    .kernel = "ckjit_gemm_reduce",
    .n_params = GR_COUNT,
    .params = reduce_params,
    .check = reduce_check,
    .default_spec = reduce_default,
};

/* ---- gemm_tf32 (tensor cores, sm_80+, f32 inputs rounded to tf32) ------------------ */
static const ckjit_param_desc tf32_params[GT_COUNT] = {
    [GT_OUT] = CKJIT_DTYPE_PARAM_NAMED("out", 0), /* f32 by default */
    ORDER_PARAMS(GT),
    [GT_BM] = CKJIT_INT_PARAM("bm", 32, 256, 128),
    [GT_BN] = CKJIT_INT_PARAM("bn", 32, 256, 128),
    [GT_BK] = CKJIT_INT_PARAM("bk", 32, 64, 32),
    [GT_WM] = CKJIT_INT_PARAM("wm", 1, 8, 2),
    [GT_WN] = CKJIT_INT_PARAM("wn", 1, 8, 2),
    [GT_STAGES] = CKJIT_INT_PARAM("stages", 2, 6, 3),
    [GT_VEC_A] = CKJIT_INT_PARAM("vec_a", 1, 4, 4),
    [GT_VEC_B] = CKJIT_INT_PARAM("vec_b", 1, 4, 4),
    EPILOGUE_PARAMS(GT),
    [GT_SPLIT] = CKJIT_INT_PARAM("split", 0, 1, 0),
    [GT_GROUPED] = CKJIT_INT_PARAM("grouped", 0, 1, 0),
};

/* f32 stages of BM x BK (A) and BN x BK (B) (the swizzle needs no
 * padding), then in the same bytes the staged epilogue's copy of the tile. */
static int tf32_smem(const ckjit_spec *s) {
  const int32_t *v = s->value;
  const int stages = v[GT_STAGES] * (v[GT_BM] + v[GT_BN]) * v[GT_BK] * 4;
  const int staged = CKJIT_GEMM_STAGED_BYTES(v[GT_BM], v[GT_BN]);
  return stages > staged ? stages : staged;
}

static ckjit_status tf32_check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  if (!ckjit__is_pow2(v[GT_BM]) || !ckjit__is_pow2(v[GT_BN]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: gemm_tf32 bm=%d and bn=%d must be powers of two (32 .. 256)", v[GT_BM], v[GT_BN]);
  if (v[GT_BM] % (16 * v[GT_WM]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_tf32 bm=%d must be a multiple of 16 * wm=%d",
                       v[GT_BM], v[GT_WM]);
  if (v[GT_BN] % (8 * v[GT_WN]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_tf32 bn=%d must be a multiple of 8 * wn=%d",
                       v[GT_BN], v[GT_WN]);
  if (v[GT_BK] != 32 && v[GT_BK] != 64)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_tf32 bk=%d must be 32 or 64 (f32 elements)",
                       v[GT_BK]);
  if (v[GT_WM] * v[GT_WN] > 8)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_tf32 wm=%d x wn=%d: at most 8 warps", v[GT_WM],
                       v[GT_WN]);
  if (!ckjit__is_pow2(v[GT_VEC_A]) || !ckjit__is_pow2(v[GT_VEC_B]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_tf32 vec_a=%d and vec_b=%d must be 1, 2 or 4",
                       v[GT_VEC_A], v[GT_VEC_B]);
  if (tf32_smem(s) > 227 * 1024)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: gemm_tf32 needs %d bytes of shared memory (at most %d)",
                       tf32_smem(s), 227 * 1024);
  return check_split_epilogue("gemm_tf32", v, GT_SPLIT, GT_BIAS);
}

const gemm_block_tile ckjit__gemm_tf32_tiles[TF32_TILES] = {
    [TF32_LARGE] = {.bm = 256, .bn = 128, .bk = 32, .wm = 4, .wn = 2, .stages = 3},
    [TF32_MID] = {.bm = 128, .bn = 128, .bk = 32, .wm = 2, .wn = 2, .stages = 3},
    [TF32_SMALL] = {.bm = 64, .bn = 128, .bk = 32, .wm = 2, .wn = 2, .stages = 4},
};

/* gemm_tf32: f32 in and out, every order pair, at each tile of the policy
 * (aligned operands). */
static int tf32_default(size_t i, ckjit_spec *out) {
  if (i >= 4 * TF32_TILES) return 0;
  const gemm_block_tile *t = &ckjit__gemm_tf32_tiles[i / 4];
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_GEMM_TF32;
  int32_t *v = out->value;
  v[GT_A] = (int)(i % 4) / 2, v[GT_B] = (int)(i % 4) % 2;
  v[GT_BM] = t->bm, v[GT_BN] = t->bn, v[GT_BK] = t->bk, v[GT_WM] = t->wm, v[GT_WN] = t->wn;
  v[GT_STAGES] = t->stages, v[GT_VEC_A] = 4, v[GT_VEC_B] = 4;
  return 1;
}

const ckjit_family ckjit__family_gemm_tf32 = {
    .name = "gemm_tf32",
    .source = "gemm/tf32.cu",
    .kernel = "ckjit_gemm_tf32",
    .n_params = GT_COUNT,
    .params = tf32_params,
    .check = tf32_check,
    .default_spec = tf32_default,
    .targets = ckjit__arch_has_mma_sync,
    .targets_text = "sm_80 and newer (mma.sync)",
};

/* ---- launch geometry ------------------------------------------------------------ */
void ckjit__gemm_launch_shape(const ckjit_spec *s, unsigned *threads, unsigned *smem, unsigned *cluster) {
  const int32_t *v = s->value;
  *smem = 0, *cluster = 1;
  switch (s->family) {
  case CKJIT_FAMILY_GEMM_MMA:
    *threads = (unsigned)(v[GM_WM] * v[GM_WN] * v[GM_WK] * 32), *smem = (unsigned)mma_smem(s);
    break;
  case CKJIT_FAMILY_GEMM_TF32:
    *threads = (unsigned)(v[GT_WM] * v[GT_WN] * 32), *smem = (unsigned)tf32_smem(s);
    break;
  case CKJIT_FAMILY_GEMM_WGMMA: /* TMA: a producer warpgroup and two consumers */
    *threads = v[GW_TMA] ? 384u : 256u, *smem = (unsigned)wgmma_smem(s);
    *cluster = (unsigned)(v[GW_CLUSTER_M] * v[GW_CLUSTER_N]);
    break;
  case CKJIT_FAMILY_GEMM_SIMT: /* 8 x 8 outputs per thread */
    *threads = (unsigned)((v[GS_BM] / 8) * (v[GS_BN] / 8));
    break;
  default: /* gemm_mfma (four wave64s), gemm_reduce */
    *threads = 256;
  }
}
