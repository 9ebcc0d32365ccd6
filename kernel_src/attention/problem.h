// Attention kernels' shared problem: which (batch entry, head, query tile)
// a tile is, the entry's lengths and base pointers (dense or varlen), the
// keys a query tile needs, the mask, and the score transform.  Every
// attention pipeline (simt, mma, wgmma, mfma) uses these, so they agree on
// the semantics documented for ckjit_attention in ckjit.h.
//
// Needs T (element type), MASK, BIAS, ALIBI, SOFTCAP, PAGE, KV8 (spec
// parameters) and the tile's query rows BM.
#pragma once
#include "core/prelude.h"
#include "abi/attention_args.h"
#include "attention/paged_table.h"

// K and V elements: T, or fp8 e4m3 bytes of paged pools (KV8), read as
// scale * x (attn_kv_float, the tile's k_scale / v_scale).
#if KV8
typedef unsigned char attn_kv_t;
CKJIT_INLINE float attn_kv_float(attn_kv_t x) { return ckjit_from_e4m3(x); }
#else
typedef T attn_kv_t;
CKJIT_INLINE float attn_kv_float(attn_kv_t x) { return ckjit_to_float(x); }
#endif

#if BIAS == BIAS_F32
typedef float attn_bias_t;
#else
typedef T attn_bias_t;
#endif

// Scores need no per-element transform: the kernels may keep raw q.k
// values and fold the scale into the exponent (one FFMA per element).
#define ATTN_PLAIN_SCORES (!SOFTCAP && BIAS == BIAS_NONE && !ALIBI)
#define ATTN_LOG2E 1.4426950408889634f
#define ATTN_LN2 0.6931471805599453f

// One query tile of one (batch entry, query head).
struct attn_tile {
  int b, h, g;      // batch entry, query head, K/V head
  int m0;           // first query row (local)
  int sq, sk;       // the entry's lengths
  int diag;         // sk - sq: the bottom-right diagonal (query i, key i + diag)
  const T *q;        // row 0, dimension 0 of the entry's head h
  const attn_kv_t *k, *v; // of its K/V head g
  float k_scale, v_scale; // KV8: head g's dequantization scales (else 1)
  T *o;
  float *lse;       // row 0 of the entry's head h; NULL: none
  long long lse_ss; // LSE's row stride
  int q_tok0, k_tok0; // varlen: the entry's first packed token of Q and of K, V (dense: 0)
  const int *pages;   // PAGE: the entry's page ids (k, v: the pools at head g)
};

// Tile `t` of attn_tile_count.  Without a mask (tiles of equal work): the
// query tile fastest, then the head (so the heads that share a K/V head
// run together), then the batch entry.  With one, tiles differ in work:
//  - one block per tile (the hardware hands blocks out as SMs free up):
//    the (head, entry) pairs go in groups of ATTN_HEAD_GROUP whose K and V
//    fit in L2 together, and inside a group the query tiles heaviest first
//    across the group's heads, so the light tiles fill the end of the grid
//    instead of a heavy one starting last;
//  - a persistent grid (a.paired): tile t is half `t % 2` of the pair t / 2
//    of query tiles (m, m_blocks - 1 - m) of one (head, entry), the pairs
//    of a head together.  A causal or windowed tile's work is affine in m,
//    so every pair is the same work and a grid-stride walk over pairs is
//    balanced (over single tiles it is not: bench/NOTES.md).
// Returns false when the tile has no row (a varlen entry's shorter
// sequence, or the absent second half of an odd m_blocks' middle pair).
#define ATTN_HEAD_GROUP 8
// The tiles the grid walks; a block starts at attn_walk_first and goes on
// with attn_walk_next while below the count.
CKJIT_INLINE long long attn_tile_count(const ckjit_attention_args &a) {
  const long long m = a.paired ? CKJIT_ATTENTION_PAIRS(a.m_blocks) * 2 : a.m_blocks;
  return m * a.heads_q * (long long)a.batch;
}
CKJIT_INLINE long long attn_walk_first(const ckjit_attention_args &a) {
  return a.paired ? 2ll * blockIdx.x : (long long)blockIdx.x;
}
CKJIT_INLINE long long attn_walk_next(const ckjit_attention_args &a, long long t) {
  if (!a.paired) return t + gridDim.x;
  return t % 2 == 0 ? t + 1 : t - 1 + 2ll * gridDim.x;
}
CKJIT_INLINE bool attn_entry(const ckjit_attention_args &a, int b, int h, int m0, attn_tile &tile);
CKJIT_INLINE bool attn_tile_at(const ckjit_attention_args &a, long long t, attn_tile &tile) {
  long long mb, bh;
  if (a.paired) {
    const long long pairs = CKJIT_ATTENTION_PAIRS(a.m_blocks), pair = t / 2 % pairs;
    mb = t % 2 ? pair : a.m_blocks - 1 - pair; // the heavier first
    if (t % 2 && mb == a.m_blocks - 1 - pair) return false;
    bh = t / 2 / pairs;
  } else if (MASK == MASK_NONE) {
    mb = a.m_blocks - 1 - t % a.m_blocks;
    bh = t / a.m_blocks;
  } else {
    const long long pairs = (long long)a.heads_q * a.batch, span = ATTN_HEAD_GROUP * a.m_blocks;
    const long long group = t / span, in_group = t % span;
    const long long rest = pairs - group * ATTN_HEAD_GROUP;
    const long long size = rest < ATTN_HEAD_GROUP ? rest : ATTN_HEAD_GROUP;
    mb = a.m_blocks - 1 - in_group / size;
    bh = group * ATTN_HEAD_GROUP + in_group % size;
  }
  return attn_entry(a, (int)(bh / a.heads_q), (int)(bh % a.heads_q), (int)(mb * BM), tile);
}

