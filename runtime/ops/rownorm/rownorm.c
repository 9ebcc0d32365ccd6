/* Rownorm ops: validate, plan, arguments, run (one fused launch, or the
 * split passes over scratch memory); and the public front-ends
 * (ckjit_softmax, ckjit_layernorm2d, ckjit_rmsnorm2d, ckjit_rmsnorm2d_quant,
 * ckjit_smoothquant), and ckjit_softmax_prepare. */
#include "rownorm.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "abi/rownorm_args.h"
#include "base/error.h"
#include "base/int_math.h"
#include "runtime/dispatch.h"
#include "runtime/ops/op_frame.h"
#include "runtime/ops/prepared.h"

typedef struct rownorm_call {
  const char *api;
  int op, qtype, affine;
  ckjit_dtype dtype;
  int64_t rows, cols;
  const void *x, *res;
  int64_t ld_x, ld_res;
  void *sum_out;
  int64_t ld_sum;
  const void *weight, *bias;
  const float *smooth;
  void *y;
  int64_t ld_y;
  float *mean_out, *rstd_out, *row_scale;
  const int32_t *valid_cols;
  float alpha;
  void *stream;
} rownorm_call;

/* ---- validate ---------------------------------------------------------------- */

static ckjit_status validate_rows(const rownorm_call *c) {
  ckjit_status st = ckjit__check_dtype(c->api, c->dtype);
  if (st) return st;
  size_t es = ckjit_dtype_size(c->dtype);
  if ((st = ckjit__check_matrix(c->api, "x", c->x, c->rows, c->cols, c->ld_x, es))) return st;
  if (ckjit__rownorm_is_quant(c->op)) {
    if ((st = ckjit__check_matrix(c->api, "q", c->y, c->rows, c->cols, c->ld_y, 1))) return st;
    if (!c->row_scale) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: row_scale is NULL", c->api);
  } else if ((st = ckjit__check_matrix(c->api, "y", c->y, c->rows, c->cols, c->ld_y, es))) {
    return st;
  }
  return CKJIT_SUCCESS;
}

/* Checks the norms' parameters and takes them into the call. */
static ckjit_status validate_norm_params(rownorm_call *c, const ckjit_norm_params *p) {
  ckjit_norm_params defaults;
  ckjit_norm_params_init(&defaults);
  if (!p) p = &defaults;
  if (!isfinite(p->eps) || p->eps < 0.0f)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: eps %g must be finite and >= 0", c->api,
                       (double)p->eps);
  if (p->bias && c->op != OP_LAYERNORM)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: bias is for layernorm only", c->api);
  if (p->mean_out && c->op != OP_LAYERNORM)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: mean_out is for layernorm only", c->api);
  if (p->bias && !p->weight)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: a bias needs a weight (pass ones)",
                       c->api);
  if (p->sum_out && !p->residual)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: sum_out needs a residual", c->api);
  size_t es = ckjit_dtype_size(c->dtype);
  ckjit_status st;
  if (p->residual &&
      (st = ckjit__check_matrix(c->api, "residual", p->residual, c->rows, c->cols, p->ld_residual, es)))
    return st;
  if (p->sum_out &&
      (st = ckjit__check_matrix(c->api, "sum_out", p->sum_out, c->rows, c->cols, p->ld_sum_out, es)))
    return st;
  c->alpha = p->eps;
  c->weight = p->weight;
  c->bias = p->bias;
  c->affine = p->bias ? AFFINE_WEIGHT_BIAS : p->weight ? AFFINE_WEIGHT : AFFINE_NONE;
  c->res = p->residual;
  c->ld_res = p->ld_residual;
  c->sum_out = p->sum_out;
  c->ld_sum = p->ld_sum_out;
  c->mean_out = p->mean_out;
  c->rstd_out = p->rstd_out;
  return CKJIT_SUCCESS;
}

static ckjit_status validate_qtype(const char *api, ckjit_dtype q, int *qtype) {
  if (q == CKJIT_I8) *qtype = Q_I8;
  else if (q == CKJIT_FP8_E4M3) *qtype = Q_FP8_E4M3;
  else if (ckjit_dtype_size(q))
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "%s: q_dtype %s is not supported (i8, fp8_e4m3)",
                       api, ckjit_dtype_name(q));
  else
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: q_dtype %d is not a ckjit_dtype", api,
                       (int)q);
  return CKJIT_SUCCESS;
}

