/*
 * bench_rows: measures ckjit's row-wise ops on a CUDA GPU and prints one JSON
 * object per line (JSONL) on stdout, in bench_ckjit's format.  Diagnostics go
 * to stderr.  bench/peers.py (section "rows", bench/peers_rows.py) measures
 * the PyTorch peers and the same run's torch.clone; bench/make_results.py
 * merges them into bench/results.json and bench/RESULTS.md.
 *
 * usage: bench_rows [--quick] [--only OP]... [--shape RxC]... [--budget S]
 *                   [--in-process] [--list]
 *   --quick       fewer warm-up and timed runs (same cases, so the same metrics)
 *   --only OP     only this op (repeatable): softmax layernorm rmsnorm sum
 *                 rmsnorm_quant smoothquant topk_softmax
 *   --shape RxC   only this shape (repeatable; topk_softmax: TOKENSxEXPERTS)
 *   --budget S    seconds for the whole run (default 150, --quick 90); cases not
 *                 started by then get a record with status "SKIPPED"
 *   --in-process  run every case in this process (default: one child process
 *                 per case, so that a kernel fault, which kills its CUDA
 *                 context, costs only that case)
 *   --list        print the cases and exit
 *
 * Cases, all with a bf16 input (contiguous, ld = cols):
 *   softmax       ckjit_softmax, bf16 out               \  8192x8192 4096x16384
 *   layernorm     ckjit_layernorm2d, weight + bias, bf16 |  32768x1024 16x65536
 *   rmsnorm       ckjit_rmsnorm2d, weight, bf16 out      |  64x1048576
 *   sum           ckjit_reduce_rows(SUM), bf16 out      /   1x16777216
 *   rmsnorm_quant ckjit_rmsnorm2d_quant: residual add, sum_out written,
 *                 weight, int8 q + f32 row scales       8192x8192 4096x16384
 *   smoothquant   ckjit_smoothquant: f32 smooth scale,
 *                 int8 q + f32 row scales               8192x8192 4096x16384
 *   topk_softmax  ckjit_topk_softmax, renormalize=1, f32 weights, i32
 *                 indices: 32768 tokens x 64/128/256 experts, k = 2 and 8
 * eps is 1e-5 for the norms (the torch peers pass the same).
 *
 * Timing is bench_ckjit's bandwidth method (and peers.py's for torch): warm-up
 * calls (5, --quick 2), then each timed run is ONE call between two events on
 * the bench stream, synchronized after each run (50 runs, --quick 10); the
 * value is the median, min_ms is kept.  GB/s = rows_bytes() / median time.
 * topk_softmax is reported as a time (us; its bandwidth in "gbps").
 * Before the timed runs, the output of the warm-up calls is checked against a
 * host reference on a few rows ("check": "ok" / "mismatch").
 *
 * Records (kind "rows", impl "ckjit"): "metric" ("rows OP bf16 RxC", topk
 * with " kK"), "unit" (GB/s; us for topk_softmax), "value", "op", "api",
 * "dtype", "shape", "k" (topk), "median_ms", "min_ms", "bytes",
 * "bytes_formula", "warmup", "runs", "check", "first_call_ms" (the first call
 * until the stream is synchronized: JIT compile included).  A case that could
 * not be measured has "value": null, "status" (the ckjit status name,
 * CUDA_ERROR_..., CHECK_FAILED, CHILD_DIED, CHILD_TIMEOUT, NO_CUDA_DEVICE or
 * SKIPPED) and "error" (the message); one
 * record per case either way.
 *
 * Exit status: 0 when every case was measured or its op returned
 * CKJIT_ERROR_UNSUPPORTED (not implemented yet: its record says so); 1 when
 * a case failed in another way; 2 when a result check failed.  The run uses a
 * private temporary CKJIT_CACHE_DIR (shared by its children), removed at the
 * end.
 */
#define BENCH_NAME "bench_rows"
#include "bench_cases.h"

#include "bench_rows_cases.h"

#define NORM_EPS 1e-5f

