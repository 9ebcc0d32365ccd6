/* Argument validation of ckjit_gemm_fp8 (ckjit/gemm_fp8.h), which must
 * happen before any device work: bad arguments fail with INVALID_ARGUMENT
 * (or UNSUPPORTED where the header leaves the choice open: a known dtype in
 * a role it cannot play) and a message naming the function; valid arguments
 * on a host without a GPU fail with NO_DEVICE (or BACKEND_UNAVAILABLE),
 * never crash.  Also ckjit_gemm_fp8_desc_init's defaults, the test knobs
 * and the epilogue's C / D0 / D1 checks.  Links the shared library (public
 * API only); every call runs on a fresh thread, so its error state is its
 * own.  Pointers are fake, well-aligned device addresses that must never be
 * dereferenced. */
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
#define DC ((const void *)AE_FAKE_DEV(3))
#define DD AE_FAKE_DEV(4)
#define DBIAS ((const void *)AE_FAKE_DEV(5))
#define DSA ((const float *)AE_FAKE_DEV(8))
#define DSB ((const float *)AE_FAKE_DEV(9))

/* ---- one call, described as data so it can run on a fresh thread ---------- */

typedef struct call {
  char what[160];
  int null_descs;
  ckjit_gemm_fp8_desc f;
} call;

static ckjit_status do_call(const void *p) {
  const call *c = p;
  return ckjit_gemm_fp8(c->null_descs ? NULL : &c->f, NULL);
}

/* Runs c on a fresh thread: see ae_expect (the message must name the function). */
static void expect2(call c, ckjit_status want, ckjit_status alt) {
  ae_expect(do_call, &c, "ckjit_gemm_fp8", c.what, want, alt);
}

static void invalid(call c) { expect2(c, CKJIT_ERROR_INVALID_ARGUMENT, CKJIT_SUCCESS); }
/* a known dtype in a role the header does not allow: either status */
static void rejected(call c) { expect2(c, CKJIT_ERROR_INVALID_ARGUMENT, CKJIT_ERROR_UNSUPPORTED); }
static void valid(call c) {
  if (ae_has_device) return;
  expect2(c, CKJIT_ERROR_NO_DEVICE, CKJIT_ERROR_BACKEND_UNAVAILABLE);
}

static int group_setup(void **state) {
  (void)state;
  return ae_group_setup("gemm-fp8-api");
}

/* ---- ckjit_gemm_fp8 ------------------------------------------------------------------- */

/* A valid 4 x 24 x 40 FP8 GEMM with tensor scales: lda 48 and ldb 64
 * (multiples of 16 above k, and unequal, so a bound checked against the
 * wrong operand shows), ldd 24; fake 16-byte-aligned pointers. */
static call fp8_call(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static call fp8_call(const char *fmt, ...) {
  call c;
  memset(&c, 0, sizeof c);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c.what, sizeof c.what, fmt, ap);
  va_end(ap);
  ckjit_gemm_fp8_desc *f = &c.f;
  ckjit_gemm_fp8_desc_init(f);
  f->m = 4, f->n = 24, f->k = 40;
  f->a = DA, f->lda = 48;
  f->b = DB, f->ldb = 64;
  f->d = DD, f->ldd = 24;
  f->scale_a = DSA, f->scale_b = DSB;
  return c;
}

/* Block scales with k 300 (ceil(k / 128) = 3 scale columns, the last block
 * partial) and n 200 (two column blocks of B). */
static call fp8_block_call(const char *what) {
  call c = fp8_call("block scaling, %s", what);
  ckjit_gemm_fp8_desc *f = &c.f;
  f->scaling = CKJIT_FP8_SCALE_BLOCK;
  f->n = 200, f->k = 300, f->lda = 304, f->ldb = 320, f->ldd = 200;
  return c;
}

/* `stmts` (which may use f, the descriptor) on a fresh ckjit_gemm_fp8 call:
 * INVALID_ARGUMENT expected. */