static ckjit_status validate_pointers(const rownorm_call *c) {
  const void *const operands[] = {c->x,     c->res,      c->sum_out,  c->weight,   c->bias,
                                  c->smooth, c->y,       c->mean_out, c->rstd_out, c->row_scale,
                                  c->valid_cols};
  static const char *const operand_names[] = {"x",        "residual", "sum_out", "weight",
                                              "bias",     "smooth_scale", "y",   "mean_out",
                                              "rstd_out", "row_scale", "valid_cols"};
  return ckjit__check_pointers(c->stream, c->api, 11, operands, operand_names);
}

/* ---- plan ---------------------------------------------------------------------- */

/* Vector width: every row pointer and stride, and the quantized output's
 * bytes, must be aligned to it. */
static int pick_vec(const rownorm_call *c) {
  const size_t es = ckjit_dtype_size(c->dtype);
  const int quant = ckjit__rownorm_is_quant(c->op);
  const void *ptrs[6];
  int64_t strides[4];
  int n_ptrs = 0, n_strides = 0;
  ptrs[n_ptrs++] = c->x;
  strides[n_strides++] = c->ld_x;
  if (!quant) ptrs[n_ptrs++] = c->y, strides[n_strides++] = c->ld_y;
  if (c->res) ptrs[n_ptrs++] = c->res, strides[n_strides++] = c->ld_res;
  if (c->res && c->sum_out) ptrs[n_ptrs++] = c->sum_out, strides[n_strides++] = c->ld_sum;
  if (c->weight) ptrs[n_ptrs++] = c->weight;
  if (c->bias) ptrs[n_ptrs++] = c->bias;
  int vec = ckjit__pick_vec(es, ptrs, n_ptrs, strides, c->rows > 1 ? n_strides : 0, 8);
  /* The quantized output has 1-byte elements: at most `vec` of them. */
  if (quant) vec = ckjit__pick_vec(1, (const void *const[]){c->y}, 1, &c->ld_y, c->rows > 1, vec);
  return vec;
}

/* After the stats pass has written x + residual to sum_out (which may be
 * the residual itself), the later passes read that sum. */
static int reads_sum(const rownorm_call *c, int pass) {
  return pass > PASS_STATS && c->res && c->sum_out;
}

/* The kernel and launch shape of one pass: the fused pass walks groups of
 * rows (x), a split pass (chunk, row) blocks. */
static void plan(const rownorm_call *c, const ckjit_rownorm_policy *pol, int vec, int pass,
                 ckjit_launch_plan *p) {
  ckjit__plan_init(p, CKJIT_FAMILY_ROWNORM);
  int32_t *v = p->spec.value;
  v[RN_DTYPE] = ckjit__dtype_param_value(c->dtype);
  v[RN_OP] = c->op;
  v[RN_QTYPE] = c->qtype;
  v[RN_RESIDUAL] = c->res != NULL && !reads_sum(c, pass);
  v[RN_AFFINE] = c->affine;
  v[RN_THREADS] = pol->threads;
  v[RN_ROW_THREADS] = pol->row_threads;
  v[RN_VEC] = vec;
  v[RN_ITEMS] = pol->items;
  v[RN_PASS] = pass;
  v[RN_OCCUPANCY] = pol->occupancy;
  v[RN_SMEM_TILE] = pol->smem_tile;
  if (pass == PASS_FUSED) {
    p->grid[0] = ckjit__grid_x(ckjit__ceil_div(c->rows, pol->threads / pol->row_threads));
  } else {
    p->grid[0] = (unsigned)pol->n_chunks;
    p->grid[1] = ckjit__grid_yz(c->rows);
  }
  p->block[0] = (unsigned)pol->threads;
}

/* ---- arguments ----------------------------------------------------------------- */

