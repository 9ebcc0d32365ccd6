/* AMD backend: hipRTC compiles to a code object, the HIP runtime loads and
 * launches it (hipModuleLoadData / hipModuleGetFunction /
 * hipModuleLaunchKernel).  Opened with dlopen; the few types used are
 * declared here.  hipDeviceProp_t changed layout between ROCm releases, so
 * it is never read by field offset (see hip_arch_name). */
#include "../base/buffer.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cache/comgr_policy.h"
#include "arch.h"
#include "backend.h"
#include "../base/error.h"
#include "library_path.h"
#include "../base/log.h"

typedef int hip_error;
typedef struct hiprtc_program *hiprtc_program;

static struct {
  int (*create)(hiprtc_program *, const char *, const char *, int, const char *const *,
                const char *const *);
  int (*compile)(hiprtc_program, int, const char *const *);
  int (*log_size)(hiprtc_program, size_t *);
  int (*log)(hiprtc_program, char *);
  int (*code_size)(hiprtc_program, size_t *);
  int (*code)(hiprtc_program, char *);
  int (*destroy)(hiprtc_program *);
  const char *(*error_string)(int);
} rtc;

static struct {
  hip_error (*runtime_version)(int *);
  hip_error (*init)(unsigned);
  hip_error (*device_count)(int *);
  hip_error (*set_device)(int);
  hip_error (*get_device)(int *);
  hip_error (*stream_get_device)(void *, int *);             /* optional (ROCm 6+) */
  hip_error (*pointer_get_attribute)(void *, int, const void *); /* optional */
  hip_error (*device_attribute)(int *, int, int);
  hip_error (*device_properties)(void *, int);
  hip_error (*module_load_data)(void **, const void *);
  hip_error (*module_unload)(void *);
  hip_error (*module_get_function)(void **, void *, const char *);
  hip_error (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                      void *, void **, void **);
  hip_error (*malloc_)(void **, size_t);
  hip_error (*free_)(void *);
  hip_error (*malloc_async)(void **, size_t, void *);
  hip_error (*free_async)(void *, void *);
  hip_error (*memcpy_)(void *, const void *, size_t, int);
  hip_error (*memset_)(void *, int, size_t);
  hip_error (*device_synchronize)(void);
  hip_error (*stream_synchronize)(void *);
  const char *(*error_name)(hip_error);
  const char *(*error_string)(hip_error);
} hip;

static void *hip_library;
static char hip_library_path[64];

static void *open_hip(void) {
  static const char *const names[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5",
                                      "libamdhip64.so.7", NULL};
  if (!hip_library)
    hip_library = ckjit__library_open_first(names, hip_library_path, sizeof hip_library_path);
  return hip_library;
}

static int hip_options(const ckjit_compiler *c, const char *arch, char opts[][96], int max) {
  (void)c;
  if (max < 3) return 0;
  snprintf(opts[0], 96, "--gpu-architecture=%s", arch);
  snprintf(opts[1], 96, "-std=c++17");
  snprintf(opts[2], 96, "-O3");
  return 3;
}

static pthread_once_t rtc_once = PTHREAD_ONCE_INIT;
static char hip_path[512], rtc_path[512]; /* rtc_path "" when hipRTC is inside libamdhip64 */
static char rtc_error[512];
static int hip_version; /* hipRuntimeGetVersion, e.g. 50221153 */

