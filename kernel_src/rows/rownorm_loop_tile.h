// Part of ckjit_rownorm's row loop (rows/rownorm.cu), included there, not a
// header: the row's on-chip tile (rows/rownorm_tile.h).  Defines
//   tile_vec(i), put_vec(i, v)  vector i of this thread's part of the tile;
//   col(i)                      its first column;
//   ok(i, k), val(i, k)         whether its element k takes part, and the
//                               value the op works on there;
//   load_tile(c0)               loads the tile starting at column c0 (x, or
//                               x + residual, also written to sum_out by the
//                               passes that read the residual);
// from the loop's xr, resr, rr, c_begin, c_end, valid_end and t.
    // The tile is kept as raw T vectors (h is T-rounded by definition), half
    // the space of floats for 16-bit types; values are converted where they
    // are used.  In registers, or in shared memory (each thread reads only
    // its own slots, so no barrier is needed).
#if SMEM_TILE
    auto tile_vec = [&](int i) -> ckjit_vec<T, VEC> { return tile_sm[i][threadIdx.x]; };
    auto put_vec = [&](int i, const ckjit_vec<T, VEC> &v) { tile_sm[i][threadIdx.x] = v; };
#else
    // Kept as whole words: 16-bit elements split into registers of their
    // own at the join after the loads, which made every thread wait for its
    // first load before it issued the next one (bench/NOTES.md #31).
    typedef typename ckjit_word<sizeof(T) * VEC>::type W;
    union word_vec { W w; ckjit_vec<T, VEC> v; };
    W raw[ITEMS];
    auto tile_vec = [&](int i) -> ckjit_vec<T, VEC> { word_vec u; u.w = raw[i]; return u.v; };
    auto put_vec = [&](int i, const ckjit_vec<T, VEC> &v) { word_vec u; u.v = v; raw[i] = u.w; };
#endif
    int n_ok[ITEMS]; // how many leading elements of vector i take part (32-bit tests per element)
    long long tile_c0 = c_begin;
    auto col = [&](int i) { return tile_c0 + ((long long)i * ROW_THREADS + t) * VEC; };
    // full: the whole tile lies inside the row (and its mask), so nothing
    // needs a per-element test and the loads go out with no branch between
    // them (bench/NOTES.md #30).
    bool full = false;
    auto ok = [&](int i, int k) { return full || k < n_ok[i]; };
    auto val = [&](int i, int k) {
      return op_value(ckjit_to_float(tile_vec(i).v[k]), col(i) + k, smooth, alpha);
    };
    // Loads the tile starting at column c0 (columns past the chunk read 0).
    auto load_tile = [&](long long c0) {
      tile_c0 = c0;
      full = c0 + TILE <= valid_end;
#if !RESIDUAL
      if (full) {
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
#if SMEM_TILE
          if (sizeof(ckjit_vec<T, VEC>) == 16)
            copy_async16(&tile_sm[i][threadIdx.x], xr + col(i));
          else
#endif
            put_vec(i, ckjit_load<T, VEC>(xr + col(i)));
        }
        tile_wait();
        return;
      }
#endif
#pragma unroll
      for (int i = 0; i < ITEMS; i++) {
        const long long c = col(i);
        n_ok[i] = c + VEC <= valid_end ? VEC : c >= valid_end ? 0 : (int)(valid_end - c);
#if RESIDUAL
        float xv[VEC], rv[VEC];
        load(xr, c, c_end, xv);
        load(resr, c, c_end, rv);
        ckjit_vec<T, VEC> h;
#pragma unroll
        for (int k = 0; k < VEC; k++) h.v[k] = ckjit_from_float<T>(xv[k] + rv[k]);
        put_vec(i, h);
#if PASS == PASS_FUSED || PASS == PASS_STATS
        if (sum_out) {
          T *sr = sum_out + rr * ld_sum;
          if (c + VEC <= c_end) {
            ckjit_store<T, VEC>(sr + c, h);
          } else {
#pragma unroll
            for (int k = 0; k < VEC; k++)
              if (c + k < c_end) sr[c + k] = h.v[k];
          }
        }
#endif
#else
        if (c + VEC <= c_end) {
#if SMEM_TILE
          if (sizeof(ckjit_vec<T, VEC>) == 16)
            copy_async16(&tile_sm[i][threadIdx.x], xr + c);
          else
#endif
            put_vec(i, ckjit_load<T, VEC>(xr + c));
        } else {
          ckjit_vec<T, VEC> h;
#pragma unroll
          for (int k = 0; k < VEC; k++) h.v[k] = c + k < c_end ? xr[c + k] : T{};
          put_vec(i, h);
        }
#endif
      }
      tile_wait();
    };
