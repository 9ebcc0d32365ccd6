/* The GEMM epilogues' float64 reference, shared by the GEMM GPU suites
 * (test_gemm_gpu.c, and the FP8 ones through fp8_reference.h): the
 * activations as the headers define them, the error slope each adds to an
 * input error, and the relative half-ulp of an output dtype. */
#ifndef CKJIT_TESTS_GPU_GEMM_EPILOGUE_REFERENCE_H
#define CKJIT_TESTS_GPU_GEMM_EPILOGUE_REFERENCE_H

#include <math.h>

#include "ckjit/ckjit.h"

static inline double act_ref(int act, double x) {
  switch (act) {
    case CKJIT_UNARY_RELU: return x > 0 ? x : 0.0;
    case CKJIT_UNARY_GELU_TANH: return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case CKJIT_UNARY_GELU_ERF: return 0.5 * x * (1.0 + erf(x * 0.70710678118654752));
    case CKJIT_UNARY_SILU: return x / (1.0 + exp(-x));
    case CKJIT_UNARY_SIGMOID: return 1.0 / (1.0 + exp(-x));
    default: return x;
  }
}

/* How much an activation can grow an error in its input (a bound of its
 * derivative: 1 for identity / relu, 1.2 for gelu / silu, 0.25 sigmoid). */
static inline double act_slope(int act) {
  return act == CKJIT_UNARY_SIGMOID ? 0.25 : act >= CKJIT_UNARY_GELU_TANH ? 1.2 : 1.0;
}

/* Half an ulp of dt relative to the value (f32 out: 2^-24). */
static inline double out_round(ckjit_dtype dt) {
  return dt == CKJIT_F16 ? 0x1p-11 : dt == CKJIT_BF16 ? 0x1p-8 : 0x1p-24;
}

#endif
