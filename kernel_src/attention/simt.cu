// attention_simt: fused attention forward on plain FMA units.  The portable
// path (f32, f16, bf16; NVIDIA and AMD; any strides, any head-dim stride)
// and the f32 one, so it aims at reference quality before speed.  The
// semantics are ckjit_attention's (ckjit.h), through attention/problem.h.
//
// Layout:   a block of WARPS 32-lane groups takes a BM-row query tile,
//           grid-stride over the tiles.  Eight consecutive lanes share a
//           query row (an 8-aligned group of lanes sits inside one warp or
//           wave on either warp size, so their shuffles stay local), which
//           makes a pass of WARPS * 4 rows; a BM past that runs more
//           passes, each streaming the keys again, so registers stay
//           bounded for any spec.  Lane l of a row holds the dims
//           4 (l + 8c) + e (e < 4) of its q and of its O, in f32 registers.
// Keys:     K and V tiles of BN keys are staged in shared memory as f32
//           (CKJIT_ATTENTION_SIMT_SMEM), a 32-lane group per key row, so the
//           reads coalesce when the head-dim stride is 1.  A lane sums its
//           dims of q.k for 8 keys at once, then a reduce-scatter over the
//           row's lanes leaves lane l the score of key 8c + l: 7 shuffles
//           per 8 scores instead of 24, and the softmax work is not repeated
//           on every lane.
// Softmax:  online, in f32 and log2 units (exp2f): the row's lanes share
//           its max (butterfly, so the same bits everywhere); each keeps its
//           own part of the sum, added up once at the end.  P stays f32
//           (never rounded); p V gets each p from its lane by a shuffle.
// Numerics: masked keys and rows past the sequence score -inf without
//           reading anything (bias, Q).  A row with no key left has max
//           -inf: the exponent's base is then 0, so p = 0, O = 0 and
//           LSE = -inf, not NaN.  The max propagates NaN, and +inf - +inf
//           is NaN, so a NaN or +inf score makes its row NaN.  p V skips
//           keys whose p is 0, so a masked key's V (NaN, or a key past the
//           tile's range, zeroed) never reaches O through 0 * NaN.
#include "core/prelude.h"
#include "abi/attention_args.h"
// @PARAMETERS@

typedef DTYPE T;
#include "attention/problem.h"
#include "attention/simt_lanes.h"

// Occupancy, the launch bound's second argument.  NVIDIA (blocks per SM,
// at most 16, the fewest any target keeps): as many as fit at 64 registers
// a thread, 128 when the q and O slices are 64 floats; ptxas then spills a
// few bytes of long-lived values at most (the key loop needs no more).
// AMD (waves per SIMD): 2 where the LDS holds blocks enough for that (two
// 32 KiB tiles of 4 waves), else 1; without a bound the compiler spends up
// to 512 VGPRs on scheduling and halves the resident waves.
#if defined(CKJIT_NVIDIA)
#define SIMT_REGISTERS (HDIM + HDIM_V <= 256 ? 64 : 128)
#define SIMT_BLOCKS (65536 / (THREADS * SIMT_REGISTERS))
#define SIMT_OCCUPANCY (SIMT_BLOCKS < 1 ? 1 : SIMT_BLOCKS > 16 ? 16 : SIMT_BLOCKS)
#else
#define SIMT_LDS_BLOCKS (65536 / CKJIT_ATTENTION_SIMT_SMEM(BM, BN, STAGES, HDIM, HDIM_V, 4))
#define SIMT_OCCUPANCY (SIMT_LDS_BLOCKS * THREADS >= 512 ? 2 : 1)
#endif