// The tile of query rows [m0, m0 + BM) of entry b, query head h; false when
// it has no row.
CKJIT_INLINE bool attn_entry(const ckjit_attention_args &a, int b, int h, int m0, attn_tile &tile) {
  tile.h = h;
  tile.b = b;
  tile.g = tile.h / (a.heads_q / a.heads_kv);
  tile.m0 = m0;
  long long q_off, o_off, lse_off, kb = 0, vb = 0;
  int sq;
  if (a.cu_seqlens_q) {
    const int q0 = a.cu_seqlens_q[tile.b];
    sq = a.cu_seqlens_q[tile.b + 1] - q0;
    q_off = q0 * a.q_stride.s;
    o_off = q0 * a.o_stride.s;
    lse_off = q0 * a.lse_stride.s;
    tile.q_tok0 = q0;
  } else {
    sq = a.seqlen_q;
    q_off = tile.b * a.q_stride.b;
    o_off = tile.b * a.o_stride.b;
    lse_off = tile.b * a.lse_stride.b;
    tile.q_tok0 = 0;
  }
  tile.k_tok0 = 0;
  tile.pages = nullptr;
#if PAGE
  paged_sequence(a.paging, tile.b, tile.pages, tile.sk); // (attention/paged_table.h)
#else
  if (a.cu_seqlens_k) {
    const int k0 = a.cu_seqlens_k[tile.b];
    tile.sk = a.cu_seqlens_k[tile.b + 1] - k0;
    kb = k0 * a.k_stride.s;
    vb = k0 * a.v_stride.s;
    tile.k_tok0 = k0;
  } else {
    tile.sk = a.seqlen_k;
    kb = tile.b * a.k_stride.b;
    vb = tile.b * a.v_stride.b;
  }
#endif
  tile.diag = tile.sk - sq; // from the true lengths (ckjit.h's diagonal)
  tile.sq = sq > a.seqlen_q ? a.seqlen_q : sq; // varlen rows past the maximum are not computed
  if (tile.m0 >= tile.sq) return false;
  tile.q = static_cast<const T *>(a.q) + q_off + tile.h * a.q_stride.h;
  tile.o = static_cast<T *>(a.o) + o_off + tile.h * a.o_stride.h;
  tile.k = static_cast<const attn_kv_t *>(a.k) + kb + tile.g * a.k_stride.h;
  tile.v = static_cast<const attn_kv_t *>(a.v) + vb + tile.g * a.v_stride.h;
#if KV8
  tile.k_scale = a.paging.k_scale[tile.g * a.paging.scale_stride];
  tile.v_scale = a.paging.v_scale[tile.g * a.paging.scale_stride];
#else
  tile.k_scale = tile.v_scale = 1.0f;
#endif
  tile.lse = a.lse ? a.lse + lse_off + tile.h * a.lse_stride.h : nullptr;
  tile.lse_ss = a.lse_stride.s;
  return true;
}