static void rtc_load(void) {
  ckjit__comgr_cache_policy(); /* before comgr reads its environment */
  void *h = dlopen(hip_path, RTLD_NOW | RTLD_LOCAL);
  void *r = rtc_path[0] ? dlopen(rtc_path, RTLD_NOW | RTLD_LOCAL) : h;
  if (!h || !r) {
    snprintf(rtc_error, sizeof rtc_error, "cannot load hipRTC: %.300s", dlerror());
    return;
  }
#define SYM(lib, table, field, name)                                                         \
  if (!(*(void **)&table.field = dlsym(lib, name))) {                                        \
    snprintf(rtc_error, sizeof rtc_error, "HIP library lacks %s", name);                     \
    return;                                                                                  \
  }
  SYM(r, rtc, create, "hiprtcCreateProgram");
  SYM(r, rtc, compile, "hiprtcCompileProgram");
  SYM(r, rtc, log_size, "hiprtcGetProgramLogSize");
  SYM(r, rtc, log, "hiprtcGetProgramLog");
  SYM(r, rtc, code_size, "hiprtcGetCodeSize");
  SYM(r, rtc, code, "hiprtcGetCode");
  SYM(r, rtc, destroy, "hiprtcDestroyProgram");
  SYM(r, rtc, error_string, "hiprtcGetErrorString");
  SYM(h, hip, runtime_version, "hipRuntimeGetVersion");
#undef SYM
  /* hiprtcVersion reports the compiler's own numbering (9.0 on HIP 5.2); the
   * HIP version is what decides which targets are safe. */
  hip.runtime_version(&hip_version);
}

static ckjit_status hiprtc_compile_locked(const ckjit_compile_input *in, ckjit_buffer *code,
                                          ckjit_buffer *log);

static ckjit_status hiprtc_compile(const ckjit_compiler *c, const ckjit_compile_input *in,
                                   ckjit_buffer *code, ckjit_buffer *log) {
  (void)c;
  pthread_once(&rtc_once, rtc_load);
  if (rtc_error[0]) return ckjit__fail(CKJIT_ERROR_BACKEND_UNAVAILABLE, "%s", rtc_error);
  /* The file name's version was a guess; the loaded runtime's is certain.
   * Checked again because a wrong guess would let hipRTC abort the process. */
  ckjit_status st = ckjit__arch_validate(in->arch, hip_version / 10000000, (hip_version / 100000) % 100);
  if (st) return st;
  /* hipRTC (comgr underneath) is not safe to call from several threads at
   * once in the ROCm releases we support: compiles are serialized. */
  static pthread_mutex_t rtc_lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&rtc_lock);
  st = hiprtc_compile_locked(in, code, log);
  pthread_mutex_unlock(&rtc_lock);
  return st;
}

static ckjit_status hiprtc_compile_locked(const ckjit_compile_input *in, ckjit_buffer *code,
                                          ckjit_buffer *log) {
  ckjit_status st = CKJIT_SUCCESS;
  hiprtc_program prog = NULL;
  int r = rtc.create(&prog, in->source, in->source_name, in->n_headers, in->header_sources,
                     in->header_names);
  if (r) return ckjit__fail(CKJIT_ERROR_COMPILE, "hiprtcCreateProgram: %s", rtc.error_string(r));
  int cr = rtc.compile(prog, in->n_options, in->options);
  size_t n = 0;
  /* hipRTC 5.2 may report a size for an empty log and not NUL-terminate it. */
  if (!rtc.log_size(prog, &n) && n > 1 && n < (64u << 20)) {
    char *text = calloc(1, n + 1);
    if (text && !rtc.log(prog, text)) {
      text[n] = '\0';
      ckjit__buf_append_str(log, text);
    }
    free(text);
  }
  if (cr) {
    st = ckjit__fail(CKJIT_ERROR_COMPILE, "hipRTC: %s", rtc.error_string(cr));
  } else if (rtc.code_size(prog, &n) || n == 0) {
    st = ckjit__fail(CKJIT_ERROR_COMPILE, "hipRTC produced no code object");
  } else {
    code->size = 0;
    char *bin = malloc(n);
    if (!bin || rtc.code(prog, bin) || ckjit__buf_append(code, bin, n))
      st = ckjit__fail(CKJIT_ERROR_OUT_OF_MEMORY, "hipRTC: cannot read the code object");
    free(bin);
  }
  rtc.destroy(&prog);
  return st;
}

static const char *const hip_names[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5",
                                        "libamdhip64.so.7", NULL};
