/* ckjit_paged_kv_append and its kernel family, paged_append
 * (kernel_src/attention/paged_append.cu): parameters, checks, default set,
 * validate, plan, arguments, run. */
#include <string.h>

#include "attention.h"
#include "base/error.h"
#include "base/int_math.h"
#include "abi/paged_append_args.h"
#include "runtime/ops/op_frame.h"

#define API "ckjit_paged_kv_append"

/* Parameters: the element type, slots per page, elements per copy (16
 * bytes of the new tokens, or 1 for any stride), threads per block, and
 * kv8 (the pool holds fp8 e4m3). */
enum { PA_DTYPE, PA_PAGE, PA_VEC, PA_THREADS, PA_KV8, PA_COUNT };

static const ckjit_param_desc params[PA_COUNT] = {
    [PA_DTYPE] = CKJIT_DTYPE_PARAM,
    [PA_PAGE] = CKJIT_INT_PARAM("page", 1, 1024, 16),
    [PA_VEC] = CKJIT_INT_PARAM("vec", 1, 8, 8),
    [PA_THREADS] = CKJIT_INT_PARAM("threads", 32, 256, 128),
    [PA_KV8] = CKJIT_INT_PARAM("kv8", 0, 1, 0),
};

static ckjit_status check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  if (!ckjit__is_pow2(v[PA_PAGE]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: paged_append page=%d must be a power of two up to 1024", v[PA_PAGE]);
  if (!ckjit__is_pow2(v[PA_VEC]) || (size_t)v[PA_VEC] * ckjit__dtype_param_size(v[PA_DTYPE]) > 16)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: paged_append vec=%d must be a power of two of at most 16 bytes",
                       v[PA_VEC]);
  if (v[PA_THREADS] % 32)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: paged_append threads=%d is not a multiple of 32", v[PA_THREADS]);
  return CKJIT_SUCCESS;
}

/* Default set: pages of 1, 16 and 128 slots and fp8 pages of 16, 16-bit
 * dtypes, 16-byte copies. */
static const int default_pages[] = {1, 16, 128, 16};
static int default_spec(size_t i, ckjit_spec *out) {
  if (i >= 8) return 0;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_PAGED_APPEND;
  out->value[PA_DTYPE] = 1 + (int)(i / 4);
  out->value[PA_PAGE] = default_pages[i % 4];
  out->value[PA_KV8] = i % 4 == 3;
  out->value[PA_VEC] = 8;
  out->value[PA_THREADS] = 128;
  return 1;
}

const ckjit_family ckjit__family_paged_append = {
    .name = "paged_append",
    .source = "attention/paged_append.cu",
    .kernel = "ckjit_paged_append",
    .n_params = PA_COUNT,
    .params = params,
    .check = check,
    .default_spec = default_spec,
};

void ckjit_paged_kv_append_desc_init(ckjit_paged_kv_append_desc *d) {
  if (!d) return;
  memset(d, 0, sizeof *d);
  d->dtype = CKJIT_BF16;
  d->batch = d->num_heads_kv = 1;
}

static ckjit_attention_stride4 pool4(const ckjit_paged_strides *s) {
  return (ckjit_attention_stride4){.b = s->page, .h = s->head, .s = s->slot, .d = s->dim};
}

