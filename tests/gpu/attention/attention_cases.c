/* The cases of the attention GPU test (test_attention_gpu.c runs each on
 * every pipeline the device has) and the pipelines' selection.
 *
 * Kernel specs are the expensive part (each is compiled, or prewarmed),
 * so the features are combined onto few specs: per dtype a handful of
 * (head dims, mask, bias, ALiBi, softcap) combinations carry every layout,
 * length and GQA case.  Lengths are 1, 17, 33, 100, 257, 300 (no multiple
 * of any tile: bm 16 / 64 / 128, bn 32 / 64 / 128) except where a case
 * wants whole tiles. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_gpu.h"

att_case *g_cases;
size_t g_ncases;
static size_t g_cap;

const char *const pipe_names[PIPE_COUNT] = {"auto", "wgmma", "mma", "mfma", "simt", "decode"};

void pipe_select(int pipe) {
  if (pipe == PIPE_AUTO)
    unsetenv("CKJIT_ATTENTION_PIPELINE");
  else
    setenv("CKJIT_ATTENTION_PIPELINE", pipe_names[pipe], 1);
}

/* SIMT runs everywhere; NVIDIA sm_80 and newer have mma.sync, sm_90
 * wgmma.  MFMA is not required (unverified on hardware): where it is
 * refused the test says so and goes on. */
unsigned pipes_required(const ckjit_device_info *info) {
  unsigned need = 1u << PIPE_AUTO | 1u << PIPE_SIMT;
  if (strncmp(info->device_arch, "sm_", 3) == 0) {
    const int sm = atoi(info->device_arch + 3);
    if (sm >= 80) need |= 1u << PIPE_MMA;
    if (sm == 90) need |= 1u << PIPE_WGMMA;
  }
  return need;
}

/* ---- building the list ------------------------------------------------------------------ */

static att_case *add(const char *name, ckjit_dtype dt, int64_t batch, int64_t hq, int64_t hk, int64_t sq,
                     int64_t sk, int64_t dqk, int64_t dv) {
  if (g_ncases == g_cap) {
    g_cap = g_cap ? 2 * g_cap : 64;
    g_cases = realloc(g_cases, g_cap * sizeof *g_cases);
    if (!g_cases) abort();
  }
  att_case *c = &g_cases[g_ncases++];
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "%s", name);
  c->dt = dt, c->batch = batch, c->hq = hq, c->hk = hk, c->sq = sq, c->sk = sk, c->dqk = dqk, c->dv = dv;
  c->layout = LAY_BSHD;
  c->mask = CKJIT_ATTENTION_MASK_NONE;
  c->wl = c->wr = -1;
  c->lse = 1;
  return c;
}

static att_case *window(att_case *c, int64_t left, int64_t right) {
  c->mask = CKJIT_ATTENTION_MASK_WINDOW, c->wl = left, c->wr = right;
  return c;
}

/* Varlen: n entries of the given lengths; sq, sk (the maxima passed) at
 * least the longest, larger where given so. */
static att_case *varlen(att_case *c, int n, const int64_t *lq, const int64_t *lk) {
  c->varlen = 1, c->batch = n;
  for (int b = 0; b < n; b++) {
    c->lens_q[b] = lq[b], c->lens_k[b] = lk[b];
    if (lq[b] > c->sq) c->sq = lq[b];
    if (lk[b] > c->sk) c->sk = lk[b];
  }
  return c;
}

#define BF CKJIT_BF16
#define FH CKJIT_F16
#define F32 CKJIT_F32
#define CAUSAL CKJIT_ATTENTION_MASK_CAUSAL

/* scale 0.5 makes the rows peaky (score spread ~2), so each key's weight
 * matters; the default 1 / sqrt(d) (~0.09) makes them flat. */
