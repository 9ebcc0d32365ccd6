/* Argument validation of ckjit_attention, which happens before any device
 * work: each bad argument gets its status (INVALID_ARGUMENT, or
 * UNSUPPORTED for a known dtype or head dimension the op does not do) and
 * a message naming the function and the argument; a valid descriptor on a
 * host without a GPU fails with NO_DEVICE (or BACKEND_UNAVAILABLE), never
 * crashes; an empty problem (batch, seqlen_q or num_heads_q 0) succeeds
 * without a device.  Also ckjit_attention_desc_init's defaults and the
 * stride helpers.  CKJIT_ATTENTION_PIPELINE is read after validation and
 * after the device is found, so without a GPU an unknown value is never
 * reached: NO_DEVICE (the GPU suite checks its INVALID_ARGUMENT).  Links
 * the shared library (public API only); every call runs on a fresh thread,
 * so its error state is its own.  Pointers are fake, well-aligned device
 * addresses that must never be dereferenced. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "api_error_util.h"

#define DQ ((const void *)AE_FAKE_DEV(1))
#define DK ((const void *)AE_FAKE_DEV(2))
#define DV ((const void *)AE_FAKE_DEV(3))
#define DO AE_FAKE_DEV(4)
#define DLSE ((float *)AE_FAKE_DEV(5))
#define DBIAS ((const void *)AE_FAKE_DEV(6))
#define DALIBI ((const float *)AE_FAKE_DEV(7))
#define DCUQ ((const int32_t *)AE_FAKE_DEV(8))
#define DCUK ((const int32_t *)AE_FAKE_DEV(9))

/* Offsets a pointer by `bytes`. */
#define PLUS(p, bytes) ((void *)((uintptr_t)(p) + (uintptr_t)(bytes)))

/* ---- one call, described as data so it can run on a fresh thread ---------- */

typedef struct call {
  char what[160];
  int null_desc;
  ckjit_attention_desc d;
} call;

static ckjit_status do_call(const void *p) {
  const call *c = p;
  return ckjit_attention(c->null_desc ? NULL : &c->d, NULL);
}

/* A valid problem: bf16, batch 2, heads 8 / 2 (GQA), 100 queries, 257
 * keys, head dims 128, BSHD tensors and a [b][h][s] LSE. */
static call attention_call(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static call attention_call(const char *fmt, ...) {
  call c;
  memset(&c, 0, sizeof c);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c.what, sizeof c.what, fmt, ap);
  va_end(ap);
  ckjit_attention_desc *d = &c.d;
  ckjit_attention_desc_init(d);
  d->batch = 2, d->num_heads_q = 8, d->num_heads_kv = 2, d->seqlen_q = 100, d->seqlen_k = 257;
  d->head_dim_qk = d->head_dim_v = 128;
  d->q = DQ, d->q_strides = ckjit_attention_strides_bshd(100, 8, 128);
  d->k = DK, d->k_strides = ckjit_attention_strides_bshd(257, 2, 128);
  d->v = DV, d->v_strides = ckjit_attention_strides_bshd(257, 2, 128);
  d->o = DO, d->o_strides = ckjit_attention_strides_bshd(100, 8, 128);
  d->lse = DLSE, d->lse_strides = (ckjit_attention_strides){8 * 100, 100, 1, 0};
  return c;
}

/* Runs c on a fresh thread: its status must be `want`, ckjit_last_status()
 * must agree, and the message must name ckjit_attention and contain `word`
 * (the argument at fault). */
static void expect_word(call c, ckjit_status want, const char *word) {
  const ae_result r = ae_run(do_call, &c);
  if (r.status != want || r.last_status != r.status) {
    print_error("ckjit_attention: %s: got %s (last status %s), want %s (%s)\n", c.what, ckjit_status_string(r.status),
                ckjit_status_string(r.last_status), ckjit_status_string(want), r.message);
    fail();
  }
  if (!strstr(r.message, "ckjit_attention") || !strstr(r.message, word)) {
    print_error("ckjit_attention: %s: the message does not name ckjit_attention and \"%s\": \"%s\"\n", c.what, word,
                r.message);
    fail();
  }
}