static const char *const rocm_dirs[] = {"/opt/rocm/lib", "/opt/rocm/lib64", NULL};

ckjit_status ckjit__hip_compiler_find(ckjit_compiler *out) {
  static const char *const rtc_names[] = {"libhiprtc.so", "libhiprtc.so.6", "libhiprtc.so.7", NULL};
  memset(out, 0, sizeof *out);
  if (ckjit__find_library(hip_names, rocm_dirs, "CKJIT_HIP_LIBRARY", out->path, sizeof out->path))
    return ckjit__fail(CKJIT_ERROR_BACKEND_UNAVAILABLE,
                       "HIP runtime (libamdhip64.so) not found: install HIP (Debian: "
                       "libamdhip64-dev libhiprtc-builtins5) or set CKJIT_HIP_LIBRARY to compile "
                       "for AMD GPUs");
  ckjit__copy_str(hip_path, sizeof hip_path, out->path);
  /* hipRTC lives inside libamdhip64 up to ROCm 5, in libhiprtc from ROCm 6 on. */
  ckjit__library_version(out->path, &out->major, &out->minor);
  rtc_path[0] = '\0';
  if (out->major >= 6 &&
      ckjit__find_library(rtc_names, rocm_dirs, NULL, rtc_path, sizeof rtc_path))
    return ckjit__fail(CKJIT_ERROR_BACKEND_UNAVAILABLE, "hipRTC (libhiprtc.so) not found next to %s",
                       out->path);
  out->vendor = CKJIT_BACKEND_HIP;
  out->name = "hiprtc";
  char hip_id[200], rtc_id[200] = "";
  ckjit__library_identity(out->path, hip_id, sizeof hip_id);
  if (rtc_path[0]) ckjit__library_identity(rtc_path, rtc_id, sizeof rtc_id);
  snprintf(out->fingerprint, sizeof out->fingerprint, "hiprtc %.120s %.120s", hip_id, rtc_id);
  out->compile = hiprtc_compile;
  out->options = hip_options;
  return CKJIT_SUCCESS;
}

/* ---- HIP runtime ---------------------------------------------------------- */

static ckjit_status hip_fail(ckjit_status st, hip_error r, const char *what) {
  if (r == 2 /* hipErrorOutOfMemory */) st = CKJIT_ERROR_OUT_OF_MEMORY;
  return ckjit__fail(st, "%s failed: %s (%d): %s", what, hip.error_name ? hip.error_name(r) : "?", r,
                     hip.error_string ? hip.error_string(r) : "");
}

static void hip_describe(int ordinal, char *out, size_t len) {
  snprintf(out, len, "HIP device %d", ordinal);
}

/* A HIP "context" is its device: ordinal + 1, so that NULL stays "none". */
static void *device_context(int ordinal) { return (void *)(uintptr_t)(ordinal + 1); }

/* The default stream is the current device's.  Without hipStreamGetDevice
 * (before ROCm 6) a stream's device cannot be asked: HIP then runs work on
 * the current device, and so does ckjit. */
static ckjit_status hip_stream_context(void *stream, void **context) {
  int owner = -1;
  hip_error r;
  if ((uintptr_t)stream > 2 && hip.stream_get_device) {
    if ((r = hip.stream_get_device(stream, &owner)))
      return hip_fail(CKJIT_ERROR_INVALID_ARGUMENT, r, "hipStreamGetDevice");
  } else if ((r = hip.get_device(&owner))) {
    return hip_fail(CKJIT_ERROR_DEVICE, r, "hipGetDevice");
  }
  *context = device_context(owner);
  return CKJIT_SUCCESS;
}

static ckjit_status hip_context_device(void *context, int *ordinal, int *primary) {
  *ordinal = (int)((uintptr_t)context - 1);
  *primary = 1;
  return CKJIT_SUCCESS;
}

/* The HIP twin of cuda_enter: the caller's current device is switched for
 * the call only and switched back in hip_leave. */
