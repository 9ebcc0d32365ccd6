/* topk_softmax family (MoE gating): descriptor, tile policy and launch. */
#include <stdint.h>
#include <string.h>

#include "dispatch.h"
#include "../base/error.h"
#include "../base/int_math.h"
#include "op_elementwise.h"
#include "spec.h"

/* k, renormalize and the index dtype are kernel arguments, not parameters:
 * each (dtype, experts class, vec) compiles once and serves them all. */
enum { P_DTYPE, P_EXPERTS, P_LANES, P_VEC, P_THREADS, P_COUNT };

enum { MAX_EXPERTS = 256, MAX_K = 8, MIN_CLASS = 8 };

static const ckjit_param_desc params[P_COUNT] = {
    [P_DTYPE] = CKJIT_DTYPE_PARAM,
    /* power-of-two class >= the experts of a call; the tail is masked */
    [P_EXPERTS] = {"experts", NULL, NULL, MIN_CLASS, MAX_EXPERTS, 64},
    /* lanes per token (>= 8: lane r keeps the r-th result, k <= 8) */
    [P_LANES] = {"lanes", NULL, NULL, 8, 32, 8},
    /* elements per load; the front-end makes it divide experts and ld_x */
    [P_VEC] = {"vec", NULL, NULL, 1, 8, 4},
    [P_THREADS] = {"threads", NULL, NULL, 64, 1024, 256},
};


static ckjit_status check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  if (!ckjit__is_pow2(v[P_EXPERTS]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: topk_softmax experts=%d must be a power of two", v[P_EXPERTS]);
  if (!ckjit__is_pow2(v[P_LANES]) || v[P_LANES] > v[P_EXPERTS])
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: topk_softmax lanes=%d must be 8, 16 or 32 and at most experts=%d",
                       v[P_LANES], v[P_EXPERTS]);
  int vpl = v[P_EXPERTS] / v[P_LANES];
  if (!ckjit__is_pow2(v[P_VEC]) || (size_t)v[P_VEC] * ckjit__dtype_param_size(v[P_DTYPE]) > 16 ||
      v[P_VEC] > vpl)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: topk_softmax vec=%d must be a power of two of at most 16 bytes and "
                       "at most experts/lanes=%d",
                       v[P_VEC], vpl);
  /* Whole 64-lane waves, so every lane of a wave runs the shuffles. */
  if (v[P_THREADS] % 64)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: threads=%d is not a multiple of 64",
                       v[P_THREADS]);
  return CKJIT_SUCCESS;
}

/* ---- tile policy ---------------------------------------------------------- */

typedef struct topk_policy {
  int experts_class, lanes, vec, threads;
} topk_policy;

static int experts_class(int64_t experts) {
  int c = MIN_CLASS;
  while (c < experts) c *= 2;
  return c;
}

/* Eight lanes per token for every class: the work of the selection rounds
 * scales with the values scanned (the same for any split) plus
 * lanes * log2(lanes) for the shuffles, so the narrowest group that can
 * keep the k <= 8 results one per lane is the cheapest; 8 lanes of 16-byte
 * vectors also read one 128-byte line per load.  256 experts give 32 values
 * per lane, well inside the register budget. */
static int policy_lanes(int cls) {
  (void)cls;
  return 8;
}

static int widest_vec(int32_t dtype_value, int cls, int lanes) {
  int vec = (int)(16 / ckjit__dtype_param_size(dtype_value)), vpl = cls / lanes;
  return vec < vpl ? vec : vpl;
}

/* Shape -> policy.  vec also divides experts, so a vector never straddles
 * the row end (the kernel masks whole vectors only). */
static topk_policy pick_policy(ckjit_dtype dtype, int64_t tokens, int64_t experts, const void *x,
                               int64_t ld_x) {
  topk_policy p;
  size_t es = ckjit_dtype_size(dtype);
  p.experts_class = experts_class(experts);
  p.lanes = policy_lanes(p.experts_class);
  int max_vec = widest_vec(ckjit__dtype_param_value(dtype), p.experts_class, p.lanes);
  const void *ptrs[1] = {x};
  int64_t strides[2] = {experts, ld_x};
  p.vec = ckjit__pick_vec(es, ptrs, 1, strides, tokens > 1 ? 2 : 1, max_vec);
  p.threads = 256;
  return p;
}

/* Default set: per dtype, the common expert counts (8 .. 256) on the
 * aligned fast path. */
static const int default_classes[] = {8, 16, 32, 64, 128, 256};
enum { N_DEFAULT_CLASSES = sizeof default_classes / sizeof default_classes[0] };

