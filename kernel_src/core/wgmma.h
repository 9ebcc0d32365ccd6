// Hopper warpgroup MMA (wgmma, sm_90a) wrappers: the shared-memory matrix
// descriptor, the fence / commit / wait of the asynchronous groups, and
// one m64 x N x one-K-step instruction per type and N.  Include only where
// __CUDA_ARCH_FEAT_SM90_ALL is defined (NVRTC's sm_90a): the instructions
// exist nowhere else.
#pragma once
#include "core/prelude.h"
#if defined(CKJIT_NVIDIA)

// Shared-memory matrix descriptor, 128-byte swizzle: start address, the
// byte distance between 64-column panels (lbo; M/N-contiguous operands) and
// between groups of eight 128-byte rows (sbo).
CKJIT_INLINE ckjit_u64 wgmma_smem_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return (ckjit_u64)((addr & 0x3ffff) >> 4) | (ckjit_u64)(lbo >> 4) << 16 |
         (ckjit_u64)(sbo >> 4) << 32 | 1ull << 62;
}

CKJIT_INLINE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
CKJIT_INLINE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> CKJIT_INLINE void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Pins accumulator registers at a wgmma group boundary: the compiler may
// not move their reads or writes across it (a read inside a group in
// flight would make ptxas serialize the products, C7514).
template <int N> CKJIT_INLINE void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; i++) asm volatile("" : "+f"(r[i])::"memory");
}
// The same for A fragments in registers: placed after the wait for the
// wgmma that read them, it keeps them live (their registers unused by
// anything else) until then.
template <int N> CKJIT_INLINE void fence_regs(unsigned (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; i++) asm volatile("" : "+r"(r[i])::"memory");
}

// One wgmma, m64 x N x one K step, into the accumulator d[N / 2] of each
// thread.  The PTX operands are the accumulators %0 .., then the two
// descriptors and (16-bit types) the transposes: their lists are spelled out
// per N, and one macro writes each type's function.  tf32 reads K-major
// operands only, so it has no transposes.
// The accumulator operands, "+f" (d += A B) or, with C "=f", written only
// (d = A B: scale-d 0, the first K step of a product from zero).
#define WG_ACC4_(C, i) C(d[i]), C(d[i + 1]), C(d[i + 2]), C(d[i + 3])
#define WG_ACC16_(C, i) WG_ACC4_(C, i), WG_ACC4_(C, i + 4), WG_ACC4_(C, i + 8), WG_ACC4_(C, i + 12)
#define WG_ACC4(i) WG_ACC4_("+f", i)
#define WG_ACC16(i) WG_ACC16_("+f", i)
#define WG_ACC_64_(C) WG_ACC16_(C, 0), WG_ACC16_(C, 16)
#define WG_ACC_128_(C) WG_ACC_64_(C), WG_ACC16_(C, 32), WG_ACC16_(C, 48)
#define WG_ACC_256_(C) WG_ACC_128_(C), WG_ACC16_(C, 64), WG_ACC16_(C, 80), WG_ACC16_(C, 96), WG_ACC16_(C, 112)
#define WG_ACC_80_(C) WG_ACC_64_(C), WG_ACC4_(C, 32), WG_ACC4_(C, 36)
#define WG_ACC_176_(C) WG_ACC_128_(C), WG_ACC16_(C, 64), WG_ACC4_(C, 80), WG_ACC4_(C, 84)
#define WG_ACC_64 WG_ACC_64_("+f")
#define WG_ACC_128 WG_ACC_128_("+f")
#define WG_ACC_256 WG_ACC_256_("+f")
#define WG_OPS_64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33"
#define WG_OPS_128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65"
#define WG_OPS_256 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129"
#define WG_OPS_96 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, %48, %49"
#define WG_OPS_192 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, %96, %97"
#define WG_TRANS_96 ", %50, %51"
#define WG_TRANS_192 ", %98, %99"
#define WG_ACC_96 WG_ACC_64, WG_ACC16(32)
#define WG_ACC_192 WG_ACC_128, WG_ACC16(64), WG_ACC16(80)
#define WG_OPS_80 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39}, %40, %41"
#define WG_TRANS_80 ", %42, %43"
#define WG_OPS_176 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87}, %88, %89"
#define WG_TRANS_176 ", %90, %91"
#define WG_ACC_80 WG_ACC_80_("+f")
#define WG_ACC_176 WG_ACC_176_("+f")
#define WG_TRANS_64 ", %34, %35"
#define WG_TRANS_128 ", %66, %67"
#define WG_TRANS_256 ", %130, %131"

