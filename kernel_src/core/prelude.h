// ckjit device prelude: the portability layer every kernel includes.
// One kernel source compiles with NVRTC (NVIDIA) and hipRTC (AMD) through
// these few definitions; vendor headers are avoided to keep compiles fast.
#pragma once

#if defined(__HIPCC_RTC__) || defined(__HIP__) || defined(__HIP_DEVICE_COMPILE__)
#define CKJIT_AMD 1
#else
#define CKJIT_NVIDIA 1
#endif

#if defined(CKJIT_AMD)
#ifdef __AMDGCN_WAVEFRONT_SIZE
#define CKJIT_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define CKJIT_WARP_SIZE 64
#endif
#else
#define CKJIT_WARP_SIZE 32
#endif

#define CKJIT_INLINE __device__ inline __attribute__((always_inline))

// A by-value kernel parameter whose address is taken (indexed) without a
// per-thread copy: __grid_constant__ on NVIDIA sm_70+; AMD reads kernel
// arguments from memory anyway.
#if defined(CKJIT_NVIDIA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
#define CKJIT_GRID_CONSTANT __grid_constant__
#else
#define CKJIT_GRID_CONSTANT
#endif

typedef long long ckjit_i64;
typedef unsigned long long ckjit_u64;

// ---- 16-bit floating-point storage types ---------------------------------
struct ckjit_half { unsigned short bits; };
struct ckjit_bf16 { unsigned short bits; };
// Whether a storage type is bf16 (the one question the kernels' instruction
// choices ask of T).  A constexpr variable, so no symbol reaches a code
// object (a struct's static member would, renaming gemm/problem.h's own
// is_bf16 trait in every GEMM cubin's symbol table; it stays until the
// bench/spec-fingerprints.txt baseline is next rewritten).
template <typename T> constexpr bool ckjit_is_bf16 = false;
template <> constexpr bool ckjit_is_bf16<ckjit_bf16> = true;

CKJIT_INLINE float ckjit_to_float(float x) { return x; }

CKJIT_INLINE float ckjit_to_float(ckjit_half x) {
#if defined(CKJIT_NVIDIA)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
#else
  _Float16 h;
  __builtin_memcpy(&h, &x.bits, 2);
  return (float)h;
#endif
}

CKJIT_INLINE float ckjit_to_float(ckjit_bf16 x) {
  return __uint_as_float((unsigned)x.bits << 16);
}

template <typename T> CKJIT_INLINE T ckjit_from_float(float f);

template <> CKJIT_INLINE float ckjit_from_float<float>(float f) { return f; }

template <> CKJIT_INLINE ckjit_half ckjit_from_float<ckjit_half>(float f) {
  ckjit_half r;
#if defined(CKJIT_NVIDIA)
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.bits) : "f"(f));
#else
  _Float16 h = (_Float16)f;
  __builtin_memcpy(&r.bits, &h, 2);
#endif
  return r;
}

template <> CKJIT_INLINE ckjit_bf16 ckjit_from_float<ckjit_bf16>(float f) {
  ckjit_bf16 r;
#if defined(CKJIT_NVIDIA) && __CUDA_ARCH__ >= 800
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(f));
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    r.bits = (unsigned short)((u >> 16) | 0x40u); // quiet NaN, sign kept
  } else {
    u += 0x7fffu + ((u >> 16) & 1u); // round to nearest even
    r.bits = (unsigned short)(u >> 16);
  }
#endif
  return r;
}

// ---- vector access -------------------------------------------------------
// A VEC-element vector of T moves as one naturally aligned 1/2/4/8/16-byte
// access.  The caller guarantees the alignment (the host policy checks it).
template <int BYTES> struct ckjit_word;
template <> struct ckjit_word<1> { typedef unsigned char type; };
template <> struct ckjit_word<2> { typedef unsigned short type; };
template <> struct ckjit_word<4> { typedef unsigned int type; };
// The compilers' own vector types: a plain struct of four words is stored
// as four 4-byte stores, uint4 as one 16-byte store.
template <> struct ckjit_word<8> { typedef uint2 type; };
template <> struct ckjit_word<16> { typedef uint4 type; };

template <typename T, int VEC> struct alignas(sizeof(T) * VEC) ckjit_vec {
  T v[VEC];
};

template <typename T, int VEC>
CKJIT_INLINE ckjit_vec<T, VEC> ckjit_load(const T *p) {
  typedef typename ckjit_word<sizeof(T) * VEC>::type W;
  union { W w; ckjit_vec<T, VEC> v; } u;
  u.w = *reinterpret_cast<const W *>(p);
  return u.v;
}

