/* GEMM Stream-K: how the tiles and their K steps are shared among the
 * blocks (the kernels walk the same split: sk_owner in
 * kernel_src/gemm/problem.h, unit_of in gemm/persistent_units.h, the
 * Stream-K form of gemm/reduce.cu). */
#include "streamk.h"

#include <string.h>

#include "base/int_math.h"

/* Stream-K over `tiles` tiles of `iters` K steps on up to `sms` blocks:
 * all but the last full wave of tiles stay whole (data-parallel); the
 * rest, with the partial wave, is shared out in equal runs of K steps, at
 * least 4 a run where there are enough (fewer blocks otherwise).  Returns
 * the grid (0 for no tiles or no K steps). */
int64_t ckjit__gemm_plan_streamk(int64_t tiles, int64_t iters, int64_t sms, ckjit_streamk *s) {
  memset(s, 0, sizeof *s);
  if (tiles < 1 || iters < 1) return 0;
  const int64_t full = tiles / sms;
  int64_t sk = full >= 2 ? tiles - (full - 1) * sms : tiles;
  if (sk * iters < 4 * sms) sk = tiles; /* too few steps to give every block 4: all in runs */
  int64_t grid = sk * iters / 4;
  grid = grid < 1 ? 1 : grid > sms ? sms : grid;
  const int64_t total = sk * iters;
  s->dp_tiles = tiles - sk, s->sk_tiles = sk, s->iters = iters;
  s->base = total / grid, s->extra = total % grid;
  /* grid <= total, so base >= 1: a tile's iters steps meet at most
   * ceil(iters / base) + 1 runs. */
  s->slots = ckjit__ceil_div(iters, s->base) + 1;
  if (s->slots > grid) s->slots = grid;
  return grid;
}
