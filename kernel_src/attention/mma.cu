// Fused attention forward on NVIDIA tensor cores (sm_80+): mma.sync
// m16n8k16, f16/bf16 in, f32 scores and accumulation (FlashAttention-2
// design).
//
// Problem:  O = softmax(transform(Q K^T)) V and LSE per (batch entry, query
//           head, query row), as ckjit.h documents; attention/problem.h has
//           the tiles, lengths, masks and score transform every pipeline shares.
// Policy:   a block of WARPS warps owns a tile of BM = 16 * WARPS query rows
//           of one (batch entry, head); each warp 16 rows, walking the tile's
//           key range BN keys a step.  Tiles are walked grid-stride.
// Pipeline: the Q tile, then STAGES (K tile, V tile) buffers in a ring,
//           filled by cp.async (rows past the sequences zero-filled); one
//           barrier per key step: the step's tile is complete and the buffer
//           refilled next was read by every warp the step before.  Shared
//           rows are XOR-swizzled in 16-byte chunks (attention/mma_smem.h),
//           so ldmatrix reads meet no bank conflicts.
// Per warp and key step: S = Q K^T (Q fragments kept in registers up to
//           head dim 128, read from shared memory per k step beyond; K by
//           ldmatrix), the score transform and, on tiles crossing a mask
//           edge or the sequence end, the mask; the online softmax in f32
//           (attention/mma_softmax.h); P rounded to T in registers as the A
//           operand and O += P V (V by ldmatrix.trans).
// Epilogue: O / l rounded to T once, staged through the warp's own Q rows
//           into 16-byte stores of the rows < sq; LSE when asked for.
//
// Kernel argument: ckjit_attention_args a, by value (abi/attention_args.h).
#include "core/prelude.h"
#include "abi/attention_args.h"
// @PARAMETERS@

typedef DTYPE T;
#include "attention/problem.h"

#define THREADS (WARPS * 32)

#if defined(CKJIT_NVIDIA)
#include "core/mma_sync.h"
#include "attention/mma_smem.h"
#include "attention/mma_softmax.h"

enum { NT = BN / 8 }; // 8-key blocks of S per warp (the tile sizes: attention/mma_smem.h)
static_assert(BM == 16 * WARPS, "one warp per 16 query rows");
static_assert(BN % 16 == 0 && HDIM % 16 == 0 && HDIM_V % 16 == 0, "whole k16 steps");
#endif

