// topk_softmax family: MoE gating (CK Tile example 09).
//
// Problem:  for each token t < tokens, p = softmax(x[t][0 .. experts)) in f32
//           (max subtracted), then the k largest p in descending order, ties
//           to the lower expert index: weights[t*k + i] (f32, divided by the
//           sum of the k when renormalize) and indices[t*k + i] (int32, or
//           int64 when index_i64).  experts <= EXPERTS, 1 <= k <= min(8, experts).
// Policy:   one group of LANES lanes per token (a sub-warp; LANES <= 32, so
//           it is the same code for 32- and 64-lane warps); lane l holds the
//           EXPERTS/LANES values (VPL) of experts ((c*LANES + l)*VEC + s) in
//           registers, read as VEC-element vectors, so a group reads
//           LANES*VEC contiguous elements per load.  The host picks VEC so
//           that the row start, ld_x and experts are multiples of it: a
//           vector is then wholly inside or wholly past the row (the tail of
//           the power-of-two class is masked per vector).  THREADS/LANES
//           tokens per block, grid-stride over tokens (64-bit indices).
// Selection: k rounds of a group argmax over order-preserving u32 keys of p
//           (xor shuffles with masks < LANES stay inside the group on both
//           vendors); the winner's owner zeroes its key; round r's result is
//           kept by lane r (LANES >= 8 >= k), so the stores are contiguous.
// NaN:      a row holding a NaN or +inf, or all -inf, has a NaN sum, so all
//           its p are NaN (as torch.softmax); NaN ranks above every number
//           (as torch.topk), so such a row gives weights NaN and indices
//           0, 1, ..., k-1 (ties: lower index first).  Deterministic.
// Kernel arguments: CKJIT_TOPK_SOFTMAX_ARGS in abi/topk_softmax_args.h.
#include "core/prelude.h"
#include "abi/topk_softmax_args.h"
// @PARAMETERS@

typedef DTYPE T;
// EXPERTS: power-of-two class >= the runtime experts

enum {
  VPL = EXPERTS / LANES,       // values per lane
  CHUNKS = VPL / VEC,          // vector loads per lane
  TOKENS_PER_BLOCK = THREADS / LANES,
};
// Slot j of a lane holds expert lane*VEC + SLOT_OFF(j).
#define SLOT_OFF(j) (((j) / VEC) * LANES * VEC + (j) % VEC)
static_assert(VPL >= VEC && VPL % VEC == 0, "VEC must divide EXPERTS / LANES");
static_assert(LANES >= 8 && LANES <= 32 && (LANES & (LANES - 1)) == 0, "LANES: 8, 16 or 32");
static_assert(THREADS % CKJIT_WARP_SIZE == 0, "whole warps only: every lane runs the shuffles");

// Keys: 0 = already taken; p >= +0 maps to bits(p) + 1 (for non-negative
// floats the bit pattern orders like the value); NaN maps to the largest key.
#define KEY_NAN 0xffffffffu

CKJIT_INLINE unsigned shfl_xor_u32(unsigned v, int mask) {
#if defined(CKJIT_NVIDIA)
  return __shfl_xor_sync(0xffffffffu, v, mask);
#else
  return (unsigned)__shfl_xor((int)v, mask);
#endif
}

CKJIT_INLINE float group_max(float v) {
#pragma unroll
  for (int m = LANES / 2; m > 0; m /= 2) v = fmaxf(v, ckjit_shfl_xor(v, m));
  return v;
}

// Butterfly sum: every lane ends with the same bits (each step adds the same
// two values on both sides, and + is commutative).
CKJIT_INLINE float group_sum(float v) {
#pragma unroll
  for (int m = LANES / 2; m > 0; m /= 2) v += ckjit_shfl_xor(v, m);
  return v;
}

