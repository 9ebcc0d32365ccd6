/* Argument validation of ckjit_fused_moe (ckjit/moe.h) before any device
 * work, its workspace query and its desc_init.  A bad argument fails with
 * INVALID_ARGUMENT, or with INVALID_ARGUMENT or UNSUPPORTED where the
 * header does not say which (a known dtype, scaling or activation the op
 * does not do), and a message naming ckjit_fused_moe: sizes out of the
 * limits, dtypes, strides (>= hidden, multiples of 8), NULL or misaligned
 * pointers, FP8 scaling (ROW or BLOCK only; BLOCK needs inter a multiple of
 * 64), the activation, the workspace (NULL, misaligned, one byte short).
 * Valid calls on a host without a GPU give NO_DEVICE (or
 * BACKEND_UNAVAILABLE), never a crash; tokens 0 ("does nothing") may also
 * succeed.  ckjit_fused_moe_workspace_size: 0 with a message naming the
 * function for sizes out of the limits, > 0 otherwise, growing with tokens
 * and at least the (token, slot) rows the down GEMM writes before the
 * combine.  ckjit_fused_moe_router: the same layer checks, its router's
 * limits (experts <= 256, k <= min(8, experts)), the logits (NULL,
 * misaligned, dtype, ld_logits) and its larger workspace.  Every call runs on a fresh thread; pointers are fake,
 * well-aligned device addresses never dereferenced. */
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
  ckjit_fused_moe_desc d;
  int router; /* ckjit_fused_moe_router with the fields below */
  ckjit_dtype logits_dtype;
  const void *logits;
  int64_t ld_logits;
  int renormalize;
} call;

static ckjit_status do_call(const void *p) {
  const call *c = p;
  const ckjit_fused_moe_desc *d = c->null_desc ? NULL : &c->d;
  if (c->router) return ckjit_fused_moe_router(d, c->logits_dtype, c->logits, c->ld_logits, c->renormalize, NULL);
  return ckjit_fused_moe(d, NULL);
}

static void expect2(call c, ckjit_status want, ckjit_status alt) {
  ae_expect(do_call, &c, "ckjit_fused_moe", c.what, want, alt);
}
static void invalid(call c) { expect2(c, CKJIT_ERROR_INVALID_ARGUMENT, CKJIT_SUCCESS); }
/* refused: INVALID_ARGUMENT or UNSUPPORTED (the header does not say which) */
static void refused(call c) { expect2(c, CKJIT_ERROR_INVALID_ARGUMENT, CKJIT_ERROR_UNSUPPORTED); }
static void valid(call c) {
  if (ae_has_device) return;
  expect2(c, CKJIT_ERROR_NO_DEVICE, CKJIT_ERROR_BACKEND_UNAVAILABLE);
}

/* workspace_bytes: exactly what the query says for c's sizes. */
static void fit(call *c) {
  c->d.workspace_bytes = ckjit_fused_moe_workspace_size(&c->d);
  assert_true(c->d.workspace_bytes > 0);
}

/* A valid call: 100 tokens, k 2 of 8 experts, hidden 256, inter 128, bf16,
 * ldx = ldy = hidden; fp8: e4m3 weights with block scales. */
static call base(int fp8, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static call base(int fp8, const char *fmt, ...) {
  call c;
  memset(&c, 0, sizeof c);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c.what, sizeof c.what, fmt, ap);
  va_end(ap);
  ckjit_fused_moe_desc *d = &c.d;
  ckjit_fused_moe_desc_init(d);
  d->tokens = 100, d->k = 2, d->experts = 8, d->hidden = 256, d->inter = 128;
  d->x = AE_FAKE_DEV(1), d->ldx = 256, d->y = AE_FAKE_DEV(2), d->ldy = 256;
  d->topk_ids = AE_FAKE_DEV(3), d->topk_weights = AE_FAKE_DEV(4);
  d->w_gate_up = AE_FAKE_DEV(5), d->w_down = AE_FAKE_DEV(6);
  if (fp8) {
    d->weight_dtype = CKJIT_FP8_E4M3, d->weight_scaling = CKJIT_FP8_SCALE_BLOCK;
    d->scale_gate_up = AE_FAKE_DEV(7), d->scale_down = AE_FAKE_DEV(8);
  }
  d->workspace = AE_FAKE_DEV(9);
  fit(&c);
  return c;
}

