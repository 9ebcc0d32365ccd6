// Rownorm family: per-row softmax, log-softmax, layernorm, rmsnorm and the
// rowwise dynamically quantizing rmsnorm and smoothquant.
//
// Problem:  each row of h (x, or x + residual rounded to T) is reduced to a
//           few statistics (max and sum of exponentials; mean and M2; sum of
//           squares; max |value|), which then transform the row.  f32 math.
// Policy:   a group of ROW_THREADS threads owns a row; each thread moves
//           ITEMS vectors of VEC elements per tile (a tile is
//           ROW_THREADS * VEC * ITEMS columns).  THREADS / ROW_THREADS
//           groups share a block.
// Pipeline: PASS_FUSED: the row is one tile, kept on chip (in registers,
//           or with SMEM_TILE in shared memory): load, reduce within the
//           group, write.  Rows too long for that (or too few to
//           fill the GPU) are split into chunks of chunk_cols columns, one
//           block per (chunk, row), over several launches: PASS_STATS writes
//           each chunk's statistics to `partials`, PASS_AMAX (quantizing
//           rmsnorm only) the chunk's max |y|, and PASS_APPLY folds a row's
//           partials and writes its chunk.  Partials are folded in a fixed
//           order, so results do not depend on scheduling.
// Epilogue: weight / bias, or rowwise quantization to int8 / fp8 e4m3.
//
// Kernel arguments (in this order):
//   const T *x, long long ld_x, const T *res, long long ld_res,
//   T *sum_out, long long ld_sum, const T *weight, const T *bias,
//   const float *smooth, Y *y, long long ld_y, float *mean_out,
//   float *rstd_out, float *row_scale, const int *valid_cols, float alpha,
//   float *partials, long long rows, long long cols, long long chunk_cols,
//   long long n_chunks
// alpha is the softmax scale or the norms' eps; Y is T, or the quantized
// type; split passes launch grid (n_chunks, rows), the fused pass a 1D grid.
#include "ckjit_prelude.h"

#define OP_SOFTMAX 0
#define OP_LOG_SOFTMAX 1
#define OP_LAYERNORM 2
#define OP_RMSNORM 3
#define OP_RMSNORM_QUANT 4
#define OP_SMOOTHQUANT 5
#define Q_NONE 0
#define Q_I8 1
#define Q_FP8_E4M3 2
#define PASS_FUSED 0
#define PASS_STATS 1
#define PASS_AMAX 2
#define PASS_APPLY 3

typedef @DTYPE@ T;
#define OP @OP@
#define QTYPE @QTYPE@
#define RESIDUAL @RESIDUAL@
#define AFFINE @AFFINE@ // 0: none, 1: weight, 2: weight and bias
#define THREADS @THREADS@
#define ROW_THREADS @ROW_THREADS@
#define VEC @VEC@
#define ITEMS @ITEMS@
#define PASS @PASS@
// SMEM_TILE: the fused pass keeps its tile in shared memory (filled by
// cp.async on sm_80+) instead of registers, which frees the registers that
// otherwise limit occupancy (layernorm spilled above 1024 threads/SM).
#define SMEM_TILE @SMEM_TILE@

#define IS_SOFTMAX (OP == OP_SOFTMAX || OP == OP_LOG_SOFTMAX)
#define IS_QUANT (OP == OP_RMSNORM_QUANT || OP == OP_SMOOTHQUANT)
#define GROUPS (THREADS / ROW_THREADS)
#define WARPS (THREADS / CKJIT_WARP_SIZE)
#define LANES (ROW_THREADS < CKJIT_WARP_SIZE ? ROW_THREADS : CKJIT_WARP_SIZE)
#define TILE ((long long)ROW_THREADS * VEC * ITEMS)
// Ops whose fused pass keeps a computed value per element (the exponential,
// the value to quantize) in f32 registers instead of recomputing it.
#define KEEPS (OP == OP_SOFTMAX || IS_QUANT)

// ---- softmax arithmetic ----------------------------------------------------
// Softmax works on z = scale * h rounded to f32 (torch.softmax(x * scale) on
// f32), and every exponent is z - max(z) with z computed the same way as the
// max.  So the max element's exponent is exactly 0 and exp(0) = 1: a row of
// one valid element gives exactly 1 (log-softmax exactly 0), and a row of n
// equal values sums to exactly n (n <= 2^24), giving 1/n and -log(n) rounded
// once.  Two things broke this: fmaf(h, scale, -max) (it subtracts the max
// from the exact product, leaving the product's rounding error as the max
// element's exponent: log-softmax of one element came out ~1e-8), and the
// compilers contracting h * scale - max into that same fma on their own.
CKJIT_INLINE float softmax_z(float h, float scale) {
#if defined(CKJIT_NVIDIA)
  return __fmul_rn(h, scale); // documented never to be contracted into an fma
#else
#pragma clang fp contract(off)
  return h * scale;
#endif
}

