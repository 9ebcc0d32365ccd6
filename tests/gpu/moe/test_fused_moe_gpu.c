/* GPU suite for ckjit_fused_moe (ckjit/moe.h), through the public API, against
 * a float64 reference of the header's definition:
 *   y[t] = rnd(sum_s rnd(w[t][s] down_e(b)))   (f32 sum in slot order),
 *   b    = rnd(act(gate_e(a)) up_e(a)), quantized again under FP8,
 *   a    = x (16-bit weights) or x quantized per token / 1 x 128 block (FP8),
 * an id outside 0 .. experts - 1 contributing nothing (a token with no valid
 * id reads 0) and counted into *invalid.
 *
 * Data.  The gate-up GEMM's operands are chosen so that its f32 sums are
 * exact in any order, so that its outputs, hence h, are the reference's up
 * to the activation's f32 error and every test failure is a real one:
 *   - 16-bit: x = k / 8 (|k| <= 8), w_gate_up = k 2^-(wb + 4) (|k| <= 16,
 *     2^wb ~ sqrt(hidden) / 2): products are multiples of 2^-(wb + 7), and
 *     every partial sum is at most hidden 2^7 of those units (2^19 at
 *     hidden 4096: exact in f32); one case ("random data") uses uniform x
 *     and weights instead;
 *   - FP8: every quantization group of x has scale r 2^-m (r 1 or 3/2) and
 *     quantizes exactly to codes 64 k (|k| <= 7), x moved off the codes by
 *     up to 3/8 of a step where r = 1 (a correct quantizer rounds it back,
 *     a truncating one does not; r = 3/2 catches another group's scale);
 *     w_gate_up's codes are 0, +-1/4, +-1/2: products are multiples of 16
 *     up to 224, a 128-block's sum within 11 bits (as test_gemm_fp8_gpu's
 *     exact data), then scaled in f32.
 * w_down is uniform (16-bit) or random e4m3 codes up to 3.75 (FP8); scales
 * are log-uniform over [1/2, 2] x a size factor; routing weights uniform in
 * [0.05, 1).  The data generators' premises are checked on the host
 * (fm_self_check, before the device check).
 *
 * Tolerance (fused_moe_reference.c derives it): each element's reference is
 * an interval [lo, hi] carried through the chain, every rounding to dtype
 * applied to its input's interval ends (rounding is monotone):
 *   - gate-up error c1 (S + D) + D, S = sum |terms|, D = sum |w| da (the
 *     activations' quantization uncertainty); c1 = 0 for exact data,
 *     (hidden + 8) 2^-21 for random 16-bit data (test_gemm_gpu's f32
 *     tensor-core bound), (kb + 4) 2^-23 for FP8 (the f32 block scaling);
 *   - act: 1.2 x its input's error + 2^-18 (1 + |g|) (hardware exp / erf);
 *   - each FP8 quantization (x, h): the device's scale within 2^-21 of
 *     amax / 448 for any amax its inputs allow, its quotients within 2^-20:
 *     an element near a rounding boundary, or whose input interval spans
 *     one, may take either code, so the bound is per element (one e4m3
 *     step times |weight| only where the codes can differ, not everywhere:
 *     a step everywhere would be ~10% of sum |terms|, wider than y itself
 *     at inter 1408, and the test could not fail);
 *   - the down GEMM: (inter + 8) 2^-21 of sum |terms| (16-bit), or
 *     2^-9 + (kb + 4) 2^-23 (FP8: the tensor cores' shortened 128-block
 *     sums, as test_gemm_fp8_gpu), plus sum |w_down| db for h's uncertainty;
 *   - each slot's rnd(w d) and the f32 combine (slots 2^-23 sum |c|);
 *   - an f16 subnormal step (2^-24) of slack.
 * On simulated devices (fm_self_check) the honest one stays inside and
 * zeros, a wrong expert, a dropped slot, the weight ignored, another
 * activation, gate / up swapped, clamped invalid ids, truncating or per-row
 * (BLOCK) quantization of x and a transposed block scale each fail, also
 * at hidden 4096 / inter 1408 / k 8 (the intervals' half-width averages
 * ~4% of |y| there in bf16, ~14% with FP8).
 *
 * Each case: y starts as 0xFF bytes (NaN) and its padding (ldy > hidden)
 * and a guard after it must stay so; x's padding holds NaN; the workspace
 * is exactly ckjit_fused_moe_workspace_size() bytes, filled with 0xFF
 * before every call, and one byte less is refused (INVALID_ARGUMENT);
 * every y element is written, all-invalid tokens read 0, *invalid is the
 * count; the reference checks every token (small cases) or the first, the
 * last, the forced-invalid ones and a random sample (large ones); x, the
 * ids and the routing weights come back unchanged; `twice` cases rerun and
 * must give identical bits.  Then a CUDA graph capture of one call on a
 * non-default stream replayed over four routings (bf16 weights, then FP8
 * block-scaled ones), CKJIT_MOE_CHECK=1, the router wrapper, expert
 * parallelism and shared experts (each against the plain layer's bytes:
 * see ep_check and fused_moe_shared_checks.c), and gated shared experts
 * against the reference.
 *
 * Runs on sm_90 with an sm_90 compile arch; elsewhere one call must return
 * CKJIT_ERROR_UNSUPPORTED and the suite is skipped with the reason.
 * CKJIT_TEST_SKIP_LARGE=1 skips the 16384-token and 4096 x 1408 cases. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "gpu_harness.h"
#include "fused_moe_device.h"
#include "fused_moe_reference.h"
#include "fused_moe_shared_checks.h"
#include "../gemm/fp8_reference.h"

static long run_case(gt_ctx *ctx, size_t index, const fm_case *c, uint64_t seed) {
  gt_check *ck = ctx->ck;
  const long f0 = ck->failures;
  tu_rng r = {seed ^ 0xC0FFEEull};
  fm_host p;
  fm_dev v;
  memset(&v, 0, sizeof v);
  uint8_t *first = NULL, *back = NULL;
  int32_t inv = 0;
  fm_begin(ck, "case", index, c, seed);
  if (fm_host_make(&p, c, seed, ctx->threads)) {
    gt_fail(ck, "host allocation failed");
    goto done;
  }
  if (fm_dev_make(ck, &v, &p)) goto done;
  if (v.ws_bytes) { /* one byte short: refused before any device work */
    ckjit_fused_moe_desc small = v.d;
    small.workspace_bytes = v.ws_bytes - 1;
    const ckjit_status st = ckjit_fused_moe(&small, NULL);
    if (st != CKJIT_ERROR_INVALID_ARGUMENT)
      gt_fail(ck, "workspace_bytes %zu (one short) gave %s, want CKJIT_ERROR_INVALID_ARGUMENT", v.ws_bytes - 1,
              ckjit_status_string(st));
    else gt_pass(ck);
  }
  if (fm_call(ck, &v, NULL) || gt_sync(ck) || fm_download(ck, &v, &inv)) goto done;
  fm_check_output(ck, ctx, &p, &v, inv, &r);
  const size_t ybytes = v.y.elems * gt_esize(c->dtype);
  if (c->twice) {
    first = malloc(ybytes);
    if (!first) abort();
    memcpy(first, v.y.host, ybytes);
    if (gt_buf_poison(ck, &v.y) || fm_call(ck, &v, NULL) || gt_sync(ck) || fm_download(ck, &v, &inv)) goto done;
    if (memcmp(first, v.y.host, ybytes)) gt_fail(ck, "a second run gave other bits");
    else gt_pass(ck);
  }
  /* the inputs are not written */
  const size_t xb = v.x.elems * gt_esize(c->dtype), ib = v.ids.elems * gt_esize(c->ids), wb = v.tw.elems * 4;
  back = malloc(xb + ib + wb + 1);
  if (!back) abort();
  if (!gt_buf_download(ck, &v.x, back) && !gt_buf_download(ck, &v.ids, back + xb) &&
      !gt_buf_download(ck, &v.tw, back + xb + ib)) {
    if (memcmp(back, p.x, xb) || memcmp(back + xb, v.ids.host, ib) || memcmp(back + xb + ib, v.tw.host, wb))
      gt_fail(ck, "x, topk_ids or topk_weights changed");
    else gt_pass(ck);
  }
