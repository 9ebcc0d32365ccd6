/* ckjit_gemm_fp8 (include/ckjit/gemm_fp8.h): validate, plan, arguments
 * (A's and B's tensor maps), run; also the shared path of
 * ckjit_gemm_fp8_moe (gemm_fp8_moe.c), whose experts are a third dimension
 * of the maps and a few strides. */
#include <stdint.h>
#include <string.h>

#include "abi/gemm_args.h"
#include "base/error.h"
#include "base/int_math.h"
#include "gemm_fp8.h"
#include "runtime/arch.h"
#include "runtime/dispatch.h"
#include "runtime/ops/op_frame.h"

static const char plain_api[] = "ckjit_gemm_fp8";

void ckjit_gemm_fp8_desc_init(ckjit_gemm_fp8_desc *desc) {
  if (!desc) return;
  memset(desc, 0, sizeof *desc);
  desc->a_dtype = desc->b_dtype = CKJIT_FP8_E4M3;
  desc->out_dtype = CKJIT_BF16;
  desc->scaling = CKJIT_FP8_SCALE_TENSOR;
  desc->alpha = 1.0f;
  desc->activation = CKJIT_UNARY_IDENTITY;
}

/* ---- validate ------------------------------------------------------------------- */

static int is_fp8(ckjit_dtype t) { return t == CKJIT_FP8_E4M3 || t == CKJIT_FP8_E5M2; }

/* An operand of `rows` rows of k elements of `es` bytes, ld apart;
 * `extent`: the elements the call may read from p (0: rows * ld). */
static ckjit_status check_operand(const char *api, const char *name, const void *p, size_t es,
                                  int64_t rows, int64_t k, int64_t ld, const char *ld_name,
                                  int64_t extent) {
  if (!p) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", api, name);
  if (ld < k || ld < 1)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s %lld is smaller than k %lld", api,
                       ld_name, (long long)ld, (long long)k);
  if ((uintptr_t)p % 16 || ld % 16)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: %s must be 16-byte aligned and %s a multiple of 16 (%p, %lld): the "
                       "tensor memory accelerator reads it",
                       api, name, ld_name, p, (long long)ld);
  int64_t elems = extent, bytes;
  if ((!extent && __builtin_mul_overflow(rows, ld, &elems)) ||
      __builtin_mul_overflow(elems, (int64_t)es, &bytes) || (uintptr_t)p + (uint64_t)bytes < (uintptr_t)p)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s overflows the address space", api,
                       name);
  return CKJIT_SUCCESS;
}

/* The epilogue's C, D0 and D1 (m x n in out_dtype, the op frame's matrix
 * rule plus element alignment): plain GEMMs only. */
static ckjit_status check_terms(const char *api, const ckjit_gemm_fp8_desc *g, const ckjit__fp8_moe *moe) {
  if (!g->c && !g->d0 && !g->d1) return CKJIT_SUCCESS;
  if (moe)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "%s: c, d0 and d1 are for ckjit_gemm_fp8 only (set them NULL)",
                       api);
  const void *const p[3] = {g->c, g->d0, g->d1};
  const int64_t ld[3] = {g->ldc, g->ldd0, g->ldd1};
  static const char *const names[3] = {"c", "d0", "d1"};
  const size_t es = ckjit_dtype_size(g->out_dtype);
  for (int i = 0; i < 3; i++) {
    if (!p[i] || !g->m || !g->n) continue; /* nothing of it is read */
    ckjit_status st = ckjit__check_matrix(api, names[i], p[i], g->m, g->n, ld[i], es);
    if (st) return st;
    if ((uintptr_t)p[i] % es)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s %p is not aligned to its %s elements", api,
                         names[i], p[i], ckjit_dtype_name(g->out_dtype));
  }
  if (g->c == g->d && g->ldc != g->ldd)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: c is d (in place) but ldc %lld differs from ldd %lld", api, (long long)g->ldc,
                       (long long)g->ldd);
  return CKJIT_SUCCESS;
}

