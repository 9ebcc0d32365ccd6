/* A TMA tensor map across the host/kernel boundary: the driver's
 * CUtensorMap, 128 bytes, 64-byte aligned, filled on the host
 * (ckjit_device.tensor_map_encode) and read by the kernel's TMA copies
 * (core/tma.h).  Kernels take it inside their by-value argument. */
#ifndef CKJIT_KERNEL_ABI_TENSOR_MAP_H
#define CKJIT_KERNEL_ABI_TENSOR_MAP_H

#ifdef __cplusplus
#define CKJIT_ALIGN_64 alignas(64)
#else
#define CKJIT_ALIGN_64 _Alignas(64)
#endif
typedef struct ckjit_tensor_map {
  CKJIT_ALIGN_64 unsigned long long v[16];
} ckjit_tensor_map;

#endif
