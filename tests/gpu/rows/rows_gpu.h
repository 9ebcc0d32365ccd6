/* Shared by the sources of the row-ops GPU test (test_rows_gpu): the task
 * description, the tolerance window, input generation, buffer checks and
 * the task list (rows_common.c), and what each op's file exports (its
 * runner, its reference self-checks and its part of the task list).
 *
 * One op per file: rows_reduce.c (ckjit_reduce_rows, ckjit_reduce),
 * rows_softmax.c (softmax / log-softmax), rows_softmax_exact.c (exact rows
 * and the f32 bound), rows_norm.c (layernorm2d, rmsnorm2d, and the
 * normalization of rmsnorm2d_quant), rows_quant.c (the fp8 / int8 codec,
 * rmsnorm2d_quant's quantization, smoothquant), rows_topk.c
 * (topk_softmax), rows_large.c (the > 2^31-element cases);
 * test_rows_gpu.c runs them.
 *
 * Tolerances (u = 2^-24, the f32 unit roundoff; g(n) = 4*sqrt(n) + 8, the
 * growth allowed for an f32 accumulation of n terms; every f32-math bound
 * carries a 2x safety factor unless it is exact): an f16/bf16 (or f32)
 * output is accepted when it lies in [round(ref - err), round(ref + err)]
 * widened by one ulp of the output dtype on each side, where ref is the
 * f64 reference, err the f32-math error bound of the op (stated at the top
 * of the op's file) and round() rounds to the output dtype: i.e. the f64
 * reference rounded to the dtype, +-1 ulp, + the f32 error (within()). */
#ifndef CKJIT_TESTS_GPU_ROWS_GPU_H
#define CKJIT_TESTS_GPU_ROWS_GPU_H

#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "gpu_harness.h"

#define REPORT_MAX 5 /* failures printed per task (the rest are counted) */
#define GUARD 19 /* poisoned elements after every output (and NaN after inputs) */

static const double U = 1.0 / 16777216.0; /* 2^-24 */
static const double Q_WINDOW = 32.0 / 16777216.0;

static inline double growth(double n) { return 4.0 * sqrt(n) + 8.0; }

#define LL(v) ((long long)(v))

/* ---- tolerances (rows_common.c) ---------------------------------------------- */

/* Spacing of the dtype's values at magnitude |a| (subnormals included). */
double ulp_of(ckjit_dtype dt, double a);

/* got, an output of dtype dt, against the f64 reference ref whose f32
 * computation may be off by err: got must lie in [round(ref - err),
 * round(ref + err)] widened by one ulp of dt at each end. */
int within(ckjit_dtype dt, double got, double ref, double err);

/* ---- tasks -------------------------------------------------------------------- */

enum kind { K_REDUCE_ROWS, K_REDUCE_ND, K_SOFTMAX, K_LAYERNORM, K_RMSNORM, K_RMSQUANT, K_SMOOTHQUANT, K_TOPK };
extern const char *const kind_names[];

enum data { D_UNIFORM, D_NEG, D_POS, D_TIES, D_OFFSET, D_WIDE, D_EXACT, D_EXTREME, D_GRID, D_HASHED };
extern const char *const data_names[];

/* Reduce op names, by ckjit_reduce_op. */
extern const char *const op_names[];

typedef struct task {
  enum kind kind;
  int op;               /* reduce op */
  ckjit_dtype dt;       /* input dtype */
  ckjit_dtype odt;      /* reduce: y dtype; quant: q dtype; topk: index dtype */
  int64_t rows, cols;   /* topk: tokens x experts */
  int64_t pad_x, pad_y, pad_r, pad_s; /* ld = cols + pad (y: also q) */
  int64_t off_x, off_y, off_r, off_s, off_w; /* misalignment in elements */
  int data, nan, zero_rows;
  float scale;          /* softmax */
  int log, mask, null_params;
  int inplace;          /* softmax, layernorm: y is x */
  int prepared;         /* softmax: through ckjit_softmax_prepare + ckjit_prepared_run */
  float eps;            /* norms */
  int weight, bias, residual, sum_out, stats;
  int alias;            /* sum_out is 1: residual, 2: x */
  int k, renorm;        /* topk */
  ckjit_tensor_layout layout; /* reduce */
  int dim;
  uint64_t seed;
} task;

/* A fresh gt_check whose context is the task's description. */
void check_begin(gt_check *ck, const task *t);

/* Closes it: the count of the failures not printed. */
void finish(gt_check *ck);

/* ---- buffers and input data (rows_common.c) ------------------------------------- */

/* Every element of b outside the rows x cols matrix at off (row stride ld)
 * must still be poison. */
void check_outside(gt_check *ck, const gt_buf *b, int64_t off, int64_t rows, int64_t cols, int64_t ld,
                   const char *name);

/* Every element of b outside the matrix must still hold its bytes in orig
 * (an in-place output: the input's NaN padding stays). */
void check_outside_unchanged(gt_check *ck, const gt_buf *b, const uint8_t *orig, int64_t off, int64_t rows,
                             int64_t cols, int64_t ld, const char *name);