static ckjit_status validate(const char *api, const ckjit_gemm_fp8_desc *g, const ckjit__fp8_moe *moe,
                             int64_t *kb) {
  if (!g) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: desc is NULL", api);
  if (g->m < 0 || g->n < 0 || g->k < 0)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: m, n, k (%lld, %lld, %lld) must be >= 0",
                       api, (long long)g->m, (long long)g->n, (long long)g->k);
  /* TMA coordinates and tile indices are 32-bit. */
  const int64_t limit = INT32_MAX - 512;
  if (g->m > limit || g->n > limit || g->k > limit)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "%s: m, n and k must be below 2^31 - 512", api);
  /* the grouped (MoE) form also runs 16-bit experts, unscaled */
  const int sixteen = moe && g->a_dtype == g->b_dtype &&
                      (g->a_dtype == CKJIT_BF16 || g->a_dtype == CKJIT_F16);
  if (!sixteen && (!is_fp8(g->a_dtype) || !is_fp8(g->b_dtype)))
    return ckjit__fail(ckjit_dtype_size(is_fp8(g->a_dtype) ? g->b_dtype : g->a_dtype)
                           ? CKJIT_ERROR_UNSUPPORTED
                           : CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: a_dtype and b_dtype must be CKJIT_FP8_E4M3 or CKJIT_FP8_E5M2%s (got %s, %s)",
                       api, moe ? ", or both CKJIT_BF16 or both CKJIT_F16" : "",
                       ckjit_dtype_name(g->a_dtype), ckjit_dtype_name(g->b_dtype));
  if (g->out_dtype != CKJIT_F16 && g->out_dtype != CKJIT_BF16 && g->out_dtype != CKJIT_F32)
    return ckjit__fail(ckjit_dtype_size(g->out_dtype) ? CKJIT_ERROR_UNSUPPORTED
                                                      : CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: out_dtype %s must be f16, bf16 or f32", api,
                       ckjit_dtype_name(g->out_dtype));
  if (!sixteen && (unsigned)g->scaling > CKJIT_FP8_SCALE_BLOCK)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: scaling %d is not a ckjit_fp8_scaling",
                       api, (int)g->scaling);
  if ((unsigned)g->bias_mode > CKJIT_BIAS_PER_COL)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: bias_mode %d is not a ckjit_bias_mode",
                       api, (int)g->bias_mode);
  if ((g->bias != NULL) != (g->bias_mode != CKJIT_BIAS_NONE))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: bias must be given exactly when bias_mode is not CKJIT_BIAS_NONE", api);
  if ((unsigned)g->activation > CKJIT_UNARY_SIGMOID)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: activation %d is not IDENTITY, RELU, GELU_TANH, GELU_ERF, SILU or "
                       "SIGMOID",
                       api, (int)g->activation);
  if (!sixteen && (!g->scale_a || !g->scale_b))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: scale_%s is NULL", api,
                       g->scale_a ? "b" : "a");
  *kb = (g->k + 127) / 128;
  if (!sixteen && g->scaling == CKJIT_FP8_SCALE_BLOCK) {
    const int64_t lsa = g->ld_scale_a ? g->ld_scale_a : *kb, lsb = g->ld_scale_b ? g->ld_scale_b : *kb;
    if (lsa < *kb || lsb < *kb)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                         "%s: ld_scale_a %lld and ld_scale_b %lld must be >= ceil(k / 128) = %lld "
                         "(or 0)",
                         api, (long long)g->ld_scale_a, (long long)g->ld_scale_b, (long long)*kb);
  }
  ckjit_status st;
  const int64_t a_extent = moe && moe->layout == MOE_MASKED ? moe->extent_a : 0,
                b_extent = moe ? moe->extent_b : 0;
  const size_t es = ckjit_dtype_size(g->a_dtype); /* A and B alike */
  if ((st = check_operand(api, "a", g->a, es, g->m, g->k, g->lda, "lda", a_extent)) ||
      (st = check_operand(api, "b", g->b, es, g->n, g->k, g->ldb, "ldb", b_extent)))
    return st;
  if (!g->d) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: d is NULL", api);
  if (g->ldd < g->n || g->ldd < 1)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: ldd %lld is smaller than n %lld", api,
                       (long long)g->ldd, (long long)g->n);
  return check_terms(api, g, moe);
}

