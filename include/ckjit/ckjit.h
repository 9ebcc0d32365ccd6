/*
 * ckjit — Composable-Kernel-Tile-style GPU operators compiled at first call.
 *
 * Every function returns a ckjit_status; on failure ckjit_last_error() (per
 * thread) says what went wrong and where.  No function aborts, exits or
 * prints unless asked to (CKJIT_LOG).  Device pointers and streams are opaque
 * `void *`: a CUdeviceptr/CUstream on NVIDIA, a hip pointer/hipStream_t on
 * AMD; a NULL stream is the default stream.  Ops need no set-up call.
 *
 * Devices: every GPU of the process.  An op runs on the device that owns
 * its stream: the stream's context on CUDA (cuStreamGetCtx), its device on
 * HIP.  The default stream (NULL) is the calling thread's current context's
 * (HIP: current device's), or, when no context is current, the default
 * device's: CKJIT_DEVICE / ckjit_options.device (default 0).  Each device
 * is opened on first use and gets its own loaded kernels; kernels are
 * compiled for each device's arch (CKJIT_ARCH overrides it for all).
 * Threads driving different GPUs share nothing mutable on the hot path.
 * ckjit loads its kernels into each device's primary context, the one the
 * CUDA runtime, PyTorch and CuPy use: a stream of another context (made
 * with cuCtxCreate) gets CKJIT_ERROR_INVALID_ARGUMENT.  A call never
 * changes the calling thread's current context (HIP: current device); it
 * pushes the stream's device's for the call and pops it.  With
 * CKJIT_DEVICE_CHECKS=1 an operand in another device's memory than the
 * stream's gets CKJIT_ERROR_INVALID_ARGUMENT naming both devices (one
 * driver query per pointer per call, so off by default).
 */
#ifndef CKJIT_CKJIT_H
#define CKJIT_CKJIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define CKJIT_API
#elif defined(__GNUC__)
#define CKJIT_API __attribute__((visibility("default")))
#else
#define CKJIT_API
#endif

/* ---- version ------------------------------------------------------------ */
#define CKJIT_VERSION_MAJOR 0
#define CKJIT_VERSION_MINOR 1
#define CKJIT_VERSION_PATCH 0
#define CKJIT_VERSION_NUMBER \
  (CKJIT_VERSION_MAJOR * 10000 + CKJIT_VERSION_MINOR * 100 + CKJIT_VERSION_PATCH)
#define CKJIT_VERSION_STRING "0.1.0"

/* The version of the library actually linked (compare with the macros). */
CKJIT_API unsigned ckjit_version(void);
CKJIT_API const char *ckjit_version_string(void);

/* ---- status and errors -------------------------------------------------- */
typedef enum ckjit_status {
  CKJIT_SUCCESS = 0,
  CKJIT_ERROR_INVALID_ARGUMENT = -1, /* bad pointer, size, stride, enum value */
  CKJIT_ERROR_UNSUPPORTED = -2,      /* arch, dtype or feature not supported */
  CKJIT_ERROR_NO_DEVICE = -3,        /* no GPU (compile-only still works) */
  CKJIT_ERROR_BACKEND_UNAVAILABLE = -4, /* vendor library (NVRTC, hipRTC, driver) missing */
  CKJIT_ERROR_COMPILE = -5,          /* the runtime compiler rejected a kernel */
  CKJIT_ERROR_LOAD = -6,             /* code object could not be loaded */
  CKJIT_ERROR_LAUNCH = -7,           /* kernel launch failed */
  CKJIT_ERROR_OUT_OF_MEMORY = -8,    /* host or device allocation failed */
  CKJIT_ERROR_DEVICE = -9,           /* another driver/runtime error */
  CKJIT_ERROR_CACHE = -10,           /* cache I/O failed (reported by tools) */
  CKJIT_ERROR_INTERNAL = -11         /* a bug in ckjit: please report */
} ckjit_status;

/* Short constant name of a status ("CKJIT_ERROR_COMPILE"). Never NULL. */
CKJIT_API const char *ckjit_status_string(ckjit_status status);

/* Details of the last failure on the calling thread: what, where and, for a
 * compile failure, the compiler log and the offending source lines.  "" when
 * the thread has seen no failure.  Valid until the thread's next ckjit call. */
CKJIT_API const char *ckjit_last_error(void);
/* Status of the last failure on the calling thread (CKJIT_SUCCESS if none). */
CKJIT_API ckjit_status ckjit_last_status(void);

/* ---- data types --------------------------------------------------------- */
typedef enum ckjit_dtype {
  CKJIT_F32 = 0,
  CKJIT_F16 = 1,
  CKJIT_BF16 = 2,
  CKJIT_I8 = 3,       /* quantized outputs */
  CKJIT_FP8_E4M3 = 4, /* quantized outputs (OCP e4m3fn: max 448, no infinity) */
  CKJIT_FP8_E5M2 = 5, /* reserved */
  CKJIT_I32 = 6,      /* indices */
  CKJIT_I64 = 7,      /* indices */
  CKJIT_DTYPE_COUNT_
} ckjit_dtype;

