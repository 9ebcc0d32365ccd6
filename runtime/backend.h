/* Vendor backends: a runtime compiler (needs no GPU) and a device driver.
 * Both are loaded with dlopen so one build of libckjit runs anywhere. */
#ifndef CKJIT_RUNTIME_BACKEND_H
#define CKJIT_RUNTIME_BACKEND_H

#include <stdatomic.h>
#include <stddef.h>
#include "ckjit/ckjit.h"
#include "../base/buffer.h"

typedef struct ckjit_compile_input {
  const char *arch; /* validated against the compiler's identity already */
  const char *source;
  const char *source_name;
  int n_headers;
  const char *const *header_sources;
  const char *const *header_names;
  int n_options;
  const char *const *options;
} ckjit_compile_input;

/* A runtime compiler is identified from its library file without loading it
 * (see library_path.h); the library is loaded on the first compile. */
typedef struct ckjit_compiler {
  ckjit_backend vendor;
  const char *name;       /* "nvrtc" or "hiprtc" */
  int major, minor;       /* version, from the library's file name (0 when unknown) */
  char path[512];         /* the library file that will be loaded */
  char fingerprint[256];  /* name and library identity: part of the cache key */
  /* Loads the library on first use, then compiles.  Fills `code` with the
   * code object and `log` with the compiler log (NUL-terminated). */
  ckjit_status (*compile)(const struct ckjit_compiler *c, const ckjit_compile_input *in,
                          ckjit_buffer *code, ckjit_buffer *log);
  /* The options ckjit passes to this compiler for `arch`; returns how many
   * were written.  They are part of the cache key. */
  int (*options)(const struct ckjit_compiler *c, const char *arch, char opts[][96], int max);
} ckjit_compiler;

/* Identifies (once, thread-safe, without loading it) the runtime compiler of `vendor`. */
ckjit_status ckjit__compiler_get(ckjit_backend vendor, const ckjit_compiler **out);

/* Matrix instructions of a device, found once when it is opened. */
enum {
  CKJIT_MATRIX_MMA_SYNC = 1u,   /* NVIDIA sm_80+ mma.sync (f16, bf16) */
  CKJIT_MATRIX_WGMMA = 2u,      /* NVIDIA 9.0 wgmma (sm_90a code) */
  CKJIT_MATRIX_MFMA_F16 = 4u,   /* AMD MFMA f16 (gfx908+) */
  CKJIT_MATRIX_MFMA_BF16 = 8u,  /* AMD MFMA bf16 (the _1k forms, gfx90a+) */
};

/* What ckjit_device.enter changed on the calling thread (see there). */
typedef struct ckjit_device_scope {
  int pushed;      /* CUDA: the device's context was pushed and must be popped */
  int previous;    /* HIP: the caller's device, restored when != -1 */
} ckjit_device_scope;

/* One opened GPU: its properties and the backend's functions.  Every GPU
 * of a process gets its own; the functions are the vendor's. */
