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

#ifdef __cplusplus
}

#endif

/* GEMM (bf16, f16, tf32, f32): batched, grouped, split-K, fused epilogues. */
#include "ckjit/gemm.h"
/* Fused attention forward. */
#include "ckjit/attention.h"
/* Attention over a paged K/V cache, and appending to it. */
#include "ckjit/paged_attention.h"
/* Prepared calls: one shape checked and planned once, run many times. */
#include "ckjit/prepared.h"
/* FP8 GEMM with tensor, row or block scaling. */
#include "ckjit/gemm_fp8.h"
/* Mixture-of-experts routing: tokens sorted by expert. */
#include "ckjit/moe.h"

#endif /* CKJIT_CKJIT_H */
