/* The paged_append family across the host/kernel boundary (see abi.h):
 * ckjit_paged_kv_append (ckjit/paged_attention.h).  Strides in elements;
 * the new tokens' b is unused (packed tokens), the pools' b is the page
 * stride, s the slot stride. */
#ifndef CKJIT_KERNEL_ABI_PAGED_APPEND_ARGS_H
#define CKJIT_KERNEL_ABI_PAGED_APPEND_ARGS_H

#include "abi/abi.h"
#include "abi/attention_args.h"

/*   cu_seqlens_new   [batch + 1]: sequence b's new tokens
 *   paging           the tables (ckjit_attention_paging; k_page, v_page
 *                    unused: the pool strides' b)
 *   max_new          the grid's x is batch * max_new token slots */
#define CKJIT_PAGED_APPEND_FIELDS(X)                                           \
  X(const void *, k_new, 0)                                                    \
  X(const void *, v_new, 8)                                                    \
  X(void *, k_pages, 16)                                                       \
  X(void *, v_pages, 24)                                                       \
  X(const int *, cu_seqlens_new, 32)                                           \
  X(ckjit_attention_paging, paging, 40)                                        \
  X(ckjit_attention_stride4, k_new_stride, 136)                                \
  X(ckjit_attention_stride4, v_new_stride, 168)                                \
  X(ckjit_attention_stride4, k_pool_stride, 200)                               \
  X(ckjit_attention_stride4, v_pool_stride, 232)                               \
  X(long long, max_new, 264)                                                   \
  X(int, batch, 272)                                                           \
  X(int, heads_kv, 276)                                                        \
  X(int, head_dim_qk, 280)                                                     \
  X(int, head_dim_v, 284)
/* New tokens of one sequence a block copies: the host sizes the grid by it
 * (x = batch * ceil(max_new / TOKENS)). */
#define CKJIT_PAGED_APPEND_TOKENS 16

CKJIT_ABI_STRUCT(ckjit_paged_append_args, CKJIT_PAGED_APPEND_FIELDS, 288)

#endif
