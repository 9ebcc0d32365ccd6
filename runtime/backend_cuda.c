/* NVIDIA's device backend: the CUDA driver API loads cubins and launches
 * them (the compiler is compiler_nvrtc.c).  libcuda is opened with dlopen
 * and the few types used are declared here, so libckjit needs no CUDA
 * headers and runs on hosts without CUDA. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../base/log.h"
#include "arch.h"
#include "backend.h"
#include "library_path.h"

/* ---- CUDA driver --------------------------------------------------------- */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr;

/* cuLaunchKernelEx's configuration, with the one attribute used: the
 * cluster shape (CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION). */
struct cu_launch_attribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    unsigned cluster[3];
  } value;
};
struct cu_launch_config {
  unsigned grid[3], block[3], shared_bytes;
  void *stream;
  struct cu_launch_attribute *attrs;
  unsigned attr_count;
};
enum { CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4 };

static struct {
  CUresult (*init)(unsigned);
  CUresult (*device_count)(int *);
  CUresult (*device_get)(CUdevice *, int);
  CUresult (*device_attribute)(int *, int, CUdevice);
  CUresult (*device_name)(char *, int, CUdevice);
  CUresult (*primary_retain)(CUcontext *, CUdevice);
  CUresult (*primary_release)(CUdevice);
  CUresult (*ctx_get_current)(CUcontext *);
  CUresult (*ctx_push)(CUcontext);
  CUresult (*ctx_pop)(CUcontext *);
  CUresult (*ctx_get_device)(CUdevice *);
  CUresult (*stream_get_ctx)(void *, CUcontext *);
  CUresult (*pointer_get_attributes)(unsigned, const int *, void **, CUdeviceptr);
  CUresult (*ctx_synchronize)(void);
  CUresult (*module_load_data)(void **, const void *);
  CUresult (*module_unload)(void *);
  CUresult (*module_get_function)(void **, void *, const char *);
  CUresult (*tensor_map_encode_tiled)(void *, int, unsigned, void *, const unsigned long long *,
                                     const unsigned long long *, const unsigned *, const unsigned *,
                                     int, int, int, int);
  CUresult (*func_get_attribute)(int *, int, void *);
  CUresult (*func_set_attribute)(void *, int, int);
  CUresult (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                     void *, void **, void **);
  CUresult (*launch_ex)(const struct cu_launch_config *, void *, void **, void **);
  CUresult (*mem_alloc)(CUdeviceptr *, size_t);
  CUresult (*mem_free)(CUdeviceptr);
  CUresult (*mem_alloc_async)(CUdeviceptr *, size_t, void *);
  CUresult (*mem_free_async)(CUdeviceptr, void *);
  CUresult (*pool_create)(void **, const void *);
  CUresult (*pool_destroy)(void *);
  CUresult (*pool_set_attribute)(void *, int, void *);
  CUresult (*mem_alloc_from_pool_async)(CUdeviceptr *, size_t, void *, void *);
  CUresult (*copy_htod)(CUdeviceptr, const void *, size_t);
  CUresult (*copy_dtoh)(void *, CUdeviceptr, size_t);
  CUresult (*copy_dtod)(CUdeviceptr, CUdeviceptr, size_t);
  CUresult (*memset_d8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*stream_synchronize)(void *);
  CUresult (*error_name)(CUresult, const char **);
  CUresult (*error_string)(CUresult, const char **);
} cu;

enum {
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
};

static ckjit_status cuda_fail(ckjit_status st, CUresult r, const char *what) {
  const char *name = "?", *text = "";
  if (cu.error_name) cu.error_name(r, &name);
  if (cu.error_string) cu.error_string(r, &text);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) st = CKJIT_ERROR_OUT_OF_MEMORY;
  return ckjit__fail(st, "%s failed: %s (%d): %s", what, name ? name : "?", r, text ? text : "");
}

/* "CUDA device 1 (NVIDIA H100 80GB HBM3)" for messages.  A CUdevice is
 * its ordinal in every driver so far; cuDeviceGet is the documented
 * mapping, and the ordinal is what users pass. */
static void cuda_describe(int ordinal, char *out, size_t len) {
  char name[128] = "";
  CUdevice dev;
  if (cu.device_get(&dev, ordinal) || cu.device_name(name, (int)sizeof name, dev)) name[0] = '\0';
  snprintf(out, len, "CUDA device %d%s%s%s", ordinal, name[0] ? " (" : "", name, name[0] ? ")" : "");
}

