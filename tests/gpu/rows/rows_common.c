/* What every op of the row-ops GPU test shares (rows_gpu.h): the tolerance
 * window, the task description, buffer checks, input data and the task
 * list. */
#include <stdarg.h>

#include "rows_gpu.h"

/* ---- element tolerances ---------------------------------------------------- */

/* Spacing of the dtype's values at magnitude |a| (subnormals included). */
double ulp_of(ckjit_dtype dt, double a) {
  a = fabs(a);
  if (isinf(a) || isnan(a)) return a;
  int mant = dt == CKJIT_F32 ? 23 : dt == CKJIT_F16 ? 10 : 7;
  int emin = dt == CKJIT_F16 ? -14 : -126;
  int ex = emin;
  if (a >= ldexp(1.0, emin)) {
    frexp(a, &ex);
    ex -= 1;
  }
  return ldexp(1.0, ex - mant);
}

/* got, an output of dtype dt, against the f64 reference ref whose f32
 * computation may be off by err: got must lie in [round(ref - err),
 * round(ref + err)] widened by one ulp of dt at each end. */
int within(ckjit_dtype dt, double got, double ref, double err) {
  if (isnan(ref)) return isnan(got);
  if (isnan(got)) return 0;
  if (isinf(ref)) return got == ref;
  double lo = gt_round(dt, ref - err), hi = gt_round(dt, ref + err);
  if (!isinf(lo)) lo -= ulp_of(dt, lo);
  if (!isinf(hi)) hi += ulp_of(dt, hi);
  return got >= lo && got <= hi;
}

/* ---- tasks ----------------------------------------------------------------- */

const char *const kind_names[] = {"reduce_rows", "reduce", "softmax", "layernorm2d",
                                  "rmsnorm2d", "rmsnorm2d_quant", "smoothquant", "topk_softmax"};
const char *const data_names[] = {"uniform", "negative", "positive", "ties", "offset1000",
                                  "wide", "exact16", "extreme", "grid", "hashed"};
const char *const op_names[] = {"sum", "mean", "max", "min", "argmax", "argmin"};

static void app(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void app(char *buf, size_t len, const char *fmt, ...) {
  size_t n = strlen(buf);
  if (n + 1 >= len) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + n, len - n, fmt, ap);
  va_end(ap);
}

