/* The attention families across the host/kernel boundary (see abi.h).
 *
 * Every attention kernel takes ckjit_attention_args by value, as its only
 * parameter.  Strides are in elements; offsets are formed in 64 bits. */
#ifndef CKJIT_KERNEL_ABI_ATTENTION_ARGS_H
#define CKJIT_KERNEL_ABI_ATTENTION_ARGS_H

#include "abi/abi.h"
#include "abi/tensor_map.h"

/* Mask kinds (the public ckjit_attention_mask's order).  The front-end
 * turns a window of left < 0 and right 0 into CAUSAL and a window unbounded
 * on both sides into NONE, so each kernel compiles only the test it needs. */
#define CKJIT_ATTENTION_MASKS(X) X(MASK_NONE, none) X(MASK_CAUSAL, causal) X(MASK_WINDOW, window)

/* The additive bias: none, f32 elements, or elements of the Q/K/V dtype. */
#define CKJIT_ATTENTION_BIASES(X) X(BIAS_NONE, none) X(BIAS_F32, f32) X(BIAS_DTYPE, dtype)

/* Strides of a tensor in elements: batch, head, sequence, head dimension. */
typedef struct ckjit_attention_stride4 {
  long long b, h, s, d;
} ckjit_attention_stride4;

/* A paged K/V cache's tables (ckjit_paged_kv in ckjit/paged_attention.h):
 * entry b's keys are found through
 *   page_table      its page ids: block_table + b * table_stride (padded
 *                   form, with seqlens_k[b] keys) or kv_page_indices +
 *                   kv_indptr[b] (CSR form, kv_indptr non-NULL: the keys are
 *                   (pages - 1) * PAGE + kv_last_page_len[b])
 *   num_pages       page ids outside [0, num_pages) are never read: their
 *                   keys read as zeros and *error (when non-NULL) is set to
 *                   1; keys past a table's capacity are dropped
 *   k_page, v_page  the pools' page strides (elements)
 *   k_scale, v_scale, scale_stride   FP8 pages (spec parameter KV8): head
 *                   g's elements are k_scale[g * scale_stride] * x */
typedef struct ckjit_attention_paging {
  const int *page_table;
  const int *seqlens_k;
  const int *kv_indptr;
  const int *kv_last_page_len;
  int *error;
  long long table_stride, k_page, v_page;
  int num_pages, reserved;
  const float *k_scale, *v_scale;
  long long scale_stride;
} ckjit_attention_paging;

/* One attention problem (see ckjit_attention in ckjit.h).
 *   lse             f32, strides b, h, s (d unused); NULL: not written
 *   cu_seqlens_q/k  NULL: dense (batch strides used); else packed tokens
 *   bias_stride     b, h, s = query row, d = key column
 *   seqlen_q/k      dense: the lengths; varlen: the largest
 *   m_blocks        query tiles per (batch, head): the grid's x is
 *                   m_blocks * heads_q * batch, walked grid-stride
 *   window_left/right  MASK_WINDOW: the bounds around the bottom-right
 *                   diagonal, clamped to [0, 2^30] (2^30: unbounded)
 *   scale_log2      softmax_scale * log2(e)
 *   softcap         the cap (> 0) when the kernel has SOFTCAP, else 0
 *   alibi_stride_b  elements between batch entries of alibi_slopes
 *   tma             attention_wgmma: Q, K and V are read through the tensor
 *                   maps of ckjit_attention_tma_args (dense problems whose
 *                   strides TMA takes); 0: with cp.async
 *   paired          the grid walks pairs of query tiles (attn_walk_first in
 *                   attention/problem.h): a persistent grid over masked
 *                   tiles of unequal work; 0: tiles grid-stride
 *   paging          paged K / V (kernels whose PAGE spec parameter is not 0):
 *                   k and v are the page pools, k_stride / v_stride's s, h
 *                   and d their slot, head and dim strides (b unused) */