/* NULL, CU_STREAM_LEGACY (1) and CU_STREAM_PER_THREAD (2) name the current
 * context's default stream. */
static ckjit_status cuda_stream_context(void *stream, void **context) {
  CUcontext owner = NULL;
  CUresult r = (uintptr_t)stream <= 2 ? cu.ctx_get_current(&owner) : cu.stream_get_ctx(stream, &owner);
  if (r == 400 /* CUDA_ERROR_INVALID_HANDLE */ || r == 201 /* INVALID_CONTEXT */)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "stream %p is not a CUDA stream of a live "
                       "context", stream);
  if (r) return cuda_fail(CKJIT_ERROR_DEVICE, r, (uintptr_t)stream <= 2 ? "cuCtxGetCurrent" : "cuStreamGetCtx");
  *context = owner;
  return CKJIT_SUCCESS;
}

/* The context is made current for the one query, then popped. */
static ckjit_status cuda_context_device(void *context, int *ordinal, int *primary) {
  CUcontext popped, prim = NULL;
  CUdevice dev;
  CUresult r = cu.ctx_push((CUcontext)context);
  if (r) return cuda_fail(CKJIT_ERROR_INVALID_ARGUMENT, r, "cuCtxPushCurrent (a stream's context)");
  r = cu.ctx_get_device(&dev);
  cu.ctx_pop(&popped);
  if (r) return cuda_fail(CKJIT_ERROR_INVALID_ARGUMENT, r, "cuCtxGetDevice (a stream's context)");
  *ordinal = (int)dev;
  /* Retaining an inactive primary context creates it, and the release then
   * destroys it again: it cannot have been the stream's. */
  *primary = !cu.primary_retain(&prim, dev) && prim == (CUcontext)context;
  if (prim) cu.primary_release(dev);
  return CKJIT_SUCCESS;
}

/* Push and pop rather than cuCtxSetCurrent: the caller (PyTorch, a CUDA
 * runtime program, another library) owns its thread's current context, and
 * switching it under them sends their next calls to the wrong GPU.  When the
 * caller's context is the device's already (the usual case: both use the
 * device's primary context) this costs one cuCtxGetCurrent. */
static ckjit_status cuda_enter(const ckjit_device *d, ckjit_device_scope *scope) {
  scope->pushed = 0;
  scope->previous = -1;
  CUcontext current = NULL;
  CUresult r = cu.ctx_get_current(&current);
  if (r) return cuda_fail(CKJIT_ERROR_DEVICE, r, "cuCtxGetCurrent");
  if (current == (CUcontext)d->context) return CKJIT_SUCCESS;
  if ((r = cu.ctx_push((CUcontext)d->context))) return cuda_fail(CKJIT_ERROR_DEVICE, r, "cuCtxPushCurrent");
  scope->pushed = 1;
  return CKJIT_SUCCESS;
}

static void cuda_leave(const ckjit_device *d, const ckjit_device_scope *scope) {
  (void)d;
  CUcontext popped;
  if (scope->pushed) cu.ctx_pop(&popped);
}

/* One driver query per pointer (CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL and
 * IS_MANAGED).  Memory the driver does not know (plain host memory, which
 * some systems let kernels read) is not judged here. */
static ckjit_status cuda_check_pointer(const ckjit_device *d, const char *api, const char *name,
                                       const void *ptr) {
  const int attrs[2] = {9 /* DEVICE_ORDINAL */, 8 /* IS_MANAGED */};
  int ordinal = -1, managed = 0;
  void *data[2] = {&ordinal, &managed};
  if (cu.pointer_get_attributes(2, attrs, data, (CUdeviceptr)(uintptr_t)ptr) || managed ||
      ordinal < 0 || ordinal == d->ordinal)
    return CKJIT_SUCCESS;
  char ours[200], theirs[200];
  cuda_describe(d->ordinal, ours, sizeof ours);
  cuda_describe(ordinal, theirs, sizeof theirs);
  return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                     "%s: %s (%p) is memory of %s, but the call runs on %s, the device of its "
                     "stream", api, name, ptr, theirs, ours);
}

