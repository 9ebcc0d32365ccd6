/* bench_ckjit's launch section: host time per ckjit_copy2d call on a loaded
 * kernel (f32 1x1024) against a raw cuLaunchKernel of the same CUfunction,
 * and per ckjit_gemm call on two small shapes (kinds "launch" with impl
 * "ckjit" / "raw", and "launch_gemm"). */
#include "bench_ckjit.h"

/* ------------------------------------------------------------------------ */
/* TODO(lead): keep COPY_SPEC and raw_args_for_copy() in sync with the library.
 * Both were derived from runtime/ops/elementwise/elementwise.c (plan) and
 * kernel_src/abi/elementwise_args.h (CKJIT_ELEMENTWISE_ARGS, the parameter
 * list, whose offsets give ckjit's own kernelParams); the launch section checks
 * them at run time:
 *   - COPY_SPEC: when ckjit_get_function(COPY_SPEC) fails or had to load or
 *     compile anything (ckjit_get_stats), it is NOT the kernel the op
 *     launched; the bench then tries the default spec with dtype=f32 and
 *     op=identity, and failing that the record says "same_kernel_as_op":
 *     false and a note is printed;
 *   - raw_args_for_copy(): one raw launch is checked to copy correctly before
 *     it is timed; a wrong layout gives a note and exit status 2. */

/* The canonical spec of the kernel that
 *   ckjit_copy2d(CKJIT_F32, 1, 1024, src, 1024, dst, 1024, stream)
 * launches with 16-byte aligned pointers (ckjit_malloc): the identity op of
 * the elementwise family, vec = 16 bytes / 4, threads 256, unroll 4. */
#define COPY_SPEC "elementwise:dtype=f32,op=identity,epilogue=none,vec=4,threads=256,unroll=1"
#define COPY_THREADS 256 /* must match COPY_SPEC */
#define COPY_VEC 4
#define COPY_UNROLL 1

/* A raw launch: grid, block, dynamic shared memory and the kernel parameter
 * array for cuLaunchKernel.  params[i] points at slot[i]. */
#define RAW_MAX_PARAMS 16
typedef struct raw_launch {
  unsigned grid[3], block[3], shared_bytes;
  int n_params;
  void *params[RAW_MAX_PARAMS];
  union {
    CUdeviceptr ptr;
    long long ll;
    int32_t i32;
    float f32;
    unsigned char bytes[64]; /* room for a by-value struct parameter */
  } slot[RAW_MAX_PARAMS];
} raw_launch;

/* The launch ckjit_copy2d(CKJIT_F32, rows, cols, src, ld_src, dst, ld_dst, s)
 * makes with the COPY_SPEC kernel, which is
 *   ckjit_elementwise(const T *a, long long lda, const T *b, long long ldb,
 *                     T *y, long long ldy, long long rows, long long cols,
 *                     float scale, float bias)
 * with b = a for unary ops, scale 1 and bias 0 without an epilogue; a
 * contiguous tensor is launched as one long row; grid = (ceil(cols / (threads
 * * vec * unroll)), min(rows, 65535)), block = threads.  Returns 0 when the
 * parameters are filled in, -1 when this bench cannot mirror the launch
 * (then the raw comparison is skipped with a note). */
static int raw_args_for_copy(raw_launch *L, CUdeviceptr src, int64_t ld_src, CUdeviceptr dst,
                             int64_t ld_dst, int64_t rows, int64_t cols) {
  memset(L, 0, sizeof *L);
  if (rows > 1 && ld_src == cols && ld_dst == cols) {
    cols *= rows;
    rows = 1;
    ld_src = ld_dst = cols;
  }
  L->slot[0].ptr = src;                  /* a */
  L->slot[1].ll = (long long)ld_src;     /* lda */
  L->slot[2].ptr = src;                  /* b = a (unary) */
  L->slot[3].ll = (long long)ld_src;     /* ldb */
  L->slot[4].ptr = dst;                  /* y */
  L->slot[5].ll = (long long)ld_dst;     /* ldy */
  L->slot[6].ll = (long long)rows;       /* rows */
  L->slot[7].ll = (long long)cols;       /* cols */
  L->slot[8].f32 = 1.0f;                 /* scale */
  L->slot[9].f32 = 0.0f;                 /* bias */
  L->n_params = 10;
  for (int i = 0; i < L->n_params; i++) L->params[i] = &L->slot[i];
  const int64_t chunk = (int64_t)COPY_THREADS * COPY_VEC * COPY_UNROLL;
  int64_t gx = (cols + chunk - 1) / chunk;
  L->grid[0] = (unsigned)(gx < 0x7fffffff ? gx : 0x7fffffff);
  L->grid[1] = (unsigned)(rows < 65535 ? rows : 65535);
  L->grid[2] = 1;
  L->block[0] = COPY_THREADS;
  L->block[1] = 1;
  L->block[2] = 1;
  L->shared_bytes = 0;
  return 0;
}

