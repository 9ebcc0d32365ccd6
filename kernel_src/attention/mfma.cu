// Fused attention forward on AMD matrix cores (MFMA: gfx908 f16, gfx90a
// and gfx94x f16 and bf16), FlashAttention-2 style.  Compiled by hipRTC in
// CI; not yet run on an AMD GPU (there is none here): mfma_math.h and
// mfma_tiles.h state the register layouts and LDS assumptions a first run
// must confirm.
//
// Problem:  ckjit_attention (ckjit.h), shared semantics in
//           attention/problem.h: tiles, varlen, masks, score transform.
// Policy:   a block of WARPS wave64s takes BM query rows (one grid-stride
//           tile), each wave BM / WARPS of them in 16-row MFMA blocks; keys
//           advance BN per step.  Q's operands stay in registers.
// Pipeline: per key tile, K and V (transposed) go from registers to one LDS
//           buffer each; the next tile's global loads are issued right
//           after, so they run under this tile's products:
//             S^T = K Q^T (16x16x16 MFMA, f32), logits (transform and mask
//             on boundary tiles only), online softmax (exp2, f32), P
//             rounded to T, O^T += V^T P^T (MFMA, f32).
//           Two barriers per tile: the buffers are written only after
//           every wave has read them.
// Epilogue: O = acc / l, rounded once, rows < sq only; LSE (attn_lse).
//
// Kernel argument: ckjit_attention_args a, by value (abi/attention_args.h).
// Dynamic LDS: CKJIT_ATTENTION_MFMA_SMEM (Q tile, one K and one V tile).
#include "core/prelude.h"
#include "abi/attention_args.h"
// @PARAMETERS@

typedef DTYPE T;
#include "attention/problem.h"

#if defined(CKJIT_AMD) && (defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) || \
                           defined(__gfx941__) || defined(__gfx942__))
#include "attention/mfma_tiles.h"
#include "attention/mfma_math.h"

static_assert(BM % (16 * WARPS) == 0, "each wave takes whole 16-row MFMA blocks");
static_assert(BN % 16 == 0 && HDIM % 16 == 0 && HDIM_V % 16 == 0, "16x16x16 MFMA blocks");

extern "C" __global__ void __launch_bounds__(WARPS * 64) ckjit_attention(const ckjit_attention_args a) {
  extern __shared__ __attribute__((aligned(16))) unsigned short mfma_lds[];
  unsigned short *const q_lds = mfma_lds;
  unsigned short *const k_lds = mfma_lds + MFMA_K_OFFSET;
  unsigned short *const vt_lds = mfma_lds + MFMA_VT_OFFSET;
  const int lane = (int)threadIdx.x % 64;
  const int wave_row0 = (int)threadIdx.x / 64 * MFMA_WAVE_ROWS; // this wave's first row in the tile

  const long long total = attn_tile_count(a);
  for (long long tile_index = attn_walk_first(a); tile_index < total;
       tile_index = attn_walk_next(a, tile_index)) {
    attn_tile t;
    if (!attn_tile_at(a, tile_index, t)) continue; // block-uniform: the barriers stay matched
    int begin, end;
    attn_key_range(a, t, BN, begin, end);

    // The previous tile's waves may still read Q (a tile without keys has
    // no barrier after its Q reads).
    __syncthreads();
    mfma_load_q(q_lds, a, t);
    mfma_kv_stage kv;
    if (begin < end) kv.load(a, t, begin);
    __syncthreads();
    mfma_q_frags_t qf;
    mfma_read_q(qf, q_lds, wave_row0, lane);

    const attn_scorer sc = attn_make_scorer(a, t);
    const int row_i = t.m0 + wave_row0 + lane % 16; // entry-local query row of row block 0
    mfma_rows st;
    mfma_out_t o;
#pragma unroll
    for (int qb = 0; qb < MFMA_ROW_BLOCKS; qb++) {
      st.m[qb] = -CKJIT_INF;
      st.l[qb] = 0.0f;
#pragma unroll
      for (int db = 0; db < MFMA_DIM_BLOCKS; db++) o[qb][db] = mfma_f32x4{0.0f, 0.0f, 0.0f, 0.0f};
    }

    for (int n0 = begin; n0 < end; n0 += BN) {
      kv.store(k_lds, vt_lds);
      __syncthreads();
      if (n0 + BN < end) kv.load(a, t, n0 + BN);
      mfma_scores_t s;
      mfma_scores(s, k_lds, qf, lane);
      if (attn_tile_masked(a, t, n0, BN)) mfma_logits<true>(s, a, t, sc, row_i, n0, lane);
      else mfma_logits<false>(s, a, t, sc, row_i, n0, lane);
      mfma_online_softmax(s, o, st);
      mfma_pv(o, s, vt_lds, lane);
      __syncthreads(); // every wave is done with K and V^T before the next store
    }
    mfma_store_rows(a, t, o, st, row_i, lane);
  }
}

#else
// Other targets have no MFMA; the family does not target them.
extern "C" __global__ void ckjit_attention(const ckjit_attention_args a) { (void)a; }
#endif
