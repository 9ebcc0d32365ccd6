/* The moe_permute family (kernel_src/moe/moe_permute.cu) across the
 * host/kernel boundary (see abi.h).  The kernel takes the struct by value. */
#ifndef CKJIT_KERNEL_ABI_MOE_PERMUTE_ARGS_H
#define CKJIT_KERNEL_ABI_MOE_PERMUTE_ARGS_H

#include "abi/abi.h"

/* Which way rows move: gather (token order to expert order, the grouped
 * GEMM's A) or combine (a token's k slot rows summed into its row). */
#define CKJIT_MOE_PERMUTE_DIRS(X) X(DIR_GATHER, gather) X(DIR_COMBINE, combine)
/* Gather's output: the input's type, or e4m3 quantized per row or per
 * 1 x 128 block (scale amax / 448). */
#define CKJIT_MOE_PERMUTE_QUANTS(X) X(QUANT_NONE, none) X(QUANT_ROW, row) X(QUANT_BLOCK, block)
/* topk_ids' integer type (combine reads them: a slot with an id out of
 * range has no row). */
#define CKJIT_MOE_PERMUTE_IDS(X) X(PIDS_I32, i32) X(PIDS_I64, i64)
/* Combine's shared experts (the spec parameter `shared`): none, their rows
 * added, or added times their gates (Qwen2-MoE's sigmoid gate). */
#define CKJIT_MOE_SHARED_NONE 0
#define CKJIT_MOE_SHARED_PLAIN 1
#define CKJIT_MOE_SHARED_GATED 2

/*   gather:  dst row r (r < rows) = src row row_ids[r] / k, or src row r
 *            when row_ids is NULL; rows whose id is outside 0 .. entries -
 *            1 are skipped; scales [rows][ld_scales] (block) or [rows]
 *            (row) under quantization;
 *   combine: dst row t (t < rows tokens) = sum over s < k of src row t * k
 *            + s, in order, where topk_ids[t * k + s] is in 0 .. experts
 *            - 1 (with expert_map, of global_experts entries: where the
 *            id's map entry is), then over j < shared of shared_src row
 *            t * shared + j (the shared experts' rows, ld_src apart too),
 *            each times shared_gate[t * shared + j] (f32) when gated.
 * Rows have cols elements, 8-element (16-byte) pieces; ld_* in elements.
 * A gather block moves whole rows; a combine block one unit of a row's
 * CKJIT_MOE_PERMUTE_PASS columns (unit u: row u / units_per_row, columns
 * from u % units_per_row times the pass), so a few tokens still spread
 * over many blocks. */
#define CKJIT_MOE_PERMUTE_PASS 1024 /* 128 threads x 8 elements */
#define CKJIT_MOE_PERMUTE_FIELDS(X)                                            \
  X(const void *, src, 0)                                                      \
  X(void *, dst, 8)                                                            \
  X(float *, scales, 16)                                                       \
  X(const int *, row_ids, 24)                                                  \
  X(const void *, topk_ids, 32)                                                \
  X(long long, ld_src, 40)                                                     \
  X(long long, ld_dst, 48)                                                     \
  X(long long, ld_scales, 56)                                                  \
  X(long long, rows, 64)                                                       \
  X(long long, cols, 72)                                                       \
  X(long long, entries, 80)                                                    \
  X(int, k, 88)                                                                \
  X(int, experts, 92)                                                          \
  X(const int *, expert_map, 96)                                               \
  X(int, global_experts, 104)                                                  \
  X(int, shared, 108)                                                          \
  X(const void *, shared_src, 112)                                             \
  X(const float *, shared_gate, 120)
CKJIT_ABI_STRUCT(ckjit_moe_permute_args, CKJIT_MOE_PERMUTE_FIELDS, 128)
#define CKJIT_MOE_PERMUTE_PARAM(X) X(ckjit_moe_permute_args, x, 0)

#endif
