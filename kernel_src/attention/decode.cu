// attention_decode: attention for few queries per sequence (decode), with
// the key range split over blocks (flash-decoding), on NVIDIA tensor cores
// (sm_80+, mma.sync m16n8k16).
//
// Problem:  ckjit_attention / ckjit_paged_attention with seqlen_q <= BM
//           (attention/problem.h: lengths, masks, paged keys).
// Policy:   a block owns BM = 16 rows of one (entry b, K/V head g): row r
//           is query head g * group + r / seqlen_q, query r % seqlen_q, so
//           the query heads that share K and V read them once (GQA).
//           grid.x walks (b, g, row block), grid.y the `splits` equal
//           parts of the entry's key range (each a whole number of key
//           steps; a part may be empty).
// Pipeline: Q once, then STAGES (K, V) key steps of BN = 16 * WARPS keys
//           in a cp.async ring (the mma layout, attention/mma_smem.h; paged
//           keys through their page ids).  Warp w takes keys [16 w, 16 w +
//           16) of every step: S = Q Kᵀ, its own online softmax and O += P V
//           (attention/mma_softmax.h), so the warps never wait on each
//           other inside a step.
// Epilogue: the warps' (max, sum, O) merge through shared memory in warp
//           order; one split writes O and LSE, several write their rows to
//           part_o / part_lse for attention_combine (split order: the
//           result does not depend on timing).
// Kernel argument: ckjit_attention_decode_args (abi/attention_args.h), by value.
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

static_assert(BM == 16 && BN == 16 * WARPS, "16 rows; 16 keys a warp per step");
static_assert(BIAS == BIAS_NONE && !ALIBI, "decode: no bias, no ALiBi");
// FP8 pages (KV8): the ring holds the fp8 rows as copied (row-major, 16
// bytes a chunk), and each step is converted into one (K, V) tile of T in
// the mma layout, which the products read.
#define RING_STAGE (KV8 ? BN * (HDIM + HDIM_V) : STAGE_BYTES)
#define RING_BYTES (STAGES * RING_STAGE + (KV8 ? STAGE_BYTES : 0))
static_assert(RING_BYTES >= WARPS * 16 * HDIM_V * 4, "the ring holds the warps' O rows");

// Paged keys: a split's page ids are staged in shared memory once (one
// coalesced read; an id outside the pool staged as -1), so the copies'
// addresses wait on no global load.  A split of more pages than this
// looks its ids up in global memory.
#define STAGED_IDS (PAGE > 0 ? CKJIT_ATTENTION_DECODE_STAGED_IDS : 1)

// With staged ids and K rows as long as V's, a thread copies the same
// rows of K and V (the same chunk column), so one page lookup and one slot
// offset serve both; 32-bit factors, 64-bit products (the host keeps the
// pools' page and slot strides below 2^31 elements).  The generic copies
// spend ~30 instructions a row on their addresses (ncu: 1.7x the dense
// kernel's instructions, issue-bound instead of waiting on DRAM).
// (fp8 pages: the same, rows of 16-element chunks, row-major: converted later.)
//
// Thread (r0, c) copies rows r0 + STEP * it of the step.  Pages are powers
// of two and a step starts at a multiple of BN (attn_key_range), so a step
// starts on a page boundary when pages are smaller than it and lies inside
// one page otherwise: which of a thread's rows open a page, and each row's
// slot past the thread's first, are compile-time constants.  A thread
// reads a page's id once (the copies' memory clobber would make the
// compiler read it again for every row) and steps its rows from the page's
// base.
#define PAIR_CH (HDIM * (int)sizeof(attn_kv_t) / 16) // 16-byte chunks of a K row
#define PAGED_PAIRS (PAGE > 0 && HDIM == HDIM_V && THREADS % PAIR_CH == 0)
CKJIT_INLINE void copy_paged_pairs(const ckjit_attention_args &a, const attn_tile &t, const int *staged,
                                   int id0, int n0, unsigned k_dst) {
  constexpr int STEP = THREADS / PAIR_CH, ITERS = BN * PAIR_CH / THREADS;
  constexpr int V_OFFSET = KV8 ? BN * HDIM : K_BYTES;
  static_assert((PAGE_SLOTS & (PAGE_SLOTS - 1)) == 0 && (STEP & (STEP - 1)) == 0, "powers of two");
  const int c = threadIdx.x % PAIR_CH, r0 = threadIdx.x / PAIR_CH;
  const int k_page = (int)a.paging.k_page, v_page = (int)a.paging.v_page;
  const int k_slot = (int)a.k_stride.s, v_slot = (int)a.v_stride.s;
  constexpr int E = 16 / (int)sizeof(attn_kv_t); // elements a chunk
  // The thread's first page of the step (index into staged) and its slot.
  const int page0 = n0 / PAGE_SLOTS - id0 + (PAGE_SLOTS <= STEP ? r0 / PAGE_SLOTS : 0);
  const int slot0 = (PAGE_SLOTS >= BN ? n0 % PAGE_SLOTS : 0) + r0 % PAGE_SLOTS;
  const attn_kv_t *k_row0 = t.k + c * E + (long long)slot0 * k_slot;
  const attn_kv_t *v_row0 = t.v + c * E + (long long)slot0 * v_slot;
  const attn_kv_t *k_page_at = t.k, *v_page_at = t.v;
  bool page_ok = false;
#pragma unroll
  for (int it = 0; it < ITERS; it++) {
    const int r = r0 + it * STEP, j = n0 + r;
    if ((it * STEP) % PAGE_SLOTS == 0) { // this row opens one of the thread's pages
      const int id = j < t.sk ? staged[page0 + it * STEP / PAGE_SLOTS] : -1;
      page_ok = id >= 0;
      k_page_at = k_row0 + (long long)id * k_page;
      v_page_at = v_row0 + (long long)id * v_page;
    }
    const int slot = (it * STEP) % PAGE_SLOTS; // past the thread's first slot of the page
    const bool ok = page_ok && j < t.sk;
    const unsigned at = KV8 ? (unsigned)(r * PAIR_CH + c) * 16 : attn_swz<QC>(r, c);
    copy_async<16>(k_dst + at, ok ? k_page_at + (long long)slot * k_slot : t.k, ok ? 16 : 0);
    copy_async<16>(k_dst + V_OFFSET + at, ok ? v_page_at + (long long)slot * v_slot : t.v, ok ? 16 : 0);
  }
}

