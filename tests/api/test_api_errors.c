/* Public API error paths that need no GPU: argument validation happens before
 * any device work, statuses and messages, init/shutdown, thread-local errors.
 * Links the shared library (public API only). */
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

/* ---- one op call, described as data so it can run on a fresh thread ---- */

enum call_kind { C_COPY, C_UNARY, C_BINARY, C_TRANSPOSE };

typedef struct call {
  const char *what;
  enum call_kind kind;
  int op;
  ckjit_dtype dtype;
  int64_t rows, cols;
  const void *a;
  int64_t ld_a;
  const void *b;
  int64_t ld_b;
  void *y;
  int64_t ld_y;
  int64_t batch, bs_in, bs_out;
  const ckjit_epilogue *epi;
} call;

static ckjit_status do_call(const void *p) {
  const call *c = p;
  switch (c->kind) {
    case C_COPY:
      return ckjit_copy2d(c->dtype, c->rows, c->cols, c->a, c->ld_a, c->y, c->ld_y, NULL);
    case C_UNARY:
      return ckjit_unary((ckjit_unary_op)c->op, c->dtype, c->rows, c->cols, c->a, c->ld_a, c->y,
                         c->ld_y, c->epi, NULL);
    case C_BINARY:
      return ckjit_binary((ckjit_binary_op)c->op, c->dtype, c->rows, c->cols, c->a, c->ld_a, c->b,
                          c->ld_b, c->y, c->ld_y, c->epi, NULL);
    case C_TRANSPOSE:
      return ckjit_transpose(c->dtype, c->batch, c->rows, c->cols, c->a, c->ld_a, c->bs_in, c->y,
                             c->ld_y, c->bs_out, NULL);
  }
  return CKJIT_ERROR_INTERNAL;
}

/* Runs c on a fresh thread: status `want`, ckjit_last_status() agrees, and
 * there is a message. */
static void expect_call(call c, ckjit_status want) { ae_expect(do_call, &c, NULL, c.what, want, CKJIT_SUCCESS); }

#define DA ((const void *)AE_FAKE_DEV(1))
#define DB ((const void *)AE_FAKE_DEV(2))
#define DY AE_FAKE_DEV(3)

static call copy_call(const char *what, ckjit_dtype dt, int64_t rows, int64_t cols, const void *src,
                      int64_t lds, void *dst, int64_t ldd) {
  call c;
  memset(&c, 0, sizeof c);
  c.what = what;
  c.kind = C_COPY;
  c.dtype = dt;
  c.rows = rows;
  c.cols = cols;
  c.a = src;
  c.ld_a = lds;
  c.y = dst;
  c.ld_y = ldd;
  return c;
}

static call unary_call(const char *what, int op, ckjit_dtype dt, int64_t rows, int64_t cols,
                       const void *x, int64_t ldx, void *y, int64_t ldy) {
  call c = copy_call(what, dt, rows, cols, x, ldx, y, ldy);
  c.kind = C_UNARY;
  c.op = op;
  return c;
}

static call binary_call(const char *what, int op, ckjit_dtype dt, int64_t rows, int64_t cols,
                        const void *a, int64_t lda, const void *b, int64_t ldb, void *y,
                        int64_t ldy) {
  call c = copy_call(what, dt, rows, cols, a, lda, y, ldy);
  c.kind = C_BINARY;
  c.op = op;
  c.b = b;
  c.ld_b = ldb;
  return c;
}

static call transpose_call(const char *what, ckjit_dtype dt, int64_t batch, int64_t rows,
                           int64_t cols, const void *in, int64_t ldi, int64_t bsi, void *out,
                           int64_t ldo, int64_t bso) {
  call c = copy_call(what, dt, rows, cols, in, ldi, out, ldo);
  c.kind = C_TRANSPOSE;
  c.batch = batch;
  c.bs_in = bsi;
  c.bs_out = bso;
  return c;
}

/* ---- group setup -------------------------------------------------------- */

static int group_setup(void **state) {
  (void)state;
  return ae_group_setup("api");
}

/* ---- tests -------------------------------------------------------------- */

