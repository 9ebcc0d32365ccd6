/* The wgmma pipeline's tensor maps (see tma.h). */
#include "tma.h"

#include <stdatomic.h>
#include <stdint.h>

#include "base/error.h"
#include "runtime/backend.h"

int ckjit__gemm_tma_ok(const ckjit_gpu *gpu, const ckjit_gemm_desc *g) {
  const int64_t limit = INT32_MAX - 512;
  return gpu->device.tensor_map_encode && g->k > 0 && g->m <= limit && g->n <= limit &&
         g->k <= limit && g->batch <= limit &&
         !(g->batch > 1 && (g->stride_a == 0 || g->stride_b == 0));
}

int ckjit__gemm_encode_maps(ckjit_gpu *gpu, const ckjit_gemm_desc *g, const gemm_plan *pl,
                            ckjit_tensor_map *map_a, ckjit_tensor_map *map_b,
                            ckjit_tensor_map *map_d) {
  const int a_k = g->a_order == CKJIT_ROW_MAJOR, b_k = g->b_order == CKJIT_COL_MAJOR;
  const unsigned long long m = (unsigned long long)g->m, n = (unsigned long long)g->n,
                           k = (unsigned long long)g->k, b = (unsigned long long)g->batch;
  const unsigned long long es = ckjit_dtype_size(g->ab_dtype);
  const unsigned long long lda = (unsigned long long)g->lda * es, ldb = (unsigned long long)g->ldb * es;
  const unsigned long long sa = g->batch > 1 ? (unsigned long long)g->stride_a * es : lda * (a_k ? m : k);
  const unsigned long long sb = g->batch > 1 ? (unsigned long long)g->stride_b * es : ldb * (b_k ? n : k);
  const unsigned long long dims_a[3] = {a_k ? k : m, a_k ? m : k, b}, str_a[2] = {lda, sa};
  const unsigned long long dims_b[3] = {b_k ? k : n, b_k ? n : k, b}, str_b[2] = {ldb, sb};
  /* A K step is one 128-byte row: 64 16-bit or 32 f32 elements; an
   * M/N-contiguous operand comes in panels of as many columns.  In a
   * cluster each block loads its share of the rows of a tile it shares
   * (A along N, B along M: gemm/tma_pipeline.h). */
  const unsigned bk = (unsigned)(128 / es);
  const unsigned box_a[3] = {bk, (a_k ? (unsigned)pl->tile.bm : bk) / (unsigned)pl->cluster_n, 1};
  const unsigned box_b[3] = {bk, (b_k ? (unsigned)pl->tile.bn : bk) / (unsigned)pl->cluster_m, 1};
  if (gpu->device.tensor_map_encode(&gpu->device, map_a, g->ab_dtype, 3, g->a, dims_a, str_a, box_a) ||
      gpu->device.tensor_map_encode(&gpu->device, map_b, g->ab_dtype, 3, g->b, dims_b, str_b, box_b))
    return 0;
  /* D through TMA stores: 16-byte aligned rows and batch entries. */
  const unsigned long long es_d = ckjit_dtype_size(g->out_dtype), ldd = (unsigned long long)g->ldd * es_d;
  const unsigned long long sd = g->batch > 1 ? (unsigned long long)g->stride_d * es_d : ldd * m;
  if (!map_d || (uintptr_t)g->d % 16 || ldd % 16 || sd % 16 || sd == 0) return 1;
  const unsigned long long dims_d[3] = {n, m, b}, str_d[2] = {ldd, sd};
  const unsigned box_d[3] = {(unsigned)(128 / es_d), 128, 1};
  return gpu->device.tensor_map_encode(&gpu->device, map_d, g->out_dtype, 3, g->d, dims_d, str_d, box_d) ? 1 : 2;
}

int ckjit__gemm_large_arguments_ok(void) {
  static atomic_int known; /* 0 unknown, 1 no, 2 yes */
  int v = atomic_load_explicit(&known, memory_order_relaxed);
  if (!v) {
    const ckjit_compiler *c;
    const int quiet = ckjit__error_quiet(1);
    v = ckjit__compiler_get(CKJIT_BACKEND_CUDA, &c) || c->major < 13 ? 1 : 2;
    ckjit__error_quiet(quiet);
    atomic_store_explicit(&known, v, memory_order_relaxed);
  }
  return v == 2;
}