static void valid(call c) {
  if (ae_has_device) return;
  ae_expect(do_call, &c, "ckjit_attention", c.what, CKJIT_ERROR_NO_DEVICE, CKJIT_ERROR_BACKEND_UNAVAILABLE);
}

/* A fresh valid call changed by the statements that follow `what` (which
 * may use d, its descriptor), expecting `status` and a message naming
 * `word` (CHECK, INVALID, UNSUP), or NO_DEVICE without a GPU (VALID). */
#define CHECK(status, word, what, ...)   \
  do {                                   \
    call c = attention_call("%s", what); \
    ckjit_attention_desc *d = &c.d;      \
    (void)d;                             \
    __VA_ARGS__;                         \
    expect_word(c, status, word);        \
  } while (0)
#define INVALID(word, what, ...) CHECK(CKJIT_ERROR_INVALID_ARGUMENT, word, what, __VA_ARGS__)
#define UNSUP(word, what, ...) CHECK(CKJIT_ERROR_UNSUPPORTED, word, what, __VA_ARGS__)
#define VALID(what, ...)                 \
  do {                                   \
    call c = attention_call("%s", what); \
    ckjit_attention_desc *d = &c.d;      \
    (void)d;                             \
    __VA_ARGS__;                         \
    valid(c);                            \
  } while (0)

/* ---- group setup -------------------------------------------------------- */

static int group_setup(void **state) {
  (void)state;
  unsetenv("CKJIT_ATTENTION_PIPELINE");
  return ae_group_setup("attention-api");
}

/* ---- desc_init and the stride helpers ------------------------------------ */

static void test_desc_init(void **state) {
  (void)state;
  ckjit_attention_desc d;
  memset(&d, 0x77, sizeof d);
  ckjit_attention_desc_init(&d);
  assert_int_equal(d.dtype, CKJIT_BF16);
  assert_int_equal(d.bias_dtype, CKJIT_BF16);
  assert_int_equal(d.batch, 1);
  assert_int_equal(d.num_heads_q, 1);
  assert_int_equal(d.num_heads_kv, 1);
  assert_int_equal(d.window_left, -1);
  assert_int_equal(d.window_right, -1);
  assert_int_equal(d.seqlen_q, 0);
  assert_int_equal(d.seqlen_k, 0);
  assert_int_equal(d.head_dim_qk, 0);
  assert_int_equal(d.head_dim_v, 0);
  assert_null(d.q);
  assert_null(d.k);
  assert_null(d.v);
  assert_null(d.o);
  assert_null(d.lse);
  assert_null(d.cu_seqlens_q);
  assert_null(d.cu_seqlens_k);
  assert_null(d.bias);
  assert_null(d.alibi_slopes);
  const ckjit_attention_strides *all[] = {&d.q_strides, &d.k_strides, &d.v_strides, &d.o_strides,
                                          &d.lse_strides, &d.bias_strides};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    assert_int_equal(all[i]->batch, 0);
    assert_int_equal(all[i]->head, 0);
    assert_int_equal(all[i]->seq, 0);
    assert_int_equal(all[i]->dim, 0);
  }
  assert_int_equal(d.alibi_stride_batch, 0);
  assert_true(d.softmax_scale == 0.0f);
  assert_true(d.softcap == 0.0f);
  assert_int_equal(d.mask, CKJIT_ATTENTION_MASK_NONE);
  ckjit_attention_desc_init(NULL); /* no crash */
}

