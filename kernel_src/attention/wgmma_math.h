// attention_wgmma's per-warpgroup math: S = Q Kᵀ and O += P V on wgmma,
// and the online softmax of a 64 x BN score tile in the accumulator layout.
//
// Accumulator layout of m64nN (each of the 128 threads): warp w, lane l
// holds rows r0 = 16 w + l / 4 and r1 = r0 + 8; element 4 j + e is column
// 8 j + 2 (l % 4) + (e & 1) of row e < 2 ? r0 : r1.  A row is spread over
// the four lanes of a quad, so row reductions are two xor shuffles.
//
// Needs T, BN, HDIM, HDIM_V, attention/problem.h and wgmma_tiles.h.
#pragma once
#include "attention/nv_math.h"

#define S_ACC (BN / 2)
#define O_ACC (HDIM_V / 2)

#define WGMMA_SS_BN(ty) CKJIT_CAT3(wgmma_, ty, CKJIT_CAT(_n, BN))<0, 0>
#define WGMMA_SS_BN_FIRST(ty) CKJIT_CAT3(wgmma_first_, ty, CKJIT_CAT(_n, BN))<0, 0>
#define WGMMA_RS_HDV(ty) CKJIT_CAT3(wgmma_rs_, ty, CKJIT_CAT(_n, HDIM_V))<1>
#define CKJIT_CAT_(a, b) a##b
#define CKJIT_CAT(a, b) CKJIT_CAT_(a, b)
#define CKJIT_CAT3(a, b, c) CKJIT_CAT(CKJIT_CAT(a, b), c)

// s = Q[row0 .. row0 + 64) K[tile]ᵀ (issued; the caller waits).  The
// first K step overwrites s (scale-d 0), so no registers are zeroed
// between the turn's start and the first product.
CKJIT_INLINE void qk_gemm(float (&s)[S_ACC], unsigned q, int row0, unsigned k) {
  wgmma_fence();
  if (ckjit_is_bf16<T>) WGMMA_SS_BN_FIRST(bf16)(s, q_desc(q, row0, 0), k_desc(k, 0));
  else WGMMA_SS_BN_FIRST(f16)(s, q_desc(q, row0, 0), k_desc(k, 0));
#pragma unroll
  for (int kk = 16; kk < HDIM; kk += 16) {
    if (ckjit_is_bf16<T>) WGMMA_SS_BN(bf16)(s, q_desc(q, row0, kk), k_desc(k, kk));
    else WGMMA_SS_BN(f16)(s, q_desc(q, row0, kk), k_desc(k, kk));
  }
  wgmma_commit();
}

// P (the probabilities in s, rounded to T) as register A operands, 16
// keys a step.  The accumulator of columns 16 c .. 16 c + 15 is, in this
// layout, exactly an A fragment: no shuffle.
CKJIT_INLINE void pack_p(unsigned (&pa)[BN / 16][4], const float (&p)[S_ACC]) {
#pragma unroll
  for (int c = 0; c < BN / 16; c++)
#pragma unroll
    for (int q = 0; q < 4; q++) pa[c][q] = attn_pack(p[8 * c + 2 * q], p[8 * c + 2 * q + 1]);
}

// o += P V[tile] (issued; the caller waits).
CKJIT_INLINE void pv_gemm(float (&o)[O_ACC], const unsigned (&pa)[BN / 16][4], unsigned v) {
  fence_regs(o);
  wgmma_fence();
#pragma unroll
  for (int c = 0; c < BN / 16; c++) {
    if (ckjit_is_bf16<T>) WGMMA_RS_HDV(bf16)(o, pa[c], v_desc(v, 16 * c));
    else WGMMA_RS_HDV(f16)(o, pa[c], v_desc(v, 16 * c));
  }
  wgmma_commit();
}

// The running state of this thread's two rows: max (log2 units) and this
// thread's share of the sum (the quad's shares are added at the end).
struct softmax_rows {
  float m[2], l[2];
};

