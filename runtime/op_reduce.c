/* reduce family: descriptor, tile policy, validation and launch.
 *
 * One kernel template (kernel_src/reduce.cu) with three modes: `row` (the
 * reduced dim is contiguous or the innermost), `col` (it is strided: threads
 * run along the kept dim of smallest stride) and `combine` (pass 2 of a
 * reduction split over blocks).  See the top of reduce.cu for the problem
 * and the kernel arguments. */
#include <stdint.h>
#include <string.h>

#include "dispatch.h"
#include "../base/error.h"
#include "../base/int_math.h"
#include "op_elementwise.h"
#include "runtime.h"
#include "spec.h"

enum { P_DTYPE, P_OP, P_YDTYPE, P_MODE, P_VEC, P_THREADS, P_TPR, P_UNROLL, P_COUNT };
enum { MODE_ROW, MODE_COL, MODE_COMBINE };
enum { Y_F32, Y_F16, Y_BF16, Y_I32, Y_I64 };

static const char *const op_names[] = {"sum", "mean", "max", "min", "argmax", "argmin", NULL};
static const char *const op_tokens[] = {"0", "1", "2", "3", "4", "5"};
static const char *const ydtype_names[] = {"f32", "f16", "bf16", "i32", "i64", NULL};
static const char *const ydtype_tokens[] = {"float", "ckjit_half", "ckjit_bf16", "int",
                                            "long long"};
static const char *const mode_names[] = {"row", "col", "combine", NULL};
static const char *const mode_tokens[] = {"0", "1", "2"};

static const ckjit_param_desc params[P_COUNT] = {
    [P_DTYPE] = CKJIT_DTYPE_PARAM,
    [P_OP] = {"op", op_names, op_tokens, 0, 0, 0},
    [P_YDTYPE] = {"ydtype", ydtype_names, ydtype_tokens, 0, 0, 0},
    [P_MODE] = {"mode", mode_names, mode_tokens, 0, 0, 0},
    [P_VEC] = {"vec", NULL, NULL, 1, 16, 4},
    [P_THREADS] = {"threads", NULL, NULL, 32, 1024, 256},
    [P_TPR] = {"tpr", NULL, NULL, 1, 1024, 256},
    [P_UNROLL] = {"unroll", NULL, NULL, 1, 8, 4},
};

/* Tile policy constants (see reduce_policy_pick). */
enum {
  BLOCK_THREADS = 256,
  MAX_SPLIT = 1024,      /* partials per output: the combine reads them in one pass */
  MAX_GRID = 1 << 21,    /* grid-stride beyond; keeps grid.x * block < 2^32 (HIP) */
  COMBINE_WIDE = 128     /* more partials than this: a whole block per output */
};


static int is_arg_op(int op) { return op == CKJIT_REDUCE_ARGMAX || op == CKJIT_REDUCE_ARGMIN; }

static ckjit_status check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  const int arg = is_arg_op(v[P_OP]), mode = v[P_MODE];
  if (arg != (v[P_YDTYPE] >= Y_I32))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: reduce op=%s needs ydtype=%s",
                       op_names[v[P_OP]], arg ? "i32|i64" : "f32|f16|bf16");
  if (!ckjit__is_pow2(v[P_VEC]) || (size_t)v[P_VEC] * ckjit__dtype_param_size(v[P_DTYPE]) > 16)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: reduce vec=%d must be a power of two of at most 16 bytes", v[P_VEC]);
  if (!ckjit__is_pow2(v[P_THREADS]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: reduce threads=%d is not a power of two",
                       v[P_THREADS]);
  if (!ckjit__is_pow2(v[P_TPR]) || v[P_TPR] > v[P_THREADS])
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: reduce tpr=%d must be a power of two of at most threads=%d",
                       v[P_TPR], v[P_THREADS]);
  /* col and combine choose their thread layout at run time: tpr is fixed to
   * `threads` so that each kernel has one spelling. */
  if (mode != MODE_ROW && v[P_TPR] != v[P_THREADS])
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: reduce mode=%s needs tpr=threads",
                       mode_names[mode]);
  if (mode == MODE_COMBINE && (v[P_DTYPE] != 0 || v[P_VEC] != 1))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: reduce mode=combine reads f32 partials: needs dtype=f32,vec=1");
  if (mode == MODE_COL &&
      (size_t)v[P_THREADS] * (size_t)v[P_VEC] * (arg ? 12u : 4u) > 48 * 1024)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: reduce mode=col with threads=%d vec=%d needs more than 48 KiB of "
                       "shared memory",
                       v[P_THREADS], v[P_VEC]);
  return CKJIT_SUCCESS;
}

