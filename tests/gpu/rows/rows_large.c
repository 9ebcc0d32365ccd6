/* Row-ops GPU test, tensors past 2^31 elements (skipped with
 * CKJIT_TEST_SKIP_LARGE=1, or with the reason when the device or the host
 * lacks the memory): reduce_rows sum and argmax, softmax and rmsnorm on
 * one bf16 input, checked with the references of rows_reduce.c,
 * rows_softmax.c and rows_norm.c. */
#include <pthread.h>
#include <stdarg.h>

#include "rows_gpu.h"

/* ---- the > 2^31-element cases ---------------------------------------------------- */

/* Cheap deterministic finite bf16: |v| in [2^-8, 2), any mantissa, random sign. */
static uint16_t big_bf16(size_t i) {
  uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull;
  z ^= z >> 29;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 32;
  uint16_t sign = (uint16_t)((z & 1) << 15);
  uint16_t ex = (uint16_t)(119 + (z >> 1) % 9);
  uint16_t man = (uint16_t)((z >> 8) & 0x7F);
  return (uint16_t)(sign | ex << 7 | man);
}

typedef struct fill_job {
  uint16_t *h;
  size_t lo, hi, n; /* [lo, hi) of a buffer whose first n elements are data, the rest NaN */
} fill_job;

static void *fill_thread(void *p) {
  fill_job *j = p;
  for (size_t i = j->lo; i < j->hi; i++) j->h[i] = i < j->n ? big_bf16(i) : 0x7FC0u;
  return NULL;
}

static void parallel_fill(uint16_t *h, size_t total, size_t n, int nthreads) {
  pthread_t th[64];
  fill_job jobs[64];
  for (int i = 0; i < nthreads; i++) {
    jobs[i] = (fill_job){h, total * (size_t)i / (size_t)nthreads, total * (size_t)(i + 1) / (size_t)nthreads, n};
    pthread_create(&th[i], NULL, fill_thread, &jobs[i]);
  }
  for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
}

