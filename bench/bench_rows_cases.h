/*
 * bench_rows' cases (bench/bench_rows.c): the row-wise ops and shapes it
 * measures, each one's metric name, API and bytes.  The names and bytes are
 * the records' and bench/peers_rows.py's: keep them in step.
 */
#ifndef CKJIT_BENCH_ROWS_CASES_H
#define CKJIT_BENCH_ROWS_CASES_H

#include <stddef.h>
#include <stdint.h>

typedef enum row_op {
  ROP_SOFTMAX,
  ROP_LAYERNORM,
  ROP_RMSNORM,
  ROP_SUM,
  ROP_RMSNORM_QUANT,
  ROP_SMOOTHQUANT,
  ROP_TOPK,
  ROP_COUNT_
} row_op;

extern const char *const op_names[ROP_COUNT_]; /* "softmax", ... (--only, metrics) */
extern const char *const op_apis[ROP_COUNT_];  /* the API call, as the records name it */

#define MAX_CASES 64 /* room for build_cases() */
#define ELEM 2       /* bf16 */

typedef struct row_case {
  row_op op;
  int64_t rows, cols; /* topk_softmax: tokens, experts */
  int k;              /* topk_softmax only */
} row_case;

/* Bytes each case moves at least, read + written, for a bf16 input (e = 2
 * bytes) of R rows x C cols.  THE definition behind every GB/s of the row-wise
 * benchmarks: bench/peers_rows.py rows_bytes() mirrors it term by term for the
 * torch peers (torch's extra traffic, e.g. the f32 temporaries of its unfused
 * sequences, is not counted: both sides are divided by the same bytes, so
 * GB/s ratios are time ratios) and make_results.py refuses a comparison when
 * the "bytes" of the two records differ.  Row vectors (weight, bias, smooth
 * scale) count once; per-row outputs are counted, per-row statistics the op
 * does not write (mean, rstd) are not.  The reference, torch.clone, moves
 * 2*R*C*e. */
double rows_bytes(const row_case *c, const char **formula);
/* Fills out[] with every case; returns how many. */
int build_cases(row_case *out);
/* "8192x8192" (topk_softmax: tokens x experts). */
void case_shape(const row_case *c, char *buf, size_t len);
/* "rows OP bf16 SHAPE" (topk_softmax: " kK" after): the record's metric. */
void case_metric(const row_case *c, char *buf, size_t len);

#endif
