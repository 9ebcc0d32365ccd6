/* Argument validation of ckjit_gemm and ckjit_gemm_grouped (ckjit_gemm_fp8's:
 * test_gemm_fp8_api_errors.c), which must happen
 * before any device work: bad arguments fail with INVALID_ARGUMENT (or
 * UNSUPPORTED where the header leaves the choice open: a known dtype in a
 * role it cannot play) and a message naming the function; valid arguments on
 * a host without a GPU fail with NO_DEVICE (or BACKEND_UNAVAILABLE), never
 * crash.  Also ckjit_gemm_desc_init's defaults.  Links the shared library
 * (public API only); every call runs on a fresh thread, so its error state is
 * its own.  Pointers are fake, well-aligned device addresses that must never
 * be dereferenced. */
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
#define DD0 ((const void *)AE_FAKE_DEV(6))
#define DD1 ((const void *)AE_FAKE_DEV(7))

#define MAXG 4

/* ---- one call, described as data so it can run on a fresh thread ---------- */

typedef struct call {
  char what[160];
  int grouped;
  int null_descs;
  int count;
  ckjit_gemm_desc d[MAXG];
} call;

static const char *fn_name(const call *c) {
  return c->grouped ? "ckjit_gemm_grouped" : "ckjit_gemm";
}

static ckjit_status do_call(const void *p) {
  const call *c = p;
  if (c->grouped) return ckjit_gemm_grouped(c->null_descs ? NULL : c->d, c->count, NULL);
  return ckjit_gemm(c->null_descs ? NULL : &c->d[0], NULL);
}

/* Runs c on a fresh thread: see ae_expect (the message must name the function). */
static void expect2(call c, ckjit_status want, ckjit_status alt) {
  ae_expect(do_call, &c, fn_name(&c), c.what, want, alt);
}

static void invalid(call c) { expect2(c, CKJIT_ERROR_INVALID_ARGUMENT, CKJIT_SUCCESS); }
/* a known dtype in a role the header does not allow: either status */
static void rejected(call c) { expect2(c, CKJIT_ERROR_INVALID_ARGUMENT, CKJIT_ERROR_UNSUPPORTED); }
static void valid(call c) {
  if (ae_has_device) return;
  expect2(c, CKJIT_ERROR_NO_DEVICE, CKJIT_ERROR_BACKEND_UNAVAILABLE);
}

/* A valid 4 x 8 x 16 bf16 GEMM, row-major A (lda 16) and B (ldb 8), ldd 8. */
static ckjit_gemm_desc base_desc(void) {
  ckjit_gemm_desc d;
  ckjit_gemm_desc_init(&d);
  d.m = 4, d.n = 8, d.k = 16;
  d.a = DA, d.lda = 16;
  d.b = DB, d.ldb = 8;
  d.d = DD, d.ldd = 8;
  return d;
}

static call gemm_call(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static call gemm_call(const char *fmt, ...) {
  call c;
  memset(&c, 0, sizeof c);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c.what, sizeof c.what, fmt, ap);
  va_end(ap);
  c.count = 1;
  for (int i = 0; i < MAXG; i++) c.d[i] = base_desc();
  return c;
}

/* Three problems of different shapes and pointers, otherwise alike. */
static call grouped_call(const char *what) {
  call c = gemm_call("%s", what);
  c.grouped = 1;
  c.count = 3;
  for (int i = 0; i < 3; i++) {
    ckjit_gemm_desc *d = &c.d[i];
    d->m = 4 + 3 * i, d->n = 8 + i, d->k = 16 + 5 * i;
    d->lda = d->k, d->ldb = d->n, d->ldd = d->n;
    d->a = (const uint8_t *)DA + 0x10000 * i;
    d->b = (const uint8_t *)DB + 0x10000 * i;
    d->d = (uint8_t *)DD + 0x10000 * i;
  }
  return c;
}

/* Runs `stmts` (which may use d, a pointer to the first descriptor, and c)
 * on a fresh ckjit_gemm call and expects INVALID_ARGUMENT. */
