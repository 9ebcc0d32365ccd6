// GEMM on Hopper tensor cores (sm_90a): wgmma, f16/bf16 in, or f32 in
// read as tf32 (the caller allowed tf32: the low 13 mantissa bits are
// ignored; K-major operands only, so the front-end hands A row-major and B
// column-major, transposing them first if need be), f32 accumulation.  For
// large problems with 16-byte aligned operands.
//
// Problem:  D = epilogue(alpha * A B) per batch entry / group (gemm_common.h).
// Policy:   a block of two warpgroups owns a BM x BN tile (BM 128 or 64, BN
//           64, 128 or 256).  BM 128: each warpgroup a 64 x BN half, as one
//           wgmma accumulator.  BM 64 (skinny problems that 128-row tiles
//           leave too few tiles for; TMA only): the first warpgroup takes
//           the whole tile and the second has no work (splitting each K step
//           between the two and summing after measured 2.5% slower,
//           bench/NOTES.md #76).  K advances one 128-byte row (BK elements)
//           per step.
// Pipeline: STAGES shared-memory buffers in the 128-byte swizzled layout
//           wgmma reads (K-contiguous operands as rows of 128 bytes of K:
//           BK = 64 16-bit or 32 f32 elements; M/N-contiguous ones, 16-bit
//           only, as panels of 64 columns, read transposed).
//           TMA >= 1: a persistent block per multiprocessor; a producer
//           warp fills the stages with the tensor memory accelerator
//           (zero-filled past the edges) and the two consumer warpgroups
//           hand them back through mbarriers.  TMA = 2: the consumers
//           also write D through a 32 KiB shared buffer and TMA stores,
//           which finish while the next tile's K loop runs.  Stream-K
//           (split_k CKJIT_GEMM_STREAM_K, TMA >= 1, one problem): after its
//           whole tiles, each block takes an equal run of K steps across
//           tile boundaries and writes each tile's part to an f32 slot
//           (unit_of; gemm_reduce sums the slots).  TMA = 0
//           (broadcast batches, a group with a k = 0 problem, a tensor map
//           the driver refused): every thread copies
//           with cp.async, STAGES - 2 steps ahead.  wgmma runs asynchronously, one step in flight.
// Epilogue: as the other pipelines (gemm_common.h).
//
// Kernel argument: TMA >= 1: tma_args (tensor maps and problems; grouped:
// up to 8 problems a launch); otherwise gemm_problem p, or (GROUPED) gemm_groups gs; all by value.
#include "ckjit_prelude.h"

typedef @DTYPE@ TA;
typedef @OUT@ TC;
#define A_KCONTIG @A@ // A row-major: K is A's contiguous dimension
#define B_KCONTIG @B@ // B column-major: K is B's contiguous dimension
#define BM @BM@ // 128, or 64 (TMA, one problem): one consumer warpgroup
#define BN @BN@
#define BK (128 / (int)sizeof(TA)) // a 128-byte row of K per step
#define STAGES @STAGES@
#define BIAS @BIAS@
#define ACT @ACT@
#define HAS_C @C@
#define HAS_D0 @D0@
#define HAS_D1 @D1@
#define SPLIT @SPLIT@
#define GROUPED @GROUPED@
#define TMA @TMA@
#define STREAMK @STREAMK@ // Stream-K runs after the whole tiles (TMA, BM 128, one problem, unsplit)

#include "gemm_common.h"

// wgmma needs the arch-specific target (NVRTC's sm_90a); anything else
// builds an empty kernel, which the front-end never picks.
#if defined(CKJIT_NVIDIA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)

#define THREADS (TMA ? 384 : 256) // TMA: warpgroup 0 produces, 1 and 2 consume
#define CONSUMERS (BM == 64 ? 1 : 2)  // TMA: 64-row tiles leave warpgroup 2 without work
#include "gemm_copy.h"

// tf32 wgmma reads K-major operands only; it needs TMA (the cp.async
// copies are 16-bit).
static_assert(sizeof(TA) == 2 || (A_KCONTIG && B_KCONTIG && TMA), "f32 (tf32): a=row, b=col, tma >= 1");

#define A_TILE (BM * BK)
#define B_TILE (BN * BK)
#define STAGE_ELEMS (A_TILE + B_TILE)
#define A_BYTES (A_TILE * (int)sizeof(TA)) // where a stage's B starts
#define STAGE_BYTES (STAGE_ELEMS * (int)sizeof(TA))

