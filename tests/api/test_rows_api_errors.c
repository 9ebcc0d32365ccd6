/* Argument validation of the row-wise ops (reductions, softmax,
 * normalizations, rowwise dynamic quantization, MoE gating), which must happen
 * before any device work: bad arguments fail with INVALID_ARGUMENT (or
 * UNSUPPORTED where the header leaves the choice open, e.g. a known dtype in
 * a role it cannot play) and a message naming the function; valid arguments
 * on a host without a GPU fail with NO_DEVICE (or BACKEND_UNAVAILABLE), never
 * crash.  Also the params_init defaults.  Links the shared library (public
 * API only); every call runs on a fresh thread, so its error state is its own. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "api_error_util.h"

#define DA ((const void *)AE_FAKE_DEV(1))
#define DB ((const void *)AE_FAKE_DEV(2))
#define DY AE_FAKE_DEV(3)
#define DF ((float *)AE_FAKE_DEV(4))
#define DI AE_FAKE_DEV(5)
#define DV ((const int32_t *)AE_FAKE_DEV(6))
#define DR AE_FAKE_DEV(7)

/* ---- one call, described as data so it can run on a fresh thread ---------- */

enum fn { F_REDUCE, F_REDUCE_ROWS, F_SOFTMAX, F_LAYERNORM, F_RMSNORM, F_RMSQUANT, F_SMOOTHQUANT, F_TOPK,
          F_SOFTMAX_PREPARE, F_PREPARED_RUN };
static const char *fn_names[] = {"ckjit_reduce",    "ckjit_reduce_rows",     "ckjit_softmax",
                                 "ckjit_layernorm2d", "ckjit_rmsnorm2d",     "ckjit_rmsnorm2d_quant",
                                 "ckjit_smoothquant", "ckjit_topk_softmax",  "ckjit_softmax_prepare",
                                 "ckjit_prepared_run"};

typedef struct call {
  char what[160];
  enum fn fn;
  int op;
  ckjit_dtype dtype, odtype; /* odtype: y (reduce), q (quant), indices (topk) */
  int64_t rows, cols;        /* topk: tokens, experts */
  const void *x;
  int64_t ld_x;
  void *y; /* y, q or indices */
  int64_t ld_y;
  ckjit_tensor_layout layout;
  int null_layout;
  int dim;
  ckjit_softmax_params sp;
  ckjit_norm_params np;
  int null_params;
  const float *smooth;
  float *row_scale; /* quant: row_scale; topk: weights */
  int k, renorm;
  int device, null_out;         /* softmax_prepare */
  const ckjit_prepared *prepared; /* prepared_run */
} call;

static ckjit_status do_call(const void *p) {
  const call *c = p;
  switch (c->fn) {
    case F_REDUCE:
      return ckjit_reduce((ckjit_reduce_op)c->op, c->dtype, c->null_layout ? NULL : &c->layout, c->x, c->dim,
                          c->odtype, c->y, NULL);
    case F_REDUCE_ROWS:
      return ckjit_reduce_rows((ckjit_reduce_op)c->op, c->dtype, c->rows, c->cols, c->x, c->ld_x, c->odtype, c->y,
                               NULL);
    case F_SOFTMAX:
      return ckjit_softmax(c->dtype, c->rows, c->cols, c->x, c->ld_x, c->y, c->ld_y, c->null_params ? NULL : &c->sp,
                           NULL);
    case F_LAYERNORM:
      return ckjit_layernorm2d(c->dtype, c->rows, c->cols, c->x, c->ld_x, c->y, c->ld_y,
                               c->null_params ? NULL : &c->np, NULL);
    case F_RMSNORM:
      return ckjit_rmsnorm2d(c->dtype, c->rows, c->cols, c->x, c->ld_x, c->y, c->ld_y,
                             c->null_params ? NULL : &c->np, NULL);
    case F_RMSQUANT:
      return ckjit_rmsnorm2d_quant(c->dtype, c->rows, c->cols, c->x, c->ld_x, c->null_params ? NULL : &c->np,
                                   c->odtype, c->y, c->ld_y, c->row_scale, NULL);
    case F_SMOOTHQUANT:
      return ckjit_smoothquant(c->dtype, c->rows, c->cols, c->x, c->ld_x, c->smooth, c->odtype, c->y, c->ld_y,
                               c->row_scale, NULL);
    case F_TOPK:
      return ckjit_topk_softmax(c->dtype, c->rows, c->cols, c->x, c->ld_x, c->k, c->renorm, c->row_scale,
                                c->odtype, c->y, NULL);
    case F_SOFTMAX_PREPARE: {
      ckjit_prepared *out = (ckjit_prepared *)(uintptr_t)1; /* must come back NULL on failure */
      ckjit_status st = ckjit_softmax_prepare(c->dtype, c->rows, c->cols, c->ld_x, c->ld_y,
                                              c->null_params ? NULL : &c->sp, c->device,
                                              c->null_out ? NULL : &out);
      if (st != CKJIT_SUCCESS && !c->null_out && out) return CKJIT_ERROR_INTERNAL;
      if (st == CKJIT_SUCCESS) ckjit_prepared_free(out);
      return st;
    }
    case F_PREPARED_RUN:
      return ckjit_prepared_run(c->prepared, c->x, c->y, NULL);
  }
  return CKJIT_ERROR_INTERNAL;
}

