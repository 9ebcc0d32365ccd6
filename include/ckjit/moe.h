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
 * Expert parallelism: with expert_map set, this device holds `experts` of
 * global_experts experts and topk_ids name global experts: expert_map
 * (device int32 [global_experts]) gives each global expert its local one,
 * 0 .. experts - 1, or -1 for an expert held elsewhere.  Entries routed
 * elsewhere are left out of every run and are not invalid; invalid counts
 * ids outside 0 .. global_experts - 1 and map entries outside -1 ..
 * experts - 1 (those entries are left out too).  expert_map NULL: the ids
 * are the local experts (global_experts is not read).
 *
 * Experts with no entries have an empty run and no tile.  The capacity
 * (elements of sorted_ids) is ckjit_moe_sort_capacity(tokens, k, experts,
 * tile_m): the largest padded total any routing can give, rounded up to
 * tile_m (at least tile_m).  Limits: tokens >= 0, 1 <= k <= 64, 1 <= experts <= 1024,
 * 1 <= tile_m <= 1024, tokens * k and the capacity below 2^31 (the ids are
 * int32).  tokens 0 writes the empty result (all sentinels, tiles -1,
 * offsets and counts 0).
 */
/* Outside the guard: whichever header comes first, ckjit.h's types precede ours. */
#include "ckjit/ckjit.h"

#ifndef CKJIT_MOE_H
#define CKJIT_MOE_H

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
  const int32_t *expert_map;   /* NULL, or global_experts entries (expert parallelism) */
  int32_t global_experts;      /* 1 .. 2^20 with expert_map */
} ckjit_moe_sort_desc;

/* Zeroes desc, then tile_m 128 and ids_dtype CKJIT_I32. */
CKJIT_API void ckjit_moe_sort_desc_init(ckjit_moe_sort_desc *desc);

/* sorted_ids' elements for these sizes (0 for sizes out of the limits). */
CKJIT_API int64_t ckjit_moe_sort_capacity(int64_t tokens, int k, int experts, int tile_m);

/* Sorts the routing (above). */
CKJIT_API ckjit_status ckjit_moe_sort(const ckjit_moe_sort_desc *desc, void *stream);