ckjit_status ckjit__paged_append_plan(const ckjit_paged_kv_append_desc *d, void *stream, int *empty,
                                      ckjit_launch_plan *plan, ckjit_paged_append_args *args) {
  *empty = 1;
  if (!d) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: desc is NULL", API);
  ckjit_status st = ckjit__check_dtype(API, d->dtype);
  if (st) return st;
  if (d->batch < 0 || d->batch > INT32_MAX - 1 || d->num_heads_kv < 1 || d->num_heads_kv > INT32_MAX ||
      d->max_seqlen_new < 0 || d->max_seqlen_new > (1 << 30))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: batch (%lld) must be in 0 .. 2^31 - 2, num_heads_kv (%lld) >= 1 and "
                       "max_seqlen_new (%lld) in 0 .. 2^30",
                       API, (long long)d->batch, (long long)d->num_heads_kv,
                       (long long)d->max_seqlen_new);
  if (!ckjit__attention_is_head_dim(d->head_dim_qk) || !ckjit__attention_is_head_dim(d->head_dim_v))
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                       "%s: head_dim_qk %lld, head_dim_v %lld: each must be 64, 96, 128, 192 or 256",
                       API, (long long)d->head_dim_qk, (long long)d->head_dim_v);
  if ((st = ckjit__paged_kv_validate_sizes(API, &d->kv))) return st;
  if (d->batch == 0 || d->max_seqlen_new == 0) return CKJIT_SUCCESS; /* reads nothing */
  if (!d->cu_seqlens_new || (uintptr_t)d->cu_seqlens_new % 4)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: cu_seqlens_new must be a 4-byte aligned device int32 array", API);
  const size_t es = ckjit_dtype_size(d->dtype);
  /* The packed new tokens number at most batch x max_seqlen_new (their sum
   * is on the device): the extent checked. */
  const int64_t hk = d->num_heads_kv, seq = d->max_seqlen_new, tokens = d->batch * seq;
  int pool_aligned;
  if ((st = ckjit__attention_check_tensor(API, "k_new", d->k_new, es, &d->k_new_strides, 1, hk, tokens,
                                          d->head_dim_qk)) ||
      (st = ckjit__attention_check_tensor(API, "v_new", d->v_new, es, &d->v_new_strides, 1, hk, tokens,
                                          d->head_dim_v)) ||
      (st = ckjit__paged_kv_validate(API, &d->kv, d->dtype, hk, d->head_dim_qk,
                                     d->head_dim_v, stream, &pool_aligned)))
    return st;
  const void *ptrs[] = {d->k_new, d->v_new, d->cu_seqlens_new};
  static const char *const names[] = {"k_new", "v_new", "cu_seqlens_new"};
  if ((st = ckjit__check_pointers(stream, API, 3, ptrs, names))) return st;

  *empty = 0;
  ckjit_launch_plan p;
  ckjit__plan_init(&p, CKJIT_FAMILY_PAGED_APPEND);
  const int vec = 16 / (int)es;
  const int aligned = pool_aligned &&
                      ckjit__attention_rows_aligned(d->k_new, &d->k_new_strides, es, 1, hk, tokens) &&
                      ckjit__attention_rows_aligned(d->v_new, &d->v_new_strides, es, 1, hk, tokens);
  p.spec.value[PA_DTYPE] = ckjit__dtype_param_value(d->dtype);
  p.spec.value[PA_PAGE] = (int32_t)d->kv.page_size;
  p.spec.value[PA_VEC] = aligned ? vec : 1;
  p.spec.value[PA_THREADS] = 128;
  p.spec.value[PA_KV8] = d->kv.page_dtype == CKJIT_FP8_E4M3;
  p.grid[0] = ckjit__grid_x(d->batch * ckjit__ceil_div(seq, CKJIT_PAGED_APPEND_TOKENS));
  p.block[0] = 128;
  const ckjit_paged_kv *kv = &d->kv;
  const ckjit_paged_append_args a = {
      .k_new = d->k_new, .v_new = d->v_new, .k_pages = kv->k_pages, .v_pages = kv->v_pages,
      .cu_seqlens_new = d->cu_seqlens_new, .paging = ckjit__paging_args(kv),
      .k_new_stride = ckjit__attention_stride4(&d->k_new_strides),
      .v_new_stride = ckjit__attention_stride4(&d->v_new_strides),
      .k_pool_stride = pool4(&kv->k_strides), .v_pool_stride = pool4(&kv->v_strides),
      .max_new = seq,
      .batch = (int)d->batch, .heads_kv = (int)hk, .head_dim_qk = (int)d->head_dim_qk,
      .head_dim_v = (int)d->head_dim_v};
  *plan = p;
  *args = a;
  return CKJIT_SUCCESS;
}

ckjit_status ckjit_paged_kv_append(const ckjit_paged_kv_append_desc *d, void *stream) {
  ckjit_launch_plan p;
  ckjit_paged_append_args a;
  int empty;
  ckjit_gpu *gpu;
  ckjit_status st = ckjit__paged_append_plan(d, stream, &empty, &p, &a);
  if (st || empty || (st = ckjit__stream_gpu(stream, &gpu))) return st;
  return ckjit__op_run(gpu, &p, &a, &ckjit_abi_by_value, stream);
}