/* Scratch memory comes from ckjit's own stream-ordered pool, which keeps
 * what it has grown to: the default pool returns memory to the system at
 * every synchronization, and a multi-pass op then pays tens of microseconds
 * to map it again on each call.  Created on first use; the application's
 * own default pool is left alone. */
static pthread_mutex_t cuda_pool_lock = PTHREAD_MUTEX_INITIALIZER;

/* CUmemPoolProps (cuda.h), 88 bytes; only the leading fields are set. */
typedef struct cuda_pool_props {
  int alloc_type, handle_types, location_type, location_id;
  void *win32_security_attributes;
  unsigned char rest[64];
} cuda_pool_props;
_Static_assert(sizeof(cuda_pool_props) == 88, "CUmemPoolProps is 88 bytes");

static void *cuda_scratch_pool(ckjit_device *d) {
  void *pool = atomic_load_explicit(&d->scratch_pool, memory_order_acquire);
  if (pool || !cu.pool_create || !cu.mem_alloc_from_pool_async) return pool;
  pthread_mutex_lock(&cuda_pool_lock); /* first use only */
  if (!(pool = atomic_load_explicit(&d->scratch_pool, memory_order_acquire))) {
    cuda_pool_props props;
    memset(&props, 0, sizeof props);
    props.alloc_type = 1;    /* CU_MEM_ALLOCATION_TYPE_PINNED */
    props.location_type = 1; /* CU_MEM_LOCATION_TYPE_DEVICE */
    props.location_id = d->ordinal;
    if (cu.pool_create(&pool, &props) == 0) {
      unsigned long long keep = ~0ull;
      cu.pool_set_attribute(pool, 4 /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */, &keep);
      atomic_store_explicit(&d->scratch_pool, pool, memory_order_release);
    } else {
      pool = NULL;
    }
  }
  pthread_mutex_unlock(&cuda_pool_lock);
  return pool;
}

static void cuda_close(ckjit_device *d) {
  void *pool = atomic_exchange(&d->scratch_pool, NULL);
  if (pool && cu.pool_destroy) cu.pool_destroy(pool);
  CUdevice dev;
  if (d->context && cu.primary_release && !cu.device_get(&dev, d->ordinal)) cu.primary_release(dev);
  d->context = NULL;
}

static ckjit_status cuda_module_load(const ckjit_device *d, const void *code, size_t size,
                                     void **module) {
  (void)size;
  ckjit_device_scope scope;
  ckjit_status st = cuda_enter(d, &scope);
  if (st) return st;
  CUresult r = cu.module_load_data(module, code);
  cuda_leave(d, &scope);
  if (r == CUDA_ERROR_NO_BINARY_FOR_GPU)
    return ckjit__fail(CKJIT_ERROR_LOAD, "cuModuleLoadData: the code object was not built for this "
                       "device (%s, %s)", d->name, d->arch);
  return r ? cuda_fail(CKJIT_ERROR_LOAD, r, "cuModuleLoadData") : CKJIT_SUCCESS;
}

static void cuda_module_unload(const ckjit_device *d, void *module) {
  ckjit_device_scope scope;
  if (cuda_enter(d, &scope)) return;
  cu.module_unload(module);
  cuda_leave(d, &scope);
}

static ckjit_status cuda_get_function(const ckjit_device *d, void *module, const char *name,
                                      void **function) {
  CUresult r = cu.module_get_function(function, module, name);
  if (r) return cuda_fail(CKJIT_ERROR_LOAD, r, "cuModuleGetFunction");
  /* Past 48 KiB, dynamic shared memory (the GEMM pipelines' stages) needs an
   * opt-in per function: allow all the device has beside the static part.
   * If that fails, a launch asking for more fails with its own error. */
  int static_smem = 0;
  if (cu.func_set_attribute && d->max_shared_bytes > 48 * 1024 &&
      !cu.func_get_attribute(&static_smem, 1, *function)) /* CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES */
    cu.func_set_attribute(*function, 8, d->max_shared_bytes - static_smem); /* ..._MAX_DYNAMIC_SHARED_SIZE_BYTES */
  return CKJIT_SUCCESS;
}

