// attention_simt's lane layout and the steps that move data through it
// (see simt.cu): eight consecutive lanes share a query row; lane l holds
// the dims 4 (l + 8c) + e (e < 4) of its row's q and O; K and V tiles are
// staged in shared memory as f32 rows.  Needs T, HDIM, HDIM_V, BN, BM and
// WARPS.  Lane indices are taken from threadIdx.x unsigned: from a signed
// int the compiler must allow a negative lane and gives up folding the
// shared-memory offsets into the loads (a register per key and dim).
#pragma once
#include "core/prelude.h"

enum {
  THREADS = WARPS * 32,
  ROW_LANES = 8, // lanes sharing one query row
  ROWS_PER_PASS = THREADS / ROW_LANES,
  PASSES = (BM + ROWS_PER_PASS - 1) / ROWS_PER_PASS,
  Q_VECS = HDIM / (4 * ROW_LANES),   // 4-dim pieces of q per lane
  O_VECS = HDIM_V / (4 * ROW_LANES), // of O
  SCORES = BN / ROW_LANES,           // scores a lane keeps per key tile
};
static_assert(HDIM % (4 * ROW_LANES) == 0 && HDIM_V % (4 * ROW_LANES) == 0,
              "attention_simt: head dims must be multiples of 32");
static_assert(BN % ROW_LANES == 0, "attention_simt: bn must be a multiple of 8");

// ---- shuffles inside a row's 8 lanes ---------------------------------------
// xor masks below 8 and width-8 sources never leave the 8-aligned group.
CKJIT_INLINE float row_lane_value(float v, int src_lane) {
#if defined(CKJIT_NVIDIA)
  return __shfl_sync(0xffffffffu, v, src_lane, ROW_LANES);
#else
  return __shfl(v, src_lane, ROW_LANES);
#endif
}

CKJIT_INLINE float row_max(float v) {
#pragma unroll
  for (int m = 1; m < ROW_LANES; m *= 2) v = ckjit_nan_max(v, ckjit_shfl_xor(v, m));
  return v;
}

CKJIT_INLINE float row_sum(float v) {
#pragma unroll
  for (int m = 1; m < ROW_LANES; m *= 2) v += ckjit_shfl_xor(v, m);
  return v;
}

// ---- global memory ----------------------------------------------------------
// Addresses are a per-thread pointer plus offsets that are the same on every
// lane (in scalar registers on AMD): written as one product of a per-lane
// index and the stride, the compilers hoist one 64-bit offset per element
// out of the tile loop and keep it live through the key loop.

// Keys [n0, n0 + BN) of K (`v`: V), DIM wide, as f32 rows of `tile`: one
// 32-lane group per key, lanes along the head dim.  Keys at or past `end`
// are zeros: no row of the tile sees them, and they may lie past the
// sequence; so are keys whose page lies outside the pool (never read).
template <int DIM>
CKJIT_INLINE void stage_keys(float *tile, const ckjit_attention_args &a, const attn_tile &t, bool v,
                             int n0, int end) {
  const int lane = (int)(threadIdx.x % 32u), group = (int)(threadIdx.x / 32u);
  const long long dim_stride = v ? a.v_stride.d : a.k_stride.d;
  float *thread_out = tile + group * DIM + lane;
#pragma unroll 4
  for (int step = 0; step * WARPS < BN; step++) {
    const int jj = group + step * WARPS; // this thread's key in the tile
    if (jj >= BN) break;
    float *out = thread_out + step * WARPS * DIM;
    const attn_kv_t *row = n0 + jj < end ? attn_key_row(a, t, v, n0 + jj) : nullptr;
    if (row) {
      const attn_kv_t *in = row + lane * dim_stride;
#pragma unroll
      for (int c = 0; c < DIM / 32; c++) out[32 * c] = attn_kv_float(in[32 * c * dim_stride]);
    } else {
#pragma unroll
      for (int c = 0; c < DIM / 32; c++) out[32 * c] = 0.0f;
    }
  }
}

// This lane's dims of query row `row` (zeros when the row is not computed:
// nothing is read).
CKJIT_INLINE void load_q(float (&q)[Q_VECS][4], const T *row, long long dim_stride, int lane,
                         bool row_ok) {
  const T *lane_row = row + 4 * lane * dim_stride;
#pragma unroll
  for (int c = 0; c < Q_VECS; c++)
#pragma unroll
    for (int e = 0; e < 4; e++)
      q[c][e] = row_ok ? ckjit_to_float(lane_row[(4 * ROW_LANES * c + e) * dim_stride]) : 0.0f;
}

// q.k of this lane's row with the 8 staged keys at `keys`, and the lane's
// share of the result: the whole sum for key `lane`.  Each lane first sums
// its own dims for all 8 keys (the 8 lanes read 128 contiguous bytes of one
// key at a time); then three halving steps each trade half of the partial
// sums with the partner lane, keeping the keys whose index bit matches the
// lane's bit, until one key is left.
CKJIT_INLINE float qk_eight_keys(const float *keys, const float (&q)[Q_VECS][4], int lane) {
  float part[ROW_LANES];
#pragma unroll
  for (int k = 0; k < ROW_LANES; k++) {
    float acc = 0.0f;
#pragma unroll
    for (int c = 0; c < Q_VECS; c++) {
      const float4 kv =
          *reinterpret_cast<const float4 *>(keys + k * HDIM + 4 * (lane + ROW_LANES * c));
      acc += q[c][0] * kv.x;
      acc += q[c][1] * kv.y;
      acc += q[c][2] * kv.z;
      acc += q[c][3] * kv.w;
    }
    part[k] = acc;
  }
#pragma unroll
  for (int half = ROW_LANES / 2; half >= 1; half /= 2) {
    const bool upper = (lane & half) != 0;
#pragma unroll
    for (int k = 0; k < half; k++) {
      // Both values first, then a select of values: a select of two array
      // elements can become a dynamically indexed array (a select chain).
      const float low = part[k], high = part[k + half];
      const float keep = upper ? high : low;
      const float give = upper ? low : high;
      part[k] = keep + ckjit_shfl_xor(give, half); // key k + (lane's bits >= half)
    }
  }
  return part[0];
}