/* Runs c on a fresh thread: see ae_expect (the message must name the function). */
static void expect2(call c, ckjit_status want, ckjit_status alt) {
  ae_expect(do_call, &c, fn_names[c.fn], c.what, want, alt);
}

static void invalid(call c) { expect2(c, CKJIT_ERROR_INVALID_ARGUMENT, CKJIT_SUCCESS); }
/* a known enum value in a role the header does not allow, or a limit of the
 * op (rank 5, experts > 256, k > 8): either status */
static void rejected(call c) { expect2(c, CKJIT_ERROR_INVALID_ARGUMENT, CKJIT_ERROR_UNSUPPORTED); }
static void valid(call c) {
  if (ae_has_device) return;
  expect2(c, CKJIT_ERROR_NO_DEVICE, CKJIT_ERROR_BACKEND_UNAVAILABLE);
}

static call base(enum fn fn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static call base(enum fn fn, const char *fmt, ...) {
  call c;
  memset(&c, 0, sizeof c);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c.what, sizeof c.what, fmt, ap);
  va_end(ap);
  c.fn = fn;
  c.dtype = CKJIT_F32;
  c.odtype = CKJIT_F32;
  c.rows = 4;
  c.cols = 8;
  c.x = DA;
  c.ld_x = 8;
  c.y = DY;
  c.ld_y = 8;
  ckjit_softmax_params_init(&c.sp);
  ckjit_norm_params_init(&c.np);
  c.smooth = DF;
  c.row_scale = DF;
  c.k = 2;
  return c;
}

static call reduce_rows_call(const char *what, int op, ckjit_dtype dt, ckjit_dtype ydt) {
  call c = base(F_REDUCE_ROWS, "%s", what);
  c.op = op;
  c.dtype = dt;
  c.odtype = ydt;
  return c;
}

static ckjit_tensor_layout layout(int rank, int64_t s0, int64_t s1, int64_t s2, int64_t s3, int64_t t0,
                                  int64_t t1, int64_t t2, int64_t t3) {
  ckjit_tensor_layout L;
  memset(&L, 0, sizeof L);
  L.rank = rank;
  L.shape[0] = s0, L.shape[1] = s1, L.shape[2] = s2, L.shape[3] = s3;
  L.strides[0] = t0, L.strides[1] = t1, L.strides[2] = t2, L.strides[3] = t3;
  return L;
}

static call reduce_call(const char *what, int op, ckjit_dtype dt, ckjit_tensor_layout L, int dim, ckjit_dtype ydt) {
  call c = base(F_REDUCE, "%s", what);
  c.op = op;
  c.dtype = dt;
  c.layout = L;
  c.dim = dim;
  c.odtype = ydt;
  return c;
}

static call topk_call(const char *what, ckjit_dtype dt, int64_t tokens, int64_t experts, int k, ckjit_dtype idt) {
  call c = base(F_TOPK, "%s", what);
  c.dtype = dt;
  c.rows = tokens;
  c.cols = experts;
  c.ld_x = experts > 0 ? experts : 1;
  c.k = k;
  c.odtype = idt;
  c.y = DI;
  return c;
}

/* ---- group setup -------------------------------------------------------- */

static int group_setup(void **state) {
  (void)state;
  return ae_group_setup("rows-api");
}

/* ---- params_init -------------------------------------------------------- */

static void test_params_init(void **state) {
  (void)state;
  ckjit_softmax_params sp;
  memset(&sp, 0x77, sizeof sp);
  ckjit_softmax_params_init(&sp);
  assert_true(sp.scale == 1.0f);
  assert_int_equal(sp.log, 0);
  assert_null(sp.valid_cols);

  ckjit_norm_params np;
  memset(&np, 0x77, sizeof np);
  ckjit_norm_params_init(&np);
  assert_true(np.eps == 1e-5f);
  assert_null(np.weight);
  assert_null(np.bias);
  assert_null(np.residual);
  assert_int_equal(np.ld_residual, 0);
  assert_null(np.sum_out);
  assert_int_equal(np.ld_sum_out, 0);
  assert_null(np.mean_out);
  assert_null(np.rstd_out);
}

/* ---- reductions ------------------------------------------------------------ */