#define BAD(what, ...) \
  AE_CASE(invalid, gemm_call("%s", what), ckjit_gemm_desc *d = &c.d[0]; (void)d; __VA_ARGS__)

/* The same for a grouped call of three problems (g = the descriptors). */
#define BAD_GROUPED(what, ...) \
  AE_CASE(invalid, grouped_call(what), ckjit_gemm_desc *g = c.d; (void)g; __VA_ARGS__)

/* ---- group setup -------------------------------------------------------- */

static int group_setup(void **state) {
  (void)state;
  return ae_group_setup("gemm-api");
}

/* ---- desc_init ------------------------------------------------------------ */

static void test_desc_init(void **state) {
  (void)state;
  ckjit_gemm_desc d;
  memset(&d, 0x77, sizeof d);
  ckjit_gemm_desc_init(&d);
  assert_int_equal(d.m, 0);
  assert_int_equal(d.n, 0);
  assert_int_equal(d.k, 0);
  assert_int_equal(d.ab_dtype, CKJIT_BF16);
  assert_int_equal(d.out_dtype, CKJIT_BF16);
  assert_null(d.a);
  assert_int_equal(d.lda, 0);
  assert_int_equal(d.a_order, CKJIT_ROW_MAJOR);
  assert_null(d.b);
  assert_int_equal(d.ldb, 0);
  assert_int_equal(d.b_order, CKJIT_ROW_MAJOR);
  assert_null(d.d);
  assert_int_equal(d.ldd, 0);
  assert_null(d.c);
  assert_int_equal(d.ldc, 0);
  assert_true(d.alpha == 1.0f);
  assert_true(d.beta == 0.0f);
  assert_null(d.bias);
  assert_int_equal(d.bias_mode, CKJIT_BIAS_NONE);
  assert_int_equal(d.activation, CKJIT_UNARY_IDENTITY);
  assert_null(d.d0);
  assert_int_equal(d.ldd0, 0);
  assert_null(d.d1);
  assert_int_equal(d.ldd1, 0);
  assert_int_equal(d.batch, 1);
  assert_int_equal(d.stride_a, 0);
  assert_int_equal(d.stride_b, 0);
  assert_int_equal(d.stride_c, 0);
  assert_int_equal(d.stride_d, 0);
  assert_int_equal(d.stride_d0, 0);
  assert_int_equal(d.stride_d1, 0);
  assert_int_equal(d.split_k, 0);
  assert_int_equal(d.allow_tf32, 0);
}

/* ---- ckjit_gemm ------------------------------------------------------------------ */

static void test_gemm_pointers_and_shapes(void **state) {
  (void)state;
  AE_CASE(invalid, gemm_call("desc NULL"), c.null_descs = 1);
  BAD("a NULL", d->a = NULL);
  BAD("b NULL", d->b = NULL);
  BAD("d NULL", d->d = NULL);
  BAD("a NULL, batch 2", d->a = NULL, d->batch = 2, d->stride_a = 64, d->stride_b = 128, d->stride_d = 32);
  BAD("m -1", d->m = -1);
  BAD("n -1", d->n = -1);
  BAD("k -1", d->k = -1);
  BAD("m INT64_MIN", d->m = INT64_MIN);
  BAD("k INT64_MIN", d->k = INT64_MIN);
  BAD("batch 0", d->batch = 0);
  BAD("batch -1", d->batch = -1);
  BAD("overflowing extent", d->m = d->n = d->k = d->lda = d->ldb = d->ldd = INT64_MAX / 2);
  BAD("overflowing batch", d->batch = INT64_MAX / 2, d->stride_a = 64, d->stride_b = 128, d->stride_d = 32);
  BAD("overflowing batch stride", d->batch = 4, d->stride_a = INT64_MAX / 2, d->stride_b = 128, d->stride_d = 32);
  BAD("negative stride_a", d->batch = 2, d->stride_a = -64, d->stride_b = 128, d->stride_d = 32);
  BAD("negative stride_d", d->batch = 2, d->stride_a = 64, d->stride_b = 128, d->stride_d = -32);
}