/* ---- state, records -------------------------------------------------------- */
static int g_quick = 0;
static const row_case *g_case = NULL; /* the case this process is measuring */

/* The fields every record of a case has. */
static void j_case(jrec *r, const row_case *c, double value) {
  char metric[160], shape[64];
  case_metric(c, metric, sizeof metric);
  case_shape(c, shape, sizeof shape);
  j_begin(r, metric, c->op == ROP_TOPK ? "us" : "GB/s", value, "rows");
  j_str(r, "impl", "ckjit");
  j_str(r, "op", op_names[c->op]);
  j_str(r, "api", op_apis[c->op]);
  j_str(r, "dtype", "bf16");
  j_str(r, "shape", shape);
  if (c->op == ROP_TOPK) j_int(r, "k", c->k);
}

/* The record of a case that could not be measured. */
static void emit_case_error(const row_case *c, const char *status, const char *error) {
  jrec r;
  char metric[160];
  case_metric(c, metric, sizeof metric);
  const char *formula = "";
  double bytes = rows_bytes(c, &formula);
  j_case(&r, c, NAN);
  j_str(&r, "status", status);
  j_str(&r, "error", error);
  j_int(&r, "bytes", (long long)bytes);
  j_str(&r, "bytes_formula", formula);
  j_end(&r);
  msg("%s: %s: %s", metric, status, error);
}

static void emit_note(const char *text) {
  j_note_record("rows", text);
  msg("note: %s", text);
}

/* A CUDA error in a case: its context may be gone (a kernel fault is sticky),
 * so the case ends here with an error record and the process exits 1; with
 * one process per case the other cases are not affected. */
static void bench_cuda_fail(CUresult res, const char *what, const char *file, int line) {
  (void)file;
  const char *name, *text;
  cuda_error_strings(res, &name, &text);
  char err[512];
  snprintf(err, sizeof err, "bench_rows.c:%d: %s: %s", line, what, text ? text : "?");
  if (g_case) emit_case_error(g_case, name ? name : "CUDA_ERROR", err);
  else msg("%s: %s", name ? name : "CUDA_ERROR", err);
  exit(1);
}

/* ---- small helpers --------------------------------------------------------- */
/* n bf16 values: a random block of a prime length repeated (generating 2^26
 * values one by one would cost seconds per case; a prime period keeps rows
 * different from each other). */
#define PATTERN_LEN 1048573
static void fill_bf16(uint16_t *dst, size_t n, uint64_t seed) {
  g_rng = 0x9E3779B97F4A7C15ull ^ (seed * 0xD1B54A32D192ED03ull);
  size_t p = n < PATTERN_LEN ? n : PATTERN_LEN;
  for (size_t i = 0; i < p; i++) dst[i] = f32_to_bf16(rng_value());
  for (size_t i = p; i < n; i += p) memcpy(dst + i, dst, (n - i < p ? n - i : p) * 2);
}

/* ---- one case ---------------------------------------------------------------- */
typedef struct bufs {
  CUstream stream;
  /* device */
  void *x, *res, *w, *b, *y, *sum, *q, *tw, *ti;
  float *scale, *smooth;
  ckjit_norm_params np;
  /* host copies of the inputs */
  uint16_t *hx, *hres, *hw, *hb;
  float *hsmooth;
} bufs;

