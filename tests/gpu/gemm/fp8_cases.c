/* The cases of the FP8 GEMM GPU test (test_gemm_fp8_gpu.c runs them and
 * states the definition, the generators and the tolerance). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_cases.h"

fcase *g_cases;
size_t g_ncases;
static size_t g_cap;

static void add(fcase c) {
  if (g_ncases == g_cap) {
    g_cap = g_cap ? 2 * g_cap : 64;
    g_cases = realloc(g_cases, g_cap * sizeof *g_cases);
    if (!g_cases) abort();
  }
  g_cases[g_ncases++] = c;
}

static const ckjit_dtype OUTS[3] = {CKJIT_BF16, CKJIT_F16, CKJIT_F32};

void build_cases(int skip_large) {
  fcase c;
  /* every scaling x operand pair (mixed both ways) x out dtype, on odd shapes
   * off the 128 tiles; some with padded lda / ldb / ldd, explicit or wider
   * ld_scale */
  static const ckjit_dtype pairs[4][2] = {{E4, E4}, {E5, E5}, {E4, E5}, {E5, E4}};
  static const int64_t shapes[6][3] = {{129, 200, 300}, {7, 333, 1000}, {200, 129, 48},
                                       {1, 200, 100},   {333, 7, 16},   {130, 257, 129}};
  for (int s = 0; s < 3; s++)
    for (int pr = 0; pr < 4; pr++)
      for (int o = 0; o < 3; o++) {
        const int i = s * 12 + pr * 3 + o;
        const int64_t *sh = shapes[i % 6];
        c = mk("matrix", pairs[pr][0], pairs[pr][1], OUTS[o], s, sh[0], sh[1], sh[2]);
        c.ldd_pad = i % 4 == 1 ? 3 : 0, c.lda_extra = i % 5 == 2, c.ldb_extra = i % 7 == 3 ? 2 : 0;
        c.lsa_extra = i % 3 - 1, c.lsb_extra = (i / 3) % 3 - 1; /* default, exact, one wider */
        add(c);
      }
  /* K off the 128 block (the partial last block has its own scale) and off
   * 16 (lda / ldb padded with NaN codes) */
  static const int64_t ks[] = {1, 15, 16, 17, 48, 100, 127, 128, 129, 255, 256, 257, 300, 1000, 1023};
  static const int64_t mn[5] = {1, 7, 129, 200, 333};
  for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
    c = mk("k edge", t % 3 ? E4 : E5, t % 4 ? E4 : E5, OUTS[t % 3], t % 5 == 4 ? ROW : BLK, mn[t % 5],
           mn[(t + 2) % 5], ks[t]);
    c.lsa_extra = t % 2 ? -1 : 2, c.lsb_extra = t % 3 ? -1 : 1, c.ldd_pad = (int)(t % 4);
    add(c);
  }
  /* ld_scale_a / ld_scale_b: both 0 (default), one or both wider than
   * needed (NaN in the unused columns), exactly ceil(k / 128) given */
  static const int lds[5][2] = {{-1, -1}, {5, -1}, {-1, 1}, {3, 7}, {0, 0}};
  for (int t = 0; t < 5; t++) {
    c = mk("ld_scale", E4, t % 2 ? E5 : E4, OUTS[t % 3], BLK, 200, 333, 1000);
    c.lsa_extra = lds[t][0], c.lsb_extra = lds[t][1];
    add(c);
  }
  /* odd M and N */
  static const int64_t mns[6][2] = {{1, 333}, {333, 1}, {7, 7}, {129, 129}, {200, 333}, {333, 200}};
  for (int t = 0; t < 6; t++) add(mk("odd m n", t % 2 ? E5 : E4, E4, OUTS[t % 3], t % 3, mns[t][0], mns[t][1], 300));
  /* epilogue: alpha != 1, bias per row / column, relu and gelu_tanh, per scaling */
  static const float alphas[3] = {0.5f, -1.75f, 3.0f};
  for (int s = 0; s < 3; s++)
    for (int b = 1; b <= 2; b++)
      for (int a = 0; a < 2; a++) {
        c = mk("epilogue", (s + a) % 2 ? E5 : E4, b == 2 ? E5 : E4, OUTS[(s + b + a) % 3], s, 129, 200, 300);
        c.bias = (ckjit_bias_mode)b, c.act = a ? CKJIT_UNARY_GELU_TANH : CKJIT_UNARY_RELU;
        c.alpha = alphas[(s + b) % 3], c.ldd_pad = 5;
        add(c);
      }
  /* exact data: every activation checked to its own rounding (gelu_tanh
   * is not gelu_erf), bias off by one entry shows */
  for (int act = 0; act < 6; act++) {
    c = mk("exact epilogue", act % 2 ? E5 : E4, act % 3 ? E4 : E5, OUTS[act % 3], act % 3, 100, 140, 300);
    c.gen = GEN_EXACT, c.act = act, c.bias = act % 2 ? CKJIT_BIAS_PER_ROW : CKJIT_BIAS_PER_COL, c.alpha = 0.75f;
    add(c);
  }
  c = mk("exact block aligned", E4, E4, CKJIT_F32, BLK, 256, 256, 512), c.gen = GEN_EXACT, add(c);
  c = mk("exact block odd", E5, E4, CKJIT_F32, BLK, 129, 200, 1000), c.gen = GEN_EXACT, c.lsb_extra = 2, add(c);
  /* ldd > n: the padding must stay poisoned */
  c = mk("ldd pad 64", E4, E4, CKJIT_BF16, ROW, 70, 100, 256), c.ldd_pad = 64, add(c);
  c = mk("ldd pad 1", E5, E5, CKJIT_F16, TEN, 33, 129, 64), c.ldd_pad = 1, c.bias = CKJIT_BIAS_PER_COL, add(c);
  /* every finite code (values up to 448 / 57344) */
  c = mk("full range", E4, E4, CKJIT_F32, TEN, 129, 200, 48), c.gen = GEN_FULL, add(c);
  c = mk("full range", E5, E5, CKJIT_F32, ROW, 65, 130, 100), c.gen = GEN_FULL, add(c);
  c = mk("full range", E4, E5, CKJIT_BF16, BLK, 40, 300, 300), c.gen = GEN_FULL, add(c);
  /* a NaN code in A: its row is NaN (NaN propagates as in f32) */
  c = mk("nan in A", E4, E5, CKJIT_F32, TEN, 33, 40, 200), c.nan_a = 1, add(c);
  c = mk("nan in A", E5, E4, CKJIT_BF16, BLK, 20, 150, 300), c.nan_a = 1, add(c);
  /* empty: m = 0 / n = 0 write nothing; k = 0 gives act(bias) or 0 */
  c = mk("m=0", E4, E4, CKJIT_BF16, BLK, 0, 200, 300), c.bias = CKJIT_BIAS_PER_COL, add(c);
  c = mk("n=0", E5, E4, CKJIT_F32, ROW, 7, 0, 48), c.ldd_pad = 8, c.bias = CKJIT_BIAS_PER_ROW, add(c);
  c = mk("m=n=0", E4, E5, CKJIT_F16, TEN, 0, 0, 16), add(c);
  c = mk("m=n=k=0", E4, E4, CKJIT_F16, BLK, 0, 0, 0), add(c);
  c = mk("k=0 bias row gelu", E4, E4, CKJIT_BF16, BLK, 7, 129, 0);
  c.bias = CKJIT_BIAS_PER_ROW, c.act = CKJIT_UNARY_GELU_TANH, c.ldd_pad = 3, add(c);
  c = mk("k=0 bias col relu", E5, E4, CKJIT_F32, ROW, 129, 7, 0), c.bias = CKJIT_BIAS_PER_COL;
  c.act = CKJIT_UNARY_RELU, c.alpha = 2.0f, add(c);
  c = mk("k=0 no bias", E5, E5, CKJIT_F16, TEN, 33, 65, 0), c.ldd_pad = 2, add(c);
  /* the epilogue's terms: beta C, D0, D1 (alone and together, with bias
   * and activations), C in place, beta 0 (C NaN, never read), k = 0 */
  c = mk("beta C", E4, E4, CKJIT_BF16, ROW, 129, 200, 300), c.terms = T_C, c.beta = 0.5f, add(c);
  c = mk("beta C in place", E5, E4, CKJIT_F32, TEN, 130, 257, 129), c.terms = T_C | T_IN_PLACE, c.beta = -1.0f;
  c.ldd_pad = 3, add(c);
  c = mk("beta C in place", E4, E4, CKJIT_BF16, BLK, 200, 333, 1000), c.terms = T_C | T_IN_PLACE, c.beta = 1.0f;
  add(c);
  c = mk("beta 0: C unread", E4, E5, CKJIT_F16, BLK, 7, 333, 300), c.terms = T_C, c.beta = 0.0f, add(c);
  c = mk("D0 D1 gelu", E4, E4, CKJIT_F16, BLK, 7, 333, 1000), c.terms = T_C | T_D0 | T_D1, c.beta = 2.0f;
  c.bias = CKJIT_BIAS_PER_COL, c.act = CKJIT_UNARY_GELU_TANH, c.alpha = 0.5f, add(c);
  c = mk("D0 silu", E5, E5, CKJIT_BF16, ROW, 333, 129, 256), c.terms = T_D0, c.act = CKJIT_UNARY_SILU, add(c);
  c = mk("D1 relu, bias row", E4, E4, CKJIT_F32, TEN, 129, 129, 48), c.terms = T_D1, c.act = CKJIT_UNARY_RELU;
  c.bias = CKJIT_BIAS_PER_ROW, add(c);
  c = mk("exact terms", E5, E4, CKJIT_BF16, BLK, 200, 129, 48), c.gen = GEN_EXACT, c.terms = T_C | T_D0 | T_D1;
  c.beta = 0.25f, c.act = CKJIT_UNARY_SIGMOID, add(c);
  c = mk("k=0 terms", E4, E4, CKJIT_BF16, BLK, 7, 129, 0), c.terms = T_C | T_D0 | T_D1, c.beta = -0.5f;
  c.act = CKJIT_UNARY_GELU_ERF, add(c);
  c = mk("terms bn128", E4, E4, CKJIT_BF16, ROW, 1100, 1000, 640), c.sample = 3000, c.same_bits = 1;
  c.terms = T_C | T_D0 | T_D1, c.beta = 0.75f, c.act = CKJIT_UNARY_GELU_TANH, add(c);
  /* larger problems: whole tiles plus edges; 1024 x 1024 x 4096 sampled */
  c = mk("large", E4, E4, CKJIT_BF16, BLK, 512, 384, 2048);
  c.bias = CKJIT_BIAS_PER_COL, c.act = CKJIT_UNARY_GELU_TANH, c.alpha = 0.5f, add(c);
  c = mk("large", E5, E4, CKJIT_F16, ROW, 512, 384, 2048), c.alpha = 0.25f, c.bias = CKJIT_BIAS_PER_ROW, add(c);
  c = mk("large", E4, E4, CKJIT_F32, TEN, 512, 384, 2048), c.ldd_pad = 16, add(c);
  c = mk("large odd", E4, E5, CKJIT_BF16, BLK, 333, 200, 2000), c.lsa_extra = 1, add(c);
  /* the 128 x 128 tiles (the policy's choice from 66 tiles on): tile
   * counts along N even and odd (a cluster's second tile past N) */
  c = mk("bn128 pairs", E4, E4, CKJIT_BF16, ROW, 1100, 1000, 640), c.sample = 3000, c.same_bits = 1, add(c);
  c = mk("bn128 odd pairs", E5, E4, CKJIT_F32, BLK, 1152, 1100, 300), c.sample = 3000, c.same_bits = 1;
  c.bias = CKJIT_BIAS_PER_COL, add(c);
  c = mk("bn128 one column", E4, E4, CKJIT_F16, TEN, 9000, 100, 256), c.sample = 3000, c.same_bits = 1, add(c);
  c = mk("bn64 odd pairs", E4, E4, CKJIT_BF16, ROW, 130, 257, 129), c.same_bits = 1, add(c);
  if (!skip_large) {
    c = mk("1024x1024x4096", E4, E4, CKJIT_BF16, BLK, 1024, 1024, 4096), c.sample = 3000, add(c);
    c = mk("1024x1024x4096", E4, E4, CKJIT_F16, TEN, 1024, 1024, 4096), c.sample = 3000, c.alpha = 0.125f, add(c);
    /* ~8 tiles a block (more than the stages): every stage must go back to
     * the producer at every promotion interval, or the block hangs */
    c = mk("many tiles a block", E4, E4, CKJIT_BF16, ROW, 4096, 4096, 256), c.sample = 3000, c.promote = 1, add(c);
  }
}
