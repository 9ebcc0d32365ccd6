// Activation functions in f32, shared by the elementwise ops and the GEMM
// epilogues.
#pragma once
#include "core/prelude.h"

// __expf and __fdividef are the hardware approximations (a few ulps).  The
// forms below have no cancellation where they are used, so they stay within
// a few f32 ulps of the accurate functions at a fraction of the code; for
// 16-bit data the special-function unit, not memory, would otherwise bound
// gelu and silu.  A denominator past 2^126 makes __fdividef return 0, which
// is the right limit in both uses.
CKJIT_INLINE float ckjit_sigmoid(float x) { return __fdividef(1.0f, 1.0f + __expf(-x)); }
// tanh(u) = 1 - 2 / (1 + e^2u): absolute error ~2e-7, and gelu adds 1 to it.
CKJIT_INLINE float ckjit_gelu_tanh(float x) {
  float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return x * (1.0f - __fdividef(1.0f, 1.0f + __expf(2.0f * u)));
}
CKJIT_INLINE float ckjit_gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f)); }

// The epilogue activation of a kernel whose spec has an `act` parameter
// (ACT and the ACT_* constants of abi/gemm_args.h, defined before this
// header): the GEMM epilogues (gemm/epilogue.h, gemm/fp8.cu).
#ifdef ACT
CKJIT_INLINE float activation(float v) {
#if ACT == ACT_RELU
  return v < 0.0f ? 0.0f : v; // NaN stays NaN, as torch.relu
#elif ACT == ACT_GELU_TANH
  return ckjit_gelu_tanh(v);
#elif ACT == ACT_GELU_ERF
  return ckjit_gelu_erf(v);
#elif ACT == ACT_SILU
  return v * ckjit_sigmoid(v);
#elif ACT == ACT_SIGMOID
  return ckjit_sigmoid(v);
#else
  return v;
#endif
}
#endif
