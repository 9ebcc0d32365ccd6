/* GEMM split-K and Stream-K: slicing K, the partials' scratch, and the
 * reduce kernel that sums them with the epilogue (gemm_reduce). */
#include <string.h>

#include "abi/gemm_args.h"
#include "base/int_math.h"
#include "run.h"
#include "streamk.h"

void ckjit__gemm_slice_k(int64_t k, int bk, int want, int64_t *k_slice, int64_t *splits) {
  if (want <= 1 || k == 0) {
    *k_slice = k > 0 ? k : 1, *splits = 1;
    return;
  }
  int64_t per = ckjit__ceil_div(ckjit__ceil_div(k, want), bk) * bk;
  *k_slice = per;
  *splits = ckjit__ceil_div(k, per);
}

int64_t ckjit__gemm_split_grid(const ckjit_gemm_desc *g, const gemm_plan *pl, int64_t tiles,
                               int64_t splits, int want, int64_t sms, ckjit_streamk *sk,
                               size_t *bytes) {
  *bytes = 0;
  if (want == CKJIT_GEMM_STREAM_K) {
    /* Stream-K: whole tiles through the epilogue, runs into partial slots. */
    const int64_t grid = ckjit__gemm_plan_streamk(tiles, ckjit__ceil_div(g->k, pl->tile.bk), sms, sk);
    *bytes = (size_t)sk->sk_tiles * (size_t)sk->slots * (size_t)(pl->tile.bm * pl->tile.bn) * sizeof(float);
    return grid;
  }
  const int64_t grid = tiles * splits;
  sk->dp_tiles = grid; /* every unit (tile, K slice) whole */
  /* Split-K: partials, then their fixed-order sum with the epilogue. */
  if (splits > 1) *bytes = (size_t)splits * (size_t)g->batch * (size_t)g->m * (size_t)g->n * sizeof(float);
  return grid;
}

ckjit_status ckjit__gemm_launch_reduce(ckjit_gpu *gpu, const ckjit_gemm_desc *g, const gemm_plan *pl,
                                       const ckjit_gemm_problem *p, const ckjit_streamk *sk,
                                       void *stream) {
  ckjit_spec red;
  memset(&red, 0, sizeof red);
  red.family = CKJIT_FAMILY_GEMM_REDUCE;
  red.value[GR_OUT] = ckjit__dtype_param_value(g->out_dtype);
  ckjit__gemm_fill_epilogue(red.value, g, GR_BIAS);
  if (sk) { /* 8 blocks of 16 rows per Stream-K tile */
    red.value[GR_VEC] = 4, red.value[GR_BN] = pl->tile.bn;
    const ckjit_gemm_reduce_sk_args x = {*p, *sk};
    return ckjit__gemm_launch(gpu, &red, sk->sk_tiles * 8, &x, stream);
  }
  red.value[GR_VEC] = g->n % 4 == 0 ? 4 : g->n % 2 == 0 ? 2 : 1;
  const int64_t vecs = g->batch * g->m * (g->n / red.value[GR_VEC]);
  int64_t blocks = ckjit__ceil_div(vecs, 256);
  const int64_t cap = 8 * (int64_t)ckjit__gemm_sm_count(gpu);
  if (blocks > cap) blocks = cap;
  return ckjit__gemm_launch(gpu, &red, blocks, p, stream);
}