/* ---- plan ------------------------------------------------------------------------ */

/* The test and benchmark knobs (README: environment variables), read per
 * call so a test can change them between calls:
 *   CKJIT_GEMM_FP8_CLUSTER  1 (default) or 2: pairs of blocks multicasting
 *     A's tile, where the GPU runs clusters and N has two tiles; they
 *     measured 4-13% slower on every benchmark shape (bench/NOTES.md #145),
 *     so the policy never picks them, and the results are the same bits;
 *   CKJIT_GEMM_FP8_PROMOTE  K steps between promotions, 0 (never) .. 64;
 *     block scaling always promotes every step.
 * A malformed value fails the call (a silent default would measure or test
 * something other than what was asked). */
typedef struct fp8_knobs {
  int cluster, promote;
} fp8_knobs;

static ckjit_status read_knobs(const char *api, fp8_knobs *k) {
  k->cluster = k->promote = 1;
  ckjit_status st = ckjit__knob_int(api, "CKJIT_GEMM_FP8_CLUSTER", 1, 2, &k->cluster);
  return st ? st : ckjit__knob_int(api, "CKJIT_GEMM_FP8_PROMOTE", 0, 64, &k->promote);
}

/* 128 x 128 tiles, unless they leave most multiprocessors idle: then
 * 128 x 64 (twice the blocks). */
static void plan(const ckjit_gemm_fp8_desc *g, const ckjit__fp8_moe *moe, const fp8_knobs *knobs,
                 const ckjit_device *dev, ckjit_launch_plan *p) {
  const int sms = dev->multiprocessors;
  const int64_t experts = moe && moe->layout == MOE_MASKED ? moe->experts : 1;
  const int64_t tiles_128 = experts * ckjit__ceil_div(g->m, 128) * ckjit__ceil_div(g->n, 128);
  const int epi = moe ? moe->epilogue : EPI_PLAIN;
  const int sixteen = g->a_dtype == CKJIT_BF16 || g->a_dtype == CKJIT_F16;
  /* 16-bit operands: 128 x 256 tiles (half the shared-memory reads a
   * product of 128 x 128), 128 x 128 where they would leave multiprocessors
   * idle; FP8: see above (gated tiles need both halves of 64 columns). */
  const int bn = sixteen ? (tiles_128 < sms ? 128 : 256)
                         : epi != EPI_GATED && tiles_128 < sms / 2 ? 64 : 128;
  ckjit__plan_init(p, CKJIT_FAMILY_GEMM_FP8);
  int32_t *v = p->spec.value;
  v[G8_A] = sixteen ? (g->a_dtype == CKJIT_BF16 ? OP_BF16 : OP_F16)
                   : g->a_dtype == CKJIT_FP8_E5M2 ? FP8_E5M2 : FP8_E4M3;
  v[G8_B] = sixteen ? v[G8_A] : g->b_dtype == CKJIT_FP8_E5M2 ? FP8_E5M2 : FP8_E4M3;
  v[G8_OUT] = ckjit__dtype_param_value(g->out_dtype);
  v[G8_SCALING] = sixteen ? SCALE_NONE : (int32_t)g->scaling;
  v[G8_BN] = bn;
  v[G8_STAGES] = ckjit__gemm_fp8_stages(bn);
  v[G8_PROMOTE] = sixteen ? 0 : g->scaling == CKJIT_FP8_SCALE_BLOCK ? 1 : knobs->promote;
  v[G8_EPI] = epi;
  v[G8_BIAS] = (int32_t)g->bias_mode;
  v[G8_ACT] = (int32_t)g->activation;
  v[G8_MOE] = moe ? moe->layout : MOE_NONE;
  v[G8_C] = g->c && g->beta != 0.0f; /* beta 0 never reads C */
  v[G8_D0] = g->d0 != NULL;
  v[G8_D1] = g->d1 != NULL;
  const int cluster =
      knobs->cluster == 2 && epi == EPI_PLAIN && dev->clusters && ckjit__ceil_div(g->n, bn) >= 2 ? 2 : 1;
  const int out_cols = epi == EPI_GATED ? bn / 2 : bn;
  v[G8_CLUSTER] = cluster;
  /* Persistent: a block per multiprocessor walks the tiles (a cluster its
   * units of `cluster` tiles along N; MASKED: every expert's, most of which
   * routing may leave empty). */
  const int64_t units = experts * ckjit__ceil_div(g->m, 128) *
                        ckjit__ceil_div(ckjit__ceil_div(g->n, out_cols), cluster),
                clusters = sms / cluster;
  p->grid[0] = (unsigned)((units < clusters ? units : clusters) * cluster);
  p->cluster = (unsigned)cluster;
  p->block[0] = 384;
  p->shared_bytes = ckjit__gemm_fp8_smem(v);
}