static void test_reduce_rows_invalid(void **state) {
  (void)state;
  const int SUM = CKJIT_REDUCE_SUM, AMAX = CKJIT_REDUCE_ARGMAX;
  AE_CASE(invalid, reduce_rows_call("x NULL", SUM, CKJIT_F32, CKJIT_F32), c.x = NULL);
  AE_CASE(invalid, reduce_rows_call("y NULL", SUM, CKJIT_F32, CKJIT_F32), c.y = NULL);
  AE_CASE(invalid, reduce_rows_call("y NULL (argmax)", AMAX, CKJIT_F16, CKJIT_I64), c.y = NULL);
  AE_CASE(invalid, reduce_rows_call("rows 0", SUM, CKJIT_F32, CKJIT_F32), c.rows = 0);
  AE_CASE(invalid, reduce_rows_call("rows -1", SUM, CKJIT_F32, CKJIT_F32), c.rows = -1);
  AE_CASE(invalid, reduce_rows_call("cols 0", SUM, CKJIT_F32, CKJIT_F32), c.cols = 0);
  AE_CASE(invalid, reduce_rows_call("cols INT64_MIN", SUM, CKJIT_F32, CKJIT_F32), c.cols = INT64_MIN);
  AE_CASE(invalid, reduce_rows_call("ld_x < cols", SUM, CKJIT_F32, CKJIT_F32), c.ld_x = 7);
  AE_CASE(invalid, reduce_rows_call("ld_x negative", SUM, CKJIT_BF16, CKJIT_F32), c.ld_x = -8);
  AE_CASE(invalid, reduce_rows_call("overflow", SUM, CKJIT_BF16, CKJIT_F32), c.rows = c.cols = c.ld_x = INT64_MAX / 2);
  invalid(reduce_rows_call("op 99", 99, CKJIT_F32, CKJIT_F32));
  invalid(reduce_rows_call("op 6", 6, CKJIT_F32, CKJIT_F32));
  invalid(reduce_rows_call("op -1", -1, CKJIT_F32, CKJIT_F32));
  invalid(reduce_rows_call("dtype 99", SUM, (ckjit_dtype)99, CKJIT_F32));
  invalid(reduce_rows_call("dtype -1", SUM, (ckjit_dtype)-1, CKJIT_F32));
  rejected(reduce_rows_call("dtype i8", SUM, CKJIT_I8, CKJIT_F32));
  rejected(reduce_rows_call("dtype fp8", CKJIT_REDUCE_MAX, CKJIT_FP8_E4M3, CKJIT_F32));
  rejected(reduce_rows_call("dtype i32", AMAX, CKJIT_I32, CKJIT_I32));
  rejected(reduce_rows_call("dtype i64", SUM, CKJIT_I64, CKJIT_F32));
  invalid(reduce_rows_call("sum y_dtype 99", SUM, CKJIT_F32, (ckjit_dtype)99));
  rejected(reduce_rows_call("sum y_dtype i32", SUM, CKJIT_F32, CKJIT_I32));
  rejected(reduce_rows_call("mean y_dtype i64", CKJIT_REDUCE_MEAN, CKJIT_F16, CKJIT_I64));
  rejected(reduce_rows_call("max y_dtype i8", CKJIT_REDUCE_MAX, CKJIT_F16, CKJIT_I8));
  rejected(reduce_rows_call("min y_dtype fp8", CKJIT_REDUCE_MIN, CKJIT_BF16, CKJIT_FP8_E4M3));
  invalid(reduce_rows_call("argmax y_dtype 99", AMAX, CKJIT_F32, (ckjit_dtype)99));
  rejected(reduce_rows_call("argmax y_dtype f32", AMAX, CKJIT_F32, CKJIT_F32));
  rejected(reduce_rows_call("argmin y_dtype f16", CKJIT_REDUCE_ARGMIN, CKJIT_F16, CKJIT_F16));
  rejected(reduce_rows_call("argmin y_dtype i8", CKJIT_REDUCE_ARGMIN, CKJIT_BF16, CKJIT_I8));
}

