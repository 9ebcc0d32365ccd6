// The local expert of a routing id, the one rule moe_sort and the combine
// share (include/ckjit/moe.h, expert parallelism): without a map the id
// itself when inside 0 .. experts - 1; with one (global_experts entries)
// the id's map entry, -1 meaning another device holds that expert.
#pragma once
#include "core/prelude.h"

#define MOE_ELSEWHERE (-1) // routed to an expert another device holds: skipped, not invalid
#define MOE_INVALID (-2)   // an id outside the routing (or a map entry outside -1 .. experts - 1)

CKJIT_INLINE int moe_local_expert(long long id, int experts, const int *map, int global_experts) {
  if (!map) return id >= 0 && id < experts ? (int)id : MOE_INVALID;
  if (id < 0 || id >= global_experts) return MOE_INVALID;
  const int e = map[id];
  return e >= MOE_ELSEWHERE && e < experts ? e : MOE_INVALID;
}
