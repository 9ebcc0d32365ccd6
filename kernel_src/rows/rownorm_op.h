// The per-op transforms of the rownorm kernel (rows/rownorm.cu, included
// after its parameters): the value an op works on, its output, the
// per-column parameters, and the row statistics the output uses.
#pragma once

struct row_stats {
  float m, inv_s, log_s; // softmax: max, 1 / sum, log(sum)
  float mean, rstd;      // norms
  float amax;            // quantization
};

// The value the op works on at column c (before the epilogue).
CKJIT_INLINE float op_value(float h, long long c, const float *smooth, float alpha) {
#if IS_SOFTMAX
  (void)c;
  (void)smooth;
  return softmax_z(h, alpha);
#elif OP == OP_SMOOTHQUANT
  return h * smooth[c];
#else
  (void)c;
  (void)smooth;
  (void)alpha;
  return h;
#endif
}

// Output of a valid column (norms: with weight/bias; quantizing ops: the
// value before quantization).
CKJIT_INLINE float op_output(float v, const row_stats &st, float w, float b) {
#if OP == OP_SOFTMAX
  return softmax_exp(v - st.m) * st.inv_s;
#elif OP == OP_LOG_SOFTMAX
  return v - st.m - st.log_s;
#elif OP == OP_LAYERNORM
  float o = (v - st.mean) * st.rstd;
#elif OP == OP_RMSNORM || OP == OP_RMSNORM_QUANT
  float o = v * st.rstd;
#else
  float o = v;
#endif
#if !IS_SOFTMAX
#if AFFINE != AFFINE_NONE
  o *= w;
#endif
#if AFFINE == AFFINE_WEIGHT_BIAS
  o += b;
#endif
  (void)w;
  (void)b;
  return o;
#endif
}

// The per-column parameters of the vector at column c: the weights
// (smoothquant: its scales; 1 without) and the bias (0 without).  They take
// the kernel's __restrict__ pointers by reference, and so read them as the
// kernel's own code does (passed by value, they changed the generated code).
CKJIT_INLINE void column_weights(const T *__restrict__ const &weight,
                                 const float *__restrict__ const &smooth, long long c,
                                 long long end, float *w) {
#if OP == OP_SMOOTHQUANT
  (void)weight;
  load_scales(smooth, c, end, w);
#elif AFFINE != AFFINE_NONE
  (void)smooth;
  load(weight, c, end, w);
#else
  (void)weight, (void)smooth;
  (void)c, (void)end;
#pragma unroll
  for (int k = 0; k < VEC; k++) w[k] = 1.0f;
#endif
}

CKJIT_INLINE void column_biases(const T *__restrict__ const &bias, long long c, long long end,
                                float *b) {
#if AFFINE == AFFINE_WEIGHT_BIAS
  load(bias, c, end, b);
#else
  (void)bias;
  (void)c, (void)end;
#pragma unroll
  for (int k = 0; k < VEC; k++) b[k] = 0.0f;
#endif
}

// The fused pass's statistics of the norms (softmax's are in
// rows/rownorm_loop_fused_stats.h, next to the exponentials it keeps): the
// row is on chip, so they are plain group sums in the textbook order (mean,
// then the sum of squared deviations from it: exact two-pass variance),
// cheaper than merging (count, mean, M2) triples.
template <class Val, class Ok>
CKJIT_INLINE void fused_stats(Val val, Ok ok, reducer &smem, long long cols, float alpha,
                              row_stats &st) {
#if OP == OP_LAYERNORM
  float sum = 0.0f;
  each([&](int i, int k) { if (ok(i, k)) sum += val(i, k); });
  const float mean = group_sum(sum, smem) / (float)cols;
  float m2 = 0.0f;
  each([&](int i, int k) {
    const float d = val(i, k) - mean;
    if (ok(i, k)) m2 += d * d;
  });
  st.mean = mean;
  st.rstd = rsqrtf(group_sum(m2, smem) / (float)cols + alpha);
#else // rmsnorm: the sum of squares
  st.rstd = rsqrtf(group_sum(tile_stat(val, ok).a, smem) / (float)cols + alpha);
#endif
}

// Row statistics from the combined stat (the op's main one).
CKJIT_INLINE void finish_stats(stat s, long long cols, float alpha, row_stats &st) {
#if IS_SOFTMAX
  st.m = s.a;
  st.inv_s = 1.0f / s.b;
  st.log_s = logf(s.b);
  (void)cols;
  (void)alpha;
#elif OP == OP_LAYERNORM
  st.mean = s.b;
  st.rstd = rsqrtf(s.c / (float)cols + alpha);
#elif OP == OP_SMOOTHQUANT
  st.amax = s.a;
  (void)cols;
  (void)alpha;
#else
  st.rstd = rsqrtf(s.a / (float)cols + alpha);
#endif
}