static ckjit_rownorm_args arguments(const rownorm_call *c, const ckjit_rownorm_policy *pol,
                                    int pass, float *partials) {
  const int sum = reads_sum(c, pass);
  return (ckjit_rownorm_args){
      .x = sum ? c->sum_out : c->x, .ld_x = sum ? c->ld_sum : c->ld_x,
      .res = sum ? NULL : c->res, .ld_res = c->ld_res,
      .sum_out = pass <= PASS_STATS ? c->sum_out : NULL, .ld_sum = c->ld_sum,
      .weight = c->weight, .bias = c->bias, .smooth = c->smooth,
      .y = c->y, .ld_y = c->ld_y,
      .mean_out = c->mean_out, .rstd_out = c->rstd_out, .row_scale = c->row_scale,
      .valid_cols = c->valid_cols, .alpha = c->alpha, .partials = partials,
      .rows = c->rows, .cols = c->cols, .chunk_cols = pol->chunk_cols, .n_chunks = pol->n_chunks};
}

/* ---- run ------------------------------------------------------------------------- */

static ckjit_status run_pass(ckjit_gpu *gpu, const rownorm_call *c, const ckjit_rownorm_policy *pol,
                             int vec, int pass, float *partials) {
  ckjit_launch_plan p;
  plan(c, pol, vec, pass, &p);
  const ckjit_rownorm_args args = arguments(c, pol, pass, partials);
  return ckjit__op_run(gpu, &p, &args, &ckjit_rownorm_args_params, c->stream);
}

/* The split passes, batch_rows rows at a time, with the chunks' partials
 * in stream-ordered scratch memory. */
static ckjit_status run_split(ckjit_gpu *gpu, const rownorm_call *c,
                              const ckjit_rownorm_policy *pol, int vec) {
  const size_t es = ckjit_dtype_size(c->dtype);
  const int64_t batch = pol->batch_rows;
  /* Partials: 2 floats per chunk and, for the quantizing rmsnorm, one max |y|. */
  size_t per_chunk = c->op == OP_RMSNORM_QUANT ? 3 : 2;
  size_t bytes = (size_t)batch * (size_t)pol->n_chunks * per_chunk * sizeof(float);
  void *scratch;
  ckjit_status st = ckjit__scratch_alloc(gpu, bytes, c->stream, &scratch);
  if (st) return st;
  for (int64_t r0 = 0; r0 < c->rows && !st; r0 += batch) {
    rownorm_call b = *c;
    b.rows = c->rows - r0 < batch ? c->rows - r0 : batch;
    b.x = (const char *)c->x + (size_t)(r0 * c->ld_x) * es;
    b.y = (char *)c->y + (size_t)(r0 * c->ld_y) * (ckjit__rownorm_is_quant(c->op) ? 1 : es);
    if (c->res) b.res = (const char *)c->res + (size_t)(r0 * c->ld_res) * es;
    if (c->sum_out) b.sum_out = (char *)c->sum_out + (size_t)(r0 * c->ld_sum) * es;
    if (c->mean_out) b.mean_out = c->mean_out + r0;
    if (c->rstd_out) b.rstd_out = c->rstd_out + r0;
    if (c->row_scale) b.row_scale = c->row_scale + r0;
    if (c->valid_cols) b.valid_cols = c->valid_cols + r0;
    st = run_pass(gpu, &b, pol, vec, PASS_STATS, scratch);
    if (!st && c->op == OP_RMSNORM_QUANT) st = run_pass(gpu, &b, pol, vec, PASS_AMAX, scratch);
    if (!st) st = run_pass(gpu, &b, pol, vec, PASS_APPLY, scratch);
  }
  ckjit_status fst = ckjit__scratch_free(gpu, scratch, c->stream);
  return st ? st : fst;
}

/* The vector width of c's operands and c's tile policy on `gpu`. */
static int policy(const rownorm_call *c, const ckjit_gpu *gpu, ckjit_rownorm_policy *pol) {
  const int vec = pick_vec(c);
  const ckjit_rownorm_shape shape = {
      .op = c->op, .rows = c->rows, .cols = c->cols, .vec = vec,
      .elem_size = ckjit_dtype_size(c->dtype), .reread_operands = c->res && !c->sum_out ? 2 : 1};
  ckjit__rownorm_policy(&shape, gpu->device.multiprocessors, gpu->device.l2_bytes, pol);
  return vec;
}

