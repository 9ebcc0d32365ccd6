// The FP8 GEMM's epilogue (gemm/fp8.cu, which defines TC, BN, OUT_COLS,
// ACC, BIAS, EPI, HAS_C / HAS_D0 / HAS_D1 and the activation before
// including it): D = act(sum * row factor * column factor + beta C + bias
// + D0) * D1, cast to TC and stored.  A thread's
// accumulator 4 j + e is row r0 (+ 8 for e >= 2), column 8 j + 2 (lane %
// 4) + e % 2 of its warp's 16 x BN piece; its factor is row_f[e / 2] times
// the column's entry of col_f (the tile's column scales in shared memory,
// 8-byte aligned; NULL: 1).  Gated: columns j < BN / 16 are the gate's,
// the rest the up's of the same D columns, and D = act(gate) * up.
// Scatter: a row goes to D's row row_ids[m], if any.  EDGE: the tile
// crosses D's last row or column, and every element is checked; inside
// tiles skip the checks (most of an epilogue's instructions otherwise).
#pragma once

// Where a tile's D goes: its expert's D (row 0) and bias, and the rows
// that exist (m, or a MASKED expert's count); the columns are x.n.
struct fp8_out {
  TC *d;
  const TC *bias;
  long long rows;
};

static_assert(!(HAS_C || HAS_D0 || HAS_D1) || (EPI == EPI_PLAIN && MOE == MOE_NONE),
              "C, D0 and D1: plain GEMMs only");

// D's element (m, n) from its sum v and scale factor f (alpha and the
// scales): beta C, bias, D0, activation, D1, in ckjit_gemm's order.  (m, n)
// must be inside D (the bias and the terms are read there).
CKJIT_INLINE float finish(const ckjit_gemm_fp8_args &x, const fp8_out &o, long long m, long long n, float v,
                          float f) {
  v *= f;
#if HAS_C
  v += x.beta * ckjit_to_float(static_cast<const TC *>(x.c)[m * x.ldc + n]);
#endif
#if BIAS == BIAS_ROW
  v += ckjit_to_float(o.bias[m]);
#elif BIAS == BIAS_COL
  v += ckjit_to_float(o.bias[n]);
#endif
#if HAS_D0
  v += ckjit_to_float(static_cast<const TC *>(x.d0)[m * x.ldd0 + n]);
#endif
  v = activation(v);
#if HAS_D1
  v *= ckjit_to_float(static_cast<const TC *>(x.d1)[m * x.ldd1 + n]);
#endif
  (void)x, (void)o, (void)m, (void)n;
  return v;
}

// D's row for the tile's row m (inside the rows): m, or (scatter) its
// routing entry; -1: the row is not stored (padding).
CKJIT_INLINE long long d_row(const ckjit_gemm_fp8_args &x, long long m) {
#if EPI == EPI_SCATTER
  const int id = x.row_ids[m];
  return id >= 0 && id < x.route_entries ? id : -1;
#else
  (void)x;
  return m;
#endif
}

// The column factors of columns c and c + 1 (c even).
CKJIT_INLINE float2 col_factors(const float *col_f, int c) {
  return col_f ? *reinterpret_cast<const float2 *>(col_f + c) : make_float2(1.0f, 1.0f);
}

// The finished values of row r0 + 8 r, columns n and n + 1 (0 outside D).
template <bool EDGE>
CKJIT_INLINE void finish_pair(const ckjit_gemm_fp8_args &x, const fp8_out &o, const float (&sum)[ACC],
                              float row_f, const float *col_f, int r, int j, long long m, long long n,
                              float &o0, float &o1) {
  const int c = 8 * j + 2 * (threadIdx.x % 4);
  const float2 f = col_factors(col_f, c);
  const bool in = !EDGE || m < o.rows;
  o0 = in && (!EDGE || n < x.n) ? finish(x, o, m, n, sum[4 * j + 2 * r], row_f * f.x) : 0.0f;
  o1 = in && (!EDGE || n + 1 < x.n) ? finish(x, o, m, n + 1, sum[4 * j + 2 * r + 1], row_f * f.y) : 0.0f;
#if GATED // times the up half's (no bias: the front-end refuses one)
  const float2 fu = col_factors(col_f, c + BN / 2);
  o0 *= sum[4 * (j + BN / 16) + 2 * r] * row_f * fu.x;
  o1 *= sum[4 * (j + BN / 16) + 2 * r + 1] * row_f * fu.y;
#endif
}