static int large_report(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int large_report(const char *what, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("FAIL large %s: %s\n", what, msg);
  return 1;
}

/* Runs the large cases: a bf16 65536 x 32771 input (2^31 + 196608 elements):
 * reduce_rows sum and argmax, softmax and rmsnorm (y with row stride 32772),
 * checking sampled rows, the rows around element 2^31, and every padding
 * and guard element.  Returns failures; *run counts the checks done. */
int run_large(int nthreads, uint64_t seed, int *run) {
  const int64_t R = 65536, C = 32771, ldy = C + 1;
  const size_t nx = (size_t)R * (size_t)C, ny = (size_t)(R - 1) * (size_t)ldy + (size_t)C;
  const size_t bx = (nx + GUARD) * 2, by = (ny + GUARD) * 2;
  void *dx = NULL, *dy = NULL, *dr = NULL;
  uint16_t *hx = NULL, *hy = NULL;
  uint8_t *hr = NULL;
  int failures = 0;
  ckjit_status st = ckjit_malloc(&dx, bx);
  if (st != CKJIT_SUCCESS) {
    dx = NULL;
    if (st == CKJIT_ERROR_OUT_OF_MEMORY) {
      printf("SKIP large cases: cannot allocate %.2f GB on the device (%s)\n", bx / 1e9, ckjit_last_error());
      return 0;
    }
    return large_report("alloc", "ckjit_malloc(%zu): %s", bx, ckjit_last_error());
  }
  hx = malloc(bx);
  hr = malloc((size_t)(R + GUARD) * 8);
  if (!hx || !hr) {
    printf("SKIP large cases: cannot allocate %.2f GB on the host\n", bx / 1e9);
    goto done;
  }
  parallel_fill(hx, nx + GUARD, nx, nthreads);
  if ((st = ckjit_memcpy(dx, hx, bx, CKJIT_HOST_TO_DEVICE)) != CKJIT_SUCCESS) {
    failures += large_report("upload", "%s", ckjit_last_error());
    goto done;
  }
  if ((st = ckjit_malloc(&dr, (size_t)(R + GUARD) * 8)) != CKJIT_SUCCESS) {
    dr = NULL;
    failures += large_report("alloc", "%s", ckjit_last_error());
    goto done;
  }
  /* sampled rows: the ends, the rows around element 2^31 of x and of y, random rows */
  int64_t sample[160];
  int ns = 0;
  const int64_t fixed[] = {0, 1, 2, 65526, 65527, 65528, 65529, 65530, 65531, 65532, R - 2, R - 1};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) sample[ns++] = fixed[i];
  tu_rng rng = {seed ^ 0x5A5A5A5Aull};
  while (ns < 160) sample[ns++] = tu_rng_range(&rng, 0, R - 1);
  double *v = malloc((size_t)C * sizeof *v), *ref = malloc((size_t)C * sizeof *ref),
         *err = malloc((size_t)C * sizeof *err);
  if (!v || !ref || !err) abort();

  /* reduce_rows sum (f32) and argmax (i64) */
  for (int which = 0; which < 2; which++) {
    const int op = which ? CKJIT_REDUCE_ARGMAX : CKJIT_REDUCE_SUM;
    const ckjit_dtype ydt = which ? CKJIT_I64 : CKJIT_F32;
    char what[128];
    snprintf(what, sizeof what, "reduce_rows:%s bf16->%s %lldx%lld", op_names[op], ckjit_dtype_name(ydt), LL(R), LL(C));
    (*run)++;
    st = ckjit_memset(dr, 0xFF, (size_t)(R + GUARD) * 8);
    if (st == CKJIT_SUCCESS) st = ckjit_reduce_rows((ckjit_reduce_op)op, CKJIT_BF16, R, C, dx, C, ydt, dr, NULL);
    if (st == CKJIT_SUCCESS) st = ckjit_synchronize(NULL);
    if (st == CKJIT_SUCCESS) st = ckjit_memcpy(hr, dr, (size_t)(R + GUARD) * gt_esize(ydt), CKJIT_DEVICE_TO_HOST);
    if (st != CKJIT_SUCCESS) {
      failures += large_report(what, "%s: %s", ckjit_status_string(st), ckjit_last_error());
      continue;
    }
    task dummy = mk(K_REDUCE_ROWS, CKJIT_BF16, R, C);
    dummy.op = op, dummy.odt = ydt, dummy.seed = seed, dummy.data = D_HASHED;
    gt_check ck;
    check_begin(&ck, &dummy);
    gt_buf yb = {NULL, hr, (size_t)(R + GUARD), ydt};
    check_outside(&ck, &yb, 0, 1, R, R, "y");
    for (int i = 0; i < ns; i++) {
      int64_t r = sample[i];
      for (int64_t c = 0; c < C; c++) v[c] = bf16_to_f32(hx[(size_t)r * (size_t)C + (size_t)c]);
      char where[64];
      snprintf(where, sizeof where, "row %lld", LL(r));
      check_reduce_out(&ck, op, &yb, (size_t)r, v, C, where);
    }
    finish(&ck);
    if (ck.failures) failures++;
    else printf("ok   large %s (%d sampled rows)\n", what, ns);
  }

  /* softmax and rmsnorm, bf16, y with row stride C + 1 */
  st = ckjit_malloc(&dy, by);
  if (st != CKJIT_SUCCESS) {
    dy = NULL;
    if (st == CKJIT_ERROR_OUT_OF_MEMORY)
      printf("SKIP large softmax/rmsnorm: cannot allocate %.2f GB more on the device (%s)\n", by / 1e9,
             ckjit_last_error());
    else
      failures += large_report("alloc", "%s", ckjit_last_error());
    goto free_ref;
  }
  hy = malloc(by);
  if (!hy) {
    printf("SKIP large softmax/rmsnorm: cannot allocate %.2f GB more on the host\n", by / 1e9);
    goto free_ref;
  }
  for (int which = 0; which < 2; which++) {
    char what[128];
    snprintf(what, sizeof what, "%s bf16 %lldx%lld ld_y=%lld", which ? "rmsnorm2d(+rstd_out)" : "softmax", LL(R),
             LL(C), LL(ldy));
    (*run)++;
    st = ckjit_memset(dy, 0xFF, by);
    if (st == CKJIT_SUCCESS) st = ckjit_memset(dr, 0xFF, (size_t)(R + GUARD) * 4);
    if (st == CKJIT_SUCCESS) {
      if (!which) {
        st = ckjit_softmax(CKJIT_BF16, R, C, dx, C, dy, ldy, NULL, NULL);
      } else {
        ckjit_norm_params p;
        ckjit_norm_params_init(&p);
        p.rstd_out = dr;
        st = ckjit_rmsnorm2d(CKJIT_BF16, R, C, dx, C, dy, ldy, &p, NULL);
      }
    }
    if (st == CKJIT_SUCCESS) st = ckjit_synchronize(NULL);
    if (st == CKJIT_SUCCESS) st = ckjit_memcpy(hy, dy, by, CKJIT_DEVICE_TO_HOST);
    if (st == CKJIT_SUCCESS) st = ckjit_memcpy(hr, dr, (size_t)(R + GUARD) * 4, CKJIT_DEVICE_TO_HOST);
    if (st != CKJIT_SUCCESS) {
      failures += large_report(what, "%s: %s", ckjit_status_string(st), ckjit_last_error());
      continue;
    }
    task dummy = mk(which ? K_RMSNORM : K_SOFTMAX, CKJIT_BF16, R, C);
    dummy.pad_y = 1, dummy.stats = which, dummy.seed = seed, dummy.data = D_HASHED;
    gt_check ck;
    check_begin(&ck, &dummy);
    /* padding column of every row and the guard */
    for (int64_t r = 0; r < R - 1 && ck.failures == 0; r++)
      if (hy[(size_t)r * (size_t)ldy + (size_t)C] != 0xFFFFu)
        gt_fail(&ck, "wrote the padding after row %lld", LL(r));
    for (size_t i = ny; i < ny + GUARD; i++)
      if (hy[i] != 0xFFFFu) {
        gt_fail(&ck, "wrote past the last row (element %zu)", i);
        break;
      }
    if (which) {
      gt_buf rb = {NULL, hr, (size_t)(R + GUARD), CKJIT_F32};
      check_outside(&ck, &rb, 0, 1, R, R, "rstd_out");
    }
    gt_buf yb = {NULL, (uint8_t *)hy, ny + GUARD, CKJIT_BF16};
    for (int i = 0; i < ns; i++) {
      int64_t r = sample[i];
      for (int64_t c = 0; c < C; c++) v[c] = bf16_to_f32(hx[(size_t)r * (size_t)C + (size_t)c]);
      if (!which) {
        softmax_ref(v, C, C, 1.0, 0, ref, err);
        check_softmax_row(&ck, CKJIT_BF16, ref, err, &yb, r * ldy, C, r, C, v);
        continue;
      }
      norm_ref s = norm_stats(0, v, C, 1e-5);
      double got_r = gt_get(CKJIT_F32, hr, (size_t)r);
      if (!within(CKJIT_F32, got_r, s.rstd, 2 * s.rel_r * s.rstd))
        gt_fail(&ck, "rstd_out[%lld]: got %.9g, want %.12g", LL(r), got_r, s.rstd);
      for (int64_t c = 0; c < C; c++) {
        double e, want = norm_out(0, &s, v[c], 1.0, 0.0, &e);
        double got = gt_get(CKJIT_BF16, yb.host, (size_t)(r * ldy + c));
        if (!within(CKJIT_BF16, got, want, e)) {
          gt_fail(&ck, "(%lld,%lld): got %.9g, want %.9g", LL(r), LL(c), got, gt_round(CKJIT_BF16, want));
          break;
        }
      }
    }
    finish(&ck);
    if (ck.failures) failures++;
    else printf("ok   large %s (%d sampled rows)\n", what, ns);
  }
free_ref:
  free(v);
  free(ref);
  free(err);
done:
  free(hx);
  free(hy);
  free(hr);
  ckjit_free(dx);
  ckjit_free(dy);
  ckjit_free(dr);
  return failures;
}
