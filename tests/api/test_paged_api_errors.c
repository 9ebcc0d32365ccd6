/* Argument validation of ckjit_paged_attention, ckjit_paged_kv_append and
 * ckjit_paged_kv_check (ckjit/paged_attention.h), which happens before any
 * device work: each bad argument gets its status (INVALID_ARGUMENT, or
 * UNSUPPORTED for a known dtype, head dimension or page size the op does
 * not do) and a message naming the function and the argument; a valid
 * descriptor on a host without a GPU fails with NO_DEVICE (or
 * BACKEND_UNAVAILABLE), never crashes; an empty problem succeeds without a
 * device.  Also the desc_init defaults and the pool stride helpers.
 * Validation comes first: a bad argument of an empty problem, or with an
 * unknown CKJIT_ATTENTION_PIPELINE (read only once a device is found), is
 * still reported.  Links the shared library (public API only); every call
 * runs on a fresh thread; pointers are fake, well-aligned device addresses
 * that must never be dereferenced.  FP8 pages (kv.page_dtype
 * CKJIT_FP8_E4M3): their scales (kv.k_scale, kv.v_scale, kv.scale_stride)
 * are checked, only for them; another page dtype than the call's is
 * UNSUPPORTED. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "api_error_util.h"

#define DQ ((const void *)AE_FAKE_DEV(1))
#define DO AE_FAKE_DEV(2)
#define DLSE ((float *)AE_FAKE_DEV(3))
#define DCUQ ((const int32_t *)AE_FAKE_DEV(4))
#define DK AE_FAKE_DEV(5)
#define DV AE_FAKE_DEV(6)
#define DBT ((const int32_t *)AE_FAKE_DEV(7))
#define DSL ((const int32_t *)AE_FAKE_DEV(8))
#define DIP ((const int32_t *)AE_FAKE_DEV(9))
#define DIX ((const int32_t *)AE_FAKE_DEV(10))
#define DLL ((const int32_t *)AE_FAKE_DEV(11))
#define DERR ((int32_t *)AE_FAKE_DEV(12))
#define DKN ((const void *)AE_FAKE_DEV(13))
#define DVN ((const void *)AE_FAKE_DEV(14))
#define DCUN ((const int32_t *)AE_FAKE_DEV(15))
#define DKS ((const float *)AE_FAKE_DEV(16))
#define DVS ((const float *)AE_FAKE_DEV(17))

#define PLUS(p, bytes) ((void *)((uintptr_t)(p) + (uintptr_t)(bytes)))

/* ---- one call, described as data so it can run on a fresh thread ---------- */

enum api { A_ATTENTION, A_APPEND, A_CHECK };
static const char *const api_names[] = {"ckjit_paged_attention", "ckjit_paged_kv_append", "ckjit_paged_kv_check"};

typedef struct call {
  char what[160];
  int api, null_desc;
  ckjit_paged_attention_desc d;   /* A_ATTENTION */
  ckjit_paged_kv_append_desc a;   /* A_APPEND */
  ckjit_paged_kv kv;              /* A_CHECK */
  int64_t batch;                  /* A_CHECK */
} call;

static ckjit_status do_call(const void *p) {
  const call *c = p;
  switch (c->api) {
    case A_APPEND: return ckjit_paged_kv_append(c->null_desc ? NULL : &c->a, NULL);
    case A_CHECK: return ckjit_paged_kv_check(c->null_desc ? NULL : &c->kv, c->batch, NULL);
    default: return ckjit_paged_attention(c->null_desc ? NULL : &c->d, NULL);
  }
}

/* A valid cache: bf16, 64 pages of 16 slots, 2 K/V heads of 128, NHD
 * pools, padded tables of 8 pages per sequence, an error word. */
static ckjit_paged_kv base_kv(void) {
  ckjit_paged_kv kv;
  memset(&kv, 0, sizeof kv);
  kv.num_pages = 64, kv.page_size = 16;
  kv.k_pages = DK, kv.v_pages = DV;
  kv.k_strides = kv.v_strides = ckjit_paged_strides_nhd(16, 2, 128);
  kv.block_table = DBT, kv.max_pages_per_seq = 8, kv.seqlens_k = DSL;
  kv.error = DERR;
  return kv;
}

/* The CSR form of the same (block_table and seqlens_k left NULL). */
static void to_csr(ckjit_paged_kv *kv) {
  kv->block_table = NULL, kv->seqlens_k = NULL, kv->max_pages_per_seq = 0;
  kv->kv_indptr = DIP, kv->kv_page_indices = DIX, kv->kv_last_page_len = DLL;
}

/* A valid call of `api`: attention of 2 sequences, heads 8 / 2, d 128,
 * varlen queries (at most 4), O like Q, a [h][t] LSE; append of at most 4
 * new tokens each, packed; check of 2 sequences. */
