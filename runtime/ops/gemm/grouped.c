/* Grouped GEMM (ckjit_gemm_grouped): independent problems of different
 * shapes in one launch, one tile policy for all.  On the persistent TMA
 * pipeline CKJIT_GEMM_TMA_GROUPS problems a launch travel with their
 * tensor maps; elsewhere CKJIT_GEMM_MAX_GROUPS problems a launch. */
#include <stdint.h>
#include <string.h>

#include "abi/gemm_args.h"
#include "base/error.h"
#include "runtime/dispatch.h"
#include "plan.h"
#include "run.h"
#include "tma.h"
#include "validate.h"

/* The kernel arguments travel by value: within the 4 KiB every toolchain
 * allows, and with D's maps within the 32764 bytes of CUDA 12.1+. */
_Static_assert(sizeof(ckjit_gemm_groups) <= 4096, "kernel parameters are limited to 4 KiB");
_Static_assert(sizeof(ckjit_gemm_tma_grouped_args) <= 4096,
               "kernel parameters are limited to 4 KiB before CUDA 12.1");
_Static_assert(sizeof(ckjit_gemm_tma_grouped_store_args) <= 32764,
               "kernel parameters are limited to 32764 bytes");

/* Whether every problem's D can go out through TMA stores (16-byte
 * aligned pointer and rows; empty problems do not launch) and the kernel
 * may take D's maps. */
static int grouped_stores_ok(const ckjit_gemm_desc *descs, int count) {
  for (int i = 0; i < count; i++) {
    const ckjit_gemm_desc *g = &descs[i];
    if (g->m && g->n && ((uintptr_t)g->d % 16 || (g->ldd * (int64_t)ckjit_dtype_size(g->out_dtype)) % 16))
      return 0;
  }
  return ckjit__gemm_large_arguments_ok();
}

/* Grouped on the persistent TMA pipeline: CKJIT_GEMM_TMA_GROUPS problems a
 * launch, each with its tensor maps (and D's with `stores`, spec tma=2).
 * *done: how many leading descs it ran, all of them unless the driver
 * refused a tensor map (quietly: the caller runs the rest, from the first
 * problem of the launch the refusal fell in, so every problem runs exactly
 * once). */
static ckjit_status grouped_tma(ckjit_gpu *gpu, const ckjit_gemm_desc *descs, int count,
                                const gemm_plan *pl, ckjit_spec *spec, int stores, void *stream,
                                int *done) {
  /* The kernel argument itself: 4 KiB, over 5 KB with D's maps. */
  union {
    ckjit_gemm_tma_grouped_args loads;
    ckjit_gemm_tma_grouped_store_args stores;
  } x;
  ckjit_tensor_map *map_a = stores ? x.stores.a : x.loads.a;
  ckjit_tensor_map *map_b = stores ? x.stores.b : x.loads.b;
  ckjit_gemm_problem *g = stores ? x.stores.g : x.loads.g;
  long long *n = stores ? &x.stores.count : &x.loads.count;
  const void *args = stores ? (const void *)&x.stores : (const void *)&x.loads;
  spec->value[GW_TMA] = stores ? 2 : 1;
  const int64_t sms = ckjit__gemm_sm_count(gpu);
  ckjit_status st = CKJIT_SUCCESS;
  for (int i = 0; i < count && !st;) {
    const int first = i;
    int64_t tiles = 0;
    *n = 0;
    for (; i < count && *n < CKJIT_GEMM_TMA_GROUPS; i++) {
      if (descs[i].m == 0 || descs[i].n == 0) continue;
      const int j = (int)(*n)++;
      const int quiet = ckjit__error_quiet(1);
      const int made = ckjit__gemm_encode_maps(gpu, &descs[i], pl, &map_a[j], &map_b[j],
                                               stores ? &x.stores.d[j] : NULL);
      ckjit__error_quiet(quiet);
      if (made != (stores ? 2 : 1)) {
        *done = first;
        return CKJIT_SUCCESS;
      }
      ckjit__gemm_problem_of(&descs[i], pl, &g[j]);
      g[j].tile_begin = tiles;
      tiles += g[j].tiles_m * g[j].tiles_n;
    }
    if (*n) st = ckjit__gemm_launch(gpu, spec, tiles < sms ? tiles : sms, args, stream);
  }
  *done = count;
  return st;
}