static void test_gemm_dtypes_and_enums(void **state) {
  (void)state;
  BAD("ab_dtype 99", d->ab_dtype = (ckjit_dtype)99);
  BAD("ab_dtype -1", d->ab_dtype = (ckjit_dtype)-1);
  BAD("out_dtype 99", d->out_dtype = (ckjit_dtype)99);
  BAD("out_dtype -1", d->out_dtype = (ckjit_dtype)-1);
  const ckjit_dtype bad[] = {CKJIT_I8, CKJIT_FP8_E4M3, CKJIT_FP8_E5M2, CKJIT_I32, CKJIT_I64};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    AE_CASE(rejected, gemm_call("ab_dtype %s", ckjit_dtype_name(bad[i])), c.d[0].ab_dtype = bad[i]);
    AE_CASE(rejected, gemm_call("out_dtype %s", ckjit_dtype_name(bad[i])), c.d[0].out_dtype = bad[i]);
  }
  BAD("a_order 2", d->a_order = (ckjit_order)2);
  BAD("a_order -1", d->a_order = (ckjit_order)-1);
  BAD("b_order 2", d->b_order = (ckjit_order)2);
  BAD("bias_mode 3", d->bias = DBIAS, d->bias_mode = (ckjit_bias_mode)3);
  BAD("bias_mode -1", d->bias = DBIAS, d->bias_mode = (ckjit_bias_mode)-1);
  BAD("bias_mode per row, bias NULL", d->bias_mode = CKJIT_BIAS_PER_ROW);
  BAD("bias_mode per col, bias NULL", d->bias_mode = CKJIT_BIAS_PER_COL);
  BAD("activation 6", d->activation = (ckjit_unary_op)6);
  BAD("activation -1", d->activation = (ckjit_unary_op)-1);
  BAD("activation 99", d->activation = (ckjit_unary_op)99);
  BAD("split_k -2", d->split_k = -2);
  BAD("split_k INT_MIN", d->split_k = -2147483647 - 1);
  BAD("allow_tf32 with f16 inputs", d->ab_dtype = CKJIT_F16, d->allow_tf32 = 1);
  BAD("allow_tf32 with bf16 inputs", d->ab_dtype = CKJIT_BF16, d->out_dtype = CKJIT_F32, d->allow_tf32 = 1);
}

/* m 4, n 8, k 16: each bound differs from the others, so a check against the
 * wrong extent shows. */
static void test_gemm_leading_dimensions(void **state) {
  (void)state;
  BAD("row-major A, lda < k", d->lda = 15);
  BAD("row-major A, lda = m < k", d->lda = 4);
  BAD("col-major A, lda < m", d->a_order = CKJIT_COL_MAJOR, d->lda = 3);
  BAD("row-major B, ldb < n", d->ldb = 7);
  BAD("col-major B, ldb < k", d->b_order = CKJIT_COL_MAJOR, d->ldb = 15);
  BAD("col-major B, ldb = n < k", d->b_order = CKJIT_COL_MAJOR, d->ldb = 8);
  BAD("ldd < n", d->ldd = 7);
  BAD("ldd 0", d->ldd = 0);
  BAD("lda negative", d->lda = -16);
  BAD("ldb negative", d->ldb = -8);
  BAD("ldd negative", d->ldd = -8);
  BAD("ldc < n", d->c = DC, d->ldc = 7, d->beta = 1.0f);
  BAD("ldc 0", d->c = DC, d->ldc = 0, d->beta = 1.0f);
  BAD("c is d with another ldc", d->c = d->d, d->ldc = d->ldd + 1, d->beta = 1.0f);
  BAD("c is d with another stride", d->c = d->d, d->ldc = d->ldd, d->stride_c = d->stride_d + 64,
      d->beta = 1.0f);
  BAD("ldd0 < n", d->d0 = DD0, d->ldd0 = 7);
  BAD("ldd0 0", d->d0 = DD0, d->ldd0 = 0);
  BAD("ldd1 < n", d->d1 = DD1, d->ldd1 = 7);
  BAD("ldd1 negative", d->d1 = DD1, d->ldd1 = -8);
  BAD("col-major A, f32, lda < m", d->ab_dtype = CKJIT_F32, d->out_dtype = CKJIT_F32, d->a_order = CKJIT_COL_MAJOR,
      d->m = 40, d->lda = 39);
}