typedef struct launch_case {
  int raw;
  raw_launch L;
  CUfunction fn;
  void *src, *dst;
  const ckjit_gemm_desc *gemm; /* set: time ckjit_gemm(gemm) instead */
} launch_case;

/* Host seconds per call: `calls` calls in chunks of `chunk`, the stream
 * synchronized between chunks (outside the timed loops) so the launch queue
 * never fills and the GPU never throttles the host.  <0 on a failure. */
static double launch_loop(bench *bn, launch_case *lc, int calls, int chunk) {
  double total = 0.0;
  for (int done = 0; done < calls; done += chunk) {
    int m = calls - done < chunk ? calls - done : chunk;
    double t0 = now_s();
    if (lc->raw) {
      for (int i = 0; i < m; i++) {
        CUresult r = cuLaunchKernel(lc->fn, lc->L.grid[0], lc->L.grid[1], lc->L.grid[2],
                                    lc->L.block[0], lc->L.block[1], lc->L.block[2],
                                    lc->L.shared_bytes, bn->stream, lc->L.params, NULL);
        if (r != CUDA_SUCCESS) {
          report_cuda(r, "cuLaunchKernel", __FILE__, __LINE__);
          exit(1);
        }
      }
    } else if (lc->gemm) {
      for (int i = 0; i < m; i++) {
        ckjit_status st = ckjit_gemm(lc->gemm, (void *)bn->stream);
        if (st != CKJIT_SUCCESS) {
          report_ckjit(st, "ckjit_gemm", __FILE__, __LINE__);
          g_status = 1;
          return -1.0;
        }
      }
    } else {
      for (int i = 0; i < m; i++) {
        ckjit_status st = ckjit_copy2d(CKJIT_F32, 1, 1024, lc->src, 1024, lc->dst, 1024,
                                       (void *)bn->stream);
        if (st != CKJIT_SUCCESS) {
          report_ckjit(st, "ckjit_copy2d", __FILE__, __LINE__);
          g_status = 1;
          return -1.0;
        }
      }
    }
    total += now_s() - t0;
    CU(cuStreamSynchronize(bn->stream));
  }
  return total / calls;
}

static void emit_launch(const char *impl, const char *api, double *per_call_us, int repeats,
                        int calls, int chunk, const char *extra_key, int extra_val,
                        const char *spec) {
  char metric[128];
  snprintf(metric, sizeof metric, "launch host time copy2d f32 1x1024 (%s)", impl);
  double mn = min_of(per_call_us, repeats);
  double med = median(per_call_us, repeats);
  jrec r;
  j_begin(&r, metric, "us", med, "launch");
  j_str(&r, "impl", impl);
  j_str(&r, "api", api);
  j_str(&r, "op", "copy2d");
  j_str(&r, "dtype", "f32");
  j_str(&r, "shape", "1x1024");
  j_num(&r, "min_us", mn);
  j_int(&r, "calls", calls);
  j_int(&r, "chunk", chunk);
  j_int(&r, "repeats", repeats);
  if (extra_key) j_bool(&r, extra_key, extra_val);
  if (spec) j_str(&r, "spec", spec);
  j_end(&r);
}

static int check_copy_result(void *dst, const float *want) {
  float got[1024];
  CK(ckjit_memcpy(got, dst, sizeof got, CKJIT_DEVICE_TO_HOST));
  return memcmp(got, want, sizeof got) == 0;
}

/* Host time of one ckjit_gemm call (planning, tensor maps, kernel lookup,
 * launch) on shapes small enough that the GPU keeps up with the host:
 * m = 128 takes the wgmma pipeline through TMA on a 9.0 device, m = 16
 * mma.sync; split_k 1 so that each call is one launch.  A and B are all
 * ones, so every entry of D must be exactly k. */
