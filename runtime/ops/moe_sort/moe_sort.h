/* The moe_sort kernel family (kernel_src/moe/moe_sort.cu): its parameters,
 * shared by the family descriptor and the front-end. */
#ifndef CKJIT_RUNTIME_OPS_MOE_SORT_H
#define CKJIT_RUNTIME_OPS_MOE_SORT_H

#include "abi/moe_sort_args.h"
#include "runtime/spec.h"

/* ids: topk_ids' integer type; threads per block (one block per expert);
 * map: 1 for an expert map (expert parallelism), compiled only where used
 * (with both forms in one kernel ptxas spilled and the sort ran 2x slower:
 * bench/NOTES.md). */
enum { MS_IDS, MS_THREADS, MS_MAP, MS_COUNT };
enum { CKJIT_MOE_SORT_IDS(CKJIT_ENUM_CONSTANT) };
enum { MOE_SORT_MAX_EXPERTS = 1024, MOE_SORT_MAX_K = 64, MOE_SORT_MAX_TILE = 1024 };
/* Expert parallelism: the most global experts an expert_map may name. */
#define MOE_SORT_MAX_GLOBAL_EXPERTS (1 << 20)

/* An expert map's arguments (include/ckjit/moe.h): none, or global_experts
 * in 1 .. MOE_SORT_MAX_GLOBAL_EXPERTS and the map 4-byte aligned; a failure
 * names `api`.  ckjit_moe_sort's and ckjit_fused_moe's rule. */
ckjit_status ckjit__moe_check_map(const char *api, const int32_t *expert_map, int32_t global_experts);

#endif