static void test_reduce_invalid(void **state) {
  (void)state;
  const int SUM = CKJIT_REDUCE_SUM;
  const ckjit_tensor_layout ok3 = layout(3, 2, 3, 4, 0, 12, 4, 1, 0);
  AE_CASE(invalid, reduce_call("x NULL", SUM, CKJIT_F32, ok3, 1, CKJIT_F32), c.x = NULL);
  AE_CASE(invalid, reduce_call("y NULL", SUM, CKJIT_F32, ok3, 1, CKJIT_F32), c.y = NULL);
  AE_CASE(invalid, reduce_call("layout NULL", SUM, CKJIT_F32, ok3, 1, CKJIT_F32), c.null_layout = 1);
  invalid(reduce_call("rank 0", SUM, CKJIT_F32, layout(0, 2, 3, 4, 5, 60, 20, 5, 1), 0, CKJIT_F32));
  invalid(reduce_call("rank -1", SUM, CKJIT_F32, layout(-1, 2, 3, 4, 5, 60, 20, 5, 1), 0, CKJIT_F32));
  rejected(reduce_call("rank 5", SUM, CKJIT_F32, layout(5, 2, 3, 4, 5, 60, 20, 5, 1), 0, CKJIT_F32));
  invalid(reduce_call("dim = rank", SUM, CKJIT_F32, ok3, 3, CKJIT_F32));
  invalid(reduce_call("dim 4 (rank 4)", SUM, CKJIT_F32, layout(4, 2, 3, 4, 5, 60, 20, 5, 1), 4, CKJIT_F32));
  invalid(reduce_call("dim -5", SUM, CKJIT_F32, ok3, -5, CKJIT_F32));
  invalid(reduce_call("dim 99", SUM, CKJIT_F32, ok3, 99, CKJIT_F32));
  invalid(reduce_call("negative stride", SUM, CKJIT_F32, layout(3, 2, 3, 4, 0, 12, -4, 1, 0), 1, CKJIT_F32));
  invalid(reduce_call("negative stride in the reduced dim", CKJIT_REDUCE_MAX, CKJIT_F16,
                      layout(2, 3, 4, 0, 0, 4, -1, 0, 0), 1, CKJIT_F16));
  invalid(reduce_call("shape 0", SUM, CKJIT_F32, layout(3, 2, 0, 4, 0, 12, 4, 1, 0), 0, CKJIT_F32));
  invalid(reduce_call("shape -2", SUM, CKJIT_F32, layout(2, -2, 4, 0, 0, 4, 1, 0, 0), 1, CKJIT_F32));
  invalid(reduce_call("extent overflow", SUM, CKJIT_F32,
                      layout(2, 1ll << 40, 1ll << 40, 0, 0, 1ll << 40, 1, 0, 0), 1, CKJIT_F32));
  invalid(reduce_call("huge stride", SUM, CKJIT_F32, layout(2, 3, 4, 0, 0, INT64_MAX, 1, 0, 0), 1, CKJIT_F32));
  invalid(reduce_call("op 99", 99, CKJIT_F32, ok3, 1, CKJIT_F32));
  invalid(reduce_call("op -1", -1, CKJIT_F32, ok3, 1, CKJIT_F32));
  invalid(reduce_call("dtype 99", SUM, (ckjit_dtype)99, ok3, 1, CKJIT_F32));
  rejected(reduce_call("dtype i8", SUM, CKJIT_I8, ok3, 1, CKJIT_F32));
  invalid(reduce_call("y_dtype 99", SUM, CKJIT_F32, ok3, 1, (ckjit_dtype)99));
  rejected(reduce_call("sum y_dtype i64", SUM, CKJIT_F32, ok3, 1, CKJIT_I64));
  rejected(reduce_call("argmax y_dtype bf16", CKJIT_REDUCE_ARGMAX, CKJIT_BF16, ok3, 1, CKJIT_BF16));
  rejected(reduce_call("argmin y_dtype i8", CKJIT_REDUCE_ARGMIN, CKJIT_F32, ok3, 2, CKJIT_I8));
}

/* ---- softmax ---------------------------------------------------------------- */

static void test_softmax_invalid(void **state) {
  (void)state;
  AE_CASE(invalid, base(F_SOFTMAX, "x NULL"), c.x = NULL);
  AE_CASE(invalid, base(F_SOFTMAX, "y NULL"), c.y = NULL);
  AE_CASE(invalid, base(F_SOFTMAX, "rows 0"), c.rows = 0);
  AE_CASE(invalid, base(F_SOFTMAX, "rows -3"), c.rows = -3);
  AE_CASE(invalid, base(F_SOFTMAX, "cols 0"), c.cols = 0);
  AE_CASE(invalid, base(F_SOFTMAX, "ld_x < cols"), c.ld_x = 7);
  AE_CASE(invalid, base(F_SOFTMAX, "ld_y < cols"), c.ld_y = 7);
  AE_CASE(invalid, base(F_SOFTMAX, "overflow"), c.dtype = CKJIT_F16; c.rows = c.cols = c.ld_x = c.ld_y = INT64_MAX / 2);
  AE_CASE(invalid, base(F_SOFTMAX, "dtype 99"), c.dtype = (ckjit_dtype)99);
  AE_CASE(rejected, base(F_SOFTMAX, "dtype i8"), c.dtype = CKJIT_I8);
  AE_CASE(rejected, base(F_SOFTMAX, "dtype i32"), c.dtype = CKJIT_I32);
  AE_CASE(invalid, base(F_SOFTMAX, "y NULL, params NULL"), c.null_params = 1; c.y = NULL);
}

/* ---- prepared softmax -------------------------------------------------------------- */

