/* Argument validation of ckjit_gemm_fp8_moe and ckjit_moe_sort before any
 * device work.  ckjit_gemm_fp8_moe: bad
 * MoE fields (layout, experts, the routing arrays, strides too small or
 * misaligned, extents past the address space, a per-row bias) fail with
 * INVALID_ARGUMENT (UNSUPPORTED for the bias) and a message naming the
 * function; the FP8 GEMM's own fields are checked as for ckjit_gemm_fp8;
 * valid calls on a host without a GPU give NO_DEVICE (or
 * BACKEND_UNAVAILABLE), never a crash.  ckjit_moe_sort: sizes out of the
 * header's limits, NULL or misaligned arrays, entries past int32; its
 * capacity query.  Also both desc_init's defaults.  Every call runs on a fresh thread; pointers are fake device
 * addresses never dereferenced. */
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

typedef struct call {
  char what[160];
  int null_desc;
  int sort; /* ckjit_moe_sort with s, else ckjit_gemm_fp8_moe with m */
  ckjit_gemm_fp8_moe_desc m;
  ckjit_moe_sort_desc s;
} call;

static ckjit_status do_call(const void *p) {
  const call *c = p;
  if (c->sort) return ckjit_moe_sort(c->null_desc ? NULL : &c->s, NULL);
  return ckjit_gemm_fp8_moe(c->null_desc ? NULL : &c->m, NULL);
}

static void expect2(call c, ckjit_status want, ckjit_status alt) {
  ae_expect(do_call, &c, c.sort ? "ckjit_moe_sort" : "ckjit_gemm_fp8_moe", c.what, want, alt);
}
static void invalid(call c) { expect2(c, CKJIT_ERROR_INVALID_ARGUMENT, CKJIT_SUCCESS); }
static void unsupported(call c) { expect2(c, CKJIT_ERROR_UNSUPPORTED, CKJIT_SUCCESS); }
static void valid(call c) {
  if (ae_has_device) return;
  expect2(c, CKJIT_ERROR_NO_DEVICE, CKJIT_ERROR_BACKEND_UNAVAILABLE);
}

/* A valid CONTIGUOUS call: 8 experts, m 256 (two tiles), n 24, k 40, lda 48,
 * ldb 64; or MASKED (m rows per expert). */
static call moe_call(int layout, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static call moe_call(int layout, const char *fmt, ...) {
  call c;
  memset(&c, 0, sizeof c);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c.what, sizeof c.what, fmt, ap);
  va_end(ap);
  ckjit_gemm_fp8_moe_desc *d = &c.m;
  ckjit_gemm_fp8_moe_desc_init(d);
  ckjit_gemm_fp8_desc *g = &d->gemm;
  g->m = 256, g->n = 24, g->k = 40;
  g->a = AE_FAKE_DEV(1), g->lda = 48;
  g->b = AE_FAKE_DEV(2), g->ldb = 64;
  g->d = AE_FAKE_DEV(3), g->ldd = 24;
  g->scale_a = AE_FAKE_DEV(4), g->scale_b = AE_FAKE_DEV(5);
  d->layout = (ckjit_moe_layout)layout, d->experts = 8;
  if (layout == CKJIT_MOE_MASKED) d->counts = AE_FAKE_DEV(6);
  else d->tile_experts = AE_FAKE_DEV(7);
  return c;
}

#define BAD(layout, what, ...) AE_CASE(invalid, moe_call(layout, "%s", what), ckjit_gemm_fp8_moe_desc *d = &c.m; (void)d; __VA_ARGS__)
#define C CKJIT_MOE_CONTIGUOUS
#define M CKJIT_MOE_MASKED

static int group_setup(void **state) {
  (void)state;
  return ae_group_setup("gemm-moe-api");
}

static void test_desc_init(void **state) {
  (void)state;
  ckjit_gemm_fp8_moe_desc d;
  memset(&d, 0x77, sizeof d);
  ckjit_gemm_fp8_moe_desc_init(&d);
  assert_int_equal(d.layout, CKJIT_MOE_CONTIGUOUS);
  assert_int_equal(d.experts, 1);
  assert_null(d.tile_experts);
  assert_null(d.counts);
  assert_int_equal(d.stride_a, 0);
  assert_int_equal(d.stride_b, 0);
  assert_int_equal(d.stride_d, 0);
  assert_int_equal(d.stride_scale_a, 0);
  assert_int_equal(d.stride_scale_b, 0);
  assert_int_equal(d.stride_bias, 0);
  assert_int_equal(d.gemm.scaling, CKJIT_FP8_SCALE_TENSOR);
  assert_int_equal(d.gemm.out_dtype, CKJIT_BF16);
  assert_true(d.gemm.alpha == 1.0f);
  ckjit_gemm_fp8_moe_desc_init(NULL); /* no crash */
}

