/* Small integer helpers shared by the op front-ends' tile policies. */
#ifndef CKJIT_RUNTIME_BASE_INT_MATH_H
#define CKJIT_RUNTIME_BASE_INT_MATH_H

#include <stdint.h>

static inline int ckjit__is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

/* a / b rounded up, for a >= 0, b > 0. */
static inline int64_t ckjit__ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The smallest power of two >= v (1 for v <= 1). */
static inline int64_t ckjit__pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

#endif