static call make(int api, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static call make(int api, const char *fmt, ...) {
  call c;
  memset(&c, 0, sizeof c);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c.what, sizeof c.what, fmt, ap);
  va_end(ap);
  c.api = api;
  ckjit_paged_attention_desc *d = &c.d;
  ckjit_paged_attention_desc_init(d);
  d->batch = 2, d->num_heads_q = 8, d->num_heads_kv = 2, d->head_dim_qk = d->head_dim_v = 128;
  d->max_seqlen_q = 4, d->cu_seqlens_q = DCUQ;
  d->q = DQ, d->q_strides = (ckjit_attention_strides){0, 128, 8 * 128, 1};
  d->o = DO, d->o_strides = d->q_strides;
  d->lse = DLSE, d->lse_strides = (ckjit_attention_strides){0, 8, 1, 0};
  d->kv = base_kv();
  ckjit_paged_kv_append_desc *a = &c.a;
  ckjit_paged_kv_append_desc_init(a);
  a->batch = 2, a->num_heads_kv = 2, a->head_dim_qk = a->head_dim_v = 128;
  a->max_seqlen_new = 4, a->cu_seqlens_new = DCUN;
  a->k_new = DKN, a->v_new = DVN;
  a->k_new_strides = a->v_new_strides = (ckjit_attention_strides){0, 128, 256, 1};
  a->kv = base_kv();
  c.kv = base_kv();
  c.batch = 2;
  return c;
}

/* c's status must be `want`, and its message name the function and `word`. */
static void expect_word(call c, ckjit_status want, const char *word) {
  const ae_result r = ae_run(do_call, &c);
  const char *api = api_names[c.api];
  if (r.status != want || r.last_status != r.status) {
    print_error("%s: %s: got %s (last status %s), want %s (%s)\n", api, c.what, ckjit_status_string(r.status),
                ckjit_status_string(r.last_status), ckjit_status_string(want), r.message);
    fail();
  }
  if (!strstr(r.message, api) || !strstr(r.message, word)) {
    print_error("%s: %s: the message does not name %s and \"%s\": \"%s\"\n", api, c.what, api, word, r.message);
    fail();
  }
}

static void valid(call c) {
  if (ae_has_device) return;
  ae_expect(do_call, &c, api_names[c.api], c.what, CKJIT_ERROR_NO_DEVICE, CKJIT_ERROR_BACKEND_UNAVAILABLE);
}

static void succeeds(call c) {
  const ae_result r = ae_run(do_call, &c);
  if (r.status != CKJIT_SUCCESS) {
    print_error("%s: %s: got %s, want SUCCESS (%s)\n", api_names[c.api], c.what, ckjit_status_string(r.status),
                r.message);
    fail();
  }
}

/* A fresh valid call of `api` changed by the statements that follow (which
 * may use d, a, kv: the attention descriptor, the append descriptor, and
 * the cache of the call), then checked. */
#define CASE(check_stmt, api, what, ...)                                                        \
  do {                                                                                           \
    call c = make(api, "%s", what);                                                              \
    ckjit_paged_attention_desc *d = &c.d;                                                        \
    ckjit_paged_kv_append_desc *a = &c.a;                                                        \
    ckjit_paged_kv *kv = api == A_ATTENTION ? &c.d.kv : api == A_APPEND ? &c.a.kv : &c.kv;       \
    (void)d, (void)a, (void)kv;                                                                  \
    __VA_ARGS__;                                                                                 \
    check_stmt;                                                                                  \
  } while (0)
#define INVALID(api, word, what, ...) CASE(expect_word(c, CKJIT_ERROR_INVALID_ARGUMENT, word), api, what, __VA_ARGS__)
#define UNSUP(api, word, what, ...) CASE(expect_word(c, CKJIT_ERROR_UNSUPPORTED, word), api, what, __VA_ARGS__)
#define VALID(api, what, ...) CASE(valid(c), api, what, __VA_ARGS__)
#define SUCCEEDS(api, what, ...) CASE(succeeds(c), api, what, __VA_ARGS__)

static int group_setup(void **state) {
  (void)state;
  unsetenv("CKJIT_ATTENTION_PIPELINE");
  return ae_group_setup("paged-api");
}

/* ---- desc_init and the stride helpers ---------------------------------------------- */

static void test_desc_init(void **state) {
  (void)state;
  ckjit_paged_attention_desc d;
  memset(&d, 0x77, sizeof d);
  ckjit_paged_attention_desc_init(&d);
  assert_int_equal(d.dtype, CKJIT_BF16);
  assert_int_equal(d.batch, 1);
  assert_int_equal(d.num_heads_q, 1);
  assert_int_equal(d.num_heads_kv, 1);
  assert_int_equal(d.window_left, -1);
  assert_int_equal(d.window_right, -1);
  assert_int_equal(d.head_dim_qk, 0);
  assert_int_equal(d.max_seqlen_q, 0);
  assert_null(d.q);
  assert_null(d.o);
  assert_null(d.lse);
  assert_null(d.cu_seqlens_q);
  assert_null(d.kv.k_pages);
  assert_null(d.kv.block_table);
  assert_null(d.kv.kv_indptr);
  assert_null(d.kv.error);
  assert_int_equal(d.kv.max_seqlen_k, 0);
  assert_int_equal(d.kv.num_pages, 0);
  assert_int_equal(d.kv.page_size, 0);
  assert_int_equal(d.kv.k_strides.page, 0);
  assert_true(d.softmax_scale == 0.0f && d.softcap == 0.0f);
  assert_int_equal(d.mask, CKJIT_ATTENTION_MASK_NONE);
  ckjit_paged_kv_append_desc a;
  memset(&a, 0x77, sizeof a);
  ckjit_paged_kv_append_desc_init(&a);
  assert_int_equal(a.dtype, CKJIT_BF16);
  assert_int_equal(a.batch, 1);
  assert_int_equal(a.num_heads_kv, 1);
  assert_int_equal(a.max_seqlen_new, 0);
  assert_null(a.cu_seqlens_new);
  assert_null(a.k_new);
  assert_null(a.kv.k_pages);
  ckjit_paged_attention_desc_init(NULL); /* no crash */
  ckjit_paged_kv_append_desc_init(NULL);
}