static void mask_cases(void) {
  add("none, default scale", BF, 2, 4, 2, 100, 257, 128, 128);
  add("none, lse off", BF, 2, 4, 2, 17, 100, 128, 128)->lse = 0;
  att_case *c = add("causal sq < sk", BF, 2, 4, 2, 100, 257, 128, 128);
  c->mask = CAUSAL, c->scale = 0.5f;
  add("causal sq > sk: masked rows", BF, 2, 2, 2, 257, 100, 128, 128)->mask = CAUSAL;
  add("causal sq == sk", BF, 1, 8, 8, 257, 257, 128, 128)->mask = CAUSAL;
  c = add("causal sq == sk 17, lse off", BF, 3, 2, 1, 17, 17, 128, 128);
  c->mask = CAUSAL, c->lse = 0, c->scale = 0.5f;
  window(add("window 32 / 16", BF, 2, 4, 2, 100, 257, 128, 128), 32, 16)->scale = 0.5f;
  window(add("window left only", BF, 2, 4, 2, 100, 257, 128, 128), 40, -1);
  window(add("window right only, masked rows", BF, 2, 4, 2, 257, 100, 128, 128), -1, 20)->scale = 0.5f;
  window(add("window 24 / 0", BF, 1, 4, 4, 100, 100, 128, 128), 24, 0);
  window(add("window -1 / 0 is causal", BF, 2, 2, 1, 257, 100, 128, 128), -1, 0)->scale = 0.5f;
  window(add("window -1 / -1 is none", BF, 2, 4, 2, 100, 257, 128, 128), -1, -1);
  window(add("window 0 / 0: the diagonal", BF, 1, 2, 2, 100, 100, 128, 128), 0, 0);
  window(add("window 5 / 5, sq > sk", BF, 2, 2, 2, 300, 17, 128, 128), 5, 5)->scale = 0.5f;
  window(add("window 2^40 / 3 (left unbounded)", BF, 1, 4, 2, 100, 257, 128, 128), (int64_t)1 << 40, 3);
  window(add("window 3 / 2^40 (right unbounded)", BF, 1, 4, 2, 100, 257, 128, 128), 3, (int64_t)1 << 40);
}

static void length_cases(void) {
  att_case *c = add("decode sq 1, GQA 8", BF, 3, 8, 1, 1, 257, 128, 128);
  c->mask = CAUSAL;
  add("sq 1, sk 1", BF, 2, 2, 2, 1, 1, 128, 128);
  add("sq 17, sk 17, GQA 4", BF, 1, 4, 1, 17, 17, 128, 128);
  add("sq 1, sk 100, MQA 12", BF, 1, 12, 1, 1, 100, 128, 128)->scale = 0.5f;
  add("sk 0: O 0, LSE -inf", BF, 2, 2, 1, 17, 0, 128, 128);
  add("sk 0 causal", BF, 1, 4, 2, 17, 0, 128, 128)->mask = CAUSAL;
  add("GQA 4, 257 x 257", BF, 1, 8, 2, 257, 257, 128, 128);
  add("sq 257, sk 1", BF, 1, 2, 2, 257, 1, 128, 128);
  add("MHA 3 heads, sq 33, sk 300", BF, 2, 3, 3, 33, 300, 128, 128)->scale = 0.5f;
}

static void layout_cases(void) {
  att_case *c = add("BHSD causal", BF, 2, 4, 2, 100, 257, 128, 128);
  c->layout = LAY_BHSD, c->mask = CAUSAL;
  c = add("packed QKV, GQA 2, causal", BF, 2, 4, 2, 100, 100, 128, 128);
  c->layout = LAY_QKV_PACKED, c->mask = CAUSAL;
  c = add("packed QKV, MHA", BF, 2, 3, 3, 33, 33, 128, 128);
  c->layout = LAY_QKV_PACKED, c->scale = 0.5f;
  c = add("rows padded by 8, O padded", BF, 2, 4, 2, 100, 257, 128, 128);
  c->layout = LAY_SEQ_PAD8, c->pad_out = 1;
  c = add("rows padded by 3 (SIMT only)", BF, 2, 4, 2, 100, 257, 128, 128);
  c->layout = LAY_SEQ_PAD_ODD, c->mask = CAUSAL, c->pad_out = 1;
  c = add("misaligned pointers (SIMT only)", BF, 2, 2, 1, 33, 100, 128, 128);
  c->layout = LAY_MISALIGNED;
  c = add("head-dim stride 2 (SIMT only)", BF, 2, 4, 2, 100, 257, 128, 128);
  c->layout = LAY_DIM_STRIDE2, c->mask = CAUSAL, c->pad_out = 1;
  c = add("K, V batch stride 0", BF, 3, 4, 2, 33, 100, 128, 128);
  c->layout = LAY_KV_BCAST, c->scale = 0.5f;
  c = window(add("Q BHSD, K BSHD, V BHSD", BF, 2, 4, 2, 100, 257, 128, 128), 16, 16);
  c->layout = LAY_MIXED;
}