#define CKJIT_ATTENTION_FIELDS(X)                                              \
  X(const void *, q, 0)                                                        \
  X(const void *, k, 8)                                                        \
  X(const void *, v, 16)                                                       \
  X(void *, o, 24)                                                             \
  X(float *, lse, 32)                                                          \
  X(const int *, cu_seqlens_q, 40)                                             \
  X(const int *, cu_seqlens_k, 48)                                             \
  X(const void *, bias, 56)                                                    \
  X(const float *, alibi_slopes, 64)                                           \
  X(ckjit_attention_stride4, q_stride, 72)                                     \
  X(ckjit_attention_stride4, k_stride, 104)                                    \
  X(ckjit_attention_stride4, v_stride, 136)                                    \
  X(ckjit_attention_stride4, o_stride, 168)                                    \
  X(ckjit_attention_stride4, lse_stride, 200)                                  \
  X(ckjit_attention_stride4, bias_stride, 232)                                 \
  X(long long, alibi_stride_b, 264)                                            \
  X(long long, m_blocks, 272)                                                  \
  X(int, batch, 280)                                                           \
  X(int, heads_q, 284)                                                         \
  X(int, heads_kv, 288)                                                        \
  X(int, seqlen_q, 292)                                                        \
  X(int, seqlen_k, 296)                                                        \
  X(int, head_dim_qk, 300)                                                     \
  X(int, head_dim_v, 304)                                                      \
  X(int, window_left, 308)                                                     \
  X(int, window_right, 312)                                                    \
  X(float, scale_log2, 316)                                                    \
  X(float, softcap, 320)                                                      \
  X(int, tma, 324)                                                             \
  X(int, paired, 328)                                                          \
  X(int, reserved, 332)                                                        \
  X(ckjit_attention_paging, paging, 336)
CKJIT_ABI_STRUCT(ckjit_attention_args, CKJIT_ATTENTION_FIELDS, 432)

/* attention_wgmma's argument: the problem and Q's, K's and V's tensor
 * maps (4-D: head dim, sequence, head, batch entry; boxes of 64 head-dim
 * columns by the tile's rows, 128-byte swizzled; zero-filled past each
 * sequence; paged K / V: head dim, slot, head, page, in boxes of
 * min(PAGE, tile rows) slots), valid when p.tma is 1.  The maps come first (64-byte
 * aligned); the tail padding is named so that sizeof is the list's end. */
typedef unsigned char ckjit_attention_tma_padding[16];
#define CKJIT_ATTENTION_TMA_FIELDS(X)                                          \
  X(ckjit_tensor_map, q_map, 0)                                                \
  X(ckjit_tensor_map, k_map, 128)                                              \
  X(ckjit_tensor_map, v_map, 256)                                              \
  X(ckjit_attention_args, p, 384)                                              \
  X(ckjit_attention_tma_padding, tail_padding, 816)
CKJIT_ABI_STRUCT(ckjit_attention_tma_args, CKJIT_ATTENTION_TMA_FIELDS, 832)

/* attention_decode's argument (split-KV decode, attention/decode.cu): the
 * problem, and where split s of the key range leaves its rows when there
 * are several: row (entry b, head h, query i) is index r = (b * heads_q +
 * h) * seqlen_q + i of `rows`; its O (head_dim_v f32, already divided by
 * its own sum) at part_o + (s * rows + r) * head_dim_v and its LSE in log2
 * units (-inf: no key) at part_lse[s * rows + r].  splits 1: the kernel
 * writes O and LSE itself. */
#define CKJIT_ATTENTION_DECODE_FIELDS(X)                                       \
  X(ckjit_attention_args, p, 0)                                                \
  X(float *, part_o, 432)                                                      \
  X(float *, part_lse, 440)                                                    \
  X(long long, rows, 448)                                                      \
  X(int, splits, 456)                                                          \
  X(int, row_blocks, 460)
CKJIT_ABI_STRUCT(ckjit_attention_decode_args, CKJIT_ATTENTION_DECODE_FIELDS, 464)

/* attention_combine's argument: the splits' rows (as above) summed in
 * split order into O and LSE. */
#define CKJIT_ATTENTION_COMBINE_FIELDS(X)                                      \
  X(ckjit_attention_args, p, 0)                                                \
  X(const float *, part_o, 432)                                                \
  X(const float *, part_lse, 440)                                              \
  X(long long, rows, 448)                                                      \
  X(int, splits, 456)                                                          \
  X(int, reserved, 460)
CKJIT_ABI_STRUCT(ckjit_attention_combine_args, CKJIT_ATTENTION_COMBINE_FIELDS, 464)
/* attention_combine's block: a warp per row, this many rows. */
#define CKJIT_ATTENTION_COMBINE_ROWS 4

/* paired: the pairs of query tiles (m, m_blocks - 1 - m) of one (head,
 * entry), the odd middle tile a pair of its own; the host sizes the grid
 * by them, the kernel walks them. */
#define CKJIT_ATTENTION_PAIRS(m_blocks) (((m_blocks) + 1) / 2)

/* Paged K / V go through TMA (attention_wgmma) in boxes of min(page,
 * rows) slots: pages of at least 8 slots (whole swizzle atoms) that tile
 * a key step of `rows` exactly, or that a step tiles. */
#define CKJIT_ATTENTION_PAGED_TMA(page, rows) \
  ((page) >= 8 && ((page) < (rows) ? (rows) % (page) == 0 : (page) % (rows) == 0))

