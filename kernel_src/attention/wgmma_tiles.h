// attention_wgmma's shared-memory tiles: where Q and the K/V stages live,
// the producer's cp.async copies into them, and the wgmma descriptors that
// read them.
//
// Every tile is stored as panels of 64 head-dim columns: a panel holds its
// rows as 128-byte lines in the 128-byte swizzle wgmma reads (16-byte chunk
// c of row r at chunk c ^ (r % 8)), panel p of a ROWS-row tile at byte
// p * ROWS * 128.  Q and K are read K-major (the head dim is the reduction
// of Q Kᵀ); V is read transposed (the keys are the reduction of P V, the
// head dim its N), in the same layout by groups of V_GROUP rows: the whole
// tile, or for paged V of small pages one page (abi's
// CKJIT_ATTENTION_V_PAGE_MAJOR), group g at byte g * V_GROUP * panels * 128.
//
// Needs T, BM, BN, STAGES, HDIM, HDIM_V.
#pragma once
#include "core/async_copy.h"
#include "core/wgmma.h"

#define HD_PANELS (CKJIT_ATTENTION_PANELS(HDIM) / 64)
#define HDV_PANELS (CKJIT_ATTENTION_PANELS(HDIM_V) / 64)
#define Q_BYTES (BM * HD_PANELS * 128)
#define K_BYTES (BN * HD_PANELS * 128)
#define V_BYTES (BN * HDV_PANELS * 128)
#define STAGE_BYTES (K_BYTES + V_BYTES)
#define V_GROUP (CKJIT_ATTENTION_V_PAGE_MAJOR(PAGE, BN, HDIM_V, KV8) ? PAGE : BN)
#define O_STAGE_BYTES CKJIT_ATTENTION_WGMMA_O_STAGE(BM, BN, STAGES, HDIM, HDIM_V, 2)
static_assert(Q_BYTES + STAGES * STAGE_BYTES + 1024 + O_STAGE_BYTES ==
                  CKJIT_ATTENTION_WGMMA_SMEM(BM, BN, STAGES, HDIM, HDIM_V, 2),
              "the layout fills the shared memory the host gives");

CKJIT_INLINE unsigned q_tile(unsigned base) { return base; }
CKJIT_INLINE unsigned k_tile(unsigned base, int stage) { return base + Q_BYTES + stage * STAGE_BYTES; }
CKJIT_INLINE unsigned v_tile(unsigned base, int stage) { return k_tile(base, stage) + K_BYTES; }
// Consumer warp w's 2 KiB for regrouping O (O_STAGE_BYTES > 0): 16 rows of
// 128 bytes, 16-byte chunk c of row r at chunk c ^ (r % 8).
CKJIT_INLINE unsigned o_stage(unsigned base, int w) {
  return base + Q_BYTES + STAGES * STAGE_BYTES + w * 2048;
}

// Rows [r0, r0 + ROWS) x COLS head-dim columns of a matrix (row r's first
// element row(r), head-dim stride 1; nullptr: not readable) into the
// panels at `dst`, GROUP rows a group (see above), by `threads` producer
// threads (`tid`); rows >= r_end and
// unreadable rows read as zero, so no stale or out-of-sequence value
// reaches the math (an empty copy reads from `mapped`).  Consecutive
// threads take consecutive 16-byte chunks of a row: each row is one
// coalesced read.
template <int ROWS, int COLS, int GROUP, class RowAt>
CKJIT_INLINE void load_panels(unsigned dst, RowAt row, const T *mapped, int r0, int r_end, int tid,
                             int threads) {
  constexpr int chunks = COLS / 8, total = ROWS * chunks;
  constexpr int group_bytes = GROUP * (CKJIT_ATTENTION_PANELS(COLS) / 64) * 128;
  static_assert(ROWS % GROUP == 0 && GROUP % 8 == 0, "whole swizzle atoms a group");
  if (threads % chunks == 0) {
    // Each thread keeps one chunk column: a row's address is made once per
    // row, not once per 16 bytes.
    const int c = tid % chunks, rows_per_pass = threads / chunks;
    const unsigned col = dst + (c / 8) * (GROUP * 128);
#pragma unroll 4
    for (int r = tid / chunks; r < ROWS; r += rows_per_pass) {
      const T *src = r0 + r < r_end ? row(r0 + r) : nullptr;
      copy_async<16>(col + (r / GROUP) * group_bytes + (r % GROUP) * 128 + (((c % 8) ^ (r % 8)) * 16),
                     src ? src + c * 8 : mapped, src ? 16 : 0);
    }
    return;
  }
#pragma unroll 4
  for (int i = tid; i < total; i += threads) {
    const int r = i / chunks, c = i % chunks;
    const T *src = r0 + r < r_end ? row(r0 + r) : nullptr;
    const unsigned at = dst + (r / GROUP) * group_bytes + (c / 8) * (GROUP * 128) + (r % GROUP) * 128 +
                        (((c % 8) ^ (r % 8)) * 16);
    copy_async<16>(at, src ? src + c * 8 : mapped, src ? 16 : 0);
  }
}

// The mbarrier at `bar` (shared) gets one more pending arrival now, made
// when every cp.async this thread issued before has landed: the thread
// goes on without waiting for its copies.
CKJIT_INLINE void copy_arrive_on(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.shared.b64 [%0];" ::"r"(bar) : "memory");
}

// Descriptors (core/wgmma.h: 128-byte swizzle, 8-row groups 1 KiB apart).
// K step kk (16 head-dim columns) of rows [row0, row0 + 64) of Q, and of
// the whole K tile: 32 bytes into a line, the panel of kk.
CKJIT_INLINE ckjit_u64 q_desc(unsigned q, int row0, int kk) {
  return wgmma_smem_desc(q + (kk / 64) * (BM * 128) + row0 * 128 + (kk % 64) * 2, 16, 1024);
}
CKJIT_INLINE ckjit_u64 k_desc(unsigned k, int kk) {
  return wgmma_smem_desc(k + (kk / 64) * (BN * 128) + (kk % 64) * 2, 16, 1024);
}
// Keys [key0, key0 + 16) of V, read transposed: 16 lines further per step
// within a group (a group holds whole steps), the head-dim panels V_GROUP
// lines apart.
CKJIT_INLINE ckjit_u64 v_desc(unsigned v, int key0) {
  static_assert(V_GROUP % 16 == 0, "a 16-key step inside one group");
  constexpr int group_bytes = V_GROUP * HDV_PANELS * 128;
  return wgmma_smem_desc(v + (key0 / V_GROUP) * group_bytes + (key0 % V_GROUP) * 128, V_GROUP * 128, 1024);
}