/* ---- ckjit_gemm_grouped ----------------------------------------------------------- */

static void test_grouped_invalid(void **state) {
  (void)state;
  BAD_GROUPED("count 0", c.count = 0);
  BAD_GROUPED("count -1", c.count = -1);
  BAD_GROUPED("count INT_MIN", c.count = -2147483647 - 1);
  BAD_GROUPED("descs NULL", c.null_descs = 1);
  BAD_GROUPED("ab_dtype differs", g[1].ab_dtype = CKJIT_F16);
  BAD_GROUPED("out_dtype differs", g[2].out_dtype = CKJIT_F32);
  BAD_GROUPED("a_order differs", g[1].a_order = CKJIT_COL_MAJOR, g[1].lda = g[1].m);
  BAD_GROUPED("b_order differs", g[2].b_order = CKJIT_COL_MAJOR, g[2].ldb = g[2].k);
  BAD_GROUPED("activation differs", g[1].activation = CKJIT_UNARY_RELU);
  BAD_GROUPED("bias_mode differs", g[0].bias = DBIAS, g[0].bias_mode = CKJIT_BIAS_PER_ROW);
  BAD_GROUPED("bias_mode row vs col", for (int i = 0; i < 3; i++) g[i].bias = DBIAS;
              g[0].bias_mode = g[1].bias_mode = CKJIT_BIAS_PER_ROW; g[2].bias_mode = CKJIT_BIAS_PER_COL);
  BAD_GROUPED("allow_tf32 differs", for (int i = 0; i < 3; i++) g[i].ab_dtype = g[i].out_dtype = CKJIT_F32;
              g[1].allow_tf32 = 1);
  BAD_GROUPED("d0 given in one problem only", g[2].d0 = DD0, g[2].ldd0 = g[2].n);
  BAD_GROUPED("d1 missing in one problem", for (int i = 1; i < 3; i++) g[i].d1 = DD1, g[i].ldd1 = g[i].n);
  BAD_GROUPED("a problem with batch 2", g[1].batch = 2, g[1].stride_a = 1024, g[1].stride_b = 1024,
              g[1].stride_d = 1024);
  BAD_GROUPED("a problem with split_k 2", g[2].split_k = 2);
  BAD_GROUPED("a problem with split_k 7", g[0].split_k = 7);
  BAD_GROUPED("a problem with split_k -1", g[1].split_k = -1);
  BAD_GROUPED("a problem with batch 0", g[2].batch = 0);
  BAD_GROUPED("a problem with lda < k", g[1].lda = g[1].k - 1);
  BAD_GROUPED("a problem with ldd < n", g[2].ldd = g[2].n - 1);
  BAD_GROUPED("a problem with b NULL", g[2].b = NULL);
  BAD_GROUPED("a problem with d NULL", g[1].d = NULL);
  BAD_GROUPED("a problem with m -1", g[1].m = -1);
  BAD_GROUPED("a problem with k -1", g[2].k = -1);
  BAD_GROUPED("a problem with bias NULL", for (int i = 0; i < 3; i++) g[i].bias = DBIAS,
              g[i].bias_mode = CKJIT_BIAS_PER_COL;
              g[1].bias = NULL);
  BAD_GROUPED("every problem with activation 9", for (int i = 0; i < 3; i++) g[i].activation = (ckjit_unary_op)9);
  BAD_GROUPED("every problem with allow_tf32 and f16", for (int i = 0; i < 3; i++) g[i].ab_dtype = CKJIT_F16,
              g[i].allow_tf32 = 1);
  AE_CASE(rejected, grouped_call("every problem with ab_dtype i8"),
          for (int i = 0; i < 3; i++) c.d[i].ab_dtype = CKJIT_I8);
}