static int32_t widest_vec(int32_t dtype) { return (int32_t)(16 / ckjit__dtype_param_size(dtype)); }

/* Default set: the row kernel of the long-row class (a block per row, which
 * the split uses too) per op and dtype, with torch's output dtype (the
 * input's; i64 indices); then the combine pass per op and those outputs;
 * then the column kernel (a strided reduced dim) per op and dtype, scalar
 * and widest vector. */
enum { N_DEFAULT_ROW = 3 * 6, N_DEFAULT_COMBINE = 4 * 3 + 2, N_DEFAULT_COL = 3 * 6 * 2 };

static int default_spec(size_t index, ckjit_spec *out) {
  if (index >= N_DEFAULT_ROW + N_DEFAULT_COMBINE + N_DEFAULT_COL) return 0;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_REDUCE;
  int32_t *v = out->value;
  v[P_THREADS] = BLOCK_THREADS;
  v[P_TPR] = BLOCK_THREADS;
  v[P_UNROLL] = 4;
  if (index < N_DEFAULT_ROW) {
    int32_t dtype = (int32_t)(index / 6), op = (int32_t)(index % 6);
    v[P_DTYPE] = dtype;
    v[P_OP] = op;
    v[P_YDTYPE] = is_arg_op(op) ? Y_I64 : dtype;
    v[P_MODE] = MODE_ROW;
    v[P_VEC] = widest_vec(dtype);
  } else if (index >= N_DEFAULT_ROW + N_DEFAULT_COMBINE) {
    size_t i = index - N_DEFAULT_ROW - N_DEFAULT_COMBINE;
    int32_t dtype = (int32_t)(i / 12), op = (int32_t)(i % 12 / 2);
    v[P_DTYPE] = dtype;
    v[P_OP] = op;
    v[P_YDTYPE] = is_arg_op(op) ? Y_I64 : dtype;
    v[P_MODE] = MODE_COL;
    v[P_VEC] = i % 2 ? widest_vec(dtype) : 1;
  } else {
    size_t i = index - N_DEFAULT_ROW;
    v[P_DTYPE] = 0;
    v[P_MODE] = MODE_COMBINE;
    v[P_VEC] = 1;
    if (i < 12) {
      v[P_OP] = (int32_t)(i / 3);
      v[P_YDTYPE] = (int32_t)(i % 3);
    } else {
      v[P_OP] = i == 12 ? CKJIT_REDUCE_ARGMAX : CKJIT_REDUCE_ARGMIN;
      v[P_YDTYPE] = Y_I64;
    }
  }
  return 1;
}

/* An omitted vec is the widest 16-byte vector of the dtype, as the policy
 * picks for aligned data (1 for combine, which reads scalars). */
static void complete(ckjit_spec *s, unsigned given) {
  if (!(given & (1u << P_VEC)))
    s->value[P_VEC] = s->value[P_MODE] == MODE_COMBINE ? 1 : widest_vec(s->value[P_DTYPE]);
}

const ckjit_family ckjit__family_reduce = {
    .name = "reduce",
    .source = "reduce.cu",
    .kernel = "ckjit_reduce",
    .n_params = P_COUNT,
    .params = params,
    .check = check,
    .default_spec = default_spec,
    .complete = complete,
};

/* ---- problem ------------------------------------------------------------- */