static ckjit_status case_launch(const row_case *c, const bufs *B) {
  void *s = (void *)B->stream;
  const int64_t R = c->rows, C = c->cols;
  switch (c->op) {
  case ROP_SOFTMAX:
    return ckjit_softmax(CKJIT_BF16, R, C, B->x, C, B->y, C, NULL, s);
  case ROP_LAYERNORM:
    return ckjit_layernorm2d(CKJIT_BF16, R, C, B->x, C, B->y, C, &B->np, s);
  case ROP_RMSNORM:
    return ckjit_rmsnorm2d(CKJIT_BF16, R, C, B->x, C, B->y, C, &B->np, s);
  case ROP_SUM:
    return ckjit_reduce_rows(CKJIT_REDUCE_SUM, CKJIT_BF16, R, C, B->x, C, CKJIT_BF16, B->y, s);
  case ROP_RMSNORM_QUANT:
    return ckjit_rmsnorm2d_quant(CKJIT_BF16, R, C, B->x, C, &B->np, CKJIT_I8, B->q, C, B->scale,
                                 s);
  case ROP_SMOOTHQUANT:
    return ckjit_smoothquant(CKJIT_BF16, R, C, B->x, C, B->smooth, CKJIT_I8, B->q, C, B->scale,
                             s);
  case ROP_TOPK:
    return ckjit_topk_softmax(CKJIT_BF16, R, C, B->x, C, c->k, 1, (float *)B->tw, CKJIT_I32,
                              B->ti, s);
  case ROP_COUNT_:
    break;
  }
  return CKJIT_ERROR_INVALID_ARGUMENT;
}

typedef struct case_ctx {
  const row_case *c;
  const bufs *B;
} case_ctx;

static ckjit_status case_launch_cb(const void *p) {
  const case_ctx *cx = p;
  return case_launch(cx->c, cx->B);
}

/* The case this process measures failed (bench_dev_alloc, bench_upload): its record. */
static void fail_case(const char *status, const char *error) {
  emit_case_error(g_case, status, error);
}

static int download(void *dst, const void *src, size_t bytes) {
  ckjit_status st = ckjit_memcpy(dst, src, bytes, CKJIT_DEVICE_TO_HOST);
  if (st != CKJIT_SUCCESS) {
    msg("check: ckjit_memcpy(D2H): %s: %s", ckjit_status_string(st), ckjit_last_error());
    return -1;
  }
  return 0;
}

/* ---- checks against a host reference (f64) ---------------------------------- */
typedef struct checker {
  long bad;
  double worst; /* largest |got - want| / tol */
} checker;

static void check_value(checker *k, const char *what, int64_t r, int64_t j, double got,
                        double want, double tol) {
  double err = fabs(got - want);
  if (!(err <= tol)) { /* NaN fails */
    if (k->bad++ < 3)
      msg("check %s: [%lld][%lld] = %.7g, want %.7g (tol %.3g)", what, (long long)r,
          (long long)j, got, want, tol);
  }
  if (tol > 0 && err / tol > k->worst) k->worst = err / tol;
}

/* Rows checked: first, middle, last. */
static int check_rows(int64_t R, int64_t out[3]) {
  int n = 0;
  int64_t cand[3] = {0, R / 2, R - 1};
  for (int i = 0; i < 3; i++) {
    int dup = 0;
    for (int j = 0; j < n; j++) dup |= out[j] == cand[i];
    if (!dup) out[n++] = cand[i];
  }
  return n;
}

/* int8 row quantization of v[0..C) against q and the row scale. */
static void check_quant(checker *k, const char *what, int64_t r, const double *v, int64_t C,
                        const int8_t *q, float scale) {
  double amax = 0;
  for (int64_t j = 0; j < C; j++) amax = fmax(amax, fabs(v[j]));
  double want_scale = amax > 0 ? amax / 127.0 : 1.0;
  /* The op may round h or v to bf16 first: 2^-8 relative moves a scale by
   * that much and a q by up to 127 * 2^-8 < 1. */
  check_value(k, what, r, -1, scale, want_scale, 1e-2 * want_scale);
  for (int64_t j = 0; j < C; j++) {
    double want = amax > 0 ? nearbyint(v[j] * (127.0 / amax)) : 0;
    want = want > 127 ? 127 : want < -127 ? -127 : want;
    check_value(k, what, r, j, q[j], want, 1.0);
  }
}

