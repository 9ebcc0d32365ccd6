/* Rownorm family: softmax, log-softmax, layernorm2d, rmsnorm2d, quantizing
 * rmsnorm and smoothquant.  Descriptor, tile policy, validation, launch. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dispatch.h"
#include "../base/error.h"
#include "../base/int_math.h"
#include "op_elementwise.h"
#include "spec.h"

enum {
  P_DTYPE, P_OP, P_QTYPE, P_RESIDUAL, P_AFFINE, P_THREADS, P_ROW_THREADS, P_VEC, P_ITEMS, P_PASS,
  P_OCCUPANCY, P_SMEM_TILE, P_COUNT
};
enum { OP_SOFTMAX, OP_LOG_SOFTMAX, OP_LAYERNORM, OP_RMSNORM, OP_RMSNORM_QUANT, OP_SMOOTHQUANT };
enum { Q_NONE, Q_I8, Q_FP8_E4M3 };
enum { AFFINE_NONE, AFFINE_WEIGHT, AFFINE_WEIGHT_BIAS };
enum { PASS_FUSED, PASS_STATS, PASS_AMAX, PASS_APPLY };

static const char *const op_names[] = {"softmax", "log_softmax", "layernorm", "rmsnorm",
                                       "rmsnorm_quant", "smoothquant", NULL};
static const char *const op_tokens[] = {"OP_SOFTMAX", "OP_LOG_SOFTMAX", "OP_LAYERNORM",
                                        "OP_RMSNORM", "OP_RMSNORM_QUANT", "OP_SMOOTHQUANT"};
static const char *const qtype_names[] = {"none", "i8", "fp8_e4m3", NULL};
static const char *const qtype_tokens[] = {"Q_NONE", "Q_I8", "Q_FP8_E4M3"};
static const char *const affine_names[] = {"none", "weight", "weight_bias", NULL};
static const char *const affine_tokens[] = {"0", "1", "2"};
static const char *const pass_names[] = {"fused", "stats", "amax", "apply", NULL};
static const char *const pass_tokens[] = {"PASS_FUSED", "PASS_STATS", "PASS_AMAX", "PASS_APPLY"};

static const ckjit_param_desc params[P_COUNT] = {
    [P_DTYPE] = CKJIT_DTYPE_PARAM,
    [P_OP] = {"op", op_names, op_tokens, 0, 0, 0},
    [P_QTYPE] = {"qtype", qtype_names, qtype_tokens, 0, 0, 0},
    [P_RESIDUAL] = {"residual", NULL, NULL, 0, 1, 0},
    [P_AFFINE] = {"affine", affine_names, affine_tokens, 0, 0, 0},
    [P_THREADS] = {"threads", NULL, NULL, 64, 1024, 256},
    [P_ROW_THREADS] = {"row_threads", NULL, NULL, 1, 1024, 256},
    [P_VEC] = {"vec", NULL, NULL, 1, 8, 8},
    [P_ITEMS] = {"items", NULL, NULL, 1, 32, 4},
    [P_PASS] = {"pass", pass_names, pass_tokens, 0, 0, 0},
    /* Resident threads per SM the compiler must allow (NVIDIA; 0: no bound). */
    [P_OCCUPANCY] = {"occupancy", NULL, NULL, 0, 2048, 1024},
    /* Fused pass: the tile waits in shared memory instead of registers. */
    [P_SMEM_TILE] = {"smem_tile", NULL, NULL, 0, 1, 0},
};

/* At most this many f32 values of a row per thread stay in registers. */
#define MAX_VALUES_PER_THREAD 32

static int is_quant(int op) { return op == OP_RMSNORM_QUANT || op == OP_SMOOTHQUANT; }
static int is_norm(int op) { return op == OP_LAYERNORM || op == OP_RMSNORM || op == OP_RMSNORM_QUANT; }

static ckjit_status bad(const char *what, const ckjit_spec *s) {
  return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: rownorm op=%s: %s",
                     op_names[s->value[P_OP]], what);
}