/* The reduction as the kernel sees it: outputs o < n_out over up to three
 * kept dims (dim 0 fastest along o), each with its x and y stride; the
 * reduced dim of `len` elements with x stride `rstride`. */
typedef struct reduce_problem {
  int nk;             /* kept dims (0..3) */
  int64_t n[3], xs[3], ys[3];
  int64_t n_out, len, rstride;
} reduce_problem;

/* Launch configuration chosen by the tile policy. */
typedef struct reduce_policy {
  int mode, vec, threads, tpr, unroll;
  unsigned block[3];
  int64_t work;   /* blocks' worth of work items (grid-stride beyond MAX_GRID) */
  int64_t nsplit; /* > 1: pass 1 writes partials, then a combine pass */
  int64_t chunk;  /* reduced elements per split */
  int combine_group; /* threads per output in the combine pass */
} reduce_policy;


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
  if (ns > MAX_SPLIT) ns = MAX_SPLIT;
  if (ns < 2) return;
  p->chunk = ckjit__ceil_div(ckjit__ceil_div(len, ns), granule) * granule;
  p->nsplit = ckjit__ceil_div(len, p->chunk);
}

/* Tile policy.  Shape classes (each a spec, compiled once):
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
 * by the caller), 4 in flight per thread.  `sms` is the multiprocessor count. */
static void reduce_policy_pick(const reduce_problem *pb, int mode, int vec, int sms,
                               reduce_policy *p) {
  memset(p, 0, sizeof *p);
  if (sms < 1) sms = 1;
  p->mode = mode;
  p->vec = vec;
  p->threads = BLOCK_THREADS;
  p->unroll = 4;
  if (mode == MODE_ROW) {
    int64_t nv = ckjit__ceil_div(pb->len, vec);
    p->tpr = nv <= 8 ? 4 : nv <= 512 ? 32 : BLOCK_THREADS;
    /* Few rows that take a warp more than one pass: a block per row gives
     * more loads in flight (and may split). */
    if (p->tpr == 32 && nv > 32 * p->unroll && ckjit__ceil_div(pb->n_out, p->threads / 32) < sms)
      p->tpr = BLOCK_THREADS;
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
  p->combine_group = p->nsplit > COMBINE_WIDE ? BLOCK_THREADS : 32;
}

/* ---- validation ------------------------------------------------------------ */

static ckjit_status check_ops(const char *api, ckjit_reduce_op op, ckjit_dtype dtype,
                              ckjit_dtype y_dtype) {
  if ((unsigned)op > CKJIT_REDUCE_ARGMIN)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: op %d is not a ckjit_reduce_op", api,
                       (int)op);
  ckjit_status st = ckjit__check_dtype(api, dtype);
  if (st) return st;
  if (!ckjit_dtype_size(y_dtype))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: y_dtype %d is not a ckjit_dtype", api,
                       (int)y_dtype);
  if (is_arg_op(op)) {
    if (y_dtype != CKJIT_I32 && y_dtype != CKJIT_I64)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                         "%s: %s writes indices: y_dtype must be i32 or i64, not %s", api,
                         op_names[op], ckjit_dtype_name(y_dtype));
  } else if (y_dtype != CKJIT_F32 && y_dtype != CKJIT_F16 && y_dtype != CKJIT_BF16) {
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: %s writes values: y_dtype must be f32, f16 or bf16, not %s", api,
                       op_names[op], ckjit_dtype_name(y_dtype));
  }
  return CKJIT_SUCCESS;
}

static int32_t ydtype_param(ckjit_dtype y_dtype) {
  switch (y_dtype) {
    case CKJIT_F16: return Y_F16;
    case CKJIT_BF16: return Y_BF16;
    case CKJIT_I32: return Y_I32;
    case CKJIT_I64: return Y_I64;
    default: return Y_F32;
  }
}

