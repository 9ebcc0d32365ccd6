/* Transpose family: descriptor, tile policy and launch. */
#include <stdint.h>
#include <string.h>

#include "dispatch.h"
#include "../base/error.h"
#include "op_elementwise.h"
#include "spec.h"

enum { P_DTYPE, P_TILE, P_VEC, P_THREADS, P_COUNT };


static const ckjit_param_desc params[P_COUNT] = {
    [P_DTYPE] = CKJIT_DTYPE_PARAM,
    [P_TILE] = {"tile", NULL, NULL, 16, 128, 64},
    [P_VEC] = {"vec", NULL, NULL, 1, 8, 4},
    [P_THREADS] = {"threads", NULL, NULL, 32, 1024, 256},
};

static ckjit_status check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  int vec = v[P_VEC], tile = v[P_TILE];
  if ((vec & (vec - 1)) || (size_t)vec * ckjit__dtype_param_size(v[P_DTYPE]) > 16 || tile % vec)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: transpose vec=%d must be a power of two of at most 16 bytes dividing "
                       "tile=%d",
                       vec, tile);
  if (v[P_THREADS] % 32)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: threads=%d is not a multiple of 32",
                       v[P_THREADS]);
  if ((size_t)tile * (size_t)(tile + 1) * ckjit__dtype_param_size(v[P_DTYPE]) > 48 * 1024)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: transpose tile=%d needs more than 48 KiB "
                       "of shared memory", tile);
  return CKJIT_SUCCESS;
}

/* Default set: the vectorized and the scalar (misaligned) path per dtype. */
static int default_spec(size_t index, ckjit_spec *out) {
  if (index >= 6) return 0;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_TRANSPOSE;
  int dtype = (int)(index / 2);
  out->value[P_DTYPE] = dtype;
  out->value[P_TILE] = 64;
  int32_t widest = (int32_t)(16 / ckjit__dtype_param_size(dtype));
  out->value[P_VEC] = index % 2 ? 1 : widest > 8 ? 8 : widest;
  out->value[P_THREADS] = 256;
  return 1;
}

/* An omitted vec is the widest the policy would pick: 16 bytes, at most 8 elements. */
static void complete(ckjit_spec *s, unsigned given) {
  if (!(given & (1u << P_VEC))) {
    int32_t widest = (int32_t)(16 / ckjit__dtype_param_size(s->value[P_DTYPE]));
    s->value[P_VEC] = widest > 8 ? 8 : widest;
  }
}

const ckjit_family ckjit__family_transpose = {
    .name = "transpose",
    .source = "transpose.cu",
    .kernel = "ckjit_transpose",
    .n_params = P_COUNT,
    .params = params,
    .check = check,
    .default_spec = default_spec,
    .complete = complete,
};

ckjit_status ckjit_transpose(ckjit_dtype dtype, int64_t batch, int64_t rows, int64_t cols,
                             const void *in, int64_t ld_in, int64_t batch_stride_in, void *out,
                             int64_t ld_out, int64_t batch_stride_out, void *stream) {
  const char *api = "ckjit_transpose";
  ckjit_status st = ckjit__check_dtype(api, dtype);
  if (st) return st;
  size_t es = ckjit_dtype_size(dtype);
  if (batch < 1)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: batch is %lld; must be >= 1", api,
                       (long long)batch);
  if (batch > 1 && (batch_stride_in < 0 || batch_stride_out < 0))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: negative batch stride", api);
  /* A batch is checked as a matrix of `batch` rows of the batch stride. */
  if ((st = ckjit__check_matrix(api, "in", in, rows, cols, ld_in, es))) return st;
  if ((st = ckjit__check_matrix(api, "out", out, cols, rows, ld_out, es))) return st;
  if (batch > 1) {
    int64_t extent_in = (rows - 1) * ld_in + cols, extent_out = (cols - 1) * ld_out + rows;
    if ((st = ckjit__check_matrix(api, "in (batched)", in, batch, extent_in,
                                  batch_stride_in > extent_in ? batch_stride_in : extent_in, es)) ||
        (st = ckjit__check_matrix(api, "out (batched)", out, batch, extent_out,
                                  batch_stride_out > extent_out ? batch_stride_out : extent_out, es)))
      return st;
  }

  const void *ptrs[2] = {in, out};
  static const char *const operand_names[] = {"in", "out"};
  if ((st = ckjit__check_pointers(api, 2, ptrs, operand_names))) return st;
  const int tile = 64, threads = 256;
  int64_t strides[4] = {ld_in, ld_out, batch_stride_in, batch_stride_out};
  int vec = ckjit__pick_vec(es, ptrs, 2, strides, batch > 1 ? 4 : 2, 8);
  ckjit_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.family = CKJIT_FAMILY_TRANSPOSE;
  spec.value[P_DTYPE] = ckjit__dtype_param_value(dtype);
  spec.value[P_TILE] = tile;
  spec.value[P_VEC] = vec;
  spec.value[P_THREADS] = threads;

  int64_t col_tiles = (cols + tile - 1) / tile, row_tiles = (rows + tile - 1) / tile;
  if (col_tiles > 0x7fffffff)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "%s: %lld columns is more than the grid allows", api,
                       (long long)cols);
  unsigned grid[3] = {(unsigned)col_tiles, (unsigned)(row_tiles < 65535 ? row_tiles : 65535),
                      (unsigned)(batch < 65535 ? batch : 65535)};
  unsigned block[3] = {(unsigned)threads, 1, 1};

  ckjit_runtime *rt;
  ckjit_kernel *k;
  if ((st = ckjit__kernel_get(&spec, &rt, &k))) return st;
  long long a0 = ld_in, a1 = batch_stride_in, a2 = ld_out, a3 = batch_stride_out, a4 = rows,
            a5 = cols, a6 = batch;
  void *args[] = {&in, &a0, &a1, &out, &a2, &a3, &a4, &a5, &a6};
  return ckjit__kernel_launch(rt, k, grid, block, 0, stream, args);
}
