// Part of ckjit_rownorm's row loop (rows/rownorm.cu), included there, not a
// header: passes stats and amax reduce their chunk of the row, tile by
// tile, to one partial, which the first thread writes to `partials`:
//   stats: the op's statistic, 2 floats at (row * n_chunks + chunk) * 2 (a
//          and b; moments: mean and M2, the count follows from the chunk's
//          columns);
//   amax:  rmsnorm_quant's max |y| (y with the row's statistics st, folded
//          before), at rows * n_chunks * 2 + row * n_chunks + chunk.
// Partials are folded in a fixed order, so results do not depend on
// scheduling.
    // Statistics of this chunk, tile by tile.
    stat part = stat_empty<PASS == PASS_AMAX ? KIND_MAX : KIND>();
    for (long long c0 = c_begin; c0 < c_end; c0 += TILE) {
      load_tile(c0);
#if PASS == PASS_AMAX
#pragma unroll
      for (int i = 0; i < ITEMS; i++) {
        float w[VEC] = {}, b[VEC] = {};
#if AFFINE != AFFINE_NONE
        load(weight, col(i), c_end, w);
#endif
#pragma unroll
        for (int k = 0; k < VEC; k++)
          if (ok(i, k)) part.a = ckjit_nan_max(part.a, fabsf(op_output(val(i, k), st, w[k], b[k])));
      }
#else
      part = merge<KIND>(part, tile_stat(val, ok));
#endif
    }
    part = group_combine<PASS == PASS_AMAX ? KIND_MAX : KIND>(part, smem);
    if (threadIdx.x == 0) {
#if PASS == PASS_AMAX
      partials[rows * n_chunks * 2 + rr * n_chunks + chunk] = part.a;
#elif KIND == KIND_MOMENTS
      partials[(rr * n_chunks + chunk) * 2] = part.b;
      partials[(rr * n_chunks + chunk) * 2 + 1] = part.c;
#else
      partials[(rr * n_chunks + chunk) * 2] = part.a;
      partials[(rr * n_chunks + chunk) * 2 + 1] = part.b;
#endif
    }
