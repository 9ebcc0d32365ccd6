/* rmsnorm -> matmul -> softmax with libckjit's C API, checked against a CPU
 * reference:  probs = softmax(rmsnorm(x) * gamma @ w)  over each row.
 *
 * Build and run: see examples/README.md.  Needs a GPU (NVIDIA or AMD); the
 * kernels are compiled at the first call of each op and cached on disk. */
#include <ckjit/ckjit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { M = 64, K = 256, N = 200 }; /* rows, hidden size, vocabulary (not a tile multiple) */

/* Prints ckjit's message for a failed call and makes main fail. */
#define CHECK(call)                                                                   \
  do {                                                                                \
    ckjit_status st_ = (call);                                                        \
    if (st_ != CKJIT_SUCCESS) {                                                       \
      fprintf(stderr, "%s failed: %s: %s\n", #call, ckjit_status_string(st_),         \
              ckjit_last_error());                                                    \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

/* The same chain in double precision on the host. */
static void reference(const float *x, const float *gamma, const float *w, double *probs) {
  static double h[M][K];
  for (int r = 0; r < M; r++) {
    double ms = 0;
    for (int c = 0; c < K; c++) ms += (double)x[r * K + c] * x[r * K + c];
    double rstd = 1.0 / sqrt(ms / K + 1e-5);
    for (int c = 0; c < K; c++) h[r][c] = x[r * K + c] * rstd * gamma[c];
  }
  for (int r = 0; r < M; r++) {
    double row[N], mx = -INFINITY, sum = 0;
    for (int n = 0; n < N; n++) {
      double acc = 0;
      for (int k = 0; k < K; k++) acc += h[r][k] * w[k * N + n];
      row[n] = acc;
      mx = acc > mx ? acc : mx;
    }
    for (int n = 0; n < N; n++) sum += row[n] = exp(row[n] - mx);
    for (int n = 0; n < N; n++) probs[r * N + n] = row[n] / sum;
  }
}

int main(void) {
  static float x[M * K], gamma[K], w[K * N], probs[M * N];
  static double want[M * N];
  srand(7);
  for (int i = 0; i < M * K; i++) x[i] = (float)((double)rand() / RAND_MAX * 2.0 - 1.0);
  for (int i = 0; i < K; i++) gamma[i] = 0.5f + (float)i / K;
  for (int i = 0; i < K * N; i++) w[i] = (float)(((double)rand() / RAND_MAX - 0.5) * 0.2);

  void *dx, *dgamma, *dh, *dw, *dlogits, *dprobs;
  CHECK(ckjit_malloc(&dx, sizeof x));
  CHECK(ckjit_malloc(&dgamma, sizeof gamma));
  CHECK(ckjit_malloc(&dh, sizeof x));
  CHECK(ckjit_malloc(&dw, sizeof w));
  CHECK(ckjit_malloc(&dlogits, sizeof probs));
  CHECK(ckjit_malloc(&dprobs, sizeof probs));
  CHECK(ckjit_memcpy(dx, x, sizeof x, CKJIT_HOST_TO_DEVICE));
  CHECK(ckjit_memcpy(dgamma, gamma, sizeof gamma, CKJIT_HOST_TO_DEVICE));
  CHECK(ckjit_memcpy(dw, w, sizeof w, CKJIT_HOST_TO_DEVICE));

  /* h = rmsnorm(x) * gamma (f32 here; f16 and bf16 work the same way) */
  ckjit_norm_params norm;
  ckjit_norm_params_init(&norm);
  norm.eps = 1e-5f;
  norm.weight = dgamma;
  CHECK(ckjit_rmsnorm2d(CKJIT_F32, M, K, dx, K, dh, K, &norm, NULL));

  /* logits = h @ w: M x K times K x N, both row-major */
  ckjit_gemm_desc g;
  ckjit_gemm_desc_init(&g);
  g.m = M, g.n = N, g.k = K;
  g.ab_dtype = g.out_dtype = CKJIT_F32;
  g.a = dh, g.lda = K;
  g.b = dw, g.ldb = N;
  g.d = dlogits, g.ldd = N;
  CHECK(ckjit_gemm(&g, NULL));

  /* probs = softmax(logits) over each row (NULL params: scale 1, no mask) */
  CHECK(ckjit_softmax(CKJIT_F32, M, N, dlogits, N, dprobs, N, NULL, NULL));

  CHECK(ckjit_synchronize(NULL));
  CHECK(ckjit_memcpy(probs, dprobs, sizeof probs, CKJIT_DEVICE_TO_HOST));
  reference(x, gamma, w, want);
  double worst = 0;
  for (int i = 0; i < M * N; i++) {
    double d = fabs(probs[i] - want[i]);
    worst = (d > worst || d != d) ? d : worst; /* a NaN counts as the worst */
  }
  ckjit_free(dx), ckjit_free(dgamma), ckjit_free(dh), ckjit_free(dw);
  ckjit_free(dlogits), ckjit_free(dprobs);
  ckjit_shutdown();
  if (!(worst <= 1e-5)) {
    printf("FAIL: max |ckjit - reference| = %.3g\n", worst);
    return 1;
  }
  printf("OK: %dx%d -> %dx%d, max |ckjit - reference| = %.3g\n", M, K, M, N, worst);
  return 0;
}
