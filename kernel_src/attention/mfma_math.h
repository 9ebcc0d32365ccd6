// attention_mfma's products and softmax: S^T = K Q^T and O^T += V^T P^T on
// 16x16x16 MFMA blocks, the score transform and mask, the online softmax
// in f32, and the epilogue.  Needs mfma_tiles.h.
//
// MFMA layout relied on (v_mfma_f32_16x16x16{f16,bf16_1k}, one block, no
// broadcast: cbsz = abid = blgp = 0), item e of a lane's 4-vector:
//   A[i][k]  lane i + 16 (k / 4), item k % 4      (i: the 16 rows of A)
//   B[k][j]  lane j + 16 (k / 4), item k % 4      (j: the 16 columns of B)
//   D[i][j]  lane j + 16 (i / 4), item i % 4
// A future AMD run must confirm these (ckjit has no AMD GPU yet).
//
// Why transposed products: with S^T = K Q^T (A = K rows = keys, B = Q^T
// columns = queries), lane l's accumulator holds query l % 16 and keys
// 4 (l / 16) + e: exactly the B operand P^T of O^T = V^T P^T for the same
// 16 keys, so P never leaves its registers; and O^T's accumulator keeps
// query l % 16 in lane l, the lane whose row max and sum it needs.  Each
// row's statistics live in the 4 lanes l % 16 + 16 g (two xor shuffles).
#pragma once

typedef float mfma_f32x4 __attribute__((ext_vector_type(4)));
typedef _Float16 mfma_f16x4 __attribute__((ext_vector_type(4)));

#define MFMA_WAVE_ROWS (BM / WARPS)        // query rows of one wave
#define MFMA_ROW_BLOCKS (MFMA_WAVE_ROWS / 16) // its 16-row MFMA blocks
#define MFMA_KEY_BLOCKS (BN / 16)
#define MFMA_QK_STEPS (HDIM / 16)          // k steps of S^T
#define MFMA_DIM_BLOCKS (HDIM_V / 16)      // 16-dimension blocks of O^T

typedef mfma_f32x4 mfma_scores_t[MFMA_ROW_BLOCKS][MFMA_KEY_BLOCKS];
typedef mfma_f32x4 mfma_out_t[MFMA_ROW_BLOCKS][MFMA_DIM_BLOCKS];
typedef mfma_quad mfma_q_frags_t[MFMA_ROW_BLOCKS][MFMA_QK_STEPS];

// 2^x.  The builtin (llvm.exp2) is one v_exp_f32 where the compiler
// allows it, where exp2f adds a denormal-range fixup per element (5 VALU
// ops); a probability under 2^-126 is nothing next to the row's 1.
// exp2(-inf) = 0, NaN stays NaN.
CKJIT_INLINE float mfma_exp2(float x) { return __builtin_exp2f(x); }

// acc += A B for one 16x16x16 block.
CKJIT_INLINE mfma_f32x4 mfma_16x16x16(mfma_quad a, mfma_quad b, mfma_f32x4 acc) {
  if constexpr (ckjit_is_bf16<T>) {
#if defined(__gfx908__)
    // gfx908 has no bf16 MFMA of this shape; the host sends bf16 there to
    // attention_simt (no CKJIT_MATRIX_MFMA_BF16), and, as gemm_mfma, this
    // specialization traps rather than compute wrongly.
    __builtin_trap();
    return acc;
#else
    return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, acc, 0, 0, 0);
#endif
  } else {
    mfma_f16x4 x, y;
    __builtin_memcpy(&x, &a, 8);
    __builtin_memcpy(&y, &b, 8);
    return __builtin_amdgcn_mfma_f32_16x16x16f16(x, y, acc, 0, 0, 0);
  }
}

// f32 to T's bits, nearest even, as ckjit_from_float (a NaN stays a quiet
// NaN), but without a branch: the compiler turned the prelude's bf16 NaN
// test into a divergent branch per element.
CKJIT_INLINE unsigned short mfma_to_bits(float f) {
  if constexpr (ckjit_is_bf16<T>) {
    const unsigned u = __float_as_uint(f);
    const unsigned rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (unsigned short)(f != f ? (u >> 16) | 0x40u : rounded);
  } else {
    return ckjit_from_float<T>(f).bits;
  }
}