static void test_stride_helpers(void **state) {
  (void)state;
  ckjit_paged_strides s = ckjit_paged_strides_nhd(16, 3, 64); /* [page][slot][head][dim] */
  assert_int_equal(s.page, 16 * 3 * 64);
  assert_int_equal(s.slot, 3 * 64);
  assert_int_equal(s.head, 64);
  assert_int_equal(s.dim, 1);
  s = ckjit_paged_strides_hnd(16, 3, 64); /* [page][head][slot][dim] */
  assert_int_equal(s.page, 3 * 16 * 64);
  assert_int_equal(s.head, 16 * 64);
  assert_int_equal(s.slot, 64);
  assert_int_equal(s.dim, 1);
  s = ckjit_paged_strides_hnd(1024, (int64_t)1 << 20, 256); /* 64-bit products */
  assert_int_equal(s.page, (int64_t)1024 * ((int64_t)1 << 20) * 256);
}

/* ---- ckjit_paged_attention: the attention's own arguments ------------------------------ */

static void test_attention_desc(void **state) {
  (void)state;
  call c = make(A_ATTENTION, "desc NULL");
  c.null_desc = 1;
  expect_word(c, CKJIT_ERROR_INVALID_ARGUMENT, "desc is NULL");
  INVALID(A_ATTENTION, "dtype", "dtype 99", d->dtype = (ckjit_dtype)99);
  UNSUP(A_ATTENTION, "dtype", "dtype i8", d->dtype = CKJIT_I8);
  UNSUP(A_ATTENTION, "dtype", "dtype fp8 e4m3", d->dtype = CKJIT_FP8_E4M3);
  UNSUP(A_ATTENTION, "stride", "kv.k_strides.page 2^31", d->kv.k_strides.page = (int64_t)1 << 31);
  UNSUP(A_APPEND, "stride", "kv.v_strides.slot 2^31", a->kv.v_strides.slot = (int64_t)1 << 31);
  INVALID(A_ATTENTION, "batch", "batch -1", d->batch = -1);
  INVALID(A_ATTENTION, "batch", "batch 2^31 - 1", d->batch = INT32_MAX);
  INVALID(A_ATTENTION, "num_heads_q", "num_heads_q -1", d->num_heads_q = -1);
  INVALID(A_ATTENTION, "num_heads_kv", "num_heads_kv 0", d->num_heads_kv = 0);
  INVALID(A_ATTENTION, "num_heads_kv", "heads 8 % 3 != 0", d->num_heads_kv = 3);
  INVALID(A_ATTENTION, "num_heads_kv", "num_heads_kv 16 > num_heads_q 8", d->num_heads_kv = 16);
  INVALID(A_ATTENTION, "max_seqlen_q", "max_seqlen_q -1", d->max_seqlen_q = -1);
  INVALID(A_ATTENTION, "max_seqlen_q", "max_seqlen_q INT64_MIN", d->max_seqlen_q = INT64_MIN);
  INVALID(A_ATTENTION, "max_seqlen_q", "max_seqlen_q 2^30 + 1", d->max_seqlen_q = ((int64_t)1 << 30) + 1);
  INVALID(A_ATTENTION, "kv.max_seqlen_k", "kv.max_seqlen_k -1", d->kv.max_seqlen_k = -1);
  INVALID(A_ATTENTION, "kv.max_seqlen_k", "kv.max_seqlen_k INT64_MIN", d->kv.max_seqlen_k = INT64_MIN);
  static const int64_t bad_dims[] = {0, -64, 32, 80, 127, 320};
  for (size_t i = 0; i < sizeof bad_dims / sizeof bad_dims[0]; i++) {
    char what[64];
    snprintf(what, sizeof what, "head_dim_qk %lld", (long long)bad_dims[i]);
    UNSUP(A_ATTENTION, "head_dim", what, d->head_dim_qk = bad_dims[i]);
    snprintf(what, sizeof what, "head_dim_v %lld", (long long)bad_dims[i]);
    UNSUP(A_ATTENTION, "head_dim", what, d->head_dim_v = bad_dims[i]);
  }
  INVALID(A_ATTENTION, "softmax_scale", "softmax_scale NaN", d->softmax_scale = NAN);
  INVALID(A_ATTENTION, "softmax_scale", "softmax_scale +inf", d->softmax_scale = INFINITY);
  INVALID(A_ATTENTION, "softcap", "softcap -1", d->softcap = -1.0f);
  INVALID(A_ATTENTION, "softcap", "softcap NaN", d->softcap = NAN);
  INVALID(A_ATTENTION, "mask", "mask 3", d->mask = (ckjit_attention_mask)3);
  INVALID(A_ATTENTION, "mask", "mask -1", d->mask = (ckjit_attention_mask)-1);
  INVALID(A_ATTENTION, "q is NULL", "q NULL", d->q = NULL);
  INVALID(A_ATTENTION, "o is NULL", "o NULL", d->o = NULL);
  INVALID(A_ATTENTION, "not aligned", "q + 1 byte", d->q = PLUS(DQ, 1));
  INVALID(A_ATTENTION, ": lse (", "lse + 2 bytes", d->lse = PLUS(DLSE, 2));
  INVALID(A_ATTENTION, "cu_seqlens", "cu_seqlens_q + 2 bytes", d->cu_seqlens_q = PLUS(DCUQ, 2));
  INVALID(A_ATTENTION, "o has a negative stride", "o head stride -128", d->o_strides.head = -128);
  INVALID(A_ATTENTION, "q's extent overflows", "q seq stride 2^62", d->q_strides.seq = (int64_t)1 << 62);
}

