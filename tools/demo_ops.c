/* ckjit-demo's ops (demo_ops.h): buffers, calls, timing and checks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo_ops.h"
#include "half_convert.h"
#include "wall_clock.h"

/* ---- host data in any dtype ------------------------------------------------ */

static void to_dtype(const float *src, void *dst, size_t n, ckjit_dtype dt) {
  if (dt == CKJIT_F32) {
    memcpy(dst, src, n * sizeof(float));
    return;
  }
  uint16_t *d = dst;
  for (size_t i = 0; i < n; i++)
    d[i] = dt == CKJIT_BF16 ? half_f32_to_bf16(src[i]) : half_f32_to_f16(src[i]);
}

static float elem_to_f32(const void *src, size_t i, ckjit_dtype dt) {
  if (dt == CKJIT_F32) return ((const float *)src)[i];
  uint16_t h = ((const uint16_t *)src)[i];
  return dt == CKJIT_BF16 ? half_bf16_to_f32(h) : half_f16_to_f32(h);
}

/* The value `v` takes once stored in `dt`. */
static float round_to(float v, ckjit_dtype dt) {
  if (dt == CKJIT_BF16) return half_bf16_to_f32(half_f32_to_bf16(v));
  if (dt == CKJIT_F16) return half_f16_to_f32(half_f32_to_f16(v));
  return v;
}

/* Allowed error, relative to max(1, |reference|). */
static double tolerance(ckjit_dtype dt) {
  return dt == CKJIT_BF16 ? 1.0 / 64 : dt == CKJIT_F16 ? 1.0 / 512 : 1e-5;
}

static float gelu_tanh_ref(float x) {
  double xd = x;
  return (float)(0.5 * xd * (1.0 + tanh(0.7978845608028654 * (xd + 0.044715 * xd * xd * xd))));
}

static void set_error(op_report *r, ckjit_status st) {
  const char *e = ckjit_last_error();
  size_t n = strcspn(e, "\r\n");
  r->status = st;
  snprintf(r->error, sizeof r->error, "%s: %.*s", ckjit_status_string(st), (int)n, e);
}

/* Which way the first call got its kernel, from the statistics' deltas. */
static const char *first_how(const ckjit_stats *before, const ckjit_stats *after) {
  if (after->compiles > before->compiles) return "compiled";
  if (after->disk_hits > before->disk_hits) return "disk cache";
  return "memory";
}

typedef ckjit_status (*op_call)(demo *d, ckjit_dtype dt);

static ckjit_status call_copy(demo *d, ckjit_dtype dt) {
  return ckjit_copy2d(dt, d->rows, d->cols, d->da, d->cols, d->dpad, d->ld_pad, NULL);
}

static const ckjit_epilogue demo_epilogue = {0.5f, 0.125f};

static ckjit_status call_unary(demo *d, ckjit_dtype dt) {
  return ckjit_unary(CKJIT_UNARY_GELU_TANH, dt, d->rows, d->cols, d->da, d->cols, d->dy, d->cols,
                     &demo_epilogue, NULL);
}

static ckjit_status call_binary(demo *d, ckjit_dtype dt) {
  return ckjit_binary(CKJIT_BINARY_ADD, dt, d->rows, d->cols, d->da, d->cols, d->db, d->cols,
                      d->dy, d->cols, NULL, NULL);
}

static ckjit_status call_transpose(demo *d, ckjit_dtype dt) {
  return ckjit_transpose(dt, 1, d->rows, d->cols, d->da, d->cols, d->rows * d->cols, d->dt,
                         d->rows, d->rows * d->cols, NULL);
}

/* D (rows x n) = A (rows x cols, row-major) * B, B the first n = min(rows,
 * cols) rows of `b` read as a column-major cols x n matrix, with a
 * per-column bias (the first n elements of `b`) and gelu_tanh fused. */
static int64_t gemm_n(const demo *d) { return d->rows < d->cols ? d->rows : d->cols; }

static ckjit_status call_gemm(demo *d, ckjit_dtype dt) {
  ckjit_gemm_desc g;
  ckjit_gemm_desc_init(&g);
  g.m = d->rows, g.n = gemm_n(d), g.k = d->cols;
  g.ab_dtype = g.out_dtype = dt;
  g.a = d->da, g.lda = d->cols;
  g.b = d->db, g.ldb = d->cols, g.b_order = CKJIT_COL_MAJOR;
  g.d = d->dy, g.ldd = g.n;
  g.bias = d->db, g.bias_mode = CKJIT_BIAS_PER_COL;
  g.activation = CKJIT_UNARY_GELU_TANH;
  return ckjit_gemm(&g, NULL);
}

