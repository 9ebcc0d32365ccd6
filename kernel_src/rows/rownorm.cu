// Rownorm family: per-row softmax, log-softmax, layernorm, rmsnorm and the
// rowwise dynamically quantizing rmsnorm and smoothquant.
//
// Problem:  each row of h (x, or x + residual rounded to T) is reduced to a
//           few statistics (max and sum of exponentials; mean and M2; sum of
//           squares; max |value|), which then transform the row.  f32 math.
// Policy:   a group of ROW_THREADS threads owns a row; each thread moves
//           ITEMS vectors of VEC elements per tile (a tile is
//           ROW_THREADS * VEC * ITEMS columns).  THREADS / ROW_THREADS
//           groups share a block.
// Pipeline: PASS_FUSED: the row is one tile, kept on chip (in registers,
//           or with SMEM_TILE in shared memory): load, reduce within the
//           group, write.  Rows too long for that (or too few to
//           fill the GPU) are split into chunks of chunk_cols columns, one
//           block per (chunk, row), over several launches: PASS_STATS writes
//           each chunk's statistics to `partials`, PASS_AMAX (quantizing
//           rmsnorm only) the chunk's max |y|, and PASS_APPLY folds a row's
//           partials and writes its chunk.
// Epilogue: weight / bias, or rowwise quantization to int8 / fp8 e4m3.
//
// Kernel arguments: CKJIT_ROWNORM_ARGS (abi/rownorm_args.h).  alpha is the
// softmax scale or the norms' eps; Y is T, or the quantized type; split
// passes launch grid (n_chunks, rows), the fused pass a 1D grid.
//
// The pieces, in rows/: rownorm_softmax.h (softmax arithmetic),
// rownorm_quant.h (Y and the rowwise scale), rownorm_tile.h (the on-chip
// tile), rownorm_stats.h (statistics and their merge across a group),
// rownorm_io.h (row access), rownorm_op.h (the per-op transforms).  The
// steps of the row loop are written in place, in the order they run:
// rownorm_loop_tile.h (the row's tile and its load), then the statistics
// (rownorm_loop_fused_stats.h, or rownorm_loop_fold_partials.h in the
// split passes that start from partials), then rownorm_loop_chunk_partials.h
// (the split passes that write partials) or rownorm_loop_output.h.
#include "core/prelude.h"
#include "abi/rownorm_args.h"
// @PARAMETERS@

typedef DTYPE T;

#define IS_SOFTMAX (OP == OP_SOFTMAX || OP == OP_LOG_SOFTMAX)
#define IS_QUANT (OP == OP_RMSNORM_QUANT || OP == OP_SMOOTHQUANT)
#define GROUPS (THREADS / ROW_THREADS)
#define WARPS (THREADS / CKJIT_WARP_SIZE)
#define LANES (ROW_THREADS < CKJIT_WARP_SIZE ? ROW_THREADS : CKJIT_WARP_SIZE)
#define TILE ((long long)ROW_THREADS * VEC * ITEMS)
// Ops whose fused pass keeps a computed value per element (the exponential,
// the value to quantize) in f32 registers instead of recomputing it.
#define KEEPS (OP == OP_SOFTMAX || IS_QUANT)

#include "rows/rownorm_softmax.h"
#include "rows/rownorm_quant.h"
#include "rows/rownorm_tile.h"
#include "rows/rownorm_stats.h"
#include "rows/rownorm_io.h"
#include "rows/rownorm_op.h"

// OCCUPANCY resident threads per multiprocessor at least, so that the loads
// of several rows stay in flight (left alone, the compiler took so many
// registers that few blocks fit: bench/NOTES.md #14, #15).  0: no bound.
// HIP's second bound means something else, so it is NVIDIA only.
#if defined(CKJIT_NVIDIA) && OCCUPANCY > 0
#define BOUNDS __launch_bounds__(THREADS, (OCCUPANCY + THREADS - 1) / THREADS)
#else
#define BOUNDS __launch_bounds__(THREADS)
#endif

extern "C" __global__ void BOUNDS
ckjit_rownorm(const T *x, long long ld_x, const T *res, long long ld_res, T *sum_out,
              long long ld_sum, const T *__restrict__ weight, const T *__restrict__ bias,
              const float *__restrict__ smooth, Y *y, long long ld_y, float *mean_out,
              float *rstd_out, float *row_scale, const int *__restrict__ valid_cols, float alpha,
              float *partials, long long rows, long long cols, long long chunk_cols,
              long long n_chunks) {
  __shared__ float red_smem[2][3][WARPS];
#if SMEM_TILE
  __shared__ ckjit_vec<T, VEC> tile_sm[ITEMS][THREADS];
#endif
  reducer smem = {red_smem, 0};
  const int t = threadIdx.x % ROW_THREADS;
#if PASS == PASS_FUSED
  for (long long rb = blockIdx.x; rb * GROUPS < rows; rb += gridDim.x) {
    const long long r = rb * GROUPS + threadIdx.x / ROW_THREADS;
    const bool row_ok = r < rows; // groups past the end still join the block's syncs
    const long long rr = row_ok ? r : 0;
    const long long c_begin = 0, c_end = row_ok ? cols : 0;
    const long long chunk = 0;
#else
  for (long long r = blockIdx.y; r < rows; r += gridDim.y) {
    const bool row_ok = true;
    const long long rr = r, chunk = blockIdx.x;
    const long long c_begin = chunk * chunk_cols;
    const long long c_end = c_begin + chunk_cols < cols ? c_begin + chunk_cols : cols;
#endif
    const T *xr = x + rr * ld_x;
#if RESIDUAL
    const T *resr = res + rr * ld_res;
#endif
    // Columns that take part: a softmax mask shortens the row.
    long long valid_end = c_end;
#if IS_SOFTMAX
    if (valid_cols && row_ok) {
      long long vc = valid_cols[rr];
      if (vc < valid_end) valid_end = vc < c_begin ? c_begin : vc;
    }
#endif
#include "rows/rownorm_loop_tile.h"

    row_stats st;
    float amax = 0.0f;
#if PASS == PASS_FUSED
#include "rows/rownorm_loop_fused_stats.h"
#elif PASS == PASS_AMAX || PASS == PASS_APPLY
#include "rows/rownorm_loop_fold_partials.h"
#endif

#if PASS == PASS_STATS || PASS == PASS_AMAX
#include "rows/rownorm_loop_chunk_partials.h"
#else
#include "rows/rownorm_loop_output.h"
#endif
  }
}
CKJIT_ABI_KERNEL(ckjit_rownorm, CKJIT_ROWNORM_ARGS);