static void test_status_strings(void **state) {
  (void)state;
  static const struct {
    ckjit_status s;
    const char *name;
  } all[] = {
      {CKJIT_SUCCESS, "CKJIT_SUCCESS"},
      {CKJIT_ERROR_INVALID_ARGUMENT, "CKJIT_ERROR_INVALID_ARGUMENT"},
      {CKJIT_ERROR_UNSUPPORTED, "CKJIT_ERROR_UNSUPPORTED"},
      {CKJIT_ERROR_NO_DEVICE, "CKJIT_ERROR_NO_DEVICE"},
      {CKJIT_ERROR_BACKEND_UNAVAILABLE, "CKJIT_ERROR_BACKEND_UNAVAILABLE"},
      {CKJIT_ERROR_COMPILE, "CKJIT_ERROR_COMPILE"},
      {CKJIT_ERROR_LOAD, "CKJIT_ERROR_LOAD"},
      {CKJIT_ERROR_LAUNCH, "CKJIT_ERROR_LAUNCH"},
      {CKJIT_ERROR_OUT_OF_MEMORY, "CKJIT_ERROR_OUT_OF_MEMORY"},
      {CKJIT_ERROR_DEVICE, "CKJIT_ERROR_DEVICE"},
      {CKJIT_ERROR_CACHE, "CKJIT_ERROR_CACHE"},
      {CKJIT_ERROR_INTERNAL, "CKJIT_ERROR_INTERNAL"},
  };
  const size_t n = sizeof all / sizeof all[0];
  for (size_t i = 0; i < n; i++) {
    const char *s = ckjit_status_string(all[i].s);
    assert_non_null(s);
    assert_string_equal(s, all[i].name);
    for (size_t j = 0; j < i; j++) assert_string_not_equal(s, ckjit_status_string(all[j].s));
  }
  /* Unknown values: still a string, and not one of the real names. */
  const int unknown[] = {1, -12, 42, -1000, INT32_MIN, INT32_MAX};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    const char *s = ckjit_status_string((ckjit_status)unknown[i]);
    assert_non_null(s);
    for (size_t j = 0; j < n; j++) assert_string_not_equal(s, all[j].name);
  }
}

static void test_dtypes(void **state) {
  (void)state;
  assert_int_equal(ckjit_dtype_size(CKJIT_F32), 4);
  assert_int_equal(ckjit_dtype_size(CKJIT_F16), 2);
  assert_int_equal(ckjit_dtype_size(CKJIT_BF16), 2);
  assert_int_equal(ckjit_dtype_size(CKJIT_I8), 1);
  assert_int_equal(ckjit_dtype_size(CKJIT_FP8_E4M3), 1);
  assert_int_equal(ckjit_dtype_size(CKJIT_FP8_E5M2), 1);
  assert_int_equal(ckjit_dtype_size(CKJIT_I32), 4);
  assert_int_equal(ckjit_dtype_size(CKJIT_DTYPE_COUNT_), 0);
  assert_int_equal(ckjit_dtype_size((ckjit_dtype)-1), 0);
  assert_int_equal(ckjit_dtype_size((ckjit_dtype)1000), 0);
  assert_string_equal(ckjit_dtype_name(CKJIT_F32), "f32");
  assert_string_equal(ckjit_dtype_name(CKJIT_F16), "f16");
  assert_string_equal(ckjit_dtype_name(CKJIT_BF16), "bf16");
  for (int i = 0; i < CKJIT_DTYPE_COUNT_; i++) {
    const char *s = ckjit_dtype_name((ckjit_dtype)i);
    assert_non_null(s);
    assert_string_not_equal(s, "?");
    for (int j = 0; j < i; j++) assert_string_not_equal(s, ckjit_dtype_name((ckjit_dtype)j));
  }
  assert_string_equal(ckjit_dtype_name(CKJIT_DTYPE_COUNT_), "?");
  assert_string_equal(ckjit_dtype_name((ckjit_dtype)-1), "?");
  assert_string_equal(ckjit_dtype_name((ckjit_dtype)77), "?");
}

static void test_version(void **state) {
  (void)state;
  assert_int_equal(ckjit_version(), CKJIT_VERSION_NUMBER);
  assert_string_equal(ckjit_version_string(), CKJIT_VERSION_STRING);
  char buf[32];
  snprintf(buf, sizeof buf, "%d.%d.%d", CKJIT_VERSION_MAJOR, CKJIT_VERSION_MINOR,
           CKJIT_VERSION_PATCH);
  assert_string_equal(buf, CKJIT_VERSION_STRING);
}