/* Times the first call and DEMO_REPEATS more, synchronizing after each part. */
static int time_op(demo *d, ckjit_dtype dt, op_call call, op_report *r) {
  ckjit_stats before, after;
  ckjit_get_stats(&before);
  double t0 = wall_clock_ms();
  ckjit_status st = call(d, dt);
  if (st == CKJIT_SUCCESS) st = ckjit_synchronize(NULL);
  double t1 = wall_clock_ms();
  if (st != CKJIT_SUCCESS) {
    set_error(r, st);
    return -1;
  }
  ckjit_get_stats(&after);
  r->first_ms = t1 - t0;
  r->first_how = first_how(&before, &after);
  t0 = wall_clock_ms();
  for (int i = 0; i < DEMO_REPEATS && st == CKJIT_SUCCESS; i++) st = call(d, dt);
  if (st == CKJIT_SUCCESS) st = ckjit_synchronize(NULL);
  t1 = wall_clock_ms();
  if (st != CKJIT_SUCCESS) {
    set_error(r, st);
    return -1;
  }
  r->repeat_ms = (t1 - t0) / DEMO_REPEATS;
  return 0;
}

static int fetch(demo *d, void *host, const void *dev, size_t bytes, op_report *r) {
  ckjit_status st = ckjit_memcpy(host, dev, bytes, CKJIT_DEVICE_TO_HOST);
  if (st != CKJIT_SUCCESS) {
    set_error(r, st);
    return -1;
  }
  (void)d;
  return 0;
}

/* Compares element i of `got` with `ref` (relative to max(1, |ref|)). */
static void check_value(op_report *r, float got, float ref, ckjit_dtype dt) {
  double err;
  if (isnan(ref) || isnan(got)) err = isnan(ref) && isnan(got) ? 0.0 : INFINITY;
  else err = fabs((double)got - (double)ref) / fmax(1.0, fabs((double)ref));
  if (err > r->max_err) r->max_err = err;
  if (err > tolerance(dt)) r->mismatches++;
}

void demo_run_op(demo *d, ckjit_dtype dt, const char *name, op_report *r) {
  memset(r, 0, sizeof *r);
  r->op = name;
  r->dtype = dt;
  r->first_how = "";
  size_t es = ckjit_dtype_size(dt);
  size_t bytes = d->n * es;
  int64_t rows = d->rows, cols = d->cols;

  if (strcmp(name, "copy2d") == 0) {
    /* Strided destination: the padding must stay untouched. */
    size_t pad_bytes = (size_t)(rows * d->ld_pad) * es;
    ckjit_status st = ckjit_memset(d->dpad, 0x5A, pad_bytes);
    if (st != CKJIT_SUCCESS) {
      set_error(r, st);
      return;
    }
    if (time_op(d, dt, call_copy, r) != 0) return;
    unsigned char *got = malloc(pad_bytes);
    if (!got) {
      r->status = CKJIT_ERROR_OUT_OF_MEMORY;
      snprintf(r->error, sizeof r->error, "out of host memory");
      return;
    }
    if (fetch(d, got, d->dpad, pad_bytes, r) == 0) {
      const unsigned char *src = d->ha;
      for (int64_t i = 0; i < rows; i++) {
        const unsigned char *row = got + (size_t)(i * d->ld_pad) * es;
        if (memcmp(row, src + (size_t)(i * cols) * es, (size_t)cols * es) != 0) r->mismatches++;
        for (size_t k = (size_t)cols * es; k < (size_t)d->ld_pad * es; k++)
          if (row[k] != 0x5A) {
            r->mismatches++;
            break;
          }
      }
    }
    free(got);
  } else if (strcmp(name, "unary") == 0) {
    if (time_op(d, dt, call_unary, r) != 0) return;
    if (fetch(d, d->hy, d->dy, bytes, r) != 0) return;
    for (size_t i = 0; i < d->n; i++) {
      float ref = round_to(demo_epilogue.scale * gelu_tanh_ref(d->a[i]) + demo_epilogue.bias, dt);
      check_value(r, elem_to_f32(d->hy, i, dt), ref, dt);
    }
  } else if (strcmp(name, "binary") == 0) {
    if (time_op(d, dt, call_binary, r) != 0) return;
    if (fetch(d, d->hy, d->dy, bytes, r) != 0) return;
    for (size_t i = 0; i < d->n; i++)
      check_value(r, elem_to_f32(d->hy, i, dt), round_to(d->a[i] + d->b[i], dt), dt);
  } else if (strcmp(name, "gemm") == 0) {
    /* Every 97th output against a double dot product; the allowed error
     * grows with sum |a b| (f32 accumulation in another order). */
    if (time_op(d, dt, call_gemm, r) != 0) return;
    const int64_t n = gemm_n(d);
    if (fetch(d, d->hy, d->dy, (size_t)(rows * n) * es, r) != 0) return;
    for (int64_t e = 0; e < rows * n; e += 97) {
      const int64_t i = e / n, j = e % n;
      double dot = 0.0, mag = 0.0;
      for (int64_t q = 0; q < cols; q++) {
        const double x = d->a[i * cols + q], y = d->b[j * cols + q];
        dot += x * y;
        mag += fabs(x * y);
      }
      const double ref = gelu_tanh_ref((float)(dot + d->b[j]));
      const double got = elem_to_f32(d->hy, (size_t)e, dt);
      const double diff = fabs(got - ref), err = diff / fmax(1.0, fabs(ref));
      r->max_err = isnan(err) ? INFINITY : fmax(r->max_err, err);
      if (!(diff <= tolerance(dt) * fmax(1.0, fabs(ref)) + 0x1p-20 * mag)) r->mismatches++;
    }
  } else { /* transpose: bit exact */
    if (time_op(d, dt, call_transpose, r) != 0) return;
    if (fetch(d, d->hy, d->dt, bytes, r) != 0) return;
    const unsigned char *in = d->ha, *out = d->hy;
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < cols; j++)
        if (memcmp(out + (size_t)(j * rows + i) * es, in + (size_t)(i * cols + j) * es, es) != 0)
          r->mismatches++;
  }
  r->ok = r->mismatches == 0;
}

