// Register math the two NVIDIA tensor-core attention kernels share
// (attention/mma.cu, attention/wgmma.cu): the softmax's exponential, the
// rounding of P into 16-bit operand registers, and the row reductions
// over the four lanes of a quad (both the mma.sync C fragment and the
// wgmma accumulator spread a row over a quad).  Needs T.
#pragma once
#include "core/prelude.h"
#if defined(CKJIT_NVIDIA)

// 2^x in one MUFU instruction; 2^-inf = +0, NaN stays NaN.  (exp2f adds
// fix-ups for denormal results; a probability under 2^-126 of its row's
// largest, 1, is lost in l >= 1 and in P V alike.)
CKJIT_INLINE float attn_exp2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// Two f32 values rounded (nearest even) into one register of two T, the
// lower column in the low half: the 16-bit operand layout of mma.sync and
// of wgmma's register A.
CKJIT_INLINE unsigned attn_pack(float lo, float hi) {
  unsigned r;
  if (ckjit_is_bf16<T>)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// A row's max and total over the four lanes of its quad (every lane gets
// the same bits: each step combines the same two values on both sides).
CKJIT_INLINE float attn_quad_max(float v) {
  v = fmaxf(v, ckjit_shfl_xor(v, 1));
  return fmaxf(v, ckjit_shfl_xor(v, 2));
}
CKJIT_INLINE float attn_quad_sum(float v) {
  v += ckjit_shfl_xor(v, 1);
  return v + ckjit_shfl_xor(v, 2);
}

#endif
