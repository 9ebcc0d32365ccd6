/* bench_ckjit's bandwidth section: copy2d, relu, gelu_tanh, add on bf16
 * 8192x8192 and transpose on bf16 and f32 8192x8192, each spot-checked
 * against the host inputs, then timed with device events (median), GB/s
 * counting bytes read + written (kind "bandwidth"). */
#include "bench_ckjit.h"

enum { OP_COPY, OP_RELU, OP_GELU_TANH, OP_ADD, OP_TRANSPOSE };

typedef struct bw_ctx {
  int op;
  ckjit_dtype dtype;
  int64_t rows, cols;
  void *a, *b, *y;
  CUstream stream;
} bw_ctx;

static ckjit_status bw_launch(const bw_ctx *c) {
  void *s = (void *)c->stream;
  switch (c->op) {
  case OP_COPY:
    return ckjit_copy2d(c->dtype, c->rows, c->cols, c->a, c->cols, c->y, c->cols, s);
  case OP_RELU:
    return ckjit_unary(CKJIT_UNARY_RELU, c->dtype, c->rows, c->cols, c->a, c->cols, c->y,
                       c->cols, NULL, s);
  case OP_GELU_TANH:
    return ckjit_unary(CKJIT_UNARY_GELU_TANH, c->dtype, c->rows, c->cols, c->a, c->cols, c->y,
                       c->cols, NULL, s);
  case OP_ADD:
    return ckjit_binary(CKJIT_BINARY_ADD, c->dtype, c->rows, c->cols, c->a, c->cols, c->b,
                        c->cols, c->y, c->cols, NULL, s);
  case OP_TRANSPOSE:
    return ckjit_transpose(c->dtype, 1, c->rows, c->cols, c->a, c->cols, c->rows * c->cols,
                           c->y, c->rows, c->rows * c->cols, s);
  }
  return CKJIT_ERROR_INVALID_ARGUMENT;
}

static ckjit_status bw_launch_cb(const void *c) { return bw_launch((const bw_ctx *)c); }

static const char *const op_names[] = {"copy", "relu", "gelu_tanh", "add", "transpose"};
static const char *const op_apis[] = {"ckjit_copy2d", "ckjit_unary(RELU)",
                                      "ckjit_unary(GELU_TANH)", "ckjit_binary(ADD)",
                                      "ckjit_transpose"};

static float gelu_tanh_ref(float x) {
  double xd = x;
  return (float)(0.5 * xd * (1.0 + tanh(0.7978845608028654 * (xd + 0.044715 * xd * xd * xd))));
}

/* Host input element as float. */
static float host_in(const bw_ctx *c, const void *h, size_t i) {
  if (c->dtype == CKJIT_BF16) return bf16_to_f32(((const uint16_t *)h)[i]);
  return ((const float *)h)[i];
}

/* Spot-checks a few output rows against the host inputs.  1: ok, 0: mismatch, -1: error. */
static int bw_check(const bw_ctx *c, const void *ha, const void *hb) {
  size_t es = ckjit_dtype_size(c->dtype);
  int64_t out_rows = c->op == OP_TRANSPOSE ? c->cols : c->rows;
  int64_t out_cols = c->op == OP_TRANSPOSE ? c->rows : c->cols;
  int64_t check_rows[3] = {0, out_rows / 2 + 3, out_rows - 1};
  unsigned char *row = malloc((size_t)out_cols * es);
  if (!row) return -1;
  int ok = 1;
  long bad = 0;
  for (int k = 0; k < 3 && ok; k++) {
    int64_t r = check_rows[k];
    ckjit_status st = ckjit_memcpy(row, (const char *)c->y + (size_t)(r * out_cols) * es,
                                   (size_t)out_cols * es, CKJIT_DEVICE_TO_HOST);
    if (st != CKJIT_SUCCESS) {
      report_ckjit(st, "ckjit_memcpy (check)", __FILE__, __LINE__);
      free(row);
      return -1;
    }
    for (int64_t j = 0; j < out_cols; j++) {
      float got = c->dtype == CKJIT_BF16 ? bf16_to_f32(((uint16_t *)row)[j]) : ((float *)row)[j];
      float want, tol = 0.0f;
      size_t i = (size_t)(r * c->cols + j);
      switch (c->op) {
      case OP_COPY: want = host_in(c, ha, i); break;
      case OP_RELU: want = host_in(c, ha, i) > 0 ? host_in(c, ha, i) : 0.0f; break;
      case OP_GELU_TANH:
        want = gelu_tanh_ref(host_in(c, ha, i));
        tol = 1e-2f * fmaxf(1.0f, fabsf(want));
        break;
      case OP_ADD:
        want = host_in(c, ha, i) + host_in(c, hb, i);
        tol = 1e-2f * fmaxf(1.0f, fabsf(want));
        break;
      default: /* transpose: out[r][j] = in[j][r] */
        want = host_in(c, ha, (size_t)(j * c->cols + r));
        break;
      }
      if (!(fabsf(got - want) <= tol)) {
        if (bad++ < 3)
          msg("check %s %s: out[%lld][%lld] = %g, want %g", op_names[c->op],
              ckjit_dtype_name(c->dtype), (long long)r, (long long)j, got, want);
        ok = 0;
      }
    }
  }
  free(row);
  return ok;
}

