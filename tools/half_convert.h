/* Host-side conversions between f32 and the 16-bit float formats (bf16,
 * IEEE f16), rounding to nearest even, as the device kernels do. */
#ifndef CKJIT_TOOLS_HALF_CONVERT_H
#define CKJIT_TOOLS_HALF_CONVERT_H

#include <stdint.h>

uint16_t half_f32_to_bf16(float f); /* NaN stays a (quiet) NaN */
float half_bf16_to_f32(uint16_t h);
uint16_t half_f32_to_f16(float f);  /* overflow -> inf, tiny -> subnormal/zero */
float half_f16_to_f32(uint16_t h);

#endif