/* Size in bytes of one element; 0 for an unknown dtype. */
CKJIT_API size_t ckjit_dtype_size(ckjit_dtype dtype);
/* "f32", "f16", "bf16", ...; "?" for an unknown dtype. */
CKJIT_API const char *ckjit_dtype_name(ckjit_dtype dtype);

/* ---- initialization (optional) ------------------------------------------ */
typedef enum ckjit_backend {
  CKJIT_BACKEND_AUTO = 0, /* CKJIT_BACKEND, else the vendor whose GPU is present */
  CKJIT_BACKEND_CUDA = 1, /* NVRTC + CUDA driver API */
  CKJIT_BACKEND_HIP = 2   /* hipRTC + HIP runtime */
} ckjit_backend;

typedef struct ckjit_options {
  size_t struct_size;    /* sizeof(ckjit_options); set by ckjit_options_init */
  ckjit_backend backend; /* AUTO: environment, then detection */
  int device;            /* device ordinal; -1: CKJIT_DEVICE or 0 */
  const char *arch;      /* NULL: CKJIT_ARCH or the device's arch */
  const char *cache_dir; /* NULL: CKJIT_CACHE_DIR, XDG_CACHE_HOME/ckjit, ~/.cache/ckjit */
  int disk_cache;        /* 1 on, 0 off, -1: CKJIT_CACHE_DISABLE decides */
  /* The remote cache tier (appended; older callers' struct_size leaves it
   * NULL): "redis://[user[:password]@]host[:port][/db]" or
   * "unix://[user[:password]@]/path/to.sock[?db=N]"; NULL:
   * CKJIT_REMOTE_CACHE decides; "": off.  Searched after the disk cache and
   * its read-only layers, before compiling; off with the disk cache.  A
   * malformed URL makes ckjit_init fail with CKJIT_ERROR_INVALID_ARGUMENT
   * (the message shows the URL with its password as "***"); a library
   * built without Redis support (hiredis) fails it with
   * CKJIT_ERROR_UNSUPPORTED.  The other settings (timeouts, lease, TTL,
   * password file) come from the CKJIT_REMOTE_CACHE_* variables. */
  const char *remote_cache;
} ckjit_options;

/* Fills `opts` with the defaults (everything from the environment). */
CKJIT_API void ckjit_options_init(ckjit_options *opts);

/* Initializes with explicit options.  Optional: any op initializes lazily
 * from the environment.  Fails with CKJIT_ERROR_INVALID_ARGUMENT when the
 * library is already initialized (call ckjit_shutdown first).  A host with
 * no GPU initializes successfully (compile-only); ops then fail with
 * CKJIT_ERROR_NO_DEVICE. */
CKJIT_API ckjit_status ckjit_init(const ckjit_options *opts);

/* Unloads every kernel and frees everything ckjit holds.  Call it when no
 * other thread is inside ckjit.  A later call re-initializes lazily. */
CKJIT_API void ckjit_shutdown(void);

typedef struct ckjit_device_info {
  ckjit_backend backend; /* backend in use (AUTO when no GPU and none forced) */
  int has_device;        /* 1 when a GPU is present and usable */
  int device;            /* its ordinal (-1 without a GPU) */
  char arch[64];         /* arch kernels are compiled for ("sm_90", "gfx90a:sramecc+:xnack-") */
  char device_arch[64];  /* the present device's own arch ("" without a GPU) */
  char name[128];        /* device name ("" without a GPU) */
  int multiprocessors;   /* SMs / CUs (0 without a GPU) */
  char compiler[128];    /* runtime compiler fingerprint ("" when none loaded) */
  char cache_dir[512];   /* writable disk cache directory ("" when disabled) */
} ckjit_device_info;

/* The default device (CKJIT_DEVICE / ckjit_options.device). */
CKJIT_API ckjit_status ckjit_get_device_info(ckjit_device_info *info);
/* Device `device` (an ordinal; -1: the default device), opened if it was
 * not yet.  CKJIT_ERROR_INVALID_ARGUMENT for an ordinal past the count. */
CKJIT_API ckjit_status ckjit_get_device_info_for(int device, ckjit_device_info *info);
/* GPUs of the backend's vendor the process sees (0 without one). */
CKJIT_API ckjit_status ckjit_get_device_count(int *count);

/* ---- device memory helpers ---------------------------------------------- */
typedef enum ckjit_copy_kind {
  CKJIT_HOST_TO_DEVICE = 1,
  CKJIT_DEVICE_TO_HOST = 2,
  CKJIT_DEVICE_TO_DEVICE = 3
} ckjit_copy_kind;

/* The helpers work on the current device: the calling thread's current
 * context's (HIP: current device; a private context counts as its
 * device, whose primary context the helper uses), or the default device
 * when none is current. */
CKJIT_API ckjit_status ckjit_malloc(void **ptr, size_t bytes);
CKJIT_API ckjit_status ckjit_free(void *ptr); /* NULL is a no-op */
/* ckjit_memcpy and ckjit_memset are synchronous: they return when done.
 * They run on the legacy default stream, so they are ordered after earlier
 * work on blocking streams but not on non-blocking ones (synchronize
 * those first).  ckjit_free frees memory of any device. */
CKJIT_API ckjit_status ckjit_memcpy(void *dst, const void *src, size_t bytes,
                                    ckjit_copy_kind kind);
