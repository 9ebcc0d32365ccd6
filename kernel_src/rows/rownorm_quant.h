// Rowwise dynamic quantization of the rownorm kernel (rows/rownorm.cu,
// included after its parameters and its T): the output element type Y and
// the conversion of one value to it, and a row's scale from its max |y|.
#pragma once

#if QTYPE == Q_FP8_E4M3
typedef unsigned char Y;
#define QMAX 448.0f
CKJIT_INLINE void convert(float f, Y &out) { out = ckjit_to_e4m3(f); }
#elif QTYPE == Q_I8
typedef signed char Y;
#define QMAX 127.0f
CKJIT_INLINE void convert(float f, Y &out) { out = ckjit_to_i8(f); }
#else
typedef T Y;
#endif
CKJIT_INLINE void convert(float f, T &out) { out = ckjit_from_float<T>(f); }

struct quant_scale { float inv, scale; };
CKJIT_INLINE quant_scale quant_of(float amax) {
  // A zero row gets scale 1 (and zeros); NaN propagates into the scale.
  quant_scale q;
#if IS_QUANT
  q.inv = amax == 0.0f ? 0.0f : QMAX / amax;
  q.scale = amax == 0.0f ? 1.0f : amax / QMAX;
#else
  (void)amax;
  q.inv = q.scale = 1.0f;
#endif
  return q;
}
