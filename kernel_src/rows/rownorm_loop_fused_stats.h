// Part of ckjit_rownorm's row loop (rows/rownorm.cu), included there, not a
// header: the statistics of the fused pass, whose row is the one tile
// loaded here.  Sets st (and, for the quantizing ops, amax, the row's max
// |y|); the ops in KEEPS keep each element's computed value in f for the
// output.
    load_tile(c_begin);
#if KEEPS
    float f[ITEMS][VEC];
#endif
#if IS_SOFTMAX
    {
      // The row's max, then one exponential per element (kept for the
      // softmax output; log-softmax needs only their sum).
      float m = -CKJIT_INF;
      each([&](int i, int k) { if (ok(i, k)) m = ckjit_nan_max(m, val(i, k)); });
      m = group_max(m, smem);
      float sum = 0.0f;
      each([&](int i, int k) {
        const float e = ok(i, k) ? softmax_exp(val(i, k) - m) : 0.0f;
#if KEEPS
        f[i][k] = e;
#endif
        sum += e;
      });
      sum = group_sum(sum, smem);
      st.m = m;
      st.inv_s = 1.0f / sum;
      st.log_s = logf(sum);
    }
#elif IS_QUANT
#if OP == OP_RMSNORM_QUANT
    fused_stats(val, ok, smem, cols, alpha, st);
#endif
    {
      // The value to quantize, kept, and its max |.|: h * rstd * weight
      // (rmsnorm) or h * smoothing scale.
      float a = 0.0f;
#if OP == OP_SMOOTHQUANT
      // All scales first, as 16-byte loads with no branch between them.
      float p[ITEMS][VEC];
      if (full && VEC % 4 == 0 && ((ckjit_u64)smooth & 15) == 0) {
#pragma unroll
        for (int i = 0; i < ITEMS; i++)
#pragma unroll
          for (int k = 0; k < VEC; k += 4) {
            ckjit_vec<float, 4> v = ckjit_load<float, 4>(smooth + col(i) + k);
#pragma unroll
            for (int j = 0; j < 4; j++) p[i][k + j] = v.v[j];
          }
      } else {
#pragma unroll
        for (int i = 0; i < ITEMS; i++) column_weights(weight, smooth, col(i), c_end, p[i]);
      }
#endif
#pragma unroll
      for (int i = 0; i < ITEMS; i++) {
#if OP == OP_SMOOTHQUANT
        const float *w = p[i];
#else
        float w[VEC]; // the weights a vector at a time: registers are short here
        column_weights(weight, smooth, col(i), c_end, w);
#endif
#pragma unroll
        for (int k = 0; k < VEC; k++) {
#if OP == OP_RMSNORM_QUANT
          const float v = ckjit_to_float(tile_vec(i).v[k]) * st.rstd * w[k];
#else
          const float v = ckjit_to_float(tile_vec(i).v[k]) * w[k];
#endif
          f[i][k] = ok(i, k) ? v : 0.0f;
          a = ckjit_nan_max(a, fabsf(f[i][k]));
        }
      }
      amax = group_max(a, smem);
    }
#else
    fused_stats(val, ok, smem, cols, alpha, st);
#endif