static ckjit_status check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  int op = v[P_OP];
  if (!ckjit__is_pow2(v[P_THREADS]) || v[P_THREADS] % 64)
    return bad("threads must be a power of two and a multiple of 64", s);
  if (!ckjit__is_pow2(v[P_ROW_THREADS]) || v[P_ROW_THREADS] > v[P_THREADS])
    return bad("row_threads must be a power of two no larger than threads", s);
  if (!ckjit__is_pow2(v[P_VEC]) || (size_t)v[P_VEC] * ckjit__dtype_param_size(v[P_DTYPE]) > 16)
    return bad("vec must be a power of two of at most 16 bytes", s);
  if (v[P_VEC] * v[P_ITEMS] > MAX_VALUES_PER_THREAD)
    return bad("vec * items must be at most 32 (values per thread in registers)", s);
  if ((v[P_QTYPE] != Q_NONE) != is_quant(op))
    return bad("qtype is required by the quantizing ops and only by them", s);
  if (v[P_RESIDUAL] && !is_norm(op)) return bad("residual is for the norms only", s);
  if (v[P_AFFINE] == AFFINE_WEIGHT_BIAS && op != OP_LAYERNORM)
    return bad("a bias is for layernorm only", s);
  if (v[P_AFFINE] != AFFINE_NONE && !is_norm(op)) return bad("weights are for the norms only", s);
  if (v[P_PASS] != PASS_FUSED && v[P_ROW_THREADS] != v[P_THREADS])
    return bad("split passes take one row per block (row_threads = threads)", s);
  if (v[P_PASS] == PASS_AMAX && op != OP_RMSNORM_QUANT)
    return bad("pass=amax is for rmsnorm_quant only", s);
  if (v[P_OCCUPANCY] % 256)
    return bad("occupancy must be a multiple of 256 threads", s);
  if (v[P_SMEM_TILE] && (v[P_PASS] != PASS_FUSED ||
                         (int64_t)v[P_THREADS] * v[P_ITEMS] * v[P_VEC] *
                                 (int64_t)ckjit__dtype_param_size(v[P_DTYPE]) > 32768))
    return bad("smem_tile is for pass=fused with a tile of at most 32 KiB", s);

  return CKJIT_SUCCESS;
}

static void complete(ckjit_spec *s, unsigned given) {
  if (!(given & (1u << P_VEC))) {
    int32_t widest = (int32_t)(16 / ckjit__dtype_param_size(s->value[P_DTYPE]));
    s->value[P_VEC] = widest > 8 ? 8 : widest;
  }
}

/* Default set, per dtype: each op on the fused path for rows of up to 256
 * threads x 4 vectors (8192 columns of a 16-bit type); layernorm and
 * rmsnorm with their shared-memory tile; then the split passes of each op
 * (stats, [amax,] apply), so that every kernel the policy can pick is
 * compiled by `ckjit-prewarm --all` and by CI for every arch. */
static const struct default_row {
  int op, pass, smem;
} default_rows[] = {
    {OP_SOFTMAX, PASS_FUSED, 0},       {OP_LOG_SOFTMAX, PASS_FUSED, 0},
    {OP_LAYERNORM, PASS_FUSED, 0},     {OP_RMSNORM, PASS_FUSED, 0},
    {OP_RMSNORM_QUANT, PASS_FUSED, 0}, {OP_SMOOTHQUANT, PASS_FUSED, 0},
    {OP_LAYERNORM, PASS_FUSED, 1},     {OP_RMSNORM, PASS_FUSED, 1},
    {OP_SOFTMAX, PASS_STATS, 0},       {OP_SOFTMAX, PASS_APPLY, 0},
    {OP_LOG_SOFTMAX, PASS_APPLY, 0},   {OP_LAYERNORM, PASS_STATS, 0},
    {OP_LAYERNORM, PASS_APPLY, 0},     {OP_RMSNORM, PASS_STATS, 0},
    {OP_RMSNORM, PASS_APPLY, 0},       {OP_RMSNORM_QUANT, PASS_STATS, 0},
    {OP_RMSNORM_QUANT, PASS_AMAX, 0},  {OP_RMSNORM_QUANT, PASS_APPLY, 0},
    {OP_SMOOTHQUANT, PASS_STATS, 0},   {OP_SMOOTHQUANT, PASS_APPLY, 0},
};

