/* ckjit_moe_sort (include/ckjit/moe.h): validate, plan (one block per
 * expert), arguments, run. */
#include <stdint.h>
#include <string.h>

#include "base/error.h"
#include "base/int_math.h"
#include "moe_sort.h"
#include "runtime/dispatch.h"
#include "runtime/ops/op_frame.h"

static const char api[] = "ckjit_moe_sort";

void ckjit_moe_sort_desc_init(ckjit_moe_sort_desc *desc) {
  if (!desc) return;
  memset(desc, 0, sizeof *desc);
  desc->tile_m = 128;
  desc->ids_dtype = CKJIT_I32;
}

int64_t ckjit_moe_sort_capacity(int64_t tokens, int k, int experts, int tile_m) {
  if (tokens < 0 || k < 1 || k > MOE_SORT_MAX_K || experts < 1 || experts > MOE_SORT_MAX_EXPERTS ||
      tile_m < 1 || tile_m > MOE_SORT_MAX_TILE || tokens > INT32_MAX / k)
    return 0;
  /* at least one tile, so the arrays are never empty */
  const int64_t most = tokens * k + (int64_t)experts * (tile_m - 1) > 0
                           ? tokens * k + (int64_t)experts * (tile_m - 1)
                           : 1;
  const int64_t capacity = ckjit__ceil_div(most, tile_m) * tile_m;
  return capacity > 0 && capacity <= INT32_MAX ? capacity : 0;
}

ckjit_status ckjit__moe_check_map(const char *api, const int32_t *expert_map, int32_t global_experts) {
  if (!expert_map) return CKJIT_SUCCESS;
  if (global_experts < 1 || global_experts > MOE_SORT_MAX_GLOBAL_EXPERTS)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: global_experts %d with an expert_map: need 1..%d", api,
                       (int)global_experts, MOE_SORT_MAX_GLOBAL_EXPERTS);
  if ((uintptr_t)expert_map % 4)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: expert_map %p must be 4-byte aligned", api,
                       (const void *)expert_map);
  return CKJIT_SUCCESS;
}

static ckjit_status validate(const ckjit_moe_sort_desc *d, int64_t *capacity) {
  if (!d) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: desc is NULL", api);
  if (d->tokens < 0 || d->k < 1 || d->k > MOE_SORT_MAX_K || d->experts < 1 ||
      d->experts > MOE_SORT_MAX_EXPERTS || d->tile_m < 1 || d->tile_m > MOE_SORT_MAX_TILE)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: tokens %lld, k %d, experts %d, tile_m %d: need tokens >= 0, k 1..%d, "
                       "experts 1..%d, tile_m 1..%d",
                       api, (long long)d->tokens, (int)d->k, (int)d->experts, (int)d->tile_m,
                       MOE_SORT_MAX_K, MOE_SORT_MAX_EXPERTS, MOE_SORT_MAX_TILE);
  if (d->ids_dtype != CKJIT_I32 && d->ids_dtype != CKJIT_I64)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: ids_dtype %s must be CKJIT_I32 or CKJIT_I64",
                       api, ckjit_dtype_name(d->ids_dtype));
  *capacity = ckjit_moe_sort_capacity(d->tokens, d->k, d->experts, d->tile_m);
  if (!*capacity)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: tokens %lld x k %d (plus the experts' padding) pass 2^31 - 1 entries: "
                       "the sorted ids are int32",
                       api, (long long)d->tokens, (int)d->k);
  const size_t is = ckjit_dtype_size(d->ids_dtype);
  if ((d->tokens && !d->topk_ids) || !d->sorted_ids || !d->expert_offsets || !d->expert_counts ||
      !d->tile_experts)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: topk_ids, sorted_ids, expert_offsets, expert_counts and tile_experts must "
                       "not be NULL",
                       api);
  ckjit_status st = ckjit__moe_check_map(api, d->expert_map, d->global_experts);
  if (st) return st;
  if ((uintptr_t)d->topk_ids % is || (uintptr_t)d->sorted_ids % 4 || (uintptr_t)d->expert_offsets % 4 ||
      (uintptr_t)d->expert_counts % 4 || (uintptr_t)d->tile_experts % 4 ||
      (uintptr_t)d->total_rows % 4 || (uintptr_t)d->invalid % 4)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: every array must be aligned to its element size",
                       api);
  return CKJIT_SUCCESS;
}

ckjit_status ckjit_moe_sort(const ckjit_moe_sort_desc *d, void *stream) {
  int64_t capacity = 0;
  ckjit_status st = validate(d, &capacity);
  if (st) return st;
  const void *const operands[] = {d->topk_ids,    d->sorted_ids, d->expert_offsets, d->expert_counts,
                                  d->tile_experts, d->total_rows, d->invalid,        d->expert_map};
  static const char *const names[] = {"topk_ids",     "sorted_ids", "expert_offsets", "expert_counts",
                                      "tile_experts", "total_rows", "invalid",        "expert_map"};
  if ((st = ckjit__check_pointers(stream, api, 8, operands, names))) return st;
  ckjit_gpu *gpu;
  if ((st = ckjit__stream_gpu(stream, &gpu))) return st;
  ckjit_launch_plan p;
  ckjit__plan_init(&p, CKJIT_FAMILY_MOE_SORT);
  p.spec.value[MS_IDS] = d->ids_dtype == CKJIT_I64 ? IDS_I64 : IDS_I32;
  p.spec.value[MS_THREADS] = 256;
  p.spec.value[MS_MAP] = d->expert_map != NULL;
  p.grid[0] = (unsigned)d->experts;
  p.block[0] = 256;
  const ckjit_moe_sort_args x = {.topk_ids = d->topk_ids, .sorted_ids = d->sorted_ids,
                                 .offsets = d->expert_offsets, .counts = d->expert_counts,
                                 .tile_experts = d->tile_experts, .total = d->total_rows,
                                 .invalid = d->invalid, .entries = d->tokens * d->k,
                                 .capacity = capacity, .experts = d->experts, .tile_m = d->tile_m,
                                 .expert_map = d->expert_map, .global_experts = d->global_experts};
  return ckjit__op_run(gpu, &p, &x, &ckjit_abi_by_value, stream);
}
