#include "half_convert.h"

#include <string.h>

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t half_f32_to_bf16(float f) {
  uint32_t u = bits_of(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN */
  u += 0x7FFFu + ((u >> 16) & 1u); /* round to nearest even */
  return (uint16_t)(u >> 16);
}

float half_bf16_to_f32(uint16_t h) { return float_of((uint32_t)h << 16); }

uint16_t half_f32_to_f16(float f) {
  uint32_t u = bits_of(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x3FFu)); /* NaN */
  if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* rounds to >= 65520: inf */
  if (a < 0x38800000u) {
    /* Subnormal or zero in f16: value = m * 2^-24 with m < 1024. */
    if (a < 0x33000000u) return (uint16_t)sign; /* < 2^-25: rounds to zero */
    uint32_t e = a >> 23;                       /* 102 .. 112 */
    uint32_t m = (a & 0x7FFFFFu) | 0x800000u;   /* 24-bit significand */
    uint32_t shift = 126u - e;                  /* 14 .. 24 */
    uint32_t h = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  /* Normal: rebias the exponent (127 -> 15) and round the mantissa to 10 bits. */
  uint32_t h = (a - 0x38000000u) >> 13;
  uint32_t rem = a & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* may carry into the exponent */
  return (uint16_t)(sign | h);
}

float half_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1Fu;
  uint32_t m = h & 0x3FFu;
  if (e == 0x1F) return float_of(sign | 0x7F800000u | (m << 13)); /* inf / NaN */
  if (e == 0) {
    if (m == 0) return float_of(sign);
    /* Subnormal: m * 2^-24. */
    float v = (float)m * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return float_of(sign | ((e + 112u) << 23) | (m << 13));
}