static void test_copy2d_invalid(void **state) {
  (void)state;
  const ckjit_status I = CKJIT_ERROR_INVALID_ARGUMENT;
  expect_call(copy_call("copy src NULL", CKJIT_F32, 4, 4, NULL, 4, DY, 4), I);
  expect_call(copy_call("copy dst NULL", CKJIT_F32, 4, 4, DA, 4, NULL, 4), I);
  expect_call(copy_call("copy rows 0", CKJIT_F32, 0, 4, DA, 4, DY, 4), I);
  expect_call(copy_call("copy cols 0", CKJIT_F32, 4, 0, DA, 4, DY, 4), I);
  expect_call(copy_call("copy rows -1", CKJIT_F32, -1, 4, DA, 4, DY, 4), I);
  expect_call(copy_call("copy cols -1", CKJIT_F32, 4, -1, DA, 4, DY, 4), I);
  expect_call(copy_call("copy rows INT64_MIN", CKJIT_F32, INT64_MIN, 4, DA, 4, DY, 4), I);
  expect_call(copy_call("copy ld_src < cols", CKJIT_F32, 4, 8, DA, 7, DY, 8), I);
  expect_call(copy_call("copy ld_dst < cols", CKJIT_F32, 4, 8, DA, 8, DY, 7), I);
  expect_call(copy_call("copy ld negative", CKJIT_F32, 4, 8, DA, -8, DY, 8), I);
  expect_call(copy_call("copy ld 0", CKJIT_F32, 1, 8, DA, 0, DY, 8), I);
  const int64_t h = INT64_MAX / 2;
  expect_call(copy_call("copy rows=cols=INT64_MAX/2", CKJIT_F32, h, h, DA, h, DY, h), I);
  expect_call(copy_call("copy 2^31 x 2^31 f32 (2^64 bytes)", CKJIT_F32, 1ll << 31, 1ll << 31, DA,
                        1ll << 31, DY, 1ll << 31), I);
  expect_call(copy_call("copy 1 x 2^62 f32", CKJIT_F32, 1, 1ll << 62, DA, 1ll << 62, DY, 1ll << 62),
              I);
  expect_call(copy_call("copy huge ld", CKJIT_F32, 3, 1, DA, INT64_MAX, DY, 1), I);
  expect_call(copy_call("copy bad dtype 99", (ckjit_dtype)99, 4, 4, DA, 4, DY, 4), I);
  expect_call(copy_call("copy bad dtype -1", (ckjit_dtype)-1, 4, 4, DA, 4, DY, 4), I);
  expect_call(copy_call("copy dtype COUNT", CKJIT_DTYPE_COUNT_, 4, 4, DA, 4, DY, 4), I);
}

static void test_unary_invalid(void **state) {
  (void)state;
  const ckjit_status I = CKJIT_ERROR_INVALID_ARGUMENT;
  expect_call(unary_call("unary x NULL", CKJIT_UNARY_RELU, CKJIT_F16, 2, 3, NULL, 3, DY, 3), I);
  expect_call(unary_call("unary y NULL", CKJIT_UNARY_RELU, CKJIT_F16, 2, 3, DA, 3, NULL, 3), I);
  expect_call(unary_call("unary rows 0", CKJIT_UNARY_RELU, CKJIT_F16, 0, 3, DA, 3, DY, 3), I);
  expect_call(unary_call("unary cols -5", CKJIT_UNARY_RELU, CKJIT_F16, 2, -5, DA, 3, DY, 3), I);
  expect_call(unary_call("unary ld_x < cols", CKJIT_UNARY_RELU, CKJIT_F16, 2, 3, DA, 2, DY, 3), I);
  expect_call(unary_call("unary ld_y < cols", CKJIT_UNARY_RELU, CKJIT_F16, 2, 3, DA, 3, DY, 2), I);
  const int64_t h = INT64_MAX / 2;
  expect_call(unary_call("unary overflow", CKJIT_UNARY_RELU, CKJIT_BF16, h, h, DA, h, DY, h), I);
  expect_call(unary_call("unary op 6", 6, CKJIT_F32, 2, 3, DA, 3, DY, 3), I);
  expect_call(unary_call("unary op -1", -1, CKJIT_F32, 2, 3, DA, 3, DY, 3), I);
  expect_call(unary_call("unary op 1000", 1000, CKJIT_F32, 2, 3, DA, 3, DY, 3), I);
  expect_call(unary_call("unary bad dtype", CKJIT_UNARY_RELU, (ckjit_dtype)50, 2, 3, DA, 3, DY, 3), I);
}

