/* The wgmma pipeline's tensor maps (TMA descriptors). */
#ifndef CKJIT_RUNTIME_OPS_GEMM_TMA_H
#define CKJIT_RUNTIME_OPS_GEMM_TMA_H

#include "abi/gemm_args.h"
#include "plan.h"

/* Whether A and B of `g` can be read through TMA descriptors: a driver that
 * makes them, no broadcast batch (a zero stride), k > 0, and extents whose
 * box coordinates fit 32 bits.  (16-byte alignment is the plan's vec 8.) */
int ckjit__gemm_tma_ok(const ckjit_gpu *gpu, const ckjit_gemm_desc *g);

/* TMA descriptors for the wgmma pipeline, 3-D (the batch is the outer
 * dimension), in the boxes its stages take: 128 bytes of K (64 16-bit or
 * 32 f32 elements) x BM rows of a K-contiguous A (x BN of B), or 64 x 64
 * panels of an M/N-contiguous (16-bit) one; and (when map_d is given) D's,
 * in boxes of 128 bytes x 128 rows.  For a `g` that passed
 * ckjit__gemm_tma_ok.  Returns the tma parameter: 1 (A and B) or 2 (A, B
 * and D: D's rows and batch entries 16-byte aligned), or 0 when the driver
 * refused A's or B's descriptor (with its status and message). */
int ckjit__gemm_encode_maps(ckjit_gpu *gpu, const ckjit_gemm_desc *g, const gemm_plan *pl,
                            ckjit_tensor_map *map_a, ckjit_tensor_map *map_b,
                            ckjit_tensor_map *map_d);

/* Whether the kernel may take D's maps when grouped: its argument over
 * 4 KiB needs CUDA 12.1+, which NVRTC 13 implies (its cubins need a 13.0
 * driver).  Asked once: the compiler's identity is fixed for the process. */
int ckjit__gemm_large_arguments_ok(void);

#endif
