/* The row-wise ops (reductions, softmax, normalizations, rowwise dynamic
 * quantization, MoE gating) given valid arguments on a host without a GPU:
 * every dtype, every option and the extremes the header allows must pass
 * validation and fail with NO_DEVICE (or BACKEND_UNAVAILABLE), never
 * crash: validation must refuse nothing it should accept
 * (test_rows_api_errors.c checks that it refuses what it must).
 * Also the params_init defaults.  Links the shared library (public API
 * only); every call runs on a fresh thread, so its error state is its own
 * (rows_api_call.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "rows_api_call.h"

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
      cmocka_unit_test(test_valid_no_device),
  };
  return cmocka_run_group_tests_name("rows_api_valid", tests, group_setup, ae_group_teardown);
}