static ckjit_status hip_enter(const ckjit_device *d, ckjit_device_scope *scope) {
  scope->pushed = 0;
  scope->previous = -1;
  int current = -1;
  hip_error r = hip.get_device(&current);
  if (r) return hip_fail(CKJIT_ERROR_DEVICE, r, "hipGetDevice");
  if (current == d->ordinal) return CKJIT_SUCCESS;
  if ((r = hip.set_device(d->ordinal))) return hip_fail(CKJIT_ERROR_DEVICE, r, "hipSetDevice");
  scope->previous = current;
  return CKJIT_SUCCESS;
}

static void hip_leave(const ckjit_device *d, const ckjit_device_scope *scope) {
  (void)d;
  if (scope->previous >= 0) hip.set_device(scope->previous);
}

static ckjit_status hip_check_pointer(const ckjit_device *d, const char *api, const char *name,
                                      const void *ptr) {
  int ordinal = -1, managed = 0;
  if (hip.pointer_get_attribute(&managed, 8 /* HIP_POINTER_ATTRIBUTE_IS_MANAGED */, ptr) ||
      managed || hip.pointer_get_attribute(&ordinal, 9 /* ..._DEVICE_ORDINAL */, ptr) ||
      ordinal < 0 || ordinal == d->ordinal)
    return CKJIT_SUCCESS;
  return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                     "%s: %s (%p) is memory of HIP device %d, but the call runs on HIP device %d "
                     "(%s), the device of its stream", api, name, ptr, ordinal, d->ordinal, d->name);
}

static void hip_close(ckjit_device *d) { (void)d; }

static ckjit_status hip_module_load(const ckjit_device *d, const void *code, size_t size,
                                    void **module) {
  (void)size;
  ckjit_device_scope scope;
  ckjit_status st = hip_enter(d, &scope);
  if (st) return st;
  hip_error r = hip.module_load_data(module, code);
  hip_leave(d, &scope);
  return r ? hip_fail(CKJIT_ERROR_LOAD, r, "hipModuleLoadData") : CKJIT_SUCCESS;
}

static void hip_module_unload(const ckjit_device *d, void *module) {
  ckjit_device_scope scope;
  if (hip_enter(d, &scope)) return;
  hip.module_unload(module);
  hip_leave(d, &scope);
}

static ckjit_status hip_get_function(const ckjit_device *d, void *module, const char *name,
                                     void **function) {
  (void)d;
  hip_error r = hip.module_get_function(function, module, name);
  return r ? hip_fail(CKJIT_ERROR_LOAD, r, "hipModuleGetFunction") : CKJIT_SUCCESS;
}

static ckjit_status hip_launch(void *function, const unsigned grid[3], const unsigned block[3],
                               unsigned cluster, unsigned shared_bytes, void *stream, void **args) {
  if (cluster > 1) /* never planned: device.clusters is 0 here */
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "hipModuleLaunchKernel: HIP has no block clusters");
  hip_error r = hip.launch(function, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                           shared_bytes, stream, args, NULL);
  return r ? hip_fail(CKJIT_ERROR_LAUNCH, r, "hipModuleLaunchKernel") : CKJIT_SUCCESS;
}

static ckjit_status hip_mem_alloc(void **ptr, size_t bytes) {
  hip_error r = hip.malloc_(ptr, bytes);
  return r ? hip_fail(CKJIT_ERROR_DEVICE, r, "hipMalloc") : CKJIT_SUCCESS;
}

static ckjit_status hip_mem_free(void *ptr) {
  hip_error r = hip.free_(ptr);
  return r ? hip_fail(CKJIT_ERROR_DEVICE, r, "hipFree") : CKJIT_SUCCESS;
}