static void test_stride_helpers(void **state) {
  (void)state;
  /* seq 5, heads 3, dim 64: [b][s][h][d] and [b][h][s][d] */
  ckjit_attention_strides s = ckjit_attention_strides_bshd(5, 3, 64);
  assert_int_equal(s.batch, 5 * 3 * 64);
  assert_int_equal(s.seq, 3 * 64);
  assert_int_equal(s.head, 64);
  assert_int_equal(s.dim, 1);
  s = ckjit_attention_strides_bhsd(5, 3, 64);
  assert_int_equal(s.batch, 3 * 5 * 64);
  assert_int_equal(s.head, 5 * 64);
  assert_int_equal(s.seq, 64);
  assert_int_equal(s.dim, 1);
  s = ckjit_attention_strides_bshd(1, 1, 96);
  assert_int_equal(s.batch, 96);
  assert_int_equal(s.seq, 96);
  assert_int_equal(s.head, 96);
  s = ckjit_attention_strides_bhsd((int64_t)1 << 30, 64, 256); /* 64-bit products */
  assert_int_equal(s.batch, ((int64_t)1 << 30) * 64 * 256);
  assert_int_equal(s.head, ((int64_t)1 << 30) * 256);
}

/* ---- shapes and dtypes ------------------------------------------------------ */

static void test_desc_and_dtypes(void **state) {
  (void)state;
  call c = attention_call("desc NULL");
  c.null_desc = 1;
  expect_word(c, CKJIT_ERROR_INVALID_ARGUMENT, "desc is NULL");
  INVALID("dtype", "dtype 99", d->dtype = (ckjit_dtype)99);
  INVALID("dtype", "dtype -1", d->dtype = (ckjit_dtype)-1);
  UNSUP("dtype", "dtype i8", d->dtype = CKJIT_I8);
  UNSUP("dtype", "dtype fp8 e4m3", d->dtype = CKJIT_FP8_E4M3);
  UNSUP("dtype", "dtype fp8 e5m2", d->dtype = CKJIT_FP8_E5M2);
  UNSUP("dtype", "dtype i32", d->dtype = CKJIT_I32);
  UNSUP("dtype", "dtype i64", d->dtype = CKJIT_I64);
}

static void test_sizes(void **state) {
  (void)state;
  INVALID("batch", "batch -1", d->batch = -1);
  INVALID("batch", "batch INT64_MIN", d->batch = INT64_MIN);
  INVALID("batch", "batch 2^31 - 1", d->batch = INT32_MAX);
  INVALID("num_heads_q", "num_heads_q -1", d->num_heads_q = -1);
  INVALID("num_heads_q", "num_heads_q 2^31", d->num_heads_q = (int64_t)1 << 31);
  INVALID("num_heads_kv", "num_heads_kv 0", d->num_heads_kv = 0);
  INVALID("num_heads_kv", "num_heads_kv -2", d->num_heads_kv = -2);
  INVALID("num_heads_kv", "heads 8 % 3 != 0", d->num_heads_kv = 3);
  INVALID("num_heads_kv", "heads 8 % 5 != 0", d->num_heads_kv = 5);
  INVALID("num_heads_kv", "num_heads_kv 16 > num_heads_q 8", d->num_heads_kv = 16);
  INVALID("seqlen", "seqlen_q -1", d->seqlen_q = -1);
  INVALID("seqlen", "seqlen_k -1", d->seqlen_k = -1);
  INVALID("seqlen", "seqlen_q INT64_MIN", d->seqlen_q = INT64_MIN);
  INVALID("seqlen", "seqlen_q 2^30 + 1", d->seqlen_q = ((int64_t)1 << 30) + 1);
  INVALID("seqlen", "seqlen_k 2^30 + 1", d->seqlen_k = ((int64_t)1 << 30) + 1);
  INVALID("seqlen", "seqlen_k 2^40", d->seqlen_k = (int64_t)1 << 40);
  static const int64_t bad_dims[] = {0, -64, 1, 32, 80, 112, 127, 129, 160, 320, 512};
  for (size_t i = 0; i < sizeof bad_dims / sizeof bad_dims[0]; i++) {
    char what[64];
    snprintf(what, sizeof what, "head_dim_qk %lld", (long long)bad_dims[i]);
    UNSUP("head_dim", what, d->head_dim_qk = bad_dims[i]);
    snprintf(what, sizeof what, "head_dim_v %lld", (long long)bad_dims[i]);
    UNSUP("head_dim", what, d->head_dim_v = bad_dims[i]);
  }
}