// ---- wgmma -------------------------------------------------------------------
// Shared-memory matrix descriptor, 128-byte swizzle: start address, the
// byte distance between 64-column panels (lbo; M/N-contiguous operands) and
// between groups of eight 128-byte rows (sbo).
CKJIT_INLINE ckjit_u64 smem_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return (ckjit_u64)((addr & 0x3ffff) >> 4) | (ckjit_u64)(lbo >> 4) << 16 |
         (ckjit_u64)(sbo >> 4) << 32 | 1ull << 62;
}

CKJIT_INLINE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
CKJIT_INLINE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> CKJIT_INLINE void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Shared-memory writes of the generic proxy (cp.async) made visible to the
// async proxy that wgmma reads through.
CKJIT_INLINE void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// One wgmma, m64 x N x one K step, into the accumulator d[N / 2] of each
// thread.  The PTX operands are the accumulators %0 .., then the two
// descriptors and (16-bit types) the transposes: their lists are spelled out
// per N, and one macro writes each type's function.  tf32 reads K-major
// operands only, so it has no transposes.
#define WG_ACC4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define WG_ACC16(i) WG_ACC4(i), WG_ACC4(i + 4), WG_ACC4(i + 8), WG_ACC4(i + 12)
#define WG_ACC_64 WG_ACC16(0), WG_ACC16(16)
#define WG_ACC_128 WG_ACC_64, WG_ACC16(32), WG_ACC16(48)
#define WG_ACC_256 WG_ACC_128, WG_ACC16(64), WG_ACC16(80), WG_ACC16(96), WG_ACC16(112)
#define WG_OPS_64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33"
#define WG_OPS_128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65"
#define WG_OPS_256 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129"
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
#define WGMMA_TF32(N)                                                                             \
  CKJIT_INLINE void wgmma_tf32_n##N(float (&d)[N / 2], ckjit_u64 desc_a, ckjit_u64 desc_b) {      \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 " WG_OPS_##N ", 1, 1, 1;" \
                 : WG_ACC_##N                                                                     \
                 : "l"(desc_a), "l"(desc_b));                                                     \
  }
WGMMA_16BIT(bf16, 64)
WGMMA_16BIT(f16, 64)
WGMMA_16BIT(bf16, 128)
WGMMA_16BIT(f16, 128)
WGMMA_16BIT(bf16, 256)
WGMMA_16BIT(f16, 256)
WGMMA_TF32(64)
WGMMA_TF32(128)
WGMMA_TF32(256)

template <typename T> struct is_f32 { static const bool value = false; };
template <> struct is_f32<float> { static const bool value = true; };

#define ACC (BN / 2) // accumulators per thread

CKJIT_INLINE void wgmma(float (&d)[ACC], ckjit_u64 da, ckjit_u64 db) {
  const int ta = A_KCONTIG ? 0 : 1, tb = B_KCONTIG ? 0 : 1;
#if BN == 64
  if (is_f32<TA>::value) wgmma_tf32_n64(d, da, db);
  else if (is_bf16<TA>::value) wgmma_bf16_n64<ta, tb>(d, da, db);
  else wgmma_f16_n64<ta, tb>(d, da, db);
#elif BN == 128
  if (is_f32<TA>::value) wgmma_tf32_n128(d, da, db);
  else if (is_bf16<TA>::value) wgmma_bf16_n128<ta, tb>(d, da, db);
  else wgmma_f16_n128<ta, tb>(d, da, db);
#else
  if (is_f32<TA>::value) wgmma_tf32_n256(d, da, db);
  else if (is_bf16<TA>::value) wgmma_bf16_n256<ta, tb>(d, da, db);
  else wgmma_f16_n256<ta, tb>(d, da, db);
#endif
}

// This warpgroup's descriptors for K step kk of the stage at sa / sb: rows
// 64 wg.. of a K-contiguous A, or panel wg of an M-contiguous one.  A
// wgmma step (16 deep for 16-bit types, 8 for tf32) is 32 bytes into each
// K-contiguous row, or 16 rows of 128 bytes further.
#define K_STEP (32 / (int)sizeof(TA))
CKJIT_INLINE void step(float (&acc)[ACC], unsigned sa, unsigned sb, int wg) {
  const int rows = BM == 64 ? 0 : wg; // A half
#pragma unroll
  for (int kk = 0; kk < BK; kk += K_STEP) {
#if A_KCONTIG
    const ckjit_u64 da = smem_desc(sa + rows * 64 * 128 + kk * (int)sizeof(TA), 16, 1024);
#else
    const ckjit_u64 da = smem_desc(sa + rows * BK * 128 + kk * 128, BK * 128, 1024);
#endif
#if B_KCONTIG
    const ckjit_u64 db = smem_desc(sb + kk * (int)sizeof(TA), 16, 1024);
#else
    const ckjit_u64 db = smem_desc(sb + kk * 128, BK * 128, 1024);
#endif
    wgmma(acc, da, db);
  }
}