// Four probabilities rounded (nearest even) to T: an operand of P V.
CKJIT_INLINE mfma_quad mfma_round_p(const mfma_f32x4 &p) {
  mfma_quad q;
  if constexpr (ckjit_is_bf16<T>) {
#pragma unroll
    for (int e = 0; e < 4; e++) q[e] = (short)mfma_to_bits(p[e]);
  } else {
    const mfma_f16x4 h = {(_Float16)p[0], (_Float16)p[1], (_Float16)p[2], (_Float16)p[3]};
    __builtin_memcpy(&q, &h, 8);
  }
  return q;
}

// This wave's Q operands, kept in registers for the whole key loop.
CKJIT_INLINE void mfma_read_q(mfma_q_frags_t &qf, const unsigned short *q_lds, int wave_row0,
                              int lane) {
#pragma unroll
  for (int qb = 0; qb < MFMA_ROW_BLOCKS; qb++)
#pragma unroll
    for (int ks = 0; ks < MFMA_QK_STEPS; ks++)
      qf[qb][ks] = mfma_q_tile::read(q_lds, wave_row0 + 16 * qb + lane % 16, 4 * ks + lane / 16);
}

// s[qb][kb] = raw q.k, item e of lane l: query wave_row0 + 16 qb + l % 16,
// key 16 kb + 4 (l / 16) + e of the tile.  The k step is the outer loop so
// consecutive MFMAs write different accumulators.
CKJIT_INLINE void mfma_scores(mfma_scores_t &s, const unsigned short *k_lds, const mfma_q_frags_t &qf,
                              int lane) {
#pragma unroll
  for (int qb = 0; qb < MFMA_ROW_BLOCKS; qb++)
#pragma unroll
    for (int kb = 0; kb < MFMA_KEY_BLOCKS; kb++) s[qb][kb] = mfma_f32x4{0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int ks = 0; ks < MFMA_QK_STEPS; ks++)
#pragma unroll
    for (int kb = 0; kb < MFMA_KEY_BLOCKS; kb++) {
      const mfma_quad kf = mfma_q_tile::read(k_lds, 16 * kb + lane % 16, 4 * ks + lane / 16);
#pragma unroll
      for (int qb = 0; qb < MFMA_ROW_BLOCKS; qb++) s[qb][kb] = mfma_16x16x16(kf, qf[qb][ks], s[qb][kb]);
    }
}

// Raw scores to log2-unit logits (attn_score), masked keys -inf.  The
// per-element mask is compiled into the MASKED copy only, which runs on the
// tiles that need it (attn_tile_masked); row_i is the entry-local query row
// of the lane's row block 0.  A row or key outside the sequence is clamped
// for the bias read only: its logit is either masked or never stored.
template <bool MASKED>
CKJIT_INLINE void mfma_logits(mfma_scores_t &s, const ckjit_attention_args &a, const attn_tile &t,
                              const attn_scorer &sc, int row_i, int n0, int lane) {
#pragma unroll
  for (int qb = 0; qb < MFMA_ROW_BLOCKS; qb++)
#pragma unroll
    for (int kb = 0; kb < MFMA_KEY_BLOCKS; kb++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int i = row_i + 16 * qb, j = n0 + 16 * kb + 4 * (lane / 16) + e;
        float x = s[qb][kb][e];
#if ATTN_PLAIN_SCORES
        x *= sc.scale_log2;
#else
        x = attn_score(sc, x, i < t.sq ? i : t.sq - 1, j < t.sk ? j : t.sk - 1);
#endif
        if (MASKED && !attn_allowed(a, t, i, j)) x = -CKJIT_INF;
        s[qb][kb][e] = x;
      }
}

// Each lane's query row per row block: the running max (log2 units) and
// the lane's share of the running sum (its 4 keys of every 16; the four
// shares are added in the epilogue).
struct mfma_rows {
  float m[MFMA_ROW_BLOCKS], l[MFMA_ROW_BLOCKS];
};