done:
  free(first), free(back);
  fm_dev_free(&v);
  fm_host_free(&p);
  gt_check_end(ck);
  return ck->failures - f0;
}

/* ---- the cases ---------------------------------------------------------------------------- */

static size_t build(fm_case *cs, int skip_large) {
  const ckjit_dtype B = CKJIT_BF16, F = CKJIT_F16, Q = CKJIT_FP8_E4M3, I32 = CKJIT_I32, I64 = CKJIT_I64;
  const ckjit_unary_op SILU = CKJIT_UNARY_SILU, TANH = CKJIT_UNARY_GELU_TANH, ERF = CKJIT_UNARY_GELU_ERF;
  size_t n = 0;
  fm_case c;
  cs[n++] = fm_mk("no tokens", 0, 8, 2, 272, 144, B, B, SILU, I32, FM_UNIFORM);
  cs[n++] = fm_mk("one token", 1, 8, 2, 272, 144, B, B, SILU, I32, FM_UNIFORM);
  cs[n++] = fm_mk("7 tokens, k 8 of 64 experts", 7, 64, 8, 272, 144, F, F, TANH, I64, FM_UNIFORM);
  cs[n++] = fm_mk("k 1, invalid ids", 300, 64, 1, 272, 144, B, B, SILU, I32, FM_INVALID);
  c = fm_mk("every slot on one expert (twice each token)", 1000, 8, 2, 272, 144, B, B, ERF, I32, FM_ONE_EXPERT);
  c.twice = 1, cs[n++] = c;
  cs[n++] = fm_mk("3 of 256 experts used", 500, 256, 8, 272, 144, F, F, TANH, I64, FM_FEW);
  /* k 16: two rounds of the combine's 8 slots in flight; hidden 1168: a
   * row of two combine units, the second partial */
  cs[n++] = fm_mk("k 16 of 64 experts, hidden 1168", 33, 64, 16, 1168, 144, B, B, SILU, I32, FM_UNIFORM);
  cs[n++] = fm_mk("invalid ids of 512 experts", 700, 512, 2, 272, 144, B, B, SILU, I64, FM_INVALID);
  c = fm_mk("random data, ldx / ldy padded, invalid NULL", 100, 8, 2, 272, 144, B, B, SILU, I32, FM_UNIFORM);
  c.random_data = 1, c.ldx_pad = 40, c.ldy_pad = 24, c.no_invalid = 1, cs[n++] = c;
  c = fm_mk("fp8 row", 77, 8, 2, 272, 144, B, Q, SILU, I32, FM_UNIFORM);
  c.sc = CKJIT_FP8_SCALE_ROW, c.zero_groups = 1, cs[n++] = c;
  c = fm_mk("fp8 row, k 1, invalid ids", 200, 64, 1, 272, 144, F, Q, ERF, I64, FM_INVALID);
  c.sc = CKJIT_FP8_SCALE_ROW, c.ldy_pad = 8, cs[n++] = c;
  c = fm_mk("fp8 block, inter 192", 77, 8, 2, 272, 192, B, Q, SILU, I32, FM_UNIFORM);
  c.zero_groups = 1, cs[n++] = c;
  c = fm_mk("fp8 block, k 8, padded", 300, 64, 8, 528, 320, F, Q, TANH, I64, FM_FEW);
  c.ldx_pad = 8, c.ldy_pad = 16, c.zero_groups = 1, c.twice = 1, cs[n++] = c;
  c = fm_mk("fp8 row, 512 experts, 7 tokens", 7, 512, 8, 272, 144, B, Q, SILU, I32, FM_UNIFORM);
  c.sc = CKJIT_FP8_SCALE_ROW, cs[n++] = c;
  if (skip_large) return n;
  c = fm_mk("16384 tokens, k 8 of 256 experts", 16384, 256, 8, 272, 144, B, B, SILU, I32, FM_UNIFORM);
  c.sample = 24, c.large = 1, cs[n++] = c;
  c = fm_mk("16384 tokens of 512 experts, invalid ids", 16384, 512, 2, 528, 208, F, F, TANH, I64, FM_INVALID);
  c.sample = 24, c.ldy_pad = 8, c.large = 1, cs[n++] = c;
  c = fm_mk("16384 tokens, fp8 block", 16384, 256, 8, 272, 192, B, Q, SILU, I32, FM_INVALID);
  c.sample = 16, c.large = 1, cs[n++] = c;
  c = fm_mk("realistic bf16", 4096, 64, 8, 4096, 1408, B, B, SILU, I32, FM_UNIFORM);
  c.sample = 16, c.large = 1, cs[n++] = c;
  c = fm_mk("realistic fp8 block", 4096, 64, 8, 4096, 1408, B, Q, SILU, I32, FM_UNIFORM);
  c.sample = 16, c.large = 1, cs[n++] = c;
  return n;
}