/* The steps after the front-end's checks. */
static ckjit_status rownorm(const rownorm_call *c) {
  ckjit_status st = validate_pointers(c);
  if (st) return st;
  ckjit_gpu *gpu;
  if ((st = ckjit__stream_gpu(c->stream, &gpu))) return st;
  ckjit_rownorm_policy pol;
  const int vec = policy(c, gpu, &pol);
  if (!pol.split) return run_pass(gpu, c, &pol, vec, PASS_FUSED, NULL);
  return run_split(gpu, c, &pol, vec);
}

/* ---- front-ends -------------------------------------------------------------------- */

void ckjit_softmax_params_init(ckjit_softmax_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->scale = 1.0f;
}

void ckjit_norm_params_init(ckjit_norm_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->eps = 1e-5f;
}

ckjit_status ckjit_softmax(ckjit_dtype dtype, int64_t rows, int64_t cols, const void *x,
                           int64_t ld_x, void *y, int64_t ld_y, const ckjit_softmax_params *params,
                           void *stream) {
  ckjit_softmax_params defaults;
  ckjit_softmax_params_init(&defaults);
  if (!params) params = &defaults;
  rownorm_call c = {.api = "ckjit_softmax", .dtype = dtype, .rows = rows, .cols = cols, .x = x,
                    .ld_x = ld_x, .y = y, .ld_y = ld_y, .stream = stream};
  if (params->log != 0 && params->log != 1)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_softmax: params->log is %d (0 or 1)",
                       params->log);
  c.op = params->log ? OP_LOG_SOFTMAX : OP_SOFTMAX;
  c.alpha = params->scale;
  c.valid_cols = params->valid_cols;
  ckjit_status st = validate_rows(&c);
  return st ? st : rownorm(&c);
}

/* ---- prepared softmax ------------------------------------------------------------- */

static ckjit_status softmax_full(const ckjit_prepared *p, const void *x, void *y, void *stream) {
  return ckjit_softmax(p->call.dtype, p->call.rows, p->call.cols, x, p->call.ld_x, y,
                       p->call.ld_y, &p->call.softmax, stream);
}

ckjit_status ckjit_softmax_prepare(ckjit_dtype dtype, int64_t rows, int64_t cols, int64_t ld_x,
                                   int64_t ld_y, const ckjit_softmax_params *params, int device,
                                   ckjit_prepared **out) {
  static const char api[] = "ckjit_softmax_prepare";
  if (!out) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: out is NULL", api);
  *out = NULL;
  ckjit_softmax_params defaults;
  ckjit_softmax_params_init(&defaults);
  if (!params) params = &defaults;
  if (params->valid_cols)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "%s: params->valid_cols is a per-call operand "
                       "and cannot be prepared; call ckjit_softmax", api);
  if (params->log != 0 && params->log != 1)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: params->log is %d (0 or 1)", api,
                       params->log);
  /* The shape is checked as ckjit_softmax checks it, at a stand-in address
   * aligned for the widest vectors: a run's own operands decide later
   * whether those vectors fit them. */
  const void *const stand_in = (const void *)(uintptr_t)256;
  rownorm_call c = {.api = api, .op = params->log ? OP_LOG_SOFTMAX : OP_SOFTMAX, .dtype = dtype,
                    .rows = rows, .cols = cols, .x = stand_in, .ld_x = ld_x,
                    .y = (void *)(uintptr_t)stand_in, .ld_y = ld_y, .alpha = params->scale};
  ckjit_status st = validate_rows(&c);
  ckjit_gpu *gpu;
  if (st || (st = ckjit__prepared_gpu(api, device, &gpu))) return st;
  ckjit_prepared *p = ckjit__prepared_new(api);
  if (!p) return CKJIT_ERROR_OUT_OF_MEMORY;
  p->generation = ckjit__runtime_if_ready()->generation;
  p->gpu = gpu;
  p->full = softmax_full;
  p->call.dtype = dtype;
  p->call.rows = rows;
  p->call.cols = cols;
  p->call.ld_x = ld_x;
  p->call.ld_y = ld_y;
  p->call.softmax = *params;
  ckjit_rownorm_policy pol;
  const int vec = policy(&c, gpu, &pol);
  if (!pol.split) {
    ckjit_kernel *k;
    plan(&c, &pol, vec, PASS_FUSED, &p->plan);
    if ((st = ckjit__kernel_get(gpu, &p->plan.spec, &k))) {
      ckjit_prepared_free(p);
      return st;
    }
    const ckjit_rownorm_args args = arguments(&c, &pol, PASS_FUSED, NULL);
    _Static_assert(sizeof args <= CKJIT_PREPARED_ARGS_MAX, "rownorm args fit a prepared call");
    memcpy(p->args, &args, sizeof args);
    p->args_size = sizeof args;
    p->x_offset = offsetof(ckjit_rownorm_args, x);
    p->y_offset = offsetof(ckjit_rownorm_args, y);
    p->params = &ckjit_rownorm_args_params;
    p->align = (unsigned)(vec * ckjit_dtype_size(dtype));
    p->kernel = k;
  }
  *out = p;
  return CKJIT_SUCCESS;
}