// e^d for the softmax (d <= 0): __expf, 2^(d * log2 e) on the special-function
// unit, exactly 1 at d = 0.  Its error, 2 + 1.16|d| ulps (d * log2 e is rounded
// first), is of the order of the u|d| that rounding d = z - max already costs,
// and is large only in relative terms for the probabilities far below the
// largest.  expf (2 ulps) made the softmax instruction-bound: bf16 at
// 0.89-0.94 of the bandwidth on an H100 (bench/NOTES.md #80).
CKJIT_INLINE float softmax_exp(float d) { return __expf(d); }

#if QTYPE == Q_FP8_E4M3
typedef unsigned char Y;
#define QMAX 448.0f
CKJIT_INLINE void convert(float f, Y &out) { out = ckjit_to_e4m3(f); }
#elif QTYPE == Q_I8
typedef signed char Y;
#define QMAX 127.0f
CKJIT_INLINE void convert(float f, Y &out) { out = ckjit_to_i8(f); }
#else
typedef T Y;
#endif
CKJIT_INLINE void convert(float f, T &out) { out = ckjit_from_float<T>(f); }

// ---- statistics ----------------------------------------------------------
// Every statistic is up to three floats with a commutative merge, so the
// xor-butterfly leaves bit-identical results in every thread of a group.
// Macros, not an enum: the preprocessor selects code by KIND (in #if an
// enum name would silently read as 0).
#define KIND_SOFTMAX 0
#define KIND_MOMENTS 1
#define KIND_SUM 2
#define KIND_MAX 3
struct stat { float a, b, c; }; // softmax: max, sum of exp(v - max)
                                // moments: count, mean, M2 (Chan et al.)
                                // sum: a; max: a (NaN-propagating)
#if IS_SOFTMAX
#define KIND KIND_SOFTMAX
#elif OP == OP_LAYERNORM
#define KIND KIND_MOMENTS
#elif OP == OP_SMOOTHQUANT
#define KIND KIND_MAX
#else
#define KIND KIND_SUM
#endif

template <int K> CKJIT_INLINE stat stat_empty() {
  stat s = {K == KIND_SOFTMAX || K == KIND_MAX ? -CKJIT_INF : 0.0f, 0.0f, 0.0f};
  return s;
}

template <int K> CKJIT_INLINE stat merge(stat x, stat y) {
  stat r = x;
  if (K == KIND_SOFTMAX) {
    r.a = ckjit_nan_max(x.a, y.a);
    // A part with max -inf holds no value (its sum is 0); skipping it avoids -inf - -inf.
    // Equal maxima rescale by exactly exp(0) = 1, so sums of equal values stay exact.
    float sx = x.a == -CKJIT_INF ? 0.0f : x.b * softmax_exp(x.a - r.a);
    float sy = y.a == -CKJIT_INF ? 0.0f : y.b * softmax_exp(y.a - r.a);
    r.b = sx + sy;
  } else if (K == KIND_MOMENTS) {
    if (x.a == 0.0f) return y;
    if (y.a == 0.0f) return x;
    r.a = x.a + y.a;
    float d = y.b - x.b;
    r.b = (x.a * x.b + y.a * y.b) / r.a;
    r.c = x.c + y.c + d * d * (x.a * y.a / r.a);
  } else if (K == KIND_SUM) {
    r.a = x.a + y.a;
  } else {
    r.a = ckjit_nan_max(x.a, y.a);
  }
  return r;
}

// Shared memory for the cross-warp step: two buffers used in turn, so a
// reduction needs one barrier, not two (the barrier of the reduction in
// between separates the last readers of a buffer from its next writers).
struct reducer {
  float (*smem)[3][WARPS];
  int buf;
};

// How many of a stat's floats a kind uses: shuffles are not removed as dead
// code, so the unused ones must not be moved at all.
CKJIT_INLINE constexpr int stat_fields(int k) {
  return k == KIND_MOMENTS ? 3 : k == KIND_SOFTMAX ? 2 : 1;
}

template <int K> CKJIT_INLINE stat shfl_stat(const stat &s, int m) {
  stat o = {ckjit_shfl_xor(s.a, m), 0.0f, 0.0f};
  if (stat_fields(K) > 1) o.b = ckjit_shfl_xor(s.b, m);
  if (stat_fields(K) > 2) o.c = ckjit_shfl_xor(s.c, m);
  return o;
}

