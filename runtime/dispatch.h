/* Hot path: from spec tuple to a loaded kernel, then a launch. */
#ifndef CKJIT_RUNTIME_DISPATCH_H
#define CKJIT_RUNTIME_DISPATCH_H

#include "abi/abi.h"
#include "kernel_table.h"
#include "runtime.h"

/* Returns the loaded kernel of `spec`, building it on first use (single
 * flight across threads).  On a repeated call: one hash of the tuple and a
 * lock-free lookup; no allocation, lock, disk access or source hashing. */
ckjit_status ckjit__kernel_get(const ckjit_spec *spec, ckjit_runtime **rt, ckjit_kernel **out);

/* Launches on `stream` without synchronizing.  `args` is the kernel's
 * argument struct from kernel_src/abi/ and `params` where each parameter
 * starts in it (its S_params, or ckjit_abi_by_value). */
ckjit_status ckjit__kernel_launch(ckjit_runtime *rt, const ckjit_kernel *k,
                                  const unsigned grid[3], const unsigned block[3],
                                  unsigned shared_bytes, void *stream, const void *args,
                                  const ckjit_abi_params *params);

/* Stream-ordered scratch memory for multi-kernel ops (split reductions):
 * allocated and freed in `stream` order, so no synchronization is needed
 * and the sequence can be captured into a graph. */
ckjit_status ckjit__scratch_alloc(ckjit_runtime *rt, size_t bytes, void *stream, void **ptr);
ckjit_status ckjit__scratch_free(ckjit_runtime *rt, void *ptr, void *stream);

/* Refuses, with CKJIT_ERROR_INVALID_ARGUMENT naming both devices, an operand
 * that is memory of another GPU than ckjit's (ptrs[i] may be NULL: an unused
 * operand).  One driver query per pointer, made only when the device's
 * check_device is on (CKJIT_DEVICE_CHECKS; by default when the process sees more than
 * one GPU: with one, no pointer can belong to another). */
ckjit_status ckjit__check_pointers(const char *api, int n, const void *const *ptrs,
                                   const char *const *names);

#endif