/* ---- pointers, alignment, strides, extents ----------------------------------- */

static void test_pointers(void **state) {
  (void)state;
  INVALID("q is NULL", "q NULL", d->q = NULL);
  INVALID("k is NULL", "k NULL", d->k = NULL);
  INVALID("v is NULL", "v NULL", d->v = NULL);
  INVALID("o is NULL", "o NULL", d->o = NULL);
  INVALID("not aligned", "q + 1 byte", d->q = PLUS(DQ, 1));
  INVALID(": k (", "k + 1 byte", d->k = PLUS(DK, 1));
  INVALID(": v (", "v + 3 bytes", d->v = PLUS(DV, 3));
  INVALID(": o (", "o + 1 byte", d->o = PLUS(DO, 1));
  INVALID("4-byte elements", "f32 q + 2 bytes", d->dtype = CKJIT_F32, d->q = PLUS(DQ, 2));
  INVALID(": o (", "f32 o + 2 bytes", d->dtype = CKJIT_F32, d->o = PLUS(DO, 2));
  INVALID(": lse (", "lse + 2 bytes", d->lse = PLUS(DLSE, 2));
  INVALID(": bias (", "f32 bias + 2 bytes", d->bias = PLUS(DBIAS, 2), d->bias_dtype = CKJIT_F32,
          d->bias_strides = (ckjit_attention_strides){0, 0, 257, 1});
  INVALID(": bias (", "bf16 bias + 1 byte", d->bias = PLUS(DBIAS, 1),
          d->bias_strides = (ckjit_attention_strides){0, 0, 257, 1});
  INVALID("cu_seqlens", "cu_seqlens_q only", d->cu_seqlens_q = DCUQ);
  INVALID("cu_seqlens", "cu_seqlens_k only", d->cu_seqlens_k = DCUK);
  INVALID("cu_seqlens", "cu_seqlens_q + 2 bytes", d->cu_seqlens_q = PLUS(DCUQ, 2), d->cu_seqlens_k = DCUK);
  INVALID("cu_seqlens", "cu_seqlens_k + 1 byte", d->cu_seqlens_q = DCUQ, d->cu_seqlens_k = PLUS(DCUK, 1));
  INVALID("alibi", "alibi_slopes + 2 bytes", d->alibi_slopes = PLUS(DALIBI, 2));
  INVALID("alibi", "alibi_stride_batch -1", d->alibi_slopes = DALIBI, d->alibi_stride_batch = -1);
}

