/* The reduce family's tile policy: which kernel mode, which vector, and
 * how the work spreads over threads and blocks. */
#include <string.h>

#include "base/int_math.h"
#include "reduce.h"
#include "runtime/ops/op_frame.h"

/* The split over blocks: only when `blocks` (without it) leaves the GPU
 * mostly idle and there is enough to split.  Aims at one full wave of
 * blocks (8 per multiprocessor); each chunk is a multiple of `granule`
 * (a whole unrolled pass of the block, so every block works fully). */
static void pick_split(int64_t blocks, int64_t len, int64_t granule, int sms, reduce_policy *p) {
  p->nsplit = 1;
  p->chunk = len;
  if (blocks >= 2 * (int64_t)sms || len < 2 * granule) return;
  int64_t want = ckjit__ceil_div(8 * (int64_t)sms, blocks), most = len / granule;
  int64_t ns = want < most ? want : most;
  if (ns > REDUCE_MAX_SPLIT) ns = REDUCE_MAX_SPLIT;
  if (ns < 2) return;
  p->chunk = ckjit__ceil_div(ckjit__ceil_div(len, ns), granule) * granule;
  p->nsplit = ckjit__ceil_div(len, p->chunk);
}

/* Shape classes (each a spec, compiled once):
 *   row, rows of <= 8 vectors:   4 threads per row (64 rows per block), unroll 2
 *   row, rows of <= 512 vectors: a warp's 32 threads per row (8 rows per block)
 *   row, longer rows (or rows of > 128 vectors filling less than a block per
 *        multiprocessor):        the whole 256-thread block per row, split over
 *                                blocks when there are few rows
 *   col:                         blockDim.x along the outputs (up to a warp
 *                                before blockDim.y grows), blockDim.y along the
 *                                reduced dim, split over blocks when the
 *                                outputs fill few blocks
 * Vectors are 16 bytes when the pointer and strides allow (ckjit__pick_vec,
 * in ckjit__reduce_policy), 4 in flight per thread.  `sms` is the
 * multiprocessor count. */
static void reduce_policy_pick(const reduce_problem *pb, int mode, int vec, int sms,
                               reduce_policy *p) {
  memset(p, 0, sizeof *p);
  if (sms < 1) sms = 1;
  p->mode = mode;
  p->vec = vec;
  p->threads = REDUCE_BLOCK_THREADS;
  p->unroll = 4;
  if (mode == MODE_ROW) {
    int64_t nv = ckjit__ceil_div(pb->len, vec);
    p->tpr = nv <= 8 ? 4 : nv <= 512 ? 32 : REDUCE_BLOCK_THREADS;
    /* Few rows that take a warp more than one pass: a block per row gives
     * more loads in flight (and may split). */
    if (p->tpr == 32 && nv > 32 * p->unroll && ckjit__ceil_div(pb->n_out, p->threads / 32) < sms)
      p->tpr = REDUCE_BLOCK_THREADS;
    if (p->tpr == 4) p->unroll = 2;
    int64_t groups = ckjit__ceil_div(pb->n_out, p->threads / p->tpr);
    p->nsplit = 1;
    p->chunk = pb->len;
    if (p->tpr == p->threads) pick_split(groups, pb->len, (int64_t)p->tpr * vec * p->unroll, sms, p);
    p->block[0] = (unsigned)p->threads;
    p->block[1] = p->block[2] = 1;
    p->work = groups * p->nsplit;
  } else {
    p->tpr = p->threads;
    int64_t tx_need = ckjit__ceil_div(pb->n_out, vec), ty_need = ckjit__ceil_div(pb->len, p->unroll);
    tx_need = ckjit__pow2_ceil(tx_need < p->threads ? tx_need : p->threads);
    ty_need = ckjit__pow2_ceil(ty_need < p->threads ? ty_need : p->threads);
    int64_t ty = p->threads / (tx_need < 32 ? tx_need : 32);
    if (ty > ty_need) ty = ty_need;
    int64_t tx = p->threads / ty;
    if (tx > tx_need) tx = tx_need;
    int64_t tiles = ckjit__ceil_div(pb->n_out, tx * vec);
    pick_split(tiles, pb->len, ty * p->unroll * 2, sms, p);
    p->block[0] = (unsigned)tx;
    p->block[1] = (unsigned)ty;
    p->block[2] = 1;
    p->work = tiles * p->nsplit;
  }
  p->combine_group = p->nsplit > REDUCE_COMBINE_WIDE ? REDUCE_BLOCK_THREADS : 32;
}

void ckjit__reduce_policy(reduce_problem *pb, const void *x, size_t elem_size, int sms,
                          reduce_policy *p) {
  /* Row kernel when the reduced dim is contiguous, or at least no kept dim
   * is closer-packed (then lanes stay close); else the column kernel. */
  int64_t min_kept = INT64_MAX;
  for (int k = 0; k < pb->nk; k++)
    if (pb->xs[k] < min_kept) min_kept = pb->xs[k];
  int mode = pb->rstride == 1 || pb->rstride <= min_kept ? MODE_ROW : MODE_COL;
  int vec = 1;
  if (mode == MODE_ROW) {
    if (pb->rstride == 1) vec = ckjit__pick_vec(elem_size, &x, 1, pb->xs, pb->nk, 16);
  } else {
    /* Columns: sort the kept dims by x stride (dim 0 the smallest); y
     * strides travel with them.  Vectors run along dim 0 when it is
     * contiguous and a vector never crosses its end. */
    for (int a = 1; a < pb->nk; a++)
      for (int b = a; b > 0 && pb->xs[b] < pb->xs[b - 1]; b--) {
        int64_t t;
        t = pb->n[b], pb->n[b] = pb->n[b - 1], pb->n[b - 1] = t;
        t = pb->xs[b], pb->xs[b] = pb->xs[b - 1], pb->xs[b - 1] = t;
        t = pb->ys[b], pb->ys[b] = pb->ys[b - 1], pb->ys[b - 1] = t;
      }
    if (pb->xs[0] == 1) {
      int64_t strides[4] = {pb->rstride, pb->n[0], pb->xs[1], pb->xs[2]};
      vec = ckjit__pick_vec(elem_size, &x, 1, strides, 4, 16);
    }
  }
  reduce_policy_pick(pb, mode, vec, sms, p);
}