static void test_binary_invalid(void **state) {
  (void)state;
  const ckjit_status I = CKJIT_ERROR_INVALID_ARGUMENT;
  expect_call(binary_call("binary a NULL", CKJIT_BINARY_ADD, CKJIT_F32, 2, 3, NULL, 3, DB, 3, DY, 3), I);
  expect_call(binary_call("binary b NULL", CKJIT_BINARY_ADD, CKJIT_F32, 2, 3, DA, 3, NULL, 3, DY, 3), I);
  expect_call(binary_call("binary y NULL", CKJIT_BINARY_ADD, CKJIT_F32, 2, 3, DA, 3, DB, 3, NULL, 3), I);
  expect_call(binary_call("binary rows -1", CKJIT_BINARY_ADD, CKJIT_F32, -1, 3, DA, 3, DB, 3, DY, 3), I);
  expect_call(binary_call("binary cols 0", CKJIT_BINARY_ADD, CKJIT_F32, 2, 0, DA, 3, DB, 3, DY, 3), I);
  expect_call(binary_call("binary ld_a < cols", CKJIT_BINARY_ADD, CKJIT_F32, 2, 3, DA, 2, DB, 3, DY, 3), I);
  expect_call(binary_call("binary ld_b < cols", CKJIT_BINARY_ADD, CKJIT_F32, 2, 3, DA, 3, DB, 2, DY, 3), I);
  expect_call(binary_call("binary ld_y < cols", CKJIT_BINARY_ADD, CKJIT_F32, 2, 3, DA, 3, DB, 3, DY, 2), I);
  const int64_t h = INT64_MAX / 2;
  expect_call(binary_call("binary overflow", CKJIT_BINARY_MUL, CKJIT_F16, h, h, DA, h, DB, h, DY, h), I);
  expect_call(binary_call("binary overflow in b only", CKJIT_BINARY_MUL, CKJIT_F16, 2, 2, DA, 2, DB,
                          INT64_MAX, DY, 2), I);
  expect_call(binary_call("binary op 6", 6, CKJIT_F32, 2, 3, DA, 3, DB, 3, DY, 3), I);
  expect_call(binary_call("binary op -1", -1, CKJIT_F32, 2, 3, DA, 3, DB, 3, DY, 3), I);
  expect_call(binary_call("binary bad dtype", CKJIT_BINARY_ADD, (ckjit_dtype)-7, 2, 3, DA, 3, DB, 3, DY, 3), I);
}

static void test_transpose_invalid(void **state) {
  (void)state;
  const ckjit_status I = CKJIT_ERROR_INVALID_ARGUMENT;
  /* 2D: in is rows x cols (ld_in >= cols), out is cols x rows (ld_out >= rows). */
  expect_call(transpose_call("transpose in NULL", CKJIT_F32, 1, 2, 3, NULL, 3, 0, DY, 2, 0), I);
  expect_call(transpose_call("transpose out NULL", CKJIT_F32, 1, 2, 3, DA, 3, 0, NULL, 2, 0), I);
  expect_call(transpose_call("transpose batch 0", CKJIT_F32, 0, 2, 3, DA, 3, 6, DY, 2, 6), I);
  expect_call(transpose_call("transpose batch -1", CKJIT_F32, -1, 2, 3, DA, 3, 6, DY, 2, 6), I);
  expect_call(transpose_call("transpose rows 0", CKJIT_F32, 1, 0, 3, DA, 3, 0, DY, 2, 0), I);
  expect_call(transpose_call("transpose cols -2", CKJIT_F32, 1, 2, -2, DA, 3, 0, DY, 2, 0), I);
  expect_call(transpose_call("transpose ld_in < cols", CKJIT_F32, 1, 2, 3, DA, 2, 0, DY, 2, 0), I);
  expect_call(transpose_call("transpose ld_out < rows", CKJIT_F32, 1, 2, 3, DA, 3, 0, DY, 1, 0), I);
  expect_call(transpose_call("transpose negative batch stride in", CKJIT_F32, 2, 2, 3, DA, 3, -6, DY, 2,
                             6), I);
  expect_call(transpose_call("transpose negative batch stride out", CKJIT_F32, 2, 2, 3, DA, 3, 6, DY, 2,
                             -6), I);
  const int64_t h = INT64_MAX / 2;
  expect_call(transpose_call("transpose overflow", CKJIT_BF16, 1, h, h, DA, h, 0, DY, h, 0), I);
  expect_call(transpose_call("transpose batch overflow", CKJIT_F32, h, 2, 3, DA, 3, 6, DY, 2, 6), I);
  expect_call(transpose_call("transpose batch stride overflow", CKJIT_F32, 4, 2, 3, DA, 3, h, DY, 2,
                             6), I);
  expect_call(transpose_call("transpose bad dtype", (ckjit_dtype)9, 1, 2, 3, DA, 3, 0, DY, 2, 0), I);
}

static void test_reserved_dtypes_unsupported(void **state) {
  (void)state;
  const ckjit_status U = CKJIT_ERROR_UNSUPPORTED;
  const ckjit_dtype reserved[] = {CKJIT_I8, CKJIT_FP8_E4M3, CKJIT_FP8_E5M2, CKJIT_I32};
  for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
    ckjit_dtype d = reserved[i];
    expect_call(unary_call("unary reserved dtype", CKJIT_UNARY_RELU, d, 2, 3, DA, 3, DY, 3), U);
    expect_call(binary_call("binary reserved dtype", CKJIT_BINARY_ADD, d, 2, 3, DA, 3, DB, 3, DY, 3), U);
    expect_call(copy_call("copy reserved dtype", d, 2, 3, DA, 3, DY, 3), U);
    expect_call(transpose_call("transpose reserved dtype", d, 1, 2, 3, DA, 3, 0, DY, 2, 0), U);
  }
}

