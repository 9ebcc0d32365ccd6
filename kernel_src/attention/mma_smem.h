// attention/mma.cu's shared-memory side: the XOR-swizzled tile layout,
// the cp.async copies that fill it, the ldmatrix fragment loads that read
// it, and the staged store of the O tile.  Needs T, THREADS, HDIM, HDIM_V.
//
// A tile is ROWS rows of C 16-byte chunks (C = head dim / 8: 8, 12, 16,
// 24 or 32), no padding.  ldmatrix reads one chunk of eight consecutive
// rows per 8x8 matrix; those eight chunks must sit in eight different
// 16-byte bank groups (128 bytes = all 32 banks), so the chunk index is
// XORed with a function of the row:
//   C % 8 == 0: a row is a whole number of 128-byte lines, every row
//               starts at bank group 0, so XOR with row % 8;
//   C == 12:    a row is 1.5 lines, odd rows start at bank group 4 (half a
//               line), so rows r and r ^ 1 already differ in the top bit;
//               XOR the low two bits with (row / 2) % 4, which keeps the
//               chunk inside its aligned group of four (12 = 3 * 4).
#pragma once
#include "core/mma_sync.h"
#if defined(CKJIT_NVIDIA)

template <int C> CKJIT_INLINE int attn_swz(int row, int chunk) {
  static_assert(C % 8 == 0 || C == 12, "head dims 64, 96, 128, 192, 256");
  const int x = C % 8 == 0 ? (row & 7) : ((row >> 1) & 3);
  return (row * C + (chunk ^ x)) * 8;
}

// Copies rows [0, ROWS) of a matrix (row r at src + r * ld, C chunks
// long) into a swizzled tile; rows >= valid_rows read as zero, so rows
// past a sequence's end never bring garbage (a NaN in V would survive a
// zero probability).  No commit: the caller groups the copies.
template <int ROWS, int C>
CKJIT_INLINE void attn_copy_tile(T *tile, const T *src, long long ld, int valid_rows) {
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
    const bool inside = r < valid_rows;
    // An empty copy still needs a mapped address: the tile's first row.
    const T *g = inside ? src + r * ld + c * 8 : src;
    copy_async<16>(smem_addr(tile + attn_swz<C>(r, c)), g, inside ? 16 : 0);
  }
}

// The A fragment (m16 x k16) of rows [m, m + 16), columns [k, k + 16) of
// a row-major tile (Q): a[0] rows 0-7 / cols 0-7, a[1] rows 8-15 / cols
// 0-7, a[2] rows 0-7 / cols 8-15, a[3] rows 8-15 / cols 8-15.
template <int C> CKJIT_INLINE void attn_frag_a(unsigned (&a)[4], const T *tile, int m, int k) {
  const int lane = threadIdx.x % 32, mat = lane / 8, r = lane % 8;
  ldmatrix_x4(a, tile + attn_swz<C>(m + r + (mat & 1) * 8, k / 8 + (mat >> 1)));
}

// B fragments of S = Q K^T from a K tile (key rows, head dim contiguous):
// keys [n, n + 16), dims [k, k + 16).  {b[0], b[1]}: keys n .. n + 7,
// {b[2], b[3]}: keys n + 8 .. n + 15 (each: dims k .. k + 7, k + 8 .. k + 15).
template <int C> CKJIT_INLINE void attn_frag_k(unsigned (&b)[4], const T *tile, int n, int k) {
  const int lane = threadIdx.x % 32, mat = lane / 8, r = lane % 8;
  ldmatrix_x4(b, tile + attn_swz<C>(n + r + (mat >> 1) * 8, k / 8 + (mat & 1)));
}

// B fragments of O = P V from a V tile (key rows, head dim contiguous,
// read transposed): keys [k, k + 16), dims [n, n + 16).  {b[0], b[1]}:
// dims n .. n + 7, {b[2], b[3]}: dims n + 8 .. n + 15 (each: keys k .. k + 7,
// k + 8 .. k + 15).
template <int C> CKJIT_INLINE void attn_frag_v(unsigned (&b)[4], const T *tile, int k, int n) {
  const int lane = threadIdx.x % 32, mat = lane / 8, r = lane % 8;
  ldmatrix_x4_trans(b, tile + attn_swz<C>(k + r + (mat & 1) * 8, n / 8 + (mat >> 1)));
}

// Two f32 values rounded (nearest even) into one register of two T, the
// lower column in the low half: the operand layout of mma.sync.
template <typename U> struct attn_is_bf16 { static const bool value = false; };
template <> struct attn_is_bf16<ckjit_bf16> { static const bool value = true; };

CKJIT_INLINE unsigned attn_pack(float lo, float hi) {
  unsigned r;
  if (attn_is_bf16<T>::value)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// d += a b, one m16n8k16 mma.sync of T operands.
CKJIT_INLINE void attn_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  mma_m16n8k16<attn_is_bf16<T>::value>(d, a, b0, b1);
}

// The O tile of one warp: 16 rows x HDIM_V columns as mma.sync C fragments
// (o[j]: columns 8j .. 8j + 7; lane g = lane / 4, q = lane % 4 holds rows
// g and g + 8, columns 2q and 2q + 1), each row times its scale[2] ({row g,
// row g + 8}; a scale of 0 gives 0, even where a NaN in V met a zero
// probability), rounded to T, stored to rows [0, rows) of dst (row r at
// dst + r * ld).
//
// With HDIM_V <= HDIM the warp's own 16 rows of the Q tile (`stage`, read
// by no other warp) hold the rows for one pass, so each lane stores whole
// 16-byte chunks: a row of O is written by consecutive lanes instead of
// 4 bytes by each of 8 rows per store.  Otherwise the fragments go to
// global memory directly.
CKJIT_INLINE float attn_scaled(float x, float scale) { return scale == 0.0f ? 0.0f : x * scale; }

template <int OT>
CKJIT_INLINE void attn_store_o(const float (&o)[OT][4], const float (&scale)[2], T *stage, T *dst,
                               long long ld, int rows) {
  constexpr int VC = HDIM_V / 8;
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
#if HDIM_V <= HDIM
  __syncwarp(); // every lane is done reading this warp's Q rows
#pragma unroll
  for (int j = 0; j < OT; j++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const unsigned v = attn_pack(attn_scaled(o[j][2 * h], scale[h]), attn_scaled(o[j][2 * h + 1], scale[h]));
      *reinterpret_cast<unsigned *>(stage + attn_swz<VC>(g + 8 * h, j) + 2 * q) = v;
    }
  __syncwarp();
#pragma unroll
  for (int i = lane; i < 16 * VC; i += 32) {
    const int r = i / VC, c = i % VC;
    if (r < rows)
      *reinterpret_cast<uint4 *>(dst + r * ld + c * 8) =
          *reinterpret_cast<const uint4 *>(stage + attn_swz<VC>(r, c));
  }
#else
  (void)stage;
#pragma unroll
  for (int j = 0; j < OT; j++)
#pragma unroll
    for (int h = 0; h < 2; h++)
      if (g + 8 * h < rows)
        *reinterpret_cast<unsigned *>(dst + (g + 8 * h) * ld + 8 * j + 2 * q) =
            attn_pack(attn_scaled(o[j][2 * h], scale[h]), attn_scaled(o[j][2 * h + 1], scale[h]));
#endif
}

#endif
