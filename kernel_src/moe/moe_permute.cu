// Rows of a mixture-of-experts layer moved between token order and expert
// order (ckjit_fused_moe; abi/moe_permute_args.h):
//   gather   each row of the expert-sorted list takes its token's row of
//            the input (or, without a list, row r its own row), as is or
//            quantized to e4m3 with a scale per row or per 1 x 128 block,
//            as the grouped FP8 GEMM reads its A;
//   combine  each token's row is the sum of its k slot rows (the down
//            GEMM's weighted products), then of its shared experts' rows
//            (SHARED 2: each times its f32 gate), in that order, in f32,
//            rounded once: the same bits every run, without atomics.
// Blocks of 128 threads, a row (gather) or a row's 1024-column unit
// (combine) each; each thread moves 16-byte pieces of 8 elements (the
// front-end keeps rows and strides in whole pieces).
#include "core/prelude.h"
#include "abi/moe_permute_args.h"
#include "moe/local_expert.h"
// @PARAMETERS@

typedef DTYPE T;
#define THREADS 128
#define PIECE 8                    // elements a thread moves at a time
#define PASS (THREADS * PIECE)     // columns a pass of the block covers
static_assert(PASS == CKJIT_MOE_PERMUTE_PASS, "the host sizes combine's grid by the pass");
#define QMAX 448.0f                // e4m3's largest finite value
#define GATHER_UNROLL 4            // pieces a thread has in flight (unquantized gather)

CKJIT_INLINE void load_piece(const T *p, float (&v)[PIECE]) {
  const ckjit_vec<T, PIECE> w = ckjit_load<T, PIECE>(p);
#pragma unroll
  for (int i = 0; i < PIECE; i++) v[i] = ckjit_to_float(w.v[i]);
}

#if QUANT != QUANT_NONE
// Eight values times inv, rounded to e4m3 (saturating), as one 8-byte store.
CKJIT_INLINE void store_e4m3(unsigned char *p, const float (&v)[PIECE], float inv) {
  unsigned short h[PIECE / 2];
#pragma unroll
  for (int i = 0; i < PIECE / 2; i++) h[i] = ckjit_to_e4m3x2(v[2 * i] * inv, v[2 * i + 1] * inv);
  uint2 w;
  w.x = h[0] | ((unsigned)h[1] << 16);
  w.y = h[2] | ((unsigned)h[3] << 16);
  *reinterpret_cast<uint2 *>(p) = w;
}
// A zero block or row gets scale 1 (and zeros).
CKJIT_INLINE float inv_of(float amax) { return amax == 0.0f ? 0.0f : QMAX / amax; }
CKJIT_INLINE float scale_of(float amax) { return amax == 0.0f ? 1.0f : amax / QMAX; }
CKJIT_INLINE float piece_amax(const float (&v)[PIECE]) {
  float a = 0.0f;
#pragma unroll
  for (int i = 0; i < PIECE; i++) a = fmaxf(a, fabsf(v[i]));
  return a;
}
#endif

