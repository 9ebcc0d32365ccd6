/* GPU architecture names: parsing, validation, compatibility. */
#ifndef CKJIT_RUNTIME_ARCH_H
#define CKJIT_RUNTIME_ARCH_H

#include <stddef.h>
#include "ckjit/ckjit.h"

#define CKJIT_ARCH_MAX 64

/* Vendor an arch name belongs to by its syntax: "sm_90", "sm_90a" -> CUDA;
 * "gfx90a", "gfx90a:sramecc+:xnack-" -> HIP; anything malformed -> AUTO. */
ckjit_backend ckjit__arch_vendor(const char *arch);

/* The cheap check, made before the disk lookup without loading a compiler:
 * `arch` is well formed, and for AMD a processor and features that the
 * hipRTC of `compiler_major`/`compiler_minor` (0,0 = unknown) can compile for
 * without crashing.  Which NVIDIA names are real targets is left to
 * ckjit__arch_check_nvrtc.  On failure sets the error
 * (CKJIT_ERROR_UNSUPPORTED) and returns it. */
ckjit_status ckjit__arch_validate(const char *arch, int compiler_major, int compiler_minor);

/* The NVIDIA check against the loaded NVRTC, made right before a compile:
 * the compute capability must be one of `ccs` (nvrtcGetSupportedArchs;
 * n_ccs 0 when NVRTC lacks the query), an 'a' suffix needs sm_90+ and NVRTC
 * 12.0+, an 'f' suffix sm_100+ and NVRTC 12.9+ (`nvrtc_major/minor`: the
 * loaded library's nvrtcVersion).  CKJIT_ERROR_UNSUPPORTED, naming the
 * supported list, otherwise.  Other names go to ckjit__arch_validate. */
ckjit_status ckjit__arch_check_nvrtc(const char *arch, const int *ccs, int n_ccs, int nvrtc_major,
                                     int nvrtc_minor);
#define CKJIT_ARCH_LIST_MAX 512

/* The one spelling of `arch` that keys, entry metadata, records and the
 * tools use: AMD target features in LLVM's target-ID order (sorted by name:
 * "gfx90a:sramecc+:xnack-" for "gfx90a:xnack-:sramecc+").  Writes it to
 * `out` and returns `out`; returns `arch` itself when it has one spelling
 * already (CUDA) or is malformed (the validator refuses it as given). */
const char *ckjit__arch_canonical(const char *arch, char out[CKJIT_ARCH_MAX]);

/* The compute capability of a CUDA arch name (90 for "sm_90" and "sm_90a"),
 * or -1 for any other name. */
int ckjit__arch_cuda_cc(const char *arch);

/* The processor part of an arch ("gfx90a" of "gfx90a:xnack-"; "sm_90" of "sm_90a"). */
void ckjit__arch_base(const char *arch, char *out, size_t len);

/* 1 when a code object built for `kernel_arch` can run on `device_arch`. */
int ckjit__arch_compatible(const char *kernel_arch, const char *device_arch);

/* Which tensor-core instructions `arch` (a valid arch name) has: the
 * families' `targets` (elsewhere their sources build an empty kernel).
 * mma.sync: sm_80 and newer; wgmma: sm_90 / sm_90a; MFMA: gfx908,
 * gfx90a and gfx94x. */
int ckjit__arch_has_mma_sync(const char *arch);
int ckjit__arch_has_wgmma(const char *arch);
int ckjit__arch_has_mfma(const char *arch);

#endif
