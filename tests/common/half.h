/* Host-side f16 / bf16 <-> f32 conversions for the tests (round to nearest
 * even; NaN stays NaN; overflow to inf; f16 subnormals handled). */
#ifndef CKJIT_TESTS_HALF_H
#define CKJIT_TESTS_HALF_H

#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#define HALF_UNUSED __attribute__((unused))
#else
#define HALF_UNUSED
#endif

static HALF_UNUSED uint32_t half_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static HALF_UNUSED float half_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static HALF_UNUSED float bf16_to_f32(uint16_t h) { return half_bits_f32((uint32_t)h << 16); }

static HALF_UNUSED uint16_t f32_to_bf16(float f) {
  uint32_t u = half_f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static HALF_UNUSED float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return half_bits_f32(sign | 0x7F800000u | (mant << 13)); /* inf / NaN */
  if (exp == 0) {
    /* zero or subnormal: mant * 2^-24 */
    float v = (float)mant * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return half_bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

static HALF_UNUSED uint16_t f32_to_f16(float f) {
  uint32_t u = half_f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x3FFu)); /* NaN */
  if (a == 0x7F800000u) return (uint16_t)(sign | 0x7C00u);                        /* inf */
  int32_t exp = (int32_t)(a >> 23) - 127;
  if (exp > 15) return (uint16_t)(sign | 0x7C00u); /* overflow (before rounding) */
  if (exp >= -14) {
    /* normal: keep 10 mantissa bits, round to nearest even on the 13 dropped */
    uint32_t mant = a & 0x7FFFFFu;
    uint32_t h = (uint32_t)(exp + 15) << 10 | (mant >> 13);
    uint32_t rest = mant & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++; /* may carry into exp/inf: fine */
    return (uint16_t)(sign | h);
  }
  if (exp < -25) return sign; /* below half the smallest subnormal */
  /* subnormal: value = m * 2^-24 */
  uint32_t mant = (a & 0x7FFFFFu) | 0x800000u; /* 24-bit significand, value = mant * 2^(exp-23) */
  int shift = -exp - 1;                         /* to units of 2^-24: (exp - 23) + 24 = exp + 1 */
  uint32_t h = mant >> shift;
  uint32_t rest = mant & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1u))) h++;
  return (uint16_t)(sign | h);
}

#endif