/* ---- the test knob ---------------------------------------------------------------------- */

/* CKJIT_GEMM_CLUSTER: a malformed value fails the call before any device
 * work (an empty one too); the three shapes leave a valid call valid. */
static void test_cluster_knob(void **state) {
  (void)state;
  static const char *const bad[] = {"2", "2x2", "4x1", "x", "1x1 "};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("CKJIT_GEMM_CLUSTER", bad[i], 1);
    invalid(gemm_call("CKJIT_GEMM_CLUSTER=%s", bad[i]));
    call c = gemm_call("CKJIT_GEMM_CLUSTER=%s, m = 0", bad[i]);
    c.d[0].m = 0;
    invalid(c);
  }
  static const char *const good[] = {"1x1", "2x1", "1x2", ""};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    setenv("CKJIT_GEMM_CLUSTER", good[i], 1);
    valid(gemm_call("CKJIT_GEMM_CLUSTER=%s", good[i]));
  }
  unsetenv("CKJIT_GEMM_CLUSTER");
}

/* ---- valid arguments without a GPU ---------------------------------------------------- */

static void test_valid_no_device(void **state) {
  (void)state;
  AE_SKIP_IF_DEVICE("no-device");
  const ckjit_dtype abts[3] = {CKJIT_F16, CKJIT_BF16, CKJIT_F32};
  const ckjit_dtype outs[3] = {CKJIT_F16, CKJIT_BF16, CKJIT_F32};
  for (int a = 0; a < 3; a++)
    for (int o = 0; o < 3; o++)
      for (int ord = 0; ord < 4; ord++) {
        call c = gemm_call("valid %s->%s orders %d", ckjit_dtype_name(abts[a]), ckjit_dtype_name(outs[o]), ord);
        ckjit_gemm_desc *d = &c.d[0];
        d->ab_dtype = abts[a], d->out_dtype = outs[o];
        d->a_order = (ckjit_order)(ord & 1), d->b_order = (ckjit_order)(ord >> 1);
        d->lda = d->a_order ? d->m : d->k; /* the smallest leading dimensions allowed */
        d->ldb = d->b_order ? d->k : d->n;
        valid(c);
      }
  call c = gemm_call("valid, every epilogue, in place (c == d), padded");
  ckjit_gemm_desc *d = &c.d[0];
  d->lda = 19, d->ldb = 11, d->ldd = 13;
  d->c = d->d, d->ldc = 13, d->beta = -0.5f, d->alpha = 2.0f;
  d->bias = DBIAS, d->bias_mode = CKJIT_BIAS_PER_ROW;
  d->d0 = DD0, d->ldd0 = 9, d->d1 = DD1, d->ldd1 = 8;
  for (int act = 0; act < 6; act++) {
    d->activation = (ckjit_unary_op)act;
    valid(c);
  }
  c = gemm_call("valid, bias per col, separate C");
  c.d[0].bias = DBIAS, c.d[0].bias_mode = CKJIT_BIAS_PER_COL, c.d[0].c = DC, c.d[0].ldc = 8, c.d[0].beta = 1.0f;
  valid(c);
  c = gemm_call("valid, batch 3, strides (B broadcast)");
  d = &c.d[0];
  d->batch = 3, d->stride_a = 64 + 3, d->stride_b = 0, d->stride_d = 32 + 5;
  d->c = DC, d->ldc = 8, d->stride_c = 0, d->d0 = DD0, d->ldd0 = 8, d->stride_d0 = 32;
  valid(c);
  const int splits[5] = {0, 1, 2, 7, CKJIT_GEMM_STREAM_K};
  for (int s = 0; s < 5; s++) {
    c = gemm_call("valid, decode shape, split_k %d", splits[s]);
    d = &c.d[0];
    d->m = 1, d->n = 512, d->k = 4096, d->lda = 4096, d->ldb = 4096, d->b_order = CKJIT_COL_MAJOR, d->ldd = 512;
    d->split_k = splits[s];
    valid(c);
  }
  c = gemm_call("valid, f32 with allow_tf32");
  c.d[0].ab_dtype = c.d[0].out_dtype = CKJIT_F32, c.d[0].allow_tf32 = 1;
  valid(c);
  c = gemm_call("valid, k 0");
  c.d[0].k = 0, c.d[0].lda = 1, c.d[0].c = DC, c.d[0].ldc = 8, c.d[0].beta = 1.0f;
  valid(c);
  c = gemm_call("valid, misaligned pointers and odd leading dimensions");
  d = &c.d[0];
  d->a = (const uint8_t *)DA + 2, d->b = (const uint8_t *)DB + 6, d->d = (uint8_t *)DD + 2;
  d->lda = 17, d->ldb = 9, d->ldd = 11;
  valid(c);
  c = grouped_call("valid grouped");
  valid(c);
  c = grouped_call("valid grouped, one problem, split_k 1");
  c.count = 1, c.d[0].split_k = 1;
  valid(c);
  c = grouped_call("valid grouped, epilogue, per-problem alpha / beta");
  for (int i = 0; i < 3; i++) {
    d = &c.d[i];
    d->ab_dtype = CKJIT_F16, d->out_dtype = CKJIT_F32, d->a_order = CKJIT_COL_MAJOR, d->lda = d->m + i;
    d->c = DC, d->ldc = d->n, d->alpha = 1.0f + (float)i, d->beta = 0.5f * (float)i;
    d->bias = DBIAS, d->bias_mode = CKJIT_BIAS_PER_COL, d->activation = CKJIT_UNARY_GELU_ERF;
    d->d1 = DD1, d->ldd1 = d->n + 1;
  }
  valid(c);
}

