/*
 * bench_gemm's cases (bench/bench_gemm.c): the shapes, orders and variants
 * it measures, and each one's metric name, API and flops.  The names and
 * flops are the records' and bench/peers_gemm.py's: keep them in step.
 */
#ifndef CKJIT_BENCH_GEMM_CASES_H
#define CKJIT_BENCH_GEMM_CASES_H

#include <stddef.h>
#include <stdint.h>

#include "ckjit/ckjit.h"

typedef enum gemm_kind { GK_PLAIN, GK_BIAS_GELU, GK_BATCHED, GK_GROUPED } gemm_kind;

typedef struct gemm_case {
  const char *dname; /* "bf16", "f16", "f32", "tf32" */
  ckjit_dtype dtype; /* ab_dtype and out_dtype */
  int tf32;          /* allow_tf32 */
  gemm_kind kind;
  int64_t m, n, k, batch;
  ckjit_order ao, bo;
  int split_k; /* 0 (automatic), or CKJIT_GEMM_STREAM_K for the "streamk" variants */
} gemm_case;

/* The grouped case's problems (m, n, k), all row-major (keep in sync with
 * GEMM_GROUPED in bench/peers_gemm.py). */
#define GROUPED_COUNT 8
extern const int64_t GROUPED[GROUPED_COUNT][3];

#define BATCH 16     /* the batched case's entries */
#define MAX_CASES 32 /* room for build_cases() */

/* Fills out[] with every case; returns how many. */
int build_cases(gemm_case *out);
/* "4096x4096x4096" or "grouped8". */
void case_shape(const gemm_case *c, char *buf, size_t len);
/* "rr", "cr streamk", "bias_gelu", "batch16", ... */
void case_variant(const gemm_case *c, char *buf, size_t len);
/* "gemm DTYPE SHAPE VARIANT": the record's metric. */
void case_metric(const gemm_case *c, char *buf, size_t len);
/* The API call, as the record names it. */
const char *case_api(const gemm_case *c);
/* Problems of a case: GROUPED_COUNT for grouped, else 1 (with c->batch entries). */
int case_problems(const gemm_case *c, int64_t mnk[][3]);
/* The work both sides are divided by; *formula (if not NULL) says how it is counted. */
double case_flops(const gemm_case *c, const char **formula);

#endif