/* 1: ok, 0: mismatch, -1: could not check. */
static int case_check(const row_case *c, const bufs *B) {
  const int64_t R = c->rows, C = c->cols;
  const char *what = op_names[c->op];
  checker k = {0, 0};
  int rc = 1;
  if (c->op == ROP_TOPK) {
    int K = c->k;
    size_t n = (size_t)(R * K);
    float *gw = xmalloc(n * 4);
    int32_t *gi = xmalloc(n * 4);
    double *p = xmalloc((size_t)C * sizeof *p);
    int64_t *idx = xmalloc((size_t)K * sizeof *idx);
    if (download(gw, B->tw, n * 4) || download(gi, B->ti, n * 4)) rc = -1;
    int64_t stride = R > 4096 ? R / 4096 : 1; /* ~4096 tokens checked */
    for (int64_t t = 0; t < R && rc == 1; t += stride) {
      const uint16_t *xr = B->hx + t * C;
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < C; j++) m = fmax(m, bf16_to_f32(xr[j]));
      for (int64_t j = 0; j < C; j++) s += (p[j] = exp(bf16_to_f32(xr[j]) - m));
      /* top k by value, ties: lower index first (selection; K <= 8) */
      double wsum = 0;
      for (int i = 0; i < K; i++) {
        int64_t best = -1;
        for (int64_t j = 0; j < C; j++) {
          int taken = 0;
          for (int q = 0; q < i; q++) taken |= idx[q] == j;
          if (!taken && (best < 0 || p[j] > p[best])) best = j;
        }
        idx[i] = best;
        wsum += p[best] / s;
      }
      for (int i = 0; i < K; i++) {
        int64_t got_i = gi[t * K + i];
        int same = got_i == idx[i] ||
                   (got_i >= 0 && got_i < C && xr[got_i] == xr[idx[i]]); /* a tie */
        if (!same && k.bad++ < 3)
          msg("check %s: token %lld slot %d: index %lld, want %lld", what, (long long)t, i,
              (long long)got_i, (long long)idx[i]);
        double want = p[idx[i]] / s / wsum;
        check_value(&k, what, t, i, gw[t * K + i], want, 1e-3 * want + 1e-6);
      }
    }
    free(gw); free(gi); free(p); free(idx);
  } else {
    int64_t rows[3];
    int nr = check_rows(R, rows);
    uint16_t *gy = xmalloc((size_t)C * 2);
    int8_t *gq = xmalloc((size_t)C);
    double *v = xmalloc((size_t)C * sizeof *v);
    for (int ri = 0; ri < nr && rc == 1; ri++) {
      int64_t r = rows[ri];
      const uint16_t *xr = B->hx + r * C;
      double s1 = 0, s2 = 0, sabs = 0, m = -INFINITY;
      for (int64_t j = 0; j < C; j++) {
        double x = bf16_to_f32(xr[j]);
        s1 += x; s2 += x * x; sabs += fabs(x); m = fmax(m, x);
      }
      switch (c->op) {
      case ROP_SOFTMAX: {
        if (download(gy, (const char *)B->y + (size_t)(r * C) * 2, (size_t)C * 2)) { rc = -1; break; }
        double s = 0;
        for (int64_t j = 0; j < C; j++) s += exp(bf16_to_f32(xr[j]) - m);
        for (int64_t j = 0; j < C; j++) {
          double want = exp(bf16_to_f32(xr[j]) - m) / s;
          check_value(&k, what, r, j, bf16_to_f32(gy[j]), want, 1e-2 * want + 1e-3 / s);
        }
        break;
      }
      case ROP_LAYERNORM:
      case ROP_RMSNORM: {
        if (download(gy, (const char *)B->y + (size_t)(r * C) * 2, (size_t)C * 2)) { rc = -1; break; }
        double mean = c->op == ROP_LAYERNORM ? s1 / C : 0;
        double var = c->op == ROP_LAYERNORM ? s2 / C - mean * mean : s2 / C;
        double rstd = 1.0 / sqrt(var + NORM_EPS);
        for (int64_t j = 0; j < C; j++) {
          double want = (bf16_to_f32(xr[j]) - mean) * rstd * bf16_to_f32(B->hw[j]);
          if (c->op == ROP_LAYERNORM) want += bf16_to_f32(B->hb[j]);
          check_value(&k, what, r, j, bf16_to_f32(gy[j]), want, 2e-2 * (fabs(want) + 1));
        }
        break;
      }
      case ROP_SUM: {
        uint16_t g;
        if (download(&g, (const char *)B->y + (size_t)r * 2, 2)) { rc = -1; break; }
        check_value(&k, what, r, 0, bf16_to_f32(g), s1, 1e-2 * fabs(s1) + 1e-5 * sabs + 1e-2);
        break;
      }
      case ROP_RMSNORM_QUANT: {
        float scale;
        if (download(gy, (const char *)B->sum + (size_t)(r * C) * 2, (size_t)C * 2) ||
            download(gq, (const char *)B->q + (size_t)(r * C), (size_t)C) ||
            download(&scale, B->scale + r, 4)) { rc = -1; break; }
        const uint16_t *rr = B->hres + r * C;
        double h2 = 0;
        for (int64_t j = 0; j < C; j++) {
          /* h = x + residual rounded to bf16 (as the contract says) */
          double h = bf16_to_f32(f32_to_bf16(bf16_to_f32(xr[j]) + bf16_to_f32(rr[j])));
          check_value(&k, "rmsnorm_quant sum_out", r, j, bf16_to_f32(gy[j]), h,
                      8e-3 * fabs(h) + 1e-6); /* 1 bf16 ulp */
          v[j] = h;
          h2 += h * h;
        }
        double rstd = 1.0 / sqrt(h2 / C + NORM_EPS);
        for (int64_t j = 0; j < C; j++) v[j] *= rstd * bf16_to_f32(B->hw[j]);
        check_quant(&k, what, r, v, C, gq, scale);
        break;
      }
      case ROP_SMOOTHQUANT: {
        float scale;
        if (download(gq, (const char *)B->q + (size_t)(r * C), (size_t)C) ||
            download(&scale, B->scale + r, 4)) { rc = -1; break; }
        for (int64_t j = 0; j < C; j++) v[j] = (double)bf16_to_f32(xr[j]) * B->hsmooth[j];
        check_quant(&k, what, r, v, C, gq, scale);
        break;
      }
      default:
        break;
      }
    }
    free(gy); free(gq); free(v);
  }
  if (rc < 0) return -1;
  if (k.bad) msg("check %s: %ld values out of tolerance (worst %.3g x tol)", what, k.bad, k.worst);
  return k.bad == 0;
}


