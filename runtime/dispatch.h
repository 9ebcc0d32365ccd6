/* Hot path: from spec tuple to a loaded kernel, then a launch. */
#ifndef CKJIT_RUNTIME_DISPATCH_H
#define CKJIT_RUNTIME_DISPATCH_H

#include "abi/abi.h"
#include "kernel_table.h"
#include "runtime.h"

/* The GPU an op on `stream` runs on: the stream's owner (its context on
 * CUDA, its device on HIP).  The default stream is the calling thread's
 * current context's, or the default device's (CKJIT_DEVICE) when no
 * context is current.  With one GPU an explicit stream is not asked (it
 * can only be that GPU's); with more, one cuStreamGetCtx per call.  A
 * stream of a context that is not a device's primary one gets
 * CKJIT_ERROR_INVALID_ARGUMENT. */
ckjit_status ckjit__stream_gpu(void *stream, ckjit_gpu **gpu);

/* The current device: the GPU of the calling thread's current context,
 * whether or not it is the primary one (the memory helpers then run in
 * the device's primary context), or the default device when none is
 * current. */
ckjit_status ckjit__current_gpu(ckjit_gpu **gpu);

/* Returns the loaded kernel of `spec` on `gpu`, building it on first use
 * (single flight across threads).  On a repeated call: one hash of the
 * tuple and a lock-free lookup in the GPU's own table; no allocation,
 * lock, disk access or source hashing. */
ckjit_status ckjit__kernel_get(ckjit_gpu *gpu, const ckjit_spec *spec, ckjit_kernel **out);

/* Launches on `stream` (a stream of `gpu`) without synchronizing.  `args`
 * is the kernel's argument struct from kernel_src/abi/ and `params` where
 * each parameter starts in it (its S_params, or ckjit_abi_by_value).
 * `cluster`: blocks per cluster along x (1: none; more only where
 * gpu->device.clusters). */
ckjit_status ckjit__kernel_launch(ckjit_gpu *gpu, const ckjit_kernel *k, const unsigned grid[3],
                                  const unsigned block[3], unsigned cluster,
                                  unsigned shared_bytes, void *stream,
                                  const void *args, const ckjit_abi_params *params);

/* Stream-ordered scratch memory for multi-kernel ops (split reductions):
 * allocated and freed in `stream` order, so no synchronization is needed
 * and the sequence can be captured into a graph. */
ckjit_status ckjit__scratch_alloc(ckjit_gpu *gpu, size_t bytes, void *stream, void **ptr);
ckjit_status ckjit__scratch_free(ckjit_gpu *gpu, void *ptr, void *stream);

/* With CKJIT_DEVICE_CHECKS=1: refuses, with CKJIT_ERROR_INVALID_ARGUMENT
 * naming both devices, an operand that is memory of another GPU than
 * `stream`'s (ptrs[i] may be NULL: an unused operand).  One driver query
 * per pointer; off by default (bench/NOTES.md has its cost). */
ckjit_status ckjit__check_pointers(void *stream, const char *api, int n, const void *const *ptrs,
                                   const char *const *names);

#endif