/* ---- the cache (shared by attention and append) ------------------------------------ */

static void kv_cases(int api) {
  static const int64_t bad_pages[] = {0, -16, 3, 24, 1536, 2048};
  for (size_t i = 0; i < sizeof bad_pages / sizeof bad_pages[0]; i++) {
    char what[64];
    snprintf(what, sizeof what, "page_size %lld", (long long)bad_pages[i]);
    UNSUP(api, "page_size", what, kv->page_size = bad_pages[i]);
  }
  INVALID(api, "num_pages", "num_pages 0", kv->num_pages = 0);
  INVALID(api, "num_pages", "num_pages -1", kv->num_pages = -1);
  INVALID(api, "num_pages", "num_pages 2^31", kv->num_pages = (int64_t)1 << 31);
  INVALID(api, "kv.k_pages is NULL", "k_pages NULL", kv->k_pages = NULL);
  INVALID(api, "kv.v_pages is NULL", "v_pages NULL", kv->v_pages = NULL);
  INVALID(api, "kv.k_pages (", "k_pages + 1 byte", kv->k_pages = PLUS(DK, 1));
  INVALID(api, "kv.v_pages (", "f32 v_pages + 2 bytes", d->dtype = a->dtype = CKJIT_F32, kv->v_pages = PLUS(DV, 2));
  INVALID(api, "kv.block_table", "padded: block_table NULL", kv->block_table = NULL);
  INVALID(api, "kv.block_table", "padded: seqlens_k NULL", kv->seqlens_k = NULL);
  INVALID(api, "kv.block_table", "no table at all", kv->block_table = NULL, kv->seqlens_k = NULL);
  INVALID(api, "kv.kv_indptr", "CSR: kv_page_indices NULL", to_csr(kv), kv->kv_page_indices = NULL);
  INVALID(api, "kv.kv_indptr", "CSR: kv_last_page_len NULL", to_csr(kv), kv->kv_last_page_len = NULL);
  INVALID(api, "kv.max_pages_per_seq", "max_pages_per_seq 0", kv->max_pages_per_seq = 0);
  INVALID(api, "kv.max_pages_per_seq", "max_pages_per_seq -1", kv->max_pages_per_seq = -1);
  INVALID(api, "kv.max_pages_per_seq", "max_pages_per_seq 2^31", kv->max_pages_per_seq = (int64_t)1 << 31);
  INVALID(api, "kv.block_table must be 4-byte aligned", "block_table + 2 bytes", kv->block_table = PLUS(DBT, 2));
  INVALID(api, "kv.seqlens_k must be 4-byte aligned", "seqlens_k + 1 byte", kv->seqlens_k = PLUS(DSL, 1));
  INVALID(api, "kv.kv_indptr must be 4-byte aligned", "kv_indptr + 2 bytes", to_csr(kv), kv->kv_indptr = PLUS(DIP, 2));
  INVALID(api, "kv.kv_page_indices must be 4-byte aligned", "kv_page_indices + 1 byte", to_csr(kv),
          kv->kv_page_indices = PLUS(DIX, 1));
  INVALID(api, "kv.kv_last_page_len must be 4-byte aligned", "kv_last_page_len + 3 bytes", to_csr(kv),
          kv->kv_last_page_len = PLUS(DLL, 3));
  INVALID(api, "kv.error must be 4-byte aligned", "error + 2 bytes", kv->error = PLUS(DERR, 2));
  INVALID(api, "kv.k_pages has a negative stride", "k page stride -1", kv->k_strides.page = -1);
  INVALID(api, "kv.k_pages has a negative stride", "k slot stride -256", kv->k_strides.slot = -256);
  INVALID(api, "kv.v_pages has a negative stride", "v head stride -128", kv->v_strides.head = -128);
  INVALID(api, "kv.v_pages has a negative stride", "v dim stride -1", kv->v_strides.dim = -1);
  INVALID(api, "kv.k_pages's extent overflows", "k page stride 2^62 over 64 pages", kv->k_strides.page = (int64_t)1 << 62);
  INVALID(api, "kv.v_pages's extent overflows", "v dim stride INT64_MAX", kv->v_strides.dim = INT64_MAX);
  INVALID(api, "kv.k_pages's extent overflows", "2^31 - 1 pages of stride 2^40",
          kv->num_pages = INT32_MAX, kv->k_strides.page = (int64_t)1 << 40);
  INVALID(api, "kv.v_pages's extent overflows the address space", "v_pages ending past the address space",
          kv->v_pages = (void *)(uintptr_t)(UINTPTR_MAX - 4095));
}