int demo_alloc(demo *d) {
  size_t big = d->n * sizeof(float);
  d->a = malloc(big);
  d->b = malloc(big);
  d->ha = malloc(big);
  d->hb = malloc(big);
  d->hy = malloc(big);
  if (!d->a || !d->b || !d->ha || !d->hb || !d->hy) {
    fprintf(stderr, "ckjit-demo: out of host memory\n");
    return -1;
  }
  void **bufs[] = {&d->da, &d->db, &d->dy, &d->dt};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
    ckjit_status st = ckjit_malloc(bufs[i], big);
    if (st != CKJIT_SUCCESS) {
      fprintf(stderr, "ckjit-demo: ckjit_malloc(%zu) failed (%s): %s\n", big,
              ckjit_status_string(st), ckjit_last_error());
      return -1;
    }
  }
  ckjit_status st = ckjit_malloc(&d->dpad, (size_t)(d->rows * d->ld_pad) * sizeof(float));
  if (st != CKJIT_SUCCESS) {
    fprintf(stderr, "ckjit-demo: ckjit_malloc failed (%s): %s\n", ckjit_status_string(st),
            ckjit_last_error());
    return -1;
  }
  return 0;
}

void demo_free(demo *d) {
  ckjit_free(d->da);
  ckjit_free(d->db);
  ckjit_free(d->dy);
  ckjit_free(d->dt);
  ckjit_free(d->dpad);
  free(d->a);
  free(d->b);
  free(d->ha);
  free(d->hb);
  free(d->hy);
}

/* Fills the inputs for `dt` and uploads them. */
int demo_upload(demo *d, ckjit_dtype dt) {
  uint32_t s = 12345u + (uint32_t)dt;
  for (size_t i = 0; i < d->n; i++) {
    s = s * 1664525u + 1013904223u;
    float x = ((float)(s >> 8) / 16777216.0f) * 8.0f - 4.0f; /* [-4, 4) */
    s = s * 1664525u + 1013904223u;
    float y = ((float)(s >> 8) / 16777216.0f) * 8.0f - 4.0f;
    d->a[i] = round_to(x, dt);
    d->b[i] = round_to(y, dt);
  }
  to_dtype(d->a, d->ha, d->n, dt);
  to_dtype(d->b, d->hb, d->n, dt);
  size_t bytes = d->n * ckjit_dtype_size(dt);
  ckjit_status st = ckjit_memcpy(d->da, d->ha, bytes, CKJIT_HOST_TO_DEVICE);
  if (st == CKJIT_SUCCESS) st = ckjit_memcpy(d->db, d->hb, bytes, CKJIT_HOST_TO_DEVICE);
  if (st != CKJIT_SUCCESS) {
    fprintf(stderr, "ckjit-demo: upload failed (%s): %s\n", ckjit_status_string(st),
            ckjit_last_error());
    return -1;
  }
  return 0;
}