static void test_no_device(void **state) {
  (void)state;
  AE_SKIP_IF_DEVICE("no-device");
  const ckjit_status N = CKJIT_ERROR_NO_DEVICE;
  static const ckjit_epilogue epi = {2.0f, 1.0f};
  expect_call(copy_call("copy, valid, no GPU", CKJIT_F32, 4, 4, DA, 4, DY, 4), N);
  for (int op = 0; op < 6; op++) {
    call c = unary_call("unary, valid, no GPU", op, CKJIT_BF16, 3, 5, DA, 5, DY, 7);
    expect_call(c, N);
    c.epi = &epi;
    expect_call(c, N);
    call b = binary_call("binary, valid, no GPU", op, CKJIT_F16, 3, 5, DA, 5, DB, 6, DY, 7);
    expect_call(b, N);
  }
  expect_call(transpose_call("transpose, valid, no GPU", CKJIT_F32, 3, 2, 3, DA, 3, 6, DY, 2, 6), N);
  /* Device memory helpers. */
  void *p = (void *)0x1;
  assert_int_equal(ckjit_malloc(&p, 256), N);
  assert_true(strlen(ckjit_last_error()) > 0);
  assert_int_equal(ckjit_synchronize(NULL), N);
  assert_int_equal(ckjit_memset(DY, 0, 16), N);
  assert_int_equal(ckjit_memcpy(DY, DA, 16, CKJIT_DEVICE_TO_DEVICE), N);
  void *fn = NULL;
  char spec[256];
  assert_int_equal(ckjit_default_spec(0, spec, sizeof spec), CKJIT_SUCCESS);
  assert_int_equal(ckjit_get_function(spec, &fn), N);
  assert_true(strlen(ckjit_last_error()) > 0);
  /* Device info without a GPU. */
  ckjit_device_info info;
  memset(&info, 0x55, sizeof info);
  assert_int_equal(ckjit_get_device_info(&info), CKJIT_SUCCESS);
  assert_int_equal(info.has_device, 0);
  assert_string_equal(info.device_arch, "");
  assert_string_equal(info.name, "");
  assert_int_equal(info.multiprocessors, 0);
  assert_non_null(memchr(info.arch, 0, sizeof info.arch));
  assert_non_null(memchr(info.compiler, 0, sizeof info.compiler));
  assert_non_null(memchr(info.cache_dir, 0, sizeof info.cache_dir));
}

static void test_other_invalid_arguments(void **state) {
  (void)state;
  const ckjit_status I = CKJIT_ERROR_INVALID_ARGUMENT;
  assert_int_equal(ckjit_malloc(NULL, 16), I);
  assert_int_equal(ckjit_free(NULL), CKJIT_SUCCESS);
  assert_int_equal(ckjit_memcpy(NULL, DA, 16, CKJIT_DEVICE_TO_DEVICE), I);
  assert_int_equal(ckjit_memcpy(DY, NULL, 16, CKJIT_DEVICE_TO_DEVICE), I);
  assert_int_equal(ckjit_memcpy(DY, DA, 16, (ckjit_copy_kind)0), I);
  assert_int_equal(ckjit_memcpy(DY, DA, 16, (ckjit_copy_kind)4), I);
  assert_int_equal(ckjit_memset(NULL, 0, 16), I);
  assert_int_equal(ckjit_get_device_info(NULL), I);
  void *fn = NULL;
  assert_int_equal(ckjit_get_function(NULL, &fn), I);
  assert_int_equal(ckjit_get_function("elementwise:dtype=f32", NULL), I);
  assert_int_equal(ckjit_get_function("nosuchfamily:x=1", &fn), I);
  assert_int_equal(ckjit_compile_spec(NULL, "sm_90", NULL), I);
  assert_int_equal(ckjit_compile_spec("nosuchfamily:x=1", "sm_90", NULL), I);
  assert_int_equal(ckjit_compile_spec("elementwise:dtype=f64", "sm_90", NULL), I);
  assert_true(strlen(ckjit_last_error()) > 0);
  char spec[256];
  assert_int_equal(ckjit_default_spec(ckjit_default_spec_count(), spec, sizeof spec), I);
  /* ckjit_init with a bad backend. */
  ckjit_shutdown();
  ckjit_options o;
  ckjit_options_init(&o);
  o.backend = (ckjit_backend)7;
  assert_int_equal(ckjit_init(&o), I);
}