static void test_softmax_prepare_invalid(void **state) {
  (void)state;
  AE_CASE(invalid, base(F_SOFTMAX_PREPARE, "out NULL"), c.null_out = 1);
  AE_CASE(invalid, base(F_SOFTMAX_PREPARE, "rows 0"), c.rows = 0);
  AE_CASE(invalid, base(F_SOFTMAX_PREPARE, "cols -1"), c.cols = -1);
  AE_CASE(invalid, base(F_SOFTMAX_PREPARE, "ld_x < cols"), c.ld_x = 7);
  AE_CASE(invalid, base(F_SOFTMAX_PREPARE, "ld_y < cols"), c.ld_y = 7);
  AE_CASE(invalid, base(F_SOFTMAX_PREPARE, "overflow"), c.dtype = CKJIT_F16; c.rows = c.cols = c.ld_x = c.ld_y = INT64_MAX / 2);
  AE_CASE(invalid, base(F_SOFTMAX_PREPARE, "dtype 99"), c.dtype = (ckjit_dtype)99);
  AE_CASE(rejected, base(F_SOFTMAX_PREPARE, "dtype i8"), c.dtype = CKJIT_I8);
  AE_CASE(invalid, base(F_SOFTMAX_PREPARE, "log 2"), c.sp.log = 2);
  AE_CASE(rejected, base(F_SOFTMAX_PREPARE, "valid_cols (a per-call operand)"), c.sp.valid_cols = DV);
  /* Not a prepared call: refused before anything is read through it. */
  AE_CASE(invalid, base(F_PREPARED_RUN, "prepared NULL"), c.prepared = NULL);
  static const uint64_t zeros[64];
  AE_CASE(invalid, base(F_PREPARED_RUN, "prepared not from a prepare function"),
          c.prepared = (const ckjit_prepared *)zeros);
  ckjit_prepared_free(NULL); /* nothing */
  call c = base(F_SOFTMAX_PREPARE, "valid, params NULL, current device");
  c.null_params = 1;
  c.device = -1;
  valid(c);
  c = base(F_SOFTMAX_PREPARE, "valid log-softmax, scale 0.5, device 0");
  c.sp.log = 1;
  c.sp.scale = 0.5f;
  c.ld_x = c.ld_y = 24;
  valid(c);
}

/* ---- normalizations ------------------------------------------------------------ */

static void norm_invalid(enum fn fn) {
  AE_CASE(invalid, base(fn, "x NULL"), c.x = NULL);
  AE_CASE(invalid, base(fn, "y NULL"), c.y = NULL);
  AE_CASE(invalid, base(fn, "y NULL, params NULL"), c.y = NULL; c.null_params = 1);
  AE_CASE(invalid, base(fn, "rows 0"), c.rows = 0);
  AE_CASE(invalid, base(fn, "cols -1"), c.cols = -1);
  AE_CASE(invalid, base(fn, "ld_x < cols"), c.ld_x = 3);
  AE_CASE(invalid, base(fn, "ld_y < cols"), c.ld_y = 3);
  AE_CASE(invalid, base(fn, "overflow"), c.dtype = CKJIT_BF16; c.rows = c.cols = c.ld_x = c.ld_y = INT64_MAX / 2);
  AE_CASE(invalid, base(fn, "residual with ld_residual < cols"), c.np.residual = DB; c.np.ld_residual = 7);
  AE_CASE(invalid, base(fn, "residual with ld_residual 0"), c.np.residual = DB);
  AE_CASE(invalid, base(fn, "sum_out with ld_sum_out < cols"),
          c.np.residual = DB; c.np.ld_residual = 8; c.np.sum_out = DR; c.np.ld_sum_out = 5);
  /* "sum_out needs a residual" */
  AE_CASE(rejected, base(fn, "sum_out without residual"), c.np.sum_out = DR; c.np.ld_sum_out = 8);
  AE_CASE(invalid, base(fn, "dtype 99"), c.dtype = (ckjit_dtype)99);
  AE_CASE(invalid, base(fn, "dtype -1"), c.dtype = (ckjit_dtype)-1);
  AE_CASE(rejected, base(fn, "dtype i8"), c.dtype = CKJIT_I8);
  AE_CASE(rejected, base(fn, "dtype fp8"), c.dtype = CKJIT_FP8_E4M3);
}

static void test_layernorm_invalid(void **state) {
  (void)state;
  norm_invalid(F_LAYERNORM);
  /* "A bias needs a weight" */
  AE_CASE(rejected, base(F_LAYERNORM, "bias without weight"), c.np.bias = DB);
  AE_CASE(rejected, base(F_LAYERNORM, "bias without weight, with residual"),
          c.np.bias = DB; c.np.residual = DR; c.np.ld_residual = 8);
}

static void test_rmsnorm_invalid(void **state) {
  (void)state;
  norm_invalid(F_RMSNORM);
}