/* The same valid call through ckjit_fused_moe_router: bf16 logits [100][8],
 * the routing in the workspace (topk_ids and topk_weights NULL: not read). */
static call router_base(int fp8, const char *what) {
  call c = base(fp8, "router: %s", what);
  c.router = 1, c.logits_dtype = CKJIT_BF16, c.logits = AE_FAKE_DEV(11), c.ld_logits = 8;
  c.d.topk_ids = NULL, c.d.topk_weights = NULL;
  c.d.workspace_bytes = ckjit_fused_moe_router_workspace_size(&c.d);
  assert_true(c.d.workspace_bytes > ckjit_fused_moe_workspace_size(&c.d));
  return c;
}

#define BAD(fp8, what, ...) AE_CASE(invalid, base(fp8, "%s", what), ckjit_fused_moe_desc *d = &c.d; (void)d; __VA_ARGS__)
#define REFUSED(fp8, what, ...) AE_CASE(refused, base(fp8, "%s", what), ckjit_fused_moe_desc *d = &c.d; (void)d; __VA_ARGS__)
#define VALID(fp8, what, ...) AE_CASE(valid, base(fp8, "%s", what), ckjit_fused_moe_desc *d = &c.d; (void)d; __VA_ARGS__)
#define OFF(ptr, bytes) ((void *)((char *)(ptr) + (bytes)))

static int group_setup(void **state) {
  (void)state;
  return ae_group_setup("fused-moe-api");
}

static void test_desc_init(void **state) {
  (void)state;
  ckjit_fused_moe_desc d;
  memset(&d, 0x77, sizeof d);
  ckjit_fused_moe_desc_init(&d);
  assert_int_equal(d.tokens, 0);
  assert_int_equal(d.hidden, 0);
  assert_int_equal(d.inter, 0);
  assert_int_equal(d.experts, 0);
  assert_int_equal(d.k, 0);
  assert_int_equal(d.ldx, 0);
  assert_int_equal(d.ldy, 0);
  assert_int_equal(d.dtype, CKJIT_BF16);
  assert_int_equal(d.weight_dtype, CKJIT_BF16);
  assert_int_equal(d.ids_dtype, CKJIT_I32);
  assert_int_equal(d.weight_scaling, CKJIT_FP8_SCALE_BLOCK);
  assert_int_equal(d.activation, CKJIT_UNARY_SILU);
  assert_null(d.x);
  assert_null(d.y);
  assert_null(d.topk_ids);
  assert_null(d.topk_weights);
  assert_null(d.w_gate_up);
  assert_null(d.w_down);
  assert_null(d.scale_gate_up);
  assert_null(d.scale_down);
  assert_null(d.workspace);
  assert_int_equal(d.workspace_bytes, 0);
  assert_null(d.invalid);
  assert_null(d.expert_map);
  assert_int_equal(d.global_experts, 0);
  assert_int_equal(d.shared_experts, 0);
  assert_int_equal(d.shared_inter, 0);
  assert_null(d.w_shared_gate_up);
  assert_null(d.w_shared_down);
  assert_null(d.scale_shared_gate_up);
  assert_null(d.scale_shared_down);
}

/* ---- the workspace query ---------------------------------------------------------------------- */

typedef struct ws_job {
  const ckjit_fused_moe_desc *d;
  size_t bytes;
  char message[2048];
} ws_job;

static void *ws_thread(void *p) {
  ws_job *j = p;
  j->bytes = ckjit_fused_moe_workspace_size(j->d);
  snprintf(j->message, sizeof j->message, "%s", ckjit_last_error());
  return NULL;
}

/* The query on a fresh thread: 0 and a message naming the function. */
static void ws_refused(const call *c, const char *what) {
  ws_job j;
  memset(&j, 0, sizeof j);
  j.d = c->null_desc ? NULL : &c->d;
  assert_int_equal(tu_run_in_thread(ws_thread, &j), 0);
  if (j.bytes != 0 || !strstr(j.message, "ckjit_fused_moe")) {
    print_error("ckjit_fused_moe_workspace_size: %s: got %zu, want 0 with a message naming ckjit_fused_moe (\"%s\")\n",
                what, j.bytes, j.message);
    fail();
  }
}

