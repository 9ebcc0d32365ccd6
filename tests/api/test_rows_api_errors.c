/* Argument validation of the row-wise ops (reductions, softmax,
 * normalizations, rowwise dynamic quantization, MoE gating), which must happen
 * before any device work: bad arguments fail with INVALID_ARGUMENT (or
 * UNSUPPORTED where the header leaves the choice open, e.g. a known dtype in
 * a role it cannot play) and a message naming the function, never crash.
 * Valid arguments and the params_init defaults: test_rows_api_valid.c.
 * Links the shared library (public API only); every call runs on a fresh
 * thread, so its error state is its own (rows_api_call.h). */
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
#include "rows_api_call.h"

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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reduce_rows_invalid),
      cmocka_unit_test(test_reduce_invalid),
      cmocka_unit_test(test_softmax_invalid),
      cmocka_unit_test(test_softmax_prepare_invalid),
      cmocka_unit_test(test_layernorm_invalid),
      cmocka_unit_test(test_rmsnorm_invalid),
      cmocka_unit_test(test_rmsnorm_quant_invalid),
      cmocka_unit_test(test_smoothquant_invalid),
      cmocka_unit_test(test_topk_invalid),
  };
  return cmocka_run_group_tests_name("rows_api_errors", tests, group_setup, ae_group_teardown);
}