// Combines the group's statistics; every thread of the group gets the same
// result.  Every thread of the block must call it (it may synchronize).
template <int K> CKJIT_INLINE stat group_combine(stat s, reducer &red) {
#pragma unroll
  for (int m = LANES / 2; m > 0; m /= 2) s = merge<K>(s, shfl_stat<K>(s, m));
#if ROW_THREADS > CKJIT_WARP_SIZE
  // The group's warps leave one partial each; then lane j of every warp
  // reads partial j of its group and the lanes fold them by shuffles.
  const int per_group = ROW_THREADS / CKJIT_WARP_SIZE;
  const int warp = threadIdx.x / CKJIT_WARP_SIZE, lane = threadIdx.x % CKJIT_WARP_SIZE;
  float(*sm)[WARPS] = red.smem[red.buf];
  red.buf ^= 1;
  if (lane == 0) {
    sm[0][warp] = s.a;
    if (stat_fields(K) > 1) sm[1][warp] = s.b;
    if (stat_fields(K) > 2) sm[2][warp] = s.c;
  }
  __syncthreads();
  const int j = warp / per_group * per_group + lane % per_group;
  stat r = {sm[0][j], stat_fields(K) > 1 ? sm[1][j] : 0.0f, stat_fields(K) > 2 ? sm[2][j] : 0.0f};
#pragma unroll
  for (int m = per_group / 2; m > 0; m /= 2) r = merge<K>(r, shfl_stat<K>(r, m));
  s = r;
#endif
  return s;
}

// ---- row access --------------------------------------------------------------
// Vector of columns [c, c + VEC) as floats; columns at or past `end` read 0.
template <typename S> CKJIT_INLINE void load(const S *p, long long c, long long end, float *out) {
  if (c + VEC <= end) {
    ckjit_vec<S, VEC> v = ckjit_load<S, VEC>(p + c);
#pragma unroll
    for (int k = 0; k < VEC; k++) out[k] = ckjit_to_float(v.v[k]);
  } else {
#pragma unroll
    for (int k = 0; k < VEC; k++) out[k] = c + k < end ? ckjit_to_float(p[c + k]) : 0.0f;
  }
}

template <typename D> CKJIT_INLINE void store(D *p, long long c, long long end, const float *in) {
  ckjit_vec<D, VEC> v;
#if QTYPE == Q_FP8_E4M3
  if (sizeof(D) == 1 && VEC % 2 == 0) { // fp8 pairs: one instruction on sm_89+
#pragma unroll
    for (int k = 0; k < VEC; k += 2) {
      unsigned short two = ckjit_to_e4m3x2(in[k], in[k + 1]);
      v.v[k] = (D)(two & 0xff);
      v.v[k + 1] = (D)(two >> 8);
    }
  } else
#endif
#pragma unroll
  for (int k = 0; k < VEC; k++) convert(in[k], v.v[k]);
  if (c + VEC <= end) {
    ckjit_store<D, VEC>(p + c, v);
  } else {
#pragma unroll
    for (int k = 0; k < VEC; k++)
      if (c + k < end) p[c + k] = v.v[k];
  }
}

// Smoothquant's f32 scales of columns [c, c + VEC): 16-byte loads where aligned.
CKJIT_INLINE void load_scales(const float *s, long long c, long long end, float *out) {
  if (VEC % 4 == 0 && c + VEC <= end && ((ckjit_u64)(s + c) & 15) == 0) {
#pragma unroll
    for (int k = 0; k < VEC; k += 4) {
      ckjit_vec<float, 4> v = ckjit_load<float, 4>(s + c + k);
#pragma unroll
      for (int j = 0; j < 4; j++) out[k + j] = v.v[j];
    }
  } else {
#pragma unroll
    for (int k = 0; k < VEC; k++) out[k] = c + k < end ? s[c + k] : 0.0f;
  }
}

// 16 bytes global -> shared without passing through registers (sm_80+).
CKJIT_INLINE void copy_async16(void *smem, const void *gmem) {
#if defined(CKJIT_NVIDIA) && __CUDA_ARCH__ >= 800
  unsigned s;
  ckjit_u64 g;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(s) : "l"(smem));
  asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(gmem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g) : "memory");
#else
  *(uint4 *)smem = *(const uint4 *)gmem;
#endif
}

CKJIT_INLINE void copy_async_wait() {
#if defined(CKJIT_NVIDIA) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// ---- the per-op transforms ---------------------------------------------------
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
#if AFFINE >= 1
  o *= w;
#endif
#if AFFINE == 2
  o += b;
#endif
  (void)w;
  (void)b;
  return o;
#endif
}

