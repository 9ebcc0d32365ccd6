// The shared-memory side of the mma.sync kernels (attention/mma.cu,
// attention/decode.cu): the tile sizes, the XOR-swizzled tile layout, the
// cp.async copies that fill it, the ldmatrix fragment loads that read it,
// and the staged store of the O tile.  Needs T, THREADS, BM, BN, HDIM,
// HDIM_V.
//
// A tile is ROWS rows of C 16-byte chunks (C = head dim / 8: 8, 12, 16,
// 24 or 32), no padding.  ldmatrix reads one chunk of eight consecutive
// rows per 8x8 matrix; those eight chunks must sit in eight different
// 16-byte bank groups (128 bytes = all 32 banks), so the chunk index is
// XORed with a function of the row, attn_swz_x:
//   C % 8 == 0: a row is a whole number of 128-byte lines, every row
//               starts at bank group 0, so XOR with row % 8;
//   C == 12:    a row is 1.5 lines, odd rows start at bank group 4 (half a
//               line), so rows r and r ^ 1 already differ in the top bit;
//               XOR the low two bits with (row / 2) % 4, which keeps the
//               chunk inside its aligned group of four (12 = 3 * 4).
// Either way the pattern of a row depends only on row % 8.
//
// Tiles are addressed by 32-bit shared-memory addresses (smem_addr of the
// base, once): a fragment load is then one add (or an immediate offset)
// away from a lane's base, not a 64-bit pointer converted per load.
#pragma once
#include "core/mma_sync.h"
#include "attention/nv_math.h"
#if defined(CKJIT_NVIDIA)

// A Q tile of BM rows, then (K tile, V tile) stages of BN keys.
enum {
  QC = HDIM / 8,      // 16-byte chunks of a Q or K row
  VC = HDIM_V / 8,    // of a V or O row
  KSTEPS = HDIM / 16, // k steps of S = Q K^T
  OT = HDIM_V / 8,    // 8-column blocks of O per warp
  Q_BYTES = BM * HDIM * (int)sizeof(T),                // the Q tile
  K_BYTES = BN * HDIM * (int)sizeof(T),                // a K tile; its V tile follows
  STAGE_BYTES = BN * (HDIM + HDIM_V) * (int)sizeof(T),
  // Up to head dim 128 a warp's Q fragments (HDIM / 4 registers) stay in
  // registers; beyond, with the O accumulators of up to 256 columns,
  // they would spill, and one ldmatrix per k step is cheaper.
  Q_IN_REGS = HDIM <= 128,
};

template <int C> CKJIT_INLINE int attn_swz_x(int row) {
  static_assert(C % 8 == 0 || C == 12, "head dims 64, 96, 128, 192, 256");
  return C % 8 == 0 ? (row & 7) : ((row >> 1) & 3);
}
// Byte offset of chunk `chunk` of row `row`.
template <int C> CKJIT_INLINE unsigned attn_swz(int row, int chunk) {
  return (unsigned)(row * C + (chunk ^ attn_swz_x<C>(row))) * 16u;
}

// Copies rows [0, ROWS) of a matrix (row r's first element row(r), C
// chunks long; nullptr: not readable) into the swizzled tile at shared
// address `tile`; rows >= valid_rows and unreadable rows read as zero, so
// rows past a sequence's end never bring garbage (a NaN in V would survive
// a zero probability).  An empty copy still needs a mapped address:
// `mapped`.  No commit: the caller groups the copies.
template <int ROWS, int C, class RowAt, class E>
CKJIT_INLINE void attn_copy_rows(unsigned tile, RowAt row, int valid_rows, const E *mapped) {
  constexpr int TOTAL = ROWS * C;
  // When THREADS is a multiple of C every thread keeps one chunk column
  // and steps whole rows: no division per copy.
  constexpr bool COLUMN_FIXED = THREADS % C == 0;
  const int tid = threadIdx.x;
#pragma unroll
  for (int it = 0; it < (TOTAL + THREADS - 1) / THREADS; it++) {
    const int i = it * THREADS + tid;
    if (TOTAL % THREADS != 0 && i >= TOTAL) break;
    const int r = COLUMN_FIXED ? it * (THREADS / C) + tid / C : i / C;
    const int c = COLUMN_FIXED ? tid % C : i % C;
    const E *src = r < valid_rows ? row(r) : nullptr;
    copy_async<16>(tile + attn_swz<C>(r, c), src ? src + c * (16 / sizeof(E)) : mapped, src ? 16 : 0);
  }
}
// The same for a matrix whose rows are `ld` apart from `src`.
template <int ROWS, int C>
CKJIT_INLINE void attn_copy_tile(unsigned tile, const T *src, long long ld, int valid_rows) {
  attn_copy_rows<ROWS, C>(tile, [&](int r) { return src + r * ld; }, valid_rows, src);
}