extern "C" __global__ void __launch_bounds__(THREADS)
ckjit_topk_softmax(const T *__restrict__ x, long long ld_x, long long tokens, int experts, int k,
                   int renormalize, float *__restrict__ weights, void *__restrict__ indices,
                   int index_i64) {
  const int lane = (int)threadIdx.x % LANES;
  const int group = (int)threadIdx.x / LANES;
  const float neg_inf = -__uint_as_float(0x7f800000u);
  // The loop bound is uniform over the block, so every lane runs every
  // shuffle (required by __shfl_xor_sync's full mask); groups past the last
  // token compute on masked values and store nothing.
#pragma unroll 1
  for (long long t0 = (long long)blockIdx.x * TOKENS_PER_BLOCK; t0 < tokens;
       t0 += (long long)gridDim.x * TOKENS_PER_BLOCK) {
    const long long t = t0 + group;
    const bool valid = t < tokens;
    const T *xr = x + (valid ? t : 0) * ld_x;

    // Loads (all in flight before any math).  Slot j = c*VEC + s holds
    // expert lane*VEC + c*LANES*VEC + s: increasing j is increasing expert.
    float v[VPL];
#pragma unroll
    for (int c = 0; c < CHUNKS; c++) {
      const int e0 = (c * LANES + lane) * VEC;
      const bool in = valid && e0 < experts;
      if (in) {
        const ckjit_vec<T, VEC> w = ckjit_load<T, VEC>(xr + e0);
#pragma unroll
        for (int s = 0; s < VEC; s++) v[c * VEC + s] = ckjit_to_float(w.v[s]);
      } else {
#pragma unroll
        for (int s = 0; s < VEC; s++) v[c * VEC + s] = neg_inf;
      }
    }

    // Softmax.  fmaxf drops NaN, but a NaN (or an inf - inf) then reaches
    // the sum, which makes every p NaN: the whole row is NaN either way.
    float m = v[0];
#pragma unroll
    for (int j = 1; j < VPL; j++) m = fmaxf(m, v[j]);
    m = group_max(m);
    // Masked values are -inf, so they add exp(-inf) = 0 (or NaN to a row
    // that is NaN already); no branch per value.
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < VPL; j++) {
      v[j] = expf(v[j] - m);
      sum += v[j];
    }
    sum = group_sum(sum);
    // p = e * (1/sum): monotone in e like e / sum, one division per lane.
    const float inv = 1.0f / sum;
    // The tail needs no mask here: its p is 0 (or NaN in a NaN row) and its
    // expert indices are past every real one, so the index tie-break ranks
    // it below the real experts, and k <= experts never reaches it.
    unsigned key[VPL];
#pragma unroll
    for (int j = 0; j < VPL; j++) {
      const float p = v[j] * inv;
      key[j] = p != p ? KEY_NAN : __float_as_uint(p) + 1u;
    }

    // k rounds of group argmax.  Within a lane the strict '>' over
    // increasing slots keeps the lowest expert of equal keys; across lanes
    // the expert index breaks ties.  (key, expert) pairs are distinct, so
    // every lane of the group agrees on the winner.
    float my_w = 0.0f;
    int my_i = 0;
    int taken = -1; // slot offset this lane must clear (it won last round)
#pragma unroll 1
    for (int r = 0; r < k; r++) {
      unsigned best_key = 0u;
      int best_off = 0; // expert offset of the lane's best from lane*VEC
#pragma unroll
      for (int j = 0; j < VPL; j++) {
        const unsigned kj = SLOT_OFF(j) == taken ? 0u : key[j];
        key[j] = kj;
        if (kj > best_key) best_key = kj, best_off = SLOT_OFF(j);
      }
      const int mine = lane * VEC + best_off;
      unsigned gk = best_key;
      int gi = mine;
#pragma unroll
      for (int msk = LANES / 2; msk > 0; msk /= 2) {
        const unsigned ok = shfl_xor_u32(gk, msk);
        const int oi = (int)shfl_xor_u32((unsigned)gi, msk);
        const bool take = (ok > gk) | ((ok == gk) & (oi < gi)); // no branches
        gk = take ? ok : gk;
        gi = take ? oi : gi;
      }
      taken = gi == mine ? best_off : -1;
      if (lane == r) {
        my_w = gk == KEY_NAN ? __uint_as_float(0x7fc00000u) : __uint_as_float(gk - 1u);
        my_i = gi;
      }
    }

    if (renormalize) {
      const float total = group_sum(lane < k ? my_w : 0.0f);
      my_w = my_w / total;
    }
    if (valid && lane < k) {
      const long long o = t * k + lane;
      weights[o] = my_w;
      if (index_i64) static_cast<long long *>(indices)[o] = my_i;
      else static_cast<int *>(indices)[o] = my_i;
    }
  }
}
CKJIT_ABI_KERNEL(ckjit_topk_softmax, CKJIT_TOPK_SOFTMAX_ARGS);