static int default_spec(size_t index, ckjit_spec *out) {
  if (index >= 3 * N_DEFAULT_CLASSES) return 0;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_TOPK_SOFTMAX;
  int dtype = (int)(index / N_DEFAULT_CLASSES), cls = default_classes[index % N_DEFAULT_CLASSES];
  out->value[P_DTYPE] = dtype;
  out->value[P_EXPERTS] = cls;
  out->value[P_LANES] = policy_lanes(cls);
  out->value[P_VEC] = widest_vec(dtype, cls, policy_lanes(cls));
  out->value[P_THREADS] = 256;
  return 1;
}

/* An omitted vec is the widest the policy would pick for the dtype and class. */
static void complete(ckjit_spec *s, unsigned given) {
  if (!(given & (1u << P_VEC)) && s->value[P_LANES] > 0 && s->value[P_LANES] <= s->value[P_EXPERTS])
    s->value[P_VEC] = widest_vec(s->value[P_DTYPE], s->value[P_EXPERTS], s->value[P_LANES]);
}

const ckjit_family ckjit__family_topk_softmax = {
    .name = "topk_softmax",
    .source = "topk_softmax.cu",
    .kernel = "ckjit_topk_softmax",
    .n_params = P_COUNT,
    .params = params,
    .check = check,
    .default_spec = default_spec,
    .complete = complete,
};

/* ---- front-end ------------------------------------------------------------ */

ckjit_status ckjit_topk_softmax(ckjit_dtype dtype, int64_t tokens, int64_t experts, const void *x,
                                int64_t ld_x, int k, int renormalize, float *weights,
                                ckjit_dtype index_dtype, void *indices, void *stream) {
  const char *api = "ckjit_topk_softmax";
  ckjit_status st = ckjit__check_dtype(api, dtype);
  if (st) return st;
  if (index_dtype != CKJIT_I32 && index_dtype != CKJIT_I64)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: index_dtype %s (%d) must be CKJIT_I32 or CKJIT_I64", api,
                       ckjit_dtype_name(index_dtype), (int)index_dtype);
  if (tokens < 1)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: tokens is %lld; must be >= 1", api,
                       (long long)tokens);
  if (experts < 1 || experts > MAX_EXPERTS)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: experts is %lld; must be in 1..%d", api,
                       (long long)experts, MAX_EXPERTS);
  int max_k = experts < MAX_K ? (int)experts : MAX_K;
  if (k < 1 || k > max_k)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: k is %d; must be in 1..%d (min(8, experts))", api, k, max_k);
  size_t es = ckjit_dtype_size(dtype), is = ckjit_dtype_size(index_dtype);
  if ((st = ckjit__check_matrix(api, "x", x, tokens, experts, ld_x, es))) return st;
  /* The outputs are tokens x k, contiguous. */
  if ((st = ckjit__check_matrix(api, "weights", weights, tokens, k, k, sizeof(float))) ||
      (st = ckjit__check_matrix(api, "indices", indices, tokens, k, k, is)))
    return st;
  if ((uintptr_t)x % es || (uintptr_t)weights % sizeof(float) || (uintptr_t)indices % is)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: x, weights and indices must be aligned to their element size", api);
  const void *const operands[] = {x, weights, indices};
  static const char *const operand_names[] = {"x", "weights", "indices"};
  if ((st = ckjit__check_pointers(api, 3, operands, operand_names))) return st;

  topk_policy pol = pick_policy(dtype, tokens, experts, x, ld_x);
  ckjit_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.family = CKJIT_FAMILY_TOPK_SOFTMAX;
  spec.value[P_DTYPE] = ckjit__dtype_param_value(dtype);
  spec.value[P_EXPERTS] = pol.experts_class;
  spec.value[P_LANES] = pol.lanes;
  spec.value[P_VEC] = pol.vec;
  spec.value[P_THREADS] = pol.threads;

  /* One block per THREADS/LANES tokens; past 2^20 blocks the kernel's
   * grid-stride loop takes the rest (and blocks * threads stays below
   * 2^32, which HIP requires). */
  const int64_t per_block = pol.threads / pol.lanes;
  int64_t blocks = (tokens + per_block - 1) / per_block;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  unsigned grid[3] = {(unsigned)blocks, 1, 1};
  unsigned block[3] = {(unsigned)pol.threads, 1, 1};

  ckjit_runtime *rt;
  ckjit_kernel *kern;
  if ((st = ckjit__kernel_get(&spec, &rt, &kern))) return st;
  long long a_ld = ld_x, a_tokens = tokens;
  int a_experts = (int)experts, a_k = k, a_renorm = renormalize != 0,
      a_i64 = index_dtype == CKJIT_I64;
  void *args[] = {&x, &a_ld, &a_tokens, &a_experts, &a_k, &a_renorm, &weights, &indices, &a_i64};
  return ckjit__kernel_launch(rt, kern, grid, block, 0, stream, args);
}