#define WS_BAD(what, ...)                        \
  do {                                           \
    call c = base(0, "%s", what);                \
    ckjit_fused_moe_desc *d = &c.d;              \
    (void)d;                                     \
    __VA_ARGS__;                                 \
    ws_refused(&c, what);                        \
  } while (0)

static size_t ws_of(int fp8, int64_t tokens, int k, int64_t hidden, int64_t inter) {
  call c = base(fp8, "size");
  c.d.tokens = tokens, c.d.k = k, c.d.hidden = hidden, c.d.inter = inter;
  return ckjit_fused_moe_workspace_size(&c.d);
}

static void test_workspace_size(void **state) {
  (void)state;
  for (int fp8 = 0; fp8 < 2; fp8++) {
    size_t prev = 0;
    const int64_t tokens[] = {1, 7, 128, 1000, 4096, 100000};
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) {
      const size_t ws = ws_of(fp8, tokens[i], 8, 4096, 1408);
      if (ws == 0 || ws < prev) {
        print_error("workspace for %lld tokens (fp8 %d): %zu after %zu\n", (long long)tokens[i], fp8, ws, prev);
        fail();
      }
      prev = ws;
    }
    assert_true(ws_of(fp8, 100000, 8, 4096, 1408) > ws_of(fp8, 1, 8, 4096, 1408));
    /* the down GEMM writes each (token, slot) row (dtype) into the workspace before the combine */
    assert_true(ws_of(fp8, 4096, 8, 4096, 1408) >= (size_t)4096 * 8 * 4096 * 2);
    assert_true(ws_of(fp8, 1, 1, 16, 64) > 0);
  }
  call c = base(0, "f16, int64 ids");
  c.d.dtype = c.d.weight_dtype = CKJIT_F16, c.d.ids_dtype = CKJIT_I64;
  assert_true(ckjit_fused_moe_workspace_size(&c.d) > 0);
  c = base(1, "fp8 row");
  c.d.weight_scaling = CKJIT_FP8_SCALE_ROW;
  assert_true(ckjit_fused_moe_workspace_size(&c.d) > 0);
  c = base(0, "k 64 of 1024 experts");
  c.d.k = 64, c.d.experts = 1024;
  assert_true(ckjit_fused_moe_workspace_size(&c.d) > 0);
  c = base(0, "desc NULL");
  c.null_desc = 1;
  ws_refused(&c, "desc NULL");
  WS_BAD("tokens -1", d->tokens = -1);
  WS_BAD("k 0", d->k = 0);
  WS_BAD("k 65", d->k = 65);
  WS_BAD("experts 0", d->experts = 0);
  WS_BAD("experts 1025", d->experts = 1025);
  WS_BAD("hidden 264 (not a multiple of 16)", d->hidden = 264);
  WS_BAD("hidden -16", d->hidden = -16);
  WS_BAD("inter 136 (not a multiple of 16)", d->inter = 136);
  WS_BAD("inter 8", d->inter = 8);
}

/* ---- ckjit_fused_moe's arguments --------------------------------------------------------------------- */

static void test_sizes(void **state) {
  (void)state;
  AE_CASE(invalid, base(0, "desc NULL"), c.null_desc = 1);
  BAD(0, "tokens -1", d->tokens = -1);
  BAD(0, "k 0", d->k = 0);
  BAD(0, "k 65", d->k = 65);
  BAD(0, "k -1", d->k = -1);
  BAD(0, "experts 0", d->experts = 0);
  BAD(0, "experts 1025", d->experts = 1025);
  BAD(0, "hidden 264 (not a multiple of 16)", d->hidden = 264, d->ldx = d->ldy = 264);
  BAD(0, "hidden 8", d->hidden = 8, d->ldx = d->ldy = 8);
  BAD(0, "inter 136 (not a multiple of 16)", d->inter = 136);
  BAD(0, "inter -128", d->inter = -128);
  BAD(0, "ldx < hidden", d->ldx = 248);
  BAD(0, "ldy < hidden", d->ldy = 248);
  BAD(0, "ldx not a multiple of 8", d->ldx = 260);
  BAD(0, "ldy not a multiple of 8", d->ldy = 257);
  BAD(0, "tokens 0, k 0 (checked although nothing runs)", d->tokens = 0, d->k = 0);
}