static void test_strides_and_extents(void **state) {
  (void)state;
  INVALID("q has a negative stride", "q batch stride -1", d->q_strides.batch = -1);
  INVALID("q has a negative stride", "q head stride -128", d->q_strides.head = -128);
  INVALID("k has a negative stride", "k seq stride -256", d->k_strides.seq = -256);
  INVALID("v has a negative stride", "v dim stride -1", d->v_strides.dim = -1);
  INVALID("o has a negative stride", "o seq stride INT64_MIN", d->o_strides.seq = INT64_MIN);
  INVALID("lse has a negative stride", "lse head stride -100", d->lse_strides.head = -100);
  INVALID("bias has a negative stride", "bias seq stride -257", d->bias = DBIAS,
          d->bias_strides = (ckjit_attention_strides){0, 0, -257, 1});
  INVALID("q's extent overflows 64 bits", "q batch stride INT64_MAX / 2 (extent)", d->q_strides.batch = INT64_MAX / 2,
          d->batch = 4);
  INVALID("k's extent overflows", "k seq stride 2^62 (extent)", d->k_strides.seq = (int64_t)1 << 62);
  INVALID("v's extent overflows", "v dim stride INT64_MAX", d->v_strides.dim = INT64_MAX);
  INVALID("o's extent overflows", "o head stride 2^61 (extent)", d->o_strides.head = (int64_t)1 << 61);
  INVALID("lse's extent overflows", "lse seq stride 2^62 (extent)", d->lse_strides.seq = (int64_t)1 << 62);
  INVALID("bias's extent overflows", "bias head stride 2^61", d->bias = DBIAS,
          d->bias_strides = (ckjit_attention_strides){0, (int64_t)1 << 61, 257, 1});
  INVALID("q's extent overflows", "strides summing past 2^63", d->q_strides.batch = (int64_t)1 << 62,
          d->q_strides.seq = (int64_t)1 << 56);
  /* a pointer near the top of the address space: the bytes wrap around */
  INVALID("o's extent overflows the address space", "o ending past the address space", d->o = (void *)(uintptr_t)(UINTPTR_MAX - 4095));
  INVALID("q's extent overflows the address space", "f32 q ending past the address space", d->dtype = CKJIT_F32,
          d->q = (const void *)(uintptr_t)(UINTPTR_MAX - 4095));
}

/* ---- options -------------------------------------------------------------------------- */

static void test_options(void **state) {
  (void)state;
  INVALID("bias_dtype", "bias_dtype f16 with bf16", d->bias = DBIAS, d->bias_dtype = CKJIT_F16);
  INVALID("bias_dtype", "bias_dtype bf16 with f16", d->dtype = CKJIT_F16, d->bias = DBIAS, d->bias_dtype = CKJIT_BF16);
  INVALID("bias_dtype", "bias_dtype bf16 with f32", d->dtype = CKJIT_F32, d->bias = DBIAS, d->bias_dtype = CKJIT_BF16);
  INVALID("bias_dtype", "bias_dtype i8", d->bias = DBIAS, d->bias_dtype = CKJIT_I8);
  INVALID("bias_dtype", "bias_dtype 99", d->bias = DBIAS, d->bias_dtype = (ckjit_dtype)99);
  INVALID("softmax_scale", "softmax_scale NaN", d->softmax_scale = NAN);
  INVALID("softmax_scale", "softmax_scale +inf", d->softmax_scale = INFINITY);
  INVALID("softmax_scale", "softmax_scale -inf", d->softmax_scale = -INFINITY);
  INVALID("softcap", "softcap -1", d->softcap = -1.0f);
  INVALID("softcap", "softcap -0.0001", d->softcap = -1e-4f);
  INVALID("softcap", "softcap NaN", d->softcap = NAN);
  INVALID("softcap", "softcap +inf", d->softcap = INFINITY);
  INVALID("mask", "mask 3", d->mask = (ckjit_attention_mask)3);
  INVALID("mask", "mask -1", d->mask = (ckjit_attention_mask)-1);
  INVALID("mask", "mask 99", d->mask = (ckjit_attention_mask)99);
}

/* Validation comes first: an empty problem with a bad argument, or a bad
 * argument with an unknown CKJIT_ATTENTION_PIPELINE, fails for the argument. */
static void test_validation_first(void **state) {
  (void)state;
  INVALID("dtype", "batch 0, dtype 99", d->batch = 0, d->dtype = (ckjit_dtype)99);
  INVALID("softcap", "seqlen_q 0, softcap NaN", d->seqlen_q = 0, d->softcap = NAN);
  INVALID("mask", "num_heads_q 0, mask 7", d->num_heads_q = 0, d->mask = (ckjit_attention_mask)7);
  UNSUP("head_dim", "batch 0, head_dim_qk 80", d->batch = 0, d->head_dim_qk = 80);
  setenv("CKJIT_ATTENTION_PIPELINE", "bogus", 1);
  INVALID("softmax_scale", "softmax_scale NaN, CKJIT_ATTENTION_PIPELINE=bogus", d->softmax_scale = NAN);
  INVALID("q", "q NULL, CKJIT_ATTENTION_PIPELINE=bogus", d->q = NULL);
  unsetenv("CKJIT_ATTENTION_PIPELINE");
}

