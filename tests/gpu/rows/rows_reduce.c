/* Row-ops GPU test, reductions: ckjit_reduce_rows (every op x dtype x output
 * dtype over the regular and long rows, cross output dtypes) and
 * ckjit_reduce (every dim of strided rank 1-4 layouts: permuted, padded,
 * broadcast, size-1 dims), against an f64 reference with PyTorch's
 * semantics.
 *
 * Tolerances (rows_gpu.h for u, g(n) and the window):
 *   reduce sum:   err = g(n) * u * sum|x|           (mean: that / n + 2u|mean|)
 *   reduce max/min: exact (the result is an input, converted to y's dtype);
 *   argmax/argmin: exact index (ties: lowest; NaN: index of the first NaN).
 */
#include "rows_gpu.h"

/* ---- reference ------------------------------------------------------------- */

typedef struct red_ref {
  double sum, sumabs, value;
  int64_t index;
  int has_nan;
} red_ref;

/* PyTorch semantics: NaN propagates; arg ops return the first NaN's index;
 * ties give the lowest index. */
static red_ref reduce_ref(int op, const double *v, int64_t n) {
  red_ref r = {0, 0, 0, 0, 0};
  int64_t first_nan = -1, imax = -1, imin = -1;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(v[i])) {
      if (first_nan < 0) first_nan = i;
      continue;
    }
    r.sum += v[i];
    r.sumabs += fabs(v[i]);
    if (imax < 0 || v[i] > v[imax]) imax = i;
    if (imin < 0 || v[i] < v[imin]) imin = i;
  }
  if (first_nan >= 0) {
    r.has_nan = 1;
    r.sum = r.value = NAN;
    r.index = first_nan;
    return r;
  }
  switch (op) {
    case CKJIT_REDUCE_SUM: r.value = r.sum; break;
    case CKJIT_REDUCE_MEAN: r.value = r.sum / (double)n; break;
    case CKJIT_REDUCE_MAX:
    case CKJIT_REDUCE_ARGMAX: r.value = v[imax], r.index = imax; break;
    default: r.value = v[imin], r.index = imin; break;
  }
  return r;
}

/* Allowed f32 error of a sum / mean reference (see the top comment). */
static double reduce_err(int op, const red_ref *r, int64_t n) {
  double e = growth((double)n) * U * r->sumabs;
  if (op == CKJIT_REDUCE_MEAN) e = e / (double)n + 2 * U * fabs(r->value);
  return e;
}

/* ---- checks ------------------------------------------------------------------ */

void check_reduce_out(gt_check *ck, int op, const gt_buf *y, size_t yi, const double *v, int64_t n,
                      const char *where) {
  red_ref rf = reduce_ref(op, v, n);
  if (op >= CKJIT_REDUCE_ARGMAX) {
    int64_t got = gt_get_int(y->dt, y->host, yi);
    if (got != rf.index)
      gt_fail(ck, "%s: got index %lld, want %lld (x[want]=%.9g%s, x[got]=%.9g)", where, LL(got), LL(rf.index),
              v[rf.index], rf.has_nan ? ", the first NaN" : "", got >= 0 && got < n ? v[got] : NAN);
    return;
  }
  double got = gt_get(y->dt, y->host, yi);
  if (op == CKJIT_REDUCE_MAX || op == CKJIT_REDUCE_MIN) {
    double want = gt_round(y->dt, rf.value);
    if (!(got == want || (isnan(got) && isnan(want))))
      gt_fail(ck, "%s: got %.9g, want %.9g exactly", where, got, want);
    return;
  }
  double err = rf.has_nan ? 0 : reduce_err(op, &rf, n);
  if (!within(y->dt, got, rf.value, err))
    gt_fail(ck, "%s: got %.9g, want %.9g (f64 %.12g; allowed f32 error %.3g + 1 ulp of %s)", where, got,
            gt_round(y->dt, rf.value), rf.value, err, ckjit_dtype_name(y->dt));
}