/* Paged V tiles of pages smaller than the key step (through TMA, 16-bit,
 * whole 64-column panels, at least 16 slots: a page per 16-key product
 * step) are laid out page-major in shared memory: each page's slots with
 * all their panels together, so one 5-D box (columns, slots, panels, head,
 * page) carries a page's V; K stays panel-major (Q Kᵀ reads a panel's keys
 * at one stride).  Halves the boxes V takes. */
#define CKJIT_ATTENTION_V_PAGE_MAJOR(page, rows, hdim_v, kv8) \
  ((page) >= 16 && (page) < (rows) && CKJIT_ATTENTION_PAGED_TMA(page, rows) && (hdim_v) % 64 == 0 && \
   !(kv8))

/* Window bounds at or past this are unbounded (seqlens are at most 2^30). */
#define CKJIT_ATTENTION_UNBOUNDED (1 << 30)

/* Dynamic shared memory of each pipeline's kernel in bytes, for a query
 * tile of bm rows, key tiles of bn, `stages` K/V buffers, head dims hd and
 * hdv and es-byte elements: the host launches with it, the kernel lays its
 * buffers out in it.
 *   simt   one K and one V tile, f32
 *   mma    the Q tile, then `stages` (K tile, V tile) pairs
 *   wgmma  the same in panels of 64 columns (the 128-byte swizzle; head dim
 *          96 takes two), and 1 KiB to align the swizzled tiles; then, where
 *          it still fits sm_90's 227 KiB, 2 KiB per consumer warp (16 rows of
 *          64 columns) in which O's rows are regrouped for 16-byte stores
 *          (CKJIT_ATTENTION_WGMMA_O_STAGE; 0: O stored from registers)
 *   mfma   the Q tile, one K and one V tile
 *   decode the Q tile, then `stages` (K tile, V tile) pairs (the mma
 *          layout; the warps' partial rows are merged in the ring after);
 *          over fp8 pages DECODE8 */
#define CKJIT_ATTENTION_SIMT_SMEM(bm, bn, stages, hd, hdv, es) ((bn) * ((hd) + (hdv)) * 4)
#define CKJIT_ATTENTION_MMA_SMEM(bm, bn, stages, hd, hdv, es) \
  (((bm) * (hd) + (stages) * (bn) * ((hd) + (hdv))) * (es))
#define CKJIT_ATTENTION_PANELS(d) (((d) + 63) / 64 * 64)
#define CKJIT_ATTENTION_WGMMA_TILES_SMEM(bm, bn, stages, hd, hdv, es)                 \
  (((bm) * CKJIT_ATTENTION_PANELS(hd) +                                              \
    (stages) * (bn) * (CKJIT_ATTENTION_PANELS(hd) + CKJIT_ATTENTION_PANELS(hdv))) * (es) + 1024)
#define CKJIT_ATTENTION_SM90_SMEM (227 * 1024)
#define CKJIT_ATTENTION_WGMMA_O_STAGE(bm, bn, stages, hd, hdv, es)                    \
  (CKJIT_ATTENTION_WGMMA_TILES_SMEM(bm, bn, stages, hd, hdv, es) + (bm) * 128 <=      \
           CKJIT_ATTENTION_SM90_SMEM                                                 \
       ? (bm) * 128                                                                  \
       : 0)
#define CKJIT_ATTENTION_WGMMA_SMEM(bm, bn, stages, hd, hdv, es)                       \
  (CKJIT_ATTENTION_WGMMA_TILES_SMEM(bm, bn, stages, hd, hdv, es) +                   \
   CKJIT_ATTENTION_WGMMA_O_STAGE(bm, bn, stages, hd, hdv, es))
#define CKJIT_ATTENTION_DECODE_SMEM CKJIT_ATTENTION_MMA_SMEM
/* Page ids a decode split stages in shared memory (a split of more pages
 * looks them up in global memory; the host splits a padded block table's
 * key ranges so that they fit). */
#define CKJIT_ATTENTION_DECODE_STAGED_IDS 1024
/* decode over fp8 pages: the Q tile, `stages` fp8 (K, V) pairs as copied,
 * then one (K, V) pair converted to the Q dtype for the products. */
#define CKJIT_ATTENTION_DECODE8_SMEM(bm, bn, stages, hd, hdv, es) \
  ((bm) * (hd) * (es) + (stages) * (bn) * ((hd) + (hdv)) + (bn) * ((hd) + (hdv)) * (es))
#define CKJIT_ATTENTION_MFMA_SMEM(bm, bn, stages, hd, hdv, es) \
  (((bm) * (hd) + (bn) * ((hd) + (hdv))) * (es))

#endif