static void test_moe_fields(void **state) {
  (void)state;
  AE_CASE(invalid, moe_call(C, "desc NULL"), c.null_desc = 1);
  BAD(C, "layout 2", d->layout = (ckjit_moe_layout)2);
  BAD(C, "layout -1", d->layout = (ckjit_moe_layout)-1);
  BAD(C, "experts 0", d->experts = 0);
  BAD(M, "experts -3", d->experts = -3);
  BAD(C, "experts 65537", d->experts = 65537);
  BAD(C, "tile_experts NULL", d->tile_experts = NULL);
  BAD(M, "counts NULL", d->counts = NULL);
  BAD(C, "CONTIGUOUS with only counts", d->counts = d->tile_experts, d->tile_experts = NULL);
  BAD(C, "stride_b below n * k", d->stride_b = 24 * 40 - 16);
  BAD(C, "stride_b not a multiple of 16", d->stride_b = 24 * 64 + 8);
  BAD(C, "stride_b negative", d->stride_b = -1536);
  BAD(C, "stride_scale_b negative", d->stride_scale_b = -1);
  BAD(C, "stride_bias negative", d->stride_bias = -24, d->gemm.bias = AE_FAKE_DEV(8),
      d->gemm.bias_mode = CKJIT_BIAS_PER_COL);
  BAD(M, "stride_a below m * k", d->stride_a = 256 * 40 - 16);
  BAD(M, "stride_a not a multiple of 16", d->stride_a = 256 * 48 + 4);
  BAD(M, "stride_d below m * n", d->stride_d = 256 * 24 - 1);
  BAD(M, "stride_scale_a negative", d->stride_scale_a = -1);
  BAD(C, "B's experts past the address space", d->experts = 65536, d->stride_b = (int64_t)1 << 48);
  BAD(M, "A's experts past the address space", d->experts = 65536, d->stride_a = (int64_t)1 << 48);
  BAD(M, "D's experts past the address space", d->experts = 65536, d->stride_d = (int64_t)1 << 48);
  AE_CASE(unsupported, moe_call(C, "beta C (plain GEMMs only)"), c.m.gemm.c = AE_FAKE_DEV(10), c.m.gemm.beta = 1.0f);
  AE_CASE(unsupported, moe_call(C, "d0 (plain GEMMs only)"), c.m.gemm.d0 = AE_FAKE_DEV(10));
  AE_CASE(unsupported, moe_call(C, "bias per row"), c.m.gemm.bias = AE_FAKE_DEV(8),
          c.m.gemm.bias_mode = CKJIT_BIAS_PER_ROW);
  /* the FP8 GEMM's own checks still apply */
  BAD(C, "a NULL", d->gemm.a = NULL);
  BAD(M, "lda not a multiple of 16", d->gemm.lda = 56);
  BAD(C, "scale_b NULL", d->gemm.scale_b = NULL);
  BAD(M, "ldd < n", d->gemm.ldd = 23);
  BAD(C, "m -1", d->gemm.m = -1);
}

static void test_valid(void **state) {
  (void)state;
  for (int layout = 0; layout < 2; layout++)
    for (int s = 0; s < 3; s++) {
      call c = moe_call(layout, "valid %s, scaling %d", layout ? "MASKED" : "CONTIGUOUS", s);
      c.m.gemm.scaling = (ckjit_fp8_scaling)s;
      c.m.gemm.bias = AE_FAKE_DEV(8), c.m.gemm.bias_mode = CKJIT_BIAS_PER_COL;
      valid(c);
    }
  call c = moe_call(M, "valid, explicit strides");
  c.m.stride_a = 256 * 48 + 16, c.m.stride_b = 24 * 64 + 32, c.m.stride_d = 256 * 24 + 3;
  c.m.stride_scale_a = 7, c.m.stride_scale_b = 2, c.m.experts = 512;
  valid(c);
  c = moe_call(C, "valid, one expert, m 1");
  c.m.experts = 1, c.m.gemm.m = 1;
  valid(c);
}

/* ---- ckjit_moe_sort ---------------------------------------------------------------- */

/* A valid sort: 100 tokens x k 8 over 64 experts, int32 ids. */
static call sort_call(const char *what) {
  call c;
  memset(&c, 0, sizeof c);
  snprintf(c.what, sizeof c.what, "%s", what);
  c.sort = 1;
  ckjit_moe_sort_desc_init(&c.s);
  c.s.tokens = 100, c.s.k = 8, c.s.experts = 64;
  c.s.topk_ids = AE_FAKE_DEV(1), c.s.sorted_ids = AE_FAKE_DEV(2), c.s.expert_offsets = AE_FAKE_DEV(3);
  c.s.expert_counts = AE_FAKE_DEV(4), c.s.tile_experts = AE_FAKE_DEV(5);
  return c;
}
#define BAD_SORT(what, ...) AE_CASE(invalid, sort_call(what), ckjit_moe_sort_desc *s = &c.s; (void)s; __VA_ARGS__)