static int default_spec(size_t index, ckjit_spec *out) {
  const size_t n = sizeof default_rows / sizeof default_rows[0];
  if (index >= 3 * n) return 0;
  const struct default_row *d = &default_rows[index % n];
  int dtype = (int)(index / n), op = d->op;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_ROWNORM;
  int32_t *v = out->value;
  v[P_DTYPE] = dtype;
  v[P_OP] = op;
  v[P_QTYPE] = is_quant(op) ? Q_I8 : Q_NONE;
  v[P_RESIDUAL] = op == OP_RMSNORM_QUANT && d->pass <= PASS_STATS;
  v[P_AFFINE] = op == OP_LAYERNORM ? AFFINE_WEIGHT_BIAS : is_norm(op) ? AFFINE_WEIGHT : AFFINE_NONE;
  v[P_THREADS] = 256;
  v[P_ROW_THREADS] = 256;
  int32_t widest = (int32_t)(16 / ckjit__dtype_param_size(dtype));
  v[P_VEC] = widest > 8 ? 8 : widest;
  v[P_ITEMS] = 4;
  v[P_PASS] = d->pass;
  v[P_OCCUPANCY] = d->smem ? 1536 : 1024;
  v[P_SMEM_TILE] = d->smem;
  return 1;
}

const ckjit_family ckjit__family_rownorm = {
    .name = "rownorm",
    .source = "rownorm.cu",
    .kernel = "ckjit_rownorm",
    .n_params = P_COUNT,
    .params = params,
    .check = check,
    .default_spec = default_spec,
    .complete = complete,
};

/* ---- tile policy ------------------------------------------------------------ */

typedef struct rownorm_policy {
  int threads, row_threads, items;
  int occupancy;          /* resident threads per SM to leave registers for */
  int smem_tile;          /* fused: the tile waits in shared memory */
  int split;              /* 0: fused, one group per row; 1: chunks over several passes */
  int64_t chunk_cols, n_chunks;
} rownorm_policy;



/* Fused when the row fits in one group's registers and there are rows
 * enough to fill the GPU.  Group size, occupancy and where the tile waits
 * come from bench/sweep_rownorm on an H100 (bench/NOTES.md):
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
static void pick_policy(int op, int64_t rows, int64_t cols, int vec, size_t es, int sms,
                        rownorm_policy *p) {
  const int max_items = MAX_VALUES_PER_THREAD / vec;
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

/* ---- launch -------------------------------------------------------------------- */

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

static ckjit_status launch_pass(ckjit_spec *spec, int pass, const rownorm_call *c,
                                const rownorm_policy *pol, float *partials) {
  spec->value[P_PASS] = pass;
  const void *x = c->x, *res = c->res;
  long long ld_x = c->ld_x, ld_res = c->ld_res;
  /* After the stats pass has written x + residual to sum_out (which may be
   * the residual itself), later passes read that sum. */
  if (pass > PASS_STATS && c->res && c->sum_out) {
    x = c->sum_out;
    ld_x = c->ld_sum;
    res = NULL;
    spec->value[P_RESIDUAL] = 0;
  }
  ckjit_runtime *r;
  ckjit_kernel *k;
  ckjit_status st = ckjit__kernel_get(spec, &r, &k);
  spec->value[P_RESIDUAL] = c->res != NULL;
  if (st) return st;
  unsigned grid[3] = {1, 1, 1}, block[3] = {(unsigned)pol->threads, 1, 1};
  if (pass == PASS_FUSED) {
    int64_t blocks = ckjit__ceil_div(c->rows, pol->threads / pol->row_threads);
    grid[0] = (unsigned)(blocks < 0x7fffffff ? blocks : 0x7fffffff);
  } else {
    grid[0] = (unsigned)pol->n_chunks;
    grid[1] = (unsigned)(c->rows < 65535 ? c->rows : 65535);
  }
  long long ld_sum = c->ld_sum, ld_y = c->ld_y, rows = c->rows, cols = c->cols,
            chunk_cols = pol->chunk_cols, n_chunks = pol->n_chunks;
  void *sum_out = pass <= PASS_STATS ? c->sum_out : NULL;
  const void *weight = c->weight, *bias = c->bias;
  const float *smooth = c->smooth;
  void *y = c->y;
  float *mean_out = c->mean_out, *rstd_out = c->rstd_out, *row_scale = c->row_scale;
  const int32_t *valid = c->valid_cols;
  float alpha = c->alpha;
  void *args[] = {&x,         &ld_x,     &res,       &ld_res,    &sum_out, &ld_sum, &weight,
                  &bias,      &smooth,   &y,         &ld_y,      &mean_out, &rstd_out,
                  &row_scale, &valid,    &alpha,     &partials,  &rows,    &cols,   &chunk_cols,
                  &n_chunks};
  return ckjit__kernel_launch(r, k, grid, block, 0, c->stream, args);
}