/* ---- rowwise dynamic quantization ------------------------------------------------ */

static call quant_call(enum fn fn, const char *what, ckjit_dtype dt, ckjit_dtype qdt) {
  call c = base(fn, "%s", what);
  c.dtype = dt;
  c.odtype = qdt;
  return c;
}

static void quant_invalid(enum fn fn) {
  AE_CASE(invalid, quant_call(fn, "x NULL", CKJIT_F32, CKJIT_I8), c.x = NULL);
  AE_CASE(invalid, quant_call(fn, "q NULL", CKJIT_F16, CKJIT_I8), c.y = NULL);
  AE_CASE(invalid, quant_call(fn, "row_scale NULL", CKJIT_BF16, CKJIT_FP8_E4M3), c.row_scale = NULL);
  if (fn == F_SMOOTHQUANT) {
    AE_CASE(invalid, quant_call(fn, "smooth_scale NULL", CKJIT_F32, CKJIT_I8), c.smooth = NULL);
  } else {
    AE_CASE(invalid, quant_call(fn, "q NULL, params NULL", CKJIT_F32, CKJIT_I8), c.y = NULL; c.null_params = 1);
    AE_CASE(invalid, quant_call(fn, "residual with ld_residual < cols", CKJIT_F32, CKJIT_I8),
            c.np.residual = DB; c.np.ld_residual = 2);
    AE_CASE(invalid, quant_call(fn, "sum_out with ld_sum_out < cols", CKJIT_F32, CKJIT_FP8_E4M3),
            c.np.residual = DB; c.np.ld_residual = 8; c.np.sum_out = DR; c.np.ld_sum_out = 7);
    AE_CASE(rejected, quant_call(fn, "sum_out without residual", CKJIT_F32, CKJIT_I8),
            c.np.sum_out = DR; c.np.ld_sum_out = 8);
  }
  AE_CASE(invalid, quant_call(fn, "rows 0", CKJIT_F32, CKJIT_I8), c.rows = 0);
  AE_CASE(invalid, quant_call(fn, "cols 0", CKJIT_F32, CKJIT_I8), c.cols = 0);
  AE_CASE(invalid, quant_call(fn, "ld_x < cols", CKJIT_F32, CKJIT_I8), c.ld_x = 1);
  AE_CASE(invalid, quant_call(fn, "ld_q < cols", CKJIT_F32, CKJIT_FP8_E4M3), c.ld_y = 7);
  AE_CASE(invalid, quant_call(fn, "overflow", CKJIT_F16, CKJIT_I8), c.rows = c.cols = c.ld_x = c.ld_y = INT64_MAX / 2);
  invalid(quant_call(fn, "q_dtype 99", CKJIT_F32, (ckjit_dtype)99));
  invalid(quant_call(fn, "q_dtype -1", CKJIT_F32, (ckjit_dtype)-1));
  rejected(quant_call(fn, "q_dtype f32", CKJIT_F32, CKJIT_F32));
  rejected(quant_call(fn, "q_dtype f16", CKJIT_F16, CKJIT_F16));
  rejected(quant_call(fn, "q_dtype bf16", CKJIT_BF16, CKJIT_BF16));
  rejected(quant_call(fn, "q_dtype fp8 e5m2 (reserved)", CKJIT_F32, CKJIT_FP8_E5M2));
  rejected(quant_call(fn, "q_dtype i32", CKJIT_F32, CKJIT_I32));
  invalid(quant_call(fn, "dtype 99", (ckjit_dtype)99, CKJIT_I8));
  rejected(quant_call(fn, "dtype i8", CKJIT_I8, CKJIT_I8));
  rejected(quant_call(fn, "dtype fp8", CKJIT_FP8_E4M3, CKJIT_FP8_E4M3));
}

static void test_rmsnorm_quant_invalid(void **state) {
  (void)state;
  quant_invalid(F_RMSQUANT);
}

static void test_smoothquant_invalid(void **state) {
  (void)state;
  quant_invalid(F_SMOOTHQUANT);
}

/* ---- MoE gating ------------------------------------------------------------------- */