static void describe(const task *t, char *buf, size_t len) {
  buf[0] = 0;
  const char *dn = ckjit_dtype_name(t->dt), *on = ckjit_dtype_name(t->odt);
  switch (t->kind) {
    case K_REDUCE_ROWS:
      app(buf, len, "reduce_rows:%s %s->%s %lldx%lld ld_x=%lld off(x,y)=(%lld,%lld)", op_names[t->op], dn,
          on, LL(t->rows), LL(t->cols), LL(t->cols + t->pad_x), LL(t->off_x), LL(t->off_y));
      break;
    case K_REDUCE_ND: {
      const ckjit_tensor_layout *L = &t->layout;
      app(buf, len, "reduce:%s %s->%s rank=%d shape=[", op_names[t->op], dn, on, L->rank);
      for (int d = 0; d < L->rank; d++) app(buf, len, "%s%lld", d ? "," : "", LL(L->shape[d]));
      app(buf, len, "] strides=[");
      for (int d = 0; d < L->rank; d++) app(buf, len, "%s%lld", d ? "," : "", LL(L->strides[d]));
      app(buf, len, "] dim=%d off(x,y)=(%lld,%lld)", t->dim, LL(t->off_x), LL(t->off_y));
      break;
    }
    case K_SOFTMAX:
      app(buf, len, "softmax%s %s %lldx%lld scale=%g%s%s%s%s ld(x,y)=(%lld,%lld) off(x,y)=(%lld,%lld)",
          t->log ? "(log)" : "", dn, LL(t->rows), LL(t->cols), (double)t->scale,
          t->mask ? " valid_cols" : "", t->null_params ? " params=NULL" : "", t->inplace ? " in-place(y=x)" : "",
          t->prepared ? " prepared" : "",
          LL(t->cols + t->pad_x), LL(t->inplace ? t->cols + t->pad_x : t->cols + t->pad_y), LL(t->off_x),
          LL(t->inplace ? t->off_x : t->off_y));
      break;
    case K_LAYERNORM:
    case K_RMSNORM:
    case K_RMSQUANT:
      app(buf, len, "%s %s", kind_names[t->kind], dn);
      if (t->kind == K_RMSQUANT) app(buf, len, "->%s", on);
      app(buf, len, " %lldx%lld eps=%g%s%s%s%s%s%s%s%s ld(x,%s,res,sum)=(%lld,%lld,%lld,%lld) "
          "off(x,%s,res,sum,w)=(%lld,%lld,%lld,%lld,%lld)",
          LL(t->rows), LL(t->cols), (double)t->eps, t->weight ? " +weight" : "", t->bias ? " +bias" : "",
          t->residual ? " +residual" : "", t->sum_out ? " +sum_out" : "",
          t->alias == 1 ? "(=residual)" : t->alias == 2 ? "(=x)" : "", t->stats ? " +mean/rstd_out" : "",
          t->zero_rows ? " zero-rows" : "", t->inplace ? " in-place(y=x)" : "",
          t->kind == K_RMSQUANT ? "q" : "y", LL(t->cols + t->pad_x),
          LL(t->inplace ? t->cols + t->pad_x : t->cols + t->pad_y), LL(t->cols + t->pad_r),
          LL(t->alias == 1 ? t->cols + t->pad_r : t->alias == 2 ? t->cols + t->pad_x : t->cols + t->pad_s),
          t->kind == K_RMSQUANT ? "q" : "y", LL(t->off_x), LL(t->inplace ? t->off_x : t->off_y), LL(t->off_r),
          LL(t->alias == 1 ? t->off_r : t->alias == 2 ? t->off_x : t->off_s), LL(t->off_w));
      break;
    case K_SMOOTHQUANT:
      app(buf, len, "smoothquant %s->%s %lldx%lld%s ld(x,q)=(%lld,%lld) off(x,q,scale)=(%lld,%lld,%lld)", dn,
          on, LL(t->rows), LL(t->cols), t->zero_rows ? " zero-rows" : "", LL(t->cols + t->pad_x),
          LL(t->cols + t->pad_y), LL(t->off_x), LL(t->off_y), LL(t->off_w));
      break;
    case K_TOPK:
      app(buf, len, "topk_softmax %s tokens=%lld experts=%lld k=%d renormalize=%d indices=%s ld_x=%lld "
          "off(x,out)=(%lld,%lld)", dn, LL(t->rows), LL(t->cols), t->k, t->renorm, on,
          LL(t->cols + t->pad_x), LL(t->off_x), LL(t->off_y));
      break;
  }
  app(buf, len, " data=%s%s seed=%llu", data_names[t->data], t->nan ? "+NaN" : "",
      (unsigned long long)t->seed);
}

/* A fresh gt_check whose context is the task's description. */
void check_begin(gt_check *ck, const task *t) {
  char d[768];
  describe(t, d, sizeof d);
  memset(ck, 0, sizeof *ck);
  ck->max_report = REPORT_MAX;
  gt_check_begin(ck, "%s", d);
}

/* Closes it: the count of the failures not printed. */
void finish(gt_check *ck) { gt_check_end_as(ck, "errors"); }

/* ---- device buffers ------------------------------------------------------- */

/* Every element of b outside the rows x cols matrix at off (row stride ld)
 * must still be poison. */
void check_outside(gt_check *ck, const gt_buf *b, int64_t off, int64_t rows, int64_t cols,
                   int64_t ld, const char *name) {
  for (size_t i = 0; i < b->elems; i++)
    if (!gt_in_matrix(i, off, rows, cols, ld) && !gt_is_poison(b->dt, b->host, i)) {
      gt_fail(ck, "%s: wrote outside the output at element %zu (off %lld, %lldx%lld, ld %lld)", name, i,
              LL(off), LL(rows), LL(cols), LL(ld));
      return;
    }
}

/* ---- input data ------------------------------------------------------------ */

static double offset_amp(ckjit_dtype dt) { return dt == CKJIT_F32 ? 1.0 : dt == CKJIT_F16 ? 4.0 : 32.0; }
static double extreme_amp(ckjit_dtype dt) { return dt == CKJIT_F32 ? 5.0 : dt == CKJIT_F16 ? 40.0 : 300.0; }

/* topk grid: multiples of step below K*step, exact in the dtype, 1/256 or
 * more apart (p ratios >= e^(1/256): clearly distinct in f32). */
double grid_step(ckjit_dtype dt) { return dt == CKJIT_F32 ? 1.0 / 256 : dt == CKJIT_F16 ? 1.0 / 64 : 1.0 / 32; }
int64_t grid_k(ckjit_dtype dt) { return dt == CKJIT_F32 ? 2048 : dt == CKJIT_F16 ? 1023 : 255; }

