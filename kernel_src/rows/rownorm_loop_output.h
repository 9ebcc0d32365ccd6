// Part of ckjit_rownorm's row loop (rows/rownorm.cu), included there, not a
// header: the output of the fused and apply passes, y = the op's output of
// each element (the kept value of KEEPS in the fused pass), quantized with
// the row's scale by the quantizing ops; then the row's own outputs (mean,
// rstd, scale) from its first thread.
    // The fused pass has its tile on chip; the apply pass streams its chunk
    // again.
    const quant_scale qs = quant_of(amax);
    Y *yr = y + rr * ld_y;
    for (long long c0 = c_begin; c0 < c_end; c0 += TILE) {
#if PASS == PASS_APPLY
      load_tile(c0);
#endif
#pragma unroll
      for (int i = 0; i < ITEMS; i++) {
        const long long c = col(i);
        float o[VEC];
#if PASS == PASS_FUSED && KEEPS
#pragma unroll
        for (int k = 0; k < VEC; k++)
          o[k] = ok(i, k) ? f[i][k] * (OP == OP_SOFTMAX ? st.inv_s : qs.inv) : 0.0f;
#else
        float w[VEC], b[VEC];
        column_weights(weight, smooth, c, c_end, w);
        column_biases(bias, c, c_end, b);
#pragma unroll
        for (int k = 0; k < VEC; k++) {
          o[k] = ok(i, k) ? op_output(val(i, k), st, w[k], b[k]) : (OP == OP_LOG_SOFTMAX ? -CKJIT_INF : 0.0f);
#if IS_QUANT
          o[k] *= qs.inv;
#endif
        }
#endif
        store(yr, c, c_end, o);
      }
#if PASS == PASS_FUSED
      break; // the whole row was one tile
#endif
    }
    if (row_ok && t == 0 && chunk == 0) {
#if OP == OP_LAYERNORM
      if (mean_out) mean_out[rr] = st.mean;
#endif
#if OP == OP_LAYERNORM || OP == OP_RMSNORM || OP == OP_RMSNORM_QUANT
      if (rstd_out) rstd_out[rr] = st.rstd;
#endif
#if IS_QUANT
      row_scale[rr] = qs.scale;
#endif
    }
    (void)mean_out;
    (void)rstd_out;
    (void)row_scale;
