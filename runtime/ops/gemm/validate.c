/* GEMM descriptors: their defaults and checks. */
#include "validate.h"

#include <stdint.h>
#include <string.h>

#include "base/error.h"
#include "runtime/dispatch.h" /* ckjit__check_pointers */
#include "runtime/ops/op_frame.h"

void ckjit_gemm_desc_init(ckjit_gemm_desc *desc) {
  if (!desc) return;
  memset(desc, 0, sizeof *desc);
  desc->alpha = 1.0f;
  desc->batch = 1;
  desc->ab_dtype = CKJIT_BF16;
  desc->out_dtype = CKJIT_BF16;
  desc->a_order = CKJIT_ROW_MAJOR;
  desc->b_order = CKJIT_ROW_MAJOR;
  desc->activation = CKJIT_UNARY_IDENTITY;
}

static int float_dtype(ckjit_dtype t) { return t == CKJIT_F32 || t == CKJIT_F16 || t == CKJIT_BF16; }

/* A rows x cols matrix with leading dimension ld, given and addressable
 * (ckjit__check_matrix), in every one of `batch` entries `stride` elements
 * apart. */
static ckjit_status check_operand(const char *api, const char *name, const void *ptr, int64_t rows,
                                  int64_t cols, int64_t ld, int64_t stride, int64_t batch, size_t es) {
  if (rows == 0 || cols == 0) return CKJIT_SUCCESS;
  ckjit_status st = ckjit__check_matrix(api, name, ptr, rows, cols, ld, es);
  if (st || batch == 1) return st;
  if (stride < 0)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: the batch stride of %s is negative (%lld)",
                       api, name, (long long)stride);
  int64_t last;
  if (__builtin_mul_overflow(batch - 1, stride, &last) || __builtin_mul_overflow(last, (int64_t)es, &last) ||
      (uintptr_t)ptr + (uint64_t)last < (uintptr_t)ptr)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s's %lld batch entries overflow the address space",
                       api, name, (long long)batch);
  return ckjit__check_matrix(api, name, (const void *)((uintptr_t)ptr + (uint64_t)last), rows, cols, ld, es);
}