static ckjit_status hip_mem_alloc_async(ckjit_device *d, void **ptr, size_t bytes, void *stream) {
  (void)d;
  if (!hip.malloc_async)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "this HIP runtime lacks hipMallocAsync (needs ROCm "
                       "5.3+), which split reductions use for scratch memory");
  hip_error r = hip.malloc_async(ptr, bytes, stream);
  return r ? hip_fail(CKJIT_ERROR_DEVICE, r, "hipMallocAsync") : CKJIT_SUCCESS;
}

static ckjit_status hip_mem_free_async(void *ptr, void *stream) {
  hip_error r = hip.free_async(ptr, stream);
  return r ? hip_fail(CKJIT_ERROR_DEVICE, r, "hipFreeAsync") : CKJIT_SUCCESS;
}

static ckjit_status hip_mem_copy(void *dst, const void *src, size_t bytes, ckjit_copy_kind kind) {
  hip_error r = hip.memcpy_(dst, src, bytes, (int)kind); /* same values as hipMemcpyKind */
  return r ? hip_fail(CKJIT_ERROR_DEVICE, r, "hipMemcpy") : CKJIT_SUCCESS;
}

static ckjit_status hip_mem_set(void *ptr, int value, size_t bytes) {
  hip_error r = hip.memset_(ptr, value, bytes);
  return r ? hip_fail(CKJIT_ERROR_DEVICE, r, "hipMemset") : CKJIT_SUCCESS;
}

static ckjit_status hip_synchronize(void *stream) {
  hip_error r = stream ? hip.stream_synchronize(stream) : hip.device_synchronize();
  return r ? hip_fail(CKJIT_ERROR_DEVICE, r, "synchronize") : CKJIT_SUCCESS;
}

/* Finds the full target id ("gfx90a:sramecc+:xnack-") in a device-properties
 * block without relying on its layout: the block is oversized and the
 * string is recognised by its syntax. */
static void hip_arch_name(const unsigned char *props, size_t size, char *out, size_t len) {
  out[0] = '\0';
  for (size_t i = 0; i + 4 < size; i++) {
    if (memcmp(props + i, "gfx", 3) || (i && props[i - 1])) continue;
    size_t n = 0;
    while (i + n < size && props[i + n] >= 0x21 && props[i + n] < 0x7f && n < len - 1) n++;
    memcpy(out, props + i, n);
    out[n] = '\0';
    if (ckjit__arch_vendor(out) == CKJIT_BACKEND_HIP) return;
    out[0] = '\0';
  }
}

