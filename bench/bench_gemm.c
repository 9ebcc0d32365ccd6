/*
 * bench_gemm: measures ckjit_gemm / ckjit_gemm_grouped on a CUDA GPU and
 * prints one JSON object per line (JSONL) on stdout, in bench_rows' format.
 * Diagnostics go to stderr.  bench/peers.py (section "gemm",
 * bench/peers_gemm.py) measures the same cases with torch (cuBLAS);
 * bench/make_results.py joins them into bench/results.json and
 * bench/RESULTS.md ("gemm bf16 4096x4096x4096 rr vs cublas", ...).
 *
 * usage: bench_gemm [--quick] [--only SUBSTRING]... [--budget S] [--no-flush-l2]
 *                   [--in-process] [--list]
 *   --quick        fewer warm-up and timed runs (same cases, so the same metrics)
 *   --only S       only the cases whose metric contains S (repeatable; e.g.
 *                  "bf16 4096x4096x4096", "f16", "bias_gelu", "grouped")
 *   --budget S     seconds for the whole run (default 240, --quick 150); cases
 *                  not started by then get a record with status "SKIPPED"
 *   --no-flush-l2  do not overwrite the L2 before each timed call (peers.py
 *                  has the same switch; make_results.py refuses a ratio whose
 *                  two sides differ in it)
 *   --in-process   run every case in this process (default: one child process
 *                  per case, so that a kernel fault, which kills its CUDA
 *                  context, costs only that case)
 *   --list         print the cases and exit
 * env:   BENCH_GEMM_SPLIT_K=N  run every case with split_k N (experiments:
 *                  1 whole tiles, -1 Stream-K; the metrics keep their names)
 *
 * Cases (metric "gemm DTYPE SHAPE VARIANT"; SHAPE is m x n x k; A, B, D in
 * DTYPE, f32 accumulation, alpha 1, no C, split_k 0 = automatic):
 *   bf16, f16  MxNxK rr   4096^3, 8192^3, 1024^3, 8192x8192x1024
 *   bf16       MxNxK rr   decode: 16x8192x8192, 1x8192x8192, 128x4096x4096
 *   bf16       4096^3 rc, cr, cc  (VARIANT = a_order b_order, r = row-major,
 *                                  c = column-major; ld = the contiguous extent)
 *   bf16       4096^3 bias_gelu   (rr; bias[n] per column, GELU_TANH epilogue)
 *   f32        2048^3 rr          (f32 SIMT: allow_tf32 = 0)
 *   tf32       4096^3 rr, rc, cr, cc  (f32 in and out, allow_tf32 = 1)
 *   tf32       64x4096x4096 rr    (m <= 64: mma.sync tf32)
 *   bf16       1024^3 batch16     (rr; strided batch of 16)
 *   bf16       grouped8 rr        (ckjit_gemm_grouped, the 8 problems of
 *                                  GROUPED below; one launch)
 *   bf16       rr streamk         the decode shapes and 1024^3 with split_k =
 *                                  CKJIT_GEMM_STREAM_K (Stream-K forced)
 * TFLOP/s = 2*m*n*k*batch (grouped: the sum over the problems) / median time;
 * the epilogue's work is not counted (the same on both sides).
 *
 * Timing: warm-up calls (10, --quick 3; the first compiles or loads the
 * kernel), then the result check, then 50 timed runs (--quick 20), each ONE
 * call between two events on the bench stream, synchronized after each run;
 * the value is the median, min_ms is kept; a series whose median is over
 * 1.25 x its min is measured once more and the one with the lower median
 * kept ("remeasured": true; peers.py does the same).  Unless --no-flush-l2, before each
 * timed run (outside its events) a buffer of max(2 x L2, 256 MiB) is
 * overwritten on the same stream, so every timed call starts with none of its
 * operands in L2 (as triton.testing.do_bench); peers.py does the same for
 * torch.  That memset also keeps the GPU busy while the call is queued, so
 * host launch time is not in the interval.
 *
 * Check: outputs are first filled with NaN bytes; after the warm-up, 256
 * sampled entries of D (corners, then random; grouped: 32 per problem,
 * batched: across the batch) are compared with a host f64 dot product of
 * the same (rounded) inputs, plus bias and gelu_tanh.  Tolerance: 1.25 x
 * (the output rounding, half an ulp of DTYPE, + 2^-16 x sum|a*b| for the f32
 * accumulation in any order, + for tf32 2^-9 x (|sum| + 6 sqrt(sum (a*b)^2))
 * for the input rounding); bias_gelu: two output roundings + 5e-4 |v| for a
 * fast tanh.  Against a host mock of ckjit_gemm (f32 fma in k order, RNE)
 * the worst sample of any case is 0.75 x tol, and a kernel that drops a
 * single k term fails every case.  A case that fails the check posts no
 * number (value null, status CHECK_FAILED) and is not timed.
 *
 * Records (kind "gemm", impl "ckjit", unit "TFLOP/s"): "metric", "value",
 * "op" ("gemm"), "api", "dtype", "ab_dtype", "out_dtype", "shape",
 * "variant", "m", "n", "k", "batch", "a_order", "b_order", "problems"
 * (grouped), "flops", "flops_formula", "median_ms", "min_ms", "warmup",
 * "runs", "l2_flush", "flush_bytes", "check", "check_samples",
 * "check_worst" (largest |error| / tolerance), "first_call_ms" (the first
 * call until the stream is synchronized: JIT compile included),
 * "first_call_compiles" and "first_call_compile_ms" (kernels it compiled and
 * the compiler's time: the cache is private, so each kernel is compiled by
 * the first case that needs it and loaded from disk by later ones).  A case
 * that could not be measured has "value": null, "status" (the ckjit status name,
 * CUDA_ERROR_..., CHECK_FAILED, CHILD_DIED, CHILD_TIMEOUT, NO_CUDA_DEVICE or
 * SKIPPED) and "error"; one record per case either way.
 *
 * Exit status: 0 when every case was measured or returned
 * CKJIT_ERROR_UNSUPPORTED (its record says so); 1 when a case failed in
 * another way; 2 when a result check failed.  The run uses a private
 * temporary CKJIT_CACHE_DIR (shared by its children), removed at the end.
 */
