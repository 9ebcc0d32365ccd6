/* GPU architecture names: parsing, validation, compatibility. */
#ifndef CKJIT_RUNTIME_ARCH_H
#define CKJIT_RUNTIME_ARCH_H

#include <stddef.h>
#include "ckjit/ckjit.h"

#define CKJIT_ARCH_MAX 64

/* Vendor an arch name belongs to by its syntax: "sm_90", "sm_90a" -> CUDA;
 * "gfx90a", "gfx90a:sramecc+:xnack-" -> HIP; anything malformed -> AUTO. */
ckjit_backend ckjit__arch_vendor(const char *arch);

/* Checks that `arch` is well formed and that the compiler identified by
 * `compiler_major`/`compiler_minor` (NVRTC or hipRTC version; 0,0 = unknown)
 * can compile for it without crashing.  On failure sets the error
 * (CKJIT_ERROR_UNSUPPORTED) and returns it. */
ckjit_status ckjit__arch_validate(const char *arch, int compiler_major, int compiler_minor);

/* The compute capability of a CUDA arch name (90 for "sm_90" and "sm_90a"),
 * or -1 for any other name. */
int ckjit__arch_cuda_cc(const char *arch);

/* The processor part of an arch ("gfx90a" of "gfx90a:xnack-"; "sm_90" of "sm_90a"). */
void ckjit__arch_base(const char *arch, char *out, size_t len);

/* 1 when a code object built for `kernel_arch` can run on `device_arch`. */
int ckjit__arch_compatible(const char *kernel_arch, const char *device_arch);

#endif