static ckjit_status run(const rownorm_call *c) {
  const void *const operands[] = {c->x,     c->res,      c->sum_out,  c->weight,   c->bias,
                                  c->smooth, c->y,       c->mean_out, c->rstd_out, c->row_scale,
                                  c->valid_cols};
  static const char *const operand_names[] = {"x",        "residual", "sum_out", "weight",
                                              "bias",     "smooth_scale", "y",   "mean_out",
                                              "rstd_out", "row_scale", "valid_cols"};
  ckjit_status st = ckjit__check_pointers(c->api, 11, operands, operand_names);
  if (st) return st;
  size_t es = ckjit_dtype_size(c->dtype);
  int quant = is_quant(c->op);
  /* Vector width: every row pointer and stride, and the quantized output's
   * bytes, must be aligned to it. */
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

  ckjit_runtime *rt;
  if ((st = ckjit__runtime_device(&rt))) return st;
  rownorm_policy pol;
  pick_policy(c->op, c->rows, c->cols, vec, es, rt->device.multiprocessors, &pol);

  ckjit_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.family = CKJIT_FAMILY_ROWNORM;
  int32_t *v = spec.value;
  v[P_DTYPE] = ckjit__dtype_param_value(c->dtype);
  v[P_OP] = c->op;
  v[P_QTYPE] = c->qtype;
  v[P_RESIDUAL] = c->res != NULL;
  v[P_AFFINE] = c->affine;
  v[P_THREADS] = pol.threads;
  v[P_ROW_THREADS] = pol.row_threads;
  v[P_VEC] = vec;
  v[P_ITEMS] = pol.items;
  v[P_OCCUPANCY] = pol.occupancy;
  v[P_SMEM_TILE] = pol.smem_tile;
  if (!pol.split) return launch_pass(&spec, PASS_FUSED, c, &pol, NULL);

  /* Split: the passes after the first read the data again.  Rows go in
   * batches of about a third of the L2 cache, so that the re-read comes from
   * L2 rather than memory (a row larger than that is one batch). */
  const long long l2 = rt->device.l2_bytes > 0 ? rt->device.l2_bytes : 24ll << 20;
  const int64_t row_bytes = c->cols * (int64_t)es * (c->res && !c->sum_out ? 2 : 1);
  int64_t batch = (l2 / 3) / (row_bytes > 0 ? row_bytes : 1);
  if (batch < 1) batch = 1;
  if (batch > c->rows) batch = c->rows;
  if (batch < c->rows) {
    rownorm_policy bp;
    pick_policy(c->op, batch, c->cols, vec, es, rt->device.multiprocessors, &bp);
    if (bp.split) {
      pol = bp;
      v[P_THREADS] = pol.threads;
      v[P_ROW_THREADS] = pol.row_threads;
      v[P_ITEMS] = pol.items;
      v[P_OCCUPANCY] = pol.occupancy;
    } else {
      batch = c->rows;
    }
  }
  /* Partials: 2 floats per chunk and, for the quantizing rmsnorm, one max |y|. */
  size_t per_chunk = c->op == OP_RMSNORM_QUANT ? 3 : 2;
  size_t bytes = (size_t)batch * (size_t)pol.n_chunks * per_chunk * sizeof(float);
  void *scratch;
  if ((st = ckjit__scratch_alloc(rt, bytes, c->stream, &scratch))) return st;
  for (int64_t r0 = 0; r0 < c->rows && !st; r0 += batch) {
    rownorm_call b = *c;
    b.rows = c->rows - r0 < batch ? c->rows - r0 : batch;
    b.x = (const char *)c->x + (size_t)(r0 * c->ld_x) * es;
    b.y = (char *)c->y + (size_t)(r0 * c->ld_y) * (is_quant(c->op) ? 1 : es);
    if (c->res) b.res = (const char *)c->res + (size_t)(r0 * c->ld_res) * es;
    if (c->sum_out) b.sum_out = (char *)c->sum_out + (size_t)(r0 * c->ld_sum) * es;
    if (c->mean_out) b.mean_out = c->mean_out + r0;
    if (c->rstd_out) b.rstd_out = c->rstd_out + r0;
    if (c->row_scale) b.row_scale = c->row_scale + r0;
    if (c->valid_cols) b.valid_cols = c->valid_cols + r0;
    st = launch_pass(&spec, PASS_STATS, &b, &pol, scratch);
    if (!st && c->op == OP_RMSNORM_QUANT) st = launch_pass(&spec, PASS_AMAX, &b, &pol, scratch);
    if (!st) st = launch_pass(&spec, PASS_APPLY, &b, &pol, scratch);
  }
  ckjit_status fst = ckjit__scratch_free(rt, scratch, c->stream);
  return st ? st : fst;
}

