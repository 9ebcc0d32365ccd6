"""Read roofline of the GPU for the GEMM decode shapes (bench/NOTES.md #51).

Times read-only kernels over a 8192 x 8192 16-bit matrix (128 MiB, the B of
16x8192x8192) and a 4096 x 4096 one (32 MiB, the B of 128x4096x4096), cold
L2, medians of 20 runs, with CuPy:
  flat   16-byte loads over the whole matrix, grid-stride
  strip  each block reads a strip of columns (the GEMM tile's pattern) over
         a share of the rows
The flat number bounds every kernel that must read B once.

usage: python3 bench/read_roofline.py   (on the GPU machine; CuPy needed)
"""
import cupy as cp
import numpy as np

SRC = r'''
extern "C" __global__ void strip(const int4* __restrict__ b, float* out, int ldv, int rows, int colv, int split) {
  const int tiles = ldv / colv, tile = blockIdx.x % tiles, s = blockIdx.x / tiles;
  const int r0 = s * (rows / split), r1 = r0 + rows / split;
  float acc = 0.f;
  const int4* p = b + (long long)tile * colv + threadIdx.x % colv;
  #pragma unroll 8
  for (int r = r0 + threadIdx.x / colv; r < r1; r += blockDim.x / colv) {
    const int4 v = __ldg(p + (long long)r * ldv);
    acc += __int_as_float(v.x) + __int_as_float(v.y) + __int_as_float(v.z) + __int_as_float(v.w);
  }
  if (acc == 1.2345f) out[0] = acc;  // never true: keeps the loads
}
extern "C" __global__ void flat(const int4* __restrict__ b, float* out, long long n) {
  float acc = 0.f;
  #pragma unroll 8
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const int4 v = __ldg(b + i);
    acc += __int_as_float(v.x) + __int_as_float(v.y) + __int_as_float(v.z) + __int_as_float(v.w);
  }
  if (acc == 1.2345f) out[0] = acc;
}
'''


def main():
    mod = cp.RawModule(code=SRC)
    print(cp.cuda.runtime.getDeviceProperties(0)['name'].decode())
    for k in (8192, 4096):
        measure(mod, k, k)


def measure(mod, k, n):
    strip, flat = mod.get_function('strip'), mod.get_function('flat')
    b = cp.zeros((k, n), dtype=cp.uint16)
    out = cp.zeros(1, cp.float32)
    flush = cp.zeros(256 << 20, cp.uint8)
    ldv = n // 8  # int4s per row

    def median_us(fn, grid, block, args):
        ts = []
        for _ in range(20):
            flush.fill(1)
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            fn((grid,), (block,), args)
            e1.record()
            e1.synchronize()
            ts.append(cp.cuda.get_elapsed_time(e0, e1) * 1e3)
        return float(np.median(ts))

    for grid in (132 * 4, 132 * 16):
        us = median_us(flat, grid, 512, (b, out, np.int64(k * n // 8)))
        print(f"{k}x{n} flat   blocks={grid}: {us:.1f} us  {k * n * 2 / us / 1e3:.0f} GB/s")
    for colv, split, block in ((8, 1, 1024), (8, 8, 256), (16, 8, 512), (32, 16, 512)):
        tiles = ldv // colv
        us = median_us(strip, tiles * split, block,
                       (b, out, np.int32(ldv), np.int32(k), np.int32(colv), np.int32(split)))
        print(f"{k}x{n} strip  {colv * 8} columns, {split} row shares, {block} threads: {us:.1f} us  "
              f"{k * n * 2 / us / 1e3:.0f} GB/s")


if __name__ == '__main__':
    main()
