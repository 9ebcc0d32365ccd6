/* Elementwise family: descriptor, tile policy and launch. */
#include "op_elementwise.h"

#include <stdint.h>
#include <string.h>

#include "dispatch.h"
#include "../base/error.h"
#include "../base/int_math.h"
#include "spec.h"

enum { P_DTYPE, P_OP, P_EPILOGUE, P_VEC, P_THREADS, P_UNROLL, P_COUNT };

static const char *const op_names[] = {"identity", "relu", "gelu_tanh", "gelu_erf", "silu",
                                       "sigmoid",  "add",  "sub",       "mul",      "div",
                                       "max",      "min",  NULL};
static const char *const op_tokens[] = {"op_identity", "op_relu", "op_gelu_tanh", "op_gelu_erf",
                                        "op_silu",     "op_sigmoid", "op_add",    "op_sub",
                                        "op_mul",      "op_div",  "op_max",       "op_min"};
static const char *const epilogue_names[] = {"none", "scale_bias", NULL};
static const char *const epilogue_tokens[] = {"0", "1"};

static const ckjit_param_desc params[P_COUNT] = {
    [P_DTYPE] = CKJIT_DTYPE_PARAM,
    [P_OP] = {"op", op_names, op_tokens, 0, 0, 0},
    [P_EPILOGUE] = {"epilogue", epilogue_names, epilogue_tokens, 0, 0, 0},
    [P_VEC] = {"vec", NULL, NULL, 1, 16, 4},
    [P_THREADS] = {"threads", NULL, NULL, 32, 1024, 256},
    [P_UNROLL] = {"unroll", NULL, NULL, 1, 8, 1},
};



static ckjit_status check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  if (!ckjit__is_pow2(v[P_VEC]) || (size_t)v[P_VEC] * ckjit__dtype_param_size(v[P_DTYPE]) > 16)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: elementwise vec=%d must be a power of two of at most 16 bytes",
                       v[P_VEC]);
  if (v[P_THREADS] % 32)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: threads=%d is not a multiple of 32",
                       v[P_THREADS]);
  if (!ckjit__is_pow2(v[P_UNROLL]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: unroll=%d is not a power of two",
                       v[P_UNROLL]);
  return CKJIT_SUCCESS;
}

/* Default set: every op for every dtype on the vectorized fast path. */
static int default_spec(size_t index, ckjit_spec *out) {
  if (index >= 3 * CKJIT_EW_OP_COUNT) return 0;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_ELEMENTWISE;
  int dtype = (int)(index / CKJIT_EW_OP_COUNT), op = (int)(index % CKJIT_EW_OP_COUNT);
  out->value[P_DTYPE] = dtype;
  out->value[P_OP] = op;
  out->value[P_EPILOGUE] = 0;
  out->value[P_VEC] = (int32_t)(16 / ckjit__dtype_param_size(dtype));
  out->value[P_THREADS] = 256;
  out->value[P_UNROLL] = 1;
  return 1;
}

/* An omitted vec is the widest 16-byte vector of the dtype, as the policy picks. */
static void complete(ckjit_spec *s, unsigned given) {
  if (!(given & (1u << P_VEC)))
    s->value[P_VEC] = (int32_t)(16 / ckjit__dtype_param_size(s->value[P_DTYPE]));
}

const ckjit_family ckjit__family_elementwise = {
    .name = "elementwise",
    .source = "elementwise.cu",
    .kernel = "ckjit_elementwise",
    .n_params = P_COUNT,
    .params = params,
    .check = check,
    .default_spec = default_spec,
    .complete = complete,
};

ckjit_status ckjit__check_dtype(const char *api, ckjit_dtype dtype) {
  if (dtype == CKJIT_F32 || dtype == CKJIT_F16 || dtype == CKJIT_BF16) return CKJIT_SUCCESS;
  if (ckjit_dtype_size(dtype))
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "%s: dtype %s is not supported by this op (f32, "
                       "f16, bf16)", api, ckjit_dtype_name(dtype));
  return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: dtype %d is not a ckjit_dtype", api,
                     (int)dtype);
}

ckjit_status ckjit__check_matrix(const char *api, const char *name, const void *ptr, int64_t rows,
                                 int64_t cols, int64_t ld, size_t elem_size) {
  if (!ptr) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", api, name);
  if (rows < 1 || cols < 1)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: %s is %lld x %lld; sizes must be >= 1",
                       api, name, (long long)rows, (long long)cols);
  if (ld < cols)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: row stride of %s (%lld) is smaller than its %lld columns", api, name,
                       (long long)ld, (long long)cols);
  int64_t extent, bytes;
  if (__builtin_mul_overflow(rows - 1, ld, &extent) || __builtin_add_overflow(extent, cols, &extent) ||
      __builtin_mul_overflow(extent, (int64_t)elem_size, &bytes) || (uint64_t)bytes > SIZE_MAX ||
      (uintptr_t)ptr + (uint64_t)bytes < (uintptr_t)ptr)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: %s of %lld x %lld with row stride %lld overflows the address space",
                       api, name, (long long)rows, (long long)cols, (long long)ld);
  return CKJIT_SUCCESS;
}

