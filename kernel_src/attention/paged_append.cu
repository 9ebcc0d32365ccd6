// paged_append: new tokens' K and V into their slots of a paged pool
// (ckjit_paged_kv_append in ckjit/paged_attention.h).
//
// Problem:  new token i of sequence b goes to position sk_b - n_b + i of
//           the sequence (sk_b after the append, from the tables).
// Policy:   a block per TOKENS new tokens of one sequence (grid x = batch
//           * ceil(max_new / TOKENS), walked grid-stride): one walk of the
//           sequence's tables, then its threads copy the tokens' K rows of
//           every K/V head, then their V rows, VEC elements at a time (VEC 1:
//           any stride), four pieces loaded before any is stored so their
//           loads are in flight together.  A position outside the sequence
//           or a page id outside the pool is not written and sets the error
//           word.
// Kernel argument: ckjit_paged_append_args (abi/paged_append_args.h), by value.
#include "core/prelude.h"
#include "abi/paged_append_args.h"
// @PARAMETERS@

typedef DTYPE T;
#include "attention/paged_table.h"

// (Aligned to its size, so one access moves it.)
template <class E, int N> struct alignas(sizeof(E) * N) append_vec { E e[N]; };
typedef append_vec<T, VEC> vec_t;
// The pool's elements: T, or fp8 e4m3 (KV8), stored as e4m3(x / scale).
#if KV8
typedef unsigned char pool_t;
#else
typedef T pool_t;
#endif
typedef append_vec<pool_t, VEC> pool_vec_t;

#define TOKENS CKJIT_PAGED_APPEND_TOKENS
#define BATCHED 4 // pieces loaded before they are stored

// Pieces [0, TOKENS * heads * dim / VEC) of the block's tokens of K (or
// V): token t's head g, elements [e, e + VEC) from new token first + t
// (src: packed tokens, strides ss, sh, sd) to slot pos0 + t of its page
// (dst: the pool, strides page, slot ps, sh, sd).
struct append_side {
  pool_t *pool;
  ckjit_attention_stride4 pool_stride;
  const T *src;
  ckjit_attention_stride4 src_stride;
  int dim;
  const float *scale; // KV8: the side's dequantization scales (head g: scale[g * scale_stride])
};

// One piece as the pool stores it.
// (x / scale, divided: a product with 1 / scale rounds some exact ties
// between two codes to the other code.)
CKJIT_INLINE pool_vec_t to_pool(const vec_t &v, float scale) {
  pool_vec_t p;
#pragma unroll
  for (int i = 0; i < VEC; i++) {
#if KV8
    p.e[i] = ckjit_to_e4m3(__fdiv_rn(ckjit_to_float(v.e[i]), scale));
#else
    p.e[i] = v.e[i];
    (void)scale;
#endif
  }
  return p;
}

CKJIT_INLINE void copy_tokens(const ckjit_paged_append_args &a, const append_side &side, const int *pages,
                              long long first, int pos0, int count) {
  const int per_head = side.dim / VEC, per_token = a.heads_kv * per_head, total = count * per_token;
  for (int c0 = threadIdx.x; c0 < total; c0 += BATCHED * THREADS) {
    vec_t v[BATCHED];
    pool_t *dst[BATCHED];
    float scale[BATCHED];
#pragma unroll
    for (int u = 0; u < BATCHED; u++) {
      const int c = c0 + u * THREADS, t = c / per_token, g = c % per_token / per_head, e = VEC * (c % per_head);
      dst[u] = nullptr;
      if (c >= total) continue;
      const int pos = pos0 + t, page = paged_page_of(pages, pos, a.paging.num_pages, a.paging.error);
      if (page < 0) continue;
      const ckjit_attention_stride4 ps = side.pool_stride, ss = side.src_stride;
      dst[u] = side.pool + page * ps.b + (long long)(pos % PAGE) * ps.s + g * ps.h + e * ps.d;
      scale[u] = KV8 ? side.scale[g * a.paging.scale_stride] : 1.0f;
      const T *src = side.src + (first + t) * ss.s + g * ss.h + e * ss.d;
      if (VEC > 1) {
        v[u] = *reinterpret_cast<const vec_t *>(src);
      } else {
        v[u].e[0] = *src;
      }
    }
#pragma unroll
    for (int u = 0; u < BATCHED; u++) {
      if (!dst[u]) continue;
      const pool_vec_t p = to_pool(v[u], scale[u]);
      if (VEC > 1) *reinterpret_cast<pool_vec_t *>(dst[u]) = p;
      else *dst[u] = p.e[0];
    }
  }
}

extern "C" __global__ void __launch_bounds__(THREADS)
ckjit_paged_append(const CKJIT_GRID_CONSTANT ckjit_paged_append_args a) {
  const long long groups = (a.max_new + TOKENS - 1) / TOKENS, units = (long long)a.batch * groups;
  for (long long x = blockIdx.x; x < units; x += gridDim.x) {
    const int b = (int)(x / groups), i0 = (int)(x % groups) * TOKENS;
    const int first = a.cu_seqlens_new[b], n = a.cu_seqlens_new[b + 1] - first;
    if (i0 >= n) continue;
    const int *pages;
    int sk;
    paged_sequence(a.paging, b, pages, sk);
    if (sk - n < 0) { // more new tokens than the sequence holds
      if (threadIdx.x == 0 && a.paging.error) *a.paging.error = 1;
      continue;
    }
    const int count = n - i0 < TOKENS ? n - i0 : TOKENS, pos0 = sk - n + i0;
    const append_side k = {static_cast<pool_t *>(a.k_pages), a.k_pool_stride, static_cast<const T *>(a.k_new),
                           a.k_new_stride, a.head_dim_qk, a.paging.k_scale};
    const append_side v = {static_cast<pool_t *>(a.v_pages), a.v_pool_stride, static_cast<const T *>(a.v_new),
                           a.v_new_stride, a.head_dim_v, a.paging.v_scale};
    copy_tokens(a, k, pages, first + i0, pos0, count);
    copy_tokens(a, v, pages, first + i0, pos0, count);
  }
}