int run_reduce_rows(const task *t) {
  gt_check ck;
  check_begin(&ck, t);
  tu_rng rng = {t->seed};
  const int64_t R = t->rows, C = t->cols, ldx = C + t->pad_x;
  gt_buf x = {0}, y = {0};
  double *v = NULL;
  if (gt_buf_alloc(&ck, &x, t->dt, gt_extent(t->off_x, R, C, ldx, GUARD)) ||
      gt_buf_alloc(&ck, &y, t->odt, (size_t)(t->off_y + R) + GUARD))
    goto done;
  fill_matrix(t, &x, &rng, t->off_x, R, C, ldx, t->data, t->nan, 0);
  if (gt_buf_upload(&ck, &x) || gt_buf_poison(&ck, &y)) goto done;
  ckjit_status st = ckjit_reduce_rows((ckjit_reduce_op)t->op, t->dt, R, C, gt_buf_ptr(&x, t->off_x), ldx,
                                      t->odt, gt_buf_ptr(&y, t->off_y), NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(&ck, "ckjit_reduce_rows returned %s: %s", ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  if (gt_sync(&ck) || gt_buf_download(&ck, &y, NULL)) goto done;
  check_outside(&ck, &y, t->off_y, 1, R, R, "y");
  v = malloc((size_t)C * sizeof *v);
  if (!v) abort();
  for (int64_t r = 0; r < R; r++) {
    gather_row(t->dt, x.host, t->off_x + r * ldx, C, v);
    char where[64];
    snprintf(where, sizeof where, "row %lld", LL(r));
    check_reduce_out(&ck, t->op, &y, (size_t)(t->off_y + r), v, C, where);
  }
done:
  free(v);
  gt_buf_free(&x);
  gt_buf_free(&y);
  finish(&ck);
  return (int)ck.failures;
}

/* Row-major multi-index of `lin` over the dims of L other than `skip`
 * (-1: all dims); idx[skip] = 0. */
static void unravel(int64_t lin, const ckjit_tensor_layout *L, int skip, int64_t *idx) {
  for (int d = L->rank - 1; d >= 0; d--) {
    if (d == skip) {
      idx[d] = 0;
      continue;
    }
    idx[d] = lin % L->shape[d];
    lin /= L->shape[d];
  }
}

static int64_t offset_of(const ckjit_tensor_layout *L, const int64_t *idx) {
  int64_t o = 0;
  for (int d = 0; d < L->rank; d++) o += idx[d] * L->strides[d];
  return o;
}

int run_reduce_nd(const task *t) {
  gt_check ck;
  check_begin(&ck, t);
  tu_rng rng = {t->seed};
  const ckjit_tensor_layout *L = &t->layout;
  int64_t span = 1, total = 1, outer = 1;
  for (int d = 0; d < L->rank; d++) {
    span += (L->shape[d] - 1) * L->strides[d];
    total *= L->shape[d];
    if (d != t->dim) outer *= L->shape[d];
  }
  const int64_t n = L->shape[t->dim];
  gt_buf x = {0}, y = {0};
  double *v = NULL;
  if (gt_buf_alloc(&ck, &x, t->dt, (size_t)(t->off_x + span) + GUARD) ||
      gt_buf_alloc(&ck, &y, t->odt, (size_t)(t->off_y + outer) + GUARD))
    goto done;
  gt_fill_nan(t->dt, x.host, x.elems);
  int64_t idx[4];
  for (int64_t i = 0; i < total; i++) {
    unravel(i, L, -1, idx);
    gt_put(t->dt, x.host, (size_t)(t->off_x + offset_of(L, idx)), gen_value(t->data, t->dt, &rng, i, i, total));
  }
  if (t->nan)
    for (int j = 0; j < 3; j++) {
      unravel((int64_t)(tu_rng_next(&rng) % (uint64_t)total), L, -1, idx);
      gt_put_nan(t->dt, x.host, (size_t)(t->off_x + offset_of(L, idx)));
    }
  if (gt_buf_upload(&ck, &x) || gt_buf_poison(&ck, &y)) goto done;
  ckjit_status st = ckjit_reduce((ckjit_reduce_op)t->op, t->dt, L, gt_buf_ptr(&x, t->off_x), t->dim, t->odt,
                                 gt_buf_ptr(&y, t->off_y), NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(&ck, "ckjit_reduce returned %s: %s", ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  if (gt_sync(&ck) || gt_buf_download(&ck, &y, NULL)) goto done;
  check_outside(&ck, &y, t->off_y, 1, outer, outer, "y");
  v = malloc((size_t)n * sizeof *v);
  if (!v) abort();
  for (int64_t o = 0; o < outer; o++) {
    unravel(o, L, t->dim, idx);
    int64_t base = t->off_x + offset_of(L, idx);
    for (int64_t j = 0; j < n; j++)
      v[j] = gt_get(t->dt, x.host, (size_t)(base + j * L->strides[t->dim]));
    char where[128];
    snprintf(where, sizeof where, "y[%lld] (index [%lld,%lld,%lld,%lld] with dim %d free)", LL(o), LL(idx[0]),
             LL(L->rank > 1 ? idx[1] : 0), LL(L->rank > 2 ? idx[2] : 0), LL(L->rank > 3 ? idx[3] : 0), t->dim);
    check_reduce_out(&ck, t->op, &y, (size_t)(t->off_y + o), v, n, where);
  }
done:
  free(v);
  gt_buf_free(&x);
  gt_buf_free(&y);
  finish(&ck);
  return (int)ck.failures;
}

/* ---- reference self-checks ----------------------------------------------------- */

void self_check_reduce(void) {
  const double a[4] = {3, NAN, 5, NAN}, b[4] = {1, 5, 5, 2}, c2[2] = {-1, -1};
  red_ref r = reduce_ref(CKJIT_REDUCE_ARGMAX, a, 4);
  self_check(r.has_nan && r.index == 1 && isnan(r.value), "reduce: NaN, first NaN index");
  r = reduce_ref(CKJIT_REDUCE_ARGMIN, a, 4);
  self_check(r.index == 1, "reduce: argmin of a NaN row");
  self_check(reduce_ref(CKJIT_REDUCE_ARGMAX, b, 4).index == 1 && reduce_ref(CKJIT_REDUCE_ARGMIN, b, 4).index == 0 &&
                 reduce_ref(CKJIT_REDUCE_SUM, b, 4).value == 13 && reduce_ref(CKJIT_REDUCE_MEAN, b, 4).value == 3.25 &&
                 reduce_ref(CKJIT_REDUCE_MAX, b, 4).value == 5 && reduce_ref(CKJIT_REDUCE_MIN, b, 4).value == 1 &&
                 reduce_ref(CKJIT_REDUCE_ARGMAX, c2, 2).index == 0 && reduce_ref(CKJIT_REDUCE_ARGMIN, c2, 2).index == 0,
             "reduce: values and lowest-index ties");
}

/* ---- tasks ------------------------------------------------------------------------ */

static const ckjit_dtype dts[3] = {CKJIT_F32, CKJIT_F16, CKJIT_BF16};
static const int red_data[4] = {D_UNIFORM, D_NEG, D_POS, D_TIES};

/* The long rows. */
void add_reduce_long_tasks(void) {
  static const struct { int op; int dt, odt; int shape; } big[] = {
      {CKJIT_REDUCE_SUM, CKJIT_F32, CKJIT_F32, 2},    {CKJIT_REDUCE_SUM, CKJIT_BF16, CKJIT_F32, 1},
      {CKJIT_REDUCE_MAX, CKJIT_BF16, CKJIT_BF16, 0},  {CKJIT_REDUCE_ARGMAX, CKJIT_F16, CKJIT_I64, 2},
      {CKJIT_REDUCE_MEAN, CKJIT_F16, CKJIT_F16, 1},   {CKJIT_REDUCE_ARGMIN, CKJIT_F32, CKJIT_I32, 0},
      {CKJIT_REDUCE_MIN, CKJIT_F32, CKJIT_F32, 1},
  };
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
    task t = mk(K_REDUCE_ROWS, (ckjit_dtype)big[i].dt, g_big[big[i].shape].rows, g_big[big[i].shape].cols);
    t.op = big[i].op;
    t.odt = (ckjit_dtype)big[i].odt;
    t.data = i % 2 ? D_UNIFORM : D_POS;
    t.nan = i == 6;
    apply_variant(&t, (int)i);
    add(t);
  }
}

/* A strided layout: dims listed innermost first in `order`, each taking
 * shape + pad elements of the next one's stride; dims in `zero` broadcast. */
static ckjit_tensor_layout mk_layout(int rank, const int64_t *shape, const int *order, const int64_t *pad,
                                     unsigned zero, int64_t inner) {
  ckjit_tensor_layout L;
  memset(&L, 0, sizeof L);
  L.rank = rank;
  int64_t s = inner;
  for (int k = 0; k < rank; k++) {
    int d = order[k];
    L.shape[d] = shape[d];
    if (zero >> d & 1) {
      L.strides[d] = 0;
      continue;
    }
    L.strides[d] = s;
    s *= shape[d] + pad[d];
  }
  return L;
}

static const struct nd_spec {
  int rank;
  int64_t shape[4];
  int order[4];
  int64_t pad[4];
  unsigned zero;
  int64_t inner;
} nd_specs[] = {
    {1, {1000}, {0}, {0}, 0, 3},                                  /* rank 1, stride 3 */
    {2, {33, 65}, {0, 1}, {0, 0}, 0, 1},                          /* column-major */
    {3, {6, 5, 33}, {2, 1, 0}, {0, 0, 0}, 0, 1},                  /* contiguous */
    {3, {6, 5, 33}, {0, 1, 2}, {0, 0, 0}, 0, 1},                  /* reversed strides */
    {3, {7, 1, 129}, {1, 2, 0}, {0, 3, 2}, 0, 1},                 /* permuted, padded, size-1 dim */
    {3, {4, 9, 17}, {2, 1, 0}, {1, 0, 0}, 1u << 1, 1},            /* broadcast middle dim */
    {3, {3, 16, 8}, {2, 0, 1}, {0, 0, 0}, 1u << 2, 1},            /* broadcast innermost-listed dim */
    {3, {2, 4097, 3}, {2, 1, 0}, {0, 0, 1}, 0, 1},                /* long strided middle dim */
    {3, {1000, 2, 3}, {1, 2, 0}, {0, 0, 0}, 0, 1},                /* long outermost dim */
    {4, {3, 1, 4, 129}, {3, 2, 1, 0}, {0, 0, 1, 3}, 0, 1},        /* rank 4, padded */
    {4, {2, 3, 5, 7}, {1, 3, 0, 2}, {1, 0, 2, 1}, 0, 2},          /* permuted, padded, inner stride 2 */
    {4, {5, 1, 1, 1000}, {0, 1, 2, 3}, {0, 0, 0, 0}, 0, 1},       /* size-1 dims, last dim stride 5 */
    {4, {1, 1, 1, 1}, {3, 2, 1, 0}, {0, 0, 0, 0}, 0, 1},          /* one element */
    {4, {2, 3, 4, 5}, {3, 2, 1, 0}, {0, 0, 0, 0}, 1u | 1u << 3, 1}, /* two broadcast dims */
};

void add_reduce_tasks(void) {
  /* reduce_rows: every op x dtype x output dtype over the regular shapes,
   * layouts and data rotating, NaNs in a third of the tasks. */
  int combo = 0;
  for (int d = 0; d < 3; d++)
    for (int op = 0; op < 6; op++)
      for (int yv = 0; yv < 2; yv++, combo++) {
        ckjit_dtype odt = op >= CKJIT_REDUCE_ARGMAX ? (yv ? CKJIT_I64 : CKJIT_I32) : (yv ? dts[d] : CKJIT_F32);
        for (int s = 0; s < NREG; s++) {
          task t = mk(K_REDUCE_ROWS, dts[d], g_reg[s].rows, g_reg[s].cols);
          t.op = op;
          t.odt = odt;
          t.data = red_data[(s + op + yv) % 4];
          /* keep f16 sums finite: one-signed data would pass 65504 on long rows */
          if (odt == CKJIT_F16 && op == CKJIT_REDUCE_SUM && (t.data == D_POS || t.data == D_NEG))
            t.data = D_UNIFORM;
          t.nan = (s + combo) % 3 == 0;
          apply_variant(&t, s + combo);
          add(t);
        }
      }
  /* Cross output dtypes (y's dtype is any of f32/f16/bf16). */
  for (int op = 0; op < 4; op++)
    for (int i = 0; i < 3; i++) {
      static const ckjit_dtype in[3] = {CKJIT_F16, CKJIT_BF16, CKJIT_F32};
      static const ckjit_dtype out[3] = {CKJIT_BF16, CKJIT_F16, CKJIT_BF16};
      shape sh = g_reg[(4 + op + i) % NREG];
      task t = mk(K_REDUCE_ROWS, in[i], sh.rows, sh.cols);
      t.op = op;
      t.odt = out[i];
      t.data = D_UNIFORM;
      t.nan = i == 1;
      apply_variant(&t, op + i);
      add(t);
    }

  /* ckjit_reduce: every layout, every dim, every op; dtypes rotate, SUM in all three. */
  for (size_t l = 0; l < sizeof nd_specs / sizeof nd_specs[0]; l++) {
    const struct nd_spec *sp = &nd_specs[l];
    ckjit_tensor_layout L = mk_layout(sp->rank, sp->shape, sp->order, sp->pad, sp->zero, sp->inner);
    for (int dim = 0; dim < sp->rank; dim++)
      for (int op = 0; op < 6; op++)
        for (int d = 0; d < 3; d++) {
          if (op != CKJIT_REDUCE_SUM && d != (int)((l + (size_t)dim + (size_t)op) % 3)) continue;
          task t = mk(K_REDUCE_ND, dts[d], 0, 0);
          t.layout = L;
          t.dim = dim;
          t.op = op;
          int alt = (int)((l + (size_t)dim + (size_t)op) % 2);
          t.odt = op >= CKJIT_REDUCE_ARGMAX ? (alt ? CKJIT_I64 : CKJIT_I32) : (alt ? dts[d] : CKJIT_F32);
          t.data = red_data[(l + (size_t)op) % 4];
          t.nan = (l + (size_t)dim + (size_t)op) % 4 == 1;
          t.off_x = (int64_t)((l + (size_t)dim) % 2);
          t.off_y = (int64_t)((l + (size_t)op) % 2);
          add(t);
        }
  }
}