// Accumulator 4j + e: row 16 w + lane / 4 (+8 for e >= 2) of warpgroup
// wg's half, columns 8 j + 2 (lane % 4) + {0, 1}.
CKJIT_INLINE void store_acc(const gemm_problem &p, const gemm_tile &t, const float (&acc)[ACC], int wg) {
  const int w = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const long long m = t.m0 + wg * 64 + w * 16 + lane / 4;
#pragma unroll
  for (int j = 0; j < BN / 8; j++) {
    const long long n = t.n0 + j * 8 + 2 * (lane % 4);
    store_pair(p, t, m, n, acc[4 * j], acc[4 * j + 1]);
    store_pair(p, t, m + 8, n, acc[4 * j + 2], acc[4 * j + 3]);
  }
}

CKJIT_INLINE unsigned align_1k(unsigned char *raw, TA *&smem) {
  // Swizzled atoms must start on 1 KiB boundaries (the host adds the slack).
  const unsigned a = smem_addr(raw), base = (a + 1023) & ~1023u;
  smem = reinterpret_cast<TA *>(raw + (base - a));
  return base;
}

#if TMA
// ---- TMA + mbarrier pipeline ------------------------------------------------------
struct __align__(64) tensor_map { ckjit_u64 v[16]; }; // CUtensorMap

CKJIT_INLINE void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
CKJIT_INLINE void mbar_expect(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
CKJIT_INLINE void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Waits until the phase of parity `parity` has completed.  (No predicated
// branch in the asm: the at sign starts a placeholder in kernel templates.)
CKJIT_INLINE void mbar_wait(unsigned bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n"
                 "}"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
}
// One box of the 3-D tensor (innermost coordinate first) into shared memory.
CKJIT_INLINE void tma_load(unsigned dst, const tensor_map &map, int c0, int c1, int c2, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst),
               "l"(reinterpret_cast<ckjit_u64>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
               : "memory");
}

// Persistent: one block per multiprocessor walks the tiles blockIdx.x,
// blockIdx.x + gridDim.x, ...; `it` counts K steps across tiles, so stage
// and phase continue, and the producer loads the next tile while the
// consumers store this one.
// ---- TMA-store epilogue (TMA = 2) -------------------------------------------------
// D goes out in boxes of 128 rows x 128 bytes (64 16-bit or 32 f32
// columns), one at a time through the two 16 KiB halves of a buffer in
// turn, in the 128-byte swizzle (conflict-free writes of the fragments).
// The stores are asynchronous: a box waits only for the store two boxes
// back, which used the same half (bench/NOTES.md #65).
#define OUT_COLS (128 / (int)sizeof(TC)) // columns of one box
#define OUT_BOX (128 * 128)               // bytes of one box

// The consumer warpgroups' own barrier (the producer never joins it).
CKJIT_INLINE void consumers_barrier() { asm volatile("bar.sync 1, %0;" ::"n"(CONSUMERS * 128) : "memory"); }

CKJIT_INLINE void tma_store(const tensor_map &map, unsigned src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];" ::"l"(
                   reinterpret_cast<ckjit_u64>(&map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(src)
               : "memory");
}
CKJIT_INLINE void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
CKJIT_INLINE void tma_store_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
// All but the most recent group of stores have read their shared memory.
CKJIT_INLINE void tma_store_wait_read_1() { asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory"); }

CKJIT_INLINE void store_acc_tma(const gemm_problem &p, const gemm_tile &t, float (&acc)[ACC], int cw,
                                const tensor_map &map_d, unsigned char *buf, unsigned buf_addr,
                                unsigned &chunks) { // chunks: boxes so far (which half is next)
  const int tid = threadIdx.x - 128, w = (tid / 32) % 4, lane = tid % 32; // tid: 0..255
  const int r0 = cw * 64 + w * 16 + lane / 4;                               // row in the tile
  const bool issuer = tid == 0;
#pragma unroll
  for (int c0 = 0; c0 < BN; c0 += OUT_COLS, chunks++) {
    const int half = chunks % 2;
    if (issuer) tma_store_wait_read_1(); // the store two chunks back has left this half
    consumers_barrier();
#pragma unroll
    for (int jj = 0; jj < OUT_COLS / 8; jj++) {
      const int j = c0 / 8 + jj, col = jj * 8 + 2 * (lane % 4); // column in the box
      const int cb = col * (int)sizeof(TC);
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int r = r0 + 8 * h;
        float v[2] = {acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]};
        const long long m = t.m0 + r, n = t.n0 + c0 + col;
        if (m < p.m && n < p.n) epilogue_values(p, t.batch, m, n, v, n + 1 < p.n);
        ckjit_vec<TC, 2> o;
        o.v[0] = ckjit_from_float<TC>(v[0]);
        o.v[1] = ckjit_from_float<TC>(v[1]);
        const int off = half * OUT_BOX + r * 128 + (((cb / 16) ^ (r % 8)) * 16) + cb % 16;
        ckjit_store<TC, 2>(reinterpret_cast<TC *>(buf + off), o);
      }
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); // visible to the TMA unit
    consumers_barrier();
    if (issuer) {
      tma_store(map_d, buf_addr + half * OUT_BOX, (int)t.n0 + c0, (int)t.m0, (int)t.batch);
      tma_store_commit();
    }
  }
}