int ckjit__pick_vec(size_t elem_size, const void *const *ptrs, int n_ptrs, const int64_t *strides,
                    int n_strides, int max_vec) {
  int vec = (int)(16 / elem_size);
  if (vec > max_vec) vec = max_vec;
  for (; vec > 1; vec /= 2) {
    uint64_t bytes = (uint64_t)vec * elem_size;
    int ok = 1;
    for (int i = 0; i < n_ptrs; i++) ok &= (uintptr_t)ptrs[i] % bytes == 0;
    for (int i = 0; i < n_strides; i++) ok &= (uint64_t)strides[i] % (uint64_t)vec == 0;
    if (ok) break;
  }
  return vec;
}

ckjit_status ckjit__elementwise(const char *api, int ew_op, ckjit_dtype dtype, int64_t rows,
                                int64_t cols, const void *a, int64_t ld_a, const void *b,
                                int64_t ld_b, void *y, int64_t ld_y,
                                const ckjit_epilogue *epilogue, void *stream) {
  ckjit_status st = ckjit__check_dtype(api, dtype);
  if (st) return st;
  size_t es = ckjit_dtype_size(dtype);
  int binary = ew_op >= CKJIT_EW_BINARY_FIRST;
  if ((st = ckjit__check_matrix(api, binary ? "a" : "x", a, rows, cols, ld_a, es))) return st;
  if (binary && (st = ckjit__check_matrix(api, "b", b, rows, cols, ld_b, es))) return st;
  if ((st = ckjit__check_matrix(api, "y", y, rows, cols, ld_y, es))) return st;
  const void *const operands[] = {a, b, y};
  static const char *const operand_names[] = {"x", "b", "y"};
  if ((st = ckjit__check_pointers(api, 3, operands, operand_names))) return st;
  if (!binary) b = a, ld_b = ld_a;

  /* Contiguous tensors are one long row: no per-row tails. */
  if (rows > 1 && ld_a == cols && ld_b == cols && ld_y == cols) {
    cols *= rows;
    rows = 1;
    ld_a = ld_b = ld_y = cols;
  }

  /* Tile policy. */
  const void *ptrs[3] = {a, b, y};
  int64_t strides[3] = {ld_a, ld_b, ld_y};
  int vec = ckjit__pick_vec(es, ptrs, 3, strides, rows > 1 ? 3 : 0, 16);
  /* One 16-byte vector per thread (2048 threads per SM: 32 KB in flight)
   * already covers the memory latency: unroll 2 and 4 measured no faster
   * (bench/NOTES.md) and only slow the compile. */
  const int threads = 256, unroll = 1;
  ckjit_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.family = CKJIT_FAMILY_ELEMENTWISE;
  spec.value[P_DTYPE] = ckjit__dtype_param_value(dtype);
  spec.value[P_OP] = ew_op;
  spec.value[P_EPILOGUE] = epilogue != NULL;
  spec.value[P_VEC] = vec;
  spec.value[P_THREADS] = threads;
  spec.value[P_UNROLL] = unroll;

  const int64_t chunk = (int64_t)threads * vec * unroll;
  int64_t gx = (cols + chunk - 1) / chunk;
  unsigned grid[3] = {(unsigned)(gx < 0x7fffffff ? gx : 0x7fffffff),
                      (unsigned)(rows < 65535 ? rows : 65535), 1};
  unsigned block[3] = {(unsigned)threads, 1, 1};

  ckjit_runtime *rt;
  ckjit_kernel *k;
  if ((st = ckjit__kernel_get(&spec, &rt, &k))) return st;
  long long lda = ld_a, ldb = ld_b, ldy = ld_y, nrows = rows, ncols = cols;
  float scale = epilogue ? epilogue->scale : 1.0f, bias = epilogue ? epilogue->bias : 0.0f;
  void *args[] = {&a, &lda, &b, &ldb, &y, &ldy, &nrows, &ncols, &scale, &bias};
  return ckjit__kernel_launch(rt, k, grid, block, 0, stream, args);
}

ckjit_status ckjit_unary(ckjit_unary_op op, ckjit_dtype dtype, int64_t rows, int64_t cols,
                         const void *x, int64_t ld_x, void *y, int64_t ld_y,
                         const ckjit_epilogue *epilogue, void *stream) {
  if ((unsigned)op >= CKJIT_EW_BINARY_FIRST)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_unary: op %d is not a ckjit_unary_op",
                       (int)op);
  return ckjit__elementwise("ckjit_unary", CKJIT_EW_UNARY_FIRST + (int)op, dtype, rows, cols, x,
                            ld_x, NULL, 0, y, ld_y, epilogue, stream);
}

ckjit_status ckjit_binary(ckjit_binary_op op, ckjit_dtype dtype, int64_t rows, int64_t cols,
                          const void *a, int64_t ld_a, const void *b, int64_t ld_b, void *y,
                          int64_t ld_y, const ckjit_epilogue *epilogue, void *stream) {
  if ((unsigned)op >= CKJIT_EW_OP_COUNT - CKJIT_EW_BINARY_FIRST)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_binary: op %d is not a ckjit_binary_op",
                       (int)op);
  return ckjit__elementwise("ckjit_binary", CKJIT_EW_BINARY_FIRST + (int)op, dtype, rows, cols, a,
                            ld_a, b, ld_b, y, ld_y, epilogue, stream);
}