#define WGMMA_16BIT(T, N)                                                                         \
  template <int TRANS_A, int TRANS_B>                                                             \
  CKJIT_INLINE void wgmma_##T##_n##N(float (&d)[N / 2], ckjit_u64 desc_a, ckjit_u64 desc_b) {     \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #T "." #T " " WG_OPS_##N       \
                 ", 1, 1, 1" WG_TRANS_##N ";"                                                    \
                 : WG_ACC_##N                                                                     \
                 : "l"(desc_a), "l"(desc_b), "n"(TRANS_A), "n"(TRANS_B));                         \
  }
// d = A B, the accumulators' old values ignored (scale-d 0): a product's
// first K step needs no zeroed registers (N = 80 and 176: attention's S).
#define WGMMA_16BIT_FIRST(T, N)                                                                   \
  template <int TRANS_A, int TRANS_B>                                                             \
  CKJIT_INLINE void wgmma_first_##T##_n##N(float (&d)[N / 2], ckjit_u64 desc_a, ckjit_u64 desc_b) { \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #T "." #T " " WG_OPS_##N       \
                 ", 0, 1, 1" WG_TRANS_##N ";"                                                    \
                 : WG_ACC_##N##_("=f")                                                            \
                 : "l"(desc_a), "l"(desc_b), "n"(TRANS_A), "n"(TRANS_B));                         \
  }
#define WGMMA_TF32(N)                                                                             \
  CKJIT_INLINE void wgmma_tf32_n##N(float (&d)[N / 2], ckjit_u64 desc_a, ckjit_u64 desc_b) {      \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 " WG_OPS_##N ", 1, 1, 1;" \
                 : WG_ACC_##N                                                                     \
                 : "l"(desc_a), "l"(desc_b));                                                     \
  }
WGMMA_16BIT(bf16, 64)
WGMMA_16BIT(bf16, 80)
WGMMA_16BIT(f16, 80)
WGMMA_16BIT(bf16, 176)
WGMMA_16BIT(f16, 176)
WGMMA_16BIT(f16, 64)
WGMMA_16BIT(bf16, 128)
WGMMA_16BIT(f16, 128)
WGMMA_16BIT(bf16, 256)
WGMMA_16BIT(f16, 256)
WGMMA_16BIT_FIRST(bf16, 64)
WGMMA_16BIT_FIRST(f16, 64)
WGMMA_16BIT_FIRST(bf16, 80)
WGMMA_16BIT_FIRST(f16, 80)
WGMMA_16BIT_FIRST(bf16, 128)
WGMMA_16BIT_FIRST(f16, 128)
WGMMA_16BIT_FIRST(bf16, 176)
WGMMA_16BIT_FIRST(f16, 176)
WGMMA_TF32(64)
WGMMA_TF32(128)
WGMMA_TF32(256)

