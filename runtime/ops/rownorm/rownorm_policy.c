/* The rownorm tile policy: fused or split, the group and block shape, the
 * occupancy bound, where the fused tile waits, and the split's chunks and
 * row batches. */
#include <string.h>

#include "base/int_math.h"
#include "rownorm.h"

/* Fused when the row fits in one group's registers and there are rows
 * enough to fill the GPU.  Group size, occupancy and where the tile waits
 * come from bench/sweep_rownorm on an H100 (bench/NOTES.md #19, #27, #28):
 *  - short rows (up to 128 vectors): one vector per thread, blocks >= 128,
 *    2048 threads/SM (layernorm: four per thread in a shared-memory tile;
 *    smoothquant: two; blocks of 64);
 *  - longer rows: softmax two vectors per thread at 2048 threads/SM (groups
 *    of 1024 past 1024 vectors); layernorm and rmsnorm four vectors per
 *    thread with the tile in shared memory (registers then allow 1536
 *    threads/SM); the quantizing ops two (four past 1024 vectors) in
 *    registers, smoothquant's longest rows in shared memory.
 * Otherwise split: 256-thread blocks own chunks of a row, each a whole
 * number of tiles, about 4 blocks per multiprocessor in all (so the
 * partials each block folds stay few). */
static void pick(int op, int64_t rows, int64_t cols, int vec, size_t es, int sms,
                 ckjit_rownorm_policy *p) {
  const int max_items = CKJIT_ROWNORM_MAX_VALUES_PER_THREAD / vec;
  const int64_t vecs = ckjit__ceil_div(cols, vec);
  const int softmax = op == OP_SOFTMAX || op == OP_LOG_SOFTMAX;
  const int norm = op == OP_LAYERNORM || op == OP_RMSNORM;
  int64_t rt, items;
  int occupancy, smem = 0, min_threads = 128;
  if (vecs <= 128 && op == OP_LAYERNORM) {
    items = vecs < 4 ? 1 : 4, rt = ckjit__pow2_ceil(ckjit__ceil_div(vecs, items)), occupancy = 1024, smem = 1;
    min_threads = 64;
  } else if (vecs <= 128 && op == OP_SMOOTHQUANT) {
    items = vecs < 2 ? 1 : 2, rt = ckjit__pow2_ceil(ckjit__ceil_div(vecs, items)), occupancy = 1536;
    min_threads = 64;
  } else if (vecs <= 128) {
    rt = ckjit__pow2_ceil(vecs), items = 1, occupancy = 2048;
  } else if (softmax) {
    items = 2, rt = ckjit__pow2_ceil(ckjit__ceil_div(vecs, 2)), occupancy = 2048;
    if (rt > 1024) rt = 1024, items = ckjit__pow2_ceil(ckjit__ceil_div(vecs, 1024)), occupancy = items <= 2 ? 2048 : 1024;
  } else if (norm) {
    items = 4, rt = ckjit__pow2_ceil(ckjit__ceil_div(vecs, 4)), occupancy = 1536, smem = 1;
    if (rt > 512) rt = 512, items = ckjit__pow2_ceil(ckjit__ceil_div(vecs, 512));
  } else {
    items = vecs <= 1024 ? 2 : 4, rt = ckjit__pow2_ceil(ckjit__ceil_div(vecs, items));
    occupancy = vecs <= 1024 ? 1536 : 1024;
    smem = op == OP_SMOOTHQUANT && vecs > 1024;
    if (rt > 512) rt = 512, items = ckjit__pow2_ceil(ckjit__ceil_div(vecs, 512));
  }
  if (items > max_items) rt = 1024, items = ckjit__pow2_ceil(ckjit__ceil_div(vecs, 1024));
  const int fits = items <= max_items;
  const int threads = rt > min_threads ? (int)rt : min_threads;
  const int64_t row_blocks = ckjit__ceil_div(rows, threads / rt);
  if (sms < 1) sms = 1;
  memset(p, 0, sizeof *p);
  if (fits && !(row_blocks < sms / 2 && cols >= 8192)) {
    /* A shared-memory tile must fit the static 48 KiB with room to spare. */
    if (smem && (int64_t)threads * items * vec * (int64_t)es > 32768) smem = 0, occupancy = 1024;
    p->threads = threads;
    p->row_threads = (int)rt;
    p->items = (int)items;
    p->occupancy = occupancy < threads ? threads : occupancy;
    p->smem_tile = smem;
    return;
  }
  p->occupancy = 1024;
  const int64_t target = 4 * (int64_t)sms;
  p->split = 1;
  p->threads = p->row_threads = 256;
  p->items = max_items;
  while (p->items > 1 && rows * ckjit__ceil_div(cols, 256LL * vec * p->items) < target) p->items /= 2;
  const int64_t tile = 256LL * vec * p->items, tiles = ckjit__ceil_div(cols, tile);
  int64_t chunks = ckjit__ceil_div(target, rows);
  if (chunks > tiles) chunks = tiles;
  if (chunks > 1024) chunks = 1024;
  p->chunk_cols = ckjit__ceil_div(tiles, chunks) * tile;
  p->n_chunks = ckjit__ceil_div(cols, p->chunk_cols);
}

void ckjit__rownorm_policy(const ckjit_rownorm_shape *s, int multiprocessors, long long l2_bytes,
                           ckjit_rownorm_policy *out) {
  pick(s->op, s->rows, s->cols, s->vec, s->elem_size, multiprocessors, out);
  out->batch_rows = s->rows;
  if (!out->split) return;
  /* Split: the passes after the first read the data again.  Rows go in
   * batches of about a third of the L2 cache, so that the re-read comes from
   * L2 rather than memory (a row larger than that is one batch;
   * bench/NOTES.md #24).  A batch gets its own chunks, unless it would be
   * fused. */
  const long long l2 = l2_bytes > 0 ? l2_bytes : 24ll << 20;
  const int64_t row_bytes = s->cols * (int64_t)s->elem_size * s->reread_operands;
  int64_t batch = (l2 / 3) / (row_bytes > 0 ? row_bytes : 1);
  if (batch < 1) batch = 1;
  if (batch >= s->rows) return;
  ckjit_rownorm_policy bp;
  pick(s->op, batch, s->cols, s->vec, s->elem_size, multiprocessors, &bp);
  if (!bp.split) return;
  *out = bp;
  out->batch_rows = batch;
}
