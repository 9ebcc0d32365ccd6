/* bench_rows' cases: see bench_rows_cases.h. */
#include "bench_rows_cases.h"

#include <stdio.h>

const char *const op_names[ROP_COUNT_] = {
    "softmax", "layernorm", "rmsnorm", "sum", "rmsnorm_quant", "smoothquant", "topk_softmax"};
const char *const op_apis[ROP_COUNT_] = {
    "ckjit_softmax",
    "ckjit_layernorm2d (weight, bias)",
    "ckjit_rmsnorm2d (weight)",
    "ckjit_reduce_rows(SUM, y bf16)",
    "ckjit_rmsnorm2d_quant (residual, sum_out, weight; int8)",
    "ckjit_smoothquant (f32 smooth scale; int8)",
    "ckjit_topk_softmax (renormalize=1, i32 indices)"};

static const int64_t ROW_SHAPES[][2] = {{8192, 8192}, {4096, 16384}, {32768, 1024},
                                        {16, 65536},  {64, 1048576}, {1, 16777216}};
static const int64_t QUANT_SHAPES[][2] = {{8192, 8192}, {4096, 16384}};
static const int64_t TOPK_TOKENS = 32768;
static const int64_t TOPK_EXPERTS[] = {64, 128, 256};
static const int TOPK_KS[] = {2, 8};

double rows_bytes(const row_case *c, const char **formula) {
  const double R = (double)c->rows, C = (double)c->cols, e = ELEM, k = c->k;
  const char *f = "";
  double b = 0;
  switch (c->op) {
  case ROP_SOFTMAX:
    f = "2*R*C*e (x read, y written)";
    b = 2 * R * C * e;
    break;
  case ROP_LAYERNORM:
    f = "2*R*C*e + 2*C*e (x, y; weight, bias)";
    b = 2 * R * C * e + 2 * C * e;
    break;
  case ROP_RMSNORM:
    f = "2*R*C*e + C*e (x, y; weight)";
    b = 2 * R * C * e + C * e;
    break;
  case ROP_SUM:
    f = "R*C*e + R*e (x read; one bf16 per row written)";
    b = R * C * e + R * e;
    break;
  case ROP_RMSNORM_QUANT:
    f = "3*R*C*e + R*C + C*e + 4*R (x, residual read, sum written; int8 q; weight; "
        "f32 row scales)";
    b = 3 * R * C * e + R * C + C * e + 4 * R;
    break;
  case ROP_SMOOTHQUANT:
    f = "R*C*e + R*C + 4*C + 4*R (x; int8 q; f32 smooth scale; f32 row scales)";
    b = R * C * e + R * C + 4 * C + 4 * R;
    break;
  case ROP_TOPK:
    f = "T*E*e + 8*T*k (x read; f32 weights and i32 indices written)";
    b = R * C * e + 8 * R * k;
    break;
  case ROP_COUNT_:
    break;
  }
  if (formula) *formula = f;
  return b;
}

int build_cases(row_case *out) {
  int n = 0;
  for (int op = ROP_SOFTMAX; op <= ROP_SUM; op++)
    for (size_t s = 0; s < sizeof ROW_SHAPES / sizeof ROW_SHAPES[0]; s++)
      out[n++] = (row_case){(row_op)op, ROW_SHAPES[s][0], ROW_SHAPES[s][1], 0};
  for (int op = ROP_RMSNORM_QUANT; op <= ROP_SMOOTHQUANT; op++)
    for (size_t s = 0; s < sizeof QUANT_SHAPES / sizeof QUANT_SHAPES[0]; s++)
      out[n++] = (row_case){(row_op)op, QUANT_SHAPES[s][0], QUANT_SHAPES[s][1], 0};
  for (size_t e = 0; e < sizeof TOPK_EXPERTS / sizeof TOPK_EXPERTS[0]; e++)
    for (size_t k = 0; k < sizeof TOPK_KS / sizeof TOPK_KS[0]; k++)
      out[n++] = (row_case){ROP_TOPK, TOPK_TOKENS, TOPK_EXPERTS[e], TOPK_KS[k]};
  return n;
}

void case_shape(const row_case *c, char *buf, size_t len) {
  snprintf(buf, len, "%lldx%lld", (long long)c->rows, (long long)c->cols);
}

void case_metric(const row_case *c, char *buf, size_t len) {
  char shape[64];
  case_shape(c, shape, sizeof shape);
  if (c->op == ROP_TOPK) snprintf(buf, len, "rows %s bf16 %s k%d", op_names[c->op], shape, c->k);
  else snprintf(buf, len, "rows %s bf16 %s", op_names[c->op], shape);
}