/* ---- fused MoE ----------------------------------------------------------------------
 *
 * ckjit_fused_moe: a mixture-of-experts MLP over routed tokens,
 *
 *   y[t] = sum_{s < k} topk_weights[t][s] * down_e(act(gate_e(x[t])) * up_e(x[t])),
 *          e = topk_ids[t][s]
 *        + sum_{j < shared_experts} g[t][j] * down_j(act(gate_j(x[t])) * up_j(x[t]))
 *
 * (g = 1, or with shared_gate the shared experts' sigmoid gates below)
 *
 * with gate_e(v) = W1_e[0 .. inter) v and up_e(v) = W1_e[inter .. 2 inter) v,
 * W1 = w_gate_up [experts][2 inter][hidden] and down_e(h) = W2_e h, W2 =
 * w_down [experts][hidden][inter]: both row-major and contiguous, in the
 * layout of torch.nn.Linear weights (out_features x in_features).  x and y
 * are row-major [tokens][hidden] with row strides ldx, ldy (elements).
 *
 * Types: x, y and 16-bit weights are `dtype` (CKJIT_BF16 or CKJIT_F16), or
 * the weights are CKJIT_FP8_E4M3 with weight_scaling
 *   CKJIT_FP8_SCALE_ROW    one f32 per output channel: scale_gate_up
 *                          [experts][2 inter], scale_down [experts][hidden];
 *                          the activations are quantized per token;
 *   CKJIT_FP8_SCALE_BLOCK  128 x 128 blocks (DeepSeek-V3): scale_gate_up
 *                          [experts][ceil(2 inter / 128)][ceil(hidden / 128)],
 *                          scale_down [experts][ceil(hidden / 128)][ceil(inter
 *                          / 128)]; the activations are quantized in 1 x 128
 *                          blocks (inter must be a multiple of 64).
 * FP8 activations are quantized on the device to e4m3 with scale amax / 448
 * (a zero block or row gets scale 1): x per token row (ROW) or per 1 x 128
 * block of a row (BLOCK; a last block shorter than 128 has its own scale),
 * and the gate-up product per (token, slot) row the same way.  Accumulation is f32; the gate-up
 * product act(gate) * up is rounded to `dtype` (then quantized under FP8)
 * before the down GEMM, and each slot's weighted down product is rounded
 * to `dtype` before the combine, which sums the k slots in f32 in slot
 * order (deterministic: no atomics) and rounds once.
 *
 * act: CKJIT_UNARY_SILU, GELU_TANH or GELU_ERF.  topk_ids (ids_dtype
 * CKJIT_I32 or CKJIT_I64) and topk_weights (f32) are [tokens][k], contiguous;
 * the weights are used as given (no renormalization), and a token may name
 * one expert in several slots (each slot contributes).
 * Expert parallelism: with expert_map set (as ckjit_moe_sort's), topk_ids
 * name global experts, the weights hold this device's `experts` local
 * ones, and y sums only the slots routed to them: a slot whose expert is
 * held elsewhere (map entry -1) contributes nothing and is not invalid;
 * the other devices' layers add the rest (e.g. an all-reduce of y).
 * Shared experts (DeepSeek-V2/V3, Qwen-MoE style): shared_experts > 0 adds
 * each token's output of every shared expert j, with weight 1, after its
 * routed slots: W1_j = w_shared_gate_up [j] ([2 shared_inter][hidden]),
 * W2_j = w_shared_down [j] ([hidden][shared_inter]), in weight_dtype with
 * weight_scaling (FP8: scale_shared_gate_up / scale_shared_down laid out
 * as scale_gate_up / scale_down with shared_experts and shared_inter for
 * experts and inter).  shared_inter (0: inter) is a multiple of 16 (of 64
 * for block-scaled FP8).  Each shared product is rounded to `dtype` like a
 * routed slot's and summed after the slots in the same f32 sum, so a
 * shared expert gives the same bits as a routed expert every token names
 * in one more slot with weight 1.  A token whose routed ids are all
 * invalid or elsewhere still gets its shared experts' sum.  With
 * expert_map, every device that passes shared experts adds them: pass them
 * on one device only when y is summed across devices.
 * Gated shared experts (Qwen2-MoE): with shared_gate ([shared_experts]
 * [hidden] in dtype, row-major), g[t][j] = sigmoid(x[t] . shared_gate[j]),
 * the dot product accumulated in f32 and the sigmoid in f32 (one
 * ckjit_gemm into the workspace); shared expert j's product is rounded to
 * `dtype` first, then multiplied by g[t][j] in the combine's f32 sum (a
 * routed slot's weight multiplies before that rounding).
 * An id outside 0 .. experts - 1 (with a map: outside 0 .. global_experts
 * - 1, or mapped outside -1 .. experts - 1) contributes nothing (no weight of any
 * expert is read for it) and is counted into *invalid (device int32,
 * optional; written by every call with tokens > 0, untouched at tokens 0).  With CKJIT_MOE_CHECK=1 in the environment
 * (a debug option) the call waits for the stream and fails with
 * CKJIT_ERROR_INVALID_ARGUMENT when any id was out of range.
 *
 * Launches (in order, on `stream`, no host synchronization: a CUDA graph
 * replays the call for any routing): ckjit_moe_sort; a gather of x's rows
 * by expert (quantizing them for FP8 weights); the grouped gate-up GEMM
 * with act(gate) * up in its epilogue; for FP8, the quantization of that
 * product; the grouped down GEMM with the routing weight in its epilogue,
 * each row written to its (token, slot) place; with shared experts, x
 * quantized (FP8; copied when ldx is not a multiple of 16) and per shared
 * expert its gate-up GEMM, (FP8) the product's quantization and its down
 * GEMM; the combine.
 *
 * Temporary buffers come from `workspace` (device, 256-byte aligned, at
 * least ckjit_fused_moe_workspace_size(desc) bytes, not overlapping
 * anything else; the size grows with tokens, so size it for the largest
 * batch a buffer serves); the call allocates nothing.  Limits: tokens >= 0 (0 does
 * nothing), 1 <= k <= 64, 1 <= experts <= 1024, hidden and inter multiples
 * of 16 (the tensor memory accelerator's row alignment), ldx and ldy >=
 * hidden and multiples of 8; x, y and the weights 16-byte aligned, the ids,
 * routing weights, scales and *invalid aligned to their elements.  Runs on NVIDIA sm_90
 * (wgmma); CKJIT_ERROR_UNSUPPORTED elsewhere.  y must not overlap any
 * input. */