// Scores of the tile at key n0 to logits, masked keys -inf: the
// transform (attn_score) and the mask only where needed.  With plain
// scores and a positive scale the scale is left to the exponent (`fold`:
// the row max of raw scores is the max of the scaled ones), else the
// logits are in log2 units here.  row_i0 is the entry-local query row of
// this thread's r0.
CKJIT_INLINE void score_tile(float (&s)[S_ACC], const ckjit_attention_args &a, const attn_tile &t,
                             const attn_scorer &sc, bool fold, int row_i0, int n0, bool masked) {
  const int lane = threadIdx.x % 32;
  if (fold && !masked) return;
  // The mask per row as offsets from this thread's first key of the tile:
  // one compare per score against a constant (masked tiles only).
  const int key0 = n0 + 2 * (lane % 4);
  int lo[2] = {0, 0}, hi[2] = {0, 0};
#if ALIBI
  // ALiBi's distance |i + diag - key| per row from key0, in floats: one
  // subtract per score instead of an int-to-float conversion, which takes
  // the exponentials' unit.  (Exact below 2^24; beyond, the distance rounds
  // as its conversion did.)
  float dist0[2];
#pragma unroll
  for (int r = 0; r < 2; r++) dist0[r] = (float)(row_i0 + 8 * r + t.diag - key0);
#endif
  if (masked)
#pragma unroll
    for (int r = 0; r < 2; r++) {
      attn_key_bounds(a, t, row_i0 + 8 * r, lo[r], hi[r]);
      lo[r] -= key0, hi[r] -= key0;
    }
#pragma unroll
  for (int j = 0; j < BN / 8; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int r = e / 2, off = 8 * j + (e & 1); // the key is key0 + off
      float x = s[4 * j + e];
#if ATTN_PLAIN_SCORES
      if (!fold) x *= sc.scale_log2;
#else
      // (clamped: the bias is read only inside the entry; such keys and
      // rows are masked or never stored)
      const int i = row_i0 + 8 * r, key = key0 + off;
      x = attn_score_base(sc, x, i < t.sq ? i : t.sq - 1, key < t.sk ? key : t.sk - 1);
#if ALIBI
      x -= sc.slope_log2 * fabsf(dist0[r] - (float)off);
#endif
#endif
      if (masked && (off < lo[r] || off > hi[r])) x = -CKJIT_INF;
      s[4 * j + e] = x;
    }
}

// Turns the logits of s into probabilities p = 2^(c x - ref) (c: the
// folded scale, else 1), and returns per row the factor O must be scaled
// by before the next product (left to the caller: O may still be in
// flight).  The reference is the row's running max, moved only when a new
// maximum passes it by more than ATTN_RESCALE_SLACK (log2 units): p is then
// at most 2^slack, O and l share the reference (so the result is the same
// softmax), and most steps of a long row leave O unscaled (rescale_o skips
// them).  A row with no key seen yet keeps max -inf; it then uses 0 as the
// reference, so the exponentials give 0, never NaN.
#define ATTN_RESCALE_SLACK 8.0f
CKJIT_INLINE void online_softmax(float (&s)[S_ACC], softmax_rows &st, float c, float (&rescale)[2]) {
#pragma unroll
  for (int r = 0; r < 2; r++) {
    float mx = st.m[r];
#pragma unroll
    for (int j = 0; j < BN / 8; j++) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * r], s[4 * j + 2 * r + 1]));
    mx = attn_quad_max(mx);
    const bool move = mx * c > st.m[r] * c + ATTN_RESCALE_SLACK; // -inf: the first keys move it
    const float m = move ? mx : st.m[r];
    const float ref = m == -CKJIT_INF ? 0.0f : m * c;
    rescale[r] = move ? attn_exp2(st.m[r] * c - ref) : 1.0f;
    st.m[r] = m;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
      s[4 * j + 2 * r] = attn_exp2(fmaf(s[4 * j + 2 * r], c, -ref));
      s[4 * j + 2 * r + 1] = attn_exp2(fmaf(s[4 * j + 2 * r + 1], c, -ref));
      sum += s[4 * j + 2 * r] + s[4 * j + 2 * r + 1];
    }
    st.l[r] = st.l[r] * rescale[r] + sum;
  }
}

// Ties the softmax of this step ahead of the wait for the P V product in
// flight: a shared-memory store of a value that needs every exponential
// (the row sums), never read.  Nothing else orders register math against
// wgmma.wait_group, and ptxas otherwise schedules the wait first, so the
// softmax ran after the product instead of beside it (the SASS showed the
// wait ahead of every ex2; bench/NOTES.md).
CKJIT_INLINE void softmax_before_wait(unsigned sink, const softmax_rows &st) {
  asm volatile("st.shared.f32 [%0], %1;" ::"r"(sink), "f"(st.l[0] + st.l[1]) : "memory");
}

