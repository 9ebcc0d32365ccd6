/* Transpose: validate, plan, arguments, run; and the public front-end. */
#include <stdint.h>

#include "abi/transpose_args.h"
#include "base/error.h"
#include "base/int_math.h"
#include "runtime/dispatch.h"
#include "runtime/ops/op_frame.h"
#include "transpose.h"

typedef struct transpose_call {
  const char *api;
  ckjit_dtype dtype;
  int64_t batch, rows, cols;
  const void *in;
  void *out;
  int64_t ld_in, batch_stride_in, ld_out, batch_stride_out;
  void *stream;
} transpose_call;

static ckjit_status validate(const transpose_call *c) {
  ckjit_status st = ckjit__check_dtype(c->api, c->dtype);
  if (st) return st;
  size_t es = ckjit_dtype_size(c->dtype);
  if (c->batch < 1)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: batch is %lld; must be >= 1", c->api,
                       (long long)c->batch);
  if (c->batch > 1 && (c->batch_stride_in < 0 || c->batch_stride_out < 0))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: negative batch stride", c->api);
  /* A batch is checked as a matrix of `batch` rows of the batch stride. */
  if ((st = ckjit__check_matrix(c->api, "in", c->in, c->rows, c->cols, c->ld_in, es))) return st;
  if ((st = ckjit__check_matrix(c->api, "out", c->out, c->cols, c->rows, c->ld_out, es))) return st;
  if (c->batch > 1) {
    int64_t extent_in = (c->rows - 1) * c->ld_in + c->cols;
    int64_t extent_out = (c->cols - 1) * c->ld_out + c->rows;
    int64_t ld_in = c->batch_stride_in > extent_in ? c->batch_stride_in : extent_in;
    int64_t ld_out = c->batch_stride_out > extent_out ? c->batch_stride_out : extent_out;
    if ((st = ckjit__check_matrix(c->api, "in (batched)", c->in, c->batch, extent_in, ld_in, es)) ||
        (st = ckjit__check_matrix(c->api, "out (batched)", c->out, c->batch, extent_out, ld_out, es)))
      return st;
  }
  const void *const operands[] = {c->in, c->out};
  static const char *const operand_names[] = {"in", "out"};
  return ckjit__check_pointers(c->stream, c->api, 2, operands, operand_names);
}

/* Tile policy: 64 x 64 tiles, 256 threads, the widest vector (at most 8
 * elements) that both pointers and every stride allow.  Grid: column tiles
 * (x), row tiles (y) and batches (z); the kernel walks y and z grid-stride
 * past the grid limits, but not x, so more column tiles than the grid
 * holds are refused. */
static ckjit_status plan(const transpose_call *c, ckjit_launch_plan *p) {
  const int tile = 64, threads = 256;
  const void *ptrs[2] = {c->in, c->out};
  const int64_t strides[4] = {c->ld_in, c->ld_out, c->batch_stride_in, c->batch_stride_out};
  const int vec = ckjit__pick_vec(ckjit_dtype_size(c->dtype), ptrs, 2, strides,
                                  c->batch > 1 ? 4 : 2, TRANSPOSE_MAX_VEC);
  ckjit__plan_init(p, CKJIT_FAMILY_TRANSPOSE);
  int32_t *v = p->spec.value;
  v[TRANSPOSE_DTYPE] = ckjit__dtype_param_value(c->dtype);
  v[TRANSPOSE_TILE] = tile;
  v[TRANSPOSE_VEC] = vec;
  v[TRANSPOSE_THREADS] = threads;
  const int64_t col_tiles = ckjit__ceil_div(c->cols, tile);
  if (col_tiles > CKJIT_GRID_X_MAX)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "%s: %lld columns is more than the grid allows",
                       c->api, (long long)c->cols);
  p->grid[0] = (unsigned)col_tiles;
  p->grid[1] = ckjit__grid_yz(ckjit__ceil_div(c->rows, tile));
  p->grid[2] = ckjit__grid_yz(c->batch);
  p->block[0] = (unsigned)threads;
  return CKJIT_SUCCESS;
}

static ckjit_transpose_args arguments(const transpose_call *c) {
  return (ckjit_transpose_args){
      .in = c->in, .ld_in = c->ld_in, .bs_in = c->batch_stride_in, .out = c->out,
      .ld_out = c->ld_out, .bs_out = c->batch_stride_out, .rows = c->rows, .cols = c->cols,
      .batch = c->batch};
}

ckjit_status ckjit_transpose(ckjit_dtype dtype, int64_t batch, int64_t rows, int64_t cols,
                             const void *in, int64_t ld_in, int64_t batch_stride_in, void *out,
                             int64_t ld_out, int64_t batch_stride_out, void *stream) {
  const transpose_call c = {.api = "ckjit_transpose", .dtype = dtype, .batch = batch,
                            .rows = rows, .cols = cols, .in = in, .out = out, .ld_in = ld_in,
                            .batch_stride_in = batch_stride_in, .ld_out = ld_out,
                            .batch_stride_out = batch_stride_out, .stream = stream};
  ckjit_gpu *gpu;
  ckjit_status st = validate(&c);
  if (st || (st = ckjit__stream_gpu(stream, &gpu))) return st;
  ckjit_launch_plan p;
  if ((st = plan(&c, &p))) return st;
  const ckjit_transpose_args args = arguments(&c);
  return ckjit__op_run(gpu, &p, &args, &ckjit_transpose_args_params, stream);
}