// f32 D: two adjacent columns a store, straight from the registers.
template <bool EDGE>
CKJIT_INLINE void store_direct(const ckjit_gemm_fp8_args &x, const fp8_out &o, const float (&sum)[ACC],
                               const float (&row_f)[2], const float *col_f, long long r0,
                               long long n0) {
  const int lane = threadIdx.x % 32;
  const bool pairs = x.ldd % 2 == 0 && reinterpret_cast<unsigned long long>(o.d) % (2 * sizeof(TC)) == 0;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const long long m = r0 + 8 * r;
    if (EDGE && m >= o.rows) continue;
    const long long dm = d_row(x, m);
    if (dm < 0) continue;
    TC *row = o.d + dm * x.ldd;
#pragma unroll
    for (int j = 0; j < OUT_COLS / 8; j++) {
      const long long n = n0 + j * 8 + 2 * (lane % 4);
      if (EDGE && n >= x.n) continue;
      float o0, o1;
      finish_pair<EDGE>(x, o, sum, row_f[r], col_f, r, j, m, n, o0, o1);
      if (pairs && (!EDGE || n + 1 < x.n)) {
        ckjit_vec<TC, 2> v;
        v.v[0] = ckjit_from_float<TC>(o0);
        v.v[1] = ckjit_from_float<TC>(o1);
        ckjit_store<TC, 2>(row + n, v);
      } else {
        row[n] = ckjit_from_float<TC>(o0);
        if (n + 1 < x.n) row[n + 1] = ckjit_from_float<TC>(o1);
      }
    }
  }
}

// 16-bit D: the warp's rows packed into registers, then 64 columns at a
// time through its staging buffer `stage` (stmatrix: lane l addresses row
// l % 8 of 8 x 8 matrix l / 8; 16-byte pieces XOR-swizzled by row), read
// back a 16-byte piece of one row per lane and stored whole where D's
// alignment and edge allow, element by element where not.
template <bool EDGE>
CKJIT_INLINE void store_staged(const ckjit_gemm_fp8_args &x, const fp8_out &o, const float (&sum)[ACC],
                               const float (&row_f)[2], const float *col_f, long long r0,
                               long long n0, unsigned stage) {
  const int lane = threadIdx.x % 32;
  unsigned v[2][OUT_COLS / 8]; // rows r0 and r0 + 8, two columns a register
#pragma unroll
  for (int r = 0; r < 2; r++) {
#pragma unroll
    for (int j = 0; j < OUT_COLS / 8; j++) {
      float o0, o1;
      finish_pair<EDGE>(x, o, sum, row_f[r], col_f, r, j, r0 + 8 * r, n0 + j * 8 + 2 * (lane % 4), o0,
                        o1);
      ckjit_vec<TC, 2> p;
      p.v[0] = ckjit_from_float<TC>(o0);
      p.v[1] = ckjit_from_float<TC>(o1);
      v[r][j] = *reinterpret_cast<const unsigned *>(&p);
    }
  }
  const long long row0 = r0 - lane / 4; // the warp's first row
  const bool whole = x.ldd % 8 == 0 && reinterpret_cast<unsigned long long>(o.d) % 16 == 0;
  const int srow = 8 * (lane / 8 % 2) + lane % 8;
#pragma unroll
  for (int slab = 0; slab < OUT_COLS / 64; slab++) {
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const int chunk = 2 * k + lane / 16;
      stmatrix_x4(stage + srow * 128 + ((chunk ^ (srow % 8)) << 4), v[0][8 * slab + 2 * k],
                  v[1][8 * slab + 2 * k], v[0][8 * slab + 2 * k + 1], v[1][8 * slab + 2 * k + 1]);
    }
    __syncwarp();
#pragma unroll
    for (int it = 0; it < 4; it++) { // 16 rows x 8 pieces over 32 lanes
      const int idx = lane + 32 * it, row = idx / 8, chunk = idx % 8;
      uint4 piece;
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(piece.x), "=r"(piece.y), "=r"(piece.z), "=r"(piece.w)
                   : "r"(stage + row * 128 + ((chunk ^ (row % 8)) << 4)));
      const long long m = row0 + row, n = n0 + 64 * slab + 8 * chunk;
      if (EDGE && (m >= o.rows || n >= x.n)) continue;
      const long long dm = d_row(x, m);
      if (dm < 0) continue;
      TC *d = o.d + dm * x.ldd + n;
      if (whole && (!EDGE || n + 8 <= x.n)) {
        *reinterpret_cast<uint4 *>(d) = piece;
      } else {
        const TC *e = reinterpret_cast<const TC *>(&piece);
        for (int i = 0; i < 8 && n + i < x.n; i++) d[i] = e[i];
      }
    }
    __syncwarp();
  }
}

// The tile's epilogue: the checked form only on tiles at D's edges.
CKJIT_INLINE void store_tile(const ckjit_gemm_fp8_args &x, const fp8_out &o, const float (&sum)[ACC],
                             const float (&row_f)[2], const float *col_f, long long m0, long long n0,
                             long long r0, unsigned stage) {
  const bool edge = m0 + 128 > o.rows || n0 + OUT_COLS > x.n;
  if constexpr (sizeof(TC) == 2) {
    if (edge) store_staged<true>(x, o, sum, row_f, col_f, r0, n0, stage);
    else store_staged<false>(x, o, sum, row_f, col_f, r0, n0, stage);
  } else {
    (void)stage;
    if (edge) store_direct<true>(x, o, sum, row_f, col_f, r0, n0);
    else store_direct<false>(x, o, sum, row_f, col_f, r0, n0);
  }
}
