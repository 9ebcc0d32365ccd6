/* ckjit-demo's ops: the device and host buffers of one run, each op's
 * call, its timing (first call against DEMO_REPEATS more) and its check
 * against a CPU reference. */
#ifndef CKJIT_TOOLS_DEMO_OPS_H
#define CKJIT_TOOLS_DEMO_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "ckjit/ckjit.h"

#define DEMO_REPEATS 20

typedef struct op_report {
  const char *op;
  ckjit_dtype dtype;
  ckjit_status status; /* of the op calls; SUCCESS when they ran */
  char error[512];     /* first line of ckjit_last_error on failure */
  double first_ms;     /* first call, incl. compile or disk-cache load */
  const char *first_how; /* "compiled", "disk cache", "memory" */
  double repeat_ms;    /* mean of the repeated calls */
  double max_err;      /* largest relative error (0 for exact ops) */
  size_t mismatches;
  int ok;
} op_report;

typedef struct demo {
  int64_t rows, cols;
  size_t n;
  float *a, *b;           /* host inputs (f32, already rounded to the dtype) */
  void *ha, *hb, *hy;     /* host buffers in the dtype */
  void *da, *db, *dy, *dt; /* device buffers */
  void *dpad;             /* rows x ld_pad, for the strided copy */
  int64_t ld_pad;
} demo;

/* Host and device buffers for rows x cols elements (and the padded copy's);
 * 0, or -1 with the reason on stderr (demo_free releases what was made). */
int demo_alloc(demo *d);
void demo_free(demo *d);
/* Fills the inputs for `dt` (random, rounded to it) and uploads them. */
int demo_upload(demo *d, ckjit_dtype dt);
/* Runs op `name` (copy2d, unary, binary, transpose, gemm) on `dt` data:
 * times it, checks it, and reports in *r. */
void demo_run_op(demo *d, ckjit_dtype dt, const char *name, op_report *r);

#endif