/* A malloc'ed copy of b's host mirror. */
uint8_t *dup_host(const gt_buf *b);

/* topk grid: multiples of step below K*step, exact in the dtype, 1/256 or
 * more apart (p ratios >= e^(1/256): clearly distinct in f32). */
double grid_step(ckjit_dtype dt);
int64_t grid_k(ckjit_dtype dt);

/* Element (r, c) of a row of n elements, in data mode `mode` (enum data). */
double gen_value(int mode, ckjit_dtype dt, tu_rng *g, int64_t r, int64_t c, int64_t n);

/* Fills a whole input buffer: NaN everywhere (padding, misalignment, guard,
 * so a kernel reading outside the matrix into a result is caught), then the
 * matrix.  Optional NaNs in some rows, optional all-zero rows (r % 7 == 3). */
void fill_matrix(const task *t, gt_buf *b, tu_rng *g, int64_t off, int64_t rows, int64_t cols, int64_t ld,
                 int mode, int nan, int zero_rows);

/* Elements base .. base + n - 1 of a host buffer, as doubles. */
void gather_row(ckjit_dtype dt, const uint8_t *host, int64_t base, int64_t n, double *out);

/* ---- the task list (rows_common.c) ----------------------------------------------- */

extern task *g_tasks;
extern size_t g_ntasks;

/* Appends a task (its seed: the run's seed and its position in the list). */
void add(task t);

/* A task of that kind with the defaults (scale 1, eps 1e-5, k 1, odt = dt). */
task mk(enum kind kind, ckjit_dtype dt, int64_t rows, int64_t cols);

/* Layout variants: 0 aligned and packed; the others pad the row strides
 * (odd ld) and misalign base pointers by one element, forcing scalar paths. */
void apply_variant(task *t, int v);

typedef struct shape {
  int64_t rows, cols;
} shape;

#define NREG 13
extern shape g_reg[NREG];     /* regular shapes: fixed ones, then random */
extern const shape g_big[3]; /* long rows */

/* The whole list: each op's long-row tasks first (so they do not end up as
 * the tail of the run), then each op's regular tasks, in the order
 * reduce, softmax, norms, quantization, topk. */
void build_tasks(uint64_t seed);

/* ---- reference self-checks (run first, GPU or not) ------------------------------ */

/* Counts a failed self-check, printing what. */
void self_check(int ok, const char *what);
int close_to(double a, double b);
/* The failures so far. */
int self_check_failures(void);
/* ulp_of and within (rows_common.c). */
void self_check_tolerances(void);

/* ---- each op's file --------------------------------------------------------------- */

/* rows_reduce.c */
void check_reduce_out(gt_check *ck, int op, const gt_buf *y, size_t yi, const double *v, int64_t n,
                      const char *where);
int run_reduce_rows(const task *t);
int run_reduce_nd(const task *t);
void self_check_reduce(void);
void add_reduce_long_tasks(void);
void add_reduce_tasks(void);

/* rows_softmax.c */
void softmax_ref(const double *x, int64_t n, int64_t valid, double scale, int logm, double *out, double *err);
void check_softmax_row(gt_check *ck, ckjit_dtype dt, const double *ref, const double *err, const gt_buf *y,
                       int64_t base, int64_t C, int64_t r, int64_t valid, const double *xr);
int run_softmax(const task *t);
void self_check_softmax(void);
void add_softmax_long_tasks(void);
void add_softmax_tasks(void);

/* rows_softmax_exact.c: the exactness and f32-bound checks; the number of
 * failed calls (g_sm_calls: the calls made). */
extern int g_sm_calls;
int run_softmax_exact(uint64_t seed);

/* rows_norm.c */
typedef struct norm_ref {
  double mean, var, ms, rstd, dm, rel_r;
} norm_ref;
norm_ref norm_stats(int ln, const double *h, int64_t n, double eps);
double norm_out(int ln, const norm_ref *s, double h, double w, double b, double *err);
int run_norm(const task *t); /* layernorm2d, rmsnorm2d and rmsnorm2d_quant */
void self_check_norm(void);
void add_norm_long_tasks(void);
void add_norm_tasks(void);

/* rows_quant.c */
/* Row r of rmsnorm2d_quant (called by run_norm): h = x (+ residual) of the
 * row, s its statistics; q's row at q_base, row_scale in rs. */
void check_rmsquant_row(gt_check *ck, const task *t, const norm_ref *s, const double *h, const gt_buf *w,
                        const gt_buf *q, int64_t q_base, const gt_buf *rs, int64_t r, double *hw);
int run_smoothquant(const task *t);
/* Prints the count of q values checked and of those accepted at a rounding boundary. */
void report_quant(void);
void self_check_quant(void);
void add_quant_long_tasks(void);
void add_quant_tasks(void);

/* rows_topk.c */
int run_topk(const task *t);
void self_check_topk(void);
void add_topk_tasks(void);

/* rows_large.c: the > 2^31-element cases; failures, *run counts the checks done. */
int run_large(int nthreads, uint64_t seed, int *run);

#endif