static ckjit_status cuda_tensor_map_encode(const ckjit_device *d, void *map, ckjit_dtype dtype,
                                           int rank, const void *addr,
                                           const unsigned long long *dims,
                                           const unsigned long long *strides, const unsigned *box) {
  const unsigned elem_strides[5] = {1, 1, 1, 1, 1};
  /* CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 9 / FLOAT16 6 / FLOAT32 7 / UINT8 0 (FP8
   * bytes), INTERLEAVE_NONE, SWIZZLE_128B 3, L2_PROMOTION_L2_256B 3,
   * FLOAT_OOB_FILL_NONE (zeros) */
  const int type = dtype == CKJIT_BF16 ? 9 : dtype == CKJIT_F16 ? 6 : ckjit_dtype_size(dtype) == 1 ? 0 : 7;
  ckjit_device_scope scope;
  ckjit_status st = cuda_enter(d, &scope);
  if (st) return st;
  CUresult r = cu.tensor_map_encode_tiled(map, type, (unsigned)rank, (void *)addr, dims, strides,
                                          box, elem_strides, 0, 3, 3, 0);
  cuda_leave(d, &scope);
  return r ? cuda_fail(CKJIT_ERROR_LAUNCH, r, "cuTensorMapEncodeTiled") : CKJIT_SUCCESS;
}

static ckjit_status cuda_launch(void *function, const unsigned grid[3], const unsigned block[3],
                                unsigned cluster, unsigned shared_bytes, void *stream, void **args) {
  if (cluster > 1) {
    struct cu_launch_attribute attr = {.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION};
    attr.value.cluster[0] = cluster, attr.value.cluster[1] = attr.value.cluster[2] = 1;
    const struct cu_launch_config config = {
        {grid[0], grid[1], grid[2]}, {block[0], block[1], block[2]}, shared_bytes, stream, &attr, 1};
    if (!cu.launch_ex) /* never planned: device.clusters is 0 then */
      return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "cuLaunchKernelEx: missing from this driver");
    CUresult r = cu.launch_ex(&config, function, args, NULL);
    return r ? cuda_fail(CKJIT_ERROR_LAUNCH, r, "cuLaunchKernelEx (clusters)") : CKJIT_SUCCESS;
  }
  CUresult r = cu.launch(function, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                         shared_bytes, stream, args, NULL);
  return r ? cuda_fail(CKJIT_ERROR_LAUNCH, r, "cuLaunchKernel") : CKJIT_SUCCESS;
}

static ckjit_status cuda_mem_alloc(void **ptr, size_t bytes) {
  CUdeviceptr p = 0;
  CUresult r = cu.mem_alloc(&p, bytes);
  if (r) return cuda_fail(CKJIT_ERROR_DEVICE, r, "cuMemAlloc");
  *ptr = (void *)(uintptr_t)p;
  return CKJIT_SUCCESS;
}

static ckjit_status cuda_mem_free(void *ptr) {
  CUresult r = cu.mem_free((CUdeviceptr)(uintptr_t)ptr);
  return r ? cuda_fail(CKJIT_ERROR_DEVICE, r, "cuMemFree") : CKJIT_SUCCESS;
}

static ckjit_status cuda_mem_alloc_async(ckjit_device *d, void **ptr, size_t bytes, void *stream) {
  if (!cu.mem_alloc_async)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "this CUDA driver lacks cuMemAllocAsync (needs 11.2+)");
  CUdeviceptr p = 0;
  void *pool = cuda_scratch_pool(d);
  CUresult r = pool ? cu.mem_alloc_from_pool_async(&p, bytes, pool, stream)
                    : cu.mem_alloc_async(&p, bytes, stream);
  if (r) return cuda_fail(CKJIT_ERROR_DEVICE, r, "cuMemAllocAsync");
  *ptr = (void *)(uintptr_t)p;
  return CKJIT_SUCCESS;
}

static ckjit_status cuda_mem_free_async(void *ptr, void *stream) {
  CUresult r = cu.mem_free_async((CUdeviceptr)(uintptr_t)ptr, stream);
  return r ? cuda_fail(CKJIT_ERROR_DEVICE, r, "cuMemFreeAsync") : CKJIT_SUCCESS;
}

