// Part of ckjit_rownorm's row loop (rows/rownorm.cu), included there, not a
// header: passes amax and apply start from the row's statistics, folded
// from the partials of all its chunks (rows/rownorm_loop_chunk_partials.h
// writes them).  Sets st (and, in the quantizing ops' apply pass, amax).
#if PASS == PASS_AMAX
    stat acc = stat_empty<KIND>();
#else
    stat acc = stat_empty<KIND>(), acc_amax = stat_empty<KIND_MAX>();
#endif
    // Fold the row's chunk partials: each thread a strided subset, in order.
    {
      const float *pr = partials + rr * n_chunks * 2;
      for (long long j = t; j < n_chunks; j += ROW_THREADS) {
        stat p = {pr[2 * j], pr[2 * j + 1], 0.0f};
#if KIND == KIND_MOMENTS
        const long long cb = j * chunk_cols, ce = cb + chunk_cols < cols ? cb + chunk_cols : cols;
        p.c = p.b;
        p.b = p.a;
        p.a = (float)(ce - cb);
#endif
        acc = merge<KIND>(acc, p);
      }
      finish_stats(group_combine<KIND>(acc, smem), cols, alpha, st);
#if PASS == PASS_APPLY && OP == OP_RMSNORM_QUANT
      const float *pa = partials + rows * n_chunks * 2 + rr * n_chunks;
      for (long long j = t; j < n_chunks; j += ROW_THREADS) {
        stat p = {pa[j], 0.0f, 0.0f};
        acc_amax = merge<KIND_MAX>(acc_amax, p);
      }
      amax = group_combine<KIND_MAX>(acc_amax, smem).a;
#elif PASS == PASS_APPLY && OP == OP_SMOOTHQUANT
      amax = st.amax;
#endif
    }