// The kernel's one argument (runtime/op_gemm.c builds the same layout):
// the tensor maps and the problem, or (GROUPED) up to TMA_GROUPS problems
// with theirs, ordered by first tile.  With D's maps (TMA = 2) the grouped
// argument is 5 KB: over the 4 KiB of older toolchains, so the front-end
// asks for it only from NVRTC 13 (whose cubins need a 13.0 driver).
#if GROUPED
#define TMA_GROUPS 8
struct tma_args {
  tensor_map a[TMA_GROUPS], b[TMA_GROUPS];
#if TMA == 2
  tensor_map d[TMA_GROUPS];
#endif
  gemm_problem g[TMA_GROUPS];
  long long count;
};
CKJIT_INLINE long long all_tiles(const tma_args &x) {
  const gemm_problem &last = x.g[x.count - 1];
  return last.tile_begin + last.tiles_m * last.tiles_n;
}
CKJIT_INLINE int group_at(const tma_args &x, long long tile) {
  int lo = 0, hi = (int)x.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (x.g[mid].tile_begin <= tile) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
// The problem, tensor maps and tile of linear tile `tile`; TILE_MAP_D,
// after it, D's map (TMA = 2).
#define TILE_CONTEXT(tile)                                                  \
  const int gi_ = group_at(x, tile);                                       \
  const gemm_problem &p = x.g[gi_];                                         \
  const tensor_map &map_a = x.a[gi_], &map_b = x.b[gi_];                    \
  const gemm_tile t = tile_of(p, tile - p.tile_begin)
#define TILE_MAP_D x.d[gi_]
#else
struct tma_args {
  tensor_map a, b, d; // d: TMA = 2 only
  gemm_problem p;
  streamk sk;         // sk.dp_tiles: every tile when sk.sk_tiles is 0
};
#define TILE_CONTEXT(tile)                                                  \
  const gemm_problem &p = x.p;                                              \
  const tensor_map &map_a = x.a, &map_b = x.b;                              \
  const gemm_tile t = tile_of(p, tile)
#define TILE_MAP_D x.d
#endif

// One unit of a block's work: K steps [kt0, kt1) of a tile (kt1 < 0: to
// its end), summed into the epilogue (slot < 0) or, for a Stream-K run,
// into partial slot `slot`.
struct work {
  long long tile, slot;
  int kt0, kt1;
};

// Unit u of this block; false past its last.  The producer and the
// consumers walk the same units.
CKJIT_INLINE bool unit_of(const tma_args &x, long long u, work &w) {
  const long long b = blockIdx.x, grid = gridDim.x;
  w.slot = -1, w.kt0 = 0, w.kt1 = -1;
#if GROUPED
  w.tile = b + u * grid;
  return w.tile < all_tiles(x);
#else
  const streamk &s = x.sk;
  const long long whole = s.dp_tiles > b ? (s.dp_tiles - b + grid - 1) / grid : 0;
  if (u < whole) {
    w.tile = b + u * grid;
    return true;
  }
#if !STREAMK
  return false;
#else
  if (s.sk_tiles == 0) return false;
  // The run [r0, r1) of the Stream-K steps, one tile's part per unit.
  const long long r0 = b * s.base + (b < s.extra ? b : s.extra);
  const long long r1 = r0 + s.base + (b < s.extra ? 1 : 0);
  const long long tr = r0 / s.iters + (u - whole), first = tr * s.iters;
  const long long start = r0 > first ? r0 : first;
  const long long end = r1 < first + s.iters ? r1 : first + s.iters;
  if (start >= end) return false;
  w.tile = s.dp_tiles + tr;
  w.kt0 = (int)(start - first), w.kt1 = (int)(end - first);
  w.slot = tr * s.slots + (b - sk_owner(s, first));
  return true;
#endif
#endif
}

// A Stream-K run's raw sums to partial slot `slot` (BM x BN f32 in rows of
// BN; gemm_reduce reads them 16 bytes at a time), skipping rows and
// columns past the matrix.
CKJIT_INLINE void store_acc_slot(const gemm_problem &p, const gemm_tile &t, const float (&acc)[ACC],
                                 int cw, long long slot) {
  const int tid = threadIdx.x - 128, w = (tid / 32) % 4, lane = tid % 32;
  const int r = cw * 64 + w * 16 + lane / 4;
  float *dst = p.partials + slot * (BM * BN);
#pragma unroll
  for (int j = 0; j < BN / 8; j++) {
    const int c = j * 8 + 2 * (lane % 4);
#pragma unroll
    for (int h = 0; h < 2; h++)
      if (t.m0 + r + 8 * h < p.m && t.n0 + c < p.n) {
        ckjit_vec<float, 2> o;
        o.v[0] = acc[4 * j + 2 * h];
        o.v[1] = acc[4 * j + 2 * h + 1];
        ckjit_store<float, 2>(dst + (r + 8 * h) * BN + c, o);
      }
  }
}

// The producer (one thread): fills stage after stage with the K steps of
// this block's units, waiting for each stage to be handed back.
CKJIT_INLINE void producer(const tma_args &x, unsigned base, ckjit_u64 *full, ckjit_u64 *empty) {
  unsigned it = 0; // K steps so far, across units: the stage and its phase
  work w;
  for (long long u = 0; unit_of(x, u, w); u++) {
    TILE_CONTEXT(w.tile);
    const int kt1 = w.kt1 >= 0 ? w.kt1 : (int)((t.k1 - t.k0 + BK - 1) / BK);
    for (int kt = w.kt0; kt < kt1; kt++, it++) {
      const int s = it % STAGES;
      if (it >= STAGES) mbar_wait(smem_addr(&empty[s]), (it / STAGES - 1) & 1);
      const unsigned bar = smem_addr(&full[s]);
      const unsigned sa = base + (unsigned)(s * STAGE_BYTES), sb = sa + A_BYTES;
      const int k = (int)(t.k0 + (long long)kt * BK), b = (int)t.batch;
      mbar_expect(bar, STAGE_BYTES);
#if A_KCONTIG
      tma_load(sa, map_a, k, (int)t.m0, b, bar);
#else
#pragma unroll
      for (int q = 0; q < BM / 64; q++) tma_load(sa + q * BK * 128, map_a, (int)t.m0 + 64 * q, k, b, bar);
#endif
#if B_KCONTIG
      tma_load(sb, map_b, k, (int)t.n0, b, bar);
#else
#pragma unroll
      for (int q = 0; q < BN / 64; q++) tma_load(sb + q * BK * 128, map_b, (int)t.n0 + 64 * q, k, b, bar);
#endif
    }
  }
}

// The consumer warpgroups (two, one for 64-row tiles): wgmma over each
// stage as it fills, hand it back, then the unit's epilogue.
CKJIT_INLINE void consumers(const tma_args &x, unsigned base, TA *smem, ckjit_u64 *full, ckjit_u64 *empty) {
  const int cw = threadIdx.x / 128 - 1; // consumer warpgroup 0 or 1
  if (cw >= CONSUMERS) return;
  const bool leader = threadIdx.x % 128 == 0;
  unsigned it = 0; // as the producer's
  unsigned chunks = 0; // TMA-store boxes so far (store_acc_tma)
  work w;
  for (long long u = 0; unit_of(x, u, w); u++) {
    TILE_CONTEXT(w.tile);
    (void)map_a, (void)map_b;
    const int steps = (w.kt1 >= 0 ? w.kt1 : (int)((t.k1 - t.k0 + BK - 1) / BK)) - w.kt0;
    float acc[ACC];
#pragma unroll
    for (int i = 0; i < ACC; i++) acc[i] = 0.0f;
    for (int kt = 0; kt < steps; kt++, it++) {
      const int s = it % STAGES;
      mbar_wait(smem_addr(&full[s]), (it / STAGES) & 1);
      const unsigned sa = base + (unsigned)(s * STAGE_BYTES);
      wgmma_fence();
      step(acc, sa, sa + A_BYTES, cw);
      wgmma_commit();
      wgmma_wait<1>(); // step it - 1 is done: hand its stage back
      if (kt > 0 && leader) mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));
    }
    wgmma_wait<0>();
    if (steps > 0 && leader) mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));