static void test_attention_kv(void **state) {
  (void)state;
  kv_cases(A_ATTENTION);
}

/* ---- ckjit_paged_kv_append --------------------------------------------------------------- */

static void test_append(void **state) {
  (void)state;
  call c = make(A_APPEND, "desc NULL");
  c.null_desc = 1;
  expect_word(c, CKJIT_ERROR_INVALID_ARGUMENT, "desc is NULL");
  INVALID(A_APPEND, "dtype", "dtype 99", a->dtype = (ckjit_dtype)99);
  UNSUP(A_APPEND, "dtype", "dtype i32", a->dtype = CKJIT_I32);
  INVALID(A_APPEND, "batch", "batch -1", a->batch = -1);
  INVALID(A_APPEND, "num_heads_kv", "num_heads_kv 0", a->num_heads_kv = 0);
  INVALID(A_APPEND, "max_seqlen_new", "max_seqlen_new -1", a->max_seqlen_new = -1);
  INVALID(A_APPEND, "max_seqlen_new", "max_seqlen_new INT64_MIN", a->max_seqlen_new = INT64_MIN);
  INVALID(A_APPEND, "max_seqlen_new", "max_seqlen_new 2^30 + 1", a->max_seqlen_new = ((int64_t)1 << 30) + 1);
  static const int64_t bad_dims[] = {0, 32, 80, 512};
  for (size_t i = 0; i < sizeof bad_dims / sizeof bad_dims[0]; i++) {
    char what[64];
    snprintf(what, sizeof what, "head_dim_qk %lld", (long long)bad_dims[i]);
    UNSUP(A_APPEND, "head_dim", what, a->head_dim_qk = bad_dims[i]);
    snprintf(what, sizeof what, "head_dim_v %lld", (long long)bad_dims[i]);
    UNSUP(A_APPEND, "head_dim", what, a->head_dim_v = bad_dims[i]);
  }
  INVALID(A_APPEND, "cu_seqlens_new", "cu_seqlens_new NULL", a->cu_seqlens_new = NULL);
  INVALID(A_APPEND, "cu_seqlens_new", "cu_seqlens_new + 2 bytes", a->cu_seqlens_new = PLUS(DCUN, 2));
  INVALID(A_APPEND, "k_new is NULL", "k_new NULL", a->k_new = NULL);
  INVALID(A_APPEND, "v_new is NULL", "v_new NULL", a->v_new = NULL);
  INVALID(A_APPEND, "k_new (", "k_new + 1 byte", a->k_new = PLUS(DKN, 1));
  INVALID(A_APPEND, "v_new has a negative stride", "v_new seq stride -256", a->v_new_strides.seq = -256);
  INVALID(A_APPEND, "k_new's extent overflows", "k_new seq stride INT64_MAX / 2", a->k_new_strides.seq = INT64_MAX / 2);
  kv_cases(A_APPEND);
}

/* ---- ckjit_paged_kv_check ----------------------------------------------------------------- */

static void test_check(void **state) {
  (void)state;
  call c = make(A_CHECK, "kv NULL");
  c.null_desc = 1;
  expect_word(c, CKJIT_ERROR_INVALID_ARGUMENT, "kv is NULL");
  INVALID(A_CHECK, "batch", "batch -1", c.batch = -1);
  INVALID(A_CHECK, "batch", "batch INT64_MIN", c.batch = INT64_MIN);
  INVALID(A_CHECK, "batch", "batch 2^31 - 1", c.batch = INT32_MAX);
  static const int64_t bad_pages[] = {0, -16, 3, 2048};
  for (size_t i = 0; i < sizeof bad_pages / sizeof bad_pages[0]; i++) {
    char what[64];
    snprintf(what, sizeof what, "page_size %lld", (long long)bad_pages[i]);
    UNSUP(A_CHECK, "page_size", what, kv->page_size = bad_pages[i]);
  }
  INVALID(A_CHECK, "num_pages", "num_pages 0", kv->num_pages = 0);
  INVALID(A_CHECK, "num_pages", "num_pages 2^31", kv->num_pages = (int64_t)1 << 31);
  INVALID(A_CHECK, "block_table", "padded: block_table NULL", kv->block_table = NULL);
  INVALID(A_CHECK, "block_table", "padded: seqlens_k NULL", kv->seqlens_k = NULL);
  INVALID(A_CHECK, "max_pages_per_seq", "padded: max_pages_per_seq 0", kv->max_pages_per_seq = 0);
  INVALID(A_CHECK, "kv_page_indices", "CSR: kv_page_indices NULL", to_csr(kv), kv->kv_page_indices = NULL);
  INVALID(A_CHECK, "kv_last_page_len", "CSR: kv_last_page_len NULL", to_csr(kv), kv->kv_last_page_len = NULL);
  VALID(A_CHECK, "padded tables", (void)0);
  VALID(A_CHECK, "CSR tables", to_csr(kv));
  VALID(A_CHECK, "padded tables, no error word", kv->error = NULL);
}

/* ---- validation first; valid calls without a GPU; empty problems -------------------------- */

/* ---- fp8 pages ------------------------------------------------------------------------ */

