// reduce family: sum, mean, max, min, argmax, argmin over one dimension.
//
// Problem:  y[o] = OP_{j < len} x[xoff(o) + j * rstride] for o < n_out, in
//           f32.  o is split into up to three kept dims, dim 0 fastest:
//           i0 = o % n0, i1 = (o / n0) % n1, i2 = o / (n0 * n1); then
//           xoff = i0*s0 + i1*s1 + i2*s2 and y's offset yoff = i0*o0 +
//           i1*o1 + i2*o2 (elements).  NaN propagates; argmax/argmin take
//           the first NaN, ties go to the lowest index (PyTorch).
// Modes:    row      the reduced dim is contiguous (or the innermost):
//                    TPR threads per row, THREADS/TPR rows per block;
//                    VEC-element vectors along the row (rstride is 1 when
//                    VEC > 1), UNROLL vectors in flight per thread;
//                    shuffles within a warp, shared memory across warps.
//           col      the reduced dim is strided: blockDim.x threads each
//                    own VEC consecutive outputs along dim 0 (the smallest
//                    x stride: coalesced; VEC > 1 needs s0 == 1 and
//                    n0 % VEC == 0), blockDim.y threads split the reduced
//                    dim; a tree in shared memory combines them.
//           combine  pass 2 of a split: output o reduces the f32 partials
//                    x[o*len .. o*len + len) (indices in pidx) with `group`
//                    threads per output (a runtime value, so one kernel
//                    serves every split).  Requires dtype f32, VEC 1.
// Split:    with nsplit > 1 the reduced range is cut into chunks of `chunk`
//           (a multiple of VEC), one block each; pass 1 (row or col) writes
//           partials pval/pidx[yoff * nsplit + s] instead of y, and the
//           combine pass finishes.  No atomics: results are deterministic.
// Every loop over work is grid-stride over a 1-D grid, indices 64-bit.
// Kernel arguments: CKJIT_REDUCE_ARGS in abi/reduce_args.h.
#include "core/prelude.h"
#include "abi/reduce_args.h"
// @PARAMETERS@

typedef DTYPE T;
typedef YDTYPE YT;

#define WARP CKJIT_WARP_SIZE

typedef ckjit_i64 i64;

CKJIT_INLINE i64 min64(i64 a, i64 b) { return a < b ? a : b; }

#include "rows/reduce_op.h"

CKJIT_INLINE int shfl_xor_int(int v, int m) {
#if defined(CKJIT_NVIDIA)
  return __shfl_xor_sync(0xffffffffu, v, m);
#else
  return __shfl_xor(v, m);
#endif
}

CKJIT_INLINE i64 shfl_xor_i64(i64 v, int m) {
  const unsigned lo = (unsigned)shfl_xor_int((int)(unsigned)(ckjit_u64)v, m);
  const unsigned hi = (unsigned)shfl_xor_int((int)(unsigned)((ckjit_u64)v >> 32), m);
  return (i64)(((ckjit_u64)hi << 32) | lo);
}

// Offsets of flat output o in x and y (see the top).
CKJIT_INLINE void offsets(i64 o, i64 n0, i64 n1, i64 s0, i64 s1, i64 s2, i64 o0, i64 o1, i64 o2,
                          i64 &xo, i64 &yo) {
  if (o < n0) { // one kept dim (the common case): no divisions
    xo = o * s0;
    yo = o * o0;
    return;
  }
  const i64 i0 = o % n0, r = o / n0, i1 = r % n1, i2 = r / n1;
  xo = i0 * s0 + i1 * s1 + i2 * s2;
  yo = i0 * o0 + i1 * o1 + i2 * o2;
}

// Writes a final result to y, or a partial when the reduction is split.
CKJIT_INLINE void finish(void *y, float *pval, i64 *pidx, i64 yo, i64 s, i64 nsplit, i64 count,
                         float v, i64 i) {
  if (nsplit > 1) {
    pval[yo * nsplit + s] = v;
    if (IS_ARG) pidx[yo * nsplit + s] = i;
    return;
  }
#if IS_ARG
  static_cast<YT *>(y)[yo] = (YT)i;
#else
#if OP == OP_MEAN
  v = v / (float)count;
#endif
  static_cast<YT *>(y)[yo] = ckjit_from_float<YT>(v);
#endif
}

#if MODE == MODE_ROW || MODE == MODE_COMBINE
// Combines (v, i) over the `tpr` consecutive threads of each row (tpr a
// power of two); the row's first thread ends with the result.  Every thread
// of the block calls it (shuffles and barriers).
CKJIT_INLINE void row_reduce(float &v, i64 &i, int tpr) {
  for (int m = (tpr < WARP ? tpr : WARP) / 2; m > 0; m /= 2) {
    const float ov = ckjit_shfl_xor(v, m);
    const i64 oi = IS_ARG ? shfl_xor_i64(i, m) : 0;
    merge(v, i, ov, oi);
  }
  if (tpr > WARP) { // block-uniform
    __shared__ float sv[THREADS / 32];
    __shared__ i64 si[IS_ARG ? THREADS / 32 : 1];
    const int warp = threadIdx.x / WARP;
    __syncthreads(); // the previous row's readers are done with sv/si
    if (threadIdx.x % WARP == 0) {
      sv[warp] = v;
      if (IS_ARG) si[warp] = i;
    }
    __syncthreads();
    if (threadIdx.x % tpr == 0)
#pragma unroll 1
      for (int k = 1; k < tpr / WARP; k++) merge(v, i, sv[warp + k], IS_ARG ? si[warp + k] : 0);
  }
}