static void test_topk_invalid(void **state) {
  (void)state;
  AE_CASE(invalid, topk_call("x NULL", CKJIT_F32, 4, 8, 2, CKJIT_I32), c.x = NULL);
  AE_CASE(invalid, topk_call("weights NULL", CKJIT_F32, 4, 8, 2, CKJIT_I32), c.row_scale = NULL);
  AE_CASE(invalid, topk_call("indices NULL", CKJIT_F32, 4, 8, 2, CKJIT_I64), c.y = NULL);
  invalid(topk_call("tokens 0", CKJIT_F32, 0, 8, 2, CKJIT_I32));
  invalid(topk_call("tokens -1", CKJIT_F32, -1, 8, 2, CKJIT_I32));
  invalid(topk_call("experts 0", CKJIT_F32, 4, 0, 1, CKJIT_I32));
  invalid(topk_call("experts -3", CKJIT_F32, 4, -3, 1, CKJIT_I32));
  rejected(topk_call("experts 257", CKJIT_F32, 4, 257, 2, CKJIT_I32));
  rejected(topk_call("experts 1000", CKJIT_BF16, 4, 1000, 8, CKJIT_I64));
  invalid(topk_call("k 0", CKJIT_F32, 4, 8, 0, CKJIT_I32));
  invalid(topk_call("k -1", CKJIT_F32, 4, 8, -1, CKJIT_I32));
  rejected(topk_call("k 9", CKJIT_F32, 4, 64, 9, CKJIT_I32));
  rejected(topk_call("k 9 (256 experts)", CKJIT_F16, 4, 256, 9, CKJIT_I64));
  rejected(topk_call("k > experts (4 > 3)", CKJIT_F32, 4, 3, 4, CKJIT_I32));
  rejected(topk_call("k > experts (2 > 1)", CKJIT_F32, 4, 1, 2, CKJIT_I32));
  AE_CASE(invalid, topk_call("ld_x < experts", CKJIT_F32, 4, 8, 2, CKJIT_I32), c.ld_x = 7);
  AE_CASE(invalid, topk_call("overflow", CKJIT_F32, INT64_MAX / 2, 8, 2, CKJIT_I32), c.ld_x = INT64_MAX / 2);
  invalid(topk_call("index dtype 99", CKJIT_F32, 4, 8, 2, (ckjit_dtype)99));
  rejected(topk_call("index dtype f32", CKJIT_F32, 4, 8, 2, CKJIT_F32));
  rejected(topk_call("index dtype i8", CKJIT_F32, 4, 8, 2, CKJIT_I8));
  invalid(topk_call("dtype 99", (ckjit_dtype)99, 4, 8, 2, CKJIT_I32));
  rejected(topk_call("dtype i8", CKJIT_I8, 4, 8, 2, CKJIT_I32));
  rejected(topk_call("dtype i64", CKJIT_I64, 4, 8, 2, CKJIT_I64));
}

/* ---- valid arguments without a GPU ---------------------------------------------------- */

