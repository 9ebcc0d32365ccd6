// Transpose family: out_b[c][r] = in_b[r][c] for every batch b.
//
// Problem:  in_b is rows x cols (row stride ld_in), out_b is cols x rows
//           (row stride ld_out); batch strides bs_in / bs_out (elements).
// Policy:   a TILE x TILE tile per block goes through shared memory; global
//           reads and writes are VEC-element vectors along each side's
//           contiguous dimension, so both directions stay coalesced.  One
//           element of padding per shared row keeps the column reads spread
//           over the banks.  Grid: x = column tiles, y = row tiles, z = batch
//           (grid-stride loops over y and z, 64-bit indices).
// Kernel arguments: CKJIT_TRANSPOSE_ARGS in abi/transpose_args.h.
#include "core/prelude.h"
#include "abi/transpose_args.h"
// @PARAMETERS@

typedef DTYPE T;
#define VPR (TILE / VEC) // vectors per tile row

extern "C" __global__ void __launch_bounds__(THREADS)
ckjit_transpose(const T *__restrict__ in, long long ld_in, long long bs_in, T *__restrict__ out,
                long long ld_out, long long bs_out, long long rows, long long cols,
                long long batch) {
  __shared__ T tile[TILE][TILE + 1];
  const long long c0 = (long long)blockIdx.x * TILE;
  const long long row_tiles = (rows + TILE - 1) / TILE;
  for (long long bt = blockIdx.z; bt < batch; bt += gridDim.z) {
    const T *src = in + bt * bs_in;
    T *dst = out + bt * bs_out;
    for (long long rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
      const long long r0 = rt * TILE;
      // Load: tile rows are input rows, vectors along the input columns.
#pragma unroll
      for (int i = threadIdx.x; i < TILE * VPR; i += THREADS) {
        const int r = i / VPR, cv = (i % VPR) * VEC;
        const long long gr = r0 + r, gc = c0 + cv;
        if (gr < rows) {
          const T *p = src + gr * ld_in + gc;
          if (gc + VEC <= cols) {
            ckjit_vec<T, VEC> v = ckjit_load<T, VEC>(p);
#pragma unroll
            for (int k = 0; k < VEC; k++) tile[r][cv + k] = v.v[k];
          } else {
            for (int k = 0; k < VEC && gc + k < cols; k++) tile[r][cv + k] = p[k];
          }
        }
      }
      __syncthreads();
      // Store: tile columns become output rows, vectors along the input rows.
#pragma unroll
      for (int i = threadIdx.x; i < TILE * VPR; i += THREADS) {
        const int c = i / VPR, rv = (i % VPR) * VEC;
        const long long gc = c0 + c, gr = r0 + rv;
        if (gc < cols) {
          T *p = dst + gc * ld_out + gr;
          if (gr + VEC <= rows) {
            ckjit_vec<T, VEC> v;
#pragma unroll
            for (int k = 0; k < VEC; k++) v.v[k] = tile[rv + k][c];
            ckjit_store<T, VEC>(p, v);
          } else {
            for (int k = 0; k < VEC && gr + k < rows; k++) p[k] = tile[rv + k][c];
          }
        }
      }
      __syncthreads();
    }
  }
}
CKJIT_ABI_KERNEL(ckjit_transpose, CKJIT_TRANSPOSE_ARGS);