/* The cache as fp8 pages: one scale per K/V head (scale_stride 1). */
static void to_fp8(ckjit_paged_kv *kv) {
  kv->page_dtype = CKJIT_FP8_E4M3;
  kv->k_scale = DKS, kv->v_scale = DVS, kv->scale_stride = 1;
}

/* c must be refused (INVALID_ARGUMENT or UNSUPPORTED: a value that is no
 * dtype at all), its message naming the function and `word`. */
static void refused_word(call c, const char *word) {
  const ae_result r = ae_run(do_call, &c);
  const char *api = api_names[c.api];
  if ((r.status != CKJIT_ERROR_INVALID_ARGUMENT && r.status != CKJIT_ERROR_UNSUPPORTED) || !strstr(r.message, api) ||
      !strstr(r.message, word)) {
    print_error("%s: %s: got %s (\"%s\"), want INVALID_ARGUMENT or UNSUPPORTED naming %s and \"%s\"\n", api, c.what,
                ckjit_status_string(r.status), r.message, api, word);
    fail();
  }
}
#define REFUSED(api, word, what, ...) CASE(refused_word(c, word), api, what, __VA_ARGS__)

static void fp8_cases(int api) {
  INVALID(api, "kv.k_scale", "fp8: k_scale NULL", to_fp8(kv), kv->k_scale = NULL);
  INVALID(api, "kv.v_scale", "fp8: v_scale NULL", to_fp8(kv), kv->v_scale = NULL);
  INVALID(api, "kv.k_scale", "fp8, one scale: k_scale and v_scale NULL", to_fp8(kv), kv->scale_stride = 0,
          kv->k_scale = NULL, kv->v_scale = NULL);
  INVALID(api, "kv.k_scale", "fp8: k_scale + 2 bytes", to_fp8(kv), kv->k_scale = PLUS(DKS, 2));
  INVALID(api, "kv.v_scale", "fp8: v_scale + 1 byte", to_fp8(kv), kv->v_scale = PLUS(DVS, 1));
  INVALID(api, "kv.v_scale", "fp8, one scale: v_scale + 3 bytes", to_fp8(kv), kv->scale_stride = 0,
          kv->v_scale = PLUS(DVS, 3));
  INVALID(api, "kv.scale_stride", "fp8: scale_stride 2", to_fp8(kv), kv->scale_stride = 2);
  INVALID(api, "kv.scale_stride", "fp8: scale_stride -1", to_fp8(kv), kv->scale_stride = -1);
  INVALID(api, "kv.scale_stride", "fp8: scale_stride INT64_MIN", to_fp8(kv), kv->scale_stride = INT64_MIN);
  UNSUP(api, "page_dtype", "page_dtype f16 with a bf16 call", kv->page_dtype = CKJIT_F16);
  UNSUP(api, "page_dtype", "page_dtype bf16 with an f16 call", d->dtype = a->dtype = CKJIT_F16,
        kv->page_dtype = CKJIT_BF16);
  UNSUP(api, "page_dtype", "page_dtype i8", kv->page_dtype = CKJIT_I8);
  UNSUP(api, "page_dtype", "page_dtype i8 with scales", to_fp8(kv), kv->page_dtype = CKJIT_I8);
  UNSUP(api, "page_dtype", "page_dtype fp8 e5m2", to_fp8(kv), kv->page_dtype = CKJIT_FP8_E5M2);
  UNSUP(api, "page_dtype", "page_dtype i32", kv->page_dtype = CKJIT_I32);
  REFUSED(api, "page_dtype", "page_dtype 99", kv->page_dtype = (ckjit_dtype)99);
  REFUSED(api, "page_dtype", "page_dtype -1", kv->page_dtype = (ckjit_dtype)-1);
}

static void test_fp8_pages(void **state) {
  (void)state;
  fp8_cases(A_ATTENTION);
  fp8_cases(A_APPEND);
}

static void test_validation_first(void **state) {
  (void)state;
  INVALID(A_ATTENTION, "dtype", "batch 0, dtype 99", d->batch = 0, d->dtype = (ckjit_dtype)99);
  INVALID(A_ATTENTION, "softcap", "max_seqlen_q 0, softcap NaN", d->max_seqlen_q = 0, d->softcap = NAN);
  UNSUP(A_ATTENTION, "head_dim", "batch 0, head_dim_v 80", d->batch = 0, d->head_dim_v = 80);
  UNSUP(A_ATTENTION, "page_size", "batch 0, page_size 3", d->batch = 0, kv->page_size = 3);
  INVALID(A_ATTENTION, "kv.max_seqlen_k", "batch 0, kv.max_seqlen_k -1", d->batch = 0, kv->max_seqlen_k = -1);
  INVALID(A_ATTENTION, "num_pages", "max_seqlen_q 0, num_pages 0", d->max_seqlen_q = 0, kv->num_pages = 0);
  INVALID(A_APPEND, "max_seqlen_new", "batch 0, max_seqlen_new -1", a->batch = 0, a->max_seqlen_new = -1);
  UNSUP(A_APPEND, "head_dim", "batch 0, head_dim_qk 80", a->batch = 0, a->head_dim_qk = 80);
  UNSUP(A_APPEND, "page_size", "batch 0, page_size 3", a->batch = 0, a->kv.page_size = 3);
  INVALID(A_APPEND, "kv.max_seqlen_k", "kv.max_seqlen_k -1", a->kv.max_seqlen_k = -1);
  setenv("CKJIT_ATTENTION_PIPELINE", "bogus", 1);
  INVALID(A_ATTENTION, "softmax_scale", "softmax_scale NaN, CKJIT_ATTENTION_PIPELINE=bogus", d->softmax_scale = NAN);
  UNSUP(A_ATTENTION, "page_size", "page_size 2048, CKJIT_ATTENTION_PIPELINE=bogus", kv->page_size = 2048);
  INVALID(A_ATTENTION, "kv.block_table", "block_table NULL, CKJIT_ATTENTION_PIPELINE=bogus", kv->block_table = NULL);
  unsetenv("CKJIT_ATTENTION_PIPELINE");
}