double gen_value(int mode, ckjit_dtype dt, tu_rng *g, int64_t r, int64_t c, int64_t n) {
  double u = tu_rng_unit(g);
  switch (mode) {
    case D_UNIFORM: return 2 * u - 1;
    case D_NEG: return -(0.5 + 1.5 * u);
    case D_POS: return 0.5 + 1.5 * u;
    case D_TIES: return (double)((int)(u * 7) - 3);
    case D_OFFSET: return 1000.0 + offset_amp(dt) * (2 * u - 1);
    case D_WIDE: return 16 * u - 8;
    case D_EXACT: return (double)((int)(u * 255) - 127) / 16.0;
    case D_EXTREME:
      /* max subtraction: rows around +-1e4, rows spread over +-1e4, -inf
       * entries (never all of a row's first columns but in rows 5 and 6);
       * +inf (row 4), all -inf but the last (5), all -inf (6) */
      switch (r % 7) {
        case 0:
        case 3:
          if (c >= 1 && c % 11 == 5) return -INFINITY;
          return (r % 7 ? -1e4 : 1e4) + extreme_amp(dt) * (2 * u - 1);
        case 1: return c >= 1 && c % 11 == 5 ? -INFINITY : 1e4 * (2 * u - 1);
        case 2: return c >= 1 && (c % 7 == 3 || c % 11 == 5) ? -INFINITY : 2 * u - 1;
        case 4: return c == (r * 7919) % n ? INFINITY : 2 * u - 1;
        case 5: return c < n - 1 ? -INFINITY : 2 * u - 1;
        default: return -INFINITY;
      }
    case D_GRID: {
      int64_t K = grid_k(dt);
      return (double)((int64_t)(u * (double)(2 * K + 1)) - K) * grid_step(dt);
    }
  }
  return 0;
}

/* Fills a whole input buffer: NaN everywhere (padding, misalignment, guard,
 * so a kernel reading outside the matrix into a result is caught), then the
 * matrix.  Optional NaNs in some rows, optional all-zero rows (r % 7 == 3). */
void fill_matrix(const task *t, gt_buf *b, tu_rng *g, int64_t off, int64_t rows, int64_t cols,
                 int64_t ld, int mode, int nan, int zero_rows) {
  gt_fill_nan(b->dt, b->host, b->elems);
  for (int64_t r = 0; r < rows; r++) {
    int zero = zero_rows && r % 7 == 3;
    for (int64_t c = 0; c < cols; c++)
      gt_put(b->dt, b->host, (size_t)(off + r * ld + c), zero ? 0.0 : gen_value(mode, b->dt, g, r, c, cols));
    if (!nan) continue;
    if (r % 3 == 1 || rows == 1)
      gt_put_nan(b->dt, b->host, (size_t)(off + r * ld + (int64_t)(tu_rng_next(g) % (uint64_t)cols)));
    if (r % 6 == 4) { /* a second NaN: the first one's index must win */
      gt_put_nan(b->dt, b->host, (size_t)(off + r * ld + (int64_t)(tu_rng_next(g) % (uint64_t)cols)));
      gt_put_nan(b->dt, b->host, (size_t)(off + r * ld + cols - 1));
    }
  }
  (void)t;
}

void gather_row(ckjit_dtype dt, const uint8_t *host, int64_t base, int64_t n, double *out) {
  for (int64_t c = 0; c < n; c++) out[c] = gt_get(dt, host, (size_t)(base + c));
}

/* Every element of b outside the matrix must still hold its bytes in orig
 * (an in-place output: the input's NaN padding stays). */
void check_outside_unchanged(gt_check *ck, const gt_buf *b, const uint8_t *orig, int64_t off, int64_t rows,
                             int64_t cols, int64_t ld, const char *name) {
  const size_t s = gt_esize(b->dt);
  for (size_t i = 0; i < b->elems; i++)
    if (!gt_in_matrix(i, off, rows, cols, ld) && memcmp(b->host + i * s, orig + i * s, s) != 0) {
      gt_fail(ck, "%s: wrote outside the matrix at element %zu (off %lld, %lldx%lld, ld %lld)", name, i, LL(off),
              LL(rows), LL(cols), LL(ld));
      return;
    }
}

