// attention_wgmma: attention forward on Hopper tensor cores (sm_90a), in
// the FlashAttention-3 design: warp-specialized, wgmma for both products.
//
// Problem:  ckjit_attention (ckjit.h); tiles, masks and the score transform
//           from attention/problem.h.
// Policy:   a block of 1 + BM / 64 warpgroups walks (query tile, head,
//           entry) tiles as attn_walk_first / next say (grid-stride, or
//           pairs of query tiles of equal work).  Warpgroup 0 produces: its 128
//           threads fill the Q tile (once per tile) and the K and V tiles
//           of each key step into rings of STAGES buffers, zero-filled past
//           the sequences, and signal mbarriers as the copies land: one
//           thread with TMA (the host's tensor maps; varlen: the tiles
//           inside a sequence), or all 128 with cp.async (strides TMA
//           refuses, a varlen sequence's last partial tile; 64-bit
//           offsets).  Each
//           consumer warpgroup owns 64 query rows: S = Q Kᵀ (wgmma, both
//           from shared memory), the online softmax in registers, then
//           O += P V (wgmma with P as the register operand).  Step i issues
//           S_i and P_(i-1) V_(i-1) together and runs the softmax of S_i
//           while the second product is in flight; K and V buffers go back
//           to the producer as soon as their product is done.  The
//           consumers take turns issuing their products (ping-pong), so
//           one's softmax also overlaps another's products.  The element
//           mask runs only on boundary key tiles.  O goes out through a
//           per-warp shared-memory stage in 16-byte pieces where it fits.
// Kernel argument: ckjit_attention_tma_args (abi/attention_args.h), by value.
#include "core/prelude.h"
#include "abi/attention_args.h"
// @PARAMETERS@

typedef DTYPE T;
#include "attention/problem.h"

#if defined(CKJIT_NVIDIA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "core/mbarrier.h"
#include "core/ptx.h"
#include "core/tma.h"
#include "attention/wgmma_tiles.h"
#include "attention/wgmma_math.h"

#define CONSUMERS (BM / 64)
#define THREADS (128 * (CONSUMERS + 1))
static_assert(THREADS == WARPS * 32, "warps = 4 * (1 + BM / 64)");
static_assert(CONSUMERS == 2 || CONSUMERS == 3, "bm 128 or 192");

// K and V have their own rings: a K buffer is free once its S product is
// done, a V buffer only after its P V product, a step later.
struct barriers {
  ckjit_u64 q_full, q_empty;
  ckjit_u64 k_full[STAGES], k_empty[STAGES], v_full[STAGES];
  ckjit_u64 v_empty[STAGES + 1]; // [STAGES]: a spare nobody waits on (consume's first step)
  float softmax_sink; // written, never read (softmax_before_wait)
};

// Filling a ring buffer of ROWS rows x COLS head-dim columns, announced
// on the mbarrier `bar` (count 1), one of two ways.
#define PRODUCER_BARRIER 8 // named barrier of the producer warpgroup (the consumers take 1..3)

// TMA: one thread issues a copy per 64-column panel of the box at map
// coordinates (row, head, entry) (the barrier counts the bytes).
template <int ROWS, int COLS>
CKJIT_INLINE void fill_tma(unsigned dst, const ckjit_tensor_map *map, int row, int head, int entry,
                           unsigned bar) {
  constexpr int panels = CKJIT_ATTENTION_PANELS(COLS) / 64;
  if (threadIdx.x == 0) {
    mbar_expect(bar, ROWS * panels * 128);
    for (int p = 0; p < panels; p++) tma_load_4d(dst + p * ROWS * 128, map, 64 * p, row, head, entry, bar);
  }
}