extern "C" __global__ void __launch_bounds__(THREADS)
ckjit_attention(const CKJIT_GRID_CONSTANT ckjit_attention_args a) {
#if defined(CKJIT_NVIDIA) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) unsigned char smem_raw[];
  // Shared addresses: the Q tile, then the ring (stage s: K, then V).
  const unsigned q_tile = smem_addr(smem_raw);
  const unsigned kv_ring = q_tile + Q_BYTES;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wrow = warp * 16; // the warp's first row in the tile
  const attn_ldsm_lane<QC, 0> q_lane;
  const attn_ldsm_lane<QC, 1> k_lane;
  const attn_ldsm_lane<VC, 0> v_lane;
  const long long total = attn_tile_count(a);
  // Scale folded into the softmax's exponent (attn_scores): plain scores
  // and a positive scale.
  const bool fold = ATTN_PLAIN_SCORES && a.scale_log2 > 0.0f;

#pragma unroll 1
  for (long long tile_index = attn_walk_first(a); tile_index < total;
       tile_index = attn_walk_next(a, tile_index)) {
    attn_tile t;
    if (!attn_tile_at(a, tile_index, t)) continue; // the same for the whole block
    int begin, end;
    attn_key_range(a, t, BN, begin, end);
    const int n_tiles = end > begin ? (end - begin + BN - 1) / BN : 0;
    const attn_scorer sc = attn_make_scorer(a, t);
    // Key step kt into ring stage `stage`; keys past sk read as zero.
    auto load_kv = [&](int kt, int stage) {
      const int n0 = begin + kt * BN;
      const unsigned k_dst = kv_ring + stage * STAGE_BYTES;
      attn_copy_rows<BN, QC>(k_dst, [&](int r) { return attn_key_row(a, t, false, n0 + r); },
                             t.sk - n0, t.k);
      attn_copy_rows<BN, VC>(k_dst + K_BYTES, [&](int r) { return attn_key_row(a, t, true, n0 + r); },
                             t.sk - n0, t.v);
    };

    __syncthreads(); // every warp is done with the previous tile's shared memory
    if (n_tiles > 0) {
      // Groups: Q, then key steps 0 .. STAGES - 2 (committed even when
      // empty, so the wait counts below hold for any n_tiles).
      attn_copy_tile<BM, QC>(q_tile, t.q + t.m0 * a.q_stride.s, a.q_stride.s, t.sq - t.m0);
      copy_commit();
#pragma unroll
      for (int s = 0; s < STAGES - 1; s++) {
        if (s < n_tiles) load_kv(s, s);
        copy_commit();
      }
    }

    float o[OT][4], m[2] = {-CKJIT_INF, -CKJIT_INF}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < OT; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) o[j][e] = 0.0f;
    const int i0 = t.m0 + wrow + lane / 4; // this lane's rows: i0, i0 + 8

    unsigned qf[Q_IN_REGS ? KSTEPS : 1][4];
    if (n_tiles > 0) {
      copy_wait<STAGES - 1>(); // the Q group
      __syncthreads();
      if (Q_IN_REGS)
#pragma unroll
        for (int kk = 0; kk < (Q_IN_REGS ? KSTEPS : 1); kk++)
          attn_ldsm(qf[kk], q_lane.at(q_tile, wrow, kk));
    }

#pragma unroll 1
    for (int kt = 0; kt < n_tiles; kt++) {
      if (STAGES > 1) {
        copy_wait<(STAGES > 1 ? STAGES - 2 : 0)>(); // key step kt
        __syncthreads(); // ... for every thread; stage (kt - 1) % STAGES is free
        const int next = kt + STAGES - 1;
        if (next < n_tiles) load_kv(next, next % STAGES);
        copy_commit();
      } else {
        if (kt > 0) __syncthreads(); // the one stage was read by every warp
        load_kv(kt, 0);
        copy_commit();
        copy_wait<0>();
        __syncthreads();
      }
      const unsigned k_tile = kv_ring + (kt % STAGES) * STAGE_BYTES;
      const unsigned v_tile = k_tile + K_BYTES;
      const int n0 = begin + kt * BN;

      // S = Q K^T, raw f32 sums.
      float s[NT][4];
#pragma unroll
      for (int n = 0; n < NT; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[n][e] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < KSTEPS; kk++) {
        unsigned qa[4];
        if (Q_IN_REGS) {
#pragma unroll
          for (int r = 0; r < 4; r++) qa[r] = qf[Q_IN_REGS ? kk : 0][r];
        } else {
          attn_ldsm(qa, q_lane.at(q_tile, wrow, kk));
        }
#pragma unroll
        for (int jn = 0; jn < BN / 16; jn++) {
          unsigned kb[4];
          attn_ldsm(kb, k_lane.at(k_tile, jn * 16, kk));
          attn_mma(s[2 * jn], qa, kb[0], kb[1]);
          attn_mma(s[2 * jn + 1], qa, kb[2], kb[3]);
        }
      }

      // Scores, mask, online softmax: s becomes P (f32).
      const int j0 = n0 + 2 * (lane % 4);
      if (attn_tile_masked(a, t, n0, BN)) attn_scores<true>(s, a, t, sc, fold, i0, j0);
      else attn_scores<false>(s, a, t, sc, fold, i0, j0);
      attn_online_softmax(s, o, m, l, fold ? a.scale_log2 : 1.0f);

      // O += P V.
#pragma unroll
      for (int kk = 0; kk < BN / 16; kk++) {
        unsigned pa[4];
        attn_p_frag(pa, s, kk);
#pragma unroll
        for (int jd = 0; jd < HDIM_V / 16; jd++) {
          unsigned vb[4];
          attn_ldsm_trans(vb, v_lane.at(v_tile, kk * 16, jd));
          attn_mma(o[2 * jd], pa, vb[0], vb[1]);
          attn_mma(o[2 * jd + 1], pa, vb[2], vb[3]);
        }
      }
    }
    copy_wait<0>(); // only empty groups can be left; none outlives the tile

    // Epilogue: rows i0 and i0 + 8 of this lane.
    float inv_l[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const float row_l = attn_quad_sum(l[h]);
      inv_l[h] = attn_inv_l(row_l);
      const int i = i0 + 8 * h;
      if (t.lse && lane % 4 == 0 && i < t.sq) t.lse[i * t.lse_ss] = attn_lse(m[h], row_l);
    }
    const int row = t.m0 + wrow;
    T *const q_rows = reinterpret_cast<T *>(smem_raw) + wrow * HDIM; // this warp's, free now
    attn_store_o(o, inv_l, q_rows, t.o + row * a.o_stride.s, a.o_stride.s,
                 t.sq - row < 16 ? t.sq - row : 16);
  }
#else
  (void)a;
#endif
}
#define CKJIT_ATTENTION_PARAM(X) X(ckjit_attention_args, a, 0)
CKJIT_ABI_KERNEL(ckjit_attention, CKJIT_ATTENTION_PARAM);