CKJIT_API ckjit_status ckjit_memset(void *ptr, int value, size_t bytes);
/* Waits for `stream` (on its device); NULL waits for the whole current
 * device. */
CKJIT_API ckjit_status ckjit_synchronize(void *stream);

/* ---- statistics ---------------------------------------------------------- */
typedef struct ckjit_stats {
  uint64_t memory_hits;      /* kernel lookups served by an already loaded kernel (all
                                GPUs; an op makes one per launch) */
  uint64_t disk_hits;        /* code objects read from the disk cache */
  uint64_t disk_misses;      /* lookups that found nothing usable on disk */
  uint64_t disk_rejects;     /* entries that failed verification (then replaced) */
  uint64_t disk_writes;      /* entries written */
  uint64_t disk_write_errors;/* writes that failed (disk full, read-only, ...) */
  uint64_t compiles;         /* successful runtime compilations */
  uint64_t compile_failures;
  uint64_t loads;            /* modules loaded onto the device */
  uint64_t load_failures;
  double compile_ms;         /* total wall time in the runtime compiler */
  double load_ms;            /* total wall time loading modules */
  /* The remote cache tier (CKJIT_REMOTE_CACHE; appended).  Each build that
   * misses memory and disk makes one lookup: a hit or a miss. */
  uint64_t remote_hits;      /* code objects fetched from the remote cache (verified, then
                                written to the disk cache) */
  uint64_t remote_misses;    /* lookups that found nothing usable there (nothing, a
                                rejected value, the server unreachable or skipped) */
  uint64_t remote_rejects;   /* values that failed verification (never loaded) */
  uint64_t remote_writes;    /* entries stored there after a compile */
  uint64_t remote_errors;    /* operations that failed (connection, timeout, refused) */
  uint64_t remote_lease_waits; /* lookups that waited for another process's compile */
  double remote_ms;          /* total wall time spent on the remote cache, waits included */
} ckjit_stats;

CKJIT_API void ckjit_get_stats(ckjit_stats *stats);
CKJIT_API void ckjit_reset_stats(void);

/* ---- ahead-of-time compilation (prewarm) --------------------------------- */
/* A specialization is named by a stable text spec, "family:key=value,...",
 * e.g. "elementwise:dtype=bf16,op=gelu_tanh,epilogue=none,vec=8".
 * Omitted keys take their defaults. */

/* Number of default specializations (the set `ckjit-prewarm --all` builds). */
CKJIT_API size_t ckjit_default_spec_count(void);
/* Writes the i-th default spec into buf. */
CKJIT_API ckjit_status ckjit_default_spec(size_t index, char *buf, size_t len);

typedef struct ckjit_compile_result {
  int cached;           /* 1 when nothing was compiled for this call: the entry
                           was in a disk cache or the remote cache, this process had compiled it
                           before, or another thread of this process was
                           compiling it at the same time */
  double ms;            /* wall time of this request */
  size_t code_size;     /* bytes of the code object */
  char key[33];         /* cache key, 32 hex digits */
  char kernel[64];      /* kernel function name */
  int stored;           /* 1 when the entry is in the disk cache: written by
                           this call, or already there (the writable directory
                           or a read-only layer); 0 with the disk cache off */
} ckjit_compile_result;

/* CKJIT_SUCCESS when `spec` has a kernel for `arch` ("sm_90", "gfx90a",
 * ...; NULL: the configured arch).  CKJIT_ERROR_UNSUPPORTED, naming the
 * archs it runs on in ckjit_last_error(), when its family exists for other
 * archs only: the NVIDIA tensor-core GEMMs (gemm_mma and gemm_tf32: sm_80
 * and newer; gemm_wgmma: sm_90) and AMD's MFMA GEMM (gfx908, gfx90a,
 * gfx94x).  ckjit_compile_spec and ckjit_get_function refuse such pairs the
 * same way; `ckjit-prewarm --all` skips them.  CKJIT_ERROR_INVALID_ARGUMENT
 * or CKJIT_ERROR_UNSUPPORTED for a malformed spec or arch. */
CKJIT_API ckjit_status ckjit_spec_has_kernel(const char *spec, const char *arch);

/* Compiles `spec` for `arch` ("sm_90", "gfx90a", ...; NULL: the configured
 * arch) into the disk cache without a GPU.  Thread-safe; threads asking for
 * the same (spec, arch) at once share one compile.  `result` may be NULL.
 *
 * A kernel is compiled at most once per process: the code object is kept in
 * memory (bounded like the disk cache, least recently used out) whether or
 * not it reached the disk, and a later call that misses the disk writes it
 * there again instead of compiling.  CKJIT_ERROR_CACHE when the disk cache
 * is on but the entry is not in it (full or read-only disk, an unusable
 * directory, something else at the entry's path): the message says why, and
 * `result` is filled as on success (stored = 0).  With the disk cache off
 * (CKJIT_CACHE_DISABLE=1, ckjit_options.disk_cache = 0) it succeeds with
 * stored = 0. */
CKJIT_API ckjit_status ckjit_compile_spec(const char *spec, const char *arch,
                                          ckjit_compile_result *result);