// O *= rescale per row, unless no row of the warp moved its reference.
CKJIT_INLINE void rescale_o(float (&o)[O_ACC], const float (&rescale)[2]) {
  if (!__any_sync(0xffffffffu, rescale[0] != 1.0f || rescale[1] != 1.0f)) return;
#pragma unroll
  for (int j = 0; j < HDIM_V / 8; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) o[4 * j + e] *= rescale[e / 2];
}

// O = o / l rounded to T for the rows inside the sequence (row_i0: this
// thread's r0), and the LSE.  Only O's own elements are written.  With a
// stage (O_STAGE_BYTES > 0; `stage`: this warp's), the warp regroups its
// 16 rows there, 64 columns at a time (stmatrix), and writes each row's
// piece with 16-byte stores: the registers' layout gives every store 4
// bytes of 8 rows, eight times the stores and L1 wavefronts, which made
// the stores a tenth of a short tile's time (bench/NOTES.md).
CKJIT_INLINE void store_rows(const ckjit_attention_args &a, const attn_tile &t, const float (&o)[O_ACC],
                             const softmax_rows &st, float c, int row_i0, unsigned stage) {
  const int lane = threadIdx.x % 32;
#if O_STAGE_BYTES > 0
  unsigned v[2][HDIM_V / 8]; // rows r0 and r1, two columns a register
#endif
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const int i = row_i0 + 8 * r;
    const float l = attn_quad_sum(st.l[r]), inv = attn_inv_l(l);
    if (t.lse && lane % 4 == 0 && i < t.sq) t.lse[(long long)i * t.lse_ss] = attn_lse(st.m[r] * c, l);
#if O_STAGE_BYTES > 0
#pragma unroll
    for (int j = 0; j < HDIM_V / 8; j++)
      v[r][j] = attn_pack(attn_scaled(o[4 * j + 2 * r], inv), attn_scaled(o[4 * j + 2 * r + 1], inv));
#else
    (void)stage;
    if (i >= t.sq) continue;
    T *row = t.o + (long long)i * a.o_stride.s + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < HDIM_V / 8; j++)
      *reinterpret_cast<unsigned *>(row + 8 * j) =
          attn_pack(attn_scaled(o[4 * j + 2 * r], inv), attn_scaled(o[4 * j + 2 * r + 1], inv));
#endif
  }
#if O_STAGE_BYTES > 0
  const int row0 = row_i0 - lane / 4; // the warp's first row
#pragma unroll
  for (int slab = 0; slab < (HDIM_V + 63) / 64; slab++) {
    constexpr int all = HDIM_V / 8;
    const int chunks = all - 8 * slab < 8 ? all - 8 * slab : 8; // 16-byte pieces of a row
    // Matrix m of each x4: rows 8 (m % 2) .., chunk 2 k + m / 2.
    const int srow = 8 * (lane / 8 % 2) + lane % 8;
#pragma unroll
    for (int k = 0; k < chunks / 2; k++) {
      const int chunk = 2 * k + lane / 16;
      stmatrix_x4(stage + srow * 128 + ((chunk ^ (srow % 8)) << 4), v[0][8 * slab + 2 * k],
                  v[1][8 * slab + 2 * k], v[0][8 * slab + 2 * k + 1], v[1][8 * slab + 2 * k + 1]);
    }
    __syncwarp();
#pragma unroll
    for (int it = 0; it < chunks / 2; it++) { // 16 rows x chunks pieces over 32 lanes
      const int idx = lane + 32 * it, row = idx / chunks, chunk = idx % chunks;
      uint4 piece;
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(piece.x), "=r"(piece.y), "=r"(piece.z), "=r"(piece.w)
                   : "r"(stage + row * 128 + ((chunk ^ (row % 8)) << 4)));
      if (row0 + row < t.sq)
        *reinterpret_cast<uint4 *>(t.o + (long long)(row0 + row) * a.o_stride.s + 64 * slab + 8 * chunk) =
            piece;
    }
    __syncwarp();
  }
#endif
}
