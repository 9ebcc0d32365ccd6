// paged_append: new tokens' K and V into their slots of a paged pool
// (ckjit_paged_kv_append in ckjit/paged_attention.h).
//
// Problem:  new token i of sequence b goes to position sk_b - n_b + i of
//           the sequence (sk_b after the append, from the tables).
// Policy:   one block per (token slot, K/V head): grid x = batch * max_new
//           (grid-stride), y = heads (grid-stride); its threads copy the
//           head's K row, then its V row, VEC elements at a time (VEC 1:
//           any stride).  A position outside the sequence or a page id
//           outside the pool is not written and sets the error word.
// Kernel argument: ckjit_paged_append_args (abi/paged_append_args.h), by value.
#include "core/prelude.h"
#include "abi/paged_append_args.h"
// @PARAMETERS@

typedef DTYPE T;
#include "attention/paged_table.h"

template <int N> struct append_vec { T e[N]; };
typedef append_vec<VEC> vec_t;

// One row of `dim` elements, VEC at a time (VEC > 1: dim strides are 1).
CKJIT_INLINE void copy_row(T *dst, long long dst_sd, const T *src, long long src_sd, int dim) {
  for (int e = threadIdx.x * VEC; e < dim; e += blockDim.x * VEC) {
    if (VEC > 1) {
      *reinterpret_cast<vec_t *>(dst + e) = *reinterpret_cast<const vec_t *>(src + e);
    } else {
      dst[e * dst_sd] = src[e * src_sd];
    }
  }
}

extern "C" __global__ void __launch_bounds__(THREADS)
ckjit_paged_append(const CKJIT_GRID_CONSTANT ckjit_paged_append_args a) {
  const long long slots = (long long)a.batch * a.max_new;
  for (long long x = blockIdx.x; x < slots; x += gridDim.x) {
    const int b = (int)(x / a.max_new), i = (int)(x % a.max_new);
    const int first = a.cu_seqlens_new[b], n = a.cu_seqlens_new[b + 1] - first;
    if (i >= n) continue;
    const int *pages;
    int sk;
    paged_sequence(a.paging, b, pages, sk);
    const int pos = sk - n + i;
    if (pos < 0) { // more new tokens than the sequence holds
      if (threadIdx.x == 0 && a.paging.error) *a.paging.error = 1;
      continue;
    }
    const int page = paged_page_of(pages, pos, a.paging.num_pages, a.paging.error);
    if (page < 0) continue;
    const long long token = first + i, slot = pos % PAGE;
    for (int g = blockIdx.y; g < a.heads_kv; g += gridDim.y) {
      const ckjit_attention_stride4 ks = a.k_pool_stride, vs = a.v_pool_stride;
      copy_row(static_cast<T *>(a.k_pages) + page * ks.b + slot * ks.s + g * ks.h, ks.d,
               static_cast<const T *>(a.k_new) + token * a.k_new_stride.s + g * a.k_new_stride.h,
               a.k_new_stride.d, a.head_dim_qk);
      copy_row(static_cast<T *>(a.v_pages) + page * vs.b + slot * vs.s + g * vs.h, vs.d,
               static_cast<const T *>(a.v_new) + token * a.v_new_stride.s + g * a.v_new_stride.h,
               a.v_new_stride.d, a.head_dim_v);
    }
  }
}