/* ---- arguments ------------------------------------------------------------------- */

static ckjit_status arguments(ckjit_gpu *gpu, const ckjit_gemm_fp8_desc *g, const ckjit__fp8_moe *moe,
                              int64_t kb, int bn, int cluster, ckjit_gemm_fp8_args *x) {
  memset(x, 0, sizeof *x);
  const char *api = moe ? moe->api : plain_api;
  const int masked = moe && moe->layout == MOE_MASKED;
  const int gated = moe && moe->epilogue == EPI_GATED;
  const unsigned long long experts = moe ? (unsigned long long)moe->experts : 1;
  /* a 128-byte row of K: 128 FP8 or 64 16-bit elements */
  const unsigned k_box = 128 / (unsigned)ckjit_dtype_size(g->a_dtype);
  /* K-major boxes of 128 bytes x 128 rows of A (each block of a cluster
   * loads its share of them), bn of B; the experts are the third
   * dimension (of A only when MASKED); k 0 still needs a valid map (no step
   * reads it). */
  const unsigned long long k = (unsigned long long)(g->k ? g->k : 16);
  /* gated: B has the gate's n rows, then the up's n, loaded as two boxes
   * of bn / 2 rows */
  const unsigned long long dims_a[3] = {k, (unsigned long long)g->m, masked ? experts : 1},
                           dims_b[3] = {k, (unsigned long long)g->n * (gated ? 2 : 1), experts};
  /* the maps' strides are in bytes */
  const unsigned long long es = ckjit_dtype_size(g->a_dtype);
  const unsigned long long str_a[2] = {es * (unsigned long long)g->lda,
                                       es * (unsigned long long)(masked ? moe->stride_a : g->lda * g->m)},
                           str_b[2] = {es * (unsigned long long)g->ldb,
                                       es * (unsigned long long)(moe ? moe->stride_b : g->ldb * g->n)};
  const unsigned box_a[3] = {k_box, 128 / (unsigned)cluster, 1},
                 box_b[3] = {k_box, (unsigned)(gated ? bn / 2 : bn), 1};
  const ckjit_device *dev = &gpu->device;
  const char *which = "A";
  ckjit_status st =
      dev->tensor_map_encode(dev, &x->map_a, g->a_dtype, 3, g->a, dims_a, str_a, box_a);
  if (!st) {
    which = "B";
    st = dev->tensor_map_encode(dev, &x->map_b, g->b_dtype, 3, g->b, dims_b, str_b, box_b);
  }
  if (st) { /* the driver's message stays; this names the call and the operand */
    ckjit__error_append(" (%s: %s's tensor map)", api, which);
    return st;
  }
  x->d = g->d;
  x->bias = g->bias;
  x->scale_a = g->scale_a;
  x->scale_b = g->scale_b;
  x->ldd = g->ldd;
  x->m = g->m, x->n = g->n, x->k = g->k;
  x->ld_scale_a = g->ld_scale_a ? g->ld_scale_a : kb;
  x->ld_scale_b = g->ld_scale_b ? g->ld_scale_b : kb;
  x->tiles_m = ckjit__ceil_div(g->m, 128);
  x->tiles_n = ckjit__ceil_div(g->n, gated ? bn / 2 : bn);
  x->alpha = g->alpha;
  x->experts = (int)experts;
  x->c = g->beta != 0.0f ? g->c : NULL, x->ldc = g->ldc, x->beta = g->beta;
  x->d0 = g->d0, x->ldd0 = g->ldd0;
  x->d1 = g->d1, x->ldd1 = g->ldd1;
  if (moe) {
    x->tile_experts = moe->tile_experts;
    x->counts = moe->counts;
    x->stride_d = masked ? moe->stride_d : 0;
    x->stride_scale_a = masked ? moe->stride_scale_a : 0;
    x->stride_scale_b = moe->stride_scale_b;
    x->stride_bias = g->bias ? moe->stride_bias : 0;
    x->row_ids = moe->row_ids;
    x->row_weights = moe->row_weights;
    x->route_entries = moe->route_entries;
  }
  return CKJIT_SUCCESS;
}