#if DIR == DIR_GATHER
CKJIT_INLINE void gather_row(const ckjit_moe_permute_args &x, long long r) {
  long long from = r;
  if (x.row_ids) {
    const int id = x.row_ids[r];
    if (id < 0 || id >= x.entries) return; // padding: no token, never read by a stored row
    from = id / x.k;
  }
  const T *src = static_cast<const T *>(x.src) + from * x.ld_src;
  const int t = threadIdx.x;
#if QUANT == QUANT_NONE
  // Up to GATHER_UNROLL pieces loaded before any is stored: one load after
  // another's store, a block's short life was mostly waiting.
  T *dst = static_cast<T *>(x.dst) + r * x.ld_dst;
  for (long long c0 = t * PIECE; c0 < x.cols; c0 += GATHER_UNROLL * PASS) {
    ckjit_vec<T, PIECE> v[GATHER_UNROLL];
#pragma unroll
    for (int u = 0; u < GATHER_UNROLL; u++)
      if (c0 + u * PASS < x.cols) v[u] = ckjit_load<T, PIECE>(src + c0 + u * PASS);
#pragma unroll
    for (int u = 0; u < GATHER_UNROLL; u++)
      if (c0 + u * PASS < x.cols) ckjit_store<T, PIECE>(dst + c0 + u * PASS, v[u]);
  }
#elif QUANT == QUANT_BLOCK
  // 16 threads a 128-column block; the loop is uniform over the block, so
  // every lane of a warp takes part in the shuffles.
  unsigned char *dst = static_cast<unsigned char *>(x.dst) + r * x.ld_dst;
  for (long long base = 0; base < x.cols; base += PASS) {
    const long long c = base + t * PIECE;
    float v[PIECE] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (c < x.cols) load_piece(src + c, v);
    float amax = piece_amax(v);
    for (int m = 8; m > 0; m /= 2) amax = fmaxf(amax, ckjit_shfl_xor(amax, m));
    if (c < x.cols) {
      store_e4m3(dst + c, v, inv_of(amax));
      if (t % 16 == 0) x.scales[r * x.ld_scales + c / 128] = scale_of(amax);
    }
  }
#else // QUANT_ROW: the row's largest magnitude first, then the row again
  __shared__ float part[THREADS / 32];
  float amax = 0.0f;
  for (long long c = t * PIECE; c < x.cols; c += PASS) {
    float v[PIECE];
    load_piece(src + c, v);
    amax = fmaxf(amax, piece_amax(v));
  }
  for (int m = 16; m > 0; m /= 2) amax = fmaxf(amax, ckjit_shfl_xor(amax, m));
  if (t % 32 == 0) part[t / 32] = amax;
  __syncthreads();
  amax = fmaxf(fmaxf(part[0], part[1]), fmaxf(part[2], part[3]));
  __syncthreads(); // part is rewritten for the block's next row
  const float inv = inv_of(amax);
  unsigned char *dst = static_cast<unsigned char *>(x.dst) + r * x.ld_dst;
  for (long long c = t * PIECE; c < x.cols; c += PASS) {
    float v[PIECE];
    load_piece(src + c, v);
    store_e4m3(dst + c, v, inv);
  }
  if (t == 0) x.scales[r] = scale_of(amax);
#endif
}
#else
#if IDS_TYPE == PIDS_I64
typedef long long IDS;
#else
typedef int IDS;
#endif
// Columns [c0, c0 + PASS) of token tok's row.  Every slot's piece is
// loaded before any is added (k loads in flight, not one after another:
// a decode step has too few tokens to hide their latency otherwise), and
// the sum still goes in slot order: the k routed slots, then (SHARED) the
// shared experts' rows as slots k .. k + shared - 1, always present.
#define SLOTS_IN_FLIGHT 8
CKJIT_INLINE void combine_unit(const ckjit_moe_permute_args &x, long long tok, long long c0) {
  const IDS *ids = static_cast<const IDS *>(x.topk_ids) + tok * x.k;
  const T *src = static_cast<const T *>(x.src) + tok * x.k * x.ld_src;
#if SHARED
  const T *shared = static_cast<const T *>(x.shared_src) + (tok * x.shared - x.k) * x.ld_src;
  const int slots = x.k + x.shared;
#if SHARED == CKJIT_MOE_SHARED_GATED
  const float *gate = x.shared_gate + tok * x.shared - x.k; // gate[s]: shared slot s's
#endif
#else
  const int slots = x.k;
#endif
  T *dst = static_cast<T *>(x.dst) + tok * x.ld_dst;
  const long long c = c0 + threadIdx.x * PIECE;
  if (c >= x.cols) return;
  float sum[PIECE] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (int s0 = 0; s0 < slots; s0 += SLOTS_IN_FLIGHT) {
    ckjit_vec<T, PIECE> w[SLOTS_IN_FLIGHT];
    bool routed[SLOTS_IN_FLIGHT];
#pragma unroll
    for (int j = 0; j < SLOTS_IN_FLIGHT; j++) {
      const int s = s0 + j;
      // routed nowhere or to another device: no row was written
#if SHARED
      routed[j] = s < x.k ? moe_local_expert((long long)ids[s], x.experts, x.expert_map, x.global_experts) >= 0
                          : s < slots;
      if (routed[j]) w[j] = ckjit_load<T, PIECE>((s < x.k ? src : shared) + s * x.ld_src + c);
#else
      routed[j] = s < x.k && moe_local_expert((long long)ids[s], x.experts, x.expert_map, x.global_experts) >= 0;
      if (routed[j]) w[j] = ckjit_load<T, PIECE>(src + s * x.ld_src + c);
#endif
    }
#pragma unroll
    for (int j = 0; j < SLOTS_IN_FLIGHT; j++)
      if (routed[j]) {
#if SHARED == CKJIT_MOE_SHARED_GATED
        const int s = s0 + j;
        const float g = s < x.k ? 1.0f : gate[s]; // x * 1.0f is x: the routed slots' bits unchanged
#pragma unroll
        for (int i = 0; i < PIECE; i++) sum[i] += g * ckjit_to_float(w[j].v[i]);
#else
#pragma unroll
        for (int i = 0; i < PIECE; i++) sum[i] += ckjit_to_float(w[j].v[i]);
#endif
      }
  }
  ckjit_vec<T, PIECE> out;
#pragma unroll
  for (int i = 0; i < PIECE; i++) out.v[i] = ckjit_from_float<T>(sum[i]);
  ckjit_store<T, PIECE>(dst + c, out);
}
#endif

extern "C" __global__ void __launch_bounds__(THREADS) ckjit_moe_permute(const ckjit_moe_permute_args x) {
#if DIR == DIR_GATHER
  for (long long r = blockIdx.x; r < x.rows; r += gridDim.x) gather_row(x, r);
#else
  const long long per_row = (x.cols + PASS - 1) / PASS;
  for (long long u = blockIdx.x; u < x.rows * per_row; u += gridDim.x)
    combine_unit(x, u / per_row, u % per_row * PASS);
#endif
}
CKJIT_ABI_KERNEL(ckjit_moe_permute, CKJIT_MOE_PERMUTE_PARAM);