ckjit_status ckjit__hip_device_open(int ordinal, ckjit_device *out) {
  void *h = open_hip();
  if (!h)
    return ckjit__fail(CKJIT_ERROR_BACKEND_UNAVAILABLE,
                       "HIP runtime (libamdhip64.so) not found: no AMD GPU stack on this host");
  /* The symbols are loaded by the first open that succeeds; later opens
   * (each GPU is opened on first use) leave them alone, so launches on
   * other threads never see them written. */
  static int hip_loaded;
  if (!hip_loaded) {
#define SYM(field, name)                                                                     \
    if (!(*(void **)&hip.field = dlsym(h, name)))                                              \
      return ckjit__fail(CKJIT_ERROR_BACKEND_UNAVAILABLE, "HIP runtime lacks %s", name);
    SYM(init, "hipInit");
    SYM(device_count, "hipGetDeviceCount");
    SYM(set_device, "hipSetDevice");
    SYM(get_device, "hipGetDevice");
    SYM(device_attribute, "hipDeviceGetAttribute");
    SYM(module_load_data, "hipModuleLoadData");
    SYM(module_unload, "hipModuleUnload");
    SYM(module_get_function, "hipModuleGetFunction");
    SYM(launch, "hipModuleLaunchKernel");
    SYM(malloc_, "hipMalloc");
    SYM(free_, "hipFree");
    SYM(memcpy_, "hipMemcpy");
    SYM(memset_, "hipMemset");
    SYM(device_synchronize, "hipDeviceSynchronize");
    SYM(stream_synchronize, "hipStreamSynchronize");
    SYM(error_name, "hipGetErrorName");
    SYM(error_string, "hipGetErrorString");
#undef SYM
    /* Optional: only the split (multi-block-per-row) reductions need them. */
    *(void **)&hip.stream_get_device = dlsym(h, "hipStreamGetDevice");
    *(void **)&hip.pointer_get_attribute = dlsym(h, "hipPointerGetAttribute");
    *(void **)&hip.malloc_async = dlsym(h, "hipMallocAsync");
    *(void **)&hip.free_async = dlsym(h, "hipFreeAsync");
    if (!hip.free_async) hip.malloc_async = NULL;
    if (!(*(void **)&hip.device_properties = dlsym(h, "hipGetDevicePropertiesR0600")) &&
        !(*(void **)&hip.device_properties = dlsym(h, "hipGetDeviceProperties")))
      return ckjit__fail(CKJIT_ERROR_BACKEND_UNAVAILABLE, "HIP runtime lacks hipGetDeviceProperties");
    hip_loaded = 1;
  }
  hip_error r = hip.init(0);
  int count = 0;
  if (r || hip.device_count(&count) || count == 0)
    return ckjit__fail(CKJIT_ERROR_NO_DEVICE, "HIP runtime (%s) reports no AMD GPU%s%s",
                       hip_library_path, r ? ": " : "", r ? hip.error_string(r) : "");
  if (ordinal < 0 || ordinal >= count)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "device %d requested but only %d present",
                       ordinal, count);
  memset(out, 0, sizeof *out);
  out->vendor = CKJIT_BACKEND_HIP;
  out->ordinal = ordinal;
  /* Far larger than any hipDeviceProp_t; the caller serializes opens. */
  static unsigned char props[16384];
  memset(props, 0, sizeof props);
  if ((r = hip.device_properties(props, ordinal)))
    return hip_fail(CKJIT_ERROR_DEVICE, r, "hipGetDeviceProperties");
  snprintf(out->name, sizeof out->name, "%.127s", (const char *)props); /* name is the first field in every ABI */
  hip_arch_name(props, sizeof props, out->arch, sizeof out->arch);
  if (!out->arch[0])
    return ckjit__fail(CKJIT_ERROR_DEVICE, "cannot determine the arch of HIP device %d", ordinal);
  int sms = 0;
  hip.device_attribute(&sms, 63 /* hipDeviceAttributeMultiprocessorCount */, ordinal);
  out->multiprocessors = sms > 0 && sms < 4096 ? sms : 0;
  out->max_shared_bytes = 64 * 1024; /* LDS per workgroup on gfx9 and gfx10/11 */
  char base[64];
  ckjit__arch_base(out->arch, base, sizeof base);
  const int gfx908 = !strcmp(base, "gfx908"), later = !strcmp(base, "gfx90a") || !strncmp(base, "gfx94", 5);
  out->matrix_units = (gfx908 || later ? CKJIT_MATRIX_MFMA_F16 : 0u) | (later ? CKJIT_MATRIX_MFMA_BF16 : 0u);
  out->enter = hip_enter;
  out->leave = hip_leave;
  out->context = device_context(ordinal);
  out->stream_context = hip_stream_context;
  out->context_device = hip_context_device;
  out->check_pointer = hip.pointer_get_attribute ? hip_check_pointer : NULL;
  out->describe = hip_describe;
  out->device_count = count;
  out->module_load = hip_module_load;
  out->module_unload = hip_module_unload;
  out->get_function = hip_get_function;
  out->launch = hip_launch;
  out->mem_alloc = hip_mem_alloc;
  out->mem_free = hip_mem_free;
  out->mem_alloc_async = hip_mem_alloc_async;
  out->mem_free_async = hip_mem_free_async;
  out->mem_copy = hip_mem_copy;
  out->mem_set = hip_mem_set;
  out->synchronize = hip_synchronize;
  out->close = hip_close;
  return CKJIT_SUCCESS;
}