#define BENCH_NAME "bench_gemm"
#include "bench_cases.h"

#include "bench_gemm_cases.h"

#define UNSTEADY 1.25 /* median / min past which a series is measured again (peers.py: the same) */
#define CHECK_SAMPLES 256
#define PATTERN_LEN 1048573 /* a prime: see fill_inputs() */

/* ---- state, records ---------------------------------------------------------- */
static int g_quick = 0;
static int g_flush = 1;                 /* overwrite the L2 before each timed run */
static const gemm_case *g_case = NULL;  /* the case this process is measuring */

static const char *order_name(ckjit_order o) { return o == CKJIT_ROW_MAJOR ? "row" : "col"; }

/* The fields every record of a case has. */
static void j_case(jrec *r, const gemm_case *c, double value) {
  char metric[160], shape[64], variant[32];
  case_metric(c, metric, sizeof metric);
  case_shape(c, shape, sizeof shape);
  case_variant(c, variant, sizeof variant);
  const char *formula = "";
  double flops = case_flops(c, &formula);
  j_begin(r, metric, "TFLOP/s", value, "gemm");
  j_str(r, "impl", "ckjit");
  j_str(r, "op", "gemm");
  j_str(r, "api", case_api(c));
  j_str(r, "dtype", c->dname);
  j_str(r, "ab_dtype", ckjit_dtype_name(c->dtype));
  j_str(r, "out_dtype", ckjit_dtype_name(c->dtype));
  j_str(r, "shape", shape);
  j_str(r, "variant", variant);
  j_int(r, "m", c->m);
  j_int(r, "n", c->n);
  j_int(r, "k", c->k);
  j_int(r, "batch", c->batch);
  j_str(r, "a_order", order_name(c->ao));
  j_str(r, "b_order", order_name(c->bo));
  if (c->kind == GK_GROUPED) {
    char list[512] = "";
    for (int p = 0; p < GROUPED_COUNT; p++) {
      size_t len = strlen(list);
      snprintf(list + len, sizeof list - len, "%s%lldx%lldx%lld", p ? "," : "",
               (long long)GROUPED[p][0], (long long)GROUPED[p][1], (long long)GROUPED[p][2]);
    }
    j_str(r, "problems", list);
  }
  j_int(r, "flops", (long long)flops);
  j_str(r, "flops_formula", formula);
  j_bool(r, "l2_flush", g_flush);
}

