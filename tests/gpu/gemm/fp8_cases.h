/* The FP8 GEMM GPU test's case list (fp8_cases.c builds it, test_gemm_fp8_gpu.c
 * runs it): a case with the defaults, and the list. */
#ifndef CKJIT_TESTS_GPU_GEMM_FP8_CASES_H
#define CKJIT_TESTS_GPU_GEMM_FP8_CASES_H

#include "fp8_reference.h"

/* A case with the defaults (alpha 1, default scale strides, no epilogue). */
enum { TEN = CKJIT_FP8_SCALE_TENSOR, ROW = CKJIT_FP8_SCALE_ROW, BLK = CKJIT_FP8_SCALE_BLOCK };
static inline fcase mk(const char *name, ckjit_dtype at, ckjit_dtype bt, ckjit_dtype out, int sc, int64_t m, int64_t n,
                        int64_t k) {
  fcase c;
  memset(&c, 0, sizeof c);
  snprintf(c.name, sizeof c.name, "%s", name);
  c.at = at, c.bt = bt, c.out = out, c.sc = (ckjit_fp8_scaling)sc;
  c.m = m, c.n = n, c.k = k;
  c.lsa_extra = c.lsb_extra = -1;
  c.alpha = 1.0f;
  return c;
}

/* The cases (fp8_cases.c), in the order they run. */
extern fcase *g_cases;
extern size_t g_ncases;
void build_cases(int skip_large);

#endif