#define BAD_FP8(what, ...) AE_CASE(invalid, fp8_call("%s", what), ckjit_gemm_fp8_desc *f = &c.f; (void)f; __VA_ARGS__)
#define BAD_FP8_BLOCK(what, ...) \
  AE_CASE(invalid, fp8_block_call(what), ckjit_gemm_fp8_desc *f = &c.f; (void)f; __VA_ARGS__)

static void test_fp8_desc_init(void **state) {
  (void)state;
  ckjit_gemm_fp8_desc d;
  memset(&d, 0x77, sizeof d);
  ckjit_gemm_fp8_desc_init(&d);
  assert_int_equal(d.m, 0);
  assert_int_equal(d.n, 0);
  assert_int_equal(d.k, 0);
  assert_int_equal(d.a_dtype, CKJIT_FP8_E4M3);
  assert_int_equal(d.b_dtype, CKJIT_FP8_E4M3);
  assert_int_equal(d.out_dtype, CKJIT_BF16);
  assert_null(d.a);
  assert_int_equal(d.lda, 0);
  assert_null(d.b);
  assert_int_equal(d.ldb, 0);
  assert_null(d.d);
  assert_int_equal(d.ldd, 0);
  assert_int_equal(d.scaling, CKJIT_FP8_SCALE_TENSOR);
  assert_null(d.scale_a);
  assert_null(d.scale_b);
  assert_int_equal(d.ld_scale_a, 0);
  assert_int_equal(d.ld_scale_b, 0);
  assert_true(d.alpha == 1.0f);
  assert_null(d.bias);
  assert_int_equal(d.bias_mode, CKJIT_BIAS_NONE);
  assert_int_equal(d.activation, CKJIT_UNARY_IDENTITY);
  assert_null(d.c);
  assert_int_equal(d.ldc, 0);
  assert_true(d.beta == 0.0f);
  assert_null(d.d0);
  assert_int_equal(d.ldd0, 0);
  assert_null(d.d1);
  assert_int_equal(d.ldd1, 0);
}

static void test_fp8_pointers_and_shapes(void **state) {
  (void)state;
  AE_CASE(invalid, fp8_call("desc NULL"), c.null_descs = 1);
  BAD_FP8("m -1", f->m = -1);
  BAD_FP8("n -1", f->n = -1);
  BAD_FP8("k -1", f->k = -1);
  BAD_FP8("m INT64_MIN", f->m = INT64_MIN);
  BAD_FP8("k INT64_MIN", f->k = INT64_MIN);
  BAD_FP8("a NULL", f->a = NULL);
  BAD_FP8("b NULL", f->b = NULL);
  BAD_FP8("d NULL", f->d = NULL);
  BAD_FP8("scale_a NULL", f->scale_a = NULL);
  BAD_FP8("scale_b NULL", f->scale_b = NULL);
  BAD_FP8("scale_b NULL, k 0", f->k = 0, f->scale_b = NULL); /* "never NULL", even with nothing to scale */
  BAD_FP8_BLOCK("scale_a NULL", f->scale_a = NULL);
  /* the header names no size limit: a refusal of either kind, never NO_DEVICE */
  AE_CASE(rejected, fp8_call("overflowing extent"), c.f.m = c.f.n = c.f.k = c.f.lda = c.f.ldb = c.f.ldd = (int64_t)1 << 58);
  /* m 4, n 24, k 40: lda / ldb 32 are multiples of 16 below k, 56 / 72 are
   * above k but not multiples of 16, 0 is both a multiple and too small */
  BAD_FP8("lda < k", f->lda = 32);
  BAD_FP8("lda 0", f->lda = 0);
  BAD_FP8("lda = m < k", f->lda = 16, f->m = 16);
  BAD_FP8("ldb < k", f->ldb = 32);
  BAD_FP8("ldb 0", f->ldb = 0);
  BAD_FP8("lda negative", f->lda = -48);
  BAD_FP8("ldb negative", f->ldb = -64);
  BAD_FP8("lda not a multiple of 16", f->lda = 56);
  BAD_FP8("lda = k, not a multiple of 16", f->lda = 40);
  BAD_FP8("ldb not a multiple of 16", f->ldb = 72);
  BAD_FP8("ldb = k + 1", f->ldb = 41);
  BAD_FP8("ldd < n", f->ldd = 23);
  BAD_FP8("ldd 0", f->ldd = 0);
  BAD_FP8("ldd negative", f->ldd = -24);
  BAD_FP8("a 8-byte aligned", f->a = (const uint8_t *)DA + 8);
  BAD_FP8("a 1-byte aligned", f->a = (const uint8_t *)DA + 1);
  BAD_FP8("b 4-byte aligned", f->b = (const uint8_t *)DB + 4);
  BAD_FP8("b 2-byte aligned", f->b = (const uint8_t *)DB + 2);
}