/* The record of a case that could not be measured. */
static void emit_case_error(const gemm_case *c, const char *status, const char *error) {
  jrec r;
  char metric[160];
  case_metric(c, metric, sizeof metric);
  j_case(&r, c, NAN);
  j_str(&r, "status", status);
  j_str(&r, "error", error);
  j_end(&r);
  msg("%s: %s: %s", metric, status, error);
}

static void emit_note(const char *text) {
  j_note_record("gemm", text);
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
  snprintf(err, sizeof err, "bench_gemm.c:%d: %s: %s", line, what, text ? text : "?");
  if (g_case) emit_case_error(g_case, name ? name : "CUDA_ERROR", err);
  else msg("%s: %s", name ? name : "CUDA_ERROR", err);
  exit(1);
}

/* ---- host data --------------------------------------------------------------- */
static size_t dsize(ckjit_dtype t) { return t == CKJIT_F32 ? 4 : 2; }

static double load(ckjit_dtype t, const void *h, size_t i) {
  switch (t) {
  case CKJIT_BF16: return bf16_to_f32(((const uint16_t *)h)[i]);
  case CKJIT_F16: return f16_to_f32(((const uint16_t *)h)[i]);
  default: return ((const float *)h)[i];
  }
}

static void store(ckjit_dtype t, void *h, size_t i, float v) {
  switch (t) {
  case CKJIT_BF16: ((uint16_t *)h)[i] = f32_to_bf16(v); break;
  case CKJIT_F16: ((uint16_t *)h)[i] = f32_to_f16(v); break;
  default: ((float *)h)[i] = v; break;
  }
}

/* n values in [-4, 4) (rng_value(), as peers.py's rand_tensor), rounded to
 * t: a random block of a prime length repeated (2^26 values one by one would
 * cost seconds; the prime period keeps rows and columns different). */
static void fill_inputs(ckjit_dtype t, void *dst, size_t n, uint64_t seed) {
  g_rng = 0x9E3779B97F4A7C15ull ^ (seed * 0xD1B54A32D192ED03ull);
  size_t p = n < PATTERN_LEN ? n : PATTERN_LEN, es = dsize(t);
  for (size_t i = 0; i < p; i++) store(t, dst, i, rng_value());
  for (size_t i = p; i < n; i += p)
    memcpy((char *)dst + i * es, dst, (n - i < p ? n - i : p) * es);
}

/* ---- one case ---------------------------------------------------------------- */
typedef struct prob {
  int64_t m, n, k, lda, ldb, ldd;
  size_t a_elems, b_elems, d_elems; /* one batch entry */
  void *a, *b, *d;                  /* device */
  void *ha, *hb;                    /* host copies of the inputs */
} prob;

typedef struct bufs {
  CUstream stream;
  int np;
  prob p[GROUPED_COUNT];
  void *bias, *hbias;
  ckjit_gemm_desc desc[GROUPED_COUNT];
  void *flush;
  size_t flush_bytes;
} bufs;

static ckjit_status case_launch(const gemm_case *c, const bufs *B) {
  if (c->kind == GK_GROUPED) return ckjit_gemm_grouped(B->desc, B->np, (void *)B->stream);
  return ckjit_gemm(&B->desc[0], (void *)B->stream);
}