static void test_valid_no_device(void **state) {
  (void)state;
  AE_SKIP_IF_DEVICE("no-device");
  VALID(A_ATTENTION, "the base descriptor", (void)0);
  VALID(A_ATTENTION, "CSR tables (max_pages_per_seq unused)", to_csr(kv));
  VALID(A_ATTENTION, "CSR tables beside padded ones (kv_indptr selects CSR)", kv->kv_indptr = DIP,
        kv->kv_page_indices = DIX, kv->kv_last_page_len = DLL);
  static const int64_t pages[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
    char what[64];
    snprintf(what, sizeof what, "page_size %lld", (long long)pages[i]);
    VALID(A_ATTENTION, what, kv->page_size = pages[i], kv->k_strides = kv->v_strides = ckjit_paged_strides_nhd(pages[i], 2, 128));
    VALID(A_APPEND, what, kv->page_size = pages[i], kv->k_strides = kv->v_strides = ckjit_paged_strides_hnd(pages[i], 2, 128));
  }
  VALID(A_ATTENTION, "HND pools", kv->k_strides = kv->v_strides = ckjit_paged_strides_hnd(16, 2, 128));
  VALID(A_ATTENTION, "one K/V-interleaved pool", kv->k_strides = (ckjit_paged_strides){2 * 16 * 256, 256, 128, 1},
        kv->v_strides = kv->k_strides, kv->v_pages = PLUS(DK, 16 * 256 * 2));
  VALID(A_ATTENTION, "f16", d->dtype = CKJIT_F16);
  VALID(A_ATTENTION, "f32", d->dtype = CKJIT_F32);
  VALID(A_ATTENTION, "head dims 64", d->head_dim_qk = d->head_dim_v = 64, kv->k_strides = kv->v_strides = ckjit_paged_strides_nhd(16, 2, 64));
  VALID(A_ATTENTION, "head dims 256", d->head_dim_qk = d->head_dim_v = 256, kv->k_strides = kv->v_strides = ckjit_paged_strides_nhd(16, 2, 256));
  VALID(A_ATTENTION, "MQA", d->num_heads_kv = 1, kv->k_strides = kv->v_strides = ckjit_paged_strides_nhd(16, 1, 128));
  VALID(A_ATTENTION, "causal", d->mask = CKJIT_ATTENTION_MASK_CAUSAL);
  VALID(A_ATTENTION, "window 16 / 0", d->mask = CKJIT_ATTENTION_MASK_WINDOW, d->window_left = 16, d->window_right = 0);
  VALID(A_ATTENTION, "softcap 30", d->softcap = 30.0f);
  VALID(A_ATTENTION, "no LSE", d->lse = NULL, d->lse_strides.head = -1);
  VALID(A_ATTENTION, "no error word", kv->error = NULL);
  VALID(A_ATTENTION, "kv.max_seqlen_k hint 100", kv->max_seqlen_k = 100);
  VALID(A_ATTENTION, "kv.max_seqlen_k hint past the table (a hint only)", kv->max_seqlen_k = (int64_t)1 << 40);
  VALID(A_ATTENTION, "kv.max_seqlen_k hint with CSR tables", to_csr(kv), kv->max_seqlen_k = 5);
  VALID(A_ATTENTION, "dense queries (cu_seqlens_q NULL)", d->cu_seqlens_q = NULL,
        d->q_strides = d->o_strides = ckjit_attention_strides_bshd(4, 8, 128), d->lse_strides = (ckjit_attention_strides){32, 4, 1, 0});
  VALID(A_ATTENTION, "pool head-dim stride 2 (SIMT)", kv->k_strides = (ckjit_paged_strides){16 * 2 * 256, 512, 256, 2});
  VALID(A_ATTENTION, "num_pages 2^31 - 1", kv->num_pages = INT32_MAX);
  VALID(A_APPEND, "the base descriptor", (void)0);
  VALID(A_APPEND, "CSR tables", to_csr(kv));
  VALID(A_APPEND, "f32, no error word", a->dtype = CKJIT_F32, kv->error = NULL);
  VALID(A_APPEND, "head dims 192 / 128", a->head_dim_qk = 192);
  /* fp8 pages (strides in elements, which are bytes) */
  for (int api = A_ATTENTION; api <= A_APPEND; api++) {
    VALID(api, "fp8 pages, one scale per K/V head", to_fp8(kv));
    VALID(api, "fp8 pages, one scale for the pool", to_fp8(kv), kv->scale_stride = 0);
    VALID(api, "fp8 pages, K and V sharing one scale array", to_fp8(kv), kv->v_scale = kv->k_scale);
    VALID(api, "fp8 pages, scales 4 bytes past 16", to_fp8(kv), kv->k_scale = PLUS(DKS, 4), kv->v_scale = PLUS(DVS, 12));
    VALID(api, "fp8 pages, CSR tables", to_fp8(kv), to_csr(kv));
    VALID(api, "fp8 pages, f16 call", to_fp8(kv), d->dtype = a->dtype = CKJIT_F16);
    VALID(api, "fp8 pages, HND, page 1", to_fp8(kv), kv->page_size = 1,
          kv->k_strides = kv->v_strides = ckjit_paged_strides_hnd(1, 2, 128));
    VALID(api, "fp8 pages, page 1024", to_fp8(kv), kv->page_size = 1024,
          kv->k_strides = kv->v_strides = ckjit_paged_strides_nhd(1024, 2, 128));
    VALID(api, "fp8 pages, head dims 64", to_fp8(kv), d->head_dim_qk = d->head_dim_v = 64,
          a->head_dim_qk = a->head_dim_v = 64, kv->k_strides = kv->v_strides = ckjit_paged_strides_nhd(16, 2, 64));
    VALID(api, "fp8 pages one byte past 16 (elements are bytes: SIMT)", to_fp8(kv), kv->k_pages = PLUS(DK, 1),
          kv->v_pages = PLUS(DV, 17));
    VALID(api, "one fp8 K/V-interleaved pool", to_fp8(kv),
          kv->k_strides = (ckjit_paged_strides){2 * 16 * 256, 256, 128, 1}, kv->v_strides = kv->k_strides,
          kv->v_pages = PLUS(DK, 16 * 256));
    VALID(api, "page_dtype the call's (bf16)", kv->page_dtype = CKJIT_BF16);
    VALID(api, "page_dtype the call's (f16)", d->dtype = a->dtype = CKJIT_F16, kv->page_dtype = CKJIT_F16);
    VALID(api, "page_dtype 0 (the call's): scales not looked at", kv->k_scale = NULL, kv->v_scale = PLUS(DVS, 1),
          kv->scale_stride = -7);
  }
  VALID(A_ATTENTION, "fp8 pages, 200 queries (SIMT)", to_fp8(kv), d->max_seqlen_q = 200);
  VALID(A_ATTENTION, "fp8 pages, causal, softcap 30", to_fp8(kv), d->mask = CKJIT_ATTENTION_MASK_CAUSAL,
        d->softcap = 30.0f);
  setenv("CKJIT_ATTENTION_PIPELINE", "wgmma", 1); /* fp8 refused only once a device is found */
  VALID(A_ATTENTION, "fp8 pages, CKJIT_ATTENTION_PIPELINE=wgmma (read after the device)", to_fp8(kv));
  unsetenv("CKJIT_ATTENTION_PIPELINE");
  setenv("CKJIT_ATTENTION_PIPELINE", "bogus", 1); /* read only once a device is found */
  VALID(A_ATTENTION, "CKJIT_ATTENTION_PIPELINE=bogus (read after the device)", (void)0);
  unsetenv("CKJIT_ATTENTION_PIPELINE");
}

