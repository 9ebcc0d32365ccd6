// Row access in global memory for the rownorm kernel (rows/rownorm.cu,
// included after its parameters, T and Y): a vector of VEC columns as
// floats, with the row's end tested per element only where the vector
// crosses it.
#pragma once

// Vector of columns [c, c + VEC) as floats; columns at or past `end` read 0.
template <typename S> CKJIT_INLINE void load(const S *p, long long c, long long end, float *out) {
  if (c + VEC <= end) {
    ckjit_vec<S, VEC> v = ckjit_load<S, VEC>(p + c);
#pragma unroll
    for (int k = 0; k < VEC; k++) out[k] = ckjit_to_float(v.v[k]);
  } else {
#pragma unroll
    for (int k = 0; k < VEC; k++) out[k] = c + k < end ? ckjit_to_float(p[c + k]) : 0.0f;
  }
}

template <typename D> CKJIT_INLINE void store(D *p, long long c, long long end, const float *in) {
  ckjit_vec<D, VEC> v;
#if QTYPE == Q_FP8_E4M3
  if (sizeof(D) == 1 && VEC % 2 == 0) { // fp8 pairs: one instruction on sm_89+
#pragma unroll
    for (int k = 0; k < VEC; k += 2) {
      unsigned short two = ckjit_to_e4m3x2(in[k], in[k + 1]);
      v.v[k] = (D)(two & 0xff);
      v.v[k + 1] = (D)(two >> 8);
    }
  } else
#endif
#pragma unroll
  for (int k = 0; k < VEC; k++) convert(in[k], v.v[k]);
  if (c + VEC <= end) {
    ckjit_store<D, VEC>(p + c, v);
  } else {
#pragma unroll
    for (int k = 0; k < VEC; k++)
      if (c + k < end) p[c + k] = v.v[k];
  }
}

// Smoothquant's f32 scales of columns [c, c + VEC): 16-byte loads where aligned.
CKJIT_INLINE void load_scales(const float *s, long long c, long long end, float *out) {
  if (VEC % 4 == 0 && c + VEC <= end && ((ckjit_u64)(s + c) & 15) == 0) {
#pragma unroll
    for (int k = 0; k < VEC; k += 4) {
      ckjit_vec<float, 4> v = ckjit_load<float, 4>(s + c + k);
#pragma unroll
      for (int j = 0; j < 4; j++) out[k + j] = v.v[j];
    }
  } else {
#pragma unroll
    for (int k = 0; k < VEC; k++) out[k] = c + k < end ? s[c + k] : 0.0f;
  }
}