/* Each spec `prefix` + bad[i] is refused for sm_90 with a message naming `needle`. */
static void refused_on_sm90(const char *prefix, const char *const *bad, size_t n, const char *needle) {
  for (size_t i = 0; i < n; i++) {
    char spec[128];
    snprintf(spec, sizeof spec, "%s%s", prefix, bad[i]);
    assert_int_equal(ckjit_spec_has_kernel(spec, "sm_90"), CKJIT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(ckjit_last_error(), needle));
  }
}

/* Which archs each family has a kernel for; the others are refused with
 * the archs it runs on, by ckjit_compile_spec too, before any compiler is
 * loaded (so also where neither compiler is installed). */
static void test_spec_has_kernel(void **state) {
  (void)state;
  const ckjit_status OK = CKJIT_SUCCESS, NO = CKJIT_ERROR_UNSUPPORTED;
  const struct {
    const char *spec, *arch;
    ckjit_status want;
  } cases[] = {
      {"elementwise:dtype=bf16", "sm_75", OK},     {"elementwise:dtype=bf16", "gfx1030", OK},
      {"gemm_simt:dtype=f32", "gfx1030", OK},       {"gemm_reduce", "sm_75", OK},
      {"gemm_wgmma:dtype=bf16", "sm_90", OK},       {"gemm_wgmma:dtype=bf16", "sm_90a", OK},
      {"gemm_wgmma:dtype=bf16", "sm_80", NO},       {"gemm_wgmma:dtype=bf16", "sm_100", NO},
      {"gemm_wgmma:dtype=bf16", "gfx90a", NO},      {"gemm_mma:dtype=f16", "sm_80", OK},
      {"gemm_mma:dtype=f16", "sm_120", OK},         {"gemm_mma:dtype=f16", "sm_75", NO},
      {"gemm_mma:dtype=f16", "gfx942", NO},         {"gemm_tf32", "sm_86", OK},
      {"gemm_tf32", "gfx90a", NO},                  {"gemm_mfma:dtype=f16", "gfx908", OK},
      {"gemm_mfma:dtype=bf16", "gfx90a:xnack-", OK}, {"gemm_mfma:dtype=f16", "gfx942", OK},
      {"gemm_mfma:dtype=f16", "gfx1030", NO},       {"gemm_mfma:dtype=f16", "sm_90", NO},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const ckjit_status st = ckjit_spec_has_kernel(cases[i].spec, cases[i].arch);
    if (st != cases[i].want)
      print_error("%s for %s: %s (%s)\n", cases[i].spec, cases[i].arch, ckjit_status_string(st),
                  ckjit_last_error());
    assert_int_equal(st, cases[i].want);
    if (st == NO) {
      assert_non_null(strstr(ckjit_last_error(), "has no kernel for"));
      assert_int_equal(ckjit_compile_spec(cases[i].spec, cases[i].arch, NULL), NO);
      assert_non_null(strstr(ckjit_last_error(), "has no kernel for"));
    }
  }
  /* The message names the archs the kernel runs on. */
  assert_int_equal(ckjit_spec_has_kernel("gemm_wgmma:dtype=f16", "gfx90a"), NO);
  assert_non_null(strstr(ckjit_last_error(), "sm_90"));
  /* Malformed input. */
  assert_int_equal(ckjit_spec_has_kernel("gemm_wgmma:dtype=q8", "sm_90"), CKJIT_ERROR_INVALID_ARGUMENT);
  /* Stream-K's code is a parameter: only where it can run (128-row tiles, TMA, one problem). */
  assert_int_equal(ckjit_spec_has_kernel("gemm_wgmma:dtype=bf16,streamk=1", "sm_90"), OK);
  assert_int_equal(ckjit_spec_has_kernel("gemm_wgmma:dtype=bf16,streamk=1,bm=64", "sm_90"),
                   CKJIT_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(ckjit_last_error(), "streamk=1"));
  assert_int_equal(ckjit_spec_has_kernel("gemm_wgmma:dtype=bf16,streamk=1,grouped=1", "sm_90"),
                   CKJIT_ERROR_INVALID_ARGUMENT);
  /* tf32: B column-major through TMA; A either way (column-major: from
   * registers); a column-major D (the swapped problem) stores D itself,
   * unsplit, one problem. */
  assert_int_equal(ckjit_spec_has_kernel("gemm_wgmma:dtype=f32,out=f32,a=col,b=col,tma=2", "sm_90"), OK);
  assert_int_equal(ckjit_spec_has_kernel("gemm_wgmma:dtype=f32,out=f32,a=col,b=col,tma=1,dcol=1", "sm_90"), OK);
  assert_int_equal(ckjit_spec_has_kernel("gemm_wgmma:dtype=f32,out=f32,a=row,b=row,tma=2", "sm_90"),
                   CKJIT_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(ckjit_last_error(), "b=col"));
  assert_int_equal(ckjit_spec_has_kernel("gemm_wgmma:dtype=f32,out=f32,a=col,b=col,tma=0", "sm_90"),
                   CKJIT_ERROR_INVALID_ARGUMENT);
  static const char *const dcol_bad[] = {"tma=2,dcol=1", "tma=1,dcol=1,split=1", "tma=1,dcol=1,streamk=1",
                                         "tma=1,dcol=1,grouped=1"};
  refused_on_sm90("gemm_wgmma:dtype=f32,out=f32,a=col,b=col,", dcol_bad, sizeof dcol_bad / sizeof dcol_bad[0],
                  "dcol=1");
  /* Clusters of two (multicast): through TMA, one problem, whole tiles. */
  assert_int_equal(ckjit_spec_has_kernel("gemm_wgmma:dtype=bf16,tma=1,bm=64,bn=64,cluster_m=2", "sm_90"), OK);
  assert_int_equal(ckjit_spec_has_kernel("gemm_wgmma:dtype=bf16,tma=2,cluster_n=2", "sm_90"), OK);
  static const char *const cluster_bad[] = {"tma=0,cluster_m=2", "tma=1,grouped=1,cluster_n=2",
                                            "tma=1,streamk=1,cluster_m=2", "tma=1,cluster_m=2,cluster_n=2"};
  refused_on_sm90("gemm_wgmma:dtype=bf16,", cluster_bad, sizeof cluster_bad / sizeof cluster_bad[0], "clusters");
  assert_int_equal(ckjit_spec_has_kernel("gemm_wgmma:dtype=bf16,cluster_m=3", "sm_90"), CKJIT_ERROR_INVALID_ARGUMENT);
  /* moe_permute: shared 0 .. 2 (none, plain, gated), combine only. */
  assert_int_equal(ckjit_spec_has_kernel("moe_permute:dir=combine,shared=2", "sm_90"), OK);
  assert_int_equal(ckjit_spec_has_kernel("moe_permute:dir=combine,shared=3", "sm_90"), CKJIT_ERROR_INVALID_ARGUMENT);
  assert_int_equal(ckjit_spec_has_kernel("moe_permute:dir=gather,shared=2", "sm_90"), CKJIT_ERROR_INVALID_ARGUMENT);
  assert_int_equal(ckjit_spec_has_kernel(NULL, "sm_90"), CKJIT_ERROR_INVALID_ARGUMENT);
  assert_int_not_equal(ckjit_spec_has_kernel("gemm_wgmma:dtype=bf16", "x86_64"), CKJIT_SUCCESS);
  assert_int_not_equal(ckjit_spec_has_kernel("gemm_wgmma:dtype=bf16", "sm_9"), CKJIT_SUCCESS);
}