/* ---- a CUDA graph replayed over routings ------------------------------------------------------ */

static struct {
  int (*stream_create)(void **, unsigned);
  int (*begin)(void *, int);
  int (*end)(void *, void **);
  int (*instantiate)(void **, void *, unsigned long long);
  int (*launch)(void *, void *);
  int (*sync)(void *);
  int (*device_get)(int *, int);
  int (*retain)(void **, int);
  int (*set_current)(void *);
  int (*exec_destroy)(void *);
  int (*graph_destroy)(void *);
  int (*stream_destroy)(void *);
} cu;

/* The CUDA driver's graph API (dlopen: no CUDA headers needed); 0 with the reason. */
static int load_cuda(const gt_ctx *ctx, char *why, size_t len) {
  if (ctx->info.backend != CKJIT_BACKEND_CUDA) {
    snprintf(why, len, "the graph replay uses the CUDA driver; device %s", ctx->info.device_arch);
    return 0;
  }
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(why, len, "dlopen libcuda.so.1: %s", dlerror());
    return 0;
  }
#define SYM(field, name) cu.field = (__typeof__(cu.field))dlsym(lib, name)
  SYM(stream_create, "cuStreamCreate"), SYM(begin, "cuStreamBeginCapture_v2"), SYM(end, "cuStreamEndCapture");
  SYM(instantiate, "cuGraphInstantiateWithFlags"), SYM(launch, "cuGraphLaunch"), SYM(sync, "cuStreamSynchronize");
  SYM(device_get, "cuDeviceGet"), SYM(retain, "cuDevicePrimaryCtxRetain"), SYM(set_current, "cuCtxSetCurrent");
  SYM(exec_destroy, "cuGraphExecDestroy"), SYM(graph_destroy, "cuGraphDestroy"), SYM(stream_destroy, "cuStreamDestroy_v2");
