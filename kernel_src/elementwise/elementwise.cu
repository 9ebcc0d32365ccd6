// Elementwise family: copy, unary and binary ops with an optional epilogue.
//
// Problem:  y[r][c] = EPILOGUE(OP(a[r][c] [, b[r][c]])), r < rows, c < cols,
//           each tensor with its own row stride (elements); math in f32.
// Policy:   THREADS threads per block; each thread keeps UNROLL vectors of
//           VEC elements in flight (loads first, then math, then stores).
//           The host picks VEC from the pointers' and strides' alignment.
//           blockIdx.x walks column chunks of THREADS*VEC*UNROLL, blockIdx.y
//           rows (grid-stride in both, 64-bit indices throughout).
// Kernel arguments: CKJIT_ELEMENTWISE_ARGS in abi/elementwise_args.h.
#include "core/prelude.h"
#include "core/activations.h"
#include "abi/elementwise_args.h"
// @PARAMETERS@

typedef DTYPE T;
#define HAS_EPILOGUE (EPILOGUE == EPILOGUE_SCALE_BIAS)

// Ops are small structs, one per OP_* constant: their arity says whether b
// is read at all.
template <int op> struct ew_op;
#define UNARY_OP(ID, EXPR) \
  template <> struct ew_op<ID> { enum { arity = 1 }; \
                static CKJIT_INLINE float apply(float x, float) { return EXPR; } };
#define BINARY_OP(ID, EXPR) \
  template <> struct ew_op<ID> { enum { arity = 2 }; \
                static CKJIT_INLINE float apply(float a, float b) { return EXPR; } };
UNARY_OP(OP_IDENTITY, x)
UNARY_OP(OP_RELU, x < 0.0f ? 0.0f : x) // NaN stays NaN, as in torch.relu
UNARY_OP(OP_GELU_TANH, ckjit_gelu_tanh(x))
UNARY_OP(OP_GELU_ERF, ckjit_gelu_erf(x))
UNARY_OP(OP_SILU, x * ckjit_sigmoid(x))
UNARY_OP(OP_SIGMOID, ckjit_sigmoid(x))
BINARY_OP(OP_ADD, a + b)
BINARY_OP(OP_SUB, a - b)
BINARY_OP(OP_MUL, a * b)
BINARY_OP(OP_DIV, a / b)
BINARY_OP(OP_MAX, ckjit_nan_max(a, b))
BINARY_OP(OP_MIN, ckjit_nan_min(a, b))

typedef ew_op<OP> Op;
#define ARITY (Op::arity)

CKJIT_INLINE float apply(float a, float b, float scale, float bias) {
  float v = Op::apply(a, b);
#if HAS_EPILOGUE
  v = v * scale + bias;
#endif
  return v;
}

extern "C" __global__ void __launch_bounds__(THREADS)
ckjit_elementwise(const T *__restrict__ a, long long lda, const T *__restrict__ b, long long ldb,
                  T *__restrict__ y, long long ldy, long long rows, long long cols, float scale,
                  float bias) {
  const long long chunk = (long long)THREADS * VEC * UNROLL;
  const long long n_chunks = (cols + chunk - 1) / chunk;
  for (long long r = blockIdx.y; r < rows; r += gridDim.y) {
    const T *ar = a + r * lda;
    const T *br = ARITY == 2 ? b + r * ldb : a;
    T *yr = y + r * ldy;
    for (long long ch = blockIdx.x; ch < n_chunks; ch += gridDim.x) {
      const long long base = ch * chunk + (long long)threadIdx.x * VEC;
      // Loads first (UNROLL independent vectors in flight), then math, then
      // stores.  A vector that crosses the row end is read and written
      // element by element; only the last chunk of a row has one, so the
      // branch is uniform elsewhere.  One code path keeps the compile small.
      ckjit_vec<T, VEC> va[UNROLL], vb[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        const long long c = base + (long long)u * THREADS * VEC;
        if (c + VEC <= cols) {
          va[u] = ckjit_load<T, VEC>(ar + c);
          if (ARITY == 2) vb[u] = ckjit_load<T, VEC>(br + c);
        } else {
#pragma unroll
          for (int k = 0; k < VEC; k++) {
            va[u].v[k] = c + k < cols ? ar[c + k] : T{};
            if (ARITY == 2) vb[u].v[k] = c + k < cols ? br[c + k] : T{};
          }
        }
      }
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        const long long c = base + (long long)u * THREADS * VEC;
        ckjit_vec<T, VEC> out;
#pragma unroll
        for (int k = 0; k < VEC; k++)
          out.v[k] = ckjit_from_float<T>(apply(ckjit_to_float(va[u].v[k]),
                                               ARITY == 2 ? ckjit_to_float(vb[u].v[k]) : 0.0f,
                                               scale, bias));
        if (c + VEC <= cols) {
          ckjit_store<T, VEC>(yr + c, out);
        } else {
#pragma unroll
          for (int k = 0; k < VEC; k++)
            if (c + k < cols) yr[c + k] = out.v[k];
        }
      }
    }
  }
}
CKJIT_ABI_KERNEL(ckjit_elementwise, CKJIT_ELEMENTWISE_ARGS);
