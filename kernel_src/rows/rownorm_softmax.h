// The softmax arithmetic of the rownorm kernel (rows/rownorm.cu): the
// scaled value z and the exponential, the same in every pass.
#pragma once

// Softmax works on z = scale * h rounded to f32 (torch.softmax(x * scale) on
// f32), and every exponent is z - max(z) with z computed the same way as the
// max.  So the max element's exponent is exactly 0 and exp(0) = 1: a row of
// one valid element gives exactly 1 (log-softmax exactly 0), and a row of n
// equal values sums to exactly n (n <= 2^24), giving 1/n and -log(n) rounded
// once.  Two things broke this: fmaf(h, scale, -max) (it subtracts the max
// from the exact product, leaving the product's rounding error as the max
// element's exponent: log-softmax of one element came out ~1e-8), and the
// compilers contracting h * scale - max into that same fma on their own.
CKJIT_INLINE float softmax_z(float h, float scale) {
#if defined(CKJIT_NVIDIA)
  return __fmul_rn(h, scale); // documented never to be contracted into an fma
#else
#pragma clang fp contract(off)
  return h * scale;
#endif
}

// e^d for the softmax (d <= 0): __expf, 2^(d * log2 e) on the special-function
// unit, exactly 1 at d = 0.  Its error, 2 + 1.16|d| ulps (d * log2 e is rounded
// first), is of the order of the u|d| that rounding d = z - max already costs,
// and is large only in relative terms for the probabilities far below the
// largest.  expf (2 ulps) made the softmax instruction-bound (bench/NOTES.md
// #80).
CKJIT_INLINE float softmax_exp(float d) { return __expf(d); }