// KV8: rows [0, ROWS) of CH 16-byte chunks (16 fp8 elements each), row r
// at row(r) (nullptr, or r >= valid_rows: zeros), row-major at `dst`.
template <int ROWS, int CH, class RowAt>
CKJIT_INLINE void copy_rows8(unsigned dst, RowAt row, int valid_rows, const attn_kv_t *mapped) {
  for (int i = threadIdx.x; i < ROWS * CH; i += THREADS) {
    const int r = i / CH, c = i % CH;
    const attn_kv_t *src = r < valid_rows ? row(r) : nullptr;
    copy_async<16>(dst + i * 16, src ? src + c * 16 : mapped, src ? 16 : 0);
  }
}

// Eight e4m3 bytes (two words) as eight T in four words.
CKJIT_INLINE void e4m3x8_to_T(unsigned lo, unsigned hi, unsigned (&out)[4]) {
  const unsigned w[2] = {lo, hi};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    const unsigned short pair = (unsigned short)(w[k / 2] >> (16 * (k % 2)));
#if __CUDA_ARCH__ >= 890
    unsigned h2;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(pair));
    if (ckjit_is_bf16<T>) { // exact: every e4m3 value is an f16 and a bf16
      float f0, f1;
      asm("cvt.f32.f16 %0, %1;" : "=f"(f0) : "h"((unsigned short)(h2 & 0xffffu)));
      asm("cvt.f32.f16 %0, %1;" : "=f"(f1) : "h"((unsigned short)(h2 >> 16)));
      out[k] = attn_pack(f0, f1);
    } else {
      out[k] = h2;
    }
#else
    out[k] = attn_pack(ckjit_from_e4m3((unsigned char)(pair & 0xffu)), ckjit_from_e4m3((unsigned char)(pair >> 8)));
#endif
  }
}

// KV8: the fp8 step at `src` (K rows of HDIM bytes, then V rows of
// HDIM_V) into the T tile at `dst` (the mma layout): each 16-byte fp8
// chunk becomes two 16-byte chunks.
CKJIT_INLINE void convert_kv8(unsigned src, unsigned dst) {
  constexpr int KCH = HDIM / 16, VCH = HDIM_V / 16;
  for (int i = threadIdx.x; i < BN * (KCH + VCH); i += THREADS) {
    const bool v = i >= BN * KCH;
    const int k = v ? i - BN * KCH : i, ch = v ? VCH : KCH, r = k / ch, c = k % ch;
    unsigned w[4];
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "r"(src + i * 16));
    unsigned a0[4], a1[4];
    e4m3x8_to_T(w[0], w[1], a0);
    e4m3x8_to_T(w[2], w[3], a1);
    const unsigned at0 = v ? K_BYTES + attn_swz<VC>(r, 2 * c) : attn_swz<QC>(r, 2 * c);
    const unsigned at1 = v ? K_BYTES + attn_swz<VC>(r, 2 * c + 1) : attn_swz<QC>(r, 2 * c + 1);
    asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(dst + at0), "r"(a0[0]), "r"(a0[1]),
                 "r"(a0[2]), "r"(a0[3]));
    asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(dst + at1), "r"(a1[0]), "r"(a1[1]),
                 "r"(a1[2]), "r"(a1[3]));
  }
}