static void test_valid_no_device(void **state) {
  (void)state;
  AE_SKIP_IF_DEVICE("no-device");
  const ckjit_dtype dts[3] = {CKJIT_F32, CKJIT_F16, CKJIT_BF16};
  char what[160];
  for (int d = 0; d < 3; d++) {
    const ckjit_dtype dt = dts[d];
    /* reduce_rows: every op, y f32 / same dtype / the other half dtype; i32 / i64 */
    for (int op = 0; op < 6; op++) {
      const ckjit_dtype ys[3] = {op >= 4 ? CKJIT_I32 : CKJIT_F32, op >= 4 ? CKJIT_I64 : dt,
                                 op >= 4 ? CKJIT_I64 : (dt == CKJIT_F16 ? CKJIT_BF16 : CKJIT_F16)};
      for (int yi = 0; yi < 3; yi++) {
        snprintf(what, sizeof what, "valid op %d %s->%s", op, ckjit_dtype_name(dt), ckjit_dtype_name(ys[yi]));
        call c = reduce_rows_call(what, op, dt, ys[yi]);
        c.rows = 3;
        c.cols = 1 + 1000 * yi;
        c.ld_x = c.cols + yi;
        valid(c);
      }
    }
    /* reduce: ranks 1..4, every dim, strided, permuted, broadcast (stride 0), size-1 dims */
    const ckjit_tensor_layout Ls[] = {
        layout(1, 1000, 0, 0, 0, 3, 0, 0, 0),
        layout(2, 33, 65, 0, 0, 1, 33, 0, 0),
        layout(3, 6, 5, 33, 0, 165, 33, 1, 0),
        layout(3, 4, 9, 17, 0, 17, 0, 1, 0),
        layout(4, 3, 1, 4, 129, 4 * 132, 4 * 132, 132, 1),
        layout(4, 1, 1, 1, 1, 0, 0, 0, 0),
    };
    for (size_t l = 0; l < sizeof Ls / sizeof Ls[0]; l++)
      for (int dim = 0; dim < Ls[l].rank; dim++) {
        int op = (int)((l + (size_t)dim) % 6);
        snprintf(what, sizeof what, "valid layout %zu dim %d op %d %s", l, dim, op, ckjit_dtype_name(dt));
        valid(reduce_call(what, op, dt, Ls[l], dim, op >= 4 ? CKJIT_I64 : dt));
      }
    /* softmax: params NULL, log, mask, scale */
    call c = base(F_SOFTMAX, "valid, params NULL");
    c.dtype = dt;
    c.null_params = 1;
    valid(c);
    c = base(F_SOFTMAX, "valid, log + mask + scale, padded");
    c.dtype = dt;
    c.sp.log = 1;
    c.sp.scale = 0.125f;
    c.sp.valid_cols = DV;
    c.ld_x = 9;
    c.ld_y = 11;
    valid(c);
    c = base(F_SOFTMAX, "valid, in place (y = x, same ld)");
    c.dtype = dt;
    c.y = (void *)(uintptr_t)DA;
    c.ld_x = c.ld_y = 10;
    c.sp.valid_cols = DV;
    valid(c);
    /* norms: params NULL, defaults, every option, sum_out aliasing residual */
    c = base(F_LAYERNORM, "valid, in place (y = x) with a residual");
    c.dtype = dt;
    c.y = (void *)(uintptr_t)DA;
    c.np.weight = DB;
    c.np.bias = DB;
    c.np.residual = DR;
    c.np.ld_residual = 8;
    valid(c);
    for (enum fn fn = F_LAYERNORM; fn <= F_RMSNORM; fn++) {
      c = base(fn, "valid, params NULL");
      c.dtype = dt;
      c.null_params = 1;
      valid(c);
      c = base(fn, "valid, defaults");
      c.dtype = dt;
      valid(c);
      c = base(fn, "valid, every option");
      c.dtype = dt;
      c.np.eps = 1e-6f;
      c.np.weight = DB;
      if (fn == F_LAYERNORM) {
        c.np.bias = DB;
        c.np.mean_out = DF;
      }
      c.np.residual = DB;
      c.np.ld_residual = 9;
      c.np.sum_out = DR;
      c.np.ld_sum_out = 10;
      c.np.rstd_out = DF;
      valid(c);
      c = base(fn, "valid, sum_out aliasing residual");
      c.dtype = dt;
      c.np.residual = DR;
      c.np.ld_residual = 8;
      c.np.sum_out = DR;
      c.np.ld_sum_out = 8;
      valid(c);
      c = base(fn, "valid, sum_out aliasing x");
      c.dtype = dt;
      c.np.residual = DR;
      c.np.ld_residual = 8;
      c.np.sum_out = (void *)(uintptr_t)DA;
      c.np.ld_sum_out = 8;
      valid(c);
    }
    /* quantization: int8 and fp8 */
    for (int qd = 0; qd < 2; qd++) {
      const ckjit_dtype q = qd ? CKJIT_FP8_E4M3 : CKJIT_I8;
      c = quant_call(F_RMSQUANT, "valid, params NULL", dt, q);
      c.null_params = 1;
      valid(c);
      c = quant_call(F_RMSQUANT, "valid, weight + residual + sum_out + rstd_out", dt, q);
      c.np.weight = DB;
      c.np.residual = DR;
      c.np.ld_residual = 8;
      c.np.sum_out = DR;
      c.np.ld_sum_out = 8;
      c.np.rstd_out = DF;
      c.ld_y = 16;
      valid(c);
      c = quant_call(F_RMSQUANT, "valid, sum_out aliasing x", dt, q);
      c.np.residual = DR;
      c.np.ld_residual = 8;
      c.np.sum_out = (void *)(uintptr_t)DA;
      c.np.ld_sum_out = 8;
      valid(c);
      c = quant_call(F_SMOOTHQUANT, "valid", dt, q);
      c.ld_x = 12;
      c.ld_y = 9;
      valid(c);
    }
    /* topk: the experts / k extremes, both index dtypes, renormalize */
    static const struct {
      int64_t experts;
      int k;
    } ek[] = {{1, 1}, {3, 2}, {8, 8}, {100, 8}, {256, 8}, {256, 1}};
    for (size_t i = 0; i < sizeof ek / sizeof ek[0]; i++)
      for (int rn = 0; rn < 2; rn++) {
        snprintf(what, sizeof what, "valid experts %lld k %d renormalize %d", (long long)ek[i].experts, ek[i].k, rn);
        c = topk_call(what, dt, 5, ek[i].experts, ek[i].k, rn ? CKJIT_I64 : CKJIT_I32);
        c.renorm = rn;
        c.ld_x = ek[i].experts + (int64_t)i;
        valid(c);
      }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_params_init),
      cmocka_unit_test(test_reduce_rows_invalid),
      cmocka_unit_test(test_reduce_invalid),
      cmocka_unit_test(test_softmax_invalid),
      cmocka_unit_test(test_softmax_prepare_invalid),
      cmocka_unit_test(test_layernorm_invalid),
      cmocka_unit_test(test_rmsnorm_invalid),
      cmocka_unit_test(test_rmsnorm_quant_invalid),
      cmocka_unit_test(test_smoothquant_invalid),
      cmocka_unit_test(test_topk_invalid),
      cmocka_unit_test(test_valid_no_device),
  };
  return cmocka_run_group_tests_name("rows_api_errors", tests, group_setup, ae_group_teardown);
}