/* ---- valid descriptors without a GPU ------------------------------------------------------ */

static void test_valid_no_device(void **state) {
  (void)state;
  AE_SKIP_IF_DEVICE("no-device");
  VALID("the base descriptor", (void)0);
  VALID("f16", d->dtype = CKJIT_F16);
  VALID("f32", d->dtype = CKJIT_F32);
  static const int64_t dims[] = {64, 96, 128, 192, 256};
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 5; j++) {
      char what[64];
      snprintf(what, sizeof what, "head dims %lld / %lld", (long long)dims[i], (long long)dims[j]);
      VALID(what, d->head_dim_qk = dims[i], d->head_dim_v = dims[j],
            d->q_strides = ckjit_attention_strides_bshd(100, 8, dims[i]),
            d->k_strides = ckjit_attention_strides_bshd(257, 2, dims[i]),
            d->v_strides = ckjit_attention_strides_bshd(257, 2, dims[j]),
            d->o_strides = ckjit_attention_strides_bshd(100, 8, dims[j]));
    }
  VALID("MHA", d->num_heads_kv = 8, d->k_strides = d->v_strides = d->q_strides, d->seqlen_k = 100);
  VALID("MQA", d->num_heads_kv = 1);
  VALID("causal", d->mask = CKJIT_ATTENTION_MASK_CAUSAL);
  VALID("window 16 / 0", d->mask = CKJIT_ATTENTION_MASK_WINDOW, d->window_left = 16, d->window_right = 0);
  VALID("window -1 / -1", d->mask = CKJIT_ATTENTION_MASK_WINDOW);
  VALID("window -5 / 2^40", d->mask = CKJIT_ATTENTION_MASK_WINDOW, d->window_left = -5, d->window_right = (int64_t)1 << 40);
  VALID("window INT64_MAX / INT64_MIN", d->mask = CKJIT_ATTENTION_MASK_WINDOW, d->window_left = INT64_MAX,
        d->window_right = INT64_MIN);
  VALID("window bounds ignored without MASK_WINDOW", d->window_left = -7, d->window_right = INT64_MIN);
  VALID("negative softmax_scale", d->softmax_scale = -0.25f);
  VALID("softcap 30", d->softcap = 30.0f);
  VALID("no LSE", d->lse = NULL, d->lse_strides.head = -1); /* LSE's strides unused without it */
  VALID("bias f32, broadcast over batch and heads", d->bias = DBIAS, d->bias_dtype = CKJIT_F32,
        d->bias_strides = (ckjit_attention_strides){0, 0, 257, 1});
  VALID("bias of the dtype, full", d->bias = DBIAS,
        d->bias_strides = (ckjit_attention_strides){8 * 100 * 257, 100 * 257, 257, 1});
  VALID("bias_dtype ignored without a bias", d->bias_dtype = (ckjit_dtype)99);
  VALID("ALiBi per head", d->alibi_slopes = DALIBI);
  VALID("ALiBi per entry", d->alibi_slopes = DALIBI, d->alibi_stride_batch = 9);
  VALID("varlen", d->cu_seqlens_q = DCUQ, d->cu_seqlens_k = DCUK);
  VALID("varlen, packed strides, batch stride unused", d->cu_seqlens_q = DCUQ, d->cu_seqlens_k = DCUK,
        d->q_strides.batch = 12345, d->k_strides.batch = d->v_strides.batch = d->o_strides.batch = 7);
  VALID("K and V batch stride 0", d->k_strides.batch = d->v_strides.batch = 0);
  VALID("head-dim stride 2 (SIMT)", d->q_strides.dim = 2, d->q_strides.head = 256, d->q_strides.seq = 2048,
        d->q_strides.batch = 204800);
  VALID("pointers off 16 bytes by one element (SIMT)", d->q = PLUS(DQ, 2), d->k = PLUS(DK, 2), d->v = PLUS(DV, 2),
        d->o = PLUS(DO, 2));
  VALID("sk 0 with K and V NULL", d->seqlen_k = 0, d->k = NULL, d->v = NULL);
  VALID("seqlen 2^30", d->batch = 1, d->num_heads_q = d->num_heads_kv = 1, d->seqlen_q = d->seqlen_k = (int64_t)1 << 30,
        d->q_strides = d->k_strides = d->v_strides = d->o_strides = ckjit_attention_strides_bshd((int64_t)1 << 30, 1, 128),
        d->lse = NULL);
  setenv("CKJIT_ATTENTION_PIPELINE", "bogus", 1); /* read only once a device is found */
  VALID("CKJIT_ATTENTION_PIPELINE=bogus (read after the device)", (void)0);
  setenv("CKJIT_ATTENTION_PIPELINE", "mfma", 1);
  VALID("CKJIT_ATTENTION_PIPELINE=mfma", (void)0);
  unsetenv("CKJIT_ATTENTION_PIPELINE");
}