#if STREAMK // its code only where it can run: smaller kernels, faster compiles
    if (w.slot >= 0) {
      store_acc_slot(p, t, acc, cw, w.slot);
      continue;
    }
#endif
#if TMA == 2
    store_acc_tma(p, t, acc, cw, TILE_MAP_D, reinterpret_cast<unsigned char *>(smem + STAGES * STAGE_ELEMS),
                  base + STAGES * STAGE_BYTES, chunks);
#else
    store_acc(p, t, acc, cw);
#endif
  }
#if TMA == 2
  if (threadIdx.x == 128) tma_store_wait_read(); // the buffer must outlive the stores
#endif
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
ckjit_gemm_wgmma(const __grid_constant__ tma_args x) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) ckjit_u64 full[STAGES], empty[STAGES];
  TA *smem;
  const unsigned base = align_1k(smem_raw, smem);
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; s++) {
      mbar_init(smem_addr(&full[s]), 1);  // the producer's expect_tx
      mbar_init(smem_addr(&empty[s]), CONSUMERS); // one arrival per consumer warpgroup
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x / 128 == 0) {
    // The producer needs few registers; the consumers take them (their
    // accumulators and the epilogue would spill at 168).
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) producer(x, base, full, empty);
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    consumers(x, base, smem, full, empty);
  }
}