// The block's rows: row r's query head and query (local), and whether it
// is computed (r < group * seqlen_q rows of this (b, g), query < sq).
struct decode_row {
  int h, i;
  bool live;
};
CKJIT_INLINE decode_row decode_row_at(const ckjit_attention_args &a, const attn_tile &t, int rb, int r) {
  const int group = a.heads_q / a.heads_kv, rr = rb * BM + r;
  decode_row d;
  d.h = t.g * group + rr / a.seqlen_q;
  d.i = rr % a.seqlen_q;
  d.live = rr < group * a.seqlen_q && d.i < t.sq;
  return d;
}
#endif

// Two stages of head dim <= 128 leave room for three blocks an SM (shared
// memory), if each keeps to a third of the registers.
#define MIN_BLOCKS (STAGES == 2 && HDIM <= 128 && HDIM_V <= 128 ? 3 : 1)
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
ckjit_attention_decode(const CKJIT_GRID_CONSTANT ckjit_attention_decode_args x) {
#if defined(CKJIT_NVIDIA) && __CUDA_ARCH__ >= 800
  const ckjit_attention_args &a = x.p;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ float merge_m[WARPS][BM], merge_l[WARPS][BM];
  const unsigned q_tile = smem_addr(smem_raw), kv_ring = q_tile + Q_BYTES;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int rb = blockIdx.x % x.row_blocks;
  const long long bg = blockIdx.x / x.row_blocks;
  attn_tile t;
  // The tile of the group's first head: lengths, K / V, pages; per-row
  // heads and queries from decode_row_at.
  if (!attn_entry(a, (int)(bg / a.heads_kv), (int)(bg % a.heads_kv) * (a.heads_q / a.heads_kv), 0, t))
    return;
  int begin, end;
  attn_key_range(a, t, BN, begin, end);
  const int steps = end > begin ? (end - begin + BN - 1) / BN : 0;
  const int per = (steps + x.splits - 1) / x.splits; // key steps of a split
  const int first = blockIdx.y * per, count = min(per, steps - first);
  const attn_scorer sc = attn_make_scorer(a, t);
  const bool fold = ATTN_PLAIN_SCORES && sc.scale_log2 > 0.0f;

  // This split's page ids (PAGE), staged where they fit (filled after the
  // first steps' copies are issued: those look their ids up in global
  // memory, so the staging's latency is not ahead of every copy).
  __shared__ int staged[STAGED_IDS];
  const int id0 = PAGE ? (begin + first * BN) / PAGE_SLOTS : 0;
  const int ids = count > 0 ? (min(end, begin + (first + count) * BN) - 1) / PAGE_SLOTS - id0 + 1 : 0;
  const bool use_staged = PAGE && ids <= STAGED_IDS;
  bool staged_ready = false;
  // Key j's row of K (`v`: V), as attn_key_row.
  auto key_row = [&](bool v, int j) -> const attn_kv_t * {
    if (!staged_ready) return attn_key_row(a, t, v, j);
    const int id = staged[j / PAGE_SLOTS - id0];
    if (id < 0) return nullptr;
    return (v ? t.v : t.k) + (long long)id * (v ? a.paging.v_page : a.paging.k_page) +
           (long long)(j % PAGE_SLOTS) * (v ? a.v_stride.s : a.k_stride.s);
  };

  // Q: the block's rows (dead rows zero).
  attn_copy_rows<BM, QC>(q_tile, [&](int r) -> const T * {
    const decode_row d = decode_row_at(a, t, rb, r);
    return d.live ? t.q + (d.h - t.h) * a.q_stride.h + d.i * a.q_stride.s : nullptr;
  }, BM, t.q);
  copy_commit();
  auto load_kv = [&](int step, int stage) {
    const int n0 = begin + step * BN;
    if constexpr (KV8) {
      const unsigned k_dst = kv_ring + stage * RING_STAGE;
      if constexpr (PAGED_PAIRS) {
        if (staged_ready) {
          copy_paged_pairs(a, t, staged, id0, n0, k_dst);
          return;
        }
      }
      copy_rows8<BN, HDIM / 16>(k_dst, [&](int r) { return key_row(false, n0 + r); }, t.sk - n0, t.k);
      copy_rows8<BN, HDIM_V / 16>(k_dst + BN * HDIM, [&](int r) { return key_row(true, n0 + r); },
                                  t.sk - n0, t.v);
    } else {
      const unsigned k_dst = kv_ring + stage * STAGE_BYTES;
      if constexpr (PAGED_PAIRS) {
        if (staged_ready) {
          copy_paged_pairs(a, t, staged, id0, n0, k_dst);
          return;
        }
      }
      attn_copy_rows<BN, QC>(k_dst, [&](int r) { return key_row(false, n0 + r); }, t.sk - n0, t.k);
      attn_copy_rows<BN, VC>(k_dst + K_BYTES, [&](int r) { return key_row(true, n0 + r); }, t.sk - n0, t.v);
    }
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < count) load_kv(first + s, s);
    copy_commit();
  }
  if (use_staged) // made visible by the barrier ahead of the key loop
    for (int k = threadIdx.x; k < ids; k += THREADS) {
      const int id = t.pages[id0 + k];
      staged[k] = (unsigned)id < (unsigned)a.paging.num_pages ? id : -1;
      if (staged[k] < 0 && a.paging.error) *a.paging.error = 1;
    }

  // The rows of this lane (g, g + 8): their queries bound the mask.
  const decode_row row0 = decode_row_at(a, t, rb, lane / 4), row1 = decode_row_at(a, t, rb, lane / 4 + 8);
  int lo[2], hi[2];
  attn_key_bounds(a, t, row0.i, lo[0], hi[0]);
  attn_key_bounds(a, t, row1.i, lo[1], hi[1]);
  // Steps inside every row's bounds skip the per-element test: queries
  // 0 and sq - 1 bound them (the bounds grow with the query).
  int lo_last, hi_last, lo_first, hi_first;
  attn_key_bounds(a, t, t.sq - 1, lo_last, hi_last);
  attn_key_bounds(a, t, 0, lo_first, hi_first);

  const attn_ldsm_lane<QC, 0> q_lane;
  const attn_ldsm_lane<QC, 1> k_lane;
  const attn_ldsm_lane<VC, 0> v_lane;
  float o[OT][4], m[2] = {-CKJIT_INF, -CKJIT_INF}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int j = 0; j < OT; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) o[j][e] = 0.0f;
  unsigned qf[Q_IN_REGS ? KSTEPS : 1][4];
  copy_wait<STAGES - 1>(); // the Q group
  __syncthreads();
  staged_ready = use_staged;
  if (Q_IN_REGS)