static ckjit_status norm(const char *api, int op, ckjit_dtype dtype, int64_t rows, int64_t cols,
                         const void *x, int64_t ld_x, void *y, int64_t ld_y,
                         const ckjit_norm_params *params, void *stream) {
  rownorm_call c = {.api = api, .op = op, .dtype = dtype, .rows = rows, .cols = cols, .x = x,
                    .ld_x = ld_x, .y = y, .ld_y = ld_y, .stream = stream};
  ckjit_status st = validate_rows(&c);
  if (!st) st = validate_norm_params(&c, params);
  return st ? st : rownorm(&c);
}

ckjit_status ckjit_layernorm2d(ckjit_dtype dtype, int64_t rows, int64_t cols, const void *x,
                               int64_t ld_x, void *y, int64_t ld_y, const ckjit_norm_params *params,
                               void *stream) {
  return norm("ckjit_layernorm2d", OP_LAYERNORM, dtype, rows, cols, x, ld_x, y, ld_y, params,
              stream);
}

ckjit_status ckjit_rmsnorm2d(ckjit_dtype dtype, int64_t rows, int64_t cols, const void *x,
                             int64_t ld_x, void *y, int64_t ld_y, const ckjit_norm_params *params,
                             void *stream) {
  return norm("ckjit_rmsnorm2d", OP_RMSNORM, dtype, rows, cols, x, ld_x, y, ld_y, params, stream);
}

ckjit_status ckjit_rmsnorm2d_quant(ckjit_dtype dtype, int64_t rows, int64_t cols, const void *x,
                                   int64_t ld_x, const ckjit_norm_params *params,
                                   ckjit_dtype q_dtype, void *q, int64_t ld_q, float *row_scale,
                                   void *stream) {
  rownorm_call c = {.api = "ckjit_rmsnorm2d_quant", .op = OP_RMSNORM_QUANT, .dtype = dtype,
                    .rows = rows, .cols = cols, .x = x, .ld_x = ld_x, .y = q, .ld_y = ld_q,
                    .row_scale = row_scale, .stream = stream};
  ckjit_status st = validate_qtype(c.api, q_dtype, &c.qtype);
  if (!st) st = validate_rows(&c);
  if (!st) st = validate_norm_params(&c, params);
  return st ? st : rownorm(&c);
}

ckjit_status ckjit_smoothquant(ckjit_dtype dtype, int64_t rows, int64_t cols, const void *x,
                               int64_t ld_x, const float *smooth_scale, ckjit_dtype q_dtype,
                               void *q, int64_t ld_q, float *row_scale, void *stream) {
  rownorm_call c = {.api = "ckjit_smoothquant", .op = OP_SMOOTHQUANT, .dtype = dtype,
                    .rows = rows, .cols = cols, .x = x, .ld_x = ld_x, .y = q, .ld_y = ld_q,
                    .smooth = smooth_scale, .row_scale = row_scale, .stream = stream};
  ckjit_status st = validate_qtype(c.api, q_dtype, &c.qtype);
  if (!st) st = validate_rows(&c);
  if (!st && !smooth_scale)
    st = ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_smoothquant: smooth_scale is NULL");
  return st ? st : rownorm(&c);
}