ckjit_status ckjit_gemm_grouped(const ckjit_gemm_desc *descs, int count, void *stream) {
  const char *api = "ckjit_gemm_grouped";
  ckjit_status st = ckjit__gemm_check_grouped(api, descs, count, stream);
  if (st) return st;
  const ckjit_gemm_desc *g0 = &descs[0];
  int64_t max_m = 0, max_n = 0, max_k = 0;
  for (int i = 0; i < count; i++) {
    if (descs[i].m > max_m) max_m = descs[i].m;
    if (descs[i].n > max_n) max_n = descs[i].n;
    if (descs[i].k > max_k) max_k = descs[i].k;
  }
  if (max_m == 0 || max_n == 0) return CKJIT_SUCCESS;
  ckjit_gpu *gpu;
  if ((st = ckjit__stream_gpu(stream, &gpu))) return st;
  /* One tile for all, from the largest extents and the narrowest alignment. */
  int vec_a = 8, vec_b = 8, unused;
  for (int i = 0; i < count; i++) {
    int va, vb;
    ckjit__gemm_operand_vecs(&descs[i], &va, &vb);
    if (va < vec_a) vec_a = va;
    if (vb < vec_b) vec_b = vb;
  }
  const gemm_shape shape = {.gpu = gpu, .g = g0, .m = max_m, .n = max_n, .k = max_k, .batch = 1,
                            .vec_a = vec_a, .vec_b = vec_b, .single = 0};
  gemm_plan pl;
  ckjit__gemm_plan(&shape, 0, &pl, &unused);
  /* The kernel's epilogue: a beta term if any problem has one (the others
   * pass C = NULL). */
  ckjit_gemm_desc kind = *g0;
  kind.c = NULL;
  for (int i = 0; i < count; i++)
    if (descs[i].c && descs[i].beta != 0.0f) kind.c = descs[i].c, kind.beta = 1.0f;
  ckjit_spec spec;
  ckjit__gemm_spec(&pl, &kind, 0, 1, &spec);
  int tma = pl.pipe == PIPE_WGMMA;
  for (int i = 0; i < count && tma; i++)
    tma = descs[i].m == 0 || descs[i].n == 0 || ckjit__gemm_tma_ok(gpu, &descs[i]);
  int done = 0;
  if (tma && grouped_stores_ok(descs, count)) {
    /* D through TMA stores; a refused map sends the rest to loads only. */
    st = grouped_tma(gpu, descs, count, &pl, &spec, 1, stream, &done);
    if (st || done == count) return st;
  }
  if (tma) {
    int rest = 0;
    st = grouped_tma(gpu, descs + done, count - done, &pl, &spec, 0, stream, &rest);
    done += rest;
    if (st || done == count) return st;
    spec.value[GW_TMA] = 0; /* the rest on the cp.async pipeline: the same spec without TMA */
  }
  /* Up to CKJIT_GEMM_MAX_GROUPS non-empty problems per launch. */
  ckjit_gemm_groups gs;
  for (int i = done; i < count && !st;) {
    int64_t tiles = 0;
    gs.count = 0;
    for (; i < count && gs.count < CKJIT_GEMM_MAX_GROUPS; i++) {
      if (descs[i].m == 0 || descs[i].n == 0) continue;
      ckjit_gemm_problem *p = &gs.g[gs.count++];
      ckjit__gemm_problem_of(&descs[i], &pl, p);
      p->tile_begin = tiles;
      tiles += p->tiles_m * p->tiles_n;
    }
    if (gs.count) st = ckjit__gemm_launch(gpu, &spec, tiles, &gs, stream);
  }
  return st;
}