#else
// ---- cp.async pipeline --------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(THREADS, 1) ckjit_gemm_wgmma(GEMM_PARAMS) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  TA *smem;
  const unsigned base = align_1k(smem_raw, smem);
  GEMM_PROBLEM(p, t);
  const TA *a = static_cast<const TA *>(p.a) + t.batch * p.stride_a;
  const TA *b = static_cast<const TA *>(p.b) + t.batch * p.stride_b;
  const int k_tiles = (int)((t.k1 - t.k0 + BK - 1) / BK);

  auto issue = [&](int kt, int s) {
    if (kt < k_tiles) {
      TA *sa = smem + s * STAGE_ELEMS, *sb = sa + A_TILE;
      const long long k = t.k0 + (long long)kt * BK;
#if A_KCONTIG
      load_tile<BM, BK, 8>(sa, a, p.lda, t.m0, k, p.m, t.k1);
#else
      load_tile_panels<BK, BM>(sa, a, p.lda, k, t.m0, t.k1, p.m);
#endif
#if B_KCONTIG
      load_tile<BN, BK, 8>(sb, b, p.ldb, t.n0, k, p.n, t.k1);
#else
      load_tile_panels<BK, BN>(sb, b, p.ldb, k, t.n0, t.k1, p.n);
#endif
    }
    copy_commit();
  };

  const int wg = threadIdx.x / 128;
  float acc[ACC];
#pragma unroll
  for (int i = 0; i < ACC; i++) acc[i] = 0.0f;

#pragma unroll
  for (int s = 0; s < STAGES - 2; s++) issue(s, s);

  for (int kt = 0; kt < k_tiles; kt++) {
    copy_wait<STAGES - 3>();
    fence_async_shared();
    __syncthreads(); // step kt is in shared memory; step kt - 2's wgmma are done
    issue(kt + STAGES - 2, (kt + STAGES - 2) % STAGES);
    const unsigned sa = base + (unsigned)((kt % STAGES) * STAGE_BYTES);
    wgmma_fence();
    step(acc, sa, sa + A_BYTES, wg);
    wgmma_commit();
    wgmma_wait<1>(); // step kt - 1 done; step kt may still run
  }
  wgmma_wait<0>();
  copy_wait<0>();
  store_acc(p, t, acc, wg);
}
#endif

#else
extern "C" __global__ void ckjit_gemm_wgmma() {}
#endif