// Key j's row of K (`v`: of V), 0 <= j < t.sk; nullptr when its page id
// lies outside the pool: such a row is never read (the loaders fill zeros)
// and is reported through page_error.
CKJIT_INLINE const attn_kv_t *attn_key_row(const ckjit_attention_args &a, const attn_tile &t, bool v,
                                           int j) {
  const attn_kv_t *base = v ? t.v : t.k;
  const long long ld = v ? a.v_stride.s : a.k_stride.s;
#if PAGE
  const int id = paged_page_of(t.pages, j, a.paging.num_pages, a.paging.error);
  if (id < 0) return nullptr;
  return base + (long long)id * (v ? a.paging.v_page : a.paging.k_page) + (long long)(j % PAGE_SLOTS) * ld;
#else
  (void)a;
  return base + (long long)j * ld;
#endif
}

// The keys [begin, end) that some row of the tile may see; begin is a
// multiple of `bn` (the key tile), end <= sk.  Empty (end <= begin) when
// every row of the tile is masked.
CKJIT_INLINE void attn_key_range(const ckjit_attention_args &a, const attn_tile &t, int bn,
                                 int &begin, int &end) {
  const int rows = t.sq - t.m0 < BM ? t.sq - t.m0 : BM;
  end = t.sk;
  begin = 0;
#if MASK != MASK_NONE
  const int right = MASK == MASK_CAUSAL ? 0 : a.window_right;
  const long long hi = (long long)t.m0 + rows - 1 + t.diag + right + 1;
  if (hi < end) end = hi < 0 ? 0 : (int)hi;
#endif
#if MASK == MASK_WINDOW
  const long long lo = (long long)t.m0 + t.diag - a.window_left;
  if (lo > 0) begin = (int)(lo / bn * bn);
#endif
  (void)a;
  (void)rows;
}

// Whether key tile [n0, n0 + bn) needs the per-element mask for the
// tile's rows: it crosses the sequence end or a mask edge.
CKJIT_INLINE bool attn_tile_masked(const ckjit_attention_args &a, const attn_tile &t, int n0,
                                   int bn) {
  bool masked = n0 + bn > t.sk;
#if MASK != MASK_NONE
  const int right = MASK == MASK_CAUSAL ? 0 : a.window_right;
  masked |= (long long)n0 + bn - 1 > (long long)t.m0 + t.diag + right;
#endif
#if MASK == MASK_WINDOW
  const int rows = t.sq - t.m0 < BM ? t.sq - t.m0 : BM;
  masked |= (long long)n0 < (long long)t.m0 + rows - 1 + t.diag - a.window_left;
#endif
  (void)a;
  return masked;
}

// The keys query row i (local) may see: lo <= j <= hi (empty: hi < lo).
// In 32 bits: i + diag lies in [-2^30, sk) with sk <= 2^30, and the window
// bounds are at most 2^30 (CKJIT_ATTENTION_UNBOUNDED), so both edges fit
// an int; lo >= 0 and hi <= sk - 1, so an offset from a key of the row's
// tile fits too.
CKJIT_INLINE void attn_key_bounds(const ckjit_attention_args &a, const attn_tile &t, int i, int &lo,
                                  int &hi) {
  lo = 0;
  hi = t.sk - 1;
#if MASK == MASK_CAUSAL
  const int d = i + t.diag;
  if (d < hi) hi = d;
#elif MASK == MASK_WINDOW
  const int d = i + t.diag;
  if (d + a.window_right < hi) hi = d + a.window_right;
  if (d - a.window_left > lo) lo = d - a.window_left;
#endif
  (void)a;
  (void)i;
}

// Whether query row i (local) may see key j.
CKJIT_INLINE bool attn_allowed(const ckjit_attention_args &a, const attn_tile &t, int i, int j) {
  int lo, hi;
  attn_key_bounds(a, t, i, lo, hi);
  return j >= lo && j <= hi;
}