#pragma unroll
    for (int kk = 0; kk < (Q_IN_REGS ? KSTEPS : 1); kk++) attn_ldsm(qf[kk], q_lane.at(q_tile, 0, kk));

#pragma unroll 1
  for (int kt = 0; kt < count; kt++) {
    copy_wait<STAGES - 2>(); // key step kt
    __syncthreads();         // ... for every thread; stage (kt - 1) % STAGES is free
    if (kt + STAGES - 1 < count) load_kv(first + kt + STAGES - 1, (kt + STAGES - 1) % STAGES);
    copy_commit();
    unsigned k_tile = kv_ring + (kt % STAGES) * STAGE_BYTES;
    if (KV8) { // every warp is past the last step's products: the T tile is free
      k_tile = kv_ring + STAGES * RING_STAGE;
      convert_kv8(kv_ring + (kt % STAGES) * RING_STAGE, k_tile);
      __syncthreads();
    }
    const unsigned v_tile = k_tile + K_BYTES;
    const int n0 = begin + (first + kt) * BN, key0 = 16 * warp; // this warp's keys in the step

    float s[2][4];
#pragma unroll
    for (int n = 0; n < 2; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) s[n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < KSTEPS; kk++) {
      unsigned qa[4], kb[4];
      if (Q_IN_REGS) {
#pragma unroll
        for (int r = 0; r < 4; r++) qa[r] = qf[Q_IN_REGS ? kk : 0][r];
      } else {
        attn_ldsm(qa, q_lane.at(q_tile, 0, kk));
      }
      attn_ldsm(kb, k_lane.at(k_tile, key0, kk));
      attn_mma(s[0], qa, kb[0], kb[1]);
      attn_mma(s[1], qa, kb[2], kb[3]);
    }
    // Scores and mask (keys past sk, outside a row's bounds).
    const int j0 = n0 + key0 + 2 * (lane % 4);
    const bool masked = n0 + BN > t.sk || n0 < lo_last || n0 + BN - 1 > hi_first;
#pragma unroll
    for (int n = 0; n < 2; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int h = e >> 1, j = j0 + 8 * n + (e & 1);
        if (masked && (j < lo[h] || j > hi[h])) s[n][e] = -CKJIT_INF;
        else if (!fold) s[n][e] = attn_score(sc, s[n][e], h ? row1.i : row0.i, j);
      }
    attn_online_softmax(s, o, m, l, fold ? sc.scale_log2 : 1.0f);
    unsigned pa[4];
    attn_p_frag(pa, s, 0);
#pragma unroll
    for (int jd = 0; jd < HDIM_V / 16; jd++) {
      unsigned vb[4];
      attn_ldsm_trans(vb, v_lane.at(v_tile, key0, jd));
      attn_mma(o[2 * jd], pa, vb[0], vb[1]);
      attn_mma(o[2 * jd + 1], pa, vb[2], vb[3]);
    }
  }
  copy_wait<0>();
  __syncthreads(); // every warp is done with the ring: it holds the merge now

  // Merge the warps' rows: each warp's max and sum, then its O scaled to
  // the common max, summed in warp order.
  float *const merge_o = reinterpret_cast<float *>(smem_raw + Q_BYTES); // [WARPS][16][HDIM_V]
  const int g = lane / 4, q = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const float row_l = attn_quad_sum(l[h]);
    if (q == 0) merge_m[warp][g + 8 * h] = m[h], merge_l[warp][g + 8 * h] = row_l;
  }
  __syncthreads();
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int r = g + 8 * h;
    float top = -CKJIT_INF;
    for (int w = 0; w < WARPS; w++) top = fmaxf(top, merge_m[w][r]);
    const float factor = m[h] == -CKJIT_INF ? 0.0f : attn_exp2(m[h] - top);
