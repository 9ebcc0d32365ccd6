/* Element types as kernel parameters: X-macro lists of (C++ type, name).
 * The host expands them into the names of a type parameter (runtime/spec.h)
 * and the renderer writes the chosen type into the kernel source. */
#ifndef CKJIT_KERNEL_ABI_DTYPES_H
#define CKJIT_KERNEL_ABI_DTYPES_H

#define CKJIT_FLOAT_DTYPES(X) X(float, f32) X(ckjit_half, f16) X(ckjit_bf16, bf16)

#endif