// cp.async: the `copiers` producer threads copy rows [r0, r0 + ROWS) (row
// r at row(r); rows >= len and unreadable ones as zeros; GROUP: the
// layout's row groups, wgmma_tiles.h), wait for their copies, fence them
// to the async proxy (wgmma's) and meet; one of them then arrives.
template <int ROWS, int COLS, int GROUP = ROWS, class RowAt>
CKJIT_INLINE void fill_copy(unsigned dst, RowAt row, const T *mapped, int r0, int len, unsigned bar,
                            int copiers) {
  load_panels<ROWS, COLS, GROUP>(dst, row, mapped, r0, len, threadIdx.x, copiers);
  copy_commit();
  copy_wait<0>();
  fence_async_shared();
  named_barrier_sync(PRODUCER_BARRIER, copiers);
  if (threadIdx.x == 0) mbar_arrive(bar);
}

// cp.async without waiting (the K / V rings of a call without tensor
// maps): each copier hangs its copies on `bar` (copy_arrive_on), the
// copiers meet so every one has before the single counted arrival, and
// the producer moves on to the next buffer while these land.  The copies
// are generic-proxy writes nobody fenced: the consumers fence after their
// wait (consumer_fence), before wgmma reads the buffer.
template <int ROWS, int COLS, int GROUP, class RowAt>
CKJIT_INLINE void fill_copy_async(unsigned dst, RowAt row, const T *mapped, int r0, int len, unsigned bar,
                                  int copiers) {
  load_panels<ROWS, COLS, GROUP>(dst, row, mapped, r0, len, threadIdx.x, copiers);
  copy_arrive_on(bar);
  named_barrier_sync(PRODUCER_BARRIER, copiers);
  if (threadIdx.x == 0) mbar_arrive(bar);
}

// Paged TMA boxes hold min(PAGE, BN) slots of one page; lane l of the
// producer warp reads the page id of box l of a key step (kv_box_id), a
// step ahead of its use, so the id's latency is not on the copies' path.
#define KV_BOX (PAGE > 0 && PAGE < BN ? PAGE : BN)
#define KV_BOXES (BN / KV_BOX)
CKJIT_INLINE int kv_box_id(const attn_tile &t, int n0) {
#if PAGE
  const int lane = threadIdx.x % 32;
  return lane < KV_BOXES && n0 + lane * KV_BOX < t.sk ? t.pages[(n0 + lane * KV_BOX) / PAGE] : 0;
#else
  (void)t, (void)n0;
  return 0;
#endif
}

// Keys [n0, n0 + BN) of K (`v`: V) through TMA, where the tile allows:
// dense problems zero-fill past the sequence in the map; varlen and paged
// ones take only whole tiles inside the sequence (their maps know no
// sequence end).  Paged tiles are KV_BOXES boxes, one per page, lane l
// issuing box l (`id`: its page id, kv_box_id), each a panel of K, or all
// of a page-major V's (V_GROUP); a tile with an id outside the pool is
// refused whole, so the copies read it as zeros.  Returns whether it was
// issued.
template <int COLS, bool V>
CKJIT_INLINE bool fill_keys_tma(const ckjit_attention_args &a, const attn_tile &t, unsigned dst,
                                const ckjit_tensor_map *map, int n0, int id, unsigned bar) {
  if (!a.tma) return false;
#if PAGE
  if (!CKJIT_ATTENTION_PAGED_TMA(PAGE, BN) || n0 + BN > t.sk) return false;
  constexpr int panels = CKJIT_ATTENTION_PANELS(COLS) / 64;
  const int lane = threadIdx.x % 32;
  if (!__all_sync(0xffffffffu, lane >= KV_BOXES || (unsigned)id < (unsigned)a.paging.num_pages)) return false;
  if (lane == 0) mbar_expect(bar, BN * panels * 128);
  __syncwarp(); // the bytes are expected before any box lands
  if (lane >= KV_BOXES) return true; // each lane its own box: the boxes issue together
  if (V && V_GROUP < BN) // (coordinates: columns, slot, panel, head, page)
    tma_load_5d(dst + lane * KV_BOX * panels * 128, map, 0, (n0 + lane * KV_BOX) % PAGE, 0, t.g, id, bar);
  else
    for (int p = 0; p < panels; p++)
      tma_load_4d(dst + p * BN * 128 + lane * KV_BOX * 128, map, 64 * p, (n0 + lane * KV_BOX) % PAGE, t.g,
                  id, bar);
  return true;
#else
  const bool varlen = a.cu_seqlens_k != nullptr;
  if (varlen && n0 + BN > t.sk) return false;
  fill_tma<BN, COLS>(dst, map, t.k_tok0 + n0, t.g, varlen ? 0 : t.b, bar);
  (void)id;
  return true;
#endif
}