/* The loaded device function of `spec` on the current device (a CUfunction
 * or hipFunction_t), compiling it first if needed: for launching it yourself
 * (e.g. into a hand-built graph) or measuring against a raw driver launch.
 * Valid until ckjit_shutdown(). */
CKJIT_API ckjit_status ckjit_get_function(const char *spec, void **function);

/* ---- ops ----------------------------------------------------------------- */
/* Shapes and strides are in elements.  A 2D tensor is `rows` x `cols` with
 * contiguous columns and a row stride `ld` >= cols.  Launches are
 * asynchronous on `stream` and never synchronize, so they can be captured
 * into CUDA/HIP graphs. */

/* dst[r][c] = src[r][c] */
CKJIT_API ckjit_status ckjit_copy2d(ckjit_dtype dtype, int64_t rows, int64_t cols,
                                    const void *src, int64_t ld_src,
                                    void *dst, int64_t ld_dst, void *stream);

typedef enum ckjit_unary_op {
  CKJIT_UNARY_IDENTITY = 0,
  CKJIT_UNARY_RELU = 1,
  CKJIT_UNARY_GELU_TANH = 2,
  CKJIT_UNARY_GELU_ERF = 3,
  CKJIT_UNARY_SILU = 4,
  CKJIT_UNARY_SIGMOID = 5
} ckjit_unary_op;

typedef enum ckjit_binary_op {
  CKJIT_BINARY_ADD = 0,
  CKJIT_BINARY_SUB = 1,
  CKJIT_BINARY_MUL = 2,
  CKJIT_BINARY_DIV = 3,
  CKJIT_BINARY_MAX = 4, /* NaN-propagating, like torch.maximum */
  CKJIT_BINARY_MIN = 5
} ckjit_binary_op;

/* Optional epilogue y = scale * f(...) + bias, computed in f32.
 * Pass NULL for no epilogue (the kernel then has none). */
typedef struct ckjit_epilogue {
  float scale;
  float bias;
} ckjit_epilogue;

/* y = epi(op(x)) */
CKJIT_API ckjit_status ckjit_unary(ckjit_unary_op op, ckjit_dtype dtype,
                                   int64_t rows, int64_t cols,
                                   const void *x, int64_t ld_x,
                                   void *y, int64_t ld_y,
                                   const ckjit_epilogue *epilogue, void *stream);

/* y = epi(op(a, b)) */
CKJIT_API ckjit_status ckjit_binary(ckjit_binary_op op, ckjit_dtype dtype,
                                    int64_t rows, int64_t cols,
                                    const void *a, int64_t ld_a,
                                    const void *b, int64_t ld_b,
                                    void *y, int64_t ld_y,
                                    const ckjit_epilogue *epilogue, void *stream);

/* Batched transpose: for each b < batch, out_b[c][r] = in_b[r][c], where
 * in_b  = in  + b * batch_stride_in  is rows x cols with row stride ld_in and
 * out_b = out + b * batch_stride_out is cols x rows with row stride ld_out.
 * batch = 1 is a plain 2D transpose. */
CKJIT_API ckjit_status ckjit_transpose(ckjit_dtype dtype, int64_t batch,
                                       int64_t rows, int64_t cols,
                                       const void *in, int64_t ld_in,
                                       int64_t batch_stride_in,
                                       void *out, int64_t ld_out,
                                       int64_t batch_stride_out, void *stream);

/* ---- reductions ----------------------------------------------------------- */
/* All reductions accumulate in f32.  NaN propagates as in PyTorch: a row
 * with a NaN sums to NaN, its max/min is NaN, and argmax/argmin return the
 * index of its first NaN.  Ties in argmax/argmin return the lowest index. */
typedef enum ckjit_reduce_op {
  CKJIT_REDUCE_SUM = 0,
  CKJIT_REDUCE_MEAN = 1,
  CKJIT_REDUCE_MAX = 2,
  CKJIT_REDUCE_MIN = 3,
  CKJIT_REDUCE_ARGMAX = 4, /* y_dtype CKJIT_I32 or CKJIT_I64 */
  CKJIT_REDUCE_ARGMIN = 5  /* y_dtype CKJIT_I32 or CKJIT_I64 */
} ckjit_reduce_op;

/* A strided tensor of rank 1..4: shape and strides in elements (strides
 * >= 0, any order; a stride may be 0 to broadcast). */
typedef struct ckjit_tensor_layout {
  int rank;
  int64_t shape[4];
  int64_t strides[4];
} ckjit_tensor_layout;

/* y = op(x) over dimension `dim` of x.  y is contiguous (row-major) with
 * x's shape less `dim`; its dtype is f32/f16/bf16 for SUM..MIN and
 * CKJIT_I32/CKJIT_I64 for ARGMAX/ARGMIN (I32 only while the reduced
 * dimension has fewer than 2^31 elements).  x's dtype is f32, f16 or bf16.
 * Rows too long or too few for the GPU are split over blocks; the partial
 * results are combined in a fixed order (deterministic, no atomics). */
CKJIT_API ckjit_status ckjit_reduce(ckjit_reduce_op op, ckjit_dtype dtype,
                                    const ckjit_tensor_layout *x_layout, const void *x,
                                    int dim, ckjit_dtype y_dtype, void *y, void *stream);