/* Checks everything about the call and fills `pb`; no device work. */
static ckjit_status validate(const char *api, ckjit_reduce_op op, ckjit_dtype dtype,
                             const ckjit_tensor_layout *xl, const void *x, int dim,
                             ckjit_dtype y_dtype, const void *y, reduce_problem *pb) {
  ckjit_status st = check_ops(api, op, dtype, y_dtype);
  if (st) return st;
  if (!xl) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: x_layout is NULL", api);
  if (!x) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: x is NULL", api);
  if (!y) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: y is NULL", api);
  if (xl->rank < 1 || xl->rank > 4)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: rank %d is not in 1..4", api, xl->rank);
  if (dim < 0 || dim >= xl->rank)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: dim %d is not in 0..%d (rank %d)", api,
                       dim, xl->rank - 1, xl->rank);
  size_t es = ckjit_dtype_size(dtype), ys = ckjit_dtype_size(y_dtype);
  int64_t extent = 0, n_out = 1, total;
  for (int d = 0; d < xl->rank; d++) {
    int64_t n = xl->shape[d], s = xl->strides[d], e;
    if (n < 1)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: shape[%d] is %lld; sizes must be >= 1",
                         api, d, (long long)n);
    if (s < 0)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: strides[%d] is %lld; strides must be "
                         ">= 0", api, d, (long long)s);
    if (__builtin_mul_overflow(n - 1, s, &e) || __builtin_add_overflow(extent, e, &extent))
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: x's extent overflows (shape[%d] %lld, "
                         "stride %lld)", api, d, (long long)n, (long long)s);
    if (d != dim && __builtin_mul_overflow(n_out, n, &n_out))
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: y has too many elements", api);
  }
  int64_t xbytes, ybytes;
  if (__builtin_add_overflow(extent, 1, &extent) ||
      __builtin_mul_overflow(extent, (int64_t)es, &xbytes) || (uint64_t)xbytes > SIZE_MAX ||
      (uintptr_t)x + (uint64_t)xbytes < (uintptr_t)x)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: x overflows the address space", api);
  if (__builtin_mul_overflow(n_out, (int64_t)ys, &ybytes) || (uint64_t)ybytes > SIZE_MAX ||
      (uintptr_t)y + (uint64_t)ybytes < (uintptr_t)y)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: y (%lld elements of %s) overflows the "
                       "address space", api, (long long)n_out, ckjit_dtype_name(y_dtype));
  if (__builtin_mul_overflow(n_out, xl->shape[dim], &total))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: x has more than 2^63 elements", api);
  if (y_dtype == CKJIT_I32 && xl->shape[dim] - 1 > INT32_MAX)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: dim %d has %lld elements: its indices "
                       "do not fit y_dtype i32 (use i64)", api, dim, (long long)xl->shape[dim]);
  const void *const operands[] = {x, y};
  static const char *const operand_names[] = {"x", "y"};
  if ((st = ckjit__check_pointers(api, 2, operands, operand_names))) return st;

  /* Kept dims in y's (row-major) order, size-1 dims dropped, neighbours
   * merged where x walks them as one (the outer stride is the inner span). */
  memset(pb, 0, sizeof *pb);
  int64_t kn[3], ks[3];
  int nk = 0;
  for (int d = 0; d < xl->rank; d++) {
    if (d == dim || xl->shape[d] == 1) continue;
    int64_t span;
    if (nk && !__builtin_mul_overflow(xl->shape[d], xl->strides[d], &span) && ks[nk - 1] == span) {
      kn[nk - 1] *= xl->shape[d];
      ks[nk - 1] = xl->strides[d];
    } else {
      kn[nk] = xl->shape[d];
      ks[nk] = xl->strides[d];
      nk++;
    }
  }
  /* Kernel order: dim 0 fastest, i.e. y's innermost first. */
  int64_t ystride = 1;
  for (int k = 0; k < nk; k++) {
    pb->n[k] = kn[nk - 1 - k];
    pb->xs[k] = ks[nk - 1 - k];
    pb->ys[k] = ystride;
    ystride *= pb->n[k];
  }
  for (int k = nk; k < 3; k++) pb->n[k] = 1;
  pb->nk = nk;
  pb->n_out = n_out;
  pb->len = xl->shape[dim];
  pb->rstride = xl->shape[dim] == 1 ? 1 : xl->strides[dim];
  return CKJIT_SUCCESS;
}