// K (V false) or V of keys [n0, n0 + BN) into the ring buffer at `dst`.
template <int COLS, bool V>
CKJIT_INLINE void fill_keys(const ckjit_attention_args &a, const attn_tile &t, unsigned dst,
                            const ckjit_tensor_map *map, int n0, int id, unsigned bar, int copiers) {
  if (fill_keys_tma<COLS, V>(a, t, dst, map, n0, id, bar)) return;
  constexpr int group = V ? V_GROUP : BN;
  const auto row = [&](int j) { return attn_key_row(a, t, V, j); };
  if (a.tma) // a tile the maps cannot take: rare, so the plain fill
    fill_copy<BN, COLS, group>(dst, row, V ? t.v : t.k, n0, t.sk, bar, copiers);
  else
    fill_copy_async<BN, COLS, group>(dst, row, V ? t.v : t.k, n0, t.sk, bar, copiers);
}

// The producer warpgroup: per tile, Q once (after the consumers are done
// with the last one), then K and V of each key step into their rings.
// Buffers go through TMA when the host made tensor maps (p.tma), except
// the tiles fill_keys_tma refuses, and varlen Q's partial last tile (the
// packed map knows no sequence ends), which come from cp.async,
// zero-filled.  With maps only the first warp stays (the others would
// only spin on the barriers, taking issue slots from the consumers); it
// copies those tiles.
CKJIT_INLINE void produce(const ckjit_attention_tma_args &x, unsigned base, barriers &bar) {
  const ckjit_attention_args &a = x.p;
  const int copiers = a.tma ? 32 : 128;
  if ((int)threadIdx.x >= copiers) return;
  const long long tiles = attn_tile_count(a);
  const bool q_varlen = a.cu_seqlens_q != nullptr;
  unsigned q_phase = 0;
  int step = 0;
  for (long long ti = attn_walk_first(a); ti < tiles; ti = attn_walk_next(a, ti)) {
    attn_tile t;
    if (!attn_tile_at(a, ti, t)) continue;
    int begin, end;
    attn_key_range(a, t, BN, begin, end);
    mbar_wait(smem_addr(&bar.q_empty), q_phase ^ 1);
    if (a.tma && (!q_varlen || t.m0 + BM <= t.sq))
      fill_tma<BM, HDIM>(q_tile(base), &x.q_map, t.q_tok0 + t.m0, t.h, q_varlen ? 0 : t.b,
                         smem_addr(&bar.q_full));
    else
      fill_copy<BM, HDIM>(q_tile(base), [&](int i) { return t.q + i * a.q_stride.s; }, t.q, t.m0,
                          t.sq, smem_addr(&bar.q_full), copiers);
    q_phase ^= 1;
    int id = PAGE && a.tma ? kv_box_id(t, begin) : 0;
    for (int n0 = begin; n0 < end; n0 += BN, step++) {
      const int s = step % STAGES;
      const unsigned free_phase = ((step / STAGES) & 1) ^ 1;
      const int next_id = PAGE && a.tma && n0 + BN < end ? kv_box_id(t, n0 + BN) : 0;
      mbar_wait(smem_addr(&bar.k_empty[s]), free_phase);
      fill_keys<HDIM, false>(a, t, k_tile(base, s), &x.k_map, n0, id, smem_addr(&bar.k_full[s]), copiers);
      mbar_wait(smem_addr(&bar.v_empty[s]), free_phase);
      fill_keys<HDIM_V, true>(a, t, v_tile(base, s), &x.v_map, n0, id, smem_addr(&bar.v_full[s]), copiers);
      id = next_id;
    }
  }
}