// ldmatrix x4 (.trans: each 8x8 matrix transposed) at a shared address.
CKJIT_INLINE void attn_ldsm(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
CKJIT_INLINE void attn_ldsm_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// One lane's row pointer of an ldmatrix x4 over a 16 x 16 block (rows
// [row0, row0 + 16), 16-column block c16) of a swizzled tile of C chunks
// per row.  Lane l points at matrix l / 8, row l % 8 of it; the matrix
// index picks 8 more rows with one bit and the upper 8 columns with the
// other:
//   rows_bit 0 (A operand Q, B operand V read .trans): matrices are
//     (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15),
//     (rows 8-15, cols 8-15), the register order of an m16k16 A fragment
//     and of two k16n8 B fragments of a row-major (key x dim) V;
//   rows_bit 1 (B operand K, keys as rows): (rows 0-7, cols 0-7), (rows
//     0-7, cols 8-15), (rows 8-15, cols 0-7), (rows 8-15, cols 8-15): two
//     n8k16 B fragments, keys 0-7 then keys 8-15.
// The 16-column block's two chunks are 2 c16 and 2 c16 + 1, so the
// swizzled chunk is 8 (c16 / 4) + (2 (c16 % 4) ^ y) with y = (the lane's
// upper-column bit) ^ attn_swz_x(row): a lane constant, as row0 is a
// multiple of 8.  c16 is a compile-time constant in the unrolled loops, so
// an address is the lane's base, one XOR per c16 % 4 and an immediate.
template <int C, int rows_bit> struct attn_ldsm_lane {
  unsigned row_bytes; // the lane's row within the 16-row block, in bytes
  unsigned y16;       // 16 y
  CKJIT_INLINE attn_ldsm_lane() {
    const int lane = threadIdx.x % 32, mat = lane / 8;
    const int row = lane % 8 + 8 * ((mat >> rows_bit) & 1), col_bit = (mat >> (1 - rows_bit)) & 1;
    row_bytes = (unsigned)row * C * 16u;
    y16 = (unsigned)(col_bit ^ attn_swz_x<C>(row)) * 16u;
  }
  CKJIT_INLINE unsigned at(unsigned tile, int row0, int c16) const {
    return tile + row_bytes + (unsigned)row0 * C * 16u + (unsigned)(c16 / 4) * 128u +
           ((unsigned)(c16 % 4) * 32u ^ y16);
  }
};

// d += a b, one m16n8k16 mma.sync of T operands.
CKJIT_INLINE void attn_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  mma_m16n8k16<ckjit_is_bf16<T>>(d, a, b0, b1);
}

// The O tile of one warp: 16 rows x HDIM_V columns as mma.sync C fragments
// (o[j]: columns 8j .. 8j + 7; lane g = lane / 4, q = lane % 4 holds rows
// g and g + 8, columns 2q and 2q + 1), row h (g, g + 8) times inv_l[h]
// (attn_scaled), rounded to T, stored to rows [0, rows) of dst (row r at
// dst + r * ld).
//
// With HDIM_V <= HDIM the warp's own 16 rows of the Q tile (`stage`, read
// by no other warp) hold the rows for one pass, so each lane stores whole
// 16-byte chunks: a row of O is written by consecutive lanes instead of
// 4 bytes by each of 8 rows per store.  Otherwise the fragments go to
// global memory directly.
template <int OT>
CKJIT_INLINE void attn_store_o(const float (&o)[OT][4], const float (&inv_l)[2], T *stage, T *dst,
                               long long ld, int rows) {
  constexpr int VC = HDIM_V / 8;
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
#if HDIM_V <= HDIM
  unsigned char *const bytes = reinterpret_cast<unsigned char *>(stage);
  __syncwarp(); // every lane is done reading this warp's Q rows
#pragma unroll
  for (int j = 0; j < OT; j++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const unsigned v = attn_pack(attn_scaled(o[j][2 * h], inv_l[h]),
                                   attn_scaled(o[j][2 * h + 1], inv_l[h]));
      *reinterpret_cast<unsigned *>(bytes + attn_swz<VC>(g + 8 * h, j) + 4 * q) = v;
    }
  __syncwarp();
#pragma unroll
  for (int i = lane; i < 16 * VC; i += 32) {
    const int r = i / VC, c = i % VC;
    if (r < rows)
      *reinterpret_cast<uint4 *>(dst + r * ld + c * 8) =
          *reinterpret_cast<const uint4 *>(bytes + attn_swz<VC>(r, c));
  }
#else
  (void)stage;
#pragma unroll
  for (int j = 0; j < OT; j++)
#pragma unroll
    for (int h = 0; h < 2; h++)
      if (g + 8 * h < rows)
        *reinterpret_cast<unsigned *>(dst + (g + 8 * h) * ld + 8 * j + 2 * q) = attn_pack(
            attn_scaled(o[j][2 * h], inv_l[h]), attn_scaled(o[j][2 * h + 1], inv_l[h]));
#endif
}

#endif
