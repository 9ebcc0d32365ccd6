/*
 * ckjit — mixture-of-experts routing: sorting tokens by expert for the
 * grouped GEMM (ckjit_gemm_fp8_moe, CKJIT_MOE_CONTIGUOUS).  Included by
 * ckjit/ckjit.h.
 *
 * ckjit_moe_sort reads topk_ids [tokens][k] (device, CKJIT_I32 or
 * CKJIT_I64, row-major and contiguous: entry t * k + s is token t's s-th
 * expert) and writes, all in device memory, without synchronizing the host
 * (a CUDA graph replays it for any routing):
 *
 *   sorted_ids[]      the entries t * k + s grouped by expert (expert 0
 *                     first), in increasing entry order within an expert
 *                     (deterministic), each expert's run padded to a
 *                     multiple of tile_m with the sentinel tokens * k, and
 *                     the sentinel from the last run to the capacity;
 *   expert_offsets[]  experts + 1 entries: where each expert's run starts
 *                     (a multiple of tile_m), and the padded total last;
 *   expert_counts[]   experts entries: each expert's entries (unpadded);
 *   tile_experts[]    capacity / tile_m entries: the expert of each tile_m
 *                     rows of sorted_ids, -1 past the total (the grouped
 *                     GEMM's tile_experts, with tile_m 128);
 *   total_rows        (optional, one int32) the padded total;
 *   invalid           (optional, one int32) entries whose id is outside
 *                     0 .. experts - 1: they are left out of every run.
 *
 * Experts with no entries have an empty run and no tile.  The capacity
 * (elements of sorted_ids) is ckjit_moe_sort_capacity(tokens, k, experts,
 * tile_m): the largest padded total any routing can give, rounded up to
 * tile_m (at least tile_m).  Limits: tokens >= 0, 1 <= k <= 64, 1 <= experts <= 1024,
 * 1 <= tile_m <= 1024, tokens * k and the capacity below 2^31 (the ids are
 * int32).  tokens 0 writes the empty result (all sentinels, tiles -1,
 * offsets and counts 0).
 */
#ifndef CKJIT_MOE_H
#define CKJIT_MOE_H

#include "ckjit/ckjit.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckjit_moe_sort_desc {
  int64_t tokens;
  int32_t k, experts, tile_m;
  ckjit_dtype ids_dtype;       /* CKJIT_I32 or CKJIT_I64 */
  const void *topk_ids;
  int32_t *sorted_ids;         /* capacity entries */
  int32_t *expert_offsets;     /* experts + 1 */
  int32_t *expert_counts;      /* experts */
  int32_t *tile_experts;       /* capacity / tile_m */
  int32_t *total_rows;         /* NULL or 1 */
  int32_t *invalid;            /* NULL or 1 */
} ckjit_moe_sort_desc;

/* Zeroes desc, then tile_m 128 and ids_dtype CKJIT_I32. */
CKJIT_API void ckjit_moe_sort_desc_init(ckjit_moe_sort_desc *desc);

/* sorted_ids' elements for these sizes (0 for sizes out of the limits). */
CKJIT_API int64_t ckjit_moe_sort_capacity(int64_t tokens, int k, int experts, int tile_m);

/* Sorts the routing (above). */
CKJIT_API ckjit_status ckjit_moe_sort(const ckjit_moe_sort_desc *desc, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CKJIT_MOE_H */
