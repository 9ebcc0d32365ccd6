// The statistics of the rownorm kernel (rows/rownorm.cu, included after its
// parameters): what each op reduces a row to, how two partial statistics
// merge, and their combination across a group of threads.
#pragma once

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

CKJIT_INLINE float group_sum(float v, reducer &smem) {
  stat s = {v, 0.0f, 0.0f};
  return group_combine<KIND_SUM>(s, smem).a;
}

CKJIT_INLINE float group_max(float v, reducer &smem) {
  stat s = {v, 0.0f, 0.0f};
  return group_combine<KIND_MAX>(s, smem).a;
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
