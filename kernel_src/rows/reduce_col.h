// The reduce family's col mode, for rows/reduce.cu (included when MODE is
// MODE_COL, after its shared helpers): the reduced dim is strided; see the
// top of rows/reduce.cu.
#pragma once

extern "C" __global__ void __launch_bounds__(THREADS)
ckjit_reduce(const T *__restrict__ x, void *__restrict__ y, float *__restrict__ pval,
             i64 *__restrict__ pidx, i64 n_out, i64 len, i64 rstride, i64 count, i64 n0, i64 n1,
             i64 s0, i64 s1, i64 s2, i64 o0, i64 o1, i64 o2, i64 chunk, i64 nsplit, i64 group) {
  // One state per (thread, output) for the tree over threadIdx.y.
  __shared__ float sv[THREADS * VEC];
  __shared__ i64 si[IS_ARG ? THREADS * VEC : 1];
  (void)group;
  const int tx = threadIdx.x, ty = threadIdx.y, ntx = blockDim.x, nty = blockDim.y;
  const int t = ty * ntx + tx;
  const i64 per_tile = (i64)ntx * VEC;
  const i64 tiles = (n_out + per_tile - 1) / per_tile, work = tiles * nsplit;
  const i64 step = (i64)nty * UNROLL;
  for (i64 w = blockIdx.x; w < work; w += gridDim.x) {
    const i64 g = nsplit == 1 ? w : w / nsplit, s = w - g * nsplit;
    const i64 o = g * per_tile + (i64)tx * VEC;
    const i64 jbeg = s * chunk, jend = min64(len, jbeg + chunk);
    float av[VEC];
    i64 ai[VEC];
#pragma unroll
    for (int k = 0; k < VEC; k++) av[k] = identity(), ai[k] = jbeg + ty; // see merge_seq
    i64 xo = 0, yo = 0;
    if (o < n_out) {
      offsets(o, n0, n1, s0, s1, s2, o0, o1, o2, xo, yo);
      const T *xb = x + xo;
      for (i64 j0 = jbeg + ty; j0 < jend; j0 += step) {
        float f[UNROLL][VEC];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
          const i64 j = j0 + (i64)u * nty;
          if (j < jend) {
            if (VEC == 1) {
              f[u][0] = ckjit_to_float(xb[j * rstride]);
            } else { // VEC outputs of one dim-0 run: contiguous and aligned
              const ckjit_vec<T, VEC> v = ckjit_load<T, VEC>(xb + j * rstride);
#pragma unroll
              for (int k = 0; k < VEC; k++) f[u][k] = ckjit_to_float(v.v[k]);
            }
          } else {
#pragma unroll
            for (int k = 0; k < VEC; k++) f[u][k] = identity();
          }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
#pragma unroll
          for (int k = 0; k < VEC; k++) merge_seq(av[k], ai[k], f[u][k], j0 + (i64)u * nty);
      }
    }
    if (nty > 1) { // block-uniform: a tree over threadIdx.y, row 0 ends with the result
      __syncthreads(); // the previous work item's readers are done
#pragma unroll
      for (int k = 0; k < VEC; k++) {
        sv[t * VEC + k] = av[k];
        if (IS_ARG) si[t * VEC + k] = ai[k];
      }
      for (int n = nty; n > 1;) {
        const int h = (n + 1) / 2;
        __syncthreads();
        if (ty < n - h) {
          const int src = (t + h * ntx) * VEC;
#pragma unroll
          for (int k = 0; k < VEC; k++) {
            merge(av[k], ai[k], sv[src + k], IS_ARG ? si[src + k] : 0);
            sv[t * VEC + k] = av[k];
            if (IS_ARG) si[t * VEC + k] = ai[k];
          }
        }
        n = h;
      }
    }
    if (ty == 0 && o < n_out) {
#pragma unroll
      for (int k = 0; k < VEC; k++)
        if (o + k < n_out) finish(y, pval, pidx, yo + k * o0, s, nsplit, count, av[k], ai[k]);
    }
  }
}