typedef struct case_ctx {
  const gemm_case *c;
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

static double gelu_tanh_ref(double v) {
  return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}

/* Compares sampled entries of every problem's D with a host f64 dot product.
 * 1: ok, 0: mismatch, -1: could not read D back. */
static int case_check(const gemm_case *c, const bufs *B, int *samples, double *worst) {
  const ckjit_dtype t = c->dtype;
  const size_t es = dsize(t);
  /* Half an ulp of the output, relative (RNE); f32: a little more. */
  const double out_eps = t == CKJIT_BF16 ? 1.0 / 256 : t == CKJIT_F16 ? 1.0 / 2048 : 1.0 / 8388608;
  const double in_eps = c->tf32 ? 1.0 / 512 : 0.0; /* tf32: 10-bit mantissas, maybe truncated */
  const double acc_eps = 1.0 / 65536;              /* f32 accumulation, any order */
  const int per = CHECK_SAMPLES / B->np;
  long bad = 0;
  *samples = 0;
  *worst = 0;
  g_rng = 0x5DEECE66Dull;
  for (int q = 0; q < B->np; q++) {
    const prob *P = &B->p[q];
    if (P->m == 0 || P->n == 0) continue;
    for (int s = 0; s < per; s++) {
      int64_t bi, i, j;
      switch (s) { /* corners first */
      case 0: bi = 0; i = 0; j = 0; break;
      case 1: bi = c->batch - 1; i = P->m - 1; j = P->n - 1; break;
      case 2: bi = c->batch / 2; i = 0; j = P->n - 1; break;
      case 3: bi = c->batch - 1; i = P->m - 1; j = 0; break;
      default:
        bi = (int64_t)(rng_next() % (uint64_t)c->batch);
        i = (int64_t)(rng_next() % (uint64_t)P->m);
        j = (int64_t)(rng_next() % (uint64_t)P->n);
      }
      const size_t ao = (size_t)bi * P->a_elems, bo = (size_t)bi * P->b_elems;
      double acc = 0, sumabs = 0, sumsq = 0;
      for (int64_t kk = 0; kk < P->k; kk++) {
        size_t ia = c->ao == CKJIT_ROW_MAJOR ? (size_t)(i * P->lda + kk) : (size_t)(kk * P->lda + i);
        size_t ib = c->bo == CKJIT_ROW_MAJOR ? (size_t)(kk * P->ldb + j) : (size_t)(j * P->ldb + kk);
        double prod = load(t, P->ha, ao + ia) * load(t, P->hb, bo + ib);
        acc += prod;
        sumabs += fabs(prod);
        sumsq += prod * prod;
      }
      double acc_tol = acc_eps * sumabs + in_eps * (fabs(acc) + 6 * sqrt(sumsq));
      double want = acc, tol;
      if (c->kind == GK_BIAS_GELU) {
        double v = acc + load(t, B->hbias, (size_t)j);
        want = gelu_tanh_ref(v);
        /* 2 x out_eps: v may be rounded once more before the activation */
        tol = 2 * out_eps * fabs(want) + 1.2 * acc_tol + 5e-4 * fabs(v) + 1e-3;
      } else {
        tol = 1.25 * (out_eps * fabs(want) + acc_tol) + 1e-6;
      }
      unsigned char raw[4] = {0};
      size_t off = (size_t)bi * P->d_elems + (size_t)(i * P->ldd + j);
      ckjit_status st = ckjit_memcpy(raw, (const char *)P->d + off * es, es, CKJIT_DEVICE_TO_HOST);
      if (st != CKJIT_SUCCESS) {
        msg("check: ckjit_memcpy(D2H): %s: %s", ckjit_status_string(st), ckjit_last_error());
        return -1;
      }
      double got = load(t, raw, 0), err = fabs(got - want);
      (*samples)++;
      double ratio = isnan(err) ? INFINITY : err / tol;
      if (ratio > *worst) *worst = ratio;
      if (!(err <= tol) && bad++ < 3) /* NaN fails */
        msg("check: problem %d batch %lld D[%lld][%lld] = %.7g, want %.7g (tol %.3g)", q,
            (long long)bi, (long long)i, (long long)j, got, want, tol);
    }
  }
  if (bad) msg("check: %ld of %d sampled values out of tolerance (worst %.3g x tol)", bad,
               *samples, *worst);
  return bad == 0;
}


/* Bytes of the L2 flush buffer: max(2 x L2, 256 MiB). */
static size_t flush_size(void) {
  CUdevice dev;
  int l2 = 0;
  CU(cuCtxGetDevice(&dev));
  CU(cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev));
  size_t b = 2 * (size_t)(l2 > 0 ? l2 : 0), floor_b = (size_t)256 << 20;
  return b > floor_b ? b : floor_b;
}

/* Measures one case on `stream`.  Emits exactly one record (a result or an
 * error).  Returns 0 (measured), 1 (failed), 2 (the check failed: no number)
 * or RC_UNSUPPORTED.  CUDA errors exit(1) through CU(). */