static void test_options_init(void **state) {
  (void)state;
  ckjit_options o;
  memset(&o, 0x77, sizeof o);
  ckjit_options_init(&o);
  assert_int_equal(o.struct_size, sizeof(ckjit_options));
  assert_int_equal(o.backend, CKJIT_BACKEND_AUTO);
  assert_int_equal(o.device, -1);
  assert_null(o.arch);
  assert_null(o.cache_dir);
  assert_int_equal(o.disk_cache, -1);
}

static void test_init_twice_and_shutdown(void **state) {
  (void)state;
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/init-cache", ae_tmp);
  ckjit_shutdown(); /* whatever lazy init the tests before did */
  ckjit_options o;
  ckjit_options_init(&o);
  o.cache_dir = dir;
  ckjit_status st = ckjit_init(&o);
  if (st != CKJIT_SUCCESS) print_error("ckjit_init: %s\n", ckjit_last_error());
  assert_int_equal(st, CKJIT_SUCCESS);
  ckjit_device_info info;
  assert_int_equal(ckjit_get_device_info(&info), CKJIT_SUCCESS);
  assert_string_equal(info.cache_dir, dir);
  /* Second init fails, with a message, and changes nothing. */
  ckjit_options o2;
  ckjit_options_init(&o2);
  o2.disk_cache = 0;
  assert_int_equal(ckjit_init(&o2), CKJIT_ERROR_INVALID_ARGUMENT);
  assert_true(strlen(ckjit_last_error()) > 0);
  assert_int_equal(ckjit_get_device_info(&info), CKJIT_SUCCESS);
  assert_string_equal(info.cache_dir, dir);
  /* After shutdown: init again works (this time without a disk cache). */
  ckjit_shutdown();
  assert_int_equal(ckjit_init(&o2), CKJIT_SUCCESS);
  assert_int_equal(ckjit_get_device_info(&info), CKJIT_SUCCESS);
  assert_string_equal(info.cache_dir, "");
  ckjit_shutdown();
  /* After shutdown, calls work again (lazy init from the environment). */
  assert_int_equal(ckjit_get_device_info(&info), CKJIT_SUCCESS);
  assert_string_equal(info.cache_dir, getenv("CKJIT_CACHE_DIR"));
  expect_call(copy_call("copy after shutdown", CKJIT_F32, 0, 4, DA, 4, DY, 4),
              CKJIT_ERROR_INVALID_ARGUMENT);
  if (!ae_has_device)
    expect_call(copy_call("copy after shutdown", CKJIT_F32, 4, 4, DA, 4, DY, 4), CKJIT_ERROR_NO_DEVICE);
  /* Shutdown twice, and shutdown with nothing initialized, are harmless. */
  ckjit_shutdown();
  ckjit_shutdown();
  assert_int_equal(ckjit_init(&o), CKJIT_SUCCESS);
  ckjit_shutdown();
}