ckjit_status ckjit__gemm_check_desc(const char *api, const ckjit_gemm_desc *g, void *stream) {
  if (!g) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: desc is NULL", api);
  if (g->m < 0 || g->n < 0 || g->k < 0)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: m, n, k = %lld, %lld, %lld; must be >= 0",
                       api, (long long)g->m, (long long)g->n, (long long)g->k);
  if (g->batch < 1)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: batch is %lld; must be >= 1", api,
                       (long long)g->batch);
  if (!float_dtype(g->ab_dtype))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: ab_dtype %s (%d) must be f32, f16 or bf16",
                       api, ckjit_dtype_name(g->ab_dtype), (int)g->ab_dtype);
  if (!float_dtype(g->out_dtype))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: out_dtype %s (%d) must be f32, f16 or bf16",
                       api, ckjit_dtype_name(g->out_dtype), (int)g->out_dtype);
  if ((g->a_order != CKJIT_ROW_MAJOR && g->a_order != CKJIT_COL_MAJOR) ||
      (g->b_order != CKJIT_ROW_MAJOR && g->b_order != CKJIT_COL_MAJOR))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: a_order %d / b_order %d must be CKJIT_ROW_MAJOR or CKJIT_COL_MAJOR", api,
                       (int)g->a_order, (int)g->b_order);
  if ((unsigned)g->bias_mode > CKJIT_BIAS_PER_COL)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: bias_mode %d is not a ckjit_bias_mode", api,
                       (int)g->bias_mode);
  if ((g->bias_mode != CKJIT_BIAS_NONE) != (g->bias != NULL))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: bias is %s but bias_mode is %d (a bias needs a mode and a mode a bias)",
                       api, g->bias ? "given" : "NULL", (int)g->bias_mode);
  if ((unsigned)g->activation > CKJIT_UNARY_SIGMOID)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: activation %d is not a ckjit_unary_op", api,
                       (int)g->activation);
  if (g->split_k < CKJIT_GEMM_STREAM_K)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: split_k is %d; must be >= 0 or CKJIT_GEMM_STREAM_K (-1)", api, g->split_k);
  if (g->allow_tf32 && g->ab_dtype != CKJIT_F32)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: allow_tf32 is for f32 inputs, not %s", api,
                       ckjit_dtype_name(g->ab_dtype));
  const int64_t m = g->m, n = g->n, k = g->k, b = g->batch;
  if (m == 0 || n == 0) return CKJIT_SUCCESS; /* nothing to write */
  const int a_row = g->a_order == CKJIT_ROW_MAJOR, b_row = g->b_order == CKJIT_ROW_MAJOR;
  const size_t ea = ckjit_dtype_size(g->ab_dtype), eo = ckjit_dtype_size(g->out_dtype);
  ckjit_status st;
  if ((st = check_operand(api, "a", g->a, a_row ? m : k, a_row ? k : m, g->lda, g->stride_a, b, ea)) ||
      (st = check_operand(api, "b", g->b, b_row ? k : n, b_row ? n : k, g->ldb, g->stride_b, b, ea)) ||
      (st = check_operand(api, "d", g->d, m, n, g->ldd, g->stride_d, b, eo)))
    return st;
  if (g->c == g->d && (g->ldc != g->ldd || g->stride_c != g->stride_d))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: c is d (in place) but ldc / stride_c (%lld / %lld) differ from ldd / "
                       "stride_d (%lld / %lld)",
                       api, (long long)g->ldc, (long long)g->stride_c, (long long)g->ldd,
                       (long long)g->stride_d);
  if ((g->c && (st = check_operand(api, "c", g->c, m, n, g->ldc, g->stride_c, b, eo))) ||
      (g->d0 && (st = check_operand(api, "d0", g->d0, m, n, g->ldd0, g->stride_d0, b, eo))) ||
      (g->d1 && (st = check_operand(api, "d1", g->d1, m, n, g->ldd1, g->stride_d1, b, eo))))
    return st;
  const void *const operands[] = {g->a, g->b, g->c, g->d, g->bias, g->d0, g->d1};
  static const char *const operand_names[] = {"a", "b", "c", "d", "bias", "d0", "d1"};
  return ckjit__check_pointers(stream, api, 7, operands, operand_names);
}

ckjit_status ckjit__gemm_check_grouped(const char *api, const ckjit_gemm_desc *descs, int count,
                                       void *stream) {
  if (!descs) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: descs is NULL", api);
  if (count < 1)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: count is %d; must be >= 1", api, count);
  const ckjit_gemm_desc *g0 = &descs[0];
  for (int i = 0; i < count; i++) {
    const ckjit_gemm_desc *g = &descs[i];
    ckjit_status st = ckjit__gemm_check_desc(api, g, stream);
    if (st) {
      ckjit__error_append(" (problem %d)", i);
      return st;
    }
    if (g->batch != 1 || g->split_k > 1 || g->split_k < 0)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                         "%s: problem %d has batch %lld and split_k %d; grouped problems take batch 1 "
                         "and split_k 0 or 1",
                         api, i, (long long)g->batch, g->split_k);
    if (g->ab_dtype != g0->ab_dtype || g->out_dtype != g0->out_dtype || g->a_order != g0->a_order ||
        g->b_order != g0->b_order || g->activation != g0->activation ||
        g->bias_mode != g0->bias_mode || g->allow_tf32 != g0->allow_tf32 ||
        !g->d0 != !g0->d0 || !g->d1 != !g0->d1)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                         "%s: problem %d differs from problem 0 in dtypes, orders, activation, bias "
                         "mode, allow_tf32 or which of d0 / d1 are given",
                         api, i);
  }
  return CKJIT_SUCCESS;
}