/* The header allows m = 0 and n = 0 (an empty result): not an argument
 * error.  Without a GPU either SUCCESS (nothing to do) or NO_DEVICE /
 * BACKEND_UNAVAILABLE is accepted. */
static void test_empty_not_invalid(void **state) {
  (void)state;
  AE_SKIP_IF_DEVICE("empty-problem");
  call cs[4];
  cs[0] = gemm_call("m 0");
  cs[0].d[0].m = 0;
  cs[1] = gemm_call("n 0");
  cs[1].d[0].n = 0, cs[1].d[0].ldb = 1, cs[1].d[0].ldd = 1;
  cs[2] = gemm_call("m 0, n 0, k 0");
  cs[2].d[0].m = cs[2].d[0].n = cs[2].d[0].k = 0, cs[2].d[0].lda = cs[2].d[0].ldb = cs[2].d[0].ldd = 1;
  cs[3] = grouped_call("grouped, one problem with m 0");
  cs[3].d[1].m = 0;
  for (int i = 0; i < 4; i++) {
    const call *c = &cs[i];
    const ae_result r = ae_run(do_call, c);
    if (r.status != CKJIT_SUCCESS && r.status != CKJIT_ERROR_NO_DEVICE &&
        r.status != CKJIT_ERROR_BACKEND_UNAVAILABLE) {
      print_error("%s: %s got %s, want SUCCESS or NO_DEVICE (%s)\n", fn_name(c), c->what,
                  ckjit_status_string(r.status), r.message);
      fail();
    }
    if (r.status != CKJIT_SUCCESS && !r.message[0]) {
      print_error("%s: %s: %s without a message\n", fn_name(c), c->what, ckjit_status_string(r.status));
      fail();
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_desc_init),
      cmocka_unit_test(test_gemm_pointers_and_shapes),
      cmocka_unit_test(test_gemm_dtypes_and_enums),
      cmocka_unit_test(test_gemm_leading_dimensions),
      cmocka_unit_test(test_grouped_invalid),
      cmocka_unit_test(test_cluster_knob),
      cmocka_unit_test(test_valid_no_device),
      cmocka_unit_test(test_empty_not_invalid),
  };
  return cmocka_run_group_tests_name("gemm_api_errors", tests, group_setup, ae_group_teardown);
}
