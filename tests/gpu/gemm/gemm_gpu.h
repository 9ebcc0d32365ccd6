/* Shared by the sources of the GEMM GPU test (test_gemm_gpu): a case's
 * description (gcase) and the case list, built by gemm_cases.c and run by
 * test_gemm_gpu.c (which states the reference and tolerances). */
#ifndef CKJIT_TESTS_GPU_GEMM_GPU_H
#define CKJIT_TESTS_GPU_GEMM_GPU_H

#include <stdint.h>

#include "ckjit/ckjit.h"
#include "gpu_harness.h"

#define GUARD 13 /* poisoned / NaN elements after every buffer */
#define MAXP 20  /* problems per grouped call, at most */
#define LL(x) ((long long)(x))

enum { OA, OB, OC, OD, OD0, OD1, OBIAS, NOPS };
enum { EP_C = 1, EP_INPLACE = 2, EP_BIAS_ROW = 4, EP_BIAS_COL = 8, EP_D0 = 16, EP_D1 = 32 };

typedef struct gcase {
  char name[48];
  ckjit_dtype ab, out;
  ckjit_order ao, bo;
  int np;                  /* problems: 1 ckjit_gemm, > 1 ckjit_gemm_grouped */
  int64_t mnk[MAXP][3];
  int64_t batch;
  unsigned bcast;          /* operands (1 << OA ...) with batch stride 0 */
  int pad, off;            /* leading-dimension padding, pointer misalignment (elements) */
  int d_pad;               /* without pad: padding of D's rows alone */
  int ep, act, split_k, tf32, exact;
  float alpha, beta;
  int sample;              /* > 0: that many random entries + last row and column */
  const char *cluster;     /* CKJIT_GEMM_CLUSTER for the call ("2x1", "1x2"); again with "1x1": the same bits */
} gcase;

/* The cases (gemm_cases.c): built from g_rng (seeded with the run's seed);
 * skip_large leaves out the two large ones. */
extern gcase *g_cases;
extern size_t g_ncases;
extern tu_rng g_rng;
void build_cases(int skip_large);

#endif