extern "C" __global__ void __launch_bounds__(THREADS)
ckjit_reduce(const T *__restrict__ x, void *__restrict__ y, float *__restrict__ pval,
             i64 *__restrict__ pidx, i64 n_out, i64 len, i64 rstride, i64 count, i64 n0, i64 n1,
             i64 s0, i64 s1, i64 s2, i64 o0, i64 o1, i64 o2, i64 chunk, i64 nsplit, i64 group) {
#if MODE == MODE_COMBINE
  const int tpr = (int)group;
#else
  const int tpr = TPR;
  (void)group;
#endif
  const int lane = threadIdx.x % tpr, rpb = THREADS / tpr;
  const i64 rs = VEC == 1 ? rstride : 1;
  const i64 groups = (n_out + rpb - 1) / rpb, work = groups * nsplit;
  const i64 step = (i64)tpr * VEC * UNROLL;
  for (i64 w = blockIdx.x; w < work; w += gridDim.x) {
    const i64 g = nsplit == 1 ? w : w / nsplit, s = w - g * nsplit;
    const i64 o = g * rpb + threadIdx.x / tpr;
    const i64 cbeg = s * chunk, cend = min64(len, cbeg + chunk);
    float av[VEC];
    i64 ai[VEC];
    i64 xo = 0, yo = 0;
#if MODE == MODE_COMBINE
    av[0] = identity(), ai[0] = NO_INDEX;
    if (o < n_out) {
      offsets(o, n0, n1, s0, s1, s2, o0, o1, o2, xo, yo);
      for (i64 c0 = cbeg + lane; c0 < cend; c0 += step) {
        float f[UNROLL];
        i64 fi[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
          const i64 c = c0 + (i64)u * tpr;
          f[u] = c < cend ? x[xo + c] : identity();
          fi[u] = IS_ARG && c < cend ? pidx[xo + c] : NO_INDEX;
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) merge(av[0], ai[0], f[u], fi[u]);
      }
    }
#else
    const i64 cfirst = cbeg + (i64)lane * VEC;
#pragma unroll
    for (int k = 0; k < VEC; k++) av[k] = identity(), ai[k] = cfirst + k;
    if (o < n_out) {
      offsets(o, n0, n1, s0, s1, s2, o0, o1, o2, xo, yo);
      const T *xr = x + xo;
      // Whole vectors, UNROLL in flight: all loads first, then the math.
      // A vector that would cross the end reads as the identity.
      for (i64 c0 = cfirst; c0 < cend; c0 += step) {
        float f[UNROLL][VEC];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
          const i64 c = c0 + (i64)u * tpr * VEC;
          if (c + VEC <= cend) {
            if (VEC == 1) {
              f[u][0] = ckjit_to_float(xr[c * rs]);
            } else {
              const ckjit_vec<T, VEC> t = ckjit_load<T, VEC>(xr + c);
#pragma unroll
              for (int k = 0; k < VEC; k++) f[u][k] = ckjit_to_float(t.v[k]);
            }
          } else {
#pragma unroll
            for (int k = 0; k < VEC; k++) f[u][k] = identity();
          }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
#pragma unroll
          for (int k = 0; k < VEC; k++) merge_seq(av[k], ai[k], f[u][k], c0 + (i64)u * tpr * VEC + k);
      }
      // The row's last len % VEC elements (chunks are whole vectors), by the
      // lane whose scan ends with them.
      if (VEC > 1 && cend % VEC != 0) {
        const i64 c = cend - cend % VEC;
        if ((c - cbeg) / VEC % tpr == lane) {
#pragma unroll
          for (int k = 0; k < VEC; k++)
            if (c + k < cend) merge_seq(av[k], ai[k], ckjit_to_float(xr[c + k]), c + k);
        }
      }
    }
#endif
    float v = av[0];
    i64 i = ai[0];
#pragma unroll
    for (int k = 1; k < VEC; k++) merge(v, i, av[k], ai[k]);
    row_reduce(v, i, tpr);
    if (lane == 0 && o < n_out) finish(y, pval, pidx, yo, s, nsplit, count, v, i);
  }
}
#endif

#if MODE == MODE_COL
#include "rows/reduce_col.h"
#endif

// Whichever of the two kernels MODE compiled.
CKJIT_ABI_KERNEL(ckjit_reduce, CKJIT_REDUCE_ARGS);
