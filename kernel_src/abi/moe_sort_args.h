/* The moe_sort family (kernel_src/moe/moe_sort.cu) across the host/kernel
 * boundary (see abi.h).  The kernel takes the struct by value. */
#ifndef CKJIT_KERNEL_ABI_MOE_SORT_ARGS_H
#define CKJIT_KERNEL_ABI_MOE_SORT_ARGS_H

#include "abi/abi.h"

/* topk_ids' integer type (spec parameter ids). */
#define CKJIT_MOE_SORT_IDS(X) X(IDS_I32, i32) X(IDS_I64, i64)

/* include/ckjit/moe.h's ckjit_moe_sort: topk_ids' `entries` (tokens * k)
 * ids, int64 when ids_i64; the outputs as that header says (total and
 * invalid may be NULL); capacity: sorted_ids' elements; expert_map (NULL,
 * or global_experts entries) as the header's expert parallelism. */
#define CKJIT_MOE_SORT_FIELDS(X)                                               \
  X(const void *, topk_ids, 0)                                                 \
  X(int *, sorted_ids, 8)                                                      \
  X(int *, offsets, 16)                                                        \
  X(int *, counts, 24)                                                         \
  X(int *, tile_experts, 32)                                                   \
  X(int *, total, 40)                                                          \
  X(int *, invalid, 48)                                                        \
  X(long long, entries, 56)                                                    \
  X(long long, capacity, 64)                                                   \
  X(int, experts, 72)                                                          \
  X(int, tile_m, 76)                                                           \
  X(const int *, expert_map, 80)                                               \
  X(int, global_experts, 88)                                                   \
  X(int, reserved, 92)
CKJIT_ABI_STRUCT(ckjit_moe_sort_args, CKJIT_MOE_SORT_FIELDS, 96)
#define CKJIT_MOE_SORT_PARAM(X) X(ckjit_moe_sort_args, x, 0)

#endif