/* ---- thread-local errors ------------------------------------------------ */

typedef struct tl_job {
  int do_fail;
  ckjit_status status;
  char message[1024];
} tl_job;

static void *tl_thread(void *p) {
  tl_job *j = p;
  if (j->do_fail)
    (void)ckjit_copy2d(CKJIT_F32, -3, 4, DA, 4, DY, 4, NULL);
  j->status = ckjit_last_status();
  snprintf(j->message, sizeof j->message, "%s", ckjit_last_error());
  return NULL;
}

static void test_last_error_thread_local(void **state) {
  (void)state;
  /* This thread's error... */
  assert_int_equal(ckjit_unary((ckjit_unary_op)99, CKJIT_F32, 1, 1, DA, 1, DY, 1, NULL, NULL),
                   CKJIT_ERROR_INVALID_ARGUMENT);
  char mine[1024];
  snprintf(mine, sizeof mine, "%s", ckjit_last_error());
  assert_true(strlen(mine) > 0);
  /* ...is not seen by a new thread. */
  tl_job quiet = {0, CKJIT_ERROR_INTERNAL, "x"};
  assert_int_equal(tu_run_in_thread(tl_thread, &quiet), 0);
  assert_int_equal(quiet.status, CKJIT_SUCCESS);
  assert_string_equal(quiet.message, "");
  /* Another thread's failure does not touch this thread's error. */
  tl_job loud = {1, CKJIT_SUCCESS, ""};
  assert_int_equal(tu_run_in_thread(tl_thread, &loud), 0);
  assert_int_equal(loud.status, CKJIT_ERROR_INVALID_ARGUMENT);
  assert_true(strlen(loud.message) > 0);
  assert_string_not_equal(loud.message, mine);
  assert_string_equal(ckjit_last_error(), mine);
  assert_int_equal(ckjit_last_status(), CKJIT_ERROR_INVALID_ARGUMENT);
  /* Many threads failing at once each see their own message. */
  enum { T = 8 };
  pthread_t t[T];
  tl_job jobs[T];
  for (int i = 0; i < T; i++) {
    jobs[i] = (tl_job){1, CKJIT_SUCCESS, ""};
    assert_int_equal(pthread_create(&t[i], NULL, tl_thread, &jobs[i]), 0);
  }
  for (int i = 0; i < T; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(jobs[i].status, CKJIT_ERROR_INVALID_ARGUMENT);
    assert_string_equal(jobs[i].message, loud.message);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_strings),
      cmocka_unit_test(test_dtypes),
      cmocka_unit_test(test_version),
      cmocka_unit_test(test_copy2d_invalid),
      cmocka_unit_test(test_unary_invalid),
      cmocka_unit_test(test_binary_invalid),
      cmocka_unit_test(test_transpose_invalid),
      cmocka_unit_test(test_reserved_dtypes_unsupported),
      cmocka_unit_test(test_no_device),
      cmocka_unit_test(test_other_invalid_arguments),
      cmocka_unit_test(test_spec_has_kernel),
      cmocka_unit_test(test_options_init),
      cmocka_unit_test(test_init_twice_and_shutdown),
      cmocka_unit_test(test_last_error_thread_local),
  };
  return cmocka_run_group_tests_name("api_errors", tests, group_setup, ae_group_teardown);
}
