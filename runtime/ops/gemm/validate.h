/* GEMM descriptors' checks (validate.c). */
#ifndef CKJIT_RUNTIME_OPS_GEMM_VALIDATE_H
#define CKJIT_RUNTIME_OPS_GEMM_VALIDATE_H

#include "ckjit/ckjit.h"

/* `g` is a valid descriptor (operands addressable; with
 * CKJIT_DEVICE_CHECKS=1, memory of the stream's device); the error names
 * `api`. */
ckjit_status ckjit__gemm_check_desc(const char *api, const ckjit_gemm_desc *g, void *stream);

/* `count` valid descriptors that one grouped launch can run: batch 1,
 * split_k 0 or 1, and the same dtypes, orders, epilogue kind and
 * allow_tf32 as problem 0; the error names the problem. */
ckjit_status ckjit__gemm_check_grouped(const char *api, const ckjit_gemm_desc *descs, int count,
                                       void *stream);

#endif