static void test_types(void **state) {
  (void)state;
  REFUSED(0, "dtype f32", d->dtype = CKJIT_F32, d->weight_dtype = CKJIT_F32);
  REFUSED(0, "dtype i32", d->dtype = CKJIT_I32);
  BAD(0, "dtype 99", d->dtype = (ckjit_dtype)99);
  REFUSED(0, "weight_dtype f16 with dtype bf16", d->weight_dtype = CKJIT_F16);
  REFUSED(0, "weight_dtype e5m2", d->weight_dtype = CKJIT_FP8_E5M2, d->scale_gate_up = AE_FAKE_DEV(7),
          d->scale_down = AE_FAKE_DEV(8));
  BAD(0, "weight_dtype -1", d->weight_dtype = (ckjit_dtype)-1);
  REFUSED(0, "ids_dtype f32", d->ids_dtype = CKJIT_F32);
  REFUSED(0, "ids_dtype i8", d->ids_dtype = CKJIT_I8);
  BAD(0, "ids_dtype 42", d->ids_dtype = (ckjit_dtype)42);
  REFUSED(1, "fp8 with tensor scaling", d->weight_scaling = CKJIT_FP8_SCALE_TENSOR);
  BAD(1, "fp8 with weight_scaling 7", d->weight_scaling = (ckjit_fp8_scaling)7);
  REFUSED(1, "fp8 block, inter 96 (not a multiple of 64)", d->inter = 96);
  REFUSED(1, "fp8 block, inter 1440 (not a multiple of 64)", d->inter = 1440);
  REFUSED(0, "activation relu", d->activation = CKJIT_UNARY_RELU);
  REFUSED(0, "activation identity", d->activation = CKJIT_UNARY_IDENTITY);
  REFUSED(1, "activation sigmoid", d->activation = CKJIT_UNARY_SIGMOID);
  BAD(0, "activation 99", d->activation = (ckjit_unary_op)99);
}

static void test_pointers(void **state) {
  (void)state;
  BAD(0, "x NULL", d->x = NULL);
  BAD(0, "y NULL", d->y = NULL);
  BAD(0, "topk_ids NULL", d->topk_ids = NULL);
  BAD(0, "topk_weights NULL", d->topk_weights = NULL);
  BAD(0, "w_gate_up NULL", d->w_gate_up = NULL);
  BAD(1, "w_down NULL", d->w_down = NULL);
  BAD(1, "scale_gate_up NULL", d->scale_gate_up = NULL);
  BAD(1, "scale_down NULL", d->scale_down = NULL);
  BAD(0, "x 2-byte aligned", d->x = OFF(d->x, 2));
  BAD(0, "y 8-byte aligned", d->y = OFF(d->y, 8));
  BAD(0, "w_gate_up 2-byte aligned", d->w_gate_up = OFF(d->w_gate_up, 2));
  BAD(1, "w_down (fp8) 1-byte aligned", d->w_down = OFF(d->w_down, 1));
  BAD(0, "workspace NULL", d->workspace = NULL);
  BAD(0, "workspace 128-byte aligned", d->workspace = OFF(d->workspace, 128));
  BAD(0, "workspace one byte short", d->workspace_bytes -= 1);
  BAD(1, "fp8: workspace one byte short", d->workspace_bytes -= 1);
  BAD(0, "workspace_bytes 0", d->workspace_bytes = 0);
  BAD(0, "expert_map with global_experts 0", d->expert_map = AE_FAKE_DEV(12), d->global_experts = 0);
  BAD(0, "expert_map with global_experts -1", d->expert_map = AE_FAKE_DEV(12), d->global_experts = -1);
  BAD(0, "expert_map 1-byte aligned", d->expert_map = OFF(AE_FAKE_DEV(12), 1), d->global_experts = 64);
  if (ws_of(0, 10, 2, 256, 128) < ws_of(0, 100, 2, 256, 128)) /* (test_workspace_size: it grows) */
    BAD(0, "the workspace for 10 tokens with 100", d->tokens = 10, fit(&c), d->tokens = 100);
}