/* y[r] = op(x[r][0 .. cols)): the last-dimension case of ckjit_reduce. */
CKJIT_API ckjit_status ckjit_reduce_rows(ckjit_reduce_op op, ckjit_dtype dtype,
                                         int64_t rows, int64_t cols,
                                         const void *x, int64_t ld_x,
                                         ckjit_dtype y_dtype, void *y, void *stream);

/* ---- softmax ---------------------------------------------------------------- */
typedef struct ckjit_softmax_params {
  float scale;               /* x is multiplied by it first (1: none) */
  int log;                   /* 1: log-softmax */
  /* Optional device array of `rows` int32: in row r only the first
   * valid_cols[r] columns take part (values past cols are clamped); the
   * rest of the row is written as 0 (softmax) or -inf (log-softmax).  A row
   * with no valid column is written as all 0 / all -inf.  NULL: no mask. */
  const int32_t *valid_cols;
} ckjit_softmax_params;

/* Fills `p` with scale 1, no log, no mask. */
CKJIT_API void ckjit_softmax_params_init(ckjit_softmax_params *p);

/* y[r] = softmax(scale * x[r]) (or log-softmax) over the last dimension,
 * with max subtraction; f32 math on z = scale * x rounded to f32 (as
 * torch.softmax(x * scale) on f32).  A row with one valid column gives
 * exactly 1 (log-softmax 0); n equal valid values give 1/n rounded to f32
 * (log-softmax -log(n) within one f32 ulp), then rounded to the dtype.
 * `params` NULL: the defaults.  y may be x (in place, same ld).  As in
 * PyTorch, a row holding NaN or +inf, or only -inf, among its valid columns
 * comes out NaN. */
CKJIT_API ckjit_status ckjit_softmax(ckjit_dtype dtype, int64_t rows, int64_t cols,
                                     const void *x, int64_t ld_x, void *y, int64_t ld_y,
                                     const ckjit_softmax_params *params, void *stream);

/* ---- normalizations ------------------------------------------------------------ */
/* Every pointer but x and y is optional (NULL).  Vectors of `cols` elements
 * (weight, bias) have x's dtype; per-row outputs are f32. */
typedef struct ckjit_norm_params {
  float eps;                 /* added to the variance (mean square); default 1e-5 */
  const void *weight;        /* gamma [cols]; NULL: 1 */
  const void *bias;          /* beta [cols], layernorm only; NULL: 0 */
  /* Fused residual add: the normalized input is h = x + residual, rounded
   * to x's dtype (the value a separate add would have stored).  h is also
   * written to sum_out (rows x cols, row stride ld_sum_out) when that is
   * not NULL.  sum_out may alias residual or x (in-place update). */
  const void *residual;
  int64_t ld_residual;
  void *sum_out;
  int64_t ld_sum_out;
  float *mean_out;           /* [rows] row mean (layernorm only) */
  float *rstd_out;           /* [rows] 1/sqrt(var + eps) (layernorm) or 1/sqrt(mean(h^2) + eps) */
} ckjit_norm_params;

/* Fills `p` with eps 1e-5 and everything else NULL / 0. */
CKJIT_API void ckjit_norm_params_init(ckjit_norm_params *p);

/* y = (h - mean) * rstd * weight + bias per row, h = x [+ residual];
 * biased variance (as torch.nn.functional.layer_norm), computed from the
 * mean (two passes over the row on chip), not as E[h^2] - E[h]^2.  y may
 * be x.  A bias needs a weight; sum_out needs a residual. */
CKJIT_API ckjit_status ckjit_layernorm2d(ckjit_dtype dtype, int64_t rows, int64_t cols,
                                         const void *x, int64_t ld_x, void *y, int64_t ld_y,
                                         const ckjit_norm_params *params, void *stream);

/* y = h * rstd * weight per row, rstd = 1/sqrt(mean(h^2) + eps). */
CKJIT_API ckjit_status ckjit_rmsnorm2d(ckjit_dtype dtype, int64_t rows, int64_t cols,
                                       const void *x, int64_t ld_x, void *y, int64_t ld_y,
                                       const ckjit_norm_params *params, void *stream);

/* ---- rowwise dynamic quantization ------------------------------------------------ */
/* For each row of a value v (computed in f32):
 *   row_scale[r] = max_c |v[r][c]| / QMAX   (QMAX 127 for CKJIT_I8, 448 for
 *                                            CKJIT_FP8_E4M3; a zero row gets scale 1)
 *   q[r][c]      = convert(v[r][c] * (QMAX / max_c |v[r][c]|))
 * where convert rounds to nearest even and saturates (int8: to [-127, 127];
 * e4m3: to +-448).  Dequantize with q * row_scale[r].  A NaN in a row makes
 * its scale NaN and every q of the row 0 (int8) or NaN (e4m3). */

/* v = rmsnorm2d(x [+ residual]) (params as for ckjit_rmsnorm2d; rstd_out
 * and sum_out are written when given), then quantized into q (q_dtype
 * CKJIT_I8 or CKJIT_FP8_E4M3, row stride ld_q) and row_scale [rows]. */
