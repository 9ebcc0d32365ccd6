/* GPU suite: every op against a CPU reference computed in double, through
 * the public API only.  Exits 77 (skip) when there is no GPU (the driver:
 * tests/common/gpu_harness.c).
 *
 * Environment: CKJIT_TEST_SEED (default: time), CKJIT_TEST_THREADS (worker
 * threads, default 8), CKJIT_TEST_SKIP_LARGE=1 (skip the > 2^31 case). */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckjit/ckjit.h"
#include "gpu_harness.h"

#define REPORT_MAX 5 /* failures printed per task (the rest are counted) */
#define GUARD 19     /* elements after every buffer's matrix */

/* ---- references ------------------------------------------------------------ */

static const char *unary_names[] = {"identity", "relu", "gelu_tanh", "gelu_erf", "silu", "sigmoid"};
static const char *binary_names[] = {"add", "sub", "mul", "div", "max", "min"};

static double ref_unary(int op, double x) {
  switch (op) {
    case CKJIT_UNARY_IDENTITY: return x;
    case CKJIT_UNARY_RELU: return x > 0 ? x : 0.0;
    case CKJIT_UNARY_GELU_TANH:
      return 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
    case CKJIT_UNARY_GELU_ERF: return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440));
    case CKJIT_UNARY_SILU: return x / (1.0 + exp(-x));
    case CKJIT_UNARY_SIGMOID: return 1.0 / (1.0 + exp(-x));
  }
  return NAN;
}

static double ref_binary(int op, double a, double b) {
  if (isnan(a) || isnan(b)) return NAN; /* every op propagates NaN, max/min too */
  switch (op) {
    case CKJIT_BINARY_ADD: return a + b;
    case CKJIT_BINARY_SUB: return a - b;
    case CKJIT_BINARY_MUL: return a * b;
    case CKJIT_BINARY_DIV: return a / b;
    case CKJIT_BINARY_MAX: return a > b ? a : b;
    case CKJIT_BINARY_MIN: return a < b ? a : b;
  }
  return NAN;
}

typedef struct tol {
  double rtol, atol;
} tol;

static tol tolerance(ckjit_dtype dt, int transcendental) {
  switch (dt) {
    case CKJIT_F32: return (tol){1e-5, transcendental ? 1e-5 : 1e-30};
    case CKJIT_F16: return (tol){1e-3, transcendental ? 2e-5 : 1e-7};
    default: return (tol){8e-3, transcendental ? 2e-5 : 1e-30};
  }
}

/* ---- tasks ----------------------------------------------------------------- */

enum kind { K_COPY, K_UNARY, K_BINARY, K_TRANSPOSE };

typedef struct task {
  enum kind kind;
  int op;
  int epi; /* 0/1 */
  ckjit_dtype dt;
  int64_t rows, cols;
  int64_t pad_a, pad_b, pad_y; /* ld = cols (or rows for transpose out) + pad */
  int64_t off_a, off_b, off_y; /* misalignment in elements */
  int64_t batch, gap_in, gap_out; /* transpose: batch stride = matrix + gap */
  uint64_t seed;
} task;

static void describe(const task *t, char *buf, size_t len) {
  static const char *kinds[] = {"copy2d", "unary", "binary", "transpose"};
  const char *op = t->kind == K_UNARY ? unary_names[t->op] : t->kind == K_BINARY ? binary_names[t->op] : "";
  snprintf(buf, len,
           "%s%s%s%s %s batch=%lld %lldx%lld pad(a,b,y)=(%lld,%lld,%lld) off(a,b,y)=(%lld,%lld,%lld) "
           "gap=(%lld,%lld) seed=%llu",
           kinds[t->kind], *op ? ":" : "", op, t->epi ? "+epilogue" : "", ckjit_dtype_name(t->dt),
           (long long)t->batch, (long long)t->rows, (long long)t->cols, (long long)t->pad_a,
           (long long)t->pad_b, (long long)t->pad_y, (long long)t->off_a, (long long)t->off_b,
           (long long)t->off_y, (long long)t->gap_in, (long long)t->gap_out,
           (unsigned long long)t->seed);
}