static void test_valid(void **state) {
  (void)state;
  VALID(0, "bf16");
  VALID(1, "fp8 block");
  VALID(1, "fp8 row", d->weight_scaling = CKJIT_FP8_SCALE_ROW, fit(&c));
  VALID(1, "fp8 row, inter 96", d->weight_scaling = CKJIT_FP8_SCALE_ROW, d->inter = 96, fit(&c));
  VALID(0, "16-bit, inter 96", d->inter = 96, fit(&c));
  VALID(0, "f16, int64 ids, gelu_tanh", d->dtype = d->weight_dtype = CKJIT_F16, d->ids_dtype = CKJIT_I64,
        d->activation = CKJIT_UNARY_GELU_TANH, fit(&c));
  VALID(1, "fp8, f16, gelu_erf", d->dtype = CKJIT_F16, d->activation = CKJIT_UNARY_GELU_ERF, fit(&c));
  VALID(0, "invalid given", d->invalid = AE_FAKE_DEV(10));
  VALID(0, "an expert map: 8 local of 256 global experts", d->expert_map = AE_FAKE_DEV(12), d->global_experts = 256);
  VALID(1, "fp8, global_experts ignored without a map", d->global_experts = -3);
  VALID(0, "16-bit weights: the scales and weight_scaling are not read", d->weight_scaling = CKJIT_FP8_SCALE_TENSOR);
  VALID(0, "ldx, ldy wider", d->ldx = 256 + 24, d->ldy = 256 + 8);
  VALID(0, "a larger workspace", d->workspace_bytes += 4096);
  VALID(0, "k 64 of 1024 experts", d->k = 64, d->experts = 1024, fit(&c));
  VALID(1, "1 token, k 1 of 1 expert, hidden 16, inter 64", d->tokens = 1, d->k = 1, d->experts = 1, d->hidden = 16,
        d->ldx = d->ldy = 16, d->inter = 64, fit(&c));
  /* tokens 0 "does nothing": success, or the no-device status */
  call c = base(0, "tokens 0");
  c.d.tokens = 0;
  c.d.workspace_bytes = ckjit_fused_moe_workspace_size(&c.d);
  const ae_result r = ae_run(do_call, &c);
  if (r.status != CKJIT_SUCCESS && r.status != CKJIT_ERROR_NO_DEVICE && r.status != CKJIT_ERROR_BACKEND_UNAVAILABLE &&
      !(ae_has_device && r.status == CKJIT_ERROR_UNSUPPORTED)) {
    print_error("ckjit_fused_moe: tokens 0: got %s (%s)\n", ckjit_status_string(r.status), r.message);
    fail();
  }
}

/* ---- shared experts ------------------------------------------------------------------------------ */

/* base() with n shared experts of shared_inter si (0: inter), their
 * weights (and FP8 scales) set and the workspace refitted (where the sizes
 * are valid). */
static void add_shared(call *c, int n, int64_t si) {
  ckjit_fused_moe_desc *d = &c->d;
  d->shared_experts = n, d->shared_inter = si;
  d->w_shared_gate_up = AE_FAKE_DEV(13), d->w_shared_down = AE_FAKE_DEV(14);
  if (d->weight_dtype == CKJIT_FP8_E4M3) d->scale_shared_gate_up = AE_FAKE_DEV(15), d->scale_shared_down = AE_FAKE_DEV(16);
  const size_t ws = ckjit_fused_moe_workspace_size(d); /* 0 for the sizes the call must refuse */
  if (ws) d->workspace_bytes = ws;
}

#define SBAD(fp8, what, n, si, ...) AE_CASE(invalid, base(fp8, "shared: %s", what), ckjit_fused_moe_desc *d = &c.d; (void)d; add_shared(&c, n, si); __VA_ARGS__)
#define SREFUSED(fp8, what, n, si, ...) AE_CASE(refused, base(fp8, "shared: %s", what), ckjit_fused_moe_desc *d = &c.d; (void)d; add_shared(&c, n, si); __VA_ARGS__)
#define SVALID(fp8, what, n, si, ...) AE_CASE(valid, base(fp8, "shared: %s", what), ckjit_fused_moe_desc *d = &c.d; (void)d; add_shared(&c, n, si); __VA_ARGS__)