static void test_sort(void **state) {
  (void)state;
  ckjit_moe_sort_desc d;
  memset(&d, 0x55, sizeof d);
  ckjit_moe_sort_desc_init(&d);
  assert_int_equal(d.tile_m, 128);
  assert_int_equal(d.ids_dtype, CKJIT_I32);
  assert_int_equal(d.tokens, 0);
  assert_null(d.sorted_ids);
  assert_null(d.invalid);
  assert_null(d.expert_map);
  assert_int_equal(d.global_experts, 0);
  /* capacity: tokens * k + experts * (tile_m - 1), rounded up to tile_m, at least tile_m */
  assert_int_equal(ckjit_moe_sort_capacity(100, 8, 64, 128), 8960);
  assert_int_equal(ckjit_moe_sort_capacity(0, 1, 8, 1), 1);
  assert_int_equal(ckjit_moe_sort_capacity(16384, 8, 256, 128), 163584);
  assert_int_equal(ckjit_moe_sort_capacity(5, 2, 3, 4), 20);
  assert_int_equal(ckjit_moe_sort_capacity(-1, 8, 64, 128), 0);
  assert_int_equal(ckjit_moe_sort_capacity(100, 0, 64, 128), 0);
  assert_int_equal(ckjit_moe_sort_capacity(100, 8, 1025, 128), 0);
  assert_int_equal(ckjit_moe_sort_capacity(100, 8, 64, 0), 0);
  assert_int_equal(ckjit_moe_sort_capacity((int64_t)1 << 28, 16, 64, 128), 0); /* past int32 */
  AE_CASE(invalid, sort_call("desc NULL"), c.null_desc = 1);
  BAD_SORT("tokens -1", s->tokens = -1);
  BAD_SORT("k 0", s->k = 0);
  BAD_SORT("k 65", s->k = 65);
  BAD_SORT("experts 0", s->experts = 0);
  BAD_SORT("experts 1025", s->experts = 1025);
  BAD_SORT("tile_m 0", s->tile_m = 0);
  BAD_SORT("tile_m 1025", s->tile_m = 1025);
  BAD_SORT("ids_dtype f32", s->ids_dtype = CKJIT_F32);
  BAD_SORT("ids_dtype i8", s->ids_dtype = CKJIT_I8);
  BAD_SORT("entries past int32", s->tokens = (int64_t)1 << 28, s->k = 16);
  BAD_SORT("topk_ids NULL", s->topk_ids = NULL);
  BAD_SORT("sorted_ids NULL", s->sorted_ids = NULL);
  BAD_SORT("expert_offsets NULL", s->expert_offsets = NULL);
  BAD_SORT("expert_counts NULL", s->expert_counts = NULL);
  BAD_SORT("tile_experts NULL", s->tile_experts = NULL);
  BAD_SORT("topk_ids int64 4-byte aligned", s->ids_dtype = CKJIT_I64, s->topk_ids = (const char *)AE_FAKE_DEV(1) + 4);
  BAD_SORT("sorted_ids 2-byte aligned", s->sorted_ids = (int32_t *)((char *)AE_FAKE_DEV(2) + 2));
  BAD_SORT("invalid 1-byte aligned", s->invalid = (int32_t *)((char *)AE_FAKE_DEV(6) + 1));
  BAD_SORT("expert_map with global_experts 0", s->expert_map = AE_FAKE_DEV(8), s->global_experts = 0);
  BAD_SORT("expert_map with global_experts 2^20 + 1", s->expert_map = AE_FAKE_DEV(8),
           s->global_experts = (1 << 20) + 1);
  BAD_SORT("expert_map 2-byte aligned", s->expert_map = (const int32_t *)((char *)AE_FAKE_DEV(8) + 2),
           s->global_experts = 256);
  call c = sort_call("valid, int64 ids, total and invalid given");
  c.s.ids_dtype = CKJIT_I64, c.s.total_rows = AE_FAKE_DEV(6), c.s.invalid = AE_FAKE_DEV(7);
  valid(c);
  c = sort_call("valid, an expert map: 64 local of 1024 global experts");
  c.s.expert_map = AE_FAKE_DEV(8), c.s.global_experts = 1024;
  valid(c);
  c = sort_call("valid, global_experts ignored without a map");
  c.s.global_experts = -5;
  valid(c);
  c = sort_call("valid, tokens 0 (topk_ids may be NULL), tile_m 1");
  c.s.tokens = 0, c.s.topk_ids = NULL, c.s.tile_m = 1;
  valid(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_desc_init),
      cmocka_unit_test(test_moe_fields),
      cmocka_unit_test(test_valid),
      cmocka_unit_test(test_sort),
  };
  return cmocka_run_group_tests_name("gemm_moe_api_errors", tests, group_setup, ae_group_teardown);
}