/* ---- run ------------------------------------------------------------------------------ */

ckjit_status ckjit__gemm_fp8_run(const ckjit_gemm_fp8_desc *g, const ckjit__fp8_moe *moe,
                                 void *stream) {
  const char *api = moe ? moe->api : plain_api;
  int64_t kb = 0;
  fp8_knobs knobs;
  ckjit_status st = validate(api, g, moe, &kb);
  if (st || (st = read_knobs(api, &knobs))) return st;
  const void *const operands[] = {g->a, g->b, g->d, g->scale_a, g->scale_b, g->bias,
                                  moe ? (const void *)moe->tile_experts : NULL,
                                  moe ? (const void *)moe->counts : NULL,
                                  g->beta != 0.0f ? g->c : NULL, g->d0, g->d1};
  static const char *const names[] = {"a", "b", "d", "scale_a", "scale_b", "bias", "tile_experts",
                                      "counts", "c", "d0", "d1"};
  if ((st = ckjit__check_pointers(stream, api, 11, operands, names))) return st;
  ckjit_gpu *gpu;
  if ((st = ckjit__stream_gpu(stream, &gpu))) return st;
  if (!ckjit__arch_has_wgmma(gpu->arch) || !gpu->device.tensor_map_encode)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                       "%s: FP8 GEMM runs on sm_90 (wgmma and TMA); this GPU compiles for %s%s", api,
                       gpu->arch, gpu->device.tensor_map_encode ? "" : " and its driver makes no tensor maps");
  if (g->m == 0 || g->n == 0) return CKJIT_SUCCESS;
  ckjit_launch_plan p;
  plan(g, moe, &knobs, &gpu->device, &p);
  if ((int)p.shared_bytes > gpu->device.max_shared_bytes)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "%s: the tile needs %u bytes of shared memory; the "
                       "GPU allows %d", api, p.shared_bytes, gpu->device.max_shared_bytes);
  ckjit_gemm_fp8_args x;
  if ((st = arguments(gpu, g, moe, kb, p.spec.value[G8_BN], p.spec.value[G8_CLUSTER], &x))) return st;
  return ckjit__op_run(gpu, &p, &x, &ckjit_abi_by_value, stream);
}

ckjit_status ckjit_gemm_fp8(const ckjit_gemm_fp8_desc *g, void *stream) {
  return ckjit__gemm_fp8_run(g, NULL, stream);
}