static void varlen_cases(void) {
  static const int64_t q5[] = {17, 0, 1, 100, 33}, k5[] = {40, 5, 0, 100, 257};
  att_case *c = varlen(add("varlen causal, empty entries", BF, 0, 4, 2, 128, 300, 128, 128), 5, q5, k5);
  c->mask = CAUSAL, c->pad_out = 1, c->odd_batch_stride = 1; /* maxima 128 / 300 above the longest 100 / 257 */
  static const int64_t q4[] = {1, 1, 1, 1}, k4[] = {1, 7, 1, 0};
  varlen(add("varlen length-1 entries", BF, 0, 2, 1, 0, 0, 128, 128), 4, q4, k4)->scale = 0.5f;
  static const int64_t q3[] = {10, 37, 0}, k3[] = {50, 1, 20};
  c = varlen(add("varlen + bias f32", BF, 0, 4, 2, 40, 64, 128, 128), 3, q3, k3);
  c->bias = ATB_F32;
  static const int64_t qa[] = {33, 1, 64}, ka[] = {100, 64, 1};
  c = varlen(add("varlen + ALiBi per entry, MQA", BF, 0, 4, 1, 64, 128, 128, 128), 3, qa, ka);
  c->alibi = ALIBI_PER_BATCH, c->scale = 0.5f;
  static const int64_t qw[] = {100, 20, 5}, kw[] = {100, 257, 3};
  c = window(varlen(add("varlen window, [h][t][d]", BF, 0, 4, 2, 0, 0, 128, 128), 3, qw, kw), 8, 8);
  c->layout = LAY_BHSD;
}

static void feature_cases(void) {
  att_case *c = add("bias f32, batch stride 0", BF, 2, 4, 2, 100, 257, 128, 128);
  c->bias = ATB_F32, c->bias_bcast = BB_BATCH, c->scale = 0.5f;
  c = add("bias bf16, head stride 0, causal", BF, 2, 4, 2, 100, 257, 128, 128);
  c->bias = ATB_DTYPE, c->bias_bcast = BB_HEAD, c->mask = CAUSAL;
  c = add("bias f32 broadcast, -inf entries and row", BF, 2, 4, 2, 33, 100, 128, 128);
  c->bias = ATB_F32, c->bias_bcast = BB_BATCH | BB_HEAD, c->bias_inf = 1;
  c = add("bias bf16, causal sq > sk", BF, 2, 2, 1, 257, 100, 128, 128);
  c->bias = ATB_DTYPE, c->mask = CAUSAL, c->bias_inf = 1;
  c = add("ALiBi per head", BF, 2, 8, 2, 100, 257, 128, 128);
  c->alibi = ALIBI_PER_HEAD;
  c = add("ALiBi per batch entry", BF, 3, 4, 2, 17, 257, 128, 128);
  c->alibi = ALIBI_PER_BATCH, c->lse = 0;
  c = window(add("softcap 2, window 48 / 0", BF, 2, 4, 2, 100, 257, 128, 128), 48, 0);
  c->softcap = 2.0f, c->scale = 0.5f;
  c = window(add("softcap 5, window 16 / 32, lse off", BF, 1, 4, 4, 100, 257, 128, 128), 16, 32);
  c->softcap = 5.0f, c->scale = 0.5f, c->lse = 0;
  c = add("everything, causal sq < sk", BF, 2, 4, 2, 100, 257, 128, 128);
  c->mask = CAUSAL, c->bias = ATB_F32, c->bias_bcast = BB_BATCH, c->alibi = ALIBI_PER_HEAD;
  c->softcap = 3.0f, c->scale = 0.5f, c->pad_out = 1;
  c = add("everything, causal sq > sk", BF, 2, 4, 1, 257, 100, 128, 128);
  c->mask = CAUSAL, c->bias = ATB_F32, c->bias_bcast = BB_HEAD, c->alibi = ALIBI_PER_BATCH;
  c->softcap = 1.5f, c->scale = 0.5f;
}