static int bw_measure(bench *bn, bw_ctx *c, const void *ha, const void *hb, int warmup,
                      int runs) {
  char shape[64], metric[160];
  snprintf(shape, sizeof shape, "%lldx%lld", (long long)c->rows, (long long)c->cols);
  snprintf(metric, sizeof metric, "bandwidth %s %s %s", op_names[c->op],
           ckjit_dtype_name(c->dtype), shape);
  msg("%s ...", metric);
  CU(cuMemsetD8Async((CUdeviceptr)(uintptr_t)c->y, 0,
                     (size_t)(c->rows * c->cols) * ckjit_dtype_size(c->dtype), bn->stream));
  for (int i = 0; i < warmup; i++) CK_SOFT(bw_launch(c));
  CU(cuStreamSynchronize(bn->stream));
  int check = bw_check(c, ha, hb);
  if (check < 0) { g_status = 1; return -1; }
  if (check == 0) g_status = 2;

  double *ms = calloc((size_t)runs, sizeof *ms);
  if (!ms) exit(1);
  ckjit_status st = bench_time_runs(bn->stream, runs, bw_launch_cb, c, NULL, 0, ms);
  if (st != CKJIT_SUCCESS) {
    report_ckjit(st, metric, __FILE__, __LINE__);
    g_status = 1;
    free(ms);
    return -1;
  }
  double min_ms = min_of(ms, runs);
  double med_ms = median(ms, runs);
  size_t n = (size_t)(c->rows * c->cols), es = ckjit_dtype_size(c->dtype);
  int tensors = c->op == OP_ADD ? 3 : 2;
  double bytes = (double)n * (double)es * tensors;
  jrec r;
  j_begin(&r, metric, "GB/s", bytes / (med_ms * 1e-3) / 1e9, "bandwidth");
  j_str(&r, "impl", "ckjit");
  j_str(&r, "op", op_names[c->op]);
  j_str(&r, "api", op_apis[c->op]);
  j_str(&r, "dtype", ckjit_dtype_name(c->dtype));
  j_str(&r, "shape", shape);
  j_num(&r, "median_ms", med_ms);
  j_num(&r, "min_ms", min_ms);
  j_num(&r, "bytes", bytes);
  j_int(&r, "runs", runs);
  j_str(&r, "check", check ? "ok" : "mismatch");
  j_end(&r);
  free(ms);
  return 0;
}

int section_bandwidth(bench *bn) {
  const int64_t R = 8192, C = 8192;
  const size_t n = (size_t)(R * C);
  int warmup = g_quick ? 2 : 5, runs = g_quick ? 10 : 50;
  uint16_t *hx = malloc(n * 2), *hb = malloc(n * 2);
  float *hf = malloc(n * 4);
  if (!hx || !hb || !hf) {
    msg("out of host memory");
    exit(1);
  }
  for (size_t i = 0; i < n; i++) hx[i] = f32_to_bf16(rng_value());
  for (size_t i = 0; i < n; i++) hb[i] = f32_to_bf16(rng_value());
  for (size_t i = 0; i < n; i++) hf[i] = rng_value();

  void *dx, *db, *dy, *dfx, *dfy;
  CK(ckjit_malloc(&dx, n * 2));
  CK(ckjit_malloc(&db, n * 2));
  CK(ckjit_malloc(&dy, n * 2));
  CK(ckjit_malloc(&dfx, n * 4));
  CK(ckjit_malloc(&dfy, n * 4));
  CK(ckjit_memcpy(dx, hx, n * 2, CKJIT_HOST_TO_DEVICE));
  CK(ckjit_memcpy(db, hb, n * 2, CKJIT_HOST_TO_DEVICE));
  CK(ckjit_memcpy(dfx, hf, n * 4, CKJIT_HOST_TO_DEVICE));
  /* A copy from pageable memory may return before its DMA is done, and the
   * bench stream does not wait for the default stream. */
  CK(ckjit_synchronize(NULL));

  bw_ctx cases[] = {
      {OP_COPY, CKJIT_BF16, R, C, dx, NULL, dy, bn->stream},
      {OP_RELU, CKJIT_BF16, R, C, dx, NULL, dy, bn->stream},
      {OP_GELU_TANH, CKJIT_BF16, R, C, dx, NULL, dy, bn->stream},
      {OP_ADD, CKJIT_BF16, R, C, dx, db, dy, bn->stream},
      {OP_TRANSPOSE, CKJIT_BF16, R, C, dx, NULL, dy, bn->stream},
      {OP_TRANSPOSE, CKJIT_F32, R, C, dfx, NULL, dfy, bn->stream},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const void *ha = cases[i].dtype == CKJIT_F32 ? (const void *)hf : (const void *)hx;
    bw_measure(bn, &cases[i], ha, hb, warmup, runs);
  }
  CK(ckjit_free(dx));
  CK(ckjit_free(db));
  CK(ckjit_free(dy));
  CK(ckjit_free(dfx));
  CK(ckjit_free(dfy));
  free(hx);
  free(hb);
  free(hf);
  return 0;
}
