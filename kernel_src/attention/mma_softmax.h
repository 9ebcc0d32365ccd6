// attention/mma.cu's register side: a warp's scores as mma.sync C
// fragments, their transform and mask, the online softmax, and the P
// operand of P V.  Needs T and attention/problem.h.
//
// Fragment layout (m16n8): lane g = lane / 4, q = lane % 4 holds, of each
// 8-column block n, s[n][0..1] = row g, columns 2q, 2q + 1 and s[n][2..3] =
// row g + 8, the same columns.  A row's values are spread over the four
// lanes of a quad, so its max and sum need two xor shuffles (1, 2).
#pragma once
#include "attention/mma_smem.h"
#if defined(CKJIT_NVIDIA)

// Raw q.k sums -> scores in log2 units (attn_score), -inf where masked.
// i0: query row of s[n][0..1] (local; s[n][2..3] is i0 + 8); j0: key of
// s[0][0] (local, this lane's first column).  MASKED: the tile crosses a
// mask edge or the sequence end (attn_tile_masked), so test every element;
// otherwise every key is < sk and allowed.
//
// fold (ATTN_PLAIN_SCORES and a positive scale, uniform): the sums stay
// raw, and the softmax applies the scale inside its exponent, one FFMA
// (attn_online_softmax's c), so an unmasked tile needs no pass here.  A
// negative softmax_scale reverses the order of the raw sums (the max of
// the sums is not the max score), so it is applied here instead.
template <bool MASKED, int NT>
CKJIT_INLINE void attn_scores(float (&s)[NT][4], const ckjit_attention_args &a, const attn_tile &t,
                              const attn_scorer &sc, bool fold, int i0, int j0) {
  (void)a;
  if (!MASKED && fold) return;
#pragma unroll
  for (int n = 0; n < NT; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int i = i0 + (e >> 1) * 8, j = j0 + 8 * n + (e & 1);
      // Rows past sq (zero Q rows of the last tile, never stored) take the
      // bias of the last row instead of reading past the bias tensor.
      if (MASKED && !attn_allowed(a, t, i, j)) s[n][e] = -CKJIT_INF;
      else if (!fold) s[n][e] = attn_score(sc, s[n][e], i < t.sq ? i : t.sq - 1, j);
    }
}

// The max (MAX) or sum of v[0 .. N) as a pairwise tree: log2(N) dependent
// steps instead of N, for the few warps a scheduler has to hide them.
template <bool MAX, int N> CKJIT_INLINE float attn_tree(float (&v)[N]) {
#pragma unroll
  for (int w = 1; w < N; w *= 2)
#pragma unroll
    for (int n = 0; n + w < N; n += 2 * w) v[n] = MAX ? fmaxf(v[n], v[n + w]) : v[n] + v[n + w];
  return v[0];
}

// One key tile of the online softmax: m (the running max, log2 units) and
// l (this lane's share of the running sum) of rows g and g + 8 take the
// tile's scores c s (c: the folded scale, else 1; c > 0 keeps the order of
// s), which become their probabilities exp2(c s - m) (f32), and the O
// accumulators are rescaled to the new max.
//
// A row whose scores are all -inf so far keeps m = -inf; it then exponentiates
// against 0 instead of m, so its probabilities are 0 (not exp2(-inf + inf) =
// NaN) and so is every earlier term's factor.  fmaxf skips a NaN score, which
// still reaches l and O through its own exp2 (NaN); a +inf score makes the max
// +inf and exp2(inf - inf) = NaN, as documented.
template <int NT, int OT>
CKJIT_INLINE void attn_online_softmax(float (&s)[NT][4], float (&o)[OT][4], float (&m)[2],
                                      float (&l)[2], float c) {
#pragma unroll
  for (int h = 0; h < 2; h++) {
    float part[NT];
#pragma unroll
    for (int n = 0; n < NT; n++) part[n] = fmaxf(s[n][2 * h], s[n][2 * h + 1]);
    float mx = attn_tree<true>(part);
    mx = fmaxf(m[h], c * attn_quad_max(mx));
    const float base = mx == -CKJIT_INF ? 0.0f : mx;
    const float alpha = attn_exp2(m[h] - base); // 0 on the first tile (m = -inf)
    m[h] = mx;
#pragma unroll
    for (int n = 0; n < NT; n++) {
      s[n][2 * h] = attn_exp2(fmaf(c, s[n][2 * h], -base));
      s[n][2 * h + 1] = attn_exp2(fmaf(c, s[n][2 * h + 1], -base));
      part[n] = s[n][2 * h] + s[n][2 * h + 1];
    }
    l[h] = l[h] * alpha + attn_tree<false>(part);
#pragma unroll
    for (int j = 0; j < OT; j++) {
      o[j][2 * h] *= alpha;
      o[j][2 * h + 1] *= alpha;
    }
  }
}

// The A fragment (m16 x k16) of P for keys [16 kk, 16 kk + 16) of the
// tile: the C fragments of two 8-key blocks are, element for element, the
// A fragment's registers (rows g / g + 8 by columns 2q, 2q + 1 and
// 2q + 8, 2q + 9), once rounded to T (as the P V product reads P).
template <int NT>
CKJIT_INLINE void attn_p_frag(unsigned (&pa)[4], const float (&p)[NT][4], int kk) {
  pa[0] = attn_pack(p[2 * kk][0], p[2 * kk][1]);
  pa[1] = attn_pack(p[2 * kk][2], p[2 * kk][3]);
  pa[2] = attn_pack(p[2 * kk + 1][0], p[2 * kk + 1][1]);
  pa[3] = attn_pack(p[2 * kk + 1][2], p[2 * kk + 1][3]);
}

#endif