// The consumers take turns issuing their products (ping-pong): warpgroup
// c waits for barrier c + 1, issues, and lets the next one go, so one
// warpgroup's softmax runs while another's products hold the tensor
// cores.  Every consumer issues at the same points of every tile (the key
// range is the whole tile's), so the turns stay balanced.
CKJIT_INLINE void turn_wait(int c) { named_barrier_sync(1 + c, 128 * 2); }
CKJIT_INLINE void turn_pass(int c) { named_barrier_arrive(1 + (c + 1) % CONSUMERS, 128 * 2); }

// Waits for a ring buffer and makes its writes visible to wgmma: TMA
// writes through the async proxy and the synchronous cp.async fill fences
// its own; the K / V copies of a call without maps (fill_copy_async) are
// fenced here.
CKJIT_INLINE void wait_full(const ckjit_attention_args &a, ckjit_u64 &bar, unsigned phase) {
  mbar_wait(smem_addr(&bar), phase);
  if (!a.tma) fence_async_shared();
}

// A consumer warpgroup: 64 query rows of each tile.  Key step i issues
// S_i = Q K_iᵀ and then O += P_(i-1) V_(i-1), and computes the softmax of
// S_i while the second product runs.  The loop is rotated so that its body
// holds the tile's only softmax: it starts at the softmax of S_0 (issued
// before it) and issues the next pair at its end.  The waits and issues
// stay unconditional (a product issued under a branch serializes them):
// on the first step the wait for P V finds nothing in flight and O, still
// zero, is rescaled for nothing.  One softmax instead of two (the first
// step peeled off) cuts the compile by a sixth (bench/NOTES.md).
CKJIT_INLINE void consume(const ckjit_attention_args &a, unsigned base, barriers &bar, int wg) {
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int row0 = 64 * wg; // this warpgroup's first row in the tile
  const long long tiles = attn_tile_count(a);
  const bool fold = ATTN_PLAIN_SCORES && a.scale_log2 > 0.0f;
  const float c = fold ? a.scale_log2 : 1.0f;
  unsigned q_phase = 0;
  int step = 0;
  for (long long ti = attn_walk_first(a); ti < tiles; ti = attn_walk_next(a, ti)) {
    attn_tile t;
    if (!attn_tile_at(a, ti, t)) continue;
    int begin, end;
    attn_key_range(a, t, BN, begin, end);
    const attn_scorer sc = attn_make_scorer(a, t);
    const int row_i0 = t.m0 + row0 + 16 * warp + lane / 4;
    softmax_rows st = {{-CKJIT_INF, -CKJIT_INF}, {0.0f, 0.0f}};
    float o[O_ACC], s_acc[S_ACC], rescale[2];
    unsigned p[BN / 16][4];
#pragma unroll
    for (int i = 0; i < O_ACC; i++) o[i] = 0.0f;
    mbar_wait(smem_addr(&bar.q_full), q_phase);
    q_phase ^= 1;
    if (end > begin) {
      int s = step % STAGES, prev = STAGES; // prev: the stage of the P V in flight (none: the spare)
      wait_full(a, bar.k_full[s], (step / STAGES) & 1);
      turn_wait(wg);
      qk_gemm(s_acc, q_tile(base), row0, k_tile(base, s));
      turn_pass(wg);
      wgmma_wait<0>();
      fence_regs(s_acc);
      mbar_arrive(smem_addr(&bar.k_empty[s]));
      for (int n0 = begin;;) {
        score_tile(s_acc, a, t, sc, fold, row_i0, n0, attn_tile_masked(a, t, n0, BN));
        online_softmax(s_acc, st, c, rescale);
        softmax_before_wait(smem_addr(&bar.softmax_sink), st);
        wgmma_wait<0>();
        fence_regs(o);
        mbar_arrive(smem_addr(&bar.v_empty[prev]));
        rescale_o(o, rescale);
        pack_p(p, s_acc);
        n0 += BN;
        if (n0 >= end) break;
        prev = s;
        const unsigned prev_phase = (step / STAGES) & 1;
        s = ++step % STAGES;
        wait_full(a, bar.k_full[s], (step / STAGES) & 1);
        wait_full(a, bar.v_full[prev], prev_phase);
        turn_wait(wg);
        qk_gemm(s_acc, q_tile(base), row0, k_tile(base, s));
        pv_gemm(o, p, v_tile(base, prev));
        turn_pass(wg);
        wgmma_wait<1>(); // S_i is done; P_(i-1) V_(i-1) may run on
        fence_regs(s_acc);
        mbar_arrive(smem_addr(&bar.k_empty[s]));
      }
      // Every S product of the tile is done: Q's buffer goes back now, so
      // the producer loads the next tile's Q (and its first K) while this
      // tile's last P V and the stores run.
      mbar_arrive(smem_addr(&bar.q_empty));
      wait_full(a, bar.v_full[s], (step / STAGES) & 1);
      turn_wait(wg);
      pv_gemm(o, p, v_tile(base, s));
      turn_pass(wg);
      wgmma_wait<0>();
      fence_regs(o);
      mbar_arrive(smem_addr(&bar.v_empty[s]));
      step++;
    } else {
      mbar_arrive(smem_addr(&bar.q_empty)); // no key: no product read Q
    }
    wgmma_wait<0>(); // (none in flight: says so to the compiler, where the paths join)
    fence_regs(o);
    store_rows(a, t, o, st, c, row_i0, o_stage(base, 4 * wg + warp));
  }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
ckjit_attention(const CKJIT_GRID_CONSTANT ckjit_attention_tma_args x) {
  const ckjit_attention_args &a = x.p;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ barriers bar;
  // Swizzled tiles start on 1 KiB boundaries (the host adds the slack).
  const unsigned raw = smem_addr(smem_raw), base = (raw + 1023) & ~1023u;
  if (threadIdx.x == 0) {
    mbar_init(smem_addr(&bar.q_full), 1); // one arrival per fill (fill())
    mbar_init(smem_addr(&bar.q_empty), 128 * CONSUMERS);
#pragma unroll
    for (int s = 0; s < STAGES; s++) {
      mbar_init(smem_addr(&bar.k_full[s]), 1);
      mbar_init(smem_addr(&bar.v_full[s]), 1);
      mbar_init(smem_addr(&bar.k_empty[s]), 128 * CONSUMERS);
      mbar_init(smem_addr(&bar.v_empty[s]), 128 * CONSUMERS);
    }
    mbar_init(smem_addr(&bar.v_empty[STAGES]), 128 * CONSUMERS);
    mbar_init_fence();
  }
  __syncthreads();
  const int wg = threadIdx.x / 128;
  // The copies need few registers; the consumers take them: 40 + 2 x 232
  // = 3 x 168 (384 threads), 32 + 3 x 160 = 4 x 128 (512).
  if (wg == 0) {
    setmaxnreg_dec<CONSUMERS == 2 ? 40 : 32>();
    produce(x, base, bar);
  } else {
    setmaxnreg_inc<CONSUMERS == 2 ? 232 : 160>();
    if (wg == CONSUMERS) turn_pass(wg - 1); // the first consumer goes first
    consume(a, base, bar, wg - 1);
  }
}

#else
// wgmma needs the arch-specific target (NVRTC's sm_90a); anything else
// builds an empty kernel, which the front-end never picks.
extern "C" __global__ void ckjit_attention(const ckjit_attention_tma_args x) { (void)x; }
#endif