static void test_shared(void **state) {
  (void)state;
  /* the workspace: the shared products [tokens][shared][hidden] on top, and
   * h sized for the larger of the routed rows and one shared expert's */
  call c = base(0, "shared sizes");
  const size_t none = ckjit_fused_moe_workspace_size(&c.d);
  c.d.shared_experts = 2;
  const size_t two = ckjit_fused_moe_workspace_size(&c.d);
  assert_true(two >= none + (size_t)100 * 2 * 256 * 2);
  c.d.shared_inter = 128 * 64; /* one shared expert's h: 100 x 8192 elements, past the routed rows' */
  const size_t routed_h = (size_t)ckjit_moe_sort_capacity(100, 2, 8, 128) * 128 * 2;
  assert_true(ckjit_fused_moe_workspace_size(&c.d) >= two + (size_t)100 * 8192 * 2 - routed_h);
  WS_BAD("shared_experts -1", d->shared_experts = -1);
  WS_BAD("shared_experts 17", d->shared_experts = 17);
  WS_BAD("shared_inter 72 (not a multiple of 16)", d->shared_experts = 1, d->shared_inter = 72);
  WS_BAD("shared_inter -16", d->shared_experts = 1, d->shared_inter = -16);
  SBAD(0, "shared_experts 17", 17, 0);
  SBAD(0, "shared_experts -1", -1, 0);
  SBAD(0, "shared_inter 72", 1, 72);
  SBAD(0, "shared_inter -64", 1, -64);
  SREFUSED(1, "fp8 block, shared_inter 96 (not a multiple of 64)", 1, 96);
  SBAD(0, "w_shared_gate_up NULL", 1, 0, d->w_shared_gate_up = NULL);
  SBAD(0, "w_shared_down NULL", 2, 0, d->w_shared_down = NULL);
  SBAD(1, "fp8: scale_shared_gate_up NULL", 1, 0, d->scale_shared_gate_up = NULL);
  SBAD(1, "fp8: scale_shared_down NULL", 1, 0, d->scale_shared_down = NULL);
  SBAD(0, "w_shared_gate_up 2-byte aligned", 1, 0, d->w_shared_gate_up = OFF(d->w_shared_gate_up, 2));
  SBAD(1, "fp8: w_shared_down 8-byte aligned", 1, 0, d->w_shared_down = OFF(d->w_shared_down, 8));
  SBAD(1, "fp8: scale_shared_down 2-byte aligned", 1, 0, d->scale_shared_down = OFF(d->scale_shared_down, 2));
  SBAD(0, "the workspace without the shared products", 1, 0, d->workspace_bytes = none);
  SVALID(0, "one, inter", 1, 0);
  SVALID(0, "two of shared_inter 512", 2, 512);
  SVALID(0, "16 of 16", 16, 16);
  SVALID(1, "fp8 block, one of 2 x 64", 1, 128);
  SVALID(1, "fp8 row, shared_inter 48", 1, 48, d->weight_scaling = CKJIT_FP8_SCALE_ROW, fit(&c));
  SVALID(0, "ldx not a multiple of 16 (x copied)", 1, 0, d->ldx = 264);
  SVALID(0, "16-bit: the shared scales are not read", 1, 0, d->scale_shared_down = OFF(AE_FAKE_DEV(16), 1));
  VALID(0, "no shared experts: their pointers are not read", d->w_shared_gate_up = OFF(AE_FAKE_DEV(13), 1));
  /* gated shared experts: f32 gates [tokens][shared] more in the workspace */
  c.d.shared_experts = 2, c.d.shared_inter = 0;
  c.d.shared_gate = AE_FAKE_DEV(17);
  assert_true(ckjit_fused_moe_workspace_size(&c.d) >= two + (size_t)100 * 2 * 4);
  WS_BAD("shared_gate without shared experts", d->shared_gate = AE_FAKE_DEV(17));
  BAD(0, "shared_gate without shared experts", d->shared_gate = AE_FAKE_DEV(17));
  SBAD(0, "shared_gate 8-byte aligned", 2, 0, d->shared_gate = OFF(AE_FAKE_DEV(17), 8), fit(&c));
  SBAD(0, "gated: the workspace without the gates", 2, 0, d->shared_gate = AE_FAKE_DEV(17));
  SVALID(0, "gated", 2, 0, d->shared_gate = AE_FAKE_DEV(17), fit(&c));
  SVALID(1, "gated, fp8 block", 1, 128, d->shared_gate = AE_FAKE_DEV(17), fit(&c));
}