CKJIT_API ckjit_status ckjit_rmsnorm2d_quant(ckjit_dtype dtype, int64_t rows, int64_t cols,
                                             const void *x, int64_t ld_x,
                                             const ckjit_norm_params *params,
                                             ckjit_dtype q_dtype, void *q, int64_t ld_q,
                                             float *row_scale, void *stream);

/* Smoothquant: v[r][c] = x[r][c] * smooth_scale[c] (f32 [cols]), then
 * quantized as above. */
CKJIT_API ckjit_status ckjit_smoothquant(ckjit_dtype dtype, int64_t rows, int64_t cols,
                                         const void *x, int64_t ld_x, const float *smooth_scale,
                                         ckjit_dtype q_dtype, void *q, int64_t ld_q,
                                         float *row_scale, void *stream);

/* ---- MoE gating ------------------------------------------------------------------- */
/* For each token t: p = softmax(x[t][0 .. experts)) (f32), then the k
 * largest p in descending order (ties: lower expert index first):
 * weights[t*k + i] (f32) and indices[t*k + i] (index_dtype CKJIT_I32 or
 * CKJIT_I64).  renormalize != 0 divides the k weights by their sum.
 * experts <= 256, 1 <= k <= min(8, experts).  x, weights and indices are
 * aligned to their element size and do not overlap.  As torch.softmax +
 * torch.topk: a token whose logits hold NaN or +inf, or are all -inf, gets
 * NaN weights and indices 0 .. k-1. */
CKJIT_API ckjit_status ckjit_topk_softmax(ckjit_dtype dtype, int64_t tokens, int64_t experts,
                                          const void *x, int64_t ld_x, int k, int renormalize,
                                          float *weights, ckjit_dtype index_dtype,
                                          void *indices, void *stream);

/* ---- GEMM ------------------------------------------------------------------------ */
/* D = epilogue(alpha * A B), per batch entry:
 *   v = alpha * sum_k A[m][k] B[k][n]          (f32 accumulation)
 *     + beta * C[m][n]                         (when c != NULL and beta != 0;
 *                                               beta 0 never reads C, as in BLAS)
 *     + bias[m] or bias[n]                     (bias_mode)
 *     + D0[m][n]                               (when d0 != NULL)
 *   v = activation(v)                          (CKJIT_UNARY_* of ckjit_unary)
 *   v = v * D1[m][n]                           (when d1 != NULL)
 *   D[m][n] = v rounded to out_dtype (nearest even)
 * A is m x k and B is k x n, each row-major (element [i][j] at i * ld + j)
 * or column-major (at j * ld + i).  C, D, D0 and D1 are m x n row-major in
 * out_dtype; the bias vector is out_dtype too.  A column-major D is the
 * row-major D^T = B^T A^T: swap the operands and flip both orders.
 *
 * ab_dtype CKJIT_F16 or CKJIT_BF16 runs on tensor cores where the GPU has
 * them (wgmma on sm_90, mma.sync on other sm_80+; a SIMT kernel elsewhere);
 * CKJIT_F32 runs in f32 SIMT.  allow_tf32 permits tf32 tensor cores for f32
 * inputs, f32 accumulation: on sm_90 wgmma for one problem with m > 64
 * (inputs cut to 10 mantissa bits; no copies when A and B are 16-byte
 * aligned with leading dimensions multiples of 4, except for a column-major
 * A with a row-major B, or a row-major B with split-K / Stream-K, whose B
 * is first transposed into stream-ordered scratch memory; a misaligned
 * column-major A is too), otherwise mma.sync
 * on sm_80+ (inputs rounded to 10 mantissa bits); without tensor cores it
 * changes nothing.  Any m, n,
 * k >= 0 (k = 0 gives alpha * 0 and the epilogue), any leading dimensions
 * (>= the contiguous extent) and any element-aligned pointers; 16-byte
 * aligned pointers and leading dimensions that are multiples of 8 elements
 * take the fastest paths.  d may be c (then ldc and stride_c must equal
 * ldd and stride_d: in place); otherwise outputs must not overlap inputs.
 *
 * split_k > 1 cuts K into that many slices whose f32 partials are summed in a
 * fixed order by a second kernel (results do not depend on scheduling).
 * CKJIT_GEMM_STREAM_K asks for Stream-K: the tiles that do not fill whole
 * waves of the GPU are cut into equal runs of K steps, one per block,
 * across tile boundaries, and their f32 partials summed in a fixed order by
 * a second kernel (deterministic too); it runs on sm_90 with operands read
 * through TMA (16-byte aligned pointers, leading dimensions multiples of 8,
 * no zero batch stride) and elsewhere falls back to the automatic choice.
 * 0 lets ckjit choose (it splits small-m or small-n, large-k problems;
 * Stream-K only where CKJIT_TUNE measured it fastest). */
#define CKJIT_GEMM_STREAM_K (-1)

typedef enum ckjit_order {
  CKJIT_ROW_MAJOR = 0,
  CKJIT_COL_MAJOR = 1
} ckjit_order;

typedef enum ckjit_bias_mode {
  CKJIT_BIAS_NONE = 0,
  CKJIT_BIAS_PER_ROW = 1, /* bias[m], m entries */
  CKJIT_BIAS_PER_COL = 2  /* bias[n], n entries */
} ckjit_bias_mode;

