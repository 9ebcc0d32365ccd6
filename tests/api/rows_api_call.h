/* One call of a row-wise op (reductions, softmax, normalizations, rowwise
 * dynamic quantization, MoE gating) described as data, so that it can run
 * on a fresh thread with an error state of its own, the builders of such
 * calls, and the checks of their outcome (invalid / rejected / valid).
 * Shared by test_rows_api_errors.c (invalid arguments) and
 * test_rows_api_valid.c (valid ones).  Header-only, static; include after
 * <cmocka.h>. */
#ifndef CKJIT_TESTS_API_ROWS_API_CALL_H
#define CKJIT_TESTS_API_ROWS_API_CALL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
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

static TU_UNUSED ckjit_status do_call(const void *p) {
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
static TU_UNUSED void expect2(call c, ckjit_status want, ckjit_status alt) {
  ae_expect(do_call, &c, fn_names[c.fn], c.what, want, alt);
}

static TU_UNUSED void invalid(call c) { expect2(c, CKJIT_ERROR_INVALID_ARGUMENT, CKJIT_SUCCESS); }
/* a known enum value in a role the header does not allow, or a limit of the
 * op (rank 5, experts > 256, k > 8): either status */
static TU_UNUSED void rejected(call c) { expect2(c, CKJIT_ERROR_INVALID_ARGUMENT, CKJIT_ERROR_UNSUPPORTED); }
static TU_UNUSED void valid(call c) {
  if (ae_has_device) return;
  expect2(c, CKJIT_ERROR_NO_DEVICE, CKJIT_ERROR_BACKEND_UNAVAILABLE);
}

static TU_UNUSED call base(enum fn fn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static TU_UNUSED call base(enum fn fn, const char *fmt, ...) {
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

static TU_UNUSED call reduce_rows_call(const char *what, int op, ckjit_dtype dt, ckjit_dtype ydt) {
  call c = base(F_REDUCE_ROWS, "%s", what);
  c.op = op;
  c.dtype = dt;
  c.odtype = ydt;
  return c;
}

static TU_UNUSED ckjit_tensor_layout layout(int rank, int64_t s0, int64_t s1, int64_t s2, int64_t s3,
                                            int64_t t0, int64_t t1, int64_t t2, int64_t t3) {
  ckjit_tensor_layout L;
  memset(&L, 0, sizeof L);
  L.rank = rank;
  L.shape[0] = s0, L.shape[1] = s1, L.shape[2] = s2, L.shape[3] = s3;
  L.strides[0] = t0, L.strides[1] = t1, L.strides[2] = t2, L.strides[3] = t3;
  return L;
}

static TU_UNUSED call reduce_call(const char *what, int op, ckjit_dtype dt, ckjit_tensor_layout L, int dim,
                                  ckjit_dtype ydt) {
  call c = base(F_REDUCE, "%s", what);
  c.op = op;
  c.dtype = dt;
  c.layout = L;
  c.dim = dim;
  c.odtype = ydt;
  return c;
}

static TU_UNUSED call topk_call(const char *what, ckjit_dtype dt, int64_t tokens, int64_t experts, int k,
                                ckjit_dtype idt) {
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

static TU_UNUSED call quant_call(enum fn fn, const char *what, ckjit_dtype dt, ckjit_dtype qdt) {
  call c = base(fn, "%s", what);
  c.dtype = dt;
  c.odtype = qdt;
  return c;
}

/* ---- group setup -------------------------------------------------------- */

static TU_UNUSED int group_setup(void **state) {
  (void)state;
  return ae_group_setup("rows-api");
}

#endif