static void head_dim_cases(void) {
  add("d 64 causal", BF, 2, 4, 2, 100, 257, 64, 64)->mask = CAUSAL;
  att_case *c = add("d 64 causal BHSD", BF, 1, 2, 2, 33, 33, 64, 64);
  c->mask = CAUSAL, c->layout = LAY_BHSD;
  add("d 96", BF, 2, 4, 2, 100, 257, 96, 96)->scale = 0.5f;
  window(add("d 192 window 32 / 16", BF, 2, 4, 2, 100, 257, 192, 192), 32, 16);
  add("d 256 causal", BF, 2, 4, 2, 100, 257, 256, 256)->mask = CAUSAL;
  c = add("d 256 causal packed QKV", BF, 1, 4, 2, 130, 130, 256, 256);
  c->mask = CAUSAL, c->layout = LAY_QKV_PACKED;
  add("d 192 / 128 causal", BF, 2, 4, 2, 100, 257, 192, 128)->mask = CAUSAL;
  c = add("d 192 / 128 causal packed QKV", BF, 2, 4, 2, 65, 65, 192, 128);
  c->mask = CAUSAL, c->layout = LAY_QKV_PACKED;
}

static void dtype_cases(void) {
  add("f16", FH, 2, 4, 2, 100, 257, 128, 128)->scale = 0.5f;
  static const int64_t q3[] = {30, 1, 64}, k3[] = {64, 100, 0};
  varlen(add("f16 varlen", FH, 0, 4, 2, 0, 0, 128, 128), 3, q3, k3);
  att_case *c = add("f16 everything", FH, 2, 4, 2, 100, 257, 128, 128);
  c->mask = CAUSAL, c->bias = ATB_DTYPE, c->alibi = ALIBI_PER_BATCH, c->softcap = 4.0f, c->scale = 0.5f;
  window(add("f16 d 64 window 20 / 5", FH, 2, 4, 2, 257, 100, 64, 64), 20, 5)->scale = 0.5f;
  add("f16 misaligned (SIMT only)", FH, 2, 4, 2, 33, 100, 128, 128)->layout = LAY_MISALIGNED;
  add("f32", F32, 2, 4, 2, 100, 257, 128, 128)->scale = 0.5f;
  c = add("f32 causal sq > sk", F32, 2, 4, 2, 257, 100, 128, 128);
  c->mask = CAUSAL, c->pad_out = 1;
  c = window(add("f32 d 64 everything", F32, 2, 4, 2, 100, 257, 64, 64), 32, 8);
  c->bias = ATB_F32, c->alibi = ALIBI_PER_HEAD, c->softcap = 2.5f, c->scale = 0.5f;
  add("f32 d 256 BHSD", F32, 1, 4, 2, 33, 257, 256, 256)->layout = LAY_BHSD;
  varlen(add("f32 varlen", F32, 0, 4, 2, 0, 0, 128, 128), 3, q3, k3);
  c = add("f32 head-dim stride 2", F32, 2, 2, 1, 33, 100, 128, 128);
  c->layout = LAY_DIM_STRIDE2, c->mask = CAUSAL;
}

/* Many query and key tiles: a sample of rows is checked (and every O
 * element must be finite).  Unmasked dense problems of more tiles than an
 * H100 has multiprocessors (132) run wgmma's persistent grid, each block
 * taking several tiles; masked ones, pairs of tiles. */
static void long_cases(void) {
  att_case *c = add("2048 x 2048 causal (sampled)", BF, 1, 4, 1, 2048, 2048, 128, 128);
  c->mask = CAUSAL, c->sample = 64;
  c = add("300 x 4000 (sampled)", BF, 2, 2, 2, 300, 4000, 128, 128);
  c->sample = 32, c->scale = 0.5f;
  c = add("persistent grid, 288 tiles (sampled)", BF, 2, 16, 4, 1100, 300, 128, 128);
  c->sample = 96, c->scale = 0.5f;
  /* Masked dense problems whose pairs of query tiles fill an H100's 132
   * blocks (attention.c's plan): wgmma walks pairs (m, m_blocks - 1 - m). */
  c = add("paired walk, causal, 256 pairs (sampled)", BF, 2, 32, 8, 1000, 1000, 128, 128);
  c->mask = CAUSAL, c->sample = 48;
  c = window(add("paired walk, odd m_blocks, window (sampled)", BF, 2, 13, 13, 1100, 1100, 128, 128),
             200, 0);
  c->sample = 48;
  c = add("paired walk, d 64, causal sq < sk (sampled)", BF, 4, 16, 4, 700, 900, 64, 64);
  c->mask = CAUSAL, c->sample = 48, c->scale = 0.5f;
}

void build_cases(void) {
  g_ncases = 0;
  mask_cases();
  length_cases();
  layout_cases();
  varlen_cases();
  feature_cases();
  head_dim_cases();
  dtype_cases();
  long_cases();
}
