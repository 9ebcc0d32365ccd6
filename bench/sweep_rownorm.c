/*
 * sweep_rownorm: times the fused rownorm kernel under every tile policy that
 * fits a shape (threads, row_threads, items), launched by hand through
 * ckjit_get_function, to choose the policy in runtime/ops/rownorm/rownorm_policy.c from
 * measurements.  One JSON object per line on stdout.
 *
 * usage: sweep_rownorm [ROWSxCOLS ...]   (default: the fused shapes)
 * Each (op, shape, policy): 3 warm-up launches, then 20 launches each between
 * two events; the median in GB/s of bytes read + written (x and y; the
 * quantizing case also reads a residual and writes the sum).
 */
#include <cuda.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"

#define CU(x)                                                             \
  do {                                                                    \
    CUresult r_ = (x);                                                    \
    if (r_) {                                                             \
      fprintf(stderr, "sweep_rownorm: %s failed (%d)\n", #x, (int)r_);   \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

static int cmp(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

typedef struct op_case {
  const char *name, *spec; /* spec prefix (op, affine, residual, qtype) */
  int quant, residual, smooth;
} op_case;

static const op_case ops[] = {
    {"softmax", "op=softmax,affine=none", 0, 0, 0},
    {"layernorm", "op=layernorm,affine=weight_bias", 0, 0, 0},
    {"rmsnorm", "op=rmsnorm,affine=weight", 0, 0, 0},
    {"rmsnorm_quant", "op=rmsnorm_quant,qtype=i8,residual=1,affine=weight", 1, 1, 0},
    {"smoothquant", "op=smoothquant,qtype=i8", 1, 0, 1},
};

int main(int argc, char **argv) {
  const char *defaults[] = {"8192x8192", "4096x16384", "32768x1024"};
  int n_shapes = argc > 1 ? argc - 1 : 3;
  const char **shapes = argc > 1 ? (const char **)argv + 1 : defaults;
  ckjit_device_info info;
  if (ckjit_get_device_info(&info) || !info.has_device) {
    fprintf(stderr, "sweep_rownorm: needs a GPU: %s\n", ckjit_last_error());
    return 77;
  }
  for (int si = 0; si < n_shapes; si++) {
    long long rows, cols;
    if (sscanf(shapes[si], "%lldx%lld", &rows, &cols) != 2) return 2;
    size_t n = (size_t)rows * (size_t)cols;
    void *x, *y, *res, *sum, *w, *b, *scale, *smooth;
    if (ckjit_malloc(&x, 2 * n) || ckjit_malloc(&y, 2 * n) || ckjit_malloc(&res, 2 * n) ||
        ckjit_malloc(&sum, 2 * n) || ckjit_malloc(&w, 2 * (size_t)cols) ||
        ckjit_malloc(&b, 2 * (size_t)cols) || ckjit_malloc(&scale, 4 * (size_t)rows) ||
        ckjit_malloc(&smooth, 4 * (size_t)cols)) {
      fprintf(stderr, "sweep_rownorm: %s\n", ckjit_last_error());
      return 1;
    }
    /* bf16 0x3f80 = 1.0 everywhere: the values do not matter for timing. */
    ckjit_memset(x, 0x3f, 2 * n);
    ckjit_memset(res, 0x3f, 2 * n);
    ckjit_memset(w, 0x3f, 2 * (size_t)cols);
    ckjit_memset(b, 0, 2 * (size_t)cols);
    ckjit_memset(smooth, 0x3f, 4 * (size_t)cols);
    CUevent e0, e1;
    CU(cuEventCreate(&e0, 0));
    CU(cuEventCreate(&e1, 0));
    const int vec = 8;
    long long vecs = (cols + vec - 1) / vec;
    for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
      const op_case *oc = &ops[oi];
      for (int rt = 1; rt <= 1024; rt *= 2) {
        long long items = (vecs + rt - 1) / rt;
        int it = 1;
        while (it < items) it *= 2;
        if (it * vec > 32) continue;
        if (rt > 1 && (long long)(rt / 2) * it >= vecs) continue; /* a smaller group fits too */
        for (int threads = rt < 64 ? 64 : rt; threads <= 1024; threads *= 2)
        for (int occ = 0; occ <= 2048; occ += occ ? 512 : 1024)
        for (int sm = 0; sm <= 1; sm++) {
          if (sm && threads * it * vec * 2 > 32768) continue;
          if (occ && occ < threads) continue;
          char spec[256];
          snprintf(spec, sizeof spec,
                   "rownorm:dtype=bf16,%s,threads=%d,row_threads=%d,vec=%d,items=%d,pass=fused,"
                   "occupancy=%d,smem_tile=%d",
                   oc->spec, threads, rt, vec, it, occ, sm);
          void *fn;
          if (ckjit_get_function(spec, &fn)) {
            fprintf(stderr, "%s: %s\n", spec, ckjit_last_error());
            continue;
          }
          long long groups = threads / rt, blocks = (rows + groups - 1) / groups;
          long long ld = cols, zero = 0, chunk = 0, nch = 0;
          void *null = NULL, *xp = x, *resp = oc->residual ? res : NULL,
               *smp = oc->smooth ? smooth : NULL,
               *sump = oc->residual ? sum : NULL, *wp = w, *bp = b, *yp = y,
               *scp = oc->quant ? scale : NULL;
          float alpha = oc->name[0] == 's' ? 1.0f : 1e-5f;
          void *args[] = {&xp,   &ld,   &resp, &ld,    &sump,  &ld,  &wp,    &bp,
                          &smp,  &yp,   &ld,   &null,  &null,  &scp, &null,  &alpha,
                          &null, &rows, &cols, &chunk, &nch};
          (void)zero;
          float ms[20];
          for (int i = 0; i < 23; i++) {
            CU(cuEventRecord(e0, NULL));
            CU(cuLaunchKernel((CUfunction)fn, (unsigned)blocks, 1, 1, (unsigned)threads, 1, 1, 0,
                              NULL, args, NULL));
            CU(cuEventRecord(e1, NULL));
            CU(cuEventSynchronize(e1));
            if (i >= 3) CU(cuEventElapsedTime(&ms[i - 3], e0, e1));
          }
          qsort(ms, 20, sizeof ms[0], cmp);
          double med = (ms[9] + ms[10]) / 2;
          double bytes = oc->smooth ? 3.0 * (double)n
                         : oc->quant ? (3.0 * 2 + 1) * (double)n : 4.0 * (double)n;
          printf("{\"op\": \"%s\", \"shape\": \"%s\", \"threads\": %d, \"row_threads\": %d, "
                 "\"items\": %d, \"occupancy\": %d, \"smem_tile\": %d, \"median_ms\": %.5f, "
                 "\"gbps\": %.1f}\n",
                 oc->name, shapes[si], threads, rt, it, occ, sm, med,
                 bytes / (med * 1e-3) / 1e9);
          fflush(stdout);
        }
      }
    }
    ckjit_free(x), ckjit_free(y), ckjit_free(res), ckjit_free(sum), ckjit_free(w), ckjit_free(b),
        ckjit_free(scale), ckjit_free(smooth);
  }
  return 0;
}