CKJIT_INLINE float attn_tanh(float x) {
#if defined(CKJIT_NVIDIA)
  float r;
  asm("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return tanhf(x);
#endif
}

// The score transform of one (batch entry, head), in log2 units: the
// logit s (natural units, ckjit.h) times log2(e).  Masking is separate
// (attn_allowed).
struct attn_scorer {
  float scale_log2; // plain: acc * scale_log2
  float cap_in;     // softcap: acc * cap_in = s / cap
  float cap_log2;   // softcap: cap * log2(e)
  float slope_log2; // ALiBi slope * log2(e)
  const attn_bias_t *bias; // row 0, column 0 of the entry's head
  long long bias_ss, bias_sd;
  int diag;
};

CKJIT_INLINE attn_scorer attn_make_scorer(const ckjit_attention_args &a, const attn_tile &t) {
  attn_scorer s;
  // (KV8: K's scale multiplies every q.k sum, so it joins the softmax scale.)
  s.scale_log2 = a.scale_log2 * t.k_scale;
  s.cap_in = SOFTCAP ? s.scale_log2 / (a.softcap * ATTN_LOG2E) : 0.0f;
  s.cap_log2 = SOFTCAP ? a.softcap * ATTN_LOG2E : 0.0f;
  s.slope_log2 = ALIBI ? a.alibi_slopes[t.b * a.alibi_stride_b + t.h] * ATTN_LOG2E : 0.0f;
  s.bias = BIAS != BIAS_NONE ? static_cast<const attn_bias_t *>(a.bias) +
                                   t.b * a.bias_stride.b + t.h * a.bias_stride.h
                             : nullptr;
  s.bias_ss = a.bias_stride.s;
  s.bias_sd = a.bias_stride.d;
  s.diag = t.diag;
  return s;
}

// The score transform without ALiBi: acc = q.k of query row i, key j
// (both local, inside the sequence).
CKJIT_INLINE float attn_score_base(const attn_scorer &s, float acc, int i, int j) {
#if SOFTCAP
  float x = s.cap_log2 * attn_tanh(acc * s.cap_in);
#else
  float x = acc * s.scale_log2;
#endif
#if BIAS != BIAS_NONE
  x += ckjit_to_float(s.bias[i * s.bias_ss + j * s.bias_sd]) * ATTN_LOG2E;
#endif
  (void)i;
  (void)j;
  return x;
}

// The whole transform (the ALiBi term too).
CKJIT_INLINE float attn_score(const attn_scorer &s, float acc, int i, int j) {
  float x = attn_score_base(s, acc, i, j);
#if ALIBI
  // In 32 bits: i + diag < sk <= 2^30 and 0 <= j < sk, so the distance
  // lies in (-2^30, 2^30) (64-bit integer math per score cost 25%).
  const int d = i + s.diag - j;
  x -= s.slope_log2 * (float)(d < 0 ? -d : d);
#endif
  return x;
}

// Row i's end: O = acc / l, rounded to T; 0 when l is 0 (every key
// masked); NaN when l is (a NaN or +inf score).  LSE = (m + log2 l) ln 2,
// with m the row's max in log2 units; -inf when l is 0.
CKJIT_INLINE float attn_inv_l(float l) { return l == 0.0f ? 0.0f : 1.0f / l; }
// One value of a row of O: x * inv_l, exactly 0 for a row whose keys are
// all masked (inv_l 0), even where a NaN or infinity in V met a zero
// probability inside a tensor-core product.  (1 / l is never 0 otherwise:
// l is at least 1 and at most the key count.)
CKJIT_INLINE float attn_scaled(float x, float inv_l) { return inv_l == 0.0f ? 0.0f : x * inv_l; }
CKJIT_INLINE float attn_lse(float m_log2, float l) {
#if defined(CKJIT_NVIDIA)
  const float log2_l = __log2f(l);
#else
  const float log2_l = log2f(l);
#endif
  return l == 0.0f ? -CKJIT_INF : (m_log2 + log2_l) * ATTN_LN2;
}
