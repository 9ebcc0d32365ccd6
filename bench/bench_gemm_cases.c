/* bench_gemm's cases: see bench_gemm_cases.h. */
#include "bench_gemm_cases.h"

#include <stdio.h>
#include <string.h>

const int64_t GROUPED[GROUPED_COUNT][3] = {
    {1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 1024, 2048}, {1024, 4096, 1024},
    {3072, 3072, 1024}, {2048, 1024, 4096}, {1024, 2048, 3072}, {4096, 4096, 1024}};

int build_cases(gemm_case *out) {
  static const int64_t SQUARE[][3] = {
      {4096, 4096, 4096}, {8192, 8192, 8192}, {1024, 1024, 1024}, {8192, 8192, 1024}};
  static const int64_t DECODE[][3] = {{16, 8192, 8192}, {1, 8192, 8192}, {128, 4096, 4096}};
  const ckjit_order R = CKJIT_ROW_MAJOR, C = CKJIT_COL_MAJOR;
  int n = 0;
  for (int d = 0; d < 2; d++)
    for (size_t s = 0; s < sizeof SQUARE / sizeof SQUARE[0]; s++)
      out[n++] = (gemm_case){d ? "f16" : "bf16", d ? CKJIT_F16 : CKJIT_BF16, 0, GK_PLAIN,
                             SQUARE[s][0], SQUARE[s][1], SQUARE[s][2], 1, R, R, 0};
  for (size_t s = 0; s < sizeof DECODE / sizeof DECODE[0]; s++)
    out[n++] = (gemm_case){"bf16", CKJIT_BF16, 0, GK_PLAIN, DECODE[s][0], DECODE[s][1],
                           DECODE[s][2], 1, R, R, 0};
  out[n++] = (gemm_case){"bf16", CKJIT_BF16, 0, GK_PLAIN, 4096, 4096, 4096, 1, R, C, 0};
  out[n++] = (gemm_case){"bf16", CKJIT_BF16, 0, GK_PLAIN, 4096, 4096, 4096, 1, C, R, 0};
  out[n++] = (gemm_case){"bf16", CKJIT_BF16, 0, GK_PLAIN, 4096, 4096, 4096, 1, C, C, 0};
  out[n++] = (gemm_case){"bf16", CKJIT_BF16, 0, GK_BIAS_GELU, 4096, 4096, 4096, 1, R, R, 0};
  out[n++] = (gemm_case){"f32", CKJIT_F32, 0, GK_PLAIN, 2048, 2048, 2048, 1, R, R, 0};
  out[n++] = (gemm_case){"tf32", CKJIT_F32, 1, GK_PLAIN, 4096, 4096, 4096, 1, R, R, 0};
  out[n++] = (gemm_case){"tf32", CKJIT_F32, 1, GK_PLAIN, 4096, 4096, 4096, 1, R, C, 0};
  out[n++] = (gemm_case){"tf32", CKJIT_F32, 1, GK_PLAIN, 4096, 4096, 4096, 1, C, R, 0};
  out[n++] = (gemm_case){"tf32", CKJIT_F32, 1, GK_PLAIN, 4096, 4096, 4096, 1, C, C, 0};
  out[n++] = (gemm_case){"tf32", CKJIT_F32, 1, GK_PLAIN, 64, 4096, 4096, 1, R, R, 0};
  out[n++] = (gemm_case){"bf16", CKJIT_BF16, 0, GK_BATCHED, 1024, 1024, 1024, BATCH, R, R, 0};
  out[n++] = (gemm_case){"bf16", CKJIT_BF16, 0, GK_GROUPED, 0, 0, 0, 1, R, R, 0};
  /* Stream-K forced, beside the automatic choice of the same shapes. */
  for (size_t s = 0; s < sizeof DECODE / sizeof DECODE[0]; s++)
    out[n++] = (gemm_case){"bf16", CKJIT_BF16, 0, GK_PLAIN, DECODE[s][0], DECODE[s][1],
                           DECODE[s][2], 1, R, R, CKJIT_GEMM_STREAM_K};
  out[n++] = (gemm_case){"bf16", CKJIT_BF16, 0, GK_PLAIN, 1024, 1024, 1024, 1, R, R, CKJIT_GEMM_STREAM_K};
  return n;
}

void case_shape(const gemm_case *c, char *buf, size_t len) {
  if (c->kind == GK_GROUPED) snprintf(buf, len, "grouped%d", GROUPED_COUNT);
  else snprintf(buf, len, "%lldx%lldx%lld", (long long)c->m, (long long)c->n, (long long)c->k);
}

void case_variant(const gemm_case *c, char *buf, size_t len) {
  if (c->kind == GK_BIAS_GELU) snprintf(buf, len, "bias_gelu");
  else if (c->kind == GK_BATCHED) snprintf(buf, len, "batch%lld", (long long)c->batch);
  else snprintf(buf, len, "%c%c%s", c->ao == CKJIT_ROW_MAJOR ? 'r' : 'c',
                c->bo == CKJIT_ROW_MAJOR ? 'r' : 'c', c->split_k == CKJIT_GEMM_STREAM_K ? " streamk" : "");
}

void case_metric(const gemm_case *c, char *buf, size_t len) {
  char shape[64], variant[32];
  case_shape(c, shape, sizeof shape);
  case_variant(c, variant, sizeof variant);
  snprintf(buf, len, "gemm %s %s %s", c->dname, shape, variant);
}

const char *case_api(const gemm_case *c) {
  switch (c->kind) {
  case GK_BIAS_GELU: return "ckjit_gemm (bias per column, activation GELU_TANH)";
  case GK_BATCHED: return "ckjit_gemm (strided batch)";
  case GK_GROUPED: return "ckjit_gemm_grouped (one launch)";
  case GK_PLAIN: break;
  }
  if (c->dtype == CKJIT_F32) return c->tf32 ? "ckjit_gemm (allow_tf32=1)" : "ckjit_gemm (allow_tf32=0)";
  return "ckjit_gemm";
}

int case_problems(const gemm_case *c, int64_t mnk[][3]) {
  if (c->kind == GK_GROUPED) {
    memcpy(mnk, GROUPED, sizeof GROUPED);
    return GROUPED_COUNT;
  }
  mnk[0][0] = c->m;
  mnk[0][1] = c->n;
  mnk[0][2] = c->k;
  return 1;
}

double case_flops(const gemm_case *c, const char **formula) {
  int64_t mnk[GROUPED_COUNT][3];
  int np = case_problems(c, mnk);
  double f = 0;
  for (int p = 0; p < np; p++) f += 2.0 * (double)mnk[p][0] * (double)mnk[p][1] * (double)mnk[p][2];
  f *= (double)c->batch;
  if (formula)
    *formula = c->kind == GK_GROUPED ? "sum over the problems of 2*m*n*k"
               : c->kind == GK_BATCHED ? "2*m*n*k*batch"
                                       : "2*m*n*k";
  return f;
}