/* Nothing to do: SUCCESS without a device (the queries, O and the new
 * tokens not looked at). */
static void test_empty_succeeds(void **state) {
  (void)state;
  AE_SKIP_IF_DEVICE("empty-problem");
  SUCCEEDS(A_ATTENTION, "batch 0", d->batch = 0);
  SUCCEEDS(A_ATTENTION, "max_seqlen_q 0", d->max_seqlen_q = 0);
  SUCCEEDS(A_ATTENTION, "num_heads_q 0", d->num_heads_q = 0);
  SUCCEEDS(A_ATTENTION, "batch 0, q and o NULL", d->batch = 0, d->q = NULL, d->o = NULL, d->lse = NULL);
  SUCCEEDS(A_APPEND, "batch 0", a->batch = 0);
  SUCCEEDS(A_APPEND, "max_seqlen_new 0", a->max_seqlen_new = 0);
  SUCCEEDS(A_APPEND, "batch 0, new tokens NULL", a->batch = 0, a->k_new = a->v_new = NULL, a->cu_seqlens_new = NULL);
  SUCCEEDS(A_ATTENTION, "batch 0, fp8 pages without scales (the pools not looked at)", d->batch = 0, to_fp8(kv),
           kv->k_scale = kv->v_scale = NULL);
  SUCCEEDS(A_APPEND, "max_seqlen_new 0, fp8 pages without scales", a->max_seqlen_new = 0, to_fp8(kv),
           kv->k_scale = kv->v_scale = NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_desc_init),
      cmocka_unit_test(test_stride_helpers),
      cmocka_unit_test(test_attention_desc),
      cmocka_unit_test(test_attention_kv),
      cmocka_unit_test(test_append),
      cmocka_unit_test(test_check),
      cmocka_unit_test(test_fp8_pages),
      cmocka_unit_test(test_validation_first),
      cmocka_unit_test(test_valid_no_device),
      cmocka_unit_test(test_empty_succeeds),
  };
  return cmocka_run_group_tests_name("paged_api_errors", tests, group_setup, ae_group_teardown);
}