static int run_case(const gemm_case *c, CUstream stream) {
  const int warmup = g_quick ? 3 : 10, runs = g_quick ? 20 : 50;
  const ckjit_dtype t = c->dtype;
  const size_t es = dsize(t);
  char metric[160];
  case_metric(c, metric, sizeof metric);
  msg("%s ...", metric);
  g_case = c;

  bufs B;
  memset(&B, 0, sizeof B);
  B.stream = stream;
  int rc = 1;
  double *ms = NULL;
  int64_t mnk[GROUPED_COUNT][3];
  B.np = case_problems(c, mnk);

  /* Inputs (host and device), outputs filled with 0xff bytes (NaN in every
   * dtype) so that a call that writes nothing cannot pass the check. */
  for (int q = 0; q < B.np; q++) {
    prob *P = &B.p[q];
    P->m = mnk[q][0];
    P->n = mnk[q][1];
    P->k = mnk[q][2];
    P->lda = c->ao == CKJIT_ROW_MAJOR ? P->k : P->m;
    P->ldb = c->bo == CKJIT_ROW_MAJOR ? P->n : P->k;
    P->ldd = P->n;
    P->a_elems = (size_t)(P->m * P->k);
    P->b_elems = (size_t)(P->k * P->n);
    P->d_elems = (size_t)(P->m * P->n);
    const size_t na = P->a_elems * (size_t)c->batch, nb = P->b_elems * (size_t)c->batch,
                 nd = P->d_elems * (size_t)c->batch;
    P->ha = xmalloc(na * es);
    P->hb = xmalloc(nb * es);
    fill_inputs(t, P->ha, na, 1 + 2 * (uint64_t)q);
    fill_inputs(t, P->hb, nb, 2 + 2 * (uint64_t)q);
    if (bench_dev_alloc(&P->a, na * es, fail_case) ||
        bench_upload(P->a, P->ha, na * es, fail_case))
      goto done;
    if (bench_dev_alloc(&P->b, nb * es, fail_case) ||
        bench_upload(P->b, P->hb, nb * es, fail_case))
      goto done;
    if (bench_dev_alloc(&P->d, nd * es, fail_case)) goto done;
    CU(cuMemsetD8Async((CUdeviceptr)(uintptr_t)P->d, 0xff, nd * es, stream));
  }
  if (c->kind == GK_BIAS_GELU) {
    const size_t n = (size_t)c->n;
    B.hbias = xmalloc(n * es);
    g_rng = 77;
    for (size_t j = 0; j < n; j++) store(t, B.hbias, j, rng_value());
    if (bench_dev_alloc(&B.bias, n * es, fail_case) ||
        bench_upload(B.bias, B.hbias, n * es, fail_case))
      goto done;
  }
  for (int q = 0; q < B.np; q++) {
    const prob *P = &B.p[q];
    ckjit_gemm_desc *d = &B.desc[q];
    ckjit_gemm_desc_init(d);
    d->m = P->m;
    d->n = P->n;
    d->k = P->k;
    d->ab_dtype = t;
    d->out_dtype = t;
    d->a = P->a;
    d->lda = P->lda;
    d->a_order = c->ao;
    d->b = P->b;
    d->ldb = P->ldb;
    d->b_order = c->bo;
    d->d = P->d;
    d->ldd = P->ldd;
    d->alpha = 1.0f;
    d->beta = 0.0f;
    d->batch = c->batch;
    if (c->batch > 1) {
      d->stride_a = (int64_t)P->a_elems;
      d->stride_b = (int64_t)P->b_elems;
      d->stride_d = (int64_t)P->d_elems;
    }
    d->allow_tf32 = c->tf32;
    d->split_k = c->split_k;
    const char *force = getenv("BENCH_GEMM_SPLIT_K"); /* experiments: one split_k for every case */
    if (force && *force) d->split_k = atoi(force);
    if (c->kind == GK_BIAS_GELU) {
      d->bias = B.bias;
      d->bias_mode = CKJIT_BIAS_PER_COL;
      d->activation = CKJIT_UNARY_GELU_TANH;
    }
  }
  if (g_flush) {
    B.flush_bytes = flush_size();
    if (bench_dev_alloc(&B.flush, B.flush_bytes, fail_case)) goto done;
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
  ckjit_stats st0, st1;
  ckjit_get_stats(&st0);
  st1 = st0;
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
      ckjit_get_stats(&st1);
    }
  }
  CU(cuStreamSynchronize(stream));
  int samples = 0;
  double worst = 0;
  int check = case_check(c, &B, &samples, &worst);
  if (check <= 0) {
    char e[200];
    if (check < 0) snprintf(e, sizeof e, "could not read the results back for the check");
    else snprintf(e, sizeof e, "sampled entries of D differ from the host f64 reference "
                               "(worst %.3g x tolerance, %d samples): not timed", worst, samples);
    emit_case_error(c, "CHECK_FAILED", e);
    rc = check < 0 ? 1 : 2;
    goto done;
  }

  ms = xmalloc((size_t)runs * sizeof *ms);
  const case_ctx cx = {c, &B};
  ckjit_status st = bench_time_runs(stream, runs, case_launch_cb, &cx, B.flush, B.flush_bytes, ms);
  if (st != CKJIT_SUCCESS) {
    emit_case_error(c, ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  double med = median(ms, runs), mn = ms[0]; /* sorted by median() */
  /* A series whose median is 25% over its minimum was disturbed (clocks,
   * another process): measure once more and keep the steadier one (peers.py
   * does the same for torch). */
  int remeasured = 0;
  if (med > UNSTEADY * mn) {
    double *again = xmalloc((size_t)runs * sizeof *again);
    st = bench_time_runs(stream, runs, case_launch_cb, &cx, B.flush, B.flush_bytes, again);
    if (st == CKJIT_SUCCESS && median(again, runs) < med) {
      med = median(again, runs), mn = again[0];
      memcpy(ms, again, (size_t)runs * sizeof *ms);
    }
    free(again);
    remeasured = 1;
    if (st != CKJIT_SUCCESS) {
      emit_case_error(c, ckjit_status_string(st), ckjit_last_error());
      goto done;
    }
  }
  double tflops = case_flops(c, NULL) / (med * 1e-3) / 1e12;
  jrec r;
  j_case(&r, c, tflops);
  j_num(&r, "median_ms", med);
  j_num(&r, "min_ms", mn);
  j_int(&r, "warmup", warmup);
  j_int(&r, "runs", runs);
  j_int(&r, "flush_bytes", (long long)B.flush_bytes);
  j_bool(&r, "remeasured", remeasured);
  j_str(&r, "check", "ok");
  j_int(&r, "check_samples", samples);
  j_num(&r, "check_worst", worst);
  j_num(&r, "first_call_ms", first_ms);
  j_int(&r, "first_call_compiles", (long long)(st1.compiles - st0.compiles));
  j_num(&r, "first_call_compile_ms", st1.compile_ms - st0.compile_ms);
  j_end(&r);
  msg("%s: %.4g TFLOP/s (median %.4f ms, min %.4f ms; check ok, worst %.2g x tol)", metric,
      tflops, med, mn, worst);
  rc = 0;

done:
  free(ms);
  cuStreamSynchronize(stream);
  for (int q = 0; q < B.np; q++) {
    ckjit_free(B.p[q].a);
    ckjit_free(B.p[q].b);
    ckjit_free(B.p[q].d);
    free(B.p[q].ha);
    free(B.p[q].hb);
  }
  ckjit_free(B.bias);
  ckjit_free(B.flush);
  free(B.hbias);
  g_case = NULL;
  return rc;
}

/* Case k of main's all[], for bench_run_cases and bench_child_case. */
static const gemm_case *g_all;
static int run_index(int k, CUstream stream) { return run_case(&g_all[k], stream); }
static void emit_index_error(int k, const char *status, const char *error) {
  emit_case_error(&g_all[k], status, error);
}
static void index_label(int k, char *buf, size_t len) {
  char metric[160];
  case_metric(&g_all[k], metric, sizeof metric);
  snprintf(buf, len, "%s", metric + 5 /* without "gemm " */);
}

/* ---- main ------------------------------------------------------------------------ */
static void usage(void) {
  fprintf(stderr,
          "usage: bench_gemm [--quick] [--only SUBSTRING]... [--budget S] [--no-flush-l2] "
          "[--in-process] [--list]\n"
          "  SUBSTRING selects the cases whose metric contains it (see --list)\n");
}

int main(int argc, char **argv) {
  gemm_case all[MAX_CASES];
  int n_all = build_cases(all);
  const char *only[32];
  int n_only = 0, in_process = 0, list = 0, child = -1;
  double budget = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--quick") == 0) {
      g_quick = 1;
    } else if (strcmp(a, "--no-flush-l2") == 0) {
      g_flush = 0;
    } else if (strcmp(a, "--in-process") == 0) {
      in_process = 1;
    } else if (strcmp(a, "--list") == 0) {
      list = 1;
    } else if (strcmp(a, "--child-case") == 0 && i + 1 < argc) {
      child = atoi(argv[++i]);
    } else if (strcmp(a, "--only") == 0 && i + 1 < argc && n_only < 32) {
      only[n_only++] = argv[++i];
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
  if (budget < 0) budget = g_quick ? 150 : 240;

  /* The selected cases (indices into all[], which children use). */
  int sel[MAX_CASES], n_sel = 0;
  for (int i = 0; i < n_all; i++) {
    if (n_only) {
      char metric[160];
      case_metric(&all[i], metric, sizeof metric);
      int hit = 0;
      for (int s = 0; s < n_only; s++) hit |= strstr(metric, only[s]) != NULL;
      if (!hit) continue;
    }
    sel[n_sel++] = i;
  }
  if (list) {
    for (int i = 0; i < n_sel; i++) {
      char metric[160];
      const char *f;
      case_metric(&all[sel[i]], metric, sizeof metric);
      double flops = case_flops(&all[sel[i]], &f);
      printf("%s  (%s, %.4g GFLOP = %s)\n", metric, case_api(&all[sel[i]]), flops * 1e-9, f);
    }
    return 0;
  }
  if (n_sel == 0) {
    msg("no case matches --only");
    return 1;
  }

  char cache_dir[64];
  if (bench_private_cache_dir(cache_dir, sizeof cache_dir, "bench-gemm") != 0) return 1;

  /* The device record; then the parent lets go of the GPU (children make
   * their own contexts). */
  ckjit_device_info info;
  if (bench_cuda_device(&info, cache_dir) != 0) return 1;
  int driver = 0, l2 = 0;
  CUdevice dev;
  cuDriverGetVersion(&driver);
  if (cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&dev, info.device) == CUDA_SUCCESS)
    cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev);
  jrec r;
  j_begin(&r, "device", NULL, NAN, "info");
  j_str(&r, "impl", "ckjit");
  j_str(&r, "bench", "bench_gemm");
  j_str(&r, "name", info.name);
  j_str(&r, "arch", info.arch);
  j_str(&r, "device_arch", info.device_arch);
  j_int(&r, "multiprocessors", info.multiprocessors);
  j_int(&r, "l2_bytes", l2);
  j_str(&r, "compiler", info.compiler);
  j_str(&r, "ckjit_version", ckjit_version_string());
  j_int(&r, "cuda_driver_version", driver);
  j_bool(&r, "quick", g_quick);
  j_bool(&r, "l2_flush", g_flush);
  j_bool(&r, "in_process", in_process);
  j_end(&r);
  msg("device %s (%s, L2 %d MiB), %d cases, budget %.0f s, L2 flush %s, cache %s", info.name,
      info.arch, l2 >> 20, n_sel, budget, g_flush ? "on" : "off", cache_dir);

  g_all = all;
  bench_cases cases = {
      .n = n_sel,
      .sel = sel,
      .budget = budget,
      .child_timeout = g_quick ? 60 : 90, /* a first call compiles a GEMM kernel */
      .run = run_index,
      .emit_error = emit_index_error,
      .label = index_label,
      .note = emit_note,
      .name = "bench_gemm",
      .kind = "gemm",
      .child_args = {g_quick ? "--quick" : NULL, g_flush ? NULL : "--no-flush-l2"},
  };
  return bench_run_all(&cases, in_process, cache_dir);
}