/* A fresh gt_check whose context is the task's description. */
static void check_begin(gt_check *ck, const task *t) {
  char d[512];
  describe(t, d, sizeof d);
  memset(ck, 0, sizeof *ck);
  ck->max_report = REPORT_MAX;
  gt_check_begin(ck, "%s", d);
}

/* Fills a whole input buffer: random values in [lo, hi] (|v| >= min_abs)
 * inside the matrix, NaN everywhere else (padding, misalignment, guard), so
 * a kernel that reads outside the matrix into a result is caught. */
static void fill_input(gt_buf *b, tu_rng *r, int64_t off, int64_t rows, int64_t cols, int64_t ld,
                       double lo, double hi, double min_abs) {
  gt_fill_nan(b->dt, b->host, b->elems);
  for (int64_t y = 0; y < rows; y++)
    for (int64_t x = 0; x < cols; x++) {
      double v = gt_uniform(r, lo, hi);
      if (fabs(v) < min_abs) v = v < 0 ? -min_abs - fabs(v) : min_abs + v;
      gt_put(b->dt, b->host, (size_t)(off + y * ld + x), v);
    }
}

/* ---- elementwise (copy / unary / binary) ---------------------------------- */

static int run_elementwise(const task *t) {
  gt_check ck;
  check_begin(&ck, t);
  tu_rng rng = {t->seed};
  const int64_t R = t->rows, C = t->cols;
  const int64_t lda = C + t->pad_a, ldb = C + t->pad_b, ldy = C + t->pad_y;
  gt_buf a = {0}, b = {0}, y = {0};
  const int binary = t->kind == K_BINARY;
  const ckjit_epilogue epi = {1.5f, -0.25f};
  if (gt_buf_alloc(&ck, &a, t->dt, gt_extent(t->off_a, R, C, lda, GUARD)) ||
      (binary && gt_buf_alloc(&ck, &b, t->dt, gt_extent(t->off_b, R, C, ldb, GUARD))) ||
      gt_buf_alloc(&ck, &y, t->dt, gt_extent(t->off_y, R, C, ldy, GUARD)))
    goto done;

  fill_input(&a, &rng, t->off_a, R, C, lda, t->kind == K_UNARY ? -6 : -4,
             t->kind == K_UNARY ? 6 : 4, 0);
  if (binary) {
    int div = t->op == CKJIT_BINARY_DIV;
    fill_input(&b, &rng, t->off_b, R, C, ldb, -4, 4, div ? 0.5 : 0);
    /* NaNs in a and in b, which every binary op must propagate. */
    for (int64_t r = 0; r < R; r++)
      for (int64_t c = 0; c < C; c++) {
        uint64_t u = tu_rng_next(&rng) % 61;
        if (u == 0) gt_put_nan(t->dt, a.host, (size_t)(t->off_a + r * lda + c));
        if (u == 1) gt_put_nan(t->dt, b.host, (size_t)(t->off_b + r * ldb + c));
      }
  }
  if (gt_buf_upload(&ck, &a) || (binary && gt_buf_upload(&ck, &b)) || gt_buf_poison(&ck, &y)) goto done;

  ckjit_status st;
  const void *pa = gt_buf_ptr(&a, t->off_a);
  void *py = gt_buf_ptr(&y, t->off_y);
  if (t->kind == K_COPY)
    st = ckjit_copy2d(t->dt, R, C, pa, lda, py, ldy, NULL);
  else if (t->kind == K_UNARY)
    st = ckjit_unary((ckjit_unary_op)t->op, t->dt, R, C, pa, lda, py, ldy, t->epi ? &epi : NULL, NULL);
  else
    st = ckjit_binary((ckjit_binary_op)t->op, t->dt, R, C, pa, lda, gt_buf_ptr(&b, t->off_b), ldb, py,
                      ldy, t->epi ? &epi : NULL, NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(&ck, "op returned %s: %s", ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  if (gt_sync(&ck) || gt_buf_download(&ck, &y, NULL)) goto done;

  int transcendental = t->kind == K_UNARY && t->op >= CKJIT_UNARY_GELU_TANH;
  tol tl = tolerance(t->dt, transcendental);
  const size_t es = gt_esize(t->dt);
  for (size_t i = 0; i < y.elems; i++) {
    if (!gt_in_matrix(i, t->off_y, R, C, ldy)) {
      if (!gt_is_poison(t->dt, y.host, i))
        gt_fail(&ck, "wrote outside the matrix at element %zu (off %lld, ld %lld)", i,
                (long long)t->off_y, (long long)ldy);
      continue;
    }
    int64_t k = (int64_t)i - t->off_y, r = k / ldy, c = k % ldy;
    size_t ia = (size_t)(t->off_a + r * lda + c);
    if (t->kind == K_COPY) {
      if (memcmp(y.host + i * es, a.host + ia * es, es) != 0)
        gt_fail(&ck, "(%lld,%lld): got %g, want %g (bitwise copy)", (long long)r, (long long)c,
                gt_get(t->dt, y.host, i), gt_get(t->dt, a.host, ia));
      continue;
    }
    double f, want, mag;
    if (t->kind == K_UNARY) {
      f = ref_unary(t->op, gt_get(t->dt, a.host, ia));
    } else {
      size_t ib = (size_t)(t->off_b + r * ldb + c);
      f = ref_binary(t->op, gt_get(t->dt, a.host, ia), gt_get(t->dt, b.host, ib));
    }
    if (t->epi) {
      want = (double)epi.scale * f + (double)epi.bias;
      mag = fabs((double)epi.scale * f) + fabs((double)epi.bias);
    } else {
      want = f;
      mag = fabs(f);
    }
    double got = gt_get(t->dt, y.host, i);
    if (isnan(want)) {
      if (!isnan(got))
        gt_fail(&ck, "(%lld,%lld): got %g, want NaN (NaN input must propagate)", (long long)r,
                (long long)c, got);
      continue;
    }
    double err = fabs(got - want);
    if (!(err <= tl.atol + tl.rtol * mag)) {
      double x = gt_get(t->dt, a.host, ia);
      gt_fail(&ck, "(%lld,%lld): x=%.9g got %.9g, want %.9g (err %.3g > %.3g)", (long long)r,
              (long long)c, x, got, want, err, tl.atol + tl.rtol * mag);
    }
  }
done:
  gt_buf_free(&a);
  gt_buf_free(&b);
  gt_buf_free(&y);
  gt_check_end_as(&ck, "errors");
  return (int)ck.failures;
}

/* ---- transpose ---------------------------------------------------------- */

static int run_transpose(const task *t) {
  gt_check ck;
  check_begin(&ck, t);
  tu_rng rng = {t->seed};
  const int64_t B = t->batch, R = t->rows, C = t->cols;
  const int64_t ldi = C + t->pad_a, ldo = R + t->pad_y;
  const int64_t bsi = R * ldi + t->gap_in, bso = C * ldo + t->gap_out;
  gt_buf in = {0}, out = {0};
  const size_t es = gt_esize(t->dt);
  if (gt_buf_alloc(&ck, &in, t->dt, (size_t)(t->off_a + (B - 1) * bsi) + gt_extent(0, R, C, ldi, GUARD)) ||
      gt_buf_alloc(&ck, &out, t->dt, (size_t)(t->off_y + (B - 1) * bso) + gt_extent(0, C, R, ldo, GUARD)))
    goto done;
  /* Random bit patterns (finite), so any misplaced element shows. */
  gt_fill_nan(t->dt, in.host, in.elems);
  for (int64_t b = 0; b < B; b++)
    for (int64_t r = 0; r < R; r++)
      for (int64_t c = 0; c < C; c++)
        gt_put(t->dt, in.host, (size_t)(t->off_a + b * bsi + r * ldi + c),
               (tu_rng_unit(&rng) - 0.5) * 1000.0);
  if (gt_buf_upload(&ck, &in) || gt_buf_poison(&ck, &out)) goto done;
  ckjit_status st = ckjit_transpose(t->dt, B, R, C, gt_buf_ptr(&in, t->off_a), ldi, bsi,
                                    gt_buf_ptr(&out, t->off_y), ldo, bso, NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(&ck, "ckjit_transpose returned %s: %s", ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  if (gt_sync(&ck) || gt_buf_download(&ck, &out, NULL)) goto done;
  for (size_t i = 0; i < out.elems; i++) {
    int64_t k = (int64_t)i - t->off_y;
    int64_t b = k >= 0 ? k / bso : -1, rem = k >= 0 ? k % bso : 0;
    int inside = k >= 0 && b < B && gt_in_matrix((size_t)rem, 0, C, R, ldo);
    if (!inside) {
      if (!gt_is_poison(t->dt, out.host, i))
        gt_fail(&ck, "wrote outside the output matrices at element %zu", i);
      continue;
    }
    int64_t c = rem / ldo, r = rem % ldo; /* out_b[c][r] = in_b[r][c] */
    size_t src = (size_t)(t->off_a + b * bsi + r * ldi + c);
    if (memcmp(out.host + i * es, in.host + src * es, es) != 0)
      gt_fail(&ck, "batch %lld out[%lld][%lld]: got %g, want %g", (long long)b, (long long)c,
              (long long)r, gt_get(t->dt, out.host, i), gt_get(t->dt, in.host, src));
  }
done:
  gt_buf_free(&in);
  gt_buf_free(&out);
  gt_check_end_as(&ck, "errors");
  return (int)ck.failures;
}

/* ---- task list ------------------------------------------------------------ */

static task *g_tasks;
static size_t g_ntasks, g_cap;

static void add(task t) {
  if (g_ntasks == g_cap) {
    g_cap = g_cap ? 2 * g_cap : 256;
    g_tasks = realloc(g_tasks, g_cap * sizeof *g_tasks);
    if (!g_tasks) abort();
  }
  g_tasks[g_ntasks++] = t;
}

typedef struct shape {
  int64_t rows, cols;
} shape;

/* Layout variants: 0 aligned and packed; others odd leading dimensions and
 * misaligned (pointer + 1 element) operands. */
static void apply_variant(task *t, int v) {
  switch (v % 4) {
    case 0: break;
    case 1: t->pad_a = 1; t->pad_b = 3; t->pad_y = 5; break;
    case 2: t->off_a = 1; t->off_b = 0; t->off_y = 0; t->pad_y = 1; break;
    case 3: t->off_a = 0; t->off_b = 1; t->off_y = 1; t->pad_a = 17; t->pad_b = 0; t->pad_y = 3; break;
  }
}

static void build_tasks(uint64_t seed) {
  tu_rng r = {seed};
  shape shapes[16] = {{1, 1},   {1, 7},   {7, 1},     {3, 5},    {33, 1000},
                      {64, 64}, {1000, 33}, {257, 4097}, {2, 65537}};
  int ns = 9;
  for (int i = 0; i < 4; i++)
    shapes[ns++] = (shape){tu_rng_range(&r, 1, 300), tu_rng_range(&r, 1, 3000)};
  const ckjit_dtype dts[3] = {CKJIT_F32, CKJIT_F16, CKJIT_BF16};
  uint64_t k = 0;
#define NEXT_SEED (seed * 1000003u + (++k))

  /* copy2d: every shape, aligned and one odd layout, per dtype. */
  for (int d = 0; d < 3; d++)
    for (int s = 0; s < ns; s++)
      for (int v = 0; v < 2; v++) {
        task t = {K_COPY, 0, 0, dts[d], shapes[s].rows, shapes[s].cols, 0, 0, 0, 0, 0, 0, 1, 0, 0, NEXT_SEED};
        apply_variant(&t, v ? 1 + (s + d) % 3 : 0);
        add(t);
      }
  /* unary and binary: every op, with and without epilogue, per dtype, on
   * three shapes (small odd, medium/random, aligned/large) and layouts. */
  static const shape small[] = {{1, 1}, {1, 7}, {7, 1}, {3, 5}};
  for (int kind = K_UNARY; kind <= K_BINARY; kind++)
    for (int op = 0; op < 6; op++)
      for (int e = 0; e < 2; e++)
        for (int d = 0; d < 3; d++) {
          int idx = op * 6 + e * 3 + d;
          shape picks[3];
          picks[0] = small[idx % 4];
          picks[1] = idx % 3 == 0 ? shapes[4] : idx % 3 == 1 ? shapes[6] : shapes[9 + idx % 4];
          picks[2] = idx % 5 == 0 ? shapes[7] : shapes[5];
          for (int p = 0; p < 3; p++) {
            task t = {(enum kind)kind, op, e, dts[d], picks[p].rows, picks[p].cols, 0, 0, 0, 0, 0, 0, 1, 0, 0,
                      NEXT_SEED};
            apply_variant(&t, p == 2 ? 0 : 1 + (idx + p) % 3);
            add(t);
          }
        }
  /* transpose: 2D over the shapes, then batched, with gaps between the
   * batch entries and odd leading dimensions. */
  for (int d = 0; d < 3; d++) {
    for (int s = 0; s < ns; s++)
      for (int v = 0; v < 2; v++) {
        task t = {K_TRANSPOSE, 0, 0, dts[d], shapes[s].rows, shapes[s].cols, 0, 0, 0, 0, 0, 0, 1, 0, 0, NEXT_SEED};
        if (v) {
          t.pad_a = 1 + 2 * ((s + d) % 3);
          t.pad_y = 3;
          t.off_a = (s + d) % 2;
          t.off_y = 1 - t.off_a;
        }
        add(t);
      }
    static const struct {
      int64_t batch, rows, cols;
    } batched[] = {{2, 17, 33}, {3, 64, 64}, {5, 3, 1000}, {7, 1, 1}, {4, 129, 31}};
    for (size_t i = 0; i < sizeof batched / sizeof batched[0]; i++) {
      task t = {K_TRANSPOSE, 0, 0, dts[d], batched[i].rows, batched[i].cols, 0, 0, 0, 0, 0, 0,
                batched[i].batch, 0, 0, NEXT_SEED};
      if (i % 2) {
        t.pad_a = 3;
        t.pad_y = 1;
        t.gap_in = 7;
        t.gap_out = 5;
        t.off_y = 1;
      }
      add(t);
    }
  }
#undef NEXT_SEED
}

static atomic_size_t g_next;
static atomic_int g_failed_tasks;

static void *worker(void *p) {
  (void)p;
  for (;;) {
    size_t i = atomic_fetch_add(&g_next, 1);
    if (i >= g_ntasks) break;
    const task *t = &g_tasks[i];
    int errors = t->kind == K_TRANSPOSE ? run_transpose(t) : run_elementwise(t);
    if (errors) atomic_fetch_add(&g_failed_tasks, 1);
  }
  return NULL;
}

/* ---- the > 2^31 elements case -------------------------------------------- */

static uint16_t big_pattern(size_t i) {
  /* finite bf16 (exponent MSB clear), varying in every bit position of i */
  uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull;
  return (uint16_t)((z >> 40) & 0xBFFFu);
}

static int run_large(int *checks) {
  const size_t N = (1ull << 31) + 4099;
  const size_t bytes = (N + 16) * 2;
  void *dx = NULL, *dy = NULL;
  if (ckjit_malloc(&dx, bytes) != CKJIT_SUCCESS || ckjit_malloc(&dy, bytes) != CKJIT_SUCCESS) {
    printf("SKIP large case: cannot allocate 2 x %.1f GB on the device (%s)\n", bytes / 1e9,
           ckjit_last_error());
    ckjit_free(dx);
    ckjit_free(dy);
    return 0;
  }
  uint16_t *hx = malloc(bytes), *hy = malloc(bytes);
  if (!hx || !hy) {
    printf("SKIP large case: cannot allocate 2 x %.1f GB on the host\n", bytes / 1e9);
    free(hx);
    free(hy);
    ckjit_free(dx);
    ckjit_free(dy);
    return 0;
  }
  int errors = 0;
  *checks = 2;
  for (size_t i = 0; i < N + 16; i++) hx[i] = big_pattern(i);
  ckjit_status st = ckjit_memcpy(dx, hx, bytes, CKJIT_HOST_TO_DEVICE);
  if (st == CKJIT_SUCCESS) st = ckjit_memset(dy, 0xFF, bytes);

  /* copy2d of 1 x N. */
  if (st == CKJIT_SUCCESS) st = ckjit_copy2d(CKJIT_BF16, 1, (int64_t)N, dx, (int64_t)N, dy, (int64_t)N, NULL);
  if (st == CKJIT_SUCCESS) st = ckjit_synchronize(NULL);
  if (st == CKJIT_SUCCESS) st = ckjit_memcpy(hy, dy, bytes, CKJIT_DEVICE_TO_HOST);
  if (st != CKJIT_SUCCESS) {
    printf("FAIL large copy2d 1 x %zu bf16: %s\n", N, ckjit_last_error());
    errors++;
  } else {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < N + 16; i++) {
      uint16_t want = i < N ? hx[i] : 0xFFFF;
      if (hy[i] != want && bad++ == 0) first = i;
    }
    if (bad) {
      printf("FAIL large copy2d 1 x %zu bf16: %zu wrong elements, first at %zu\n", N, bad, first);
      errors++;
    } else {
      printf("ok   large copy2d 1 x %zu bf16\n", N);
    }
  }

  /* unary relu of 2 x M with ld = M + 3 (extent > 2^31 elements). */
  const int64_t M = (1ll << 30) + 2051, ld = M + 3;
  st = ckjit_memset(dy, 0xFF, bytes);
  if (st == CKJIT_SUCCESS)
    st = ckjit_unary(CKJIT_UNARY_RELU, CKJIT_BF16, 2, M, dx, ld, dy, ld, NULL, NULL);
  if (st == CKJIT_SUCCESS) st = ckjit_synchronize(NULL);
  if (st == CKJIT_SUCCESS) st = ckjit_memcpy(hy, dy, bytes, CKJIT_DEVICE_TO_HOST);
  if (st != CKJIT_SUCCESS) {
    printf("FAIL large unary relu 2 x %lld (ld %lld) bf16: %s\n", (long long)M, (long long)ld,
           ckjit_last_error());
    errors++;
  } else {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < N + 16; i++) {
      int64_t r = (int64_t)i / ld, c = (int64_t)i % ld;
      double want_v = 0;
      int poison = !(r < 2 && c < M);
      if (!poison) {
        double x = bf16_to_f32(hx[i]);
        want_v = x > 0 ? x : 0.0;
      }
      int ok = poison ? hy[i] == 0xFFFF : fabs(bf16_to_f32(hy[i]) - want_v) <= 1e-30;
      if (!ok && bad++ == 0) first = i;
    }
    if (bad) {
      printf("FAIL large unary relu 2 x %lld bf16: %zu wrong elements, first at %zu\n", (long long)M,
             bad, first);
      errors++;
    } else {
      printf("ok   large unary relu 2 x %lld (ld %lld) bf16\n", (long long)M, (long long)ld);
    }
  }
  free(hx);
  free(hy);
  ckjit_free(dx);
  ckjit_free(dy);
  return errors;
}

static gt_result run(gt_ctx *ctx) {
  build_tasks(ctx->seed);
  pthread_t th[64];
  for (int i = 0; i < ctx->threads; i++) pthread_create(&th[i], NULL, worker, NULL);
  for (int i = 0; i < ctx->threads; i++) pthread_join(th[i], NULL);
  int failed = atomic_load(&g_failed_tasks);
  printf("%zu op checks: %zu passed, %d failed\n", g_ntasks, g_ntasks - (size_t)failed, failed);

  int large_failed = 0, large_run = 0;
  if (ctx->skip_large) {
    printf("SKIP large case: CKJIT_TEST_SKIP_LARGE is set\n");
  } else {
    large_failed = run_large(&large_run);
  }
  free(g_tasks);
  return (gt_result){(long)g_ntasks + large_run, failed + large_failed};
}

static const gt_suite suite = {
    .name = "ops_gpu",
    .cache_tag = "gpu",
    .run = run,
    .check_stats = 1,
};

GT_MAIN(suite)