static ckjit_status cuda_mem_copy(void *dst, const void *src, size_t bytes, ckjit_copy_kind kind) {
  CUresult r;
  switch (kind) {
  case CKJIT_HOST_TO_DEVICE: r = cu.copy_htod((CUdeviceptr)(uintptr_t)dst, src, bytes); break;
  case CKJIT_DEVICE_TO_HOST: r = cu.copy_dtoh(dst, (CUdeviceptr)(uintptr_t)src, bytes); break;
  default:
    r = cu.copy_dtod((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes);
    if (!r) r = cu.stream_synchronize(NULL); /* device-to-device copies return early */
    break;
  }
  return r ? cuda_fail(CKJIT_ERROR_DEVICE, r, "cuMemcpy") : CKJIT_SUCCESS;
}

static ckjit_status cuda_mem_set(void *ptr, int value, size_t bytes) {
  CUresult r = cu.memset_d8((CUdeviceptr)(uintptr_t)ptr, (unsigned char)value, bytes);
  if (!r) r = cu.stream_synchronize(NULL);
  return r ? cuda_fail(CKJIT_ERROR_DEVICE, r, "cuMemsetD8") : CKJIT_SUCCESS;
}

static ckjit_status cuda_synchronize(void *stream) {
  CUresult r = stream ? cu.stream_synchronize(stream) : cu.ctx_synchronize();
  return r ? cuda_fail(CKJIT_ERROR_DEVICE, r, "synchronize") : CKJIT_SUCCESS;
}

/* The driver's symbols, loaded by the first open that succeeds; later
 * opens (each GPU of the process is opened on first use) leave them alone,
 * so launches on other threads never see them written. */
static int cuda_loaded;

static ckjit_status cuda_load(void) {
  if (cuda_loaded) return CKJIT_SUCCESS;
  static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
  char path[64];
  void *h = ckjit__library_open_first(names, path, sizeof path);
  if (!h)
    return ckjit__fail(CKJIT_ERROR_BACKEND_UNAVAILABLE,
                       "CUDA driver (libcuda.so.1) not found: no NVIDIA driver on this host");
#define SYM(field, name)                                                                     \
  if (!(*(void **)&cu.field = dlsym(h, name)))                                               \
    return ckjit__fail(CKJIT_ERROR_BACKEND_UNAVAILABLE, "CUDA driver lacks %s", name);
  SYM(init, "cuInit");
  SYM(device_count, "cuDeviceGetCount");
  SYM(device_get, "cuDeviceGet");
  SYM(device_attribute, "cuDeviceGetAttribute");
  SYM(device_name, "cuDeviceGetName");
  SYM(primary_retain, "cuDevicePrimaryCtxRetain");
  SYM(primary_release, "cuDevicePrimaryCtxRelease_v2");
  SYM(ctx_get_current, "cuCtxGetCurrent");
  SYM(ctx_push, "cuCtxPushCurrent_v2");
  SYM(ctx_pop, "cuCtxPopCurrent_v2");
  SYM(ctx_get_device, "cuCtxGetDevice");
  SYM(stream_get_ctx, "cuStreamGetCtx");
  SYM(pointer_get_attributes, "cuPointerGetAttributes");
  SYM(ctx_synchronize, "cuCtxSynchronize");
  SYM(module_load_data, "cuModuleLoadData");
  SYM(module_unload, "cuModuleUnload");
  SYM(module_get_function, "cuModuleGetFunction");
  SYM(launch, "cuLaunchKernel");
  SYM(mem_alloc, "cuMemAlloc_v2");
  SYM(mem_free, "cuMemFree_v2");
  SYM(copy_htod, "cuMemcpyHtoD_v2");
  SYM(copy_dtoh, "cuMemcpyDtoH_v2");
  SYM(copy_dtod, "cuMemcpyDtoD_v2");
  SYM(memset_d8, "cuMemsetD8_v2");
  SYM(stream_synchronize, "cuStreamSynchronize");
  SYM(error_name, "cuGetErrorName");
  SYM(error_string, "cuGetErrorString");
#undef SYM
  /* Optional: TMA descriptors and the shared-memory opt-in (GEMM on sm_90;
   * older drivers lack them and the GEMMs take other pipelines) ... */
  *(void **)&cu.tensor_map_encode_tiled = dlsym(h, "cuTensorMapEncodeTiled");
  *(void **)&cu.launch_ex = dlsym(h, "cuLaunchKernelEx");
  *(void **)&cu.func_get_attribute = dlsym(h, "cuFuncGetAttribute");
  *(void **)&cu.func_set_attribute = dlsym(h, "cuFuncSetAttribute");
  if (!cu.func_get_attribute) cu.func_set_attribute = NULL;
  /* ... and stream-ordered scratch (split reductions and split-K). */
  *(void **)&cu.mem_alloc_async = dlsym(h, "cuMemAllocAsync");
  *(void **)&cu.mem_free_async = dlsym(h, "cuMemFreeAsync");
  if (!cu.mem_free_async) cu.mem_alloc_async = NULL;
  *(void **)&cu.pool_create = dlsym(h, "cuMemPoolCreate");
  *(void **)&cu.pool_destroy = dlsym(h, "cuMemPoolDestroy");
  *(void **)&cu.pool_set_attribute = dlsym(h, "cuMemPoolSetAttribute");
  *(void **)&cu.mem_alloc_from_pool_async = dlsym(h, "cuMemAllocFromPoolAsync");
  if (!cu.pool_destroy || !cu.pool_set_attribute) cu.pool_create = NULL;
  CUresult r = cu.init(0);
  if (r) return cuda_fail(r == CUDA_ERROR_NO_DEVICE ? CKJIT_ERROR_NO_DEVICE : CKJIT_ERROR_DEVICE, r,
                          "cuInit");
  cuda_loaded = 1;
  return CKJIT_SUCCESS;
}

/* Opens are serialized by the runtime (its init and open locks). */
ckjit_status ckjit__cuda_device_open(int ordinal, ckjit_device *out) {
  ckjit_status st = cuda_load();
  if (st) return st;
  CUresult r;
  int count = 0;
  if ((r = cu.device_count(&count))) return cuda_fail(CKJIT_ERROR_DEVICE, r, "cuDeviceGetCount");
  if (count == 0) return ckjit__fail(CKJIT_ERROR_NO_DEVICE, "CUDA driver reports no device");
  if (ordinal < 0 || ordinal >= count)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "device %d requested but only %d present",
                       ordinal, count);
  CUdevice dev;
  int major = 0, minor = 0, sms = 0, l2 = 0;
  if ((r = cu.device_get(&dev, ordinal))) return cuda_fail(CKJIT_ERROR_DEVICE, r, "cuDeviceGet");
  cu.device_attribute(&major, 75, dev); /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
  cu.device_attribute(&minor, 76, dev); /* ..._MINOR */
  cu.device_attribute(&sms, 16, dev);   /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
  cu.device_attribute(&l2, 38, dev);    /* CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE */
  int optin = 0;
  cu.device_attribute(&optin, 97, dev); /* ..._MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
  CUcontext context;
  if ((r = cu.primary_retain(&context, dev)))
    return cuda_fail(CKJIT_ERROR_DEVICE, r, "cuDevicePrimaryCtxRetain");
  memset(out, 0, sizeof *out);
  out->context = context;
  out->vendor = CKJIT_BACKEND_CUDA;
  out->ordinal = ordinal;
  snprintf(out->arch, sizeof out->arch, "sm_%d%d", major, minor);
  cu.device_name(out->name, (int)sizeof out->name, dev);
  out->multiprocessors = sms;
  out->l2_bytes = l2 > 0 ? l2 : 0;
  out->max_shared_bytes = optin > 48 * 1024 ? optin : 48 * 1024;
  out->matrix_units = (major >= 8 ? CKJIT_MATRIX_MMA_SYNC : 0u) |
                      (major == 9 && minor == 0 ? CKJIT_MATRIX_WGMMA : 0u);
  out->enter = cuda_enter;
  out->leave = cuda_leave;
  out->stream_context = cuda_stream_context;
  out->context_device = cuda_context_device;
  out->check_pointer = cuda_check_pointer;
  out->describe = cuda_describe;
  out->device_count = count;
  out->module_load = cuda_module_load;
  out->module_unload = cuda_module_unload;
  out->get_function = cuda_get_function;
  out->launch = cuda_launch;
  out->tensor_map_encode = cu.tensor_map_encode_tiled && major >= 9 ? cuda_tensor_map_encode : NULL;
  out->clusters = cu.launch_ex && major >= 9;
  out->mem_alloc = cuda_mem_alloc;
  out->mem_free = cuda_mem_free;
  out->mem_alloc_async = cuda_mem_alloc_async;
  out->mem_free_async = cuda_mem_free_async;
  out->mem_copy = cuda_mem_copy;
  out->mem_set = cuda_mem_set;
  out->synchronize = cuda_synchronize;
  out->close = cuda_close;
  return CKJIT_SUCCESS;
}