/* Measures one case on `stream`.  Emits exactly one record (a result or an
 * error).  Returns 0 (measured), 1 (failed), 2 (measured, but the check
 * failed) or RC_UNSUPPORTED.  CUDA errors exit(1) through CU(). */
static int run_case(const row_case *c, CUstream stream) {
  const int64_t R = c->rows, C = c->cols;
  const size_t n = (size_t)(R * C);
  const int warmup = g_quick ? 2 : 5, runs = g_quick ? 10 : 50;
  char metric[160];
  case_metric(c, metric, sizeof metric);
  msg("%s ...", metric);
  g_case = c;

  bufs B;
  memset(&B, 0, sizeof B);
  B.stream = stream;
  int rc = 1;
  double *ms = NULL;

  /* Inputs (host and device). */
  B.hx = xmalloc(n * 2);
  fill_bf16(B.hx, n, 1);
  if (bench_dev_alloc(&B.x, n * 2, fail_case) ||
      bench_upload(B.x, B.hx, n * 2, fail_case))
    goto done;
  if (c->op == ROP_LAYERNORM || c->op == ROP_RMSNORM || c->op == ROP_RMSNORM_QUANT) {
    B.hw = xmalloc((size_t)C * 2);
    B.hb = xmalloc((size_t)C * 2);
    g_rng = 77;
    for (int64_t j = 0; j < C; j++) B.hw[j] = f32_to_bf16(1.0f + rng_value() * 0.125f);
    for (int64_t j = 0; j < C; j++) B.hb[j] = f32_to_bf16(rng_value() * 0.125f);
    if (bench_dev_alloc(&B.w, (size_t)C * 2, fail_case) ||
        bench_upload(B.w, B.hw, (size_t)C * 2, fail_case))
      goto done;
    if (bench_dev_alloc(&B.b, (size_t)C * 2, fail_case) ||
        bench_upload(B.b, B.hb, (size_t)C * 2, fail_case))
      goto done;
  }
  if (c->op == ROP_RMSNORM_QUANT) {
    B.hres = xmalloc(n * 2);
    fill_bf16(B.hres, n, 2);
    if (bench_dev_alloc(&B.res, n * 2, fail_case) ||
        bench_upload(B.res, B.hres, n * 2, fail_case))
      goto done;
  }
  if (c->op == ROP_SMOOTHQUANT) {
    B.hsmooth = xmalloc((size_t)C * 4);
    g_rng = 99;
    for (int64_t j = 0; j < C; j++) B.hsmooth[j] = 1.0f + rng_value() * 0.125f;
    if (bench_dev_alloc((void **)&B.smooth, (size_t)C * 4, fail_case) ||
        bench_upload(B.smooth, B.hsmooth, (size_t)C * 4, fail_case))
      goto done;
  }
  /* Outputs, filled with 0xff bytes (NaN, -1) so that a call that writes
   * nothing cannot pass the check. */
  switch (c->op) {
  case ROP_SOFTMAX: case ROP_LAYERNORM: case ROP_RMSNORM:
    if (bench_dev_alloc(&B.y, n * 2, fail_case)) goto done;
    CU(cuMemsetD8Async((CUdeviceptr)(uintptr_t)B.y, 0xff, n * 2, stream));
    break;
  case ROP_SUM:
    if (bench_dev_alloc(&B.y, (size_t)R * 2, fail_case)) goto done;
    CU(cuMemsetD8Async((CUdeviceptr)(uintptr_t)B.y, 0xff, (size_t)R * 2, stream));
    break;
  case ROP_RMSNORM_QUANT: case ROP_SMOOTHQUANT:
    if (c->op == ROP_RMSNORM_QUANT) {
      if (bench_dev_alloc(&B.sum, n * 2, fail_case)) goto done;
      CU(cuMemsetD8Async((CUdeviceptr)(uintptr_t)B.sum, 0xff, n * 2, stream));
    }
    if (bench_dev_alloc(&B.q, n, fail_case) ||
        bench_dev_alloc((void **)&B.scale, (size_t)R * 4, fail_case))
      goto done;
    CU(cuMemsetD8Async((CUdeviceptr)(uintptr_t)B.q, 0xff, n, stream));
    CU(cuMemsetD8Async((CUdeviceptr)(uintptr_t)B.scale, 0xff, (size_t)R * 4, stream));
    break;
  case ROP_TOPK:
    if (bench_dev_alloc(&B.tw, (size_t)(R * c->k) * 4, fail_case) ||
        bench_dev_alloc(&B.ti, (size_t)(R * c->k) * 4, fail_case))
      goto done;
    CU(cuMemsetD8Async((CUdeviceptr)(uintptr_t)B.tw, 0xff, (size_t)(R * c->k) * 4, stream));
    CU(cuMemsetD8Async((CUdeviceptr)(uintptr_t)B.ti, 0xff, (size_t)(R * c->k) * 4, stream));
    break;
  case ROP_COUNT_:
    break;
  }
  ckjit_norm_params_init(&B.np);
  B.np.eps = NORM_EPS;
  B.np.weight = B.w;
  if (c->op == ROP_LAYERNORM) B.np.bias = B.b;
  if (c->op == ROP_RMSNORM_QUANT) {
    B.np.residual = B.res;
    B.np.ld_residual = C;
    B.np.sum_out = B.sum;
    B.np.ld_sum_out = C;
  }
  /* Uploads from pageable memory may still be in flight; the bench stream
   * does not wait for the default stream. */
  if (ckjit_synchronize(NULL) != CKJIT_SUCCESS) {
    emit_case_error(c, ckjit_status_string(ckjit_last_status()), ckjit_last_error());
    goto done;
  }
  CU(cuStreamSynchronize(stream));

  /* Warm-up; the first call compiles (or loads) the kernel. */
  double first_ms = NAN;
  for (int i = 0; i < warmup; i++) {
    double t0 = now_s();
    ckjit_status st = case_launch(c, &B);
    if (st != CKJIT_SUCCESS) {
      emit_case_error(c, ckjit_status_string(st), ckjit_last_error());
      rc = st == CKJIT_ERROR_UNSUPPORTED ? RC_UNSUPPORTED : 1;
      goto done;
    }
    if (i == 0) {
      CU(cuStreamSynchronize(stream));
      first_ms = (now_s() - t0) * 1e3;
    }
  }
  CU(cuStreamSynchronize(stream));
  int check = case_check(c, &B);
  if (check < 0) {
    emit_case_error(c, "CHECK_FAILED", "could not read the results back for the check");
    goto done;
  }

  ms = xmalloc((size_t)runs * sizeof *ms);
  const case_ctx cx = {c, &B};
  ckjit_status st = bench_time_runs(stream, runs, case_launch_cb, &cx, NULL, 0, ms);
  if (st != CKJIT_SUCCESS) {
    emit_case_error(c, ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  double med = median(ms, runs), mn = ms[0]; /* sorted by median() */
  const char *formula = "";
  double bytes = rows_bytes(c, &formula);
  double gbps = bytes / (med * 1e-3) / 1e9;
  jrec r;
  j_case(&r, c, c->op == ROP_TOPK ? med * 1e3 : gbps);
  j_num(&r, "median_ms", med);
  j_num(&r, "min_ms", mn);
  j_int(&r, "bytes", (long long)bytes);
  j_str(&r, "bytes_formula", formula);
  if (c->op == ROP_TOPK) j_num(&r, "gbps", gbps);
  j_int(&r, "warmup", warmup);
  j_int(&r, "runs", runs);
  j_str(&r, "check", check ? "ok" : "mismatch");
  j_num(&r, "first_call_ms", first_ms);
  j_end(&r);
  msg("%s: %.4g %s (median %.4f ms)%s", metric, c->op == ROP_TOPK ? med * 1e3 : gbps,
      c->op == ROP_TOPK ? "us" : "GB/s", med, check ? "" : "  CHECK MISMATCH");
  rc = check ? 0 : 2;

done:
  free(ms);
  cuStreamSynchronize(stream);
  void *dev[] = {B.x, B.res, B.w, B.b, B.y, B.sum, B.q, B.tw, B.ti, B.scale, B.smooth};
  for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) ckjit_free(dev[i]);
  free(B.hx); free(B.hres); free(B.hw); free(B.hb); free(B.hsmooth);
  g_case = NULL;
  return rc;
}

/* Case k of main's all[], for bench_run_cases and bench_child_case. */
static const row_case *g_all;
static int run_index(int k, CUstream stream) { return run_case(&g_all[k], stream); }
static void emit_index_error(int k, const char *status, const char *error) {
  emit_case_error(&g_all[k], status, error);
}
static void index_label(int k, char *buf, size_t len) { snprintf(buf, len, "%s", op_names[g_all[k].op]); }

/* ---- main ------------------------------------------------------------------------ */
static void usage(void) {
  fprintf(stderr,
          "usage: bench_rows [--quick] [--only OP]... [--shape RxC]... [--budget S] "
          "[--in-process] [--list]\n"
          "  OP: softmax layernorm rmsnorm sum rmsnorm_quant smoothquant topk_softmax\n");
}

int main(int argc, char **argv) {
  row_case all[MAX_CASES];
  int n_all = build_cases(all);
  unsigned op_mask = 0;
  const char *shapes[16];
  int n_shapes = 0, in_process = 0, list = 0, child = -1;
  double budget = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--quick") == 0) {
      g_quick = 1;
    } else if (strcmp(a, "--in-process") == 0) {
      in_process = 1;
    } else if (strcmp(a, "--list") == 0) {
      list = 1;
    } else if (strcmp(a, "--child-case") == 0 && i + 1 < argc) {
      child = atoi(argv[++i]);
    } else if (strcmp(a, "--only") == 0 && i + 1 < argc) {
      int found = 0;
      for (int o = 0; o < ROP_COUNT_; o++)
        if (strcmp(argv[i + 1], op_names[o]) == 0) { op_mask |= 1u << o; found = 1; }
      if (!found) { usage(); return 1; }
      i++;
    } else if (strcmp(a, "--shape") == 0 && i + 1 < argc && n_shapes < 16) {
      shapes[n_shapes++] = argv[++i];
    } else if (strcmp(a, "--budget") == 0 && i + 1 < argc) {
      budget = atof(argv[++i]);
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage();
      return 0;
    } else {
      usage();
      return 1;
    }
  }
  if (child >= 0) { /* a child: measures case `child` in this fresh process */
    if (child >= n_all) return 1;
    g_all = all;
    g_case = &all[child]; /* a CUDA error while setting up is the case's record */
    return bench_child_case(child, run_index, emit_index_error);
  }
  if (budget < 0) budget = g_quick ? 90 : 150;

  /* The selected cases (indices into all[], which children use). */
  int sel[MAX_CASES], n_sel = 0;
  for (int i = 0; i < n_all; i++) {
    if (op_mask && !(op_mask & (1u << all[i].op))) continue;
    if (n_shapes) {
      char shape[64];
      case_shape(&all[i], shape, sizeof shape);
      int hit = 0;
      for (int s = 0; s < n_shapes; s++) hit |= strcmp(shapes[s], shape) == 0;
      if (!hit) continue;
    }
    sel[n_sel++] = i;
  }
  if (list) {
    for (int i = 0; i < n_sel; i++) {
      char metric[160];
      const char *f;
      case_metric(&all[sel[i]], metric, sizeof metric);
      double bytes = rows_bytes(&all[sel[i]], &f);
      printf("%s  (bytes %.0f = %s)\n", metric, bytes, f);
    }
    return 0;
  }
  if (n_sel == 0) {
    msg("no case matches --only/--shape");
    return 1;
  }

  char cache_dir[64];
  if (bench_private_cache_dir(cache_dir, sizeof cache_dir, "bench-rows") != 0) return 1;

  /* The device record; then the parent lets go of the GPU (children make
   * their own contexts). */
  ckjit_device_info info;
  if (bench_cuda_device(&info, cache_dir) != 0) return 1;
  int driver = 0;
  cuDriverGetVersion(&driver);
  jrec r;
  j_begin(&r, "device", NULL, NAN, "info");
  j_str(&r, "impl", "ckjit");
  j_str(&r, "bench", "bench_rows");
  j_str(&r, "name", info.name);
  j_str(&r, "arch", info.arch);
  j_str(&r, "device_arch", info.device_arch);
  j_int(&r, "multiprocessors", info.multiprocessors);
  j_str(&r, "compiler", info.compiler);
  j_str(&r, "ckjit_version", ckjit_version_string());
  j_int(&r, "cuda_driver_version", driver);
  j_bool(&r, "quick", g_quick);
  j_bool(&r, "in_process", in_process);
  j_end(&r);
  msg("device %s (%s), %d cases, budget %.0f s, cache %s", info.name, info.arch, n_sel, budget,
      cache_dir);

  g_all = all;
  bench_cases cases = {
      .n = n_sel,
      .sel = sel,
      .budget = budget,
      .child_timeout = g_quick ? 45 : 60,
      .run = run_index,
      .emit_error = emit_index_error,
      .label = index_label,
      .note = emit_note,
      .name = "bench_rows",
      .kind = "rows",
      .child_args = {g_quick ? "--quick" : NULL},
  };
  return bench_run_all(&cases, in_process, cache_dir);
}