static void test_fp8_dtypes_and_enums(void **state) {
  (void)state;
  const ckjit_dtype not_fp8[] = {CKJIT_F32, CKJIT_F16, CKJIT_BF16, CKJIT_I8, CKJIT_I32, CKJIT_I64};
  for (size_t i = 0; i < sizeof not_fp8 / sizeof not_fp8[0]; i++) {
    AE_CASE(rejected, fp8_call("a_dtype %s", ckjit_dtype_name(not_fp8[i])), c.f.a_dtype = not_fp8[i]);
    AE_CASE(rejected, fp8_call("b_dtype %s", ckjit_dtype_name(not_fp8[i])), c.f.b_dtype = not_fp8[i]);
  }
  const ckjit_dtype bad_out[] = {CKJIT_FP8_E4M3, CKJIT_FP8_E5M2, CKJIT_I8, CKJIT_I32, CKJIT_I64};
  for (size_t i = 0; i < sizeof bad_out / sizeof bad_out[0]; i++)
    AE_CASE(rejected, fp8_call("out_dtype %s", ckjit_dtype_name(bad_out[i])), c.f.out_dtype = bad_out[i]);
  BAD_FP8("a_dtype 99", f->a_dtype = (ckjit_dtype)99);
  BAD_FP8("b_dtype -1", f->b_dtype = (ckjit_dtype)-1);
  BAD_FP8("out_dtype 99", f->out_dtype = (ckjit_dtype)99);
  BAD_FP8("out_dtype -1", f->out_dtype = (ckjit_dtype)-1);
  BAD_FP8("scaling 3", f->scaling = (ckjit_fp8_scaling)3);
  BAD_FP8("scaling 7", f->scaling = (ckjit_fp8_scaling)7);
  BAD_FP8("scaling -1", f->scaling = (ckjit_fp8_scaling)-1);
  BAD_FP8_BLOCK("ld_scale_a 2 < ceil(k / 128) = 3", f->ld_scale_a = 2);
  BAD_FP8_BLOCK("ld_scale_a 1", f->ld_scale_a = 1);
  BAD_FP8_BLOCK("ld_scale_a -1", f->ld_scale_a = -1);
  BAD_FP8_BLOCK("ld_scale_b 2 < ceil(k / 128) = 3", f->ld_scale_b = 2);
  BAD_FP8_BLOCK("ld_scale_b 2, ld_scale_a valid", f->ld_scale_a = 5, f->ld_scale_b = 2);
  BAD_FP8_BLOCK("ld_scale_b -3", f->ld_scale_b = -3);
  BAD_FP8_BLOCK("ld_scale_a 1 < 2 blocks of k 129", f->k = 129, f->lda = 144, f->ldb = 144, f->ld_scale_a = 1);
  BAD_FP8("bias given, bias_mode none", f->bias = DBIAS);
  BAD_FP8("bias_mode per row, bias NULL", f->bias_mode = CKJIT_BIAS_PER_ROW);
  BAD_FP8("bias_mode per col, bias NULL", f->bias_mode = CKJIT_BIAS_PER_COL);
  BAD_FP8("bias_mode 3", f->bias = DBIAS, f->bias_mode = (ckjit_bias_mode)3);
  BAD_FP8("bias_mode -1", f->bias = DBIAS, f->bias_mode = (ckjit_bias_mode)-1);
  BAD_FP8("activation 6", f->activation = (ckjit_unary_op)6);
  BAD_FP8("activation -1", f->activation = (ckjit_unary_op)-1);
  BAD_FP8("activation 99", f->activation = (ckjit_unary_op)99);
}

