/* The shared steps of every op family (see op_frame.h). */
#include "op_frame.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "runtime/dispatch.h"

void ckjit__plan_init(ckjit_launch_plan *plan, ckjit_family_id family) {
  memset(plan, 0, sizeof *plan);
  plan->spec.family = (uint32_t)family;
  for (int i = 0; i < 3; i++) plan->grid[i] = plan->block[i] = 1;
  plan->cluster = 1;
}

ckjit_status ckjit__op_run(ckjit_gpu *gpu, const ckjit_launch_plan *plan, const void *args,
                           const ckjit_abi_params *params, void *stream) {
  ckjit_kernel *k;
  ckjit_status st = ckjit__kernel_get(gpu, &plan->spec, &k);
  if (st) return st;
  return ckjit__kernel_launch(gpu, k, plan->grid, plan->block, plan->cluster, plan->shared_bytes, stream, args,
                              params);
}

int ckjit__pick_vec(size_t elem_size, const void *const *ptrs, int n_ptrs, const int64_t *strides,
                    int n_strides, int max_vec) {
  int vec = ckjit__widest_vec(elem_size, max_vec);
  for (; vec > 1; vec /= 2) {
    uint64_t bytes = (uint64_t)vec * elem_size;
    int ok = 1;
    for (int i = 0; i < n_ptrs; i++) ok &= (uintptr_t)ptrs[i] % bytes == 0;
    for (int i = 0; i < n_strides; i++) ok &= (uint64_t)strides[i] % (uint64_t)vec == 0;
    if (ok) break;
  }
  return vec;
}

ckjit_status ckjit__check_dtype(const char *api, ckjit_dtype dtype) {
  if (dtype == CKJIT_F32 || dtype == CKJIT_F16 || dtype == CKJIT_BF16) return CKJIT_SUCCESS;
  if (ckjit_dtype_size(dtype))
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "%s: dtype %s is not supported by this op (f32, "
                       "f16, bf16)", api, ckjit_dtype_name(dtype));
  return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: dtype %d is not a ckjit_dtype", api,
                     (int)dtype);
}

ckjit_status ckjit__knob_int(const char *api, const char *name, int lo, int hi, int *value) {
  const char *v = getenv(name);
  if (!v || !*v) return CKJIT_SUCCESS;
  char *end;
  const long n = strtol(v, &end, 10);
  if (*end || n < lo || n > hi)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s=%s: an integer %d .. %d", api, name, v, lo, hi);
  *value = (int)n;
  return CKJIT_SUCCESS;
}

ckjit_status ckjit__check_matrix(const char *api, const char *name, const void *ptr, int64_t rows,
                                 int64_t cols, int64_t ld, size_t elem_size) {
  if (!ptr) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", api, name);
  if (rows < 1 || cols < 1)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s is %lld x %lld; sizes must be >= 1",
                       api, name, (long long)rows, (long long)cols);
  if (ld < cols)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: row stride of %s (%lld) is smaller than its %lld columns", api, name,
                       (long long)ld, (long long)cols);
  int64_t extent, bytes;
  if (__builtin_mul_overflow(rows - 1, ld, &extent) || __builtin_add_overflow(extent, cols, &extent) ||
      __builtin_mul_overflow(extent, (int64_t)elem_size, &bytes) || (uint64_t)bytes > SIZE_MAX ||
      (uintptr_t)ptr + (uint64_t)bytes < (uintptr_t)ptr)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: %s of %lld x %lld with row stride %lld overflows the address space",
                       api, name, (long long)rows, (long long)cols, (long long)ld);
  return CKJIT_SUCCESS;
}