#undef SYM
  if (!cu.stream_create || !cu.begin || !cu.end || !cu.instantiate || !cu.launch || !cu.sync || !cu.device_get ||
      !cu.retain || !cu.set_current || !cu.exec_destroy || !cu.graph_destroy || !cu.stream_destroy) {
    snprintf(why, len, "this CUDA driver lacks the graph API");
    return 0;
  }
  return 1;
}

/* One call captured on a non-default stream, then replayed with the
 * routing (ids and weights on the device) changed between replays; y, the
 * workspace and *invalid are refilled before each. */
static long graph_replay(gt_ctx *ctx, size_t index, uint64_t seed, ckjit_dtype wdt) {
  gt_check *ck = ctx->ck;
  const long f0 = ck->failures;
  fm_case c = fm_mk("CUDA graph replay", 256, 64, 8, 272, 192, CKJIT_BF16, wdt, CKJIT_UNARY_SILU, CKJIT_I32, FM_UNIFORM);
  char why[256];
  if (!load_cuda(ctx, why, sizeof why)) {
    printf("SKIP the CUDA graph replay: %s\n", why);
    return 0;
  }
  tu_rng r = {seed ^ 0x6A09E667ull};
  fm_host p;
  fm_dev v;
  memset(&v, 0, sizeof v);
  void *primary = NULL, *stream = NULL, *graph = NULL, *exec = NULL;
  int32_t inv;
  int dev;
  fm_begin(ck, "case", index, &c, seed);
  if (fm_host_make(&p, &c, seed, ctx->threads)) {
    gt_fail(ck, "host allocation failed");
    goto done;
  }
  if (fm_dev_make(ck, &v, &p)) goto done;
  /* the stream in the device's primary context, made current here (ckjit
   * leaves the caller's context alone) */
  if (cu.device_get(&dev, ctx->info.device) || cu.retain(&primary, dev) || cu.set_current(primary) ||
      cu.stream_create(&stream, 0)) {
    gt_fail(ck, "primary context / cuStreamCreate failed");
    goto done;
  }
  /* eager first: kernels are compiled and loaded outside the capture */
  if (fm_call(ck, &v, stream) || cu.sync(stream) || fm_download(ck, &v, &inv)) goto done;
  fm_check_output(ck, ctx, &p, &v, inv, &r);
  int rc = cu.begin(stream, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */);
  const ckjit_status st = rc ? CKJIT_ERROR_INTERNAL : ckjit_fused_moe(&v.d, stream);
  if (!rc) rc = cu.end(stream, &graph);
  if (rc || st != CKJIT_SUCCESS || !graph || cu.instantiate(&exec, graph, 0)) {
    gt_fail(ck, "capture: driver status %d, ckjit_fused_moe %s: %s", rc, ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  static const int routings[4] = {FM_FEW, FM_ONE_EXPERT, FM_INVALID, FM_UNIFORM};
  for (int i = 0; i < 4; i++) {
    const int32_t sentinel = INV_SENTINEL;
    fm_route(&p, routings[i], &r);
    if (fm_upload_routing(ck, &v, &p) || gt_buf_poison(ck, &v.y) || ckjit_memset(v.ws.dev, 0xFF, v.ws_bytes) ||
        ckjit_memcpy(v.inv.dev, &sentinel, 4, CKJIT_HOST_TO_DEVICE))
      goto done;
    if (cu.launch(exec, stream) || cu.sync(stream)) {
      gt_fail(ck, "replay %d (%s): cuGraphLaunch / cuStreamSynchronize failed", i, fm_routing_name(routings[i]));
      goto done;
    }
    if (fm_download(ck, &v, &inv)) goto done;
    const long before = ck->failures;
    fm_check_output(ck, ctx, &p, &v, inv, &r);
    if (ck->failures != before) printf("  (in replay %d, routing %s)\n", i, fm_routing_name(routings[i]));
  }
done:
  if (exec) cu.exec_destroy(exec);
  if (graph) cu.graph_destroy(graph);
  if (stream) cu.stream_destroy(stream);
  fm_dev_free(&v);
  fm_host_free(&p);
  gt_check_end(ck);
  return ck->failures - f0;
}

/* ---- CKJIT_MOE_CHECK=1 ----------------------------------------------------------------------- */

/* An out-of-range id fails the call with INVALID_ARGUMENT; a routing
 * without one passes (and is right). */
static long moe_check(gt_ctx *ctx, size_t index, uint64_t seed) {
  gt_check *ck = ctx->ck;
  const long f0 = ck->failures;
  fm_case c = fm_mk("CKJIT_MOE_CHECK=1", 16, 8, 2, 272, 144, CKJIT_BF16, CKJIT_BF16, CKJIT_UNARY_SILU, CKJIT_I32, FM_UNIFORM);
  tu_rng r = {seed ^ 0xBB67AE85ull};
  fm_host p;
  fm_dev v;
  memset(&v, 0, sizeof v);
  int32_t inv;
  fm_begin(ck, "case", index, &c, seed);
  setenv("CKJIT_MOE_CHECK", "1", 1);
  if (fm_host_make(&p, &c, seed, ctx->threads)) {
    gt_fail(ck, "host allocation failed");
    goto done;
  }
  const int64_t good = p.ids[5];
  p.ids[5] = -1;
  if (fm_dev_make(ck, &v, &p)) goto done;
  ckjit_status st = ckjit_fused_moe(&v.d, NULL);
  if (st != CKJIT_ERROR_INVALID_ARGUMENT || !strstr(ckjit_last_error(), "ckjit_fused_moe"))
    gt_fail(ck, "an id -1 gave %s (%s), want CKJIT_ERROR_INVALID_ARGUMENT naming ckjit_fused_moe", ckjit_status_string(st),
            ckjit_last_error());
  else gt_pass(ck);
  p.ids[5] = good;
  if (gt_sync(ck) || fm_upload_routing(ck, &v, &p) || gt_buf_poison(ck, &v.y)) goto done;
  if (fm_call(ck, &v, NULL) || gt_sync(ck) || fm_download(ck, &v, &inv)) goto done;
  fm_check_output(ck, ctx, &p, &v, inv, &r);
done:
  unsetenv("CKJIT_MOE_CHECK");
  fm_dev_free(&v);
  fm_host_free(&p);
  gt_check_end(ck);
  return ck->failures - f0;
}

/* Expert parallelism against its definition: the layer with an expert_map
 * (16 local of 48 global experts, ids naming global experts) gives the same
 * y bytes as the layer on the local ids with every slot routed elsewhere
 * given id -1 (nothing is read for either); *invalid counts only the ids
 * outside the routing (the one planted), not the slots routed elsewhere. */
static long ep_check(gt_ctx *ctx, size_t index, uint64_t seed) {
  gt_check *ck = ctx->ck;
  const long f0 = ck->failures;
  enum { LOCAL = 16, GLOBAL = 48 };
  fm_case c = fm_mk("expert parallel", 300, LOCAL, 4, 272, 144, CKJIT_BF16, CKJIT_BF16, CKJIT_UNARY_SILU, CKJIT_I32, FM_UNIFORM);
  tu_rng r = {seed ^ 0xA54FF53Aull};
  fm_host p;
  fm_dev v;
  gt_buf map;
  memset(&v, 0, sizeof v), memset(&map, 0, sizeof map);
  uint8_t *first = NULL;
  int64_t *global = NULL;
  fm_begin(ck, "expert parallel", index, &c, seed);
  if (fm_host_make(&p, &c, seed, ctx->threads)) {
    gt_fail(ck, "host allocation failed");
    goto done;
  }
  /* global g holds local expert g % 16 for g < 32 (two global names each),
   * the rest live elsewhere */
  if (gt_buf_alloc(ck, &map, CKJIT_I32, GLOBAL)) goto done;
  for (int g = 0; g < GLOBAL; g++) ((int32_t *)(void *)map.host)[g] = g < 2 * LOCAL ? g % LOCAL : -1;
  if (gt_buf_upload(ck, &map)) goto done;
  const int64_t n = c.tokens * c.k;
  if (!(global = malloc(sizeof(int64_t) * (size_t)n))) abort();
  int64_t elsewhere = 0;
  for (int64_t i = 0; i < n; i++) {
    const int64_t e = p.ids[i]; /* a local expert */
    if (tu_rng_range(&r, 0, 2) == 0) { /* routed elsewhere: the local run reads id -1 */
      global[i] = 2 * LOCAL + tu_rng_range(&r, 0, GLOBAL - 2 * LOCAL - 1), p.ids[i] = -1, elsewhere++;
    } else {
      global[i] = e + LOCAL * tu_rng_range(&r, 0, 1);
    }
  }
  /* slot 7 is outside the routing: invalid in both runs, and no longer a
   * slot routed elsewhere if the draw above made it one */
  if (p.ids[7] == -1) elsewhere--;
  global[7] = GLOBAL + 3, p.ids[7] = -1;
  if (fm_dev_make(ck, &v, &p)) goto done; /* the local ids */
  int32_t inv_local, inv_ep;
  if (fm_call(ck, &v, NULL) || gt_sync(ck) || fm_download(ck, &v, &inv_local)) goto done;
  fm_check_output(ck, ctx, &p, &v, inv_local, &r); /* the local run against the reference */
  const size_t ybytes = v.y.elems * gt_esize(c.dtype);
  if (!(first = malloc(ybytes))) abort();
  memcpy(first, v.y.host, ybytes);
  for (int64_t i = 0; i < n; i++) ((int32_t *)(void *)v.ids.host)[i] = (int32_t)global[i];
  if (gt_buf_upload(ck, &v.ids) || gt_buf_poison(ck, &v.y)) goto done;
  v.d.expert_map = map.dev, v.d.global_experts = GLOBAL;
  if (fm_call(ck, &v, NULL) || gt_sync(ck) || fm_download(ck, &v, &inv_ep)) goto done;
  fm_check_same_y(ck, &v, first, "the local run");
  if (inv_ep != 1 || inv_local != 1 + (int32_t)elsewhere)
    gt_fail(ck, "*invalid %d with the map, %d without: want 1 and 1 + %lld", inv_ep, inv_local, (long long)elsewhere);
  else gt_pass(ck);
done:
  free(first);
  free(global);
  gt_buf_free(&map);
  fm_dev_free(&v);
  fm_host_free(&p);
  gt_check_end(ck);
  return ck->failures - f0;
}

/* ckjit_fused_moe_router against its definition, ckjit_topk_softmax then
 * ckjit_fused_moe: y the same bytes (its padding and guard included), for
 * random logits (sometimes tied, so the tie rule shows), `dt` logits with a
 * row wider than experts, plain or renormalized weights.  The layer alone
 * is checked against the reference by the cases above, topk_softmax by
 * rows_gpu. */
static long router_check(gt_ctx *ctx, size_t index, uint64_t seed, int64_t tokens, ckjit_dtype dt, int renormalize) {
  gt_check *ck = ctx->ck;
  const long f0 = ck->failures;
  fm_case c = fm_mk("router", tokens, 64, 8, 272, 144, CKJIT_BF16, CKJIT_BF16, CKJIT_UNARY_GELU_TANH, CKJIT_I32, FM_UNIFORM);
  tu_rng r = {seed ^ 0x3C6EF372ull};
  fm_host p;
  fm_dev v;
  gt_buf logits, rws;
  memset(&v, 0, sizeof v), memset(&logits, 0, sizeof logits), memset(&rws, 0, sizeof rws);
  uint8_t *first = NULL;
  fm_begin(ck, "router", index, &c, seed);
  printf("  logits %s, renormalize %d\n", ckjit_dtype_name(dt), renormalize);
  const int64_t ld = c.experts + 8;
  if (fm_host_make(&p, &c, seed, ctx->threads)) {
    gt_fail(ck, "host allocation failed");
    goto done;
  }
  if (fm_dev_make(ck, &v, &p) || gt_buf_alloc(ck, &logits, dt, (size_t)(tokens * ld))) goto done;
  for (int64_t i = 0; i < tokens * ld; i++) /* a coarse grid: ties happen */
    gt_put(dt, logits.host, (size_t)i, (double)tu_rng_range(&r, -16, 16) / 4);
  if (gt_buf_upload(ck, &logits)) goto done;
  /* the definition: the router into the layer's ids and weights, then the layer */
  ckjit_status st = ckjit_topk_softmax(dt, tokens, c.experts, logits.dev, ld, c.k, renormalize, v.tw.dev, CKJIT_I32,
                                       v.ids.dev, NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(ck, "ckjit_topk_softmax returned %s: %s", ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  int32_t inv;
  if (fm_call(ck, &v, NULL) || gt_sync(ck) || fm_download(ck, &v, &inv)) goto done;
  const size_t ybytes = v.y.elems * gt_esize(c.dtype);
  if (!(first = malloc(ybytes))) abort();
  memcpy(first, v.y.host, ybytes);
  /* the call, with exactly the workspace its query asks for */
  ckjit_fused_moe_desc d = v.d;
  d.topk_ids = NULL, d.topk_weights = NULL, d.ids_dtype = CKJIT_I64; /* not read */
  d.workspace_bytes = ckjit_fused_moe_router_workspace_size(&d);
  if (d.workspace_bytes < v.ws_bytes + 2 * 4 * (size_t)(tokens * c.k)) {
    gt_fail(ck, "ckjit_fused_moe_router_workspace_size %zu: less than the layer's %zu plus the routing", d.workspace_bytes,
            v.ws_bytes);
    goto done;
  }
  if (gt_buf_alloc(ck, &rws, CKJIT_I8, d.workspace_bytes) || gt_buf_poison(ck, &rws) || gt_buf_poison(ck, &v.y)) goto done;
  d.workspace = rws.dev;
  d.workspace_bytes -= 1;
  st = ckjit_fused_moe_router(&d, dt, logits.dev, ld, renormalize, NULL);
  if (st != CKJIT_ERROR_INVALID_ARGUMENT) gt_fail(ck, "a workspace one byte short gave %s", ckjit_status_string(st));
  else gt_pass(ck);
  d.workspace_bytes += 1;
  st = ckjit_fused_moe_router(&d, dt, logits.dev, ld, renormalize, NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(ck, "ckjit_fused_moe_router returned %s: %s", ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  if (gt_sync(ck) || gt_buf_download(ck, &v.y, NULL)) goto done;
  fm_check_same_y(ck, &v, first, "topk_softmax + fused_moe");
done:
  free(first);
  gt_buf_free(&logits);
  gt_buf_free(&rws);
  fm_dev_free(&v);
  fm_host_free(&p);
  gt_check_end(ck);
  return ck->failures - f0;
}

/* ---- the suite --------------------------------------------------------------------------------- */

static int requires(gt_ctx *ctx, char *why, size_t len) {
  if (is_sm90(ctx->info.device_arch) && is_sm90(ctx->info.arch)) return 1;
  fm_case c = fm_mk("probe", 4, 2, 1, 16, 16, CKJIT_BF16, CKJIT_BF16, CKJIT_UNARY_SILU, CKJIT_I32, FM_UNIFORM);
  fm_host p;
  fm_dev v;
  memset(&v, 0, sizeof v);
  ckjit_status st = CKJIT_ERROR_INTERNAL;
  gt_check_begin(ctx->ck, "unsupported-device probe");
  if (fm_host_make(&p, &c, 1, 1) == 0 && fm_dev_make(ctx->ck, &v, &p) == 0) st = ckjit_fused_moe(&v.d, NULL);
  fm_dev_free(&v);
  fm_host_free(&p);
  gt_check_end(ctx->ck);
  if (st == CKJIT_ERROR_UNSUPPORTED) {
    snprintf(why, len, "ckjit_fused_moe needs sm_90; device %s (%s), compile arch %s: CKJIT_ERROR_UNSUPPORTED (%s)",
             ctx->info.name, ctx->info.device_arch, ctx->info.arch, ckjit_last_error());
    return 0;
  }
  printf("note: device %s, compile arch %s is not sm_90, yet ckjit_fused_moe returned %s: running the cases\n",
         ctx->info.device_arch, ctx->info.arch, ckjit_status_string(st));
  return 1;
}

static gt_result run(gt_ctx *ctx) {
  if (ctx->skip_large) printf("SKIP the 16384-token and 4096 x 1408 cases: CKJIT_TEST_SKIP_LARGE is set\n");
  static fm_case cases[24];
  const size_t count = build(cases, ctx->skip_large);
  int failed = 0;
  for (size_t i = 0; i < count; i++)
    failed += run_case(ctx, i, &cases[i], ctx->seed ^ (0x9E3779B97F4A7C15ull * (i + 1))) != 0;
  uint64_t s = ctx->seed ^ (0x9E3779B97F4A7C15ull * (count + 1));
  failed += graph_replay(ctx, count, s, CKJIT_BF16) != 0;
  failed += graph_replay(ctx, count + 1, s ^ 1, CKJIT_FP8_E4M3) != 0; /* block-scaled (mk's default) */
  failed += moe_check(ctx, count + 2, ctx->seed ^ (0x9E3779B97F4A7C15ull * (count + 3))) != 0;
  s = ctx->seed ^ (0x9E3779B97F4A7C15ull * (count + 4));
  failed += router_check(ctx, count + 3, s, 1, CKJIT_F32, 0) != 0;
  failed += router_check(ctx, count + 4, s ^ 1, 77, CKJIT_BF16, 1) != 0;
  failed += router_check(ctx, count + 5, s ^ 2, 700, CKJIT_F16, 0) != 0;
  failed += ep_check(ctx, count + 6, s ^ 3) != 0;
  /* shared experts: bf16 (x copied: ldx % 16 = 8) and FP8 both scalings as
   * slots, then alone with another inter */
  const ckjit_dtype B = CKJIT_BF16, Q = CKJIT_FP8_E4M3;
  fm_case sc[5];
  sc[0] = fm_mk("shared, bf16, x copied", 300, 8, 2, 256, 128, B, B, CKJIT_UNARY_SILU, CKJIT_I32, FM_UNIFORM);
  sc[0].ldx_pad = 8;
  sc[1] = fm_mk("shared, f16 gelu, x direct", 129, 8, 1, 256, 96, CKJIT_F16, CKJIT_F16, CKJIT_UNARY_GELU_TANH, CKJIT_I32,
                FM_FEW);
  sc[2] = fm_mk("shared, fp8 block", 200, 8, 2, 256, 128, B, Q, CKJIT_UNARY_SILU, CKJIT_I32, FM_UNIFORM);
  sc[3] = fm_mk("shared, fp8 row", 200, 8, 2, 256, 96, B, Q, CKJIT_UNARY_SILU, CKJIT_I32, FM_UNIFORM);
  sc[3].sc = CKJIT_FP8_SCALE_ROW;
  sc[4] = fm_mk("shared alone, bf16", 77, 8, 2, 256, 64, B, B, CKJIT_UNARY_SILU, CKJIT_I32, FM_UNIFORM);
  const int shared_n[5] = {2, 1, 1, 2, 2}, alone[5] = {0, 0, 0, 0, 1};
  for (int i = 0; i < 5; i++)
    failed += fm_shared_check(ctx, count + 7 + (size_t)i, s ^ (4 + (uint64_t)i), sc[i], shared_n[i], alone[i]) != 0;
  /* gated shared experts: bf16 with two, FP8 block-scaled with one */
  fm_case gc[2];
  gc[0] = fm_mk("gated shared, bf16", 300, 8, 2, 256, 128, B, B, CKJIT_UNARY_SILU, CKJIT_I32, FM_UNIFORM);
  gc[1] = fm_mk("gated shared, fp8 block", 130, 8, 2, 256, 128, B, Q, CKJIT_UNARY_SILU, CKJIT_I32, FM_UNIFORM);
  for (int i = 0; i < 2; i++) failed += fm_gated_check(ctx, count + 12 + (size_t)i, s ^ (16 + (uint64_t)i), gc[i], 2 - i) != 0;
  printf("fused_moe: %zu cases (%d failed), %ld checks, %ld failures\n", count + 14, failed, ctx->ck->checks,
         ctx->ck->failures);
  return (gt_result){(long)count + 14, failed};
}

static const gt_suite suite = {
    .name = "fused_moe_gpu",
    .cache_tag = "fused-moe-gpu",
    .self_check = fm_self_check,
    .requires = requires,
    .run = run,
    .check_stats = 1,
};

GT_MAIN(suite)