typedef struct ckjit_fused_moe_desc {
  int64_t tokens, hidden, inter;
  int32_t experts, k;
  ckjit_dtype dtype;              /* x, y (and 16-bit weights): CKJIT_BF16 or CKJIT_F16 */
  const void *x;
  int64_t ldx;
  void *y;
  int64_t ldy;
  ckjit_dtype ids_dtype;          /* CKJIT_I32 or CKJIT_I64 */
  const void *topk_ids;           /* [tokens][k] */
  const float *topk_weights;      /* [tokens][k] */
  ckjit_dtype weight_dtype;       /* dtype, or CKJIT_FP8_E4M3 */
  const void *w_gate_up;          /* [experts][2 inter][hidden] */
  const void *w_down;             /* [experts][hidden][inter] */
  ckjit_fp8_scaling weight_scaling; /* FP8: CKJIT_FP8_SCALE_ROW or CKJIT_FP8_SCALE_BLOCK */
  const float *scale_gate_up, *scale_down; /* FP8 only */
  ckjit_unary_op activation;      /* SILU, GELU_TANH or GELU_ERF */
  void *workspace;
  size_t workspace_bytes;
  int32_t *invalid;               /* NULL, or one device int32 */
  const int32_t *expert_map;      /* NULL, or [global_experts] global -> local expert or -1 */
  int32_t global_experts;         /* 1 .. 2^20 with expert_map */
  /* shared experts (every token, weight 1), in the routed weights' type
   * and scaling: */
  int32_t shared_experts;         /* 0 (none) .. 16 */
  int64_t shared_inter;           /* their intermediate size; 0: inter */
  const void *w_shared_gate_up;   /* [shared_experts][2 shared_inter][hidden] */
  const void *w_shared_down;      /* [shared_experts][hidden][shared_inter] */
  const float *scale_shared_gate_up, *scale_shared_down; /* FP8 only, laid out as the routed ones' */
  const void *shared_gate;        /* NULL (weight 1), or [shared_experts][hidden] in dtype, 16-byte aligned: sigmoid gates */
} ckjit_fused_moe_desc;
/* Zeroes desc, then dtype and weight_dtype CKJIT_BF16, ids_dtype CKJIT_I32,
 * weight_scaling CKJIT_FP8_SCALE_BLOCK and activation SILU. */
CKJIT_API void ckjit_fused_moe_desc_init(ckjit_fused_moe_desc *desc);
/* The workspace bytes the call needs for desc's sizes, dtypes and k (its
 * pointers are not read); 0 with ckjit_last_error() set when the sizes
 * are out of the limits. */
CKJIT_API size_t ckjit_fused_moe_workspace_size(const ckjit_fused_moe_desc *desc);
/* The fused MoE layer (above). */
CKJIT_API ckjit_status ckjit_fused_moe(const ckjit_fused_moe_desc *desc, void *stream);

/* The layer with its router: topk_ids and topk_weights are computed first,
 * as ckjit_topk_softmax(logits_dtype, tokens, experts, logits, ld_logits, k,
 * renormalize, ...) with int32 ids (see its contract: experts <= 256, k <=
 * min(8, experts), logits [tokens][experts] f32, bf16 or f16 with row
 * stride ld_logits), into the workspace, then the layer runs on them
 * exactly as ckjit_fused_moe (the same bits as the two calls in a row).
 * desc's topk_ids, topk_weights and ids_dtype are not read.  The workspace
 * holds the routing after the layer's buffers: size it with
 * ckjit_fused_moe_router_workspace_size (0 with ckjit_last_error() set
 * when the sizes are out of either call's limits).  Two launches more
 * than ckjit_fused_moe's, on `stream`, no host synchronization. */
CKJIT_API size_t ckjit_fused_moe_router_workspace_size(const ckjit_fused_moe_desc *desc);
CKJIT_API ckjit_status ckjit_fused_moe_router(const ckjit_fused_moe_desc *desc, ckjit_dtype logits_dtype,
                                              const void *logits, int64_t ld_logits, int renormalize,
                                              void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CKJIT_MOE_H */