/* Valid descriptors on a host without a GPU: NO_DEVICE (or
 * BACKEND_UNAVAILABLE); m = 0 or n = 0 may also succeed (nothing to do). */
static void test_fp8_valid_no_device(void **state) {
  (void)state;
  AE_SKIP_IF_DEVICE("fp8 no-device");
  const ckjit_dtype fp8s[2] = {CKJIT_FP8_E4M3, CKJIT_FP8_E5M2};
  const ckjit_dtype outs[3] = {CKJIT_F16, CKJIT_BF16, CKJIT_F32};
  for (int ab = 0; ab < 4; ab++)
    for (int o = 0; o < 3; o++)
      for (int s = 0; s < 3; s++) {
        call c = s == 2 ? fp8_block_call("valid") : fp8_call("valid");
        ckjit_gemm_fp8_desc *f = &c.f;
        f->a_dtype = fp8s[ab & 1], f->b_dtype = fp8s[ab >> 1], f->out_dtype = outs[o];
        f->scaling = (ckjit_fp8_scaling)s;
        snprintf(c.what, sizeof c.what, "valid %s x %s -> %s, scaling %d", ckjit_dtype_name(f->a_dtype),
                 ckjit_dtype_name(f->b_dtype), ckjit_dtype_name(f->out_dtype), s);
        valid(c);
      }
  for (int act = 0; act < 6; act++)
    for (int b = 1; b <= 2; b++) {
      call c = fp8_call("valid, bias mode %d, activation %d, alpha -0.5", b, act);
      c.f.bias = DBIAS, c.f.bias_mode = (ckjit_bias_mode)b, c.f.activation = (ckjit_unary_op)act, c.f.alpha = -0.5f;
      valid(c);
    }
  static const int64_t lds[4][2] = {{0, 0}, {3, 3}, {5, 4}, {3, 0}};
  for (int i = 0; i < 4; i++) {
    call c = fp8_block_call("valid ld_scale");
    c.f.ld_scale_a = lds[i][0], c.f.ld_scale_b = lds[i][1];
    valid(c);
  }
  call c = fp8_call("valid, lda = ldb = k = 48, ldd 25, d one element past 16-byte alignment");
  c.f.k = c.f.lda = c.f.ldb = 48, c.f.ldd = 25, c.f.d = (uint8_t *)DD + 2;
  valid(c);
  c = fp8_call("valid, lda 4096, ldb 1024");
  c.f.lda = 4096, c.f.ldb = 1024;
  valid(c);
  c = fp8_block_call("valid, k 0, bias per row");
  c.f.k = 0, c.f.lda = c.f.ldb = 16, c.f.bias = DBIAS, c.f.bias_mode = CKJIT_BIAS_PER_ROW;
  valid(c);
  c = fp8_call("valid, k 1");
  c.f.k = 1;
  valid(c);
  call empty[3] = {fp8_call("m 0"), fp8_block_call("n 0"), fp8_call("m 0, n 0, k 0")};
  empty[0].f.m = 0;
  empty[1].f.n = 0, empty[1].f.ldd = 1;
  empty[2].f.m = empty[2].f.n = empty[2].f.k = 0, empty[2].f.lda = empty[2].f.ldb = 16, empty[2].f.ldd = 1;
  for (int i = 0; i < 3; i++) {
    const ae_result r = ae_run(do_call, &empty[i]);
    if (r.status != CKJIT_SUCCESS && r.status != CKJIT_ERROR_NO_DEVICE &&
        r.status != CKJIT_ERROR_BACKEND_UNAVAILABLE) {
      print_error("ckjit_gemm_fp8: %s got %s, want SUCCESS or NO_DEVICE (%s)\n", empty[i].what,
                  ckjit_status_string(r.status), r.message);
      fail();
    }
  }
}