// ---- one pass: rows of the tile, every key tile ----------------------------
// Tile row `r` (this lane's) over the keys [begin, end), then its O and LSE.
// Every thread of the block runs every key tile (the barriers), rows past
// the tile or the sequence on zeros, storing nothing.
CKJIT_INLINE void attend_rows(const ckjit_attention_args &a, const attn_tile &t,
                              const attn_scorer &scorer, int begin, int end, int r,
                              float *k_tile, float *v_tile) {
  const int lane = (int)(threadIdx.x % ROW_LANES);
  const int i = t.m0 + r;
  const bool row_ok = r < BM && i < t.sq;
  float q[Q_VECS][4];
  load_q(q, t.q + i * a.q_stride.s, a.q_stride.d, lane, row_ok);
  float o[O_VECS][4] = {};
  float m = -CKJIT_INF; // the row's running max (log2 units), shared by its lanes
  float l = 0.0f;       // this lane's part of the running sum
  for (int n0 = begin; n0 < end; n0 += BN) {
    stage_keys<HDIM>(k_tile, a, t, false, n0, end);
    stage_keys<HDIM_V>(v_tile, a, t, true, n0, end);
    __syncthreads();
    // Scores: lane keeps key n0 + 8c + lane as s[c].
    const bool edge = attn_tile_masked(a, t, n0, BN);
    float s[SCORES];
#pragma unroll
    for (int c = 0; c < SCORES; c++) {
      const float acc = qk_eight_keys(k_tile + c * ROW_LANES * HDIM, q, lane);
      const int j = n0 + c * ROW_LANES + lane;
      const bool seen = row_ok && (!edge || attn_allowed(a, t, i, j));
      s[c] = seen ? attn_score(scorer, acc, i, j) : -CKJIT_INF;
    }
    // Online softmax: rescale what was summed to the new max.
    float tile_max = s[0];
#pragma unroll
    for (int c = 1; c < SCORES; c++) tile_max = ckjit_nan_max(tile_max, s[c]);
    const float m_new = ckjit_nan_max(m, row_max(tile_max));
    const float base = m_new == -CKJIT_INF ? 0.0f : m_new; // no key yet: p = 0, not NaN
    const float alpha = exp2f(m - base);
    m = m_new;
    l *= alpha;
#pragma unroll
    for (int c = 0; c < O_VECS; c++)
#pragma unroll
      for (int e = 0; e < 4; e++) o[c][e] *= alpha;
#pragma unroll
    for (int c = 0; c < SCORES; c++) {
      s[c] = exp2f(s[c] - base);
      l += s[c];
    }
    // O += p V: every lane takes each key's p from the lane that holds it
    // (all lanes shuffle; only the FMAs are skipped for p = 0).
#pragma unroll
    for (int c = 0; c < SCORES; c++) {
#pragma unroll
      for (int src = 0; src < ROW_LANES; src++) {
        const float p = row_lane_value(s[c], src);
        if (p == 0.0f) continue;
        const float *v_row = v_tile + (c * ROW_LANES + src) * HDIM_V + 4 * lane;
#pragma unroll
        for (int d = 0; d < O_VECS; d++) {
          const float4 v = *reinterpret_cast<const float4 *>(v_row + 4 * ROW_LANES * d);
          o[d][0] += p * v.x;
          o[d][1] += p * v.y;
          o[d][2] += p * v.z;
          o[d][3] += p * v.w;
        }
      }
    }
    __syncthreads(); // the next key tile overwrites K and V
  }
  l = row_sum(l);
  if (!row_ok) return;
  const float inv_l = attn_inv_l(l) * t.v_scale; // (KV8: V's scale, a factor of every O term)
  T *out = t.o + i * a.o_stride.s + 4 * lane * a.o_stride.d;
#pragma unroll
  for (int c = 0; c < O_VECS; c++)
#pragma unroll
    for (int e = 0; e < 4; e++)
      out[(4 * ROW_LANES * c + e) * a.o_stride.d] = ckjit_from_float<T>(attn_scaled(o[c][e], inv_l));
  if (t.lse && lane == 0) t.lse[i * t.lse_ss] = attn_lse(m, l);
}

extern "C" __global__ void __launch_bounds__(THREADS, SIMT_OCCUPANCY)
ckjit_attention(const CKJIT_GRID_CONSTANT ckjit_attention_args a) {
  // CKJIT_ATTENTION_SIMT_SMEM: the K tile (BN x HDIM), then the V tile.
  extern __shared__ __attribute__((aligned(16))) float attn_smem[];
  float *const k_tile = attn_smem;
  float *const v_tile = attn_smem + BN * HDIM;
  const int row_in_pass = (int)(threadIdx.x / ROW_LANES);
  const long long total = attn_tile_count(a);
  for (long long t = attn_walk_first(a); t < total; t = attn_walk_next(a, t)) {
    attn_tile tile;
    if (!attn_tile_at(a, t, tile)) continue; // the same for the whole block
    int begin, end;
    attn_key_range(a, tile, BN, begin, end);
    const attn_scorer scorer = attn_make_scorer(a, tile);
    for (int pass = 0; pass < PASSES; pass++)
      attend_rows(a, tile, scorer, begin, end, pass * ROWS_PER_PASS + row_in_pass, k_tile, v_tile);
  }
}