// Calls f(i, k) for element k of each vector i of this thread's part of a
// tile (fully unrolled: the tile's arrays stay in registers).
template <class F> CKJIT_INLINE void each(F f) {
#pragma unroll
  for (int i = 0; i < ITEMS; i++)
#pragma unroll
    for (int k = 0; k < VEC; k++) f(i, k);
}

// Statistics of this thread's values in a tile: val(i, k) is the value of
// element k of vector i, ok(i, k) whether it takes part.
template <class Val, class Ok> CKJIT_INLINE stat tile_stat(Val val, Ok ok) {
  stat s = stat_empty<KIND>();
#if KIND == KIND_SOFTMAX
  float m = -CKJIT_INF;
  each([&](int i, int k) { if (ok(i, k)) m = ckjit_nan_max(m, val(i, k)); });
  float sum = 0.0f;
  each([&](int i, int k) {
    if (ok(i, k) && val(i, k) != -CKJIT_INF) sum += softmax_exp(val(i, k) - m); // -inf - -inf
  });
  s.a = m;
  s.b = sum;
#elif KIND == KIND_MOMENTS
  float n = 0.0f, sum = 0.0f;
  each([&](int i, int k) { if (ok(i, k)) n += 1.0f, sum += val(i, k); });
  if (n > 0.0f) {
    float mean = sum / n, m2 = 0.0f;
    each([&](int i, int k) {
      float d = val(i, k) - mean;
      if (ok(i, k)) m2 += d * d;
    });
    s.a = n;
    s.b = mean;
    s.c = m2;
  }
#elif KIND == KIND_SUM
  each([&](int i, int k) { if (ok(i, k)) s.a += val(i, k) * val(i, k); });
#else
  each([&](int i, int k) { if (ok(i, k)) s.a = ckjit_nan_max(s.a, fabsf(val(i, k))); });
#endif
  return s;
}

CKJIT_INLINE float group_sum(float v, reducer &smem) {
  stat s = {v, 0.0f, 0.0f};
  return group_combine<KIND_SUM>(s, smem).a;
}

CKJIT_INLINE float group_max(float v, reducer &smem) {
  stat s = {v, 0.0f, 0.0f};
  return group_combine<KIND_MAX>(s, smem).a;
}

// The fused pass's statistics of the norms (softmax's are in the kernel,
// next to the exponentials it keeps): the row is on chip, so they are plain
// group sums in the textbook order (mean, then the sum of squared
// deviations from it: exact two-pass variance), cheaper than merging
// (count, mean, M2) triples.
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

struct quant_scale { float inv, scale; };
CKJIT_INLINE quant_scale quant_of(float amax) {
  // A zero row gets scale 1 (and zeros); NaN propagates into the scale.
  quant_scale q;
#if IS_QUANT
  q.inv = amax == 0.0f ? 0.0f : QMAX / amax;
  q.scale = amax == 0.0f ? 1.0f : amax / QMAX;
#else
  (void)amax;
  q.inv = q.scale = 1.0f;
#endif
  return q;
}

// ---- the kernel ---------------------------------------------------------------
// OCCUPANCY resident threads per multiprocessor at least, so that the loads
// of several rows stay in flight (left alone, the compiler took up to 115
// registers: 2 blocks of 256).  0: no bound.  HIP's second bound means
// something else, so it is NVIDIA only.
#define OCCUPANCY @OCCUPANCY@
#if defined(CKJIT_NVIDIA) && OCCUPANCY > 0
#define BOUNDS __launch_bounds__(THREADS, (OCCUPANCY + THREADS - 1) / THREADS)
#else
#define BOUNDS __launch_bounds__(THREADS)
#endif