typedef struct ckjit_gemm_desc {
  int64_t m, n, k;
  ckjit_dtype ab_dtype;      /* A and B: CKJIT_F16, CKJIT_BF16 or CKJIT_F32 */
  ckjit_dtype out_dtype;     /* C, D, D0, D1 and bias: CKJIT_F16, CKJIT_BF16 or CKJIT_F32 */
  const void *a;
  int64_t lda;
  ckjit_order a_order;
  const void *b;
  int64_t ldb;
  ckjit_order b_order;
  void *d;
  int64_t ldd;
  const void *c;             /* NULL: no beta term */
  int64_t ldc;
  float alpha, beta;
  const void *bias;          /* given exactly when bias_mode != CKJIT_BIAS_NONE; shared by every batch entry */
  ckjit_bias_mode bias_mode;
  ckjit_unary_op activation; /* IDENTITY, RELU, GELU_TANH, GELU_ERF, SILU or SIGMOID */
  const void *d0;            /* NULL: none */
  int64_t ldd0;
  const void *d1;            /* NULL: none */
  int64_t ldd1;
  /* Strided batch: entry i uses a + i * stride_a, ... (elements; 0 repeats
   * the same matrix for every entry). */
  int64_t batch;
  int64_t stride_a, stride_b, stride_c, stride_d, stride_d0, stride_d1;
  int split_k;               /* 0: automatic, 1: no split, > 1: that many slices, CKJIT_GEMM_STREAM_K */
  int allow_tf32;            /* f32 inputs only: tf32 tensor cores */
} ckjit_gemm_desc;

/* Zeroes `desc`, then sets alpha 1, batch 1, ab_dtype and out_dtype
 * CKJIT_BF16, both orders row-major and activation IDENTITY. */
CKJIT_API void ckjit_gemm_desc_init(ckjit_gemm_desc *desc);

/* One (possibly batched) GEMM. */
CKJIT_API ckjit_status ckjit_gemm(const ckjit_gemm_desc *desc, void *stream);

/* Grouped GEMM: `count` independent problems of different shapes and
 * pointers in one launch.  They share ab_dtype, out_dtype, orders,
 * activation, bias_mode, allow_tf32, and which of d0 / d1 are given;
 * each has batch 1 and split_k 0 or 1.  The descriptors are read before
 * the call returns. */
CKJIT_API ckjit_status ckjit_gemm_grouped(const ckjit_gemm_desc *descs, int count,
                                          void *stream);

/* ---- attention -------------------------------------------------------------------- */
/* Fused attention forward (FlashAttention-style; CK Tile's fmha), per batch
 * entry b, query head h and query row i < sq (sq, sk: the entry's lengths):
 *   g        = h / (num_heads_q / num_heads_kv)     (the K/V head: MHA, GQA, MQA)
 *   s[j]     = softmax_scale * sum_d Q[b,h,i,d] K[b,g,j,d]      (f32 accumulation)
 *   s[j]     = softcap * tanh(s[j] / softcap)                  (when softcap > 0)
 *   s[j]    += bias[b,h,i,j]                                   (when bias != NULL)
 *   s[j]    -= alibi_slopes[b,h] * |i + sk - sq - j|            (when alibi_slopes != NULL)
 *   s[j]     = -inf for a masked key j (below)
 *   p[j]     = exp(s[j] - max_j s), l = sum_j p[j]
 *   O[b,h,i,:] = sum_j p[j] V[b,g,j,:] / l,  LSE[b,h,i] = max_j s + log(l)
 * Masks, with the diagonal bottom-right aligned as FlashAttention 2 defines
 * it for sq != sk (query i sees the keys up to i + sk - sq):
 *   CKJIT_ATTENTION_MASK_NONE    every key j < sk;
 *   CKJIT_ATTENTION_MASK_CAUSAL  j <= i + sk - sq;
 *   CKJIT_ATTENTION_MASK_WINDOW  i + sk - sq - window_left <= j <= i + sk - sq + window_right,
 *                                a negative bound being unbounded on that side
 *                                (left < 0, right 0 is CAUSAL; both < 0 is NONE).
 * A row whose keys are all masked (or all -inf after the bias) gives O = 0
 * and LSE = -inf, as FlashAttention, not NaN.  A NaN or +inf score makes
 * its row NaN; a NaN or infinity in V makes NaN the rows that see its key
 * and, on the tensor-core kernels, possibly other rows of the same tiles
 * (they multiply p = 0 by it, as FlashAttention does; the SIMT kernel
 * skips p = 0).
 *
 * Precision: the scores, the running max and sum and O are f32; the
 * tensor-core kernels (f16, bf16) round p to the input dtype before the
 * p V product, as FlashAttention and cuDNN do; O is rounded to the dtype
 * (nearest even) once, at the end.  dtype CKJIT_F32 runs a SIMT kernel.
 *
 * Layout: every tensor has strides in elements for batch, head, sequence
 * and head dimension (any order, so BSHD, BHSD and a packed QKV need no
 * copy; a zero batch or head stride repeats the tensor).  The tensor-core
 * kernels read rows whose head-dimension stride is 1, with 16-byte aligned
 * pointers and other strides multiples of 8 elements; anything else runs
 * on the SIMT kernel.  Head dimensions 64, 96, 128, 192 and 256; head_dim_v
 * may differ from head_dim_qk (MLA's 192 / 128).
 *
 * Varlen: with cu_seqlens_q and cu_seqlens_k (device int32 arrays of batch
 * + 1 non-decreasing entries, both or neither), entry b's rows are the
 * tokens cu_seqlens_q[b] .. cu_seqlens_q[b+1] - 1 of a packed sequence
 * dimension (Q, O, LSE; likewise K and V with cu_seqlens_k): token t of
 * head h is at base + h * stride_head + t * stride_seq, and stride_batch
 * is not used.  seqlen_q and seqlen_k are then the largest lengths (the
 * grid is sized by them; rows past seqlen_q are not computed).  Empty
 * sequences are allowed.  The bias and ALiBi keep their batch index b and
 * local positions i, j.
 *
 * O must not overlap Q, K, V, the bias or LSE.  Sizes: seqlen_q, seqlen_k
 * <= 2^30; offsets are 64-bit, so a tensor may exceed 2^31 elements. */