template <typename T, int VEC>
CKJIT_INLINE void ckjit_store(T *p, const ckjit_vec<T, VEC> &v) {
  typedef typename ckjit_word<sizeof(T) * VEC>::type W;
  union { W w; ckjit_vec<T, VEC> v; } u;
  u.v = v;
  *reinterpret_cast<W *>(p) = u.w;
}

// ---- warp shuffles ---------------------------------------------------------
CKJIT_INLINE float ckjit_shfl_xor(float v, int mask) {
#if defined(CKJIT_NVIDIA)
  return __shfl_xor_sync(0xffffffffu, v, mask);
#else
  return __shfl_xor(v, mask);
#endif
}

CKJIT_INLINE float ckjit_warp_sum(float v) {
  for (int m = CKJIT_WARP_SIZE / 2; m > 0; m /= 2) v += ckjit_shfl_xor(v, m);
  return v;
}

// ---- special values ---------------------------------------------------------
#define CKJIT_INF __int_as_float(0x7f800000)

CKJIT_INLINE float ckjit_warp_max(float v) {
  for (int m = CKJIT_WARP_SIZE / 2; m > 0; m /= 2) v = fmaxf(v, ckjit_shfl_xor(v, m));
  return v;
}

// ---- math (f32) ------------------------------------------------------------
// NaN-propagating max/min (torch.maximum semantics; fmaxf drops NaN).  One
// instruction on sm_80+, where the result NaN is the canonical one.
CKJIT_INLINE float ckjit_nan_max(float a, float b) {
#if defined(CKJIT_NVIDIA) && __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return a != a ? a : (b != b ? b : fmaxf(a, b));
#endif
}
CKJIT_INLINE float ckjit_nan_min(float a, float b) {
#if defined(CKJIT_NVIDIA) && __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return a != a ? a : (b != b ? b : fminf(a, b));
#endif
}
// ---- quantized storage -------------------------------------------------------
// int8: round half to even; NaN becomes 0.  The caller keeps f within
// [-127.5, 127.5] (a rowwise scale does), so the range stays symmetric
// without a clamp; beyond it NVIDIA saturates to [-128, 127].
CKJIT_INLINE signed char ckjit_to_i8(float f) {
#if defined(CKJIT_NVIDIA)
  int r;
  asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(r) : "f"(f));
  return (signed char)r;
#else
  if (f != f) return 0;
  return (signed char)(int)rintf(fminf(fmaxf(f, -127.0f), 127.0f));
#endif
}

// fp8 e4m3 (OCP "e4m3fn": bias 7, largest 448, no infinity, NaN 0x7F):
// round half to even, saturate to +-448; NaN stays NaN (sign kept).
CKJIT_INLINE unsigned char ckjit_to_e4m3(float f) {
  unsigned u = __float_as_uint(f);
  const unsigned sign = (u >> 24) & 0x80u;
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return (unsigned char)(sign | 0x7fu);
  const float a = __uint_as_float(u);
  if (a >= 448.0f) return (unsigned char)(sign | 0x7eu);
  if (a < 0.015625f) // below 2^-6: subnormal steps of 2^-9 (8 steps is the smallest normal)
    return (unsigned char)(sign | (unsigned)rintf(a * 512.0f));
  u += 0x7ffffu + ((u >> 20) & 1u); // round the mantissa to 3 bits, ties to even
  unsigned code = (u >> 20) - (120u << 3); // exponent bias 127 -> 7
  return (unsigned char)(sign | (code > 0x7eu ? 0x7eu : code));
}

// e4m3 to f32, exactly (every e4m3 value is a float; 0x7F / 0xFF: NaN).
CKJIT_INLINE float ckjit_from_e4m3(unsigned char b) {
  const unsigned e = (b >> 3) & 15u, m = b & 7u;
  float v;
  if ((b & 0x7fu) == 0x7fu) v = __uint_as_float(0x7fc00000u);
  else if (e == 0) v = (float)m * 0.001953125f; // subnormal: m * 2^-9
  else v = __uint_as_float(((e + 120u) << 23) | (m << 20));
  return __uint_as_float(__float_as_uint(v) | ((unsigned)(b & 0x80u) << 24));
}

// Two e4m3 values at once (lo, hi bytes) with the sm_89+ instruction, which
// rounds and saturates as ckjit_to_e4m3 does (NaN: 0x7F).
CKJIT_INLINE unsigned short ckjit_to_e4m3x2(float lo, float hi) {
#if defined(CKJIT_NVIDIA) && __CUDA_ARCH__ >= 890
  unsigned short r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return (unsigned short)(ckjit_to_e4m3(lo) | (ckjit_to_e4m3(hi) << 8));
#endif
}