extern "C" __global__ void BOUNDS
ckjit_rownorm(const T *x, long long ld_x, const T *res, long long ld_res, T *sum_out,
              long long ld_sum, const T *__restrict__ weight, const T *__restrict__ bias,
              const float *__restrict__ smooth, Y *y, long long ld_y, float *mean_out,
              float *rstd_out, float *row_scale, const int *__restrict__ valid_cols, float alpha,
              float *partials, long long rows, long long cols, long long chunk_cols,
              long long n_chunks) {
  __shared__ float red_smem[2][3][WARPS];
#if SMEM_TILE
  __shared__ ckjit_vec<T, VEC> tile_sm[ITEMS][THREADS];
#endif
  reducer smem = {red_smem, 0};
  const int t = threadIdx.x % ROW_THREADS;
  // Per-column parameters of vector i (at column c) of the current tile.
  auto get_w = [&](long long c, long long end, float *w) {
#if OP == OP_SMOOTHQUANT
    load_scales(smooth, c, end, w);
#elif AFFINE >= 1
    load(weight, c, end, w);
#else
    (void)c, (void)end;
#pragma unroll
    for (int k = 0; k < VEC; k++) w[k] = 1.0f;
#endif
  };
  auto get_b = [&](long long c, long long end, float *b) {
#if AFFINE == 2
    load(bias, c, end, b);
#else
    (void)c, (void)end;
#pragma unroll
    for (int k = 0; k < VEC; k++) b[k] = 0.0f;
#endif
  };
#if PASS == PASS_FUSED
  for (long long rb = blockIdx.x; rb * GROUPS < rows; rb += gridDim.x) {
    const long long r = rb * GROUPS + threadIdx.x / ROW_THREADS;
    const bool row_ok = r < rows; // groups past the end still join the block's syncs
    const long long rr = row_ok ? r : 0;
    const long long c_begin = 0, c_end = row_ok ? cols : 0;
    const long long chunk = 0;
#else
  for (long long r = blockIdx.y; r < rows; r += gridDim.y) {
    const bool row_ok = true;
    const long long rr = r, chunk = blockIdx.x;
    const long long c_begin = chunk * chunk_cols;
    const long long c_end = c_begin + chunk_cols < cols ? c_begin + chunk_cols : cols;
#endif
    const T *xr = x + rr * ld_x;
#if RESIDUAL
    const T *resr = res + rr * ld_res;
#endif
    // Columns that take part: a softmax mask shortens the row.
    long long valid_end = c_end;
#if IS_SOFTMAX
    if (valid_cols && row_ok) {
      long long vc = valid_cols[rr];
      if (vc < valid_end) valid_end = vc < c_begin ? c_begin : vc;
    }
#endif
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
    // first load before it issued the next one.
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
    // them (a branch per vector cost smoothquant a fifth of its bandwidth).
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
#if SMEM_TILE
        copy_async_wait();
#endif
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
#if SMEM_TILE
      copy_async_wait();
#endif
    };

    row_stats st;
    float amax = 0.0f;
#if PASS == PASS_FUSED
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
        for (int i = 0; i < ITEMS; i++) get_w(col(i), c_end, p[i]);
      }
#endif
#pragma unroll
      for (int i = 0; i < ITEMS; i++) {
#if OP == OP_SMOOTHQUANT
        const float *w = p[i];
#else
        float w[VEC]; // the weights a vector at a time: registers are short here
        get_w(col(i), c_end, w);
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
#elif PASS == PASS_STATS || PASS == PASS_AMAX
    stat acc = stat_empty<KIND>();
#else
    stat acc = stat_empty<KIND>(), acc_amax = stat_empty<KIND_MAX>();
#endif
#if PASS == PASS_AMAX || PASS == PASS_APPLY
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
#endif

#if PASS == PASS_STATS || PASS == PASS_AMAX
    // Statistics of this chunk, tile by tile.
    stat part = stat_empty<PASS == PASS_AMAX ? KIND_MAX : KIND>();
    for (long long c0 = c_begin; c0 < c_end; c0 += TILE) {
      load_tile(c0);
#if PASS == PASS_AMAX
#pragma unroll
      for (int i = 0; i < ITEMS; i++) {
        float w[VEC] = {}, b[VEC] = {};
#if AFFINE >= 1
        load(weight, col(i), c_end, w);
#endif
#pragma unroll
        for (int k = 0; k < VEC; k++)
          if (ok(i, k)) part.a = ckjit_nan_max(part.a, fabsf(op_output(val(i, k), st, w[k], b[k])));
      }
#else
      part = merge<KIND>(part, tile_stat(val, ok));
#endif
    }
    part = group_combine<PASS == PASS_AMAX ? KIND_MAX : KIND>(part, smem);
    if (threadIdx.x == 0) {
#if PASS == PASS_AMAX
      partials[rows * n_chunks * 2 + rr * n_chunks + chunk] = part.a;
#elif KIND == KIND_MOMENTS
      partials[(rr * n_chunks + chunk) * 2] = part.b;
      partials[(rr * n_chunks + chunk) * 2 + 1] = part.c;
#else
      partials[(rr * n_chunks + chunk) * 2] = part.a;
      partials[(rr * n_chunks + chunk) * 2 + 1] = part.b;
#endif
    }
#else
    // Output: the fused pass has its tile in registers; the apply pass
    // streams its chunk again.
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
        get_w(c, c_end, w);
        get_b(c, c_end, b);
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
#endif
  }
}