/* ---- validation and front-ends ---------------------------------------------- */

static ckjit_status check_rows(const rownorm_call *c) {
  ckjit_status st = ckjit__check_dtype(c->api, c->dtype);
  if (st) return st;
  size_t es = ckjit_dtype_size(c->dtype);
  if ((st = ckjit__check_matrix(c->api, "x", c->x, c->rows, c->cols, c->ld_x, es))) return st;
  if (is_quant(c->op)) {
    if ((st = ckjit__check_matrix(c->api, "q", c->y, c->rows, c->cols, c->ld_y, 1))) return st;
    if (!c->row_scale) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: row_scale is NULL", c->api);
  } else if ((st = ckjit__check_matrix(c->api, "y", c->y, c->rows, c->cols, c->ld_y, es))) {
    return st;
  }
  return CKJIT_SUCCESS;
}

static ckjit_status norm_setup(rownorm_call *c, const ckjit_norm_params *p) {
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

static ckjit_status check_qtype(const char *api, ckjit_dtype q, int *qtype) {
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
  ckjit_status st = check_rows(&c);
  return st ? st : run(&c);
}

static ckjit_status norm(const char *api, int op, ckjit_dtype dtype, int64_t rows, int64_t cols,
                         const void *x, int64_t ld_x, void *y, int64_t ld_y,
                         const ckjit_norm_params *params, void *stream) {
  rownorm_call c = {.api = api, .op = op, .dtype = dtype, .rows = rows, .cols = cols, .x = x,
                    .ld_x = ld_x, .y = y, .ld_y = ld_y, .stream = stream};
  ckjit_status st = check_rows(&c);
  if (!st) st = norm_setup(&c, params);
  return st ? st : run(&c);
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
  ckjit_status st = check_qtype(c.api, q_dtype, &c.qtype);
  if (!st) st = check_rows(&c);
  if (!st) st = norm_setup(&c, params);
  return st ? st : run(&c);
}

ckjit_status ckjit_smoothquant(ckjit_dtype dtype, int64_t rows, int64_t cols, const void *x,
                               int64_t ld_x, const float *smooth_scale, ckjit_dtype q_dtype,
                               void *q, int64_t ld_q, float *row_scale, void *stream) {
  rownorm_call c = {.api = "ckjit_smoothquant", .op = OP_SMOOTHQUANT, .dtype = dtype,
                    .rows = rows, .cols = cols, .x = x, .ld_x = ld_x, .y = q, .ld_y = ld_q,
                    .smooth = smooth_scale, .row_scale = row_scale, .stream = stream};
  ckjit_status st = check_qtype(c.api, q_dtype, &c.qtype);
  if (!st) st = check_rows(&c);
  if (!st && !smooth_scale)
    st = ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "ckjit_smoothquant: smooth_scale is NULL");
  return st ? st : run(&c);
}