/* The epilogue's C, D0 and D1: leading dimensions >= n, element
 * alignment of out_dtype, in place only with ldc = ldd. */
static void test_fp8_epilogue_terms(void **state) {
  (void)state;
  const void *const c16 = (const uint8_t *)DC + 2; /* 2-byte aligned: fine for 16-bit D, not f32 */
  BAD_FP8("ldc < n", f->c = DC, f->ldc = 23, f->beta = 1.0f);
  BAD_FP8("ldc 0", f->c = DC, f->beta = 0.5f);
  BAD_FP8("ldd0 < n", f->d0 = DC, f->ldd0 = 8);
  BAD_FP8("ldd1 negative", f->d1 = DC, f->ldd1 = -24);
  BAD_FP8("c misaligned for bf16", f->c = (const uint8_t *)DC + 1, f->ldc = 24, f->beta = 1.0f);
  BAD_FP8("d0 2-byte aligned, f32 out", f->out_dtype = CKJIT_F32, f->d0 = c16, f->ldd0 = 24);
  BAD_FP8("d1 overflowing extent", f->d1 = DC, f->ldd1 = INT64_MAX / 2);
  BAD_FP8("c = d with ldc != ldd", f->c = DD, f->ldc = 32, f->beta = 1.0f);
  BAD_FP8_BLOCK("block: ldc < n", f->c = DC, f->ldc = 199, f->beta = -1.0f);
  AE_CASE(valid, fp8_call("valid: beta C, D0, D1 (bf16, 2-byte aligned)"), c.f.c = c16, c.f.ldc = 24, c.f.beta = 0.5f,
          c.f.d0 = c16, c.f.ldd0 = 40, c.f.d1 = c16, c.f.ldd1 = 24);
  AE_CASE(valid, fp8_call("valid: in place (c = d, ldc = ldd), f32"), c.f.out_dtype = CKJIT_F32, c.f.c = DD,
          c.f.ldc = 24, c.f.beta = 1.0f);
  AE_CASE(valid, fp8_block_call("valid: D1 with gelu"), c.f.d1 = DC, c.f.ldd1 = 256,
          c.f.activation = CKJIT_UNARY_GELU_TANH);
  AE_CASE(valid, fp8_call("valid: c NULL with beta 2 (no C term)"), c.f.beta = 2.0f);
}

/* The test knobs: a malformed value fails the call (before any device
 * work); well-formed ones leave a valid call valid. */
static void test_fp8_knobs(void **state) {
  (void)state;
  static const char *const bad[][2] = {{"CKJIT_GEMM_FP8_CLUSTER", "3"}, {"CKJIT_GEMM_FP8_CLUSTER", "two"},
                                       {"CKJIT_GEMM_FP8_PROMOTE", "-1"}, {"CKJIT_GEMM_FP8_PROMOTE", "65"},
                                       {"CKJIT_GEMM_FP8_PROMOTE", "4x"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv(bad[i][0], bad[i][1], 1);
    invalid(fp8_call("%s=%s", bad[i][0], bad[i][1]));
    unsetenv(bad[i][0]);
  }
  setenv("CKJIT_GEMM_FP8_CLUSTER", "2", 1);
  setenv("CKJIT_GEMM_FP8_PROMOTE", "0", 1);
  valid(fp8_call("valid, CKJIT_GEMM_FP8_CLUSTER=2, CKJIT_GEMM_FP8_PROMOTE=0"));
  unsetenv("CKJIT_GEMM_FP8_CLUSTER");
  unsetenv("CKJIT_GEMM_FP8_PROMOTE");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fp8_desc_init),
      cmocka_unit_test(test_fp8_pointers_and_shapes),
      cmocka_unit_test(test_fp8_dtypes_and_enums),
      cmocka_unit_test(test_fp8_valid_no_device),
      cmocka_unit_test(test_fp8_knobs),
      cmocka_unit_test(test_fp8_epilogue_terms),
  };
  return cmocka_run_group_tests_name("gemm_fp8_api_errors", tests, group_setup, ae_group_teardown);
}