typedef struct ckjit_device {
  ckjit_backend vendor;
  int ordinal;
  char arch[64];
  char name[128];
  int multiprocessors;
  long long l2_bytes;     /* last-level cache size (0: unknown) */
  int max_shared_bytes;   /* shared memory (LDS) one block may use, dynamic included */
  unsigned matrix_units;  /* CKJIT_MATRIX_* the GPU has (the GEMM pipelines' choice) */
  int clusters;           /* launch() takes clusters of blocks (sm_90 with cuLaunchKernelEx) */
  int device_count;       /* devices of this vendor the process sees */
  /* The context ckjit's kernels for this GPU are loaded into: CUDA, the
   * device's primary context (retained while open); HIP, the ordinal + 1.
   * Streams are matched to GPUs by it (stream_context). */
  void *context;
  void *_Atomic scratch_pool; /* backend-owned stream-ordered pool (CUDA), made on first
                                 use; read without a lock on the launch path */
  /* Makes the device current on the calling thread for one ckjit call and
   * records in `scope` what `leave` must restore: ckjit never leaves the
   * caller's current context (CUDA) or device (HIP) changed. */
  ckjit_status (*enter)(const struct ckjit_device *d, struct ckjit_device_scope *scope);
  void (*leave)(const struct ckjit_device *d, const struct ckjit_device_scope *scope);
  /* The context that owns `stream` (compare with ckjit_device.context).
   * The default stream (NULL, and CUDA's legacy and per-thread handles) is
   * the calling thread's current context's; *context = NULL when none is
   * current (CUDA) or the owner cannot be asked (HIP before ROCm 6). */
  ckjit_status (*stream_context)(void *stream, void **context);
  /* The ordinal of the device a context from stream_context runs on, and
   * whether it is that device's primary context (slow: error and first-use
   * paths only). */
  ckjit_status (*context_device)(void *context, int *ordinal, int *primary);
  /* CKJIT_ERROR_INVALID_ARGUMENT, naming both devices, when `ptr` is memory
   * the driver knows to live on another device (managed and host memory are
   * accepted); CKJIT_SUCCESS when it cannot tell.  NULL when the driver has
   * no query for it. */
  ckjit_status (*check_pointer)(const struct ckjit_device *d, const char *api, const char *name,
                                const void *ptr);
  /* "CUDA device 1 (NVIDIA H100 80GB HBM3)", for messages. */
  void (*describe)(int ordinal, char *out, size_t len);
  ckjit_status (*module_load)(const struct ckjit_device *d, const void *code, size_t size,
                              void **module);
  void (*module_unload)(const struct ckjit_device *d, void *module);
  ckjit_status (*get_function)(const struct ckjit_device *d, void *module, const char *name,
                               void **function);
  /* The calls below run with the device entered (see enter). */
  /* `cluster` > 1: blocks run in clusters of that many along x (sm_90:
   * they share distributed shared memory and multicast loads); the grid's
   * x is a multiple of it.  Only where clusters is set. */
  ckjit_status (*launch)(void *function, const unsigned grid[3], const unsigned block[3],
                         unsigned cluster, unsigned shared_bytes, void *stream, void **args);
  ckjit_status (*mem_alloc)(void **ptr, size_t bytes);
  ckjit_status (*mem_free)(void *ptr);
  /* Stream-ordered scratch memory (cuMemAllocAsync / hipMallocAsync): the
   * allocation and the free are queued on `stream`, so kernels that use it
   * need no synchronization and can be captured into graphs. */
  ckjit_status (*mem_alloc_async)(struct ckjit_device *d, void **ptr, size_t bytes, void *stream);
  ckjit_status (*mem_free_async)(void *ptr, void *stream);
  ckjit_status (*mem_copy)(void *dst, const void *src, size_t bytes, ckjit_copy_kind kind);
  ckjit_status (*mem_set)(void *ptr, int value, size_t bytes);
  ckjit_status (*synchronize)(void *stream);
  /* TMA descriptor (NVIDIA sm_90+; NULL elsewhere or with an older driver):
   * fills the 128-byte `map` for a rank-dimensional tensor of `dtype`
   * (CKJIT_F32, CKJIT_F16, CKJIT_BF16, or a 1-byte type moved as bytes) at `addr`, innermost dimension
   * first (strides in bytes, for dims 1..rank-1), moved in boxes of `box`
   * elements to or from 128-byte-swizzled shared memory; out-of-bounds
   * elements read as zero and are not written.  Made in d's context (the
   * driver refuses maps without a current one), whatever the caller has. */
  ckjit_status (*tensor_map_encode)(const struct ckjit_device *d, void *map, ckjit_dtype dtype,
                                    int rank, const void *addr,
                                    const unsigned long long *dims,
                                    const unsigned long long *strides, const unsigned *box);
  /* Releases what open took (ckjit_shutdown). */
  void (*close)(struct ckjit_device *d);
} ckjit_device;

/* Opens device `ordinal` of `vendor`.  CKJIT_ERROR_BACKEND_UNAVAILABLE when
 * the driver library is missing, CKJIT_ERROR_NO_DEVICE when it has no GPU. */
ckjit_status ckjit__cuda_device_open(int ordinal, ckjit_device *out);
ckjit_status ckjit__hip_device_open(int ordinal, ckjit_device *out);
ckjit_status ckjit__cuda_compiler_find(ckjit_compiler *out);
ckjit_status ckjit__hip_compiler_find(ckjit_compiler *out);

#endif