static int gemm_launch_case(bench *bn, int64_t m, int64_t n, int64_t k, const char *path) {
  const int calls = g_quick ? 2000 : 20000, chunk = 1000, repeats = g_quick ? 5 : 10;
  const size_t na = (size_t)(m * k), nb = (size_t)(k * n), nd = (size_t)(m * n);
  uint16_t *h = malloc(sizeof(uint16_t) * (na > nb ? (na > nd ? na : nd) : (nb > nd ? nb : nd)));
  void *a = NULL, *b = NULL, *d = NULL;
  if (!h) return -1;
  for (size_t i = 0; i < na || i < nb; i++) h[i] = 0x3f80; /* bf16 1.0 */
  CK(ckjit_malloc(&a, na * 2));
  CK(ckjit_malloc(&b, nb * 2));
  CK(ckjit_malloc(&d, nd * 2));
  CK(ckjit_memcpy(a, h, na * 2, CKJIT_HOST_TO_DEVICE));
  CK(ckjit_memcpy(b, h, nb * 2, CKJIT_HOST_TO_DEVICE));
  CU(cuMemsetD8Async((CUdeviceptr)(uintptr_t)d, 0xff, nd * 2, bn->stream));
  ckjit_gemm_desc g;
  ckjit_gemm_desc_init(&g);
  g.m = m, g.n = n, g.k = k, g.ab_dtype = g.out_dtype = CKJIT_BF16;
  g.a = a, g.lda = k, g.a_order = CKJIT_ROW_MAJOR;
  g.b = b, g.ldb = n, g.b_order = CKJIT_ROW_MAJOR;
  g.d = d, g.ldd = n, g.split_k = 1;
  launch_case lc;
  memset(&lc, 0, sizeof lc);
  lc.gemm = &g;
  int rc = 0;
  if (launch_loop(bn, &lc, chunk, chunk) < 0) rc = -1; /* warm-up: compiles or loads */
  CK(ckjit_memcpy(h, d, nd * 2, CKJIT_DEVICE_TO_HOST));
  uint16_t want = 0;
  { float f = (float)k; uint32_t u; memcpy(&u, &f, 4); want = (uint16_t)(u >> 16); }
  for (size_t i = 0; rc == 0 && i < nd; i++)
    if (h[i] != want) {
      msg("check: ckjit_gemm bf16 %lldx%lldx%lld of ones: D[%zu] = 0x%04x, want 0x%04x",
          (long long)m, (long long)n, (long long)k, i, h[i], want);
      g_status = 2;
      rc = -1;
    }
  double per_call[32];
  for (int i = 0; rc == 0 && i < repeats; i++) {
    double s = launch_loop(bn, &lc, calls, chunk);
    if (s < 0) rc = -1;
    per_call[i] = s * 1e6;
  }
  if (rc == 0) {
    char metric[128], shape[64];
    snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
    snprintf(metric, sizeof metric, "launch host time gemm bf16 %s (ckjit)", shape);
    jrec r;
    j_begin(&r, metric, "us", median(per_call, repeats), "launch_gemm");
    j_str(&r, "impl", "ckjit");
    j_str(&r, "api", "ckjit_gemm (split_k 1)");
    j_str(&r, "op", "gemm");
    j_str(&r, "dtype", "bf16");
    j_str(&r, "shape", shape);
    j_str(&r, "pipeline", path);
    j_num(&r, "min_us", min_of(per_call, repeats));
    j_int(&r, "calls", calls);
    j_int(&r, "chunk", chunk);
    j_int(&r, "repeats", repeats);
    j_end(&r);
  }
  CK(ckjit_free(a));
  CK(ckjit_free(b));
  CK(ckjit_free(d));
  free(h);
  return rc;
}