/* ---- launch ------------------------------------------------------------------ */

static unsigned grid_of(int64_t work) {
  return (unsigned)(work < 1 ? 1 : work < MAX_GRID ? work : MAX_GRID);
}

static ckjit_status reduce_run(const char *api, ckjit_reduce_op op, ckjit_dtype dtype,
                               const ckjit_tensor_layout *xl, const void *x, int dim,
                               ckjit_dtype y_dtype, void *y, void *stream) {
  reduce_problem pb;
  ckjit_status st = validate(api, op, dtype, xl, x, dim, y_dtype, y, &pb);
  if (st) return st;

  ckjit_runtime *rt;
  if ((st = ckjit__runtime_device(&rt))) return st;

  /* Row kernel when the reduced dim is contiguous, or at least no kept dim
   * is closer-packed (then lanes stay close); else the column kernel. */
  size_t es = ckjit_dtype_size(dtype);
  int64_t min_kept = INT64_MAX;
  for (int k = 0; k < pb.nk; k++)
    if (pb.xs[k] < min_kept) min_kept = pb.xs[k];
  int mode = pb.rstride == 1 || pb.rstride <= min_kept ? MODE_ROW : MODE_COL;
  int vec = 1;
  if (mode == MODE_ROW) {
    if (pb.rstride == 1) vec = ckjit__pick_vec(es, &x, 1, pb.xs, pb.nk, 16);
  } else {
    /* Columns: sort the kept dims by x stride (dim 0 the smallest); y
     * strides travel with them.  Vectors run along dim 0 when it is
     * contiguous and a vector never crosses its end. */
    for (int a = 1; a < pb.nk; a++)
      for (int b = a; b > 0 && pb.xs[b] < pb.xs[b - 1]; b--) {
        int64_t t;
        t = pb.n[b], pb.n[b] = pb.n[b - 1], pb.n[b - 1] = t;
        t = pb.xs[b], pb.xs[b] = pb.xs[b - 1], pb.xs[b - 1] = t;
        t = pb.ys[b], pb.ys[b] = pb.ys[b - 1], pb.ys[b - 1] = t;
      }
    if (pb.xs[0] == 1) {
      int64_t strides[4] = {pb.rstride, pb.n[0], pb.xs[1], pb.xs[2]};
      vec = ckjit__pick_vec(es, &x, 1, strides, 4, 16);
    }
  }
  reduce_policy p;
  reduce_policy_pick(&pb, mode, vec, rt->device.multiprocessors, &p);

  ckjit_spec spec, cspec;
  memset(&spec, 0, sizeof spec);
  spec.family = CKJIT_FAMILY_REDUCE;
  spec.value[P_DTYPE] = ckjit__dtype_param_value(dtype);
  spec.value[P_OP] = (int32_t)op;
  spec.value[P_YDTYPE] = ydtype_param(y_dtype);
  spec.value[P_MODE] = p.mode;
  spec.value[P_VEC] = p.vec;
  spec.value[P_THREADS] = p.threads;
  spec.value[P_TPR] = p.tpr;
  spec.value[P_UNROLL] = p.unroll;
  cspec = spec;
  cspec.value[P_DTYPE] = 0;
  cspec.value[P_MODE] = MODE_COMBINE;
  cspec.value[P_VEC] = 1;
  cspec.value[P_THREADS] = BLOCK_THREADS;
  cspec.value[P_TPR] = BLOCK_THREADS;
  cspec.value[P_UNROLL] = 4;

  /* Both kernels before any allocation or launch. */
  ckjit_kernel *k1, *k2 = NULL;
  if ((st = ckjit__kernel_get(&spec, &rt, &k1))) return st;
  if (p.nsplit > 1 && (st = ckjit__kernel_get(&cspec, &rt, &k2))) return st;

  void *scratch = NULL;
  float *pval = NULL;
  long long *pidx = NULL;
  if (p.nsplit > 1) {
    size_t n = (size_t)pb.n_out * (size_t)p.nsplit, vbytes = (n * sizeof(float) + 15) & ~(size_t)15;
    if ((st = ckjit__scratch_alloc(rt, vbytes + (is_arg_op(op) ? n * sizeof(long long) : 0), stream,
                                   &scratch)))
      return st;
    pval = scratch;
    pidx = is_arg_op(op) ? (long long *)((char *)scratch + vbytes) : NULL;
  }

  long long n_out = pb.n_out, len = pb.len, rstride = pb.rstride, count = pb.len;
  long long n0 = pb.n[0], n1 = pb.n[1], s0 = pb.xs[0], s1 = pb.xs[1], s2 = pb.xs[2];
  long long o0 = pb.ys[0], o1 = pb.ys[1], o2 = pb.ys[2], chunk = p.chunk, nsplit = p.nsplit;
  long long group = p.tpr;
  void *args[] = {&x,  &y,  &pval, &pidx, &n_out, &len,  &rstride, &count,  &n0,   &n1,
                  &s0, &s1, &s2,   &o0,   &o1,    &o2,   &chunk,   &nsplit, &group};
  unsigned grid[3] = {grid_of(p.work), 1, 1};
  st = ckjit__kernel_launch(rt, k1, grid, p.block, 0, stream, args);

  if (p.nsplit > 1) {
    if (st == CKJIT_SUCCESS) {
      /* Pass 2: output o reduces the nsplit partials at pval + o * nsplit. */
      const void *cx = pval;
      long long c_len = p.nsplit, c_rstride = 1, c_n0 = pb.n_out, c_n1 = 1, c_s0 = p.nsplit,
                c_s = 0, c_o0 = 1, c_o = 0, c_chunk = p.nsplit, c_nsplit = 1;
      long long c_group = p.combine_group;
      void *cargs[] = {&cx,   &y,      &pval, &pidx, &n_out,  &c_len, &c_rstride,
                       &count, &c_n0,  &c_n1, &c_s0, &c_s,    &c_s,   &c_o0,
                       &c_o,  &c_o,    &c_chunk, &c_nsplit, &c_group};
      unsigned cgrid[3] = {grid_of(ckjit__ceil_div(pb.n_out, BLOCK_THREADS / p.combine_group)), 1, 1};
      unsigned cblock[3] = {BLOCK_THREADS, 1, 1};
      st = ckjit__kernel_launch(rt, k2, cgrid, cblock, 0, stream, cargs);
    }
    /* Stream-ordered: freed after the kernels that use it. */
    ckjit_status fst = ckjit__scratch_free(rt, scratch, stream);
    if (st == CKJIT_SUCCESS) st = fst;
  }
  return st;
}

ckjit_status ckjit_reduce(ckjit_reduce_op op, ckjit_dtype dtype, const ckjit_tensor_layout *x_layout,
                          const void *x, int dim, ckjit_dtype y_dtype, void *y, void *stream) {
  return reduce_run("ckjit_reduce", op, dtype, x_layout, x, dim, y_dtype, y, stream);
}

ckjit_status ckjit_reduce_rows(ckjit_reduce_op op, ckjit_dtype dtype, int64_t rows, int64_t cols,
                               const void *x, int64_t ld_x, ckjit_dtype y_dtype, void *y,
                               void *stream) {
  const char *api = "ckjit_reduce_rows";
  ckjit_status st = check_ops(api, op, dtype, y_dtype);
  if (st) return st;
  if ((st = ckjit__check_matrix(api, "x", x, rows, cols, ld_x, ckjit_dtype_size(dtype)))) return st;
  ckjit_tensor_layout xl;
  memset(&xl, 0, sizeof xl);
  xl.rank = 2;
  xl.shape[0] = rows;
  xl.shape[1] = cols;
  xl.strides[0] = ld_x;
  xl.strides[1] = 1;
  return reduce_run(api, op, dtype, &xl, x, 1, y_dtype, y, stream);
}