typedef enum ckjit_attention_mask {
  CKJIT_ATTENTION_MASK_NONE = 0,
  CKJIT_ATTENTION_MASK_CAUSAL = 1,
  CKJIT_ATTENTION_MASK_WINDOW = 2
} ckjit_attention_mask;

/* Strides of an attention tensor, in elements. */
typedef struct ckjit_attention_strides {
  int64_t batch, head, seq, dim;
} ckjit_attention_strides;

typedef struct ckjit_attention_desc {
  ckjit_dtype dtype;            /* Q, K, V and O: CKJIT_F16, CKJIT_BF16 or CKJIT_F32 */
  int64_t batch;                /* >= 0 (0: nothing to do) */
  int64_t num_heads_q, num_heads_kv; /* num_heads_q % num_heads_kv == 0 */
  int64_t seqlen_q, seqlen_k;   /* >= 0; varlen: the largest lengths */
  int64_t head_dim_qk, head_dim_v;
  const void *q;
  ckjit_attention_strides q_strides;
  const void *k;
  ckjit_attention_strides k_strides;
  const void *v;
  ckjit_attention_strides v_strides;
  void *o;
  ckjit_attention_strides o_strides;
  float *lse;                   /* NULL: none; f32 [batch][heads_q][seqlen_q] */
  ckjit_attention_strides lse_strides; /* dim is not used */
  const int32_t *cu_seqlens_q, *cu_seqlens_k; /* NULL: dense */
  float softmax_scale;          /* 0: 1 / sqrt(head_dim_qk) */
  ckjit_attention_mask mask;
  int64_t window_left, window_right; /* MASK_WINDOW only; < 0: unbounded */
  const void *bias;             /* NULL: none; [batch][heads_q][seqlen_q][seqlen_k] */
  ckjit_dtype bias_dtype;       /* CKJIT_F32 or dtype */
  ckjit_attention_strides bias_strides; /* batch, head, seq = query row, dim = key column */
  const float *alibi_slopes;    /* NULL: none; [batch][heads_q] f32 */
  int64_t alibi_stride_batch;   /* 0: one [heads_q] row for every entry */
  float softcap;                /* > 0: logit soft-cap; 0: none */
} ckjit_attention_desc;

/* Zeroes `desc`, then sets dtype and bias_dtype CKJIT_BF16, batch and the
 * head counts 1, window_left and window_right -1.  Strides stay 0: set
 * them (ckjit_attention_strides_bshd / _bhsd fill the common layouts). */
CKJIT_API void ckjit_attention_desc_init(ckjit_attention_desc *desc);

/* Contiguous strides of a [batch][seq][heads][dim] (BSHD) or
 * [batch][heads][seq][dim] (BHSD) tensor. */
CKJIT_API ckjit_attention_strides ckjit_attention_strides_bshd(int64_t seq, int64_t heads,
                                                               int64_t dim);
CKJIT_API ckjit_attention_strides ckjit_attention_strides_bhsd(int64_t seq, int64_t heads,
                                                               int64_t dim);

/* One attention forward.  batch 0, seqlen_q 0 or num_heads_q 0 does
 * nothing (after the descriptor's checks: a bad dtype, head dim or option
 * still fails); seqlen_k 0 gives O = 0 and LSE = -inf.  A stride whose
 * extent is one entry (varlen's batch stride, LSE's dim) is not read. */
CKJIT_API ckjit_status ckjit_attention(const ckjit_attention_desc *desc, void *stream);

#ifdef __cplusplus
}

#endif

/* Attention over a paged K/V cache, and appending to it. */
#include "ckjit/paged_attention.h"
/* Prepared calls: one shape checked and planned once, run many times. */
#include "ckjit/prepared.h"
/* FP8 GEMM with tensor, row or block scaling. */
#include "ckjit/gemm_fp8.h"
/* Mixture-of-experts routing: tokens sorted by expert. */
#include "ckjit/moe.h"

#endif /* CKJIT_CKJIT_H */