#pragma unroll
    for (int j = 0; j < OT; j++) {
      float *dst = merge_o + ((warp * 16 + r) * HDIM_V + 8 * j + 2 * q);
      dst[0] = o[j][2 * h] * factor;
      dst[1] = o[j][2 * h + 1] * factor;
    }
  }
  __syncthreads();
  // Thread per (row, 4 columns): sum the warps, divide by the row's sum.
  for (int idx = threadIdx.x; idx < 16 * (HDIM_V / 4); idx += THREADS) {
    const int r = idx / (HDIM_V / 4), c = 4 * (idx % (HDIM_V / 4));
    const decode_row d = decode_row_at(a, t, rb, r);
    if (!d.live) continue;
    float top = -CKJIT_INF, sum = 0.0f;
    for (int w = 0; w < WARPS; w++) top = fmaxf(top, merge_m[w][r]);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int w = 0; w < WARPS; w++) {
      if (merge_m[w][r] == -CKJIT_INF) continue;
      sum += merge_l[w][r] * attn_exp2(merge_m[w][r] - top);
#pragma unroll
      for (int e = 0; e < 4; e++) acc[e] += merge_o[(w * 16 + r) * HDIM_V + c + e];
    }
    const float inv = attn_inv_l(sum) * t.v_scale; // (KV8: V's scale, a factor of every term)
    if (x.splits == 1) {
      T *out = t.o + (d.h - t.h) * a.o_stride.h + d.i * a.o_stride.s + c * a.o_stride.d;
#pragma unroll
      for (int e = 0; e < 4; e++) out[e * a.o_stride.d] = ckjit_from_float<T>(attn_scaled(acc[e], inv));
      if (t.lse && c == 0) t.lse[(d.h - t.h) * a.lse_stride.h + d.i * t.lse_ss] = attn_lse(top, sum);
    } else {
      const long long row = ((long long)t.b * a.heads_q + d.h) * a.seqlen_q + d.i;
      float *out = x.part_o + ((long long)blockIdx.y * x.rows + row) * HDIM_V + c;
#pragma unroll
      for (int e = 0; e < 4; e++) out[e] = attn_scaled(acc[e], inv);
      if (c == 0) x.part_lse[(long long)blockIdx.y * x.rows + row] = sum == 0.0f ? -CKJIT_INF : top + __log2f(sum);
    }
  }
#else
  (void)x;
#endif
}