uint8_t *dup_host(const gt_buf *b) {
  uint8_t *p = malloc(b->elems * gt_esize(b->dt));
  if (!p) abort();
  memcpy(p, b->host, b->elems * gt_esize(b->dt));
  return p;
}

/* ---- reference self-checks (run first, GPU or not) --------------------------- */

static int g_self_fail;

void self_check(int ok, const char *what) {
  if (!ok) {
    printf("FAIL self-check: %s\n", what);
    g_self_fail++;
  }
}

int close_to(double a, double b) { return fabs(a - b) <= 1e-12 * (fabs(b) + 1e-300); }

int self_check_failures(void) { return g_self_fail; }

void self_check_tolerances(void) {
  /* ulp / within */
  self_check(ulp_of(CKJIT_F16, 1.0) == ldexp(1, -10) && ulp_of(CKJIT_BF16, 1.0) == ldexp(1, -7) &&
                 ulp_of(CKJIT_F32, 1.0) == ldexp(1, -23) && ulp_of(CKJIT_F16, 1e-7) == ldexp(1, -24) &&
                 ulp_of(CKJIT_F16, 65504) == 32 && ulp_of(CKJIT_BF16, 3.0) == ldexp(1, -6) &&
                 ulp_of(CKJIT_F32, 0) == ldexp(1, -149),
             "ulp_of");
  self_check(within(CKJIT_BF16, 1.0 + ldexp(1, -7), 1.0, 0) && !within(CKJIT_BF16, 1.0 + ldexp(1, -6), 1.0, 0) &&
                 within(CKJIT_F32, 1.0, 1.0 + 1e-3, 2e-3) && !within(CKJIT_F32, 1.0, 1.0 + 1e-3, 1e-4) &&
                 within(CKJIT_F16, INFINITY, 70000.0, 0) && !within(CKJIT_F16, NAN, 1.0, 1) &&
                 within(CKJIT_F16, NAN, NAN, 0),
             "within");
}

/* ---- task list ------------------------------------------------------------------- */

task *g_tasks;
size_t g_ntasks;
static size_t g_cap;
static uint64_t g_seed, g_counter;

void add(task t) {
  if (g_ntasks == g_cap) {
    g_cap = g_cap ? 2 * g_cap : 512;
    g_tasks = realloc(g_tasks, g_cap * sizeof *g_tasks);
    if (!g_tasks) abort();
  }
  t.seed = g_seed * 1000003u + (++g_counter);
  g_tasks[g_ntasks++] = t;
}

task mk(enum kind kind, ckjit_dtype dt, int64_t rows, int64_t cols) {
  task t;
  memset(&t, 0, sizeof t);
  t.kind = kind;
  t.dt = dt;
  t.rows = rows;
  t.cols = cols;
  t.scale = 1.0f;
  t.eps = 1e-5f;
  t.k = 1;
  t.odt = dt;
  return t;
}

/* Layout variants: 0 aligned and packed; the others pad the row strides
 * (odd ld) and misalign base pointers by one element, forcing scalar paths. */
void apply_variant(task *t, int v) {
  switch (v % 4) {
    case 0: break;
    case 1: t->pad_x = 1; t->pad_y = 5; t->pad_r = 3; t->pad_s = 2; break;
    case 2: t->off_x = 1; t->pad_y = 1; t->off_r = 1; t->off_w = 1; t->pad_s = 7; break;
    case 3: t->off_y = 1; t->off_s = 1; t->pad_x = 17; t->pad_y = 3; t->pad_r = 1; break;
  }
}

shape g_reg[NREG];
const shape g_big[3] = {{1, 1048577}, {3, 1200000}, {1, 1 << 24}};

void build_tasks(uint64_t seed) {
  tu_rng r = {seed};
  g_seed = seed;
  const shape fixed[] = {{1, 1},   {1, 7},    {7, 1},     {3, 33},   {77, 1000}, {1025, 7},
                         {5, 4097}, {2, 65537}, {1025, 33}, {1, 4097}};
  int ns = 0;
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) g_reg[ns++] = fixed[i];
  while (ns < NREG) g_reg[ns++] = (shape){tu_rng_range(&r, 1, 300), tu_rng_range(&r, 1, 5000)};

  add_reduce_long_tasks();
  add_softmax_long_tasks();
  add_norm_long_tasks();
  add_quant_long_tasks();

  add_reduce_tasks();
  add_softmax_tasks();
  add_norm_tasks();
  add_quant_tasks();
  add_topk_tasks();
}