/* ---- ckjit_fused_moe_router ------------------------------------------------------------------- */

#define RBAD(fp8, what, ...) AE_CASE(invalid, router_base(fp8, what), ckjit_fused_moe_desc *d = &c.d; (void)d; __VA_ARGS__)
#define RREFUSED(fp8, what, ...) AE_CASE(refused, router_base(fp8, what), ckjit_fused_moe_desc *d = &c.d; (void)d; __VA_ARGS__)
#define RVALID(fp8, what, ...) AE_CASE(valid, router_base(fp8, what), ckjit_fused_moe_desc *d = &c.d; (void)d; __VA_ARGS__)

static void test_router(void **state) {
  (void)state;
  call c = router_base(0, "sizes");
  const size_t layer = ckjit_fused_moe_workspace_size(&c.d), both = ckjit_fused_moe_router_workspace_size(&c.d);
  /* the routing: [100][2] int32 ids and f32 weights after the layer's buffers */
  assert_true(both >= layer + 2 * 100 * 2 * 4);
  c.d.experts = 300;
  assert_int_equal(ckjit_fused_moe_router_workspace_size(&c.d), 0);
  assert_non_null(strstr(ckjit_last_error(), "ckjit_fused_moe_router"));
  c.d.experts = 8, c.d.k = 9;
  assert_int_equal(ckjit_fused_moe_router_workspace_size(&c.d), 0);
  assert_int_equal(ckjit_fused_moe_router_workspace_size(NULL), 0);
  AE_CASE(invalid, router_base(0, "desc NULL"), c.null_desc = 1);
  RBAD(0, "experts 257 (the router's limit)", d->experts = 257);
  RBAD(0, "k 9 (the router's limit)", d->k = 9, d->experts = 16, c.ld_logits = 16);
  RBAD(0, "k 4 of 2 experts", d->k = 4, d->experts = 2);
  RBAD(0, "logits NULL", c.logits = NULL);
  RBAD(0, "f32 logits 2-byte aligned", c.logits_dtype = CKJIT_F32, c.logits = OFF(c.logits, 2));
  RBAD(0, "ld_logits 7 < experts 8", c.ld_logits = 7);
  RREFUSED(0, "logits_dtype i32", c.logits_dtype = CKJIT_I32);
  RBAD(0, "logits_dtype 77", c.logits_dtype = (ckjit_dtype)77);
  RBAD(0, "the layer's workspace size (no room for the routing)", d->workspace_bytes = ckjit_fused_moe_workspace_size(d));
  RBAD(0, "workspace one byte short", d->workspace_bytes -= 1);
  RBAD(0, "workspace NULL", d->workspace = NULL);
  RBAD(1, "fp8: hidden 264", d->hidden = 264, d->ldx = d->ldy = 264);
  RBAD(0, "x NULL", d->x = NULL);
  RVALID(0, "bf16 logits");
  RVALID(1, "fp8 block, f32 logits with a wider row, renormalized", c.logits_dtype = CKJIT_F32, c.ld_logits = 12,
         c.renormalize = 1);
  RVALID(0, "f16 logits, topk_ids and ids_dtype not read", c.logits_dtype = CKJIT_F16, d->topk_ids = OFF(AE_FAKE_DEV(3), 1),
         d->ids_dtype = (ckjit_dtype)42);
  RVALID(0, "k 8 of 256 experts", d->k = 8, d->experts = 256, c.ld_logits = 256,
         d->workspace_bytes = ckjit_fused_moe_router_workspace_size(d));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_desc_init), cmocka_unit_test(test_workspace_size), cmocka_unit_test(test_sizes),
      cmocka_unit_test(test_types),     cmocka_unit_test(test_pointers),       cmocka_unit_test(test_valid),
      cmocka_unit_test(test_router),    cmocka_unit_test(test_shared),
  };
  return cmocka_run_group_tests_name("fused_moe_api_errors", tests, group_setup, ae_group_teardown);
}