/* batch 0, seqlen_q 0 or num_heads_q 0: nothing to do, SUCCESS without a
 * device, and the tensors are not looked at (NULL is fine). */
static void test_empty_succeeds(void **state) {
  (void)state;
  AE_SKIP_IF_DEVICE("empty-problem");
  call cs[6];
  cs[0] = attention_call("batch 0");
  cs[0].d.batch = 0;
  cs[1] = attention_call("seqlen_q 0");
  cs[1].d.seqlen_q = 0;
  cs[2] = attention_call("num_heads_q 0");
  cs[2].d.num_heads_q = 0;
  cs[3] = attention_call("num_heads_q 0 and num_heads_kv 0");
  cs[3].d.num_heads_q = cs[3].d.num_heads_kv = 0;
  cs[4] = attention_call("batch 0, every pointer NULL");
  cs[4].d.batch = 0, cs[4].d.q = cs[4].d.k = cs[4].d.v = NULL, cs[4].d.o = NULL, cs[4].d.lse = NULL;
  cs[5] = attention_call("seqlen_q 0, seqlen_k 0, bad strides unused");
  cs[5].d.seqlen_q = cs[5].d.seqlen_k = 0, cs[5].d.q_strides.seq = -1, cs[5].d.o = NULL;
  for (int i = 0; i < 6; i++) {
    setenv("CKJIT_ATTENTION_PIPELINE", i % 2 ? "bogus" : "wgmma", 1); /* never read */
    const ae_result r = ae_run(do_call, &cs[i]);
    if (r.status != CKJIT_SUCCESS) {
      print_error("ckjit_attention: %s: got %s, want SUCCESS (%s)\n", cs[i].what, ckjit_status_string(r.status),
                  r.message);
      fail();
    }
  }
  unsetenv("CKJIT_ATTENTION_PIPELINE");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_desc_init),
      cmocka_unit_test(test_stride_helpers),
      cmocka_unit_test(test_desc_and_dtypes),
      cmocka_unit_test(test_sizes),
      cmocka_unit_test(test_pointers),
      cmocka_unit_test(test_strides_and_extents),
      cmocka_unit_test(test_options),
      cmocka_unit_test(test_validation_first),
      cmocka_unit_test(test_valid_no_device),
      cmocka_unit_test(test_empty_succeeds),
  };
  return cmocka_run_group_tests_name("attention_api_errors", tests, group_setup, ae_group_teardown);
}