// FP8 (e4m3 / e5m2 per operand), K 32 a step: both operands K-major (the
// FP8 forms have no transposes).  wgmma_fp8_TA_TB_nN adds to d;
// wgmma_fp8_first_... overwrites it (scale-d 0: a K block's first step).
#define WGMMA_FP8(TA, TB, N)                                                                      \
  CKJIT_INLINE void wgmma_fp8_##TA##_##TB##_n##N(float (&d)[N / 2], ckjit_u64 desc_a, ckjit_u64 desc_b) { \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k32.f32." #TA "." #TB " " WG_OPS_##N    \
                 ", 1, 1, 1;"                                                                     \
                 : WG_ACC_##N                                                                     \
                 : "l"(desc_a), "l"(desc_b));                                                     \
  }                                                                                               \
  CKJIT_INLINE void wgmma_fp8_first_##TA##_##TB##_n##N(float (&d)[N / 2], ckjit_u64 desc_a,        \
                                                       ckjit_u64 desc_b) {                        \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k32.f32." #TA "." #TB " " WG_OPS_##N    \
                 ", 0, 1, 1;"                                                                     \
                 : WG_ACC_##N##_("=f")                                                            \
                 : "l"(desc_a), "l"(desc_b));                                                     \
  }
#define WGMMA_FP8_PAIRS(N) \
  WGMMA_FP8(e4m3, e4m3, N) WGMMA_FP8(e4m3, e5m2, N) WGMMA_FP8(e5m2, e4m3, N) WGMMA_FP8(e5m2, e5m2, N)
WGMMA_FP8_PAIRS(64)
WGMMA_FP8_PAIRS(128)

// The register-A form (wgmma ... d, {a0..a3}, b-desc): A is this warp's 16
// rows x 16 K of the m64 tile in registers, in the layout of an m16n8k16
// A fragment (mma.sync's); B from shared memory, read transposed
// (TRANS_B 1: N-contiguous) or not.  Attention's P V: P stays in registers.
#define WG_RS_OPS_64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36"
#define WG_RS_TRANS_64 ", %37"
#define WG_RS_OPS_96 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, {%48, %49, %50, %51}, %52"
#define WG_RS_TRANS_96 ", %53"
#define WG_RS_OPS_128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68"
#define WG_RS_TRANS_128 ", %69"
#define WG_RS_OPS_192 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, {%96, %97, %98, %99}, %100"
#define WG_RS_TRANS_192 ", %101"
#define WG_RS_OPS_256 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132"
#define WG_RS_TRANS_256 ", %133"

#define WGMMA_16BIT_RS(T, N)                                                                      \
  template <int TRANS_B>                                                                          \
  CKJIT_INLINE void wgmma_rs_##T##_n##N(float (&d)[N / 2], const unsigned (&a)[4], ckjit_u64 desc_b) { \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #T "." #T " " WG_RS_OPS_##N    \
                 ", 1, 1, 1" WG_RS_TRANS_##N ";"                                                 \
                 : WG_ACC_##N                                                                     \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(TRANS_B));        \
  }
WGMMA_16BIT_RS(bf16, 64)
WGMMA_16BIT_RS(f16, 64)
WGMMA_16BIT_RS(bf16, 96)
WGMMA_16BIT_RS(f16, 96)
WGMMA_16BIT_RS(bf16, 128)
WGMMA_16BIT_RS(f16, 128)
WGMMA_16BIT_RS(bf16, 192)
WGMMA_16BIT_RS(f16, 192)
WGMMA_16BIT_RS(bf16, 256)
WGMMA_16BIT_RS(f16, 256)

// tf32 with A in registers: the layout of an m16n8k8 tf32 A fragment per
// warp (a0 (g, q), a1 (g + 8, q), a2 (g, q + 4), a3 (g + 8, q + 4); g =
// lane / 4, q = lane % 4), B K-major in shared memory (tf32 has no
// transposes).  The GEMM's M-major A: wgmma's tf32 reads only K-major
// shared memory.
#define WGMMA_TF32_RS(N)                                                                          \
  CKJIT_INLINE void wgmma_rs_tf32_n##N(float (&d)[N / 2], const unsigned (&a)[4], ckjit_u64 desc_b) { \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 " WG_RS_OPS_##N ", 1, 1, 1;" \
                 : WG_ACC_##N                                                                     \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));                      \
  }
WGMMA_TF32_RS(64)
WGMMA_TF32_RS(128)
WGMMA_TF32_RS(256)

#endif