// Logits to probabilities against the updated row max; o and the sums are
// rescaled by exp2(old max - new max).  A row that has seen only masked
// keys keeps max -inf and takes 0 as reference: exp2 gives 0, not NaN.
// fmaxf skips a NaN logit, whose exp2 then carries it into l and O; a
// +inf one makes the reference +inf and exp2(inf - inf) NaN, as ckjit.h
// specifies.  When every factor of the wave is exactly 1 (no row's max
// moved, the common case after the first tiles), o's rescale is skipped:
// on gfx90a o lives in AGPRs, a read, a multiply and a write per element.
CKJIT_INLINE void mfma_online_softmax(mfma_scores_t &s, mfma_out_t &o, mfma_rows &st) {
  float rescale[MFMA_ROW_BLOCKS];
  bool moved = false;
#pragma unroll
  for (int qb = 0; qb < MFMA_ROW_BLOCKS; qb++) {
    float mx = st.m[qb];
#pragma unroll
    for (int kb = 0; kb < MFMA_KEY_BLOCKS; kb++)
      mx = fmaxf(mx, fmaxf(fmaxf(s[qb][kb][0], s[qb][kb][1]), fmaxf(s[qb][kb][2], s[qb][kb][3])));
    mx = fmaxf(mx, ckjit_shfl_xor(mx, 16));
    mx = fmaxf(mx, ckjit_shfl_xor(mx, 32));
    const float ref = mx == -CKJIT_INF ? 0.0f : mx;
    rescale[qb] = mfma_exp2(st.m[qb] - ref);
    moved |= rescale[qb] != 1.0f; // a NaN factor counts: it must reach o
    st.m[qb] = mx;
    float sum = 0.0f;
#pragma unroll
    for (int kb = 0; kb < MFMA_KEY_BLOCKS; kb++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        s[qb][kb][e] = mfma_exp2(s[qb][kb][e] - ref);
        sum += s[qb][kb][e];
      }
    st.l[qb] = st.l[qb] * rescale[qb] + sum;
  }
  if (__ballot(moved) == 0) return; // wave-uniform
#pragma unroll
  for (int qb = 0; qb < MFMA_ROW_BLOCKS; qb++)
#pragma unroll
    for (int db = 0; db < MFMA_DIM_BLOCKS; db++) o[qb][db] *= rescale[qb];
}

// o += P V: P (f32 in s) rounded to T, V^T from LDS.  Key block outer so
// consecutive MFMAs write different accumulators.
CKJIT_INLINE void mfma_pv(mfma_out_t &o, const mfma_scores_t &s, const unsigned short *vt_lds,
                          int lane) {
#pragma unroll
  for (int kb = 0; kb < MFMA_KEY_BLOCKS; kb++) {
    mfma_quad p[MFMA_ROW_BLOCKS];
#pragma unroll
    for (int qb = 0; qb < MFMA_ROW_BLOCKS; qb++) p[qb] = mfma_round_p(s[qb][kb]);
#pragma unroll
    for (int db = 0; db < MFMA_DIM_BLOCKS; db++) {
      const mfma_quad vf = mfma_vt_tile::read(vt_lds, 16 * db + lane % 16, 4 * kb + lane / 16);
#pragma unroll
      for (int qb = 0; qb < MFMA_ROW_BLOCKS; qb++) o[qb][db] = mfma_16x16x16(vf, p[qb], o[qb][db]);
    }
  }
}

// O = o / l rounded to T for the rows inside the sequence, and the LSE.
// Lane l writes dims 16 db + 4 (l / 16) .. + 3 of its row: one 8-byte
// store each.  A row whose keys were all masked (l = 0) writes exact
// zeros: its o may hold 0 * inf = NaN from a V element of a key other rows
// see, and ckjit.h promises O = 0 there.
CKJIT_INLINE void mfma_store_rows(const ckjit_attention_args &a, const attn_tile &t,
                                  const mfma_out_t &o, const mfma_rows &st, int row_i, int lane) {
#pragma unroll
  for (int qb = 0; qb < MFMA_ROW_BLOCKS; qb++) {
    float l = st.l[qb];
    l += ckjit_shfl_xor(l, 16);
    l += ckjit_shfl_xor(l, 32);
    const int i = row_i + 16 * qb;
    if (i >= t.sq) continue;
    const float inv = attn_inv_l(l);
    T *row = t.o + (long long)i * a.o_stride.s + 4 * (lane / 16);
#pragma unroll
    for (int db = 0; db < MFMA_DIM_BLOCKS; db++) {
      unsigned short out[4];
#pragma unroll
      for (int e = 0; e < 4; e++)
        out[e] = mfma_to_bits(attn_scaled(o[qb][db][e], inv));
      const mfma_u32x2 packed = {out[0] | (unsigned)out[1] << 16, out[2] | (unsigned)out[3] << 16};
      *(__attribute__((address_space(1))) mfma_u32x2 *)(row + 16 * db) = packed;
    }
    if (t.lse && lane < 16) t.lse[(long long)i * t.lse_ss] = attn_lse(st.m[qb], l);
  }
}