int section_launch(bench *bn) {
  const int calls = g_quick ? 2000 : 20000, chunk = 1000, repeats = g_quick ? 5 : 10;
  launch_case lc;
  memset(&lc, 0, sizeof lc);
  float h[1024];
  for (int i = 0; i < 1024; i++) h[i] = rng_value();
  CK(ckjit_malloc(&lc.src, sizeof h));
  CK(ckjit_malloc(&lc.dst, sizeof h));
  CK(ckjit_memcpy(lc.src, h, sizeof h, CKJIT_HOST_TO_DEVICE));
  CK(ckjit_synchronize(NULL));

  /* ckjit: warm up (loads the kernel), check, then time. */
  double per_call[32];
  CK_SOFT(ckjit_copy2d(CKJIT_F32, 1, 1024, lc.src, 1024, lc.dst, 1024, (void *)bn->stream));
  CU(cuStreamSynchronize(bn->stream));
  if (!check_copy_result(lc.dst, h)) {
    msg("check: ckjit_copy2d f32 1x1024 copied wrong data");
    g_status = 2;
  }
  if (launch_loop(bn, &lc, chunk, chunk) < 0) return -1; /* warm-up */
  for (int i = 0; i < repeats; i++) {
    double s = launch_loop(bn, &lc, calls, chunk);
    if (s < 0) return -1;
    per_call[i] = s * 1e6;
  }
  emit_launch("ckjit", "ckjit_copy2d", per_call, repeats, calls, chunk, NULL, 0, NULL);

  /* Raw driver launch of the same CUfunction: COPY_SPEC, else the default
   * spec of the f32 identity op. */
  char fallback[512] = "";
  size_t n_default = ckjit_default_spec_count();
  for (size_t i = 0; i < n_default; i++) {
    char spec[512];
    if (ckjit_default_spec(i, spec, sizeof spec) == CKJIT_SUCCESS &&
        strstr(spec, "dtype=f32") && strstr(spec, "op=identity,")) {
      snprintf(fallback, sizeof fallback, "%s", spec);
      break;
    }
  }
  const char *candidates[2] = {COPY_SPEC, fallback};
  const char *used = NULL;
  void *fn = NULL;
  int same_kernel = 0;
  char errors[1024] = "";
  for (int c = 0; c < 2 && !same_kernel; c++) {
    if (!candidates[c][0] || (c == 1 && strcmp(candidates[1], COPY_SPEC) == 0)) continue;
    ckjit_stats before, after;
    ckjit_get_stats(&before);
    void *f = NULL;
    ckjit_status st = ckjit_get_function(candidates[c], &f);
    ckjit_get_stats(&after);
    if (st != CKJIT_SUCCESS) {
      size_t len = strlen(errors);
      snprintf(errors + len, sizeof errors - len, "%sckjit_get_function(\"%s\"): %s: %s",
               len ? "; " : "", candidates[c], ckjit_status_string(st), ckjit_last_error());
      continue;
    }
    int same = after.compiles == before.compiles && after.loads == before.loads &&
               after.disk_hits == before.disk_hits && after.disk_misses == before.disk_misses;
    if (!used || same) {
      used = candidates[c];
      fn = f;
      same_kernel = same;
    }
  }
  if (!used) {
    emit_note("launch", errors);
    g_status = 1;
    return -1;
  }
  if (errors[0]) msg("%s", errors);
  if (!same_kernel)
    emit_note("launch", "neither COPY_SPEC nor the default f32 identity spec is the kernel "
                        "ckjit_copy2d(F32, 1, 1024) uses: ckjit_get_function had to load or "
                        "compile it (fix COPY_SPEC in bench/bench_ckjit_launch.c)");
  else if (used != candidates[0])
    emit_note("launch", "COPY_SPEC in bench/bench_ckjit_launch.c is stale; used the default spec "
                        "instead (update COPY_SPEC)");
  msg("raw launch uses spec %s", used);
  lc.fn = (CUfunction)fn;
  if (raw_args_for_copy(&lc.L, (CUdeviceptr)(uintptr_t)lc.src, 1024,
                        (CUdeviceptr)(uintptr_t)lc.dst, 1024, 1, 1024) != 0) {
    emit_note("launch", "raw_args_for_copy() cannot mirror this launch: "
                        "no raw driver comparison");
    return 0;
  }
  lc.raw = 1;
  CU(cuMemsetD8Async((CUdeviceptr)(uintptr_t)lc.dst, 0, sizeof h, bn->stream));
  CU(cuLaunchKernel(lc.fn, lc.L.grid[0], lc.L.grid[1], lc.L.grid[2], lc.L.block[0],
                    lc.L.block[1], lc.L.block[2], lc.L.shared_bytes, bn->stream, lc.L.params,
                    NULL));
  CU(cuStreamSynchronize(bn->stream));
  if (!check_copy_result(lc.dst, h)) {
    emit_note("launch", "the raw launch from raw_args_for_copy() copied wrong data: "
                        "its argument layout or grid is wrong; not timed");
    g_status = 2;
    return -1;
  }
  if (launch_loop(bn, &lc, chunk, chunk) < 0) return -1; /* warm-up */
  for (int i = 0; i < repeats; i++) per_call[i] = launch_loop(bn, &lc, calls, chunk) * 1e6;
  emit_launch("raw", "cuLaunchKernel", per_call, repeats, calls, chunk, "same_kernel_as_op",
              same_kernel, used);
  CK(ckjit_free(lc.src));
  CK(ckjit_free(lc.dst));
  int rc = gemm_launch_case(bn, 128, 128, 128, "wgmma, TMA (9.0 devices)");
  if (gemm_launch_case(bn, 16, 128, 128, "mma.sync")) rc = -1;
  return rc;
}
