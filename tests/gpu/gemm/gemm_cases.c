/* The cases of the GEMM GPU test (test_gemm_gpu.c runs them): every
 * layout x dtype pair, f32 (SIMT, tf32), epilogues, edge and random
 * shapes, batched, grouped, split-K, the decode and 64 x 64 tiles, tf32 on
 * both pipelines, Stream-K, clusters, and the two large cases. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_gpu.h"

gcase *g_cases;
size_t g_ncases;
static size_t g_cap;
tu_rng g_rng;

static gcase mk(const char *name, ckjit_dtype ab, ckjit_dtype out, int ao, int bo, int64_t m, int64_t n, int64_t k) {
  gcase c;
  memset(&c, 0, sizeof c);
  snprintf(c.name, sizeof c.name, "%s", name);
  c.ab = ab, c.out = out, c.ao = (ckjit_order)ao, c.bo = (ckjit_order)bo;
  c.np = 1;
  c.mnk[0][0] = m, c.mnk[0][1] = n, c.mnk[0][2] = k;
  c.batch = 1;
  c.alpha = 1.0f;
  c.beta = 0.5f;
  c.act = CKJIT_UNARY_IDENTITY;
  c.split_k = 0;
  return c;
}

static void add(gcase c) {
  if (g_ncases == g_cap) {
    g_cap = g_cap ? 2 * g_cap : 64;
    g_cases = realloc(g_cases, g_cap * sizeof *g_cases);
    if (!g_cases) abort();
  }
  g_cases[g_ncases++] = c;
}

static const ckjit_dtype HALFS[2] = {CKJIT_F16, CKJIT_BF16};
static const ckjit_dtype OUTS[3] = {CKJIT_F16, CKJIT_BF16, CKJIT_F32};

void build_cases(int skip_large) {
  gcase c;
  /* every layout pair x ab dtype x out dtype: aligned (fast path) and odd shapes */
  for (int ao = 0; ao < 2; ao++)
    for (int bo = 0; bo < 2; bo++)
      for (int a = 0; a < 2; a++)
        for (int o = 0; o < 3; o++) {
          add(mk("layouts aligned", HALFS[a], OUTS[o], ao, bo, 128, 256, 192));
          c = mk("layouts odd", HALFS[a], OUTS[o], ao, bo, 77, 130, 99);
          c.pad = 3, c.off = o == 2, c.alpha = 0.75f;
          add(c);
        }
  /* f32 inputs: SIMT, tf32; exact data (f32 accumulation checked to the bit) */
  for (int ao = 0; ao < 2; ao++)
    for (int bo = 0; bo < 2; bo++) {
      c = mk("f32 simt", CKJIT_F32, ao ? CKJIT_F16 : CKJIT_F32, ao, bo, 96, 80, 300);
      c.pad = bo;
      add(c);
      c = mk("f32 tf32", CKJIT_F32, CKJIT_F32, ao, bo, 128, 128, 257);
      c.tf32 = 1;
      add(c);
      c = mk("exact f16", CKJIT_F16, CKJIT_F32, ao, bo, 64, 96, 1000);
      c.exact = 1;
      add(c);
    }
  c = mk("exact tf32", CKJIT_F32, CKJIT_F32, 0, 1, 128, 64, 512), c.tf32 = 1, c.exact = 1, add(c);
  c = mk("exact bf16 split 3", CKJIT_BF16, CKJIT_F32, 0, 1, 16, 128, 2000), c.split_k = 3, c.exact = 1, add(c);
  c = mk("exact f32 simt odd", CKJIT_F32, CKJIT_F32, 1, 0, 33, 47, 301), c.exact = 1, c.pad = 1, c.off = 1, add(c);

  /* epilogues: each activation; bias per row / col; beta C (separate, in place); D0; D1; all */
  for (int act = 0; act < 6; act++)
    for (int v = 0; v < 2; v++) {
      c = mk("activation", v ? CKJIT_F16 : CKJIT_BF16, v ? CKJIT_F32 : CKJIT_BF16, v, 1 - v, 100, 72, 160);
      c.act = act, c.alpha = 0.3f, c.ep = EP_BIAS_COL, c.exact = 1; /* exact: the tolerance is the epilogue's */
      add(c);
    }
  static const struct { const char *name; int ep, act; } epis[] = {
      {"bias per row", EP_BIAS_ROW, 0},
      {"bias per col", EP_BIAS_COL, 0},
      {"beta C", EP_C, 0},
      {"beta C in place", EP_C | EP_INPLACE, 0},
      {"D0", EP_D0, 0},
      {"D1", EP_D1, 0},
      {"all in place", EP_C | EP_INPLACE | EP_BIAS_COL | EP_D0 | EP_D1, CKJIT_UNARY_GELU_TANH},
      {"all", EP_C | EP_BIAS_ROW | EP_D0 | EP_D1, CKJIT_UNARY_SILU},
  };
  for (size_t e = 0; e < sizeof epis / sizeof epis[0]; e++)
    for (int v = 0; v < 3; v++) {
      c = mk(epis[e].name, v == 1 ? CKJIT_BF16 : CKJIT_F16, OUTS[(e + (size_t)v) % 3], v & 1, v >> 1, 91, 150, 136);
      c.ep = epis[e].ep, c.act = epis[e].act, c.alpha = 0.5f, c.beta = -1.5f;
      c.pad = v == 2 ? 3 : 0, c.off = v == 2;
      add(c);
    }

  /* edge shapes */
  static const int64_t edges[][3] = {{1, 1, 1},   {1, 1, 0},  {5, 7, 0},   {33, 17, 1}, {3, 200, 64}, {15, 64, 128},
                                     {200, 5, 64}, {64, 15, 96}, {64, 64, 33}, {64, 64, 65}, {128, 64, 127},
                                     {50, 60, 207}, {0, 16, 32}, {16, 0, 32}, {0, 0, 0},  {1, 4097, 9},
                                     {4097, 1, 9}, {2, 3, 4095}};
  for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
    c = mk("edge", HALFS[e % 2], OUTS[e % 3], (int)(e >> 1) & 1, (int)(e >> 2) & 1, edges[e][0], edges[e][1],
           edges[e][2]);
    c.pad = (e % 4 == 3) ? 3 : (int)(e % 3 == 1);
    c.off = e % 5 == 2;
    c.ep = e % 3 == 2 ? EP_C | EP_BIAS_ROW : (e % 3 == 1 ? EP_C | EP_INPLACE | EP_BIAS_COL : 0);
    c.act = (int)(e % 6);
    c.alpha = 1.25f;
    add(c);
  }
  /* f32 edges */
  c = mk("edge f32", CKJIT_F32, CKJIT_F32, 0, 0, 1, 1, 1), add(c);
  c = mk("edge f32 k=0", CKJIT_F32, CKJIT_BF16, 1, 1, 9, 13, 0), c.ep = EP_C | EP_D0, add(c);
  c = mk("edge tf32 misaligned", CKJIT_F32, CKJIT_F32, 1, 0, 31, 17, 45), c.tf32 = 1, c.off = 1, c.pad = 3, add(c);

  /* random shapes and options */
  for (int t = 0; t < 20; t++) {
    int ab = (int)tu_rng_range(&g_rng, 0, 2), out = (int)tu_rng_range(&g_rng, 0, 2);
    int ao = (int)tu_rng_range(&g_rng, 0, 1), bo = (int)tu_rng_range(&g_rng, 0, 1);
    int64_t m = tu_rng_range(&g_rng, 1, 260), n = tu_rng_range(&g_rng, 1, 260);
    int64_t k = tu_rng_range(&g_rng, 0, 9) == 0 ? 0 : tu_rng_range(&g_rng, 1, 600);
    c = mk("random", ab == 2 ? CKJIT_F32 : HALFS[ab], OUTS[out], ao, bo, m, n, k);
    static const int pads[5] = {0, 0, 1, 3, 8};
    c.pad = pads[tu_rng_range(&g_rng, 0, 4)];
    c.off = tu_rng_range(&g_rng, 0, 2) == 0;
    c.ep = (int)tu_rng_range(&g_rng, 0, 63);
    if (!(c.ep & EP_C)) c.ep &= ~EP_INPLACE;
    if ((c.ep & EP_BIAS_ROW) && (c.ep & EP_BIAS_COL)) c.ep &= ~(tu_rng_range(&g_rng, 0, 1) ? EP_BIAS_ROW : EP_BIAS_COL);
    c.act = (int)tu_rng_range(&g_rng, 0, 5);
    c.split_k = (int)tu_rng_range(&g_rng, 0, 3);
    c.tf32 = ab == 2 && tu_rng_range(&g_rng, 0, 1);
    c.alpha = (float)gt_uniform(&g_rng, 0.2, 1.5);
    c.beta = (float)gt_uniform(&g_rng, -1.0, 1.0);
    add(c);
  }

  /* batched: gaps between entries, stride-0 broadcast of B / A / C, epilogue, split-k */
  c = mk("batch 3", CKJIT_BF16, CKJIT_BF16, 0, 1, 64, 80, 96), c.batch = 3, c.pad = 1, add(c);
  c = mk("batch 3 B broadcast", CKJIT_F16, CKJIT_F32, 0, 0, 70, 64, 128), c.batch = 3, c.bcast = 1u << OB, add(c);
  c = mk("batch 3 A broadcast", CKJIT_BF16, CKJIT_F16, 1, 1, 33, 65, 80), c.batch = 3, c.bcast = 1u << OA, c.pad = 3;
  add(c);
  c = mk("batch 3 epilogue", CKJIT_F16, CKJIT_F16, 1, 0, 40, 56, 72), c.batch = 3;
  c.ep = EP_C | EP_INPLACE | EP_BIAS_ROW | EP_D0 | EP_D1, c.act = CKJIT_UNARY_RELU, c.off = 1;
  add(c);
  c = mk("batch 3 C broadcast", CKJIT_BF16, CKJIT_F32, 0, 1, 24, 24, 40), c.batch = 3, c.ep = EP_C, c.bcast = 1u << OC;
  add(c);
  c = mk("batch 3 split 3", CKJIT_BF16, CKJIT_BF16, 0, 1, 16, 128, 1536), c.batch = 3, c.split_k = 3, add(c);

  /* grouped */
  static const int64_t g1[5][3] = {{64, 128, 256}, {1, 200, 512}, {37, 45, 100}, {130, 7, 33}, {16, 16, 16}};
  static const int64_t g2[5][3] = {{0, 5, 7}, {5, 0, 7}, {9, 9, 0}, {1, 1, 1}, {33, 65, 129}};
  c = mk("grouped", CKJIT_F16, CKJIT_BF16, 0, 1, 0, 0, 0), c.np = 5, memcpy(c.mnk, g1, sizeof g1), add(c);
  c = mk("grouped epilogue", CKJIT_BF16, CKJIT_F32, 1, 0, 0, 0, 0), c.np = 5, memcpy(c.mnk, g1, sizeof g1);
  c.ep = EP_C | EP_BIAS_COL | EP_D1, c.act = CKJIT_UNARY_GELU_ERF, c.pad = 3, c.off = 1, c.split_k = 1, add(c);
  c = mk("grouped empty + in place", CKJIT_F16, CKJIT_F16, 1, 1, 0, 0, 0), c.np = 5, memcpy(c.mnk, g2, sizeof g2);
  c.ep = EP_C | EP_INPLACE | EP_D0, c.act = CKJIT_UNARY_SIGMOID, add(c);
  c = mk("grouped f32", CKJIT_F32, CKJIT_F32, 0, 0, 0, 0, 0), c.np = 5, memcpy(c.mnk, g1, sizeof g1), add(c);
  /* 20 problems, 16-byte aligned, one with m > 64: the TMA pipeline in
   * three launches of up to 8, D through TMA stores (tma=2, NVRTC 13);
   * with D's rows one element longer, loads only (tma=1); with one k = 0
   * problem (no tensor maps), the cp.async one in two launches of up to 16. */
  for (int k0 = 0; k0 < 3; k0++) {
    static const char *const names[3] = {"grouped 20 tma", "grouped 20 k=0 cp.async", "grouped 20 tma D unaligned"};
    c = mk(names[k0], CKJIT_BF16, k0 == 1 ? CKJIT_F32 : CKJIT_BF16, k0 == 1, 0, 0, 0, 0);
    c.np = MAXP, c.act = CKJIT_UNARY_SILU, c.d_pad = k0 == 2;
    c.ep = EP_BIAS_COL | (k0 == 0 ? EP_C | EP_INPLACE | EP_D0 : k0 == 1 ? EP_C : 0); /* TMA stores read C = D */
    for (int i = 0; i < MAXP; i++) {
      c.mnk[i][0] = i == 7 ? 320 : 8 * (1 + i % 5);
      c.mnk[i][1] = 64 + 72 * (i % 3);
      c.mnk[i][2] = k0 == 1 && i == 11 ? 0 : 64 * (1 + i % 4);
    }
    add(c);
  }

  /* split-k on decode shapes */
  static const int splits[4] = {2, 3, 7, 0};
  for (int s = 0; s < 4; s++)
    for (int m = 0; m < 2; m++) {
      c = mk("split-k decode", CKJIT_BF16, CKJIT_BF16, 0, 1, m ? 16 : 1, m ? 256 : 512, 4096);
      c.split_k = splits[s];
      add(c);
      c = mk("split-k decode odd k exact", CKJIT_F16, CKJIT_F32, m, 1, m ? 16 : 1, 384, 4093);
      c.split_k = splits[s], c.ep = EP_C | EP_INPLACE | EP_BIAS_COL, c.act = CKJIT_UNARY_SILU, c.alpha = 0.25f;
      c.exact = 1; /* a slice boundary that drops or repeats one term shows */
      add(c);
    }
  /* the decode tile (m <= 16: warps split each K step, their sums meet in
   * shared memory), unsplit (k below two K steps of 256, or tiles enough to
   * fill the GPU) and split by the automatic choice; every order pair,
   * n and k off the tile, every epilogue */
  static const int64_t dec[][3] = {{1, 8200, 777}, {7, 8256, 2048}, {16, 1000, 1000}, {5, 200, 4093},
                                   {16, 64, 33},   {3, 130, 8192}};
  for (int d = 0; d < 6; d++) {
    c = mk("decode tile exact", HALFS[d % 2], OUTS[d % 3], d & 1, (d >> 1) & 1, dec[d][0], dec[d][1], dec[d][2]);
    c.exact = 1, c.alpha = 0.75f, c.beta = 0.5f, c.pad = d % 3 == 2 ? 8 : 0; /* 8: still 16-byte rows */
    c.ep = d == 0 ? EP_BIAS_COL : d == 1 ? EP_C | EP_INPLACE | EP_BIAS_ROW : d == 2 ? EP_D0 | EP_D1 : d == 3 ? EP_C : 0;
    c.act = d % 6;
    add(c);
  }
  /* mid-size and skinny shapes the wgmma path takes in 128 x 64 tiles
   * (1024^3) or 64 x 64 ones (one consumer warpgroup):
   * whole, split into whole waves, off the tile with an epilogue */
  c = mk("128x64 tiles", CKJIT_BF16, CKJIT_BF16, 0, 0, 1024, 1024, 1024), add(c);
  c = mk("64x64 tiles exact", CKJIT_BF16, CKJIT_F32, 0, 0, 128, 4096, 4096), c.exact = 1, add(c);
  c = mk("64x64 tiles split exact", CKJIT_F16, CKJIT_F16, 0, 1, 100, 512, 8192), c.exact = 1, add(c);
  c = mk("64x64 tiles edges", CKJIT_F16, CKJIT_F16, 1, 0, 200, 1000, 777);
  c.ep = EP_C | EP_BIAS_COL | EP_D1, c.act = CKJIT_UNARY_GELU_ERF, c.alpha = 0.5f, c.beta = 0.25f, add(c);
  c = mk("split-k exact", CKJIT_F16, CKJIT_F32, 0, 1, 1, 512, 4096), c.split_k = 7, c.exact = 1, add(c);
  c = mk("split-k bf16 exact", CKJIT_BF16, CKJIT_F32, 1, 0, 16, 200, 3001), c.split_k = 3, c.exact = 1, add(c);
  c = mk("split-k tf32", CKJIT_F32, CKJIT_F32, 0, 0, 16, 128, 4096), c.split_k = 0, c.tf32 = 1, add(c);

  /* tf32 tensor cores (allow_tf32): every order pair on edge shapes, narrow
   * copies, the small-m tile, an epilogue into 16-bit output, split-k,
   * grouped. */
  for (int ao = 0; ao < 2; ao++)
    for (int bo = 0; bo < 2; bo++) {
      c = mk("tf32 edges", CKJIT_F32, CKJIT_F32, ao, bo, 300, 257, 515), c.tf32 = 1, add(c);
      c = mk("tf32 misaligned", CKJIT_F32, CKJIT_F32, ao, bo, 129, 66, 70), c.tf32 = 1, c.pad = 3, c.off = 1;
      add(c);
    }
  c = mk("tf32 small m exact", CKJIT_F32, CKJIT_F32, 0, 1, 40, 384, 1000), c.tf32 = 1, c.exact = 1, add(c);
  c = mk("tf32 epilogue", CKJIT_F32, CKJIT_BF16, 1, 0, 200, 136, 264), c.tf32 = 1;
  c.ep = EP_C | EP_BIAS_ROW | EP_D0 | EP_D1, c.act = CKJIT_UNARY_GELU_ERF, add(c);
  c = mk("tf32 split 3 exact", CKJIT_F32, CKJIT_F32, 0, 0, 64, 200, 3000), c.tf32 = 1, c.split_k = 3, c.exact = 1;
  add(c);
  c = mk("grouped tf32", CKJIT_F32, CKJIT_F16, 1, 1, 0, 0, 0), c.np = 5, memcpy(c.mnk, g1, sizeof g1);
  c.tf32 = 1, c.ep = EP_BIAS_COL, add(c);
  /* tf32 on wgmma (sm_90, m > 64, one problem): K-major operands read
   * directly, split into 32-deep slices; others transposed first (batch
   * strides, k not a multiple of 4: the copies' rows are padded); the
   * 64 x 64 tiles. */
  c = mk("tf32 wgmma split exact", CKJIT_F32, CKJIT_F32, 0, 1, 128, 256, 8192), c.tf32 = 1, c.exact = 1, add(c);
  c = mk("tf32 wgmma batch 3", CKJIT_F32, CKJIT_F32, 0, 0, 130, 200, 96), c.tf32 = 1, c.batch = 3, c.pad = 1;
  add(c);
  c = mk("tf32 wgmma odd k", CKJIT_F32, CKJIT_F16, 1, 1, 150, 100, 77), c.tf32 = 1, c.ep = EP_BIAS_COL, add(c);
  c = mk("tf32 wgmma 64x64 exact", CKJIT_F32, CKJIT_F32, 1, 0, 128, 4096, 1024), c.tf32 = 1, c.exact = 1, add(c);
  /* tf32 wgmma without transposes: a column-major A from registers (cc), a
   * row-major B as the swapped problem D^T = B^T A^T written column-major
   * (rr: the whole epilogue, bias per row becoming per column, in place,
   * batches, off-tile edges, the 64-row tiles of a skinny n); cr
   * transposes B only. */
  c = mk("tf32 wgmma cc exact", CKJIT_F32, CKJIT_F32, 1, 1, 520, 384, 1000), c.tf32 = 1, c.exact = 1, add(c);
  c = mk("tf32 wgmma rr exact", CKJIT_F32, CKJIT_F32, 0, 0, 1000, 776, 516), c.tf32 = 1, c.exact = 1, add(c);
  c = mk("tf32 wgmma rr epilogue", CKJIT_F32, CKJIT_BF16, 0, 0, 333, 270, 260), c.tf32 = 1;
  c.ep = EP_C | EP_BIAS_ROW | EP_D0 | EP_D1, c.act = CKJIT_UNARY_GELU_ERF, c.alpha = 0.5f, add(c);
  c = mk("tf32 wgmma rr bias col in place", CKJIT_F32, CKJIT_F32, 0, 0, 300, 200, 128), c.tf32 = 1;
  c.ep = EP_C | EP_INPLACE | EP_BIAS_COL, c.act = CKJIT_UNARY_SILU, add(c);
  c = mk("tf32 wgmma rr batch 3", CKJIT_F32, CKJIT_F16, 0, 0, 136, 264, 200), c.tf32 = 1, c.batch = 3, add(c);
  c = mk("tf32 wgmma rr skinny n", CKJIT_F32, CKJIT_F32, 0, 0, 4096, 100, 512), c.tf32 = 1, c.exact = 1, add(c);
  c = mk("tf32 wgmma cr exact", CKJIT_F32, CKJIT_F32, 1, 0, 260, 516, 300), c.tf32 = 1, c.exact = 1, add(c);

  /* Stream-K (split_k CKJIT_GEMM_STREAM_K; on sm_90 with 16-byte aligned
   * operands, elsewhere the automatic path), beside split_k 0 on the same
   * shapes:
   * runs that cross tile boundaries, tiles cut into several partial slots,
   * partial tiles at the matrix edges, whole (data-parallel) tiles beside
   * Stream-K ones, and every epilogue through the second kernel. */
  c = mk("stream-k 1024^3 exact", CKJIT_BF16, CKJIT_BF16, 0, 0, 1024, 1024, 1024);
  c.split_k = CKJIT_GEMM_STREAM_K, c.exact = 1, add(c);
  c = mk("stream-k edges epilogue exact", CKJIT_F16, CKJIT_F32, 0, 1, 300, 1000, 3000);
  c.split_k = CKJIT_GEMM_STREAM_K, c.exact = 1, c.ep = EP_C | EP_INPLACE | EP_BIAS_COL | EP_D0 | EP_D1;
  c.act = CKJIT_UNARY_GELU_TANH, c.alpha = 0.5f, add(c);
  c = mk("stream-k decode", CKJIT_BF16, CKJIT_BF16, 0, 0, 16, 4096, 4096), c.split_k = CKJIT_GEMM_STREAM_K, add(c);
  c = mk("decode auto", CKJIT_BF16, CKJIT_BF16, 0, 0, 16, 4096, 4096), add(c);
  c = mk("stream-k m=1 cc exact", CKJIT_F16, CKJIT_F16, 1, 1, 1, 2048, 4096);
  c.split_k = CKJIT_GEMM_STREAM_K, c.exact = 1, c.ep = EP_BIAS_ROW, c.act = CKJIT_UNARY_RELU, add(c);
  c = mk("stream-k 128 rows cr", CKJIT_BF16, CKJIT_F16, 1, 0, 128, 4096, 4096), c.split_k = CKJIT_GEMM_STREAM_K, add(c);
  c = mk("stream-k batch 3", CKJIT_BF16, CKJIT_BF16, 0, 0, 200, 256, 2048), c.batch = 3;
  c.split_k = CKJIT_GEMM_STREAM_K, c.exact = 1, c.ep = EP_C, add(c);
  c = mk("stream-k k < 8 steps", CKJIT_BF16, CKJIT_BF16, 0, 0, 64, 512, 136), c.split_k = CKJIT_GEMM_STREAM_K, add(c);
  c = mk("stream-k tail wave exact", CKJIT_BF16, CKJIT_BF16, 0, 0, 4096, 2304, 512);
  c.split_k = CKJIT_GEMM_STREAM_K, c.exact = 1, c.sample = 3000, add(c);
  /* Stream-K on tf32 wgmma: runs counted in 32-deep K steps; K-major
   * operands read directly, or transposed first (m <= 64 takes 128-row
   * tiles; k = 1001 is not a multiple of the step or of 4). */
  c = mk("stream-k tf32 exact", CKJIT_F32, CKJIT_F32, 0, 1, 300, 1000, 3000), c.tf32 = 1, c.exact = 1;
  c.split_k = CKJIT_GEMM_STREAM_K, c.ep = EP_BIAS_COL, add(c);
  c = mk("stream-k tf32 m=16 rr", CKJIT_F32, CKJIT_F32, 0, 0, 16, 512, 4096), c.tf32 = 1;
  c.split_k = CKJIT_GEMM_STREAM_K, add(c);
  c = mk("stream-k tf32 batch 2 cc", CKJIT_F32, CKJIT_F16, 1, 1, 130, 260, 1001), c.tf32 = 1, c.batch = 2;
  c.split_k = CKJIT_GEMM_STREAM_K, add(c);
  c = mk("tail wave auto exact", CKJIT_BF16, CKJIT_F32, 0, 0, 4096, 2304, 512);
  c.exact = 1, c.sample = 3000, c.ep = EP_BIAS_COL, c.act = CKJIT_UNARY_SILU, add(c);

  /* Clusters of two with multicast (sm_90, through TMA), each run again
   * without them for the same bits: every order pair on 64 x 64 tiles with
   * odd tile counts both ways (a cluster's second tile past D's edge), the
   * skinny shape they are for, 128 x 256 tiles with TMA stores and an odd
   * tile count, split-K slices, batches, tf32 (A from registers, and the
   * swapped problem). */
  static const char *const kinds[2] = {"2x1", "1x2"};
  for (int l = 0; l < 8; l++) {
    c = mk("cluster edges", HALFS[l % 2], OUTS[l % 3], l & 1, (l >> 1) & 1, 320, 832, 1000);
    c.cluster = kinds[l >> 2], c.exact = 1, c.pad = l % 3 == 2 ? 8 : 0;
    c.ep = l == 3 ? EP_C | EP_INPLACE | EP_BIAS_COL | EP_D0 | EP_D1 : l == 6 ? EP_BIAS_ROW : 0;
    c.act = l % 6;
    add(c);
  }
  for (int kd = 0; kd < 2; kd++) {
    c = mk("cluster skinny exact", CKJIT_BF16, CKJIT_BF16, 0, 0, 128, 2048, 1024), c.cluster = kinds[kd], c.exact = 1;
    add(c);
    c = mk("cluster split-k exact", CKJIT_F16, CKJIT_F32, 0, 1, 256, 256, 8192), c.cluster = kinds[kd], c.exact = 1;
    add(c);
    c = mk("cluster batch 3", CKJIT_BF16, CKJIT_BF16, kd, 0, 200, 300, 256), c.cluster = kinds[kd], c.batch = 3;
    c.pad = 8, c.ep = EP_C, add(c);
  }
  c = mk("cluster 128x256 odd m", CKJIT_BF16, CKJIT_BF16, 0, 0, 2176, 2560, 256), c.cluster = "2x1";
  c.exact = 1, c.sample = 3000, c.ep = EP_BIAS_COL, c.act = CKJIT_UNARY_SILU, add(c);
  c = mk("cluster 128x256 odd n", CKJIT_F16, CKJIT_F16, 1, 1, 2304, 2304, 256), c.cluster = "1x2";
  c.exact = 1, c.sample = 3000, add(c);
  c = mk("cluster tf32 cc exact", CKJIT_F32, CKJIT_F32, 1, 1, 520, 384, 1000), c.tf32 = 1, c.exact = 1;
  c.cluster = "1x2", add(c);
  c = mk("cluster tf32 rr exact", CKJIT_F32, CKJIT_F32, 0, 0, 1000, 776, 516), c.tf32 = 1, c.exact = 1;
  c.cluster = "2x1", add(c);

  if (!skip_large) {
    c = mk("large", CKJIT_BF16, CKJIT_BF16, 0, 1, 4095, 4097, 1001);
    c.ep = EP_BIAS_COL, c.act = CKJIT_UNARY_SILU, c.alpha = 0.5f, c.sample = 3000;
    add(c);
    /* D past 2^31 elements (65537 x 32768 bf16, 4.3 GB; aligned, so the
     * wgmma pipeline with TMA stores): 64-bit output indexing. */
    c = mk("past 2^31 outputs", CKJIT_BF16, CKJIT_BF16, 0, 0, 65537, 32768, 24);
    c.ep = EP_BIAS_ROW, c.sample = 3000;
    add(c);
  }
}
